"""Error and data use of the sequential t-test, by dynamic programming."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._lib.checks import check_finite_array, check_int, check_interval

from . import _dp

__all__ = ["SequentialError", "sequential_error"]

THRESHOLDS = ("normal", "t")

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
    """Threshold q_j on |z| at sample sizes ``n``: Phi^-1(1 - eps) or t_{n-1}^-1(1 - eps)."""
    if threshold == "normal":
        return np.full(n.shape, stats.norm.isf(epsilon))
    return stats.t.isf(epsilon, n - 1)


def run_dp(mus, m, epsilon, N, threshold, *, interior=True,
           resolution: _Resolution = DEFAULT_RESOLUTION):
    """Run the compiled dynamic programme for non-negative drifts ``mus`` (float64[k]).

    Returns a dict of float64[k] arrays: error, p_early_correct, p_full, data_fraction,
    expected_stages, plus the driftless per-stage ``exits`` and ``survival``. Arguments are
    assumed valid (checked by the public callers).
    """
    mus = np.ascontiguousarray(mus, dtype=np.float64)
    n = stage_sizes(m, N)
    if n.size == 1:  # m == N: one exact test on all the data
        one, zero = np.ones_like(mus), np.zeros_like(mus)
        return dict(error=zero, p_early_correct=zero.copy(), p_full=one,
                    data_fraction=one.copy(), expected_stages=one.copy(),
                    exits=np.zeros(0), survival=np.zeros(0))
    nm = n[:-1].astype(np.float64)
    tau = nm / (N - nm)
    q = stage_thresholds(n[:-1], epsilon, threshold).astype(np.float64)
    pi = n / N
    r = resolution
    band_t, band_w = np.polynomial.legendre.leggauss(r.band_order)
    err, right, pfull, pibar, stages, exits, surv = _dp.dp_kernel(
        tau, q, pi, mus, r.reach, r.grid, r.window, r.band, r.interior_finest,
        r.interior_coarsest, r.interior_ratio, band_t, band_w, _GL_T, _GL_W,
        _N_MOMENTS if interior else 1, bool(interior))
    return dict(error=err, p_early_correct=right, p_full=pfull, data_fraction=pibar,
                expected_stages=stages, exits=exits, survival=surv)


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
    p_early_correct, p_full : float or numpy.ndarray
        Probabilities of the two other outcomes: stopping early on the correct side, and
        reaching n = N, where the decision is exact. ``error + p_early_correct + p_full``
        is one.
    m, epsilon, N, threshold, n_stages
        The test: minibatch size, per-stage error, population size, threshold kind, and
        the number of stages J = ceil(N / m).
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

    def __repr__(self):
        return (f"SequentialError(m={self.m}, epsilon={self.epsilon:g}, N={self.N}, "
                f"threshold={self.threshold!r}, mu_std={self.mu_std!r}, "
                f"error={self.error!r}, data_fraction={self.data_fraction!r})")


def sequential_error(mu_std, *, m, epsilon, N, threshold="normal") -> SequentialError:
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
    uniq, inverse = np.unique(np.abs(mu).ravel(), return_inverse=True)
    res = run_dp(uniq, m, epsilon, N, threshold, interior=True)

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
