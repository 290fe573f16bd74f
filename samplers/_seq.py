"""Compiled loops of the sequential tests, generic in the model's per-row ``l_i`` kernel.

One call runs a whole accept/reject decision: it draws rows exactly as
:meth:`IndexSampler.take` would (same Generator, same uniforms, same swaps), computes their
l_i with the model's row kernel, and applies the same stopping rule with the same shared
arithmetic as the Python reference path in :mod:`samplers._accept`. The two paths give
bit-identical chains; the compiled one avoids a Python round trip per stage.

Each loop returns a status: ``DONE``, ``NONFINITE`` (a batch mean that is NaN or infinite,
decided or refused by the caller), or ``MORE_THRESHOLDS`` (the caller must extend the
critical-value table and call again with the returned state).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ._index import draw_rows
from ._jit import jit
from ._moments import batch_moments, merge_moments
from ._prefetch import PREFETCH_DISTANCE

DONE, NONFINITE, MORE_THRESHOLDS = 0, 1, 2

HOEFFDING, BERNSTEIN, BERNSTEIN_SERFLING = 0, 1, 2
_KAPPA = 7.0 / 3.0 + 3.0 / math.sqrt(2.0)


@jit
def austere_se(m2, n, N):
    """Standard error of the mean of n rows without replacement (sample sd, FPC)."""
    return math.sqrt(m2 / (n - 1)) * math.sqrt((1.0 - (n - 1) / (N - 1)) / n)


@jit
def confidence_radius_code(code, t, N, C, sd, delta_t):
    """Half-width of the concentration bound ``code`` (see ``confidence_radius``)."""
    if code == HOEFFDING:
        return C * math.sqrt(2.0 * (1.0 - (t - 1) / N) * math.log(2.0 / delta_t) / t)
    if code == BERNSTEIN:
        L = math.log(3.0 / delta_t)
        return sd * math.sqrt(2.0 * L / t) + 6.0 * C * L / t
    if t <= N / 2:
        rho = 1.0 - (t - 1) / N
    else:
        rho = (1.0 - t / N) * (1.0 + 1.0 / t)
    L = math.log(10.0 / delta_t)
    return sd * math.sqrt(2.0 * rho * L / t) + _KAPPA * 2.0 * C * L / t


@jit
def look_delta(look, p, delta):
    """delta_k = (p - 1) / (p k^p) delta, so that the looks together err at most delta."""
    return (p - 1.0) / (p * look**p) * delta


@jit
def next_size(t, N, gamma):
    """Next subsample size: ceil(gamma t), at least t + 1, at most N."""
    return min(N, max(t + 1, int(math.ceil(gamma * t))))


@cache
def batch_of_ratios(row_ratio, row_prefetch):
    """Take the next k rows (as ``IndexSampler.take``) and compute their l_i into ``out``."""

    @jit
    def fill(data, theta, theta_new, rng, perm, cursor, u, rows, out):
        draw_rows(rng, perm, cursor, u, rows)
        k = rows.shape[0]
        for t in range(min(k, PREFETCH_DISTANCE)):
            row_prefetch(data, rows[t])
        for t in range(k):
            if t + PREFETCH_DISTANCE < k:
                row_prefetch(data, rows[t + PREFETCH_DISTANCE])
            out[t] = row_ratio(data, rows[t], theta, theta_new)

    return fill


@cache
def austere_loop(row_ratio, row_prefetch):
    """The sequential t-test of Korattikara et al. for one model kind (memoised)."""
    fill = batch_of_ratios(row_ratio, row_prefetch)

    @jit
    def loop(data, theta, theta_new, rng, perm, cursor, m, mu0, crit, n, mean, m2, stage):
        N = perm.shape[0]
        u = np.empty(m)
        rows = np.empty(m, dtype=np.intp)
        buf = np.empty(m)
        while True:
            if stage >= crit.shape[0]:
                return MORE_THRESHOLDS, False, cursor, n, mean, m2, stage
            stage += 1
            k = min(m, N - cursor)
            fill(data, theta, theta_new, rng, perm, cursor, u[:k], rows[:k], buf[:k])
            cursor += k
            b_mean, b_m2 = batch_moments(buf[:k])
            if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
                return NONFINITE, False, cursor, n, b_mean, m2, stage
            n, mean, m2 = merge_moments(n, mean, m2, k, b_mean, b_m2)
            diff = mean - mu0
            if n == N or abs(diff) > crit[stage - 1] * austere_se(m2, n, N):
                return DONE, diff > 0, cursor, n, mean, m2, stage

    return loop


@cache
def confidence_loop(row_ratio, row_prefetch):
    """The adaptive subsampling test of Bardenet et al. for one model kind (memoised)."""
    fill = batch_of_ratios(row_ratio, row_prefetch)

    @jit
    def loop(data, theta, theta_new, rng, perm, psi, C, delta, p, gamma, code, b0):
        N = perm.shape[0]
        n, mean, m2 = 0, 0.0, 0.0
        cursor = 0
        b = min(b0, N)
        look = 0
        while True:
            look += 1
            k = b - n
            buf = np.empty(k)
            fill(data, theta, theta_new, rng, perm, cursor, np.empty(k), np.empty(k, np.intp), buf)
            cursor += k
            b_mean, b_m2 = batch_moments(buf)
            if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
                return NONFINITE, False, cursor, b_mean, look
            n, mean, m2 = merge_moments(n, mean, m2, k, b_mean, b_m2)
            diff = mean - psi
            if n == N:
                return DONE, diff > 0, cursor, mean, look
            c = confidence_radius_code(code, n, N, C, math.sqrt(m2 / n), look_delta(look, p, delta))
            if abs(diff) > c:
                return DONE, diff > 0, cursor, mean, look
            b = next_size(n, N, gamma)

    return loop
