"""Bad input is refused at the public boundary with a message naming what is wrong."""

import numpy as np
import pytest

from design import correction
from samplers import (
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ExactTest,
    GaussianMean,
    Langevin,
    LogisticRegression,
    RandomWalk,
    sample,
    sample_chains,
)

X = np.random.default_rng(0).normal(size=1000)
MODEL = GaussianMean(X)


class NoGradients:
    N = 1000

    def loglik(self, theta, idx):
        return -0.5 * (X[idx] - theta[0]) ** 2

    def logprior(self, theta):
        return 0.0


class LogPriorNaN(NoGradients):
    def logprior(self, theta):
        return np.nan


class LoglikInfAtStart(NoGradients):
    def loglik(self, theta, idx):
        out = -0.5 * (X[idx] - theta[0]) ** 2
        out[idx == 999] = -np.inf
        return out


class WrongShape(NoGradients):
    def loglik(self, theta, idx):
        return np.zeros(3)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: AustereTest(m=1), ValueError, r"m must be >= 2, got 1"),
        (lambda: AustereTest(m=2.5), TypeError, "m must be an integer"),
        (lambda: AustereTest(epsilon=0.0), ValueError, r"epsilon must be in \(0, 1\), got 0.0"),
        (lambda: AustereTest(epsilon=1.2), ValueError, r"epsilon must be in \(0, 1\), got 1.2"),
        (lambda: AustereTest(threshold="z"), ValueError, "threshold must be"),
        (lambda: ConfidenceTest(delta=1.0), ValueError, r"delta must be in \(0, 1\)"),
        (lambda: ConfidenceTest(delta=-0.1), ValueError, "delta must be in"),
        (lambda: ConfidenceTest(gamma=1.0), ValueError, "gamma must be in"),
        (lambda: ConfidenceTest(p=0.5), ValueError, "p must be in"),
        (lambda: ConfidenceTest(bound="chernoff"), ValueError, "bound must be one of"),
        (lambda: ConfidenceTest(range="sometimes"), ValueError, "range must be"),
        (lambda: BarkerTest(m=1), ValueError, r"m must be >= 2, got 1"),
        (lambda: BarkerTest(m=2, skew=True), ValueError, r"m must be >= 3, got 2"),
        (lambda: BarkerTest(m="50"), TypeError, "m must be an integer, got '50'"),
        (lambda: BarkerTest(delta=0.0), ValueError, r"delta must be in \(0, 1\), got 0.0"),
        (lambda: BarkerTest(delta=1.0), ValueError, r"delta must be in \(0, 1\), got 1.0"),
        (lambda: BarkerTest(delta=float("nan")), ValueError, r"delta must be in \(0, 1\)"),
        (lambda: BarkerTest(delta="0.1"), TypeError, "delta must be a real number"),
        (lambda: BarkerTest(correction="table.npz"), TypeError,
         "correction must be a CorrectionTable with skew=False.*got str"),
        (lambda: BarkerTest(correction=correction.default_skew()), TypeError,
         "correction must be a CorrectionTable.*needs skew=True"),
        (lambda: BarkerTest(skew=True, correction=correction.default()), TypeError,
         "correction must be a SkewCorrectionTable.*needs skew=False"),
        (lambda: BarkerTest(fpc=1), TypeError, "fpc must be True or False, got 1"),
        (lambda: BarkerTest(skew="yes"), TypeError, "skew must be True or False, got 'yes'"),
        (lambda: BarkerTest(stopping="pilot"), ValueError,
         "stopping must be 'sequential' or 'presized', got 'pilot'"),
        (lambda: BarkerTest(stopping="presized", delta=0.5), ValueError,
         "delta=0.5 bounds the sequential rule.*pass delta=None"),
        (lambda: BarkerTest(delta=None, stopping="presized", margin=0.5), ValueError,
         "margin must be a finite number >= 1, got 0.5"),
        (lambda: BarkerTest(delta=None, stopping="presized", margin="2"), TypeError,
         "margin must be a number >= 1, got '2'"),
        (lambda: RandomWalk(0.0), ValueError, "scale must be > 0"),
        (lambda: RandomWalk([[1.0, 2.0], [2.0, 1.0]]), ValueError, "positive definite"),
        (lambda: RandomWalk([[1.0, 0.0]]), ValueError, "square and symmetric"),
        (lambda: Langevin(step_size=0), ValueError, "step_size must be in"),
        (lambda: Langevin(batch_size=0), ValueError, "batch_size must be >= 1"),
    ],
)
def test_bad_settings(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize(
    "model, test, proposal, theta0, error, match",
    [
        (MODEL, AustereTest(m=2000), RandomWalk(0.1), [0.0], ValueError, r"m must be <= N = 1000"),
        (MODEL, BarkerTest(m=1001), RandomWalk(0.1), [0.0], ValueError,
         r"m must be <= N = 1000 \(the number of rows\), got 1001"),
        (MODEL, ExactTest(), RandomWalk(0.1), [np.nan], ValueError, "theta0 must be a non-empty finite"),
        (MODEL, ExactTest(), RandomWalk(0.1), [0.0, 1.0], ValueError, "theta0 must have 1 element"),
        (MODEL, ExactTest(), RandomWalk(0.1), [[0.0]], ValueError, "theta0 must be a vector"),
        (MODEL, ExactTest(), RandomWalk([0.1, 0.1]), [0.0], ValueError, "scale has 2 coordinate"),
        (LogPriorNaN(), ExactTest(), RandomWalk(0.1), [0.0], ValueError, "log prior at theta0 must be finite"),
        (LoglikInfAtStart(), ExactTest(), RandomWalk(0.1), [0.0], ValueError, "row 999 gives -inf"),
        (WrongShape(), ExactTest(), RandomWalk(0.1), [0.0], ValueError, "one value per index"),
        (NoGradients(), ExactTest(), Langevin(1e-3), [0.0], TypeError, "Langevin needs model.grad_loglik"),
        (NoGradients(), ConfidenceTest(), RandomWalk(0.1), [0.0], TypeError, "loglik_ratio_bound"),
        (MODEL, ExactTest(), Langevin(1e-3, batch_size=5000), [0.0], ValueError, "batch_size must be <= N"),
        (object(), ExactTest(), RandomWalk(0.1), [0.0], TypeError, "callable loglik"),
        (MODEL, "exact", RandomWalk(0.1), [0.0], TypeError, "test must be an AcceptanceTest"),
        (MODEL, ExactTest(), 0.1, [0.0], TypeError, "proposal must be a Proposal"),
    ],
)
def test_bad_sampler_calls(model, test, proposal, theta0, error, match):
    with pytest.raises(error, match=match):
        sample(model, test, proposal, theta0, 10, rng=0)


def test_bad_counts_and_rng():
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        sample(MODEL, ExactTest(), RandomWalk(0.1), [0.0], 0)
    with pytest.raises(TypeError, match="rng must be"):
        sample(MODEL, ExactTest(), RandomWalk(0.1), [0.0], 5, rng="seed")
    with pytest.raises(TypeError, match="legacy RandomState"):
        sample(MODEL, ExactTest(), RandomWalk(0.1), [0.0], 5, rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="one row per chain"):
        sample_chains(MODEL, ExactTest(), RandomWalk(0.1), np.zeros((3, 1)), 5, n_chains=2)


def test_model_missing_N():
    class NoN(NoGradients):
        N = 10.5

    with pytest.raises(TypeError, match="model.N must be an integer"):
        sample(NoN(), ExactTest(), RandomWalk(0.1), [0.0], 5)


def test_callers_theta0_and_data_untouched():
    theta0 = np.array([0.3])
    X_copy = X.copy()
    chain = sample(MODEL, AustereTest(m=100), RandomWalk(0.1), theta0, 50, rng=1)
    assert theta0[0] == 0.3 and np.array_equal(X, X_copy)
    assert chain.theta0 is not theta0


def test_logistic_regression_with_flat_prior_refuses_nothing_it_should_accept():
    rng = np.random.default_rng(1)
    Xl = rng.normal(size=(500, 2))
    y = (Xl[:, 0] > 0).astype(float)
    chain = sample(LogisticRegression(Xl, y), ConfidenceTest(), RandomWalk(0.1), [0.0, 0.0], 20, rng=0)
    assert chain.samples.shape == (20, 2)
