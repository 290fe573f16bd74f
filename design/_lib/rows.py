"""Sampling rows without replacement in O(batch) per call.

A test that reads a random subset of the data asks for "the next k rows of a uniformly random
order" and may come back for more. :class:`IndexSampler` keeps one persistent permutation of
``range(N)`` and runs a partial Fisher-Yates shuffle from the start of it at every restart:
the first ``n`` entries after ``n`` swaps are a uniform draw without replacement *whatever the
permutation held before*, so nothing is ever reset or reshuffled in full. Each request costs
O(k) time; the permutation costs O(N) memory once (int32 when N < 2**31).
"""

from __future__ import annotations

import numpy as np

from .checks import as_generator, check_int
from .jit import jit
from .prefetch import PREFETCH_DISTANCE, prefetch_item

__all__ = ["IndexSampler"]


@jit
def _target(start, t, u, n_total):
    """Position swapped with ``start + t``: ``start + t + floor(u (N - start - t))``."""
    i = start + t
    j = i + int(u * (n_total - i))
    return j if j < n_total else n_total - 1  # u within an ulp of one


@jit
def _partial_shuffle(perm, start, u, out):
    """Partial Fisher-Yates: for t < len(u), swap position ``start + t`` with a uniform
    position to its right (drawn from ``u[t]``), and copy the row it now holds to ``out[t]``.

    The rounding bias of the integer draw is below N / 2**53. The swap targets depend only
    on ``u``, so the loop prefetches the permutation entries it will touch next.
    """
    n_total = perm.shape[0]
    k = u.shape[0]
    for t in range(min(k, PREFETCH_DISTANCE)):
        prefetch_item(perm, _target(start, t, u[t], n_total), 0)
    for t in range(k):
        ahead = t + PREFETCH_DISTANCE
        if ahead < k:
            prefetch_item(perm, _target(start, ahead, u[ahead], n_total), 0)
        i = start + t
        j = _target(start, t, u[t], n_total)
        row = perm[j]
        perm[j] = perm[i]
        perm[i] = row
        out[t] = row


@jit
def draw_rows(rng, perm, start, u, out):
    """Draw ``len(u)`` uniforms from ``rng`` into ``u`` and take the next rows into ``out``.

    Consumes the Generator exactly as ``IndexSampler.take`` does (``rng.random(k)``).
    """
    for t in range(u.shape[0]):
        u[t] = rng.random()
    _partial_shuffle(perm, start, u, out)


class IndexSampler:
    """Next-k rows of a uniformly random without-replacement order of ``range(N)``.

    Parameters
    ----------
    N : int
        Number of rows.
    rng : None, int or numpy.random.Generator
        Source of randomness; the sampler keeps (and advances) this generator.

    Notes
    -----
    :meth:`restart` begins a fresh random order; :meth:`take` returns the next ``k`` rows of
    it (fewer when the order is exhausted). Between restarts the rows returned are distinct.
    The cost of ``take(k)`` is O(k) regardless of ``N``: a partial Fisher-Yates shuffle of a
    persistent permutation, never ``permutation(N)``.

    Examples
    --------
    >>> from design._lib.rows import IndexSampler
    >>> s = IndexSampler(10, rng=0)
    >>> first = s.take(4)
    >>> more = s.take(4)
    >>> len(set(first) | set(more))
    8
    >>> s.restart(); s.remaining
    10
    """

    def __init__(self, N, rng=None):
        self.N = check_int("N", N, low=1)
        self._rng = as_generator(rng)
        dtype = np.int32 if self.N < 2**31 else np.int64
        self._perm = np.arange(self.N, dtype=dtype)
        self._cursor = 0

    @property
    def taken(self) -> int:
        """Rows handed out since the last :meth:`restart`."""
        return self._cursor

    @property
    def remaining(self) -> int:
        """Rows of the current order not handed out yet."""
        return self.N - self._cursor

    def restart(self) -> None:
        """Begin a new uniformly random order (O(1))."""
        self._cursor = 0

    def kernel_state(self) -> tuple[np.ndarray, int]:
        """``(perm, cursor)`` for compiled test loops that draw rows themselves.

        A compiled loop takes rows with :func:`draw_rows` (which consumes the Generator and
        swaps exactly as :meth:`take` does) and reports the new cursor with
        :meth:`set_cursor`.
        """
        return self._perm, self._cursor

    def set_cursor(self, cursor: int) -> None:
        """Record that a compiled loop handed out rows up to ``cursor`` (see kernel_state)."""
        self._cursor = int(cursor)

    def take(self, k) -> np.ndarray:
        """Return the next ``min(k, remaining)`` rows of the current order as an intp array."""
        k = min(int(k), self.N - self._cursor)
        out = np.empty(max(k, 0), dtype=np.intp)
        if k > 0:
            _partial_shuffle(self._perm, self._cursor, self._rng.random(k), out)
            self._cursor += k
        return out
