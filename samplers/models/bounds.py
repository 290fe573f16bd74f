"""Collapsible lower bounds on the per-datum likelihoods, for Firefly Monte Carlo.

A bound is any object with

* ``N`` -- the number of data rows;
* ``log_bound(theta, idx)`` -- ``log B_n(theta)`` for the rows ``idx``, with
  ``0 < B_n(theta) <= L_n(theta)`` (``L_n`` the model's likelihood of row n);
* ``log_bound_sum(theta)`` -- ``sum_n log B_n(theta)`` over all N rows, in time
  independent of N (from sufficient statistics computed once);

and, for gradient-based theta-updates, ``grad_log_bound(theta, idx)`` (shape
``(len(idx), d)``) and ``grad_log_bound_sum(theta)``.

The built-in bounds are scaled Gaussians in the linear predictor ``eta_n = theta . x_n``:
``log B_n = (a_n + b_n eta_n - c_n eta_n^2) / K``. Their sum over n is the quadratic form
``(c0 + b . theta - theta' A theta) / K`` with ``c0 = sum a_n``, ``b = sum b_n x_n``,
``A = sum c_n x_n x_n'``, accumulated in one chunked pass over the rows at construction
(memmaps are read block by block). :class:`JaakkolaJordanBound` serves
:class:`~samplers.models.LogisticRegression`, :class:`StudentTBound`
:class:`~samplers.models.RobustRegression`; each can be tight at one fixed point (untuned)
or at a MAP estimate, row by row (:meth:`QuadraticBound.map_tuned`).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Protocol, runtime_checkable

import numpy as np
from scipy import special

from design._lib.checks import check_finite_array, check_positive
from design._lib.jit import jit, row_jit
from design._lib.prefetch import prefetch_ahead, prefetch_row
from ._base import SCAN_CHUNK
from ._glm import glm_kernels
from ._map import map_estimate
from .control_variates import ControlVariates
from .glm import GLM
from .logistic import LogisticRegression, log_sigmoid
from .robust import RobustRegression, t_log_density, t_score

__all__ = ["Bound", "QuadraticBound", "JaakkolaJordanBound", "StudentTBound", "GLMBound"]


@runtime_checkable
class Bound(Protocol):
    """What Firefly Monte Carlo needs from a collapsible lower bound (see the module docstring).

    Examples
    --------
    A user-written bound for a user's model: a constant below every likelihood of a Gaussian
    mean with unit variance whose data lie in [-1, 1] and whose parameter is kept in [-1, 1].

    >>> import numpy as np
    >>> class ConstantBound:
    ...     N = 100
    ...     def log_bound(self, theta, idx):
    ...         return np.full(len(idx), -2.0 - 0.5 * np.log(2 * np.pi))
    ...     def log_bound_sum(self, theta):
    ...         return self.N * (-2.0 - 0.5 * np.log(2 * np.pi))
    >>> isinstance(ConstantBound(), Bound)
    True
    """

    N: int

    def log_bound(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray: ...

    def log_bound_sum(self, theta: np.ndarray) -> float: ...


# --- compiled loops generic in a bound's row kernel ----------------------------------------
#
# A built-in bound writes one inlined kernel of the linear predictor of row i,
#     row_eta(data, i, eta) -> (log L_i, log B_i, d log L_i / d eta, d log B_i / d eta),
# where data[0] is the design matrix X. Unused outputs are dead code after inlining.


@row_jit
def _dot_row(X, i, theta):
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    return eta


@row_jit
def prefetch_xy_coef(data, i):
    """Prefetch row i of X (data[0]), y (data[1]) and the bound's coefficients (data[-1])."""
    prefetch_row(data[0], i)
    prefetch_row(data[1], i)
    prefetch_row(data[-1], i)


