"""The set of bright data points: O(1) brighten, darken, i-th bright, i-th dark and count.

The cache-like structure of Maclaurin & Adams (2014), section 3.3 (their Figure 3): ``arr``
holds every index 0..N-1 once, bright ones first; ``tab[n]`` is the position of ``n`` in
``arr``; ``count[0]`` is the number B of bright points, so ``arr[:B]`` are the bright
indices and ``arr[B:]`` the dark ones. Brightening ``n`` swaps it with the first dark index
and increments B; darkening swaps it with the last bright index and decrements B.

The compiled functions below work on the three arrays directly so that the z-updates can
call them from compiled loops; :class:`BrightSet` wraps them for Python callers.
"""

from __future__ import annotations

import numpy as np

from design._lib.checks import check_int
from design._lib.jit import jit, row_jit

__all__ = ["BrightSet"]


@row_jit
def _swap(arr, tab, p, q):
    a = arr[p]
    b = arr[q]
    arr[p] = b
    arr[q] = a
    tab[a] = q
    tab[b] = p


@row_jit
def brighten(arr, tab, count, n):
    """Make ``n`` bright (no-op if it is); return True if it changed."""
    p = tab[n]
    B = count[0]
    if p < B:
        return False
    _swap(arr, tab, p, B)
    count[0] = B + 1
    return True


@row_jit
def darken(arr, tab, count, n):
    """Make ``n`` dark (no-op if it is); return True if it changed."""
    p = tab[n]
    last = count[0] - 1
    if p > last:
        return False
    _swap(arr, tab, p, last)
    count[0] = last
    return True


@jit
def _set_many(arr, tab, count, idx, bright):
    for n in idx:
        if bright:
            brighten(arr, tab, count, n)
        else:
            darken(arr, tab, count, n)


class BrightSet:
    """Which of N data points are bright, with O(1) updates and O(1) random access.

    Parameters
    ----------
    N : int
        Number of data points; all start dark.

    Notes
    -----
    Memory is two int64 arrays of length N. :attr:`bright` is a read-only view of the bright
    indices in the structure's (arbitrary) order, valid until the next update.

    Examples
    --------
    >>> z = BrightSet(6)
    >>> z.brighten(4); z.brighten(1); z.count
    2
    >>> sorted(z.bright.tolist()), z.is_bright(4), z.is_bright(0)
    ([1, 4], True, False)
    >>> z.darken(4); z.count, z.ith_bright(0)
    (1, 1)
    >>> sorted(z.ith_dark(i) for i in range(z.N - z.count))
    [0, 2, 3, 4, 5]
    """

    def __init__(self, N):
        self.N = check_int("N", N, low=1)
        self.arr = np.arange(self.N, dtype=np.int64)
        self.tab = np.arange(self.N, dtype=np.int64)
        self.counter = np.zeros(1, dtype=np.int64)

    @property
    def count(self) -> int:
        """Number of bright points, B."""
        return int(self.counter[0])

    @property
    def bright(self) -> np.ndarray:
        """The bright indices (a read-only view, in the structure's order)."""
        view = self.arr[: self.count]
        view.flags.writeable = False
        return view

    def _index(self, n) -> int:
        return check_int("n", n, low=0, high=self.N - 1)

    def brighten(self, n) -> None:
        """Set ``z_n = 1``."""
        brighten(self.arr, self.tab, self.counter, self._index(n))

    def darken(self, n) -> None:
        """Set ``z_n = 0``."""
        darken(self.arr, self.tab, self.counter, self._index(n))

    def set_bright(self, idx) -> None:
        """Brighten every index in the integer array ``idx`` (O(len(idx)))."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.N):
            raise ValueError(f"idx must lie in [0, {self.N - 1}], got values in "
                             f"[{idx.min()}, {idx.max()}]")
        _set_many(self.arr, self.tab, self.counter, idx.reshape(-1), True)

    def is_bright(self, n) -> bool:
        return bool(self.tab[self._index(n)] < self.counter[0])

    def ith_bright(self, i) -> int:
        """The i-th bright index, ``0 <= i < count``."""
        return int(self.arr[check_int("i", i, low=0, high=self.count - 1)])

    def ith_dark(self, i) -> int:
        """The i-th dark index, ``0 <= i < N - count``."""
        return int(self.arr[self.count + check_int("i", i, low=0, high=self.N - self.count - 1)])

    def __repr__(self):
        return f"BrightSet(N={self.N}, count={self.count})"
