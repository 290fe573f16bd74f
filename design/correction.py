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
:class:`CorrectionTable`
    A non-negative piecewise-linear density on a uniform grid with its cdf, inverse cdf
    sampler (vectorised, and :func:`ppf_kernel` for compiled loops), its convolution with a
    Gaussian, and a versioned, checksummed file format.
:func:`build`, :func:`default`
    Build a table (``method="lp"``: minimax fit; ``method="ridge"``: the paper's eq. 15);
    the shipped ``sigma = 1`` table.
:func:`ridge_deconvolution`, :func:`error_floor`
    The paper's construction with its own error measures; the certified floor.
:class:`SkewCorrectionTable`, :func:`build_skew`, :func:`default_skew`, :func:`skew_parameter`
    Corrections against the skewed (Edgeworth) limit of the test statistic (appendix A.5).

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
    check_int,
    check_interval,
    check_positive,
)

from . import _fileformat, _fit, _kernels
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


# --- building ---------------------------------------------------------------------------------


_METHODS = ("lp", "ridge")
_DEFAULTS = {"lp": {"spacing": 0.05, "half_width": 30.0},
             "ridge": {"spacing": 0.005, "half_width": 20.0, "lam": 10.0}}
_LP_MAX_NODES = 2000


def _grid_count(spacing: float, half_width: float) -> int:
    n = half_width / spacing
    if abs(n - round(n)) > 1e-6 * n:
        raise ValueError(f"half_width / spacing must be a whole number, got "
                         f"{half_width:g} / {spacing:g} = {n:.6g}")
    return int(round(n))


def _lp_table(sigma: float, spacing: float, half_width: float):
    fit = _fit.minimax_fit(sigma, spacing, half_width)
    density = fit.masses / spacing
    x = fit.nodes * spacing
    linf, where = _fit.lattice_error(float(x[0]), spacing, density, sigma)
    table = CorrectionTable(
        x=x, density=density, sigma=sigma, linf_error=linf, method="lp",
        settings={"spacing": spacing, "half_width": half_width},
        diagnostics={"worst_x": where, "lp_rounds": fit.rounds,
                     "support_nodes": int(np.count_nonzero(density))},
    )
    return table, fit


def build(sigma=1.0, *, method="lp", spacing=None, half_width=None, lam=None) -> CorrectionTable:
    """Build a correction table for ``N(0, sigma^2)``.

    Parameters
    ----------
    sigma : float, default 1.0
        Standard deviation of the Gaussian part, in ``(0, pi / sqrt(3))``.
    method : {"lp", "ridge"}
        ``"lp"`` (default): the non-negative piecewise-linear density minimising the
        largest cdf error, a linear program. ``"ridge"``: the paper's regularised least
        squares (eq. 15), with its negative part removed and renormalised.
    spacing : float, optional
        Grid spacing ``h`` (default 0.05 for ``"lp"``; 0.005 for ``"ridge"``, i.e. the
        paper's ``N = 4000`` points on ``[-20, 20]``).
    half_width : float, optional
        The correction lives on ``[-half_width, half_width]`` (default 30 for ``"lp"``,
        20 for ``"ridge"`` as in the paper); ``half_width / spacing`` must be whole.
    lam : float, optional
        Ridge penalty ``lambda`` of eq. 15 (``"ridge"`` only; default 10 as in the paper).

    Returns
    -------
    CorrectionTable
        With ``linf_error`` measured exactly on a lattice of spacing <= 0.005.

    Notes
    -----
    ``"lp"`` solves ``min_C max_i |(Phi_sigma * C)(x_i) - S(x_i)|`` over hat mixtures
    ``C >= 0`` with unit mass, the check points ``x_i`` on the grid out to
    ``half_width + 10 sigma`` (symmetric problem, halved; HiGHS with iterative refinement;
    one to four seconds at the defaults). Its optimum is a comb of narrow peaks: the minimax
    correction is (nearly) a discrete distribution, whose error equioscillates, and not
    the smooth density the ridge penalty produces. At ``sigma = 1`` it reaches 5.3e-8,
    within 16 % of the certified floor (:func:`error_floor`).

    ``"ridge"`` reproduces Seita et al.'s construction (see :func:`ridge_deconvolution`);
    their Table 3 figures are its error *with negative masses set to zero and not
    renormalised*; the table built here is renormalised, which lowers that figure by
    up to a half.

    Examples
    --------
    >>> from design import correction
    >>> table = correction.build(0.9, spacing=0.1)
    >>> table.method, table.linf_error < 1e-8
    ('lp', True)
    """
    sigma = _check_sigma(sigma)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    defaults = _DEFAULTS[method]
    spacing = defaults["spacing"] if spacing is None else check_interval(
        "spacing", spacing, 0.0, 1.0, closed="right")
    half_width = defaults["half_width"] if half_width is None else check_interval(
        "half_width", half_width, 10.0, 200.0, closed="both")
    count = _grid_count(spacing, half_width)
    if method == "lp":
        if lam is not None:
            raise ValueError("lam applies only to method='ridge'")
        if count > _LP_MAX_NODES:
            raise ValueError(f"half_width / spacing must be at most {_LP_MAX_NODES} for "
                             f"method='lp' (a dense linear program), got {count}")
        return _lp_table(sigma, spacing, half_width)[0]
    lam = defaults["lam"] if lam is None else check_positive("lam", lam)
    ridge = ridge_deconvolution(sigma, n_points=count, lam=lam, half_width=half_width)
    return ridge.table()


