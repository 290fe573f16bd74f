"""eSGLD for missing data (Song et al. 2020, Algorithm S1): the imputation law and the
observed-data likelihood by an independent route, and agreement with full-data data
augmentation with 20% of the covariates missing at random."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from samplers import SGLD, AcceptAll, GaussianMean, sample
from samplers.datasets import missing_covariates_regression
from samplers.esgld import ImputationSGLD, MissingCovariateRegression, data_augmentation

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

DATA = missing_covariates_regression(10_000, rng=7)
MODEL = MissingCovariateRegression(DATA.X, DATA.y, 1.0, DATA.cov)
THETA = np.r_[DATA.beta + 0.05, DATA.mu - 0.1]


def joint_cov(beta, cov, noise_sd=1.0):
    """Covariance of (x, y) with x ~ N(mu, cov), y = x.beta + N(0, noise_sd^2)."""
    d = beta.shape[0]
    out = np.empty((d + 1, d + 1))
    out[:d, :d] = cov
    out[:d, d] = out[d, :d] = cov @ beta
    out[d, d] = beta @ cov @ beta + noise_sd**2
    return out


def test_observed_data_loglik_is_the_joint_gaussian_marginal():
    beta, mu = MODEL.split(THETA)
    J = joint_cov(beta, DATA.cov)
    mean = np.r_[mu, mu @ beta]
    rows = np.flatnonzero(np.isnan(DATA.X).any(axis=1))[:25]
    got = MODEL.loglik(THETA, rows)
    for value, i in zip(got, rows):
        seen = np.r_[~np.isnan(DATA.X[i]), True]
        point = np.r_[DATA.X[i], DATA.y[i]][seen]
        ref = stats.multivariate_normal(mean[seen], J[np.ix_(seen, seen)]).logpdf(point)
        assert value == pytest.approx(ref, rel=1e-10)


def test_imputations_follow_the_conditional_law():
    beta, mu = MODEL.split(THETA)
    J = joint_cov(beta, DATA.cov)
    mean = np.r_[mu, mu @ beta]
    i = int(np.flatnonzero(np.isnan(DATA.X).sum(axis=1) == 2)[0])
    seen = np.r_[~np.isnan(DATA.X[i]), True]
    gone = ~seen
    point = np.r_[DATA.X[i], DATA.y[i]][seen]
    K = J[np.ix_(gone, seen)] @ np.linalg.inv(J[np.ix_(seen, seen)])
    cond_mean = mean[gone] + K @ (point - mean[seen])
    cond_cov = J[np.ix_(gone, gone)] - K @ J[np.ix_(seen, gone)]
    rng = np.random.default_rng(0)
    k = 4000
    draws = np.array([MODEL.impute(rng, THETA, np.array([i]))[0, gone[:-1]] for _ in range(k)])
    # mean within 5 SEs; covariance entries within 5 SEs of a Wishart-type sampling error
    se_mean = np.sqrt(np.diag(cond_cov) / k)
    assert np.all(np.abs(draws.mean(axis=0) - cond_mean) < 5 * se_mean)
    sd = np.sqrt(np.diag(cond_cov))
    se_cov = np.sqrt((cond_cov**2 + np.outer(sd**2, sd**2)) / k)
    assert np.all(np.abs(np.cov(draws.T) - cond_cov) < 5 * se_cov)
    observed = MODEL.impute(rng, THETA, np.array([i]))[0, seen[:-1]]
    np.testing.assert_array_equal(observed, DATA.X[i, seen[:-1]])


@pytest.fixture(scope="module")
def chains():
    reference = data_augmentation(MODEL, 900, rng=1)[200:]
    proposal = ImputationSGLD(1e-5, batch_size=200)
    esgld = sample(MODEL, AcceptAll(), proposal, reference.mean(axis=0), 4000, rng=2)
    return reference, esgld


def mcse(draws):
    return np.array([draws[:, j].std() / math.sqrt(float(az.ess(draws[None, :, j])))
                     for j in range(draws.shape[1])])


def test_esgld_estimates_match_full_data_augmentation(chains):
    # 20% of the covariates missing at random. Posterior means of (beta, mu) from eSGLD must
    # agree with the exact full-data data augmentation within 5 combined Monte Carlo SEs.
    # (Constant-step SGLD inflates the spread, about 1.5x here, so only means are compared.)
    reference, esgld = chains
    assert 0.19 < MODEL.missing_fraction < 0.21
    draws = esgld.samples[1000:]
    tolerance = 5 * np.sqrt(mcse(draws) ** 2 + mcse(reference) ** 2)
    assert np.all(np.abs(draws.mean(axis=0) - reference.mean(axis=0)) < tolerance)
    # a step reads 200 rows, never N
    assert np.all(esgld.stats["n_grad"] == 200) and esgld.stats["n_used"].sum() == 0


def test_equal_seeds_give_identical_imputation_chains():
    runs = [sample(MODEL, AcceptAll(), ImputationSGLD(1e-5, 100), THETA, 50, rng=5)
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0].samples, runs[1].samples)


def test_data_are_not_modified():
    X = DATA.X.copy()
    sample(MODEL, AcceptAll(), ImputationSGLD(1e-5, 100), THETA, 20, rng=0)
    data_augmentation(MODEL, 2, rng=0)
    np.testing.assert_array_equal(np.isnan(X), np.isnan(DATA.X))
    np.testing.assert_array_equal(X[~np.isnan(X)], DATA.X[~np.isnan(X)])


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: ImputationSGLD(0.0, 10), ValueError, r"step_size must be in \(0, inf\), got 0.0"),
        (lambda: ImputationSGLD(1e-5, 10, n_imputations=0), ValueError,
         r"n_imputations must be >= 1, got 0"),
        (lambda: MissingCovariateRegression(DATA.X, DATA.y, 1.0, -np.eye(3)), ValueError,
         "covariate_cov must be positive definite"),
        (lambda: MissingCovariateRegression(DATA.X, DATA.y, 1.0, np.eye(2)), ValueError,
         r"covariate_cov must be a symmetric 3 x 3 matrix"),
        (lambda: MissingCovariateRegression(DATA.X, DATA.y[:5], 1.0, np.eye(3)), ValueError,
         "y must have one value per row of X"),
        (lambda: sample(MODEL, AcceptAll(), ImputationSGLD(1e-5, 20_000), THETA, 5), ValueError,
         r"batch_size must be <= N = 10000, got 20000"),
        (lambda: sample(GaussianMean(np.zeros(10)), AcceptAll(), ImputationSGLD(1e-5, 5), [0.0], 5),
         TypeError, "ImputationSGLD needs model.impute"),
        (lambda: data_augmentation(GaussianMean(np.zeros(10)), 5), TypeError,
         "model must be a MissingCovariateRegression"),
    ],
)
def test_bad_input_is_refused(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_plain_sgld_refuses_the_missing_data_model():
    with pytest.raises(TypeError, match="SGLD needs model.grad_loglik"):
        sample(MODEL, AcceptAll(), SGLD(1e-5, 100), THETA, 5)
