"""Collapsible bounds, the Student-t model and the MAP estimate, against independent references."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats
from scipy.special import expit, log_expit

from samplers import (
    GaussianPrior,
    JaakkolaJordanBound,
    LaplacePrior,
    LogisticRegression,
    RobustRegression,
    StudentTBound,
    map_estimate,
)
from samplers.datasets import logistic_regression, write_memmap

RNG = np.random.default_rng(20140623)
X_LR, Y_LR, THETA_LR = logistic_regression(600, 3, rng=RNG, scale=3.0)
X_T = np.column_stack([RNG.normal(size=(500, 2)), np.ones(500)])
THETA_T = np.array([1.0, -0.5, 0.3])
Y_T = X_T @ THETA_T + 0.5 * RNG.standard_t(4.0, 500)
Y_T[:10] += 8.0  # outliers, where the Student-t likelihood matters

thetas = st.lists(st.floats(-4, 4), min_size=4, max_size=4).map(np.array)
thetas_t = st.lists(st.floats(-3, 3), min_size=3, max_size=3).map(np.array)


def logistic(K=1.0, labels="01"):
    y = Y_LR if labels == "01" else 2 * Y_LR - 1
    return LogisticRegression(X_LR, y, prior=GaussianPrior(0.0, 5.0), temperature=K)


def robust(K=1.0):
    return RobustRegression(X_T, Y_T, df=4.0, scale=0.5, prior=LaplacePrior(0.0, 2.0), temperature=K)


def jj_reference(theta, xi, K=1.0):
    """The Jaakkola-Jordan bound written from the paper's formula, per row."""
    t = (2 * Y_LR - 1) * (X_LR @ theta)
    lam = np.tanh(xi / 2) / (4 * xi)
    return (log_expit(xi) + (t - xi) / 2 - lam * (t**2 - xi**2)) / K


BOUNDS = {
    "jj-untuned": lambda K=1.0: JaakkolaJordanBound(logistic(K), xi=1.5),
    "jj-per-row": lambda K=1.0: JaakkolaJordanBound(logistic(K, "pm"), xi=np.linspace(0, 6, 600)),
    "jj-map": lambda K=1.0: JaakkolaJordanBound.map_tuned(logistic(K), THETA_LR),
    "t-untuned": lambda K=1.0: StudentTBound(robust(K), xi=0.5),
    "t-map": lambda K=1.0: StudentTBound.map_tuned(robust(K), THETA_T),
}


def draw_theta(name, data):
    return data.draw(thetas if name.startswith("jj") else thetas_t)


# --- the bounds ---------------------------------------------------------------------------


def test_jaakkola_jordan_matches_the_papers_formula():
    bound = BOUNDS["jj-untuned"](2.0)
    theta = np.array([0.3, -1.0, 2.0, 0.5])
    np.testing.assert_allclose(bound.log_bound(theta, np.arange(600)), jj_reference(theta, 1.5, 2.0),
                               rtol=1e-12, atol=1e-12)


def test_student_t_bound_matches_value_and_slope_at_xi():
    bound = BOUNDS["t-untuned"]()
    row = np.array([4])
    for r in (0.5, -0.5):  # residual +-xi, set through the intercept (the column of ones)
        theta = np.array([0.0, 0.0, Y_T[4] - r])
        assert bound.log_bound(theta, row)[0] == pytest.approx(
            stats.t.logpdf(r, 4.0, scale=0.5), abs=1e-12)
        np.testing.assert_allclose(bound.grad_log_bound(theta, row),
                                   bound.model.grad_loglik(theta, row), rtol=1e-12)


@pytest.mark.parametrize("name", list(BOUNDS))
@given(data=st.data())
def test_bound_never_exceeds_the_likelihood(name, data):
    bound = BOUNDS[name](data.draw(st.sampled_from([1.0, 3.0])))
    theta = draw_theta(name, data)
    idx = np.arange(bound.N)
    gap = bound.model.loglik(theta, idx) - bound.log_bound(theta, idx)
    assert gap.min() >= -1e-12 * (1 + np.abs(bound.model.loglik(theta, idx)).max())
    p = bound.bright_probability(theta, idx)
    assert np.all((0 <= p) & (p <= 1))


