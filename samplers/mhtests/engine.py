"""The engine of the sequential tests: one compiled driver and one Python driver run any rule.

A sequential test reads rows of a random without-replacement order in stages and, after
each stage, applies its *stopping rule* to what it has read. The engine owns everything
else: drawing the rows (exactly as :meth:`IndexSampler.take` does), computing their l_i
with the model's row kernel, keeping them and their running moments, refusing non-finite
batches, counting stages, and calling the test's *epilogue* (its final randomized draw, if
any) once the rule stops.

The rule
--------
A rule is a small jitted function (``design._lib.jit.jit``)::

    rule(values, k, N, stage, mean, m2, m3, mu0, settings, carry)
        -> (status, accepted, carry, grow)

``values`` are the l_i read so far (``n = len(values)``; the newest ``k`` came in the last
stage, number ``stage``), ``mean`` their mean and ``m2``, ``m3`` their sums of squared and
cubed deviations (merged batch by batch, Chan et al. 1979, Pebay 2008). ``mu0 = (log u -
c) / N`` is the threshold of the mean that exact MH compares with (NaN for a test that draws
no u up front), ``settings`` a tuple of the test's constants and ``carry`` a tuple of what
the rule keeps between stages. It returns

* ``status == GROW`` (0): read ``grow`` more rows (clipped at N) and call the rule again;
* ``status == MORE`` (-1): ``settings`` ran out (e.g. a table of critical values); the
  caller extends them and resumes, and the rule is called again on the same state (so a
  rule returning MORE must not depend on having been called before);
* ``status > 0``: stop. ``accepted`` is the decision unless the epilogue makes it;
  the status value itself means what the test says (it is passed to the epilogue).

The rule is called first with ``n = 0`` (no rows read, ``stage = 0``): it returns the size
of the first stage, or decides without data. It must stop once ``n == N``.

The epilogue
------------
::

    epilogue(rng, status, accepted, n, N, mean, m2, m3, mu0, settings, carry)
        -> (accepted, carry)

called once when the rule stops, with the Generator: the only place besides the rows where
a test may draw. The compiled driver inlines it and the Python driver calls the same
dispatcher with the same Generator, so both consume it identically (numba's
``Generator.random`` and ``standard_normal`` are bit-compatible with NumPy's).
:func:`keep` draws nothing.

Both drivers return a :class:`Run`; :class:`~samplers.mhtests.base.SequentialTest` turns it
into a decision and an info. The compiled driver is built per (row kernel, prefetch kernel,
rule, epilogue) by a memoised factory, so a decision is one compiled call with the rule
inlined; the Python driver serves models without row kernels and is the reference the
compiled one must match bit for bit (``tests/samplers/test_accept.py``).
"""

from __future__ import annotations

import math
from functools import cache
from typing import NamedTuple

import numpy as np

from design._lib.rows import draw_rows
from design._lib.jit import jit
from design._lib.moments import batch_moments3, merge_moments3
from ..models._kernels import batch_ratio
# the rule statuses (read more rows, the settings ran out, the driver's non-finite batch, the
# interval rules' stop) and a radius's "settings ran out": one module defines every code
from .status import DONE, GROW, MORE, NEED_MORE, NONFINITE

__all__ = ["GROW", "MORE", "NONFINITE", "DONE", "Run", "compiled_driver", "interval_rule",
           "keep", "python_driver", "run_compiled"]


_NO_VALUES = np.empty(0)


class Run(NamedTuple):
    """Where a decision ended (or paused, with ``status == MORE``)."""

    #: The rule's stopping status (> 0), MORE, or NONFINITE.
    status: int
    #: The decision (for NONFINITE: undecided, see ``mean``).
    accepted: bool
    #: Rows taken from the order, the non-finite batch included.
    n_used: int
    #: Stages read.
    stage: int
    #: Mean of the rows read (for NONFINITE: of the offending batch).
    mean: float
    m2: float
    m3: float
    #: The rule's carry at the end (after the epilogue).
    carry: tuple
    #: To resume after MORE: the l_i read and the size of the newest stage.
    values: np.ndarray
    k: int


