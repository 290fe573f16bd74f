"""The built-in models seen as generalised linear models, for control variates.

Each row log-likelihood of these models is a function of one linear predictor,
``l_i(theta) = f_i(eta_i)`` with ``eta_i = x_i . theta`` (``x_i = 1`` for
:class:`~samplers.GaussianMean`), so its gradient is ``f_i'(eta_i) x_i`` and its Hessian
``f_i''(eta_i) x_i x_i^T``. A :class:`GLMKernels` entry gives, for one model class, small
inlined row kernels over the model's own ``_kernel_data()`` tuple (temperature included):

* ``dots3(data, i, u, v, w) -> (x_i . u, x_i . v, x_i . w)``, reading row i once;
* ``link(data, i, eta) -> f_i(eta)``;
* ``derivs(data, i, eta) -> (f_i'(eta), f_i''(eta))``;
* ``scatter(data, i, w, out)``, ``out = w x_i``;

and, in Python, ``design(model, start, stop)`` (rows ``x_i`` as a float64 block, for the
chunked BLAS products of the centring pass), ``max_row_norm(model)`` and the suprema
``m2 = sup |f''|``, ``m3 = sup |f'''|`` over eta and rows (for the residual bound).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from design._lib.jit import row_jit
from .gaussian import GaussianMean
from .linear import LinearRegression
from .logistic import LogisticRegression, log_sigmoid
from .robust import RobustRegression, t_log_density, t_score

__all__ = ["GLMKernels", "glm_kernels"]


class GLMKernels(NamedTuple):
    dots3: Callable
    link: Callable
    derivs: Callable
    scatter: Callable
    design: Callable
    max_row_norm: Callable
    m2: Callable
    m3: Callable


# --- rows x_i of a design matrix X = data[0] ------------------------------------------------


@row_jit
def _x_dots3(data, i, u, v, w):
    X = data[0]
    a = 0.0
    b = 0.0
    c = 0.0
    for j in range(X.shape[1]):
        x = X[i, j]
        a += x * u[j]
        b += x * v[j]
        c += x * w[j]
    return a, b, c


@row_jit
def _x_scatter(data, i, w, out):
    X = data[0]
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


def _x_design(model, start, stop):
    return np.asarray(model.X[start:stop], dtype=np.float64)


def _x_max_row_norm(model):
    return model._max_row_norm


# --- x_i = 1 (GaussianMean) -----------------------------------------------------------------


@row_jit
def _one_dots3(data, i, u, v, w):
    return u[0], v[0], w[0]


@row_jit
def _one_scatter(data, i, w, out):
    out[0] = w


def _one_design(model, start, stop):
    return np.ones((stop - start, 1))


# --- logistic: data = (X, y, plus_minus, 1/K) -----------------------------------------------


@row_jit
def _logistic_link(data, i, eta):
    X, y, plus_minus, inv_temp = data
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    return log_sigmoid(s * eta) * inv_temp


@row_jit
def _logistic_derivs(data, i, eta):
    # f = log sigmoid(s eta): f' = s sigmoid(-s eta), f'' = -sigmoid(eta) sigmoid(-eta).
    X, y, plus_minus, inv_temp = data
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    z = s * eta
    e = math.exp(-abs(z))
    q = e / (1.0 + e) if z >= 0.0 else 1.0 / (1.0 + e)  # sigmoid(-z)
    return s * q * inv_temp, -e / ((1.0 + e) * (1.0 + e)) * inv_temp


# --- linear: data = (X, y, noise_sd, 1/K) ---------------------------------------------------

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@row_jit
def _linear_link(data, i, eta):
    X, y, noise_sd, inv_temp = data
    r = (y[i] - eta) / noise_sd
    return (-math.log(noise_sd) - _HALF_LOG_2PI - 0.5 * r * r) * inv_temp


@row_jit
def _linear_derivs(data, i, eta):
    X, y, noise_sd, inv_temp = data
    p = inv_temp / (noise_sd * noise_sd)
    return (y[i] - eta) * p, -p


# --- Gaussian mean: data = (x, sigma, 1/K) --------------------------------------------------


@row_jit
def _mean_link(data, i, eta):
    x, sigma, inv_temp = data
    z = (x[i] - eta) / sigma
    return (-math.log(sigma) - _HALF_LOG_2PI - 0.5 * z * z) * inv_temp


@row_jit
def _mean_derivs(data, i, eta):
    x, sigma, inv_temp = data
    p = inv_temp / (sigma * sigma)
    return (x[i] - eta) * p, -p


# --- Student-t regression: data = (X, y, df, scale, log_norm, 1/K) --------------------------


@row_jit
def _robust_link(data, i, eta):
    X, y, df, scale, log_norm, inv_temp = data
    return t_log_density(y[i] - eta, df, scale, log_norm) * inv_temp


@row_jit
def _robust_derivs(data, i, eta):
    # f(eta) = g(y - eta): f' = t_score(r), f'' = -(df + 1)(df s^2 - r^2) / (df s^2 + r^2)^2.
    X, y, df, scale, log_norm, inv_temp = data
    r = y[i] - eta
    v = df * scale * scale
    den = v + r * r
    return t_score(r, df, scale) * inv_temp, -(df + 1.0) * (v - r * r) / (den * den) * inv_temp


def _robust_m3(model):
    # With z = r / (scale sqrt(df)), f = -(df+1)/2 log(1 + z^2) and
    # d^3 f / dz^3 = 2 (df + 1) z (3 - z^2) / (1 + z^2)^3, largest in |.| at z = sqrt(2) - 1,
    # where it equals 2 (df + 1) / (4 - 2 sqrt 2)^2.
    c = 2.0 * (model.df + 1.0) / (4.0 - 2.0 * math.sqrt(2.0)) ** 2
    return c / (model.scale * math.sqrt(model.df)) ** 3 * model._inv_temp


_REGISTRY = {
    LogisticRegression: GLMKernels(
        _x_dots3, _logistic_link, _logistic_derivs, _x_scatter, _x_design, _x_max_row_norm,
        m2=lambda m: 0.25 * m._inv_temp,
        m3=lambda m: m._inv_temp / (6.0 * math.sqrt(3.0)),
    ),
    LinearRegression: GLMKernels(
        _x_dots3, _linear_link, _linear_derivs, _x_scatter, _x_design, _x_max_row_norm,
        m2=lambda m: m._inv_temp / m.noise_sd**2, m3=lambda m: 0.0,
    ),
    GaussianMean: GLMKernels(
        _one_dots3, _mean_link, _mean_derivs, _one_scatter, _one_design, lambda m: 1.0,
        m2=lambda m: m._inv_temp / m.sigma**2, m3=lambda m: 0.0,
    ),
    RobustRegression: GLMKernels(
        _x_dots3, _robust_link, _robust_derivs, _x_scatter, _x_design, _x_max_row_norm,
        m2=lambda m: (m.df + 1.0) / (m.df * m.scale**2) * m._inv_temp, m3=_robust_m3,
    ),
}


def glm_kernels(model) -> GLMKernels | None:
    """The GLM kernels of a built-in model (by exact class), or None."""
    return _REGISTRY.get(type(model))