@cache
def batch_pairs(row_eta, row_prefetch):
    """Compiled loop: ``ll[t], lb[t] = log L, log B`` of row ``idx[t]`` at ``theta``."""

    @jit
    def kernel(data, idx, theta, ll, lb):
        X = data[0]
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            i = idx[t]
            ll[t], lb[t], _, _ = row_eta(data, i, _dot_row(X, i, theta))

    return kernel


@cache
def batch_pair_grads(row_eta, row_prefetch):
    """Compiled loop: log L, log B and their gradients in theta (rows of g_ll, g_lb)."""

    @jit
    def kernel(data, idx, theta, ll, lb, g_ll, g_lb):
        X = data[0]
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            i = idx[t]
            ll[t], lb[t], dll, dlb = row_eta(data, i, _dot_row(X, i, theta))
            for j in range(X.shape[1]):
                g_ll[t, j] = dll * X[i, j]
                g_lb[t, j] = dlb * X[i, j]

    return kernel


# --- the shared machinery of Gaussian-in-eta bounds ----------------------------------------


def _refuse_store(who, model) -> None:
    """Firefly's compiled steps read rows and their bound coefficients in place: refuse a
    model whose rows are in a store (before any O(N) work)."""
    if getattr(model, "_store_backed", False):
        raise TypeError(f"{who} needs a model whose rows are read in place (numpy arrays or "
                        f"memmaps): Firefly's compiled steps read rows and their bound "
                        f"coefficients directly, and {type(model).__name__} reads "
                        f"{', '.join(model.data_sources())} from a store; write the data to "
                        "a .npy file and build the model from np.load(path, mmap_mode='r')")


