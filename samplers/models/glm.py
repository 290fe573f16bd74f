"""Generalised linear models, compiled: :class:`GLM` and its families.

Every family's row log-likelihood is a function of one linear predictor,
``l_i(theta) = w_i f(y_i, n_i, eta_i) / K`` with ``eta_i = x_i . theta + o_i`` (offset
``o_i``, frequency weight ``w_i``, trials ``n_i`` of a binomial row, temperature K). A family
and link are three small jitted scalar functions of ``(y, n, eta, params)``:

* ``core`` -- the part of ``log p(y | eta)`` that depends on eta;
* ``const`` -- the rest (``-log y!``, the binomial coefficient, ...), read by the log-likelihood
  and not by the ratio ``l_i``, where it cancels;
* ``derivs`` -- ``(f', f'')`` in eta.

:func:`_row_kernels` closes over them and gives the row kernels of
:class:`~samplers.models.BaseModel` (``_row_loglik``, ``_row_ratio``, ``_row_grad``) and the
``link`` / ``derivs`` of :mod:`samplers.models._glm`, over the data tuple
``(X, y, trials, offset, weights, params, 1/K)``. ``trials``, ``offset`` and ``weights`` hold
one entry per row, or a single entry that every row shares (1, 0 and 1 when not given).

What the compiled loop needs from a family
------------------------------------------
Nothing beyond those three functions. :class:`GLM` hands out the row kernels built from them
as per-instance properties (``_row_loglik``, ``_row_ratio``, ``_row_grad``; ``_row_prefetch``
is the class's, :func:`~samplers.models._kernels.prefetch_data01`) and ``_kernel_data()``;
the chain loop of :mod:`samplers._blocks` then runs it as any built-in model (its prior a
built-in one, ``logprior`` and the gradients :class:`~samplers.models.BaseModel`'s).
:func:`samplers.models._glm.glm_kernels` gives ControlVariates, the Newton mode search and the
remainder bounds the family's ``link`` / ``derivs`` and suprema, per instance. A new family
is one entry of :data:`FAMILIES` (and its parameters in ``GLM.__init__``).

Bounds
------
The control variates' residual bound needs ``M2 = sup |f''|`` (order 1) or ``M3 = sup |f'''|``
(order 2) over eta and rows, and the confidence test on the raw model a Lipschitz constant
``M1 = sup |f'|``. They exist for some families only (all times ``max w_i / K``):

===================  ====================  ========================  ========================
family, link         M1                    M2                        M3
===================  ====================  ========================  ========================
binomial, logit      max n                 max n / 4                 max n / (6 sqrt 3)
binomial, probit     none (f' ~ -eta)      max n                     0.29572 max n
binomial, cloglog    none                  none (f'' ~ -e^eta)       none
poisson, log         none                  none (f'' = -e^eta)       none
negative binomial    max(r, max y)         (max y + r) / 4           (max y + r) / (6 sqrt 3)
gamma, log           none                  none (f'' = -k y e^-eta)  none
gaussian, identity   none (f' ~ eta)       1 / s^2                   0
Student-t, identity  (df+1)/(2 s sqrt df)  (df+1)/(df s^2)           as RobustRegression
===================  ====================  ========================  ========================

negative binomial, gamma and gaussian with their parameter estimated: none (see below).

A family without ``M2`` / ``M3`` still gets the compiled chain loop, the compiled full passes
(mode by Newton, control-variate sums) and every test that reads no bound (exact, Austere,
Barker, FPC-normal, and the confidence test with ``range="full-data"``); its
:meth:`GLM.loglik_ratio_bound` and the control variates' ``residual_bound`` refuse with a
TypeError that says so.

The family parameter, estimated
-------------------------------
``GLM(X, y, "negative_binomial")`` without ``dispersion=`` (likewise ``"gamma"`` without
``shape=``, ``"gaussian"`` with ``scale="estimate"``) estimates it: theta gets a last
coordinate ``s``, the log of the dispersion r, the shape k or the noise sd. The rows are then
functions of two predictors, ``l_i = w_i f(y_i, eta_i, s) / K``, with gradient
``(f_e x_i, f_s)`` and Hessian ``[[f_ee x_i x_i^T, f_es x_i], [f_es x_i^T, f_ss]]``; a family
is ``core(y, n, eta, s)``, ``const(y, n)`` and ``derivs(y, n, eta, s) -> (f_e, f_s, f_ee, f_es,
f_ss)`` (table :data:`NUISANCE`), the full passes (:func:`samplers.models._glm.glm_sums`), the
control variates (a Taylor proxy in ``(eta, s)``) and the chain loop stay compiled. The
digamma and trigamma functions the negative binomial's and gamma's derivatives in s need are
:func:`_digamma` and :func:`_trigamma` (tested against SciPy). No bound holds: every
derivative in s grows without bound with r, k or 1/sigma, so the confidence test needs
``range="full-data"`` and the control variates have no residual bound (exact, Austere,
Barker and FPC-normal tests read none). The default prior is flat on the coefficients and
``N(0, 3^2)`` on s (:data:`NUISANCE_PRIOR_SD`): the negative binomial needs a proper one, its
likelihood tending to the Poisson's as r grows. A ``prior=`` given covers all d + 1
coordinates (a ``GaussianPrior`` with ``sd=inf`` is flat on a coordinate).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np
from scipy import special

from design._lib.checks import check_positive
from design._lib.distribute import as_cluster, map_ranges
from design._lib.jit import jit, row_jit
from design._lib.vecmath import log_sigmoid
from ..priors import GaussianPrior, Prior
from ._base import (SCAN_CHUNK, BaseModel, _is_store, as_data_array, data_checks_skipped,
                    data_rows, regression_data, scan_rows)
from ._kernels import dots, prefetch_data01, step_range

__all__ = ["GLM", "FAMILIES"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
#: ``sup_x |d^3/dx^3 log Phi(x)|`` (at x = 1.00237), by 40-digit quadrature-free
#: differentiation (mpmath); ``tests/samplers/test_glm.py`` checks it on a grid.
PROBIT_M3 = 0.29571882
#: ``sup |sigma (1 - sigma)(1 - 2 sigma)|``, the third derivative of ``log sigmoid``.
LOGIT_M3 = 1.0 / (6.0 * math.sqrt(3.0))


@row_jit
def _at(a, i):
    """``a[i]``, or ``a[0]`` when one value stands for every row."""
    return a[0] if a.shape[0] == 1 else a[i]


# --- binomial (Bernoulli: n = 1) --------------------------------------------------------------


@row_jit
def _logit_core(y, n, eta, p):
    # y = 0 or y = n (every Bernoulli row): one log sigmoid, the same value (the other
    # term is 0 times a finite number)
    if y == 0.0:
        return n * log_sigmoid(-eta)
    if y == n:
        return y * log_sigmoid(eta)
    return y * log_sigmoid(eta) + (n - y) * log_sigmoid(-eta)


@row_jit
def _binomial_const(y, n, p):
    if n == 1.0:
        return 0.0
    return math.lgamma(n + 1.0) - math.lgamma(y + 1.0) - math.lgamma(n - y + 1.0)


@row_jit
def _logit_derivs(y, n, eta, p):
    # f' = y sigmoid(-eta) - (n - y) sigmoid(eta), f'' = -n sigmoid(eta) sigmoid(-eta)
    e = math.exp(-abs(eta))
    s_pos = 1.0 / (1.0 + e) if eta >= 0.0 else e / (1.0 + e)     # sigmoid(eta)
    s_neg = e / (1.0 + e) if eta >= 0.0 else 1.0 / (1.0 + e)     # sigmoid(-eta)
    return y * s_neg - (n - y) * s_pos, -n * e / ((1.0 + e) * (1.0 + e))


@row_jit
def _probit_terms(x):
    """``(log Phi(x), lambda, lambda (x + lambda))`` with ``lambda = phi(x) / Phi(x)``; the
    asymptotic series ``Phi(x) ~ phi(x) / (-x) (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8)`` below
    x = -30 (relative error under 1e-12 there), where erfc underflows soon after."""
    if x > -30.0:
        tail = 0.5 * math.erfc(-x * _SQRT_HALF)                   # Phi(x)
        log_cdf = math.log1p(-0.5 * math.erfc(x * _SQRT_HALF)) if x > 0.0 else math.log(tail)
        lam = math.exp(-0.5 * x * x - _HALF_LOG_2PI) / tail
        return log_cdf, lam, lam * (x + lam)
    z = 1.0 / (x * x)
    series_m1 = z * (-1.0 + z * (3.0 + z * (-15.0 + z * 105.0)))  # S - 1
    lam = -x / (1.0 + series_m1)
    return (-0.5 * x * x - math.log(-x) - _HALF_LOG_2PI + math.log1p(series_m1), lam,
            lam * x * series_m1 / (1.0 + series_m1))


@row_jit
def _probit_core(y, n, eta, p):
    if y == 0.0:
        b, _, _ = _probit_terms(-eta)
        return n * b
    a, _, _ = _probit_terms(eta)
    if n == y:
        return y * a
    b, _, _ = _probit_terms(-eta)
    return y * a + (n - y) * b


@row_jit
def _probit_derivs(y, n, eta, p):
    # y = 0 or y = n (every Bernoulli row): the terms of one side only
    if y == 0.0:
        _, lam_m, curv_m = _probit_terms(-eta)
        return -n * lam_m, -n * curv_m
    _, lam, curv = _probit_terms(eta)
    if y == n:
        return y * lam, -y * curv
    _, lam_m, curv_m = _probit_terms(-eta)
    return y * lam - (n - y) * lam_m, -y * curv - (n - y) * curv_m


@row_jit
def _cloglog_core(y, n, eta, p):
    # p = 1 - exp(-mu), mu = e^eta: log p = log(-expm1(-mu)), log(1 - p) = -mu
    mu = math.exp(eta)
    value = -(n - y) * mu
    if y != 0.0:
        value += y * math.log(-math.expm1(-mu))
    return value


@row_jit
def _cloglog_derivs(y, n, eta, p):
    # d/deta log p = g = mu / expm1(mu); d/deta g = g (1 - mu / (-expm1(-mu)))
    mu = math.exp(eta)
    if mu < 1e-4:   # series: g = 1 - mu/2 + ..., 1 - mu / (1 - e^-mu) = -mu/2 - mu^2/12 + ...
        g = 1.0 - mu * (0.5 - mu / 12.0)
        h = -mu * (0.5 + mu / 12.0)
    else:
        g = mu / math.expm1(mu)
        h = 1.0 - mu / -math.expm1(-mu)
    return y * g - (n - y) * mu, y * g * h - (n - y) * mu


# --- counts ---------------------------------------------------------------------------------


@row_jit
def _poisson_core(y, n, eta, p):
    return y * eta - math.exp(eta)


@row_jit
def _poisson_const(y, n, p):
    return -math.lgamma(y + 1.0)


@row_jit
def _poisson_derivs(y, n, eta, p):
    mu = math.exp(eta)
    return y - mu, -mu


# negative binomial, mean mu = e^eta and dispersion r (variance mu + mu^2 / r); params =
# (r, log r, lgamma(r)). With t = eta - log r, mu / (r + mu) = sigmoid(t) and
# log(r + mu) = log r - log sigmoid(-t).


@row_jit
def _negbin_core(y, n, eta, p):
    return y * eta + (y + p[0]) * log_sigmoid(p[1] - eta)


@row_jit
def _negbin_const(y, n, p):
    return math.lgamma(y + p[0]) - math.lgamma(y + 1.0) - p[2] - y * p[1]


@row_jit
def _negbin_derivs(y, n, eta, p):
    t = eta - p[1]
    e = math.exp(-abs(t))
    s = 1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e)     # sigmoid(t)
    c = y + p[0]
    return y - c * s, -c * e / ((1.0 + e) * (1.0 + e))


# gamma, mean mu = e^eta and shape k; params = (k, k log k - lgamma(k))


@row_jit
def _gamma_core(y, n, eta, p):
    return -p[0] * (eta + y * math.exp(-eta))


@row_jit
def _gamma_const(y, n, p):
    return p[1] + (p[0] - 1.0) * math.log(y)


@row_jit
def _gamma_derivs(y, n, eta, p):
    v = p[0] * y * math.exp(-eta)
    return v - p[0], -v


# --- real responses (identity link); params = (scale, ...) -----------------------------------


@row_jit
def _gaussian_core(y, n, eta, p):
    r = (y - eta) / p[0]
    return -0.5 * r * r


@row_jit
def _gaussian_const(y, n, p):
    return -math.log(p[0]) - _HALF_LOG_2PI


@row_jit
def _gaussian_derivs(y, n, eta, p):
    q = 1.0 / (p[0] * p[0])
    return (y - eta) * q, -q


# Student-t: params = (scale, df, log normaliser)


@row_jit
def _student_core(y, n, eta, p):
    z = (y - eta) / p[0]
    return -0.5 * (p[1] + 1.0) * math.log1p(z * z / p[1])


@row_jit
def _student_const(y, n, p):
    return p[2]


@row_jit
def _student_derivs(y, n, eta, p):
    r = y - eta
    v = p[1] * p[0] * p[0]
    den = v + r * r
    return (p[1] + 1.0) * r / den, -(p[1] + 1.0) * (v - r * r) / (den * den)


# --- families whose parameter is estimated: s = log r, log k or log sigma is theta[d] --------
# ``core(y, n, eta, s)`` the part of log p(y | eta, s) that depends on eta or s, ``const(y, n)``
# the rest, ``derivs(y, n, eta, s) -> (f_e, f_s, f_ee, f_es, f_ss)`` (subscripts: partial
# derivatives in eta and s).


@row_jit
def _digamma(x):
    """``psi(x)`` for x > 0: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to x >= 10, then
    the asymptotic series to x^-14 (truncation below 1e-16 there)."""
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
        1.0 / 240.0 - f * (1.0 / 132.0 - f * (691.0 / 32760.0 - f / 12.0))))))
    return acc + math.log(x) - 0.5 / x - series


@row_jit
def _trigamma(x):
    """``psi'(x)`` for x > 0: ``psi'(x) = psi'(x + 1) + 1/x^2`` up to x >= 10, then the
    asymptotic series to x^-15."""
    acc = 0.0
    while x < 10.0:
        acc += 1.0 / (x * x)
        x += 1.0
    z = 1.0 / x
    f = z * z
    series = z + 0.5 * f + z * f * (1.0 / 6.0 - f * (1.0 / 30.0 - f * (1.0 / 42.0 - f * (
        1.0 / 30.0 - f * (5.0 / 66.0 - f * (691.0 / 2730.0 - f * 7.0 / 6.0))))))
    return acc + series


@row_jit
def _digamma_trigamma(x):
    """``(_digamma(x), _trigamma(x))`` for x > 0 (to rounding), the two recurrences in one
    loop (one division per step)."""
    a = 0.0
    b = 0.0
    while x < 10.0:
        q = 1.0 / x
        a -= q
        b += q * q
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
        1.0 / 240.0 - f * (1.0 / 132.0 - f * (691.0 / 32760.0 - f / 12.0))))))
    z = 1.0 / x
    series1 = z + 0.5 * f + z * f * (1.0 / 6.0 - f * (1.0 / 30.0 - f * (1.0 / 42.0 - f * (
        1.0 / 30.0 - f * (5.0 / 66.0 - f * (691.0 / 2730.0 - f * 7.0 / 6.0))))))
    return a + math.log(x) - 0.5 / x - series, b + series1


@row_jit
def _psi_sums(y, r):
    """``(sum_{j<y} 1/(r+j), -sum_{j<y} 1/(r+j)^2)``: psi(y + r) - psi(r) and
    psi'(y + r) - psi'(r) for a small count y, without cancellation."""
    a = 0.0
    b = 0.0
    for j in range(int(y)):
        q = 1.0 / (r + j)
        a += q
        b -= q * q
    return a, b


@row_jit
def _psi_diffs(y, r):
    """``(psi(y + r) - psi(r), psi'(y + r) - psi'(r))`` for a count y >= 0: the sums of
    :func:`_psi_sums` for y < 16 (no cancellation), else the differences of
    :func:`_digamma` and :func:`_trigamma`."""
    if y < 16.0:
        return _psi_sums(y, r)
    return _digamma(y + r) - _digamma(r), _trigamma(y + r) - _trigamma(r)


@row_jit
def _psi_diffs_at(y, r, psi_r, psi1_r):
    """:func:`_psi_diffs` with ``psi_r = _digamma(r)`` and ``psi1_r = _trigamma(r)`` given
    (per-step constants of the control variates): the same bits."""
    if y < 16.0:
        return _psi_sums(y, r)
    return _digamma(y + r) - psi_r, _trigamma(y + r) - psi1_r


#: Counts below which :func:`_log_rising` is the log of a product (the rows of
#: :func:`_psi_diffs` switch at the same count).
RISING_MAX = 16


@row_jit
def _log_rising(y, r, s):
    """``lgamma(y + r) - lgamma(r) - y s`` for a count y >= 0 and ``r = e^s > 0``.

    ``lgamma(y + r) - lgamma(r) = sum_{j<y} log(r + j)``, so for an integer ``y <``
    :data:`RISING_MAX` it is the log of one product: ``log prod_{0<j<y} (1 + j / r)`` for
    r >= 1, ``(1 - y) s + log prod_{0<j<y} (r + j)`` below (each factor between 1 and 16, so
    the product neither overflows nor underflows), one ``log`` and y - 1 multiplications in
    place of two ``lgamma``; without the cancellation of two large lgamma at large r (and
    finite where ``r = e^s`` overflows or underflows). Other y: the two ``lgamma``."""
    if y == 0.0:
        return 0.0
    if y >= RISING_MAX or y != math.floor(y):
        return math.lgamma(y + r) - math.lgamma(r) - y * s
    k = int(y)
    p = 1.0
    if r >= 1.0:
        q = 1.0 / r
        for j in range(1, k):
            p *= 1.0 + j * q
        return math.log(p)
    for j in range(1, k):
        p *= r + j
    return (1.0 - y) * s + math.log(p)


@row_jit
def _log_sigmoid_scalar(z):
    """``log sigmoid(z) = min(z, 0) - log1p(e^-|z|)`` by the C library's ``exp`` and
    ``log1p`` (1 ulp each): in a row kernel, evaluated one row at a time, they cost less than
    :func:`~design._lib.vecmath.log_sigmoid`'s branch-free polynomials (written for loops
    the compiler vectorises); the two agree to a few ulp. NaN gives NaN."""
    low = 0.0 if z >= 0.0 else z
    return low - math.log1p(math.exp(-abs(z)))


@row_jit
def _negbin2_core(y, n, eta, s):
    # s = log r: y (eta - s) + (y + r) log sigmoid(s - eta) + lgamma(y + r) - lgamma(r), the
    # last two by _log_rising (with its y s)
    r = math.exp(s)
    return y * eta + (y + r) * log_sigmoid(s - eta) + _log_rising(y, r, s)


@row_jit
def _rising_diff(y, r, s, r_new, s_new):
    """``_log_rising(y, r_new, s_new) - _log_rising(y, r, s)``: when both r and r_new are on
    the same side of 1, one loop over the factors of both products and one ``log`` of their
    quotient (each product between 1 and 15!, so the quotient is exact to rounding)."""
    return _rising_diff_q(y, r, s, r_new, s_new, 1.0 / r, 1.0 / r_new)


@row_jit
def _rising_diff_q(y, r, s, r_new, s_new, q, q_new):
    """:func:`_rising_diff` with ``q = 1 / r`` and ``q_new = 1 / r_new`` given (per-step
    constants; read only where r >= 1, as :func:`_rising_diff` computes them): the same bits
    (at y = 1 both products are empty: the log of their quotient is 0, and so the result)."""
    if y == 0.0 or y == 1.0:
        return 0.0
    if y >= RISING_MAX or y != math.floor(y) or (r >= 1.0) != (r_new >= 1.0):
        return _log_rising(y, r_new, s_new) - _log_rising(y, r, s)
    k = int(y)
    p = 1.0
    p_new = 1.0
    if r >= 1.0:
        for j in range(1, k):
            p *= 1.0 + j * q
            p_new *= 1.0 + j * q_new
        return math.log(p_new / p)
    for j in range(1, k):
        p *= r + j
        p_new *= r_new + j
    return (1.0 - y) * (s_new - s) + math.log(p_new / p)


@row_jit
def _negbin2_diff(y, n, eta, eta_new, s, s_new):
    """``_negbin2_core(y, n, eta_new, s_new) - _negbin2_core(y, n, eta, s)`` to rounding,
    the two rising factorials in one pass (:func:`_rising_diff`)."""
    r = math.exp(s)
    r_new = math.exp(s_new)
    return (y * (eta_new - eta) + ((y + r_new) * _log_sigmoid_scalar(s_new - eta_new)
                                   - (y + r) * _log_sigmoid_scalar(s - eta))
            + _rising_diff(y, r, s, r_new, s_new))


@row_jit
def _negbin2_step(s, s_new, s_c):
    """Per-step constants of the negative binomial with r estimated (functions of theta,
    theta' and the centre only): ``(r, r', r*, 1/r, 1/r', psi(r*), psi'(r*))``, r = e^s."""
    r = math.exp(s)
    r_new = math.exp(s_new)
    r_c = math.exp(s_c)
    return (r, r_new, r_c, 1.0 / r, 1.0 / r_new, _digamma(r_c), _trigamma(r_c))


@row_jit
def _negbin2_diff_at(y, n, eta, eta_new, s, s_new, c):
    """:func:`_negbin2_diff` with the per-step constants ``c`` of :func:`_negbin2_step`."""
    r, r_new = c[0], c[1]
    return (y * (eta_new - eta) + ((y + r_new) * _log_sigmoid_scalar(s_new - eta_new)
                                   - (y + r) * _log_sigmoid_scalar(s - eta))
            + _rising_diff_q(y, r, s, r_new, s_new, c[3], c[4]))


@row_jit
def _negbin2_const(y, n):
    return -math.lgamma(y + 1.0)


@row_jit
def _negbin2_derivs(y, n, eta, s):
    # p = mu / (r + mu) = sigmoid(eta - s), c = y + r, D1, D2 the psi differences:
    # f_e = y - c p, f_s = -y + r log(1 - p) + c p + r D1, f_ee = -c p (1 - p),
    # f_es = -r p + c p (1 - p), f_ss = r log(1 - p) + 2 r p - c p (1 - p) + r D1 + r^2 D2
    r = math.exp(s)
    t = eta - s
    e = math.exp(-abs(t))
    u = 1.0 / (1.0 + e)
    p = u if t >= 0.0 else e * u
    pq = e * u * u
    c = y + r
    d1, d2 = _psi_diffs(y, r)
    rl = r * ((-t if t > 0.0 else 0.0) - math.log1p(e))     # r log sigmoid(-t), e reused
    return (y - c * p, -y + rl + c * p + r * d1, -c * pq, -r * p + c * pq,
            rl + 2.0 * r * p - c * pq + r * d1 + r * r * d2)


@row_jit
def _negbin2_derivs_at(y, n, eta, s, k):
    """:func:`_negbin2_derivs` at the centre (``s = s*``) with the per-step constants ``k``
    of :func:`_negbin2_step` (r*, psi(r*), psi'(r*)): the same bits."""
    r = k[2]
    t = eta - s
    e = math.exp(-abs(t))
    u = 1.0 / (1.0 + e)
    p = u if t >= 0.0 else e * u
    pq = e * u * u
    c = y + r
    d1, d2 = _psi_diffs_at(y, r, k[5], k[6])
    rl = r * ((-t if t > 0.0 else 0.0) - math.log1p(e))
    return (y - c * p, -y + rl + c * p + r * d1, -c * pq, -r * p + c * pq,
            rl + 2.0 * r * p - c * pq + r * d1 + r * r * d2)


@row_jit
def _gamma2_core(y, n, eta, s):
    # s = log k: k s - lgamma(k) + k log y - k (eta + y e^-eta)
    k = math.exp(s)
    return k * (s + math.log(y) - eta - y * math.exp(-eta)) - math.lgamma(k)


@row_jit
def _gamma2_diff(y, n, eta, eta_new, s, s_new):
    """``_gamma2_core(y, n, eta_new, s_new) - _gamma2_core(y, n, eta, s)`` to rounding, with
    one ``log y``."""
    k = math.exp(s)
    k_new = math.exp(s_new)
    ly = math.log(y)
    return ((k_new * (s_new + ly - eta_new - y * math.exp(-eta_new))
             - k * (s + ly - eta - y * math.exp(-eta)))
            - (math.lgamma(k_new) - math.lgamma(k)))


@row_jit
def _gamma2_step(s, s_new, s_c):
    """Per-step constants of the gamma with its shape estimated: ``(k, k', lgamma(k') -
    lgamma(k), k*, psi(k*), psi'(k*))``, k = e^s."""
    k = math.exp(s)
    k_new = math.exp(s_new)
    k_c = math.exp(s_c)
    psi, psi1 = _digamma_trigamma(k_c)
    return (k, k_new, math.lgamma(k_new) - math.lgamma(k), k_c, psi, psi1)


@row_jit
def _gamma2_diff_at(y, n, eta, eta_new, s, s_new, c):
    """:func:`_gamma2_diff` with the per-step constants ``c`` of :func:`_gamma2_step`."""
    k, k_new = c[0], c[1]
    ly = math.log(y)
    return ((k_new * (s_new + ly - eta_new - y * math.exp(-eta_new))
             - k * (s + ly - eta - y * math.exp(-eta)))
            - c[2])


@row_jit
def _gamma2_derivs_at(y, n, eta, s, c):
    """:func:`_gamma2_derivs` at the centre with the constants ``c`` of :func:`_gamma2_step`."""
    k = c[3]
    v = y * math.exp(-eta)
    f_e = k * (v - 1.0)
    f_s = k * (s + 1.0 - c[4] + math.log(y) - eta - v)
    return f_e, f_s, -k * v, f_e, f_s + k - k * k * c[5]


@row_jit
def _gamma2_const(y, n):
    return -math.log(y)


@row_jit
def _gamma2_derivs(y, n, eta, s):
    # v = y e^-eta: f_e = k (v - 1), f_ee = -k v, f_es = f_e,
    # f_s = k (s + 1 - psi(k) + log y - eta - v), f_ss = f_s + k - k^2 psi'(k)
    k = math.exp(s)
    v = y * math.exp(-eta)
    f_e = k * (v - 1.0)
    psi, psi1 = _digamma_trigamma(k)
    f_s = k * (s + 1.0 - psi + math.log(y) - eta - v)
    return f_e, f_s, -k * v, f_e, f_s + k - k * k * psi1


@row_jit
def _gaussian2_core(y, n, eta, s):
    # s = log sigma: -s - (y - eta)^2 e^(-2 s) / 2
    r = y - eta
    return -s - 0.5 * r * r * math.exp(-2.0 * s)


@row_jit
def _gaussian2_step(s, s_new, s_c):
    """Per-step constants of the Gaussian with its sd estimated: ``e^(-2 s)`` at theta,
    theta' and the centre."""
    return (math.exp(-2.0 * s), math.exp(-2.0 * s_new), math.exp(-2.0 * s_c))


@row_jit
def _gaussian2_diff_at(y, n, eta, eta_new, s, s_new, c):
    """``_gaussian2_core(.., eta_new, s_new) - _gaussian2_core(.., eta, s)`` with the
    constants of :func:`_gaussian2_step`: the same bits."""
    r_new = y - eta_new
    r = y - eta
    return (-s_new - 0.5 * r_new * r_new * c[1]) - (-s - 0.5 * r * r * c[0])


@row_jit
def _gaussian2_derivs_at(y, n, eta, s, c):
    r = y - eta
    w = c[2]
    rw = r * w
    return rw, r * rw - 1.0, -w, -2.0 * rw, -2.0 * r * rw


@row_jit
def _gaussian2_const(y, n):
    return -_HALF_LOG_2PI


@row_jit
def _gaussian2_derivs(y, n, eta, s):
    r = y - eta
    w = math.exp(-2.0 * s)
    rw = r * w
    return rw, r * rw - 1.0, -w, -2.0 * rw, -2.0 * r * rw


@cache
def _nuisance_row_kernels(core, const, derivs, diff=None):
    """``(row_loglik, row_ratio, row_grad, link, derivs, ratio)`` of a family whose parameter
    ``s = theta[d]`` is estimated (d the columns of X): ``link(data, i, eta, s)``,
    ``derivs(data, i, eta, s) -> (f_e, f_s, f_ee, f_es, f_ss)`` and ``ratio(data, i, eta,
    eta_new, s, s_new)`` (the difference of two links without ``const``: ``diff`` or two
    ``core``), weighted and tempered."""
    if diff is None:
        @row_jit
        def diff(y, n, eta, eta_new, s, s_new):
            return core(y, n, eta_new, s_new) - core(y, n, eta, s)

    @row_jit
    def link(data, i, eta, s):
        X, y, trials, offset, weights, params, inv_temp = data
        n = _at(trials, i)
        e = eta + _at(offset, i)
        return _at(weights, i) * (core(y[i], n, e, s) + const(y[i], n)) * inv_temp

    @row_jit
    def row_derivs(data, i, eta, s):
        X, y, trials, offset, weights, params, inv_temp = data
        f_e, f_s, f_ee, f_es, f_ss = derivs(y[i], _at(trials, i), eta + _at(offset, i), s)
        w = _at(weights, i) * inv_temp
        return w * f_e, w * f_s, w * f_ee, w * f_es, w * f_ss

    @row_jit
    def row_loglik(data, i, theta):
        X = data[0]
        a = 0.0
        for j in range(X.shape[1]):
            a += X[i, j] * theta[j]
        return link(data, i, a, theta[X.shape[1]])

    @row_jit
    def ratio(data, i, eta, eta_new, s, s_new):
        X, y, trials, offset, weights, params, inv_temp = data
        n = _at(trials, i)
        o = _at(offset, i)
        return _at(weights, i) * diff(y[i], n, eta + o, eta_new + o, s, s_new) * inv_temp

    @row_jit
    def row_ratio(data, i, theta, theta_new):
        X = data[0]
        a, a_new = dots(X, i, theta, theta_new)
        d = X.shape[1]
        return ratio(data, i, a, a_new, theta[d], theta_new[d])

    @row_jit
    def row_grad(data, i, theta, out):
        X = data[0]
        d = X.shape[1]
        a = 0.0
        for j in range(d):
            a += X[i, j] * theta[j]
        f_e, f_s, _, _, _ = row_derivs(data, i, a, theta[d])
        for j in range(d):
            out[j] = f_e * X[i, j]
        out[d] = f_s

    return row_loglik, row_ratio, row_grad, link, row_derivs, ratio


@cache
def _nuisance_step_kernels(diff_at, derivs_at):
    """``(ratio_at, derivs_at)`` over the GLM's data tuple for the control variates' ratio of
    a family with per-step constants ``c`` (``_Link.step``): ``ratio_at(data, i, eta,
    eta_new, s, s_new, c)`` and ``derivs_at(data, i, eta, s_c, c)``, weighted and tempered as
    :func:`_nuisance_row_kernels`' ``ratio`` and ``derivs`` (the same bits)."""

    @row_jit
    def ratio_at(data, i, eta, eta_new, s, s_new, c):
        X, y, trials, offset, weights, params, inv_temp = data
        n = _at(trials, i)
        o = _at(offset, i)
        return (_at(weights, i) * diff_at(y[i], n, eta + o, eta_new + o, s, s_new, c)
                * inv_temp)

    @row_jit
    def row_derivs_at(data, i, eta, s, c):
        X, y, trials, offset, weights, params, inv_temp = data
        f_e, f_s, f_ee, f_es, f_ss = derivs_at(y[i], _at(trials, i), eta + _at(offset, i), s, c)
        w = _at(weights, i) * inv_temp
        return w * f_e, w * f_s, w * f_ee, w * f_es, w * f_ss

    return ratio_at, row_derivs_at


# --- row kernels over data = (X, y, trials, offset, weights, params, 1/K) --------------------


@cache
def _row_kernels(core, const, derivs):
    """``(row_loglik, row_ratio, row_grad, link, derivs, ratio)`` of one family and link:
    ``ratio(data, i, eta, eta_new)`` is ``link(data, i, eta_new) - link(data, i, eta)`` to
    rounding, without the ``const`` terms, which cancel (each costs up to three ``lgamma``)."""

    @row_jit
    def row_eta(data, i, theta):
        X, y, trials, offset, weights, params, inv_temp = data
        a = 0.0
        for j in range(X.shape[1]):
            a += X[i, j] * theta[j]
        return a

    @row_jit
    def link(data, i, eta):
        X, y, trials, offset, weights, params, inv_temp = data
        n = _at(trials, i)
        e = eta + _at(offset, i)
        return _at(weights, i) * (core(y[i], n, e, params) + const(y[i], n, params)) * inv_temp

    @row_jit
    def row_derivs(data, i, eta):
        X, y, trials, offset, weights, params, inv_temp = data
        f1, f2 = derivs(y[i], _at(trials, i), eta + _at(offset, i), params)
        w = _at(weights, i) * inv_temp
        return w * f1, w * f2

    @row_jit
    def row_loglik(data, i, theta):
        return link(data, i, row_eta(data, i, theta))

    @row_jit
    def ratio(data, i, eta, eta_new):
        X, y, trials, offset, weights, params, inv_temp = data
        n = _at(trials, i)
        o = _at(offset, i)
        diff = core(y[i], n, eta_new + o, params) - core(y[i], n, eta + o, params)
        return _at(weights, i) * diff * inv_temp

    @row_jit
    def row_ratio(data, i, theta, theta_new):
        a, a_new = dots(data[0], i, theta, theta_new)
        return ratio(data, i, a, a_new)

    @row_jit
    def row_grad(data, i, theta, out):
        X = data[0]
        w, _ = row_derivs(data, i, row_eta(data, i, theta))
        for j in range(X.shape[1]):
            out[j] = w * X[i, j]

    return row_loglik, row_ratio, row_grad, link, row_derivs, ratio


# --- the families ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Link:
    """One family and link: its scalar kernels and its suprema (functions of the model's
    :class:`_Summary`, before the factor ``max w / K``; None where the supremum is infinite)."""

    core: Callable
    const: Callable
    derivs: Callable
    m1: Callable | None
    m2: Callable | None
    m3: Callable | None
    why: str = ""   # for a link without M2 / M3: which derivative is unbounded
    #: The family parameter estimated as theta[d] (its log), or "": then ``core`` and
    #: ``derivs`` take ``s`` in place of ``params`` and ``const`` takes no ``params``.
    nuisance: str = ""
    #: With ``nuisance``: ``diff(y, n, eta, eta_new, s, s_new)``, the difference of two
    #: ``core`` computed in one pass (shared work), or None (two ``core``).
    diff: Callable | None = None
    #: With ``nuisance``, optional: ``step(s, s_new, s_c) -> c``, the family's per-step
    #: constants (functions of theta, theta' and the centre alone, computed once per decision
    #: by the control variates), and ``diff_at(y, n, eta, eta_new, s, s_new, c)`` /
    #: ``derivs_at(y, n, eta, s_c, c)``, ``diff`` and ``derivs`` (at the centre) reading them:
    #: the same bits, without the per-row work on theta alone.
    step: Callable | None = None
    diff_at: Callable | None = None
    derivs_at: Callable | None = None


def _student_m3(s):
    # as samplers.models._glm._robust_m3: 2 (df+1) / (4 - 2 sqrt 2)^2 / (scale sqrt df)^3
    return 2.0 * (s.df + 1.0) / (4.0 - 2.0 * math.sqrt(2.0)) ** 2 / (s.scale * math.sqrt(s.df)) ** 3


_BINOMIAL_LINKS = {
    "logit": _Link(_logit_core, _binomial_const, _logit_derivs,
                   m1=lambda s: s.max_trials, m2=lambda s: 0.25 * s.max_trials,
                   m3=lambda s: LOGIT_M3 * s.max_trials),
    "probit": _Link(_probit_core, _binomial_const, _probit_derivs,
                    m1=None, m2=lambda s: s.max_trials, m3=lambda s: PROBIT_M3 * s.max_trials),
    "cloglog": _Link(_cloglog_core, _binomial_const, _cloglog_derivs, None, None, None,
                     why="f'' = -(n - y) e^eta + ... grows without bound in eta"),
}

#: ``family -> {link: _Link}``; the first link is the default.
FAMILIES = {
    "bernoulli": _BINOMIAL_LINKS,
    "binomial": _BINOMIAL_LINKS,
    "poisson": {"log": _Link(_poisson_core, _poisson_const, _poisson_derivs, None, None, None,
                             why="f'' = -e^eta grows without bound in eta")},
    "negative_binomial": {"log": _Link(
        _negbin_core, _negbin_const, _negbin_derivs,
        m1=lambda s: max(s.dispersion, s.max_y),
        m2=lambda s: 0.25 * (s.max_y + s.dispersion),
        m3=lambda s: LOGIT_M3 * (s.max_y + s.dispersion))},
    "gamma": {"log": _Link(_gamma_core, _gamma_const, _gamma_derivs, None, None, None,
                           why="f'' = -k y e^-eta grows without bound as eta falls")},
    "gaussian": {"identity": _Link(_gaussian_core, _gaussian_const, _gaussian_derivs,
                                   m1=None, m2=lambda s: 1.0 / s.scale**2, m3=lambda s: 0.0)},
    "student_t": {"identity": _Link(
        _student_core, _student_const, _student_derivs,
        m1=lambda s: (s.df + 1.0) / (2.0 * s.scale * math.sqrt(s.df)),
        m2=lambda s: (s.df + 1.0) / (s.df * s.scale**2), m3=_student_m3)},
}

_ESTIMATED_WHY = ("its parameter is estimated (theta's last coordinate), and the row "
                  "log-likelihood's derivatives in it are unbounded")

#: ``family -> {link: _Link}`` of the families whose parameter is estimated: its log is the
#: last coordinate of theta (no bounds: every supremum grows without bound in it).
NUISANCE = {
    "negative_binomial": {"log": _Link(_negbin2_core, _negbin2_const, _negbin2_derivs, None,
                                       None, None, _ESTIMATED_WHY, "dispersion",
                                       _negbin2_diff, _negbin2_step, _negbin2_diff_at,
                                       _negbin2_derivs_at)},
    "gamma": {"log": _Link(_gamma2_core, _gamma2_const, _gamma2_derivs, None, None, None,
                           _ESTIMATED_WHY, "shape", _gamma2_diff, _gamma2_step,
                           _gamma2_diff_at, _gamma2_derivs_at)},
    "gaussian": {"identity": _Link(_gaussian2_core, _gaussian2_const, _gaussian2_derivs, None,
                                   None, None, _ESTIMATED_WHY, "scale", None,
                                   _gaussian2_step, _gaussian2_diff_at,
                                   _gaussian2_derivs_at)},
}
#: sd of the default prior ``N(0, NUISANCE_PRIOR_SD^2)`` on the estimated parameter's log
#: (the coefficients' default prior stays flat).
NUISANCE_PRIOR_SD = 3.0

#: The family parameters each family takes (keyword arguments of :class:`GLM`).
_PARAMS = {"bernoulli": (), "binomial": ("trials",), "poisson": (), "negative_binomial":
           ("dispersion",), "gamma": ("shape",), "gaussian": ("scale",),
           "student_t": ("df", "scale")}
_DEFAULTS = {"df": 4.0, "scale": 1.0}
#: The family parameter each family can estimate (``="estimate"``; None too for the first two).
_ESTIMABLE = {"negative_binomial": ("dispersion",), "gamma": ("shape",), "gaussian": ("scale",)}


def _estimate(value) -> bool:
    """Whether a family parameter is to be estimated: not given, or ``"estimate"``."""
    return value is None or (isinstance(value, str) and value == "estimate")


@dataclass(frozen=True)
class _Summary:
    max_trials: float
    max_y: float
    dispersion: float
    scale: float
    df: float


def _rows(arr, start, stop) -> np.ndarray:
    """Rows ``start .. stop - 1`` of an array or a row source."""
    if isinstance(arr, np.ndarray):
        return np.asarray(arr[start:stop])
    return arr.read_range(start, stop)


# --- the row checks of GLM's data (module level: a check on a cluster pickles them) ----------


def _first_bad(ok, block):
    """``(rows, k, value)``: the block's rows and its first row that fails ``ok`` (k = -1
    if none)."""
    good = ok(block)
    if good.all():
        return block.shape[0], -1, 0.0
    k = int(np.flatnonzero(~good)[0])
    return block.shape[0], k, float(block[k])


def _binomial_bad(model):
    """``(row, y, trials)`` of the first row of a binomial ``model`` whose y is not an integer
    in ``[0, trials]``, or None (a chunked pass; on a worker, over its block)."""
    n = model._trials
    for start in range(0, model.N, SCAN_CHUNK):
        stop = min(start + SCAN_CHUNK, model.N)
        v = _rows(model.y, start, stop)
        t = _rows(n, 0, 1)[0] if n.shape[0] == 1 else _rows(n, start, stop)
        bad = ~((v >= 0) & (v <= t) & (v == np.floor(v)))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            return start + k, float(v[k]), float(np.broadcast_to(t, v.shape)[k])
    return None


def _trials_ok(t):
    return (t >= 1) & (t == np.floor(t))


def _weights_ok(w):
    return np.isfinite(w) & (w >= 0)


def _binary_ok(v):
    return (v == 0) | (v == 1)


def _counts_ok(v):
    return (v >= 0) & (v == np.floor(v))


def _positive_ok(v):
    return (v > 0) & np.isfinite(v)


class GLM(BaseModel):
    r"""A generalised linear model, compiled: ``y_i ~ family(g^{-1}(x_i . theta + o_i))``.

    Parameters
    ----------
    X : array of shape (N, d)
        Covariates (add a column of ones for an intercept); read in place, memmaps welcome.
    y : array of shape (N,)
        Responses: 0/1 (``"bernoulli"``), successes out of ``trials`` (``"binomial"``),
        counts (``"poisson"``, ``"negative_binomial"``), positive reals (``"gamma"``) or
        reals (``"gaussian"``, ``"student_t"``).
    family : str
        ``"bernoulli"``, ``"binomial"``, ``"poisson"``, ``"negative_binomial"``,
        ``"gamma"``, ``"gaussian"`` or ``"student_t"``.
    link : str, optional
        ``"logit"`` (default), ``"probit"`` or ``"cloglog"`` for the binomial families;
        ``"log"`` for the count and gamma families; ``"identity"`` for the real ones.
    offset : float or array of shape (N,), optional
        Added to every linear predictor (log exposure for a Poisson rate).
    weights : float or array of shape (N,), optional
        Frequency weights ``w_i >= 0``: row i counts ``w_i`` times (collapse duplicate rows).
    trials : int or array of shape (N,)
        Binomial trials ``n_i >= 1`` (``"binomial"`` only; required).
    dispersion : float or "estimate", optional
        ``r > 0`` of the negative binomial, variance ``mu + mu^2 / r``; not given (or
        ``"estimate"``): estimated, ``log r`` the last coordinate of theta.
    shape : float or "estimate", optional
        ``k > 0`` of the gamma family, variance ``mu^2 / k``; not given: estimated (``log k``).
    scale : float or "estimate"
        Noise sd of ``"gaussian"`` (default 1; ``"estimate"``: ``log sd`` the last coordinate
        of theta) or scale of ``"student_t"`` (default 1).
    df : float
        Degrees of freedom of ``"student_t"`` (default 4).
    prior : Prior, optional
        Defaults to the flat prior; with an estimated family parameter, flat on the
        coefficients and ``N(0, 3^2)`` on the parameter's log.
    temperature : float
        K > 0; the likelihood is raised to 1/K.
    executor : optional
        Where the data checks of a store run (NaN scan and checksums of X, the support of
        y, trials, offsets and weights; binomial y against its trials stays here): a
        ``dask.distributed.Client``, its ``get_executor()`` or any ``concurrent.futures``
        executor, the errors those of the local checks; None (default) here. Not kept.

    Notes
    -----
    ``log p(y_i | theta) = w_i f(y_i, n_i, x_i . theta + o_i) / K``, gradient
    ``w_i f' x_i / K`` and Hessian ``w_i f'' x_i x_i^T / K``: the scheme of
    :mod:`samplers.models._glm`, so :class:`~samplers.ControlVariates` finds the mode by
    Newton's method in compiled passes on every core and the chain loop is compiled
    (:mod:`samplers._blocks`). The bounds each family has (for the confidence test and the
    control variates' residual bound) are tabled in the module docstring; the gaussian and
    Student-t families are :class:`~samplers.LinearRegression` and
    :class:`~samplers.RobustRegression` with offsets and weights (the same log-likelihoods
    to rounding).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(1000), rng.normal(size=1000)])
    >>> exposure = rng.uniform(1.0, 3.0, 1000)
    >>> y = rng.poisson(exposure * np.exp(X @ [0.5, -0.3])).astype(float)
    >>> model = GLM(X, y, family="poisson", offset=np.log(exposure))
    >>> theta = np.array([0.5, -0.3])
    >>> ref = stats.poisson.logpmf(y[:3], exposure[:3] * np.exp(X[:3] @ theta))
    >>> bool(np.allclose(model.loglik(theta, np.arange(3)), ref))
    True

    The negative binomial's dispersion estimated: theta is ``(beta, log r)``.

    >>> y = rng.negative_binomial(2.0, 2.0 / (2.0 + np.exp(X @ [0.5, -0.3])))
    >>> nb = GLM(X, y.astype(float), family="negative_binomial")
    >>> nb.dim, nb.names
    (3, ('beta0', 'beta1', 'log_dispersion'))
    """

    _row_prefetch = staticmethod(prefetch_data01)

    _row_fields = ("X", "y", "_trials", "_offset", "_weights")

    def __init__(self, X, y, family="bernoulli", link=None, *, offset=None, weights=None,
                 trials=None, dispersion=None, shape=None, scale=None, df=None,
                 prior: Prior | None = None, temperature=1.0, executor=None):
        if not isinstance(family, str) or family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
        links = FAMILIES[family]
        if link is None:
            link = next(iter(links))
        if not isinstance(link, str) or link not in links:
            raise ValueError(f"link must be one of {list(links)} for family {family!r}, "
                             f"got {link!r}")
        given = dict(trials=trials, dispersion=dispersion, shape=shape, scale=scale, df=df)
        for name, value in given.items():
            if value is not None and name not in _PARAMS[family]:
                raise TypeError(f"{name}= does not apply to family {family!r} (it takes "
                                f"{', '.join(_PARAMS[family]) or 'no family parameter'})")
        self.family, self.link = family, link
        self.X, self.y = regression_data(X, y, entry="response", executor=executor)
        self.N = N = self.X.shape[0]
        # one entry per row, or one for every row (1, 0 and 1 when not given)
        self._trials = self._per_row("trials", 1.0 if trials is None else trials, N)
        self._offset = self._per_row("offset", 0.0 if offset is None else offset, N)
        self._weights = self._per_row("weights", 1.0 if weights is None else weights, N)
        #: As given: None, a number, or the array as read (in place).
        self.trials = self._as_given(trials, self._trials)
        self.offset = self._as_given(offset, self._offset)
        self.weights = self._as_given(weights, self._weights)
        if family == "binomial" and trials is None:
            raise TypeError("family 'binomial' needs trials= (an int or one per row); "
                            "use family='bernoulli' for 0/1 responses")
        for name, value in given.items():
            if isinstance(value, str) and not (value == "estimate" and name in _ESTIMABLE.get(
                    family, ())):
                can = _ESTIMABLE.get(family, ())
                raise ValueError(f"{name} must be a positive number" + (
                    " or 'estimate'" if name in can else "") + f" for family {family!r}, got "
                    f"{value!r}" + ("" if name in can else " (estimable: dispersion of "
                                    "'negative_binomial', shape of 'gamma', scale of 'gaussian')"))
        self.dispersion = self.shape = self.scale = self.df = None
        #: The family parameter estimated as ``exp(theta[-1])`` (``"dispersion"``,
        #: ``"shape"`` or ``"scale"``), or None.
        self.estimated = None
        if family == "negative_binomial" and _estimate(dispersion):
            self.estimated, params = "dispersion", ()
        elif family == "gamma" and _estimate(shape):
            self.estimated, params = "shape", ()
        elif family == "gaussian" and isinstance(scale, str) and scale == "estimate":
            self.estimated, params = "scale", ()
        elif family == "negative_binomial":
            r = self.dispersion = check_positive("dispersion", dispersion)
            params = (r, math.log(r), math.lgamma(r))
        elif family == "gamma":
            k = self.shape = check_positive("shape", shape)
            params = (k, k * math.log(k) - math.lgamma(k))
        elif family in ("gaussian", "student_t"):
            s = self.scale = check_positive("scale", _DEFAULTS["scale"] if scale is None else scale)
            params = (s,)
            if family == "student_t":
                v = self.df = check_positive("df", _DEFAULTS["df"] if df is None else df)
                params = (s, v, float(special.gammaln(0.5 * (v + 1.0)) - special.gammaln(0.5 * v)
                                      - 0.5 * math.log(math.pi * v) - math.log(s)))
        else:
            params = ()
        self._params = np.array(params + (0.0,) * (3 - len(params)))
        d = self.X.shape[1]
        if self.estimated is not None:
            #: Coordinate names (ArviZ): the coefficients, then the estimated parameter's log.
            self.names = tuple(f"beta{j}" for j in range(d)) + (f"log_{self.estimated}",)
            if prior is None:   # flat on the coefficients, N(0, 3^2) on the log parameter
                prior = GaussianPrior(0.0, np.r_[np.full(d, np.inf), NUISANCE_PRIOR_SD])
        super().__init__(prior=prior, temperature=temperature,
                         dim=d + (self.estimated is not None))
        if self._spec.m1 is None:
            # no range of the l_i: the samplers' view sees none, so ConfidenceTest(range=
            # "model") refuses the model when the chain starts, naming range="full-data"
            self._loglik_ratio_range = self._loglik_ratio_bound = None
        if not data_checks_skipped():
            self._check_rows(executor)

    @staticmethod
    def _per_row(name, value, N):
        if not _is_store(value) and np.ndim(value) == 0:
            if isinstance(value, (bool, np.bool_)) or not np.isrealobj(value):
                raise TypeError(f"{name} must be a real number or an array of N = {N}, got "
                                f"{value!r}")
            return np.full(1, float(value))
        arr = data_rows(name, value, ndim=1)
        if arr.shape[0] != N:
            raise ValueError(f"{name} must have one entry per row of X ({N}), got "
                             f"{arr.shape[0]}")
        return arr

    def _with_rows(self, take, n):
        new = super()._with_rows(take, n)
        for name in ("trials", "offset", "weights"):   # as given: the block's rows too
            if getattr(self, name) is not None and not isinstance(getattr(self, name), float):
                setattr(new, name, getattr(new, "_" + name))
        return new

    @staticmethod
    def _as_given(value, arr):
        if value is None:
            return None
        return float(arr[0]) if not _is_store(value) and np.ndim(value) == 0 else arr

    def _check_rows(self, executor=None) -> None:
        """One chunked pass: y in the family's support, trials, offsets and weights valid
        (a store's on ``executor`` if given, binomial y against its trials included)."""
        fam = self.family
        for name, arr, ok, accepted in (
                ("trials", self._trials, _trials_ok, "integers >= 1"),
                ("offset", self._offset, np.isfinite, "finite values"),
                ("weights", self._weights, _weights_ok, "finite values >= 0")):
            self._scan(name, arr, ok, accepted, executor)
        n = self._trials
        if fam in ("bernoulli",):
            self._scan("y", self.y, _binary_ok, "0 or 1 (family 'bernoulli')", executor)
        elif fam == "binomial":
            cluster = as_cluster(executor) if self._store_backed else None
            if cluster is None:
                bad = _binomial_bad(self)
            else:           # each range's first bad row on its worker; the first in row order
                found = []
                map_ranges(cluster, self.block_recipe, _binomial_bad, (),
                           lambda start, stop, got: found.append(
                               None if got is None else (start + got[0],) + got[1:]),
                           N=self.N, chunk=SCAN_CHUNK, progress=False,
                           desc="checking y against trials")
                bad = next((b for b in found if b is not None), None)
            if bad is not None:
                row, v, t = bad
                raise ValueError(f"y must hold integer successes in [0, trials] for family "
                                 f"'binomial'; row {row} has y = {v!r} (trials {t!r})")
        elif fam in ("poisson", "negative_binomial"):
            self._scan("y", self.y, _counts_ok,
                       f"non-negative integer counts (family {fam!r})", executor)
        elif fam == "gamma":
            self._scan("y", self.y, _positive_ok, "positive values (family 'gamma')", executor)
        else:
            self._scan("y", self.y, np.isfinite, "finite values", executor)

    @staticmethod
    def _scan(name, arr, ok, accepted, executor=None):
        offset = 0
        for n, k, value in scan_rows(arr, functools.partial(_first_bad, ok),
                                     desc=f"checking {name}", verify=True, executor=executor):
            if k >= 0:
                row = f"row {offset + k} has" if arr.shape[0] > 1 else "got"
                raise ValueError(f"{name} must hold {accepted}; {row} {value!r}")
            offset += n

    # -- kernels ---------------------------------------------------------------------------------

    @property
    def _spec(self) -> _Link:
        """The family and link's kernels and suprema (looked up: the instance pickles)."""
        return (FAMILIES if self.estimated is None else NUISANCE)[self.family][self.link]

    @property
    def _kernels(self):
        s = self._spec
        if s.nuisance:
            return _nuisance_row_kernels(s.core, s.const, s.derivs, s.diff)
        return _row_kernels(s.core, s.const, s.derivs)

    @property
    def _row_loglik(self):
        return self._kernels[0]

    @property
    def _row_ratio(self):
        return self._kernels[1]

    @property
    def _row_grad(self):
        return self._kernels[2]

    def _kernel_data(self):
        return (self.X, self.y, self._trials, self._offset, self._weights, self._params,
                self._inv_temp)

    # -- bounds ----------------------------------------------------------------------------------

    @functools.cached_property
    def _summary(self) -> _Summary:
        def top(arr):
            return max(scan_rows(arr, lambda b: float(np.max(b)), desc="data summary"))
        return _Summary(top(self._trials), top(self.y) if self.family in (
            "negative_binomial",) else 0.0, self.dispersion or 0.0, self.scale or 0.0,
            self.df or 0.0)

    @functools.cached_property
    def _factor(self) -> float:
        top = max(scan_rows(self._weights, lambda b: float(np.max(b)), desc="weights"))
        return top * self._inv_temp

    def _sup(self, which) -> float:
        """``M1``, ``M2`` or ``M3`` (tempered, weighted); inf when the family has none."""
        fn = getattr(self._spec, which)
        return math.inf if fn is None else float(fn(self._summary)) * self._factor

    def _no_bound(self, what):
        why = self._spec.why or "f' grows without bound in eta"
        return TypeError(
            f"GLM(family={self.family!r}, link={self.link!r}) has no {what}: {why}. Use a "
            "test that reads no bound (exact, Austere, Barker, FPC-normal) or "
            "ConfidenceTest(range='full-data')")

    @property
    def _ratio_range(self):
        return step_range if self._spec.m1 is not None else None

    def _range_data(self):
        return (float(self._spec.m1(self._summary)) * self._factor / self._inv_temp,
                self._max_row_norm, self._inv_temp)

    def loglik_ratio_bound(self, theta, theta_new) -> float:
        """An upper bound on ``max_i |l_i|`` over all N rows, in O(d): ``M1 |theta' - theta|
        max_i ||x_i||`` (TypeError for a family without ``M1``: see the module docstring)."""
        if self._spec.m1 is None:
            raise self._no_bound("bound on |l_i| (loglik_ratio_bound)")
        return super().loglik_ratio_bound(theta, theta_new)

    def firefly_bound(self, theta=None):
        """A collapsible lower bound on the rows' likelihoods for Firefly Monte Carlo
        (:func:`samplers.firefly`): :class:`~samplers.models.bounds.GLMBound`, each row's
        bound tight at ``x_i . theta`` (default: the posterior mode). A TypeError for the
        families without one (Poisson, gamma, cloglog, an estimated family parameter)."""
        from .bounds import GLMBound

        return GLMBound.map_tuned(self, theta)

    def __repr__(self):
        return (f"GLM(N={self.N}, dim={self.dim}, family={self.family!r}, link={self.link!r}, "
                f"temperature={self.temperature:g})")
