"""ControlVariates: compiled kernels against NumPy, exactness of the mean, the center's sums,
the residual bound, the compiled and reference paths, and bad input."""

import math

import numpy as np
import pytest

from samplers import (
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ControlVariates,
    GaussianMean,
    GaussianPrior,
    LinearRegression,
    LogisticRegression,
    RandomWalk,
    RobustRegression,
    sample,
)
from samplers.datasets import logistic_regression
from samplers.models.control_variates import SATURATION


def _logistic(N=4000, d=3, seed=0, dtype=np.float64, prior=GaussianPrior(0.0, 5.0)):
    X, y, _ = logistic_regression(N, d, rng=seed)
    return LogisticRegression(X.astype(dtype), y, prior=prior)


def _models():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=(3000, 2)), np.ones(3000)])
    y_lin = X @ [0.5, -1.0, 0.2] + rng.normal(0.0, 0.7, 3000)
    y_t = X @ [0.5, -1.0, 0.2] + 0.4 * rng.standard_t(3.0, 3000)
    return {
        "logistic": _logistic(),
        "logistic-f32-tempered": LogisticRegression(
            *logistic_regression(3000, 4, rng=1)[:2], temperature=3.0),
        "linear": LinearRegression(X, y_lin, noise_sd=0.7, prior=GaussianPrior(0.0, 3.0)),
        "robust": RobustRegression(X, y_t, df=3.0, scale=0.4),
        "mean": GaussianMean(rng.normal(0.3, 2.0, 2000), sigma=2.0),
    }


MODELS = _models()
MODELS["logistic-f32-tempered"] = LogisticRegression(
    MODELS["logistic-f32-tempered"].X.astype(np.float32), MODELS["logistic-f32-tempered"].y,
    temperature=3.0)


def _points(cv, rng, scale):
    """A random pair (theta, theta_new) around the center at posterior scale times ``scale``."""
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    theta = cv.center.theta + scale * sd * rng.normal(size=cv.dim)
    return theta, theta + scale * sd * rng.normal(size=cv.dim)


def _row_hessians(model, theta, idx, h=1e-4):
    """Per-row Hessians by central differences of the model's own per-row gradients."""
    d = theta.shape[0]
    out = np.empty((idx.shape[0], d, d))
    for j in range(d):
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        out[:, :, j] = (model.grad_loglik(up, idx) - model.grad_loglik(down, idx)) / (2 * h)
    return out


