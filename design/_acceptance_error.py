"""Error in the acceptance probability of each pair of a trial chain."""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from ._sequential import check_design_args, run_dp, stage_thresholds
from ._trial import TrialChain

__all__ = ["AcceptanceError", "acceptance_error", "pair_integrals"]

#: Knot spacing in t = asinh(mu_std sqrt(N - 1)): linear near 0, logarithmic far out.
KNOT_STEP = 0.075
_GL_T, _GL_W = np.polynomial.legendre.leggauss(8)
_WEIGHT_CUT = 46.0   # exp(-46) ~ 1e-20: the u-weight is negligible beyond this many 1/kappa
_PANEL = 2.0         # panel width in units of 1/kappa, so the exponential weight is resolved


def mu_table_edge(N, m_min, epsilon_min, threshold):
    """Largest mu_std needing a table entry: beyond it E < 1e-20 and pi-bar = m / N.

    At stage 1, z_1 ~ N(mu_std sqrt(tau_1), 1); once mu_std sqrt(tau_1) exceeds q_1 + 10
    every pair stops at stage 1 on the correct side.
    """
    if m_min >= N:
        return 1.0
    q1 = float(stage_thresholds(np.array([m_min]), epsilon_min, threshold)[0])
    tau1 = m_min / (N - m_min)
    return (q1 + 10.0) / math.sqrt(tau1)


def basis_integrals(basis, rows, t, weights, n_rows):
    """``A[r] = sum of w_i B(t_i)`` over the nodes i of row r, for each weight vector w.

    ``basis`` is a cubic spline whose values are the basis functions (one column per knot),
    B(t) its row of values at t. Rather than evaluating every basis function at every node
    (nodes x knots), the nodes' powers of (t - x_j) are summed per row and knot interval j,
    then multiplied by the interval's coefficients: O(nodes + rows x intervals x knots) and
    one matrix product. The same sums as ``w @ basis(t)`` up to rounding (summation order).

    >>> import numpy as np
    >>> from scipy.interpolate import CubicSpline
    >>> basis = CubicSpline(np.linspace(0, 1, 6), np.eye(6))
    >>> t = np.array([0.05, 0.5, 0.93]); w = np.array([0.2, 0.3, 0.5])
    >>> (A,) = basis_integrals(basis, np.array([0, 1, 1]), t, (w,), 2)
    >>> bool(np.allclose(A, [w[:1] @ basis(t[:1]), w[1:] @ basis(t[1:])], atol=1e-15))
    True
    """
    x, coef = basis.x, basis.c                   # coef[p, j] multiplies (t - x_j)^(3 - p)
    n_int = x.size - 1
    j = np.clip(np.searchsorted(x, t, side="right") - 1, 0, n_int - 1)
    dx = t - x[j]
    flat = rows * n_int + j
    powers = (dx * dx * dx, dx * dx, dx, np.ones_like(dx))
    lhs = coef.reshape(4 * n_int, -1)
    out = []
    for w in weights:
        W = np.stack([np.bincount(flat, weights=w * pw, minlength=n_rows * n_int)
                      for pw in powers])       # (4, rows x intervals)
        W = W.reshape(4, n_rows, n_int).transpose(1, 0, 2).reshape(n_rows, 4 * n_int)
        out.append(W @ lhs)
    return out


