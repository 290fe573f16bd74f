"""Warning filters changed for a block of code without racing a compiling thread.

``warnings.catch_warnings`` saves the process-wide filters (and ``showwarning``) on entry and
puts them back on exit (Python < 3.14 has no per-thread warning state). numba compiles inside
blocks of its own, under its global compiler lock. A thread that compiles beside ours (fit's
bias-monitor table on a cold cache) could enter before our exit and leave after it, putting
back *our* temporary filters for good: every later warning of the process would then be
ignored or recorded into a list nobody reads. :func:`caught_warnings` takes numba's compiler
lock while it enters, sets its filter and exits, so each of numba's blocks lies wholly inside
or wholly outside ours, and both end as they began.
"""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager

try:   # numba's own lock, held for a whole compilation (an RLock: our thread may compile)
    from numba.core.compiler_lock import global_compiler_lock as _LOCK
except ImportError:   # pragma: no cover - numba is a dependency; kept importable without
    _LOCK = threading.RLock()

__all__ = ["caught_warnings"]


@contextmanager
def caught_warnings(action=None, category=Warning, *, record=False, message=""):
    """``warnings.catch_warnings(record=record)`` with ``warnings.filterwarnings(action,
    message, category)`` inside (when ``action`` is given), entered and left under numba's
    compiler lock (module notes).

    >>> import warnings
    >>> with caught_warnings("ignore", UserWarning):
    ...     warnings.warn("not shown", UserWarning)
    >>> with caught_warnings("always", UserWarning, record=True) as seen:
    ...     warnings.warn("kept", UserWarning)
    >>> [str(w.message) for w in seen]
    ['kept']
    """
    block = warnings.catch_warnings(record=record)
    with _LOCK:
        got = block.__enter__()
        if action is not None:
            warnings.filterwarnings(action, message=message, category=category)
    try:
        yield got
    finally:
        with _LOCK:
            block.__exit__(None, None, None)
