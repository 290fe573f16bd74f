"""Full-data passes on every core: compiled chunk kernels run on a thread pool.

A pass over all N rows (the exact test's l_i, a full gradient, a full log-likelihood) is cut
into fixed chunks of rows; a compiled kernel ``kernel(*args, c0, c1)`` handles chunks
``c0 <= c < c1`` and writes one result per chunk (a sum, a mean and M2) into arrays the
caller owns. The kernels release the GIL, so :func:`run_chunks` runs blocks of chunks on
:data:`~design._lib.jit.PASS_THREADS` Python threads, and the caller combines the per-chunk
results *in chunk order*: the result does not depend on the number of threads or on their
timing (bit-identical to a one-thread pass).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager

from .interrupts import HeldInterrupt
from .jit import PASS_THREADS

__all__ = ["n_chunks", "one_blas_thread", "run_chunks"]

#: Blocks of chunks handed to the pool per thread (small blocks balance the load when
#: another process holds a core).
_BLOCKS_PER_THREAD = 4

#: Seconds between the looks for a Ctrl-C while a pass waits for its blocks.
_POLL_SECONDS = 0.02

#: :func:`one_blas_thread`'s blocks open in any thread, and the limit they hold.
_blas_lock = threading.Lock()
_blas_depth = 0
_blas_limits = None

#: The passes' thread pool, the process it was made in, and the lock its creation takes.
_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()


@contextmanager
def one_blas_thread():
    """Run the block with NumPy's and SciPy's BLAS (OpenBLAS, MKL, ...) on one thread each,
    their thread counts restored after (``threadpoolctl.threadpool_limits``).

    The toolkit parallelises over rows and over design cells on threads of its own
    (:func:`run_chunks`, ``design.optimize``'s workers) that keep every core busy; a BLAS
    call made meanwhile wakes a pool of BLAS threads that wait for a core. Its matrices are
    small (d x d, or a few hundred by a few hundred in the design's integrals), where one
    BLAS thread is as fast alone and much faster beside our threads: a 10 x 840 by 840 x 211
    product took 0.14 s with OpenBLAS's threads on a loaded 2-core machine and 0.0004 s on
    one, and ``fit``'s design step at N = 10^6 about 0.1-0.15 s less (quiet machine).
    SciPy's BLAS is loaded first (numba's ``np.dot`` calls it) so that it is limited too.
    The results are those of a BLAS thread count of one (for these products, the same bits).
    The limit is process-wide (BLAS has no per-thread count): other threads of the program
    also call BLAS on one thread while any block is open; blocks open in several threads
    at once restore the counts when the last one closes.
    """
    global _blas_depth, _blas_limits
    import scipy.linalg  # noqa: F401 -- loads SciPy's BLAS, so the limit reaches it
    from threadpoolctl import threadpool_limits

    with _blas_lock:                # the limit is process-wide: the outermost block of any
        if _blas_depth == 0:        # thread sets it, the last to leave restores it
            _blas_limits = threadpool_limits(limits=1, user_api="blas")
        _blas_depth += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_depth -= 1
            if _blas_depth == 0:
                _blas_limits.restore_original_limits()
                _blas_limits = None


def n_chunks(N: int, chunk: int) -> int:
    """Number of chunks of ``chunk`` rows covering ``N`` rows."""
    return -(-N // chunk)


def _get_pool() -> ThreadPoolExecutor:
    """The module's pool (a new one in a forked child, whose copy has no threads)."""
    global _pool, _pool_pid
    with _pool_lock:        # passes start from several threads (the exact pass's blocks)
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=PASS_THREADS,
                                       thread_name_prefix="austerity-pass")
            _pool_pid = os.getpid()
        return _pool


#: Set in the pool's threads while they run a block (:func:`run_chunks`).
_on_pool = threading.local()


def _on_pool_run(kernel, *args):
    _on_pool.active = True
    try:
        kernel(*args)
    finally:
        _on_pool.active = False


def run_chunks(kernel, count: int, *args, threads: int | None = None) -> None:
    """Run ``kernel(*args, c0, c1)`` over chunks ``0..count-1`` on ``threads`` threads.

    ``threads`` defaults to :data:`PASS_THREADS`; with one thread (or one chunk), or when
    called from a block already running on the pool (a kernel that runs a pass), the kernel
    runs in the calling thread. The first exception raised by a block is re-raised. A Ctrl-C
    in the main thread is held while the pool is used and raised as ``KeyboardInterrupt``
    within :data:`_POLL_SECONDS` (the blocks not yet started are not run).

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros(10)
    >>> def fill(out, c0, c1):
    ...     out[c0:c1] = np.arange(c0, c1)
    >>> run_chunks(fill, 10, out, threads=2)
    >>> out.tolist() == list(range(10))
    True
    """
    threads = PASS_THREADS if threads is None else int(threads)
    if threads <= 1 or count <= 1 or getattr(_on_pool, "active", False):
        kernel(*args, 0, count)     # on the pool, waiting for its own blocks could deadlock
        return
    step = max(1, -(-count // (threads * _BLOCKS_PER_THREAD)))
    # A Ctrl-C is held while the pool is used and acted on at the next poll: raised as it
    # came, it could land inside the pool's own bookkeeping (between the start of a pool
    # thread and its registration for the interpreter's exit, which then waited for that
    # thread for ever; or with a future's lock taken and never released).
    with HeldInterrupt() as held:
        pool = _get_pool()
        futures = [pool.submit(_on_pool_run, kernel, *args, c0, min(c0 + step, count))
                   for c0 in range(0, count, step)]
        try:
            waiting = set(futures)
            while waiting and not held.pending:
                done, waiting = wait(waiting, timeout=_POLL_SECONDS,
                                     return_when=FIRST_EXCEPTION)
                if any(f.exception() is not None for f in done):
                    break
        finally:    # after a Ctrl-C (or a failed block) the blocks not started are not run
            for future in futures:
                future.cancel()
    if held.pending:
        raise KeyboardInterrupt
    for future in futures:
        if future.done() and not future.cancelled():
            future.result()         # the first exception raised by a block, in block order