class QuadraticBound:
    """Base of the built-in bounds: ``log B_n = (a_n + b_n eta_n - c_n eta_n^2) / K``.

    Subclasses set ``model_type``, the row kernel ``_row_eta`` and implement
    ``_coefficients(y, xi, coef)`` (fill the per-row coefficients the row kernel reads, and
    return ``(a, b, c)`` of a block of rows) and ``_tight_points(X, y, theta)`` (the
    ``xi_n`` that make each bound tight at ``theta``).

    Attributes
    ----------
    model : the model whose likelihoods are bounded
    N, dim : int
    xi : float or ndarray of shape (N,)
        Where each bound touches its likelihood (in the subclass's parametrisation).
    theta_tuned : ndarray or None
        The point the bounds were tuned at (:meth:`map_tuned`), else None.
    """

    model_type: type = object
    _row_eta = None
    _row_prefetch = staticmethod(prefetch_xy_coef)

    def __init__(self, model, xi):
        if not isinstance(model, self.model_type):
            raise TypeError(f"{type(self).__name__} bounds a {self.model_type.__name__}, "
                            f"got {type(model).__name__}")
        _refuse_store(type(self).__name__, model)
        self.model = model
        self.N = model.N
        self.dim = model.dim
        self.theta_tuned = None
        if np.ndim(xi) == 0:
            self.xi = check_positive("xi", xi, allow_zero=True)
        else:
            self.xi = check_finite_array("xi", xi, ndim=1)
            if self.xi.shape[0] != self.N:
                raise ValueError(f"xi must be a scalar or have one value per row ({self.N}), "
                                 f"got length {self.xi.shape[0]}")
            if np.any(self.xi < 0):
                raise ValueError(f"xi must be >= 0, got {self.xi[self.xi < 0][0]!r} "
                                 f"(row {int(np.argmax(self.xi < 0))})")
            self.xi.setflags(write=False)
        self._coef = np.empty((self.N, 2))
        c0, b, A = 0.0, np.zeros(self.dim), np.zeros((self.dim, self.dim))
        X, y = model.X, model.y
        for start in range(0, self.N, SCAN_CHUNK):
            stop = min(start + SCAN_CHUNK, self.N)
            Xb = np.asarray(X[start:stop], dtype=float)
            xi_b = self.xi[start:stop] if np.ndim(self.xi) else np.full(stop - start, self.xi)
            a_b, b_b, c_b = self._coefficients(np.asarray(y[start:stop], dtype=float), xi_b,
                                               self._coef[start:stop])
            c0 += float(np.sum(a_b))
            b += Xb.T @ b_b
            A += Xb.T @ (c_b[:, None] * Xb)
        self._c0, self._b, self._A = c0, b, 0.5 * (A + A.T)
        self._inv_temp = model._inv_temp

    @classmethod
    def map_tuned(cls, model, theta=None, *, rng=None, n_steps=300, batch_size=1000):
        """Bounds tight at a MAP estimate, each row at its own point (Maclaurin & Adams, 4.1).

        Parameters
        ----------
        model : the model to bound
        theta : array_like of shape (d,), optional
            Where to make the bounds tight. By default a MAP estimate from
            :func:`~samplers.models.map_estimate` (``n_steps`` Newton and averaged SA steps on
            ``batch_size`` rows each, drawn with ``rng``).

        Returns
        -------
        The bound, with ``theta_tuned`` set to the tuning point.
        """
        _refuse_store(cls.__name__, model)
        if theta is None:
            theta = map_estimate(model, n_steps=n_steps, batch_size=batch_size, rng=rng)
        theta = model._check_theta("theta", theta)
        xi = np.empty(model.N)
        for start in range(0, model.N, SCAN_CHUNK):
            stop = min(start + SCAN_CHUNK, model.N)
            xi[start:stop] = cls._tight_points(np.asarray(model.X[start:stop], dtype=float),
                                               np.asarray(model.y[start:stop], dtype=float), theta)
        bound = cls(model, xi)
        bound.theta_tuned = theta
        theta.setflags(write=False)
        return bound

    # -- public, checked ---------------------------------------------------------------------

    def log_bound(self, theta, idx) -> np.ndarray:
        """``log B_n(theta)`` (tempered by 1/K) for the rows ``idx``."""
        return self._pairs(self.model._check_theta("theta", theta), self.model._check_idx(idx))[1]

    def grad_log_bound(self, theta, idx) -> np.ndarray:
        """Gradients of ``log B_n`` in theta, shape ``(len(idx), dim)``."""
        return self._pair_grads(self.model._check_theta("theta", theta),
                                self.model._check_idx(idx))[3]

    def log_bound_sum(self, theta) -> float:
        """``sum_n log B_n(theta)`` over all N rows, from the sufficient statistics (O(d^2))."""
        return self._log_bound_sum(self.model._check_theta("theta", theta))

    def grad_log_bound_sum(self, theta) -> np.ndarray:
        """Gradient of :meth:`log_bound_sum` (O(d^2))."""
        return self._grad_log_bound_sum(self.model._check_theta("theta", theta))

    def bright_probability(self, theta, idx) -> np.ndarray:
        """``p(z_n = 1 | theta) = 1 - B_n / L_n`` for the rows ``idx``: how loose the bounds are."""
        ll, lb = self._pairs(self.model._check_theta("theta", theta), self.model._check_idx(idx))
        return -np.expm1(np.minimum(lb - ll, 0.0))

    # -- unchecked, used by the sampler --------------------------------------------------------

    def _kernel_data(self) -> tuple:
        return self.model._kernel_data() + (self._coef,)

    def _pairs(self, theta, idx):
        ll = np.empty(idx.shape[0])
        lb = np.empty(idx.shape[0])
        batch_pairs(self._row_eta, self._row_prefetch)(self._kernel_data(), idx, theta, ll, lb)
        return ll, lb

    def _pair_grads(self, theta, idx):
        n = idx.shape[0]
        ll, lb = np.empty(n), np.empty(n)
        g_ll, g_lb = np.empty((n, self.dim)), np.empty((n, self.dim))
        batch_pair_grads(self._row_eta, self._row_prefetch)(self._kernel_data(), idx, theta,
                                                            ll, lb, g_ll, g_lb)
        return ll, lb, g_ll, g_lb

    def _log_bound_sum(self, theta) -> float:
        return (self._c0 + float(self._b @ theta) - float(theta @ (self._A @ theta))) * self._inv_temp

    def _grad_log_bound_sum(self, theta) -> np.ndarray:
        return (self._b - 2.0 * (self._A @ theta)) * self._inv_temp

    # -- subclass hooks ------------------------------------------------------------------------

    def _coefficients(self, y, xi, coef):
        raise NotImplementedError

    @staticmethod
    def _tight_points(X, y, theta):
        raise NotImplementedError

    def __repr__(self):
        tuning = "MAP-tuned" if self.theta_tuned is not None else (
            f"xi={self.xi:g}" if np.ndim(self.xi) == 0 else "per-row xi")
        return f"{type(self).__name__}({type(self.model).__name__}(N={self.N}), {tuning})"