@jit
def keep(rng, status, accepted, n, N, mean, m2, m3, mu0, settings, carry):
    """The epilogue of a test that draws nothing after its rule: the rule's decision."""
    return accepted, carry


@jit
def _grown(values, n, needed, N):
    """``values`` with room for ``needed`` entries (doubling, at most N), first n kept."""
    if needed <= values.shape[0]:
        return values
    grown = np.empty(max(needed, min(2 * values.shape[0], N)))
    grown[:n] = values[:n]
    return grown


@cache
def batch_of_ratios(row_ratio, row_prefetch):
    """Compiled ``fill``: the next rows of the order and their l_i (memoised per kernel)."""
    ratios = batch_ratio(row_ratio, row_prefetch)

    @jit
    def fill(data, theta, theta_new, rng, order, u, rows, out):
        """Take the next len(u) rows of ``order`` (as ``IndexSampler.take``) and put their
        l_i in out."""
        draw_rows(rng, order, u, rows)
        ratios(data, rows, theta, theta_new, out)

    return fill


@cache
def compiled_driver(row_ratio, row_prefetch, rule, epilogue=keep):
    """The compiled driver of ``rule`` and ``epilogue`` for one model kind (memoised).

    ``drive(data, theta, theta_new, rng, order, mu0, settings, carry, values, n, k, stage,
    mean, m2, m3)`` starts (``n = 0``, ``values`` empty, ``order`` restarted) or resumes a
    decision (``order`` has handed out n rows), and returns the fields of :class:`Run`.
    ``order`` is the :class:`design._lib.rows.Order` of the chain's
    :class:`~design._lib.rows.IndexSampler`; it advances in place.
    """
    fill = batch_of_ratios(row_ratio, row_prefetch)

    @jit
    def drive(data, theta, theta_new, rng, order, mu0, settings, carry, values, n, k, stage,
              mean, m2, m3):
        N = order.n_total
        u = np.empty(0)
        rows = np.empty(0, dtype=np.intp)
        while True:
            status, accepted, new_carry, grow = rule(values[:n], k, N, stage, mean, m2, m3,
                                                     mu0, settings, carry)
            if status == MORE:
                return (status, accepted, n, stage, mean, m2, m3, carry, values, k)
            carry = new_carry
            if status != GROW:
                accepted, carry = epilogue(rng, status, accepted, n, N, mean, m2, m3, mu0,
                                           settings, carry)
                return (status, accepted, n, stage, mean, m2, m3, carry, values, k)
            k = min(grow, N - n)
            if k <= 0:
                raise ValueError("a sequential test's rule asked for rows after reading all N")
            if k > u.shape[0]:
                u = np.empty(k)
                rows = np.empty(k, dtype=np.intp)
            values = _grown(values, n, n + k, N)
            stage += 1
            batch = values[n:n + k]
            fill(data, theta, theta_new, rng, order, u[:k], rows[:k], batch)
            b_mean, b_m2, b_m3 = batch_moments3(batch)
            if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
                return (NONFINITE, False, n + k, stage, b_mean, m2, m3, carry, values, k)
            n, mean, m2, m3 = merge_moments3(n, mean, m2, m3, k, b_mean, b_m2, b_m3)

    return drive


