"""Design of the minibatch Barker test (Seita et al. 2017): batch size m and Novak threshold.

The test (``samplers.BarkerTest``) reads ``m`` rows at a time without replacement and stops
at the first batch ``b`` where the estimated variance of ``Delta* = N mean(l) + c``,
``s^2 = N^2 s_l^2 (1 - b/N) / b``, is below ``sigma^2 = 1`` and Corollary 1's bound
``eps = (6.4 mean|z|^3 + 2 mean|z|) / sqrt(b)`` is at most ``delta`` (or ``delta=None``:
the variance alone). Then it accepts iff ``Delta* + X_nc + X_corr > 0``. This module predicts,
per trial pair, where the test stops and the error it makes there, and picks the (m, delta)
that reads the least data within a tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import special

from ._lib.checks import check_int, check_interval

from ._trial import TrialChain

__all__ = ["BarkerDesign", "barker_error_fixed", "barker_pair_prediction", "optimize_barker",
           "DEFAULT_BARKER_M_GRID", "DEFAULT_DELTA_GRID"]

DEFAULT_BARKER_M_GRID = (10, 20, 50, 100, 200, 500, 1000)
#: Novak thresholds tried; None is the variance condition alone (the authors' code).
DEFAULT_DELTA_GRID = (None, 0.9, 0.7, 0.5)
#: Novak's constants (Corollary 1 of Seita et al.): eps = (6.4 E|z|^3 + 2 E|z|) / sqrt(b).
_NOVAK_A3, _NOVAK_A1 = 6.4, 2.0
#: Stages evaluated per pair and grid point at most; beyond, every k-th stage (the
#: survival curve is smooth over that many stages).
_MAX_STAGES = 4000
_TINY = 1e-12


def _logistic_derivatives(x):
    """S'''(x) and S''''(x) of the logistic cdf S, from p = S(x)."""
    p = special.expit(x)
    d1 = p * (1.0 - p)
    d3 = d1 * (1.0 - 6.0 * p + 6.0 * p * p)
    d4 = d1 * (1.0 - 2.0 * p) * (1.0 - 12.0 * p + 12.0 * p * p)
    return d3, d4


def barker_error_fixed(b, *, N, delta, variance, skewness, kurtosis):
    """Error of the minibatch Barker test at a fixed batch of ``b`` rows (closed form).

    Parameters
    ----------
    b : int or array_like
        Batch size(s), ``2 <= b <= N``.
    N : int
        Number of rows.
    delta : float
        ``Delta = N mean(l) + c``, the exact Barker test's log ratio.
    variance : float
        Population variance of the l_i (divisor N).
    skewness, kurtosis : float
        Population skewness and excess kurtosis of the l_i.

    Returns
    -------
    float or numpy.ndarray
        ``P(accept) - S(Delta)``; 0 at ``b = N`` (the exact test).

    Notes
    -----
    Given the batch, ``X_nc + X_corr`` is the logistic deconvolved by ``N(0, s_hat^2)``, so
    ``P(accept | batch) = exp(-(s_hat^2 / 2) D^2) S (Delta*)``. Expanding in ``e = Delta* -
    Delta`` and ``s_hat^2`` (unbiased for ``s^2 = Var(e) = N^2 S^2 (1 - b/N) / b``, ``S^2``
    the variance with divisor N - 1) to second order, the ``S''`` terms cancel and

        error = [E e^3 / 6 - E(s_hat^2 e) / 2] S'''(Delta)
                + [E e^4 / 24 - E(s_hat^2 e^2) / 4 + E s_hat^4 / 8] S''''(Delta)
              ~ N^3 m3 (1 - b/N) / b^2 [(1 - 2b/N) / 6 - (1 - b/N) / 2] S'''(Delta)
                + s^4 [1 / (4 (b - 1)) - kappa / (12 b)] S''''(Delta),

    with ``m3`` the third central moment and ``kappa`` the excess kurtosis of the l_i
    (moments of sampling without replacement to leading order). For Gaussian l_i this is
    ``s^4 S''''(Delta) / (4 (b - 1))`` (``docs/correction.md``, section 5); the skew term is
    the ``O(b^-1/2)`` error that the skew-corrected table removes (Seita et al., A.5). Checked
    against the simulator :func:`design.acceptance.barker_acceptance`
    (``tests/design/test_design_tests.py``): within about 1e-4 for |skewness| <= 2 and
    excess kurtosis <= 6 at ``s^2 <= 0.6``; on lognormal l_i (skewness 6, kurtosis 90) at
    ``b = 50`` the higher-order terms reach several 1e-3. The correction table's own error
    (5e-8) is left out.

    Examples
    --------
    >>> from design._barker_design import barker_error_fixed
    >>> e = barker_error_fixed(200, N=100_000, delta=0.5, variance=0.6 * 200 / 1e10 / 0.998,
    ...                        skewness=0.0, kurtosis=0.0)
    >>> round(float(e), 6)     # s^2 = 0.6: s^4 S''''(0.5) / (4 * 199)
    4.7e-05
    """
    b = np.asarray(b, dtype=float)
    cubic, quartic = _fixed_coefficients(b, N, variance, skewness, kurtosis)
    d3, d4 = _logistic_derivatives(delta)
    out = np.where(b >= N, 0.0, cubic * d3 + quartic * d4)
    return float(out) if out.ndim == 0 else out