@pytest.mark.parametrize("name", list(BOUNDS))
@given(data=st.data())
def test_collapsed_sum_equals_direct_sum(name, data):
    bound = BOUNDS[name](data.draw(st.sampled_from([1.0, 3.0])))
    theta = draw_theta(name, data)
    idx = np.arange(bound.N)
    direct = bound.log_bound(theta, idx).sum()
    assert bound.log_bound_sum(theta) == pytest.approx(direct, rel=1e-11, abs=1e-9)
    np.testing.assert_allclose(bound.grad_log_bound_sum(theta),
                               bound.grad_log_bound(theta, idx).sum(axis=0), rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize("name", ["jj-map", "t-map"])
def test_map_tuned_bounds_are_tight_at_the_tuning_point(name):
    bound = BOUNDS[name]()
    idx = np.arange(bound.N)
    theta = bound.theta_tuned
    np.testing.assert_allclose(bound.log_bound(theta, idx), bound.model.loglik(theta, idx),
                               rtol=0, atol=1e-12)
    assert bound.bright_probability(theta, idx).max() < 1e-12
    # and looser away from it
    assert bound.bright_probability(theta + 0.3, idx).mean() > 1e-3


def test_untuned_jaakkola_jordan_is_tight_where_t_is_plus_or_minus_xi():
    bound = BOUNDS["jj-untuned"]()
    row = 7
    x = X_LR[row]
    for t in (1.5, -1.5):
        theta = x * (t * (2 * Y_LR[row] - 1) / (x @ x))  # s_n theta . x_n = t
        gap = bound.model.loglik(theta, [row]) - bound.log_bound(theta, [row])
        assert abs(gap[0]) < 1e-12


@pytest.mark.parametrize("name", list(BOUNDS))
def test_gradients_match_finite_differences(name):
    bound = BOUNDS[name](1.7)
    theta = np.linspace(0.4, -0.3, bound.dim)
    idx = np.arange(0, bound.N, 11)
    g = bound.grad_log_bound(theta, idx)
    h = 1e-6
    for j in range(bound.dim):
        e = np.zeros(bound.dim)
        e[j] = h
        fd = (bound.log_bound(theta + e, idx) - bound.log_bound(theta - e, idx)) / (2 * h)
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-5, atol=1e-7)
    # the fused kernel's likelihood part is the model's, bit for bit
    ll, _, g_ll, _ = bound._pair_grads(theta, idx)
    np.testing.assert_array_equal(ll, bound.model.loglik(theta, idx))
    np.testing.assert_allclose(g_ll, bound.model.grad_loglik(theta, idx), rtol=1e-12, atol=1e-14)


def test_bounds_read_memmaps_and_match_in_memory(tmp_path):
    X = write_memmap(tmp_path / "X.npy", 3000, lambda n, rng: rng.normal(size=(n, 3)), rng=0,
                     chunk=700)
    y = write_memmap(tmp_path / "y.npy", 3000, lambda n, rng: (rng.random(n) < 0.4) * 1.0, rng=1)
    on_disk = JaakkolaJordanBound(LogisticRegression(X, y), xi=1.5)
    in_memory = JaakkolaJordanBound(LogisticRegression(np.array(X), np.array(y)), xi=1.5)
    theta = np.array([0.2, -0.1, 0.4])
    assert isinstance(on_disk.model.X, np.memmap)
    assert on_disk.log_bound_sum(theta) == pytest.approx(in_memory.log_bound_sum(theta), rel=1e-14)


def test_xi_near_zero_uses_the_limit():
    bound = JaakkolaJordanBound(logistic(), xi=np.r_[0.0, 1e-9, 1e-5, np.full(597, 2.0)])
    theta = np.array([0.1, 0.2, -0.3, 0.0])
    gap = bound.model.loglik(theta, np.arange(3)) - bound.log_bound(theta, np.arange(3))
    assert np.all(np.isfinite(gap)) and gap.min() >= -1e-15


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: JaakkolaJordanBound(robust(), 1.5), TypeError, "bounds a LogisticRegression"),
        (lambda: StudentTBound(logistic(), 1.0), TypeError, "bounds a RobustRegression"),
        (lambda: JaakkolaJordanBound(logistic(), -1.0), ValueError, r"xi must be in \[0, inf\)"),
        (lambda: JaakkolaJordanBound(logistic(), np.nan), ValueError, "xi must be in"),
        (lambda: JaakkolaJordanBound(logistic(), "1.5"), TypeError, "xi must be a real number"),
        (lambda: JaakkolaJordanBound(logistic(), np.ones(5)), ValueError, "one value per row"),
        (lambda: JaakkolaJordanBound(logistic(), -np.ones(600)), ValueError, "xi must be >= 0"),
        (lambda: JaakkolaJordanBound.map_tuned(logistic(), [1.0]), ValueError, "4 element"),
        (lambda: RobustRegression(X_T, Y_T, df=0.0), ValueError, r"df must be in \(0, inf\)"),
        (lambda: RobustRegression(X_T, Y_T, scale=-1), ValueError, "scale must be in"),
        (lambda: RobustRegression(X_T, Y_T[:5]), ValueError, "one value per row"),
    ],
)
def test_bad_bound_and_model_settings(make, error, match):
    with pytest.raises(error, match=match):
        make()