def run_compiled(view, batches, rng, theta, theta_new, rule, epilogue, mu0, settings, carry,
                 resume: Run | None = None) -> Run:
    """One call of the compiled driver (from the start, or resuming a MORE).

    ``view`` is a :class:`~samplers._view.ModelView` (or any object with ``row_ratio``,
    ``row_prefetch``, ``decision_data(theta, theta_new)`` and, optionally, an
    ``engine_values`` slot where the driver's buffer of l_i is kept between decisions).
    The rows come from ``batches.kernel_state()``, the sampler's order, which the driver
    advances in place (so ``batches.taken`` is up to date afterwards)."""
    drive = compiled_driver(view.row_ratio, view.row_prefetch, rule, epilogue)
    order = batches.kernel_state()
    if resume is None:
        # The buffer of l_i is reused from the view's previous decision (its contents do not
        # matter): allocating a fresh one per decision, grown by doubling, cost more than
        # the rows themselves on a cheap model (fresh pages fault on first write).
        values = getattr(view, "engine_values", None)
        state = (_NO_VALUES if values is None else values, 0, 0, 0, 0.0, 0.0, 0.0)
    else:
        carry = resume.carry
        state = (resume.values, resume.n_used, resume.k, resume.stage, resume.mean, resume.m2,
                 resume.m3)
    out = Run._make(drive(view.decision_data(theta, theta_new), theta, theta_new, rng, order,
                          mu0, settings, carry, *state))
    if hasattr(view, "engine_values"):
        view.engine_values = out.values
    return out


def python_driver(view, batches, rng, theta, theta_new, rule, epilogue, mu0, settings, carry,
                  resume: Run | None = None) -> Run:
    """The reference driver: rows from ``batches.take``, l_i from ``view.ratio`` (any model),
    the same jitted rule, moments and epilogue as the compiled driver."""
    N = view.N
    if resume is None:
        values, n, k, stage, mean, m2, m3 = _NO_VALUES, 0, 0, 0, 0.0, 0.0, 0.0
    else:
        carry = resume.carry
        values, n, k, stage = resume.values, resume.n_used, resume.k, resume.stage
        mean, m2, m3 = resume.mean, resume.m2, resume.m3
    while True:
        status, accepted, new_carry, grow = rule(values[:n], k, N, stage, mean, m2, m3, mu0,
                                                 settings, carry)
        if status == MORE:
            return Run(status, bool(accepted), n, stage, mean, m2, m3, carry, values, k)
        carry = new_carry
        if status != GROW:
            accepted, carry = epilogue(rng, status, accepted, n, N, mean, m2, m3, mu0,
                                       settings, carry)
            return Run(status, bool(accepted), n, stage, mean, m2, m3, carry, values, k)
        new = view.ratio(theta, theta_new, batches.take(min(grow, N - n)))
        k = new.shape[0]
        if k <= 0:
            raise ValueError("a sequential test's rule asked for rows after reading all N")
        stage += 1
        b_mean, b_m2, b_m3 = batch_moments3(new)
        if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
            return Run(NONFINITE, False, batches.taken, stage, b_mean, m2, m3, carry, values, k)
        values = _grown(values, n, n + k, N)
        values[n:n + k] = new
        n, mean, m2, m3 = merge_moments3(n, mean, m2, m3, k, b_mean, b_m2, b_m3)


@cache
def interval_rule(radius, grow):
    """The rule of a test that decides once ``mu0`` leaves an interval about the mean.

    ``radius(n, N, stage, mean, m2, settings) -> r``: after ``stage`` stages and n rows the
    test decides iff ``|mean - mu0| > r`` (accept iff ``mean > mu0``); r must not depend on
    mu0, and :data:`NEED_MORE` (NaN) says the settings ran out (a negative r decides at
    once). At ``n = 0`` the
    radius says whether the test may decide without data (``inf``: it may not).
    ``grow(n, N, stage, settings) -> k``: rows of the next stage (at n = 0, the first).
    At n = N the decision is exact: accept iff ``mean > mu0``.

    Because r does not depend on mu0, the thresholds one random order of the rows accepts
    form a half-line, which is what lets ``validation`` integrate u out (its path
    thresholds run the same ``radius`` and ``grow``).
    """

    @jit
    def rule(values, k, N, stage, mean, m2, m3, mu0, settings, carry):
        n = values.shape[0]
        diff = mean - mu0
        if n == N:
            return DONE, diff > 0, carry, 0
        r = radius(n, N, stage, mean, m2, settings)
        if r != r:   # NEED_MORE; any number, negative ones too, is a radius
            return MORE, False, carry, 0
        if abs(diff) > r:
            return DONE, diff > 0, carry, 0
        return GROW, False, carry, grow(n, N, stage, settings)

    return rule