def _reference_ratio(model, center, order, theta, theta_new, idx):
    """r_i + P/N from the model's public per-row values and derivatives (NumPy only)."""
    l = model.loglik_ratio(theta, theta_new, idx)
    G = model.grad_loglik(center, idx)
    u, u_new = theta - center, theta_new - center
    proxy = G @ (theta_new - theta)
    all_rows = np.arange(model.N)
    P = model.grad_loglik(center, all_rows).sum(axis=0) @ (theta_new - theta)
    if order == 2:
        Hs = _row_hessians(model, center, idx)
        proxy += 0.5 * (np.einsum("nij,i,j->n", Hs, u_new, u_new) - np.einsum("nij,i,j->n", Hs, u, u))
        H = _row_hessians(model, center, all_rows).sum(axis=0)
        P += 0.5 * (u_new @ H @ u_new - u @ H @ u)
    return l - proxy + P / model.N


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_rows_match_numpy_reference(name, order):
    model = MODELS[name]
    cv = ControlVariates(model, order=order)
    rng = np.random.default_rng(5)
    idx = rng.choice(model.N, 300, replace=False)
    for _ in range(3):
        theta, theta_new = _points(cv, rng, 1.0)
        got = cv.loglik_ratio(theta, theta_new, idx)
        want = _reference_ratio(model, cv.center.theta, order, theta, theta_new, idx)
        scale = np.abs(model.loglik_ratio(theta, theta_new, idx)).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * scale)
        # the residual gradient plus (g + H u)/N: its rows sum to the full gradient
        all_rows = np.arange(model.N)
        np.testing.assert_allclose(cv.grad_loglik(theta, all_rows).sum(axis=0),
                                   model.grad_loglik(theta, all_rows).sum(axis=0),
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(cv.loglik(theta, all_rows).sum(),
                                   model.loglik(theta, all_rows).sum(), rtol=1e-11)
        # the compiled gradient rows against the definition grad l_i - grad proxy_i + (g+Hu)/N
        G_c = model.grad_loglik(cv.center.theta, idx)
        want_g = model.grad_loglik(theta, idx) - G_c
        if order == 2:
            want_g -= _row_hessians(model, cv.center.theta, idx) @ (theta - cv.center.theta)
            want_g += (cv.center.grad + cv.center.hess @ (theta - cv.center.theta)) / model.N
        else:
            want_g += cv.center.grad / model.N
        np.testing.assert_allclose(cv.grad_loglik(theta, idx), want_g, rtol=1e-6,
                                   atol=1e-6 * np.abs(want_g).max())


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", list(MODELS))
def test_mean_over_all_rows_is_the_true_mean(name, order):
    model = MODELS[name]
    cv = ControlVariates(model, order=order)
    rng = np.random.default_rng(8)
    rows = np.arange(model.N)
    for scale in (0.3, 1.0, 5.0):
        theta, theta_new = _points(cv, rng, scale)
        l = model.loglik_ratio(theta, theta_new, rows)
        r = cv.loglik_ratio(theta, theta_new, rows)
        assert abs(r.sum() - l.sum()) <= 1e-10 * np.abs(l).sum() + 1e-12
        if scale <= 1.0 and name != "mean":
            assert r.std() < 0.2 * l.std()  # and the residuals are much less spread


@pytest.mark.parametrize("name", list(MODELS))
def test_center_sums_match_finite_differences_of_the_full_loglik(name):
    model = MODELS[name]
    cv = ControlVariates(model)
    rows = np.arange(model.N)
    c = cv.center.theta.copy()
    d = c.shape[0]

    def total(t):
        return float(model.loglik(t, rows).sum())

    h = 1e-4
    g = np.empty(d)
    H = np.empty((d, d))
    for j in range(d):
        e = np.zeros(d)
        e[j] = h
        g[j] = (total(c + e) - total(c - e)) / (2 * h)
        for k in range(d):
            f = np.zeros(d)
            f[k] = h
            H[j, k] = (total(c + e + f) - total(c + e - f) - total(c - e + f) + total(c - e - f)) / (4 * h * h)
    scale = np.abs(cv.center.hess).max()
    np.testing.assert_allclose(cv.center.grad, g, atol=1e-5 * scale)
    np.testing.assert_allclose(cv.center.hess, H, atol=1e-4 * scale)
    assert cv.center.loglik == pytest.approx(total(c), rel=1e-12)
    # at the mode the posterior gradient vanishes
    assert cv.center.method == "newton" and cv.center.offset < 1e-6
    prior_grad = model.grad_logprior(c)
    np.testing.assert_allclose(cv.center.grad + prior_grad, 0.0, atol=1e-6 * scale)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", ["logistic", "logistic-f32-tempered", "robust", "linear", "mean"])
def test_residual_bound_holds_and_is_not_vacuous(name, order):
    model = MODELS[name]
    cv = ControlVariates(model, order=order)
    rng = np.random.default_rng(13)
    rows = np.arange(model.N)
    worst = 0.0
    for scale in (0.5, 1.0, 3.0, 10.0):
        for _ in range(5):
            theta, theta_new = _points(cv, rng, scale)
            shift, B = cv.loglik_ratio_range(theta, theta_new)
            r = cv.loglik_ratio(theta, theta_new, rows)
            assert shift == cv.proxy_total(theta, theta_new) / model.N
            spread = np.abs(r - shift).max()
            assert spread <= B * (1 + 1e-9) + 1e-13, (scale, spread, B)
            assert np.abs(r).max() <= cv.loglik_ratio_bound(theta, theta_new) * (1 + 1e-9) + 1e-13
            if B > 0:
                worst = max(worst, spread / B)
    if order == 2 and name in ("linear", "mean"):
        assert worst == 0.0  # quadratic log-likelihoods: the residuals vanish, and B = 0
    else:
        # a bound a tenth of this one would be violated: the check above can fail
        assert worst > 0.1


def test_order1_and_order2_residuals_shrink_with_the_distance_to_the_center():
    cv1 = ControlVariates(MODELS["logistic"], order=1)
    cv2 = ControlVariates(MODELS["logistic"], order=2, center=cv1.center.theta)
    rows = np.arange(cv1.N)
    sd = np.sqrt(np.diag(cv1.laplace_covariance()))
    step = 0.05 * sd
    spreads = {1: [], 2: []}
    for dist in (1.0, 0.5, 0.25):
        theta = cv1.center.theta + dist * sd
        for order, cv in ((1, cv1), (2, cv2)):
            spreads[order].append(cv.loglik_ratio(theta, theta + step, rows).std())
    # r = R(s') - R(s) with R(t) ~ f2 t^2 / 2 (order 1) or f3 t^3 / 6 (order 2): spreads
    # ~ (s + s') |Delta| and ~ (s^2 + s s' + s'^2) |Delta|, with s = dist, s' = dist + 0.05
    assert spreads[1][0] / spreads[1][2] == pytest.approx(2.05 / 0.55, rel=0.1)
    assert spreads[2][0] / spreads[2][2] == pytest.approx(3.1525 / 0.2275, rel=0.15)


# --- the user-model path --------------------------------------------------------------------


class UserLogistic:
    """The built-in logistic regression through the user protocol, with derivative methods."""

    def __init__(self, model, grads=True, hess=True):
        self._m = model
        self.N = model.N
        self.dim = model.dim
        if grads:
            self.grad_loglik = model.grad_loglik
            self.grad_logprior = model.grad_logprior
        if hess:
            self.hess_loglik = self._hess

    def loglik(self, theta, idx):
        return self._m.loglik(theta, idx)

    def logprior(self, theta):
        return self._m.logprior(theta)

    def _hess(self, theta, idx):
        X = self._m.X[idx]
        p = 1.0 / (1.0 + np.exp(-(X @ theta)))
        return -(p * (1 - p))[:, None, None] * X[:, :, None] * X[:, None, :]


@pytest.mark.parametrize("grads, hess", [(True, True), (True, False), (False, False)])
def test_user_model_path_matches_the_compiled_wrapper(grads, hess):
    model = MODELS["logistic"]
    cv = ControlVariates(model)
    user = ControlVariates(UserLogistic(model, grads, hess))
    assert user.center.method == "lbfgs"
    np.testing.assert_allclose(user.center.theta, cv.center.theta, atol=1e-4 * np.abs(cv.center.theta).max())
    same = ControlVariates(UserLogistic(model, grads, hess), center=cv.center.theta)
    tol = 1e-10 if grads and hess else 1e-5
    np.testing.assert_allclose(same.center.hess, cv.center.hess, rtol=tol, atol=tol * np.abs(cv.center.hess).max())
    rng = np.random.default_rng(2)
    idx = rng.choice(model.N, 200, replace=False)
    theta, theta_new = _points(cv, rng, 1.0)
    want = cv.loglik_ratio(theta, theta_new, idx)
    got = same.loglik_ratio(theta, theta_new, idx)
    np.testing.assert_allclose(got, want, atol=(1e-12 if grads and hess else 1e-6) * np.abs(want).max() + 1e-14)
    np.testing.assert_allclose(same.grad_loglik(theta, idx), cv.grad_loglik(theta, idx),
                               rtol=1e-5, atol=1e-6 * np.abs(cv.grad_loglik(theta, idx)).max())


class PlainCV:
    """A ControlVariates model through the user protocol only: forces the reference path."""

    def __init__(self, cv):
        self._cv = cv
        self.N = cv.N
        self.dim = cv.dim

    def loglik(self, theta, idx):
        return self._cv.loglik(theta, idx)

    def loglik_ratio(self, theta, theta_new, idx):
        return self._cv.loglik_ratio(theta, theta_new, idx)

    def logprior(self, theta):
        return self._cv.logprior(theta)

    def loglik_ratio_range(self, theta, theta_new):
        return self._cv.loglik_ratio_range(theta, theta_new)


@pytest.mark.parametrize("test", [AustereTest(m=50, epsilon=0.05), BarkerTest(m=60, delta=None),
                                  ConfidenceTest(delta=0.05, batch_size=20)], ids=repr)
def test_compiled_loops_on_the_wrapper_are_bit_identical_to_reference(test):
    cv = ControlVariates(MODELS["logistic"])
    proposal = RandomWalk(2.0 * cv.laplace_covariance() / cv.dim)
    fast = sample(cv, test, proposal, cv.center.theta, 120, rng=4)
    slow = sample(PlainCV(cv), test, proposal, cv.center.theta, 120, rng=4)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    for key in fast.stats:
        np.testing.assert_array_equal(fast.stats[key], slow.stats[key], err_msg=key)
    assert 0 < fast.acceptance_rate < 1


def test_confidence_test_uses_the_half_width_not_the_shift():
    # Every row of a quadratic model's order-2 wrapper equals P/N: the range has width 0 and
    # the confidence test decides without reading a row, from the center P/N.
    cv = ControlVariates(MODELS["linear"])
    chain = sample(cv, ConfidenceTest(delta=0.01), RandomWalk(2.0 * cv.laplace_covariance() / 3),
                   cv.center.theta, 200, rng=1)
    assert chain.stats["n_used"].max() == 0 and 0.2 < chain.acceptance_rate < 0.9


# --- bad input ------------------------------------------------------------------------------


class PositiveRate:
    """Exponential data with rate theta: the log-likelihood is -inf... undefined for theta <= 0."""

    def __init__(self, x, N=None):
        self.x = x
        self.N = len(x) if N is None else N
        self.dim = 1

    def loglik(self, theta, idx):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(theta[0] > 0, np.log(np.maximum(theta[0], 0)) - theta[0] * self.x[idx], -np.inf)

    def logprior(self, theta):
        return 0.0


@pytest.mark.parametrize("order", [0, 3, 1.5, True, "2"])
def test_order_must_be_1_or_2(order):
    with pytest.raises(ValueError, match="order must be 1 or 2"):
        ControlVariates(MODELS["mean"], order=order)


def test_center_with_infinite_loglik_is_refused():
    model = PositiveRate(np.random.default_rng(0).exponential(1.0, 500))
    with pytest.raises(ValueError, match="center"):
        ControlVariates(model, center=[-1.0], order=1)
    with pytest.raises(ValueError, match="center must have 1 element"):
        ControlVariates(MODELS["mean"], center=[0.0, 1.0])
    with pytest.raises(ValueError, match="center"):
        ControlVariates(MODELS["mean"], center=[np.nan])


def test_user_model_without_gradients_is_refused_beyond_the_fd_limit():
    model = PositiveRate(np.ones(10), N=2_000_000)
    with pytest.raises(TypeError, match="grad_loglik and model.hess_loglik"):
        ControlVariates(model, center=[1.0])
    with pytest.raises(TypeError, match="model.grad_loglik"):
        ControlVariates(model, center=[1.0], order=1)


def test_confidence_test_refuses_a_user_model_wrapper_without_a_bound():
    cv = ControlVariates(UserLogistic(MODELS["logistic"]))
    with pytest.raises(TypeError, match="full-data"):
        sample(cv, ConfidenceTest(), RandomWalk.from_laplace(cv), cv.center.theta, 5, rng=0)
    with pytest.raises(TypeError, match="full-data"):
        cv.loglik_ratio_bound(cv.center.theta, cv.center.theta)
    chain = sample(cv, ConfidenceTest(range="full-data"), RandomWalk.from_laplace(cv),
                   cv.center.theta, 5, rng=0)
    assert set(chain.stats["n_scanned"]) <= {0, cv.N}


def test_far_center_is_allowed_and_reported():
    model = MODELS["logistic"]
    mode = ControlVariates(model).center
    sd = np.sqrt(np.diag(np.linalg.inv(-mode.posterior_hess)))
    far = ControlVariates(model, center=mode.theta + 20 * sd)
    assert far.center.method == "given" and far.center.offset > 5
    assert np.linalg.norm(far.center.posterior_grad) > 1e3 * np.linalg.norm(mode.posterior_grad)


def test_rows_cannot_be_read_without_the_pair():
    cv = ControlVariates(MODELS["mean"])
    with pytest.raises(TypeError, match="_decision_data"):
        cv._kernel_data()


def test_memmap_data_and_a_given_center(tmp_path):
    X, y, _ = logistic_regression(5000, 3, rng=7)
    path = tmp_path / "X.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    model = LogisticRegression(np.memmap(path, dtype=np.float32, mode="r", shape=X.shape), y)
    cv = ControlVariates(model)
    again = ControlVariates(model, center=cv.center.theta)
    assert again.center.n_passes == 1 and math.isclose(again.center.loglik, cv.center.loglik)


def test_the_mode_keeps_the_sums_of_its_last_newton_pass(monkeypatch):
    """The center found by Newton's method takes its sums from the pass at the accepted
    point (no pass of its own): the same bits as a pass at that point, one pass fewer."""
    import samplers.models.control_variates as cvmod

    X, y, _ = logistic_regression(5000, 3, rng=7)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    calls = []
    sums = cvmod.ControlVariates._sums
    monkeypatch.setattr(cvmod.ControlVariates, "_sums",
                        lambda self, t, **k: calls.append(np.array(t)) or sums(self, t, **k))
    cv = ControlVariates(model)
    assert cv.center.method == "newton" and cv.center.n_passes == len(calls) >= 2
    assert len({t.tobytes() for t in calls}) == len(calls)     # no point passed over twice
    again = ControlVariates(model, center=cv.center.theta)      # one pass at the mode
    for field in ("theta", "loglik", "grad", "hess", "posterior_grad", "posterior_hess",
                  "offset"):
        np.testing.assert_array_equal(getattr(again.center, field), getattr(cv.center, field),
                                      err_msg=field)


# --- proposals from the Laplace covariance ----------------------------------------------------


def test_laplace_scaled_proposals():
    from samplers import Langevin, LaplaceApproximation

    cv = ControlVariates(MODELS["logistic"])
    cov = cv.laplace_covariance()
    np.testing.assert_allclose(cov, np.linalg.inv(-cv.center.posterior_hess), rtol=1e-10)
    walk = RandomWalk.from_laplace(cv)
    np.testing.assert_allclose(walk.scale, 2.38**2 / cv.dim * cov)
    same = RandomWalk.from_laplace(LaplaceApproximation(cv.center.theta, cov))
    np.testing.assert_array_equal(same.scale, walk.scale)
    mala = Langevin.from_laplace(cv, batch_size=64)
    assert mala.step_size == pytest.approx(1.65**2 / cv.dim ** (1 / 3))
    assert mala.batch_size == 64
    np.testing.assert_array_equal(mala.covariance, cov)


def test_preconditioned_langevin_q_ratio_is_the_gaussian_density_ratio():
    from scipy import stats

    from samplers import Langevin

    cv = ControlVariates(MODELS["logistic"])
    cov = cv.laplace_covariance()
    mala = Langevin(0.7, None, cov)
    rng = np.random.default_rng(0)
    x, y = cv.center.theta, cv.center.theta + rng.normal(size=cv.dim) * 0.01
    gx, gy = rng.normal(size=cv.dim) * 50, rng.normal(size=cv.dim) * 50
    want = (stats.multivariate_normal(y + 0.35 * cov @ gy, 0.7 * cov).logpdf(x)
            - stats.multivariate_normal(x + 0.35 * cov @ gx, 0.7 * cov).logpdf(y))
    got = mala._log_q(x, y, gy) - mala._log_q(y, x, gx)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("bad, match", [
    (np.array([[1.0, 2.0], [2.0, 1.0]]), "positive definite"),
    (np.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
    (np.ones(3), "dimension"),
    (np.array([[np.nan, 0.0], [0.0, 1.0]]), "finite"),
])
def test_bad_covariances_are_refused(bad, match):
    from samplers import Langevin

    with pytest.raises(ValueError, match=match):
        RandomWalk.from_laplace(bad)
    with pytest.raises(ValueError, match=match):
        Langevin(0.1, None, bad)


def test_langevin_covariance_must_match_the_model():
    from samplers import Langevin

    cv = ControlVariates(MODELS["logistic"])
    with pytest.raises(ValueError, match="covariance is 2 x 2"):
        sample(cv, AustereTest(), Langevin(0.1, 10, np.eye(2)), cv.center.theta, 3, rng=0)


def test_wrapper_pickles_for_process_pools():
    import pickle

    cv = ControlVariates(MODELS["logistic"])
    back = pickle.loads(pickle.dumps(cv))
    rows = np.arange(50)
    theta = cv.center.theta + 0.01
    np.testing.assert_array_equal(back.loglik_ratio(cv.center.theta, theta, rows),
                                  cv.loglik_ratio(cv.center.theta, theta, rows))


def test_no_mode_is_an_error_that_says_what_to_do():
    X = np.column_stack([np.ones(200), np.linspace(-1, 1, 200)])
    y = (X[:, 1] > 0).astype(float)  # separable: under a flat prior the likelihood has no maximum
    with pytest.raises(RuntimeError, match="no mode"):
        ControlVariates(LogisticRegression(X, y))
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 3.0)), start=[0.1, 0.1])
    assert cv.center.offset < 1e-6


