"""Verdicts in the currency of the design (issue 17): the real test's error in the acceptance
probability per pair (u integrated out), the Edgeworth-corrected prediction against it, and
the PASS/FAIL cases of clt_check(design=).

Fast sizes; the full-size runs (N = 3e5 logistic regression, N = 1e5 Figure 4 data) are
``benchmarks/acceptance_verdict.py --size full``."""

import math
import warnings

import numpy as np
import pytest

from design import TrialChain, optimize
from design._lib.rows import new_order
from samplers import AustereTest, Gaussian, LogisticRegression
from validation import acceptance_check, clt_check, sequential_check
from validation._kernels import repeated_decisions
from validation._verdict import holm, windowed_path_acceptance


def test_path_acceptance_matches_the_test_run_with_random_u():
    """P(accept) from windowed paths (u integrated out) against the real test run with
    u ~ U(0, 1) drawn (an independent route: the engine's compiled driver)."""
    rng = np.random.default_rng(0)
    N, m, eps = 4000, 100, 0.1
    l = rng.gamma(2.0, 1.0, N) * 0.01
    l = l - l.mean() + 2e-5
    test = AustereTest(m=m, epsilon=eps)
    spec = test.path_spec(N)
    paths_run = windowed_path_acceptance(spec.radius, spec.grow)
    decide = repeated_decisions(test.engine_spec(N))
    for c in (0.0, -0.15):
        paths = np.empty(20_000)
        paths_run(l, new_order(N), spec.settings, c, np.random.default_rng(1), paths)
        n = 8000
        acc = np.empty(n, dtype=np.bool_)
        exact = np.empty(n, dtype=np.bool_)
        used = np.empty(n, dtype=np.int64)
        decide(l, new_order(N), float(l.mean()), math.nan, c, np.random.default_rng(2), acc,
               exact, used)
        p_test, p_path = acc.mean(), paths.mean()
        se = math.sqrt(p_test * (1 - p_test) / n + paths.var() / paths.size)
        assert abs(p_test - p_path) < 4.5 * se, (c, p_test, p_path, se)


def test_holm_against_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, 0.04, 0.03, 0.5, 0.001, 0.2])
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1])


def test_corrected_dp_within_3_se_where_the_gaussian_misses():
    """Right-skewed l_i (standardized lognormal(0, 0.6): skewness ~2.2, excess kurtosis ~9)
    at m = 100: the Gaussian programme's error misses the real test by many SE at every
    mu_std; the Edgeworth-corrected one is within 3 SE."""
    rng = np.random.default_rng(4)
    l = rng.lognormal(0.0, 0.6, 30_000)
    l = (l - l.mean()) / l.std()
    res = sequential_check(l, m=100, epsilon=0.05, mu_std=[-1.0, 0.0, 1.0], n_tests=3000,
                           rng=5)
    assert not res.agrees and res.edgeworth_agrees
    assert np.all(np.abs(res.z) > 3), res.z
    assert np.all(np.abs(res.z_edgeworth) < 3), res.z_edgeworth
    assert "Holm" in str(res)


def test_sequential_check_deprecated_tolerance_keeps_the_old_rule():
    l = np.random.default_rng(6).normal(size=5000)
    with pytest.warns(DeprecationWarning, match="tolerance"):
        old = sequential_check(l, m=100, epsilon=0.1, mu_std=[0.0, 1.0], n_tests=300,
                               tolerance=0.5, rng=1)
    assert old.agrees and old.tolerance == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = sequential_check(l, m=100, epsilon=0.1, mu_std=[0.0, 1.0], n_tests=300, rng=1)
    assert new.tolerance is None and new.agrees and new.passed is None
    np.testing.assert_array_equal(old.error, new.error)


# --- the three verdict cases, at fast sizes ----------------------------------------------

def _gaussian_model_pairs(x, n_pairs, rng):
    n = x.shape[0]
    s = float(x.std())
    mode = np.array([float(x.mean()), math.log(s)])
    L = np.diag([s / math.sqrt(n), 1 / math.sqrt(2 * n)])
    thetas = mode + (L @ rng.normal(size=(2, n_pairs))).T
    news = thetas + (2.38 / math.sqrt(2)) * (L @ rng.normal(size=(2, n_pairs))).T
    return Gaussian(x), (thetas, news)


def _design_and_check(model, pairs, tolerance, rng):
    trial = TrialChain.from_model(model, *pairs, progress=False)
    d = optimize(trial, tolerance)
    return d, clt_check(model, pairs, design=d, n_sim=4000, search=False, n_paths=1200,
                        rng=rng)


