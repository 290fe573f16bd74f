"""FPCNormalTest, the sequential test written as one plain rule (samplers/mhtests/fpc_normal.py).

Compiled driver against the Python reference driver (bit-identical chains), the chain
against the closed-form Gaussian-mean posterior within 5 Monte Carlo standard errors, the
test's error against the dynamic programme's prediction, and its radius against a direct
NumPy formula.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from samplers import (
    AustereTest,
    FPCNormalTest,
    GaussianMean,
    GaussianPrior,
    IndexSampler,
    LogisticRegression,
    RandomWalk,
    sample,
)
from design._lib.rows import new_order
from samplers._view import check_model
from samplers.datasets import logistic_regression
from tests.samplers.test_accept import PlainPython
from validation._kernels import path_thresholds, repeated_decisions

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def _models():
    rng = np.random.default_rng(31)
    X, y, theta = logistic_regression(20_000, 3, rng=rng)
    return {
        "mean": (GaussianMean(rng.normal(1.0, 1.0, 30_000)), [1.0], 0.01),
        "logistic": (LogisticRegression(X, y), theta, 0.02),
    }


MODELS = _models()


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("test", [FPCNormalTest(m=100, epsilon=0.05),
                                  FPCNormalTest(m=37, epsilon=0.2)], ids=repr)
def test_compiled_driver_is_bit_identical_to_the_reference(name, test):
    model, theta0, scale = MODELS[name]
    fast = sample(model, test, RandomWalk(scale), theta0, 150, rng=9)
    slow = sample(PlainPython(model), test, RandomWalk(scale), theta0, 150, rng=9)
    np.testing.assert_array_equal(fast.samples, slow.samples)
    for key in fast.stats:
        np.testing.assert_array_equal(fast.stats[key], slow.stats[key], err_msg=key)
    assert fast.stats["n_used"].min() > 0 and fast.stats["n_stages"].max() > 1


def test_radius_is_cochrans_unbiased_standard_error_times_z():
    l = np.random.default_rng(1).normal(size=50)
    N, n, eps = 1000, 50, 0.05
    test = FPCNormalTest(m=50, epsilon=eps)
    spec = test.path_spec(N)
    m2 = float(np.sum((l - l.mean()) ** 2))
    expected = stats.norm.ppf(1 - eps) * l.std(ddof=1) * math.sqrt((1 - n / N) / n)
    assert spec.radius(n, N, 1, l.mean(), m2, spec.settings) == pytest.approx(expected, rel=1e-12)
    assert spec.radius(0, N, 0, 0.0, 0.0, spec.settings) == math.inf
    # AustereTest(threshold="normal") has the factor (N - n)/(N - 1) instead of (N - n)/N
    austere = AustereTest(m=50, epsilon=eps, threshold="normal").path_spec(N)
    ratio = austere.radius(n, N, 1, l.mean(), m2, austere.settings) / expected
    assert ratio == pytest.approx(math.sqrt(N / (N - 1)), rel=1e-12)


def test_reading_every_row_is_the_exact_test():
    model = GaussianMean(np.random.default_rng(4).normal(1.0, 1.0, 3000))
    test = FPCNormalTest(m=3000, epsilon=0.3)
    for seed in range(40):
        view, theta = check_model(model, [1.0])
        theta_new = np.array([1.0 + 0.02 * math.sin(seed)])
        rng = np.random.default_rng(seed)
        log_u = -np.random.default_rng(seed).standard_exponential()
        accepted, info = test.decide(rng, view, IndexSampler(view.N, rng), theta, theta_new, 0.1)
        l = model.loglik_ratio(theta, theta_new, np.arange(3000))
        assert accepted == (log_u < l.sum() + 0.1)
        assert (info.n_used, info.n_stages) == (3000, 1)


def test_chain_matches_the_closed_form_posterior():
    """Bardenet et al. (2014) sec. 4.3 setting, as tests/samplers/test_correctness.py."""
    x = np.random.default_rng(2014).normal(0.5, 0.1, 100_000)
    model = GaussianMean(x, sigma=1.0, prior=GaussianPrior(0.0, 10.0))
    mean, sd = model.posterior()
    chain = sample(model, FPCNormalTest(m=500, epsilon=0.01), RandomWalk(2.4 * sd), [mean],
                   8000, rng=123)
    idata = chain.to_arviz()
    mcse_mean = float(az.mcse(idata, method="mean").theta.values[0])
    mcse_sd = float(az.mcse(idata, method="sd").theta.values[0])
    s = chain.samples[:, 0]
    assert abs(s.mean() - mean) < 5 * mcse_mean, (s.mean(), mean, mcse_mean)
    assert abs(s.std() - sd) < 5 * mcse_sd, (s.std(), sd, mcse_sd)
    assert chain.mean_data_fraction < 0.25
    assert 0.2 < chain.acceptance_rate < 0.8


def test_error_agrees_with_the_dynamic_programme():
    """On Gaussian l_i the test's early wrong decisions match design.sequential_error
    (normal thresholds) to 5 SE plus 0.01, the DP's modelling error for an estimated sd."""
    from design import sequential_error

    l = np.random.default_rng(20).normal(size=20_000)
    N, m, eps, n_tests = l.size, 200, 0.05, 3000
    mu_std = np.array([-2.0, 0.0, 1.0, 5.0])
    run = repeated_decisions(FPCNormalTest(m=m, epsilon=eps).engine_spec(N))
    rng = np.random.default_rng(1)
    acc, exact, used = (np.empty(n_tests, np.bool_), np.empty(n_tests, np.bool_),
                        np.empty(n_tests, np.int64))
    pred = np.asarray(sequential_error(mu_std, m=m, epsilon=eps, N=N, threshold="normal").error)
    for x, p in zip(mu_std, pred.reshape(-1)):
        mu0 = l.mean() - x * l.std() / math.sqrt(N - 1)
        run(l, new_order(N), l.mean(), mu0, 0.0, rng, acc, exact, used)
        wrong = (used < N) & (~acc if x >= 0 else acc)
        err = wrong.mean()
        se = math.sqrt(max(err * (1 - err), 1.0 / n_tests) / n_tests)
        assert abs(err - p) < 5 * se + 0.01, (x, err, p, se)