def test_heavy_tailed_covariates_have_a_mode():
    """Student-t(1.2) covariates: max||x_i||^2 dwarfs the typical row and the huge rows
    saturate, so the mode's curvature is a tiny share of N M2 max||x_i||^2; the mode search
    must still accept the mode (it once refused it as a run-off to a flat region)."""
    rng = np.random.default_rng(37)
    N = 20_000
    X = np.column_stack([np.ones(N), rng.standard_t(1.2, size=(N, 4))])
    beta = rng.normal(0.0, 1.0, 5)
    y = (rng.random(N) < 0.5 * (1.0 + np.tanh(0.5 * (X @ beta)))).astype(float)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    most = N * 0.25 * float(np.max(np.sum(X**2, axis=1)))
    assert np.trace(-cv.center.posterior_hess) < 0.1 * SATURATION * most  # the case in point
    assert cv.center.method == "newton" and cv.center.offset < 1e-6
    assert np.all(np.linalg.eigvalsh(cv.center.posterior_hess) < 0)   # a maximum
    assert np.max(np.abs(cv.center.theta - beta)) < 0.2
    # the same covariates, separable under a flat prior: still no mode, still refused
    with pytest.raises(RuntimeError, match="(?s)ran off.*no mode"):
        ControlVariates(LogisticRegression(X, (X[:, 1] + 0.5 * X[:, 2] > 0.3).astype(float)))


