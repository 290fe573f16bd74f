"""The route chooser of :func:`validation.fit`: every candidate priced in one currency.

A *route* is a proposal and an accept/reject test. Its cost per effective sample is

    cost = (rows read per step + per-step overhead in rows) / (effective samples per step),

all in rows of the data, so that a designed minibatch test, an exact minibatch test and
exact Metropolis-Hastings compare on one scale. The rows per step come from what the trial
pairs measured (the design's predicted data fraction; the Poisson batch an exact minibatch
test would draw at each trial pair, :meth:`samplers.SMHTest.expected_batch`, with the
closed-form bound :func:`design.exact_expected_batch` beside it; N for exact MH); the
effective samples per step from the proposal's acceptance (see :func:`ess_per_step`).

The cheapest *sound* candidate wins: exact routes are sound by construction, a designed
route once its verdict passed. No route whose predicted cost is above exact MH's runs.
A new candidate is one more :class:`Candidate` in the list :func:`exact_candidates` (or the
caller) builds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Candidate", "RouteChoice", "ess_per_step", "exact_candidates", "choose_route",
           "OVERHEAD_ROWS", "WALK_EFFICIENCY"]

#: Fixed cost of one step beyond the rows it reads, in minibatch rows (one row of a minibatch
#: read at random, residual and test arithmetic included: about 0.3-0.7 us at d = 11). The
#: designed sequential tests run in the compiled chain loop (about 10-15 us per step beyond
#: the rows); SMH and MH-SS in the Python loop (about 120 us per step); measured on a
#: logistic regression, N = 10^5, d = 11, with ``sample`` (``benchmarks/bench_fit.py``
#: prints each route's realised cost beside the prediction).
OVERHEAD_ROWS = {"austere": 20.0, "barker": 20.0, "confidence": 150.0, "smh": 170.0,
                 "mh-ss": 170.0, "exact": 20.0}
#: Seconds per minibatch row (the unit above) on a 2-core machine, to turn costs into time.
ROW_SECONDS = 0.5e-6
#: Exact MH reads its N rows in one sequential compiled pass, about ten times cheaper per
#: row than a minibatch's random reads: its rows count this much.
EXACT_ROW_WEIGHT = 0.1
#: Effective samples per step of the preconditioned random walk at the optimal scale on a
#: near-Gaussian posterior of dimension d: about 0.3 / d (Roberts, Gelman & Gilks 1997).
WALK_EFFICIENCY = 0.3


@dataclass(frozen=True)
class Candidate:
    """One route and its predicted cost.

    Attributes
    ----------
    test : str
        ``"austere"``, ``"barker"``, ``"confidence"`` (designed on the control variates),
        ``"smh"`` (SMH, order 2), ``"mh-ss"`` (MH-SS, order 2) or ``"exact"`` (exact MH).
    proposal : str
        ``"independence"`` (Gaussian), ``"t"``, ``"mixture"`` or ``"walk"``.
    rows : float
        Predicted rows read per step.
    acceptance : float
        Predicted acceptance rate.
    ess_per_step : float
        Predicted effective samples per step.
    exact : bool
        Whether the route leaves the posterior exactly invariant.
    sound : bool or None
        True for exact routes and for designed routes whose verdict passed, False when the
        verdict failed, None while it is not yet known.
    overhead : float
        Fixed per-step cost in rows (default ``OVERHEAD_ROWS[test]``).
    note : str
        How the rows were predicted.
    exact_rows : int
        Heavy rows read exactly in every decision (a designed test on
        :class:`samplers.ExactRows`), already counted in ``rows``; named in the route
        (``"austere+exact-rows / independence"``).
    """

    test: str
    proposal: str
    rows: float
    acceptance: float
    ess_per_step: float
    exact: bool
    sound: bool | None = None
    overhead: float | None = None
    note: str = ""
    exact_rows: int = 0

    def __post_init__(self):
        if self.overhead is None:
            object.__setattr__(self, "overhead", OVERHEAD_ROWS[self.test])

    @property
    def name(self) -> str:
        return f"{self.test}{'+exact-rows' if self.exact_rows else ''} / {self.proposal}"

    @property
    def step_rows(self) -> float:
        """Predicted cost of one step in minibatch rows (rows weighted, plus the overhead)."""
        weight = EXACT_ROW_WEIGHT if self.test == "exact" else 1.0
        return weight * self.rows + self.overhead

    @property
    def cost(self) -> float:
        """Predicted rows per effective sample (the currency of the choice)."""
        return self.step_rows / max(self.ess_per_step, 1e-12)

    def line(self) -> str:
        verdict = {True: "sound", False: "unsound", None: "not checked"}[self.sound]
        return (f"{self.name:<26} {self.rows:>12,.1f} rows/step  acceptance "
                f"{self.acceptance:.2f}  ESS/step {self.ess_per_step:.3f}  cost "
                f"{self.cost:>12,.0f} rows per effective sample  ({verdict}"
                f"{'; ' if self.note else ''}{self.note})")


def ess_per_step(proposal: str, acceptance: float, d: int, mh_acceptance: float,
                 mh_ess: float | None = None) -> float:
    """Predicted effective samples per step.

    Independence-type proposal (``"independence"``, ``"t"``, ``"mixture"``) with acceptance
    a: a rejection repeats the state, a move is a fresh draw, so with a the same everywhere
    the lag-k autocorrelation is ``(1 - a)^k`` and ESS per step ``a / (2 - a)``. Where the
    acceptance varies with the state (long sojourns in a tail the proposal under-covers)
    exact MH's ESS per step is less; ``mh_ess``, when given, is that prediction from the
    trial draws' weights (:func:`validation.workflow.steps.imh_ess_per_step`), and a route
    accepting ``a`` instead of exact MH's ``mh_acceptance`` gets it scaled by
    ``[a / (2 - a)] / [m / (2 - m)]``. Random walk: ``WALK_EFFICIENCY / d`` at exact MH's
    acceptance, scaled by the route's acceptance relative to exact MH's.

    Examples
    --------
    >>> round(ess_per_step("independence", 0.9, 10, 0.9), 3)
    0.818
    >>> round(ess_per_step("t", 0.9, 10, 0.9, mh_ess=0.6), 3)
    0.6
    >>> round(ess_per_step("walk", 0.25, 10, 0.25), 3)
    0.03
    """
    a = float(np.clip(acceptance, 0.0, 1.0))
    if proposal == "walk":
        return WALK_EFFICIENCY / d * (a / mh_acceptance if mh_acceptance > 0 else 0.0)
    if mh_ess is None or not np.isfinite(mh_ess) or mh_acceptance <= 0:
        return a / (2.0 - a)
    m = float(np.clip(mh_acceptance, 0.0, 1.0))
    return float(mh_ess) * (a / (2.0 - a)) / (m / (2.0 - m))


def exact_candidates(cv, proposal_name, thetas, news, log_const, mh_acceptance, *,
                     trial=None, smh=None, mhss=None, mh_ess=None, executor=None,
                     exact_rows=None, rng=None):
    """SMH-2, MH-SS-2 and exact MH priced at the trial pairs of the chosen proposal.

    Rows per step of a Poisson-factor test: its batch ``E[B] = C phi(theta, theta')`` at
    each pair (:meth:`samplers.SMHTest.expected_batch`) read when the deterministic factor
    ``min(1, exp(c + P))`` accepts (N when ``E[B] >= N``: plain MH). Acceptance: MH-SS keeps
    about exact MH's; SMH multiplies it by ``prod_i min(1, exp(delta_i)) = exp(-S_-)``,
    ``S_- = sum_i max(0, -delta_i) = (sum_i |delta_i| - sum_i delta_i) / 2``, estimated from
    the trial pairs' statistics (``trial``: ``sum_i |delta_i|`` about ``N sigma E|z|``, and
    ``sum_i delta_i = N mu - P``) within its bounds ``[max(0, -sum delta), E[B]]``; without
    them the bound ``exp(-E[B])``. Exact MH reads N rows. ``mh_ess``: exact MH's predicted
    ESS per step from the weights (:func:`ess_per_step`). ``executor``: the bounds' sum is
    one pass on that cluster (:meth:`samplers.SMHTest.expected_batch`), not a local pass
    keeping a bound per row.

    ``exact_rows`` (fit's heavy rows, when they were looked for) and ``rng``: from 2^18 rows
    on, ``C = sum_i c_i`` of ``E[B] = C phi`` is estimated from those rows and a uniform
    sample of the others (:func:`samplers.models.remainder.sampled_remainder_sum`, 65,536
    rows at 10^6 to 10^7), so no pass over the N rows is made; below that (or without
    ``exact_rows``) the pass runs, as before. The estimate's relative standard error r
    (a few 1e-3 on a logistic regression's rows) is the relative error of SMH's and
    MH-SS's rows per step; both routes' costs rise with C, so at C within z standard
    errors their costs lie within the costs at ``C (1 -+ z r)``: the choice can change
    only between a route and an exact minibatch route whose cost is in that band (the
    note gives r).
    """
    from samplers import ScalableSubsamplingTest, SMHTest

    N, d = cv.N, cv.dim
    smh = SMHTest(order=cv.order) if smh is None else smh
    mhss = ScalableSubsamplingTest(order=cv.order) if mhss is None else mhss
    batch, priced = _expected_batches(smh, cv, thetas, news, executor, exact_rows, rng)
    proxy = np.array([cv.proxy_total(a, b) for a, b in zip(thetas, news)])
    det = np.exp(np.minimum(np.asarray(log_const) + proxy, 0.0))
    rows = np.where(batch >= N, N, det * batch)
    neg = batch
    if trial is not None and trial.abs_z1 is not None:
        total = N * trial.mu - proxy                     # sum of the residual changes
        neg = np.clip(0.5 * (N * trial.sigma * trial.abs_z1 - total),
                      np.maximum(0.0, -total), batch)
    smh_factor = float(np.mean(np.where(batch >= N, 1.0, np.exp(-neg))))
    note = f"E[B] at the trial pairs: median {np.median(batch):.3g}"
    if priced is not None and priced.sampled:
        note += (f", from {priced.rows_read:,} of {N:,} rows (sampled; "
                 f"{priced.relative_se:.1g} relative, 1 se)")
    out = []
    for test, factor in (("smh", smh_factor), ("mh-ss", 1.0)):
        acc = mh_acceptance * factor
        out.append(Candidate(test, proposal_name, float(np.mean(rows)), acc,
                             ess_per_step(proposal_name, acc, d, mh_acceptance, mh_ess), True, True,
                             note=note))
    out.append(Candidate("exact", proposal_name, float(N), mh_acceptance,
                         ess_per_step(proposal_name, mh_acceptance, d, mh_acceptance, mh_ess), True,
                         True, note="all N rows"))
    return out, {"smh": smh, "mh-ss": mhss}


def _expected_batches(smh, cv, thetas, news, executor=None, exact_rows=None, rng=None):
    """(``smh.expected_batch`` at each pair, the sampled sum it used or None).

    With ``exact_rows`` from 2^18 rows on (see :func:`exact_candidates`): ``C`` from a row
    sample. Else pricing needs only the sum and maximum of the per-row remainder bounds:
    without ``executor`` they come from one pass on a local thread pool
    (:func:`samplers.models.remainder.remainder_totals`), so the per-row bounds and the
    alias table (O(N) work and 24 bytes a row, about a second at 10^7 rows) are built only if
    the test runs. The same values to rounding (about 1e-15 relative)."""
    from samplers import ControlVariates
    from samplers.models.remainder import price_sample_size, sampled_remainder_sum

    if (exact_rows is not None and smh.sampling == "weighted"
            and isinstance(cv, ControlVariates) and cv.order == smh.order >= 1
            and (smh.center is None or np.array_equal(smh.center, cv.center.theta))
            and _has_blocks(cv) and price_sample_size(cv.N, len(exact_rows)) is not None):
        priced = sampled_remainder_sum(cv, rng, exact_rows)
        if priced.estimate > 0:
            return np.array([smh.expected_batch(cv, a, b, c_sum=priced.estimate)
                             for a, b in zip(thetas, news)]), priced
    if executor is not None or not _has_blocks(cv):
        return np.array([smh.expected_batch(cv, a, b, executor=executor)
                         for a, b in zip(thetas, news)]), None
    from concurrent.futures import ThreadPoolExecutor

    from design._lib.jit import PASS_THREADS

    with ThreadPoolExecutor(max_workers=PASS_THREADS) as pool:
        return np.array([smh.expected_batch(cv, a, b, executor=pool)
                         for a, b in zip(thetas, news)]), None


def _has_blocks(cv) -> bool:
    """Whether the rows of ``cv``'s model can be rebuilt by ranges (``block_recipe``)."""
    try:
        cv.model.block_recipe(0, min(1, int(cv.N)))
    except (AttributeError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class RouteChoice:
    """The candidates, the one chosen and why.

    Attributes
    ----------
    chosen : Candidate
    candidates : tuple of Candidate
        Sorted by predicted cost.
    reason : str
    """

    chosen: Candidate
    candidates: tuple
    reason: str

    def lines(self) -> list[str]:
        out = [f"   {c.line()}" + ("  <- chosen" if c is self.chosen else "")
               for c in self.candidates]
        return out + [f"   {self.reason}"]


def choose_route(candidates, verify):
    """The cheapest sound candidate, never one costlier than exact MH.

    ``verify(candidate)`` is called, cheapest first, on candidates whose soundness is not
    known (designed tests); it returns the candidate updated (``sound`` True or False, rows
    possibly raised by a redesign). Exact routes need no verdict.
    """
    pool = list(candidates)
    exact_mh = min((c for c in pool if c.test == "exact"), key=lambda c: c.cost, default=None)
    ceiling = math.inf if exact_mh is None else exact_mh.cost
    while True:
        pool.sort(key=lambda c: c.cost)
        nxt = next((c for c in pool if c.sound is not False and c.cost <= ceiling), None)
        if nxt is None:        # everything was forced out: the cheapest sound one
            nxt = next((c for c in pool if c.sound is not False), pool[0])
            break
        if nxt.sound is True:
            break
        checked = verify(nxt)
        if checked.sound is None:
            raise ValueError(f"verify must decide soundness, got None for {nxt.name}")
        pool[pool.index(nxt)] = checked
    runner = [c for c in pool if c is not nxt and c.sound is not False]
    why = f"chosen: {nxt.name}, predicted {nxt.cost:,.0f} rows per effective sample"
    if runner:
        second = min(runner, key=lambda c: c.cost)
        why += (f", {second.cost / max(nxt.cost, 1e-300):.3g}x cheaper than the next sound "
                f"route ({second.name})")
    if exact_mh is not None and nxt is not exact_mh:
        why += f" and {exact_mh.cost / max(nxt.cost, 1e-300):.3g}x cheaper than exact MH"
    failed = [c.name for c in pool if c.sound is False]
    if failed:
        why += f"; failed their verdict: {', '.join(failed)}"
    return RouteChoice(nxt, tuple(sorted(pool, key=lambda c: c.cost)), why)


