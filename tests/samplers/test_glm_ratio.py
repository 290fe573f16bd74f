"""The GLM families' fast per-step kernels: the log of a rising factorial that replaces two
``lgamma`` (negative binomial, dispersion estimated), against ``lgamma`` and a sum of logs,
both sides of its switch; and the ``ratio`` kernels the control variates run (the difference
of two links without the terms that cancel), against the difference of the links, for every
family and link; and a user's RowModel whose full row Hessian goes to stack scratch."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from scipy import special

from samplers import GLM, ControlVariates, GaussianPrior
from samplers.models import RowModel
from samplers.models import glm as glm_module
from samplers.models._glm import glm_kernels

RISING = glm_module._log_rising
SWITCH = glm_module.RISING_MAX


def _sum_of_logs(y, r, s):
    """``sum_{j<y} log(r + j) - y s``, one log per factor (an independent route)."""
    if y == 0:
        return 0.0
    if r >= 1.0:
        return math.fsum(math.log1p(j / r) for j in range(1, int(y)))
    return (1.0 - y) * s + math.fsum(math.log(r + j) for j in range(1, int(y)))


def test_log_rising_is_the_difference_of_two_log_gammas():
    for r in np.geomspace(1e-3, 1e4, 29).tolist() + [1.0 - 1e-12, 1.0, 1.0 + 1e-12]:
        s = math.log(r)
        for y in (0.0, 1.0, 2.0, 3.0, 7.0, SWITCH - 1.0, SWITCH, SWITCH + 1.0, 40.0, 300.0,
                  2.5):
            ref = special.gammaln(y + r) - special.gammaln(r) - y * s
            scale = abs(special.gammaln(y + r)) + abs(special.gammaln(r)) + abs(y * s) + 1.0
            assert RISING(y, r, s) == pytest.approx(ref, rel=0, abs=2e-15 * scale), (y, r)


def test_log_rising_product_branch_at_extreme_dispersions():
    # the product's factors stay in [1, 16]: exact to rounding where the two lgamma cancel
    # catastrophically (r = 1e15: each lgamma ~ 3e16) or r = e^s under/overflows
    for s in (-800.0, -300.0, -20.0, -1e-9, 0.0, 1e-9, 20.0, 35.0, 300.0, 800.0):
        with np.errstate(over="ignore"):
            r = float(np.exp(s))     # inf at s = 800, as in the kernels (numba's exp)
        for y in range(0, int(SWITCH)):
            ref = _sum_of_logs(float(y), r, s)
            got = RISING(float(y), r, s)
            assert math.isfinite(got), (y, s)
            assert got == pytest.approx(ref, rel=1e-14, abs=1e-14 * (1.0 + abs(y * s))), (y, s)
    assert RISING(0.0, 2.0, math.log(2.0)) == 0.0


def test_log_rising_is_continuous_at_its_switch():
    for r in (0.2, 1.0, 3.0, 1e3):
        s = math.log(r)
        below, at = RISING(SWITCH - 1.0, r, s), RISING(SWITCH, r, s)
        # one more factor: log(r + SWITCH - 1) - s
        assert at - below == pytest.approx(math.log(r + SWITCH - 1.0) - s, rel=1e-12, abs=1e-11)


def test_rising_difference_in_one_pass():
    diff = glm_module._rising_diff
    for s, s_new in ((0.7, 0.72), (0.7, -0.4), (-2.0, -2.3), (-1e-9, 1e-9), (0.0, 0.0),
                     (30.0, 30.5), (-600.0, -599.0)):
        r, r_new = math.exp(s), math.exp(s_new)
        for y in (0.0, 1.0, 2.0, 5.0, SWITCH - 1.0, SWITCH, 50.0, 3.5):
            ref = RISING(y, r_new, s_new) - RISING(y, r, s)
            got = diff(y, r, s, r_new, s_new)
            assert got == pytest.approx(ref, rel=1e-13, abs=1e-13 * (1.0 + y * abs(s))), (y, s)
    assert diff(0.0, 2.0, math.log(2.0), 3.0, math.log(3.0)) == 0.0


def test_digamma_and_trigamma_in_one_loop():
    x = np.concatenate([np.geomspace(1e-3, 1e4, 100), [9.999, 10.0, 10.001]])
    both = np.array([glm_module._digamma_trigamma(v) for v in x])
    np.testing.assert_allclose(both[:, 0], special.digamma(x), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(both[:, 1], special.polygamma(1, x), rtol=1e-13)


def test_scalar_log_sigmoid_matches_scipy():
    # the negative binomial's ratio takes log sigmoid from the C library's exp and log1p
    z = np.concatenate([-np.geomspace(1e-300, 745.0, 400), [0.0, -0.0],
                        np.geomspace(1e-300, 745.0, 400)])
    got = np.array([glm_module._log_sigmoid_scalar(v) for v in z])
    np.testing.assert_allclose(got, special.log_expit(z), rtol=4e-16, atol=0.0)
    assert math.isnan(glm_module._log_sigmoid_scalar(math.nan))


def _negbin2_derivs_reference(y, eta, s):
    """The negative binomial's ``(f_e, f_s, f_ee, f_es, f_ss)`` in (eta, s = log r) by SciPy
    (expit, log_expit, digamma, polygamma), and the size of their terms."""
    r = math.exp(s)
    t = eta - s
    p, q = special.expit(t), special.expit(-t)
    c = y + r
    d1 = special.digamma(y + r) - special.digamma(r)
    d2 = special.polygamma(1, y + r) - special.polygamma(1, r)
    rl = r * special.log_expit(-t)
    ref = (y - c * p, -y + rl + c * p + r * d1, -c * p * q, -r * p + c * p * q,
           rl + 2.0 * r * p - c * p * q + r * d1 + r * r * d2)
    scale = y + abs(rl) + c + r * abs(d1) + r * r * abs(d2)
    return np.array(ref), scale


def test_negative_binomial_derivatives_match_scipy():
    # small counts (the psi sums), large counts (digamma differences), r far below and above 1,
    # and both signs of eta - s: the centre's derivatives the control variates read per row
    for s in (-3.0, -0.2, 0.0, 0.7, 4.0, 9.0):
        for y in (0.0, 1.0, 2.0, 7.0, SWITCH - 1.0, SWITCH, 40.0, 1e3):
            for eta in (-12.0, s - 0.3, s, s + 0.4, 2.5, 12.0):
                ref, scale = _negbin2_derivs_reference(y, eta, s)
                got = np.array(glm_module._negbin2_derivs(y, 1.0, eta, s))
                # scipy's psi differences at y >= 16 cancel to about 1e-16 of psi(y + r)
                np.testing.assert_allclose(got, ref, rtol=0.0, atol=1e-13 * (scale + 1.0),
                                           err_msg=f"y={y} eta={eta} s={s}")


def test_negative_binomial_ratio_matches_scipy():
    # the ratio kernel against SciPy's log pmf at small and large counts and dispersions
    from scipy import stats

    rng = np.random.default_rng(11)
    for s, s_new in ((0.7, 0.75), (-2.0, -1.6), (3.0, 2.9), (0.1, -0.1)):
        for y in (0.0, 1.0, 3.0, SWITCH - 1.0, SWITCH, 60.0):
            eta, eta_new = rng.normal(1.0, 1.0, 2)
            r, r_new = math.exp(s), math.exp(s_new)
            ref = (stats.nbinom.logpmf(y, r_new, r_new / (r_new + math.exp(eta_new)))
                   - stats.nbinom.logpmf(y, r, r / (r + math.exp(eta))))
            got = glm_module._negbin2_diff(y, 1.0, eta, eta_new, s, s_new)
            scale = (y + r + r_new) * (abs(eta) + abs(s) + 1.0) + y * math.log(y + r + 1.0)
            assert got == pytest.approx(ref, rel=0.0, abs=1e-13 * scale), (y, s, s_new)


def _family_models():
    rng = np.random.default_rng(3)
    n = 400
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    beta = np.array([0.4, -0.3, 0.2])
    mu = np.exp(X @ beta)
    p = special.expit(X @ beta)
    off = rng.normal(scale=0.2, size=n)
    w = rng.integers(0, 3, n).astype(float)
    y01 = (rng.random(n) < p).astype(float)
    y_nb = rng.negative_binomial(2.0, 2.0 / (2.0 + mu)).astype(float)
    y_nb[:4] = [0.0, SWITCH - 1.0, SWITCH, 90.0]
    y_g = rng.gamma(3.0, mu / 3.0)
    y_n = X @ beta + 0.5 * rng.normal(size=n)
    prior = GaussianPrior(0.0, 10.0)
    return [
        GLM(X, y01, prior=prior),
        GLM(X, y01, link="probit", prior=prior),
        GLM(X, y01, link="cloglog", offset=off, prior=prior),
        GLM(X, rng.binomial(6, p).astype(float), "binomial", trials=6, weights=w, prior=prior),
        GLM(X, rng.poisson(mu).astype(float), "poisson", offset=off, prior=prior),
        GLM(X, y_nb, "negative_binomial", dispersion=2.0, prior=prior),
        GLM(X, y_nb, "negative_binomial", offset=off, temperature=2.0),
        GLM(X, y_g, "gamma", shape=3.0, prior=prior),
        GLM(X, y_g, "gamma", weights=w),
        GLM(X, y_n, "gaussian", scale=0.5, prior=prior),
        GLM(X, y_n, "gaussian", scale="estimate"),
        GLM(X, y_n, "student_t", prior=prior),
    ]


MODELS = _family_models()


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_ratio_kernel_is_the_difference_of_two_links(model):
    k = glm_kernels(model)
    data = model._kernel_data()
    rng = np.random.default_rng(4)
    d = model.X.shape[1]
    for i in range(0, model.N, 7):
        a, b = rng.normal(0.0, 1.0, 2)
        if k.nuisance:
            s, t = rng.normal(0.0, 0.5, 2)
            got = k.ratio(data, i, a, b, s, t)
            ref = k.link(data, i, b, t) - k.link(data, i, a, s)
            scale = abs(k.link(data, i, b, t)) + abs(k.link(data, i, a, s))
        else:
            got = k.ratio(data, i, a, b)
            ref = k.link(data, i, b) - k.link(data, i, a)
            scale = abs(k.link(data, i, b)) + abs(k.link(data, i, a))
        assert got == pytest.approx(ref, rel=0, abs=1e-14 * (scale + 1.0)), (model, i)
    # and the model's own ratio is the same kernel after the predictors
    theta = rng.normal(0.0, 0.3, model.dim)
    other = theta + rng.normal(0.0, 0.05, model.dim)
    idx = np.arange(model.N)
    eta, eta_new = model.X @ theta[:d], model.X @ other[:d]
    extra = (theta[d], other[d]) if k.nuisance else ()
    direct = [k.ratio(data, i, eta[i], eta_new[i], *extra) for i in idx]
    np.testing.assert_allclose(model.loglik_ratio(theta, other, idx), direct, rtol=1e-13,
                               atol=1e-13)


@pytest.mark.parametrize("model", [m for m in MODELS if glm_kernels(m).nuisance], ids=repr)
def test_per_step_constants_give_the_same_bits(model):
    # the control variates' ratio reads the family's constants of (s, s', s*) computed once
    # per decision (GLMKernels.step): ratio_at / derivs_at equal ratio / derivs bit for bit,
    # counts on both sides of the product/lgamma switch and r on both sides of 1 included
    k = glm_kernels(model)
    data = model._kernel_data()
    rng = np.random.default_rng(7)
    for i in range(0, model.N, 3):
        a, b = rng.normal(0.0, 1.0, 2)
        s, t, c = rng.normal(0.0, 0.6, 3)
        consts = k.step(s, t, c)
        assert k.ratio_at(data, i, a, b, s, t, consts) == k.ratio(data, i, a, b, s, t), (model, i)
        assert k.derivs_at(data, i, a, c, consts) == k.derivs(data, i, a, c), (model, i)


@pytest.mark.parametrize("model", [MODELS[k] for k in (4, 5, 6, 8)], ids=repr)
def test_control_variates_ratio_is_the_difference_of_their_logliks(model):
    cv = ControlVariates(model)
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    rng = np.random.default_rng(5)
    idx = np.arange(model.N)
    for _ in range(5):
        a = cv.center.theta + sd * rng.normal(size=model.dim)
        b = a + 0.5 * sd * rng.normal(size=model.dim)
        ratio = cv.loglik_ratio(a, b, idx)
        diff = cv.loglik(b, idx) - cv.loglik(a, idx)
        scale = np.abs(model.loglik(a, idx)).max() + 1.0
        np.testing.assert_allclose(ratio, diff, rtol=0, atol=1e-11 * scale)


# --- a user's row kernels with the full row Hessian: the Hessian in the row's stack scratch --


@numba.njit
def _poisson_row(data, i, theta):
    X, y = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    return y[i] * eta - math.exp(eta)


@numba.njit
def _poisson_grad(data, i, theta, out):
    X, y = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    w = y[i] - math.exp(eta)
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@numba.njit
def _poisson_hess(data, i, theta, out):
    X, _ = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    w = -math.exp(eta)
    for j in range(X.shape[1]):
        for k in range(X.shape[1]):
            out[j, k] = w * X[i, j] * X[i, k]


@numba.njit
def _poisson_hvp(data, i, theta, v, out):
    X, _ = data
    eta = 0.0
    xv = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
        xv += X[i, j] * v[j]
    w = -math.exp(eta) * xv
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


def test_row_model_full_hessian_residuals_equal_the_hvp_ones():
    rng = np.random.default_rng(6)
    X = np.column_stack([np.ones(300), rng.normal(size=(300, 2))])
    y = rng.poisson(np.exp(X @ [0.3, -0.2, 0.1])).astype(float)
    center = np.array([0.3, -0.2, 0.1])
    cvs = [ControlVariates(RowModel(_poisson_row, (X, y), dim=3, grad_row=_poisson_grad,
                                    logprior=GaussianPrior(0.0, 10.0), **second),
                           order=2, center=center)
           for second in ({"hess_row": _poisson_hess}, {"hvp_row": _poisson_hvp})]
    idx = np.arange(300)
    theta, theta_new = center + 0.02, center + np.array([0.03, 0.0, -0.01])
    hess, hvp = cvs
    np.testing.assert_allclose(hess.loglik_ratio(theta, theta_new, idx),
                               hvp.loglik_ratio(theta, theta_new, idx), rtol=0, atol=1e-12)
    np.testing.assert_allclose(hess.grad_loglik(theta, idx), hvp.grad_loglik(theta, idx),
                               rtol=0, atol=1e-10)
