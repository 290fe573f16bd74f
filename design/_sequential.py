"""Error and data use of the sequential t-test, by dynamic programming."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from scipy import special

from ._lib.checks import check_finite_array, check_int, check_interval

from . import _dp
from ._names import THRESHOLDS
from ._stages import DEFAULT_MERGE, merge_step, plan_stages

__all__ = ["SequentialError", "sequential_error"]

_GL_T, _GL_W = np.polynomial.legendre.leggauss(_dp.GL_ORDER)

#: Number of even moments in the drifted-survival series (enough for a q <= 40).
_N_MOMENTS = 64


@dataclass(frozen=True)
class _Resolution:
    """Discretisation of the dynamic programme; ``refined(f)`` is f times finer.

    reach: kernel reach in kernel sds; grid: grid points per kernel sd; window: how much
    finer than that the contracting grid may become before it is rebuilt; band, band_order:
    band panel width in sds and its Gauss-Legendre order; interior_*: panels on [0, q]
    (finest in sds, coarsest absolute, growth ratio). The defaults give ~1e-10 absolute
    accuracy or better (see the tests).
    """

    reach: float = 8.0
    grid: float = 1.75
    window: float = 1.25
    band: float = 8.5
    band_order: int = 16
    interior_finest: float = 3.0
    interior_coarsest: float = 0.5
    interior_ratio: float = 2.0

    def refined(self, factor: float) -> "_Resolution":
        return _Resolution(
            reach=self.reach + 1.0,
            grid=self.grid * factor,
            window=self.window,
            band=self.band / factor,
            band_order=int(round(self.band_order * factor)),
            interior_finest=self.interior_finest / factor,
            interior_coarsest=self.interior_coarsest / factor,
            interior_ratio=1.0 + (self.interior_ratio - 1.0) / factor,
        )


DEFAULT_RESOLUTION = _Resolution()
#: Resolution of the fast path for N / m >= FAST_FROM (and of every merged plan, whose own
#: error is ~1e-7): band order 12, reach 7 and coarser interior panels cost half as much per
#: stage and move E and pi-bar by ~1e-9 (measured against DEFAULT_RESOLUTION).
FAST_RESOLUTION = _Resolution(reach=7.0, band_order=12, interior_coarsest=1.0,
                              interior_ratio=3.0)
FAST_FROM = 2000


def check_design_args(m, epsilon, N, threshold):
    """Validate (m, epsilon, N, threshold) at the public boundary; return them coerced."""
    N = check_int("N", N, low=2)
    m = check_int("m", m, low=2, high=N)
    epsilon = check_interval("epsilon", epsilon, 0.0, 0.5)
    if threshold not in THRESHOLDS:
        raise ValueError(f"threshold must be 'normal' or 't', got {threshold!r}")
    return m, epsilon, N, threshold


def stage_sizes(m: int, N: int) -> np.ndarray:
    """Cumulative sample sizes n_j = min(j m, N), j = 1..J, J = ceil(N / m)."""
    J = -(-N // m)
    return np.minimum(np.arange(1, J + 1, dtype=np.int64) * m, N)


def stage_thresholds(n: np.ndarray, epsilon: float, threshold: str) -> np.ndarray:
    """Threshold q_j on |z| at sample sizes ``n``: Phi^-1(1 - eps) or t_{n-1}^-1(1 - eps).

    The special functions that ``scipy.stats.norm.isf`` and ``scipy.stats.t.isf`` call
    (equal bit for bit), without importing ``scipy.stats`` (a third of a second)."""
    if threshold == "normal":
        return np.full(n.shape, -special.ndtri(epsilon))
    return -special.stdtrit(n - 1, epsilon)


@functools.cache
def _gauss_legendre(order: int):
    """Gauss-Legendre nodes and weights on [-1, 1] (computed once per order: a grid of
    cells would otherwise rebuild them in every cell, holding the GIL)."""
    t, w = np.polynomial.legendre.leggauss(order)
    t.setflags(write=False)
    w.setflags(write=False)
    return t, w


#: The programme stops once every survival is below this (the outputs move by less).
STOP_TOL = 1e-13


#: Programmes kept by :func:`run_dp` (its results by its arguments, drifts included):
#: ``validation.fit`` runs the same one three times, at the design's chosen cell, in the
#: verdict and after the run (the same m, epsilon and N give the same knots), each about
#: 0.15 s at N = 10^6, m = 10.
DP_CACHE_SIZE = 8
_dp_cache: OrderedDict = OrderedDict()
_dp_lock = threading.Lock()


def run_dp(mus, m, epsilon, N, threshold, *, interior=True,
           resolution: _Resolution | None = None, merge=DEFAULT_MERGE, stop_tol=STOP_TOL):
    """:func:`_run_dp`, its results kept for the last ``DP_CACHE_SIZE`` argument sets (the
    arrays read-only, a new dict per call)."""
    mus = np.ascontiguousarray(mus, dtype=np.float64)
    key = (mus.tobytes(), int(m), float(epsilon), int(N), threshold, bool(interior),
           resolution, float(merge), float(stop_tol))
    with _dp_lock:
        found = _dp_cache.get(key)
        if found is not None:
            _dp_cache.move_to_end(key)
            return dict(found)
    res = _run_dp(mus, m, epsilon, N, threshold, interior=interior, resolution=resolution,
                  merge=merge, stop_tol=stop_tol)
    for a in res.values():
        a.setflags(write=False)
    with _dp_lock:
        _dp_cache[key] = res
        while len(_dp_cache) > DP_CACHE_SIZE:
            _dp_cache.popitem(last=False)
    return dict(res)


def _run_dp(mus, m, epsilon, N, threshold, *, interior=True,
            resolution: _Resolution | None = None, merge=DEFAULT_MERGE, stop_tol=STOP_TOL):
    """Run the compiled dynamic programme for non-negative drifts ``mus`` (float64[k]).

    Returns a dict of float64[k] arrays: error, p_early_correct, p_full, data_fraction,
    expected_stages, plus the driftless per-visited-stage ``exits`` and ``survival`` and the
    visited ``stages`` (1-based). Arguments are assumed valid (checked by the public callers).

    ``merge`` is the largest step in log information time of a merged stage (grown for
    very large N / m to keep the stage count near ``_stages.STAGE_BUDGET``; see
    ``design._stages``: cost O(log(N / m) / merge) instead of O(N / m), error below about
    0.5 merge^2 in the error and 3 merge^2 in the data fraction); ``merge=0`` and
    ``stop_tol=0`` run every stage to the end at ``DEFAULT_RESOLUTION``: the exact reference
    programme. Without a merged stage the plan is the exact one; the fast path runs it at
    ``FAST_RESOLUTION`` from N / m >= ``FAST_FROM`` (and every merged plan), unless
    ``resolution`` is given.
    """
    # writeable as well as contiguous: a read-only array (the knots of cached pair integrals) would
    # type as another signature and compile the programme a second time (about 10 s, cold)
    mus = np.require(mus, np.float64, ("C", "W"))
    if -(-N // m) == 1:  # m == N: one exact test on all the data
        one, zero = np.ones_like(mus), np.zeros_like(mus)
        return dict(error=zero, p_early_correct=zero.copy(), p_full=one,
                    data_fraction=one.copy(), expected_stages=one.copy(),
                    exits=np.zeros(0), survival=np.zeros(0), stages=np.zeros(0, np.int64))
    plan = plan_stages(m, N, lambda n: stage_thresholds(n, epsilon, threshold),
                       merge_step(N / m, merge))
    if resolution is None:
        fast = plan.merged or (N / m >= FAST_FROM and (merge > 0 or stop_tol > 0))
        resolution = FAST_RESOLUTION if fast else DEFAULT_RESOLUTION
    r = resolution
    band_t, band_w = _gauss_legendre(r.band_order)
    err, right, pfull, pibar, stages, exits, surv = _dp.dp_kernel(
        plan.tau, plan.q, plan.pi, mus, r.reach, r.grid, r.window, r.band, r.interior_finest,
        r.interior_coarsest, r.interior_ratio, band_t, band_w, _GL_T, _GL_W,
        _N_MOMENTS if interior else 1, bool(interior), plan.wst, plan.lag_pi, plan.lag_st,
        plan.lag3_pi, plan.lag3_st, float(stop_tol))
    return dict(error=err, p_early_correct=right, p_full=pfull, data_fraction=pibar,
                expected_stages=stages, exits=exits, survival=surv, stages=plan.stages)


@dataclass(frozen=True, eq=False)
class SequentialError:
    """Error and data use of the sequential test at given standardized means.

    Array fields have the shape of ``mu_std`` (floats for a scalar ``mu_std``).

    Attributes
    ----------
    mu_std : float or numpy.ndarray
        Standardized means (mu - mu0) sqrt(N - 1) / sigma.
    error : float or numpy.ndarray
        E: probability that the test decides on the wrong side of mu0. At mu_std = 0 this is
        the probability of stopping early below (the limit mu_std -> 0+).
    data_fraction : float or numpy.ndarray
        pi-bar: expected fraction n / N of the data used when the test stops.
    expected_stages : float or numpy.ndarray
        Expected number of minibatches drawn (stage index at the stop).
    p_early_correct, p_full : float or numpy.ndarray or None
        Probabilities of the two other outcomes: stopping early on the correct side, and
        reaching n = N, where the decision is exact. ``error + p_early_correct + p_full``
        is one. None (as is ``expected_stages``) with ``law="edgeworth"``.
    m, epsilon, N, threshold, n_stages
        The test: minibatch size, per-stage error, population size, threshold kind, and
        the number of stages J = ceil(N / m).
    law : {"gaussian", "edgeworth"}
        The law of the statistic (see :func:`sequential_error`); with ``"edgeworth"`` the
        error is not even in mu_std (at mu_std < 0 it is the probability of an early stop
        above).
    """

    mu_std: np.ndarray | float
    error: np.ndarray | float
    data_fraction: np.ndarray | float
    expected_stages: np.ndarray | float
    p_early_correct: np.ndarray | float
    p_full: np.ndarray | float
    m: int
    epsilon: float
    N: int
    threshold: str
    n_stages: int
    law: str = "gaussian"

    def __repr__(self):
        return (f"SequentialError(m={self.m}, epsilon={self.epsilon:g}, N={self.N}, "
                f"threshold={self.threshold!r}, mu_std={self.mu_std!r}, "
                f"error={self.error!r}, data_fraction={self.data_fraction!r})")


def sequential_error(mu_std, *, m, epsilon, N, threshold="normal",
                     exact=False, law="gaussian", skewness=None,
                     kurtosis=None) -> SequentialError:
    """Error and expected data use of the sequential t-test, by dynamic programming.

    Parameters
    ----------
    mu_std : float or array_like
        Standardized mean(s) mu_std = (mu - mu0) sqrt(N - 1) / sigma, any shape.
    m : int
        Minibatch size, 2 <= m <= N.
    epsilon : float
        Per-stage error of the test, in (0, 0.5).
    N : int
        Population size (number of data points), >= 2.
    threshold : {"normal", "t"}
        Stop when |z| > Phi^-1(1 - epsilon) (the paper's analysis), or use the Student-t
        critical value with n_j - 1 degrees of freedom.
    exact : bool
        Visit every one of the J - 1 monitored stages (the reference programme, cost O(N / m)).
        By default, where N / m > 8000, stages whose step in log information time is below
        about 1e-3 are merged (see Notes): the cost grows only like log(N / m) and E, pi-bar
        stay within 1e-6 of the exact values up to N / m = 1.5e5, within 0.5 delta^2 and
        3 delta^2 beyond (delta, the merge step, grows slowly to 2.6e-3 at N / m = 10^9).
    law : {"gaussian", "edgeworth"}
        The law of the statistic: the Gaussian walk (default), or the walk whose per-stage
        law is corrected for the ``skewness`` and excess ``kurtosis`` of the l_i by the
        one-term Edgeworth expansion of the studentized mean (``threshold="normal"`` only;
        see :func:`acceptance_error` and ``design/_edgeworth.py`` for the derivation). Only
        ``error`` and ``data_fraction`` are computed then; ``exact`` does not apply.
    skewness, kurtosis : float, optional
        With ``law="edgeworth"``: population skewness and excess kurtosis of the l_i.

    Returns
    -------
    SequentialError
        E, pi-bar, expected number of stages and outcome probabilities at each mu_std.

    Notes
    -----
    With nested minibatches drawn without replacement, n_j = min(j m, N),
    Var(lbar_j) = sigma^2 (N - n_j) / (n_j (N - 1)) and Cov(lbar_a, lbar_b) = Var(lbar_b)
    for a <= b. In the information time tau_j = n_j / (N - n_j) the statistic
    z_j = (lbar_j - mu0) / sd(lbar_j) obeys sqrt(tau_j) z_j = B(tau_j) + mu_std tau_j for a
    Brownian motion B (Korattikara et al. 2014, section 5.1, under their Gaussian
    assumptions), so

        z_{j+1} | z_j ~ N(rho_j z_j + c_j, 1 - rho_j^2),  rho_j = sqrt(tau_j / tau_{j+1}),
        c_j = mu_std (tau_{j+1} - tau_j) / sqrt(tau_{j+1}).

    The test stops at the first j with |z_j| > q_j; at n_J = N the decision is exact. The
    density of z_j is propagated by quadrature: the trapezoid rule on a uniform grid a
    fraction of the kernel width apart (the kernel narrows to about 2 sqrt(m / N) in the
    middle stages), with Gauss-Legendre bands for the cut at |z| = q_j. One driftless pass
    gives every mu_std through the likelihood ratio exp(mu_std sqrt(tau_j) z_j -
    mu_std^2 tau_j / 2). The error is below about 1e-10 (checked against a dense Nystrom
    reference and by refinement in the test suite). E and pi-bar are even in mu_std.

    In log information time t = log tau the statistic is an Ornstein-Uhlenbeck process and
    the stage steps are about N m / (n (N - n)), i.e. 4 m / N in the middle: for large N / m
    most stages barely move it. The default plan merges consecutive stages into steps of
    delta in t and checks the test only there, with thresholds lowered by Siegmund's
    discreteness correction rho (s_c - s_f) (rho = 0.5826, s_c and s_f the sds of the
    merged and of a one-stage step), so that both walks have the same continuous-monitoring
    equivalent, plus a correction of the data fraction for the mass in transit at a merged
    check (``design._stages``); the errors are second order in delta (measured and tested
    against the exact programme).

    The statistic is modelled as Gaussian. With ``threshold="t"`` the Student-t critical
    values are applied to that Gaussian statistic; the real t statistic has heavier tails,
    so compared with a simulation of the real test using Student-t thresholds, the
    ``"normal"`` model is usually the closer one (differences below about 1% relative for
    m >= 100; see ``tests/design/reference``).

    References
    ----------
    A. Korattikara, Y. Chen, M. Welling. Austerity in MCMC Land: Cutting the
    Metropolis-Hastings Budget. ICML 2014.

    Examples
    --------
    >>> from design import sequential_error
    >>> r = sequential_error([0.0, 1.0], m=500, epsilon=0.05, N=100_000)
    >>> r.error.round(4), r.data_fraction.round(4)
    (array([0.4237, 0.1949]), array([0.3875, 0.289 ]))
    >>> round(float(r.error[0] + r.p_early_correct[0] + r.p_full[0]), 12)
    1.0
    """
    m, epsilon, N, threshold = check_design_args(m, epsilon, N, threshold)
    mu = check_finite_array("mu_std", mu_std)
    scalar = mu.ndim == 0
    if law not in ("gaussian", "edgeworth"):
        raise ValueError(f"law must be 'gaussian' or 'edgeworth', got {law!r}")
    if law == "edgeworth":
        return _edgeworth_error(mu, scalar, m, epsilon, N, threshold, skewness, kurtosis)
    if skewness is not None or kurtosis is not None:
        raise TypeError("skewness and kurtosis apply to law='edgeworth' only")
    uniq, inverse = np.unique(np.abs(mu).ravel(), return_inverse=True)
    res = run_dp(uniq, m, epsilon, N, threshold, interior=True,
                 **(dict(merge=0.0, stop_tol=0.0) if exact else {}))

    def shaped(key):
        out = res[key][inverse].reshape(mu.shape)
        out.setflags(write=False)
        return float(out) if scalar else out

    mu.setflags(write=False)
    return SequentialError(
        mu_std=float(mu) if scalar else mu,
        error=shaped("error"),
        data_fraction=shaped("data_fraction"),
        expected_stages=shaped("expected_stages"),
        p_early_correct=shaped("p_early_correct"),
        p_full=shaped("p_full"),
        m=m, epsilon=epsilon, N=N, threshold=threshold, n_stages=int(-(-N // m)),
    )


def _edgeworth_error(mu, scalar, m, epsilon, N, threshold, skewness, kurtosis):
    from ._edgeworth import edgeworth_dp

    if threshold != "normal":
        raise ValueError("law='edgeworth' models the t-test with normal thresholds "
                         f"(threshold='normal'), got threshold={threshold!r}")
    if skewness is None or kurtosis is None:
        raise TypeError("law='edgeworth' needs skewness= and kurtosis= of the l_i")
    gamma = float(check_finite_array("skewness", skewness, ndim=0))
    kappa = float(check_finite_array("kurtosis", kurtosis, ndim=0))
    if kappa < -2.0:
        raise ValueError(f"kurtosis (excess) must be >= -2, got {kappa!r}")
    uniq, inverse = np.unique(mu.ravel(), return_inverse=True)
    err, frac = edgeworth_dp(uniq, m, epsilon, N, gamma, kappa)

    def shaped(values):
        out = values[inverse].reshape(mu.shape)
        out.setflags(write=False)
        return float(out) if scalar else out

    mu.setflags(write=False)
    return SequentialError(
        mu_std=float(mu) if scalar else mu, error=shaped(err), data_fraction=shaped(frac),
        expected_stages=None, p_early_correct=None, p_full=None, m=m, epsilon=epsilon, N=N,
        threshold=threshold, n_stages=int(-(-N // m)), law="edgeworth")
