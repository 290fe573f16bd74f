"""Ctrl-C around compiled code and around work that must not be cut in half.

A compiled (numba) function that returns an array boxes it by calling back into Python; a
Ctrl-C pending at that moment raises its ``KeyboardInterrupt`` inside the callback, and the
call comes out as ``SystemError: CPUDispatcher(...) returned a result with an exception set``
caused by the interrupt. :func:`interrupt_as_keyboard` turns that back into the
``KeyboardInterrupt`` it is. (Kernels that run long return nothing, or scalars, and are
called in chunks, so that a Ctrl-C is seen between chunks within a fraction of a second.)

:class:`HeldInterrupt` holds a Ctrl-C while a short piece of work that must finish runs
(assembling a chain's records from the arrays its loop filled), and records it instead, so
that the caller can act on it afterwards (return the chain with a warning).
"""

from __future__ import annotations

import functools
import signal
import threading
from contextlib import contextmanager

__all__ = ["HeldInterrupt", "caused_by_interrupt", "interrupt_as_keyboard"]


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``SystemError`` whose cause (or its cause's cause...) is a
    ``KeyboardInterrupt``: a Ctrl-C that reached numba's boxing of a returned array.

    >>> try:
    ...     raise SystemError("returned a result with an exception set") from KeyboardInterrupt()
    ... except SystemError as exc:
    ...     caused_by_interrupt(exc)
    True
    """
    seen = 0
    while isinstance(exc, SystemError) and seen < 16:
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
        seen += 1
    return isinstance(exc, KeyboardInterrupt) and seen > 0


@contextmanager
def _converting():
    try:
        yield
    except SystemError as exc:
        if caused_by_interrupt(exc):
            raise KeyboardInterrupt from None
        raise


def interrupt_as_keyboard(func=None):
    """A context manager (``with interrupt_as_keyboard():``) or a decorator that re-raises a
    ``SystemError`` caused by a Ctrl-C (see :func:`caused_by_interrupt`) as a plain
    ``KeyboardInterrupt``; every other exception passes unchanged.

    >>> @interrupt_as_keyboard
    ... def boxed():
    ...     raise SystemError("returned a result with an exception set") from KeyboardInterrupt()
    >>> try:
    ...     boxed()
    ... except KeyboardInterrupt:
    ...     print("KeyboardInterrupt")
    KeyboardInterrupt
    """
    if func is None:
        return _converting()

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _converting():
            return func(*args, **kwargs)
    return wrapper


class HeldInterrupt:
    """``with HeldInterrupt() as held:`` holds Ctrl-C (SIGINT) for the block; ``held.pending``
    says afterwards whether one came.

    Only in the main thread and while SIGINT has Python's default handler (the one that raises
    ``KeyboardInterrupt``) or a handler that takes part: one with a ``take`` attribute, a
    function ``take()`` that notes a Ctrl-C with that handler's owner and says whether to act
    on it (a process pool worker's, which acts on its first Ctrl-C and ignores the copies
    after it). Otherwise (a worker thread, which never receives signals, or a handler the
    user installed) the block runs unchanged. Keep the block short: the user's Ctrl-C waits
    for it. With ``second_raises=True`` a second Ctrl-C (one ``take`` acts on) raises
    ``KeyboardInterrupt`` at once (the block then checks ``held.pending`` at safe points and
    stops there on the first).

    >>> with HeldInterrupt() as held:
    ...     pass
    >>> held.pending
    False
    """

    def __init__(self, *, second_raises=False):
        self.pending = False
        self.second_raises = second_raises
        self._previous = None

    def _handler(self, signum, frame):
        take = getattr(self._previous, "take", None)
        if take is not None and not take():
            return                      # a copy of a Ctrl-C already acted on
        if self.pending and self.second_raises:
            raise KeyboardInterrupt     # pressed again: the user does not want to wait
        self.pending = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGINT)
            if handler is signal.default_int_handler or callable(getattr(handler, "take", None)):
                self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc_info):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        return False
