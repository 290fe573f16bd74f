"""Per-row bounds on the Taylor remainder of a row's log-likelihood ratio: a model capability.

A built-in model whose row log-likelihood depends on theta through one linear predictor,
``log p(x_i | theta) = f_i(a_i)`` with ``a_i = x_i . theta`` (logistic and linear regression;
the Gaussian mean with ``x_i = 1``), has the order-k Taylor proxy at a centre ``theta_hat``

    proxy_i(theta) = sum_{j <= k} f_i^(j)(a_hat_i) (a_i - a_hat_i)^j / j!,

whose sum over all rows needs only ``g = sum_i f_i'(a_hat_i) x_i`` and
``H = sum_i f_i''(a_hat_i) x_i x_i^T`` (one chunked pass). The residual change of row i
between theta and theta' is

    delta_i = [f_i(a_i') - f_i(a_i)] - [proxy_i(theta') - proxy_i(theta)] = R_k(a_i') - R_k(a_i)

with ``R_k`` the scalar Taylor remainder, ``R_k'(t) = f^(k+1)(xi) (t - a_hat)^k / k!``. So

    |delta_i| <= M_{k+1}/k! |int_{a}^{a'} |t - a_hat|^k dt|
              <= M_{k+1}/k! |a' - a| (|a - a_hat|^k + |a' - a_hat|^k) / 2          (1)
              <= c_i phi_k(theta, theta'),

where ``M_{k+1} = sup_t |f_i^(k+1)(t)|``, (1) is the Hermite-Hadamard inequality for the
convex ``|t - a_hat|^k``, and Cauchy-Schwarz on each ``|x_i . v| <= ||x_i|| ||v||`` gives

    c_i = M_{k+1} ||x_i||^{k+1} / k!,
    phi_k(theta, theta') = ||theta' - theta|| (||theta - theta_hat||^k + ||theta' - theta_hat||^k) / 2.

Order 0 (no proxy) is the Lipschitz bound ``|l_i| <= M_1 ||x_i|| ||theta' - theta||`` used by
TunaMH. This is the form of Cornish et al. (2019), section 3.2 and their eq. (13)
(there with 1-norms and a bound on each remainder separately, ``phi = (||theta - theta_hat||_1^{k+1}
+ ||theta' - theta_hat||_1^{k+1}) / (k+1)!``); ours keeps the factor ``||theta' - theta||``, which
is small for local proposals. The constants (tempered by 1/K):

=================  =====================  ================  ==============================
model              M_1                    M_2               M_3
=================  =====================  ================  ==============================
logistic           1                      1/4               1/(6 sqrt 3) ~ 0.0962
linear, Gaussian   unbounded (refused)    1/sigma^2         0 (the proxy is exact)
=================  =====================  ================  ==============================

For a model to have the capability it defines the row kernels ``_row_predictors(data, i,
theta, theta_new, centre) -> (a, a', a_hat, ||x_i||)`` and ``_row_link(data, i, a) ->
(f_i(a), f_i'(a), f_i''(a))`` (``f_i`` up to a constant), ``_link_derivative_bound(j)``
(``M_j``, ``inf`` if unbounded) and ``_design_block(start, stop)`` (the rows' covariates,
for ``H``).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from .._checks import check_finite_array, check_int
from .._jit import jit, row_jit
from .._prefetch import prefetch_ahead

__all__ = ["TaylorRemainder", "has_remainder_bounds", "remainder_residuals"]

#: Rows per chunk of the one-off passes (memmaps are read in chunks of this many rows).
CHUNK = 1 << 16

@row_jit
def predictors_rows(data, i, theta, theta_new, centre):
    """``(x_i . theta, x_i . theta_new, x_i . centre, ||x_i||)`` with ``X = data[0]`` (one read)."""
    X = data[0]
    a = 0.0
    a_new = 0.0
    a_hat = 0.0
    sq = 0.0
    for j in range(X.shape[1]):
        xij = X[i, j]
        a += xij * theta[j]
        a_new += xij * theta_new[j]
        a_hat += xij * centre[j]
        sq += xij * xij
    return a, a_new, a_hat, math.sqrt(sq)


@row_jit
def predictors_scalar(data, i, theta, theta_new, centre):
    """The predictor is ``theta[0]`` itself (``x_i = 1``), as for a Gaussian mean."""
    return theta[0], theta_new[0], centre[0], 1.0


_HOOKS = ("_row_predictors", "_row_link", "_link_derivative_bound", "_design_block")


def has_remainder_bounds(model) -> bool:
    """Whether ``model`` has the per-row Taylor remainder bounds (the hooks above)."""
    return all(getattr(model, name, None) is not None for name in _HOOKS)


@cache
def _row_pass(row_predictors, row_link, row_prefetch):
    """Compiled chunk pass: ``||x_i||`` and ``(f_i', f_i'')`` at the centre for rows
    ``start .. stop - 1``."""

    @jit
    def kernel(data, start, stop, centre, norms, d1, d2):
        n = stop - start
        idx = np.arange(start, stop)
        for t in range(n):
            prefetch_ahead(row_prefetch, data, idx, t)
            i = idx[t]
            _, _, a_hat, norm = row_predictors(data, i, centre, centre, centre)
            _, g1, g2 = row_link(data, i, a_hat)
            norms[t] = norm
            d1[t] = g1
            d2[t] = g2

    return kernel


@jit
def row_constant(m_over_fact, norm, order):
    """``c_i = M_{k+1} ||x_i||^{k+1} / k!`` (the one formula, used by the pass and the tests)."""
    p = norm
    for _ in range(order):
        p *= norm
    return m_over_fact * p


@jit
def _row_constants(norms, m_over_fact, order, out):
    for t in range(norms.shape[0]):
        out[t] = row_constant(m_over_fact, norms[t], order)


@cache
def remainder_residuals(row_predictors, row_link, row_prefetch):
    """Compiled ``(delta_i, c_i)`` for rows ``idx``: the residual change of each row between
    theta and theta_new, and its bound constant. Used by the tests and the exact tests' loops
    take the same row arithmetic through :func:`residual_row`."""
    row = residual_row(row_predictors, row_link)

    @jit
    def kernel(data, idx, theta, theta_new, centre, order, m_over_fact, delta, c, scale):
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            delta[t], norm, scale[t] = row(data, idx[t], theta, theta_new, centre, order)
            c[t] = row_constant(m_over_fact, norm, order)

    return kernel


@cache
def residual_row(row_predictors, row_link):
    """A compiled ``(delta_i, ||x_i||, size)`` for one row: ``size`` is the magnitude of the
    terms summed into ``delta_i`` (its rounding error is a few ulps of it)."""

    @jit(inline="always")
    def row(data, i, theta, theta_new, centre, order):
        a, a_new, a_hat, norm = row_predictors(data, i, theta, theta_new, centre)
        f, _, _ = row_link(data, i, a)
        f_new, _, _ = row_link(data, i, a_new)
        delta = f_new - f
        size = abs(f) + abs(f_new)
        if order >= 1:
            _, g1, g2 = row_link(data, i, a_hat)
            lin = g1 * (a_new - a)
            delta -= lin
            size += abs(lin)
            if order == 2:
                quad = 0.5 * g2 * ((a_new - a_hat) ** 2 - (a - a_hat) ** 2)
                delta -= quad
                size += abs(quad)
        return delta, norm, size

    return row


class TaylorRemainder:
    """The order-k Taylor proxy of a model at a centre and per-row bounds on its remainder.

    Built in one chunked pass over the rows (memmaps work): the bound constants ``c_i``
    (kept, for alias sampling), ``c_sum = sum_i c_i``, ``c_max``, and for ``order >= 1`` the
    proxy's sums ``g`` (gradient) and ``H`` (Hessian) at the centre. See the module docstring
    for the maths.

    Parameters
    ----------
    model : BaseModel
        A built-in model with the capability (:func:`has_remainder_bounds`).
    order : {0, 1, 2}
        Taylor order; 0 is no proxy (the Lipschitz bound of TunaMH).
    centre : array of shape (d,)
        Expansion point (ideally near the posterior mode; exactness never depends on it).

    Attributes
    ----------
    c : ndarray of shape (N,)
        Per-row constants ``c_i``.
    c_sum, c_max : float
    g : ndarray of shape (d,)
    H : ndarray of shape (d, d)
        Sums of the rows' gradients and Hessians at the centre (zeros below the order).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 3)); y = (X @ [1.0, -1.0, 0.5] > 0).astype(float)
    >>> rem = TaylorRemainder(LogisticRegression(X, y), 2, np.array([1.0, -1.0, 0.5]))
    >>> theta, theta_new = np.array([1.02, -1.0, 0.5]), np.array([1.0, -0.97, 0.51])
    >>> delta, c = rem.residuals(theta, theta_new, np.arange(1000))
    >>> bool(np.all(np.abs(delta) <= c * rem.phi(theta, theta_new)))
    True
    """

    def __init__(self, model, order: int, centre):
        if not has_remainder_bounds(model):
            raise TypeError(
                f"{type(model).__name__} has no per-row Taylor remainder bounds (needs "
                f"{', '.join(_HOOKS)}); built-in: LogisticRegression, LinearRegression, "
                "GaussianMean"
            )
        self.order = check_int("order", order, low=0, high=2)
        self.centre = check_finite_array("centre", centre, ndim=1)
        if self.centre.shape[0] != model.dim:
            raise ValueError(f"centre must have {model.dim} element(s), got {self.centre.shape[0]}")
        self.centre.setflags(write=False)
        M = float(model._link_derivative_bound(self.order + 1))
        if not math.isfinite(M):
            raise ValueError(
                f"order={self.order} needs a bounded derivative {self.order + 1} of the row "
                f"log-likelihood in the linear predictor; {type(model).__name__} has none "
                f"(use order={self.order + 1})"
            )
        self.model = model
        self.N = model.N
        self.m_over_fact = M / math.factorial(self.order)
        d = model.dim
        data = model._kernel_data()
        rows = _row_pass(model._row_predictors, model._row_link, model._row_prefetch)
        self.c = np.empty(self.N)
        g = np.zeros(d)
        H = np.zeros((d, d))
        for start in range(0, self.N, CHUNK):
            stop = min(start + CHUNK, self.N)
            n = stop - start
            norms, d1, d2 = np.empty(n), np.empty(n), np.empty(n)
            rows(data, start, stop, self.centre, norms, d1, d2)
            _row_constants(norms, self.m_over_fact, self.order, self.c[start:stop])
            if self.order >= 1:
                Xb = np.asarray(model._design_block(start, stop), dtype=float)
                g += d1 @ Xb
                if self.order == 2:
                    H += (Xb * d2[:, None]).T @ Xb
        self.g, self.H = g, 0.5 * (H + H.T)
        self.c_sum = float(self.c.sum())
        self.c_max = float(self.c.max())
        self._residuals = remainder_residuals(model._row_predictors, model._row_link,
                                              model._row_prefetch)

    def phi(self, theta, theta_new) -> float:
        """``phi_k(theta, theta') = ||theta' - theta|| (||theta - c||^k + ||theta' - c||^k) / 2``."""
        step = math.sqrt(float(np.dot(theta_new - theta, theta_new - theta)))
        if self.order == 0:
            return step
        r = math.sqrt(float(np.dot(theta - self.centre, theta - self.centre)))
        r_new = math.sqrt(float(np.dot(theta_new - self.centre, theta_new - self.centre)))
        return step * 0.5 * (r**self.order + r_new**self.order)

    def proxy(self, theta, theta_new) -> float:
        """``sum_i proxy_i(theta') - proxy_i(theta)`` over all N rows, in O(d^2)."""
        if self.order == 0:
            return 0.0
        out = float(self.g @ (theta_new - theta))
        if self.order == 2:
            u, v = theta_new - self.centre, theta - self.centre
            out += 0.5 * float(u @ self.H @ u - v @ self.H @ v)
        return out

    def residuals(self, theta, theta_new, idx) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_i, c_i)`` for rows ``idx`` (compiled; an O(len(idx)) read)."""
        idx = np.asarray(idx, dtype=np.intp)
        delta, c, scale = np.empty(idx.shape[0]), np.empty(idx.shape[0]), np.empty(idx.shape[0])
        self._residuals(self.model._kernel_data(), idx, np.asarray(theta, float),
                        np.asarray(theta_new, float), self.centre, self.order,
                        self.m_over_fact, delta, c, scale)
        return delta, c
