"""The Barker test's bias monitor against the simulated error of the real test.

A Gaussian mean with lognormal(0, 1) data (sample skewness 3.7): the l_i of a pair are
linear in the data, so they are as skewed, and the sequential Barker rule (stop at the first
batch with ``s^2 < 1``, Seita et al. 2017) errs by about 0.02 in the acceptance probability
at a step that stops near N/4 rows, almost all of it from the rule's selection of the
batch (``design.barker_decision_errors``, Notes). The chain-level comparison on a logistic
regression is ``benchmarks/bias_monitor_tests.py`` (too slow for the suite).
"""

import math
import warnings

import numpy as np
import pytest

import design
from samplers import (BarkerTest, BiasWarning, ExactTest, GaussianMean, GaussianPrior,
                      IndexSampler, RandomWalk, check_model, sample)
from validation import bias_monitor, simulate_acceptance

N = 4000


@pytest.fixture(scope="module")
def skewed():
    x = np.random.default_rng(0).lognormal(0.0, 1.0, N)
    model = GaussianMean(x, sigma=1.0, prior=GaussianPrior(0.0, 10.0))
    # a step whose l_i have N V = f / (1 - f) at f = 1/4: E s^2 = 1 at n* = N/4 rows
    step = math.sqrt(0.25 / (0.75 * N)) / x.std()
    return model, step, x


def decisions(test, view, theta, theta_new, c, n, seed):
    """``n`` decisions of ``test`` at one pair, as a chain's stats."""
    batches = IndexSampler(view.N, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    infos = [test.decide(rng, view, batches, theta, theta_new, c)[1] for _ in range(n)]
    stats = {f: np.array([getattr(i, f) for i in infos]) for f in infos[0]._fields}
    stats["log_const"] = np.full(n, c)
    return stats


@pytest.mark.parametrize("direction", [1.0, -1.0], ids=["right-skewed", "left-skewed"])
def test_monitor_is_within_25_percent_of_the_simulated_error(skewed, direction):
    model, step, x = skewed
    view, theta = check_model(model, np.array([x.mean()]))
    theta_new = theta + direction * step
    l = view.ratio(theta, theta_new, np.arange(N))
    c = -N * float(l.mean()) + 0.3                      # Delta = 0.3
    test = BarkerTest(m=50, delta=None)
    sim = simulate_acceptance(test, l, log_const=c, n=300_000, rng=1)
    # the simulation resolves the error: 4 SE are inside the 25 % being tested
    assert 4 * sim.delta_se < 0.2 * abs(sim.delta)
    stats = decisions(test, view, theta, theta_new, c, 400, 2)
    kw = dict(N=N, sigma=test.sigma, fpc=test.fpc, absolute=False)
    args = [stats[k] for k in ("mean", "var_delta", "skew", "batch", "n_used", "log_const")]
    est = design.barker_decision_errors(*args, stopping="sequential", m=test.m, **kw)
    se = est.std(ddof=1) / math.sqrt(est.size)
    # the pair's error: against the skew of the l_i (the stopped batches missed the tail)
    assert np.sign(sim.delta) == -direction
    assert abs(est.mean() - sim.delta) <= 0.25 * abs(sim.delta) + 4 * math.hypot(sim.delta_se, se)
    np.testing.assert_allclose(test.decision_errors(stats, N), np.abs(est))
    # without the stopping rule's selection term the estimate has the wrong sign: this
    # test catches a monitor that models a fixed batch
    fixed = design.barker_decision_errors(*args, stopping="presized", **kw)
    assert not abs(fixed.mean() - sim.delta) <= 0.25 * abs(sim.delta)


def test_warning_fires_far_above_the_design_not_at_it(skewed):
    model, step, x = skewed
    proposal = RandomWalk(step)
    chain = sample(model, ExactTest(), proposal, [x.mean()], 40, rng=4)
    theta_new = chain.samples + np.random.default_rng(9).normal(size=chain.samples.shape) * step
    trial = design.TrialChain.from_model(model, chain.samples, theta_new, workers=1,
                                         progress=False)
    plan = design.optimize(trial, tolerance=0.01, test="barker")
    test = BarkerTest.from_design(plan)
    assert test.tolerance == 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("error", BiasWarning)
        good = sample(model, test, proposal, [x.mean()], 300, rng=5)   # no warning
    assert not bias_monitor(good).exceeded
    # the authors' rule at m = 50 (the design: m = 500, delta = 0.9): errors of 0.02
    loose = BarkerTest(m=50, delta=None, tolerance=test.tolerance)
    with pytest.warns(BiasWarning, match="exceeds the tolerance"):
        bad = sample(model, loose, proposal, [x.mean()], 300, rng=5)
    assert bias_monitor(bad).mean_error > 2 * bias_monitor(good).mean_error