@functools.lru_cache(maxsize=None)
def default() -> CorrectionTable:
    """The shipped table for ``sigma = 1`` (method ``"lp"``), loaded once and cached.

    It was made by ``python -m design._build_default`` with :func:`build` at its defaults.
    """
    return CorrectionTable.load(resources.files("design") / "data" / _DEFAULT_FILE)


# --- the paper's construction ------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class RidgeSolution:
    """The solution of Seita et al.'s eq. 15 and the error measures it allows.

    Attributes
    ----------
    sigma, n_points, lam, half_width : float, int, float, float
        The settings: grid ``Y_j = j V / N`` (``j = -N..N``, ``V = half_width``),
        ``X_i = i V / N`` (``i = -2N..2N``), ridge penalty ``lambda``.
    y : ndarray
        The correction grid ``Y``.
    masses : ndarray
        ``u* = (M^T M + lambda I)^{-1} M^T v``, signed probability masses at ``Y``.
    raw_linf : float
        ``max_i |M u* - v|_i``: the fit of the signed solution (not a distribution).
    clipped_linf : float
        ``max_i |M max(u*, 0) - v|_i``: negative masses set to zero, not renormalised.
        This is what the paper's Table 3 reports (36 of its 40 cells reproduced to the
        printed two digits, 3 more within 3 %; ``docs/correction.md``).
    negative_mass : float
        ``-sum(min(u*, 0))``.
    iterations : int
        Preconditioned conjugate-gradient iterations.
    """

    sigma: float
    n_points: int
    lam: float
    half_width: float
    y: np.ndarray
    masses: np.ndarray
    raw_linf: float
    clipped_linf: float
    negative_mass: float
    iterations: int

    def __repr__(self):
        return (f"RidgeSolution(sigma={self.sigma:g}, n_points={self.n_points}, lam={self.lam:g}, "
                f"clipped_linf={self.clipped_linf:.3g}, raw_linf={self.raw_linf:.3g}, "
                f"negative_mass={self.negative_mass:.3g})")

    def table(self) -> CorrectionTable:
        """The solution as a distribution: negative masses dropped, the rest renormalised.

        Masses become hats on the same grid (padded by one zero node at each end); the
        table's ``linf_error`` is measured exactly, like any other table's.
        """
        h = self.half_width / self.n_points
        keep = np.maximum(self.masses, 0.0)
        density = np.concatenate([[0.0], keep / (h * keep.sum()), [0.0]])
        x = np.arange(-self.n_points - 1, self.n_points + 2) * h
        linf, where = _fit.lattice_error(float(x[0]), h, density, self.sigma)
        return CorrectionTable(
            x=x, density=density, sigma=self.sigma, linf_error=linf, method="ridge",
            settings={"spacing": h, "half_width": self.half_width, "lam": self.lam},
            diagnostics={"worst_x": where, "paper_linf": self.clipped_linf,
                         "raw_linf": self.raw_linf, "negative_mass": self.negative_mass,
                         "cg_iterations": self.iterations},
        )


def ridge_deconvolution(sigma=1.0, n_points=4000, lam=10.0, half_width=20.0) -> RidgeSolution:
    """Seita et al.'s correction: ridge-regularised least squares on a grid (eq. 15).

    Parameters
    ----------
    sigma : float
        Standard deviation of the Gaussian part.
    n_points : int
        The paper's ``N``: ``2N + 1`` correction points, ``4N + 1`` check points.
    lam : float
        Ridge penalty ``lambda``.
    half_width : float
        The paper's range ``V`` (``X_corr in [-V, V]``; they use 20).

    Returns
    -------
    RidgeSolution

    Notes
    -----
    ``M_ij = Phi((X_i - Y_j) / sigma)`` is Toeplitz, so the normal equations are solved by
    conjugate gradients with FFT products and a circulant preconditioner built on the
    first-difference transform (:func:`design._fit.ridge_solve`): about ten iterations and
    a few hundredths of a second for ``N = 4000``, where forming and factorising the
    8001 x 8001 normal matrix takes minutes.

    Examples
    --------
    >>> from design import correction
    >>> sol = correction.ridge_deconvolution(1.0, n_points=4000, lam=10.0)
    >>> f"{sol.clipped_linf:.1e}"      # the paper's Table 3: 8.9e-4
    '8.9e-04'
    """
    sigma = _check_sigma(sigma)
    n_points = check_int("n_points", n_points, low=10, high=1_000_000)
    lam = check_positive("lam", lam)
    half_width = check_interval("half_width", half_width, 10.0, 200.0, closed="both")
    sol = _fit.ridge_solve(sigma, n_points, lam, half_width)
    return RidgeSolution(sigma, n_points, lam, half_width, _frozen(sol.y), _frozen(sol.masses),
                         sol.raw_linf, sol.clipped_linf,
                         float(-np.minimum(sol.masses, 0.0).sum()), sol.iterations)


