"""Numerics behind the correction tables: the paper's ridge deconvolution, the minimax
(linear programming) fit, the certified lower bound on the achievable error, and the exact
error of a table on a fine lattice.

Notation: ``sigma`` is the standard deviation of the Gaussian part, ``S`` the standard
logistic cdf, ``K(z)`` the cdf of the Gaussian part (``Phi(z / sigma)`` plus, for the
skew-corrected tables, ``eta phi''(z / sigma)``). A table is a piecewise-linear density on
``x0 + k h``, i.e. hats of half-width ``h`` with masses ``h * density[k]``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, signal, special
from scipy.sparse.linalg import LinearOperator, cg

from . import _kernels


# --- the paper's construction (Seita et al. 2017, eq. 15) ----------------------------------


class RidgeSystem(NamedTuple):
    y: np.ndarray          # the correction grid Y_j = j V / N, j = -N..N
    masses: np.ndarray     # the ridge solution u* (signed)
    raw_linf: float        # max_i |M u* - v|_i on the grid X_i = i V / N, i = -2N..2N
    clipped_linf: float    # the same with the negative entries of u* set to zero
    iterations: int        # conjugate-gradient iterations


def ridge_solve(sigma: float, n: int, lam: float, half_width: float,
                rtol: float = 1e-13) -> RidgeSystem:
    """Solve ``(M^T M + lam I) u = M^T v`` with ``M_ij = Phi((X_i - Y_j) / sigma)``.

    ``M`` is a (4n+1) x (2n+1) Toeplitz matrix, so products with ``M`` and ``M^T`` are FFT
    convolutions. Writing ``Phi = H + (Phi - H)`` with ``H`` the unit step shows
    ``M^T M = T + K`` with ``T`` Toeplitz and ``K_jl = c - max(j, l) = R R^T + const``
    (``R`` the upper-triangular matrix of ones). With ``D = R^{-1}`` (first differences),
    ``D (M^T M + lam I) D^T`` is, up to a low-rank boundary correction, the Toeplitz matrix
    of symbol ``|phi_hat(t)|^2 + lam |1 - e^{it}|^2`` (``phi_hat`` the characteristic
    function of ``N(0, (sigma/h)^2)`` in grid units). Conjugate gradients preconditioned
    with ``D^T C^{-1} D`` (``C`` the circulant of that symbol) therefore converge in a few
    dozen iterations, each costing a handful of FFTs.
    """
    h = half_width / n
    n_y, n_x = 2 * n + 1, 4 * n + 1
    g = special.ndtr(np.arange(-3 * n, 3 * n + 1) * (h / sigma))   # g[k + 3n] = Phi(k h / sigma)
    col = g[np.arange(n_x) + 2 * n]     # M[:, 0]:  X_i - Y_{-n} = (i + n) h,   i = -2n..2n
    row = g[2 * n - np.arange(n_y)]     # M[0, :]:  X_{-2n} - Y_j = (-2n - j) h, j = -n..n
    nfft = 1 << int(math.ceil(math.log2(n_x + n_y)))
    spectrum = np.fft.rfft(np.concatenate([col, np.zeros(nfft - n_x - n_y + 1), row[:0:-1]]))

    def m_dot(u):
        return np.fft.irfft(spectrum * np.fft.rfft(u, nfft), nfft)[:n_x]

    def mt_dot(r):
        return np.fft.irfft(np.conj(spectrum) * np.fft.rfft(r, nfft), nfft)[:n_y]

    normal = LinearOperator((n_y, n_y), matvec=lambda u: mt_dot(m_dot(u)) + lam * u,
                            dtype=np.float64)
    npre = 1 << int(math.ceil(math.log2(2 * n_y)))
    t = 2.0 * np.pi * np.fft.rfftfreq(npre)
    symbol = np.exp(-((sigma / h) * t) ** 2) + lam * np.abs(1.0 - np.exp(1j * t)) ** 2

    def precondition(r):
        d = r.copy()
        d[:-1] -= r[1:]                                   # D r
        z = np.fft.irfft(np.fft.rfft(d, npre) / symbol, npre)[:n_y]
        out = z.copy()
        out[1:] -= z[:-1]                                 # D^T z
        return out

    x_grid = np.arange(-2 * n, 2 * n + 1) * h
    v = special.expit(x_grid)
    count = [0]

    def tick(_):
        count[0] += 1

    u, info = cg(normal, mt_dot(v), rtol=rtol, maxiter=2000, callback=tick,
                 M=LinearOperator((n_y, n_y), matvec=precondition, dtype=np.float64))
    if info != 0:  # pragma: no cover - the preconditioned system is well conditioned
        raise RuntimeError(f"ridge conjugate gradients did not converge (info={info})")
    raw = float(np.abs(m_dot(u) - v).max())
    clipped = float(np.abs(m_dot(np.maximum(u, 0.0)) - v).max())
    return RidgeSystem(np.arange(-n, n + 1) * h, u, raw, clipped, count[0])


# --- kernels on a lattice -------------------------------------------------------------------


def kernel_on_lattice(offsets: np.ndarray, h: float, sigma: float, eta: float) -> np.ndarray:
    """``K * hat`` at ``offsets``: cdf of a unit-mass hat plus the (skewed) Gaussian part."""
    out = _kernels.hat_normal_cdf_array(offsets, h, sigma, np.empty_like(offsets))
    if eta != 0.0:
        out += eta * _kernels.hat_normal_d2_array(offsets, h, sigma, np.empty_like(offsets))
    return out


def lattice_convolution(x0: float, h: float, density: np.ndarray, sigma: float, kernel,
                        fine: float = 0.005) -> tuple[np.ndarray, np.ndarray]:
    """``(z, sum_j h density_j kernel(z - x_j))`` on a lattice of spacing ``<= fine``.

    The lattice (spacing ``h / ceil(h / fine)``, so the nodes lie on it) extends
    ``12 sigma`` past the table at both ends; the sum is one FFT convolution.
    """
    o = max(1, math.ceil(h / fine - 1e-9))
    hf = h / o
    n = density.shape[0]
    pad = math.ceil(12.0 * sigma / hf)
    n_up = (n - 1) * o + 1
    up = np.zeros(n_up)
    up[::o] = h * density
    k_len = n_up + 2 * pad
    kern = kernel((np.arange(k_len + n_up - 1) - (n_up - 1) - pad) * hf)
    conv = signal.fftconvolve(up, kern)[n_up - 1: n_up - 1 + k_len]
    return x0 + (np.arange(k_len) - pad) * hf, conv


def lattice_error(x0: float, h: float, density: np.ndarray, sigma: float, eta: float = 0.0,
                  fine: float = 0.005) -> tuple[float, float]:
    """``sup_z |(K * C)(z) - S(z)|`` for the table ``C``, and where it is attained.

    Exact on the lattice of :func:`lattice_convolution`; beyond it the error is below
    ``S(-|z|)`` at its ends, which is included as a bound.
    """
    z, f = lattice_convolution(x0, h, density, sigma,
                               lambda off: kernel_on_lattice(off, h, sigma, eta), fine)
    err = np.abs(f - special.expit(z))
    i = int(np.argmax(err))
    tail = float(special.expit(-max(abs(z[0]), abs(z[-1]))))
    return max(float(err[i]), tail), float(z[i])


def skew_kernel_sup(x0: float, h: float, density_difference: np.ndarray, sigma: float,
                    fine: float = 0.005) -> float:
    """``sup_z |(phi''(./sigma) * D)(z)|`` for a signed piecewise-linear ``D``."""
    _, f = lattice_convolution(
        x0, h, density_difference, sigma,
        lambda off: _kernels.hat_normal_d2_array(off, h, sigma, np.empty_like(off)), fine)
    return float(np.abs(f).max())


# --- the minimax fit ------------------------------------------------------------------------


class MinimaxFit(NamedTuple):
    nodes: np.ndarray      # j of the grid x_j = j h, j = -J..J
    masses: np.ndarray     # hat masses at the nodes (non-negative, sum 1, zero at the ends)
    check_x: np.ndarray    # the points where the error was constrained
    dual: np.ndarray       # the LP dual weights on those points (error sign included)
    rounds: int


#: HiGHS settings tried in turn: dual simplex with tight tolerances first; it occasionally
#: stops with a numerical "solve error", and the looser settings then take over.
_HIGHS_TIERS = (
    ("highs-ds", 1e-10),
    ("highs-ds", 1e-9),
    ("highs-ipm", 1e-9),
    ("highs", 1e-7),
)


def _solve_minimax(a: np.ndarray, target: np.ndarray, weights: np.ndarray,
                   base: np.ndarray | None):
    """``min_q max_i |a q - target|`` s.t. ``q >= 0``, ``weights . q = 1``, by HiGHS.

    With ``base`` the problem is solved for the update ``q - base`` scaled to the current
    residual (iterative refinement: the solver's absolute tolerances then act on the
    residual, not on the cdf itself). Returns ``(q, eps, dual, tolerance)`` or None.
    """
    m, n = a.shape
    if base is None:
        base = np.zeros(n)
        resid, scale = target, 1.0
    else:
        resid = target - a @ base
        scale = float(np.abs(resid).max())
    r = resid / scale
    ones = np.ones((m, 1))
    problem = dict(
        c=np.r_[np.zeros(n), 1.0],
        A_ub=np.block([[a, -ones], [-a, -ones]]), b_ub=np.r_[r, -r],
        A_eq=np.r_[weights, 0.0][None, :], b_eq=[(1.0 - weights @ base) / scale],
        bounds=np.c_[np.r_[np.maximum(-base / scale, -1e4), 0.0], np.full(n + 1, np.inf)],
    )
    for method, tol in _HIGHS_TIERS:
        res = optimize.linprog(**problem, method=method, options={
            "primal_feasibility_tolerance": tol, "dual_feasibility_tolerance": tol})
        if res.status == 0:
            break
    else:  # pragma: no cover - every tier failed
        return None
    q = np.maximum(base + scale * res.x[:n], 0.0)
    q /= weights @ q
    marg = res.ineqlin.marginals
    return q, float(res.x[n] * scale), marg[m:] - marg[:m], tol


def minimax_fit(sigma: float, h: float, half_width: float, eta: float = 0.0,
                check: int = 1, max_rounds: int = 3) -> MinimaxFit:
    """The non-negative hat mixture minimising the largest cdf error on a check lattice.

    Nodes ``x_j = j h`` for ``|j| <= J = round(half_width / h)`` (the density vanishes at
    ``+-J``); the error ``(K * C)(x) - S(x)`` is constrained at ``x_i = i h / check`` for
    ``|x_i| <= half_width + 10 sigma``. For ``eta = 0`` the problem is symmetric and only
    ``x > 0`` and one hat of each pair ``+-x_j`` are kept: averaging any solution with its
    mirror image does not increase the error, so nothing is lost. The LP is re-solved on its
    own residual (iterative refinement) when its error is within 100 times the solver's
    tolerance, as long as that improves it.
    """
    big_j = int(round(half_width / h))
    big_i = int(math.ceil((half_width + 10.0 * sigma) * check / h))
    hc = h / check
    if eta == 0.0:
        i = np.arange(1, big_i + 1)
        j = np.arange(0, big_j)
        offs = np.arange(-(big_i + check * big_j), big_i + check * big_j + 1)
        lat = kernel_on_lattice(offs * hc, h, sigma, 0.0)
        base = big_i + check * big_j
        a = lat[i[:, None] - check * j[None, :] + base]
        a[:, 1:] += lat[i[:, None] + check * j[None, 1:] + base]
        weights = np.where(j == 0, 1.0, 2.0)
    else:
        i = np.arange(-big_i, big_i + 1)
        j = np.arange(-big_j + 1, big_j)
        offs = np.arange(-(big_i + check * big_j), big_i + check * big_j + 1)
        lat = kernel_on_lattice(offs * hc, h, sigma, eta)
        a = lat[i[:, None] - check * j[None, :] + big_i + check * big_j]
        weights = np.ones(j.size)
    x = i * hc
    target = special.expit(x)
    first = _solve_minimax(a, target, weights, None)
    if first is None:  # pragma: no cover - the problem is always feasible and bounded
        raise RuntimeError("the minimax linear program failed")
    q, eps, dual, tol = first
    exact = float(np.abs(a @ q - target).max())
    rounds = 1
    # Within 100x of the solver's tolerance the tolerance may have stopped it short (in
    # feasibility or optimality): re-solve on the residual while that improves the error.
    while rounds < max_rounds and exact < 100.0 * tol:
        refined = _solve_minimax(a, target, weights, q)
        rounds += 1
        if refined is None:
            break
        new_exact = float(np.abs(a @ refined[0] - target).max())
        if new_exact >= 0.99 * exact:
            break
        (q, eps, dual, tol), exact = refined, new_exact
    nodes = np.arange(-big_j, big_j + 1)
    masses = np.zeros(nodes.size)
    if eta == 0.0:
        masses[big_j + j] = q
        masses[big_j - j[1:]] = q[1:]
    else:
        masses[big_j + j] = q
    masses /= masses.sum()
    return MinimaxFit(nodes, masses, x, dual, rounds)


# --- the certified floor --------------------------------------------------------------------


def _sup_with_curvature(f, lo: float, hi: float, step: float, curvature: float,
                        tol: float) -> float:
    """Rigorous upper bound on ``sup_[lo, hi] f`` given ``|f''| <= curvature``.

    On a cell of width ``d`` the function exceeds the larger endpoint value by at most
    ``curvature d^2 / 8``; cells that could hold the maximum are split 16-fold until that
    slack is below ``tol``.
    """
    edges = np.arange(lo, hi + step, step)
    vals = f(edges)
    best = float(vals.max())
    cells = np.c_[edges[:-1], edges[1:]]
    cvals = np.c_[vals[:-1], vals[1:]]
    d = step
    while curvature * d * d / 8.0 > tol:
        keep = cvals.max(axis=1) + curvature * d * d / 8.0 > best
        cells = cells[keep]
        d /= 16.0
        pts = cells[:, :1] + d * np.arange(17)[None, :]
        pv = f(pts.ravel()).reshape(pts.shape)
        best = max(best, float(pv.max()))
        cells = np.stack([pts[:, :-1].ravel(), pts[:, 1:].ravel()], axis=1)
        cvals = np.stack([pv[:, :-1].ravel(), pv[:, 1:].ravel()], axis=1)
    return best + curvature * d * d / 8.0


def certified_lower_bound(sigma: float, check_x: np.ndarray, dual: np.ndarray) -> float:
    """A lower bound on ``inf_C sup_x |(Phi_sigma * C)(x) - S(x)|`` over all distributions C.

    Weak duality: for weights ``w_i`` at points ``x_i > 0`` and any symmetric C (no loss,
    see :func:`minimax_fit`), ``sum_i w_i E(x_i) <= sup_{a>=0} h(a) - sum_i w_i S(x_i)``
    with ``h(a) = sum_i w_i [Phi((x_i - a)/sigma) + Phi((x_i + a)/sigma)] / 2`` (the error
    of a pair of atoms at +-a), while ``sum_i w_i E(x_i) >= -eps sum_i |w_i|``. Hence
    ``eps >= (sum_i w_i S(x_i) - sup_a h(a)) / sum_i |w_i|`` for every ``w``; the LP's dual
    makes it nearly tight. The supremum over atom positions is bounded rigorously from the
    curvature of ``h`` (``|h''| <= sum |w| phi(1) / sigma^2``).
    """
    keep = dual != 0.0
    x, w = check_x[keep], dual[keep]
    top = float(x.max()) + 12.0 * sigma          # beyond, h(a) is its limit sum(w) / 2
    step = 0.01 * sigma
    curvature = _kernels._npdf(1.0) / sigma ** 2
    best = -np.inf
    for sign in (1.0, -1.0):
        ws = sign * w / np.abs(w).sum()

        def h(a, ws=ws):
            a = np.asarray(a)[:, None]
            return (ws * (special.ndtr((x - a) / sigma) + special.ndtr((x + a) / sigma))).sum(1) / 2

        gain = float(ws @ special.expit(x))
        crude = gain - max(float(h(np.arange(0.0, top + step, step)).max()), 0.5 * float(ws.sum()))
        if crude <= 0.0:
            continue                              # this sign cannot certify anything
        sup = _sup_with_curvature(h, 0.0, top, step, curvature, tol=1e-3 * crude)
        best = max(best, gain - max(sup, 0.5 * float(ws.sum())))
    return best
