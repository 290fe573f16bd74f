"""Extended SGLD for missing data (Song et al. 2020, section 3.2 and Algorithm S1).

The example model: linear regression ``y_i = x_i . beta + e_i``, ``e_i ~ N(0, sigma^2)``,
with Gaussian covariates ``x_i ~ N(mu, Sigma)`` of which some entries are missing at random
(``NaN``); ``sigma`` and ``Sigma`` are known, ``theta = (beta, mu)`` has independent
``N(0, prior_sd^2)`` priors. Treating the missing values as latent variables, Lemma 1 gives
the gradient of the observed-data log posterior as the expectation, over the missing values
drawn from their conditional law given ``theta`` and the observed data, of the
complete-data gradient. Algorithm S1 therefore imputes, at each iteration, the missing
values of the subsample only, from ``pi(x_mis | x_obs, y, theta)`` (Gaussian here), and
moves ``theta`` by SGLD with the complete-data gradient of the subsample weighted N/n. It
is :class:`ImputationSGLD` on the shared chain loop::

    sample(model, AcceptAll(), ImputationSGLD(step_size, batch_size), theta0, n_samples)

:func:`data_augmentation` is the full-data alternative the paper compares with (Tanner & Wong
1987): impute every missing value, then draw ``theta`` from its complete-data conditional;
it is exact and costs O(N) per iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from design._lib.checks import as_generator, check_finite_array, check_int, check_positive
from ..models._base import as_data_array, check_finite_rows
from ..sgld import SGLD

__all__ = ["MissingCovariateRegression", "ImputationSGLD", "data_augmentation"]

_LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class _Pattern:
    """Precomputed Gaussian algebra of one missingness pattern."""

    obs: np.ndarray  # observed columns
    mis: np.ndarray  # missing columns
    gain: np.ndarray  # Sigma_mo Sigma_oo^-1, shape (|mis|, |obs|)
    cond_cov: np.ndarray  # Sigma_mm - gain Sigma_om
    cond_prec: np.ndarray  # cond_cov^-1
    prec_oo: np.ndarray  # Sigma_oo^-1
    logdet_oo: float


def _gaussian_logpdf_rows(resid, prec, logdet):
    """log N(resid_i; 0, prec^-1) for each row of ``resid``."""
    quad = np.einsum("ij,jk,ik->i", resid, prec, resid)
    return -0.5 * (quad + logdet + resid.shape[1] * _LOG_2PI)


def _gaussian_draw(rng, mean, prec):
    """Rows ``mean_i + N(0, prec^-1)`` (small matrices: plain NumPy, no per-call overhead)."""
    factor = np.linalg.cholesky(np.linalg.inv(prec))
    return mean + rng.standard_normal(mean.shape) @ factor.T


class MissingCovariateRegression:
    """Linear regression with Gaussian covariates missing at random (NaN), ``theta = (beta, mu)``.

    Parameters
    ----------
    X : array of shape (N, d)
        Covariates, ``NaN`` where missing (missing at random: missingness may depend on
        observed values, e.g. on ``y``). Read in place.
    y : array of shape (N,)
        Responses (all observed).
    noise_sd : float
        Known sigma.
    covariate_cov : array of shape (d, d)
        Known covariance Sigma of the covariates (symmetric positive definite).
    prior_sd : float
        Sd of the independent Gaussian priors of beta and mu.

    Notes
    -----
    ``loglik`` is the observed-data log-likelihood of a row, in closed form:
    ``log N(x_obs; mu_o, Sigma_oo) + log N(y; x_obs.beta_o + m.beta_m, sigma^2 + beta_m' C beta_m)``
    with ``x_mis | x_obs ~ N(m, C)``. :meth:`impute` draws ``x_mis`` from its conditional given
    ``x_obs``, ``y`` and theta; :meth:`grad_complete` is the complete-data gradient. Rows are
    grouped by missingness pattern, found once at construction.

    Examples
    --------
    >>> from samplers.datasets import missing_covariates_regression
    >>> data = missing_covariates_regression(1000, rng=0)
    >>> model = MissingCovariateRegression(data.X, data.y, 1.0, data.cov)
    >>> model.dim, model.loglik(np.r_[data.beta, data.mu], np.arange(3)).shape
    (6, (3,))
    """

    def __init__(self, X, y, noise_sd, covariate_cov, *, prior_sd=10.0):
        self.X = as_data_array("X", X, ndim=2)
        self.y = as_data_array("y", y, ndim=1)
        self.N, self.d = self.X.shape
        if self.y.shape[0] != self.N:
            raise ValueError(f"y must have one value per row of X ({self.N}), got {self.y.shape[0]}")
        check_finite_rows("y", self.y)
        if np.isinf(self.X).any():
            raise ValueError("X must be finite where observed (NaN marks a missing value)")
        self.noise_sd = check_positive("noise_sd", noise_sd)
        self.prior_sd = check_positive("prior_sd", prior_sd)
        cov = check_finite_array("covariate_cov", covariate_cov, ndim=2)
        if cov.shape != (self.d, self.d) or not np.allclose(cov, cov.T):
            raise ValueError(f"covariate_cov must be a symmetric {self.d} x {self.d} matrix, "
                             f"got shape {cov.shape}")
        try:
            np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            raise ValueError("covariate_cov must be positive definite") from None
        self.cov = cov
        self.cov_inv = np.linalg.inv(cov)
        self.dim = 2 * self.d
        missing = np.isnan(self.X)
        self.codes = missing @ (1 << np.arange(self.d))
        self.patterns = {int(c): self._pattern(int(c)) for c in np.unique(self.codes)}
        self.missing_fraction = float(missing.mean())

    def _pattern(self, code) -> _Pattern:
        mis = np.flatnonzero([(code >> j) & 1 for j in range(self.d)])
        obs = np.setdiff1d(np.arange(self.d), mis)
        S = self.cov
        prec_oo = np.linalg.inv(S[np.ix_(obs, obs)]) if obs.size else np.zeros((0, 0))
        gain = S[np.ix_(mis, obs)] @ prec_oo
        cond_cov = S[np.ix_(mis, mis)] - gain @ S[np.ix_(obs, mis)]
        cond_prec = np.linalg.inv(cond_cov) if mis.size else np.zeros((0, 0))
        logdet = float(np.linalg.slogdet(S[np.ix_(obs, obs)])[1]) if obs.size else 0.0
        return _Pattern(obs, mis, gain, cond_cov, cond_prec, prec_oo, logdet)

    def split(self, theta):
        """``(beta, mu)`` of a parameter vector."""
        theta = np.asarray(theta, dtype=float)
        return theta[: self.d], theta[self.d:]

    def _groups(self, idx):
        codes = self.codes[idx]
        for code in np.unique(codes):
            yield self.patterns[int(code)], np.flatnonzero(codes == code)

    def loglik(self, theta, idx):
        """Observed-data log-likelihood of rows ``idx`` (missing covariates integrated out)."""
        beta, mu = self.split(theta)
        idx = np.asarray(idx, dtype=np.intp)
        out = np.empty(idx.shape[0])
        s2 = self.noise_sd**2
        for pat, where in self._groups(idx):
            rows = idx[where]
            xo = self.X[np.ix_(rows, pat.obs)] - mu[pat.obs]
            m = mu[pat.mis] + xo @ pat.gain.T
            mean_y = (xo + mu[pat.obs]) @ beta[pat.obs] + m @ beta[pat.mis]
            var_y = s2 + beta[pat.mis] @ pat.cond_cov @ beta[pat.mis]
            ry = self.y[rows] - mean_y
            out[where] = (_gaussian_logpdf_rows(xo, pat.prec_oo, pat.logdet_oo)
                          - 0.5 * (ry * ry / var_y + math.log(var_y) + _LOG_2PI))
        return out

    def logprior(self, theta) -> float:
        theta = np.asarray(theta, dtype=float)
        s = self.prior_sd
        return float(-0.5 * theta @ theta / s**2 - theta.size * (math.log(s) + 0.5 * _LOG_2PI))

    def grad_logprior(self, theta):
        return -np.asarray(theta, dtype=float) / self.prior_sd**2

    def impute(self, rng, theta, idx) -> np.ndarray:
        """Rows ``idx`` of X with missing values drawn from ``pi(x_mis | x_obs, y, theta)``.

        Given ``x_obs``, ``x_mis ~ N(m, C)`` and ``y = x_obs.beta_o + x_mis.beta_m + e``, so
        ``x_mis | x_obs, y`` is Gaussian with precision ``P = C^-1 + beta_m beta_m' / sigma^2``
        and mean ``P^-1 (C^-1 m + beta_m (y - x_obs.beta_o) / sigma^2)``. Returns a new array.
        """
        beta, mu = self.split(theta)
        idx = np.asarray(idx, dtype=np.intp)
        out = np.array(self.X[idx], dtype=float)
        s2 = self.noise_sd**2
        for pat, where in self._groups(idx):
            if pat.mis.size == 0:
                continue
            rows = idx[where]
            xo = self.X[np.ix_(rows, pat.obs)]
            m = mu[pat.mis] + (xo - mu[pat.obs]) @ pat.gain.T
            bm = beta[pat.mis]
            prec = pat.cond_prec + np.outer(bm, bm) / s2
            rhs = m @ pat.cond_prec + np.outer(self.y[rows] - xo @ beta[pat.obs], bm) / s2
            out[np.ix_(where, pat.mis)] = _gaussian_draw(rng, np.linalg.solve(prec, rhs.T).T, prec)
        return out

    def grad_complete(self, theta, idx, X_complete) -> np.ndarray:
        """Complete-data log-likelihood gradient summed over rows ``idx`` (imputed values in
        ``X_complete``): ``(sum x_i r_i / sigma^2, Sigma^-1 sum (x_i - mu))``."""
        beta, mu = self.split(theta)
        r = self.y[idx] - X_complete @ beta
        return np.concatenate([X_complete.T @ r / self.noise_sd**2,
                               self.cov_inv @ (X_complete - mu).sum(axis=0)])

    def __repr__(self):
        return (f"MissingCovariateRegression(N={self.N}, d={self.d}, "
                f"missing={100 * self.missing_fraction:.1f}%)")


@dataclass(frozen=True)
class ImputationSGLD(SGLD):
    """SGLD whose gradient imputes the subsample's missing values (Algorithm S1).

    At each step: draw ``batch_size`` rows, impute their missing values ``n_imputations``
    times from ``pi(x_mis | x_obs, y, theta)`` (``model.impute``), and use the average
    complete-data gradient (``model.grad_complete``), weighted N/n, plus the prior gradient,
    in the SGLD move. Runs uncorrected, with :class:`~samplers.AcceptAll`.

    Parameters
    ----------
    step_size, batch_size, temperature
        As :class:`~samplers.SGLD`.
    n_imputations : int
        Imputations averaged per step (the Monte Carlo size of Lemma 1), ``>= 1``.

    Examples
    --------
    >>> from samplers import AcceptAll, sample
    >>> from samplers.datasets import missing_covariates_regression
    >>> data = missing_covariates_regression(5000, rng=0)
    >>> model = MissingCovariateRegression(data.X, data.y, 1.0, data.cov)
    >>> chain = sample(model, AcceptAll(), ImputationSGLD(2e-5, batch_size=100),
    ...                np.zeros(6), 2000, rng=1)
    >>> bool(np.allclose(chain.samples[1000:, :3].mean(axis=0), data.beta, atol=0.1))
    True
    """

    n_imputations: int = 1

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "n_imputations",
                           check_int("n_imputations", self.n_imputations, low=1))

    def check(self, view):
        for name in ("impute", "grad_complete", "grad_logprior"):
            if not callable(getattr(view.model, name, None)):
                raise TypeError(f"ImputationSGLD needs model.{name}; "
                                f"{type(view.model).__name__} does not provide it")
        if self.batch_size > view.N:
            raise ValueError(f"batch_size must be <= N = {view.N}, got {self.batch_size}")

    def _gradient(self, rng, view, theta, idx):
        model = view.model
        total = np.zeros(theta.shape[0])
        for _ in range(self.n_imputations):
            total += model.grad_complete(theta, idx, model.impute(rng, theta, idx))
        return model.grad_logprior(theta) + (view.N / idx.shape[0]) * total / self.n_imputations


def data_augmentation(model: MissingCovariateRegression, n_iter, *, theta0=None, rng=None):
    """Full-data data augmentation (Tanner & Wong 1987): the exact Gibbs sampler.

    Each iteration imputes every missing value from ``pi(x_mis | x_obs, y, theta)`` (an O(N)
    pass) and draws ``beta`` and ``mu`` from their Gaussian complete-data conditionals.

    Returns
    -------
    ndarray of shape (n_iter, 2d)
        Draws of ``theta = (beta, mu)``.

    Examples
    --------
    >>> from samplers.datasets import missing_covariates_regression
    >>> data = missing_covariates_regression(2000, rng=0)
    >>> model = MissingCovariateRegression(data.X, data.y, 1.0, data.cov)
    >>> draws = data_augmentation(model, 200, rng=0)
    >>> bool(np.allclose(draws[50:, :3].mean(axis=0), data.beta, atol=0.1))
    True
    """
    if not isinstance(model, MissingCovariateRegression):
        raise TypeError(f"model must be a MissingCovariateRegression, got {type(model).__name__}")
    n_iter = check_int("n_iter", n_iter, low=1)
    rng = as_generator(rng)
    d, N = model.d, model.N
    theta = np.zeros(2 * d) if theta0 is None else check_finite_array("theta0", theta0, ndim=1)
    everything = np.arange(N)
    s2, v0 = model.noise_sd**2, model.prior_sd**2
    out = np.empty((n_iter, 2 * d))
    for t in range(n_iter):
        Xc = model.impute(rng, theta, everything)
        prec_b = Xc.T @ Xc / s2 + np.eye(d) / v0
        beta = _gaussian_draw(rng, np.linalg.solve(prec_b, Xc.T @ model.y / s2), prec_b)
        prec_m = N * model.cov_inv + np.eye(d) / v0
        mu = _gaussian_draw(rng, np.linalg.solve(prec_m, model.cov_inv @ Xc.sum(axis=0)), prec_m)
        theta = np.concatenate([beta, mu])
        out[t] = theta
    return out
