"""Korattikara et al. (2014), section 6.4, Figure 5: SGLD corrected by the minibatch MH test.

L1-regularised 1-D regression (N = 10,000, y = 0.5 x + N(0, 1/3) noise, noise precision 3,
Laplace rate 4950, step 5e-6, minibatches of 500, AustereTest(m=500, epsilon=0.5) as in the
paper). The posterior density comes from an independent route, quadrature of the exact log
posterior (:func:`samplers.quadrature.posterior_1d`). Each histogram bin is compared with its
quadrature probability p_b in units of its Monte Carlo SE sqrt(p_b (1 - p_b) / ESS_b), ESS_b
the effective size of the bin's indicator series (the chain's ESS if the chain never enters
the bin). The corrected chain must stay within 4 SEs in all 9 bins (a false failure has
probability below 1e-3 a priori); plain SGLD, which the valley left of zero throws off to the
right, must miss by more than 8 SEs somewhere. ``benchmarks/fig5_sgld_mh.py`` draws the figure.
"""

import warnings

import numpy as np
import pytest

from samplers import SGLD, AcceptAll, AustereTest, ExactTest, LaplacePrior, Langevin, LinearRegression, sample
from samplers.datasets import L1_TOY_LAPLACE_RATE, L1_TOY_PRECISION, l1_regression_toy
from samplers.quadrature import posterior_1d

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

STEP, BATCH = 5e-6, 500
EDGES = np.array([-np.inf, 0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, np.inf])


@pytest.fixture(scope="module")
def problem():
    X, y = l1_regression_toy(rng=2014)
    model = LinearRegression(X, y, noise_sd=(1 / L1_TOY_PRECISION) ** 0.5,
                             prior=LaplacePrior(0.0, 1 / L1_TOY_LAPLACE_RATE))
    post = posterior_1d(model, -0.02, 0.1, kinks=[0.0])
    probs = np.array([post.prob(a, b) for a, b in zip(EDGES[:-1], EDGES[1:])])
    return model, post, probs


def bin_z_scores(samples, probs):
    chain_ess = float(az.ess(samples[None, :]))
    z = []
    for (a, b), p in zip(zip(EDGES[:-1], EDGES[1:]), probs):
        inside = ((samples > a) & (samples <= b)).astype(float)
        ess = float(az.ess(inside[None, :])) if inside.std() > 0 else chain_ess
        z.append((inside.mean() - p) / np.sqrt(p * (1 - p) / ess))
    return np.array(z)


def test_quadrature_reference_is_a_density(problem):
    model, post, probs = problem
    assert abs(probs.sum() - 1) < 1e-9
    assert 0 < post.prob(-np.inf, 0.0) < 0.01  # the valley: little mass left of the kink
    assert 0.005 < post.mean < 0.025 and 0.005 < post.sd < 0.015


# The correction works with any AcceptanceTest (the Barker test joins this list when merged).
CORRECTIONS = [(AustereTest(m=500, epsilon=0.5), 500), (ExactTest(), 10_000)]


@pytest.mark.parametrize("test, rows", CORRECTIONS, ids=[repr(t) for t, _ in CORRECTIONS])
def test_sgld_corrected_by_an_mh_test_matches_the_posterior(problem, test, rows):
    model, post, probs = problem
    chain = sample(model, test, Langevin(STEP, batch_size=BATCH), [post.mean], 30_000, rng=1)
    z = bin_z_scores(chain.samples[:, 0], probs)
    assert np.all(np.abs(z) < 4), z
    # epsilon = 0.5 decides on the first minibatch of 500 rows, as in the paper
    assert chain.stats["n_used"].max() == rows
    assert 0.3 < chain.acceptance_rate < 0.95


def test_plain_sgld_is_thrown_off_to_the_right(problem):
    model, post, probs = problem
    chain = sample(model, AcceptAll(), SGLD(STEP, batch_size=BATCH), [post.mean], 20_000, rng=1)
    z = bin_z_scores(chain.samples[:, 0], probs)
    assert np.max(np.abs(z)) > 8, z
    assert chain.samples.mean() > post.mean + 0.3 * post.sd
