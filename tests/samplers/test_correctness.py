"""Correctness harness: every test (and proposal) against a closed-form posterior.

Target: the mean of a Gaussian model with known sd 1 and a N(0, 10^2) prior, N = 10^5 rows
drawn from N(0.5, 0.1^2): the setting of Bardenet et al. (2014), section 4.3, in which the
l_i are concentrated enough for subsampling to pay. The posterior is Gaussian in closed form
(GaussianMean.posterior). Tolerances are 5 Monte Carlo standard errors: ArviZ's ESS-based
MCSE of the mean and of the sd. Seeds are fixed, so a run is deterministic; the 5-SE band
makes a false failure over the whole harness (about 16 checks) less likely than 1e-5 a priori.
"""

import warnings

import numpy as np
import pytest

from samplers import (
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ExactTest,
    GaussianMean,
    GaussianPrior,
    Langevin,
    RandomWalk,
    sample,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

N = 100_000
X = np.random.default_rng(2014).normal(0.5, 0.1, N)
MODEL = GaussianMean(X, sigma=1.0, prior=GaussianPrior(0.0, 10.0))
POST_MEAN, POST_SD = MODEL.posterior()


def assert_matches_posterior(chain, mean=POST_MEAN, sd=POST_SD, k=5.0):
    idata = chain.to_arviz()
    mcse_mean = float(az.mcse(idata, method="mean").theta.values[0])
    mcse_sd = float(az.mcse(idata, method="sd").theta.values[0])
    s = chain.samples[:, 0]
    assert abs(s.mean() - mean) < k * mcse_mean, (s.mean(), mean, mcse_mean)
    assert abs(s.std() - sd) < k * mcse_sd, (s.std(), sd, mcse_sd)


HARNESS = [
    (ExactTest(), 1.0),
    (AustereTest(m=500, epsilon=0.01), 0.25),
    (AustereTest(m=500, epsilon=0.01, threshold="normal"), 0.25),
    (ConfidenceTest(delta=0.01, gamma=2.0, p=2.0), 1.0),
    (ConfidenceTest(delta=0.01, gamma=1.5, bound="hoeffding", batch_size=50), 1.0),
    (BarkerTest(m=500, delta=None), 0.25),
    (BarkerTest(m=500, delta=0.2), 0.25),
    (BarkerTest(m=500, skew=True), 0.25),
]


@pytest.mark.parametrize("test, max_fraction", HARNESS, ids=[repr(t) for t, _ in HARNESS])
def test_random_walk_chain_matches_closed_form_posterior(test, max_fraction):
    chain = sample(MODEL, test, RandomWalk(2.4 * POST_SD), [POST_MEAN], 8000, rng=123)
    assert_matches_posterior(chain)
    assert chain.mean_data_fraction <= max_fraction
    assert 0.2 < chain.acceptance_rate < 0.8


def test_mala_with_full_gradient_matches_posterior():
    chain = sample(MODEL, ExactTest(), Langevin(step_size=(1.2 * POST_SD) ** 2), [POST_MEAN],
                   4000, rng=5)
    assert_matches_posterior(chain)
    assert chain.acceptance_rate > 0.5


def test_minibatch_langevin_proposal_corrected_by_austere_test_matches_posterior():
    # The SGLD drift with the proposal's log q-ratio in mu0 (Korattikara et al. 6.4).
    chain = sample(MODEL, AustereTest(m=500, epsilon=0.01),
                   Langevin(step_size=(1.2 * POST_SD) ** 2, batch_size=500), [POST_MEAN], 8000,
                   rng=6)
    assert_matches_posterior(chain)
    assert chain.mean_data_fraction < 0.5
    assert set(chain.stats["n_grad"]) == {1000}


@pytest.mark.parametrize("test", [t for t, _ in HARNESS], ids=repr)
def test_equal_seeds_give_identical_chains(test):
    runs = [sample(MODEL, test, RandomWalk(2.4 * POST_SD), [POST_MEAN], 200, rng=77) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].samples, runs[1].samples)
    for key in runs[0].stats:
        np.testing.assert_array_equal(runs[0].stats[key], runs[1].stats[key])
    other = sample(MODEL, test, RandomWalk(2.4 * POST_SD), [POST_MEAN], 200, rng=78)
    assert not np.array_equal(other.samples, runs[0].samples)
