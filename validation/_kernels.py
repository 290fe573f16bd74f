"""Compiled kernels of the validation checks (private).

Everything that draws minibatches reuses the samplers' machinery: rows come from
:func:`design._lib.rows.draw_rows` (a partial Fisher-Yates shuffle of a persistent
permutation, O(b) per minibatch, never a permutation of all N), moments from
:mod:`design._lib.moments`, and the sequential tests are the very compiled loops of
:mod:`samplers._seq` that a chain runs, given a "model" whose l_i are the entries of a
vector.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from samplers import _seq
from design._lib.rows import draw_rows
from design._lib.jit import jit, row_jit
from design._lib.moments import batch_moments, merge_moments
from samplers._seq import austere_se, confidence_radius_code, look_delta, next_size
from samplers.models._kernels import prefetch_data0


@row_jit
def vector_ratio(data, i, theta, theta_new):
    """Row kernel of a population of l_i held in a vector: ``l_i = data[0][i]``."""
    return data[0][i]


@jit
def central_moments(l, mean):
    """Population central moments of ``l`` about ``mean``: (m2, m3, m4, E|d|, E|d|^3)."""
    n = l.shape[0]
    s2 = s3 = s4 = a1 = a3 = 0.0
    for v in l:
        d = v - mean
        d2 = d * d
        s2 += d2
        s3 += d2 * d
        s4 += d2 * d2
        a = abs(d)
        a1 += a
        a3 += a * d2
    return s2 / n, s3 / n, s4 / n, a1 / n, a3 / n


@jit
def minibatch_statistics(l, mu, perm, b, rng, means, tstats):
    """Draw ``len(means)`` minibatches of ``b`` rows without replacement from ``l``.

    Stores each minibatch mean and its t statistic ``(mean - mu) / s``, with ``s`` the
    sequential test's standard error (sample sd, finite-population correction,
    :func:`samplers._seq.austere_se`). ``perm`` is a permutation of ``0..N-1`` kept between
    calls; each minibatch costs O(b).
    """
    N = l.shape[0]
    u = np.empty(b)
    rows = np.empty(b, dtype=np.intp)
    buf = np.empty(b)
    for k in range(means.shape[0]):
        draw_rows(rng, perm, 0, u, rows)
        for t in range(b):
            buf[t] = l[rows[t]]
        mean, m2 = batch_moments(buf)
        means[k] = mean
        tstats[k] = (mean - mu) / austere_se(m2, b, N)


def repeated_austere():
    """Compiled driver: run the sequential t-test ``n`` times at one threshold ``mu0``."""
    return _repeated_austere(_seq.austere_loop(vector_ratio, prefetch_data0))


@cache
def _repeated_austere(loop):
    @jit
    def run(l, perm, m, mu0, crit, rng, accepted, n_used):
        data = (l,)
        theta = np.zeros(1)
        for k in range(accepted.shape[0]):
            _, acc, _, n, _, _, _ = loop(data, theta, theta, rng, perm, 0, m, mu0, crit,
                                         0, 0.0, 0.0, 0)
            accepted[k] = acc
            n_used[k] = n

    return run


def repeated_confidence():
    """Compiled driver: run the confidence test ``n`` times with fresh u ~ U(0, 1).

    ``accepted`` gets the test's decisions, ``exact`` the full-data decisions for the same
    u (common random numbers: their difference has variance at most the error rate).
    """
    return _repeated_confidence(_seq.confidence_loop(vector_ratio, prefetch_data0))


@cache
def _repeated_confidence(loop):
    @jit
    def run(l, perm, mu, log_const, C, delta, p, gamma, code, b0, rng, accepted, exact, n_used):
        N = l.shape[0]
        data = (l,)
        theta = np.zeros(1)
        for k in range(accepted.shape[0]):
            psi = (-rng.standard_exponential() - log_const) / N
            _, acc, cursor, _, _ = loop(data, theta, theta, rng, perm, psi, C, delta, p, gamma,
                                        code, b0)
            accepted[k] = acc
            exact[k] = mu > psi
            n_used[k] = cursor

    return run


@jit
def dobrushin(P):
    """Dobrushin's contraction coefficient ``max_{i,k} (1/2) sum_j |P_ij - P_kj|``."""
    K = P.shape[0]
    worst = 0.0
    for i in range(K):
        for k in range(i + 1, K):
            total = 0.0
            for j in range(P.shape[1]):
                total += abs(P[i, j] - P[k, j])
            if total > worst:
                worst = total
    return 0.5 * worst


