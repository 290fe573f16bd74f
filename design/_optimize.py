"""Optimal (m, epsilon) of the sequential test: average or worst-case design."""

from __future__ import annotations

import math
import os
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ._lib.checks import check_int, check_interval
from ._lib.progress import progress_bar

from ._acceptance_error import LAWS, check_law, mu_table_edge, pair_integrals
from ._names import METHODS
from ._sequential import THRESHOLDS, run_dp
from ._stages import DEFAULT_MERGE, MERGE_ERROR_DATA, MERGE_ERROR_E, merge_step, visited_stages
from ._trial import TrialChain

__all__ = ["Design", "InfeasibleDesignError", "optimize",
           "DEFAULT_M_GRID", "DEFAULT_EPSILON_GRID"]

DEFAULT_M_GRID = (50, 75, 100, 150, 200, 300, 400, 500, 750, 1000)
DEFAULT_EPSILON_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2)
_MAX_HALVINGS = 20   # how far below the grid the infeasible-design search goes in epsilon
#: Which grid cells a search evaluates (see :func:`optimize`).
SEARCHES = ("auto", "full", "bisect", "screen", "prune")
#: Merge step (in log information time) of the average design's screening pass: about a
#: seventh of the default programme's cost per cell at N / m = 2e4.
SCREEN_MERGE = 0.02
#: The screen's margins are this many times the merged plan's error bounds
#: (``MERGE_ERROR_E``, ``MERGE_ERROR_DATA`` times the squared merge steps of both plans).
SCREEN_SAFETY = 2.0
#: Rounding allowed in the knot-wise order of the programme's pi-bar in epsilon, and in its
#: range [m / N, 1], when the screen bounds a cell's data fraction by its row's cells (see
#: ``_Evaluator.data_lower_bound``): the largest increase measured as epsilon grows is
#: 1e-13 (N = 2e3 to 1e6, m = 10 to 1000; ``tests/design/test_screen_floors.py``).
ORDER_SLACK = 1e-11


class InfeasibleDesignError(ValueError):
    """No (m, epsilon) on the grid meets the tolerance.

    Attributes ``m``, ``epsilon``, ``error``, ``data_fraction`` describe the nearest
    feasible setting found off the grid (smaller epsilon at the largest m, or the exact
    test m = N), ``best_on_grid`` the grid point with the smallest error.
    """

    def __init__(self, message, *, m, epsilon, error, data_fraction, best_on_grid):
        super().__init__(message)
        self.m = m
        self.epsilon = epsilon
        self.error = error
        self.data_fraction = data_fraction
        self.best_on_grid = best_on_grid