@pytest.mark.parametrize("name", ["logistic", "robust", "linear"])
@pytest.mark.parametrize("order", [1, 2])
def test_taylor_constants_are_the_suprema_of_the_derivatives(name, order):
    """M2 = sup |f''| and M3 = sup |f'''| against the derivatives on a fine grid (by finite
    differences of the model's own per-row log-likelihood in the linear predictor)."""
    model = MODELS[name]
    cv = ControlVariates(model, order=order)
    eta = np.linspace(-12.0, 12.0, 4801)
    h = eta[1] - eta[0]
    if name == "logistic":
        f = -np.logaddexp(0.0, -eta)
    elif name == "robust":
        z = eta / model.scale
        f = -0.5 * (model.df + 1.0) * np.log1p(z * z / model.df)
    else:
        f = -0.5 * (eta / model.noise_sd) ** 2
    deriv = np.diff(f, n=order + 1) / h ** (order + 1)
    assert cv.taylor_constant == pytest.approx(np.abs(deriv).max() / model.temperature,
                                               rel=2e-3, abs=1e-5)


def test_a_built_in_model_without_glm_kernels_goes_through_its_derivatives():
    from samplers import Gaussian

    model = Gaussian(np.random.default_rng(4).normal(1.0, 0.5, 3000))
    cv = ControlVariates(model)  # grad_loglik from the model, per-row Hessians by differences
    assert cv.center.method == "lbfgs" and cv.center.offset < 1e-3
    np.testing.assert_allclose(cv.center.theta, [model.x.mean(), np.log(model.x.std())], atol=1e-5)
    rows = np.arange(model.N)
    theta = cv.center.theta + [0.01, -0.02]
    theta_new = theta + [0.005, 0.01]
    l = model.loglik_ratio(theta, theta_new, rows)
    r = cv.loglik_ratio(theta, theta_new, rows)
    assert r.mean() == pytest.approx(l.mean(), rel=1e-10)
    assert r.std() < 0.05 * l.std()