@dataclass(frozen=True)
class ErrorFloor:
    """Bounds on ``inf_C sup_x |(Phi_sigma * C)(x) - S(x)|`` over all distributions ``C``.

    Attributes
    ----------
    sigma : float
    lower : float
        Certified lower bound: no distribution, on any support, does better. 0 when the
        certificate is inconclusive (for sigma <= 0.9 at spacing 0.05 the floor is below
        what restricting the LP's atoms to the grid costs, and the grid's dual no longer
        bounds off-grid atoms).
    upper : float
        The error of the minimax table on the grid (achieved).
    spacing : float
        Grid spacing of that table.
    """

    sigma: float
    lower: float
    upper: float
    spacing: float


def error_floor(sigma=1.0, *, spacing=0.05, half_width=30.0) -> ErrorFloor:
    """Certify how close the minimax table is to the best possible correction.

    The upper bound is :func:`build`'s table's error; the lower bound comes from the
    linear program's dual by weak duality (:func:`design._fit.certified_lower_bound`): a
    weighted sum of the errors at the active check points that no distribution can make
    small, with the supremum over atom positions bounded rigorously.

    Examples
    --------
    >>> from design import correction
    >>> floor = correction.error_floor(1.1, spacing=0.1)
    >>> bool(1e-6 < floor.lower <= floor.upper < 2e-6)
    True
    """
    sigma = _check_sigma(sigma)
    spacing = check_interval("spacing", spacing, 0.0, 1.0, closed="right")
    half_width = check_interval("half_width", half_width, 10.0, 200.0, closed="both")
    if _grid_count(spacing, half_width) > _LP_MAX_NODES:
        raise ValueError(f"half_width / spacing must be at most {_LP_MAX_NODES}")
    table, fit = _lp_table(sigma, spacing, half_width)
    lower = max(_fit.certified_lower_bound(sigma, fit.check_x, fit.dual), 0.0)
    return ErrorFloor(sigma, float(lower), table.linf_error, spacing)


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


def build_skew(sigma=1.0, *, skew_max=0.2, skew_step=0.005, spacing=0.2,
               half_width=30.0) -> SkewCorrectionTable:
    """Build the skew-corrected family ``eta = 0, skew_step, ..., skew_max``.

    Each row is the minimax linear program of :func:`build` with the Gaussian part's cdf
    ``Phi(z/sigma) + eta phi''(z/sigma)`` (the skewed limit of the Barker test, see
    :func:`skew_parameter`); the rows for ``eta > 0`` are not symmetric, so each is a full
    linear program (about half a second each at the defaults). ``interpolation_error`` is
    computed exactly on a lattice for every pair of neighbouring rows.

    Examples
    --------
    >>> from design import correction
    >>> fam = correction.build_skew(skew_max=0.02, skew_step=0.01, spacing=0.2)
    >>> fam.skew.tolist(), bool(fam.linf_error.max() < 1e-6)
    ([0.0, 0.01, 0.02], True)
    """
    sigma = _check_sigma(sigma)
    skew_max = check_interval("skew_max", skew_max, 0.0, 1.0, closed="right")
    skew_step = check_interval("skew_step", skew_step, 0.0, skew_max, closed="right")
    n_skew = _grid_count(skew_step, skew_max) + 1
    spacing = check_interval("spacing", spacing, 0.0, 1.0, closed="right")
    half_width = check_interval("half_width", half_width, 10.0, 200.0, closed="both")
    if _grid_count(spacing, half_width) > _LP_MAX_NODES // 2:
        raise ValueError(f"half_width / spacing must be at most {_LP_MAX_NODES // 2} for "
                         f"the skew tables (full linear programs)")
    etas = np.arange(n_skew) * skew_step
    densities, errors = [], []
    for eta in etas:
        fit = _fit.minimax_fit(sigma, spacing, half_width, eta=float(eta))
        density = fit.masses / spacing
        x = fit.nodes * spacing
        densities.append(density)
        errors.append(_fit.lattice_error(float(x[0]), spacing, density, sigma, float(eta))[0])
    gaps = [0.25 * skew_step * _fit.skew_kernel_sup(float(x[0]), spacing, a - b, sigma)
            for a, b in zip(densities[:-1], densities[1:])]
    return SkewCorrectionTable(
        x=x, skew=etas, density=np.array(densities), sigma=sigma, linf_error=np.array(errors),
        interpolation_error=float(max(gaps)),
        settings={"skew_max": skew_max, "skew_step": skew_step, "spacing": spacing,
                  "half_width": half_width},
        diagnostics={"interpolation_error_per_gap": [float(g) for g in gaps]},
    )


@functools.lru_cache(maxsize=None)
def default_skew() -> SkewCorrectionTable:
    """The shipped skew family for ``sigma = 1`` (``build_skew()`` defaults), cached."""
    return SkewCorrectionTable.load(resources.files("design") / "data" / _DEFAULT_SKEW_FILE)
