"""Reversible-jump MH baselines on the shared chain loop: against exact enumeration of all
models, with the full-data and the sequential (Korattikara et al. 2014, 6.3) tests."""

import itertools
import math
import warnings

import numpy as np
import pytest

from samplers import AustereTest, ConfidenceTest, ExactTest, sample
from samplers.datasets import correlated_regression
from samplers.esgld import ReversibleJump, SparseLinearRegression, SpikeSlabPrior, rjmcmc_select

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def enumerate_posterior(X, y, noise_sd, prior):
    """Exact inclusion probabilities and posterior mean of beta: every model's marginal
    likelihood in closed form (Gaussian slab, known noise), by enumeration."""
    N, p = X.shape
    table = prior.log_size_table(p)
    log_w, means, models = [], [], []
    for gamma in itertools.product([0, 1], repeat=p):
        S = np.flatnonzero(gamma)
        A = X[:, S].T @ X[:, S] / noise_sd**2 + np.eye(S.size) / prior.slab_sd**2
        b = X[:, S].T @ y / noise_sd**2
        mu = np.linalg.solve(A, b)
        log_w.append(0.5 * b @ mu - 0.5 * np.linalg.slogdet(A)[1]
                     - S.size * math.log(prior.slab_sd) + table[S.size])
        full = np.zeros(p)
        full[S] = mu
        means.append(full)
        models.append(gamma)
    w = np.exp(np.array(log_w) - max(log_w))
    w /= w.sum()
    return w @ np.array(models), w @ np.array(means)


def test_full_data_reversible_jump_matches_enumeration():
    X, y, _ = correlated_regression(1000, 4, [0.12, -0.15], rng=1)
    prior = SpikeSlabPrior(slab_sd=0.5, b=1.0)
    pip, post_mean = enumerate_posterior(X, y, 1.0, prior)
    assert 0.2 < pip[0] < 0.8 and 0.2 < pip[1] < 0.8  # genuinely uncertain inclusions
    chain = sample(SparseLinearRegression(X, y, 1.0, prior=prior), ExactTest(),
                   ReversibleJump(birth_sd=0.1, update_sd=0.05), np.zeros(4), 15_000, rng=3)
    draws = chain.samples[1000:]
    for j in range(4):
        inside = (draws[:, j] != 0).astype(float)
        se_pip = inside.std() / math.sqrt(float(az.ess(inside[None, :])))
        se_beta = draws[:, j].std() / math.sqrt(float(az.ess(draws[None, :, j])))
        assert abs(inside.mean() - pip[j]) < 5 * se_pip + 1e-3, (j, inside.mean(), pip[j])
        assert abs(draws[:, j].mean() - post_mean[j]) < 5 * se_beta + 1e-4
    assert chain.stats["n_used"].max() == 1000


def test_austere_reversible_jump_reads_less_data_and_selects_the_true_model():
    # The approximate test shifts the stationary law a little (Korattikara et al., Theorem 1),
    # so the estimates are allowed 5 Monte Carlo SEs plus half a posterior sd.
    X, y, beta = correlated_regression(5000, 8, [1.0, -1.0, 0.5], rng=2)
    model = SparseLinearRegression(X, y, 1.0)
    pip, post_mean = enumerate_posterior(X, y, 1.0, model.prior)
    fit = rjmcmc_select(model, AustereTest(m=500, epsilon=0.01), ReversibleJump(1.0, 0.03),
                        n_iter=6000, burn_in=2000, thin=1, rng=4, segment=2500)
    np.testing.assert_array_equal(fit.selected, [0, 1, 2])
    np.testing.assert_array_equal(np.flatnonzero(pip > 0.5), [0, 1, 2])
    for j in range(3):
        draws = fit.samples[:, j]
        mcse = draws.std() / math.sqrt(float(az.ess(draws[None, :])))
        assert abs(fit.beta[j] - post_mean[j]) < 5 * mcse + 0.5 * draws.std()
    assert fit.rows_read < 0.5 * 6000 * model.N
    assert fit.samples.shape == (4000, 8) and fit.model_size.shape == (6000,)


def test_segments_do_not_change_the_chain():
    X, y, _ = correlated_regression(500, 6, [1.0], rng=0)
    model = SparseLinearRegression(X, y, 1.0)
    runs = [rjmcmc_select(model, ExactTest(), ReversibleJump(1.0, 0.05), n_iter=300, burn_in=50,
                          thin=1, rng=7, segment=s) for s in (300, 64)]
    # one call of sample vs several: the same draws except where sample() restarts its row
    # order (the exact test reads all rows, so not at all)
    np.testing.assert_array_equal(runs[0].samples, runs[1].samples)


def test_proposal_ratio_accounts_for_the_boundaries():
    rng = np.random.default_rng(0)
    proposal = ReversibleJump(birth_sd=0.7, update_sd=0.1)
    theta = np.zeros(3)
    new, log_q, _, _ = proposal.propose(rng, None, None, theta, None)  # empty model: birth
    b = new[new != 0][0]
    birth_density = -0.5 * (b / 0.7) ** 2 - math.log(0.7) - 0.5 * math.log(2 * math.pi)
    # forward: birth (prob 1) of one of 3; reverse: death (1/3) of the only variable
    assert log_q == pytest.approx(math.log(1 / 3) - math.log(1 / 3) - birth_density)


def test_confidence_test_can_decide_jumps_too():
    X, y, _ = correlated_regression(5000, 5, [1.0], rng=0)
    model = SparseLinearRegression(X, y, 1.0)
    chain = sample(model, ConfidenceTest(delta=0.05), ReversibleJump(1.0, 0.02), np.zeros(5),
                   200, rng=0)
    assert chain.samples.shape == (200, 5)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: ReversibleJump(birth_sd=0.0), ValueError, r"birth_sd must be in \(0, inf\), got 0.0"),
        (lambda: ReversibleJump(update_sd=-1.0), ValueError, r"update_sd must be in \(0, inf\)"),
        (lambda: SparseLinearRegression(np.zeros((3, 2)), np.zeros(2)), ValueError,
         r"y must have one value per row of X \(3\), got 2"),
        (lambda: rjmcmc_select("model", ExactTest(), ReversibleJump(), n_iter=5), TypeError,
         "model must be a SparseLinearRegression"),
        (lambda: rjmcmc_select(SparseLinearRegression(np.ones((3, 2)), np.zeros(3)), ExactTest(),
                               ReversibleJump(), n_iter=0), ValueError, "n_iter must be >= 1, got 0"),
    ],
)
def test_bad_input_is_refused(make, error, match):
    with pytest.raises(error, match=match):
        make()
