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

The ``chunk_*`` factories build the kernels of full-data passes: rows ``c * chunk`` up to
``(c + 1) * chunk`` (sequential, so no prefetch) for chunks ``c0 <= c < c1``, one result per
chunk, run on every core by :func:`design._lib.passes.run_chunks` and combined by the caller
in chunk order (so the result does not depend on the threads).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from design._lib.jit import jit, row_jit
from design._lib.moments import batch_moments
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


@jit
def vector_norm(x):
    """Euclidean norm ``sqrt(sum x_j^2)``, summed in order (the models' ranges of the l_i
    are written with it, so the compiled chain loop and the Python methods agree bit for
    bit)."""
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j] * x[j]
    return np.sqrt(s)


@jit
def step_range(consts, theta, theta_new):
    """``(0, L |theta_new - theta| R / K)``: the range of the l_i of a model whose l_i is
    L-Lipschitz in ``x_i . theta`` (logistic: L = 1; Student-t), R the largest row norm,
    ``consts = (L, R, 1/K)``."""
    lipschitz, r, inv_temp = consts
    diff = np.empty(theta.shape[0])
    for j in range(theta.shape[0]):
        diff[j] = theta_new[j] - theta[j]
    return 0.0, lipschitz * vector_norm(diff) * r * inv_temp


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


@cache
def chunk_loglik_sums(row_loglik):
    """Kernel writing ``sum_i log p(x_i | theta)`` of chunk c into ``sums[c]``."""
    @jit
    def kernel(data, theta, N, chunk, sums, c0, c1):
        for c in range(c0, c1):
            total = 0.0
            for i in range(c * chunk, min((c + 1) * chunk, N)):
                total += row_loglik(data, i, theta)
            sums[c] = total

    return kernel


@cache
def chunk_ratio_moments(row_ratio):
    """Kernel writing the mean and M2 of chunk c's l_i (:func:`batch_moments`, the values the
    batch kernel gives on the same rows) into ``means[c]``, ``m2s[c]``."""
    @jit
    def kernel(data, theta, theta_new, N, chunk, means, m2s, c0, c1):
        buf = np.empty(chunk)
        for c in range(c0, c1):
            start = c * chunk
            k = min(chunk, N - start)
            for t in range(k):
                buf[t] = row_ratio(data, start + t, theta, theta_new)
            means[c], m2s[c] = batch_moments(buf[:k])

    return kernel


@cache
def chunk_grad_sums(row_grad):
    """Kernel writing the sum over chunk c's rows of the per-row gradients into ``sums[c]``
    (rows added in order, as ``grads.sum(axis=0)`` does)."""
    @jit
    def kernel(data, theta, N, chunk, sums, c0, c1):
        g = np.empty(sums.shape[1])
        for c in range(c0, c1):
            acc = sums[c]
            acc[:] = 0.0
            for i in range(c * chunk, min((c + 1) * chunk, N)):
                row_grad(data, i, theta, g)
                for j in range(g.shape[0]):
                    acc[j] += g[j]

    return kernel


@cache
def chunk_loglik_sums_eta(row_eta, eta_loglik):
    """:func:`chunk_loglik_sums` for a model whose log-likelihood goes through a linear
    predictor: the predictors of a chunk first, then ``eta_loglik`` mapped over them (a
    straight loop the compiler vectorises), then the sum in row order (the same value)."""
    @jit
    def kernel(data, theta, N, chunk, sums, c0, c1):
        eta = np.empty(chunk)
        values = np.empty(chunk)
        for c in range(c0, c1):
            start = c * chunk
            k = min(chunk, N - start)
            for t in range(k):
                eta[t] = row_eta(data, start + t, theta)
            for t in range(k):
                values[t] = eta_loglik(data, eta[t])
            total = 0.0
            for t in range(k):
                total += values[t]
            sums[c] = total

    return kernel


@cache
def chunk_ratio_moments_eta(row_eta, eta_ratio):
    """:func:`chunk_ratio_moments` through the linear predictors (see
    :func:`chunk_loglik_sums_eta`); the same l_i, so the same moments."""
    @jit
    def kernel(data, theta, theta_new, N, chunk, means, m2s, c0, c1):
        eta = np.empty(chunk)
        eta_new = np.empty(chunk)
        values = np.empty(chunk)
        for c in range(c0, c1):
            start = c * chunk
            k = min(chunk, N - start)
            for t in range(k):
                eta[t] = row_eta(data, start + t, theta)
                eta_new[t] = row_eta(data, start + t, theta_new)
            for t in range(k):
                values[t] = eta_ratio(data, eta[t], eta_new[t])
            means[c], m2s[c] = batch_moments(values[:k])

    return kernel
