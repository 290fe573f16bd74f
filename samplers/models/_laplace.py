"""The Laplace approximation of a logistic-regression posterior, by Newton's method."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from design._lib.checks import as_generator, check_int

from ..priors import FlatPrior, GaussianPrior
from ._glm import glm_sums
from .logistic import LogisticRegression

__all__ = ["LaplaceApproximation", "laplace_approximation"]

#: Newton steps on the row subset, then on all rows (each stops early once converged).
_SUBSET_STEPS, _FULL_STEPS = 50, 10
#: Converged when every coordinate moved less than this many posterior sds.
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class LaplaceApproximation:
    """A Gaussian approximation N(mode, covariance) of a posterior.

    Attributes
    ----------
    mode : ndarray, shape (d,)
        The posterior mode found by Newton's method.
    covariance : ndarray, shape (d, d)
        Inverse of minus the Hessian of the log posterior at ``mode``.
    """

    mode: np.ndarray
    covariance: np.ndarray


def laplace_approximation(model: LogisticRegression, rows: int = 20_000, rng=None, *,
                          chunk: int = 1 << 16) -> LaplaceApproximation:
    r"""Posterior mode and covariance of a logistic regression (Laplace approximation).

    Parameters
    ----------
    model : LogisticRegression
        With a :class:`~samplers.priors.GaussianPrior` or :class:`~samplers.priors.FlatPrior`
        (the Newton step needs the prior's Hessian); its ``temperature`` K is honoured.
    rows : int, optional
        Rows drawn without replacement for the first phase (all N if ``rows >= N``).
    rng : None, int, SeedSequence or Generator, optional
        Draws the row subset.
    chunk : int, optional
        Rows per chunk in the full-data passes (memmaps work; each pass runs its chunks on
        every core, see :func:`samplers.models._glm.glm_sums`).

    Returns
    -------
    LaplaceApproximation
        ``mode`` and ``covariance``.

    Notes
    -----
    The log posterior is :math:`\log p(\theta) + K^{-1}\sum_i \log\sigma(s_i x_i^\top\theta)`
    with gradient :math:`-P(\theta - \mu) + K^{-1} X^\top (y - p)` and Hessian
    :math:`-P - K^{-1} X^\top \mathrm{diag}(p(1-p)) X`, where :math:`p = \sigma(X\theta)` and
    P is the prior precision. Newton steps on ``rows`` random rows (likelihood terms scaled by
    N / rows) reach the subset's mode cheaply; that mode is off by about sqrt(N / rows)
    posterior sds, so a few full-data Newton steps (one chunked O(N) pass each, done once
    before sampling) finish the job. The covariance is the inverse of minus the Hessian at the
    full-data mode: the Laplace approximation (e.g. Bishop 2006, section 4.4). For N much
    larger than d the posterior is close to it (Bernstein-von Mises), so it is a good start
    and random-walk shape for a chain: ``RandomWalk(2.38**2 / d * covariance)``.

    Examples
    --------
    >>> from samplers import GaussianPrior, LogisticRegression
    >>> from samplers.datasets import logistic_regression
    >>> X, y, _ = logistic_regression(5_000, 2, rng=0)
    >>> model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    >>> approx = laplace_approximation(model, rows=1_000, rng=1)
    >>> approx.mode.shape, approx.covariance.shape
    ((3,), (3, 3))
    >>> bool(np.all(np.linalg.eigvalsh(approx.covariance) > 0))
    True
    """
    if not isinstance(model, LogisticRegression):
        raise TypeError(f"model must be a samplers.LogisticRegression, got {type(model).__name__}")
    if isinstance(model.prior, GaussianPrior):
        prior_mean = np.asarray(model.prior.mean, dtype=float)
        prior_precision = 1.0 / model.prior.sd**2
    elif isinstance(model.prior, FlatPrior):
        prior_mean = np.zeros(model.dim)
        prior_precision = np.zeros(model.dim)
    else:
        raise TypeError(f"model.prior must be a GaussianPrior or a FlatPrior for the Laplace "
                        f"approximation, got {type(model.prior).__name__}")
    rows = check_int("rows", rows, low=1)
    chunk = check_int("chunk", chunk, low=1)
    rng = as_generator(rng)
    K = model.temperature

    def newton_terms(theta, rows_model, scale):
        """Gradient and minus the Hessian of the log posterior with ``rows_model``'s rows
        standing for the likelihood (scaled by ``scale``): one compiled pass on every core."""
        _, g, H = glm_sums(rows_model, theta, chunk=chunk)
        return (scale * g - prior_precision * (theta - prior_mean),
                np.diag(prior_precision).astype(float) - scale * H)

    idx = np.sort(rng.choice(model.N, size=min(rows, model.N), replace=False))
    rows = model._rows_model(idx)      # the subset's rows (read_rows from a store)
    subset = LogisticRegression(np.asarray(rows.X), np.asarray(rows.y), temperature=K)
    theta = np.zeros(model.dim)
    for scale, rows_model, steps in ((model.N / idx.shape[0], subset, _SUBSET_STEPS),
                                     (1.0, model, _FULL_STEPS)):
        for _ in range(steps):
            grad, hess = newton_terms(theta, rows_model, scale)
            step = np.linalg.solve(hess, grad)
            theta = theta + step
            if np.max(np.abs(step) / np.sqrt(np.diag(np.linalg.inv(hess)))) < _TOLERANCE:
                break
    _, hess = newton_terms(theta, model, 1.0)
    return LaplaceApproximation(theta, np.linalg.inv(hess))
