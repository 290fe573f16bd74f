"""ControlVariates: compiled kernels against NumPy, exactness of the mean, the centre's sums,
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
    """A random pair (theta, theta_new) around the centre at posterior scale times ``scale``."""
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    theta = cv.centre.theta + scale * sd * rng.normal(size=cv.dim)
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


def _reference_ratio(model, centre, order, theta, theta_new, idx):
    """r_i + P/N from the model's public per-row values and derivatives (NumPy only)."""
    l = model.loglik_ratio(theta, theta_new, idx)
    G = model.grad_loglik(centre, idx)
    u, u_new = theta - centre, theta_new - centre
    proxy = G @ (theta_new - theta)
    all_rows = np.arange(model.N)
    P = model.grad_loglik(centre, all_rows).sum(axis=0) @ (theta_new - theta)
    if order == 2:
        Hs = _row_hessians(model, centre, idx)
        proxy += 0.5 * (np.einsum("nij,i,j->n", Hs, u_new, u_new) - np.einsum("nij,i,j->n", Hs, u, u))
        H = _row_hessians(model, centre, all_rows).sum(axis=0)
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
        want = _reference_ratio(model, cv.centre.theta, order, theta, theta_new, idx)
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
        G_c = model.grad_loglik(cv.centre.theta, idx)
        want_g = model.grad_loglik(theta, idx) - G_c
        if order == 2:
            want_g -= _row_hessians(model, cv.centre.theta, idx) @ (theta - cv.centre.theta)
            want_g += (cv.centre.grad + cv.centre.hess @ (theta - cv.centre.theta)) / model.N
        else:
            want_g += cv.centre.grad / model.N
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
def test_centre_sums_match_finite_differences_of_the_full_loglik(name):
    model = MODELS[name]
    cv = ControlVariates(model)
    rows = np.arange(model.N)
    c = cv.centre.theta.copy()
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
    scale = np.abs(cv.centre.hess).max()
    np.testing.assert_allclose(cv.centre.grad, g, atol=1e-5 * scale)
    np.testing.assert_allclose(cv.centre.hess, H, atol=1e-4 * scale)
    assert cv.centre.loglik == pytest.approx(total(c), rel=1e-12)
    # at the mode the posterior gradient vanishes
    assert cv.centre.method == "newton" and cv.centre.offset < 1e-6
    prior_grad = model.grad_logprior(c)
    np.testing.assert_allclose(cv.centre.grad + prior_grad, 0.0, atol=1e-6 * scale)


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


def test_order1_and_order2_residuals_shrink_with_the_distance_to_the_centre():
    cv1 = ControlVariates(MODELS["logistic"], order=1)
    cv2 = ControlVariates(MODELS["logistic"], order=2, center=cv1.centre.theta)
    rows = np.arange(cv1.N)
    sd = np.sqrt(np.diag(cv1.laplace_covariance()))
    step = 0.05 * sd
    spreads = {1: [], 2: []}
    for dist in (1.0, 0.5, 0.25):
        theta = cv1.centre.theta + dist * sd
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
    assert user.centre.method == "lbfgs"
    np.testing.assert_allclose(user.centre.theta, cv.centre.theta, atol=1e-4 * np.abs(cv.centre.theta).max())
    same = ControlVariates(UserLogistic(model, grads, hess), center=cv.centre.theta)
    tol = 1e-10 if grads and hess else 1e-5
    np.testing.assert_allclose(same.centre.hess, cv.centre.hess, rtol=tol, atol=tol * np.abs(cv.centre.hess).max())
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
    fast = sample(cv, test, proposal, cv.centre.theta, 120, rng=4)
    slow = sample(PlainCV(cv), test, proposal, cv.centre.theta, 120, rng=4)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    for key in fast.stats:
        np.testing.assert_array_equal(fast.stats[key], slow.stats[key], err_msg=key)
    assert 0 < fast.acceptance_rate < 1


def test_confidence_test_uses_the_half_width_not_the_shift():
    # Every row of a quadratic model's order-2 wrapper equals P/N: the range has width 0 and
    # the confidence test decides without reading a row, from the centre P/N.
    cv = ControlVariates(MODELS["linear"])
    chain = sample(cv, ConfidenceTest(delta=0.01), RandomWalk(2.0 * cv.laplace_covariance() / 3),
                   cv.centre.theta, 200, rng=1)
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


def test_centre_with_infinite_loglik_is_refused():
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


def test_far_centre_is_allowed_and_reported():
    model = MODELS["logistic"]
    mode = ControlVariates(model).centre
    sd = np.sqrt(np.diag(np.linalg.inv(-mode.posterior_hess)))
    far = ControlVariates(model, center=mode.theta + 20 * sd)
    assert far.centre.method == "given" and far.centre.offset > 5
    assert np.linalg.norm(far.centre.posterior_grad) > 1e3 * np.linalg.norm(mode.posterior_grad)


def test_rows_cannot_be_read_without_the_pair():
    cv = ControlVariates(MODELS["mean"])
    with pytest.raises(TypeError, match="_decision_data"):
        cv._kernel_data()


def test_memmap_data_and_a_given_centre(tmp_path):
    X, y, _ = logistic_regression(5000, 3, rng=7)
    path = tmp_path / "X.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    model = LogisticRegression(np.memmap(path, dtype=np.float32, mode="r", shape=X.shape), y)
    cv = ControlVariates(model)
    again = ControlVariates(model, center=cv.centre.theta)
    assert again.centre.n_passes == 1 and math.isclose(again.centre.loglik, cv.centre.loglik)
