"""Progress bars (tqdm) and the notice shown while numba compiles, for every package.

``progress=None`` (the default of every public function that takes it) means "on if
standard error is a terminal": bars never reach log files or CI output unless asked for.
``progress=True`` on a stream that is not a terminal prints a plain line at most every
``_LOG_INTERVAL`` seconds instead of carriage-return updates (which make one giant line in
a log file). Progress never changes a result.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

__all__ = ["progress_enabled", "progress_bar", "compile_notice"]

_LOG_INTERVAL = 10.0   # seconds between lines when the stream is not a terminal
_notice_lock = threading.Lock()
_notice_shown = False
COMPILE_NOTICE = ("austerity: compiling numba kernels on first use (a few seconds; "
                  "cached on disk for later runs)...")


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_enabled(progress, stream=None) -> bool:
    """Resolve a ``progress`` argument: None means "stderr is a terminal"."""
    if progress is None:
        return _isatty(sys.stderr if stream is None else stream)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    return progress


class _LineStream:
    """A file for tqdm that turns its carriage-return updates into whole lines."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        text = text.replace("\r", "").strip()
        if text:
            self.stream.write(text + "\n")

    def flush(self):
        self.stream.flush()


def progress_bar(total=None, *, desc: str, progress=None, unit: str = "it", stream=None):
    """A tqdm bar, disabled unless :func:`progress_enabled`; use it as a context manager.

    Examples
    --------
    >>> with progress_bar(3, desc="steps", progress=False) as bar:
    ...     for _ in range(3):
    ...         bar.update()
    >>> bar.disable
    True
    """
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    enabled = progress_enabled(progress, stream)
    if enabled and not _isatty(stream):
        return tqdm(total=total, desc=desc, unit=unit, file=_LineStream(stream),
                    mininterval=_LOG_INTERVAL, ncols=100, ascii=True)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=not enabled,
                dynamic_ncols=True, leave=True)



def progress_callback(progress, total, *, desc: str, unit: str = "it"):
    """``(callback(done, total) or None, close)`` for a ``progress`` argument that may also be
    a callable: a callable is used as it is; otherwise a :func:`progress_bar` is advanced to
    ``done`` (None when the bar is off).

    Examples
    --------
    >>> callback, close = progress_callback(False, 10, desc="cells")
    >>> callback is None
    True
    >>> close()
    """
    if callable(progress):
        return progress, lambda: None
    bar = progress_bar(total, desc=desc, progress=progress, unit=unit)
    if bar.disable:
        return None, bar.close
    return (lambda done, _total: bar.update(done - bar.n)), bar.close


@contextmanager
def compile_notice(enabled: bool = True, stream=None):
    """Print one line, once per process, when numba starts compiling inside this block.

    A kernel loaded from numba's on-disk cache is not compiled and prints nothing; uses
    numba's event API (``numba.core.event``, listener on ``"numba:compile"``).
    """
    if not enabled or _notice_shown:
        yield
        return
    from numba.core import event

    out = sys.stderr if stream is None else stream

    class _Notice(event.Listener):
        def on_start(self, ev):
            global _notice_shown
            with _notice_lock:
                if _notice_shown:
                    return
                _notice_shown = True
            from tqdm import tqdm

            tqdm.write(COMPILE_NOTICE, file=out)

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _Notice()):
        yield
