"""samplers.GLM: each family's row kernels against SciPy and finite differences, the GLM sums
and control variates against direct sums, the bounds, bad input, and the compiled loop
against the Python loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from samplers import (GLM, AustereTest, ControlVariates, ConfidenceTest, ExactTest,
                      GaussianPrior, LinearRegression, RandomWalk, RobustRegression, sample)
from samplers.models import glm as glm_module
from samplers.models._glm import glm_kernels, glm_sums

N = 300


def _design(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    return rng, X, np.array([0.3, -0.5, 0.8])


def _cases():
    """``(name, model, reference log-density of every row at theta)``: references from
    scipy.stats, or written out in scipy.special where scipy.stats loses digits."""
    rng, X, th = _design()
    eta = X @ th
    mu = np.exp(eta)
    out = []
    y = (rng.random(N) < special.expit(eta)).astype(float)
    out.append(("bernoulli-logit", GLM(X, y), stats.bernoulli.logpmf(y, special.expit(eta))))
    out.append(("bernoulli-probit", GLM(X, y, link="probit"),
                np.where(y == 1, special.log_ndtr(eta), special.log_ndtr(-eta))))
    n = rng.integers(1, 12, N).astype(float)
    yb = rng.binomial(n.astype(int), 0.4).astype(float)
    comb = special.gammaln(n + 1) - special.gammaln(yb + 1) - special.gammaln(n - yb + 1)
    out.append(("binomial-logit", GLM(X, yb, "binomial", trials=n),
                stats.binom.logpmf(yb, n, special.expit(eta))))
    out.append(("binomial-probit", GLM(X, yb, "binomial", "probit", trials=n),
                comb + yb * special.log_ndtr(eta) + (n - yb) * special.log_ndtr(-eta)))
    out.append(("binomial-cloglog", GLM(X, yb, "binomial", "cloglog", trials=n),
                comb + yb * np.log(-np.expm1(-mu)) - (n - yb) * mu))
    off = rng.normal(size=N)
    yp = rng.poisson(np.exp(eta + off)).astype(float)
    out.append(("poisson-log", GLM(X, yp, "poisson", offset=off),
                stats.poisson.logpmf(yp, np.exp(eta + off))))
    r = 2.5
    ynb = rng.negative_binomial(r, r / (r + mu)).astype(float)
    out.append(("negative_binomial-log", GLM(X, ynb, "negative_binomial", dispersion=r),
                stats.nbinom.logpmf(ynb, r, r / (r + mu))))
    yg = rng.gamma(3.0, mu / 3.0)
    out.append(("gamma-log", GLM(X, yg, "gamma", shape=3.0),
                stats.gamma.logpdf(yg, 3.0, scale=mu / 3.0)))
    yn = eta + 0.7 * rng.normal(size=N)
    out.append(("gaussian-identity", GLM(X, yn, "gaussian", scale=0.7),
                stats.norm.logpdf(yn, eta, 0.7)))
    w = rng.integers(0, 4, N).astype(float)
    out.append(("student_t-identity weighted", GLM(X, yn, "student_t", df=3.0, scale=0.5,
                                                   weights=w, temperature=2.0),
                w * stats.t.logpdf(yn, 3.0, eta, 0.5) / 2.0))
    return th, out


THETA, CASES = _cases()
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_loglik_and_ratio_match_scipy(case):
    _, model, ref = case
    idx = np.arange(N)
    np.testing.assert_allclose(model.loglik(THETA, idx), ref, rtol=1e-12, atol=1e-11)
    other = THETA + np.array([0.05, -0.1, 0.02])
    ratio = model.loglik_ratio(THETA, other, idx)
    np.testing.assert_allclose(ratio, model.loglik(other, idx) - model.loglik(THETA, idx),
                               rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_and_hessian_match_finite_differences(case):
    _, model, _ = case
    idx = np.arange(N)
    h = 1e-6
    G = model.grad_loglik(THETA, idx)
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        fd = (model.loglik(THETA + e, idx) - model.loglik(THETA - e, idx)) / (2 * h)
        np.testing.assert_allclose(G[:, j], fd, rtol=1e-6, atol=1e-6)
    # the sums of the compiled pass: L, the gradient and the Hessian (by differences of it)
    L, g, H = glm_sums(model, THETA)
    assert L == pytest.approx(model.loglik(THETA, idx).sum(), rel=1e-12)
    np.testing.assert_allclose(g, G.sum(axis=0), rtol=1e-12, atol=1e-10)
    fd_H = np.empty((3, 3))
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        fd_H[:, j] = (glm_sums(model, THETA + e)[1] - glm_sums(model, THETA - e)[1]) / (2 * h)
    np.testing.assert_allclose(H, fd_H, rtol=1e-5, atol=1e-4)
    assert np.array_equal(H, H.T)


def test_probit_extreme_predictors_stay_finite_and_accurate():
    X = np.array([[-60.0], [-35.0], [-29.0], [0.0], [8.0], [40.0]])
    y = np.ones(6)
    model = GLM(X, y, link="probit")
    idx = np.arange(6)
    np.testing.assert_allclose(model.loglik([1.0], idx), special.log_ndtr(X[:, 0]),
                               rtol=1e-12, atol=1e-300)
    fd = (model.loglik([1.0 + 1e-7], idx) - model.loglik([1.0 - 1e-7], idx)) / 2e-7
    np.testing.assert_allclose(model.grad_loglik([1.0], idx)[:, 0], fd, rtol=1e-5, atol=1e-8)


def test_probit_third_derivative_supremum():
    x = np.linspace(-12, 12, 24001)
    h = x[1] - x[0]
    d3 = np.gradient(np.gradient(np.gradient(special.log_ndtr(x), h), h), h)[5:-5]
    assert np.abs(d3).max() <= glm_module.PROBIT_M3 * (1 + 1e-4)
    assert np.abs(d3).max() >= glm_module.PROBIT_M3 * (1 - 1e-3)
    # and sup |f''| = 1 (approached as x -> -inf)
    d2 = np.gradient(np.gradient(special.log_ndtr(np.linspace(-40, 5, 9001)), 0.005),
                     0.005)[5:-5]
    assert np.abs(d2).max() < 1.0


def test_gaussian_and_student_t_are_the_existing_models():
    rng, X, th = _design(seed=3)
    y = X @ th + 0.4 * rng.standard_t(5, N)
    idx = np.arange(N)
    for glm, old in ((GLM(X, y, "gaussian", scale=0.4), LinearRegression(X, y, noise_sd=0.4)),
                     (GLM(X, y, "student_t", df=5.0, scale=0.4),
                      RobustRegression(X, y, df=5.0, scale=0.4))):
        np.testing.assert_allclose(glm.loglik(th, idx), old.loglik(th, idx), rtol=1e-13)
        np.testing.assert_allclose(glm.grad_loglik(th, idx), old.grad_loglik(th, idx),
                                   rtol=1e-12)
        k_new, k_old = glm_kernels(glm), glm_kernels(old)
        assert k_new.m2(glm) == pytest.approx(k_old.m2(old), rel=1e-14)
        assert k_new.m3(glm) == pytest.approx(k_old.m3(old), rel=1e-14)


def test_weights_collapse_duplicate_rows():
    rng, X, th = _design(seed=4)
    y = rng.poisson(np.exp(X @ th)).astype(float)
    w = rng.integers(1, 4, N)
    rep = np.repeat(np.arange(N), w)
    weighted = GLM(X, y, "poisson", weights=w.astype(float))
    expanded = GLM(X[rep], y[rep], "poisson")
    a, b = glm_sums(weighted, th), glm_sums(expanded, th)
    assert a[0] == pytest.approx(b[0], rel=1e-12)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-11)
    np.testing.assert_allclose(a[2], b[2], rtol=1e-11)


# --- bounds ---------------------------------------------------------------------------------


BOUNDED = ["bernoulli-logit", "bernoulli-probit", "binomial-logit", "binomial-probit",
           "negative_binomial-log", "gaussian-identity", "student_t-identity weighted"]


@pytest.mark.parametrize("name", BOUNDED)
@pytest.mark.parametrize("order", [1, 2])
def test_residual_bound_holds(name, order):
    model = dict((c[0], c[1]) for c in CASES)[name]
    cv = ControlVariates(model, order=order, center=THETA)
    rng = np.random.default_rng(5)
    idx = np.arange(N)
    for _ in range(20):
        a = THETA + 0.3 * rng.normal(size=3)
        b = a + 0.2 * rng.normal(size=3)
        center, half = cv.loglik_ratio_range(a, b)
        r = cv.loglik_ratio(a, b, idx)
        assert np.all(np.abs(r - center) <= half * (1 + 1e-9) + 1e-12)   # rounding


def test_suprema_hold_on_a_grid():
    eta = np.linspace(-30, 30, 6001)[:, None]
    for name in BOUNDED:
        model = dict((c[0], c[1]) for c in CASES)[name]
        k = glm_kernels(model)
        # f'' at every row and predictor, through grad_loglik of a model with x_i = 1
        for i in range(0, N, 37):
            one = GLM(np.ones((eta.shape[0], 1)), np.full(eta.shape[0], model.y[i]),
                      model.family, model.link, offset=eta[:, 0],
                      weights=float(model._weights[0 if model._weights.size == 1 else i]),
                      temperature=model.temperature, **_params(model, i))
            f1 = one.grad_loglik(np.zeros(1), np.arange(eta.shape[0]))[:, 0]
            f2 = np.gradient(f1, eta[:, 0])
            assert np.abs(f2).max() <= k.m2(model) * (1 + 1e-3) + 1e-9, name


def _params(model, i):
    if model.family == "binomial":
        return {"trials": float(model._trials[i])}
    return {key: getattr(model, key) for key in ("dispersion", "shape", "scale", "df")
            if getattr(model, key) is not None}


@pytest.mark.parametrize("name", ["poisson-log", "gamma-log", "binomial-cloglog"])
def test_families_without_a_bound_say_so(name):
    model = dict((c[0], c[1]) for c in CASES)[name]
    with pytest.raises(TypeError, match="has no bound on"):
        model.loglik_ratio_bound(THETA, THETA + 0.1)
    cv = ControlVariates(model, center=THETA)
    with pytest.raises(TypeError, match="no residual bound"):
        cv.residual_bound(THETA, THETA + 0.1)
    with pytest.raises(TypeError, match="no residual bound"):
        cv.loglik_ratio_range(THETA, THETA + 0.1)
    # its rows still are residuals whose mean is the full data's
    full = model.loglik_ratio(THETA, THETA + 0.01, np.arange(N)).mean()
    assert cv.loglik_ratio(THETA, THETA + 0.01, np.arange(N)).mean() == pytest.approx(full,
                                                                                      rel=1e-9)


# --- control variates: mode by Newton, sums ------------------------------------------------


@pytest.mark.parametrize("name", ["poisson-log", "bernoulli-probit", "negative_binomial-log",
                                  "binomial-cloglog", "gamma-log"])
def test_control_variates_newton_mode_and_sums(name):
    base = dict((c[0], c[1]) for c in CASES)[name]
    model = GLM(base.X, base.y, base.family, base.link, offset=base.offset,
                prior=GaussianPrior(0.0, 10.0), **_params(base, 0) if base.family != "binomial"
                else {"trials": base.trials})
    cv = ControlVariates(model)
    assert cv.center.method == "newton"
    idx = np.arange(N)
    c = cv.center.theta
    g_post, H_post = cv.center.posterior_grad, cv.center.posterior_hess
    assert g_post @ np.linalg.solve(-H_post, g_post) < 1e-10    # the Newton decrement
    assert cv.center.loglik == pytest.approx(model.loglik(c, idx).sum(), rel=1e-12)
    np.testing.assert_allclose(cv.center.grad, model.grad_loglik(c, idx).sum(axis=0),
                               rtol=1e-10, atol=1e-9)
    a, b = c + 0.01, c - 0.02
    assert cv.loglik_ratio(a, b, idx).sum() == pytest.approx(
        model.loglik_ratio(a, b, idx).sum(), rel=1e-9)


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(family="tweedie"), ValueError, "family must be one of"),
    (dict(family="poisson", link="logit"), ValueError, r"link must be one of \['log'\]"),
    (dict(family="bernoulli", link="log"), ValueError, "link must be one of"),
    (dict(family="poisson", y=[0.0, 1.5, 2.0, 0.0]), ValueError, "row 1 has 1.5"),
    (dict(family="poisson", y=[0.0, -1.0, 2.0, 0.0]), ValueError, "non-negative integer"),
    (dict(family="negative_binomial", dispersion=1.0, y=[0.0, -2.0, 2.0, 0.0]), ValueError,
     "non-negative integer"),
    (dict(y=[0.0, 1.0, 2.0, 0.0]), ValueError, r"y must hold 0 or 1.*row 2"),
    (dict(family="gamma", shape=2.0, y=[1.0, 0.0, 2.0, 1.0]), ValueError, "positive"),
    (dict(family="binomial", trials=2, y=[0.0, 3.0, 2.0, 0.0]), ValueError, r"\[0, trials\]"),
    (dict(family="binomial"), TypeError, "needs trials="),
    (dict(family="binomial", trials=0), ValueError, "trials must hold integers >= 1"),
    (dict(family="negative_binomial", dispersion="guess"), ValueError,
     "dispersion must be a positive number or 'estimate'"),
    (dict(family="student_t", scale="estimate"), ValueError, "estimable: dispersion"),
    (dict(family="negative_binomial", dispersion=-1.0), ValueError, "dispersion must be in"),
    (dict(family="poisson", dispersion=2.0), TypeError, "dispersion= does not apply"),
    (dict(offset=np.zeros(3)), ValueError, r"offset must have one entry per row of X \(4\)"),
    (dict(weights=np.ones(5)), ValueError, r"weights must have one entry per row"),
    (dict(weights=[1.0, -1.0, 1.0, 1.0]), ValueError, r"weights must hold finite values >= 0"),
    (dict(offset=[0.0, np.nan, 0.0, 0.0]), ValueError, "offset must hold finite"),
])
def test_bad_input_is_refused_by_name(kwargs, error, match):
    X = np.ones((4, 1))
    y = kwargs.pop("y", [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(error, match=match):
        GLM(X, y, **kwargs)


def test_the_callers_arrays_are_not_changed():
    rng, X, th = _design(seed=6)
    y = rng.poisson(np.exp(X @ th)).astype(float)
    off, w = rng.normal(size=N), rng.uniform(0, 2, N)
    copies = [a.copy() for a in (X, y, off, w)]
    model = GLM(X, y, "poisson", offset=off, weights=w, prior=GaussianPrior(0.0, 5.0))
    ControlVariates(model)
    for a, b in zip((X, y, off, w), copies):
        assert np.array_equal(a, b)


# --- compiled chain loop --------------------------------------------------------------------


def _assert_same_chain(a, b):
    assert np.array_equal(a.samples, b.samples)
    assert sorted(a.stats) == sorted(b.stats)
    for key in a.stats:
        assert np.array_equal(a.stats[key], b.stats[key], equal_nan=True), key


def test_compiled_loop_equals_python_loop():
    # One family is enough here: the chain loop reads every family through the same data
    # tuple (X, y, trials, offset, weights, params, 1/K) and the same three row kernels, which
    # the Python loop runs too (in the batch loops), so the loops agree or not whatever the
    # family; each family's kernels are checked against SciPy above and run on the compiled
    # loop in test_posterior_mean_matches_importance_sampling. Poisson: a per-row offset.
    # Each further family would compile both chain loops again (~15 CPU-s cold).
    model = dict((c[0], c[1]) for c in CASES)["poisson-log"]
    walk = RandomWalk(0.02)
    test = AustereTest(m=50, epsilon=0.05)
    python = sample(model, test, walk, THETA, 200, rng=3, compiled=False)
    compiled = sample(model, test, walk, THETA, 200, rng=3, compiled=True)
    _assert_same_chain(python, compiled)
    cv = ControlVariates(model, center=THETA)
    test = AustereTest(m=20, epsilon=0.05)
    python = sample(cv, test, walk, THETA, 200, rng=4, compiled=False)
    compiled = sample(cv, test, walk, THETA, 200, rng=4, compiled=True)
    _assert_same_chain(python, compiled)


@pytest.mark.slow   # compiles the confidence test's block loops for a new model
def test_confidence_test_reads_the_family_bound_or_scans():
    model = dict((c[0], c[1]) for c in CASES)["negative_binomial-log"]
    walk = RandomWalk(0.02)
    for test in (ConfidenceTest(), ConfidenceTest(range="full-data")):
        python = sample(model, test, walk, THETA, 50, rng=5, compiled=False)
        compiled = sample(model, test, walk, THETA, 50, rng=5, compiled=True)
        _assert_same_chain(python, compiled)
    poisson = dict((c[0], c[1]) for c in CASES)["poisson-log"]
    with pytest.raises(TypeError, match="range='full-data'"):
        sample(poisson, ConfidenceTest(), walk, THETA, 5, rng=5)
    # the Python loop: the compiled full-data scan is the negative binomial's above, and a
    # compiled Poisson chain would compile the loop again for this shape check
    chain = sample(poisson, ConfidenceTest(range="full-data"), walk, THETA, 5, rng=5,
                   compiled=False)
    assert chain.samples.shape == (5, 3)


# --- the posterior: a chain against importance sampling from the Laplace approximation -----


POSTERIOR = ["poisson-log", "bernoulli-probit", "negative_binomial-log", "binomial-cloglog",
             "gamma-log"]


@pytest.mark.slow
@pytest.mark.parametrize("name", POSTERIOR)
def test_posterior_mean_matches_importance_sampling(name):
    base = dict((c[0], c[1]) for c in CASES)[name]
    extra = {"trials": base.trials} if base.family == "binomial" else _params(base, 0)
    model = GLM(base.X, base.y, base.family, base.link, offset=base.offset,
                prior=GaussianPrior(0.0, 5.0), **extra)
    cv = ControlVariates(model)
    mode, cov = cv.center.theta, cv.laplace_covariance()
    idx = np.arange(N)
    # importance sampling from a widened Laplace approximation (Student-t, 5 df)
    rng = np.random.default_rng(7)
    M = 20_000
    L = np.linalg.cholesky(1.5 * cov)
    z = rng.standard_normal((M, 3)) / np.sqrt(rng.chisquare(5, (M, 1)) / 5)
    draws = mode + z @ L.T
    log_q = stats.multivariate_t.logpdf(draws, mode, 1.5 * cov, df=5)
    log_p = np.array([model.loglik(t, idx).sum() + model.logprior(t) for t in draws])
    w = np.exp(log_p - log_q - (log_p - log_q).max())
    w /= w.sum()
    is_mean = w @ draws
    is_sd = np.sqrt(w @ (draws - is_mean) ** 2)
    # the chain: exact MH with the Laplace random walk, on the compiled loop
    chain = sample(model, ExactTest(), RandomWalk.from_laplace(cv), mode, 6000, rng=8,
                   compiled=True)
    s = chain.samples[500:]
    from samplers import import_arviz

    az = import_arviz()
    ess = np.array([float(az.ess(s[:, j])) for j in range(3)])
    se = np.sqrt(is_sd**2 / ess + 1.0 / (1.0 / (w**2).sum()) * is_sd**2)
    assert np.all(np.abs(s.mean(axis=0) - is_mean) < 5 * se), (s.mean(axis=0), is_mean, se)


def test_a_model_pickles_and_gives_the_same_rows():
    import pickle

    model = dict((c[0], c[1]) for c in CASES)["negative_binomial-log"]
    copy = pickle.loads(pickle.dumps(model))
    idx = np.arange(N)
    assert np.array_equal(copy.loglik(THETA, idx), model.loglik(THETA, idx))
    assert copy.loglik_ratio_bound(THETA, THETA + 0.1) == model.loglik_ratio_bound(THETA,
                                                                                 THETA + 0.1)


# --- Firefly: collapsible Taylor bounds for the families with a bounded curvature ----------


def _bound_cases():
    rng, X, th = _design(n=1000, seed=9)
    eta = X @ th
    off = rng.normal(scale=0.2, size=1000)
    w = rng.integers(0, 3, 1000).astype(float)
    y01 = (rng.random(1000) < special.ndtr(eta + off)).astype(float)
    n = rng.integers(1, 6, 1000).astype(float)
    yb = rng.binomial(n.astype(int), special.expit(eta)).astype(float)
    ynb = rng.negative_binomial(2.0, 2.0 / (2.0 + np.exp(eta))).astype(float)
    yt = eta + rng.standard_t(4, 1000)
    return [GLM(X, y01, link="probit", offset=off, weights=w, temperature=1.5),
            GLM(X, yb, "binomial", trials=n), GLM(X, yb, "binomial", "probit", trials=n),
            GLM(X, ynb, "negative_binomial", dispersion=2.0), GLM(X, yt, "student_t"),
            GLM(X, yt, "gaussian", scale=1.3)]


@pytest.mark.parametrize("model", _bound_cases(), ids=repr)
def test_firefly_bound_lies_below_touches_and_collapses(model):
    bound = model.firefly_bound()
    idx = np.arange(model.N)
    rng = np.random.default_rng(10)
    scale = 1e-12 * np.abs(model.loglik(bound.theta_tuned, idx)).max()
    for _ in range(10):
        theta = bound.theta_tuned + rng.normal(scale=0.7, size=3)
        lb, ll = bound.log_bound(theta, idx), model.loglik(theta, idx)
        assert np.all(lb <= ll + scale + 1e-13)
        assert lb.sum() == pytest.approx(bound.log_bound_sum(theta), rel=1e-10)
    np.testing.assert_allclose(bound.log_bound(bound.theta_tuned, idx),
                               model.loglik(bound.theta_tuned, idx), rtol=1e-12, atol=1e-12)
    h = 1e-6
    fd = np.column_stack([(bound.log_bound(theta + h * e, idx) - bound.log_bound(theta - h * e, idx))
                          / (2 * h) for e in np.eye(3)])
    G = bound.grad_log_bound(theta, idx)
    np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bound.grad_log_bound_sum(theta), G.sum(axis=0), rtol=1e-10)


@pytest.mark.parametrize("kwargs", [dict(family="poisson"), dict(family="gamma", shape=2.0),
                                    dict(family="binomial", link="cloglog", trials=3),
                                    dict(family="negative_binomial")])
def test_families_without_a_quadratic_bound_say_so(kwargs):
    X = np.column_stack([np.ones(4), [0.0, 1.0, 2.0, 3.0]])
    model = GLM(X, [1.0, 2.0, 1.0, 3.0], **kwargs)
    with pytest.raises(TypeError, match="no quadratic lower bound in eta"):
        model.firefly_bound()


@pytest.mark.slow
def test_firefly_on_a_probit_glm_matches_exact_mh():
    """FlyMC (MAP-tuned Taylor bound, compiled loop) against exact MH on the same probit
    posterior: means within 5 standard errors of their difference (ESS-based MCSEs)."""
    import arviz as az

    from samplers import firefly

    rng, X, th = _design(n=2000, seed=12)
    y = (rng.random(2000) < special.ndtr(X @ th)).astype(float)
    model = GLM(X, y, link="probit", prior=GaussianPrior(0.0, 5.0))
    bound = model.firefly_bound()
    cv = ControlVariates(model)
    walk = RandomWalk.from_laplace(cv)
    fly = firefly(model, bound, walk, bound.theta_tuned, 8000, rng=13, compiled=True)
    exact = sample(model, ExactTest(), walk, cv.center.theta, 6000, rng=14, compiled=True)
    assert fly.stats["n_used"].mean() < 0.5 * model.N
    means, ses = [], []
    for chain in (fly, exact):
        s = chain.samples[500:]
        ess = np.array([float(az.ess(s[:, j])) for j in range(3)])
        means.append(s.mean(axis=0))
        ses.append(s.std(axis=0) / np.sqrt(ess))
    se = np.hypot(*ses)
    assert np.all(np.abs(means[0] - means[1]) < 5 * se), (means, se)