class PairIntegrals:
    """Per-pair integrals over u ~ U(0, 1) as linear maps of a tabulated E and pi-bar.

    With kappa = N sigma / sqrt(N - 1) and mu_c = mu_std(u = 1), the standardized mean is
    mu_std(u) = mu_c - log(u) / kappa, so u ~ U(0, 1) gives mu_std the density
    kappa exp(kappa (mu_c - x)) on [mu_c, inf). Exact MH accepts iff mu_std(u) > 0. Hence

        delta = int_{mu_c}^{min(0, .)} E(|x|) w(x) dx - int_{max(mu_c, 0)}^inf E(x) w(x) dx,
        data  = int_{mu_c}^inf pi-bar(|x|) w(x) dx,

    integrated by Gauss-Legendre panels no wider than 2 / kappa (and split at the knots of
    the table), with E and pi-bar interpolated by a cubic spline in t = asinh(x sqrt(N-1))
    through their values at the knots. Both integrals are linear in the knot values, so
    they are stored as matrices: delta = A_err @ E_knots,
    data = A_data @ pibar_knots + tail * (m / N), ``tail`` being the u-mass beyond the
    table, where pi-bar = m / N and E = 0.
    """

    def __init__(self, trial: TrialChain, mu_max: float):
        N = trial.N
        scale = math.sqrt(N - 1.0)
        t_max = math.asinh(mu_max * scale)
        n_knots = max(int(math.ceil(t_max / KNOT_STEP)), 4) + 1
        self.knots_t = np.linspace(0.0, t_max, n_knots)
        self.knots = np.sinh(self.knots_t) / scale
        self.mu_max = float(self.knots[-1])
        basis = CubicSpline(self.knots_t, np.eye(n_knots))
        kappa = trial.mu_std_scale
        mu_c = trial.mu_std_at_one
        self.tail = np.zeros(trial.n_pairs)
        rows, ts, weights, signs = [], [], [], []
        for p in range(trial.n_pairs):
            k, c = float(kappa[p]), float(mu_c[p])
            for side in (+1.0, -1.0):
                if side > 0:      # mu_std = x >= max(c, 0): exact accepts, error lowers Pa
                    lo, hi = max(c, 0.0), math.inf
                    cut_lo, cut_hi = lo, lo + _WEIGHT_CUT / k
                else:             # mu_std = -x, x in [0, -c]: exact rejects
                    if c >= 0.0:
                        continue
                    lo, hi = 0.0, -c
                    cut_lo, cut_hi = max(0.0, -c - _WEIGHT_CUT / k), -c
                if hi > self.mu_max:  # u-mass beyond the table: E = 0, pi-bar = m / N
                    if side > 0:
                        self.tail[p] += math.exp(k * (c - max(lo, self.mu_max)))
                    else:
                        self.tail[p] -= math.expm1(k * (c + self.mu_max))
                a, b = cut_lo, min(cut_hi, self.mu_max)
                if b <= a:
                    continue
                x, w = self._nodes(a, b, k)
                w = w * (k * np.exp(k * (c - side * x)))   # density of mu_std at side * x
                rows.append(np.full(x.size, p))
                ts.append(np.arcsinh(x * scale))
                weights.append(w)
                signs.append(np.full(x.size, -side))  # accepted side counts -E, rejected +E
        if rows:
            rows, ts, weights = (np.concatenate(v) for v in (rows, ts, weights))
            self.A_data, self.A_err = basis_integrals(
                basis, rows, ts, (weights, np.concatenate(signs) * weights), trial.n_pairs)
        else:
            self.A_err = np.zeros((trial.n_pairs, n_knots))
            self.A_data = np.zeros((trial.n_pairs, n_knots))
        for a in (self.knots_t, self.knots, self.tail, self.A_err, self.A_data):
            a.setflags(write=False)

    def _nodes(self, a, b, kappa):
        inner = self.knots[(self.knots > a) & (self.knots < b)]
        n_sub = max(1, int(math.ceil((b - a) * kappa / _PANEL)))
        edges = np.unique(np.concatenate([np.linspace(a, b, n_sub + 1), inner]))
        half = 0.5 * np.diff(edges)
        mid = 0.5 * (edges[1:] + edges[:-1])
        x = (mid[:, None] + half[:, None] * _GL_T).ravel()
        w = (half[:, None] * _GL_W).ravel()
        return x, w

    def evaluate(self, table, m, N):
        """(delta, data_fraction) per pair from a table {error, data_fraction} at the knots."""
        delta = self.A_err @ table["error"]
        data = self.A_data @ table["data_fraction"] + self.tail * (m / N)
        return delta, data


