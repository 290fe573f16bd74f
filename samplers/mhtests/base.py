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
           "design_for", "nonfinite_decision"]


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
    """A batch mean of -inf rejects (theta_new has zero likelihood); NaN and +inf are errors.

    +inf means a log-likelihood of +inf at ``theta_new`` (or -inf at the current point, which
    an exact chain never reaches): no density is infinite, so the model is refused there
    rather than the chain moved onto that point.
    """
    if math.isnan(mean):
        raise ValueError(
            f"log-likelihood ratios are NaN between the current point and theta_new={theta_new}; "
            "the model's log-likelihood is not defined there"
        )
    if mean == math.inf:
        raise ValueError(
            f"a log-likelihood ratio is +inf at theta_new={theta_new}: the model's "
            "log-likelihood is +inf there (or -inf at the current point); a log-likelihood "
            "must be finite or -inf, so the move is refused"
        )
    return False


def design_for(design, kind: str, cls: str):
    """Refuse a design made for another test kind (``design.test`` names it)."""
    made_for = getattr(design, "test", None)
    if made_for != kind:
        hint = (f"; build it with design.optimize(trial, tolerance, test={kind!r})"
                if made_for is not None else "")
        raise ValueError(f"{cls}.from_design needs a design made with test={kind!r}, got a "
                         f"{type(design).__name__} made for test={made_for!r}{hint}")
    return design


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
    :attr:`draws_threshold`), asks :meth:`_settings` for this decision's constants, returns
    early if they alone decide (:meth:`_decide_without_data`), restarts the row order, runs
    the rule with the compiled driver (compiled models) or the Python reference driver (any
    other model), extends the settings when the rule asks for more (:meth:`_more_settings`),
    decides a non-finite batch (a mean of -inf rejects, NaN and +inf are errors,
    :func:`nonfinite_decision`), and builds the info with :meth:`_info`.

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
        early = self._decide_without_data(mu0, settings)
        if early is not None:
            return early
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

    def _decide_without_data(self, mu0: float, settings: tuple):
        """``(accepted, info)`` when the settings alone decide (no row is read, the order is
        not restarted), else None (the default): e.g. the confidence test when every l_i is
        known to equal one value."""
        return None

    def _more_settings(self, N: int, stage: int, settings: tuple) -> tuple:
        """Settings extended past ``stage`` stages (when the rule returned MORE)."""
        raise NotImplementedError(f"{type(self).__name__}'s rule asked for more settings")

    def _info(self, run: Run, settings: tuple):
        """The info of a finished run (``run.status`` may be NONFINITE)."""
        raise NotImplementedError

    # -- what the checks ask for ---------------------------------------------------------

    def engine_spec(self, N: int, *, C: float | None = None,
                    log_const: float = 0.0) -> EngineSpec:
        """The rule, epilogue, settings and carry to run this test on N values outside a
        chain (``validation``), with settings for every stage; ``C`` bounds ``|l_i|`` for
        tests that need a range; ``log_const`` is the data-free log ratio ``c`` for a test
        that carries it in its settings (one that draws no u, e.g. Barker's
        ``Delta* = N mean + c``; a test that draws u gets c through ``mu0``)."""
        return EngineSpec(self.rule, self.epilogue, self._vector_settings(N, C, log_const),
                          self.carry0, self.draws_threshold)

    def _vector_settings(self, N: int, C, log_const: float) -> tuple:
        """Settings for a whole pass over N values (``engine_spec``, ``path_spec``)."""
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
        return PathSpec(self.radius, self.grow, self._vector_settings(N, C, 0.0))
