"""``ControlVariates.loglik_many``: every trial pair of a control-variate wrapper from one
compiled call per chunk, equal to the per-pair passes it replaces."""

import numpy as np
import pytest

from design import TrialChain
from samplers import (ControlVariates, GaussianMean, GaussianPrior, LinearRegression,
                      LogisticRegression, RobustRegression)


def _models(rng, N=3000):
    X = np.column_stack([np.ones(N), rng.standard_normal((N, 2))])
    beta = np.array([0.3, -0.8, 0.5])
    y_log = (rng.random(N) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    y_lin = X @ beta + 0.7 * rng.standard_normal(N)
    y_t = X @ beta + 0.4 * rng.standard_t(3.0, N)
    return {
        "logistic": LogisticRegression(X, y_log, prior=GaussianPrior(0.0, 5.0),
                                       temperature=1.5),
        "linear": LinearRegression(X, y_lin, noise_sd=0.7, prior=GaussianPrior(0.0, 3.0)),
        "robust": RobustRegression(X, y_t, df=3.0, scale=0.4),
        "mean": GaussianMean(rng.normal(0.3, 2.0, N), sigma=2.0),
    }


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", ["logistic", "linear", "robust", "mean"])
def test_columns_equal_loglik_bit_for_bit(name, order):
    rng = np.random.default_rng(11)
    cv = ControlVariates(_models(rng)[name], order=order)
    thetas = cv.center.theta + 0.05 * rng.standard_normal((7, cv.dim))
    idx = rng.permutation(cv.N)[:500]
    many = cv.loglik_many(thetas, idx)
    assert many.shape == (500, 7)
    for k in range(7):
        np.testing.assert_array_equal(many[:, k], cv.loglik(thetas[k], idx))


def test_row_blocks_on_every_core_give_the_same_bits(monkeypatch):
    """Blocks of rows run on the pass threads: each row's entries are its own."""
    import samplers.models.control_variates as cvm

    rng = np.random.default_rng(12)
    cv = ControlVariates(_models(rng)["logistic"])
    thetas = cv.center.theta + 0.05 * rng.standard_normal((5, cv.dim))
    idx = rng.permutation(cv.N)[:1000]
    whole = cv.loglik_many(thetas, idx)
    monkeypatch.setattr(cvm, "_MANY_ROWS", 37)          # 28 blocks
    blocks = cv.loglik_many(thetas, idx)
    np.testing.assert_array_equal(blocks, whole)
    for k in range(5):
        np.testing.assert_array_equal(blocks[:, k], cv.loglik(thetas[k], idx))


def test_logistic_columns_match_a_numpy_reference():
    """The residual of the second-order proxy written out in NumPy."""
    rng = np.random.default_rng(5)
    model = _models(rng)["logistic"]
    cv = ControlVariates(model)
    thetas = cv.center.theta + 0.1 * rng.standard_normal((4, 3))
    idx = np.arange(cv.N)
    s = 2.0 * model.y - 1.0
    c = cv.center.theta
    a_c = model.X @ c
    q = 1.0 / (1.0 + np.exp(s * a_c))                # sigmoid(-s a_c)
    f1, f2 = s * q / 1.5, -q * (1.0 - q) / 1.5
    ref = np.empty((cv.N, 4))
    for k, t in enumerate(thetas):
        a = model.X @ t
        u = t - c
        shift = (cv.center.loglik + u @ cv.center.grad + 0.5 * u @ cv.center.hess @ u) / cv.N
        ref[:, k] = ((-np.logaddexp(0.0, -s * a) + np.logaddexp(0.0, -s * a_c)) / 1.5
                     - (a - a_c) * (f1 + 0.5 * f2 * (a - a_c)) + shift)
    np.testing.assert_allclose(cv.loglik_many(thetas, idx), ref, rtol=1e-12, atol=1e-13)


def test_user_model_has_none_and_bad_shapes_are_refused():
    class Poisson:                                    # a user's model: no compiled rows
        def __init__(self, X, y):
            self.X, self.y, self.N, self.dim = X, y, X.shape[0], X.shape[1]

        def loglik(self, theta, idx):
            eta = self.X[idx] @ theta
            return self.y[idx] * eta - np.exp(eta)

        def grad_loglik(self, theta, idx):
            eta = self.X[idx] @ theta
            return (self.y[idx] - np.exp(eta))[:, None] * self.X[idx]

        def hess_loglik(self, theta, idx):
            w = np.exp(self.X[idx] @ theta)
            return -np.einsum("i,ij,ik->ijk", w, self.X[idx], self.X[idx])

        def logprior(self, theta):
            return -0.5 * float(theta @ theta)

    rng = np.random.default_rng(2)
    X = np.column_stack([np.ones(400), rng.standard_normal(400)])
    y = rng.poisson(np.exp(X @ [0.2, 0.3])).astype(float)
    assert ControlVariates(Poisson(X, y)).loglik_many is None
    cv = ControlVariates(_models(rng)["linear"])
    with pytest.raises(ValueError, match=r"thetas must have shape \(k, 3\)"):
        cv.loglik_many(np.zeros((2, 4)), np.arange(5))


class _PerPair:
    """The wrapper seen without ``loglik_many``: the per-pair ``loglik_ratio`` passes."""

    def __init__(self, cv):
        self._cv, self.N = cv, cv.N

    def loglik(self, theta, idx):
        return self._cv.loglik(theta, idx)

    def loglik_ratio(self, theta, theta_new, idx):
        return self._cv.loglik_ratio(theta, theta_new, idx)

    def logprior(self, theta):
        return self._cv.logprior(theta)


@pytest.mark.parametrize("two_pass", [False, True])
def test_trial_chain_from_one_call_equals_the_per_pair_passes(monkeypatch, two_pass):
    """The shared pass gives the per-pair passes' statistics, to rounding (the l_i differ in
    their last bits: a difference of two columns against the fused ratio). The one-pass
    statistics run from 2^18 rows: lowered so that they run here."""
    from design import _pair_scan

    monkeypatch.setattr(_pair_scan, "ONE_PASS_FROM", 1000)
    rng = np.random.default_rng(4)
    cv = ControlVariates(_models(rng, N=20_000)["logistic"])
    draws = cv.center.theta + 0.05 * rng.standard_normal((13, 3))
    thetas, news = draws[:-1], draws[1:]                 # chained, as fit's Laplace draws
    shared = TrialChain.from_model(cv, thetas, news, chunk=3001, progress=False,
                                   two_pass=two_pass)
    per_pair = TrialChain.from_model(_PerPair(cv), thetas, news, chunk=3001, progress=False,
                                     two_pass=two_pass)
    scale = np.abs(per_pair.mu).max()
    np.testing.assert_allclose(shared.mu, per_pair.mu, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(shared.sigma, per_pair.sigma, rtol=1e-8)
    for name in ("skewness", "kurtosis", "abs_z1", "abs_z3"):
        np.testing.assert_allclose(getattr(shared, name), getattr(per_pair, name),
                                   rtol=1e-6, atol=1e-8)


def test_exact_rows_columns_equal_loglik_bit_for_bit():
    """The split's rows (the rest, each carrying the heavy rows' sum over n) from the
    wrapped control variates' ``loglik_many``."""
    from samplers import ExactRows

    rng = np.random.default_rng(8)
    cv = ControlVariates(_models(rng)["logistic"])
    split = ExactRows(cv, np.array([3, 17, 400, 2999]))
    thetas = cv.center.theta + 0.05 * rng.standard_normal((5, 3))
    idx = rng.permutation(split.N)[:300]
    many = split.loglik_many(thetas, idx)
    for k in range(5):
        np.testing.assert_array_equal(many[:, k], split.loglik(thetas[k], idx))
    assert ExactRows(cv.model, np.array([1])).loglik_many is not None     # the logistic's


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", ["logistic", "linear", "robust", "mean"])
def test_loglik_through_one_column_equals_the_row_kernel(name, order):
    """``loglik`` runs one column of the ``loglik_many`` kernel (for a contiguous writable
    ``idx``): the same bits as the row kernel's batch loop, which a strided or read-only
    ``idx`` still takes."""
    from samplers.models._kernels import batch_loglik

    rng = np.random.default_rng(12)
    cv = ControlVariates(_models(rng)[name], order=order)
    theta = cv.center.theta + 0.05 * rng.standard_normal(cv.dim)
    idx = rng.permutation(cv.N)[:600]
    shift = cv._proxy_sum(theta) / cv.N
    ref = np.empty(idx.size)
    batch_loglik(cv._row_loglik, cv._row_prefetch)(cv._data(shift), idx, theta, ref)
    np.testing.assert_array_equal(cv.loglik(theta, idx), ref)
    frozen = idx.copy()
    frozen.setflags(write=False)
    np.testing.assert_array_equal(cv.loglik(theta, frozen), ref)
    np.testing.assert_array_equal(cv.loglik(theta, np.repeat(idx, 2)[::2]), ref)
