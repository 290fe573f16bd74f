"""Built-in models against independent NumPy/SciPy references; the user-model protocol."""

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from scipy.special import expit, log_expit

from samplers import (
    ExactTest,
    Gaussian,
    GaussianMean,
    GaussianMixture,
    GaussianPrior,
    LaplacePrior,
    LinearRegression,
    LogisticRegression,
    Model,
    RandomWalk,
    loglik_ratio,
    sample,
)
from samplers.datasets import gaussian_mixture, logistic_regression, write_memmap

RNG = np.random.default_rng(20261121)
X_LR, Y_LR, _ = logistic_regression(400, 4, rng=RNG)
X_LIN = RNG.normal(size=(300, 3))
Y_LIN = X_LIN @ [0.5, -1.0, 2.0] + RNG.normal(0, 0.7, 300)
X_1D = RNG.normal(0.3, 1.5, 250)
X_MIX = gaussian_mixture(300, rng=RNG)


def reference_loglik(name, theta, K):
    """Per-datum log-likelihoods from scipy.stats, written independently of the kernels."""
    if name == "mean":
        return stats.norm.logpdf(X_1D, theta[0], 1.3) / K
    if name == "gaussian":
        return stats.norm.logpdf(X_1D, theta[0], np.exp(theta[1])) / K
    if name == "logistic":
        t = X_LR @ theta
        return np.where(Y_LR == 1, log_expit(t), log_expit(-t)) / K
    if name == "mixture":
        s = np.sqrt(2.0)
        return np.log(0.5 * stats.norm.pdf(X_MIX, theta[0], s)
                      + 0.5 * stats.norm.pdf(X_MIX, theta[0] + theta[1], s)) / K
    if name == "linear":
        return stats.norm.logpdf(Y_LIN, X_LIN @ theta, 0.7) / K
    raise KeyError(name)


def make(name, K=1.0):
    if name == "mean":
        return GaussianMean(X_1D, sigma=1.3, temperature=K)
    if name == "gaussian":
        return Gaussian(X_1D, temperature=K)
    if name == "logistic":
        return LogisticRegression(X_LR, Y_LR, temperature=K)
    if name == "mixture":
        return GaussianMixture(X_MIX, temperature=K)
    return LinearRegression(X_LIN, Y_LIN, noise_sd=0.7, temperature=K)


NAMES = ["mean", "gaussian", "logistic", "mixture", "linear"]
DIMS = {"mean": 1, "gaussian": 2, "logistic": 5, "mixture": 2, "linear": 3}


def thetas(name):
    d = DIMS[name]
    return st.lists(st.floats(-2, 2), min_size=d, max_size=d).map(np.array)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("K", [1.0, 7.5])
