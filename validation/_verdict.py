"""The error in the acceptance probability, pair by pair: predicted and simulated (private).

A design promises a mean |Delta| over pairs, Delta = P(the test accepts) - Pa (u ~ U(0, 1)
integrated out, Korattikara et al. 2014, Eq. 6). For each pair of real l_i this module gives
three estimates of Delta:

* ``gaussian`` -- the Gaussian dynamic programme the design used (:func:`design.acceptance_error`);
* ``edgeworth`` -- the programme with the Edgeworth-corrected per-stage law (skewness and
  excess kurtosis of the l_i; ``law="edgeworth"``);
* ``simulated`` -- the real sequential t-test on the real l_i, u integrated out exactly:
  for one random order of the rows the thresholds mu0 the test accepts form a half-line
  below a path threshold tau (``validation._kernels``), so P(accept | path) =
  min(1, exp(N tau + c)) and Delta = mean over paths - Pa, with the standard error of that
  mean. A path only needs reading until its undecided interval leaves the window of
  thresholds where min(1, exp(N mu0 + c)) is in (e^-40, 1): the same rows a test at the
  hardest u of the window reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from design._lib.checks import as_generator, check_finite_array, check_int, check_interval
from design._lib.jit import jit
from design._lib.progress import progress_bar
from design._lib.rows import new_order, set_keyed

from ._kernels import (interval_path, keyed_block, keyed_blocks, new_path_states,
                       sequence_path_acceptance, set_epoch)
from ._ratios import CHUNK

__all__ = ["AcceptanceCheck", "acceptance_check"]

#: The verdict passes while the simulated mean |Delta| is below the tolerance plus this many
#: of its standard errors (a design exactly at its tolerance passes with probability ~0.98).
PASS_MARGIN_Z = 2.0

#: Width of the window of thresholds, in units of 1 / N of log u (exp(-40) ~ 4e-18).
_WINDOW = 40.0

#: The sequential verdict (``sequential=True``) simulates the paths in rounds, from
#: ``FIRST_LOOK`` paths per pair, doubling up to ``n_paths``, and stops at a look where the
#: full run's verdict is already clear: both the mean |Delta| and the noise the full run will
#: add are bounded at ``SEQUENTIAL_Z`` standard errors (see ``_clear_verdict``). Each look
#: decides wrongly with probability at most 2 Phi(-3.5) ~ 5e-4, so at most three early looks
#: disagree with the full run's verdict with probability below 0.15%.
FIRST_LOOK = 250
SEQUENTIAL_Z = 3.5


@cache
def windowed_path_acceptance(radius, grow):
    """Compiled P(accept | path) of an interval test for random row orders, u integrated.

    ``radius`` and ``grow`` are the test's own (its ``path_spec``, as
    ``validation._kernels.path_thresholds`` uses them; nothing of its rule is re-derived
    here). Returns ``run(l, order, settings, log_const, rng, out)``: each path draws rows as
    the engine does until its undecided interval [a, b] is empty, all N rows are read, or
    [a, b] leaves the window [(-c - 40) / N, -c / N] (c = ``log_const``, exact MH accepts iff
    log u < sum l_i + c); then P(accept | path) = min(1, exp(N tau + c)),
    tau = min(max(mean, a), b), which outside the window is 1 or below e^-40.
    """

    path = interval_path(radius, grow)

    @jit
    def run(l, order, settings, log_const, rng, out):
        N = l.shape[0]
        mu = np.mean(l)
        hi_win = -log_const / N
        lo_win = (-log_const - _WINDOW) / N
        u, rows, buf = np.empty(N), np.empty(N, dtype=np.intp), np.empty(N)
        for p in range(out.shape[0]):
            a, b = path(l, order, rng, settings, u, rows, buf, lo_win, hi_win)
            tau = min(max(mu, a), b)       # outside the window only its side matters
            out[p] = math.exp(min(N * tau + log_const, 0.0))

    return run


def _agrees(flag) -> str:
    return "not computed" if flag is None else "agrees" if flag else "DISAGREES"


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control, any dependence)."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    k = p.size
    adj = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        adj[i] = running
    return adj


def two_sided_p(z) -> np.ndarray:
    """Two-sided normal p-values of z scores."""
    from scipy import special

    return special.erfc(np.abs(np.asarray(z, dtype=float)) / math.sqrt(2.0))


@dataclass(frozen=True, eq=False)
class AcceptanceCheck:
    """The error in the acceptance probability of the sequential t-test on real l_i.

    Per-pair fields are arrays of length ``n_pairs``; Delta = P(the test accepts) - Pa with
    u integrated out (Korattikara et al. 2014, Eq. 6), the quantity a design's tolerance
    bounds on average.

    Attributes
    ----------
    passed : bool
        The verdict: the simulated mean |Delta| over the pairs (the average the design
        bounds) is at most ``tolerance``, or above it by less than ``PASS_MARGIN_Z`` = 2
        of its standard errors (not distinguishable from it). Always the simulation's,
        for every pair: the predictions are reported beside it, and where the Edgeworth
        expansion is outside its validity (``edgeworth_reliable`` False) the simulation is
        the only accurate estimate.
    mean_abs_simulated, mean_abs_simulated_se : float
        Mean |Delta| of the real test over the pairs, and its standard error.
    mean_abs_gaussian, mean_abs_edgeworth : float
        The same mean predicted by the Gaussian dynamic programme (the design's) and by
        the Edgeworth-corrected one.
    delta_simulated, delta_simulated_se : numpy.ndarray
        Per pair: Delta of the real test on the real l_i (``n_paths`` random row orders,
        u integrated out exactly) and its standard error.
    delta_gaussian, delta_edgeworth : numpy.ndarray
        Per pair: Delta predicted by the Gaussian programme and by the corrected one
        (:func:`design.acceptance_error`, ``law="gaussian"`` / ``"edgeworth"``).
    z_gaussian, z_edgeworth : numpy.ndarray
        Per pair: (prediction - simulation) / standard error.
    gaussian_agrees, edgeworth_agrees : bool
        No pair's z score is significant at family-wise level ``false_alarm`` after Holm's
        correction over the pairs (``edgeworth_agrees`` None when the corrected prediction
        was not computed, ``edgeworth=False``).
    edgeworth_reliable : numpy.ndarray of bool
        Per pair: |gamma| / sqrt(m) <= 0.5 and max(kappa, gamma^2) / m <= 0.5, where the
        one-term expansion is trusted.
    accept_prob, skewness, excess_kurtosis : numpy.ndarray
        Per pair: exact MH acceptance probability, and the shape of the l_i.
    m, epsilon, threshold, tolerance, N, n_pairs, n_paths, false_alarm
        The test, the tolerance of the design, the population size, the pairs, the
        simulated row orders per pair and the family-wise false-alarm rate.
    """

    passed: bool
    mean_abs_simulated: float
    mean_abs_simulated_se: float
    mean_abs_gaussian: float
    mean_abs_edgeworth: float
    delta_simulated: np.ndarray
    delta_simulated_se: np.ndarray
    delta_gaussian: np.ndarray
    delta_edgeworth: np.ndarray
    z_gaussian: np.ndarray
    z_edgeworth: np.ndarray
    gaussian_agrees: bool
    edgeworth_agrees: bool | None
    edgeworth_reliable: np.ndarray
    accept_prob: np.ndarray
    skewness: np.ndarray
    excess_kurtosis: np.ndarray
    m: int
    epsilon: float
    threshold: str
    tolerance: float
    N: int
    n_pairs: int
    n_paths: int
    false_alarm: float

    def __repr__(self):
        return (f"AcceptanceCheck(passed={self.passed}, m={self.m}, epsilon={self.epsilon:g}, "
                f"tolerance={self.tolerance:g}, mean_abs_simulated="
                f"{self.mean_abs_simulated:.4g}, mean_abs_gaussian={self.mean_abs_gaussian:.4g}, "
                f"mean_abs_edgeworth={self.mean_abs_edgeworth:.4g}, n_pairs={self.n_pairs})")

    def __str__(self):
        verdict = "PASSES" if self.passed else "FAILS"
        lines = [
            f"Error in the acceptance probability: {verdict} at the design tolerance "
            f"{self.tolerance:g} (m = {self.m}, epsilon = {self.epsilon:g}, {self.threshold} "
            f"thresholds, N = {self.N:,}, {self.n_pairs} pair(s))",
            f"  mean |Delta|: real test {self.mean_abs_simulated:.4f} ± "
            f"{self.mean_abs_simulated_se:.4f}; predicted Gaussian {self.mean_abs_gaussian:.4f}, "
            f"Edgeworth {self.mean_abs_edgeworth:.4f}",
            f"  predictions vs the real test (Holm, family-wise {self.false_alarm:g}): Gaussian "
            f"{'agrees' if self.gaussian_agrees else 'DISAGREES'}, Edgeworth "
            f"{_agrees(self.edgeworth_agrees)}"
            + ("" if self.edgeworth_reliable.all() else
               f" ({int((~self.edgeworth_reliable).sum())} pair(s) beyond the expansion)"),
            "",
            "  pair  skewness ex.kurt   Pa     Delta real        Gaussian (z)     "
            "Edgeworth (z)",
        ]
        shown = range(self.n_pairs) if self.n_pairs <= 16 else np.argsort(
            -np.abs(self.delta_simulated))[:16]
        for p in shown:
            lines.append(
                f"  {p:>4} {self.skewness[p]:>8.3g} {self.excess_kurtosis[p]:>8.3g} "
                f"{self.accept_prob[p]:>6.3f}  {self.delta_simulated[p]:+.4f} ± "
                f"{self.delta_simulated_se[p]:.4f}  {self.delta_gaussian[p]:+.4f} "
                f"({self.z_gaussian[p]:+5.1f})  {self.delta_edgeworth[p]:+.4f} "
                f"({self.z_edgeworth[p]:+5.1f})"
                + ("" if self.edgeworth_reliable[p] else "  *"))
        if self.n_pairs > 16:
            lines.append(f"  ... the 16 largest |Delta| of {self.n_pairs} pairs")
        return "\n".join(lines)


def _log_consts(source, log_const, n_pairs):
    """c per pair: given, or the prior ratio of a model's pairs (symmetric proposal)."""
    if log_const is not None:
        c = check_finite_array("log_const", log_const, ndim=(0, 1))
        c = np.broadcast_to(c, (n_pairs,)) if c.ndim == 0 else c
        if c.shape != (n_pairs,):
            raise ValueError(f"log_const must be a scalar or have one value per pair "
                             f"({n_pairs}), got shape {c.shape}")
        return np.array(c, dtype=float)
    if getattr(source, "model", None) is None:
        return np.zeros(n_pairs)
    model = source.model
    return np.array([float(model.logprior(source.theta_news[p]))
                     - float(model.logprior(source.thetas[p])) for p in range(n_pairs)])


def design_settings(design, m, epsilon, tolerance, threshold):
    """(m, epsilon, tolerance, threshold) from an Austere ``design`` or the arguments."""
    if design is not None:
        if getattr(design, "test", None) != "austere":
            raise TypeError("design must be an Austere design from design.optimize, got "
                            f"{type(design).__name__}")
        return (design.m if m is None else m, design.epsilon if epsilon is None else epsilon,
                design.tolerance if tolerance is None else tolerance, design.threshold)
    missing = [k for k, v in (("m", m), ("epsilon", epsilon), ("tolerance", tolerance))
               if v is None]
    if missing:
        raise TypeError(f"give design= or all of m, epsilon and tolerance (missing {missing})")
    return m, epsilon, tolerance, threshold


def run_acceptance_check(src, *, m, epsilon, tolerance, threshold, log_const, n_paths,
                         false_alarm, rng, progress, sequential=False, edgeworth=True):
    """The work of :func:`acceptance_check` on a ``_clt._Source``."""
    from design import TrialChain, acceptance_error
    from samplers import AustereTest

    N, P = src.N, src.n_pairs
    m = check_int("m", m, low=2, high=N)
    epsilon = check_interval("epsilon", epsilon, 0.0, 0.5)
    tolerance = check_interval("tolerance", tolerance, 0.0, 0.5)
    false_alarm = check_interval("false_alarm", false_alarm, 0.0, 1.0)
    n_paths = check_int("n_paths", n_paths, low=10)
    if threshold not in ("t", "normal"):
        raise ValueError(f"threshold must be 't' or 'normal', got {threshold!r}")
    c = _log_consts(src, log_const, P)
    rngs = as_generator(rng).spawn(P)
    spec = AustereTest(m=m, epsilon=epsilon, threshold=threshold).path_spec(N)
    # path k of pair p reads keyed order k under the pair's key: its rows are known ahead
    keys = [r.integers(0, 2**64, size=2, dtype=np.uint64) for r in rngs]
    orders = [new_order(N) for _ in range(P)]
    first_rows = _first_rows(spec, N, m)
    looks = _looks(n_paths) if sequential else [n_paths]
    paths = np.empty((P, n_paths))
    pops = [None] * P
    bar = progress_bar(P * len(looks), desc="acceptance check", unit="pair", progress=progress)
    done = 0
    for n in looks:
        for p in range(P):
            if pops[p] is None:
                pops[p] = _population(src, p)
            paths[p, done:n] = _path_acceptance(src, p, spec, float(c[p]), keys[p],
                                                orders[p], np.arange(done, n), pops[p].mean,
                                                first_rows)
            bar.update()
        done = n
        pa = np.array([math.exp(min(N * q.mean + c[p], 0.0)) for p, q in enumerate(pops)])
        sim, se = _delta_estimates(paths[:, :n], pa)
        if n < n_paths and _clear_verdict(sim, se, n, n_paths, tolerance) is not None:
            break
    bar.close()
    n_paths = done
    trial = TrialChain(mu=[q.mean for q in pops], sigma=[q.sd for q in pops], c0=-c / N, N=N,
                       skewness=[q.skewness for q in pops],
                       kurtosis=[max(q.excess_kurtosis, -2.0) for q in pops])
    gauss = np.array(acceptance_error(trial, m=m, epsilon=epsilon).delta)
    if edgeworth:
        corrected = acceptance_error(trial, m=m, epsilon=epsilon, law="edgeworth")
        edge, reliable = np.array(corrected.delta), np.array(corrected.reliable)
    else:
        from design import edgeworth_reliable

        edge = np.full(P, np.nan)
        reliable = np.asarray(edgeworth_reliable(trial.skewness, trial.kurtosis, m), dtype=bool)
    z_g, z_e = (gauss - sim) / se, (edge - sim) / se
    abs_sim = np.abs(sim)
    mean_abs = float(abs_sim.mean())
    mean_abs_se = float(math.sqrt(np.sum(se ** 2)) / P)
    arrays = dict(delta_simulated=sim, delta_simulated_se=se, delta_gaussian=gauss,
                  delta_edgeworth=edge, z_gaussian=z_g, z_edgeworth=z_e,
                  edgeworth_reliable=reliable,
                  accept_prob=trial.accept_prob.copy(), skewness=np.array(trial.skewness),
                  excess_kurtosis=np.array([q.excess_kurtosis for q in pops]))
    for a in arrays.values():
        a.setflags(write=False)
    return AcceptanceCheck(
        passed=bool(mean_abs <= tolerance + PASS_MARGIN_Z * mean_abs_se),
        mean_abs_simulated=mean_abs, mean_abs_simulated_se=mean_abs_se,
        mean_abs_gaussian=float(np.mean(np.abs(gauss))),
        mean_abs_edgeworth=float(np.mean(np.abs(edge))),
        gaussian_agrees=bool(np.all(holm(two_sided_p(z_g)) > false_alarm)),
        edgeworth_agrees=(bool(np.all(holm(two_sided_p(z_e)) > false_alarm)) if edgeworth
                          else None),
        m=m, epsilon=epsilon, threshold=threshold, tolerance=tolerance, N=N, n_pairs=P,
        n_paths=n_paths, false_alarm=false_alarm, **arrays)


def _population(src, p):
    """The :class:`Population` of pair p of a ``_clt._Source``."""
    try:
        return src.population(p)
    except ValueError as exc:
        if str(exc).startswith(("row ", "pair ")) or getattr(exc, "names_its_pair", False):
            raise
        raise ValueError(f"pair {p}: {exc}") from None


#: The rows read ahead for the paths still undecided double each round (the rows a path
#: reads past its need are then at most as many as it needed), and at most this many l_i
#: are read at once over the paths of a pair: a path that reads on past it is read alone,
#: by blocks of this many rows, so the memory of the paths is bounded whatever N.
_GROWTH = 2
_BLOCK_VALUES = 1 << 20


def _first_rows(spec, N, m):
    """Rows the first three stages of a path read (most paths stop within them)."""
    try:
        n = 0
        for stage in range(3):
            n += int(spec.grow(n, N, stage, spec.settings))
    except Exception:            # a stage rule not callable from Python
        n = 4 * m
    return int(min(max(n, m, 2), N))


def _path_acceptance(src, p, spec, log_const, key, order, epochs, mu, first_rows):
    """P(accept | path) of pair p for the paths ``epochs`` (keyed orders under ``key``).

    The rows of each path are drawn ahead (``first_rows`` of its order), their l_i read
    (``src.values``) and the path run on them; the paths that read past them read on from
    where they stopped, the next rows of the same order, twice as many each round
    (``_GROWTH``), by blocks of at most ``_BLOCK_VALUES`` l_i over the paths; past that, one
    path at a time by blocks of ``_BLOCK_VALUES`` rows. Memory: ``_BLOCK_VALUES`` l_i and
    their rows (besides the order's own table). Where all N l_i are at hand (``src.full``:
    small N), the paths run on them in place.
    """

    N, settings = src.N, spec.settings
    kernel = sequence_path_acceptance(spec.radius, spec.grow)

    def run(values, starts, lengths, states, probs, done):
        kernel(values, starts, lengths, mu, N, settings, log_const, _WINDOW, states, probs,
               done)

    out = np.empty(epochs.size)
    l = src.full(p)
    if l is not None and np.all(np.diff(epochs) == 1):
        # every l_i at hand (small N): the paths drawn stage by stage on the same keyed
        # orders, the same values bit for bit without reading rows ahead
        _keyed_in_place(l, spec, log_const, key, int(epochs[0]), out)
        return out
    states = new_path_states(epochs.size)
    todo = np.arange(epochs.size)
    L = min(first_rows, _BLOCK_VALUES)
    while todo.size and L <= _BLOCK_VALUES:
        per = max(1, _BLOCK_VALUES // L)
        left = []
        for s in range(0, todo.size, per):
            j = todo[s:s + per]
            left.append(_read_on(src, p, run, order, key, epochs[j], states, j, L, out))
        todo = np.concatenate(left)
        if L == _BLOCK_VALUES:
            break
        L = min(_GROWTH * L, _BLOCK_VALUES)
    for j in todo:          # the longest paths, one at a time, their order read on
        out[j] = _read_alone(src, p, run, order, key, int(epochs[j]), states, j)
    return out


def _read_on(src, p, run, order, key, epochs, states, j, L, out):
    """One round of the paths ``j``: the next ``L`` rows of each (from its state's n), run;
    ``out`` gets the finished ones; returns the others."""
    starts = states[j, 0].astype(np.int64)
    lengths = np.minimum(L, src.N - starts)
    if np.any(lengths <= 0):
        raise RuntimeError("a path read all N rows without deciding")
    rows = np.zeros((j.size, L), dtype=np.intp)
    keyed_blocks(order, key, epochs.astype(np.int64), starts, lengths, rows)
    got = _run_paths(src, p, run, rows, starts, lengths, states, j)
    finished = ~np.isnan(got)
    out[j[finished]] = got[finished]
    return j[~finished]


def _read_alone(src, p, run, order, key, epoch, states, j):
    """P(accept | path) of the one path ``j``, read on from its state by blocks of
    ``_BLOCK_VALUES`` rows (more only if one stage needs more): its order restarted once
    and then read on; the rows of a stage that straddles two blocks are kept for the next."""
    N = src.N
    at = int(states[j, 0])
    tail = np.empty(0, dtype=np.intp)
    want, restart = _BLOCK_VALUES, True
    while True:
        size = min(want, N - at)
        if size <= tail.size:
            raise RuntimeError("a path read all N rows without deciding")
        fresh = np.empty(size - tail.size, dtype=np.intp)
        keyed_block(order, key, epoch, at + tail.size, fresh, restart)
        restart = False
        rows = np.concatenate([tail, fresh])
        got = _run_paths(src, p, run, rows[None, :], np.array([at]), np.array([size]), states,
                         np.array([j]))
        if not np.isnan(got[0]):
            return got[0]
        n = int(states[j, 0])
        tail = rows[n - at:]
        # a block, room for twice the rows kept (a stage longer than half a block); twice as
        # many where no stage ended in this one
        want = max(_BLOCK_VALUES, 2 * tail.size) if n > at else 2 * size
        at = n


def _run_paths(src, p, run, rows, starts, lengths, states, j):
    """Run the paths ``j`` on the l_i at ``rows`` (row k valid up to ``lengths[k]``) from
    ``states[j]`` (written back): P(accept | path) per path, NaN where it reads on."""
    if np.all(lengths == rows.shape[1]):
        values = src.values(p, rows)
    else:
        values = np.zeros(rows.shape)
        mask = np.arange(rows.shape[1]) < lengths[:, None]
        values[mask] = src.values(p, rows[mask])
    block = states[j]
    probs = np.full(rows.shape[0], np.nan)
    done = np.empty(rows.shape[0], dtype=np.bool_)
    run(values, starts.astype(np.int64), lengths.astype(np.int64), block, probs, done)
    states[j] = block
    probs[~done] = np.nan
    return probs


def _keyed_in_place(l, spec, log_const, key, first_epoch, out):
    """``out[k]`` = P(accept | path) of keyed order ``first_epoch + k`` under ``key``, the
    path drawn stage by stage on the N l_i ``l`` (:func:`windowed_path_acceptance`)."""
    order = new_order(l.shape[0])
    set_keyed(order, key)
    set_epoch(order, first_epoch - 1)           # each path restarts the order first
    direct = windowed_path_acceptance(spec.radius, spec.grow)
    direct(l, order, spec.settings, log_const, np.random.default_rng(0), out)


def _looks(n_paths):
    """Paths per pair at each look of the sequential verdict: doubling up to ``n_paths``."""
    looks, n = [], min(FIRST_LOOK, n_paths)
    while n < n_paths:
        looks.append(n)
        n *= 2
    return looks + [n_paths]


def _delta_estimates(paths, pa):
    """Per pair: Delta (mean over the paths minus Pa) and its standard error, floored at
    1 / paths: paths that all agree (P(accept | path) = 0 or 1 throughout) do not make the
    estimate exact."""
    n = paths.shape[1]
    sim = paths.mean(axis=1) - pa
    se = np.maximum(paths.std(axis=1, ddof=1) / math.sqrt(n), 1.0 / n)
    return sim, se


def _clear_verdict(sim, se, n, n_paths, tolerance, z=SEQUENTIAL_Z):
    """The verdict the run to ``n_paths`` paths will give, if it is already clear at ``n``
    paths per pair; else None.

    With A = mean_p |Delta_p| (the truth) and T the full run's statistic mean_p |sim_p|, the
    triangle inequality gives |T - A| <= mean_p |noise_p|, whose mean is at most
    sqrt(2 / pi) mean_p se_p and whose sd at most sqrt(sum se_p^2) / P; so, except with
    probability Phi(-z) each, A lies within ``mean_abs -+ (b + z s)`` now and T within
    ``A -+ (b_f + z s_f)`` at the end (se_p projected to n_paths paths, floor included).
    The full run passes iff T <= tolerance + 2 s_f: clear when the upper bound is below that
    (True) or the lower bound above it (False).
    """
    P = sim.size
    mean_abs = float(np.mean(np.abs(sim)))
    b, s = math.sqrt(2.0 / math.pi) * float(np.mean(se)), math.sqrt(float(np.sum(se ** 2))) / P
    se_f = np.maximum(se * math.sqrt(n / n_paths), 1.0 / n_paths)
    b_f, s_f = (math.sqrt(2.0 / math.pi) * float(np.mean(se_f)),
                math.sqrt(float(np.sum(se_f ** 2))) / P)
    reach = b + z * s + b_f + z * s_f
    limit = tolerance + PASS_MARGIN_Z * s_f
    if mean_abs + reach <= limit:
        return True
    if mean_abs - reach > limit:
        return False
    return None


def acceptance_check(source, pairs=None, *, design=None, m=None, epsilon=None,
                     tolerance=None, threshold="t", log_const=None, n_paths=4000,
                     false_alarm=0.01, chunk=CHUNK, rng=None, progress=None,
                     sequential=False, edgeworth=True) -> AcceptanceCheck:
    """The error in the acceptance probability of the sequential t-test, pair by pair.

    A design of the sequential t-test (:func:`design.optimize`) promises that the mean over
    pairs of |Delta|, Delta = P(the test accepts) - Pa, is at most its tolerance, predicting
    Delta with a Gaussian model of the test statistic. This measures Delta on the real l_i
    of each pair: the real test (the stopping rule of :class:`samplers.AustereTest`) is run
    on ``n_paths`` random row orders with u integrated out exactly, and Delta is predicted
    both by the Gaussian programme and by the Edgeworth-corrected one (skewness and excess
    kurtosis of the l_i, :func:`design.acceptance_error` with ``law="edgeworth"``). The
    verdict is the design's own: mean |Delta| of the real test against the tolerance.

    Parameters
    ----------
    source : Model or array_like
        A model (then ``pairs`` is required), or the l_i: a vector of length N (one pair)
        or an array of shape (n_pairs, N).
    pairs : (thetas, theta_news), optional
        Arrays of shape (n_pairs, d) (e.g. :func:`proposal_pairs`): one O(N) pass for all
        pairs (their statistics); the paths compute the l_i only at the rows they read.
    design : Design, optional
        An Austere design (:func:`design.optimize`): gives m, epsilon, the tolerance and
        the threshold; or give ``m``, ``epsilon``, ``tolerance`` (and ``threshold``).
    log_const : float or array_like, optional
        The data-free part c of each pair's log MH ratio (exact MH accepts iff
        log u < sum_i l_i + c). Default: 0 for l_i given as arrays; for a model, the log
        prior ratio of each pair (a symmetric proposal).
    n_paths : int
        Random row orders simulated per pair (the standard error of Delta is about
        0.3 / sqrt(n_paths)).
    false_alarm : float
        Family-wise false-alarm rate of the agreement tests (Holm over the pairs).
    chunk : int
        Rows per model call when computing the l_i.
    rng : None, int, SeedSequence or Generator
    progress : bool or None
        A progress bar over the pairs; None: only if stderr is a terminal.
    sequential : bool
        Simulate the paths in rounds (``FIRST_LOOK`` per pair, doubling) and stop at the
        first round where the verdict of the full ``n_paths`` is already clear (see
        ``_clear_verdict``: it differs from the full run's with probability below 0.15%);
        ``n_paths`` then records the paths simulated. Default False: all ``n_paths``
        paths.
    edgeworth : bool
        Also predict Delta by the Edgeworth-corrected programme (the costliest part at
        large N; supporting detail that never decides the verdict). With False,
        ``delta_edgeworth`` and ``z_edgeworth`` are NaN and ``edgeworth_agrees`` None
        (``edgeworth_reliable`` is still given).

    Returns
    -------
    AcceptanceCheck

    Notes
    -----
    For one random order of the rows, the thresholds mu0 = (log u - c) / N the test accepts
    form a half-line below a path threshold tau, so P(accept | path) = min(1, exp(N tau + c))
    exactly (``validation._kernels``). Averaging over paths gives P(accept) with u
    integrated out; a path stops once its undecided thresholds leave the window where that
    probability is in (e^-40, 1). The cost per path is the rows the test reads at the
    hardest u, so a pair costs about n_paths times the test's rows. Path k of a pair reads
    the keyed row order k under a key drawn from ``rng`` (:func:`design._lib.rows.keyed_uniforms`):
    its rows are known before its l_i, so they are drawn first (a prefix of the order, a
    longer one for a path that reads past it) and the l_i computed only there.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import acceptance_check
    >>> rng = np.random.default_rng(0)
    >>> l = rng.normal(-2e-4, 0.01, (2, 20_000))        # two pairs of Gaussian l_i
    >>> r = acceptance_check(l, m=500, epsilon=0.05, tolerance=0.1, n_paths=500, rng=1)
    >>> r.passed, r.gaussian_agrees
    (True, True)
    """
    from ._clt import _Source

    src = _Source(source, pairs, check_int("chunk", chunk, low=1))
    m, epsilon, tolerance, threshold = design_settings(design, m, epsilon, tolerance,
                                                       threshold)
    return run_acceptance_check(src, m=m, epsilon=epsilon, tolerance=tolerance,
                                threshold=threshold, log_const=log_const, n_paths=n_paths,
                                false_alarm=false_alarm, rng=rng, progress=progress,
                                sequential=sequential, edgeworth=edgeworth)
