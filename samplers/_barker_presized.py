"""The presized stopping rule of the minibatch Barker test (issue 17, part 4).

Algorithm 1 of Seita et al. (2017) grows the batch ``m`` rows at a time until the estimated
variance ``s^2`` of ``Delta*`` falls below ``sigma^2``. The batch it stops at is therefore
selected on its own sample variance, and when the ``l_i`` are skewed the sample mean and
the sample variance of a batch are correlated (``Cov(mean, s_l^2) = mu_3 / b``, so their
correlation is ``gamma / sqrt(kurtosis - 1)``, which does not shrink with ``b``): batches
whose variance happens to be small have a biased ``Delta*``. On the Gaussian mixture of the
paper this is an error of up to 0.035 in the acceptance probability at a single pair and a
posterior sd 2-5 % too small (``docs/correction.md``, section 6).

The presized rule decides the batch size before the rows of the decision are seen:

1. read a *pilot* of ``a = m`` rows ``A`` and its sample variance ``v_A``;
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

The pilot's variance is a noisy estimate on skewed data, which is why the rule aims at
``sigma^2 / margin`` (default ``margin = 1.3``) rather than ``sigma^2``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from design._lib.jit import jit
from design._lib.moments import batch_moments, batch_moments3

from . import _seq

#: Statuses of a presized decision (as ``_seq``'s Barker rule: a batch, or all N rows).
STOP, EXACT = _seq.STOP, _seq.EXACT


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


@cache
def presized_loop(row_ratio, row_prefetch):
    """One presized Barker decision for one model kind (memoised compiled loop).

    ``loop(data, theta, theta_new, rng, order, m, margin, log_const, sigma, fpc, skewed, x0,
    h, skew_step, density, cdf) -> (status, accepted, n, stage, mean, s2, eps, eta)``:
    ``status`` is ``_seq.DONE`` or ``_seq.NONFINITE`` (``mean`` then the offending batch
    mean), ``n`` the rows read (pilot and batch), ``stage`` 1 (pilot reached N) or 2,
    ``mean`` the decision batch's mean, ``s2`` its (unclipped) variance estimate, ``eps``
    Corollary 1's bound on the decision batch, ``eta`` its skew.
    """
    fill = _seq.batch_of_ratios(row_ratio, row_prefetch)
    draw = _seq.barker_draw_kernel()

    @jit
    def loop(data, theta, theta_new, rng, order, m, margin, log_const, sigma, fpc, skewed,
             x0, h, skew_step, density, cdf):
        N = order.n_total
        a = min(m, N)
        u = np.empty(a)
        rows = np.empty(a, dtype=np.intp)
        pilot = np.empty(a)
        fill(data, theta, theta_new, rng, order, u, rows, pilot)
        p_mean, p_m2 = batch_moments(pilot)
        if not (math.isfinite(p_mean) and math.isfinite(p_m2)):
            return _seq.NONFINITE, False, a, 1, p_mean, math.nan, math.nan, math.nan
        const = log_const + a * p_mean
        if a == N:
            accepted, eta = draw(rng, EXACT, 0, 0, 0.0, 0.0, 0.0, const, 0.0, sigma, fpc,
                                 skewed, x0, h, skew_step, density, cdf)
            return _seq.DONE, accepted, a, 1, p_mean, 0.0, 0.0, 0.0
        rest = N - a
        b = presized_batch(a, N, p_m2, sigma * sigma, margin, fpc, min(m, rest))
        u = np.empty(b)
        rows = np.empty(b, dtype=np.intp)
        values = np.empty(b)
        fill(data, theta, theta_new, rng, order, u, rows, values)
        mean, m2, m3 = batch_moments3(values)
        if not (math.isfinite(mean) and math.isfinite(m2)):
            return _seq.NONFINITE, False, a + b, 2, mean, math.nan, math.nan, math.nan
        if b == rest:
            accepted, eta = draw(rng, EXACT, b, rest, mean, m2, m3, const, 0.0, sigma, fpc,
                                 skewed, x0, h, skew_step, density, cdf)
            return _seq.DONE, accepted, N, 2, mean, 0.0, 0.0, 0.0
        s2 = presized_variance(b, rest, m2, fpc)
        t1, t3 = _seq.abs_central_sums(values, mean)
        eps = _seq.novak_error(b, m2, t1, t3)
        accepted, eta = draw(rng, STOP, b, rest, mean, m2, m3, const, min(s2, sigma * sigma),
                             sigma, fpc, skewed, x0, h, skew_step, density, cdf)
        return _seq.DONE, accepted, a + b, 2, mean, s2, eps, eta

    return loop


def presized_python(rng, view, batches, theta, theta_new, log_const, m, margin, sigma, fpc,
                    skewed, draw_args):
    """The same decision for models without row kernels (and the reference of the loop)."""
    N = view.N
    a = min(m, N)
    pilot = view.ratio(theta, theta_new, batches.take(a))
    p_mean, p_m2 = batch_moments(pilot)
    if not (math.isfinite(p_mean) and math.isfinite(p_m2)):
        return _seq.NONFINITE, False, a, 1, p_mean, math.nan, math.nan, math.nan
    const = log_const + a * p_mean
    draw = _seq.barker_draw_kernel()
    if a == N:
        accepted, _ = draw(rng, EXACT, 0, 0, 0.0, 0.0, 0.0, const, 0.0, sigma, fpc, skewed,
                           *draw_args)
        return _seq.DONE, accepted, a, 1, p_mean, 0.0, 0.0, 0.0
    rest = N - a
    b = presized_batch(a, N, p_m2, sigma * sigma, margin, fpc, min(m, rest))
    values = view.ratio(theta, theta_new, batches.take(b))
    mean, m2, m3 = batch_moments3(values)
    if not (math.isfinite(mean) and math.isfinite(m2)):
        return _seq.NONFINITE, False, a + b, 2, mean, math.nan, math.nan, math.nan
    if b == rest:
        accepted, _ = draw(rng, EXACT, b, rest, mean, m2, m3, const, 0.0, sigma, fpc, skewed,
                           *draw_args)
        return _seq.DONE, accepted, N, 2, mean, 0.0, 0.0, 0.0
    s2 = presized_variance(b, rest, m2, fpc)
    t1, t3 = _seq.abs_central_sums(values, mean)
    eps = _seq.novak_error(b, m2, t1, t3)
    accepted, eta = draw(rng, STOP, b, rest, mean, m2, m3, const, min(s2, sigma * sigma),
                         sigma, fpc, skewed, *draw_args)
    return _seq.DONE, accepted, a + b, 2, mean, s2, eps, eta