#: PairIntegrals kept per trial chain (while it lives) and table edge: the smaller-m search
#: of ``design.optimize`` and its screen's completion (``Design.complete_screen``) use the
#: same pairs and edge (each build 0.02-0.05 s at 40 pairs, N = 10^6).
#: At most this many edges are kept per trial chain, the oldest dropped first (each
#: holds arrays of the trial's size).
INTEGRALS_PER_TRIAL = 4
_integrals: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_integrals_lock = threading.Lock()


def pair_integrals(trial: TrialChain, mu_max: float) -> PairIntegrals:
    """``PairIntegrals(trial, mu_max)``, built once per trial chain and ``mu_max`` (the
    object is not modified by its users: its arrays are read-only)."""
    key = float(mu_max)
    with _integrals_lock:
        found = _integrals.get(trial, {}).get(key)
    if found is not None:
        return found
    built = PairIntegrals(trial, key)
    with _integrals_lock:
        kept = _integrals.setdefault(trial, {})
        found = kept.setdefault(key, built)
        while len(kept) > INTEGRALS_PER_TRIAL:
            del kept[next(iter(kept))]
        return found


@dataclass(frozen=True, eq=False)
class AcceptanceError:
    """Error in the acceptance probability for each pair of a trial chain.

    Attributes
    ----------
    delta : numpy.ndarray
        Delta = P(approximate test accepts) - Pa, per pair.
    data_fraction : numpy.ndarray
        Expected fraction of the data the test uses, averaged over u, per pair.
    accept_prob : numpy.ndarray
        Exact MH acceptance probability Pa, per pair.
    mean_abs_delta, mean_data_fraction : float
        Averages over the pairs: the average design's error and cost (Eq. 7).
    m, epsilon, N, threshold
        The test.
    law : {"gaussian", "edgeworth"}
        The law of the test statistic the prediction used (see :func:`acceptance_error`).
    reliable : numpy.ndarray of bool or None
        ``law="edgeworth"``: per pair, whether the one-term expansion is trusted there
        (|gamma| / sqrt(m) <= 0.5 and max(kappa, gamma^2) / m <= 0.5); None otherwise.
    """

    delta: np.ndarray
    data_fraction: np.ndarray
    accept_prob: np.ndarray
    mean_abs_delta: float
    mean_data_fraction: float
    m: int
    epsilon: float
    N: int
    threshold: str
    law: str = "gaussian"
    reliable: np.ndarray | None = None


#: Laws of the test statistic the prediction can use.
LAWS = ("gaussian", "edgeworth")


def check_law(law, trial_chain=None):
    """Validate ``law``; the corrected law needs the shape of the l_i in the trial chain."""
    if law not in LAWS:
        raise ValueError(f"law must be 'gaussian' or 'edgeworth', got {law!r}")
    if law == "edgeworth" and trial_chain is not None and (
            trial_chain.skewness is None or trial_chain.kurtosis is None):
        raise ValueError("law='edgeworth' needs the skewness and kurtosis of the l_i per pair; "
                         "the trial chain has none (TrialChain.from_model records them, or "
                         "pass skewness= and kurtosis= to TrialChain)")
    return law


