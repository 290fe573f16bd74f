"""design._lib.warnstate.caught_warnings: a block's warning filters never outlive it when a
thread compiling numba code (which enters ``catch_warnings`` blocks of its own, holding
numba's compiler lock) enters inside our block and leaves after it."""

import threading
import warnings

from numba.core.compiler_lock import global_compiler_lock

from design._lib.warnstate import caught_warnings


def _compiler_like(entered, ours_left):
    """What numba's type inference does: a catch_warnings block under the compiler lock; it
    stays in its block until our block has left (or a second has passed)."""
    with global_compiler_lock:
        block = warnings.catch_warnings(record=True)
        block.__enter__()
        entered.set()
        ours_left.wait(timeout=1.0)
        block.__exit__(None, None, None)


def test_filters_end_as_they_began_when_a_compiling_thread_straddles_our_exit():
    before_filters, before_show = list(warnings.filters), warnings.showwarning
    entered, ours_left = threading.Event(), threading.Event()
    thread = threading.Thread(target=_compiler_like, args=(entered, ours_left))
    with caught_warnings("ignore", UserWarning):
        thread.start()
        assert entered.wait(timeout=5.0)
    ours_left.set()
    thread.join()
    # plain warnings.catch_warnings leaves the thread's copy of our "ignore" filter installed
    # here, for the rest of the process
    assert warnings.filters == before_filters
    assert warnings.showwarning is before_show


def test_record_keeps_the_warnings_of_the_block():
    with caught_warnings("always", UserWarning, record=True) as seen:
        warnings.warn("one", UserWarning)
    assert [str(w.message) for w in seen] == ["one"]
