"""samplers.GLM with its family parameter estimated (negative-binomial dispersion, gamma
shape, Gaussian noise scale as theta's last coordinate, on the log scale): row kernels
against SciPy and finite differences in every coordinate, the full sums and control
variates, the compiled loop against the Python loop, and the posterior of the dispersion
against quadrature and, through ``validation.fit``, against importance sampling."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from samplers import (GLM, AustereTest, ControlVariates, ExactTest, GaussianPrior, RandomWalk,
                      sample)
from samplers.models import glm as glm_module
from samplers.models._glm import glm_kernels, glm_sums

N = 300
BETA = np.array([0.3, -0.5, 0.8])


def _cases():
    """``(name, model, theta, reference row log-densities as a function of theta)``."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, 2))])
    mu = np.exp(X @ BETA)
    y_nb = rng.negative_binomial(2.5, 2.5 / (2.5 + mu)).astype(float)
    y_nb[:5] = [0.0, 17.0, 40.0, 120.0, 3.0]       # both branches of the psi differences
    off = rng.normal(scale=0.3, size=N)
    w = rng.integers(0, 3, N).astype(float)
    y_g = rng.gamma(3.0, mu / 3.0)
    y_n = X @ BETA + 0.7 * rng.normal(size=N)

    def nb(t):
        r = np.exp(t[3])
        return stats.nbinom.logpmf(y_nb, r, r / (r + np.exp(X @ t[:3] + off)))

    def gamma(t):
        k = np.exp(t[3])
        return w * stats.gamma.logpdf(y_g, k, scale=np.exp(X @ t[:3]) / k) / 2.0

    def gauss(t):
        return stats.norm.logpdf(y_n, X @ t[:3], np.exp(t[3]))

    return [
        ("negative_binomial", GLM(X, y_nb, "negative_binomial", offset=off),
         np.r_[BETA, np.log(2.5)], nb),
        ("gamma weighted tempered", GLM(X, y_g, "gamma", weights=w, temperature=2.0),
         np.r_[BETA, np.log(3.0)], gamma),
        ("gaussian", GLM(X, y_n, "gaussian", scale="estimate"), np.r_[BETA, np.log(0.7)], gauss),
    ]