def acceptance_error(trial_chain, *, m, epsilon, threshold="normal",
                     law="gaussian") -> AcceptanceError:
    """Error Delta in the acceptance probability of each pair of a trial chain.

    Parameters
    ----------
    trial_chain : TrialChain
        Pairs (theta, theta') summarised by mu, sigma, c0 and N.
    m : int
        Minibatch size, 2 <= m <= N.
    epsilon : float
        Per-stage error of the sequential test, in (0, 0.5).
    threshold : {"normal", "t"}
        Threshold of the sequential test (see :func:`sequential_error`).
    law : {"gaussian", "edgeworth"}
        The law of the test statistic: the Gaussian random walk of
        :func:`sequential_error` (default), or that walk with each stage's law corrected by
        the one-term Edgeworth expansion of the studentized mean for the pair's skewness and
        excess kurtosis of the l_i (``threshold`` must then be ``"normal"``, the model of
        the t-test; see Notes). The corrected law needs ``trial_chain.skewness`` and
        ``trial_chain.kurtosis``.

    Returns
    -------
    AcceptanceError

    Notes
    -----
    With u ~ U(0, 1), mu0(u) = log(u) / N + c0 and Pa = min(1, exp(N (mu - c0))), exact MH
    accepts iff u < Pa, i.e. iff mu_std(u) = (mu - mu0(u)) sqrt(N - 1) / sigma > 0. The
    sequential test errs with probability E(mu_std(u)) (:func:`sequential_error`), so

        Delta = P_eps - Pa = int_Pa^1 E(mu_std(u)) du - int_0^Pa E(mu_std(u)) du,

    Korattikara et al. (2014), Eq. 6, with the sign that makes Delta the approximate minus
    the exact acceptance probability (the restatement in ``papers/README.md`` writes the
    opposite sign, Pa - P_eps; only |Delta| enters the design). The integral over u is done
    in mu_std, u = exp(kappa (mu_std(1) - mu_std)), split at mu_std = 0 (see
    ``PairIntegrals``); |Delta| <= E(0).

    **Skewed l_i** (``law="edgeworth"``). The t statistic of a minibatch of skewed l_i is
    itself skewed, against the sign of the skewness gamma: P(T <= x) = Phi(x) +
    n^-1/2 (gamma / 6)(2 x^2 + 1) phi(x) + O(1 / n) (Hall 1992, section 2.6), with the
    finite-population factors of sampling without replacement. E is then no longer even
    in mu_std: on right-skewed l_i the test rejects too often, so Delta moves down at
    pairs it would accept and the shifts of different pairs partly cancel in the mean.
    Each stage's thresholds on the Gaussian walk are moved by the Cornish-Fisher terms of
    that expansion (drift included) and scaled for the excess kurtosis; the programme is
    then run for each pair at its own mu_std (``design._edgeworth``, whose docstring
    has the derivation; about 1 s per pair at N = 3e5, m = 100). The expansion is trusted
    while |gamma| / sqrt(m) <= 0.5 and max(kappa, gamma^2) / m <= 0.5; beyond, simulate
    the real test (:func:`validation.acceptance_check`).

    Examples
    --------
    >>> from design import TrialChain, acceptance_error
    >>> tc = TrialChain(mu=[2e-4, -1e-4], sigma=[0.05, 0.05], c0=[0.0, 0.0], N=10_000)
    >>> r = acceptance_error(tc, m=500, epsilon=0.05)
    >>> r.accept_prob.round(3), r.delta.round(4)
    (array([1.   , 0.368]), array([-0.1192,  0.067 ]))
    """
    if not isinstance(trial_chain, TrialChain):
        raise TypeError(f"trial_chain must be a TrialChain, got {type(trial_chain).__name__}")
    N = trial_chain.N
    m, epsilon, N, threshold = check_design_args(m, epsilon, N, threshold)
    law = check_law(law, trial_chain)
    reliable = None
    if law == "edgeworth":
        if threshold != "normal":
            raise ValueError("law='edgeworth' models the t-test with normal thresholds "
                             f"(threshold='normal'), got threshold={threshold!r}")
        from ._edgeworth import edgeworth_pair_errors, edgeworth_reliable

        reliable = edgeworth_reliable(trial_chain.skewness, trial_chain.kurtosis, m)
        reliable.setflags(write=False)
        delta, data = edgeworth_pair_errors(
            trial_chain, m, epsilon, x_edge=mu_table_edge(N, m, epsilon, threshold))
    else:
        integrals = pair_integrals(trial_chain, mu_table_edge(N, m, epsilon, threshold))
        table = run_dp(integrals.knots, m, epsilon, N, threshold)
        delta, data = integrals.evaluate(table, m, N)
    for a in (delta, data):
        a.setflags(write=False)
    return AcceptanceError(
        delta=delta, data_fraction=data, accept_prob=trial_chain.accept_prob,
        mean_abs_delta=float(np.mean(np.abs(delta))),
        mean_data_fraction=float(np.mean(data)),
        m=m, epsilon=epsilon, N=N, threshold=threshold, law=law,
        reliable=reliable)
