"""Control variates: a model wrapper whose rows are Taylor residuals plus the proxy's mean.

See :class:`ControlVariates`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import cache

import numpy as np

from design._lib.checks import check_finite_array, check_int
from design._lib.distribute import as_cluster, map_ranges, recipe_of
from design._lib.jit import jit, row_jit
from design._lib.passes import n_chunks, run_chunks
from ..priors import FlatPrior, GaussianPrior, LaplacePrior
from ._base import SCAN_CHUNK, BaseModel, check_data_files, loglik_ratio
from ._glm import glm_kernels, glm_sums
from .compiled import BlockModel, same_data
from .row_model import row_scratch
from ._kernels import batch_grad, batch_loglik, batch_ratio

__all__ = ["ControlVariates", "TaylorCenter", "TaylorSums"]

#: Above this many rows a user's model must provide the derivatives itself: the finite-
#: difference fallback costs 2 d extra likelihood passes per row and step and its error grows
#: with the number of rows summed.
FD_MAX_ROWS = 10**6
#: Newton steps (each one chunked pass) before the mode search gives up.
MAX_NEWTON = 60
#: Newton decrement ``g' (-H)^-1 g`` (twice the predicted gain) at which the mode is found.
DECREMENT_TOL = 1e-12
#: Relative resolution of the log posterior's value (a sum of N rounded terms): a predicted
#: gain below ``VALUE_RESOLUTION * (|value| + 1)`` is lost in the value's rounding, so there a
#: line search cannot decide and the Newton iteration runs on the decrement alone.
VALUE_RESOLUTION = 1e-13
#: A found mode whose curvature ``trace(-H_post)`` is below this fraction of the largest a GLM
#: allows, and where the log posterior at ``2 theta`` is not lower, is a likelihood without a
#: maximum (the iterates ran off to infinity); see ``ControlVariates._newton``.
SATURATION = 1e-9


# --- compiled row kernels, generic in the GLM kernels of the wrapped model -------------------


@row_jit
def _no_step(center, theta, theta_new):
    """The per-step constants of row kernels that have none."""
    return 0.0


@cache
def _cv_kernels(dots3, link, derivs, scatter, inner_prefetch, ratio=None):
    """Row kernels of the wrapper over ``data = (inner, center, order2, shift, step)``, and
    the function ``step(center, theta, theta_new)`` that gives the last entry.

    ``inner`` is the wrapped model's kernel data, ``center`` theta*, ``order2`` 1.0 for a
    second-order proxy (0.0 for first order), ``shift`` the per-call constant (P/N for
    ratios, the proxy's total at theta over N for log-likelihoods) and ``step`` the per-step
    constants of the ratio (functions of theta, theta' and the centre alone, computed once
    per decision; here none). ``ratio(inner, i, eta, eta_new)``, the GLM's difference of two
    links (:class:`~samplers.models._glm.GLMKernels`), or None: ``link(inner, i, eta_new) -
    link(inner, i, eta)``.
    """
    if ratio is None:
        @row_jit
        def ratio(inner, i, a, a_new):
            return link(inner, i, a_new) - link(inner, i, a)

    @row_jit
    def row_ratio(data, i, theta, theta_new):
        inner, center, order2, shift, _ = data
        a, a_new, a_c = dots3(inner, i, theta, theta_new, center)
        f1, f2 = derivs(inner, i, a_c)
        d = a_new - a
        proxy = d * (f1 + 0.5 * order2 * f2 * (a_new + a - 2.0 * a_c))
        return ratio(inner, i, a, a_new) - proxy + shift

    @row_jit
    def row_loglik(data, i, theta):
        inner, center, order2, shift, _ = data
        a, _, a_c = dots3(inner, i, theta, theta, center)
        f1, f2 = derivs(inner, i, a_c)
        s = a - a_c
        return (link(inner, i, a) - link(inner, i, a_c)) - s * (f1 + 0.5 * order2 * f2 * s) + shift

    @row_jit
    def row_grad(data, i, theta, out):
        inner, center, order2, shift, _ = data
        a, _, a_c = dots3(inner, i, theta, theta, center)
        g1, _ = derivs(inner, i, a)
        f1, f2 = derivs(inner, i, a_c)
        scatter(inner, i, g1 - f1 - order2 * f2 * (a - a_c), out)

    @row_jit
    def row_prefetch(data, i):
        inner_prefetch(data[0], i)

    return row_ratio, row_loglik, row_grad, row_prefetch, _no_step


#: Rows per block of :meth:`ControlVariates.loglik_many`'s kernel, the blocks run on every
#: core (:func:`design._lib.passes.run_chunks`).
_MANY_ROWS = 4096


@cache
def _cv_loglik_many(link, derivs, scatter):
    """Kernel of :meth:`ControlVariates.loglik_many` over ``data = (inner, center, order2, _,
    _)``:
    ``out[r, k]`` = the wrapper's row log-likelihood of row ``idx[r]`` at vector ``k`` (the
    columns of ``thetas_t``, shape (d, k)) with per-vector shift ``shifts[k]``.

    What depends on the row alone (``x_i``, ``x_i . theta*``, the link and its derivatives
    there) is computed once per row instead of once per vector, and the k predictors in an
    inner loop over the vectors (contiguous, vectorised); each predictor is summed over j in
    order, as ``dots3`` does, and the residual has ``row_loglik``'s arithmetic, so every entry
    equals :meth:`ControlVariates.loglik` bit for bit.
    """

    @jit
    def kernel(data, idx, thetas_t, shifts, out):
        inner, center, order2 = data[0], data[1], data[2]
        d, K = thetas_t.shape
        x = np.empty(d)
        for r in range(idx.shape[0]):
            i = idx[r]
            scatter(inner, i, 1.0, x)
            a_c = 0.0
            for j in range(d):
                a_c += x[j] * center[j]
            f1, f2 = derivs(inner, i, a_c)
            l_c = link(inner, i, a_c)
            o = out[r]
            for k in range(K):
                o[k] = 0.0
            for j in range(d):
                xj = x[j]
                t = thetas_t[j]
                for k in range(K):
                    o[k] += xj * t[k]
            for k in range(K):
                a = o[k]
                s = a - a_c
                o[k] = (link(inner, i, a) - l_c) - s * (f1 + 0.5 * order2 * f2 * s) + shifts[k]

    return kernel


@cache
def _cv_row_kernels(loglik, grad, hess, hvp, inner_prefetch):
    """Row kernels of the wrapper over ``data = (inner, center, order2, shift, step)`` (the
    layout of :func:`_cv_kernels`; no per-step constants) for a model that is not a GLM but has compiled row kernels
    ``loglik``, ``grad`` and ``hess`` or ``hvp`` (:class:`~samplers.models.RowModel`): the
    row's gradient ``g_i`` at the center and, at order 2, its Hessian ``H_i`` times a vector
    (``hvp``: O(d) per row for a model that offers it; else ``hess``, O(d^2)), into
    :func:`~samplers.models.row_model.row_scratch` (stack memory, private to the thread: the
    kernels also run on several threads in full passes; no allocation per row); the proxy's
    difference is ``Delta . (g_i + H_i w / 2)``, ``w = theta + theta' - 2 theta*`` (for the
    log-likelihood: from the center to theta, ``u . (g_i + H_i u / 2)``)."""

    def kernel(func):
        return jit(func, inline="always", cache=False)   # closes over a user's kernels

    if hvp is None:
        @kernel
        def times_hessian(inner, i, center, v, out):
            d = center.shape[0]
            H = row_scratch(d * d).reshape((d, d))   # on the stack for d <= 27
            hess(inner, i, center, H)
            for j in range(d):
                s = 0.0
                for k in range(d):
                    s += H[j, k] * v[k]
                out[j] = s
    else:
        times_hessian = hvp

    @kernel
    def proxy_difference(inner, i, center, order2, theta, theta_new):
        """``hat l_i(theta') - hat l_i(theta)``."""
        d = center.shape[0]
        buf = row_scratch(3 * d)
        g = buf[:d]
        grad(inner, i, center, g)
        if order2 != 0.0:
            w = buf[d:2 * d]
            hw = buf[2 * d:]
            for k in range(d):
                w[k] = theta[k] + theta_new[k] - 2.0 * center[k]
            times_hessian(inner, i, center, w, hw)
            for j in range(d):
                g[j] += 0.5 * hw[j]
        proxy = 0.0
        for j in range(d):
            proxy += (theta_new[j] - theta[j]) * g[j]
        return proxy

    @kernel
    def row_ratio(data, i, theta, theta_new):
        inner, center, order2, shift, _ = data
        proxy = proxy_difference(inner, i, center, order2, theta, theta_new)
        return (loglik(inner, i, theta_new) - loglik(inner, i, theta)) - proxy + shift

    @kernel
    def row_loglik(data, i, theta):
        inner, center, order2, shift, _ = data
        proxy = proxy_difference(inner, i, center, order2, center, theta)
        return (loglik(inner, i, theta) - loglik(inner, i, center)) - proxy + shift

    @kernel
    def row_grad(data, i, theta, out):
        inner, center, order2, shift, _ = data
        d = center.shape[0]
        buf = row_scratch(3 * d)
        g = buf[:d]
        grad(inner, i, theta, out)
        grad(inner, i, center, g)
        for j in range(d):
            out[j] -= g[j]
        if order2 != 0.0:
            u = buf[d:2 * d]
            hu = buf[2 * d:]
            for k in range(d):
                u[k] = theta[k] - center[k]
            times_hessian(inner, i, center, u, hu)
            for j in range(d):
                out[j] -= hu[j]

    @kernel
    def row_prefetch(data, i):
        inner_prefetch(data[0], i)

    return row_ratio, row_loglik, row_grad, row_prefetch, _no_step


@cache
def _cv_kernels_nuisance(dots3, link, derivs, scatter, inner_prefetch, ratio=None,
                         family_step=None, ratio_at=None, derivs_at=None):
    """:func:`_cv_kernels` for a GLM whose rows depend on theta through ``eta_i = x_i .
    theta[:d]`` and ``s = theta[d]`` (an estimated family parameter): the proxy is the Taylor
    polynomial in ``(eta, s)``, ``q(e, t) = e (f_e + o (f_ee e / 2 + f_es t)) + t (f_s + o
    f_ss t / 2)`` with ``e = eta - eta*``, ``t = s - s*``, ``o = order2`` and the derivatives
    ``derivs(inner, i, eta*, s*)``; ``ratio(inner, i, eta, eta_new, s, s_new)`` or None (the
    difference of two links). With the family's per-step constants (``family_step(s, s_new,
    s*)``, ``ratio_at`` and ``derivs_at`` of :class:`~samplers.models._glm.GLMKernels`) the
    ratio reads them from the data's ``step`` entry, computed once per decision: the same
    bits, without the work on theta alone in every row."""
    if family_step is None:
        step = _no_step

        @row_jit
        def ratio_at(inner, i, a, a_new, s, s_new, c):
            return ratio(inner, i, a, a_new, s, s_new)

        @row_jit
        def derivs_at(inner, i, a_c, s_c, c):
            return derivs(inner, i, a_c, s_c)
    else:
        @row_jit
        def step(center, theta, theta_new):
            k = center.shape[0] - 1
            return family_step(theta[k], theta_new[k], center[k])

    if ratio is None:
        @row_jit
        def ratio(inner, i, a, a_new, s, s_new):
            return link(inner, i, a_new, s_new) - link(inner, i, a, s)

    @row_jit
    def proxy(f_e, f_s, f_ee, f_es, f_ss, order2, e, t):
        return e * (f_e + order2 * (0.5 * f_ee * e + f_es * t)) + t * (f_s + 0.5 * order2 * f_ss * t)

    @row_jit
    def row_ratio(data, i, theta, theta_new):
        inner, center, order2, shift, c = data
        k = center.shape[0] - 1
        a, a_new, a_c = dots3(inner, i, theta, theta_new, center)
        s, s_new, s_c = theta[k], theta_new[k], center[k]
        f_e, f_s, f_ee, f_es, f_ss = derivs_at(inner, i, a_c, s_c, c)
        q_new = proxy(f_e, f_s, f_ee, f_es, f_ss, order2, a_new - a_c, s_new - s_c)
        q = proxy(f_e, f_s, f_ee, f_es, f_ss, order2, a - a_c, s - s_c)
        return ratio_at(inner, i, a, a_new, s, s_new, c) - (q_new - q) + shift

    @row_jit
    def row_loglik(data, i, theta):
        inner, center, order2, shift, _ = data
        k = center.shape[0] - 1
        a, _, a_c = dots3(inner, i, theta, theta, center)
        f_e, f_s, f_ee, f_es, f_ss = derivs(inner, i, a_c, center[k])
        q = proxy(f_e, f_s, f_ee, f_es, f_ss, order2, a - a_c, theta[k] - center[k])
        return (link(inner, i, a, theta[k]) - link(inner, i, a_c, center[k])) - q + shift

    @row_jit
    def row_grad(data, i, theta, out):
        inner, center, order2, shift, _ = data
        k = center.shape[0] - 1
        a, _, a_c = dots3(inner, i, theta, theta, center)
        e, t = a - a_c, theta[k] - center[k]
        g_e, g_s, _, _, _ = derivs(inner, i, a, theta[k])
        f_e, f_s, f_ee, f_es, f_ss = derivs(inner, i, a_c, center[k])
        scatter(inner, i, g_e - f_e - order2 * (f_ee * e + f_es * t), out)
        out[k] = g_s - f_s - order2 * (f_es * e + f_ss * t)

    @row_jit
    def row_prefetch(data, i):
        inner_prefetch(data[0], i)

    return row_ratio, row_loglik, row_grad, row_prefetch, step


# --- the proxy's total and gradient, compiled (the block loop of samplers._blocks) -----------


@jit
def proxy_total_kernel(g, H, center, order2, theta, theta_new):
    """:meth:`ControlVariates.proxy_total` bit for bit: ``Delta . g`` at order 1 (``order2``
    0.0), ``Delta . (g + H (theta + theta' - 2 theta*) / 2)`` at order 2, the same products
    (BLAS ``dgemv`` and ``ddot``, as NumPy's ``@``) in the same order."""
    d = theta.shape[0]
    delta = np.empty(d)
    for j in range(d):
        delta[j] = theta_new[j] - theta[j]
    if order2 == 0.0:
        return np.dot(delta, g)
    v = np.empty(d)
    for j in range(d):
        v[j] = theta[j] + theta_new[j] - 2.0 * center[j]
    Hv = np.dot(H, v)
    w = np.empty(d)
    for j in range(d):
        w[j] = g[j] + 0.5 * Hv[j]
    return np.dot(delta, w)


@jit
def proxy_grad_kernel(g, H, center, order2, theta, N, out):
    """``out = ControlVariates._proxy_grad(theta) / N`` bit for bit: ``(g + H u) / N``
    (``g / N`` at order 1), the per-row shift of the wrapper's gradients."""
    d = theta.shape[0]
    if order2 == 0.0:
        for j in range(d):
            out[j] = g[j] / N
        return
    u = np.empty(d)
    for j in range(d):
        u[j] = theta[j] - center[j]
    Hu = np.dot(H, u)
    for j in range(d):
        out[j] = (g[j] + Hu[j]) / N


@jit
def cv_ratio_range(consts, theta, theta_new):
    """:meth:`ControlVariates._loglik_ratio_range`: ``(P / N, B)``, the proxy's total
    (:func:`proxy_total_kernel`) and the residual bound ``B`` (order 2: ``M R^3 |theta' -
    theta| (du^2 + du dv + dv^2) / 6``; order 1: ``M R^2 |theta' - theta| (du + dv) / 2``,
    ``du``, ``dv`` the distances of theta and theta' from the centre), ``consts = (g, H,
    center, order2, N, M, R)``. Called by the Python method and by the compiled chain
    loop, so both get the same bits."""
    g, H, center, order2, N, M, R = consts
    d = theta.shape[0]
    u = np.empty(d)
    v = np.empty(d)
    step = np.empty(d)
    for j in range(d):
        u[j] = theta[j] - center[j]
        v[j] = theta_new[j] - center[j]
        step[j] = theta_new[j] - theta[j]
    du = math.sqrt(np.dot(u, u))   # np.linalg.norm: sqrt of BLAS ddot
    dv = math.sqrt(np.dot(v, v))
    norm = math.sqrt(np.dot(step, step))
    if order2 != 0.0:
        bound = M / 6.0 * (R * R * R) * norm * (du * du + du * dv + dv * dv)
    else:
        bound = 0.5 * M * (R * R) * norm * (du + dv)
    return proxy_total_kernel(g, H, center, order2, theta, theta_new) / N, bound


@cache
def cv_decision_data(step):
    """The wrapper's ``_decision_data(theta, theta_new)`` from its block data ``(rows, g, H,
    N)`` (``rows`` the row kernels' tuple with shift 0), compiled: the rows' tuple with shift
    P / N and the per-step constants ``step(center, theta, theta_new)``."""

    @jit
    def decision_data(data, theta, theta_new):
        rows, g, H, N = data
        inner, center, order2 = rows[0], rows[1], rows[2]
        return (inner, center, order2,
                proxy_total_kernel(g, H, center, order2, theta, theta_new) / N,
                step(center, theta, theta_new))

    return decision_data


@cache
def cv_batch_grad(row_grad, row_prefetch):
    """The wrapper's ``_grad_loglik`` over its block data ``(rows, g, H, N)`` (memoised per
    kernel): the residuals' row gradients plus ``(g + H u) / N`` on every row."""
    grads = batch_grad(row_grad, row_prefetch)

    @jit
    def kernel(data, idx, theta, out):
        rows, g, H, N = data
        grads(rows, idx, theta, out)
        shift = np.empty(theta.shape[0])
        proxy_grad_kernel(g, H, rows[1], rows[2], theta, N, shift)
        for t in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[t, j] += shift[j]

    return kernel


# --- the center ----------------------------------------------------------------------------

#: Smallest eigenvalue of the posterior Hessian scaled to a unit diagonal that is not a flat
#: direction: exactly collinear columns leave about 1e-16, correlated covariates of
#: condition number 1e6 about 1e-6.
SINGULAR_RCOND = 1e-12


@dataclass(frozen=True)
class TaylorCenter:
    """The point the proxies are expanded at, and the sums the proxy's total needs.

    Attributes
    ----------
    theta : ndarray of shape (d,)
        The center theta*.
    loglik : float
        ``sum_i l_i(theta*)`` over all N rows.
    grad : ndarray of shape (d,)
        ``g = sum_i grad l_i(theta*)``.
    hess : ndarray of shape (d, d)
        ``H = sum_i hess l_i(theta*)``.
    posterior_grad : ndarray of shape (d,)
        ``g + grad log p0(theta*)``: zero at the posterior mode.
    posterior_hess : ndarray of shape (d, d)
        ``H + hess log p0(theta*)``; minus its inverse is the Laplace covariance.
    offset : float
        ``sqrt(grad' (-H_post)^-1 grad)`` with the posterior gradient and Hessian: how far
        the center is from the mode in posterior standard deviations (in the Laplace
        approximation). About 0 at the mode; beyond about 1 the residuals are no longer small
        and the design / CLT check should say so. NaN if ``-H_post`` is not positive definite.
    method : str
        ``"newton"``, ``"lbfgs"`` (the mode was searched) or ``"given"``.
    n_passes : int
        Chunked passes over the N rows that finding the center and its sums took.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianMean
    >>> x = np.random.default_rng(0).normal(2.0, 1.0, 1000)
    >>> c = ControlVariates(GaussianMean(x)).center
    >>> bool(np.isclose(c.theta[0], x.mean())), c.method, float(c.hess[0, 0])
    (True, 'newton', -1000.0)
    """

    theta: np.ndarray
    loglik: float
    grad: np.ndarray
    hess: np.ndarray
    posterior_grad: np.ndarray
    posterior_hess: np.ndarray
    offset: float
    method: str
    n_passes: int


@dataclass(frozen=True)
class TaylorSums:
    """The sums over all N rows at a center that :meth:`ControlVariates.from_sums` takes.

    Attributes
    ----------
    N : int
        Rows summed.
    loglik : float
        ``sum_i l_i(theta*)`` (tempered as the model is).
    grad : ndarray of shape (d,)
        ``sum_i grad l_i(theta*)``.
    hess : ndarray of shape (d, d)
        ``sum_i hess l_i(theta*)`` (symmetric).
    max_row_norm : float or None
        ``max_i ||x_i||`` (the residual bound's constant), if known.

    Examples
    --------
    >>> import numpy as np
    >>> TaylorSums.of({"N": 3, "loglik": -2.0, "grad": [0.0], "hess": [[-3.0]]}, 3, 1).hess
    array([[-3.]])
    """

    N: int
    loglik: float
    grad: np.ndarray
    hess: np.ndarray
    max_row_norm: float | None = None

    @classmethod
    def of(cls, sums, N, d) -> "TaylorSums":
        """Check ``sums`` (a TaylorSums or a mapping with its fields) against N and d."""
        if isinstance(sums, TaylorSums):
            sums = sums.__dict__
        if not hasattr(sums, "keys"):
            raise TypeError(f"sums must be a TaylorSums or a mapping with N, loglik, grad, hess "
                            f"(and optionally max_row_norm), got {type(sums).__name__}")
        missing = [k for k in ("N", "loglik", "grad", "hess") if k not in sums]
        if missing:
            raise ValueError(f"sums must have N, loglik, grad and hess; missing {missing}")
        n = check_int("sums['N']", sums["N"], low=1)
        if n != N:
            raise ValueError(f"sums['N'] must be the model's N = {N} (the sums are over all its "
                             f"rows), got {n}")
        loglik = float(check_finite_array("sums['loglik']", sums["loglik"], ndim=0))
        grad = check_finite_array("sums['grad']", sums["grad"], ndim=1).astype(float)
        hess = check_finite_array("sums['hess']", sums["hess"], ndim=2).astype(float)
        if grad.shape != (d,) or hess.shape != (d, d):
            raise ValueError(f"sums['grad'] and sums['hess'] must have shapes ({d},) and "
                             f"({d}, {d}), got {grad.shape} and {hess.shape}")
        if not np.allclose(hess, hess.T, rtol=1e-10, atol=1e-12 * float(np.abs(hess).max())):
            raise ValueError("sums['hess'] must be symmetric (a sum of Hessians)")
        norm = sums.get("max_row_norm")
        if norm is not None:
            norm = float(norm)
            if not (math.isfinite(norm) and norm >= 0.0):
                raise ValueError(f"sums['max_row_norm'] must be a finite number >= 0, got {norm}")
        return cls(n, loglik, grad, 0.5 * (hess + hess.T), norm)


def _block_row_norm(block):
    return float(glm_kernels(block).max_row_norm(block))


def _row_norm_on(cluster, model) -> float:
    """``max_i ||x_i||`` of a built-in model's rows, by ranges on ``cluster``."""
    out = [0.0]

    def merge(start, stop, norm):
        out[0] = max(out[0], norm)

    map_ranges(cluster, recipe_of(model), _block_row_norm, (), merge, N=model.N,
               chunk=SCAN_CHUNK, progress=False, desc="row norms")
    return out[0]


def _prior_hessian(logprior, grad_logprior, theta, prior=None) -> np.ndarray:
    """Hessian of the log prior: closed form for the built-in priors (a Laplace prior's is 0
    away from its kink), else central differences of the gradient (or of the log prior)."""
    d = theta.shape[0]
    if isinstance(prior, FlatPrior) or isinstance(prior, LaplacePrior):
        return np.zeros((d, d))
    if isinstance(prior, GaussianPrior):
        return np.diag(-1.0 / np.asarray(prior.sd, dtype=float) ** 2)
    H = np.empty((d, d))
    for j in range(d):
        h = 1e-5 * (1.0 + abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        if grad_logprior is not None:
            H[:, j] = (np.asarray(grad_logprior(up), float)
                       - np.asarray(grad_logprior(down), float)) / (2 * h)
        else:
            for k in range(d):
                pp, pm, mp, mm = (theta.copy() for _ in range(4))
                hk = 1e-4 * (1.0 + abs(theta[k]))
                pp[j] += h; pp[k] += hk; pm[j] += h; pm[k] -= hk
                mp[j] -= h; mp[k] += hk; mm[j] -= h; mm[k] -= hk
                H[k, j] = (logprior(pp) - logprior(pm) - logprior(mp) + logprior(mm)) / (4 * h * hk)
    return 0.5 * (H + H.T)


def _laplace_offset(grad, hess) -> float:
    try:
        factor = np.linalg.cholesky(-hess)
    except np.linalg.LinAlgError:
        return math.nan
    z = np.linalg.solve(factor, grad)
    return float(math.sqrt(z @ z))


def _progress(total, desc):
    """A tqdm bar over ``total`` rows when stderr is a terminal and the pass is long."""
    if total < 4 * SCAN_CHUNK or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="row", unit_scale=True, leave=False)


# --- the wrapper ---------------------------------------------------------------------------


class ControlVariates(BaseModel):
    r"""A model whose per-row ratios are Taylor residuals plus the proxy's mean.

    For each row the *proxy* is the first- or second-order Taylor expansion of its
    log-likelihood at a center theta* (by default the posterior mode),

    .. math::

        \hat l_i(\theta) = l_i(\theta^*) + \nabla l_i(\theta^*)^T u
                           + \tfrac12 u^T \nabla^2 l_i(\theta^*) u, \qquad u = \theta - \theta^*,

    whose sum over all N rows is known from one chunked pass:
    ``sum_i (hat l_i(theta') - hat l_i(theta)) = P(theta, theta')`` with

    .. math::

        P(\theta, \theta') = \Delta^T \big(g + \tfrac12 H (u + u')\big),
        \quad \Delta = \theta' - \theta,\ g = \sum_i \nabla l_i(\theta^*),\
        H = \sum_i \nabla^2 l_i(\theta^*)

    (``H`` dropped at ``order=1``), at O(d^2) per decision. The wrapper is a model whose
    per-row log-likelihood ratio is

    .. math::

        l^{cv}_i = r_i + P/N, \qquad r_i = l_i - (\hat l_i(\theta') - \hat l_i(\theta)),

    so ``mean_i l^cv_i = mean_i l_i`` exactly over all N rows: every accept/reject test
    (:class:`~samplers.ExactTest`, :class:`~samplers.AustereTest`,
    :class:`~samplers.BarkerTest`, :class:`~samplers.ConfidenceTest`) runs on it unchanged and
    decides the same exact MH comparison, but from rows whose spread is of order
    ``||theta - theta*||^order ||theta' - theta||`` instead of ``||theta' - theta||``
    (Bardenet, Doucet & Holmes 2017, section 7: the confidence sampler with Taylor proxies).
    Likewise the per-row gradient is ``grad r_i(theta) + (g + H u)/N``, so a minibatch
    gradient (:class:`~samplers.Langevin` with ``batch_size``) is the control-variate
    estimate ``g + H u + (N/n) sum_batch grad r_i``.

    Parameters
    ----------
    model : model
        A built-in :class:`~samplers.LogisticRegression`, :class:`~samplers.LinearRegression`,
        :class:`~samplers.RobustRegression` or :class:`~samplers.GaussianMean` (compiled
        kernels; every row is ``f_i(x_i . theta)`` and its derivatives are recomputed from the
        row, so nothing of size N is stored), a :class:`~samplers.models.RowModel` (compiled
        too, from its row kernels), or any other model, built-in (``Gaussian``,
        ``GaussianMixture``) or a user's, through its per-row derivatives (see Notes).
    center : array of shape (d,) or None
        The expansion point. ``None`` finds the posterior mode: Newton's method with
        backtracking for the built-in models (each iteration one chunked pass on every
        core, compiled), L-BFGS (:func:`scipy.optimize.minimize`)
        on full chunked gradients otherwise. A given center must have a finite
        log-likelihood; far from the mode it is allowed (see :attr:`TaylorCenter.offset`).
    order : {1, 2}
        Order of the Taylor proxy.
    start : array of shape (d,), optional
        Where the mode search starts (default zeros).
    executor : optional
        Run the passes of the construction (each Newton step's sums, the sums at the center,
        the row norms) on a cluster: a ``dask.distributed.Client``, its ``get_executor()``,
        or any ``concurrent.futures.Executor``; None (default) runs them on this machine's
        cores. Built-in models only. Each task rebuilds about 10^6 rows
        (``model.block_recipe``) on its worker and returns its chunks' sums, which are added
        here in chunk order: the center and its sums are the local ones, bit for bit.
        :meth:`from_sums` takes sums computed anywhere else.

    Attributes
    ----------
    model : the wrapped model.
    order : int
    N, dim : int
    center : TaylorCenter
        The center and its sums (``center.theta``, ``.grad``, ``.hess``, ``.offset``, ...).
    taylor_constant, max_row_norm : float
        ``M`` (``M3`` at order 2, ``M2`` at order 1) and ``max_i ||x_i||`` of the residual
        bound (built-in models).

    Methods beyond the model protocol: :meth:`proxy_total` (P), :meth:`residual_bound` (B),
    :meth:`loglik_ratio_range` ``(P/N, B)``, :meth:`laplace_covariance`.

    Notes
    -----
    **Bound for the confidence test.** For a GLM row ``l_i = f_i(x_i . theta)`` write
    ``s = x_i . u``, ``s' = x_i . u'``, ``R(t) = f_i(eta* + t) - T(t)`` (T the Taylor
    polynomial), so ``r_i = R(s') - R(s) = int_s^s' R'(t) dt``. At order 2,
    ``|R'(t)| = |f'(eta* + t) - f'(eta*) - f''(eta*) t| <= M3 t^2 / 2`` with
    ``M3 = sup |f'''|``, hence

    .. math::

        |r_i| \le \frac{M_3}{6} |s'^3 - s^3|
              \le \frac{M_3}{6} \|x_i\|^3 \|\Delta\| (\|u\|^2 + \|u\|\|u'\| + \|u'\|^2)
              \le \frac{M_3}{2} \|x_i\|^3 \max(\|u\|, \|u'\|)^2 \|\Delta\|;

    at order 1, ``|R'(t)| <= M2 |t|`` with ``M2 = sup |f''|`` gives
    ``|r_i| <= (M2/2) ||x_i||^2 ||Delta|| (||u|| + ||u'||)`` (Bardenet et al. 2017,
    section 7.2, there with the max form). ``M3 = 1/(6 sqrt 3)`` for the logistic, 0 for the
    Gaussian models (their order-2 residuals vanish), ``2 (df+1) / ((4 - 2 sqrt 2)^2
    (scale sqrt df)^3)`` for the Student-t; all tempered by 1/K. Every ``l^cv_i`` lies in
    ``[P/N - B, P/N + B]`` with B that bound: ``loglik_ratio_range`` returns ``(P/N, B)`` and
    :class:`~samplers.ConfidenceTest`, whose radius depends only on the width of the range,
    uses B alone; ``loglik_ratio_bound`` (the protocol's ``max_i |l_i|``) returns
    ``|P/N| + B``.

    **A user's model** needs ``N``, ``loglik(theta, idx)``, ``logprior(theta)`` and
    ``grad_loglik(theta, idx) -> (len(idx), d)`` per-row gradients; for ``order=2`` also
    ``hess_loglik(theta, idx) -> (len(idx), d, d)`` per-row Hessians; ``grad_logprior`` is
    used when present. Each missing derivative is taken by central differences (of
    ``loglik`` for gradients, of the gradient for Hessians, steps ``1e-5 (1 + |theta_j|)``;
    second differences of ``loglik``, steps ``1e-4 (1 + |theta_j|)``, when both are missing),
    which costs 2 d extra evaluations per row: allowed only for N <= 10^6, refused above with
    a message naming the missing methods. (``H`` at the center is the sum of the same per-row
    Hessians, so the rows' mean stays exact; for an order-1 model above 10^6 rows without
    ``hess_loglik`` it comes from central differences of the summed gradient, 2 d passes.) The per-row proxy then reads the row's
    gradient and Hessian at theta* every step (O(d^2) per row, Python path); a user's model
    has no residual bound, so :class:`~samplers.ConfidenceTest` needs ``range="full-data"``.
    Two optional methods replace the generic passes (:class:`~samplers.models.JaxModel` has
    both): ``loglik_sums(theta, hessian=True) -> (sum l_i, sum grad l_i, sum hess l_i or
    None)``, the model's own full pass (the mode is then found by Newton's method on it), and
    ``residual_ratio(theta, theta_new, idx, center, order)``, the rows' residuals
    ``l_i - (hat l_i(theta') - hat l_i(theta))`` in one call.

    References
    ----------
    Bardenet, Doucet & Holmes (2017), On Markov chain Monte Carlo methods for tall data,
    JMLR 18(47), sections 6-7. Dang, Quiroz, Kohn, Tran & Villani (2019), Hamiltonian Monte
    Carlo with energy conserving subsampling, JMLR 20 (the same Taylor proxy).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(5000), rng.normal(size=(5000, 2))])
    >>> y = (rng.random(5000) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.5]))).astype(float)
    >>> cv = ControlVariates(LogisticRegression(X, y))
    >>> theta = cv.center.theta + 0.02; theta_new = theta + 0.01
    >>> full = cv.model.loglik_ratio(theta, theta_new, np.arange(5000))
    >>> resid = cv.loglik_ratio(theta, theta_new, np.arange(5000))
    >>> bool(np.isclose(resid.mean(), full.mean(), rtol=1e-9, atol=0))
    True
    >>> bool(resid.std() < 0.01 * full.std())
    True
    """

    _wrapped_fields = ("model",)
    #: The executor of the construction's passes (set only while it runs).
    _cluster = None

    @staticmethod
    def sums_on_blocks(model) -> bool:
        """Whether ``ControlVariates(model, executor=...)`` can run its passes (the mode,
        the sums at the center) by row blocks on an executor's workers: a built-in GLM-shaped
        model (logistic, linear, Student-t, Gaussian mean, ``GLM``) whose rows split into
        blocks (:meth:`~samplers.models.BaseModel.block_recipe`).

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, GaussianMean
        >>> ControlVariates.sums_on_blocks(GaussianMean(np.zeros(10)))
        True
        """
        if glm_kernels(model) is None:
            return False
        try:
            model.block_recipe(0, 1)
        except (AttributeError, TypeError):
            return False
        return True

    def __init__(self, model, center=None, order=2, *, start=None, executor=None):
        self._setup(model, order, center if center is not None else start)
        cluster = as_cluster(executor)
        if cluster is not None and self._glm is None:
            raise TypeError(f"executor= runs the sums of a built-in model (compiled rows) on "
                            f"other processes; {type(model).__name__} is not one: leave "
                            "executor=None")
        self._cluster = cluster         # for the passes of the construction only
        try:
            if center is None:
                x0 = np.zeros(self.dim) if start is None else self._point("start", start)
                center = self._find_mode(x0, given=start is not None)
            else:
                center = self._at(self._point("center", center), "given", 0)
        finally:
            del self._cluster           # an executor does not pickle, nor outlive the passes
        self._set_center(center)

    def _setup(self, model, order, ref):
        """Check ``model`` and ``order`` and set what does not depend on the center."""
        if isinstance(order, bool) or order not in (1, 2):
            raise ValueError(f"order must be 1 or 2, got {order!r}")
        if isinstance(model, type):
            raise TypeError(f"model must be a model instance, got the class {model.__name__}: "
                            f"build it from the data first, e.g. {model.__name__}(X, y)")
        if getattr(model, "N", None) is None:
            raise TypeError(f"model must have an attribute N, its number of data rows; "
                            f"{type(model).__name__} has none")
        for attr in ("loglik", "logprior"):
            if not callable(getattr(model, attr, None)):
                raise TypeError(f"model must have a callable {attr}(...); "
                                f"{type(model).__name__} has none")
        self.model = model
        self.order = int(order)
        self._order2 = 1.0 if self.order == 2 else 0.0
        self.N = check_int("model.N", model.N, low=1)
        #: The rows the proxy's total is shared over (N; kept by a block of rows, whose
        #: rows carry the same per-row shift P/N as in the whole model).
        self._rows_total = self.N
        dim = getattr(model, "dim", None)
        if dim is None:
            if ref is None:
                raise TypeError(f"{type(model).__name__} has no dim: give the model an integer "
                                "attribute dim (the length of theta), or pass center= or start= "
                                "so that ControlVariates knows the dimension of theta")
            dim = int(np.size(ref))
        self.dim = int(dim)
        self.temperature = 1.0  # the wrapped model carries its own temperature
        self._inv_temp = 1.0
        self.prior = getattr(model, "prior", None)
        self._has_user_hess = self._rowwise_hess = False
        if self._glm is None:
            self._check_user_model()
            # no residual bound: the samplers' view sees none, so ConfidenceTest(range="model")
            # refuses the model when the chain starts, naming range="full-data"
            self._loglik_ratio_range = self._loglik_ratio_bound = None
        elif not self._bounded:
            # a GLM family whose f'' or f''' is unbounded (Poisson, gamma, cloglog): compiled
            # rows and sums, but no residual bound (residual_bound says why)
            self._loglik_ratio_range = self._loglik_ratio_bound = None

    def _set_center(self, center: TaylorCenter):
        self.center = center
        self._theta_c = center.theta
        self._g = center.grad
        self._H = center.hess

    @classmethod
    def from_sums(cls, model, center, sums, order=2) -> "ControlVariates":
        """The wrapper at ``center`` from sums computed elsewhere (a Spark or SQL job, another
        cluster), without a pass over the data.

        Parameters
        ----------
        model : model
            The model whose rows the sums are over (the chain reads its rows; this call
            reads none).
        center : array of shape (d,)
            The point the sums were computed at.
        sums : TaylorSums or mapping
            ``N`` (rows summed: must equal ``model.N``), ``loglik`` (``sum_i l_i(center)``,
            tempered as the model is), ``grad`` (``sum_i grad l_i(center)``, shape (d,)),
            ``hess`` (``sum_i hess l_i(center)``, shape (d, d), symmetric) and optionally
            ``max_row_norm`` (``max_i ||x_i||`` of a built-in model's rows, for the residual
            bound; else a pass computes it when a test asks for it). :meth:`sums` returns
            them from a wrapper.
        order : {1, 2}

        Returns
        -------
        ControlVariates
            With ``center.method == "given"`` and ``center.n_passes == 0``; equal to
            ``ControlVariates(model, center=center, order=order)`` when the sums are the same
            numbers.

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, LinearRegression
        >>> rng = np.random.default_rng(0)
        >>> X = np.column_stack([np.ones(1000), rng.normal(size=1000)])
        >>> y = X @ [0.5, -1.0] + rng.normal(size=1000)
        >>> model = LinearRegression(X, y, noise_sd=1.0)
        >>> direct = ControlVariates(model, center=[0.5, -1.0])
        >>> again = ControlVariates.from_sums(model, [0.5, -1.0], direct.sums())
        >>> bool(np.array_equal(again.center.hess, direct.center.hess))
        True
        """
        self = cls.__new__(cls)
        self._setup(model, order, center)
        theta = self._point("center", center)
        given = TaylorSums.of(sums, self.N, self.dim)
        self._set_center(self._center_at(theta, given.loglik, given.grad, given.hess,
                                         "given", 0))
        if given.max_row_norm is not None:
            self._row_norm = given.max_row_norm
        return self

    def with_model(self, model) -> "ControlVariates":
        """The wrapper around ``model`` with this one's center, order and sums, without a
        pass over the data: for a model with the same rows and log-likelihood in another
        form (``validation.fit`` hands a JAX model's numba translation in,
        :func:`samplers.models.compile_jax_model`).

        Raises
        ------
        ValueError
            If ``model`` has another number of rows or another dimension.

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, LinearRegression
        >>> rng = np.random.default_rng(0)
        >>> X = np.column_stack([np.ones(1000), rng.normal(size=1000)])
        >>> y = X @ [0.5, -1.0] + rng.normal(size=1000)
        >>> cv = ControlVariates(LinearRegression(X, y, noise_sd=1.0))
        >>> again = cv.with_model(LinearRegression(X.copy(), y, noise_sd=1.0))
        >>> again.center is cv.center, again.model is cv.model
        (True, False)
        """
        n, dim = getattr(model, "N", None), getattr(model, "dim", None)
        if n != self.N or dim != self.dim:
            raise ValueError(f"model must have the wrapped model's N = {self.N} rows and dim = "
                             f"{self.dim}, got N = {n}, dim = {dim}")
        new = type(self).__new__(type(self))
        new._setup(model, self.order, self.center.theta)
        new._set_center(self.center)
        if "_row_norm" in self.__dict__:
            new._row_norm = self._row_norm
        return new

    def sums(self) -> "TaylorSums":
        """The sums at the center (:class:`TaylorSums`), in the form :meth:`from_sums` takes."""
        c = self.center
        return TaylorSums(self.N, float(c.loglik), c.grad.copy(), c.hess.copy(),
                          self.__dict__.get("_row_norm"))

    # -- construction --------------------------------------------------------------------------

    def _point(self, name, value) -> np.ndarray:
        arr = check_finite_array(name, value, ndim=(0, 1)).reshape(-1).astype(float)
        if arr.shape[0] != self.dim:
            raise ValueError(f"{name} must have {self.dim} element(s), got shape {np.shape(value)}")
        return arr

    def _check_user_model(self):
        m = self.model
        missing = [name for name in ("grad_loglik",) + (("hess_loglik",) if self.order == 2 else ())
                   if not callable(getattr(m, name, None))]
        if missing and self.N > FD_MAX_ROWS:
            raise TypeError(
                f"ControlVariates(order={self.order}) on {type(m).__name__} with N = {self.N} "
                f"rows needs model.{' and model.'.join(missing)} (per-row derivatives: "
                "grad_loglik(theta, idx) -> (len(idx), d), hess_loglik(theta, idx) -> "
                f"(len(idx), d, d)); finite differences are allowed only for N <= {FD_MAX_ROWS}")
        grad = getattr(m, "grad_loglik", None)
        self._user_grad = grad if callable(grad) else self._fd_grad
        hess = getattr(m, "hess_loglik", None)
        self._has_user_hess = callable(hess)
        self._user_hess = hess if callable(hess) else self._fd_hess
        # H at the center is the sum of the very per-row Hessians the proxies use (so the rows'
        # mean is exact to rounding), except for a large order-1 model without hess_loglik
        # (then central differences of the summed gradient, 2 d passes)
        self._rowwise_hess = self._has_user_hess or self.N <= FD_MAX_ROWS

    def _fd_grad(self, theta, idx):
        """Per-row gradients by central differences of ``model.loglik``."""
        out = np.empty((idx.shape[0], self.dim))
        for j in range(self.dim):
            h = 1e-5 * (1.0 + abs(theta[j]))
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            out[:, j] = (np.asarray(self.model.loglik(up, idx), float)
                         - np.asarray(self.model.loglik(down, idx), float)) / (2 * h)
        return out

    def _fd_hess(self, theta, idx):
        """Per-row Hessians by central differences of the per-row gradients (symmetrised), or
        by second differences of ``model.loglik`` (steps ``1e-4 (1 + |theta_j|)``) when the
        gradients are themselves differences."""
        out = np.empty((idx.shape[0], self.dim, self.dim))
        if self._user_grad == self._fd_grad:
            steps = 1e-4 * (1.0 + np.abs(theta))
            for j in range(self.dim):
                for k in range(j, self.dim):
                    ej = np.zeros(self.dim)
                    ek = np.zeros(self.dim)
                    ej[j] = steps[j]
                    ek[k] = steps[k]
                    out[:, j, k] = out[:, k, j] = (
                        self._ll(theta + ej + ek, idx) - self._ll(theta + ej - ek, idx)
                        - self._ll(theta - ej + ek, idx) + self._ll(theta - ej - ek, idx)
                    ) / (4.0 * steps[j] * steps[k])
            return out
        for j in range(self.dim):
            h = 1e-5 * (1.0 + abs(theta[j]))
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            out[:, :, j] = (self._row_grads_user(up, idx) - self._row_grads_user(down, idx)) / (2 * h)
        return 0.5 * (out + out.transpose(0, 2, 1))

    def _ll(self, theta, idx):
        return np.asarray(self.model.loglik(theta, idx), dtype=float)

    def _row_grads_user(self, theta, idx):
        return np.asarray(self._user_grad(theta, idx), dtype=float).reshape(idx.shape[0], self.dim)

    def _prior_terms(self, theta):
        m = self.model
        lp = float(m.logprior(theta))
        glp = getattr(m, "grad_logprior", None)
        if callable(glp):
            gp = np.asarray(glp(theta), dtype=float).reshape(self.dim)
        else:
            gp = np.empty(self.dim)
            for j in range(self.dim):
                h = 1e-6 * (1.0 + abs(theta[j]))
                up, down = theta.copy(), theta.copy()
                up[j] += h
                down[j] -= h
                gp[j] = (float(m.logprior(up)) - float(m.logprior(down))) / (2 * h)
            glp = None
        Hp = _prior_hessian(m.logprior, glp, theta, self.prior)
        return lp, gp, Hp

    def _sums(self, theta, *, hessian=True, desc="control variates"):
        """One chunked pass: ``(sum l_i, sum grad l_i, sum hess l_i)`` at ``theta``, or
        ``(-inf or nan, None, None)`` as soon as a row's log-likelihood is not finite."""
        d = self.dim
        check_data_files(self.model)   # a truncated memmap: an error, not a SIGBUS
        if self._glm is not None:   # one compiled pass on every core
            return self._glm_sums(theta, hessian, desc)
        fused = getattr(self.model, "loglik_sums", None)   # a model's own pass (JaxModel)
        if callable(fused) and self._rowwise_hess:
            L, g, H = fused(theta, hessian=hessian)
            if not math.isfinite(L):
                return L, None, None
            return L, np.asarray(g, float), (np.zeros((d, d)) if H is None
                                             else 0.5 * (np.asarray(H, float) + np.asarray(H, float).T))
        L, g, H = 0.0, np.zeros(d), np.zeros((d, d))
        bar = _progress(self.N, desc)
        try:
            for start in range(0, self.N, SCAN_CHUNK):
                stop = min(start + SCAN_CHUNK, self.N)
                idx = np.arange(start, stop, dtype=np.intp)
                chunk = float(np.sum(np.asarray(self.model.loglik(theta, idx), dtype=float)))
                if not math.isfinite(chunk):
                    return chunk, None, None
                L += chunk
                g += self._row_grads_user(theta, idx).sum(axis=0)
                if hessian and self._rowwise_hess:
                    Hs = np.asarray(self._user_hess(theta, idx), dtype=float)
                    H += Hs.reshape(stop - start, d, d).sum(axis=0)
                if bar is not None:
                    bar.update(stop - start)
        finally:
            if bar is not None:
                bar.close()
        if hessian and self._glm is None and not self._rowwise_hess:
            H = self._fd_total_hess(theta, desc)
        return L, g, 0.5 * (H + H.T)

    def _glm_sums(self, theta, hessian, desc):
        bar = _progress(self.N, desc)
        try:
            return glm_sums(self.model, theta, hessian=hessian,
                            progress=None if bar is None else bar.update,
                            executor=self._cluster)
        finally:
            if bar is not None:
                bar.close()

    def _fd_total_hess(self, theta, desc):
        """``sum_i hess l_i`` by central differences of the summed gradient (2 d passes)."""
        H = np.empty((self.dim, self.dim))
        for j in range(self.dim):
            h = 1e-5 * (1.0 + abs(theta[j]))
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            H[:, j] = (self._sums(up, hessian=False, desc=desc)[1]
                       - self._sums(down, hessian=False, desc=desc)[1]) / (2 * h)
        return H

    def _at(self, theta, method, n_passes) -> TaylorCenter:
        """The center at ``theta`` with its sums (one pass); refuses a non-finite log-likelihood."""
        L, g, H = self._sums(theta)
        if g is None:
            raise ValueError(f"center must be a point where the log-likelihood is finite; "
                             f"sum l_i = {L} at center={theta}")
        return self._center_at(theta, L, g, H, method, n_passes + 1)

    def _center_at(self, theta, L, g, H, method, n_passes) -> TaylorCenter:
        """The center at ``theta`` from the sums ``(L, g, H)`` there and the prior's terms."""
        lp, gp, Hp = self._prior_terms(theta)
        if not (math.isfinite(L) and np.all(np.isfinite(g)) and np.all(np.isfinite(H))):
            raise ValueError(f"center must be a point where the log-likelihood and its "
                             f"derivatives are finite; got sum l_i = {L} at center={theta}")
        if not math.isfinite(lp):
            raise ValueError(f"center must be a point where the log prior is finite, got {lp} "
                             f"at center={theta}")
        theta = theta.copy()
        theta.setflags(write=False)
        post_g, post_H = g + gp, H + Hp
        return TaylorCenter(theta, L, g, H, post_g, post_H, _laplace_offset(post_g, post_H),
                            method, n_passes)

    def _find_mode(self, x0, given=True) -> TaylorCenter:
        if self._glm is not None or callable(getattr(self.model, "loglik_sums", None)):
            return self._newton(x0, given)
        return self._lbfgs(x0)

    def _newton(self, theta, given=True) -> TaylorCenter:
        """Newton's method with Armijo backtracking on the log posterior (one pass a trial).

        The sums of the last pass at the accepted point are the center's: the mode costs no
        pass of its own (a pass at the same point gives the same bits)."""
        passes = 0
        sums = {}       # the likelihood sums of the last point evaluated

        def evaluate(t):
            nonlocal passes
            passes += 1
            L, g, H = self._sums(t, desc="mode (Newton)")
            sums["last"] = (t, L, g, H)
            if g is None:
                return L, None, None          # -inf, +inf or nan: the first bad chunk's sum
            lp, gp, Hp = self._prior_terms(t)
            return L + lp, g + gp, H + Hp

        value, grad, hess = evaluate(theta)
        sums["theta"] = sums["last"]
        if math.isnan(value):
            raise ValueError(
                f"the log-likelihood is nan at the mode search's first point {theta}: the data "
                "hold NaN (a model built under skip_data_checks() is not checked: built "
                "outside it, its check names the row), or the model's log-likelihood returns "
                "NaN there")
        if not math.isfinite(value):
            where = (f"start={theta}" if given else
                     f"the default start {theta} (no start= given)")
            raise ValueError(f"start must be a point where the log posterior is finite, got "
                             f"{value} at {where}")
        step = _ascent_direction(grad, hess)
        decrement = float(grad @ step)
        for _ in range(MAX_NEWTON):
            if decrement < DECREMENT_TOL:
                break
            if 0.5 * decrement <= VALUE_RESOLUTION * (abs(value) + 1.0):
                # The predicted gain is below the value's rounding (at large N DECREMENT_TOL
                # is): values cannot rank the points, so full Newton steps are taken while
                # the decrement falls (quadratically, this close), and the iteration stops at
                # the rounding floor, where theta is the mode to working precision.
                cand = theta + step
                v_c, g_c, h_c = evaluate(cand)
                if not math.isfinite(v_c):
                    break
                step_c = _ascent_direction(g_c, h_c)
                decrement_c = float(g_c @ step_c)
                if not decrement_c < decrement:
                    break
                theta, value, grad, hess = cand, v_c, g_c, h_c
                sums["theta"] = sums["last"]
                step, decrement = step_c, decrement_c
                continue
            t = 1.0
            while True:
                cand = theta + t * step
                v_c, g_c, h_c = evaluate(cand)
                if math.isfinite(v_c) and v_c >= value + 1e-4 * t * decrement:
                    break
                t *= 0.5
                if t < 1e-12 and math.isnan(v_c):
                    raise ValueError(
                        f"the log posterior is nan within {float(np.linalg.norm(cand - theta)):.2g}"
                        f" of {theta}, where it is finite ({value:.6g}), on the mode search's "
                        "path uphill (a Newton step from there): the model's "
                        "log-likelihood (or its prior) returns NaN where the posterior has "
                        "mass (e.g. a log or sqrt of a negative number, inf - inf, or a guard "
                        "that returns nan); it must be finite there")
                if t < 1e-12:
                    raise RuntimeError(f"the mode search stalled at {theta}: no Newton step "
                                       "increases the log posterior; pass center= explicitly")
            theta, value, grad, hess = cand, v_c, g_c, h_c
            sums["theta"] = sums["last"]
            step = _ascent_direction(grad, hess)
            decrement = float(grad @ step)
        else:
            raise RuntimeError(
                f"the mode search did not converge in {MAX_NEWTON} Newton steps (last point "
                f"{theta}); the posterior may have no mode (e.g. separable data under a flat "
                "prior): use a proper prior or pass center= explicitly")
        # Under a flat prior a likelihood without a maximum (separable logistic data) lets the
        # iterates run off until its curvature underflows. A mode's curvature is usually a fair
        # share of the largest possible, N M2 max||x_i||^2, but not always: with heavy-tailed
        # covariates (Student-t(1.2)) max||x_i||^2 dwarfs the typical row, and the rows with
        # huge |x_i| saturate and add no curvature. So a point that fails that cheap test is
        # refused only if the log posterior at 2 theta is not below its value at theta (one
        # more pass, taken only then): iterates that ran off along a direction where the
        # likelihood keeps rising find it at least as high further out, whereas a mode
        # theta != 0 of a (log-concave GLM) posterior is a strict maximum, the value at 2 theta
        # lower by about theta' (-H) theta / 2 > 0. (A mode near 0, where that margin could
        # fall below rounding, passes the curvature test: every row is unsaturated there.)
        glm = self._glm
        most = (math.nan if glm is None        # a user's model: no curvature scale to compare
                else self.N * glm.m2(self.model) * self._max_row_norm() ** 2)
        if (math.isfinite(most) and not float(np.trace(-hess)) > SATURATION * most
                and evaluate(2.0 * theta)[0] >= value):     # (NaN there: cannot tell)
            raise RuntimeError(
                f"the mode search ran off to {theta}, where the log posterior is flat (curvature "
                f"{float(np.trace(-hess)):.3g} against up to {most:.3g}): the posterior has no "
                "mode (e.g. separable data under a flat prior); use a proper prior or pass center=")
        at, L, g, H = sums["theta"]
        if at is theta and g is not None:
            return self._center_at(theta, L, g, H, "newton", passes)
        return self._at(theta, "newton", passes)

    def _lbfgs(self, x0) -> TaylorCenter:
        passes = 0

        def fun(t):
            nonlocal passes
            passes += 1
            L, g, _ = self._sums(t, hessian=False, desc="mode (L-BFGS)")
            if g is None:
                return math.inf, np.zeros_like(t)
            v = L + float(self.model.logprior(t))
            gp = self._prior_grad(t)
            if not math.isfinite(v):
                return math.inf, np.zeros_like(t)
            return -v, -(g + gp)

        from scipy import optimize   # here: it costs a first `import samplers` 0.2 s

        res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B",
                                options=dict(maxiter=1000, gtol=1e-9, ftol=1e-15))
        if not np.all(np.isfinite(res.x)):
            raise RuntimeError(f"the mode search (L-BFGS) failed: {res.message}; pass center=")
        return self._at(np.asarray(res.x, dtype=float), "lbfgs", passes)

    def _prior_grad(self, theta):
        glp = getattr(self.model, "grad_logprior", None)
        if callable(glp):
            return np.asarray(glp(theta), dtype=float).reshape(self.dim)
        return self._prior_terms(theta)[1]

    # -- what the samplers read -------------------------------------------------------------------

    def proxy_total(self, theta, theta_new) -> float:
        """``P(theta, theta') = sum_i (hat l_i(theta') - hat l_i(theta))`` in O(d^2)."""
        theta = np.asarray(theta, dtype=float)
        theta_new = np.asarray(theta_new, dtype=float)
        delta = theta_new - theta
        if self.order == 1:
            return float(delta @ self._g)
        return float(delta @ (self._g + 0.5 * (self._H @ (theta + theta_new - 2.0 * self._theta_c))))

    def _proxy_sum(self, theta) -> float:
        """``sum_i hat l_i(theta)``."""
        u = theta - self._theta_c
        value = self.center.loglik + float(u @ self._g)
        if self.order == 2:
            value += 0.5 * float(u @ self._H @ u)
        return value

    def _proxy_grad(self, theta) -> np.ndarray:
        """``sum_i grad hat l_i(theta) = g + H u``."""
        if self.order == 1:
            return self._g.copy()
        return self._g + self._H @ (theta - self._theta_c)

    def laplace_covariance(self) -> np.ndarray:
        """``(-H_post)^-1``, the Laplace approximation's covariance at the center (prior included).

        Raises ValueError when ``-H_post`` is not positive definite (a center that is not near
        a mode, or an order-1 wrapper of a user's model without Hessians at hand), or is
        singular to rounding (scaled to a unit diagonal, its least eigenvalue below
        :data:`SINGULAR_RCOND`: collinear columns under a flat prior).
        """
        Hp = self.center.posterior_hess
        try:
            factor = np.linalg.cholesky(-Hp)
        except np.linalg.LinAlgError:
            raise ValueError("the posterior Hessian at the center is not negative definite, so "
                             "there is no Laplace covariance there; center at the mode "
                             "(center=None)") from None
        # a flat direction passes Cholesky or not by rounding: refuse it on the Hessian scaled
        # to a unit diagonal (scale-free, so columns of scale 1e-3 beside 1e3 stay fine)
        scale = np.sqrt(np.diag(-Hp))
        if np.linalg.eigvalsh(-Hp / np.outer(scale, scale))[0] < SINGULAR_RCOND:
            raise ValueError("the posterior Hessian at the center is singular to rounding, so "
                             "there is no Laplace covariance there; center at the mode "
                             "(center=None)")
        inv = np.linalg.inv(factor)
        return inv.T @ inv

    @property
    def _glm(self):
        """The wrapped model's GLM kernels (looked up, not stored: the instance pickles)."""
        return glm_kernels(self.model)

    @property
    def _bounded(self) -> bool:
        """Whether the wrapped model is a GLM with the Taylor constant of this order (a
        finite supremum of the derivative)."""
        glm = self._glm
        return glm is not None and math.isfinite(
            glm.m3(self.model) if self.order == 2 else glm.m2(self.model))

    @property
    def _kernels(self):
        glm = self._glm
        if glm is None:
            # a model with compiled row kernels down to the Hessian (RowModel): residuals from
            # them; else None (the rows' derivatives through the model's Python methods)
            k = getattr(self.model, "row_kernels", None)
            if getattr(k, "hess", None) is None or k.loglik is None or k.grad is None:
                return None
            return _cv_row_kernels(k.loglik, k.grad, k.hess, k.hvp, k.prefetch)
        if glm.nuisance:
            return _cv_kernels_nuisance(glm.dots3, glm.link, glm.derivs, glm.scatter,
                                        type(self.model)._row_prefetch, glm.ratio, glm.step,
                                        glm.ratio_at, glm.derivs_at)
        return _cv_kernels(glm.dots3, glm.link, glm.derivs, glm.scatter,
                           type(self.model)._row_prefetch, glm.ratio)

    @property
    def _row_ratio(self):
        k = self._kernels
        return None if k is None else k[0]

    @property
    def _row_loglik(self):
        k = self._kernels
        return None if k is None else k[1]

    @property
    def _row_grad(self):
        k = self._kernels
        return None if k is None else k[2]

    @property
    def _row_prefetch(self):
        k = self._kernels
        return None if k is None else k[3]

    def _data(self, shift, theta=None, theta_new=None) -> tuple:
        """The row kernels' data with ``shift``; its per-step constants those of ``(theta,
        theta_new)`` (the centre's where not given: only the ratio reads them)."""
        c = self._theta_c
        kernels = self._kernels
        # rows without per-step constants: 0 here, without loading the compiled _no_step
        # (a cache load per argument layout, for a constant)
        step = 0.0 if kernels is None or kernels[4] is _no_step else kernels[4](
            c, c if theta is None else np.asarray(theta, dtype=np.float64),
            c if theta_new is None else np.asarray(theta_new, dtype=np.float64))
        return (self.model._kernel_data(), c, self._order2, float(shift), step)

    def _block_data(self) -> tuple | None:
        """``(rows, g, H, N)`` for the compiled block loop (:mod:`samplers._blocks`): the row
        kernels' tuple with shift 0, the sums at the center and N as a float, from which
        :func:`cv_decision_data` and :func:`cv_batch_grad` compute what
        :meth:`_decision_data` and :meth:`_grad_loglik` do; None for a user's model without
        compiled row kernels."""
        if self._kernels is None:
            return None
        return (self._data(0.0), self._g, self._H, float(self._rows_total))

    def block_parts(self, view):
        """The compiled loop's parts (:class:`~samplers.models.compiled.BlockModel`) around a
        built-in GLM or a model with compiled row kernels down to the Hessian
        (:class:`~samplers.models.RowModel`) whose own parts exist: data ``(rows, g, H,
        N)`` (:meth:`_block_data`), the wrapped model's prior, and the proxy's total and gradient computed in the step
        (:func:`cv_decision_data`, :func:`cv_batch_grad`) with the arithmetic of
        ``proxy_total`` and ``_proxy_grad``; None for a user's model without such kernels."""
        data = self._block_data()
        inner_parts = getattr(self.model, "block_parts", None)
        inner = None if inner_parts is None else inner_parts(view)
        if (data is None or inner is None or inner.decision_data is not same_data
                or self.prior is not self.model.prior):
            return None
        return BlockModel(data, inner.prior, cv_decision_data(self._kernels[4]),
                          cv_batch_grad(view.row_grad, view.row_prefetch))

    def block_range(self):
        """``(cv_ratio_range, (P / N, B) constants)`` around a built-in GLM, else None."""
        if self._glm is None:
            return None
        return self._ratio_range, self._range_data()

    def _kernel_data(self):
        raise TypeError("ControlVariates rows carry the per-pair constant P/N: read them through "
                        "_decision_data(theta, theta_new), not _kernel_data()")

    def _decision_data(self, theta, theta_new):
        return self._data(self.proxy_total(theta, theta_new) / self._rows_total, theta,
                          theta_new)

    def _loglik(self, theta, idx):
        if self._store_backed:
            return self._rows_model(idx)._loglik(theta, np.arange(idx.shape[0]))
        shift = self._proxy_sum(theta) / self._rows_total
        if self._kernels is None:
            return (np.asarray(self.model.loglik(theta, idx), dtype=float)
                    - self._user_proxy(theta, idx) + shift)
        out = np.empty(idx.shape[0])
        glm = self._glm
        if (glm is not None and not glm.nuisance and idx.flags.c_contiguous
                and idx.flags.writeable):
            # one column of loglik_many's kernel (the same bits as row_loglik's): the kernel
            # the passes over pairs have loaded, so a chain's check of its first point
            # loads no other (its argument types are theirs: no new signature)
            _cv_loglik_many(glm.link, glm.derivs, glm.scatter)(
                self._data(0.0), idx, np.array(theta, dtype=np.float64).reshape(-1, 1),
                np.array([shift]), out.reshape(-1, 1))
            return out
        batch_loglik(self._row_loglik, self._row_prefetch)(self._data(shift), idx, theta, out)
        return out

    def _loglik_ratio(self, theta, theta_new, idx):
        if self._store_backed:
            return self._rows_model(idx)._loglik_ratio(theta, theta_new,
                                                       np.arange(idx.shape[0]))
        shift = self.proxy_total(theta, theta_new) / self._rows_total
        if self._kernels is None:
            fused = getattr(self.model, "residual_ratio", None)   # one call (JaxModel)
            if callable(fused):
                return np.asarray(fused(theta, theta_new, idx, self._theta_c, self.order),
                                  dtype=float) + shift
            return (loglik_ratio(self.model, theta, theta_new, idx)
                    - (self._user_proxy(theta_new, idx) - self._user_proxy(theta, idx)) + shift)
        out = np.empty(idx.shape[0])
        batch_ratio(self._row_ratio, self._row_prefetch)(self._data(shift, theta, theta_new), idx,
                                                         theta, theta_new, out)
        return out

    @property
    def loglik_many(self):
        """``loglik_many(thetas, idx)``: the wrapper's per-datum log-likelihoods of rows
        ``idx`` at k parameter vectors, shape (len(idx), k), each column equal to
        :meth:`loglik` bit for bit; None where there is no such kernel: around a user's
        model, a :class:`~samplers.models.RowModel`, or a GLM whose family parameter is
        estimated (the passes then make one ``loglik_ratio`` call per pair). On a
        store-backed model the rows ``idx`` are read once (``read_rows``) for all vectors,
        and a cluster pass runs the same kernel on each worker's in-memory block.

        ``design.TrialChain.from_model`` summarises every trial pair from it in one pass
        over the data: the l_i of pair p are the difference of two columns, so each row's
        link at the center and the predictor of each distinct vector are computed once,
        where a pass of ``loglik_ratio`` per pair computes three predictors and two links
        per pair and row (at 40 chained pairs, about 40 times the work).

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, LogisticRegression
        >>> rng = np.random.default_rng(0)
        >>> X = np.column_stack([np.ones(500), rng.normal(size=500)])
        >>> y = (rng.random(500) < 0.5).astype(float)
        >>> cv = ControlVariates(LogisticRegression(X, y))
        >>> thetas = cv.center.theta + np.array([[0.0, 0.0], [0.05, -0.02]])
        >>> bool(np.array_equal(cv.loglik_many(thetas, np.arange(500))[:, 1],
        ...                     cv.loglik(thetas[1], np.arange(500))))
        True
        """
        glm = self._glm
        if glm is None or glm.nuisance:             # scalar-eta GLMs only
            return None
        kernel = _cv_loglik_many(glm.link, glm.derivs, glm.scatter)

        def loglik_many(thetas, idx):
            thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
            if thetas.ndim != 2 or thetas.shape[1] != self.dim:
                raise ValueError(f"thetas must have shape (k, {self.dim}), got {thetas.shape}")
            idx = self._check_idx(idx)
            if self._store_backed:      # the rows read once, then the in-memory kernel
                return self._rows_model(idx).loglik_many(thetas, np.arange(idx.shape[0]))
            shifts = np.array([self._proxy_sum(t) / self._rows_total for t in thetas])
            out = np.empty((idx.shape[0], thetas.shape[0]))
            data, thetas_t = self._data(0.0), np.ascontiguousarray(thetas.T)

            def rows(c0, c1):       # each row's entries its own: the same bits on any thread
                lo, hi = c0 * _MANY_ROWS, min(c1 * _MANY_ROWS, idx.shape[0])
                kernel(data, idx[lo:hi], thetas_t, shifts, out[lo:hi])

            run_chunks(rows, n_chunks(idx.shape[0], _MANY_ROWS))
            return out

        return loglik_many

    def _grad_loglik(self, theta, idx):
        if self._store_backed:
            return self._rows_model(idx)._grad_loglik(theta, np.arange(idx.shape[0]))
        shift = self._proxy_grad(theta) / self._rows_total
        if self._kernels is None:
            c = self._theta_c
            G = self._row_grads_user(theta, idx) - self._row_grads_user(c, idx)
            if self.order == 2:
                Hs = np.asarray(self._user_hess(c, idx), dtype=float).reshape(-1, self.dim, self.dim)
                G -= Hs @ (theta - c)
            return G + shift
        out = np.empty((idx.shape[0], self.dim))
        batch_grad(self._row_grad, self._row_prefetch)(self._data(0.0), idx, theta, out)
        out += shift
        return out

    def _user_proxy(self, theta, idx):
        """``hat l_i(theta) - l_i(theta*)`` for a user's model (rows' derivatives at theta*)."""
        c = self._theta_c
        u = theta - c
        value = self._row_grads_user(c, idx) @ u
        if self.order == 2:
            Hs = np.asarray(self._user_hess(c, idx), dtype=float).reshape(-1, self.dim, self.dim)
            value += 0.5 * np.einsum("nij,i,j->n", Hs, u, u)
        return value

    @property
    def centre(self) -> TaylorCenter:
        """Alias of :attr:`center` (the attribute's first name, kept for code built on it)."""
        return self.center

    @property
    def taylor_constant(self) -> float:
        """``M = sup |f_i^(order+1)|`` over rows and linear predictors (tempered): ``M3`` at
        order 2, ``M2`` at order 1; the constant of :meth:`residual_bound` (built-in models)."""
        if self._glm is None:
            raise TypeError(f"ControlVariates has no Taylor constant for the user model "
                            f"{type(self.model).__name__}")
        glm = self._glm
        value = glm.m3(self.model) if self.order == 2 else glm.m2(self.model)
        if not math.isfinite(value):
            raise TypeError(f"ControlVariates(order={self.order}) has no residual bound for "
                            f"{self.model!r}: the derivative of order {self.order + 1} of its "
                            "row log-likelihood in the linear predictor is unbounded; use "
                            "ConfidenceTest(range='full-data') or a test that reads no bound")
        return value

    @property
    def max_row_norm(self) -> float:
        """``max_i ||x_i||`` over all N rows (1 for the Gaussian mean; built-in models)."""
        if self._glm is None:
            raise TypeError(f"ControlVariates has no row norms for the user model "
                            f"{type(self.model).__name__}")
        return self._max_row_norm()

    def _max_row_norm(self) -> float:
        """``max_i ||x_i||``: given to :meth:`from_sums`, else one pass (on the executor
        while the construction has one), kept."""
        norm = self.__dict__.get("_row_norm")
        if norm is None:
            cluster = getattr(self, "_cluster", None)
            norm = (float(self._glm.max_row_norm(self.model)) if cluster is None
                    else _row_norm_on(cluster, self.model))
            self._row_norm = norm
        return norm

    def residual_bound(self, theta, theta_new) -> float:
        """B with ``max_i |r_i| <= B`` over all N rows (see Notes), in O(d)."""
        if self._glm is None:
            raise TypeError(f"ControlVariates has no residual bound for the user model "
                            f"{type(self.model).__name__}; use ConfidenceTest(range='full-data')")
        theta = np.asarray(theta, dtype=float)
        theta_new = np.asarray(theta_new, dtype=float)
        return self._ratio_range(self._range_data(), theta, theta_new)[1]

    #: ``(P / N, B)`` from :meth:`_range_data` (jitted; the compiled chain loop calls it too).
    _ratio_range = staticmethod(cv_ratio_range)

    def _range_data(self):
        return (self._g, self._H, self._theta_c, self._order2, float(self._rows_total),
                float(self.taylor_constant), self.max_row_norm)

    def _loglik_ratio_range(self, theta, theta_new):
        if not self._bounded:
            self.residual_bound(theta, theta_new)   # raises the TypeError that says why
        return self._ratio_range(self._range_data(), theta, theta_new)

    def _loglik_ratio_bound(self, theta, theta_new):
        center, half = self._loglik_ratio_range(theta, theta_new)
        return abs(center) + half

    def loglik_ratio_range(self, theta, theta_new) -> tuple[float, float]:
        """``(P/N, B)``: every row's ratio lies in ``[P/N - B, P/N + B]`` (see Notes)."""
        if self._loglik_ratio_range is None:
            self.residual_bound(theta, theta_new)  # raises the TypeError that says why
        return self._loglik_ratio_range(self._check_theta("theta", theta),
                                        self._check_theta("theta_new", theta_new))

    def loglik_ratio_bound(self, theta, theta_new) -> float:
        """``|P/N| + B >= max_i |r_i + P/N|`` (the protocol's bound; see Notes)."""
        center, half = self.loglik_ratio_range(theta, theta_new)
        return abs(center) + half

    def logprior(self, theta) -> float:
        return float(self.model.logprior(np.asarray(theta, dtype=float)))

    def grad_logprior(self, theta) -> np.ndarray:
        return self._prior_grad(np.asarray(theta, dtype=float))

    def __repr__(self):
        return (f"ControlVariates({type(self.model).__name__}(N={self.N}, dim={self.dim}), "
                f"order={self.order}, center={self.center.method}, offset={self.center.offset:.3g})")


def _ascent_direction(grad, hess) -> np.ndarray:
    """Newton direction ``(-H)^-1 g``; where ``-H`` is not positive definite its eigenvalues
    are taken in absolute value (floored), so the direction still ascends."""
    try:
        factor = np.linalg.cholesky(-hess)
        return np.linalg.solve(factor.T, np.linalg.solve(factor, grad))
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(-hess)
        w = np.maximum(np.abs(w), 1e-8 * max(float(np.abs(w).max()), 1e-300))
        return V @ ((V.T @ grad) / w)