CASES = _cases()
IDS = [c[0] for c in CASES]
IDX = np.arange(N)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_loglik_and_ratio_match_scipy(case):
    _, model, theta, ref = case
    assert model.dim == 4 and model.names[-1] == f"log_{model.estimated}"
    np.testing.assert_allclose(model.loglik(theta, IDX), ref(theta), rtol=1e-12, atol=1e-11)
    other = theta + np.array([0.05, -0.1, 0.02, 0.3])
    np.testing.assert_allclose(model.loglik_ratio(theta, other, IDX), ref(other) - ref(theta),
                               rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_and_hessian_match_finite_differences(case):
    _, model, theta, _ = case
    h = 1e-6
    fd = np.column_stack([(model.loglik(theta + h * e, IDX) - model.loglik(theta - h * e, IDX))
                          / (2 * h) for e in np.eye(4)])
    G = model.grad_loglik(theta, IDX)
    np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-6)
    L, g, H = glm_sums(model, theta)
    assert L == pytest.approx(model.loglik(theta, IDX).sum(), rel=1e-12)
    np.testing.assert_allclose(g, G.sum(axis=0), rtol=1e-12, atol=1e-9)
    fd_H = np.column_stack([(glm_sums(model, theta + h * e)[1] - glm_sums(model, theta - h * e)[1])
                            / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(H, fd_H, rtol=1e-6, atol=1e-5 * np.abs(H).max())
    assert np.array_equal(H, H.T)


def test_digamma_and_trigamma_match_scipy():
    x = np.concatenate([np.geomspace(1e-3, 1e4, 200), [9.999, 10.0, 10.001]])
    psi = np.array([glm_module._digamma(v) for v in x])
    psi1 = np.array([glm_module._trigamma(v) for v in x])
    np.testing.assert_allclose(psi, special.digamma(x), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(psi1, special.polygamma(1, x), rtol=1e-13)
    for y in (0.0, 1.0, 15.0, 16.0, 300.0):
        for r in (0.05, 2.5, 1e3):
            d1, d2 = glm_module._psi_diffs(y, r)
            assert d1 == pytest.approx(special.digamma(y + r) - special.digamma(r), rel=1e-11,
                                       abs=1e-15)
            assert d2 == pytest.approx(special.polygamma(1, y + r) - special.polygamma(1, r),
                                       rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_control_variates_keep_the_sums_and_shrink_the_rows(case, order):
    _, model, theta, _ = case
    cv = ControlVariates(model, order=order)
    post_g = cv.center.posterior_grad
    assert np.abs(post_g).max() < 1e-6 * np.abs(cv.center.posterior_hess).max()
    a = cv.center.theta + np.array([0.02, -0.01, 0.01, 0.03])
    b = a + np.array([0.01, 0.0, -0.01, 0.05])
    raw = model.loglik_ratio(a, b, IDX)
    resid = cv.loglik_ratio(a, b, IDX)
    assert resid.sum() == pytest.approx(raw.sum(), rel=1e-9, abs=1e-10)
    assert resid.std() < 0.2 * raw.std()
    assert cv.loglik(a, IDX).sum() == pytest.approx(model.loglik(a, IDX).sum(), rel=1e-12)
    np.testing.assert_allclose(cv.grad_loglik(a, IDX).sum(axis=0),
                               model.grad_loglik(a, IDX).sum(axis=0), rtol=1e-9, atol=1e-9)


def test_no_residual_bound_and_it_says_so():
    model = CASES[0][1]
    assert glm_kernels(model).nuisance
    cv = ControlVariates(model)
    with pytest.raises(TypeError, match="range='full-data'"):
        cv.residual_bound(cv.center.theta, cv.center.theta + 0.01)
    with pytest.raises(TypeError, match="parameter is estimated"):
        model.loglik_ratio_bound(cv.center.theta, cv.center.theta + 0.01)


def test_default_prior_is_flat_on_the_coefficients_and_normal_on_the_log_parameter():
    model = CASES[0][1]
    t = np.array([5.0, -7.0, 2.0, 1.5])
    assert model.logprior(t) == pytest.approx(stats.norm.logpdf(1.5, 0.0, 3.0))
    assert np.array_equal(model.grad_logprior(t), [0.0, 0.0, 0.0, -1.5 / 9.0])
    given = GLM(model.X, model.y, "negative_binomial", prior=GaussianPrior(0.0, 2.0))
    assert given.logprior(t) == pytest.approx(stats.norm.logpdf(t, 0.0, 2.0).sum())


def test_a_fixed_parameter_keeps_the_old_model():
    model = CASES[0][1]
    fixed = GLM(model.X, model.y, "negative_binomial", dispersion=2.5, offset=model.offset)
    theta = np.r_[BETA, np.log(2.5)]
    assert fixed.dim == 3 and fixed.estimated is None
    np.testing.assert_allclose(fixed.loglik(BETA, IDX), model.loglik(theta, IDX), rtol=1e-12)


def _assert_same_chain(a, b):
    assert np.array_equal(a.samples, b.samples)
    for key in a.stats:
        assert np.array_equal(a.stats[key], b.stats[key], equal_nan=True), key


def test_compiled_loop_equals_python_loop():
    # compiled=True raises a TypeError when a part of the compiled loop is missing. One
    # family: the chain loop reads every estimated family through the same data tuple and
    # the same row kernels the Python loop's batch loops run, so the loops agree or not
    # whatever the family (each family's kernels are checked against SciPy above); the
    # negative binomial has a per-row offset. A second family would compile both chain
    # loops again.
    _, model, theta, _ = CASES[0]
    walk = RandomWalk(0.02)
    test = AustereTest(m=50, epsilon=0.05)
    python = sample(model, test, walk, theta, 200, rng=3, compiled=False)
    compiled = sample(model, test, walk, theta, 200, rng=3, compiled=True)
    _assert_same_chain(python, compiled)
    cv = ControlVariates(model, center=theta)
    test = AustereTest(m=20, epsilon=0.05)
    python = sample(cv, test, walk, theta, 200, rng=4, compiled=False)
    compiled = sample(cv, test, walk, theta, 200, rng=4, compiled=True)
    _assert_same_chain(python, compiled)


# --- the posterior of the dispersion ---------------------------------------------------------


def _nb_intercept_data(n=400, seed=11):
    rng = np.random.default_rng(seed)
    mu, r = np.exp(1.0), 1.5
    return rng.negative_binomial(r, r / (r + mu), n).astype(float)


def _grid_posterior(y, n=241):
    """Mean and sd of (beta0, log r) for the intercept-only negative binomial under the
    default prior, by quadrature on a grid of +-8 Laplace sds (scipy's log pmf)."""
    model = GLM(np.ones((y.shape[0], 1)), y, "negative_binomial")
    cv = ControlVariates(model)
    mode, sd = cv.center.theta, np.sqrt(np.diag(cv.laplace_covariance()))
    axes = [mode[j] + sd[j] * np.linspace(-8, 8, n) for j in range(2)]
    A, B = np.meshgrid(*axes, indexing="ij")
    mu, r = np.exp(A.ravel())[:, None], np.exp(B.ravel())[:, None]
    logp = stats.nbinom.logpmf(y[None, :], r, r / (r + mu)).sum(axis=1)
    logp += stats.norm.logpdf(B.ravel(), 0.0, 3.0)
    w = np.exp(logp - logp.max())
    w /= w.sum()
    pts = np.column_stack([A.ravel(), B.ravel()])
    mean = w @ pts
    return model, cv, mean, np.sqrt(w @ (pts - mean) ** 2)


def test_dispersion_posterior_matches_quadrature():
    import arviz as az

    y = _nb_intercept_data()
    model, cv, mean, sd = _grid_posterior(y)
    chain = sample(model, ExactTest(), RandomWalk.from_laplace(cv), cv.center.theta, 8000,
                   rng=12, compiled=True)
    s = chain.samples[500:]
    ess = np.array([float(az.ess(s[:, j])) for j in range(2)])
    assert ess.min() > 800
    se_mean = sd / np.sqrt(ess)
    se_sd = sd / np.sqrt(2.0 * ess)
    assert np.all(np.abs(s.mean(axis=0) - mean) < 5 * se_mean), (s.mean(axis=0), mean, se_mean)
    assert np.all(np.abs(s.std(axis=0) - sd) < 5 * se_sd), (s.std(axis=0), sd, se_sd)


@pytest.mark.slow
def test_fit_recovers_the_dispersion():
    """``validation.fit`` on a negative-binomial GLM with the dispersion estimated, against
    importance sampling from a widened Laplace approximation (Student-t, 5 df): posterior
    means within 5 Monte Carlo standard errors (the chain's, ESS-based, and the importance
    sampler's), and the true log r within 4 posterior sds."""
    import arviz as az

    from validation import fit

    rng = np.random.default_rng(21)
    n, r = 2000, 2.0
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    mu = np.exp(X @ [0.5, -0.4])
    y = rng.negative_binomial(r, r / (r + mu)).astype(float)
    model = GLM(X, y, "negative_binomial")
    idata = fit(model, draws=3000, rng=22)
    draws = np.asarray(idata.posterior.theta).reshape(-1, 3)
    ess = np.asarray(az.ess(idata)["theta"]).ravel()
    # the reference
    cv = ControlVariates(model)
    mode, cov = cv.center.theta, 1.5 * cv.laplace_covariance()
    M = 20_000
    z = rng.standard_normal((M, 3)) / np.sqrt(rng.chisquare(5, (M, 1)) / 5)
    pts = mode + z @ np.linalg.cholesky(cov).T
    log_q = stats.multivariate_t.logpdf(pts, mode, cov, df=5)
    # the log posterior at every point, in blocks of points (the model's loglik one point at
    # a time took 9 s): log NB(y | r, mean e^eta) summed over rows, plus the N(0, 3) prior on
    # log r (test_default_prior_is_flat...)
    log_p = stats.norm.logpdf(pts[:, 2], 0.0, 3.0)
    for s in range(0, M, 1000):
        eta, r_ = pts[s:s + 1000, :2] @ X.T, np.exp(pts[s:s + 1000, 2:])
        log_p[s:s + 1000] += (special.gammaln(y + r_) - special.gammaln(r_)
                              - special.gammaln(y + 1) + r_ * np.log(r_) + y * eta
                              - (r_ + y) * np.logaddexp(np.log(r_), eta)).sum(axis=1)
    w = np.exp(log_p - log_q - (log_p - log_q).max())
    w /= w.sum()
    mean = w @ pts
    sd = np.sqrt(w @ (pts - mean) ** 2)
    se = np.sqrt(sd**2 / ess + sd**2 * (w**2).sum())
    assert ess.min() >= 400
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * se), (draws.mean(axis=0), mean, se)
    assert abs(draws[:, 2].mean() - np.log(r)) < 4 * sd[2]
