"""The stage arithmetic of the sequential tests: pure jitted functions of a batch's moments.

One place for the formulas that the samplers' tests (their stopping rules), the checks
(``validation``: path thresholds, minibatch t statistics) and the theory (``design``: the
Barker simulator) all use, so that none of them re-derives another's arithmetic.

* :func:`austere_se`: standard error of a without-replacement mean (Korattikara et al.
  2014, Algorithm 1, with their finite-population correction);
* :func:`confidence_radius_code`, :func:`look_delta`, :func:`next_size`: the concentration
  bounds, error schedule and geometric batch sizes of Bardenet et al. (2014);
* :func:`barker_variance`, :func:`barker_skew`, :func:`novak_error`,
  :func:`novak_lower_bound`: the variance and skew of the Barker statistic ``Delta*`` and
  Corollary 1's error bound (Seita et al. 2017).
"""

from __future__ import annotations

import math

from .jit import jit

__all__ = ["austere_se", "confidence_radius_code", "look_delta", "next_size",
           "barker_variance", "barker_skew", "novak_error", "novak_lower_bound",
           "HOEFFDING", "BERNSTEIN", "BERNSTEIN_SERFLING", "BOUNDS", "NOVAK_FLOOR"]

#: Codes of the concentration bounds, in the order of :data:`BOUNDS`.
HOEFFDING, BERNSTEIN, BERNSTEIN_SERFLING = 0, 1, 2
BOUNDS = ("hoeffding", "bernstein", "bernstein-serfling")
_KAPPA = 7.0 / 3.0 + 3.0 / math.sqrt(2.0)

#: Novak's constants in Corollary 1 of Seita et al.: eps = (6.4 E|X|^3 + 2 E|X|) / sqrt(b).
_NOVAK_A3, _NOVAK_A1 = 6.4, 2.0
#: ``6.4 a3 + 2 a1 >= 6.4 / a1 + 2 a1 >= 8.4`` for any standardized sample (a1 a3 >= 1 by
#: Hölder, a1 <= 1 by Jensen), so eps >= 8.4 / sqrt(b) whatever the data.
NOVAK_FLOOR = _NOVAK_A3 + _NOVAK_A1


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
    return max(_NOVAK_A3 * r3 * r3 * r3 + _NOVAK_A1 * r1, NOVAK_FLOOR) / math.sqrt(n)


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
