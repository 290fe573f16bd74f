"""Which stages the dynamic programme visits: all of them, or merged blocks (private).

The sequential test checks after n_j = j m points, j = 1..J - 1 (J = ceil(N / m)). In the
log information time t = log tau, tau = n / (N - n), the statistic z is an Ornstein-Uhlenbeck
process, dz = -z / 2 dt + dW (z sqrt(tau) = B(tau) is a Brownian motion; Korattikara et al.
2014, section 5.1), checked at t_j. The step Delta_j = t_{j+1} - t_j is about
N m / (n_j (N - n_j)): of order 1 / j at both ends and 4 m / N in the middle, so the number
of stages, and the cost of the exact programme, grows like N / m while the elapsed
information time grows only like 2 log(N / m).

Merged stages
-------------
From each visited stage the plan jumps to the furthest stage within delta of t (greedy, so
a merged block is a whole number of stages, about delta / Delta_j of them; stages whose own
step exceeds delta, about 1 / delta at each end, are all kept) and checks the test only
there. Checking less often lets paths wander further before they are caught; for a
Gaussian walk with step sd s checked against a level q the crossing probabilities are, to
first order, those of continuous monitoring at the level q + rho s, with Siegmund's
constant rho = -zeta(1/2) / sqrt(2 pi) = 0.5826 (Siegmund 1985, ch. X; Broadie, Glasserman &
Kou 1997). A merged check with kernel sd s_c therefore uses the threshold

    q_c = q - rho (s_c - s_f),

s_f the sd of the one-stage step it replaces, so that both walks have the same continuous
equivalent. The stops of the merged walk then match the stops of the real walk with an
error that is second order in delta: |error in E| <= 0.41 delta^2 measured for delta in
[1e-3, 4e-3], m in {50, 100, 150, 200}, N / m in [5 10^3, 4 10^4], eps in [0.001, 0.2],
both thresholds, mu_std in [0, 30] (bound ``MERGE_ERROR_E`` = 0.5, tested in
``tests/design/test_merge.py``). Without
the shift the error is of order sqrt(delta) (also tested).

Between two kept stages a and c the survival of the real walk is interpolated linearly in t
(the survival is a smooth function of t; the exits of a block happen throughout it), which
gives each kept stage a weight in the expected data fraction and stage count (closed form
through log-gamma sums). One more first-order effect remains: just after a check, a walk
checked every s^2 units of t carries a boundary layer with less mass than its continuous
equivalent, by about lag(s) r(t) (r the stopping rate per unit t; the mass "in transit" that
the next check removes), lag(s) = K s^2 + K' nu s^3 with nu the drift towards the boundary
crossed (a - q / 2 at +q and -a - q / 2 at -q, a = mu_std sqrt(tau): the OU pull and the
mean). The merged walk therefore stops paths lag(s_c) - lag(s_f) units of t early on
average, and each of its stops adds that much log time, i.e. that times pi (1 - pi) of data
(dn / dt = n (N - n) / N), to the data fraction. K = ``LAG`` = 0.228 and K' = ``LAG_DRIFT``
= 0.3 were fitted against the exact programme (the lag each case needed ranged over
0.213-0.244 as nu s went from -0.05 to +0.05); with them the data fraction stays within
0.7e-6 of the exact one at delta = 1e-3 on the tested grid (bound ``MERGE_ERROR_DATA`` = 3
for coarser delta). These two constants are empirical, not derived: the boundary-layer
mass of a Gaussian walk has no closed form we know of.

The cost is O(visited stages) = O((2 log(K delta) + 2) / delta), K = N / m; ``merge_step``
grows delta slowly beyond K = 1.5e5 to keep it near ``STAGE_BUDGET``.

The exact programme is the reference (``plan_stages(..., merge=0)``); a plan without a
merged stage (N / m below about 8 / delta) is that programme, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from ._lib.jit import jit

#: Siegmund's constant -zeta(1/2) / sqrt(2 pi): the overshoot shift of a Gaussian walk.
SIEGMUND_RHO = 0.5825971579390106
#: In-transit lag of a check with step sd s and drift nu towards the boundary, in units of
#: log information time: LAG s^2 + LAG_DRIFT nu s^3 (measured, see the module docstring).
LAG = 0.228
LAG_DRIFT = 0.3
#: Largest step of a merged stage in log information time, unless the budget needs more.
DEFAULT_MERGE = 1e-3
#: Visited-stage budget: beyond it the merge step grows (slowly, like log(N / m) / budget).
STAGE_BUDGET = 12_000
#: Measured bounds |error| <= C delta^2 of the merged plan (E and data fraction), with margin.
MERGE_ERROR_E = 0.5
MERGE_ERROR_DATA = 3.0


@dataclass(frozen=True)
class StagePlan:
    """Stages the dynamic programme visits, with their thresholds and weights.

    Attributes
    ----------
    stages : numpy.ndarray of int64
        1-based indices j of the visited monitored stages (ascending; the first and the last
        monitored stage are always visited).
    tau, q : numpy.ndarray
        Information time n_j / (N - n_j) and (shifted) threshold at each visited stage.
    pi : numpy.ndarray
        Cumulative data weights: the data fraction is pi[0] + sum_c (pi[c + 1] - pi[c]) S_c
        with S_c the survival after visited stage c (for the exact plan, pi = n_j / N).
    wst, lag_pi, lag_st, lag3_pi, lag3_st : numpy.ndarray
        Weight of S_c in the expected number of stages, and the in-transit weights of the
        stops at c (and of the stops times the drift towards the boundary crossed) in the
        data fraction and the stage count (zero for the exact plan).
    merged : bool
        Whether any stage was merged.
    """

    stages: np.ndarray
    tau: np.ndarray
    q: np.ndarray
    pi: np.ndarray
    wst: np.ndarray
    lag_pi: np.ndarray
    lag_st: np.ndarray
    lag3_pi: np.ndarray
    lag3_st: np.ndarray
    merged: bool


def _log_tau(j, K):
    return np.log(j) - np.log(K - j)


@jit
def _greedy_stages(J1, K, merge, out):
    """Fill ``out`` with the visited stages; return how many (see ``visited_stages``)."""
    j = 1
    count = 0
    growth = math.exp(merge)
    while True:
        if count == out.shape[0]:
            return -1                                 # out too short
        out[count] = j
        count += 1
        if j >= J1:
            return count
        e = j / (K - j) * growth                      # tau_j e^merge
        jn = int(math.floor(K * e / (1.0 + e)))
        if jn > 1 and (jn / (K - jn)) > e:            # guard against rounding up
            jn -= 1
        j = min(max(jn, j + 1), J1)


def visited_stages(J1: int, K: float, merge: float) -> np.ndarray:
    """Visited monitored stages (1-based) for K = N / m and J1 = J - 1 monitored stages.

    Greedy: from a visited stage j the next is the furthest stage within ``merge`` of log tau
    (at least j + 1), so every merged step is at most ``merge`` and a merged block is a
    whole number of stages, about merge / Delta_j. Work and memory O(visited stages):
    at most J1, and about (2 log(K) + 4) / merge for large K (the 2 / merge stages at each
    end whose step exceeds ``merge`` plus the merged middle).
    """
    if merge <= 0.0 or J1 <= 0:       # J1 = 0 (m >= N: one stage, none monitored): none
        return np.arange(1, max(J1, 0) + 1, dtype=np.int64)
    # two consecutive greedy steps span more than ``merge``, and log tau spans < 2 log K
    out = np.empty(min(J1, int(4.0 * math.log(K) / merge) + 16), dtype=np.int64)
    count = _greedy_stages(J1, K, merge, out)
    while count < 0:                                  # not expected; grow and redo
        out = np.empty(min(J1, 2 * out.size), dtype=np.int64)
        count = _greedy_stages(J1, K, merge, out)
    return out[:count].copy()


def merge_step(K: float, merge: float = DEFAULT_MERGE, budget: int = STAGE_BUDGET) -> float:
    """The merge step for K = N / m: ``merge``, or the step that keeps the plan near ``budget``.

    A plan visits about (2 log(K delta) + 2) / delta stages (1 / delta unmerged ones at each
    end, where the real step exceeds delta, and a lattice of step delta in between). With
    the defaults delta stays 1e-3 up to K = 1.5e5 and is 1.9e-3 at K = 2e7 (N = 10^9,
    m = 50).
    """
    if merge <= 0.0:
        return 0.0
    delta = merge
    for _ in range(50):                                # fixed point, contracts fast
        count = (2.0 * math.log(max(K * delta, 1.0)) + 2.0) / delta
        if count <= budget * (1.0 + 1e-9):
            return delta
        delta = (2.0 * math.log(max(K * delta, 1.0)) + 2.0) / budget
    return delta


def plan_stages(m: int, N: int, q_at, merge: float = DEFAULT_MERGE) -> StagePlan:
    """The stage plan for minibatch size m, population N and threshold function ``q_at``.

    ``q_at(n)`` gives the unshifted thresholds at sample sizes ``n`` (int64 array).
    ``merge = 0`` gives the exact programme (every stage, unit weights).
    """
    J1 = -(-N // m) - 1
    K = N / m
    j = visited_stages(J1, K, merge)
    n = j * m
    nf = n.astype(np.float64)
    tau = nf / (N - nf)
    q = np.asarray(q_at(n), dtype=np.float64)
    if j.size == J1:                     # nothing merged: the exact programme
        pi = np.concatenate([nf, [float(N)]]) / N
        zero = np.zeros(J1)
        return StagePlan(j, tau, q, pi, np.ones(J1), zero, zero.copy(), zero.copy(),
                         zero.copy(), False)

    # kernel sd of the merged step (from the previous visited stage) and of one real stage
    prev = np.concatenate([[np.nan], tau[:-1]])
    one = (j - 1) * m / (N - (j - 1.0) * m)
    with np.errstate(divide="ignore"):               # j = 1 has no previous stage
        s2_c = -np.expm1(np.log(prev) - np.log(tau))
        s2_f = -np.expm1(np.log(one) - np.log(tau))
    s2_c[0] = s2_f[0] = 0.0
    single = np.concatenate([[True], np.diff(j) == 1])
    s2_c[single] = s2_f[single]                # an unmerged step: no shift, no lag
    q = q - SIEGMUND_RHO * (np.sqrt(s2_c) - np.sqrt(s2_f))

    # survival of the real stages a < i < c interpolated linearly in t between a and c:
    # stage i gives (t_i - t_a) / (t_c - t_a) of its weight to c and the rest to a
    a, c = j[:-1].astype(np.float64), j[1:].astype(np.float64)
    inner = c - a - 1.0
    t_a, t_c = _log_tau(a, K), _log_tau(c, K)
    sum_t = (gammaln(c) - gammaln(a + 1.0)) - (gammaln(K - a) - gammaln(K - c + 1.0))
    to_c = np.where(inner > 0, (sum_t - inner * t_a) / (t_c - t_a), 0.0)
    to_a = inner - to_c
    wst = np.ones(j.size)
    wst[:-1] += to_a
    wst[1:] += to_c
    dpi = np.full(j.size, m / N)
    dpi[-1] = (N - nf[-1]) / N           # the last visited stage is the last monitored one
    w_pi = dpi + (m / N) * (wst - 1.0)
    pi = np.concatenate([[m / N], m / N + np.cumsum(w_pi)])

    # units of t each stop of a merged check is early by: LAG (s_c^2 - s_f^2), plus
    # LAG_DRIFT (s_c^3 - s_f^3) times the drift towards the boundary (added by the kernel)
    lag = LAG * (s2_c - s2_f)
    lag3 = LAG_DRIFT * (s2_c ** 1.5 - s2_f ** 1.5)
    frac = nf / N
    per_t_pi = frac * (1.0 - frac)       # data fraction per unit t: dn / dt / N
    per_t_st = nf * (N - nf) / (N * m)   # stages per unit t
    return StagePlan(j, tau, q, pi, wst, lag * per_t_pi, lag * per_t_st, lag3 * per_t_pi,
                     lag3 * per_t_st, True)
