"""Bayesian linear regression with known noise standard deviation."""

from __future__ import annotations

import math

import numpy as np

from design._lib.checks import check_positive
from design._lib.jit import jit, row_jit
from ..priors import Prior
from ._kernels import dots, prefetch_data01, vector_norm
from ._base import BaseModel, check_finite_rows, regression_data

__all__ = ["LinearRegression"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


# data = (X, y, noise_sd, 1/K)


@row_jit
def _residual(X, y, i, theta):
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    return y[i] - a


@row_jit
def _linear_row_loglik(data, i, theta):
    X, y, noise_sd, inv_temp = data
    r = _residual(X, y, i, theta) / noise_sd
    return (-math.log(noise_sd) - _HALF_LOG_2PI - 0.5 * r * r) * inv_temp


@row_jit
def _linear_row_ratio(data, i, theta, theta_new):
    X, y, noise_sd, inv_temp = data
    a, a_new = dots(X, i, theta, theta_new)
    r = y[i] - a
    r_new = y[i] - a_new
    return (r * r - r_new * r_new) * (0.5 / (noise_sd * noise_sd)) * inv_temp


@row_jit
def _linear_row_grad(data, i, theta, out):
    X, y, noise_sd, inv_temp = data
    w = _residual(X, y, i, theta) / (noise_sd * noise_sd) * inv_temp
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@jit
def _linear_range(consts, theta, theta_new):
    """``(0, C)``: ``l_i = (t'_i - t_i)(2 y_i - t_i - t'_i) / (2 s^2)`` with ``t_i = theta .
    x_i``, so ``|l_i| <= |theta' - theta| R (2 max|y| + |theta' + theta| R) / (2 s^2)``
    (tempered), ``consts = (R, max|y|, s, 1/K)``, R the largest row norm."""
    r, max_abs_y, noise_sd, inv_temp = consts
    d = theta.shape[0]
    diff = np.empty(d)
    total = np.empty(d)
    for j in range(d):
        diff[j] = theta_new[j] - theta[j]
        total[j] = theta_new[j] + theta[j]
    step = vector_norm(diff) * r
    reach = 2.0 * max_abs_y + vector_norm(total) * r
    return 0.0, step * reach / (2.0 * (noise_sd * noise_sd)) * inv_temp


class LinearRegression(BaseModel):
    """Linear regression ``y_i ~ N(theta . x_i, noise_sd^2)`` with known noise sd.

    Parameters
    ----------
    X : array of shape (N, d)
    y : array of shape (N,)
    noise_sd : float
    prior : Prior, optional
        Defaults to the flat prior; a :class:`~samplers.priors.LaplacePrior` gives the
        L1-regularised regression of Korattikara et al. (2014), section 6.4.
    temperature : float
    executor : optional
        Where the data checks of a store run (NaN scan and checksums, of X and y): a
        ``dask.distributed.Client``, its ``get_executor()`` or any ``concurrent.futures``
        executor, the errors those of the local checks; None (default) here. Not kept.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 1)); y = 0.5 * X[:, 0] + rng.normal(0, 0.5, 200)
    >>> model = LinearRegression(X, y, noise_sd=0.5)
    >>> model.grad_loglik([0.5], [0, 1]).shape
    (2, 1)
    """

    _row_loglik = staticmethod(_linear_row_loglik)
    _row_ratio = staticmethod(_linear_row_ratio)
    _row_grad = staticmethod(_linear_row_grad)
    _row_prefetch = staticmethod(prefetch_data01)

    _row_fields = ("X", "y")

    def __init__(self, X, y, noise_sd=1.0, *, prior: Prior | None = None, temperature=1.0,
                 executor=None):
        self.X, self.y = regression_data(X, y, executor=executor)
        self.N = self.X.shape[0]
        check_finite_rows("y", self.y, executor=executor)
        self.noise_sd = check_positive("noise_sd", noise_sd)
        super().__init__(prior=prior, temperature=temperature, dim=self.X.shape[1])

    def _kernel_data(self):
        return (self.X, self.y, self.noise_sd, self._inv_temp)

    _ratio_range = staticmethod(_linear_range)

    def _range_data(self):
        return (self._max_row_norm, self._max_abs_y, self.noise_sd, self._inv_temp)