@pytest.mark.parametrize("name", list(MODELS))
def test_glm_sums_on_every_core_are_the_numpy_sums_whatever_the_threads(monkeypatch, name):
    """The compiled pass of the mode search and of the center's sums: chunks of 97 rows in
    groups of 3 chunks (N is no multiple of either, nor of the 4-row and 64-row blocks),
    against the model's own per-row log-likelihoods, gradients and finite-difference
    Hessians; bit-identical on one thread and on two; without the Hessian, the same L and g."""
    import design._lib.passes as passes
    import samplers.models._glm as glm_module

    model = MODELS[name]
    cv = ControlVariates(model)
    monkeypatch.setattr(glm_module, "SUMS_CHUNK", 97)
    monkeypatch.setattr(glm_module, "_GROUP", 3)
    rng = np.random.default_rng(7)
    theta = cv.center.theta + 0.1 * rng.normal(size=cv.dim)
    rows = np.arange(model.N)
    results = []
    for threads in (1, 2):
        monkeypatch.setattr(passes, "PASS_THREADS", threads)
        results.append(cv._sums(theta))
    (L, g, H), (L2, g2, H2) = results
    assert L == L2
    np.testing.assert_array_equal(g, g2)
    np.testing.assert_array_equal(H, H2)
    np.testing.assert_array_equal(H, H.T)
    assert L == pytest.approx(float(model.loglik(theta, rows).sum()), rel=1e-12)
    want_g = model.grad_loglik(theta, rows).sum(axis=0)
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10 * np.abs(want_g).max())
    want_H = _row_hessians(model, theta, rows).sum(axis=0)
    np.testing.assert_allclose(H, 0.5 * (want_H + want_H.T), rtol=0, atol=1e-6 * np.abs(H).max())
    L1, g1, _ = cv._sums(theta, hessian=False)
    assert L1 == L
    np.testing.assert_array_equal(g1, g)