def test_path_thresholds_reproduce_the_driver():
    """u integrated out with the test's own radius: P(mu0 < tau) over paths equals the
    acceptance frequency of the engine's decisions at fixed mu0."""
    rng = np.random.default_rng(7)
    N, m = 1000, 50
    l = rng.exponential(size=N) * 1e-3
    mu, sd = l.mean(), l.std()
    test = FPCNormalTest(m=m, epsilon=0.1)
    spec = test.path_spec(N)
    tau = np.empty(10_000)
    path_thresholds(spec.radius, spec.grow)(l, new_order(N), spec.settings, rng, tau)
    acc, used = np.empty(20_000, np.bool_), np.empty(20_000, np.int64)
    run = repeated_decisions(test.engine_spec(N))
    for x in (-2.0, 0.3, 1.0):
        mu0 = mu - x * sd / math.sqrt(N - 1)
        run(l, new_order(N), mu, mu0, 0.0, rng, acc, np.empty(acc.size, np.bool_), used)
        p_paths, p_loop = np.mean(mu0 < tau), acc.mean()
        se = math.sqrt(p_loop * (1 - p_loop) * (1 / tau.size + 1 / acc.size))
        assert abs(p_paths - p_loop) < 5 * se, (x, p_paths, p_loop)


def test_refuses_bad_settings():
    with pytest.raises(ValueError, match="m must be >= 2"):
        FPCNormalTest(m=1)
    with pytest.raises(ValueError, match="epsilon"):
        FPCNormalTest(epsilon=0.7)
    model = GaussianMean(np.zeros(10) + 1.0)
    with pytest.raises(ValueError, match="m must be <= N = 10"):
        sample(model, FPCNormalTest(m=20), RandomWalk(0.1), [1.0], 5, rng=0)


def test_stationary_check_takes_it_through_the_protocol():
    """No edit of validation: stationary_check asks the test for path_spec,
    design_parameters and a_priori_error."""
    from validation import GridChain, stationary_check

    model = GaussianMean(np.random.default_rng(30).normal(size=1000))
    mean, sd = model.posterior()
    grid = GridChain(model, mean + np.linspace(-4, 4, 17) * sd, proposal_sd=sd)
    res = stationary_check(grid, FPCNormalTest(m=50, epsilon=0.005), method="simulation",
                           n_tests=500, rng=1)
    assert res.holds and res.n_tests == 500 and 0.0 < res.delta_prior < 1.0