# --- logistic regression: the Jaakkola-Jordan bound ----------------------------------------
# data = (X, y, plus_minus, 1/K, coef) with coef[i] = (a_i, lambda_i)


@row_jit
def _jj_row_eta(data, i, eta):
    X, y, plus_minus, inv_temp, coef = data
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    t = s * eta
    lam = coef[i, 1]
    ll = log_sigmoid(t) * inv_temp
    lb = (coef[i, 0] + 0.5 * t - lam * t * t) * inv_temp
    dll = s * math.exp(log_sigmoid(-t)) * inv_temp
    dlb = (0.5 * s - 2.0 * lam * eta) * inv_temp
    return ll, lb, dll, dlb


def jj_lambda(xi: np.ndarray) -> np.ndarray:
    """``lambda(xi) = tanh(xi/2) / (4 xi)``, with its limit 1/8 - xi^2/96 near 0."""
    xi = np.asarray(xi, dtype=float)
    out = np.empty_like(xi)
    small = np.abs(xi) < 1e-4
    out[small] = 0.125 - xi[small] ** 2 / 96.0
    big = xi[~small]
    out[~small] = np.tanh(0.5 * big) / (4.0 * big)
    return out


class JaakkolaJordanBound(QuadraticBound):
    """The Jaakkola-Jordan bound on the logistic likelihood, tight at ``t_n = +-xi_n``.

    ``sigmoid(t) >= sigmoid(xi) exp((t - xi)/2 - lambda(xi) (t^2 - xi^2))`` for all t, with
    ``t_n = s_n theta . x_n`` (``s_n = +-1`` the label) and ``lambda(xi) = tanh(xi/2)/(4 xi)``
    (Jaakkola & Jordan 1997; Maclaurin & Adams 2014, section 3.1).

    Parameters
    ----------
    model : LogisticRegression
    xi : float or array of shape (N,)
        Where the bounds touch, ``xi >= 0``; the paper's untuned choice is 1.5 for every row.
        :meth:`map_tuned` sets ``xi_n = |theta_MAP . x_n|``.

    Notes
    -----
    In the linear predictor ``eta``: ``log B_n = a_n + s_n eta / 2 - lambda_n eta^2`` with
    ``a_n = log sigmoid(xi_n) - xi_n / 2 + lambda_n xi_n^2``; so
    ``sum_n log B_n = c0 + theta . (sum_n s_n x_n / 2) - theta' (sum_n lambda_n x_n x_n') theta``.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import LogisticRegression
    >>> from samplers.datasets import logistic_regression
    >>> X, y, theta = logistic_regression(1000, 3, rng=0)
    >>> bound = JaakkolaJordanBound(LogisticRegression(X, y), xi=1.5)
    >>> idx = np.arange(1000)
    >>> bool(np.all(bound.log_bound(theta, idx) <= bound.model.loglik(theta, idx)))
    True
    >>> bool(np.isclose(bound.log_bound(theta, idx).sum(), bound.log_bound_sum(theta)))
    True
    """

    model_type = LogisticRegression
    _row_eta = staticmethod(_jj_row_eta)

    def _coefficients(self, y, xi, coef):
        lam = jj_lambda(xi)
        a = special.log_expit(xi) - 0.5 * xi + lam * xi * xi
        coef[:, 0] = a
        coef[:, 1] = lam
        s = y if self.model._plus_minus else 2.0 * y - 1.0
        return a, 0.5 * s, lam

    @staticmethod
    def _tight_points(X, y, theta):
        return np.abs(X @ theta)


