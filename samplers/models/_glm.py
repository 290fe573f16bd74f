"""The built-in models seen as generalised linear models, for control variates.

Each row log-likelihood of these models is a function of one linear predictor,
``l_i(theta) = f_i(eta_i)`` with ``eta_i = x_i . theta`` (``x_i = 1`` for
:class:`~samplers.GaussianMean`), so its gradient is ``f_i'(eta_i) x_i`` and its Hessian
``f_i''(eta_i) x_i x_i^T``. A :class:`GLMKernels` entry gives, for one model class (for
:class:`~samplers.models.glm.GLM`, one family and link: ``_PER_INSTANCE``), small
inlined row kernels over the model's own ``_kernel_data()`` tuple (temperature included):

* ``dots3(data, i, u, v, w) -> (x_i . u, x_i . v, x_i . w)``, reading row i once;
* ``link(data, i, eta) -> f_i(eta)``;
* ``derivs(data, i, eta) -> (f_i'(eta), f_i''(eta))``;
* ``scatter(data, i, w, out)``, ``out = w x_i``;

:func:`glm_sums` runs them over all rows (the sums of the log-likelihoods, gradients and
Hessians that the mode searches and the control variates need) in one compiled pass on every
core; and, in Python, ``design(model, start, stop)`` (rows ``x_i`` as a float64 block),
``max_row_norm(model)`` and the suprema
``m2 = sup |f''|``, ``m3 = sup |f'''|`` over eta and rows (for the residual bound).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Callable, NamedTuple

import numpy as np

from design._lib.distribute import as_cluster, map_ranges, recipe_of
from design._lib.jit import jit, row_jit
from design._lib.passes import n_chunks, run_chunks
from ._base import pass_blocks
from ._kernels import rows_dot
from .gaussian import GaussianMean
from .glm import GLM, _nuisance_row_kernels, _nuisance_step_kernels, _row_kernels
from .linear import LinearRegression
from .logistic import LogisticRegression, log_sigmoid
from .robust import RobustRegression, t_log_density, t_score

__all__ = ["GLMKernels", "glm_kernels", "glm_sums"]


class GLMKernels(NamedTuple):
    dots3: Callable
    link: Callable
    derivs: Callable
    scatter: Callable
    design: Callable
    max_row_norm: Callable
    m2: Callable
    m3: Callable
    #: True for a GLM whose family parameter s = theta[d] is estimated: then ``link(data, i,
    #: eta, s)`` and ``derivs(data, i, eta, s) -> (f_e, f_s, f_ee, f_es, f_ss)`` take s, and
    #: ``design`` gives the rows ``(x_i, 1)`` (the gradient's direction in theta).
    nuisance: bool = False
    #: ``ratio(data, i, eta, eta_new) -> link(.., eta_new) - link(.., eta)`` (with s: ``ratio(data,
    #: i, eta, eta_new, s, s_new)``) computed without the terms of the link that cancel, or
    #: None: the control variates' ratio is then the difference of two links.
    ratio: Callable | None = None
    #: Optional, for a GLM with s estimated: ``step(s, s_new, s_c) -> c``, the family's
    #: per-step constants (of theta, theta' and the centre alone), and ``ratio_at(data, i,
    #: eta, eta_new, s, s_new, c)`` / ``derivs_at(data, i, eta*, s*, c)``, ``ratio`` and
    #: ``derivs`` at the centre reading them (the same bits): the control variates compute
    #: ``c`` once per decision instead of once per row.
    step: Callable | None = None
    ratio_at: Callable | None = None
    derivs_at: Callable | None = None


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
    X = model.X          # an array read in place, or a row source (a store): its range
    rows = X[start:stop] if isinstance(X, np.ndarray) else X.read_range(start, stop)
    return np.asarray(rows, dtype=np.float64)


def _x1_design(model, start, stop):
    return np.column_stack([_x_design(model, start, stop), np.ones(stop - start)])


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


@cache
def _family_kernels(core, const, derivs, nuisance=False, diff=None, step=None, diff_at=None,
                    derivs_at=None) -> GLMKernels:
    """The GLM kernels of one family and link of :class:`~samplers.models.glm.GLM`: the
    link and derivatives of its row kernels, its suprema from the model (inf where the
    family has none: ``GLM._sup``); with ``nuisance``, those of a family whose parameter is
    estimated (``theta[d]``)."""
    if nuisance:
        rows = _nuisance_row_kernels(core, const, derivs, diff)
    else:
        rows = _row_kernels(core, const, derivs)
    link, derivs_, ratio = rows[3:]
    ratio_at = row_derivs_at = None
    if nuisance and step is not None:
        ratio_at, row_derivs_at = _nuisance_step_kernels(diff_at, derivs_at)
    return GLMKernels(_x_dots3, link, derivs_, _x_scatter,
                      _x1_design if nuisance else _x_design, _x_max_row_norm,
                      m2=lambda m: m._sup("m2"), m3=lambda m: m._sup("m3"), nuisance=nuisance,
                      ratio=ratio, step=step if nuisance else None, ratio_at=ratio_at,
                      derivs_at=row_derivs_at)


#: Models whose GLM kernels depend on the instance (the family), by exact class.
_PER_INSTANCE = {
    GLM: lambda m: _family_kernels(m._spec.core, m._spec.const, m._spec.derivs,
                                   bool(m._spec.nuisance), m._spec.diff, m._spec.step,
                                   m._spec.diff_at, m._spec.derivs_at),
}


def glm_kernels(model) -> GLMKernels | None:
    """The GLM kernels of a built-in model (by exact class), or None."""
    kernels = _REGISTRY.get(type(model))
    if kernels is None:
        of = _PER_INSTANCE.get(type(model))
        return None if of is None else of(model)
    return kernels


# --- sums over all rows: the mode searches' and control variates' one-off passes ------------

#: Rows per chunk of :func:`glm_sums` (one result per chunk, added in chunk order).
SUMS_CHUNK = 1 << 16
#: Chunks per call of the threaded pass (between calls: progress, Ctrl-C).
_GROUP = 16


#: Rows of a chunk the GLM sums handle at a time (their x_i, 64 x d floats, stay in L1).
_SUM_BLOCK = 64


@cache
def _glm_sums_kernel(link, derivs, scatter):
    """Kernel of :func:`glm_sums` (run on every core by
    :func:`design._lib.passes.run_chunks`): for chunks ``c0 <= c < c1`` of ``chunk``
    rows starting at chunk ``base``, ``Ls[c] = sum f_i(eta_i)``, ``gs[c] = sum f_i'(eta_i) x_i`` and, if ``hessian``,
    the lower triangle of ``Hs[c] = sum f_i''(eta_i) x_i x_i^T``, ``eta_i = x_i . theta``.

    A block of rows is copied (``scatter``) into a small buffer, their predictors taken four
    rows side by side (:func:`rows_dot`), and the Hessian updated four rows at a time
    (``H[j, :j+1] += sum_r w_r x_rj x_r[:j+1]``, a contiguous loop the compiler vectorises):
    the O(d^2) per row that dominates at large d runs at the core's arithmetic speed, without
    the threads of a BLAS library (OpenBLAS's threaded ``X.T @ (w X)`` on a chunk slowed a
    hundredfold when another process held a core).
    """

    @jit
    def kernel(inner, theta, N, chunk, hessian, base, Ls, gs, Hs, c0, c1):
        d = theta.shape[0]
        xb = np.zeros((_SUM_BLOCK, d))
        eta = np.empty(_SUM_BLOCK)
        f = np.empty(_SUM_BLOCK)
        f1 = np.empty(_SUM_BLOCK)
        f2 = np.empty(_SUM_BLOCK)
        for c in range(c0, c1):
            g = gs[c]
            H = Hs[c]
            g[:] = 0.0
            H[:, :] = 0.0
            total = 0.0
            end = min((base + c + 1) * chunk, N)
            for b in range((base + c) * chunk, end, _SUM_BLOCK):
                k = min(_SUM_BLOCK, end - b)
                for r in range(k):
                    scatter(inner, b + r, 1.0, xb[r])
                rows_dot(xb, 0, k, theta, eta)
                # separate loops: the branch-free links vectorise, libm's exp in derivs not
                for r in range(k):
                    f[r] = link(inner, b + r, eta[r])
                for r in range(k):
                    total += f[r]
                for r in range(k):
                    f1[r], f2[r] = derivs(inner, b + r, eta[r])
                for r in range(k):
                    w1 = f1[r]
                    x = xb[r]
                    for j in range(d):
                        g[j] += w1 * x[j]
                if hessian:
                    _add_hess_rows(xb, f2, k, H)
            Ls[c] = total

    return kernel


@row_jit
def _add_hess_rows(xb, w, k, H):
    """``H[j, :j+1] += sum_{r<k} w_r x_rj x_r[:j+1]`` for ``j < xb.shape[1]`` (the lower
    triangle), four rows at a time (a contiguous loop the compiler vectorises)."""
    d = xb.shape[1]
    r = 0
    while r + 4 <= k:
        x0, x1, x2, x3 = xb[r], xb[r + 1], xb[r + 2], xb[r + 3]
        w0, w1, w2, w3 = w[r], w[r + 1], w[r + 2], w[r + 3]
        for j in range(d):
            u0, u1, u2, u3 = w0 * x0[j], w1 * x1[j], w2 * x2[j], w3 * x3[j]
            h = H[j]
            for q in range(j + 1):
                h[q] += (u0 * x0[q] + u1 * x1[q]) + (u2 * x2[q] + u3 * x3[q])
        r += 4
    while r < k:
        x0 = xb[r]
        for j in range(d):
            u0 = w[r] * x0[j]
            h = H[j]
            for q in range(j + 1):
                h[q] += u0 * x0[q]
        r += 1


@cache
def _glm_sums_kernel_nuisance(link, derivs, scatter):
    """:func:`_glm_sums_kernel` for a GLM whose family parameter ``s = theta[d]`` is
    estimated (``theta`` of length d + 1): the x-part as there, plus ``g[d] += f_s``,
    ``H[d, :d] += f_es x_i`` and ``H[d, d] += f_ss``."""

    @jit
    def kernel(inner, theta, N, chunk, hessian, base, Ls, gs, Hs, c0, c1):
        d = theta.shape[0] - 1
        s = theta[d]
        xb = np.zeros((_SUM_BLOCK, d))
        eta = np.empty(_SUM_BLOCK)
        f = np.empty(_SUM_BLOCK)
        fe = np.empty(_SUM_BLOCK)
        fs = np.empty(_SUM_BLOCK)
        fee = np.empty(_SUM_BLOCK)
        fes = np.empty(_SUM_BLOCK)
        fss = np.empty(_SUM_BLOCK)
        for c in range(c0, c1):
            g = gs[c]
            H = Hs[c]
            g[:] = 0.0
            H[:, :] = 0.0
            total = 0.0
            end = min((base + c + 1) * chunk, N)
            for b in range((base + c) * chunk, end, _SUM_BLOCK):
                k = min(_SUM_BLOCK, end - b)
                for r in range(k):
                    scatter(inner, b + r, 1.0, xb[r])
                rows_dot(xb, 0, k, theta, eta)
                for r in range(k):
                    f[r] = link(inner, b + r, eta[r], s)
                for r in range(k):
                    total += f[r]
                for r in range(k):
                    fe[r], fs[r], fee[r], fes[r], fss[r] = derivs(inner, b + r, eta[r], s)
                for r in range(k):
                    w1 = fe[r]
                    x = xb[r]
                    for j in range(d):
                        g[j] += w1 * x[j]
                    g[d] += fs[r]
                if not hessian:
                    continue
                _add_hess_rows(xb, fee, k, H)
                h = H[d]
                for r in range(k):
                    w2 = fes[r]
                    x = xb[r]
                    for j in range(d):
                        h[j] += w2 * x[j]
                    h[d] += fss[r]
            Ls[c] = total

    return kernel


def _sums_kernel(glm):
    """The compiled per-chunk sums of a GLM's kernels (with the family parameter's row and
    column when it is estimated)."""
    return (_glm_sums_kernel_nuisance if glm.nuisance else _glm_sums_kernel)(
        glm.link, glm.derivs, glm.scatter)


def glm_sums(model, theta, *, hessian=True, progress=None, chunk=None, executor=None,
             range_rows=None):
    """``(sum_i l_i, sum_i grad l_i, sum_i hess l_i)`` at ``theta`` over all N rows of a
    built-in GLM (``glm_kernels(model)`` not None), in one pass on every core; ``(L, None,
    None)`` with L not finite as soon as a chunk's sum of log-likelihoods is not finite.

    Chunks of ``chunk`` rows (default :data:`SUMS_CHUNK`) run through :func:`_glm_sums_kernel` on
    :func:`design._lib.passes.run_chunks`, :data:`_GROUP` chunks per call (``progress(rows)``
    and Ctrl-C between calls), and their sums are added in chunk order, so the result does not
    depend on the number of threads. The Hessian is exactly symmetric; ``hessian=False``
    gives a zero one (and the same L and gradient).

    With ``executor`` (a ``dask.distributed.Client``, its executor, or any
    ``concurrent.futures.Executor``) the chunks run on its workers, about ``range_rows`` rows
    per task (:func:`design._lib.distribute.map_ranges`; each task rebuilds its rows with
    ``model.block_recipe``); the tasks return their per-chunk sums, added here in chunk
    order: the same bits as the local pass.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import LinearRegression
    >>> X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]); y = np.array([0.0, 1.0, 1.0])
    >>> L, g, H = glm_sums(LinearRegression(X, y, noise_sd=1.0), np.zeros(2))
    >>> g.tolist(), H.tolist()      # X'(y - X theta) and -X'X for unit noise
    ([2.0, 3.0], [[-3.0, -3.0], [-3.0, -5.0]])
    """
    glm = glm_kernels(model)
    if glm is None:
        raise TypeError(f"glm_sums needs a built-in GLM, got {type(model).__name__}")
    kernel = _sums_kernel(glm)
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    chunk = SUMS_CHUNK if chunk is None else chunk
    d = theta.shape[0]
    cluster = as_cluster(executor)
    if cluster is not None:
        return _glm_sums_on(cluster, model, theta, hessian, progress, chunk, range_rows)
    L, g, H = 0.0, np.zeros(d), np.zeros((d, d))
    # one block (the model) for data read in place; blocks of whole chunks from a store, so
    # the chunks, and the order their sums are added in, are the in-memory pass's
    for _, block in pass_blocks(model, chunk):
        inner = block._kernel_data()
        N = block.N
        count = n_chunks(N, chunk)
        for first in range(0, count, _GROUP):
            last = min(first + _GROUP, count)
            Ls = np.empty(last - first)
            gs = np.empty((last - first, d))
            Hs = np.empty((last - first, d, d) if hessian else (last - first, 0, 0))
            run_chunks(kernel, last - first, inner, theta, N, chunk, hessian, first, Ls, gs, Hs)
            for c in range(last - first):
                if not math.isfinite(Ls[c]):
                    return float(Ls[c]), None, None
                L += Ls[c]
                g += gs[c]
                if hessian:
                    H += Hs[c]
            if progress is not None:
                progress(min(last * chunk, N) - first * chunk)
    return L, g, np.tril(H) + np.tril(H, -1).T


def glm_chunk_sums(model, theta, hessian, chunk, first=0, last=None):
    """Per-chunk ``(Ls, gs, Hs)`` of :func:`glm_sums` for chunks ``first <= c < last`` (all
    of the model's by default): one call of the compiled kernel on every core."""
    kernel = _sums_kernel(glm_kernels(model))
    d = theta.shape[0]
    last = n_chunks(model.N, chunk) if last is None else last
    Ls = np.empty(last - first)
    gs = np.empty((last - first, d))
    Hs = np.empty((last - first, d, d) if hessian else (last - first, 0, 0))
    run_chunks(kernel, last - first, model._kernel_data(), theta, model.N, chunk, hessian,
               first, Ls, gs, Hs)
    return Ls, gs, Hs


class _NotFinite(Exception):
    """Stops a distributed pass at the first chunk whose log-likelihood is not finite."""


def _glm_sums_on(cluster, model, theta, hessian, progress, chunk, range_rows):
    """:func:`glm_sums` with the chunks on ``cluster``, merged in chunk order."""
    d = theta.shape[0]
    acc = {"L": 0.0, "g": np.zeros(d), "H": np.zeros((d, d))}

    def merge(start, stop, result):
        Ls, gs, Hs = result
        for c in range(Ls.shape[0]):
            if not math.isfinite(Ls[c]):
                acc["L"] = float(Ls[c])
                raise _NotFinite
            acc["L"] += Ls[c]
            acc["g"] += gs[c]
            if hessian:
                acc["H"] += Hs[c]
        if progress is not None:
            progress(stop - start)

    try:
        map_ranges(cluster, recipe_of(model), glm_chunk_sums, (theta, hessian, chunk), merge,
                   N=model.N, chunk=chunk, range_rows=range_rows, progress=False,
                   desc="log-likelihood sums")
    except _NotFinite:
        return acc["L"], None, None
    H = acc["H"]
    return acc["L"], acc["g"], np.tril(H) + np.tril(H, -1).T
