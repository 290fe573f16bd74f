"""Gaussian models: the mean with known variance, and (mean, log-sd)."""

from __future__ import annotations

import math

import numpy as np

from design._lib.checks import check_positive
from design._lib.jit import jit, row_jit
from ..priors import FlatPrior, GaussianPrior, Prior
from ._kernels import prefetch_data0
from ._base import BaseModel, check_finite_rows, data_rows, scan_rows

__all__ = ["GaussianMean", "Gaussian"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


# --- Gaussian mean, known variance: data = (x, sigma, 1/K) --------------------------------


@row_jit
def _mean_row_loglik(data, i, theta):
    x, sigma, inv_temp = data
    z = (x[i] - theta[0]) / sigma
    return (-math.log(sigma) - _HALF_LOG_2PI - 0.5 * z * z) * inv_temp


@row_jit
def _mean_row_ratio(data, i, theta, theta_new):
    x, sigma, inv_temp = data
    # [(x - mu)^2 - (x - mu')^2] / (2 sigma^2) = (mu' - mu)(x - (mu + mu')/2) / sigma^2
    return (theta_new[0] - theta[0]) * (x[i] - 0.5 * (theta[0] + theta_new[0])) / (
        sigma * sigma
    ) * inv_temp


@row_jit
def _mean_row_grad(data, i, theta, out):
    x, sigma, inv_temp = data
    out[0] = (x[i] - theta[0]) / (sigma * sigma) * inv_temp


@jit
def _mean_range(consts, theta, theta_new):
    """``(0, C)``: ``l(x) = (mu' - mu)(x - (mu + mu') / 2) / sigma^2`` (tempered) is largest
    in |value| at the end of ``[xmin, xmax]`` farthest from the midpoint,
    ``consts = (xmin, xmax, sigma, 1/K)``."""
    xmin, xmax, sigma, inv_temp = consts
    mid = 0.5 * (theta[0] + theta_new[0])
    reach = abs(xmax - mid)
    other = abs(xmin - mid)
    if other > reach:
        reach = other
    return 0.0, abs(theta_new[0] - theta[0]) * reach / (sigma * sigma) * inv_temp


class GaussianMean(BaseModel):
    """Mean ``theta[0]`` of Gaussian data with known standard deviation ``sigma``.

    ``log p(x_i | mu) = -log(sigma) - log(2 pi)/2 - (x_i - mu)^2 / (2 sigma^2)``, tempered by
    1/K. With a Gaussian or flat prior the posterior is Gaussian in closed form
    (:meth:`posterior`), which makes this the reference target of the correctness tests.

    Parameters
    ----------
    x : array of shape (N,)
        Data (float32/float64 arrays, memmaps included, are read in place).
    sigma : float
        Known standard deviation of the data.
    prior : Prior, optional
        Defaults to the flat prior.
    temperature : float
        Temperature K > 0; the likelihood is raised to 1/K.
    executor : optional
        Where the data checks of a store run (NaN scan and checksums): a
        ``dask.distributed.Client``, its ``get_executor()`` or any ``concurrent.futures``
        executor, the errors those of the local checks; None (default) here. Not kept.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(1).normal(0.5, 1.0, 1000)
    >>> model = GaussianMean(x, sigma=1.0, prior=GaussianPrior(0.0, 10.0))
    >>> mean, sd = model.posterior()
    >>> bool(abs(mean - x.mean()) < 1e-2), round(sd, 4)
    (True, 0.0316)
    """

    _row_loglik = staticmethod(_mean_row_loglik)
    _row_ratio = staticmethod(_mean_row_ratio)
    _row_grad = staticmethod(_mean_row_grad)
    _row_prefetch = staticmethod(prefetch_data0)

    _row_fields = ("x",)
    _block_reset = {"_xsum": None}

    def __init__(self, x, sigma=1.0, *, prior: Prior | None = None, temperature=1.0,
                 executor=None):
        self.x = data_rows("x", x, ndim=1)
        check_finite_rows("x", self.x, executor=executor)
        self.N = self.x.shape[0]
        self.sigma = check_positive("sigma", sigma)
        super().__init__(prior=prior, temperature=temperature, dim=1)
        self._xsum = None

    def _kernel_data(self):
        return (self.x, self.sigma, self._inv_temp)

    _ratio_range = staticmethod(_mean_range)

    def _range_data(self):
        return (self._xmin, self._xmax, self.sigma, self._inv_temp)

    def posterior(self) -> tuple[float, float]:
        """Closed-form posterior mean and standard deviation (flat or Gaussian prior).

        Sums the data once (cached), in one chunked pass.
        """
        if self._xsum is None:
            self._xsum = float(sum(scan_rows(self.x, lambda b: np.sum(b, dtype=np.float64))))
        precision = self.N * self._inv_temp / self.sigma**2
        weighted = self._xsum * self._inv_temp / self.sigma**2
        if isinstance(self.prior, GaussianPrior):
            precision += 1.0 / self.prior.sd[0] ** 2
            weighted += self.prior.mean[0] / self.prior.sd[0] ** 2
        elif not isinstance(self.prior, FlatPrior):
            raise TypeError("posterior() is closed-form only for a flat or Gaussian prior")
        return float(weighted / precision), float(precision**-0.5)


# --- Gaussian with unknown mean and log sd: data = (x, 1/K) --------------------------------


@row_jit
def _normal_row_loglik(data, i, theta):
    x, inv_temp = data
    z = (x[i] - theta[0]) * math.exp(-theta[1])
    return (-theta[1] - _HALF_LOG_2PI - 0.5 * z * z) * inv_temp


@row_jit
def _normal_row_ratio(data, i, theta, theta_new):
    x, inv_temp = data
    z = (x[i] - theta[0]) * math.exp(-theta[1])
    z_new = (x[i] - theta_new[0]) * math.exp(-theta_new[1])
    return (theta[1] - theta_new[1] - 0.5 * (z_new * z_new - z * z)) * inv_temp


@row_jit
def _normal_row_grad(data, i, theta, out):
    x, inv_temp = data
    inv_s = math.exp(-theta[1])
    z = (x[i] - theta[0]) * inv_s
    out[0] = z * inv_s * inv_temp
    out[1] = (z * z - 1.0) * inv_temp


@jit
def _normal_range(consts, theta, theta_new):
    """``(0, C)``: ``l(x) = a x^2 + b x + c`` is a quadratic in x, so its largest |value| on
    ``[xmin, xmax]`` is at an end point or at the vertex (tempered),
    ``consts = (xmin, xmax, 1/K)``."""
    xmin, xmax, inv_temp = consts
    mu, log_s = theta[0], theta[1]
    mu_new, log_s_new = theta_new[0], theta_new[1]
    p, p_new = math.exp(-2.0 * log_s), math.exp(-2.0 * log_s_new)
    a = 0.5 * (p - p_new)
    b = mu_new * p_new - mu * p
    c = (log_s - log_s_new) - 0.5 * (mu_new * mu_new * p_new - mu * mu * p)
    worst = abs(a * xmin * xmin + b * xmin + c)
    value = abs(a * xmax * xmax + b * xmax + c)
    if value > worst:
        worst = value
    if a != 0.0:
        vertex = -b / (2.0 * a)
        if xmin < vertex < xmax:
            value = abs(a * vertex * vertex + b * vertex + c)
            if value > worst:
                worst = value
    return 0.0, worst * inv_temp


class Gaussian(BaseModel):
    """Gaussian data with unknown mean and log standard deviation, ``theta = (mu, log s)``.

    ``log p(x_i | mu, s) = -log s - log(2 pi)/2 - (x_i - mu)^2 / (2 s^2)``, tempered by 1/K.
    This is the model of Bardenet et al. (2014), section 4.1 (there with flat priors, the
    default here). ``executor`` as for :class:`GaussianMean`.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(2).normal(0.0, 0.1, 1000)
    >>> model = Gaussian(x)
    >>> model.loglik_ratio([0.0, np.log(0.1)], [0.01, np.log(0.1)], [0, 1]).shape
    (2,)
    """

    _row_loglik = staticmethod(_normal_row_loglik)
    _row_ratio = staticmethod(_normal_row_ratio)
    _row_grad = staticmethod(_normal_row_grad)
    _row_prefetch = staticmethod(prefetch_data0)

    _row_fields = ("x",)

    def __init__(self, x, *, prior: Prior | None = None, temperature=1.0, executor=None):
        self.x = data_rows("x", x, ndim=1)
        check_finite_rows("x", self.x, executor=executor)
        self.N = self.x.shape[0]
        super().__init__(prior=prior, temperature=temperature, dim=2)

    def _kernel_data(self):
        return (self.x, self._inv_temp)

    _ratio_range = staticmethod(_normal_range)

    def _range_data(self):
        return (self._xmin, self._xmax, self._inv_temp)
