"""Compiled loops of the sequential tests, generic in the model's per-row ``l_i`` kernel.

One call runs a whole accept/reject decision: it draws rows exactly as
:meth:`IndexSampler.take` would (same Generator, same uniforms, same swaps), computes their
l_i with the model's row kernel, and applies the same stopping rule with the same shared
arithmetic as the Python reference path in :mod:`samplers._accept`. The two paths give
bit-identical chains; the compiled one avoids a Python round trip per stage.

Each loop returns a status: ``DONE``, ``NONFINITE`` (a batch mean that is NaN or infinite,
decided or refused by the caller), or ``MORE_THRESHOLDS`` (the caller must extend the
critical-value table and call again with the returned state).

The Barker test's pieces (:func:`barker_stage`, :func:`barker_draw_kernel`) take the whole
batch and the Generator, so the Python path calls exactly the code the compiled loop inlines.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from design._lib.rows import draw_rows
from design._lib.jit import jit
from design._lib.moments import abs_central_sums, batch_moments, batch_moments3, merge_moments, merge_moments3
from .models._kernels import batch_ratio

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
    ratios = batch_ratio(row_ratio, row_prefetch)

    @jit
    def fill(data, theta, theta_new, rng, perm, cursor, u, rows, out):
        draw_rows(rng, perm, cursor, u, rows)
        ratios(data, rows, theta, theta_new, out)

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


# --- the minibatch Barker test of Seita et al. -----------------------------------------------

GROW, STOP, EXACT = 0, 1, 2

#: Novak's constants in Corollary 1 of Seita et al.: eps = (6.4 E|X|^3 + 2 E|X|) / sqrt(b).
_NOVAK_A3, _NOVAK_A1 = 6.4, 2.0
#: ``6.4 a3 + 2 a1 >= 6.4 / a1 + 2 a1 >= 8.4`` for any standardized sample (a1 a3 >= 1 by
#: Hölder, a1 <= 1 by Jensen), so eps >= 8.4 / sqrt(b) whatever the data.
_NOVAK_FLOOR = _NOVAK_A3 + _NOVAK_A1
#: A lower bound must exceed delta by this relative margin before it is trusted to skip the
#: exact pass (rounding of sums over up to 10^9 values stays far below it).
_SKIP_MARGIN = 1e-9


@jit
def barker_variance(n, N, m2, fpc):
    """Estimated variance of ``Delta* = N mean(l) + c`` after n rows without replacement.

    ``N^2 s^2 / n``, ``s^2 = m2 / (n - 1)`` the sample variance, times the finite-population
    factor ``1 - n/N`` when ``fpc`` (which makes it unbiased for sampling without
    replacement).
    """
    var = N * (N * (m2 / (n - 1))) / n
    return var * (1.0 - n / N) if fpc else var


@jit
def novak_error(n, m2, s1, s3):
    """Corollary 1's ``eps = (6.4 mean|z|^3 + 2 mean|z|) / sqrt(n)`` from central sums.

    ``z`` are the l_i standardized by their batch mean and sd (divisor n): ``s1 = sum |l -
    mean|``, ``s3 = sum |l - mean|^3``. A batch without spread gives 0.
    """
    if m2 <= 0.0:
        return 0.0
    sd = math.sqrt(m2 / n)
    return (_NOVAK_A3 * s3 / (n * sd * sd * sd) + _NOVAK_A1 * s1 / (n * sd)) / math.sqrt(n)


@jit
def novak_lower_bound(n, mean, m2, center, t1, t3):
    """A lower bound on :func:`novak_error` from absolute sums about another ``center``.

    With ``d = |mean - center|``, Minkowski's inequality gives
    ``(sum|l - mean|^3 / n)^(1/3) >= (t3 / n)^(1/3) - d`` and
    ``sum|l - mean| / n >= t1 / n - d``; and eps is at least ``8.4 / sqrt(n)``.
    """
    if m2 <= 0.0:
        return 0.0
    sd = math.sqrt(m2 / n)
    d = abs(mean - center)
    r3 = max((t3 / n) ** (1.0 / 3.0) - d, 0.0) / sd
    r1 = max(t1 / n - d, 0.0) / sd
    return max(_NOVAK_A3 * r3 * r3 * r3 + _NOVAK_A1 * r1, _NOVAK_FLOOR) / math.sqrt(n)


@jit
def barker_stage(values, k, N, mean, m2, sigma2, delta, check_eps, fpc, center, t1, t3):
    """Stopping rule of Algorithm 1 after the newest ``k`` rows of ``values`` were merged.

    ``values`` holds the whole batch (n rows), ``mean`` and ``m2`` its moments. Returns
    ``(status, s2, eps, center, t1, t3)``: ``EXACT`` at n = N, ``GROW`` while
    ``s2 >= sigma2`` or ``eps > delta``, else ``STOP``. Corollary 1's eps needs a pass over
    the batch about its current mean; to keep a decision O(batch) that pass is skipped
    whenever :func:`novak_lower_bound`, computed from running sums ``t1``, ``t3`` about a
    ``center`` fixed at the last pass, already exceeds delta, so the stopping stage is the
    one a full pass at every stage would give. The reported eps is exact (from a pass).
    """
    n = values.shape[0]
    if center != center:                    # first stage: centre on the first batch
        center = mean
        t1, t3 = abs_central_sums(values, center)
    else:
        s1, s3 = abs_central_sums(values[n - k:], center)
        t1 += s1
        t3 += s3
    if n == N:
        return EXACT, 0.0, 0.0, center, t1, t3
    s2 = barker_variance(n, N, m2, fpc)
    if s2 >= sigma2:
        return GROW, s2, math.nan, center, t1, t3
    if check_eps and novak_lower_bound(n, mean, m2, center, t1, t3) > delta * (1.0 + _SKIP_MARGIN):
        return GROW, s2, math.nan, center, t1, t3
    center = mean
    t1, t3 = abs_central_sums(values, center)
    eps = novak_error(n, m2, t1, t3)
    if check_eps and eps > delta:
        return GROW, s2, eps, center, t1, t3
    return STOP, s2, eps, center, t1, t3


@jit
def barker_skew(n, N, m2, m3, sigma, fpc):
    """Skew ``eta = k3(Delta*) / (3 sigma^3)`` of the test from the batch (0 if n < 3).

    ``k3(l) = n m3 / ((n - 1)(n - 2))`` (unbiased third cumulant), ``k3(Delta*) =
    N^3 k3(l) / n^2``, times ``(1 - n/N)(1 - 2n/N)`` for sampling without replacement when
    ``fpc`` (the third central moment of a without-replacement mean, to O(1/N)).
    """
    if n < 3 or m2 <= 0.0:
        return 0.0
    k3 = n * m3 / ((n - 1.0) * (n - 2.0))
    k3_mean = (N / n) * (N / n) * N * k3
    if fpc:
        k3_mean *= (1.0 - n / N) * (1.0 - 2.0 * n / N)
    return k3_mean / (3.0 * sigma * sigma * sigma)


@cache
def barker_draw_kernel():
    """The accept/reject draw of Algorithm 1 (built on first use: it needs :mod:`design`).

    ``draw(rng, status, n, N, mean, m2, m3, log_const, s2, sigma, fpc, skewed, x0, h,
    skew_step, density, cdf) -> (accepted, eta)``. ``EXACT`` (all N rows read): Barker's
    test with the exact ``Delta``, accept iff ``Delta + log(u / (1 - u)) > 0`` (one
    uniform). Otherwise accept iff ``Delta* + X_nc + X_corr > 0`` with
    ``X_nc = sqrt(sigma^2 - s2) Z`` (one standard normal) and ``X_corr`` by inverse cdf from
    the table (one uniform; a skew family, rows of ``density``/``cdf``, takes a second
    uniform first to pick the row at the batch's ``eta``).
    """
    from design._kernels import ppf_kernel, skew_ppf_kernel

    @jit
    def draw(rng, status, n, N, mean, m2, m3, log_const, s2, sigma, fpc, skewed,
             x0, h, skew_step, density, cdf):
        dstar = N * mean + log_const
        if status == EXACT:
            u = rng.random()
            if u == 0.0:
                return False, 0.0
            return dstar + (math.log(u) - math.log1p(-u)) > 0.0, 0.0
        x_nc = math.sqrt(sigma * sigma - s2) * rng.standard_normal()
        eta = barker_skew(n, N, m2, m3, sigma, fpc)
        if skewed:
            u_mix = rng.random()
            x_corr = skew_ppf_kernel(eta, u_mix, rng.random(), x0, h, skew_step, density, cdf)
        else:
            x_corr = ppf_kernel(rng.random(), x0, h, density[0], cdf[0])
        return dstar + x_nc + x_corr > 0.0, eta

    return draw


@cache
def barker_loop(row_ratio, row_prefetch):
    """The minibatch Barker test of Seita et al. for one model kind (memoised)."""
    fill = batch_of_ratios(row_ratio, row_prefetch)
    barker_draw = barker_draw_kernel()

    @jit
    def loop(data, theta, theta_new, rng, perm, m, log_const, sigma, delta, check_eps, fpc,
             skewed, x0, h, skew_step, density, cdf):
        N = perm.shape[0]
        u = np.empty(m)
        rows = np.empty(m, dtype=np.intp)
        values = np.empty(m)
        n, mean, m2, m3 = 0, 0.0, 0.0, 0.0
        center, t1, t3 = math.nan, 0.0, 0.0
        stage = 0
        while True:
            stage += 1
            k = min(m, N - n)
            if n + k > values.shape[0]:
                grown = np.empty(min(2 * values.shape[0], N))
                grown[:n] = values[:n]
                values = grown
            fill(data, theta, theta_new, rng, perm, n, u[:k], rows[:k], values[n:n + k])
            b_mean, b_m2, b_m3 = batch_moments3(values[n:n + k])
            if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
                return NONFINITE, False, n + k, stage, b_mean, math.nan, math.nan, math.nan
            n, mean, m2, m3 = merge_moments3(n, mean, m2, m3, k, b_mean, b_m2, b_m3)
            status, s2, eps, center, t1, t3 = barker_stage(
                values[:n], k, N, mean, m2, sigma * sigma, delta, check_eps, fpc, center, t1, t3)
            if status != GROW:
                accepted, eta = barker_draw(rng, status, n, N, mean, m2, m3, log_const, s2,
                                            sigma, fpc, skewed, x0, h, skew_step, density, cdf)
                return DONE, accepted, n, stage, mean, s2, eps, eta

    return loop