def _fixed_coefficients(b, N, variance, skewness, kurtosis):
    """The coefficients of ``S'''(Delta)`` and ``S''''(Delta)`` in
    :func:`barker_error_fixed` (array inputs broadcast)."""
    b = np.asarray(b, dtype=float)
    f = 1.0 - b / N
    S2 = np.asarray(variance, dtype=float) * N / (N - 1.0)
    s2 = N * (N * S2) * f / b
    m3 = skewness * np.sqrt(variance) ** 3
    cubic = N * (N * (N * m3)) * f / (b * b) * ((1.0 - 2.0 * b / N) / 6.0 - f / 2.0)
    quartic = s2 * s2 * (1.0 / (4.0 * np.maximum(b - 1.0, 1.0)) - kurtosis / (12.0 * b))
    return cubic, quartic


def _stop_probabilities(b, N, S2, kurtosis):
    """P(s_hat^2 < 1) at batch sizes b: s_hat^2 as a Gamma with its mean and variance.

    Mean ``s^2(b) = N^2 S^2 (1 - b/N) / b``; relative variance ``2/(b - 1) + kappa/b`` (the
    variance of a sample variance), floored so the Gamma stays proper.
    """
    mean = N * (N * S2) * (1.0 - b / N) / b
    rel = np.maximum(2.0 / np.maximum(b - 1.0, 1.0) + kurtosis / b, 1e-6)
    shape = 1.0 / rel
    with np.errstate(divide="ignore", over="ignore"):
        x = np.where(mean > 0, 1.0 / (mean * rel), np.inf)
    return np.where(mean > 0, special.gammainc(shape, x), 1.0)


def _stopping_shift(b, N, variance, skewness, first):
    """E(Delta* - Delta) when the test stops at batch ``b`` on its own variance:
    ``-N mu3 (1 - b/N) / (b V)`` (optional stopping of the unread rows' mean, the variance
    frozen over the stages around the stop; derived in :func:`design.barker_decision_errors`),
    0 at the first stage the rule may stop (``first``), where the stop is not selected.
    Within the simulation's noise of the real rule on skewed l_i
    (``benchmarks/bias_monitor_tests.py``, population series)."""
    b = np.asarray(b, dtype=float)
    mu3 = skewness * variance ** 1.5
    return np.where(b > first, -N * mu3 * (1.0 - b / N) / (b * variance), 0.0)


