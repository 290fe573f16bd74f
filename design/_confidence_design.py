"""Design of the confidence sampler (Bardenet, Doucet & Holmes 2014): batch size and growth.

``samplers.ConfidenceTest`` grows a without-replacement subsample geometrically (first
``batch_size`` rows, then factor ``gamma``) until a concentration bound of half-width
``c_t`` separates the subsample mean of the l_i from the threshold ``psi``; look k uses the
error ``delta_k = (p - 1) / (p k^p) delta``, so one test errs with probability at most
``delta`` (their Lemma 3.1). The error is therefore chosen, not predicted: the design sets
``delta`` to the tolerance (a larger delta only narrows every radius) and picks the
(batch_size, gamma) whose predicted rows read are the fewest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import special

from ._lib.checks import check_int, check_interval

from ._barker_design import _check_needs
from ._trial import TrialChain

__all__ = ["ConfidenceDesign", "confidence_radius", "confidence_pair_prediction",
           "optimize_confidence", "BOUNDS", "DEFAULT_BATCH_GRID", "DEFAULT_GAMMA_GRID"]

BOUNDS = ("hoeffding", "bernstein", "bernstein-serfling")
DEFAULT_BATCH_GRID = (10, 20, 50, 100, 200, 500, 1000)
DEFAULT_GAMMA_GRID = (1.2, 1.5, 2.0, 3.0)
#: Equal-probability nodes in u: the u-average of each pair's data use and error.
_N_U = 512
_KAPPA = 7.0 / 3.0 + 3.0 / math.sqrt(2.0)


def confidence_radius(bound, t, N, C, sd, delta_t):
    """Half-width c_t of the concentration bound after t of N rows (vectorised).

    The same formulas as ``samplers.ConfidenceTest`` (Hoeffding-Serfling, Bardenet et al.
    2014 eq. 7; empirical Bernstein, eq. 9; empirical Bernstein-Serfling, Bardenet & Maillard
    2015 Theorem 3, two-sided with L = log(10 / delta_t)); ``tests/design`` checks them
    against the samplers' compiled ``confidence_radius_code``.

    Examples
    --------
    >>> from design._confidence_design import confidence_radius
    >>> float(confidence_radius("hoeffding", 100, 10**6, 1.0, 0.1, 0.01)).__round__(4)
    0.3255
    """
    t = np.asarray(t, dtype=float)
    if bound == "hoeffding":
        return C * np.sqrt(2.0 * (1.0 - (t - 1.0) / N) * np.log(2.0 / delta_t) / t)
    if bound == "bernstein":
        L = np.log(3.0 / delta_t)
        return sd * np.sqrt(2.0 * L / t) + 6.0 * C * L / t
    rho = np.where(t <= N / 2, 1.0 - (t - 1.0) / N, (1.0 - t / N) * (1.0 + 1.0 / t))
    L = np.log(10.0 / delta_t)
    return sd * np.sqrt(2.0 * rho * L / t) + _KAPPA * 2.0 * C * L / t


def look_sizes(batch_size, gamma, N):
    """Subsample sizes of the looks: batch_size, then ceil(gamma t) (at least t + 1), up to N."""
    sizes = [min(batch_size, N)]
    while sizes[-1] < N:
        t = sizes[-1]
        sizes.append(min(N, max(t + 1, int(math.ceil(gamma * t)))))
    return np.array(sizes, dtype=float)


def confidence_pair_prediction(trial, p, *, batch_size, gamma, delta, prob=2.0,
                               bound="bernstein-serfling"):
    """Predicted rows read and signed error of ``ConfidenceTest`` at pair ``p``.

    Returns ``(expected_rows, error)``, averaged over u ~ U(0, 1).

    With x = -log u, the test compares the subsample mean with psi = mu - (A + x) / N,
    A = N (mu - c0) the log MH ratio, so the gap g = (A + x) / N is known per u. At look k
    (t_k rows) the subsample mean is modelled as N(mu, sigma^2 (N - t_k) / ((N - 1) t_k)) and
    the radius c_k is evaluated at the population sd sigma; the test stops on the correct
    side with probability Phi((|g| - c_k) / se_k), on the wrong one with
    Phi((-|g| - c_k) / se_k). The survival is the running minimum of the stagewise
    probabilities of not stopping (the nested subsamples make stopping nearly monotone in k);
    at t = N the decision is exact.
    """
    N = trial.N
    sigma = float(trial.sigma[p])
    C = float(trial.range_bound[p])
    A = float(trial.log_accept_ratio[p])
    x = -np.log((np.arange(_N_U) + 0.5) / _N_U)
    gap = np.abs(A + x)[:, None] / N
    t = look_sizes(batch_size, gamma, N)
    k = np.arange(1, t.size + 1, dtype=float)
    delta_k = (prob - 1.0) / (prob * k**prob) * delta
    c = confidence_radius(bound, t, N, C, sigma, delta_k)
    se = sigma * np.sqrt(np.maximum(N - t, 0.0) / ((N - 1.0) * t))
    with np.errstate(divide="ignore", invalid="ignore"):
        right = special.ndtr((gap - c) / se)
        wrong = special.ndtr((-gap - c) / se)
    right[:, t >= N] = 1.0                    # all N rows read: the exact decision
    wrong[:, t >= N] = 0.0
    q = np.minimum(right + wrong, 1.0)
    surv = np.minimum.accumulate(1.0 - q, axis=1)
    prev = np.concatenate([np.ones((_N_U, 1)), surv[:, :-1]], axis=1)
    w = prev - surv
    rows = float(np.mean(w @ t))
    with np.errstate(divide="ignore", invalid="ignore"):
        err_u = np.sum(np.where(q > 0, w * wrong / q, 0.0), axis=1)
    sign = np.where(A + x > 0, -1.0, 1.0)     # exact accepts: an error lowers P(accept)
    return rows, float(np.mean(sign * err_u))


@dataclass(frozen=True, eq=False)
class ConfidenceDesign:
    """A design of the confidence sampler (``samplers.ConfidenceTest.from_design``).

    Attributes
    ----------
    test : str
        ``"confidence"`` (class constant): the test kind this design is for.
    batch_size : int
        Rows of the first look.
    gamma : float
        Growth factor of the subsample.
    delta : float
        Total error probability of one test: every test's |P(accept) - P_exact| <= delta
        (Bardenet et al. 2014, Lemma 3.1); set to the tolerance.
    p : float
        Exponent of the per-look error schedule.
    bound : str
        Concentration inequality.
    data_fraction : float
        Predicted mean fraction of the N rows read per test, over the trial pairs and u.
    data_fraction_se : float
        Standard error of ``data_fraction`` as an estimate of the mean over the pairs a chain
        visits: the sd of ``pair_data_fraction`` over sqrt(n_pairs). Unlike the Austere and
        Barker tests (one minibatch at almost every pair), the confidence test's data use
        varies by orders of magnitude between pairs (roughly as C / |A + log u|: the range
        C of the l_i and the log MH ratio A both vary from pair to pair), so a few pairs give
        a noisy mean; ``pairs_for_10pc`` says how many would give a 10% standard error.
    error : float
        Predicted mean |Delta| over the trial pairs (far below ``delta``: the bounds are
        conservative).
    method, tolerance, N, n_pairs
    batch_grid, gamma_grid : numpy.ndarray
    error_grid, data_grid : numpy.ndarray, shape (len(batch_grid), len(gamma_grid))
    pair_error, pair_data_fraction : numpy.ndarray
        Predicted signed error and data fraction per trial pair at the chosen design.
    """

    test: ClassVar[str] = "confidence"
    batch_size: int
    gamma: float
    delta: float
    p: float
    bound: str
    data_fraction: float
    error: float
    method: str
    tolerance: float
    N: int
    n_pairs: int
    batch_grid: np.ndarray
    gamma_grid: np.ndarray
    error_grid: np.ndarray
    data_grid: np.ndarray
    pair_error: np.ndarray
    pair_data_fraction: np.ndarray
    data_fraction_se: float = 0.0

    @property
    def pairs_for_10pc(self) -> int:
        """Trial pairs that would make ``data_fraction_se`` 10% of ``data_fraction``
        (at the spread between these pairs)."""
        if self.data_fraction <= 0 or self.n_pairs < 2:
            return self.n_pairs
        cv = float(np.std(self.pair_data_fraction, ddof=1)) / self.data_fraction
        return max(2, int(math.ceil((cv / 0.1) ** 2)))

    def __str__(self):
        rows = self.data_fraction * self.N
        return "\n".join([
            f"Confidence sampler design ({self.n_pairs} trial pairs, N = {self.N:,}, "
            f"tolerance {self.tolerance:g})",
            f"  first batch           {self.batch_size}",
            f"  growth factor gamma   {self.gamma:g}",
            f"  error delta           {self.delta:g}  (|P(accept) - P_exact| <= delta for "
            "every test, Lemma 3.1; set to the tolerance)",
            f"  bound                 {self.bound}, p = {self.p:g}",
            f"  expected error        {self.error:.3g}  (mean |Delta| over the trial pairs)",
            f"  expected data use     {self.data_fraction:.4g} ± {self.data_fraction_se:.2g}"
            f"  (about {rows:,.0f} ± {self.data_fraction_se * self.N:,.0f} of {self.N:,} rows "
            f"per test; the data use varies between pairs: {self.pairs_for_10pc} pairs give "
            "a 10% standard error)",
            f"  chosen because        the least predicted data over "
            f"{self.data_grid.size} (batch_size, gamma) pairs",
        ])


def optimize_confidence(trial, tolerance, *, method="average", m_grid=None, gamma_grid=None,
                        bound="bernstein-serfling", p=2.0):
    """Choose (batch_size, gamma, delta) of the confidence sampler (see ``design.optimize``)."""
    if not isinstance(trial, TrialChain):
        raise TypeError("the confidence design needs a TrialChain (with the range of the "
                        f"l_i), got {type(trial).__name__}")
    _check_needs(trial, ("range_bound",), "confidence",
                 "the model's range of the l_i per pair, from loglik_ratio_range or "
                 "loglik_ratio_bound")
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {BOUNDS}, got {bound!r}")
    p = check_interval("p", p, 1.0, math.inf)
    N = trial.N
    if m_grid is None:
        m_grid = [b for b in DEFAULT_BATCH_GRID if b <= N] or [N]
    batches = np.unique([check_int(f"m_grid[{i}]", v, low=1, high=N)
                         for i, v in enumerate(np.atleast_1d(m_grid).tolist())])
    if gamma_grid is None:
        gamma_grid = DEFAULT_GAMMA_GRID
    gammas = np.unique([check_interval(f"gamma_grid[{i}]", v, 1.0, math.inf)
                        for i, v in enumerate(np.atleast_1d(gamma_grid).tolist())])
    delta = tolerance
    P = trial.n_pairs
    error_grid = np.empty((batches.size, gammas.size))
    data_grid = np.empty_like(error_grid)
    per_pair = {}
    for i, b in enumerate(batches):
        for k, g in enumerate(gammas):
            res = np.array([confidence_pair_prediction(trial, q, batch_size=int(b),
                                                       gamma=float(g), delta=delta, prob=p,
                                                       bound=bound) for q in range(P)])
            frac, err = res[:, 0] / N, res[:, 1]
            per_pair[i, k] = (err, frac)
            error_grid[i, k] = (np.mean(np.abs(err)) if method == "average"
                                else np.max(np.abs(err)))
            data_grid[i, k] = np.mean(frac)
    for a in (batches, gammas, error_grid, data_grid):
        a.setflags(write=False)
    best = np.lexsort((error_grid.ravel(), data_grid.ravel()))[0]
    i, k = np.unravel_index(best, data_grid.shape)
    err, frac = per_pair[i, k]
    for a in (err, frac):
        a.setflags(write=False)
    return ConfidenceDesign(
        batch_size=int(batches[i]), gamma=float(gammas[k]), delta=delta, p=p, bound=bound,
        data_fraction=float(data_grid[i, k]), error=float(error_grid[i, k]), method=method,
        tolerance=tolerance, N=N, n_pairs=P, batch_grid=batches, gamma_grid=gammas,
        error_grid=error_grid, data_grid=data_grid, pair_error=err, pair_data_fraction=frac,
        data_fraction_se=(float(np.std(frac, ddof=1) / math.sqrt(P)) if P > 1 else math.inf))
