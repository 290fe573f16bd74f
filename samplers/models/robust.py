"""Robust linear regression: Student-t noise with known degrees of freedom and scale."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from design._lib.checks import check_positive
from design._lib.jit import row_jit
from ..priors import Prior
from ._base import BaseModel, check_finite_rows, regression_data
from ._kernels import dots, prefetch_data01, step_range
from .linear import _residual

__all__ = ["RobustRegression"]


@row_jit
def t_log_density(r, df, scale, log_norm):
    """log of the Student-t density (df, scale) at the residual ``r``; ``log_norm`` its constant."""
    z = r / scale
    return log_norm - 0.5 * (df + 1.0) * math.log1p(z * z / df)


@row_jit
def t_score(r, df, scale):
    """d/dr of minus the log density above: ``(df + 1) r / (df scale^2 + r^2)``."""
    return (df + 1.0) * r / (df * scale * scale + r * r)


# data = (X, y, df, scale, log_norm, 1/K)


@row_jit
def _robust_row_loglik(data, i, theta):
    X, y, df, scale, log_norm, inv_temp = data
    return t_log_density(_residual(X, y, i, theta), df, scale, log_norm) * inv_temp


@row_jit
def _robust_row_ratio(data, i, theta, theta_new):
    X, y, df, scale, log_norm, inv_temp = data
    a, a_new = dots(X, i, theta, theta_new)
    z = (y[i] - a) / scale
    z_new = (y[i] - a_new) / scale
    return -0.5 * (df + 1.0) * (math.log1p(z_new * z_new / df) - math.log1p(z * z / df)) * inv_temp


@row_jit
def _robust_row_grad(data, i, theta, out):
    X, y, df, scale, log_norm, inv_temp = data
    w = t_score(_residual(X, y, i, theta), df, scale) * inv_temp  # residual falls as theta.x rises
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


class RobustRegression(BaseModel):
    """Linear regression with Student-t noise, ``y_i = theta . x_i + scale * e_i``, ``e_i ~ t_df``.

    The heavy-tailed likelihood of Maclaurin & Adams (2014), section 4.3: outlying rows pull
    the fit far less than under Gaussian noise, and the posterior has no closed form.

    Parameters
    ----------
    X : array of shape (N, d)
        Covariates (add a column of ones for an intercept); read in place, memmaps welcome.
    y : array of shape (N,)
        Responses.
    df : float
        Degrees of freedom of the noise, > 0 (default 4).
    scale : float
        Scale of the noise, > 0.
    prior : Prior, optional
        Defaults to the flat prior; the paper used a :class:`~samplers.priors.LaplacePrior`.
    temperature : float
        K > 0; the likelihood is raised to 1/K.
    executor : optional
        Where the data checks of a store run (NaN scan and checksums, of X and y): a
        ``dask.distributed.Client``, its ``get_executor()`` or any ``concurrent.futures``
        executor, the errors those of the local checks; None (default) here. Not kept.

    Notes
    -----
    ``log p(y_i | x_i, theta) = c - (df + 1)/2 log(1 + r_i^2 / (df scale^2))`` with
    ``r_i = y_i - theta . x_i`` and ``c = log Gamma((df+1)/2) - log Gamma(df/2)
    - log(pi df)/2 - log scale``. Its derivative in ``r`` is at most
    ``(df + 1) / (2 scale sqrt(df))`` in absolute value, so
    ``|l_i| <= (df + 1) / (2 scale sqrt(df)) ||theta' - theta|| max_j ||x_j|| / K``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = X @ [1.0, -0.5] + 0.3 * rng.standard_t(4, 300)
    >>> model = RobustRegression(X, y, df=4.0, scale=0.3)
    >>> from scipy import stats
    >>> bool(np.allclose(model.loglik([1.0, -0.5], [0, 1]),
    ...                  stats.t.logpdf(y[:2] - X[:2] @ [1.0, -0.5], 4.0, scale=0.3)))
    True
    """

    _row_loglik = staticmethod(_robust_row_loglik)
    _row_ratio = staticmethod(_robust_row_ratio)
    _row_grad = staticmethod(_robust_row_grad)
    _row_prefetch = staticmethod(prefetch_data01)

    _row_fields = ("X", "y")

    def __init__(self, X, y, df=4.0, scale=1.0, *, prior: Prior | None = None, temperature=1.0,
                 executor=None):
        self.X, self.y = regression_data(X, y, executor=executor)
        self.N = self.X.shape[0]
        check_finite_rows("y", self.y, executor=executor)
        self.df = check_positive("df", df)
        self.scale = check_positive("scale", scale)
        super().__init__(prior=prior, temperature=temperature, dim=self.X.shape[1])
        self._log_norm = float(special.gammaln(0.5 * (self.df + 1.0)) - special.gammaln(0.5 * self.df)
                               - 0.5 * math.log(math.pi * self.df) - math.log(self.scale))

    def _kernel_data(self):
        return (self.X, self.y, self.df, self.scale, self._log_norm, self._inv_temp)

    _ratio_range = staticmethod(step_range)

    def _range_data(self):
        lipschitz = (self.df + 1.0) / (2.0 * self.scale * math.sqrt(self.df))
        return (lipschitz, self._max_row_norm, self._inv_temp)

    def __repr__(self):
        return (f"RobustRegression(N={self.N}, dim={self.dim}, df={self.df:g}, "
                f"scale={self.scale:g}, temperature={self.temperature:g})")
