"""Pairs (theta, theta') from exact random-walk MH on a synthetic logistic regression.

Stands in for ``samplers`` (not ready yet) to give the average design a realistic trial
chain, as in Korattikara et al. (2014), section 6.5, Fig. 6: a trial set of pairs for the
design and a fresh set to measure it on. Plain NumPy; every random step takes ``rng``.

The model implements the duck-typed protocol ``TrialChain.from_model`` reads: ``N``,
``loglik(theta, idx)`` (per-datum log-likelihoods), ``loglik_ratio(theta, theta_new, idx)``
and ``logprior(theta)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_expit


class LogisticModel:
    """y_i ~ Bernoulli(expit(x_i . theta)), prior theta ~ N(0, prior_sd^2 I)."""

    def __init__(self, X, y, prior_sd=10.0):
        self.X = X
        self.s = 2.0 * y - 1.0                     # labels as +-1
        self.N = X.shape[0]
        self.prior_sd = prior_sd

    def loglik(self, theta, idx):
        return log_expit(self.s[idx] * (self.X[idx] @ theta))

    def loglik_ratio(self, theta, theta_new, idx):
        Xi, si = self.X[idx], self.s[idx]
        return log_expit(si * (Xi @ theta_new)) - log_expit(si * (Xi @ theta))

    def loglik_many(self, thetas, idx):
        """Log-likelihoods of rows ``idx`` at k parameter vectors: one product X[idx] @ T'."""
        return log_expit(self.s[idx][:, None] * (self.X[idx] @ np.asarray(thetas).T))

    def logprior(self, theta):
        return float(-0.5 * np.sum(theta**2) / self.prior_sd**2)

    def logpost(self, theta):
        return float(np.sum(log_expit(self.s * (self.X @ theta)))) + self.logprior(theta)

    def map_and_hessian(self, iters=25):
        """Posterior mode by Newton's method, and minus the Hessian of the log posterior."""
        theta = np.zeros(self.X.shape[1])
        for _ in range(iters):
            p = np.exp(log_expit(self.X @ theta))
            y = (self.s + 1) / 2
            grad = self.X.T @ (y - p) - theta / self.prior_sd**2
            H = (self.X * (p * (1 - p))[:, None]).T @ self.X + np.eye(theta.size) / self.prior_sd**2
            theta = theta + np.linalg.solve(H, grad)
        return theta, H


def make_data(N, d, rng):
    """Synthetic design: an intercept and d - 1 standard normal features."""
    rng = np.random.default_rng(rng)
    X = np.column_stack([np.ones(N), rng.standard_normal((N, d - 1))])
    beta = rng.normal(0, 1, d) / np.sqrt(d)
    y = (rng.random(N) < np.exp(log_expit(X @ beta))).astype(float)
    return X, y


def mh_pairs(model, n_pairs, rng, *, burn_in=200, scale=2.38):
    """(thetas, theta_news): the current and proposed states of ``n_pairs`` consecutive
    iterations of exact random-walk MH, started at the mode, after ``burn_in`` iterations.

    The proposal is N(theta, scale^2 / d * H^-1), H the posterior precision at the mode.
    """
    rng = np.random.default_rng(rng)
    theta, H = model.map_and_hessian()
    chol = np.linalg.cholesky(np.linalg.inv(H)) * scale / np.sqrt(theta.size)
    lp = model.logpost(theta)
    thetas, news = [], []
    for it in range(burn_in + n_pairs):
        prop = theta + chol @ rng.standard_normal(theta.size)
        lp_new = model.logpost(prop)
        if it >= burn_in:
            thetas.append(theta.copy())
            news.append(prop)
        if np.log(rng.random()) < lp_new - lp:
            theta, lp = prop, lp_new
    return np.array(thetas), np.array(news)


def laplace_pairs(model, n_pairs, rng, *, scale=2.38):
    """(thetas, theta_news) drawn around the mode: theta ~ N(mode, H^-1) (the Laplace
    approximation of the posterior) and theta' from the random-walk proposal of
    ``mh_pairs``. A cheap stand-in for a chain when only the pairs matter."""
    rng = np.random.default_rng(rng)
    mode, H = model.map_and_hessian()
    chol = np.linalg.cholesky(np.linalg.inv(H))
    thetas = mode + rng.standard_normal((n_pairs, mode.size)) @ chol.T
    news = thetas + rng.standard_normal((n_pairs, mode.size)) @ chol.T * scale / np.sqrt(mode.size)
    return thetas, news