# --- the Student-t model ----------------------------------------------------------------------


@pytest.mark.parametrize("K", [1.0, 2.5])
def test_robust_loglik_matches_scipy(K):
    model = robust(K)
    theta = np.array([0.8, -0.2, 0.1])
    np.testing.assert_allclose(model.loglik(theta, np.arange(500)),
                               stats.t.logpdf(Y_T - X_T @ theta, 4.0, scale=0.5) / K, rtol=1e-12)


@given(data=st.data())
def test_robust_ratio_and_its_bound(data):
    model = robust(2.0)
    theta, theta_new = data.draw(thetas_t), data.draw(thetas_t)
    idx = np.arange(model.N)
    l = model.loglik_ratio(theta, theta_new, idx)
    np.testing.assert_allclose(l, model.loglik(theta_new, idx) - model.loglik(theta, idx),
                               rtol=1e-9, atol=1e-11)
    assert np.abs(l).max() <= model.loglik_ratio_bound(theta, theta_new) * (1 + 1e-12) + 1e-15


def test_robust_gradient_matches_finite_differences():
    model = robust(1.5)
    theta = np.array([0.9, -0.4, 0.2])
    idx = np.arange(0, 500, 3)
    g = model.grad_loglik(theta, idx)
    for j in range(3):
        e = np.zeros(3)
        e[j] = 1e-6
        fd = (model.loglik(theta + e, idx) - model.loglik(theta - e, idx)) / 2e-6
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-5, atol=1e-8)


# --- the MAP estimate ---------------------------------------------------------------------


def exact_mode(model):
    idx = np.arange(model.N)

    def f(theta):
        return -(model.loglik(theta, idx).sum() + model.logprior(theta))

    def grad(theta):
        return -(model.grad_loglik(theta, idx).sum(axis=0) + model.grad_logprior(theta))

    return optimize.minimize(f, np.zeros(model.dim), jac=grad, method="BFGS", tol=1e-10).x


@pytest.mark.parametrize("scale", [1.0, 8.0])
def test_map_estimate_lands_well_inside_the_posterior(scale):
    # scale 8: classes that overlap little; there the empirical Fisher information is a poor
    # curvature, and Fisher scoring on these subsets ran off to ~1000 posterior sds
    X, y, _ = logistic_regression(6000, 20, rng=3, scale=scale)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0))
    mode = exact_mode(model)
    p = expit(X @ mode)
    precision = (X * (p * (1 - p))[:, None]).T @ X + np.eye(21) / 25
    estimate = map_estimate(model, n_steps=200, batch_size=500, rng=0)
    d = estimate - mode
    # a posterior draw is about sqrt(21) ~ 4.6 away from the mode in this metric
    assert np.sqrt(d @ precision @ d) < 2.0


def test_map_estimate_for_the_robust_model_and_its_bounds():
    model = robust()
    estimate = map_estimate(model, n_steps=300, batch_size=250, rng=1)
    assert np.linalg.norm(estimate - exact_mode(model)) < 0.05
    bound = StudentTBound.map_tuned(model, rng=1, n_steps=300, batch_size=250)
    np.testing.assert_array_equal(bound.theta_tuned, estimate)


def test_map_estimate_refuses_bad_input():
    class NoGradients:
        N = 10

        def loglik(self, theta, idx):
            return np.zeros(len(idx))

        def logprior(self, theta):
            return 0.0

    with pytest.raises(TypeError, match="map_estimate needs model.grad_loglik"):
        map_estimate(NoGradients(), theta0=[0.0])
    with pytest.raises(ValueError, match="n_steps must be >= 2"):
        map_estimate(logistic(), n_steps=1)

    class NoDim(NoGradients):
        def grad_loglik(self, theta, idx):
            return np.zeros((len(idx), 1))

        def grad_logprior(self, theta):
            return np.zeros(1)

    with pytest.raises(TypeError, match="theta0 is needed"):
        map_estimate(NoDim())
    assert map_estimate(NoDim(), theta0=[0.5], n_steps=2).shape == (1,)