# --- robust regression: a Gaussian bound on the Student-t likelihood -----------------------
# data = (X, y, df, scale, log_norm, 1/K, coef) with coef[i] = (alpha_i, beta_i)


@row_jit
def _t_row_eta(data, i, eta):
    X, y, df, scale, log_norm, inv_temp, coef = data
    r = y[i] - eta
    beta = coef[i, 1]
    ll = t_log_density(r, df, scale, log_norm) * inv_temp
    lb = (coef[i, 0] - beta * r * r) * inv_temp
    dll = t_score(r, df, scale) * inv_temp
    dlb = 2.0 * beta * r * inv_temp
    return ll, lb, dll, dlb


class StudentTBound(QuadraticBound):
    """A Gaussian lower bound on the Student-t likelihood, matched in value and slope at ``+-xi``.

    ``log B_n = alpha_n - beta_n r_n^2`` in the residual ``r_n = y_n - theta . x_n`` with
    ``beta_n = (df + 1) / (2 (df scale^2 + xi_n^2))`` and ``alpha_n`` making it touch the
    log-likelihood at ``r = +-xi_n`` (Maclaurin & Adams 2014, section 4.3).

    Parameters
    ----------
    model : RobustRegression
    xi : float or array of shape (N,)
        Residual at which each bound is tight, ``xi >= 0``. :meth:`map_tuned` sets
        ``xi_n = |y_n - theta_MAP . x_n|``.

    Notes
    -----
    The Student-t log density is ``g(r^2)`` with ``g(u) = c - (df+1)/2 log(1 + u/(df scale^2))``
    convex in ``u``; ``alpha - beta u`` is its tangent at ``u = xi^2``, and a convex function
    lies above its tangents, so ``B_n <= L_n`` for every r. In ``eta``:
    ``log B_n = (alpha_n - beta_n y_n^2) + 2 beta_n y_n eta - beta_n eta^2``.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import RobustRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = X @ [1.0, -1.0] + rng.standard_t(4, 500)
    >>> bound = StudentTBound(RobustRegression(X, y, df=4.0), xi=1.0)
    >>> theta = np.array([0.9, -1.1]); idx = np.arange(500)
    >>> bool(np.all(bound.log_bound(theta, idx) <= bound.model.loglik(theta, idx)))
    True
    """

    model_type = RobustRegression
    _row_eta = staticmethod(_t_row_eta)

    def _coefficients(self, y, xi, coef):
        m = self.model
        beta = 0.5 * (m.df + 1.0) / (m.df * m.scale**2 + xi * xi)
        alpha = (m._log_norm - 0.5 * (m.df + 1.0) * np.log1p(xi * xi / (m.df * m.scale**2))
                 + beta * xi * xi)
        coef[:, 0] = alpha
        coef[:, 1] = beta
        return alpha - beta * y * y, 2.0 * beta * y, beta

    @staticmethod
    def _tight_points(X, y, theta):
        return np.abs(y - X @ theta)


# --- GLM families whose curvature in eta is bounded: a Taylor bound ------------------------
# data = GLM._kernel_data() + (coef,) with coef[i] = (a_i, b_i, c_i), untempered


#: Per-row ``sup_eta |f''|`` (before the weight) of the GLM families and links that have one,
#: as a function of the responses y, the trials n and the model; the others have no
#: quadratic lower bound in eta (their curvature grows without bound).
_CURVATURE = {
    ("binomial", "logit"): lambda y, n, m: 0.25 * n,
    ("binomial", "probit"): lambda y, n, m: n,          # -(log Phi)'' = lambda (x + lambda) < 1
    ("negative_binomial", "log"): lambda y, n, m: 0.25 * (y + m.dispersion),
    ("gaussian", "identity"): lambda y, n, m: np.full_like(y, 1.0 / m.scale**2),
    ("student_t", "identity"): lambda y, n, m: np.full_like(
        y, (m.df + 1.0) / (m.df * m.scale**2)),
}


