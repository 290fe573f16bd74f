"""Bayesian logistic regression."""

from __future__ import annotations

import math

import numpy as np

from design._lib.jit import row_jit
from ..priors import Prior
from ._kernels import dots, prefetch_data01
from ._base import BaseModel, regression_data, scan_rows

__all__ = ["LogisticRegression"]


@row_jit
def log_sigmoid(z):
    """log(1 / (1 + exp(-z))) without overflow."""
    if z >= 0.0:
        return -math.log1p(math.exp(-z))
    return z - math.log1p(math.exp(z))


# data = (X, y, plus_minus, 1/K); y in {-1, 1} when plus_minus else in {0, 1}


@row_jit
def _logistic_row_loglik(data, i, theta):
    X, y, plus_minus, inv_temp = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    return log_sigmoid(s * a) * inv_temp


@row_jit
def _logistic_row_ratio(data, i, theta, theta_new):
    X, y, plus_minus, inv_temp = data
    a, a_new = dots(X, i, theta, theta_new)
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    return (log_sigmoid(s * a_new) - log_sigmoid(s * a)) * inv_temp


@row_jit
def _logistic_row_grad(data, i, theta, out):
    X, y, plus_minus, inv_temp = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    w = s * math.exp(log_sigmoid(-s * a)) * inv_temp  # d/da log sigmoid(s a) = s sigmoid(-s a)
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


class LogisticRegression(BaseModel):
    """Logistic regression, ``p(y_i = 1 | x_i, theta) = sigmoid(theta . x_i)``.

    Parameters
    ----------
    X : array of shape (N, d)
        Covariates; add a column of ones for an intercept. Read in place (memmaps welcome).
    y : array of shape (N,)
        Labels in {0, 1} or in {-1, +1}.
    prior : Prior, optional
        Defaults to the flat prior.
    temperature : float
        K > 0; the likelihood is raised to 1/K.

    Notes
    -----
    ``log p(y_i | x_i, theta)`` is 1-Lipschitz in ``theta . x_i``, so
    ``|l_i| <= ||theta' - theta|| max_j ||x_j|| / K`` (Bardenet et al. 2014, section 4.2);
    ``max_j ||x_j||`` is computed once at construction.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = (X @ [1.0, -1.0, 0.5] > 0).astype(float)
    >>> model = LogisticRegression(X, y)
    >>> l = model.loglik_ratio(np.zeros(3), [0.1, 0.0, 0.0], np.arange(500))
    >>> bool(np.abs(l).max() <= model.loglik_ratio_bound(np.zeros(3), [0.1, 0.0, 0.0]))
    True
    """

    _row_loglik = staticmethod(_logistic_row_loglik)
    _row_ratio = staticmethod(_logistic_row_ratio)
    _row_grad = staticmethod(_logistic_row_grad)
    _row_prefetch = staticmethod(prefetch_data01)

    def __init__(self, X, y, *, prior: Prior | None = None, temperature=1.0):
        self.X, self.y = regression_data(X, y, entry="label")
        self.N = self.X.shape[0]
        labels = set()
        for block in scan_rows(self.y, np.unique):
            labels.update(block.tolist())
        if labels <= {0.0, 1.0}:
            self._plus_minus = False
        elif labels <= {-1.0, 1.0}:
            self._plus_minus = True
        else:
            raise ValueError(f"y must hold labels in {{0, 1}} or {{-1, 1}}, got {sorted(labels)[:5]}")
        super().__init__(prior=prior, temperature=temperature, dim=self.X.shape[1])
        self._max_row_norm = math.sqrt(
            max(scan_rows(self.X, lambda b: float(np.max(np.einsum("ij,ij->i", b, b)))))
        )

    def _kernel_data(self):
        return (self.X, self.y, self._plus_minus, self._inv_temp)

    def _loglik_ratio_bound(self, theta, theta_new):
        return float(np.linalg.norm(theta_new - theta)) * self._max_row_norm * self._inv_temp
