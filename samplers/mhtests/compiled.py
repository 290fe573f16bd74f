"""What a test hands the compiled block loop: its :class:`Decision`.

A test's :meth:`~samplers.mhtests.base.AcceptanceTest.compiled_decision` returns a
:class:`Decision` (or None: the chain then runs on the Python loop). The block loop
(``samplers._blocks``) calls its jitted ``decide`` once per proposal::

    decide(data, theta, theta_new, rng, order, c, settings, state, resume, carry, values,
           info) -> (status, accepted, carry, values)

``data`` is what the model's row kernel reads in this decision, ``order`` the sampler's row
order (:func:`design._lib.rows.draw_rows`), ``c`` the data-free log ratio, ``settings`` the
decision's constants (``Decision.settings``, any tuple numba can type), ``state`` a float
array where a paused or failed decision leaves what Python needs, ``resume`` whether the
block re-enters a decision that returned MORE, ``carry`` and ``values`` the engine's rule
carry and buffer of l_i (kept across decisions). ``decide`` writes the test's info fields,
in the order of its info NamedTuple, into the float row ``info`` and returns a status of
:mod:`samplers.mhtests.status`: DECIDED, MORE (the block calls ``Decision.more`` and
re-enters), PYTHON_STEP (``Decision.python_step`` decides this step in Python), or an error
(NAN_MEAN / INF_MEAN: :func:`nonfinite_decision` raises; BAD_RANGE / VIOLATION:
``Decision.refuse`` raises).

Sequential tests need not write ``decide``: :func:`sequential_decide` generates it from the
test's rule and epilogue (run by the engine's compiled driver, the function the Python
``decide`` runs too), a jitted ``prepare`` (the settings of one decision) and a jitted
``write_info`` (the info; the Python ``_info`` is built by the same function).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from design._lib.jit import jit
from design._lib.rows import restart_order

from .engine import compiled_driver
from .status import (DECIDED, INF_MEAN, KNOWN, KNOWN_INFO, MORE, NAN_MEAN, NONFINITE, RUN)

__all__ = ["Decision", "InfoLayout", "nonfinite_decision", "nonfinite_status", "same_settings",
           "sequential_decide"]


@jit
def nonfinite_status(mean):
    """The non-finite rule: NAN_MEAN for a NaN batch mean, INF_MEAN for +inf, DECIDED (a
    rejection: theta_new has zero likelihood) for -inf. Both loops decide by it."""
    if mean != mean:
        return NAN_MEAN
    if mean == math.inf:
        return INF_MEAN
    return DECIDED


def nonfinite_decision(mean: float, theta_new) -> bool:
    """A batch mean of -inf rejects (theta_new has zero likelihood); NaN and +inf are errors.

    +inf means a log-likelihood of +inf at ``theta_new`` (or -inf at the current point, which
    an exact chain never reaches): no density is infinite, so the model is refused there
    rather than the chain moved onto that point. The rule is :func:`nonfinite_status`, which
    the compiled decisions run.
    """
    status = nonfinite_status(float(mean))
    if status == NAN_MEAN:
        raise ValueError(
            f"log-likelihood ratios are NaN between the current point and theta_new={theta_new}; "
            "the model's log-likelihood is not defined there"
        )
    if status == INF_MEAN:
        raise ValueError(
            f"a log-likelihood ratio is +inf at theta_new={theta_new}: the model's "
            "log-likelihood is +inf there (or -inf at the current point); a log-likelihood "
            "must be finite or -inf, so the move is refused"
        )
    return False


class Decision(NamedTuple):
    """A test's compiled decision: what the block loop needs to run it (module docstring)."""

    #: The jitted ``decide``.
    decide: Any
    #: Its settings for the chain (extended by ``more`` when a decision returns MORE).
    settings: tuple
    #: The rule's carry before a decision's first stage (``()`` for a test without one).
    carry0: tuple = ()
    #: ``more(settings, state) -> settings`` after MORE (None: ``decide`` never pauses).
    more: Any = None
    #: ``refuse(state, theta, theta_new)``: raises the test's error after BAD_RANGE or
    #: VIOLATION (what it needs is in ``state``).
    refuse: Any = None
    #: ``python_step(rng, theta, theta_new, c) -> (accepted, info)`` after PYTHON_STEP.
    python_step: Any = None
    #: ``nonfinite(mean, theta_new)``: raises the error of a NaN or +inf mean.
    nonfinite: Any = nonfinite_decision


