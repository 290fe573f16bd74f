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
``(c + 1) * chunk`` for chunks ``c0 <= c < c1``, one result per chunk, run on every core by
:func:`design._lib.passes.run_chunks` and combined by the caller in chunk order (so the result
does not depend on the threads).

A model whose row log-likelihood goes through a linear predictor ``eta_i = s_i x_i . theta``
(logistic regression) gives block kernels ``eta_rows(data, start, k, theta, eta)`` and
``eta_rows2(data, start, k, theta, theta_new, eta, eta_new)`` built on :func:`rows_dot` /
:func:`rows_dots`. A single dot product ``sum_j x_ij theta_j`` summed in order is one chain of
dependent additions (at d = 51, 51 additions of 3-4 cycles each: the pass ran at a third of
memory speed); these kernels keep that order for every row, so each ``eta_i`` has the same
bits as the row kernels' (:func:`dots`), but run four rows' chains side by side, and ask for
the rows :data:`STREAM_AHEAD` ahead. A chunk is handled :data:`ROW_BLOCK` rows at a time, so
the predictors and values of a block stay in L1 while X streams through.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from design._lib.jit import jit, row_jit
from design._lib.moments import batch_moments
from design._lib.prefetch import prefetch_ahead, prefetch_item, prefetch_row

#: Rows of a chunk handled at a time by the linear-predictor passes (their eta and values
#: stay in L1).
ROW_BLOCK = 256
#: Rows ahead of the current four whose cache lines :func:`rows_dot` prefetches.
STREAM_AHEAD = 32
_LINE_ITEMS = 8  # float64 items per 64-byte cache line


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
def _prefetch_rows4(X, i):
    """Cache hint for rows ``i .. i + 3`` of the C-contiguous X (no-op past its end)."""
    if i + 4 <= X.shape[0]:
        for r in range(4):   # a hint per line-sized step of each row (no integer division)
            for j in range(0, X.shape[1], _LINE_ITEMS):
                prefetch_item(X, i + r, j)


@row_jit
def rows_dot(X, start, k, theta, out):
    """``out[t] = x_{start+t} . theta`` for ``t < k``, each summed over j in order as
    :func:`dots` does (the same bits), four rows side by side."""
    d = X.shape[1]
    t = 0
    while t + 4 <= k:
        i = start + t
        _prefetch_rows4(X, i + STREAM_AHEAD)
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for j in range(d):
            w = theta[j]
            a0 += X[i, j] * w
            a1 += X[i + 1, j] * w
            a2 += X[i + 2, j] * w
            a3 += X[i + 3, j] * w
        out[t] = a0
        out[t + 1] = a1
        out[t + 2] = a2
        out[t + 3] = a3
        t += 4
    while t < k:
        a = 0.0
        for j in range(d):
            a += X[start + t, j] * theta[j]
        out[t] = a
        t += 1


@row_jit
def rows_dots(X, start, k, theta, theta_new, out, out_new):
    """:func:`rows_dot` at two parameter vectors, each row read once (the bits of
    :func:`dots`)."""
    d = X.shape[1]
    t = 0
    while t + 4 <= k:
        i = start + t
        _prefetch_rows4(X, i + STREAM_AHEAD)
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        b0 = 0.0
        b1 = 0.0
        b2 = 0.0
        b3 = 0.0
        for j in range(d):
            w = theta[j]
            v = theta_new[j]
            x0 = X[i, j]
            x1 = X[i + 1, j]
            x2 = X[i + 2, j]
            x3 = X[i + 3, j]
            a0 += x0 * w
            a1 += x1 * w
            a2 += x2 * w
            a3 += x3 * w
            b0 += x0 * v
            b1 += x1 * v
            b2 += x2 * v
            b3 += x3 * v
        out[t] = a0
        out[t + 1] = a1
        out[t + 2] = a2
        out[t + 3] = a3
        out_new[t] = b0
        out_new[t + 1] = b1
        out_new[t + 2] = b2
        out_new[t + 3] = b3
        t += 4
    while t < k:
        out[t], out_new[t] = dots(X, start + t, theta, theta_new)
        t += 1


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
def chunk_grad_sums_rows(grad_rows):
    """:func:`chunk_grad_sums` through a model's block kernel ``grad_rows`` (rows added in
    order, each with the row kernel's arithmetic: the same sums), :data:`ROW_BLOCK` rows at
    a time."""
    @jit
    def kernel(data, theta, N, chunk, sums, c0, c1):
        eta = np.empty(ROW_BLOCK)
        for c in range(c0, c1):
            acc = sums[c]
            acc[:] = 0.0
            end = min((c + 1) * chunk, N)
            for b in range(c * chunk, end, ROW_BLOCK):
                grad_rows(data, b, min(ROW_BLOCK, end - b), theta, eta, acc)

    return kernel


@cache
def chunk_loglik_sums_eta(eta_rows, eta_loglik):
    """:func:`chunk_loglik_sums` for a model whose log-likelihood goes through a linear
    predictor: per block of :data:`ROW_BLOCK` rows, the predictors (``eta_rows``), then
    ``eta_loglik`` mapped over them (a straight loop the compiler vectorises), then added to
    the chunk's sum in row order (the same value as the row kernel's loop)."""
    @jit
    def kernel(data, theta, N, chunk, sums, c0, c1):
        eta = np.empty(ROW_BLOCK)
        values = np.empty(ROW_BLOCK)
        for c in range(c0, c1):
            end = min((c + 1) * chunk, N)
            total = 0.0
            for b in range(c * chunk, end, ROW_BLOCK):
                k = min(ROW_BLOCK, end - b)
                eta_rows(data, b, k, theta, eta)
                for t in range(k):
                    values[t] = eta_loglik(data, eta[t])
                for t in range(k):
                    total += values[t]
            sums[c] = total

    return kernel


@cache
def chunk_ratio_moments_eta(eta_rows2, eta_ratio):
    """:func:`chunk_ratio_moments` through the linear predictors (see
    :func:`chunk_loglik_sums_eta`): the same l_i, and the same moments as
    :func:`batch_moments` (its first pass, the sum, runs block by block as the l_i are
    made; its second, M2, over the chunk's l_i)."""
    @jit
    def kernel(data, theta, theta_new, N, chunk, means, m2s, c0, c1):
        eta = np.empty(ROW_BLOCK)
        eta_new = np.empty(ROW_BLOCK)
        values = np.empty(min(chunk, N))
        for c in range(c0, c1):
            start = c * chunk
            n = min(chunk, N - start)
            total = 0.0
            for b in range(0, n, ROW_BLOCK):
                k = min(ROW_BLOCK, n - b)
                eta_rows2(data, start + b, k, theta, theta_new, eta, eta_new)
                block = values[b:b + k]
                for t in range(k):
                    block[t] = eta_ratio(data, eta[t], eta_new[t])
                for t in range(k):
                    total += block[t]
            mean = total / n
            m2 = 0.0
            for t in range(n):
                dv = values[t] - mean
                m2 += dv * dv
            means[c], m2s[c] = mean, m2

    return kernel