@cache
def _glm_bound_kernels(link, derivs):
    """``(row_eta, coefficients)`` of :class:`GLMBound` for one family and link (its GLM
    kernels ``link`` / ``derivs``)."""

    @row_jit
    def row_eta(data, i, eta):
        X, y, trials, offset, weights, params, inv_temp, coef = data
        inner = (X, y, trials, offset, weights, params, inv_temp)
        ll = link(inner, i, eta)
        dll, _ = derivs(inner, i, eta)
        a, b, c = coef[i, 0], coef[i, 1], coef[i, 2]
        return ll, (a + b * eta - c * eta * eta) * inv_temp, dll, (b - 2.0 * c * eta) * inv_temp

    @jit
    def coefficients(inner, start, xi, half_curv, coef):
        # f(xi) + f'(xi) (eta - xi) - c (eta - xi)^2 = (f - f' xi - c xi^2) + (f' + 2 c xi) eta
        # - c eta^2, with inner untempered (1/K = 1) and c = w_i sup|f''| / 2
        for t in range(xi.shape[0]):
            i = start + t
            x = xi[t]
            f = link(inner, i, x)
            f1, _ = derivs(inner, i, x)
            c = half_curv[t]
            coef[t, 0] = f - f1 * x - c * x * x
            coef[t, 1] = f1 + 2.0 * c * x
            coef[t, 2] = c

    return row_eta, coefficients


