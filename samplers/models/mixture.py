"""The two-parameter Gaussian mixture of Welling & Teh (2011), as used by Seita et al. (2017)."""

from __future__ import annotations

import math

import numpy as np

from design._lib.checks import check_positive
from design._lib.jit import jit, row_jit
from ..priors import GaussianPrior, Prior
from ._kernels import prefetch_data0
from ._base import BaseModel, check_finite_rows, data_rows

__all__ = ["GaussianMixture"]


@row_jit
def _log_kernel(xi, t1, t2, half_inv_var):
    """log(exp(-(x-t1)^2/2v) + exp(-(x-t1-t2)^2/2v)), the data-dependent part of log p."""
    d1 = xi - t1
    d2 = d1 - t2
    a = -d1 * d1 * half_inv_var
    b = -d2 * d2 * half_inv_var
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))


# data = (x, sigma_x2, 1/K)


@row_jit
def _mix_row_loglik(data, i, theta):
    x, var, inv_temp = data
    const = math.log(0.5) - 0.5 * math.log(2.0 * math.pi * var)
    return (const + _log_kernel(x[i], theta[0], theta[1], 0.5 / var)) * inv_temp


@row_jit
def _mix_row_ratio(data, i, theta, theta_new):
    x, var, inv_temp = data
    h = 0.5 / var
    return (_log_kernel(x[i], theta_new[0], theta_new[1], h)
            - _log_kernel(x[i], theta[0], theta[1], h)) * inv_temp


@row_jit
def _mix_row_grad(data, i, theta, out):
    x, var, inv_temp = data
    d1 = x[i] - theta[0]
    d2 = d1 - theta[1]
    # responsibility of the component centred at theta_1 + theta_2
    r = 1.0 / (1.0 + math.exp((d2 * d2 - d1 * d1) * 0.5 / var))
    out[0] = ((1.0 - r) * d1 + r * d2) / var * inv_temp
    out[1] = r * d2 / var * inv_temp


@jit
def _mixture_range(consts, theta, theta_new):
    """``(0, C)``: each component's log density ratio ``(m' - m)(2 x - m - m') / (2 s^2)`` is
    linear in x, so its largest |value| on ``[xmin, xmax]`` is at an end; the mixture's l_i
    lies between its components' (tempered), ``consts = (xmin, xmax, s^2, 1/K)``."""
    xmin, xmax, sigma_x2, inv_temp = consts
    worst = 0.0
    for c in range(2):
        m = theta[0] + theta[1] if c else theta[0]
        m_new = theta_new[0] + theta_new[1] if c else theta_new[0]
        for e in range(2):
            v = xmax if e else xmin
            value = abs((m_new - m) * (2.0 * v - m - m_new))
            if value > worst:
                worst = value
    return 0.0, worst / (2.0 * sigma_x2) * inv_temp


class GaussianMixture(BaseModel):
    """``x_i ~ 0.5 N(theta_1, sigma_x^2) + 0.5 N(theta_1 + theta_2, sigma_x^2)``.

    The model of Welling & Teh (2011), section 5.1, scaled up by Seita et al. (2017, section
    6.1): N = 10^6 points, temperature K = 10^4, prior N(0, diag(10, 1)), sigma_x^2 = 2.
    The posterior is bimodal, with modes near (0, 1) and (1, -1) for data drawn at (0, 1).

    Parameters
    ----------
    x : array of shape (N,)
    sigma_x2 : float
        Component variance (default 2).
    prior : Prior, optional
        Defaults to ``GaussianPrior(0, [sqrt(10), 1])``, the prior of the papers.
    temperature : float
    executor : optional
        Where the data checks of a store run (NaN scan and checksums): a
        ``dask.distributed.Client``, its ``get_executor()`` or any ``concurrent.futures``
        executor, the errors those of the local checks; None (default) here. Not kept.

    Notes
    -----
    Writing each log-likelihood as a log-sum-exp over the two components gives
    ``min_k g_k(x) <= l(x) <= max_k g_k(x)`` with ``g_k`` the (linear in x) log-ratio of
    component k, so ``max_i |l_i|`` is bounded from the data range alone.

    Examples
    --------
    >>> from samplers.datasets import gaussian_mixture
    >>> x = gaussian_mixture(10_000, rng=0)
    >>> model = GaussianMixture(x, temperature=100.0)
    >>> model.loglik([0.0, 1.0], [0, 1, 2]).shape
    (3,)
    """

    _row_loglik = staticmethod(_mix_row_loglik)
    _row_ratio = staticmethod(_mix_row_ratio)
    _row_grad = staticmethod(_mix_row_grad)
    _row_prefetch = staticmethod(prefetch_data0)

    _row_fields = ("x",)

    def __init__(self, x, sigma_x2=2.0, *, prior: Prior | None = None, temperature=1.0,
                 executor=None):
        self.x = data_rows("x", x, ndim=1)
        check_finite_rows("x", self.x, executor=executor)
        self.N = self.x.shape[0]
        self.sigma_x2 = check_positive("sigma_x2", sigma_x2)
        if prior is None:
            prior = GaussianPrior(0.0, [math.sqrt(10.0), 1.0])
        super().__init__(prior=prior, temperature=temperature, dim=2)

    def _kernel_data(self):
        return (self.x, self.sigma_x2, self._inv_temp)

    _ratio_range = staticmethod(_mixture_range)

    def _range_data(self):
        return (self._xmin, self._xmax, self.sigma_x2, self._inv_temp)
