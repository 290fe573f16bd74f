"""The sequential test's error on skewed, heavy-tailed l_i: an Edgeworth-corrected DP (private).

The Gaussian dynamic programme (``design._dp``) models the test statistic as the Gaussian
walk z_j of ``design._sequential``. On real l_i with skewness gamma and excess kurtosis
kappa (population values over the N rows) the statistic of stage j, with n = n_j rows read
and f = n / N, is

    T_j = (xbar_n - mu0) / se_n,   se_n^2 = s_n^2 (1 - (n - 1) / (N - 1)) / n,

and se_n is random and correlated with xbar_n. Write Z = (xbar_n - mu0) / sd(xbar_n) =
Z0 + a (Z0 the centred standardized mean, a = mu_std sqrt(tau_j) its drift, the Gaussian
walk's mean) and D = s_n^2 / sigma^2 - 1, so that the test stops above when
Z > c sqrt(1 + D) and below when Z < -c sqrt(1 + D), c the critical value.

**Per-stage law (one-term Edgeworth expansion).** For draws without replacement the
cumulants needed to order n^-1/2 are (Hall 1992, sections 2.4 and 2.6 for the i.i.d. case;
Babu & Singh 1985 for finite populations)

    skewness of Z0:   k3 = gamma (1 - 2 f) / sqrt(n (1 - f)),
    E[Z0 D] = beta   = gamma sqrt(1 - f) / sqrt(n)       (Cov(xbar, s^2) = mu3 (1 - f) / n),
    Var(D | Z0)  ~ v = (kappa + 2 - gamma^2) (1 - f) / n.

The Cornish-Fisher form of the first, Z0 = W + (k3 / 6)(W^2 - 1) + O(1 / n) with W standard
normal, and the regression D = beta W + e with e independent of W, turn the stopping rule
into a rule on the Gaussian W: stop above when

    W > (c - a) + (c beta / 2)(c - a) - (k3 / 6)((c - a)^2 - 1)

and below when W < -(c + a) + (c beta / 2)(c + a) - (k3 / 6)((c + a)^2 - 1), to first
order. At a = 0 and f = 0 this is the classical expansion of the studentized mean,
P(T <= x) = Phi(x) + n^-1/2 (gamma / 6)(2 x^2 + 1) phi(x) + O(1 / n) (Hall 1992, section 2.6):
the t statistic is skewed against the sign of gamma, so on right-skewed l_i the test
stops below too often and above too rarely.

**The n^-1 term.** The i.i.d. expansion continues with n^-1 q2(x) phi(x),
q2(x) = x (kappa (x^2 - 3) / 12 - gamma^2 (x^4 + 2 x^2 - 3) / 18 - (x^2 + 3) / 4)
(Hall 1992, Eq. 2.55). Its last part is Student's heaviness, which the t thresholds of
the real test already remove (the Gaussian programme's ``"normal"`` prediction); the rest
is kept, times (1 - f), as a further shift of each threshold, evaluated at the same
drift-shifted argument (c -+ a) as the skew term, together with the square of the
first-order shift that the quantile map W = Phi^-1(P(T <= x)) adds (x sh^2 / 2). Note the
sign: at |x| > sqrt(3) excess kurtosis makes the t statistic *lighter*-tailed (mean and sd
of a batch grow together when a large l_i is in it). An earlier version kept only the
noise of the sample variance (thresholds divided by sqrt(1 + c^2 v_ex / 4)), which has the
opposite sign: at kappa ~ 40-50 and m = 100 it over-predicted the wrong stops by up to
6-13 SE of the simulated test at small epsilon (deep thresholds); with the full term
the cells within ``edgeworth_reliable`` are within 2.5 SE
(``benchmarks/edgeworth_kurtosis.py``).

**The programme.** With these stage-dependent, drift-dependent and asymmetric thresholds
[L_j, U_j] in the space of the Gaussian walk Z (U = a + the upper W-threshold above), the
walk z_{j+1} = rho_j z_j + c_j + s_j xi of ``design._dp`` is propagated directly, one drift
at a time: the surviving density is kept at composite Gauss-Legendre nodes on [L_j, U_j]
(panels no wider than the next kernel sd, where the convolution integrand is smooth), the
next density is the Gaussian-kernel sum at the next nodes, and the stops above and below are
the sums of the kernel's tails beyond U_{j+1} and L_{j+1} (exact for the discrete density).
Stages are those of ``design._stages.plan_stages`` with a coarser merge step
(``EDGEWORTH_MERGE`` = 0.02; Siegmund's shift keeps the merged walk first-order exact and the
error below 0.5 delta^2), survivors below ``STOP_TOL`` are dropped.

The polynomial terms are only an expansion: the shifts are capped at ``SHIFT_CAP`` in
absolute value (the Cornish-Fisher map stops being monotone beyond), and the expansion is
meaningful only while gamma / sqrt(m) and kappa / m are small (``edgeworth_reliable``:
|gamma| / sqrt(m) <= 0.5 and max(kappa, gamma^2) / m <= 0.5); beyond, the neglected
n^-3/2 terms are not small at the first stages (lognormal l_i with kappa ~ 77 at m = 100,
or kappa ~ 40 at m = 50, are still 4-8 SE off) and the real test must be simulated on the
real l_i (``validation.acceptance_check``, whose verdict is the simulation's).

References
----------
P. Hall. The Bootstrap and Edgeworth Expansion. Springer, 1992 (sections 2.4, 2.6).
G. J. Babu, K. Singh. Edgeworth expansions for sampling without replacement from finite
populations. J. Multivariate Anal. 17 (1985), 261-278.
A. Korattikara, Y. Chen, M. Welling. Austerity in MCMC Land. ICML 2014 (section 5.1).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ._lib.jit import jit

from ._sequential import stage_thresholds
from ._stages import merge_step, plan_stages

__all__ = ["edgeworth_dp", "edgeworth_reliable", "EDGEWORTH_MERGE"]

#: Merge step in log information time of the corrected programme (error <= 0.5 delta^2).
EDGEWORTH_MERGE = 0.02
#: Panel width of the node rule, in kernel sds (2.5: E within 2e-5 of the Gaussian DP).
PANEL = 2.5
#: Largest |shift| of a threshold the expansion may apply (in sds of the statistic).
SHIFT_CAP = 1.5
#: Largest |argument| of the Cornish-Fisher polynomial (beyond it the map is not monotone).
ARG_CAP = 4.0
#: Drop a drift's survivors once they are below this.
STOP_TOL = 1e-10
#: The expansion is trusted while |gamma| / sqrt(m) and max(kappa, gamma^2) / m are below.
RELIABLE_SKEW = 0.5
RELIABLE_KURT = 0.5

_GL_ORDER = 5
_GL_T, _GL_W = np.polynomial.legendre.leggauss(_GL_ORDER)
_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def edgeworth_reliable(skewness, kurtosis, m):
    """Whether the one-term expansion is trusted at minibatch size m (elementwise).

    The neglected terms are of order gamma^2 / n and kappa / n at the first stage n = m:
    trusted while |gamma| / sqrt(m) <= 0.5 and max(kappa, gamma^2) / m <= 0.5. Beyond, the
    corrected programme can be 4-8 standard errors from the real test
    (``benchmarks/edgeworth_kurtosis.py``) and the real test must be simulated on the real
    l_i (``validation.acceptance_check``).

    Parameters
    ----------
    skewness, kurtosis : array_like
        Population skewness gamma and excess kurtosis kappa of each pair's l_i.
    m : int
        Minibatch size (the first stage).

    Returns
    -------
    numpy.ndarray of bool

    Examples
    --------
    >>> from design import edgeworth_reliable
    >>> edgeworth_reliable([0.5, 4.0, 1.0], [3.0, 20.0, 60.0], 100).tolist()
    [True, True, False]
    """
    g = np.abs(np.asarray(skewness, dtype=float))
    k = np.asarray(kurtosis, dtype=float)
    return (g / math.sqrt(m) <= RELIABLE_SKEW) & (np.maximum(k, g * g) / m <= RELIABLE_KURT)


@jit
def _clip(x, cap):
    return max(-cap, min(cap, x))


@jit
def _thresholds(q, a, n, N, gamma, kappa):
    """(L, U): the stopping thresholds of the Gaussian walk z (drift a included) at a stage
    with n rows, normal threshold q, skewness gamma and excess kurtosis kappa."""
    f = n / N
    one_f = max(1.0 - f, 0.0)
    k3 = gamma * (1.0 - 2.0 * f) / math.sqrt(n * max(one_f, 1.0 / n))
    beta = gamma * math.sqrt(one_f / n)
    c = q
    up, lo = _clip(c - a, ARG_CAP), _clip(c + a, ARG_CAP)
    sh_u = 0.5 * c * beta * up - k3 / 6.0 * (up * up - 1.0)
    sh_l = 0.5 * c * beta * lo - k3 / 6.0 * (lo * lo - 1.0)
    # the n^-1 term of the studentized mean beyond Student's (Hall 1992, Eq. 2.55):
    # P(T <= x) - P_Gauss(T <= x) gains x (kappa (x^2 - 3) / 12 - gamma^2 (x^4 + 2x^2 - 3)
    # / 18) phi(x) / n, odd in x; and the quantile map's square of the first-order shift
    r = one_f / n
    sh_u += r * _second(up, gamma, kappa) + 0.5 * up * sh_u * sh_u
    sh_l += -r * _second(lo, gamma, kappa) - 0.5 * lo * sh_l * sh_l
    U = c + _clip(sh_u, SHIFT_CAP)
    L = -c + _clip(sh_l, SHIFT_CAP)
    if U - L < 0.2:                       # keep a (narrow) continuation region
        mid = 0.5 * (U + L)
        U, L = mid + 0.1, mid - 0.1
    return L, U


@jit
def _second(x, gamma, kappa):
    x2 = x * x
    return x * (kappa * (x2 - 3.0) / 12.0 - gamma * gamma * (x2 * x2 + 2.0 * x2 - 3.0) / 18.0)


@jit
def _nodes(L, U, width, out_x, out_w):
    """Composite Gauss-Legendre nodes on [L, U], panels at most ``width``; returns count."""
    n_pan = max(1, int(math.ceil((U - L) / width)))
    p = _GL_T.shape[0]
    h = (U - L) / n_pan
    k = 0
    for i in range(n_pan):
        mid = L + (i + 0.5) * h
        for r in range(p):
            out_x[k] = mid + 0.5 * h * _GL_T[r]
            out_w[k] = 0.5 * h * _GL_W[r]
            k += 1
    return k


@jit
def _phi_bar(x):
    return 0.5 * math.erfc(x / _SQRT2)


@jit
def edgeworth_kernel(tau, q, n, pi, N, mus, gamma, kappa, stop_tol, panel):
    """Run the corrected programme for each drift in ``mus``.

    ``tau``, ``q``, ``n`` are the visited stages' information times, normal thresholds
    (Siegmund-shifted where merged) and row counts; ``pi`` the data weights of the plan
    (data fraction pi[0] + sum_c (pi[c + 1] - pi[c]) S_c). Returns (error, data_fraction),
    the error being the probability of an early stop on the wrong side (below for mu >= 0).
    """
    J1 = tau.shape[0]
    n_mu = mus.shape[0]
    err = np.zeros(n_mu)
    data = np.zeros(n_mu)
    cap = 4096
    x = np.empty(cap)
    w = np.empty(cap)
    f = np.empty(cap)
    xn = np.empty(cap)
    wn = np.empty(cap)
    fn = np.empty(cap)
    reach = 8.0
    for k in range(n_mu):
        mu = mus[k]
        below_is_wrong = mu >= 0.0
        a = mu * math.sqrt(tau[0])
        L, U = _thresholds(q[0], a, n[0], N, gamma, kappa)
        lo_exit = 1.0 - _phi_bar(L - a)
        hi_exit = _phi_bar(U - a)
        e = lo_exit if below_is_wrong else hi_exit
        s_next = math.sqrt(1.0 - tau[0] / tau[1]) if J1 > 1 else 1.0
        M = _nodes(L, U, panel * s_next, x, w)
        surv = 0.0
        for i in range(M):
            z = x[i] - a
            f[i] = math.exp(-0.5 * z * z) * _INV_SQRT_2PI
            surv += w[i] * f[i]
        pib = pi[0] + (pi[1] - pi[0]) * surv
        for j in range(1, J1):
            if surv < stop_tol:
                break
            rho = math.sqrt(tau[j - 1] / tau[j])
            s = math.sqrt(1.0 - rho * rho)
            shift = mu * (tau[j] - tau[j - 1]) / math.sqrt(tau[j])
            a = mu * math.sqrt(tau[j])
            L, U = _thresholds(q[j], a, n[j], N, gamma, kappa)
            lo_exit = 0.0
            hi_exit = 0.0
            for i in range(M):
                mean = rho * x[i] + shift
                wf = w[i] * f[i]
                lo_exit += wf * _phi_bar((mean - L) / s)
                hi_exit += wf * _phi_bar((U - mean) / s)
            e += lo_exit if below_is_wrong else hi_exit
            s_next = math.sqrt(1.0 - tau[j] / tau[j + 1]) if j + 1 < J1 else s
            Mn = _nodes(L, U, panel * min(s, s_next), xn, wn)
            if Mn > cap - 8:
                Mn = cap - 8
            inv = _INV_SQRT_2PI / s
            surv = 0.0
            i0 = 0
            for b in range(Mn):
                y = xn[b]
                acc = 0.0
                while i0 < M and rho * x[i0] + shift < y - reach * s:
                    i0 += 1
                i = i0
                while i < M:
                    d = (y - rho * x[i] - shift) / s
                    if d < -reach:
                        break
                    acc += w[i] * f[i] * math.exp(-0.5 * d * d)
                    i += 1
                fn[b] = acc * inv
                surv += wn[b] * fn[b]
            for b in range(Mn):
                x[b] = xn[b]
                w[b] = wn[b]
                f[b] = fn[b]
            M = Mn
            pib += (pi[j + 1] - pi[j]) * surv
        err[k] = e
        data[k] = pib
    return err, data


def edgeworth_dp(mus, m, epsilon, N, skewness, kurtosis, *, merge=EDGEWORTH_MERGE,
                 panel=PANEL, stop_tol=STOP_TOL):
    """(error, data_fraction) of the sequential test at signed standardized means ``mus``.

    The law of each stage's statistic is corrected for the skewness and excess kurtosis of
    the l_i (see the module docstring); with both zero this is the Gaussian programme (with
    the coarser merge step ``merge``; tested against :func:`design.sequential_error`).
    The error at mu_std < 0 is the probability of an early stop above (accepting wrongly),
    at mu_std >= 0 below.
    """
    mus = np.ascontiguousarray(mus, dtype=np.float64)
    if -(-N // m) == 1:
        return np.zeros_like(mus), np.ones_like(mus)
    plan = plan_stages(m, N, lambda nn: stage_thresholds(nn, epsilon, "normal"),
                       merge_step(N / m, merge))
    if plan.tau.size < 1:
        return np.zeros_like(mus), np.ones_like(mus)
    nrows = (plan.stages * m).astype(np.float64)
    return edgeworth_kernel(plan.tau, plan.q, nrows, plan.pi, float(N), mus,
                            float(skewness), float(kurtosis), float(stop_tol), float(panel))


#: u-weight cut: beyond this many 1 / kappa the weight exp(-kappa x) is below 1e-20.
_WEIGHT_CUT = 46.0
_PAIR_GL_T, _PAIR_GL_W = np.polynomial.legendre.leggauss(4)


def _side_nodes(lo, hi, kappa):
    """Gauss-Legendre nodes on [lo, hi]: panels doubling from 0.1 away from ``lo`` (where E
    changes fastest) and no wider than 3 / kappa (the exponential u-weight)."""
    if hi <= lo:
        return np.empty(0), np.empty(0)
    geo = lo + 0.1 * 2.0 ** np.arange(0, 40)
    lin = lo + (3.0 / kappa) * np.arange(1, int(math.ceil((hi - lo) * kappa / 3.0)) + 1)
    edges = np.unique(np.concatenate([[lo, hi], geo[geo < hi], lin[lin < hi]]))
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    x = (mid[:, None] + half[:, None] * _PAIR_GL_T).ravel()
    w = (half[:, None] * _PAIR_GL_W).ravel()
    return x, w


def _pair_nodes(k, c, x_edge):
    """Signed mu_std nodes, u-weights, signs (-1: accepted side) and the tail mass beyond
    ``x_edge`` of one pair (kappa = k, mu_std(u = 1) = c)."""
    xs, ws, signs = [], [], []
    tail = 0.0
    lo = max(c, 0.0)                 # accepted side: mu_std = x >= max(c, 0)
    hi = min(lo + _WEIGHT_CUT / k, x_edge)
    if lo + _WEIGHT_CUT / k > x_edge:
        tail += math.exp(k * (c - max(lo, x_edge)))
    x, w = _side_nodes(lo, hi, k)
    xs.append(x)
    ws.append(w * k * np.exp(k * (c - x)))
    signs.append(np.full(x.size, -1.0))
    if c < 0.0:                      # rejected side: mu_std = -y, y in [0, -c]
        y_lo, y_hi = max(0.0, -c - _WEIGHT_CUT / k), min(-c, x_edge)
        if -c > x_edge:
            tail -= math.expm1(k * (c + x_edge))
        y, w = _side_nodes(y_lo, y_hi, k)
        xs.append(-y)
        ws.append(w * k * np.exp(k * (c + y)))
        signs.append(np.full(y.size, 1.0))
    return np.concatenate(xs), np.concatenate(ws), np.concatenate(signs), tail


def edgeworth_pair_errors(trial, m, epsilon, *, x_edge, workers=None):
    """(delta, data_fraction) per pair of a trial chain under the corrected law.

    For pair p with kappa = N sigma / sqrt(N - 1) and mu_c = mu_std(u = 1), mu_std(u) =
    mu_c - log(u) / kappa has density kappa exp(kappa (mu_c - x)) on [mu_c, inf), and

        Delta = int_{x < 0} E(x) w(x) dx - int_{x > 0} E(x) w(x) dx

    with E(x) the probability of an early stop on the wrong side at the signed mu_std = x
    (no longer even in x). Beyond ``x_edge`` E is 0 and the data fraction m / N. Pairs run
    on ``workers`` threads (the kernel releases the GIL; default: every core); each pair's
    result does not depend on the threads.
    """
    from concurrent.futures import ThreadPoolExecutor

    N = trial.N
    kappa, mu_c = trial.mu_std_scale, trial.mu_std_at_one

    def one(p):
        x, w, sign, tail = _pair_nodes(float(kappa[p]), float(mu_c[p]), x_edge)
        d = f = 0.0
        if x.size:
            err, frac = edgeworth_dp(x, m, epsilon, N, trial.skewness[p], trial.kurtosis[p])
            d, f = float(np.sum(sign * w * err)), float(np.sum(w * frac))
        return d, f + tail * (m / N)

    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers <= 1 or trial.n_pairs == 1:
        res = [one(p) for p in range(trial.n_pairs)]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, trial.n_pairs)) as pool:
            res = list(pool.map(one, range(trial.n_pairs)))
    res = np.array(res, dtype=float).reshape(trial.n_pairs, 2)
    return res[:, 0].copy(), res[:, 1].copy()
