"""Compiled loops over rows, generic in the model's per-row kernel.

A built-in model writes four small jitted functions of one row ``i``:

* ``row_loglik(data, i, theta) -> float``
* ``row_ratio(data, i, theta, theta_new) -> float`` (``l_i``, each row read once)
* ``row_grad(data, i, theta, out)`` writing the gradient of row ``i`` into ``out`` (length d)
* ``row_prefetch(data, i)``, a cache hint for the arrays row ``i`` lives in
  (:func:`design._lib.prefetch.prefetch_row`); rows are read in random order, and fetching
  them ahead is what makes random rows nearly as cheap as sequential ones

where ``data`` is the model's tuple of arrays and constants. The factories below close over
a row kernel and return a compiled batch loop; numba inlines the row kernel (a compile-time
constant), so a loop costs what a hand-written one does. Results are memoised per kernel.
"""

from __future__ import annotations

from functools import cache

from design._lib.jit import jit, row_jit
from design._lib.prefetch import prefetch_ahead, prefetch_row


@row_jit
def dots(X, i, theta, theta_new):
    """``(x_i . theta, x_i . theta_new)``, reading row i of X once."""
    a = 0.0
    a_new = 0.0
    for j in range(X.shape[1]):
        xij = X[i, j]
        a += xij * theta[j]
        a_new += xij * theta_new[j]
    return a, a_new


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
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            out[t] = row_loglik(data, idx[t], theta)

    return kernel


@cache
def batch_ratio(row_ratio, row_prefetch):
    @jit
    def kernel(data, idx, theta, theta_new, out):
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            out[t] = row_ratio(data, idx[t], theta, theta_new)

    return kernel


@cache
def batch_grad(row_grad, row_prefetch):
    @jit
    def kernel(data, idx, theta, out):
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            row_grad(data, idx[t], theta, out[t])

    return kernel