def barker_pair_prediction(trial, p, m, delta, selection=True):
    """Predicted rows read and error of ``BarkerTest(m, delta)`` at pair ``p`` of a trial.

    Returns ``(expected_rows, error, stop_batch_median)``. The stopping batch is modelled
    stage by stage: the test can stop at batch ``b_j = j m`` once Corollary 1's bound, from
    the pair's population ``mean|z|`` and ``mean|z|^3``, is at most ``delta``, and does stop
    when ``s_hat^2 < 1``; ``P(s_hat^2 < 1)`` at each stage is that of a Gamma variable with the
    mean and variance of ``s_hat^2``, and the survival is the running minimum of the stagewise
    ``1 - P`` (the nested batches make the events nearly increasing). The error is the
    fixed-batch error (:func:`barker_error_fixed`) averaged over that stopping law, plus,
    with ``selection`` (the default), the first-order selection bias of stopping on the
    batch's own variance (:func:`_stopping_shift` times ``S'(Delta)``; the earlier
    regression of ``e`` on ``s_hat^2`` given ``s_hat^2 < 1`` at one stage over-stated the
    simulated bias 1.3-6 fold), within the real test's noise on exponential l_i
    (``tests/design/test_design_tests.py``). More than
    ``_MAX_STAGES`` stages are thinned to every k-th.
    """
    N = trial.N
    S2 = float(trial.sigma[p]) ** 2 * N / (N - 1.0)
    kappa = float(trial.kurtosis[p])
    J = -(-N // m)                          # stage J reads all N rows: exact
    j_min = 1
    if delta is not None:
        novak = _NOVAK_A3 * float(trial.abs_z3[p]) + _NOVAK_A1 * float(trial.abs_z1[p])
        j_min = max(1, math.ceil((novak / delta) ** 2 / m - 1e-9))
    if j_min >= J:
        return float(N), 0.0, float(N)
    # stages j_min .. J - 1 may stop early; thin them if there are many
    n_st = J - j_min
    stride = max(1, -(-n_st // _MAX_STAGES))
    js = np.arange(j_min, J, stride, dtype=float)
    b = js * m
    q = _stop_probabilities(b, N, S2, kappa)
    surv = np.minimum.accumulate(1.0 - q)
    surv[surv < _TINY] = 0.0
    prev = np.concatenate([[1.0], surv[:-1]])
    w = prev - surv                          # P(stop at the thinned stage)
    p_exact = float(surv[-1])                # still running after stage J - 1: reads all N
    rows = float(np.sum(w * b)) + p_exact * N
    delta_p = float(trial.log_accept_ratio[p])
    err = barker_error_fixed(b, N=N, delta=delta_p, variance=float(trial.sigma[p]) ** 2,
                             skewness=float(trial.skewness[p]), kurtosis=kappa)
    if selection:
        err = err + _stopping_shift(b, N, float(trial.sigma[p]) ** 2,
                                    float(trial.skewness[p]), b[0]) * float(
            special.expit(delta_p) * special.expit(-delta_p))
    error = float(np.sum(w * err))
    cdf = np.cumsum(w)
    k = int(np.searchsorted(cdf, 0.5))
    median = float(b[k]) if k < b.size else float(N)
    return rows, error, median


@dataclass(frozen=True, eq=False)
class BarkerDesign:
    """A design of the minibatch Barker test (``samplers.BarkerTest.from_design``).

    Attributes
    ----------
    test : str
        ``"barker"`` (class constant): the test kind this design is for.
    m : int
        Rows added per stage.
    delta : float or None
        Novak threshold of the stopping rule; None: the variance condition alone.
    data_fraction : float
        Predicted mean fraction of the N rows read per test, over the trial pairs.
    error : float
        Predicted error: mean (average design) or largest (worst case) |P(accept) - S(Delta)|
        over the trial pairs, S Barker's acceptance function.
    method : {"average", "worst-case"}
    tolerance : float
    N, n_pairs : int
    m_grid : numpy.ndarray
    delta_grid : tuple
        The Novak thresholds searched (None for the variance condition alone).
    error_grid, data_grid : numpy.ndarray, shape (len(m_grid), len(delta_grid))
    pair_error, pair_data_fraction : numpy.ndarray
        Predicted signed error and data fraction of each trial pair at the chosen design.
    grown_fraction : float
        Fraction of the trial pairs whose predicted median stopping batch is beyond the first
        stage: there the test stops on its batch's own variance, whose selection bias the
        prediction does not include (``docs/correction.md``, section 6).
    """

    test: ClassVar[str] = "barker"
    m: int
    delta: float | None
    data_fraction: float
    error: float
    method: str
    tolerance: float
    N: int
    n_pairs: int
    m_grid: np.ndarray
    delta_grid: tuple
    error_grid: np.ndarray
    data_grid: np.ndarray
    pair_error: np.ndarray
    pair_data_fraction: np.ndarray
    grown_fraction: float

    def __str__(self):
        err = ("mean |P - S(Delta)| over the trial pairs" if self.method == "average"
               else "largest |P - S(Delta)| over the trial pairs")
        feasible = int(np.sum(self.error_grid <= self.tolerance))
        rows = self.data_fraction * self.N
        why = (f"the least data among {feasible} of {self.error_grid.size} grid points within "
               f"the tolerance")
        lines = [
            f"Barker test design ({self.method} design over {self.n_pairs} trial pairs, "
            f"N = {self.N:,}, tolerance {self.tolerance:g})",
            f"  rows per stage m      {self.m}",
            f"  Novak threshold delta {self.delta}"
            + ("  (variance condition s^2 < 1 alone)" if self.delta is None else ""),
            f"  expected error        {self.error:.3g}  ({err})",
            f"  expected data use     {self.data_fraction:.4g}  (about {rows:,.0f} of "
            f"{self.N:,} rows per test, {rows / self.m:.3g} stages)",
            f"  chosen because        {why}",
        ]
        if self.grown_fraction > 0:
            lines.append(
                f"  caution               {self.grown_fraction:.0%} of the pairs stop after "
                "the batch grew on its own variance: the selection bias of that stopping rule "
                "is predicted to first order only (docs/correction.md section 6); a Novak "
                "threshold (delta_grid=[0.5]) or a larger m shrinks it at more data")
        return "\n".join(lines)


def _check_needs(trial, fields, kind, what):
    missing = [f for f in fields if getattr(trial, f) is None]
    if missing:
        names = ", ".join(f"trial_chain.{f}" for f in missing)
        raise ValueError(
            f"the {kind} design needs {names} ({what}), which this TrialChain does not "
            "record; build it with TrialChain.from_model (a chain recorded by exact MH "
            "carries only mu and sigma)")


def optimize_barker(trial, tolerance, *, method="average", m_grid=None, delta_grid=None):
    """Choose ``m`` and the Novak threshold of the Barker test (see :func:`design.optimize`)."""
    from ._optimize import InfeasibleDesignError

    if not isinstance(trial, TrialChain):
        raise TypeError("the Barker design needs a TrialChain (with the shape of the l_i), "
                        f"got {type(trial).__name__}")
    _check_needs(trial, ("skewness", "kurtosis", "abs_z1", "abs_z3"), "Barker",
                 "the shape of the l_i per pair")
    N = trial.N
    if m_grid is None:
        m_grid = [m for m in DEFAULT_BARKER_M_GRID if m <= N] or [N]
    m_arr = np.unique([check_int(f"m_grid[{i}]", v, low=2, high=N)
                       for i, v in enumerate(np.atleast_1d(m_grid).tolist())])
    if delta_grid is None:
        delta_grid = DEFAULT_DELTA_GRID
    deltas = []
    for i, v in enumerate(list(delta_grid)):
        d = None if v is None else check_interval(f"delta_grid[{i}]", v, 0.0, 1.0)
        if d not in deltas:
            deltas.append(d)
    if not deltas:
        raise ValueError("delta_grid must hold at least one value (None or a float in (0, 1))")
    P = trial.n_pairs
    error_grid = np.empty((m_arr.size, len(deltas)))
    data_grid = np.empty_like(error_grid)
    per_pair = {}
    for i, m in enumerate(m_arr):
        for k, d in enumerate(deltas):
            res = np.array([barker_pair_prediction(trial, p, int(m), d) for p in range(P)])
            frac, err, med = res[:, 0] / N, res[:, 1], res[:, 2]
            per_pair[i, k] = (err, frac, med)
            error_grid[i, k] = np.mean(np.abs(err)) if method == "average" else np.max(np.abs(err))
            data_grid[i, k] = np.mean(frac)
    for a in (m_arr, error_grid, data_grid):
        a.setflags(write=False)
    feasible = error_grid <= tolerance
    if not feasible.any():
        i, k = np.unravel_index(np.argmin(error_grid), error_grid.shape)
        raise InfeasibleDesignError(
            f"no (m, delta) on the grid meets tolerance {tolerance:g}: the smallest predicted "
            f"error is {error_grid[i, k]:.3g} at m = {m_arr[i]}, delta = {deltas[k]}. Larger m "
            "(a smaller s^2 at the stop) or a smaller delta lower it; the exact test (m = N) "
            "has none.",
            m=N, epsilon=None, error=0.0, data_fraction=1.0,
            best_on_grid=(int(m_arr[i]), deltas[k], float(error_grid[i, k])))
    idx = np.flatnonzero(feasible.ravel())
    best = idx[np.lexsort((error_grid.ravel()[idx], data_grid.ravel()[idx]))[0]]
    i, k = np.unravel_index(best, error_grid.shape)
    err, frac, med = per_pair[i, k]
    for a in (err, frac):
        a.setflags(write=False)
    return BarkerDesign(
        m=int(m_arr[i]), delta=deltas[k], data_fraction=float(data_grid[i, k]),
        error=float(error_grid[i, k]), method=method, tolerance=tolerance, N=N, n_pairs=P,
        m_grid=m_arr, delta_grid=tuple(deltas), error_grid=error_grid, data_grid=data_grid,
        pair_error=err, pair_data_fraction=frac,
        grown_fraction=float(np.mean(med > m_arr[i])))
