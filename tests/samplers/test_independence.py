"""The Gaussian independence proposal against closed forms, with and without control variates.

Target: the Gaussian mean of ``test_control_variates_chains`` (closed-form posterior). The
proposal is deliberately off (shifted by one posterior sd, 1.5 times wider) so that a wrong
log q ratio would show as a bias; tolerances are 5 Monte Carlo standard errors from ArviZ's
ESS-based MCSE, seeds fixed.
"""

import warnings

import numpy as np
import pytest

from samplers import (AustereTest, ControlVariates, ExactTest, GaussianMean, GaussianPrior,
                      Independence, LogisticRegression, laplace_approximation, sample)
from samplers.datasets import logistic_regression

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

MODEL = GaussianMean(np.random.default_rng(2014).normal(0.5, 0.1, 5000), sigma=1.0,
                     prior=GaussianPrior(0.0, 10.0))
POST_MEAN, POST_SD = MODEL.posterior()


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "control-variates"])
@pytest.mark.parametrize("test", [ExactTest(), AustereTest(m=50, epsilon=0.05)],
                         ids=["exact", "austere"])
def test_posterior_matches_closed_form(wrapped, test):
    model = ControlVariates(MODEL) if wrapped else MODEL
    mean, sd = np.atleast_1d(POST_MEAN), np.atleast_1d(POST_SD)
    q = Independence(mean + sd, np.diag((1.5 * sd) ** 2))
    chain = sample(model, test, q, mean, 4000, rng=11)
    idata = chain.to_arviz()
    mcse_mean = az.mcse(idata, method="mean").theta.values
    mcse_sd = az.mcse(idata, method="sd").theta.values
    assert 0.3 < chain.acceptance_rate < 0.95
    np.testing.assert_array_less(np.abs(chain.samples.mean(axis=0) - mean), 5 * mcse_mean)
    np.testing.assert_array_less(np.abs(chain.samples.std(axis=0) - sd), 5 * mcse_sd)


def test_from_laplace_takes_the_center_and_covariance():
    X, y, _ = logistic_regression(2000, 2, rng=3)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0))
    cv = ControlVariates(model)
    q = Independence.from_laplace(cv, scale=1.2)
    np.testing.assert_allclose(q.mean, cv.center.theta)
    np.testing.assert_allclose(q.covariance, 1.44 * cv.laplace_covariance())
    lap = laplace_approximation(model, 2000, 0)
    np.testing.assert_allclose(Independence.from_laplace(lap).mean, lap.mode)
    # near-Gaussian posterior: most proposals accepted, nearly independent draws
    chain = sample(cv, ExactTest(), Independence.from_laplace(cv), cv.center.theta, 500, rng=1)
    assert chain.acceptance_rate > 0.8


def test_equal_seeds_identical_and_inputs_untouched():
    mean, cov = np.array([0.5]), np.array([[0.01]])
    q = Independence(mean, cov)
    a = sample(MODEL, ExactTest(), q, [0.5], 100, rng=4).samples
    b = sample(MODEL, ExactTest(), q, [0.5], 100, rng=4).samples
    np.testing.assert_array_equal(a, b)
    assert mean[0] == 0.5 and cov[0, 0] == 0.01


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(mean=[0.0, np.nan], covariance=np.eye(2)), ValueError, "mean"),
    (dict(mean=[0.0, 0.0], covariance=[[1.0, 2.0], [2.0, 1.0]]), ValueError, "positive definite"),
    (dict(mean=[0.0, 0.0], covariance=np.eye(3)), ValueError, "3 x 3 but mean has 2"),
])
def test_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Independence(**kwargs)


def test_bad_source_and_dimension():
    with pytest.raises(TypeError, match="ControlVariates or a LaplaceApproximation"):
        Independence.from_laplace(np.eye(2))
    with pytest.raises(ValueError, match="scale"):
        Independence.from_laplace(ControlVariates(MODEL), scale=0.0)
    with pytest.raises(ValueError, match="theta has 1"):
        sample(MODEL, ExactTest(), Independence(np.zeros(2), np.eye(2)), [0.5], 5, rng=0)
