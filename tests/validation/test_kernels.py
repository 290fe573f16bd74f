"""The compiled kernels of the validation package against plain NumPy references and
against the samplers' own test loops."""

import math

import numpy as np
import pytest
from scipy import stats

from samplers import AustereTest, ConfidenceTest, GaussianMean, IndexSampler
from design._lib.rows import new_order
from samplers._view import ModelView
from validation import loglik_ratios
from validation._kernels import (
    central_moments,
    dobrushin,
    doeblin,
    minibatch_statistics,
    path_thresholds,
    repeated_decisions,
)


def reference_minibatches(l, mu, b, n, rng):
    """Partial Fisher-Yates with one uniform per row from a fresh order per minibatch, as
    samplers.IndexSampler.restart() then take(b)."""
    N = l.size
    means, tstats = np.empty(n), np.empty(n)
    for k in range(n):
        perm = np.arange(N)
        u = rng.random(b)
        for i in range(b):
            j = min(i + int(u[i] * (N - i)), N - 1)
            perm[i], perm[j] = perm[j], perm[i]
        x = l[perm[:b]]
        means[k] = x.mean()
        se = x.std(ddof=1) * math.sqrt((1 - (b - 1) / (N - 1)) / b)
        tstats[k] = (means[k] - mu) / se
    return means, tstats


def test_minibatch_statistics_match_a_numpy_reference():
    l = np.random.default_rng(0).exponential(size=1000)
    means, tstats = np.empty(300), np.empty(300)
    minibatch_statistics(l, l.mean(), new_order(1000), 40, np.random.default_rng(1), means,
                         tstats)
    ref_means, ref_t = reference_minibatches(l, l.mean(), 40, 300, np.random.default_rng(1))
    np.testing.assert_allclose(means, ref_means, rtol=1e-12)
    np.testing.assert_allclose(tstats, ref_t, rtol=1e-9)


def test_minibatches_are_drawn_without_replacement():
    """Var(mean) = sigma^2 (N - b) / (b (N - 1)) exactly for a without-replacement draw; at
    b = N / 2 it is half the with-replacement value."""
    N, b, n = 200, 100, 40_000
    l = np.random.default_rng(2).normal(size=N)
    means, tstats = np.empty(n), np.empty(n)
    minibatch_statistics(l, l.mean(), new_order(N), b, np.random.default_rng(3), means,
                         tstats)
    exact = l.var() * (N - b) / (b * (N - 1))
    se = exact * math.sqrt(2.0 / (n - 1))          # sd of a variance estimate (Gaussian)
    assert abs(means.var() - exact) < 5 * se
    assert abs(means.mean() - l.mean()) < 5 * math.sqrt(exact / n)


def test_central_moments_match_scipy():
    l = np.random.default_rng(4).gamma(2.0, size=5000)
    m2, m3, m4, a1, a3 = central_moments(l, l.mean())
    z = (l - l.mean()) / l.std()
    assert m3 / m2**1.5 == pytest.approx(stats.skew(l), rel=1e-10)
    assert m4 / m2**2 - 3 == pytest.approx(stats.kurtosis(l), rel=1e-10)
    assert a1 / math.sqrt(m2) == pytest.approx(np.mean(np.abs(z)), rel=1e-10)
    assert a3 / m2**1.5 == pytest.approx(np.mean(np.abs(z) ** 3), rel=1e-10)


def test_contraction_constants_match_numpy():
    P = np.random.default_rng(5).random((7, 7))
    P /= P.sum(axis=1, keepdims=True)
    pairwise = 0.5 * np.abs(P[:, None, :] - P[None, :, :]).sum(axis=2)
    assert dobrushin(P) == pytest.approx(pairwise.max(), rel=1e-12)
    assert doeblin(P) == pytest.approx(P.min(axis=0).sum(), rel=1e-12)
    assert dobrushin(np.eye(3)) == 1.0 and dobrushin(np.full((3, 3), 1 / 3)) == 0.0
    assert 1.0 - doeblin(P) >= dobrushin(P)      # Doeblin's constant bounds Dobrushin's


def test_repeated_austere_is_the_samplers_test_loop():
    """One decision of AustereTest.decide and of the validation driver, on the same stream
    and the l_i of the same pair, are identical (decision and rows read)."""
    x = np.random.default_rng(6).normal(size=5000)
    model = GaussianMean(x)
    theta, theta_new = np.array([0.0]), np.array([0.02])
    test = AustereTest(m=100, epsilon=0.1)
    for seed in range(5):
        rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
        accepted, info = test.decide(rng_a, ModelView(model, 1), IndexSampler(5000),
                                     theta, theta_new, 0.0)
        mu0 = -rng_b.standard_exponential() / 5000
        acc, used = np.empty(1, np.bool_), np.empty(1, np.int64)
        l = loglik_ratios(model, theta, theta_new)
        repeated_decisions(test.engine_spec(5000))(l, new_order(5000), l.mean(), mu0, 0.0,
                                                   rng_b, acc, np.empty(1, np.bool_), used)
        assert (bool(acc[0]), int(used[0])) == (accepted, info.n_used)


def test_austere_path_thresholds_reproduce_the_test_loop():
    """P(accept at mu0) = P(mu0 < tau) over paths, against the loop run at fixed mu0.

    (Not at mu0 = mu itself: there the paths that read all N rows are ties, decided by
    rounding in either implementation; u makes that event null in the real test.)"""
    rng = np.random.default_rng(7)
    N, m = 1000, 50
    l = rng.exponential(size=N) * 1e-3
    mu, sd = l.mean(), l.std()
    test = AustereTest(m=m, epsilon=0.1)
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


def test_confidence_path_thresholds_reproduce_the_test_loop():
    """Rao-Blackwellised acceptance probability of the confidence test (Hoeffding bound, a
    two-point population, where it errs often) against the loop with random u."""
    rng = np.random.default_rng(8)
    N = 1000
    l = rng.choice([-1.0, 1.0], N) * 0.02
    l += -1e-4 - l.mean()
    C, log_const = float(np.abs(l).max()), 0.1
    test = ConfidenceTest(delta=0.9, p=2.0, gamma=2.0, bound="hoeffding", batch_size=10)
    spec = test.path_spec(N, C=C)
    tau = np.empty(4000)
    path_thresholds(spec.radius, spec.grow)(l, new_order(N), spec.settings, rng, tau)
    rb = np.exp(np.minimum(N * tau + log_const, 0.0))
    n = 40_000
    acc, exact, used = np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.int64)
    repeated_decisions(test.engine_spec(N, C=C))(l, new_order(N), l.mean(), math.nan,
                                                 log_const, rng, acc, exact, used)
    pa = min(1.0, math.exp(N * l.mean() + log_const))
    diff = acc.astype(float) - exact
    assert abs(diff.mean()) > 5 * diff.std() / math.sqrt(n)     # the test does err here
    se = math.hypot(diff.std() / math.sqrt(n), rb.std() / math.sqrt(rb.size))
    assert abs((rb.mean() - pa) - diff.mean()) < 5 * se