@jit
def same_settings(data, theta, theta_new, N, base, c):
    """The ``prepare`` of a test whose settings do not depend on the decision: ``base``."""
    return RUN, base, 0.0


@cache
def sequential_decide(row_ratio, row_prefetch, rule, epilogue, draws_threshold, prepare,
                      write_info):
    """``SequentialTest.decide`` as a compiled ``decide`` (memoised per kernel set).

    ``prepare(data, theta, theta_new, N, base, c) -> (code, settings, value)`` gives the
    decision's settings from the chain's ``base`` (the test's ``_settings``) with ``code``
    RUN (run the engine), KNOWN (``_decide_without_data``: every l_i equals ``value``, accept
    iff ``value > mu0``, no row read), NAN_MEAN (``value`` is NaN: the NaN error) or
    BAD_RANGE (``value`` is a range the test refuses). ``write_info(status, n_used, stage,
    mean, m2, values, settings, carry, info)`` writes the info (``status == KNOWN_INFO``
    after a decision without data). The steps are those of ``SequentialTest.decide``: draw
    u, prepare, decide without data, restart the order, run the engine's compiled driver
    (pausing with MORE when the settings run out), decide a non-finite batch by
    :func:`nonfinite_status`, write the info.
    """
    drive = compiled_driver(row_ratio, row_prefetch, rule, epilogue)

    @jit
    def decide(data, theta, theta_new, rng, order, c, base, state, resume, carry, values,
               info):
        N = order.n_total
        if resume:
            mu0, n, k, stage = state[1], int(state[2]), int(state[3]), int(state[4])
            mean, m2, m3 = state[5], state[6], state[7]
            settings = prepare(data, theta, theta_new, N, base, c)[1]
        else:
            mu0 = (-rng.standard_exponential() - c) / N if draws_threshold else math.nan
            code, settings, value = prepare(data, theta, theta_new, N, base, c)
            if code == KNOWN:
                write_info(KNOWN_INFO, 0, 0, value, 0.0, values, settings, carry, info)
                return DECIDED, value > mu0, carry, values
            if code != RUN:
                state[0] = value
                return code, False, carry, values
            restart_order(order)
            n, k, stage, mean, m2, m3 = 0, 0, 0, 0.0, 0.0, 0.0
        status, acc, n, stage, mean, m2, m3, carry, values, k = drive(
            data, theta, theta_new, rng, order, mu0, settings, carry, values, n, k, stage,
            mean, m2, m3)
        if status == MORE:
            state[1], state[2], state[3], state[4] = mu0, n, k, stage
            state[5], state[6], state[7] = mean, m2, m3
            return MORE, False, carry, values
        write_info(status, n, stage, mean, m2, values, settings, carry, info)
        if status == NONFINITE:
            state[0] = mean
            return nonfinite_status(mean), False, carry, values
        return DECIDED, acc, carry, values

    return decide


class InfoLayout(NamedTuple):
    """How a test's info NamedTuple maps to the float row its compiled decision writes:
    field names and dtypes (int64 for int fields, bool for bool fields, else float64), in
    the order of the NamedTuple, read from an instance (the test's ``null_info()``)."""

    cls: type
    names: tuple
    dtypes: tuple
    #: The float row of ``null_info()`` (what a step the prior rejects records).
    null: np.ndarray

    @classmethod
    def of(cls, like) -> "InfoLayout":
        dtypes = tuple(np.dtype(bool) if isinstance(v, (bool, np.bool_))
                       else np.dtype(np.int64) if isinstance(v, (int, np.integer))
                       else np.dtype(float) for v in like)
        return cls(type(like), type(like)._fields, dtypes,
                   np.array([float(v) for v in like], dtype=float))

    def column(self, rows: np.ndarray, k: int) -> np.ndarray:
        """Field k of the float ``rows`` (one per step) with its dtype (a new array)."""
        if self.dtypes[k] == np.dtype(bool):
            return rows[:, k] != 0.0
        return rows[:, k].astype(self.dtypes[k])

    def info(self, row) -> tuple:
        """The info NamedTuple of one float row."""
        return self.cls(*(bool(x != 0.0) if t == np.dtype(bool) else
                          int(x) if t == np.dtype(np.int64) else float(x)
                          for x, t in zip(row, self.dtypes)))
