"""The presized stopping rule of the minibatch Barker test:
``BarkerTest(stopping="presized")``.

Algorithm 1 of Seita et al. (2017) grows the batch ``m`` rows at a time until the estimated
variance ``s^2`` of ``Delta*`` falls below ``sigma^2``. The batch it stops at is therefore
selected on its own sample variance, and when the ``l_i`` are skewed the sample mean and
the sample variance of a batch are correlated (``Cov(mean, s_l^2) = mu_3 / b``, so their
correlation is ``gamma / sqrt(kurtosis - 1)``, which does not shrink with ``b``): batches
whose variance happens to be small have a biased ``Delta*``. On the Gaussian mixture of the
paper this is an error of up to 0.035 in the acceptance probability at a single pair and a
posterior sd 2-5 % too small (``docs/correction.md``, section 6).

The presized rule decides the batch size before the rows of the decision are seen:

1. read a *pilot* ``A`` of ``a = m`` rows, and ``m`` more at a time until the relative
   standard error of its sample variance ``v_A``, ``sqrt((kurtosis - 1) / a)`` with the
   pilot's sample kurtosis, is at most :data:`PILOT_RSE` ``= 0.1`` or the pilot is a quarter
   of the batch it sizes (:func:`pilot_done`);
2. choose ``b``, the smallest size at which the *predicted* variance
   ``N'^2 v_A (1/b - 1/N')`` (``N' = N - a``; ``N'^2 v_A / b`` without ``fpc``) is at most
   ``sigma^2 / margin``, and at least ``m``;
3. read the next ``b`` rows ``B`` of the same without-replacement order and decide with

       Delta' = c + sum_A l_i + N' mean_B(l),   s^2 = N'^2 var_B(l) (1/b - 1/N'),

   adding ``X_nc ~ N(0, max(sigma^2 - s^2, 0))`` and ``X_corr``; if ``a + b >= N`` every row
   is read and the decision is Barker's exact test.

Why it is unbiased: given the pilot ``A``, ``b`` is fixed and ``B`` is a simple random
sample of size ``b`` from the ``N'`` rows not in ``A``, so ``Delta'`` is the fixed-batch
estimator of ``Delta = c + sum_A l_i + sum_rest l_i`` for that population: ``E[Delta' | A] =
Delta`` and ``E[s^2 | A] = Var(Delta' | A)`` exactly (the finite-population factor makes
the sample variance unbiased without replacement). No row of the decision took part in
choosing ``b``, so there is no selection; the pilot's rows enter only through their exact
sum. The acceptance probability given ``A`` is that of the fixed-batch test, whose error
(second-order expansion of ``H(x, v) = P(x + N(0, v) + X_corr > 0)``, ``dH/dv =
H''/2``) is

    P(accept | A) - S(Delta) = -S'''(Delta) k3(Delta') / 3
                               + S''(Delta) E[(s^2 - sigma^2)_+ | A] / 2 + O(1 / b),

``k3(Delta') = N'^3 mu_3 / b^2`` (to O(b/N)) the third cumulant of ``Delta'``: the same
``O(gamma s^3 / sqrt(b))`` skew term a fixed batch has (removed by ``skew=True``), plus a
clipping term that ``margin`` keeps small (``s^2 > sigma^2`` needs the batch variance to
exceed its expectation ``sigma^2 / margin`` by the factor ``margin``). The sequential rule
adds to these a selection term of order ``gamma s`` on every decision whose batch grew.
Averaging over ``A`` keeps the bound, so the chain's stationary error is bounded as for any
fixed-batch Barker test (:func:`validation.stationary_bound`).

The pilot's variance is a noisy estimate, which is why the rule aims at ``sigma^2 / margin``
(default ``margin = 1.3``) rather than ``sigma^2``, and why the pilot grows on heavy-tailed
``l_i``: a pilot that misses the tail under-sizes the batch, its ``s^2`` exceeds
``sigma^2``, ``X_nc`` is clipped to 0 and the noise of the decision exceeds ``sigma^2``,
which flattens the acceptance towards 1/2 (the clipping term above, through
``E[(s^2 - sigma^2)_+]``). With a fixed 50-row pilot this made the posterior sds of a
logistic regression with a lognormal covariate (l_i kurtosis 5 at the median pair, up to
~40) 1-2 % too large; removing the skewness of the l_i did not change the per-pair error,
a larger margin or pilot removed it (``benchmarks/barker_pairs_logistic.py``,
``docs/correction.md``). Growing the pilot keeps the decision unbiased: the pilot's rows
enter ``Delta'`` through their exact sum, so *when* the pilot stops may depend on them
(given ``A`` the rest of the row order is still a uniformly random order of the other
rows). The cap at a quarter of the batch keeps the pilot's overhead below 25 % where the
batch is small (the Gaussian mixture's ~190 rows, whose pilot then stays at ``m``).
"""

from __future__ import annotations

import math
from functools import cache

from design._lib.jit import jit
from design._lib.moments import abs_central_sums, batch_moments3
from design._lib.rules import barker_skew, novak_error

from .engine import GROW

__all__ = ["PILOT_RSE", "pilot_done", "presized_batch", "presized_info", "presized_rule",
           "presized_epilogue"]

#: Stopping statuses, as the sequential Barker rule's: a batch, or all N rows (exact).
STOP, EXACT = 1, 2
#: The pilot grows until the relative standard error of its variance estimate,
#: ``sqrt((kurtosis - 1) / a)``, is at most this (or it is a quarter of its batch).
PILOT_RSE = 0.1


