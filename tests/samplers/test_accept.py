"""Accept/reject tests: compiled vs reference path, exactness limits, bounds arithmetic."""

import math

import numpy as np
import pytest
from scipy import special, stats

from samplers import (
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ExactTest,
    GaussianMean,
    GaussianMixture,
    IndexSampler,
    LogisticRegression,
    RandomWalk,
    confidence_radius,
    sample,
)
from samplers._view import check_model
from samplers.datasets import gaussian_mixture, logistic_regression


class PlainPython:
    """A built-in model seen through the user-model protocol only: forces the reference path."""

    def __init__(self, model):
        self._m = model
        self.N = model.N

    def loglik(self, theta, idx):
        return self._m.loglik(theta, idx)

    def loglik_ratio(self, theta, theta_new, idx):
        return self._m.loglik_ratio(theta, theta_new, idx)

    def logprior(self, theta):
        return self._m.logprior(theta)

    def loglik_ratio_bound(self, theta, theta_new):
        return self._m.loglik_ratio_bound(theta, theta_new)


def _models():
    rng = np.random.default_rng(11)
    X, y, theta = logistic_regression(20_000, 3, rng=rng)
    return {
        "mean": (GaussianMean(rng.normal(1.0, 1.0, 30_000)), [1.0], 0.01),
        "logistic": (LogisticRegression(X, y), theta, 0.02),
        "mixture": (GaussianMixture(gaussian_mixture(40_000, rng=rng), temperature=40.0),
                    [0.0, 1.0], 0.15),
    }


MODELS = _models()
TESTS = [
    AustereTest(m=100, epsilon=0.01),
    AustereTest(m=37, epsilon=0.1, threshold="normal"),
    ConfidenceTest(delta=0.05, gamma=1.5, batch_size=50),
    ConfidenceTest(delta=0.01, bound="bernstein"),
    ConfidenceTest(delta=0.1, bound="hoeffding", gamma=3.0, p=1.5, batch_size=7),
    ConfidenceTest(delta=0.01, range="full-data"),
    BarkerTest(m=100, delta=None),
    BarkerTest(m=80, delta=0.9, fpc=False),
    BarkerTest(m=60, delta=0.95, skew=True),
    BarkerTest(m=40, delta=None, stopping="presized"),
    BarkerTest(m=30, delta=None, fpc=False, skew=True, stopping="presized", margin=2.0),
]


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("test", TESTS, ids=repr)
def test_compiled_loop_is_bit_identical_to_reference(name, test):
    model, theta0, scale = MODELS[name]
    fast = sample(model, test, RandomWalk(scale), theta0, 150, rng=9)
    slow = sample(PlainPython(model), test, RandomWalk(scale), theta0, 150, rng=9)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    for key in fast.stats:
        np.testing.assert_array_equal(fast.stats[key], slow.stats[key], err_msg=key)
    assert fast.stats["n_used"].min() > 0


def test_barker_compiled_loop_is_bit_identical_when_it_reads_every_row():
    model, theta0, scale = MODELS["mean"]
    test = BarkerTest(m=model.N)
    fast = sample(model, test, RandomWalk(scale), theta0, 60, rng=3)
    slow = sample(PlainPython(model), test, RandomWalk(scale), theta0, 60, rng=3)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    for key in fast.stats:
        np.testing.assert_array_equal(fast.stats[key], slow.stats[key], err_msg=key)
    assert set(fast.stats["n_used"]) == {model.N} and 0 < fast.acceptance_rate < 1


def _decide(test, model, theta, theta_new, log_const, seed):
    view, theta = check_model(model, theta)
    rng = np.random.default_rng(seed)
    return test.decide(rng, view, IndexSampler(view.N, rng), theta, np.asarray(theta_new, float),
                       log_const)


@pytest.mark.parametrize("threshold", ["t", "normal"])
def test_austere_with_m_equal_N_is_the_exact_test(threshold):
    model = GaussianMean(np.random.default_rng(4).normal(1.0, 1.0, 3000))
    test = AustereTest(m=3000, epsilon=0.3, threshold=threshold)
    for seed in range(60):
        theta_new = [1.0 + 0.02 * np.sin(seed)]
        exact, _ = _decide(ExactTest(), model, [1.0], theta_new, 0.1, seed)
        austere, info = _decide(test, model, [1.0], theta_new, 0.1, seed)
        assert austere == exact and info.n_used == 3000 and info.n_stages == 1


def test_austere_decides_at_the_first_stage_when_the_answer_is_obvious():
    model = GaussianMean(np.random.default_rng(5).normal(1.0, 1.0, 50_000))
    # theta_new far from the data: mu << mu0 with a huge standardized gap
    _, info = _decide(AustereTest(m=200, epsilon=1e-3), model, [1.0], [3.0], 0.0, 0)
    assert info.n_used == 200 and info.n_stages == 1


def test_austere_critical_values_are_student_t_and_normal_quantiles():
    t = AustereTest(m=40, epsilon=0.02)
    q = t.critical_values(N=100, n_stages=3)  # n_j = 40, 80, 100
    np.testing.assert_allclose(q, stats.t.ppf(0.98, [39, 79, 99]), rtol=1e-10)
    qn = AustereTest(m=40, epsilon=0.02, threshold="normal").critical_values(100, 3)
    np.testing.assert_allclose(qn, stats.norm.ppf(0.98), rtol=1e-12)


