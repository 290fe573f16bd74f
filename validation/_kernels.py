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
def set_epoch(order, epoch):
    """Set a keyed order's epoch (its next restart reads epoch ``epoch + 1``)."""
    order.epoch = epoch


@jit
def keyed_blocks(order, key, epochs, starts, lengths, out):
    """Rows ``starts[j] .. starts[j] + lengths[j] - 1`` of keyed order ``epochs[j]`` under
    ``key`` into ``out[j, :lengths[j]]`` (:func:`keyed_block`, the order restarted for each)."""
    for j in range(epochs.shape[0]):
        keyed_block(order, key, epochs[j], starts[j], out[j, :lengths[j]], True)


#: Positions a replay takes at once (:func:`keyed_block`): its scratch is this long.
_REPLAY = 1 << 16


@jit
def keyed_block(order, key, epoch, start, out, restart):
    """Rows at positions ``start .. start + len(out) - 1`` of keyed order ``epoch`` under
    ``key`` (two uint64) into ``out``: the rows a path of that epoch reads there, whatever
    stages it reads them in. With ``restart`` the order is restarted and its positions
    before ``start`` taken again (O(start) time, scratch of ``_REPLAY``, no l_i); without,
    ``order`` must have taken exactly ``start`` positions of this epoch (a path read on)."""
    if restart:
        restart_order(order)
        u = np.empty(min(start, _REPLAY))
        rows = np.empty(u.shape[0], dtype=np.intp)
        at = 0
        while at < start:
            k = min(u.shape[0], start - at)
            keyed_uniforms(key, epoch, at, u[:k])
            take_rows(order, u[:k], rows[:k])
            at += k
    u = np.empty(out.shape[0])
    keyed_uniforms(key, epoch, start, u)
    take_rows(order, u, out)


#: Fields of a path's state (:func:`sequence_path_acceptance`), one row per path.
STATE_FIELDS = ("n", "mean", "m2", "stage", "a", "b")


def new_path_states(n_paths):
    """States of ``n_paths`` paths not started (stage -1)."""
    states = np.zeros((n_paths, len(STATE_FIELDS)))
    states[:, 3] = -1.0
    return states


def _sequence_path_impl(radius, grow):
    @jit
    def path(values, start, N, settings, lo_win, hi_win, state):
        n, mean, m2, stage = int(state[0]), state[1], state[2], int(state[3])
        if stage < 0:
            stage = 0
            r = radius(0, N, 0, mean, m2, settings)
            if r != r:   # NEED_MORE (NaN); a negative r decides at once
                raise ValueError("the test's settings do not cover a whole pass over N rows")
            a, b = _narrow(-math.inf, math.inf, mean - r, mean + r)
        else:
            a, b = state[4], state[5]
        L = start + values.shape[0]
        finished = True
        while n < N and a < b and a < hi_win and b > lo_win:
            take = min(grow(n, N, stage, settings), N - n)
            if n + take > L:
                finished = False
                break
            b_mean, b_m2 = batch_moments(values[n - start:n - start + take])
            n, mean, m2 = merge_moments(n, mean, m2, take, b_mean, b_m2)
            stage += 1
            if n < N:
                r = radius(n, N, stage, mean, m2, settings)
                if r != r:
                    raise ValueError("the test's settings do not cover a whole pass "
                                     "over N rows")
                a, b = _narrow(a, b, mean - r, mean + r)
        state[0], state[1], state[2], state[3], state[4], state[5] = n, mean, m2, stage, a, b
        return finished

    return path


@cache
def sequence_path_acceptance(radius, grow):
    """Compiled P(accept | path) of an interval test, u integrated, for paths given as the
    l_i of their rows in the order read, block by block (:func:`interval_path`'s rule and
    arithmetic, with the rows read ahead instead of drawn).

    Returns ``run(values, starts, lengths, mu, N, settings, log_const, window, states, out,
    done)``: path j resumes from ``states[j]`` (``STATE_FIELDS``; :func:`new_path_states`
    for a path not started) on ``values[j, :lengths[j]]``, the l_i of its positions
    ``starts[j]`` on (``starts[j]`` its state's n: a stage boundary), stage by stage; if it
    stops within them, ``out[j]`` is ``min(1, exp(N tau + c))``
    (``validation._verdict.windowed_path_acceptance``'s rule: the path stops once its
    undecided thresholds leave [(-c - window) / N, -c / N]; ``mu`` the mean of all N l_i)
    and ``done[j]`` True; if it needs more rows than given, ``done[j]`` is False and
    ``states[j]`` holds where it stopped (the caller reads on from its n). The arithmetic
    is the same whatever the blocks, so the result is too.
    """
    path = _sequence_path_impl(radius, grow)

    @jit
    def run(values, starts, lengths, mu, N, settings, log_const, window, states, out, done):
        hi_win = -log_const / N
        lo_win = (-log_const - window) / N
        for j in range(values.shape[0]):
            finished = path(values[j, :lengths[j]], starts[j], N, settings, lo_win, hi_win,
                            states[j])
            done[j] = finished
            if finished:
                tau = min(max(mu, states[j, 4]), states[j, 5])
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


@jit
def _extend(l, order, rng, n, mean, m2, take, u, rows, buf):
    """Draw the next ``take`` rows of a path (the first n are taken) and merge their
    moments into ``(n, mean, m2)``, as the samplers' loops do."""
    draw_rows(rng, order, u[:take], rows[:take])
    for t in range(take):
        buf[t] = l[rows[t]]
    b_mean, b_m2 = batch_moments(buf[:take])
    return merge_moments(n, mean, m2, take, b_mean, b_m2)


@cache
def interval_path(radius, grow):
    """One path of an interval test, compiled: ``path(l, order, rng, settings, u, rows, buf,
    lo_win, hi_win) -> (a, b)``.

    The path reads rows as the engine does (stages of ``grow`` rows, moments merged batch by
    batch) and narrows its undecided interval [a, b] by the test's own ``radius`` until the
    interval is empty, all N rows are read, or it leaves the window [lo_win, hi_win]
    (infinite: never); nothing of the test's rule is re-derived here. ``u``, ``rows`` and
    ``buf`` are scratch of length N.
    """

    @jit
    def path(l, order, rng, settings, u, rows, buf, lo_win, hi_win):
        N = l.shape[0]
        n, mean, m2, stage = 0, 0.0, 0.0, 0
        restart_order(order)
        r = radius(0, N, 0, mean, m2, settings)
        if r != r:   # NEED_MORE (NaN); a negative r decides at once
            raise ValueError("the test's settings do not cover a whole pass over N rows")
        a, b = _narrow(-math.inf, math.inf, mean - r, mean + r)
        while n < N and a < b and a < hi_win and b > lo_win:
            take = min(grow(n, N, stage, settings), N - n)
            n, mean, m2 = _extend(l, order, rng, n, mean, m2, take, u, rows, buf)
            stage += 1
            if n < N:
                r = radius(n, N, stage, mean, m2, settings)
                if r != r:   # NEED_MORE (NaN); a negative r decides at once
                    raise ValueError("the test's settings do not cover a whole pass "
                                     "over N rows")
                a, b = _narrow(a, b, mean - r, mean + r)
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
