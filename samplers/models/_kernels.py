"""Compiled loops over rows, generic in the model's per-row kernel.

A built-in model writes four small jitted functions of one row ``i``:

* ``row_loglik(data, i, theta) -> float``
* ``row_ratio(data, i, theta, theta_new) -> float`` (``l_i``, each row read once)
* ``row_grad(data, i, theta, out)`` writing the gradient of row ``i`` into ``out`` (length d)
* ``row_prefetch(data, i)``, a cache hint for the arrays row ``i`` lives in
  (:func:`samplers._prefetch.prefetch_row`); rows are read in random order, and fetching
  them ahead is what makes random rows nearly as cheap as sequential ones

where ``data`` is the model's tuple of arrays and constants. The factories below close over
a row kernel and return a compiled batch loop; numba inlines the row kernel (a compile-time
constant), so a loop costs what a hand-written one does. Results are memoised per kernel.
"""

from __future__ import annotations

from functools import cache

from .._jit import jit, row_jit
from .._prefetch import PREFETCH_DISTANCE, prefetch_row


@row_jit
def prefetch_data0(data, i):
    """Row prefetch for models whose rows live in ``data[0]`` alone (x)."""
    prefetch_row(data[0], i)


@row_jit
def prefetch_data01(data, i):
    """Row prefetch for models whose rows live in ``data[0]`` and ``data[1]`` (X and y)."""
    prefetch_row(data[0], i)
    prefetch_row(data[1], i)


@cache
def batch_loglik(row_loglik, row_prefetch):
    @jit
    def kernel(data, idx, theta, out):
        n = idx.shape[0]
        for t in range(min(n, PREFETCH_DISTANCE)):
            row_prefetch(data, idx[t])
        for t in range(n):
            if t + PREFETCH_DISTANCE < n:
                row_prefetch(data, idx[t + PREFETCH_DISTANCE])
            out[t] = row_loglik(data, idx[t], theta)

    return kernel


@cache
def batch_ratio(row_ratio, row_prefetch):
    @jit
    def kernel(data, idx, theta, theta_new, out):
        n = idx.shape[0]
        for t in range(min(n, PREFETCH_DISTANCE)):
            row_prefetch(data, idx[t])
        for t in range(n):
            if t + PREFETCH_DISTANCE < n:
                row_prefetch(data, idx[t + PREFETCH_DISTANCE])
            out[t] = row_ratio(data, idx[t], theta, theta_new)

    return kernel


@cache
def batch_grad(row_grad, row_prefetch):
    @jit
    def kernel(data, idx, theta, out):
        n = idx.shape[0]
        for t in range(min(n, PREFETCH_DISTANCE)):
            row_prefetch(data, idx[t])
        for t in range(n):
            if t + PREFETCH_DISTANCE < n:
                row_prefetch(data, idx[t + PREFETCH_DISTANCE])
            row_grad(data, idx[t], theta, out[t])

    return kernel
