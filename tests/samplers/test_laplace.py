"""laplace_approximation against an independent route: SciPy's optimiser on the log posterior
written with scipy.special, and the Hessian from finite differences of its gradient."""

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit, log_expit

from samplers import (
    FlatPrior,
    GaussianMean,
    GaussianPrior,
    LaplaceApproximation,
    LaplacePrior,
    LogisticRegression,
    laplace_approximation,
)
from samplers.datasets import logistic_regression

X, Y, _ = logistic_regression(3_000, 3, rng=11)


def reference(X, y, prior_mean, prior_sd, K):
    """Mode by BFGS and covariance by central differences of the exact gradient."""
    s = 2.0 * y - 1.0
    precision = 0.0 if prior_sd is None else 1.0 / np.asarray(prior_sd, dtype=float) ** 2

    def neg_logpost(theta):
        return -(np.sum(log_expit(s * (X @ theta))) / K
                 - 0.5 * np.sum(precision * (theta - prior_mean) ** 2))

    def neg_grad(theta):
        return -(X.T @ (y - expit(X @ theta)) / K - precision * (theta - prior_mean))

    mode = optimize.minimize(neg_logpost, np.zeros(X.shape[1]), jac=neg_grad, method="BFGS",
                             options={"gtol": 1e-10}).x
    h = 1e-5
    H = np.array([(neg_grad(mode + h * e) - neg_grad(mode - h * e)) / (2 * h)
                  for e in np.eye(X.shape[1])])
    return mode, np.linalg.inv(0.5 * (H + H.T))


@pytest.mark.parametrize("prior, mean, sd, K", [
    (GaussianPrior(0.0, 10.0), 0.0, 10.0, 1.0),
    (GaussianPrior([0.5, -1.0, 0.0, 2.0], 0.7), np.array([0.5, -1.0, 0.0, 2.0]), 0.7, 1.0),
    (FlatPrior(), 0.0, None, 1.0),
    (GaussianPrior(0.0, 3.0), 0.0, 3.0, 20.0),
])
def test_mode_and_covariance_match_scipy(prior, mean, sd, K):
    model = LogisticRegression(X, Y, prior=prior, temperature=K)
    approx = laplace_approximation(model, rows=500, rng=3)
    mode, cov = reference(X, Y, mean, sd, K)
    post_sd = np.sqrt(np.diag(cov))
    # the mode to within 1e-6 posterior sds (the stopping rule), the covariance to 1e-6
    np.testing.assert_allclose((approx.mode - mode) / post_sd, 0.0, atol=1e-5)
    np.testing.assert_allclose(approx.covariance, cov, rtol=1e-5, atol=1e-12)


def test_equal_seeds_give_identical_results_and_inputs_are_untouched():
    model = LogisticRegression(X, Y, prior=GaussianPrior(0.0, 10.0))
    X_before, y_before = model.X.copy(), model.y.copy()
    a = laplace_approximation(model, rows=300, rng=np.random.default_rng(5))
    b = laplace_approximation(model, rows=300, rng=5)
    assert isinstance(a, LaplaceApproximation)
    np.testing.assert_array_equal(a.mode, b.mode)
    np.testing.assert_array_equal(a.covariance, b.covariance)
    np.testing.assert_array_equal(model.X, X_before)
    np.testing.assert_array_equal(model.y, y_before)


def test_a_small_chunk_reads_the_same_posterior():
    model = LogisticRegression(X, Y, prior=GaussianPrior(0.0, 10.0))
    a = laplace_approximation(model, rows=300, rng=5)
    b = laplace_approximation(model, rows=300, rng=5, chunk=257)
    np.testing.assert_allclose(b.mode, a.mode, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.covariance, a.covariance, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("model, kwargs, error, match", [
    (GaussianMean(np.zeros(10)), {}, TypeError, "model must be a samplers.LogisticRegression"),
    (LogisticRegression(X, Y, prior=LaplacePrior(0.0, 1.0)), {}, TypeError, "LaplacePrior"),
    (LogisticRegression(X, Y), {"rows": 0}, ValueError, "rows"),
    (LogisticRegression(X, Y), {"rows": 2.5}, TypeError, "rows"),
    (LogisticRegression(X, Y), {"chunk": 0}, ValueError, "chunk"),
])
def test_refuses_bad_input(model, kwargs, error, match):
    with pytest.raises(error, match=match):
        laplace_approximation(model, rng=0, **kwargs)