def test_loglik_matches_scipy(name, K):
    model = make(name, K)
    theta = np.linspace(-0.4, 0.6, model.dim)
    idx = np.arange(model.N)
    np.testing.assert_allclose(model.loglik(theta, idx), reference_loglik(name, theta, K),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_ratio_is_difference_of_logliks_and_bound_holds(name, data):
    model = make(name, 3.0)
    theta, theta_new = data.draw(thetas(name)), data.draw(thetas(name))
    idx = np.arange(model.N)
    l = model.loglik_ratio(theta, theta_new, idx)
    np.testing.assert_allclose(l, model.loglik(theta_new, idx) - model.loglik(theta, idx),
                               rtol=1e-9, atol=1e-11)
    bound = model.loglik_ratio_bound(theta, theta_new)
    assert np.abs(l).max() <= bound * (1 + 1e-12) + 1e-15


@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_finite_differences(name):
    model = make(name, 2.0)
    theta = np.linspace(0.3, -0.2, model.dim)
    idx = np.arange(0, model.N, 7)
    g = model.grad_loglik(theta, idx)
    h = 1e-6
    for j in range(model.dim):
        e = np.zeros(model.dim)
        e[j] = h
        fd = (model.loglik(theta + e, idx) - model.loglik(theta - e, idx)) / (2 * h)
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_temperature_scales_the_likelihood(name):
    theta = np.full(DIMS[name], 0.1)
    idx = np.arange(20)
    np.testing.assert_allclose(make(name, 4.0).loglik(theta, idx), make(name).loglik(theta, idx) / 4)


def test_logistic_labels_in_plus_minus_one_agree():
    theta = np.array([0.3, -0.2, 0.1, 0.5, -1.0])
    a = LogisticRegression(X_LR, Y_LR).loglik(theta, np.arange(50))
    b = LogisticRegression(X_LR, 2 * Y_LR - 1).loglik(theta, np.arange(50))
    np.testing.assert_array_equal(a, b)


def test_gaussian_mean_posterior_is_conjugate_update():
    model = GaussianMean(X_1D, sigma=1.3, prior=GaussianPrior(0.2, 0.5), temperature=2.0)
    precision = 1 / 0.5**2 + len(X_1D) / (2.0 * 1.3**2)
    mean = (0.2 / 0.5**2 + X_1D.sum() / (2.0 * 1.3**2)) / precision
    np.testing.assert_allclose(model.posterior(), (mean, precision**-0.5), rtol=1e-12)
    with pytest.raises(TypeError, match="closed-form"):
        GaussianMean(X_1D, prior=LaplacePrior()).posterior()


def test_data_are_read_in_place_and_never_modified():
    X, y = X_LR.copy(), Y_LR.copy()
    model = LogisticRegression(X, y)
    assert model.X is X and model.y is y
    sample(model, ExactTest(), RandomWalk(0.05), np.zeros(5), 20, rng=0)
    np.testing.assert_array_equal(X, X_LR)
    np.testing.assert_array_equal(y, Y_LR)


def test_memmap_data_stay_on_disk_and_pickle_by_reference(tmp_path):
    x = write_memmap(tmp_path / "x.npy", 50_000, lambda n, rng: rng.normal(1, 1, n), rng=0)
    X = write_memmap(tmp_path / "X.npy", 5_000, lambda n, rng: rng.normal(size=(n, 4)), rng=1)
    y = write_memmap(tmp_path / "y.npy", 5_000, lambda n, rng: (rng.random(n) < 0.5) * 1.0, rng=2)
    for model in (GaussianMean(x), LogisticRegression(X[:, 1:], y)):  # root map, strided view
        data = model.x if hasattr(model, "x") else model.X
        assert isinstance(data, np.memmap)
        blob = pickle.dumps(model)
        assert len(blob) < 10_000  # the rows are not in the pickle
        clone = pickle.loads(blob)
        theta = np.full(model.dim, 0.2)
        idx = np.arange(0, model.N, 13)
        np.testing.assert_array_equal(clone.loglik(theta, idx), model.loglik(theta, idx))


def test_in_memory_models_pickle_with_their_data():
    model = make("logistic")
    clone = pickle.loads(pickle.dumps(model))
    theta = np.full(5, 0.1)
    np.testing.assert_array_equal(clone.loglik(theta, np.arange(9)), model.loglik(theta, np.arange(9)))


class UserModel:
    """The ten-line user model of the docs: Gaussian mean, unit variance, flat prior."""

    def __init__(self, x):
        self.x = np.asarray(x)
        self.N = len(self.x)

    def loglik(self, theta, idx):
        return -0.5 * (self.x[idx] - theta[0]) ** 2

    def logprior(self, theta):
        return 0.0


def test_user_model_follows_protocol_and_ratio_is_derived():
    user = UserModel(X_1D)
    assert isinstance(user, Model)
    builtin = GaussianMean(X_1D, sigma=1.0)
    idx = np.arange(40)
    np.testing.assert_allclose(loglik_ratio(user, [0.1], [0.3], idx),
                               builtin.loglik_ratio([0.1], [0.3], idx), atol=1e-12)


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: GaussianMean([1.0, np.nan]), ValueError, "row 1"),
        (lambda: GaussianMean(np.zeros((3, 2))), ValueError, "1 dimension"),
        (lambda: GaussianMean([1.0, 2.0], sigma=0), ValueError, "sigma must be in"),
        (lambda: GaussianMean([1.0], temperature=-1), ValueError, "temperature"),
        (lambda: LogisticRegression(X_LR, Y_LR[:-1]), ValueError, "one label per row"),
        (lambda: LogisticRegression(X_LR, Y_LR + 2), ValueError, "labels"),
        (lambda: LinearRegression(X_LIN, Y_LIN, noise_sd=-1), ValueError, "noise_sd"),
        (lambda: GaussianMean([1.0], prior="flat"), TypeError, "prior must be"),
        (lambda: GaussianMean([1.0], prior=GaussianPrior(0, [1, 2])), ValueError, "length 1"),
        (lambda: make("logistic").loglik(np.zeros(3), [0]), ValueError, "5 element"),
        (lambda: make("logistic").loglik(np.zeros(5), [400]), ValueError, r"\[0, 399\]"),
        (lambda: make("logistic").loglik(np.zeros(5), [0.5]), TypeError, "integer array"),
    ],
)
def test_bad_model_inputs_are_refused(build, error, match):
    with pytest.raises(error, match=match):
        build()
