"""Compiled kernels of the correction tables.

A correction table stores a piecewise-linear density on a uniform grid ``x0 + k h`` that is
zero at both ends, i.e. a mixture of triangles ("hats") of half-width ``h`` centred on the
grid nodes, with masses ``h * density[k]``. Everything the tables need at run time reduces
to three scalar functions, compiled here once and shared by the Python methods and by the
compiled loops of the samplers:

* :func:`ppf_kernel`: inverse cdf of the piecewise-linear density (sampling);
* :func:`cdf_kernel`: its cdf (piecewise quadratic);
* :func:`hat_normal_cdf`: cdf of a hat plus an independent ``N(0, tau^2)`` variable, in
  closed form, from which the convolution of a table with a Gaussian follows.

All kernels take plain floats and arrays so that a numba-compiled caller can use them.
"""

from __future__ import annotations

import math

import numpy as np

from ._lib.jit import jit

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@jit
def _ndtr(v):
    return 0.5 * math.erfc(-v / _SQRT2)


@jit
def _npdf(v):
    return _INV_SQRT_2PI * math.exp(-0.5 * v * v)


@jit
def _i2(v):
    """Second antiderivative of the normal cdf, ``((v^2 + 1) Phi(v) + v phi(v)) / 2``."""
    return 0.5 * ((v * v + 1.0) * _ndtr(v) + v * _npdf(v))


#: Below this ratio h / tau the hat kernels use their Taylor series in (h / tau)^2, whose
#: five terms are exact to rounding there; above it the closed forms lose at most
#: ``(tau / h)^2 * 1e-16 < 4e-14`` to cancellation.
_SERIES_BELOW = 0.05


@jit
def _hat_series(v, r2, first):
    """``sum_k 2 r^(2k-2) He_{2k-2+first}(v) / (2k)!`` over k = 1..5 with ``2k-2+first >= 0``.

    The second difference ``[f(z+h) - 2 f(z) + f(z-h)] / h^2`` of a smooth ``f`` is
    ``sum_k 2 h^(2k-2) f^(2k)(z) / (2k)!``; for ``f'' = Phi(z/tau)`` and
    ``f = tau^2 phi(z/tau)`` the
    derivatives are Hermite polynomials times ``phi(v)``: ``first = -1`` gives the
    ``k >= 2`` terms of the cdf kernel (``He_{2k-3}``), ``first = 2`` the skew kernel
    (``He_{2k}``).
    """
    he_prev, he = 1.0, v           # He_0, He_1
    n = 1
    total = 0.0
    fact = 2.0                     # (2k)! for k = 1
    power = 1.0                    # r^(2k-2)
    for k in range(1, 6):
        target = 2 * k - 2 + first
        while n < target:
            he_prev, he = he, v * he - n * he_prev
            n += 1
        if target >= 0:
            term = he if target == n else he_prev
            total += 2.0 * power * term / fact
        power *= r2
        fact *= (2 * k + 1) * (2 * k + 2)
    return total


@jit
def hat_normal_cdf(z, h, tau):
    """``P(T + G <= z)`` for a triangle ``T`` on ``[-h, h]`` and ``G ~ N(0, tau^2)``.

    The hat has second derivative ``(delta_{-h} - 2 delta_0 + delta_h) / h^2``, so the cdf
    is a second difference of the second antiderivative of ``Phi(./tau)``. It is evaluated
    at ``-|z|`` (where every term is small and positive) and reflected; for
    ``h < 0.05 tau`` the second difference is replaced by its Taylor series.
    """
    a = -abs(z)
    if tau > h / _SERIES_BELOW:
        v = a / tau
        val = _ndtr(v) - _npdf(v) * _hat_series(v, (h / tau) ** 2, -1)
    elif tau > 1e-8 * h:
        val = (tau / h) ** 2 * (_i2((a + h) / tau) - 2.0 * _i2(a / tau) + _i2((a - h) / tau))
    elif a > -h:
        val = 0.5 * ((a + h) / h) ** 2
    else:
        val = 0.0
    return 1.0 - val if z > 0.0 else val


@jit
def hat_normal_d2(z, h, tau):
    """``int phi''((z - y) / tau) tri_h(y) dy``, the skew kernel of the Edgeworth limit.

    Equal to ``(tau / h)^2 [phi((z + h)/tau) - 2 phi(z/tau) + phi((z - h)/tau)]`` by the same
    second-difference identity as :func:`hat_normal_cdf` (Taylor series for
    ``h < 0.05 tau``); requires ``tau > 0``.
    """
    if tau > h / _SERIES_BELOW:
        v = z / tau
        return _npdf(v) * _hat_series(v, (h / tau) ** 2, 2)
    return (tau / h) ** 2 * (_npdf((z + h) / tau) - 2.0 * _npdf(z / tau) + _npdf((z - h) / tau))


@jit
def hat_normal_cdf_array(z, h, tau, out):
    """Vectorised :func:`hat_normal_cdf` into ``out``."""
    for i in range(z.shape[0]):
        out[i] = hat_normal_cdf(z[i], h, tau)
    return out


