"""The correction distribution of the minibatch Barker test, as tables built offline.

The Barker test accepts a proposal iff ``Delta + X_log > 0`` with ``X_log`` standard
logistic. Seita et al. (2017, sec. 3.3-4) split ``X_log = X_norm + X_corr`` with
``X_norm ~ N(0, sigma^2)`` supplied by the minibatch noise of ``Delta*`` (topped up by
``X_nc``) and ``X_corr`` drawn from a *correction* distribution ``C_sigma`` such that
``N(0, sigma^2) * C_sigma`` is the logistic distribution. The test's error is then the
table's error: ``sup_x |(Phi_sigma * C_sigma)(x) - S(x)|`` (their Lemma 4, Corollary 2).

No such distribution exists exactly for any ``sigma > 0``: the logistic characteristic
function ``pi t / sinh(pi t)`` decays like ``exp(-pi |t|)``, so ``C_sigma`` would need the
characteristic function ``pi t / sinh(pi t) exp(sigma^2 t^2 / 2)``, which is unbounded. The
error is therefore bounded below for every distribution; :func:`error_floor` certifies the
bound and :func:`build` gets within 16 % of it at ``sigma = 1`` (``5.3e-8``, against the
paper's ``8.9e-4``) and 5 % at ``sigma = 1.1``; see ``docs/correction.md``.

Contents
--------
At run time (this module: NumPy and the compiled kernels, what a sampler imports):

:class:`CorrectionTable`, :func:`default`
    A non-negative piecewise-linear density on a uniform grid with its cdf, inverse cdf
    sampler (vectorised, and :func:`ppf_kernel` for compiled loops), its convolution with a
    Gaussian, and a versioned, checksummed file format; the shipped ``sigma = 1`` table.
:class:`SkewCorrectionTable`, :func:`default_skew`, :func:`skew_parameter`
    Corrections against the skewed (Edgeworth) limit of the test statistic (appendix A.5).

Offline (``design/_correction_build.py``, SciPy; loaded on first use of one of its names):

:func:`build`, :func:`build_skew`
    Build a table (``method="lp"``: minimax fit; ``method="ridge"``: the paper's eq. 15) or
    a skew family.
:func:`ridge_deconvolution`, :func:`error_floor`
    The paper's construction with its own error measures; the certified floor.

References
----------
Seita, Pan, Chen, Canny (2017), An Efficient Minibatch Acceptance Test for
Metropolis-Hastings, UAI.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from ._lib.checks import (
    as_generator,
    check_finite_array,
    check_interval,
    check_positive,
)

from . import _fileformat, _kernels
from ._kernels import cdf_kernel, convolved_cdf_kernel, ppf_kernel, skew_ppf_kernel

__all__ = [
    "LOGISTIC_SD",
    "CorrectionTable",
    "SamplingArrays",
    "build",
    "default",
    "RidgeSolution",
    "ridge_deconvolution",
    "ErrorFloor",
    "error_floor",
    "SkewCorrectionTable",
    "SkewSamplingArrays",
    "build_skew",
    "default_skew",
    "skew_parameter",
    "ppf_kernel",
    "cdf_kernel",
    "convolved_cdf_kernel",
    "skew_ppf_kernel",
]

#: Standard deviation of the standard logistic distribution, ``pi / sqrt(3)``; ``sigma``
#: must stay below it so that the correction keeps a positive variance.
LOGISTIC_SD = math.pi / math.sqrt(3.0)

_DEFAULT_FILE = "correction_sigma1.npz"
_DEFAULT_SKEW_FILE = "skew_correction_sigma1.npz"


def _check_sigma(sigma) -> float:
    return check_interval("sigma", sigma, 0.0, LOGISTIC_SD)


def _uniform_grid(name: str, x: np.ndarray) -> tuple[float, float]:
    """First node and spacing of ``x``, which must be increasing with equal steps."""
    if x.shape[0] < 3:
        raise ValueError(f"{name} must have at least 3 points, got {x.shape[0]}")
    h = (x[-1] - x[0]) / (x.shape[0] - 1)
    steps = np.diff(x)
    if not h > 0 or np.abs(steps - h).max() > 1e-9 * max(h, np.abs(x).max()):
        raise ValueError(
            f"{name} must be an increasing grid with equal spacing, got spacings from "
            f"{steps.min():.6g} to {steps.max():.6g}"
        )
    return float(x[0]), float(h)


def _check_density(density: np.ndarray, h: float, where: str = "density") -> None:
    if np.any(density < 0):
        raise ValueError(f"{where} must be non-negative; {int(np.sum(density < 0))} negative "
                         f"value(s), the smallest {density.min():.3g}")
    if np.any(density[..., 0] != 0) or np.any(density[..., -1] != 0):
        raise ValueError(f"{where} must be 0 at both ends of the grid (a continuous density)")
    total = _kernels.node_cdf(density, h)[..., -1]
    if np.any(np.abs(total - 1.0) > 1e-8):
        raise ValueError(f"{where} must integrate to 1, got {np.atleast_1d(total).tolist()}")


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    arr.setflags(write=False)
    return arr


def _as_output(values: np.ndarray, like):
    return float(values[0]) if np.ndim(like) == 0 else values.reshape(np.shape(like))


class SamplingArrays(NamedTuple):
    """What compiled code needs to draw from a :class:`CorrectionTable`.

    Pass the fields to :func:`ppf_kernel` as ``ppf_kernel(u, x0, spacing, density, cdf)``.
    """

    x0: float
    spacing: float
    density: np.ndarray
    cdf: np.ndarray


@dataclass(frozen=True, eq=False, repr=False)
class CorrectionTable:
    """A correction distribution ``C_sigma`` stored as a piecewise-linear density.

    Parameters
    ----------
    x : array_like
        Increasing grid with equal spacing ``h``.
    density : array_like
        Density at the nodes, non-negative, zero at both ends, integrating to 1; linear in
        between, zero outside.
    sigma : float
        Standard deviation of the Gaussian part, in ``(0, pi / sqrt(3))``.
    linf_error : float
        ``sup_x |(Phi_sigma * C)(x) - S(x)|``, the error the table adds to a Barker test.
    method : str
        How the table was made (``"lp"``, ``"ridge"`` or anything for a custom table).
    settings : mapping
        The build settings (JSON-serialisable values).
    diagnostics : mapping
        What the build measured (JSON-serialisable values).

    Attributes
    ----------
    cdf_nodes : ndarray
        The cdf at the nodes (exact for the piecewise-linear density).

    Notes
    -----
    The density is a mixture of triangles of half-width ``h`` centred on the nodes, with
    masses ``h * density``; its convolution with ``N(0, tau^2)`` has a closed form
    (:func:`design._kernels.hat_normal_cdf`), which :meth:`convolved_cdf` uses. Sampling
    is by inverse cdf (a binary search and the root of a quadratic), vectorised in
    :meth:`sample` and available to compiled code through :meth:`cdf_arrays` and
    :func:`ppf_kernel`. All arrays are read-only copies.

    Examples
    --------
    >>> import numpy as np
    >>> from design import correction
    >>> table = correction.default()
    >>> table.sigma, table.linf_error < 1e-6
    (1.0, True)
    >>> x = table.sample(100_000, rng=0)
    >>> bool(abs(x.var() - (np.pi**2 / 3 - 1)) < 0.05)
    True
    >>> z = np.linspace(-8, 8, 5)
    >>> bool(np.abs(table.convolved_cdf(z) - 1 / (1 + np.exp(-z))).max() <= table.linf_error)
    True
    """

    x: np.ndarray
    density: np.ndarray
    sigma: float
    linf_error: float
    method: str = "custom"
    settings: Mapping = field(default_factory=dict)
    diagnostics: Mapping = field(default_factory=dict)
    cdf_nodes: np.ndarray = field(init=False)

    def __post_init__(self):
        x = check_finite_array("x", self.x, ndim=1)
        x0, h = _uniform_grid("x", x)
        density = check_finite_array("density", self.density, ndim=1)
        if density.shape != x.shape:
            raise ValueError(f"density must have the shape of x {x.shape}, got {density.shape}")
        _check_density(density, h)
        set_ = functools.partial(object.__setattr__, self)
        set_("x", _frozen(x))
        set_("density", _frozen(density))
        set_("sigma", _check_sigma(self.sigma))
        set_("linf_error", check_positive("linf_error", self.linf_error, allow_zero=True))
        if not isinstance(self.method, str):
            raise TypeError(f"method must be a str, got {self.method!r}")
        set_("settings", MappingProxyType(dict(self.settings)))
        set_("diagnostics", MappingProxyType(dict(self.diagnostics)))
        set_("cdf_nodes", _frozen(_kernels.node_cdf(density, h)))
        set_("_x0", x0)
        set_("_h", h)
        set_("_nonzero", np.flatnonzero(density).astype(np.int64))

    def __reduce__(self):  # the mapping proxies do not pickle; rebuild from the fields
        return (type(self), (self.x, self.density, self.sigma, self.linf_error, self.method,
                             dict(self.settings), dict(self.diagnostics)))

    def __repr__(self):
        return (f"CorrectionTable(sigma={self.sigma:g}, method={self.method!r}, "
                f"linf_error={self.linf_error:.3g}, nodes={self.x.shape[0]}, "
                f"spacing={self._h:g}, support=[{self.x[0]:g}, {self.x[-1]:g}])")

    @property
    def spacing(self) -> float:
        """Grid spacing ``h``."""
        return self._h

    @property
    def mean(self) -> float:
        """Mean of the correction (0 for a symmetric table)."""
        return float(self._h * self.density @ self.x)

    @property
    def variance(self) -> float:
        """Variance of the correction; ``pi^2 / 3 - sigma^2`` for an exact one."""
        second = self._h * self.density @ (self.x ** 2 + self._h ** 2 / 6.0)
        return float(second - self.mean ** 2)

    def pdf(self, y):
        """Density at ``y`` (linear interpolation, zero outside the grid)."""
        return np.interp(y, self.x, self.density, left=0.0, right=0.0)

    def cdf(self, y):
        """Cdf of the correction at ``y``."""
        flat = np.ascontiguousarray(y, dtype=np.float64).ravel()
        out = _kernels.cdf_array(flat, self._x0, self._h, self.density, self.cdf_nodes,
                                 np.empty_like(flat))
        return _as_output(out, y)

    def ppf(self, q):
        """Quantile function (inverse cdf) at ``q`` in [0, 1]."""
        flat = np.ascontiguousarray(q, dtype=np.float64).ravel()
        if np.any(~((flat >= 0) & (flat <= 1))):
            raise ValueError("q must lie in [0, 1]")
        out = _kernels.ppf_array(flat, self._x0, self._h, self.density, self.cdf_nodes,
                                 np.empty_like(flat))
        return _as_output(out, q)

    def sample(self, size=None, rng=None):
        """Draw ``size`` values of ``X_corr`` (one float when ``size`` is None).

        Inverse-cdf sampling from ``rng.random(size)``; about 30-60 ns per draw.
        """
        rng = as_generator(rng)
        u = rng.random(size)
        flat = np.ascontiguousarray(u).ravel()
        out = _kernels.ppf_array(flat, self._x0, self._h, self.density, self.cdf_nodes,
                                 np.empty_like(flat))
        return _as_output(out, u)

    def convolved_cdf(self, z, noise_sd=None):
        """Cdf at ``z`` of ``G + X_corr`` with ``G ~ N(0, noise_sd^2)`` (default ``sigma``).

        With the default this is the table's approximation of the logistic cdf; with
        ``noise_sd = sqrt(sigma^2 - s^2)`` it is the acceptance probability of a Barker test
        given a minibatch whose ``Delta*`` has estimated variance ``s^2``:
        ``P(accept | batch) = 1 - convolved_cdf(-Delta*, noise_sd)``. Cost O(len(z) x
        non-zero nodes).
        """
        tau = self.sigma if noise_sd is None else check_positive("noise_sd", noise_sd,
                                                                  allow_zero=True)
        flat = np.ascontiguousarray(z, dtype=np.float64).ravel()
        out = _kernels.convolved_cdf_array(flat, self._x0, self._h, self.density,
                                           self._nonzero, tau, np.empty_like(flat))
        return _as_output(out, z)

    def cdf_arrays(self) -> SamplingArrays:
        """The arrays compiled code passes to :func:`ppf_kernel` (see :class:`SamplingArrays`).

        Examples
        --------
        >>> import numba
        >>> from design import correction
        >>> a = correction.default().cdf_arrays()
        >>> @numba.njit
        ... def draw(u, x0, h, density, cdf):
        ...     return correction.ppf_kernel(u, x0, h, density, cdf)
        >>> draw(0.5, a.x0, a.spacing, a.density, a.cdf) == correction.default().ppf(0.5)
        True
        """
        return SamplingArrays(self._x0, self._h, self.density, self.cdf_nodes)

    # --- files ------------------------------------------------------------------------

    def save(self, path) -> None:
        """Write the table to ``path`` (see :meth:`load` for the format)."""
        meta = {"kind": "CorrectionTable", "sigma": self.sigma, "linf_error": self.linf_error,
                "method": self.method, "settings": dict(self.settings),
                "diagnostics": dict(self.diagnostics)}
        _fileformat.write(path, meta, {"x": self.x, "density": self.density})

    @classmethod
    def load(cls, path) -> "CorrectionTable":
        """Read a table written by :meth:`save`.

        The file is an ``.npz`` archive holding the arrays, a JSON metadata entry, a format
        version and the SHA-256 of all of them. A truncated or corrupt file, another format
        version, a failed checksum or another kind of table raise ``ValueError`` naming
        the file and the problem.
        """
        meta, arrays = _fileformat.read(path, "CorrectionTable")
        try:
            return cls(x=arrays["x"], density=arrays["density"], sigma=meta["sigma"],
                       linf_error=meta["linf_error"], method=meta["method"],
                       settings=meta["settings"], diagnostics=meta["diagnostics"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"correction table file {str(path)!r} holds an invalid table: "
                             f"{exc}") from exc


@functools.lru_cache(maxsize=None)
def default() -> CorrectionTable:
    """The shipped table for ``sigma = 1`` (method ``"lp"``), loaded once and cached.

    It was made by ``python -m design._build_default`` with :func:`build` at its defaults.
    """
    return CorrectionTable.load(resources.files("design") / "data" / _DEFAULT_FILE)


# --- skew-corrected tables (appendix A.5) -----------------------------------------------------


def skew_parameter(third_cumulant, sigma=1.0) -> float:
    """The skew ``eta`` of a Barker test whose ``Delta*`` has third cumulant ``k3``.

    ``eta = k3 / (3 sigma^3)``. From a minibatch of ``b`` values ``Lambda_i = N l_i``,
    ``k3`` is estimated by ``m3 / b^2``, where ``m3`` is the third central moment of the
    ``Lambda_i`` (its unbiased version multiplies the sample moment by
    ``b^2 / ((b - 1)(b - 2))``). In the paper's notation (appendix A.5)
    ``eta = 2 y' (s / sigma)^3`` with ``y' = y / (6 sqrt(b))``, ``y`` the skewness of the
    ``l_i`` and ``s`` the standard deviation of ``Delta*``.

    Notes
    -----
    The test adds ``X_nc ~ N(0, sigma^2 - s_hat^2)`` with the *estimated* variance
    ``s_hat^2`` and never divides by it, so neither the Edgeworth expansion of the mean
    (``-y'(x^2 - 1) phi``) nor that of the t-statistic (``+y'(2x^2 + 1) phi``, the paper's
    ``G_n``) is its limit. Expanding ``E[F(Delta*; sigma^2 - s_hat^2)]`` to order
    ``b^{-1/2}`` (the Edgeworth term of the mean, plus the covariance ``skew / sqrt(b)`` of
    the mean with the variance estimate, acting through the heat equation) gives, with an
    exact symmetric correction, ``P(accept) = S(Delta) - eta sigma^3 S'''(Delta) + O(1/b)``:
    what a Gaussian part with cdf ``Phi(u) + eta (u^2 - 1) phi(u)``, ``u = z / sigma``,
    would produce. That limit has the mean's shape, no location term, and coefficient
    ``eta``; :class:`SkewCorrectionTable` corrects it. The derivation is in
    ``docs/correction.md``.

    Examples
    --------
    >>> from design import correction
    >>> correction.skew_parameter(0.03, sigma=1.0)
    0.01
    """
    k3 = float(third_cumulant) if np.ndim(third_cumulant) == 0 else None
    if k3 is None or not math.isfinite(k3):
        raise ValueError(f"third_cumulant must be a finite real number, got {third_cumulant!r}")
    sigma = _check_sigma(sigma)
    return k3 / (3.0 * sigma ** 3)


class SkewSamplingArrays(NamedTuple):
    """What compiled code needs to draw from a :class:`SkewCorrectionTable`.

    Pass the fields to :func:`skew_ppf_kernel` as
    ``skew_ppf_kernel(eta, u_mix, u, x0, spacing, skew_step, density, cdf)``.
    """

    x0: float
    spacing: float
    skew_step: float
    density: np.ndarray
    cdf: np.ndarray


@dataclass(frozen=True, eq=False, repr=False)
class SkewCorrectionTable:
    """Corrections for a Gaussian part with skew: a family of tables indexed by ``eta``.

    Row ``k`` is a correction ``C_k >= 0`` with
    ``((Phi + eta_k phi'') (./sigma) * C_k)(z) ~= S(z)``, tabulated at ``eta_k = k d`` for
    ``k = 0..K``; negative skews use the mirror image, ``C_{-eta}(y) = C_eta(-y)``. Between
    rows the correction is the mixture of the two neighbours with linear weights: as the
    target is linear in ``eta`` and the mixture of two corrections is a correction, the
    error at any ``eta`` is at most ``max(linf_error[k], linf_error[k + 1]) +
    interpolation_error`` (the second-order term ``w (1 - w) d (phi'' * (C_k - C_{k+1}))``,
    bounded by its value at ``w = 1/2``).

    Parameters
    ----------
    x : array_like
        Grid with equal spacing, symmetric about 0.
    skew : array_like
        ``eta_k = k d``, ``k = 0..K`` (``K >= 1``).
    density : array_like
        ``(K + 1, len(x))`` densities, each a valid correction density.
    sigma : float
    linf_error : array_like
        Per row, ``sup_z |((Phi + eta_k phi'')(./sigma) * C_k)(z) - S(z)|``.
    interpolation_error : float
        Bound on the extra error of the mixture between rows.
    settings, diagnostics : mapping

    Examples
    --------
    >>> from design import correction
    >>> skew = correction.default_skew()
    >>> float(skew.skew[-1]), bool(skew.error_bound(0.0123) < 1e-5)
    (0.2, True)
    >>> x = skew.sample(0.05, size=10_000, rng=0)
    >>> bool(abs(x.mean()) < 0.1)
    True
    """

    x: np.ndarray
    skew: np.ndarray
    density: np.ndarray
    sigma: float
    linf_error: np.ndarray
    interpolation_error: float
    settings: Mapping = field(default_factory=dict)
    diagnostics: Mapping = field(default_factory=dict)
    cdf_nodes: np.ndarray = field(init=False)

    def __post_init__(self):
        x = check_finite_array("x", self.x, ndim=1)
        x0, h = _uniform_grid("x", x)
        if abs(x[0] + x[-1]) > 1e-9 * h:
            raise ValueError(f"x must be symmetric about 0, got [{x[0]:g}, {x[-1]:g}]")
        skew = check_finite_array("skew", self.skew, ndim=1)
        if skew.shape[0] < 2 or skew[0] != 0.0:
            raise ValueError("skew must start at 0 and have at least 2 values")
        step = float(skew[1])
        if not step > 0 or np.abs(np.diff(skew) - step).max() > 1e-9 * skew[-1]:
            raise ValueError("skew must be an increasing grid 0, d, 2d, ... with equal steps")
        density = check_finite_array("density", self.density, ndim=2)
        if density.shape != (skew.shape[0], x.shape[0]):
            raise ValueError(f"density must have shape {(skew.shape[0], x.shape[0])}, "
                             f"got {density.shape}")
        _check_density(density, h)
        linf = check_finite_array("linf_error", self.linf_error, ndim=1)
        if linf.shape != skew.shape or np.any(linf < 0):
            raise ValueError("linf_error must hold one non-negative error per skew value")
        set_ = functools.partial(object.__setattr__, self)
        set_("x", _frozen(x))
        set_("skew", _frozen(skew))
        set_("density", _frozen(density))
        set_("sigma", _check_sigma(self.sigma))
        set_("linf_error", _frozen(linf))
        set_("interpolation_error", check_positive("interpolation_error",
                                                   self.interpolation_error, allow_zero=True))
        set_("settings", MappingProxyType(dict(self.settings)))
        set_("diagnostics", MappingProxyType(dict(self.diagnostics)))
        set_("cdf_nodes", _frozen(_kernels.node_cdf(density, h)))
        set_("_x0", x0)
        set_("_h", h)
        set_("_step", step)

    def __reduce__(self):  # the mapping proxies do not pickle; rebuild from the fields
        return (type(self), (self.x, self.skew, self.density, self.sigma, self.linf_error,
                             self.interpolation_error, dict(self.settings),
                             dict(self.diagnostics)))

    def __repr__(self):
        return (f"SkewCorrectionTable(sigma={self.sigma:g}, skew=[0, {self.skew[-1]:g}] step "
                f"{self._step:g}, max linf_error={self.linf_error.max():.3g}, "
                f"interpolation_error={self.interpolation_error:.3g}, nodes={self.x.shape[0]})")

    @property
    def skew_max(self) -> float:
        """Largest tabulated ``|eta|``; beyond it the last row is used."""
        return float(self.skew[-1])

    def _neighbours(self, eta: float):
        pos = min(abs(eta), self.skew_max) / self._step
        k = min(int(pos), self.skew.shape[0] - 2)
        return k, pos - k

    def error_bound(self, eta) -> float:
        """Bound on the table's error at skew ``eta`` (inside the tabulated range)."""
        k, _ = self._neighbours(float(eta))
        return float(max(self.linf_error[k], self.linf_error[k + 1]) + self.interpolation_error)

    def density_at(self, eta) -> np.ndarray:
        """The (mixture) correction density at skew ``eta`` on the grid ``x``."""
        eta = float(eta)
        k, w = self._neighbours(eta)
        d = (1.0 - w) * self.density[k] + w * self.density[k + 1]
        return d[::-1].copy() if eta < 0 else d

    def sample(self, eta, size=None, rng=None):
        """Draw ``size`` values of ``X_corr`` for skew ``eta`` (one float if size is None)."""
        eta = float(eta)
        if not math.isfinite(eta):
            raise ValueError(f"eta must be finite, got {eta!r}")
        rng = as_generator(rng)
        u_mix = rng.random(size)
        u = rng.random(size)
        flat_mix, flat = np.ravel(u_mix), np.ravel(u)
        out = _kernels.skew_ppf_array(eta, flat_mix, flat, self._x0, self._h, self._step,
                                      self.density, self.cdf_nodes, np.empty(flat.shape))
        return _as_output(out, u)

    def cdf_arrays(self) -> SkewSamplingArrays:
        """The arrays compiled code passes to :func:`skew_ppf_kernel`."""
        return SkewSamplingArrays(self._x0, self._h, self._step, self.density, self.cdf_nodes)

    def save(self, path) -> None:
        """Write the family to ``path`` (same format as :meth:`CorrectionTable.save`)."""
        meta = {"kind": "SkewCorrectionTable", "sigma": self.sigma,
                "interpolation_error": self.interpolation_error,
                "settings": dict(self.settings), "diagnostics": dict(self.diagnostics)}
        _fileformat.write(path, meta, {"x": self.x, "skew": self.skew, "density": self.density,
                                       "linf_error": self.linf_error})

    @classmethod
    def load(cls, path) -> "SkewCorrectionTable":
        """Read a family written by :meth:`save` (errors as :meth:`CorrectionTable.load`)."""
        meta, arrays = _fileformat.read(path, "SkewCorrectionTable")
        try:
            return cls(x=arrays["x"], skew=arrays["skew"], density=arrays["density"],
                       sigma=meta["sigma"], linf_error=arrays["linf_error"],
                       interpolation_error=meta["interpolation_error"],
                       settings=meta["settings"], diagnostics=meta["diagnostics"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"correction table file {str(path)!r} holds an invalid table: "
                             f"{exc}") from exc


@functools.lru_cache(maxsize=None)
def default_skew() -> SkewCorrectionTable:
    """The shipped skew family for ``sigma = 1`` (``build_skew()`` defaults), cached."""
    return SkewCorrectionTable.load(resources.files("design") / "data" / _DEFAULT_SKEW_FILE)


# --- the offline builder, loaded on first use (it needs SciPy) --------------------------------

_BUILDER = frozenset({"ErrorFloor", "RidgeSolution", "build", "build_skew", "error_floor",
                      "ridge_deconvolution"})


def __getattr__(name):
    """``correction.build`` and the other builder names, from ``design._correction_build``
    (PEP 562), so that using a table does not import the linear programs and SciPy."""
    if name in _BUILDER:
        from . import _correction_build

        return getattr(_correction_build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _BUILDER)