class GLMBound(QuadraticBound):
    r"""A Gaussian lower bound in the linear predictor for the :class:`~samplers.GLM`
    families whose curvature is bounded: ``log B_i = w_i (f(xi_i) + f'(xi_i) (eta_i - xi_i)
    - M_i (eta_i - xi_i)^2 / 2) / K``, tight at ``eta_i = xi_i``.

    ``f`` is the row's log-likelihood in ``eta_i = x_i . theta`` (offset included) and
    ``M_i >= sup_eta |f''|`` the row's curvature bound, so by Taylor's theorem with the
    remainder ``f(eta) >= f(xi) + f'(xi)(eta - xi) - M_i (eta - xi)^2 / 2`` for every eta:

    ======================  ==============================================
    family, link            M_i
    ======================  ==============================================
    binomial, logit         n_i / 4 (Jaakkola-Jordan is tighter: same model class only)
    binomial, probit        n_i (``-(log Phi)'' = lambda (x + lambda) < 1``)
    negative binomial       (y_i + r) / 4 (dispersion r fixed)
    gaussian                1 / scale^2 (the bound is the likelihood)
    Student-t               (df + 1) / (df scale^2)
    ======================  ==============================================

    Poisson, gamma and cloglog have none (``f'' = -e^eta``, ``-k y e^-eta``, ``-(n - y)
    e^eta + ...`` are unbounded), nor a GLM whose family parameter is estimated: a TypeError
    says so. Any Gaussian in eta below ``e^(y eta - e^eta)`` fails for large eta, so no
    collapsible bound of this kind exists for them.

    Parameters
    ----------
    model : GLM
    xi : float or array of shape (N,)
        The linear predictor ``x_i . theta`` (offset excluded) at which each bound is tight.
        :meth:`map_tuned` sets ``xi_i = x_i . theta_MAP``; :meth:`samplers.GLM.firefly_bound`
        tunes at the posterior mode.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GLM
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(1000), rng.normal(size=1000)])
    >>> y = (rng.random(1000) < 0.5 + 0.3 * np.tanh(X[:, 1])).astype(float)
    >>> model = GLM(X, y, link="probit")
    >>> bound = GLMBound(model, xi=X @ [0.0, 0.8])
    >>> theta, idx = np.array([0.1, 0.6]), np.arange(1000)
    >>> bool(np.all(bound.log_bound(theta, idx) <= model.loglik(theta, idx)))
    True
    >>> bool(np.isclose(bound.log_bound(theta, idx).sum(), bound.log_bound_sum(theta)))
    True
    """

    def __init__(self, model, xi):
        curvature = self._curvature(model)
        self.model = model
        self.N, self.dim = model.N, model.dim
        self.theta_tuned = None
        if np.ndim(xi) == 0:
            self.xi = float(check_finite_array("xi", xi, ndim=0))
        else:
            self.xi = check_finite_array("xi", xi, ndim=1)
            if self.xi.shape[0] != self.N:
                raise ValueError(f"xi must be a scalar or have one value per row ({self.N}), "
                                 f"got length {self.xi.shape[0]}")
            self.xi.setflags(write=False)
        coefficients = self._kernels[1]
        inner = model._kernel_data()[:-1] + (1.0,)
        self._coef = np.empty((self.N, 3))
        c0, b, A = 0.0, np.zeros(self.dim), np.zeros((self.dim, self.dim))
        for start in range(0, self.N, SCAN_CHUNK):
            stop = min(start + SCAN_CHUNK, self.N)
            Xb = np.asarray(model.X[start:stop], dtype=float)
            xi_b = (self.xi[start:stop] if np.ndim(self.xi) else np.full(stop - start, self.xi))
            y_b = np.asarray(model.y[start:stop], dtype=float)
            n_b = np.broadcast_to(model._trials if model._trials.shape[0] == 1
                                  else model._trials[start:stop], y_b.shape)
            w_b = np.broadcast_to(model._weights if model._weights.shape[0] == 1
                                  else model._weights[start:stop], y_b.shape)
            half = 0.5 * w_b * curvature(y_b, n_b, model)
            coef = self._coef[start:stop]
            coefficients(inner, start, np.ascontiguousarray(xi_b), half, coef)
            c0 += float(np.sum(coef[:, 0]))
            b += Xb.T @ coef[:, 1]
            A += Xb.T @ (coef[:, 2][:, None] * Xb)
        self._c0, self._b, self._A = c0, b, 0.5 * (A + A.T)
        self._inv_temp = model._inv_temp

    @staticmethod
    def _curvature(model):
        """The model's per-row curvature bound (:data:`_CURVATURE`), or the TypeError."""
        if not isinstance(model, GLM):
            raise TypeError(f"GLMBound bounds a GLM, got {type(model).__name__}")
        family = "binomial" if model.family == "bernoulli" else model.family
        curvature = _CURVATURE.get((family, model.link))
        if curvature is None or model.estimated is not None:
            raise TypeError(
                f"{model!r} has no quadratic lower bound in eta: "
                + ("its family parameter is estimated" if model.estimated is not None else
                   "its curvature f'' is unbounded in eta")
                + "; Firefly needs one (bounded families: bernoulli/binomial with logit or "
                "probit, negative_binomial with a fixed dispersion, gaussian, student_t)")
        return curvature

    @property
    def _kernels(self):
        """``(row_eta, coefficients)`` of the model's family (looked up: the bound pickles)."""
        glm = glm_kernels(self.model)
        return _glm_bound_kernels(glm.link, glm.derivs)

    @property
    def _row_eta(self):
        return self._kernels[0]

    @classmethod
    def map_tuned(cls, model, theta=None, **kwargs):
        """Bounds tight at ``theta``, each row at ``xi_i = x_i . theta``; by default
        ``theta`` is the posterior mode (Newton's method in compiled full passes,
        :class:`~samplers.ControlVariates`)."""
        cls._curvature(model)   # a family without a bound: refused before the mode search
        if theta is None:
            theta = ControlVariates(model).center.theta.copy()
        return super().map_tuned(model, theta, **kwargs)

    @staticmethod
    def _tight_points(X, y, theta):
        return X @ theta
