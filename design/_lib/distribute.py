"""Full-data passes on a cluster: a map over row ranges whose results merge in range order.

Every O(N) pass of the toolkit (the control variates' sums, the mode's Newton steps, the
trial-pair statistics, the log posterior, the l_i of the CLT check) is a sum of per-chunk
results over fixed chunks of rows, merged in chunk order. :func:`map_ranges` runs that map
on an *executor* instead of the two local threads: the rows are cut into ranges of about
``RANGE_ROWS`` rows (a whole number of chunks, so a range's chunks are the local pass's
chunks), each range is one task ``task(recipe(), *args)`` where ``recipe`` is the model's
small picklable ``block_recipe(start, stop)`` (it rebuilds the model over those rows on the
worker, reopening its store), and the client merges the tasks' results in range order. A
task returns its per-chunk results, so the merged result is the local pass's, bit for bit.

The executor is a ``dask.distributed.Client`` (recognised by its methods, without importing
dask: ``submit``, ``cancel``, ``scheduler_info``), the ``concurrent.futures`` executor of one
(``Client.get_executor()``, run through its client so that failed tasks are retried), or any
``concurrent.futures.Executor``. What a pass promises on one:

* results in range order, whatever the order the tasks finish in; a check that every range
  came back once, with the rows asked for (nothing is dropped silently);
* at most ``window`` ranges submitted and not yet merged (bounded memory on the client);
* a task that fails is retried by Dask (``retries``; a worker that dies is replaced by its
  nanny and its tasks rescheduled), and otherwise the error names the range of rows;
* Ctrl-C cancels every outstanding task and returns within a fraction of a second (the
  client polls its futures; a task already running in a thread or process pool of this
  machine finishes in the background, a Dask task is cancelled on its worker);
* a closed executor is refused (``ValueError`` naming ``executor``) before any work.
"""

from __future__ import annotations

import itertools
import time
import uuid

from .progress import progress_bar

__all__ = ["RANGE_ROWS", "Cluster", "as_cluster", "map_ranges", "per_chunk", "recipe_of", "range_bounds"]

#: Rows per task (rounded up to a whole number of the pass's chunks): about 10^6 rows, so
#: that a task runs for a good fraction of a second and a pass over 10^10 rows is 10^4 tasks.
RANGE_ROWS = 1 << 20
#: Retries of a failed task on a Dask cluster (its worker died, or the task raised).
RETRIES = 2
#: Seconds between two looks at the outstanding futures (and so the latency of Ctrl-C).
_POLL = 0.02


class Cluster:
    """An executor resolved once: how to submit a task and cancel futures on it.

    Build it with :func:`as_cluster`; ``workers`` is the number of workers seen when it was
    resolved (it sizes the window of outstanding tasks).
    """

    def __init__(self, submit, cancel, workers: int, kind: str):
        self._submit, self._cancel, self.workers, self.kind = submit, cancel, workers, kind

    def submit(self, fn, *args, key=None):
        return self._submit(fn, args, key)

    def cancel(self, futures) -> None:
        self._cancel(futures)


def _is_dask_client(obj) -> bool:
    return all(callable(getattr(obj, name, None))
               for name in ("submit", "cancel", "scheduler_info", "get_executor"))


def _closed(name):
    return ValueError(f"{name} is closed (shut down); pass an open executor (a running "
                      "dask.distributed.Client, its get_executor(), or a "
                      "concurrent.futures executor that was not shut down), or None for the "
                      "local pass")


def as_cluster(executor, *, name: str = "executor", retries: int = RETRIES) -> Cluster | None:
    """Resolve ``executor`` (None, a Dask ``Client``, its executor, or any
    ``concurrent.futures.Executor``) into a :class:`Cluster`; None stays None.

    Raises ``ValueError`` naming ``name`` for a closed client or executor, ``TypeError`` for
    an object that has no ``submit``.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> pool = ThreadPoolExecutor(2)
    >>> as_cluster(pool).kind
    'executor'
    >>> pool.shutdown()
    >>> as_cluster(pool)
    Traceback (most recent call last):
    ...
    ValueError: executor is closed (shut down); pass an open executor (a running dask.distributed.Client, its get_executor(), or a concurrent.futures executor that was not shut down), or None for the local pass
    """
    if executor is None or isinstance(executor, Cluster):
        return executor
    client = executor if _is_dask_client(executor) else None
    inner = getattr(executor, "_client", None)        # Client.get_executor(): its client
    if client is None and inner is not None and _is_dask_client(inner):
        if getattr(executor, "_shutdown", False):
            raise _closed(name)
        client = inner
    if client is not None:
        if str(getattr(client, "status", "running")) in ("closed", "closing", "failed"):
            raise _closed(name)
        try:
            workers = max(1, len(client.scheduler_info().get("workers", {})))
        except Exception as exc:                    # a client whose scheduler is gone
            raise ValueError(f"{name} cannot reach its scheduler ({exc}); pass a running "
                             "dask.distributed.Client") from None
        token = uuid.uuid4().hex[:8]

        def submit(fn, args, key):
            return client.submit(fn, *args, pure=False, retries=retries,
                                 key=None if key is None else f"austerity-{key}-{token}")

        def cancel(futures):
            if futures:
                client.cancel(list(futures))

        return Cluster(submit, cancel, workers, "dask")
    if not callable(getattr(executor, "submit", None)):
        raise TypeError(f"{name} must be a dask.distributed.Client, its get_executor(), or a "
                        f"concurrent.futures.Executor (anything with submit(fn, *args)), got "
                        f"{type(executor).__name__}")
    if getattr(executor, "_shutdown", False) or getattr(executor, "_shutdown_thread", False) \
            or getattr(executor, "_broken", False):
        raise _closed(name)

    def submit(fn, args, key):
        try:
            return executor.submit(fn, *args)
        except RuntimeError as exc:                 # "cannot schedule new futures after shutdown"
            raise _closed(name) from exc

    def cancel(futures):
        for f in futures:
            f.cancel()

    workers = int(getattr(executor, "_max_workers", 0) or 2)
    return Cluster(submit, cancel, workers, "executor")


