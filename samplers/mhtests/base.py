"""Base classes of the accept/reject tests: the protocol, and the sequential-test template.

Every test decides between the current point ``theta`` and a proposal ``theta_new`` given
the data-free part of the log acceptance ratio,

    c = log p0(theta_new) - log p0(theta) + log q(theta | theta_new) - log q(theta_new | theta),

so that exact MH accepts iff ``log u < sum_i l_i + c`` with ``u ~ U(0, 1)`` and
``l_i = log p(x_i | theta_new) - log p(x_i | theta)``; equivalently iff the mean ``mu`` of
the l_i exceeds ``mu0 = (log u - c) / N`` (Korattikara et al. 2014, eq. 2-3; the
``psi`` of Bardenet et al. 2014, eq. 3). A test returns ``(accepted, info)``, where
``info`` is a NamedTuple of what it measured, at least ``n_used`` (rows whose l_i the
decision used) and ``n_stages``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .engine import MORE, NONFINITE, Run, interval_rule, keep, python_driver, run_compiled

__all__ = ["AcceptanceTest", "SequentialTest", "IntervalTest", "EngineSpec", "PathSpec",
           "nonfinite_decision"]


class AcceptanceTest:
    """Base class of the accept/reject tests.

    Subclasses implement :meth:`decide` and :meth:`null_info` (the info of a proposal
    rejected by the prior before any data are read) and may override :meth:`check`, called
    once per chain with the model view to refuse settings that do not fit the data.
    """

    #: Whether the test needs per-datum gradients from the model.
    needs_gradients = False
    #: Whether every proposal is accepted without reading data (no correction at all).
    accepts_all = False

    def check(self, view) -> None:
        """Refuse settings that do not fit this model (e.g. a batch larger than N)."""

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        """Return ``(accepted, info)`` for one proposal."""
        raise NotImplementedError

    def null_info(self):
        """Info recorded for a proposal that the prior rejects without reading data."""
        raise NotImplementedError


def nonfinite_decision(mean: float, theta_new) -> bool:
    """A batch mean of +inf or -inf decides like the full sum would; NaN is an error."""
    if math.isnan(mean):
        raise ValueError(
            f"log-likelihood ratios are NaN between the current point and theta_new={theta_new}; "
            "the model's log-likelihood is not defined there"
        )
    return mean > 0


class EngineSpec(NamedTuple):
    """What the engine needs to run a sequential test (see :mod:`samplers.mhtests.engine`)."""

    rule: Any
    epilogue: Any
    settings: tuple
    carry: tuple
    #: Whether the test draws ``u`` (``mu0 = (log u - c) / N``) before reading rows.
    draws_threshold: bool


class PathSpec(NamedTuple):
    """An interval test's radius and stage sizes with settings for a whole pass over N rows."""

    radius: Any
    grow: Any
    settings: tuple


class SequentialTest(AcceptanceTest):
    """A test that reads rows in stages and stops by a rule: the template of ``decide``.

    :meth:`decide` keeps the books: it draws ``u`` (``mu0 = (log u - c) / N``, if
    :attr:`draws_threshold`), asks :meth:`_settings` for this decision's constants, restarts
    the row order, runs the rule with the compiled driver (built-in models) or the Python
    reference driver (any other model), extends the settings when the rule asks for more
    (:meth:`_more_settings`), decides a non-finite batch (an infinite mean decides like the
    full sum, NaN is an error), and builds the info with :meth:`_info`.

    A subclass supplies :attr:`rule` (a jitted rule, see :mod:`samplers.mhtests.engine`),
    optionally :attr:`epilogue` (its final draw), :attr:`carry0` (the rule's initial carry),
    and the hooks :meth:`_settings` and :meth:`_info`.
    """

    #: The jitted stopping rule (a ``staticmethod``).
    rule = None
    #: The jitted epilogue (default: no draw).
    epilogue = staticmethod(keep)
    #: The rule's carry before the first stage.
    carry0: tuple = ()
    #: Whether ``decide`` draws u before reading rows (False: mu0 is NaN).
    draws_threshold = True

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        N = view.N
        mu0 = (-rng.standard_exponential() - log_const) / N if self.draws_threshold else math.nan
        settings = self._settings(view, theta, theta_new, log_const)
        batches.restart()
        drive = python_driver if view.row_ratio is None else run_compiled
        rule, epilogue = self.rule, self.epilogue
        run = drive(view, batches, rng, theta, theta_new, rule, epilogue, mu0, settings,
                    self.carry0)
        while run.status == MORE:
            settings = self._more_settings(N, run.stage, settings)
            run = drive(view, batches, rng, theta, theta_new, rule, epilogue, mu0, settings,
                        self.carry0, run)
        if run.status == NONFINITE:
            return nonfinite_decision(run.mean, theta_new), self._info(run, settings)
        return bool(run.accepted), self._info(run, settings)

    # -- hooks -----------------------------------------------------------------------------

    def _settings(self, view, theta, theta_new, log_const) -> tuple:
        """The rule's settings for one decision (may read the model, e.g. a range bound)."""
        raise NotImplementedError

    def _more_settings(self, N: int, stage: int, settings: tuple) -> tuple:
        """Settings extended past ``stage`` stages (when the rule returned MORE)."""
        raise NotImplementedError(f"{type(self).__name__}'s rule asked for more settings")

    def _info(self, run: Run, settings: tuple):
        """The info of a finished run (``run.status`` may be NONFINITE)."""
        raise NotImplementedError

    # -- what the checks ask for ---------------------------------------------------------

    def engine_spec(self, N: int, *, C: float | None = None) -> EngineSpec:
        """The rule, epilogue, settings and carry to run this test on N values outside a
        chain (``validation``), with settings for every stage; ``C`` bounds ``|l_i|`` for
        tests that need a range."""
        return EngineSpec(self.rule, self.epilogue, self._vector_settings(N, C), self.carry0,
                          self.draws_threshold)

    def _vector_settings(self, N: int, C) -> tuple:
        raise NotImplementedError

    def design_parameters(self) -> tuple[int, float] | None:
        """``(m, epsilon)`` if :func:`design.acceptance_error` models this test (stages of m
        rows, a Gaussian statistic with normal thresholds of level epsilon), else None."""
        return None

    def a_priori_error(self, N: int) -> float:
        """A bound, known before looking at the data, on ``|P(accept) - P_MH(accept)|``
        for one proposal (what Theorem 1 of Korattikara et al. takes as Delta_max)."""
        raise NotImplementedError


class IntervalTest(SequentialTest):
    """A sequential test that decides once ``mu0`` leaves an interval about the mean.

    A subclass supplies :attr:`radius` and :attr:`grow` (jitted, see
    :func:`samplers.mhtests.engine.interval_rule`); the rule is built from them. The
    checks integrate u out with the same two functions (:meth:`path_spec`).
    """

    radius = None
    grow = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("radius") is not None:
            cls.rule = staticmethod(interval_rule(cls.radius, cls.grow))

    def path_spec(self, N: int, *, C: float | None = None) -> PathSpec:
        """The radius, stage sizes and settings for a whole pass over N values."""
        return PathSpec(self.radius, self.grow, self._vector_settings(N, C))