@jit
def presized_batch(a, N, m2_pilot, sigma2, margin, fpc, b_min):
    """Size ``b`` of the decision batch from a pilot of ``a`` rows with central sum ``m2``.

    The smallest ``b >= b_min`` with ``N'^2 v (1/b - 1/N') <= sigma^2 / margin``
    (``N'^2 v / b`` without ``fpc``), ``v = m2 / (a - 1)``, ``N' = N - a``; capped at ``N'``
    (all the remaining rows: the decision is then exact).
    """
    rest = N - a
    v = m2_pilot / (a - 1.0)
    target = sigma2 / margin
    if v <= 0.0:
        b = b_min
    elif fpc:
        b = int(math.ceil(rest * (rest * v) / (target + rest * v)))
    else:
        b = int(math.ceil(rest * (rest * v) / target))
    return min(max(b, b_min), rest)


@jit
def presized_variance(b, rest, m2, fpc):
    """Estimated variance of ``Delta' = N' mean_B + const`` from the decision batch alone."""
    var = rest * (rest * (m2 / (b - 1.0))) / b
    return var * (1.0 - b / rest) if fpc else var


@jit
def central_fourth(values, mean):
    """``sum (v - mean)^4`` over ``values``."""
    s4 = 0.0
    for v in values:
        d = v - mean
        d2 = d * d
        s4 += d2 * d2
    return s4


@jit
def pilot_done(a, m4, m2, b):
    """Whether a pilot of ``a`` rows (central sums ``m2``, ``m4``) may size the batch ``b``
    it prescribes: once the relative standard error of its variance estimate,
    ``sqrt((kurtosis - 1) / a)`` with the pilot's sample kurtosis ``a m4 / m2^2``, is at
    most :data:`PILOT_RSE`, or once the pilot is a quarter of that batch."""
    if 4 * a >= b or m2 <= 0.0:
        return True
    return a * PILOT_RSE * PILOT_RSE >= a * m4 / (m2 * m2) - 1.0


@jit
def presized_rule(values, k, N, stage, mean, m2, m3, mu0, settings, carry):
    """The engine's rule: a pilot of ``m`` rows, grown ``m`` rows at a time until
    :func:`pilot_done`, then one batch of the size it prescribes.

    ``settings``: :class:`~samplers.mhtests.barker.BarkerSettings` (``margin`` included).
    ``carry = (s2, eps, eta, Delta', a, 0)`` at the end (``s2`` unclipped); ``a = 0``
    while the pilot grows.
    """
    m, log_const, sigma, fpc = settings.m, settings.log_const, settings.sigma, settings.fpc
    margin = settings.margin
    n = values.shape[0]
    if n == 0:
        return GROW, False, carry, m
    if n == N:
        return EXACT, False, (0.0, 0.0, 0.0, math.nan, 0.0, 0.0), 0
    if carry[4] == 0.0:                     # the pilot: its rows so far are all n read
        b = presized_batch(n, N, m2, sigma * sigma, margin, fpc, min(m, N - n))
        if not pilot_done(n, central_fourth(values, mean), m2, b):
            return GROW, False, carry, m
        return GROW, False, (carry[0], carry[1], carry[2], n * mean, float(n), 0.0), b
    a = int(carry[4])
    batch = values[a:]
    b = batch.shape[0]
    rest = N - a
    b_mean, b_m2, b_m3 = batch_moments3(batch)
    s2 = presized_variance(b, rest, b_m2, fpc)
    t1, t3 = abs_central_sums(batch, b_mean)
    eps = novak_error(b, b_m2, t1, t3)
    eta = barker_skew(b, rest, b_m2, b_m3, sigma, fpc)
    dstar = log_const + carry[3] + rest * b_mean
    return STOP, False, (s2, eps, eta, dstar, float(a), 0.0), 0


@cache
def presized_epilogue():
    """The draw of a presized decision: ``EXACT`` as Barker's exact test (one uniform);
    otherwise accept iff ``Delta' + X_nc + X_corr > 0``, ``X_nc = sqrt(max(sigma^2 - s2, 0))
    Z`` (one standard normal), ``X_corr`` from the table (one uniform, two with a skew
    family, at the batch's ``eta``)."""
    from design.correction import ppf_kernel, skew_ppf_kernel

    @jit
    def draw(rng, status, accepted, n, N, mean, m2, m3, mu0, settings, carry):
        log_const, sigma, skewed = settings.log_const, settings.sigma, settings.skewed
        x0, h, skew_step = settings.x0, settings.h, settings.skew_step
        density, cdf = settings.density, settings.cdf
        s2, eps, eta, dstar = carry[0], carry[1], carry[2], carry[3]
        if status == EXACT:
            u = rng.random()
            if u == 0.0:
                return False, carry
            return N * mean + log_const + (math.log(u) - math.log1p(-u)) > 0.0, carry
        x_nc = math.sqrt(max(sigma * sigma - s2, 0.0)) * rng.standard_normal()
        if skewed:
            u_mix = rng.random()
            x_corr = skew_ppf_kernel(eta, u_mix, rng.random(), x0, h, skew_step, density, cdf)
        else:
            x_corr = ppf_kernel(rng.random(), x0, h, density[0], cdf[0])
        return dstar + x_nc + x_corr > 0.0, carry

    return draw


@jit
def presized_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """The info row of a presized decision (``BarkerInfo``): ``(n, stage, eps, s2, eta,
    mean, batch)`` with the batch of a STOP decision the rows after the pilot (``carry[4]``
    rows), all N rows for EXACT; NaN (batch 0) after a non-finite batch."""
    info[0], info[1] = n_used, stage
    if status == STOP or status == EXACT:
        info[2], info[3], info[4] = carry[1], carry[0], carry[2]
        info[5], info[6] = mean, n_used
        if status == STOP:
            info[6] = n_used - int(carry[4])
    else:
        info[2] = info[3] = info[4] = info[5] = math.nan
        info[6] = 0