@jit
def doeblin(P):
    """The minorisation mass ``sum_j min_i P_ij`` (``P >= mass * nu`` for a probability nu)."""
    total = 0.0
    for j in range(P.shape[1]):
        low = math.inf
        for i in range(P.shape[0]):
            if P[i, j] < low:
                low = P[i, j]
        total += low
    return total


# --- acceptance probabilities of the sequential tests, u integrated out ---------------------
#
# For one random order of the rows (one "path"), a sequential test at threshold mu0 stops at
# the first stage whose interval [mean - r, mean + r] excludes mu0 and accepts iff mu0 lies
# below it; the radius r does not depend on mu0. The thresholds still undecided after a stage
# therefore form an interval [a, b], those decided below it were accepted and those above
# rejected, and at n = N the rest is decided exactly (accept iff mu0 < mu). So the path
# accepts iff mu0 < tau = min(max(mu, a), b), and with mu0 = (log u - c) / N,
# P(accept | path) = min(1, exp(N tau + c)) in closed form.


@jit
def _narrow(a, b, lo, hi):
    """Undecided thresholds after a stage with interval [lo, hi], given [a, b] before."""
    return max(a, min(b, lo)), min(b, max(a, hi))


@jit
def _extend(l, perm, rng, n, mean, m2, take, u, rows, buf):
    """Draw the next ``take`` rows of a path (the first n are taken) and merge their
    moments into ``(n, mean, m2)``, as the samplers' loops do."""
    draw_rows(rng, perm, n, u[:take], rows[:take])
    for t in range(take):
        buf[t] = l[rows[t]]
    b_mean, b_m2 = batch_moments(buf[:take])
    return merge_moments(n, mean, m2, take, b_mean, b_m2)


@jit
def austere_thresholds(l, perm, m, crit, rng, tau):
    """Path thresholds ``tau`` of the sequential t-test (stages of m rows, critical values
    ``crit``), one per entry of ``tau``. Each path reads rows until its undecided interval
    is empty or all N rows are read."""
    N = l.shape[0]
    mu = np.mean(l)
    u, rows, buf = np.empty(m), np.empty(m, dtype=np.intp), np.empty(m)
    for k in range(tau.shape[0]):
        a, b = -math.inf, math.inf
        n, mean, m2, stage = 0, 0.0, 0.0, 0
        while n < N and a < b:
            n, mean, m2 = _extend(l, perm, rng, n, mean, m2, min(m, N - n), u, rows, buf)
            if n < N:
                r = crit[stage] * austere_se(m2, n, N)
                a, b = _narrow(a, b, mean - r, mean + r)
            stage += 1
        tau[k] = min(max(mu, a), b)


@jit
def confidence_thresholds(l, perm, C, delta, p, gamma, code, b0, rng, tau):
    """Path thresholds of the confidence test (Bardenet et al., Figure 3: geometric looks,
    concentration radius ``confidence_radius_code``), one per entry of ``tau``."""
    N = l.shape[0]
    mu = np.mean(l)
    u, rows, buf = np.empty(N), np.empty(N, dtype=np.intp), np.empty(N)
    for k in range(tau.shape[0]):
        a, b = -math.inf, math.inf
        n, mean, m2, look = 0, 0.0, 0.0, 0
        size = min(b0, N)
        while n < N and a < b:
            look += 1
            n, mean, m2 = _extend(l, perm, rng, n, mean, m2, size - n, u, rows, buf)
            if n < N:
                r = confidence_radius_code(code, n, N, C, math.sqrt(m2 / n),
                                           look_delta(look, p, delta))
                a, b = _narrow(a, b, mean - r, mean + r)
                size = next_size(n, N, gamma)
        tau[k] = min(max(mu, a), b)