@jit
def hat_normal_d2_array(z, h, tau, out):
    """Vectorised :func:`hat_normal_d2` into ``out``."""
    for i in range(z.shape[0]):
        out[i] = hat_normal_d2(z[i], h, tau)
    return out


@jit
def ppf_kernel(u, x0, h, density, cdf):
    """Inverse cdf at ``u`` in [0, 1) of a piecewise-linear density on ``x0 + k h``.

    Parameters
    ----------
    u : float
        A uniform draw.
    x0, h : float
        First grid node and grid spacing.
    density : ndarray
        Density at the nodes (non-negative, zero at both ends).
    cdf : ndarray
        The cdf at the nodes (``cdf[0] = 0``, ``cdf[-1]`` the total mass, 1 up to
        rounding).

    Returns
    -------
    float
        The quantile: binary search for the cell, then the root of the quadratic cdf in
        that cell in the cancellation-free form ``2 r / (d0 + sqrt(d0^2 + 2 s r))``.
    """
    n = cdf.shape[0]
    target = u * cdf[n - 1]
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if cdf[mid] <= target:
            lo = mid
        else:
            hi = mid
    rem = target - cdf[lo]
    d0 = density[lo]
    slope = (density[lo + 1] - d0) / h
    disc = d0 * d0 + 2.0 * slope * rem
    if disc < 0.0:
        disc = 0.0
    denom = d0 + math.sqrt(disc)
    t = 2.0 * rem / denom if denom > 0.0 else 0.0
    if t > h:
        t = h
    return x0 + lo * h + t


@jit
def ppf_array(u, x0, h, density, cdf, out):
    """Vectorised :func:`ppf_kernel` into ``out``."""
    for i in range(u.shape[0]):
        out[i] = ppf_kernel(u[i], x0, h, density, cdf)
    return out


@jit
def cdf_kernel(y, x0, h, density, cdf):
    """Cdf at ``y`` of the piecewise-linear density (see :func:`ppf_kernel`)."""
    n = density.shape[0]
    pos = (y - x0) / h
    if pos != pos:  # NaN in, NaN out
        return pos
    if pos <= 0.0:
        return 0.0
    if pos >= n - 1:
        return cdf[n - 1]
    k = int(pos)
    t = (pos - k) * h
    d0 = density[k]
    slope = (density[k + 1] - d0) / h
    return cdf[k] + t * (d0 + 0.5 * slope * t)


@jit
def cdf_array(y, x0, h, density, cdf, out):
    """Vectorised :func:`cdf_kernel` into ``out``."""
    for i in range(y.shape[0]):
        out[i] = cdf_kernel(y[i], x0, h, density, cdf)
    return out


@jit
def convolved_cdf_kernel(z, x0, h, density, nodes, tau):
    """Cdf at ``z`` of ``G + X`` with ``G ~ N(0, tau^2)`` and ``X`` the table's variable.

    ``nodes`` lists the indices of the non-zero densities; the sum runs over them only, so
    the cost is O(number of non-zero nodes).
    """
    total = 0.0
    for j in nodes:
        total += h * density[j] * hat_normal_cdf(z - (x0 + j * h), h, tau)
    return total


@jit
def convolved_cdf_array(z, x0, h, density, nodes, tau, out):
    """Vectorised :func:`convolved_cdf_kernel` into ``out``."""
    for i in range(z.shape[0]):
        out[i] = convolved_cdf_kernel(z[i], x0, h, density, nodes, tau)
    return out


@jit
def skew_ppf_kernel(eta, u_mix, u, x0, h, skew_step, density, cdf):
    """A draw of the skew-corrected correction at skew ``eta`` from two uniforms.

    ``density`` and ``cdf`` are ``(n_skew, n_x)`` arrays tabulated at
    ``eta_k = k * skew_step >= 0``; ``|eta|`` is located between two rows and the row is
    picked with the linear-interpolation weight (``u_mix``), i.e. the draw comes from the
    mixture of the two neighbouring tables. Skews beyond the last row use the last row.
    Negative skews use the mirror image (``C_{-eta}(y) = C_eta(-y)``).
    """
    n_skew = density.shape[0]
    pos = abs(eta) / skew_step
    if pos >= n_skew - 1:
        row = n_skew - 1
    else:
        k = int(pos)
        row = k + 1 if u_mix < pos - k else k
    draw = ppf_kernel(u, x0, h, density[row], cdf[row])
    return -draw if eta < 0.0 else draw


@jit
def skew_ppf_array(eta, u_mix, u, x0, h, skew_step, density, cdf, out):
    """Vectorised :func:`skew_ppf_kernel` (one ``eta``) into ``out``."""
    for i in range(u.shape[0]):
        out[i] = skew_ppf_kernel(eta, u_mix[i], u[i], x0, h, skew_step, density, cdf)
    return out


def node_cdf(density: np.ndarray, h: float) -> np.ndarray:
    """Cdf of piecewise-linear densities (along the last axis) at their nodes (exact)."""
    cells = 0.5 * h * (density[..., 1:] + density[..., :-1])
    zero = np.zeros(density.shape[:-1] + (1,))
    return np.concatenate([zero, np.cumsum(cells, axis=-1)], axis=-1)