def test_verdict_lognormal_fails_and_gaussian_passes():
    """Bardenet et al. (2014), Figure 4: the (mean, log sd) model. On lognormal(0, 2) data
    the Gaussian design's promise fails by far; on N(0, 0.1^2) data it holds."""
    rng = np.random.default_rng(7)
    model, pairs = _gaussian_model_pairs(rng.lognormal(0.0, 2.0, 20_000), 5, rng)
    d, c = _design_and_check(model, pairs, 0.03, rng)
    assert not c.passed and not c.ks_passed
    assert c.acceptance.mean_abs_simulated > 10 * d.tolerance
    assert not c.acceptance.edgeworth_reliable.any()          # far beyond the expansion
    # there the verdict is the simulation's, whatever the corrected prediction says (at full
    # size it predicts 0.022 < 0.03 where the real test errs 0.59: the benchmark's log)
    a = c.acceptance
    assert c.passed == (a.mean_abs_simulated <= a.tolerance + 2 * a.mean_abs_simulated_se)
    model, pairs = _gaussian_model_pairs(rng.normal(0.0, 0.1, 20_000), 5, rng)
    d, c = _design_and_check(model, pairs, 0.03, rng)
    assert c.passed and c.acceptance.mean_abs_simulated < d.tolerance + 0.01
    assert "verdict in the currency of the design" in str(c)


def test_verdict_skewed_logistic_regression_with_the_tolerance_met_passes():
    """A logistic regression with a covariate of skewness ~4.7 (standardized lognormal(0,
    0.9)): the design's promise holds, although the l_i are skewed."""
    rng = np.random.default_rng(8)
    N, d = 30_000, 4
    x1 = rng.lognormal(0.0, 0.9, N)
    X = np.column_stack([np.ones(N), (x1 - x1.mean()) / x1.std(), rng.normal(size=(N, 2))])
    y = (rng.random(N) < 1 / (1 + np.exp(-(X @ [-0.5, 1.0, 0.5, -0.5])))).astype(float)
    model = LogisticRegression(X, y)
    beta = np.array([-0.5, 1.0, 0.5, -0.5])
    w = 1 / (1 + np.exp(-(X @ beta)))
    cov = np.linalg.inv((X * (w * (1 - w))[:, None]).T @ X)
    L = np.linalg.cholesky(cov)
    thetas = beta + (L @ rng.normal(size=(d, 5))).T
    news = thetas + 2.38 / math.sqrt(d) * (L @ rng.normal(size=(d, 5))).T
    des, c = _design_and_check(model, (thetas, news), 0.03, rng)
    assert c.passed, str(c.acceptance)
    assert np.abs(c.acceptance.skewness).max() > 0.3


def test_clt_check_without_a_design_is_unchanged():
    l = np.random.default_rng(9).normal(size=20_000)
    c = clt_check(l, batch_size=100, n_sim=4000, search=False, rng=1)
    assert c.acceptance is None and c.passed == c.ks_passed
    assert not c.searched and "not searched (search=False)" in str(c)


def test_acceptance_check_arguments():
    l = np.random.default_rng(10).normal(size=(2, 2000))
    with pytest.raises(TypeError, match="give design= or all of m, epsilon and tolerance"):
        acceptance_check(l, m=100, epsilon=0.05)
    with pytest.raises(ValueError, match="log_const must be a scalar or have one value"):
        acceptance_check(l, m=100, epsilon=0.05, tolerance=0.01, log_const=[0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="Austere design"):
        acceptance_check(l, design=object())
    a = acceptance_check(l, m=100, epsilon=0.05, tolerance=0.2, n_paths=200, rng=3)
    b = acceptance_check(l, m=100, epsilon=0.05, tolerance=0.2, n_paths=200, rng=3)
    np.testing.assert_array_equal(a.delta_simulated, b.delta_simulated)
    assert a.n_pairs == 2 and "AcceptanceCheck(passed=" in repr(a)


def test_sequential_check_with_a_design_gives_the_verdict():
    rng = np.random.default_rng(11)
    N = 20_000
    l = rng.normal(-1e-4, 0.01, N)
    trial = TrialChain(mu=[l.mean()], sigma=[l.std()], c0=[0.0], N=N)
    d = optimize(trial, 0.2, m_grid=[200], epsilon_grid=[0.05])
    res = sequential_check(l, design=d, mu_std=[0.0, 1.0], n_tests=300, n_paths=300, rng=2)
    assert res.m == 200 and res.epsilon == 0.05 and res.acceptance.n_pairs == 1
    assert res.passed == res.acceptance.passed
    assert abs(res.acceptance.delta_gaussian[0] - d.error) < 1e-3
    assert "design tolerance 0.2" in str(res)