def test_austere_threshold_table_grows_past_its_first_block():
    # epsilon so small that 1 - epsilon rounds to 1: every critical value is infinite and the
    # test reads all N = 20_000 rows in 10_000 stages, past the 4096 tabulated at first. The
    # compiled loop must extend the table and end with the exact decision, like the reference.
    model = GaussianMean(np.random.default_rng(6).normal(0.0, 1.0, 20_000))
    test = AustereTest(m=2, epsilon=1e-18)
    for seed in range(3):
        exact, _ = _decide(ExactTest(), model, [0.0], [1e-3], 0.0, seed)
        fast, info = _decide(test, model, [0.0], [1e-3], 0.0, seed)
        slow, slow_info = _decide(test, PlainPython(model), [0.0], [1e-3], 0.0, seed)
        assert info == slow_info and info[:2] == (20_000, 10_000)
        assert fast == slow == exact
    assert test._q_cache[20_000].shape[0] == 10_000


def test_confidence_radius_formulas():
    t, N, C, sd, d = 500, 10_000, 2.0, 0.3, 1e-3
    hoeffding = C * math.sqrt(2 * (1 - (t - 1) / N) * math.log(2 / d) / t)
    bernstein = sd * math.sqrt(2 * math.log(3 / d) / t) + 6 * C * math.log(3 / d) / t
    kappa = 7 / 3 + 3 / math.sqrt(2)
    bs = sd * math.sqrt(2 * (1 - (t - 1) / N) * math.log(10 / d) / t) + kappa * 2 * C * math.log(10 / d) / t
    assert confidence_radius("hoeffding", t, N, C, sd, d) == pytest.approx(hoeffding, rel=1e-14)
    assert confidence_radius("bernstein", t, N, C, sd, d) == pytest.approx(bernstein, rel=1e-14)
    assert confidence_radius("bernstein-serfling", t, N, C, sd, d) == pytest.approx(bs, rel=1e-14)
    t2 = 8_000  # past N/2 the Serfling factor is (1 - t/N)(1 + 1/t)
    rho = (1 - t2 / N) * (1 + 1 / t2)
    bs2 = sd * math.sqrt(2 * rho * math.log(10 / d) / t2) + kappa * 2 * C * math.log(10 / d) / t2
    assert confidence_radius("bernstein-serfling", t2, N, C, sd, d) == pytest.approx(bs2, rel=1e-14)
    with pytest.raises(ValueError, match="bound must be one of"):
        confidence_radius("chernoff", t, N, C, sd, d)


@pytest.mark.parametrize("bound", ["hoeffding", "bernstein", "bernstein-serfling"])
def test_confidence_test_errs_less_often_than_delta(bound):
    # Hard pair: the l_i mean sits close to mu0 for many u. Lemma 3.1: the decision differs
    # from the exact one with probability <= delta. 400 decisions, delta = 0.1: allow
    # delta + 3 binomial SE.
    rng = np.random.default_rng(7)
    model = GaussianMean(rng.normal(0.0, 1.0, 20_000))
    test = ConfidenceTest(delta=0.1, bound=bound, batch_size=20)
    wrong = 0
    for seed in range(400):
        theta_new = [0.004 * (seed % 7 - 3)]
        exact, _ = _decide(ExactTest(), model, [0.0], theta_new, 0.0, seed)
        ours, _ = _decide(test, model, [0.0], theta_new, 0.0, seed)
        wrong += exact != ours
    assert wrong / 400 <= 0.1 + 3 * math.sqrt(0.1 * 0.9 / 400)


def test_confidence_test_reads_nothing_when_every_l_i_is_zero():
    model = GaussianMean(np.random.default_rng(8).normal(size=1000))
    accepted, info = _decide(ConfidenceTest(), model, [0.2], [0.2], 0.0, 3)
    assert accepted is False or accepted is True
    assert info.n_used == 0 and info.n_stages == 0


def test_confidence_full_data_range_is_reported():
    model, theta0, scale = MODELS["mean"]
    chain = sample(model, ConfidenceTest(range="full-data"), RandomWalk(scale), theta0, 20, rng=1)
    assert set(chain.stats["n_scanned"]) == {model.N}


class Broken:
    """l_i are NaN where theta_new > 1 and -inf where theta_new < -1."""

    N = 500

    def loglik(self, theta, idx):
        t = theta[0]
        value = np.nan if t > 1 else (-np.inf if t < -1 else -t * t)
        return np.full(len(idx), value)

    def logprior(self, theta):
        return 0.0


@pytest.mark.parametrize("test", [ExactTest(), AustereTest(m=50), ConfidenceTest(range="full-data"),
                                  BarkerTest(m=50),
                                  BarkerTest(m=50, delta=None, stopping="presized")], ids=repr)
def test_nan_likelihood_is_an_error_and_minus_inf_rejects(test):
    with pytest.raises(ValueError, match="NaN"):
        _decide(test, Broken(), [0.0], [2.0], 0.0, 0)
    if isinstance(test, ConfidenceTest):  # concentration bounds need a finite range
        with pytest.raises(ValueError, match="bounded l_i"):
            _decide(test, Broken(), [0.0], [-2.0], 0.0, 0)
    else:
        accepted, _ = _decide(test, Broken(), [0.0], [-2.0], 0.0, 0)
        assert accepted is False


def test_special_functions_used_for_thresholds():
    # stdtrit is the inverse of the Student-t cdf used by the paper's Algorithm 1.
    assert special.stdtr(9, special.stdtrit(9, 0.99)) == pytest.approx(0.99, abs=1e-12)
