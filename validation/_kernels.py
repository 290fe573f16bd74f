"""Compiled kernels of the validation checks (private).

Everything that draws minibatches reuses the samplers' machinery: rows come from
:func:`design._lib.rows.draw_rows` (a sparse Fisher-Yates shuffle, O(b) time and memory per
minibatch, never a permutation of all N; each minibatch, decision or path restarts the order
with :func:`design._lib.rows.restart_order`), moments from :mod:`design._lib.moments`, and the sequential tests are run by the samplers' own engine
(:mod:`samplers.mhtests.engine`: the compiled driver a chain runs, with the test's own
rule, settings and epilogue, asked from the test through ``engine_spec`` / ``path_spec``),
given a "model" whose l_i are the entries of a vector.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from design._lib.jit import jit, row_jit
from design._lib.moments import batch_moments, merge_moments
from design._lib.prefetch import prefetch_row
from design._lib.rows import draw_rows, keyed_uniforms, restart_order, take_rows
from design._lib.rules import austere_se
from samplers.mhtests.engine import MORE, compiled_driver


@row_jit
def vector_ratio(data, i, theta, theta_new):
    """Row kernel of a population of l_i held in a vector: ``l_i = data[0][i]``."""
    return data[0][i]


@row_jit
def vector_prefetch(data, i):
    """Row prefetch of a population of l_i held in a vector."""
    prefetch_row(data[0], i)


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
def minibatch_statistics(l, mu, order, b, rng, means, tstats):
    """Draw ``len(means)`` minibatches of ``b`` rows without replacement from ``l``.

    Stores each minibatch mean and its t statistic ``(mean - mu) / s``, with ``s`` the
    sequential test's standard error (sample sd, finite-population correction,
    :func:`design._lib.rules.austere_se`). ``order`` is a :func:`design._lib.rows.new_order` of
    N rows kept between calls; each minibatch restarts it and costs O(b).
    """
    N = l.shape[0]
    u = np.empty(b)
    rows = np.empty(b, dtype=np.intp)
    buf = np.empty(b)
    for k in range(means.shape[0]):
        restart_order(order)
        draw_rows(rng, order, u, rows)
        for t in range(b):
            buf[t] = l[rows[t]]
        mean, m2 = batch_moments(buf)
        means[k] = mean
        tstats[k] = (mean - mu) / austere_se(m2, b, N)


@jit
def minibatch_rows(order, rng, rows):
    """The rows of ``rows.shape[0]`` minibatches of ``rows.shape[1]`` rows, drawn as
    :func:`minibatch_statistics` draws them (the same uniforms from ``rng``, the order
    restarted for each minibatch), into ``rows``: so the statistics of values gathered at
    these rows (:func:`minibatch_values_statistics`) are :func:`minibatch_statistics`'
    bit for bit."""
    b = rows.shape[1]
    u = np.empty(b)
    for k in range(rows.shape[0]):
        restart_order(order)
        draw_rows(rng, order, u, rows[k])


@jit
def minibatch_values_statistics(values, mu, N, means, tstats):
    """Mean and t statistic ``(mean - mu) / s`` of each row of ``values`` (a minibatch of
    l_i from a population of N), as :func:`minibatch_statistics` computes them."""
    b = values.shape[1]
    for k in range(values.shape[0]):
        mean, m2 = batch_moments(values[k])
        means[k] = mean
        tstats[k] = (mean - mu) / austere_se(m2, b, N)


@jit
def keyed_prefixes(order, key, epochs, out):
    """The first ``out.shape[1]`` rows of each keyed order ``epochs[j]`` under ``key`` (two
    uint64) into ``out[j]``: the rows a path of that epoch reads, whatever stages it reads
    them in (a keyed order's uniform is a function of its epoch and position only)."""
    L = out.shape[1]
    u = np.empty(L)
    for j in range(epochs.shape[0]):
        restart_order(order)
        keyed_uniforms(key, epochs[j], 0, u)
        take_rows(order, u, out[j])


@jit
def set_epoch(order, epoch):
    """Set a keyed order's epoch (its next restart reads epoch ``epoch + 1``)."""
    order.epoch = epoch


@cache
def sequence_path_acceptance(radius, grow):
    """Compiled P(accept | path) of an interval test, u integrated, for paths given as the
    l_i of their rows in the order read (:func:`interval_path`'s rule and arithmetic, with
    the rows read ahead instead of drawn).

    Returns ``run(values, mu, N, settings, log_const, window, out, done)``: path j reads
    ``values[j]`` stage by stage; if it stops within them, ``out[j]`` is
    ``min(1, exp(N tau + c))`` (``validation._verdict.windowed_path_acceptance``'s rule:
    the path stops once its undecided thresholds leave [(-c - window) / N, -c / N]; ``mu``
    the mean of all N l_i) and ``done[j]`` True; if it needs more rows than given,
    ``done[j]`` is False (the caller reads a longer prefix of the same order).
    """
    path = stopping_loop(radius, grow, _given_rows)

    @jit
    def run(values, mu, N, settings, log_const, window, out, done):
        hi_win = -log_const / N
        lo_win = (-log_const - window) / N
        for j in range(values.shape[0]):
            a, b, finished = path((values[j],), N, settings, lo_win, hi_win)
            done[j] = finished
            if finished:
                tau = min(max(mu, a), b)
                out[j] = math.exp(min(N * tau + log_const, 0.0))

    return run


def repeated_decisions(spec):
    """Compiled driver: run a sequential test ``len(accepted)`` times on a vector of l_i.

    ``spec`` is the test's :meth:`~samplers.mhtests.SequentialTest.engine_spec`. Returns
    ``run(l, order, mu, mu0, log_const, rng, accepted, exact, n_used)`` (``order`` a
    :func:`design._lib.rows.new_order` of N rows, restarted for each decision): each decision
    uses the threshold ``mu0`` if it is finite, else, for a test that draws one
    (``spec.draws_threshold``), draws ``u`` (``mu0 = (log u - c)/N``, ``c = log_const``) as a
    chain's test does; a test that draws none (Barker) carries c in ``spec.settings``. ``accepted`` gets the test's decisions,
    ``exact`` the full-data decisions ``mu > mu0`` for the same u (common random numbers:
    their difference has variance at most the error rate), ``n_used`` the rows read.
    """
    drive = compiled_driver(vector_ratio, vector_prefetch, spec.rule, spec.epilogue)
    run = _repeated(drive)

    def repeated(l, order, mu, mu0, log_const, rng, accepted, exact, n_used):
        draw = spec.draws_threshold and not math.isfinite(mu0)
        run(l, order, mu, mu0, draw, log_const, spec.settings, spec.carry, rng, accepted,
            exact, n_used)

    return repeated


@cache
def _repeated(drive):
    @jit
    def run(l, order, mu, mu0, draw, log_const, settings, carry, rng, accepted, exact, n_used):
        N = l.shape[0]
        data = (l,)
        theta = np.zeros(1)
        empty = np.empty(0)
        for k in range(accepted.shape[0]):
            if draw:
                mu0 = (-rng.standard_exponential() - log_const) / N
            restart_order(order)
            out = drive(data, theta, theta, rng, order, mu0, settings, carry, empty, 0, 0, 0,
                        0.0, 0.0, 0.0)
            if out[0] == MORE:
                raise ValueError("the test's settings do not cover a whole pass over N rows")
            accepted[k] = out[1]
            exact[k] = mu > mu0
            n_used[k] = out[2]

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


@cache
def stopping_loop(radius, grow, fetch):
    """The stopping loop of an interval test's path, compiled (the one loop both
    :func:`interval_path` and :func:`sequence_path_acceptance` run): ``loop(src, N,
    settings, lo_win, hi_win) -> (a, b, finished)``.

    The path reads stages of ``grow`` rows, their moments merged batch by batch as the
    engine does, and narrows its undecided interval [a, b] by the test's own ``radius``
    until the interval is empty, all N rows are read, or it leaves the window [lo_win,
    hi_win] (infinite: never); nothing of the test's rule is re-derived here.
    ``fetch(src, n, take) -> (got, mean, m2)`` gives the moments of the path's rows n to
    n + take (drawn, :func:`_drawn_rows`, or read ahead, :func:`_given_rows`); ``got``
    False (rows not at hand) stops the loop with ``finished`` False.
    """

    @jit
    def loop(src, N, settings, lo_win, hi_win):
        n, mean, m2, stage = 0, 0.0, 0.0, 0
        r = radius(0, N, 0, mean, m2, settings)
        if r != r:   # NEED_MORE (NaN); a negative r decides at once
            raise ValueError("the test's settings do not cover a whole pass over N rows")
        a, b = _narrow(-math.inf, math.inf, mean - r, mean + r)
        while n < N and a < b and a < hi_win and b > lo_win:
            take = min(grow(n, N, stage, settings), N - n)
            got, b_mean, b_m2 = fetch(src, n, take)
            if not got:
                return a, b, False
            n, mean, m2 = merge_moments(n, mean, m2, take, b_mean, b_m2)
            stage += 1
            if n < N:
                r = radius(n, N, stage, mean, m2, settings)
                if r != r:   # NEED_MORE (NaN); a negative r decides at once
                    raise ValueError("the test's settings do not cover a whole pass "
                                     "over N rows")
                a, b = _narrow(a, b, mean - r, mean + r)
        return a, b, True

    return loop


@jit
def _drawn_rows(src, n, take):
    """:func:`stopping_loop`'s ``fetch`` for a path drawn as it goes: the next ``take`` rows
    of ``src = (l, order, rng, u, rows, buf)`` (the first n are taken), as the samplers'
    loops draw them."""
    l, order, rng, u, rows, buf = src
    draw_rows(rng, order, u[:take], rows[:take])
    for t in range(take):
        buf[t] = l[rows[t]]
    b_mean, b_m2 = batch_moments(buf[:take])
    return True, b_mean, b_m2


@jit
def _given_rows(src, n, take):
    """:func:`stopping_loop`'s ``fetch`` for a path read ahead: ``src = (values,)``, the l_i
    of its rows in the order read; False past them."""
    values = src[0]
    if n + take > values.shape[0]:
        return False, 0.0, 0.0
    b_mean, b_m2 = batch_moments(values[n:n + take])
    return True, b_mean, b_m2


@cache
def interval_path(radius, grow):
    """One path of an interval test, compiled: ``path(l, order, rng, settings, u, rows, buf,
    lo_win, hi_win) -> (a, b)``: the order restarted, then :func:`stopping_loop` drawing the
    path's rows as the engine does. ``u``, ``rows`` and ``buf`` are scratch of length N.
    """
    loop = stopping_loop(radius, grow, _drawn_rows)

    @jit
    def path(l, order, rng, settings, u, rows, buf, lo_win, hi_win):
        restart_order(order)
        a, b, _ = loop((l, order, rng, u, rows, buf), l.shape[0], settings, lo_win, hi_win)
        return a, b

    return path


@cache
def path_thresholds(radius, grow):
    """Compiled path thresholds of an interval test (its ``path_spec``'s radius and stage
    sizes): ``run(l, order, settings, rng, tau)`` stores one threshold per entry of ``tau``:
    the mean of the l_i clipped to the undecided interval where its path
    (:func:`interval_path`) stopped.
    """
    path = interval_path(radius, grow)

    @jit
    def run(l, order, settings, rng, tau):
        N = l.shape[0]
        mu = np.mean(l)
        u, rows, buf = np.empty(N), np.empty(N, dtype=np.intp), np.empty(N)
        for p in range(tau.shape[0]):
            a, b = path(l, order, rng, settings, u, rows, buf, -math.inf, math.inf)
            tau[p] = min(max(mu, a), b)

    return run
