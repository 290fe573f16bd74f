"""loglik_ratios (all N l_i of a pair, chunked) and proposal_pairs (pairs from a trial run)."""

import numpy as np
import pytest

from samplers import ExactTest, GaussianMean, Langevin, RandomWalk, sample
from validation import loglik_ratios, proposal_pairs


@pytest.fixture(scope="module")
def model():
    return GaussianMean(np.random.default_rng(40).normal(size=1000))


def test_chunks_and_memmaps_give_the_model_s_ratios(model, tmp_path):
    expected = model.loglik_ratio([0.1], [0.2], np.arange(1000))
    np.testing.assert_array_equal(loglik_ratios(model, [0.1], [0.2], chunk=7), expected)
    out = np.lib.format.open_memmap(tmp_path / "l.npy", mode="w+", dtype=np.float64,
                                    shape=(1000,))
    assert loglik_ratios(model, [0.1], [0.2], chunk=300, out=out) is out
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), expected)


def test_a_user_model_without_a_fused_ratio():
    class Unit:
        N = 5
        x = np.arange(5.0)

        def loglik(self, theta, idx):
            return -0.5 * (self.x[idx] - theta[0]) ** 2

        def logprior(self, theta):
            return 0.0

    np.testing.assert_allclose(loglik_ratios(Unit(), [0.0], [1.0], chunk=2),
                               np.arange(5.0) - 0.5)


def test_loglik_ratios_refuses_bad_output_and_non_finite_ratios(model):
    with pytest.raises(ValueError, match=r"out must have shape \(1000,\)"):
        loglik_ratios(model, [0.0], [0.1], out=np.empty(10))
    with pytest.raises(TypeError, match="float64 numpy array"):
        loglik_ratios(model, [0.0], [0.1], out=np.empty(1000, dtype=np.float32))

    class Broken:
        N = 4

        def loglik(self, theta, idx):
            return np.where((idx == 2) & (theta[0] > 0.5), np.inf, 0.0)

        def logprior(self, theta):
            return 0.0

    with pytest.raises(ValueError, match="row 2"):
        loglik_ratios(Broken(), [0.0], [1.0])


def test_proposal_pairs_use_the_chain_s_proposal(model):
    chain = sample(model, ExactTest(), RandomWalk(0.05), [0.0], 200, rng=1)
    thetas, theta_news = proposal_pairs(chain, model, 10, burn_in=0.5, rng=2)
    picks = 100 + np.linspace(0, 99, 10).round().astype(int)
    np.testing.assert_array_equal(thetas, chain.samples[picks])
    steps = (theta_news - thetas).ravel()
    assert np.all(steps != 0) and np.std(steps) < 0.15
    again = proposal_pairs(chain, model, 10, burn_in=0.5, rng=2)
    np.testing.assert_array_equal(again[1], theta_news)


def test_proposal_pairs_with_a_langevin_proposal(model):
    """The drift points back to the posterior mean from far away."""
    chain = sample(model, ExactTest(), Langevin(1e-4), [0.5], 20, rng=3)
    thetas, theta_news = proposal_pairs(chain, model, 5, burn_in=0.0, rng=4)
    mean = model.posterior()[0]
    assert np.mean(np.abs(theta_news - mean)) < np.mean(np.abs(thetas - mean))


def test_proposal_pairs_argument_checks(model):
    chain = sample(model, ExactTest(), RandomWalk(0.05), [0.0], 20, rng=1)
    with pytest.raises(TypeError, match="samplers.Chain"):
        proposal_pairs(chain.samples, model)
    with pytest.raises(ValueError, match=r"burn_in must be in \[0, 1\)"):
        proposal_pairs(chain, model, burn_in=1.0)
    with pytest.raises(ValueError, match=r"n_pairs must be in \[1, 10\]"):
        proposal_pairs(chain, model, 11)
