"""Offline construction of Barker correction tables (Seita et al. 2017, sec. 4; appendix A.5).

The linear programs, the paper's ridge regression and the certified error floor. They need
SciPy (HiGHS, FFT convolutions, conjugate gradients) and seconds per table, and only the
table builder needs them: a run-time user of a table (a sampler drawing ``X_corr``) imports
:mod:`design.correction`, which loads this module only when one of its names is asked for
(``correction.build``, ``correction.build_skew``, ``correction.ridge_deconvolution``,
``correction.error_floor``). Public names are documented and used through
:mod:`design.correction`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._lib.checks import check_int, check_interval, check_positive

from . import _fit
from .correction import CorrectionTable, SkewCorrectionTable, _check_sigma, _frozen

__all__ = ["ErrorFloor", "RidgeSolution", "build", "build_skew", "error_floor",
           "ridge_deconvolution"]


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