def test_glm_sums_stop_at_a_nonfinite_chunk():
    cv = ControlVariates(MODELS["logistic"])
    theta = np.full(cv.dim, 1e308)          # x.theta overflows (inf or inf - inf) on some rows
    L, g, H = cv._sums(theta)
    assert not math.isfinite(L) and g is None and H is None


def test_ctrl_c_between_chunk_groups_stops_the_glm_pass(monkeypatch, no_gc_callbacks):
    """The pass runs its chunks in groups of _GROUP, calling ``progress`` between groups; a
    Ctrl-C (SIGINT) arriving there stops it before the next group."""
    import os
    import signal

    import samplers.models._glm as glm_module

    monkeypatch.setattr(glm_module, "_GROUP", 2)
    model = MODELS["logistic"]
    seen = []

    def progress(rows):
        seen.append(rows)
        os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        glm_module.glm_sums(model, np.zeros(model.dim), progress=progress, chunk=100)
    assert seen == [200]      # one group of two chunks, then the interrupt


def test_rows_without_step_constants_skip_the_compiled_no_step():
    """A GLM's rows have no per-step constants: the decision data carry 0.0 without a
    dispatch of the compiled ``_no_step`` (a cache load per argument layout), and the
    ratios read through them are unchanged."""
    from samplers.models import control_variates as cvm

    cv = ControlVariates(_logistic(N=500))
    theta = np.asarray(cv.center.theta) + 0.01
    theta_new = theta - 0.02
    seen = set(cvm._no_step.overloads)
    data = cv._decision_data(theta, theta_new)
    assert data[4] == 0.0 and type(data[4]) is float
    assert set(cvm._no_step.overloads) == seen
    assert cvm._no_step.py_func(cv.center.theta, theta, theta_new) == 0.0
    idx = np.arange(500)
    ratio = cv.loglik_ratio(theta, theta_new, idx)
    np.testing.assert_allclose(ratio.sum(), (cv.model.loglik(theta_new, idx)
                                             - cv.model.loglik(theta, idx)).sum(), rtol=1e-9)
