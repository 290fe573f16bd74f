"""The main job end to end: trial chain -> design -> designed sampler."""

import numpy as np

import design
from samplers import (
    AustereTest,
    ExactTest,
    GaussianPrior,
    LogisticRegression,
    RandomWalk,
    sample,
    sample_chains,
)
from samplers.datasets import logistic_regression


def test_design_from_an_exact_trial_chain_predicts_the_designed_sampler():
    X, y, theta = logistic_regression(30_000, 4, rng=3)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    proposal = RandomWalk(0.012)
    trial = design.TrialChain.from_chain(sample(model, ExactTest(), proposal, theta, 150, rng=4))
    d = design.optimize(trial, tolerance=0.05)
    assert d.error <= 0.05

    test = AustereTest.from_design(d)
    assert test == AustereTest(m=d.m, epsilon=d.epsilon)   # copying by hand: the same test
    assert (test.m, test.epsilon) == (d.m, d.epsilon)
    chain = sample(model, test, proposal, theta, 600, rng=5)
    # The design's expected data fraction is an average over trial pairs; the designed chain
    # visits pairs from (nearly) the same distribution. 600 steps: allow 0.1 absolute.
    assert abs(chain.mean_data_fraction - d.data_fraction) < 0.1
    # and the design's mean |Delta| is what the designed chain's acceptance rate may differ
    # by from exact MH on the same pairs: measured directly on fresh pairs
    fresh = design.TrialChain.from_chain(sample(model, ExactTest(), proposal, theta, 100, rng=6))
    err = design.acceptance_error(fresh, m=d.m, epsilon=d.epsilon, threshold=d.prediction_threshold)
    assert err.mean_abs_delta < 2 * 0.05


def test_trial_chain_from_several_chains():
    X, y, theta = logistic_regression(5_000, 2, rng=1)
    model = LogisticRegression(X, y)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        chains = sample_chains(model, ExactTest(), RandomWalk(0.03), theta, 40, n_chains=2,
                               rng=2, executor=pool)
    trial = design.TrialChain.from_chain(chains)
    assert trial.N == 5_000 and 0 < len(trial.mu) <= 80
    assert np.all(trial.sigma > 0)