def recipe_of(model, name: str = "executor"):
    """``model.block_recipe`` (``(start, stop) -> zero-argument callable`` rebuilding the model
    over those rows), or a ``TypeError`` saying that ``name`` needs it."""
    recipe = getattr(model, "block_recipe", None)
    if not callable(recipe):
        raise TypeError(f"{name}= runs the pass on other processes, which rebuild the model "
                        f"over their rows with model.block_recipe(start, stop); "
                        f"{type(model).__name__} has none (the built-in models have it): "
                        f"leave {name}=None for the local pass")
    return recipe


def range_bounds(N: int, chunk: int, range_rows: int | None = None) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``0..N`` in ranges of a whole number of ``chunk``-row
    chunks, about ``range_rows`` (default :data:`RANGE_ROWS`) rows each.

    >>> range_bounds(10, 3, 5)
    [(0, 6), (6, 10)]
    """
    range_rows = RANGE_ROWS if range_rows is None else int(range_rows)
    if range_rows < 1:
        raise ValueError(f"range_rows must be a positive integer, got {range_rows}")
    step = chunk * max(1, -(-range_rows // chunk))
    return [(s, min(s + step, N)) for s in range(0, N, step)]


def per_chunk(block, fn, args, chunk):
    """``[fn(block, *args, s, min(s + chunk, block.N)) for each chunk]``: a task that returns a
    range's per-chunk results, which the client merges in chunk order as a local pass would.

    >>> class Rows:
    ...     N = 5
    >>> per_chunk(Rows(), lambda m, a, b: b - a, (), 2)
    [2, 2, 1]
    """
    return [fn(block, *args, s, min(s + chunk, block.N)) for s in range(0, block.N, chunk)]


def _run_range(recipe, task, args, start, stop):
    """On the worker: rebuild the rows' model, run the task; tagged with its rows."""
    return start, stop, task(recipe(), *args)


def _reraise(exc, desc, start, stop, N):
    where = f"{desc}: the task on rows [{start}, {stop}) of {N}"
    if isinstance(exc, (ValueError, TypeError)):
        try:
            new = type(exc)(f"{where} failed: {exc}")
        except Exception:
            new = None
        if new is not None:
            raise new from exc
    raise RuntimeError(f"{where} failed ({type(exc).__name__}: {exc}); nothing of this pass "
                       "was kept") from exc


def map_ranges(cluster: Cluster, recipe_of, task, args, merge, *, N: int, chunk: int,
               range_rows: int | None = None, progress=None, desc: str = "pass",
               window: int | None = None) -> int:
    """Run ``task(recipe_of(start, stop)(), *args)`` for every range of rows on ``cluster``
    and call ``merge(start, stop, result)`` in range order; return the number of ranges.

    ``recipe_of(start, stop)`` is the model's ``block_recipe`` (a small picklable
    zero-argument callable that rebuilds the model over rows ``[start, stop)``); ranges are
    :func:`range_bounds`. ``task`` and ``args`` must pickle (a module-level function). See
    the module's docstring for what is promised on failures and Ctrl-C.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import numpy as np
    >>> x = np.arange(10.0)
    >>> total = []
    >>> with ThreadPoolExecutor(2) as pool:
    ...     n = map_ranges(as_cluster(pool), lambda a, b: (lambda: x[a:b]), np.sum, (),
    ...                    lambda a, b, s: total.append(float(s)), N=10, chunk=2,
    ...                    range_rows=4)
    >>> n, total
    (3, [6.0, 22.0, 17.0])
    """
    bounds = range_bounds(N, chunk, range_rows)
    count = len(bounds)
    window = max(4, 3 * cluster.workers) if window is None else max(1, int(window))
    tag = f"{desc.replace(' ', '-')}-{next(_serial)}"
    pending: dict[int, object] = {}     # range index -> future, submitted and not yet merged
    results: dict[int, tuple] = {}
    merged = submitted = 0
    with progress_bar(count, desc=desc, unit="range", progress=progress) as bar:
        try:
            while merged < count:
                while submitted < count and submitted - merged < window:
                    a, b = bounds[submitted]
                    pending[submitted] = cluster.submit(_run_range, recipe_of(a, b), task,
                                                        args, a, b, key=f"{tag}-{a}")
                    submitted += 1
                progressed = False
                for k in sorted(pending):
                    if k in results or not pending[k].done():
                        continue
                    a, b = bounds[k]
                    try:
                        got = pending[k].result()
                    except Exception as exc:
                        _reraise(exc, desc, a, b, N)
                    if not (isinstance(got, tuple) and len(got) == 3 and got[:2] == (a, b)):
                        raise RuntimeError(f"{desc}: the task on rows [{a}, {b}) of {N} "
                                           f"returned the rows {got[:2] if isinstance(got, tuple) else got!r}")
                    results[k] = got[2]
                while merged in results:
                    a, b = bounds[merged]
                    merge(a, b, results.pop(merged))
                    del pending[merged]
                    merged += 1
                    progressed = True
                    bar.update(1)
                if not progressed:
                    time.sleep(_POLL)
        except BaseException:
            cluster.cancel(list(pending.values()))     # release finished ones too
            raise
    if merged != count or pending or results:       # every range merged exactly once
        raise RuntimeError(f"{desc}: {count - merged} of {count} row ranges did not come back")
    return count


_serial = itertools.count()