@dataclass(frozen=True, eq=False)
class Design:
    """An optimal sequential-test design and the grid it was chosen from.

    Attributes
    ----------
    test : str
        ``"austere"`` (class constant): the test kind this design is for.
    m : int
        Minibatch size.
    epsilon : float
        Per-stage error of the sequential test.
    threshold : {"normal", "t"}
        Critical values of the test to run (``AustereTest(threshold=...)``; "t" is the
        paper's Algorithm 1 and the default of both :func:`optimize` and ``AustereTest``).
    data_fraction : float
        Expected fraction of the data used per test (averaged over the trial pairs and u for
        the average design; at mu_std = 0 for the worst case).
    error : float
        Expected error: mean |Delta| over the trial pairs (average design) or E(0)
        (worst case).
    method : {"average", "worst-case"}
    tolerance : float
    N : int
    n_pairs : int or None
        Trial pairs used (None for the worst case).
    m_grid, epsilon_grid : numpy.ndarray
        The grid searched.
    error_grid, data_grid : numpy.ndarray, shape (len(m_grid), len(epsilon_grid))
        Error and data fraction at every grid point evaluated, by the Gaussian dynamic programme also with
        ``law="edgeworth"`` (NaN at the cells a
        worst-case bisection did not need; see :func:`optimize`).
    prediction_threshold : {"normal", "t"}
        Critical values of the prediction's model of the statistic.
    law : {"gaussian", "edgeworth"}
        Law of the statistic the design was chosen with (see :func:`optimize`); with
        ``"edgeworth"`` ``error`` and ``data_fraction`` are the corrected predictions.
    gaussian_m, gaussian_epsilon : int or None, float or None
        ``law="edgeworth"`` only: the (m, epsilon) the Gaussian programme would have chosen,
        i.e. what the correction changed.
    gaussian_corrected_error : float or None
        ``law="edgeworth"`` only: the corrected mean |Delta| of that Gaussian choice (above
        the tolerance when the correction had to change the design).
    corrected_cells : tuple or None
        ``law="edgeworth"`` only: the cells evaluated with the corrected law, as
        ``(m, epsilon, error, data_fraction)`` tuples, in the order evaluated.
    screen_error_grid, screen_data_grid : numpy.ndarray or None
        ``search="screen"`` only (the average design's default): error and data fraction at
        every grid point by the screening programme (merge step ``SCREEN_MERGE``; within
        about 1e-4 of ``error_grid`` and ``data_grid``, see :func:`optimize`). ``plot``
        shows them where the full programme did not run. With ``search="prune"`` the rows
        of m that could not hold the design are not screened (NaN);
        :meth:`complete_screen` fills them in.
    screen_edge : tuple or None
        ``search="screen"`` or ``"prune"``: the (m, epsilon) whose range of standardised
        means the screen's tables span (the grid's smallest m and epsilon), so that
        :meth:`complete_screen` screens a missing row on the same tables, to the same bits.
    """

    test: ClassVar[str] = "austere"
    m: int
    epsilon: float
    threshold: str
    data_fraction: float
    error: float
    method: str
    tolerance: float
    N: int
    n_pairs: int | None
    m_grid: np.ndarray
    epsilon_grid: np.ndarray
    error_grid: np.ndarray
    data_grid: np.ndarray
    prediction_threshold: str = "normal"
    law: str = "gaussian"
    gaussian_m: int | None = None
    gaussian_epsilon: float | None = None
    gaussian_corrected_error: float | None = None
    corrected_cells: tuple | None = None
    screen_error_grid: np.ndarray | None = None
    screen_data_grid: np.ndarray | None = None
    screen_edge: tuple | None = None

    def __repr__(self):
        return (f"Design(m={self.m}, epsilon={self.epsilon:g}, threshold={self.threshold!r}, "
                f"prediction_threshold={self.prediction_threshold!r}, "
                f"error={self.error:.4g}, data_fraction={self.data_fraction:.4g}, "
                f"method={self.method!r}, tolerance={self.tolerance:g}, N={self.N}, "
                f"n_pairs={self.n_pairs}, grid={len(self.m_grid)}x{len(self.epsilon_grid)}"
                + ("" if self.law == "gaussian" else f", law={self.law!r}") + ")")

    def __str__(self):
        if self.method == "average":
            head = f"average design over {self.n_pairs} trial pairs"
            err = "mean |Delta| over the trial pairs"
        else:
            head = "worst-case design"
            err = "worst case E(0)"
        feasible = int(np.sum(self.error_grid <= self.tolerance))
        evaluated = int(np.sum(~np.isnan(self.error_grid)))
        how = ("screened, see screen_error_grid" if self.screen_error_grid is not None
               else "bisection in epsilon")
        cells = ("" if evaluated == self.error_grid.size else
                 f" ({evaluated} evaluated: {how})")
        n_used = self.data_fraction * self.N
        return "\n".join([
            f"Sequential test design ({head}, N = {self.N:,}, tolerance {self.tolerance:g})",
            f"  minibatch size m      {self.m}",
            f"  per-stage error eps   {self.epsilon:g}",
            f"  threshold             {self.threshold}  (run AustereTest.from_design(design); "
            f"predicted with {self.prediction_threshold} critical values)",
            f"  expected error        {self.error:.4g}  ({err})",
            f"  expected data use     {self.data_fraction:.4g}  "
            f"(about {n_used:,.0f} of {self.N:,} points per test)",
            f"  grid                  {len(self.m_grid)} m x {len(self.epsilon_grid)} eps, "
            f"{feasible} within tolerance{cells}" + ("" if self.law == "gaussian" else
                                                      " (Gaussian programme)"),
            "  chosen because        the least expected data among the grid points within "
            "the tolerance" + (" (one minibatch per test: the smallest m that meets it)"
                               if n_used < 1.5 * self.m else ""),
        ] + self._correction_lines())

    def _correction_lines(self):
        if self.law == "gaussian":
            return []
        head = "  law of the statistic  Edgeworth-corrected (skewness, kurtosis of the l_i)"
        if self.gaussian_m is None:
            return [head, "  Gaussian DP's choice  none (no grid point within the tolerance)"]
        same = (self.gaussian_m, self.gaussian_epsilon) == (self.m, self.epsilon)
        return [
            head,
            f"  Gaussian DP's choice  m = {self.gaussian_m}, eps = {self.gaussian_epsilon:g}, "
            f"corrected error {self.gaussian_corrected_error:.4g}"
            + ("  (unchanged by the correction)" if same else
               f"  -> changed to m = {self.m}, eps = {self.epsilon:g}"),
        ]

    def complete_screen(self, trial_chain, workers=None):
        """This design with the screen run on the rows of m that ``search="prune"`` left out.

        The screened values are those ``search="screen"`` would have returned, to the bit:
        the same screening programme on tables spanning the same range (``screen_edge``).
        Rows screened in part (the minibatch sizes below the default grid, tried at the
        chosen epsilon only) are left as they are. Returns ``self`` when no row is missing.

        Parameters
        ----------
        trial_chain : TrialChain
            The trial pairs the design was chosen on.
        workers : int, optional
            Threads (default: CPU count).

        Returns
        -------
        Design

        Examples
        --------
        >>> import numpy as np
        >>> from design import TrialChain, optimize
        >>> rng = np.random.default_rng(0)
        >>> tc = TrialChain(mu=rng.normal(0, 1, 20) / 10**5, sigma=np.full(20, 1e-7),
        ...                 c0=np.zeros(20), N=10**5)
        >>> d = optimize(tc, 0.01, m_grid=[50, 500], search="prune")
        >>> bool(np.isnan(d.screen_error_grid[1]).all())    # m = 500 cannot win
        True
        >>> full = d.complete_screen(tc)
        >>> screened = optimize(tc, 0.01, m_grid=[50, 500], search="screen")
        >>> np.array_equal(full.screen_error_grid, screened.screen_error_grid)
        True
        """
        if self.screen_error_grid is None or self.screen_edge is None:
            return self
        if not isinstance(trial_chain, TrialChain):
            raise TypeError(f"trial_chain must be a TrialChain, got "
                            f"{type(trial_chain).__name__}")
        if trial_chain.N != self.N or trial_chain.n_pairs != self.n_pairs:
            raise ValueError(f"trial_chain must be the design's pairs (N = {self.N}, "
                             f"{self.n_pairs} pairs), got N = {trial_chain.N}, "
                             f"{trial_chain.n_pairs} pairs")
        missing = np.flatnonzero(np.isnan(self.screen_error_grid).all(axis=1))
        if missing.size == 0:
            return self
        workers = check_int("workers", (os.cpu_count() or 1) if workers is None else workers,
                            low=1)
        evaluate = _Evaluator("average", self.N, self.prediction_threshold, trial_chain,
                              *self.screen_edge)

        def jobs(result):
            yield [(int(i), k, True) for i in missing for k in range(self.epsilon_grid.size)]
        results = _search(evaluate, self.m_grid, self.epsilon_grid, jobs,
                          missing.size * self.epsilon_grid.size, workers, False, {})
        error, data = (np.array(self.screen_error_grid), np.array(self.screen_data_grid))
        for (i, k, _), (e, f) in results.items():
            error[i, k], data[i, k] = e, f
        for a in (error, data):
            a.setflags(write=False)
        return replace(self, screen_error_grid=error, screen_data_grid=data)

    def plot(self, ax=None):
        """Data use against error for each m, as in Korattikara et al. (2014), Fig. 6.

        Each line joins the epsilon grid for one m; the dashed line is the tolerance and the
        star the chosen design. Cells the full programme did not evaluate show the
        screening pass's values (``screen_error_grid``), if any. Returns the matplotlib Axes.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        error_grid, data_grid = self.error_grid, self.data_grid
        if self.screen_error_grid is not None:
            done = ~np.isnan(error_grid)
            error_grid = np.where(done, error_grid, self.screen_error_grid)
            data_grid = np.where(done, data_grid, self.screen_data_grid)
        for i, m in enumerate(self.m_grid):
            err, data = error_grid[i], data_grid[i]
            keep = err > 0
            ax.plot(err[keep], data[keep], marker="o", ms=3, lw=1, label=f"m = {m}")
        ax.axvline(self.tolerance, ls="--", color="0.5", lw=1, label="tolerance")
        ax.plot([self.error], [self.data_fraction], marker="*", ms=14, color="k", ls="none",
                label=f"chosen: m = {self.m}, eps = {self.epsilon:g}")
        ax.set_xscale("log")
        ax.set_xlabel("mean |Delta|" if self.method == "average" else "E(0)")
        ax.set_ylabel("expected fraction of data used")
        ax.set_title(f"{self.method} design, N = {self.N:,}")
        ax.legend(fontsize="x-small", ncol=2)
        return ax


def _grid(name, values, check):
    arr = np.atleast_1d(np.asarray(values))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence, got shape {arr.shape}")
    return np.unique([check(f"{name}[{i}]", v) for i, v in enumerate(arr.tolist())])


class _Evaluator:
    """Error and data fraction of a design (m, epsilon), for one method."""

    def __init__(self, method, N, threshold, trial, m_min, eps_min, exact=False):
        self.method, self.N, self.threshold = method, N, threshold
        self.exact = exact
        self.dp_options = dict(merge=0.0, stop_tol=0.0) if exact else {}
        self.spread = (1.0, 1.0)
        if method == "average":
            self.integrals = pair_integrals(trial, mu_table_edge(N, m_min, eps_min, threshold))
            # mean over the pairs of sum_k |A[p, k]|: bounds how far an error of the knot
            # values moves the mean |Delta| (or data fraction); about 1, the spline weights
            # being mostly positive
            self.spread = (float(np.mean(np.sum(np.abs(self.integrals.A_err), axis=1))),
                           float(np.mean(np.sum(np.abs(self.integrals.A_data), axis=1))))
            # the mean data fraction is data_weights @ pi-bar(knots) + tail_mean * m / N
            self.data_weights = np.mean(self.integrals.A_data, axis=0)
            self.tail_mean = float(np.mean(self.integrals.tail))
        #: (m, eps, screen) -> pi-bar at the knots, of every average-design cell evaluated
        self.data_tables = {}

    def __call__(self, m, eps, screen=False):
        """(error, data fraction) of cell (m, eps); ``screen``: by the screening programme
        (merge step ``SCREEN_MERGE``) instead of the design's own."""
        options = dict(merge=SCREEN_MERGE) if screen else self.dp_options
        if self.method == "worst-case":
            r = run_dp(np.zeros(1), m, eps, self.N, self.threshold, interior=False,
                       **options)
            return float(r["error"][0]), float(r["data_fraction"][0])
        table = run_dp(self.integrals.knots, m, eps, self.N, self.threshold, **options)
        self.data_tables[(int(m), float(eps), bool(screen))] = table["data_fraction"]
        delta, data = self.integrals.evaluate(table, m, self.N)
        return float(np.mean(np.abs(delta))), float(np.mean(data))

    def data_lower_bound(self, m, larger=(), smaller=()):
        """Lower bound on the mean data fraction of a cell at this m by the design's
        programme, from the knot tables of pi-bar (``data_tables``) of cells of the same m
        run in full: ``larger`` at larger epsilons, ``smaller`` at smaller ones.

        Lowering epsilon raises every threshold of the (merged) plan, so on every path the
        test stops no earlier: at each knot pi-bar cannot fall as epsilon falls, and it lies
        in [m / N, 1]. Hence pi-bar at the knots is at least the largest of the ``larger``
        tables (and m / N) and at most the smallest of the ``smaller`` ones (and 1), each
        up to ``ORDER_SLACK``. The mean data fraction is linear in the knot values with
        weights ``data_weights`` (the pairs' mean spline weights, some of them negative), so
        its least value over that box takes the lower end at a positive weight and the upper
        end at a negative one. (The data fraction itself need not fall with epsilon where
        weights are negative: this bound, not that order, is what the screen relies on.)
        """
        lo = np.full(self.data_weights.size, m / self.N)
        hi = np.ones(self.data_weights.size)
        for table in larger:
            lo = np.maximum(lo, table)
        for table in smaller:
            hi = np.minimum(hi, table)
        w = self.data_weights
        return float(np.sum(np.where(w > 0, w * (lo - ORDER_SLACK), w * (hi + ORDER_SLACK)))
                     + self.tail_mean * (m / self.N) * (1.0 - ORDER_SLACK))

    def screen_is_exact(self, m):
        """Whether the screening programme is the design's own at this m: neither plan
        merges a stage (N / m below about 8 / ``SCREEN_MERGE``), so both run the same
        stages at the same resolution and give the same bits."""
        if self.exact:
            return False
        J1 = -(-self.N // m) - 1
        return visited_stages(J1, self.N / m, merge_step(self.N / m, SCREEN_MERGE)).size == J1

    def screen_margins(self, m):
        """(error margin, data margin) that bound |screen - design's programme| at this m:
        ``SCREEN_SAFETY`` times the merged plans' bounds C (delta_screen^2 + delta^2) on E
        and pi-bar, times the mean absolute weight of the knot values in a pair's
        integrals (``spread``)."""
        K = self.N / m
        d2 = merge_step(K, SCREEN_MERGE) ** 2 + (0.0 if self.exact else
                                                 merge_step(K, DEFAULT_MERGE) ** 2)
        return (SCREEN_SAFETY * MERGE_ERROR_E * d2 * self.spread[0],
                SCREEN_SAFETY * MERGE_ERROR_DATA * d2 * self.spread[1])


def optimize(trial_chain, tolerance=0.01, *, method="average", m_grid=None,
             epsilon_grid=None, threshold="t", prediction_threshold="normal", workers=None,
             progress=None, exact=False, search="auto", law="gaussian",
             on_full=None) -> Design:
    """Minibatch size and per-stage error that use the least data within a tolerance.

    Parameters
    ----------
    trial_chain : TrialChain or int
        Pairs of a trial run (average design); the worst-case design needs only N, so an
        int N is accepted there.
    tolerance : float
        Bound on the expected error, in (0, 0.5).
    method : {"average", "worst-case"}
        ``"average"`` minimises the mean data use over the trial pairs subject to
        mean |Delta| <= tolerance (Korattikara et al. 2014, Eq. 7); ``"worst-case"``
        minimises pi-bar(0) subject to E(0) <= tolerance (Eq. 8).
    m_grid : sequence of int, optional
        Minibatch sizes to search, each in [2, N]; by default 50..1000 (ten values; those
        above N are dropped).
    epsilon_grid : sequence of float, optional
        Per-stage errors, each in (0, 0.5); by default nine values from 0.001 to 0.2.
    threshold : {"t", "normal"}
        Critical values of the test that will run: "t" (default, the same default as
        ``samplers.AustereTest``) is the paper's Algorithm 1 (Student-t critical values,
        sample sd); "normal" uses normal quantiles. Recorded in ``Design.threshold``, so
        ``AustereTest.from_design(design)`` and ``AustereTest(m=design.m,
        epsilon=design.epsilon)`` (with the defaults) run the same test.
    prediction_threshold : {"normal", "t"}
        Critical values inside the dynamic programme's Gaussian model of the statistic
        (see :func:`sequential_error`). Simulation of the real test
        (``tests/design/reference/simulate_sequential_test.py``, 72 settings) shows that
        "normal" (default) predicts both real tests best: for Algorithm 1 the standardised
        error of the prediction has mean -0.03 and rms 1.00 with "normal", against 0.35 and
        1.10 with "t" (the heavier tails of the estimated-sd statistic and the larger t
        critical values offset each other).
    workers : int, optional
        Threads for the grid (the compiled kernel releases the GIL); default: CPU count.
    progress : bool or callable, optional
        Show a tqdm progress bar over the grid cells (default: only when stderr is a
        terminal); a callable is called as ``progress(done, total)`` after each cell. Ctrl-C
        (or any exception a callable raises) stops the search promptly: cells not yet
        started are cancelled, the running ones (a fraction of a second each) finish, and
        the exception propagates; nothing is returned or written.
    exact : bool
        Run every stage of the dynamic programme (the reference; cost grows like N / m per
        grid cell). By default stages are merged where N / m is large, which keeps the cost
        nearly independent of N and E, pi-bar within 1e-6 of the exact values up to
        N / m = 1.5e5 (see :func:`sequential_error`).
    search : {"auto", "full", "bisect", "screen", "prune"}
        Which grid cells to evaluate. ``"full"``: all of them. ``"bisect"`` (worst case
        only; the default there, ``"auto"``): for each m only the cells that locate the
        largest feasible epsilon, typically 2-3 of 9 (see Notes); the other cells of
        ``Design.error_grid`` and ``data_grid`` are NaN. ``"screen"`` (average design with
        ``law="gaussian"``; the default there): every cell by a programme with a 20 times
        coarser merge step (``SCREEN_MERGE``, about a seventh of the cost), then the full
        programme only at the cells the screen cannot rule out, typically 1-3 (see Notes);
        the screened values are kept in ``Design.screen_error_grid`` and
        ``screen_data_grid``, the other cells of ``error_grid`` and ``data_grid`` are NaN.
        The same design as ``"full"``. ``"prune"`` (average design, ``law="gaussian"``):
        the same design as ``"screen"``, but a row of m is screened only when its least
        possible data fraction (m / N, the first minibatch) is below the best feasible
        design found (see Notes); the rows left out are NaN in the screened grids
        (:meth:`Design.complete_screen` fills them in). With control variates, where every
        design reads about one minibatch, it screens one row instead of ten. The average
        design with ``law="edgeworth"`` uses ``"full"``.
    law : {"gaussian", "edgeworth"}
        The law of the test statistic: the Gaussian random walk (default), or the walk with
        each stage's law corrected for the skewness and excess kurtosis of each pair's l_i
        (:func:`acceptance_error` with ``law="edgeworth"``; average design with
        ``prediction_threshold="normal"`` only). The corrected programme costs about a
        second per pair and cell at N = 3e5, so it is not run on the whole grid: the cells
        are visited in order of the Gaussian data fraction (those with Gaussian error up to
        ``CORRECTED_ERROR_SPAN`` times the tolerance), each evaluated with the corrected
        law, until a feasible cell is found and no cell left has a Gaussian data fraction
        below ``1 / CORRECTED_DATA_SLACK`` of the best corrected one (the correction moves
        the data fraction by a few per cent; at most ``CORRECTED_MAX_CELLS`` cells). If
        none of them meets the tolerance, epsilon is walked down the grid at the m of the
        smallest corrected error (at most ``CORRECTED_RESCUE_CELLS`` cells more): there the
        infeasible-design error looks for the setting it suggests, so a suggestion added to
        the grid is visited. The Design records the Gaussian choice, its corrected error and the cells visited.
        Where a visited cell's m is outside the expansion for some trial pair
        (``|skewness| / sqrt(m)`` or ``max(kurtosis, skewness^2) / m`` above 0.5) the
        corrected error can be several standard errors off, and a ``UserWarning`` names
        those cells and pairs: check such a design by simulating the real test on the real
        l_i (``validation.acceptance_check``; ``validation.fit`` does it automatically).
    on_full : callable, optional
        Called as ``on_full(m, epsilon)`` with the first cell of each batch of
        full-programme jobs, before the batch runs (in the calling thread). It changes
        nothing in the search; :func:`design.optimize` uses it to start the programme of a
        later search early.

    Returns
    -------
    Design

    Notes
    -----
    Why bisection cannot miss the worst-case optimum: lowering epsilon raises every
    threshold q_j (Phi^-1(1 - eps) and t_{n-1}^-1(1 - eps) both decrease in eps; the merged
    plan shifts all of them by the same amount), so on every path of the statistic the
    stopping stage can only come later. At mu_std = 0 the error E(0) is half the
    probability of stopping before n = N and pi-bar(0) the expected stopping size, so E(0)
    increases and pi-bar(0) decreases with epsilon, path by path. For each m the feasible
    epsilons (E(0) <= tolerance) are therefore those below a boundary, and the least data
    among them is at the largest feasible epsilon, which the search always evaluates; the
    design is the best of these over m: the same cell as the full search (checked in
    ``tests/design/test_optimize.py``). The average design's mean |Delta| has no such
    path-wise order (a lower threshold can turn a wrong early stop into a right one).

    Why the screen cannot miss the average optimum: the screening programme differs from
    the design's own only in its merge step (0.02 instead of 1e-3 in log information
    time), and a merged plan's E and pi-bar are within ``MERGE_ERROR_E`` delta^2 and
    ``MERGE_ERROR_DATA`` delta^2 of the exact programme's (``design._stages``; measured
    and tested), hence mean |Delta| and the mean data fraction within those bounds times
    the mean over the pairs of sum_k |A[p, k]| (the weights of the knot values in a pair's
    u-integrals, ``PairIntegrals``: about 1, the spline weights being mostly positive).
    With margins of ``SCREEN_SAFETY`` = 2 times these bounds for both plans (about 4e-4 in
    the error and 2.4e-3 in the data fraction at N = 10^6), a cell whose screened error
    exceeds the tolerance plus the margin is
    infeasible, and one whose screened data fraction minus the margin exceeds the data of
    a feasible cell found cannot be chosen. The candidates run in order of screened data,
    so the search stops at the first one that cannot beat the best found
    (``tests/design/test_optimize.py`` checks the screen's error against its margins and
    the chosen design against the full search's). A candidate is also skipped when a
    lower bound on its data from its row's cells already run in full is at least the best
    found: pi-bar at each knot of the programme's table lies in [m / N, 1] and cannot fall
    as epsilon falls (the order above), and the mean data fraction is a fixed linear map of
    those knot values, so its least value over the box they allow bounds it even where
    the map's spline weights are negative (where the data fraction itself need not fall
    with epsilon). ``tests/design/test_screen_floors.py`` checks the knot-wise order and
    that random trial chains get the same design with and without the skip.
    ``search="prune"`` applies the same bound before a row is screened, with no table: a
    cell of row m reads at least m / N (up to ``ORDER_SLACK``), so a row whose m / N is at
    least the best feasible data cannot hold a better cell.

    Raises
    ------
    InfeasibleDesignError
        If no grid point meets the tolerance; the message names the grid point with the
        smallest error and the nearest feasible setting found by lowering epsilon.

    Examples
    --------
    >>> from design import optimize
    >>> d = optimize(100_000, tolerance=0.05, method="worst-case",
    ...              m_grid=[100, 500], epsilon_grid=[0.001, 0.01])
    >>> d.m, d.epsilon, round(d.error, 4)
    (100, 0.001, 0.0425)
    """
    tolerance = check_interval("tolerance", tolerance, 0.0, 0.5)
    if method not in METHODS:
        raise ValueError(f"method must be 'average' or 'worst-case', got {method!r}")
    if threshold not in THRESHOLDS:
        raise ValueError(f"threshold must be 'normal' or 't', got {threshold!r}")
    if prediction_threshold not in THRESHOLDS:
        raise ValueError(f"prediction_threshold must be 'normal' or 't', "
                         f"got {prediction_threshold!r}")
    if isinstance(trial_chain, TrialChain):
        trial, N = trial_chain, trial_chain.N
    elif method == "worst-case":
        trial, N = None, check_int("trial_chain (N)", trial_chain, low=2)
    else:
        raise TypeError("the average design needs a TrialChain, got "
                        f"{type(trial_chain).__name__} (method='worst-case' accepts an int N)")
    if m_grid is None:
        m_grid = [m for m in DEFAULT_M_GRID if m <= N] or [N]
    if epsilon_grid is None:
        epsilon_grid = DEFAULT_EPSILON_GRID
    m_grid = _grid("m_grid", m_grid, lambda n, v: check_int(n, v, low=2, high=N))
    epsilon_grid = _grid("epsilon_grid", epsilon_grid,
                         lambda n, v: check_interval(n, v, 0.0, 0.5))
    if workers is None:
        workers = os.cpu_count() or 1
    workers = check_int("workers", workers, low=1)
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    if search == "bisect" and method != "worst-case":
        raise ValueError("search='bisect' needs method='worst-case' (the average design's "
                         "error is not monotone in epsilon), got method='average'")
    if law not in LAWS:
        raise ValueError(f"law must be 'gaussian' or 'edgeworth', got {law!r}")
    if law == "edgeworth":
        if method != "average" or prediction_threshold != "normal":
            raise ValueError("law='edgeworth' needs method='average' and "
                             "prediction_threshold='normal'")
        check_law(law, trial)
    if search in ("screen", "prune") and (method != "average" or law != "gaussian"):
        raise ValueError(f"search={search!r} needs method='average' and law='gaussian' (the "
                         f"corrected search reads the whole Gaussian grid), got "
                         f"method={method!r}, law={law!r}")
    if search == "auto":
        search = ("bisect" if method == "worst-case" else
                  "screen" if law == "gaussian" else "full")

    evaluate = _Evaluator(method, N, prediction_threshold, trial, int(m_grid[0]),
                          float(epsilon_grid[0]), exact=bool(exact))
    n_m, n_eps = m_grid.size, epsilon_grid.size
    run, jobs, total, results = _plan(search, evaluate, m_grid, epsilon_grid, tolerance,
                                      workers)
    _search(run, m_grid, epsilon_grid, jobs, total, workers, progress, results,
            on_full=on_full)
    error_grid, data_grid = _grids(results, n_m, n_eps, screen=False)
    screened = search in ("screen", "prune")
    screen_grids = (_grids(results, n_m, n_eps, screen=True) if screened
                    else (None, None))
    for a in (m_grid, epsilon_grid, error_grid, data_grid) + screen_grids:
        if a is not None:
            a.setflags(write=False)

    feasible = error_grid <= tolerance
    if not feasible.any() and law == "gaussian":
        raise _infeasible(evaluate, tolerance, m_grid, epsilon_grid, error_grid, N, method)
    common = dict(threshold=threshold, prediction_threshold=prediction_threshold,
                  method=method, tolerance=tolerance, N=N,
                  n_pairs=None if trial is None else trial.n_pairs, m_grid=m_grid,
                  epsilon_grid=epsilon_grid, error_grid=error_grid, data_grid=data_grid,
                  screen_error_grid=screen_grids[0], screen_data_grid=screen_grids[1],
                  screen_edge=(int(m_grid[0]), float(epsilon_grid[0])) if screened else None)
    if law == "edgeworth":
        return _corrected_design(trial, tolerance, m_grid, epsilon_grid, error_grid,
                                 data_grid, common)
    idx = np.flatnonzero(feasible.ravel())
    best = idx[np.lexsort((error_grid.ravel()[idx], data_grid.ravel()[idx]))[0]]
    i, k = np.unravel_index(best, error_grid.shape)
    return Design(
        m=int(m_grid[i]), epsilon=float(epsilon_grid[k]),
        data_fraction=float(data_grid[i, k]), error=float(error_grid[i, k]), **common)


#: The corrected search visits cells whose Gaussian error is at most this times the tolerance,
CORRECTED_ERROR_SPAN = 2.0
#: stops once no cell left has a Gaussian data fraction below the best corrected one over this,
CORRECTED_DATA_SLACK = 1.15
#: and evaluates at most this many cells;
CORRECTED_MAX_CELLS = 12
#: if none of them meets the tolerance, epsilon is walked down the grid (at most this many
#: cells more) at the m of the smallest corrected error, where the infeasible-design error
#: looks for its suggestion: so a setting the error names, once added to the grid, is visited.
CORRECTED_RESCUE_CELLS = 8


def _corrected_design(trial, tolerance, m_grid, epsilon_grid, error_grid, data_grid, common):
    """The least-data cell whose Edgeworth-corrected mean |Delta| meets the tolerance."""
    from ._edgeworth import edgeworth_pair_errors

    N = trial.N

    def corrected(i, k):
        m, eps = int(m_grid[i]), float(epsilon_grid[k])
        delta, data = edgeworth_pair_errors(trial, m, eps,
                                            x_edge=mu_table_edge(N, m, eps, "normal"))
        return float(np.mean(np.abs(delta))), float(np.mean(data))

    flat_err, flat_data = error_grid.ravel(), data_grid.ravel()
    order = [int(c) for c in np.lexsort((flat_err, flat_data))
             if flat_err[c] <= CORRECTED_ERROR_SPAN * tolerance]
    gauss_ok = [c for c in order if flat_err[c] <= tolerance]
    visited, best = [], None
    g_cell = gauss_ok[0] if gauss_ok else None
    g_err = None
    if g_cell is not None:                       # the Gaussian choice, corrected
        g_err, g_data = corrected(*np.unravel_index(g_cell, error_grid.shape))
        visited.append((g_cell, g_err, g_data))
        if g_err <= tolerance:
            best = visited[-1]
    for c in order:
        if len(visited) >= CORRECTED_MAX_CELLS:
            break
        if best is not None and flat_data[c] * CORRECTED_DATA_SLACK > best[2]:
            break
        if c == g_cell:
            continue
        err, data = corrected(*np.unravel_index(c, error_grid.shape))
        visited.append((c, err, data))
        if err <= tolerance and (best is None or data < best[2]):
            best = visited[-1]
    if best is None and visited:
        i_b, k_b = np.unravel_index(min(visited, key=lambda v: v[1])[0], error_grid.shape)
        seen = {v[0] for v in visited}
        below = [k for k in np.argsort(-epsilon_grid) if epsilon_grid[k] < epsilon_grid[k_b]]
        cand = [int(np.ravel_multi_index((i_b, k), error_grid.shape)) for k in below]
        for c in [c for c in cand if c not in seen][:CORRECTED_RESCUE_CELLS]:
            err, data = corrected(*np.unravel_index(c, error_grid.shape))
            visited.append((c, err, data))
            if err <= tolerance:
                best = visited[-1]
                break
    cells = tuple((int(m_grid[np.unravel_index(c, error_grid.shape)[0]]),
                   float(epsilon_grid[np.unravel_index(c, error_grid.shape)[1]]), e, d)
                  for c, e, d in visited)
    chosen_m = None if best is None else int(m_grid[np.unravel_index(best[0],
                                                                      error_grid.shape)[0]])
    warn_beyond_expansion(trial, cells, chosen_m)
    if best is None:
        raise _corrected_infeasible(trial, tolerance, cells, N, float(epsilon_grid[0]))
    i, k = np.unravel_index(best[0], error_grid.shape)
    gi, gk = (None, None) if g_cell is None else np.unravel_index(g_cell, error_grid.shape)
    return Design(
        m=int(m_grid[i]), epsilon=float(epsilon_grid[k]), data_fraction=best[2],
        error=best[1], law="edgeworth",
        gaussian_m=None if gi is None else int(m_grid[gi]),
        gaussian_epsilon=None if gk is None else float(epsilon_grid[gk]),
        gaussian_corrected_error=g_err, corrected_cells=cells, **common)


def warn_beyond_expansion(trial, cells, chosen_m=None):
    """Warn when the corrected search relied on cells whose m is outside the expansion.

    A cell (m, epsilon) is outside when any trial pair fails ``edgeworth_reliable`` at m
    (|gamma| / sqrt(m) > 0.5 or max(kappa, gamma^2) / m > 0.5): there the corrected mean
    |Delta| can still be several standard errors from the real test (kurtosis ~77 at
    m = 100, or m = 50 at kurtosis ~40: 4-8 SE), so the choice among those cells, and the
    design's promise, should be checked by simulating the real test on the real l_i
    (``validation.acceptance_check``), which :mod:`design` cannot run (it sits below
    ``samplers``). Returns the pairs outside the expansion at ``chosen_m`` (empty if none).
    """
    from ._edgeworth import edgeworth_reliable

    outside = {}
    for m in sorted({c[0] for c in cells}):
        bad = np.flatnonzero(~edgeworth_reliable(trial.skewness, trial.kurtosis, m))
        if bad.size:
            outside[m] = bad
    if not outside:
        return np.empty(0, dtype=np.intp)
    at_chosen = outside.get(chosen_m, np.empty(0, dtype=np.intp))
    listed = [f"(m = {m}, epsilon = {e:g})" for m, e, _, _ in cells if m in outside]
    pairs = at_chosen if at_chosen.size else outside[min(outside)]
    shown = ", ".join(str(int(p)) for p in pairs[:10]) + (", ..." if pairs.size > 10 else "")
    where = (f"at the chosen m = {chosen_m}" if at_chosen.size
             else f"at m = {min(outside)}")
    warnings.warn(
        f"optimize(law='edgeworth') relied on {len(listed)} cell(s) outside the Edgeworth "
        f"expansion's validity: {', '.join(listed)}; {pairs.size} of {trial.n_pairs} trial "
        f"pair(s) {where} have |skewness| / sqrt(m) or max(kurtosis, skewness^2) / m above "
        f"0.5 (pairs {shown}; max |skewness| {float(np.max(np.abs(trial.skewness))):.3g}, "
        f"max excess kurtosis {float(np.max(trial.kurtosis)):.3g}). The corrected error can "
        "be several standard errors off there: check the design on the real l_i with "
        "validation.acceptance_check(model, pairs, design=d) (the simulated real test), or "
        "use validation.fit, which redesigns with the simulation.", UserWarning,
        stacklevel=_outside_design())
    return at_chosen


def _outside_design() -> int:
    """The ``stacklevel`` of the first frame outside :mod:`design` (for the caller of
    :func:`warn_beyond_expansion`; ``optimize`` is reached directly or by the dispatch)."""
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def _corrected_infeasible(trial, tolerance, cells, N, eps_min):
    """The error for a corrected search without a feasible cell: epsilon is halved at the
    visited cell of smallest corrected error (as ``_infeasible`` does for the Gaussian
    grid) to name the nearest feasible setting."""
    from ._edgeworth import edgeworth_pair_errors

    if not cells:
        return InfeasibleDesignError(
            f"no (m, epsilon) on the grid has a Gaussian error within "
            f"{CORRECTED_ERROR_SPAN:g} x the tolerance {tolerance:g}; widen the grid or raise "
            "the tolerance.", m=N, epsilon=eps_min, error=0.0, data_fraction=1.0,
            best_on_grid=None)
    m_b, eps_b, err_b, _ = min(cells, key=lambda c: c[1])
    found = (N, eps_min, 0.0, 1.0)                       # the exact test
    eps = eps_b
    for _ in range(6):
        eps /= 2
        delta, data = edgeworth_pair_errors(trial, m_b, eps,
                                            x_edge=mu_table_edge(N, m_b, eps, "normal"))
        if np.mean(np.abs(delta)) <= tolerance:
            found = (m_b, eps, float(np.mean(np.abs(delta))), float(np.mean(data)))
            break
    m_f, eps_f, err_f, data_f = found
    return InfeasibleDesignError(
        f"no (m, epsilon) visited meets tolerance {tolerance:g} under the Edgeworth-corrected "
        f"law ({len(cells)} cells; the smallest corrected mean |Delta| is {err_b:.3g} at "
        f"m = {m_b}, epsilon = {eps_b:g}). Nearest feasible setting found: m = {m_f}, "
        f"epsilon = {eps_f:.3g} (mean |Delta| {err_f:.3g}, data fraction {data_f:.3g}); add "
        "it to the grid or raise the tolerance.",
        m=m_f, epsilon=eps_f, error=err_f, data_fraction=data_f,
        best_on_grid=(m_b, eps_b, err_b))


def _trisect(lo, hi):
    """Probes that cut the unknown boundary lo <= b <= hi into three near-equal parts.

    Probing k tells whether b > k (k feasible) or b <= k; two probes leave at most
    ceil((hi - lo + 1) / 3) candidates.
    """
    n = hi - lo + 1                       # candidates lo..hi
    return sorted({lo + (j * n) // 3 - 1 for j in (1, 2)} & set(range(lo, hi)))


def _cells_full(n_m, n_eps, result):
    """Every cell of the grid, in one batch (small m first)."""
    yield [(i, k, False) for i in range(n_m) for k in range(n_eps)]


def _cells_bisect(n_m, n_eps, feasible):
    """The cells that locate, for each m, the largest feasible epsilon (see ``optimize``).

    A generator of batches of cells (i, k); ``feasible(i, k)`` reads a cell's result, which
    the caller has stored before asking for the next batch. For row i the boundary b_i (the
    number of feasible epsilons) is bracketed as lo <= b_i <= hi: the epsilons below lo are
    feasible, those from hi on are not. Row 0 is searched by trisection (two probes per
    batch, so two threads are busy); a later row first probes b - 1 and b for the previous
    row's b (the boundary rarely moves between neighbouring m), then trisects what is left.
    A row whose results are not monotone (possible only for errors within rounding of the
    tolerance) is evaluated in full. The cells depend only on the results, never on the
    number of threads.
    """
    guess = None
    for i in range(n_m):
        lo, hi = 0, n_eps
        batch = [] if guess is None else [k for k in (guess - 1, guess) if 0 <= k < n_eps]
        while True:
            batch = batch or _trisect(lo, hi)
            if not batch:
                break
            yield [(i, k) for k in batch]
            for k in batch:
                if feasible(i, k):
                    lo = max(lo, k + 1)
                else:
                    hi = min(hi, k)
            batch = []
            if lo > hi:                      # not monotone: evaluate the whole row
                yield [(i, k) for k in range(n_eps)]
                lo = hi = sum(bool(feasible(i, k)) for k in range(n_eps))
        guess = lo


def _cells_screen(n_m, n_eps, result, tolerance, margins, workers, data_bound=None):
    """The average design's search: a cheap screen of every cell, then the full programme
    only where the screen cannot rule a cell out (see ``optimize``, Notes).

    A generator of batches of jobs (i, k, screen) like ``_cells_bisect``'s; ``result(job)``
    reads a finished job's (error, data). ``margins[i]`` = (error margin, data margin) of
    row i bound |screened - full| there. Candidates (screened error within the tolerance
    plus the margin) run in order of screened data fraction, ``workers`` at a time, until
    the next one's screened data minus its margin exceeds the best feasible data found:
    every cell left out is then infeasible or uses more data than the design. Without a
    feasible cell, the cells that may hold the grid's smallest error run instead (the
    error message names it). The jobs depend only on the results, never on the threads.

    One more lower bound on a candidate's data skips it (it matters where the data
    fractions differ by less than the margins, as with control variates, where every
    design reads about one minibatch: at N = 10^6 the data margin is 2,400 rows):
    ``data_bound(i, k, done)``, given the epsilon indices ``done`` of row i already run in
    full (``_Evaluator.data_lower_bound``: the test reads at least its first minibatch, and
    pi-bar at each knot of the table cannot fall as epsilon falls). A candidate whose bound
    is above the best feasible data, or equal to it (only an exact tie in the data
    fraction, where the full search would take the smaller error, could choose it), is not
    run.
    """
    cells = [(i, k) for i in range(n_m) for k in range(n_eps)]
    yield [(i, k, True) for i, k in cells]
    screened = {c: result((*c, True)) for c in cells}
    order = sorted((c for c in cells if screened[c][0] <= tolerance + margins[c[0]][0]),
                   key=lambda c: screened[c][1])
    best = math.inf
    done = {}            # row -> epsilon indices of its cells run in full

    def bound(c):
        i, k = c
        lower = screened[c][1] - margins[i][1]
        if data_bound is None:
            return lower
        return max(lower, data_bound(i, k, done.get(i, [])))

    pos = 0
    while pos < len(order):
        batch = []
        while pos < len(order) and len(batch) < workers:
            c = order[pos]
            if screened[c][1] - margins[c[0]][1] > best:
                pos = len(order)                  # this one and every later one lose
                break
            pos += 1
            if bound(c) >= best:
                continue                          # reads at least the best design's data
            batch.append(c)
        if not batch:
            break
        yield [(i, k, False) for i, k in batch]
        for c in batch:
            err, data = result((*c, False))
            done.setdefault(c[0], []).append(c[1])
            if err <= tolerance:
                best = min(best, data)
    if best == math.inf:
        yield _smallest_error_cells(screened, margins)


def _smallest_error_cells(screened, margins):
    """Jobs of the screened cells that may hold the grid's smallest error (within their
    row's error margin of it): run in full when no cell is feasible, for the error's
    message."""
    top = min(e + margins[i][0] for (i, _), (e, _) in screened.items())
    return [(i, k, False) for (i, k), (e, _) in screened.items() if e - margins[i][0] <= top]


def _cells_prune(n_m, n_eps, result, tolerance, margins, workers, data_bound, row_bound):
    """``_cells_screen``'s search, screening a row of m only when it could hold the design.

    ``row_bound(i)`` is a lower bound on the data fraction of every cell of row i that needs
    no programme run (``_Evaluator.data_lower_bound`` without tables: the test reads at
    least its first minibatch, m / N). Rows are screened one at a time, in order of that
    bound, when it is below both the best feasible data found and the screened data of the
    next candidate; candidates run in full (``workers`` at a time, in order of screened
    data) while their screened data is at most the next row's bound. A cell is skipped when
    its lower bound (``_cells_screen``'s, or its row's) is at least the best feasible data.
    So every cell left out, screened or not, is infeasible or reads at least the data of
    the design: the same design as ``_cells_screen`` (where the designs read about one
    minibatch, as with control variates, only the rows of m below the design's data are
    screened). Without a feasible cell every row is screened, and the error's cells run as
    in ``_cells_screen``.
    """
    rows = sorted(range(n_m), key=lambda i: (row_bound(i), i))
    screened, order, ran, done = {}, [], set(), {}
    best = math.inf

    def bound(c):
        i, k = c
        return max(screened[c][1] - margins[i][1], row_bound(i),
                   data_bound(i, k, done.get(i, [])))

    while True:
        pending = [c for c in order if c not in ran and bound(c) < best]
        next_row = row_bound(rows[0]) if rows else math.inf
        if next_row < best and (not pending or next_row < screened[pending[0]][1]):
            i = rows.pop(0)
            yield [(i, k, True) for k in range(n_eps)]
            for k in range(n_eps):
                screened[(i, k)] = result((i, k, True))
                if screened[(i, k)][0] <= tolerance + margins[i][0]:
                    order.append((i, k))
            order.sort(key=lambda c: screened[c][1])
            continue
        if not pending:
            break
        batch = [c for c in pending
                 if next_row >= best or screened[c][1] <= next_row][:workers] or pending[:1]
        yield [(i, k, False) for i, k in batch]
        for c in batch:
            ran.add(c)
            err, data = result((*c, False))
            done.setdefault(c[0], []).append(c[1])
            if err <= tolerance:
                best = min(best, data)
    if best == math.inf:
        yield _smallest_error_cells(screened, margins)


#: Cells the bisection evaluates at most per row: two guesses, then trisection.
def _bisect_bound(n_eps):
    return 2 + 2 * max(1, math.ceil(math.log(n_eps + 1, 3)))


def _search(evaluate, m_grid, epsilon_grid, jobs, total, workers, progress, results,
            on_full=None):
    """Run the batches of jobs (i, k, screen) that ``jobs(result)`` yields; return
    {job: (error, data)}.

    ``result(job)`` gives a finished job's result to the generator, which chooses each
    batch from the results of the ones before; the jobs of a batch run on ``workers``
    threads. ``total`` is the progress bar's (upper bound on the) number of jobs;
    ``results`` is the dict the results go to (``evaluate`` may read it). The main
    thread waits on the futures with a timeout, so a KeyboardInterrupt (or an exception
    from the progress callback) reaches it at once; the pool is then shut down with the
    jobs not yet started cancelled, so only the running ones (each a fraction of a second)
    are waited for. (``concurrent.futures``' ``with`` block followed by ``map`` would
    instead wait for every queued job.) ``on_full(m, epsilon)``, if given, is told the
    first full-programme job of each batch before the batch runs.
    """
    callback, close = _progress_callback(progress, total)

    def run(job):
        i, k, screen = job
        return evaluate(int(m_grid[i]), float(epsilon_grid[k]), screen=screen)

    def store(job, value):
        results[job] = value
        if callback is not None:
            callback(len(results), max(total, len(results)))

    pool = None
    try:
        for batch in jobs(results.__getitem__):
            batch = [job for job in batch if job not in results]
            full = [job for job in batch if not job[2]]
            if on_full is not None and full:
                on_full(int(m_grid[full[0][0]]), float(epsilon_grid[full[0][1]]))
            if workers == 1 or len(batch) == 1:
                for job in batch:
                    store(job, run(job))
                continue
            if pool is None:
                pool = ThreadPoolExecutor(max_workers=workers)
            pending = {pool.submit(run, job): job for job in batch}
            while pending:
                finished, _ = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
                for fut in finished:
                    store(pending.pop(fut), fut.result())
        if callback is not None and len(results) < total:
            callback(len(results), len(results))   # fewer jobs than the bound
        return results
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        close()


def _plan(search, evaluate, m_grid, epsilon_grid, tolerance, workers):
    """(evaluate, jobs, total, results) for :func:`_search` with this search: the cell
    function, the generator of batches, the progress bound and the dict results go to."""
    n_m, n_eps = m_grid.size, epsilon_grid.size
    results = {}
    if search == "bisect":
        def jobs(result):
            feasible = lambda i, k: result((i, k, False))[0] <= tolerance  # noqa: E731
            for batch in _cells_bisect(n_m, n_eps, feasible):
                yield [(i, k, False) for i, k in batch]
        return evaluate, jobs, min(n_m * n_eps, n_m * _bisect_bound(n_eps)), results
    if search not in ("screen", "prune"):
        return (evaluate, lambda result: _cells_full(n_m, n_eps, result), n_m * n_eps,
                results)
    same = [evaluate.screen_is_exact(int(m)) for m in m_grid]
    margins = [(0.0, 0.0) if same[i] else evaluate.screen_margins(int(m))
               for i, m in enumerate(m_grid)]
    rows = {int(m): i for i, m in enumerate(m_grid)}
    cols = {float(e): k for k, e in enumerate(epsilon_grid)}

    def cell(m, eps, screen=False):
        """A full-programme job of a row whose screen is that programme reuses it."""
        key = (rows[m], cols[eps], True)
        if not screen and same[key[0]] and key in results:
            evaluate.data_tables[(m, eps, False)] = evaluate.data_tables[(m, eps, True)]
            return results[key]
        return evaluate(m, eps, screen=screen)

    def data_bound(i, k, done):
        m = int(m_grid[i])
        table = lambda kk: evaluate.data_tables[(m, float(epsilon_grid[kk]), False)]  # noqa: E731
        return evaluate.data_lower_bound(m, larger=[table(kk) for kk in done if kk > k],
                                         smaller=[table(kk) for kk in done if kk < k])

    def jobs(result):
        if search == "prune":
            return _cells_prune(n_m, n_eps, result, tolerance, margins, workers, data_bound,
                                lambda i: evaluate.data_lower_bound(int(m_grid[i])))
        return _cells_screen(n_m, n_eps, result, tolerance, margins, workers, data_bound)
    return cell, jobs, 2 * n_m * n_eps, results


def _grids(results, n_m, n_eps, screen):
    """(error, data) grids of the full (``screen=False``) or screening jobs; NaN where none
    ran."""
    error = np.full((n_m, n_eps), np.nan)
    data = np.full((n_m, n_eps), np.nan)
    for (i, k, s), (e, d) in results.items():
        if s == screen:
            error[i, k], data[i, k] = e, d
    return error, data


def _progress_callback(progress, total):
    """``progress_callback`` whose bar follows a total that may shrink to the cells done."""
    if callable(progress):
        return progress, lambda: None
    bar = progress_bar(total, desc="design grid", progress=progress, unit="cell")
    if bar.disable:
        return None, bar.close

    def update(done, new_total):
        if new_total != bar.total:
            bar.total = new_total
        bar.update(done - bar.n)
    return update, bar.close


def _infeasible(evaluate, tolerance, m_grid, epsilon_grid, error_grid, N, method):
    i, k = np.unravel_index(np.nanargmin(error_grid), error_grid.shape)
    m_best, eps_best = int(m_grid[i]), float(epsilon_grid[k])
    what = "mean |Delta|" if method == "average" else "E(0)"
    found = None
    eps = eps_best
    for _ in range(_MAX_HALVINGS):
        eps /= 2
        err, data = evaluate(m_best, eps)
        if err <= tolerance:
            found = (m_best, eps, err, data)
            break
    if found is None:
        found = (N, float(epsilon_grid[0]), 0.0, 1.0)   # the exact test
    m_f, eps_f, err_f, data_f = found
    return InfeasibleDesignError(
        f"no (m, epsilon) on the grid meets tolerance {tolerance:g}: the smallest {what} is "
        f"{error_grid[i, k]:.3g} at m = {m_best}, epsilon = {eps_best:g}. Nearest feasible "
        f"setting found: m = {m_f}, epsilon = {eps_f:.3g} ({what} {err_f:.3g}, data fraction "
        f"{data_f:.3g}); add it to the grid or raise the tolerance.",
        m=m_f, epsilon=eps_f, error=err_f, data_fraction=data_f,
        best_on_grid=(m_best, eps_best, float(error_grid[i, k])))
