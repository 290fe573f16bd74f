"""The penalty test (samplers/mhtests/penalty.py): one file, compiled on both loops.

Checks: the same chain on the Python and the compiled loop (the decision and the info are
generated from the test's rule and info kernel); the acceptance probability of one pair
against an enumeration of every batch; the posterior of a logistic regression with control
variates against exact MH (means and sds within a 1 % family-wise threshold); input checks.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from samplers import (ControlVariates, ExactTest, GaussianMean, GaussianPrior,
                      LogisticRegression, RandomWalk, sample)
from samplers._view import check_model
from samplers.mhtests.penalty import PenaltyInfo, PenaltyTest


def logistic(N, d, seed):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, d - 1))])
    y = (rng.random(N) < special.expit(X @ np.linspace(0.5, -0.5, d))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


@pytest.mark.parametrize("plain", [True, False], ids=["gaussian-mean", "cv-logistic"])
def test_both_loops_give_one_chain(plain):
    if plain:
        model = GaussianMean(np.random.default_rng(1).normal(0.3, 1.0, 3_000))
        args = (model, PenaltyTest(m=500), RandomWalk(0.01), [0.3], 300)
    else:
        cv = ControlVariates(logistic(3_000, 3, 2))
        args = (cv, PenaltyTest(m=30), RandomWalk.from_laplace(cv), cv.center.theta, 300)
    python = sample(*args, rng=3, compiled=False)
    compiled = sample(*args, rng=3, compiled=True)
    np.testing.assert_array_equal(python.samples, compiled.samples)
    for key in python.stats:
        assert python.stats[key].dtype == compiled.stats[key].dtype, key
        np.testing.assert_array_equal(python.stats[key], compiled.stats[key])
    assert set(PenaltyInfo._fields) <= set(compiled.stats)
    assert np.all(compiled.stats["n_used"][np.isfinite(compiled.stats["log_const"])]
                  == args[1].m)


def test_acceptance_of_one_pair_matches_the_enumeration_of_every_batch():
    """``P(accept) = mean over the C(N, m) batches of min(1, exp(Delta* - sigma^2 / 2))``,
    the batch drawn uniformly without replacement and u independent."""
    x = np.array([0.3, -1.2, 0.8, 2.0, -0.4, 1.1, 0.05])
    model = GaussianMean(x, sigma=1.0)
    N, m = x.shape[0], 3
    theta, theta_new = np.array([0.2]), np.array([0.9])
    c = float(model.logprior(theta_new) - model.logprior(theta))
    l = model.loglik_ratio(theta, theta_new, np.arange(N))
    probs = []
    for batch in itertools.combinations(range(N), m):
        v = l[list(batch)]
        var = N**2 * v.var(ddof=1) * (1 - m / N) / m
        probs.append(min(1.0, math.exp(N * v.mean() + c - var / 2)))
    alpha = float(np.mean(probs))
    test, view = PenaltyTest(m=m), check_model(model, theta)[0]
    from design._lib.rows import IndexSampler

    rng = np.random.default_rng(4)
    batches = IndexSampler(N, rng)
    n = 20_000
    rate = np.mean([test.decide(rng, view, batches, theta, theta_new, c)[0] for _ in range(n)])
    assert abs(rate - alpha) < 5 * math.sqrt(alpha * (1 - alpha) / n), (rate, alpha)


def test_a_batch_of_all_rows_is_exact_mh():
    model = GaussianMean(np.random.default_rng(5).normal(size=50))
    chain = sample(model, PenaltyTest(m=80), RandomWalk(0.2), [0.0], 50, rng=6)
    assert np.all(chain.stats["n_used"] == 50) and np.all(chain.stats["var_delta"] == 0.0)


@pytest.mark.parametrize("m, exc, match", [(1, ValueError, "m must be"),
                                           (2.5, TypeError, "m must be")])
def test_bad_settings_are_refused(m, exc, match):
    with pytest.raises(exc, match=match):
        PenaltyTest(m=m)


def mean_sd_z(chain, ref):
    """z statistics of the differences of the posterior means and sds of two chains, each
    with its Monte Carlo standard error (ArviZ's mcse)."""
    from samplers import import_arviz

    az = import_arviz()
    z = []
    for method, stat in (("mean", np.mean), ("sd", np.std)):
        se = [az.mcse(c.to_arviz(), method=method).theta.values for c in (chain, ref)]
        z.append((stat(chain.samples, 0) - stat(ref.samples, 0)) / np.hypot(*se))
    return np.concatenate(z)


@pytest.mark.slow
def test_logistic_posterior_with_control_variates_matches_exact_mh():
    pytest.importorskip("arviz")
    model = logistic(2_000, 4, 2020)
    cv = ControlVariates(model)
    walk = RandomWalk((2.38**2 / 4) * cv.laplace_covariance())
    steps = 20_000
    exact = sample(model, ExactTest(), walk, cv.center.theta, steps, rng=1)
    chain = sample(cv, PenaltyTest(m=20), walk, cv.center.theta, steps, rng=2)
    z = mean_sd_z(chain, exact)
    # two-sided, 1 % family-wise over the 2 d comparisons (Bonferroni)
    threshold = stats.norm.isf(0.01 / (2 * z.shape[0]))
    assert np.max(np.abs(z)) < threshold, z
    assert chain.stats["var_delta"].mean() < 0.05
    assert abs(chain.acceptance_rate - exact.acceptance_rate) < 0.03
