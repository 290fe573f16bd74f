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

import numpy as np

from .compiled import (Decision, InfoLayout, nonfinite_decision, same_settings,
                       sequential_decide)
from .engine import MORE, NONFINITE, Run, interval_rule, keep, python_driver, run_compiled

__all__ = ["AcceptanceTest", "SequentialTest", "IntervalTest", "EngineSpec", "PathSpec",
           "design_for", "nonfinite_decision", "unchanged_below"]


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

    #: The design tolerance the test was made for (None: not made from a design).
    tolerance = None

    def decision_errors(self, stats, N):
        """Estimated error ``|Delta|`` in the acceptance probability of each decision a chain
        made, from its per-step ``stats``; None if the test has no estimate (the default)."""
        return None

    def check(self, view) -> None:
        """Refuse settings that do not fit this model (e.g. a batch larger than N)."""

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        """Return ``(accepted, info)`` for one proposal."""
        raise NotImplementedError

    def null_info(self):
        """Info recorded for a proposal that the prior rejects without reading data."""
        raise NotImplementedError

    def rows_from_order(self, view) -> bool:
        """Whether every row this test reads in a chain comes from the chain's row order
        (``batches.take``, or ``draw_rows`` on its order in compiled code), so that a chain
        on a store-backed model can fetch the rows as the order hands them out
        (:mod:`samplers._rowfeed`). False (the default) for a test that reads other rows (a full
        pass, rows it draws itself): its chains on a store read rows through the model's
        batch methods."""
        return False

    def compiled_decision(self, view) -> Decision | None:
        """The test's compiled decision on this model (:class:`~samplers.mhtests.compiled.
        Decision`), or None (the default): the chain then runs on the Python loop.

        Asked once per chain by the compiled block loop, after the model and the proposal
        gave their compiled parts; ``view`` is the chain's
        :class:`~samplers._view.ModelView`. A subclass that changes what a decision does
        (``decide`` or a hook) must not inherit a compiled decision that does otherwise:
        see :func:`unchanged_below`.
        """
        return None


def unchanged_below(obj, owner: type, *names: str) -> bool:
    """Whether ``type(obj)`` inherits each attribute in ``names`` from ``owner`` unchanged:
    the condition for ``obj`` to use compiled parts that ``owner`` wrote for them."""
    cls = type(obj)
    return all(getattr(cls, name) is getattr(owner, name) for name in names)


def _defining_class(obj, attr: str) -> type:
    """The class in ``type(obj).__mro__`` whose body defines ``attr``."""
    for klass in type(obj).__mro__:
        if attr in klass.__dict__:
            return klass
    raise AttributeError(attr)


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
    #: The jitted ``write_info(status, n_used, stage, mean, m2, values, settings, carry,
    #: info)`` of the compiled decision (a ``staticmethod``; None: no compiled decision).
    info_kernel = None

    #: What a compiled decision reproduces: a subclass that overrides one of these without
    #: supplying its own ``info_kernel`` runs on the Python loop.
    _compiled_hooks = ("decide", "_settings", "_more_settings", "_info", "_decide_without_data",
                       "rule", "epilogue", "carry0", "draws_threshold", "_compiled_settings")

    def compiled_decision(self, view):
        """The compiled decision generated from this test's rule, epilogue, settings and
        ``info_kernel`` (:func:`~samplers.mhtests.compiled.sequential_decide`): the engine's
        compiled driver, the one :meth:`decide` runs on a compiled model; None for a model
        without row kernels or a test without ``info_kernel``."""
        if self.info_kernel is None or view.row_ratio is None:
            return None
        if not unchanged_below(self, _defining_class(self, "info_kernel"), *self._compiled_hooks):
            return None
        parts = self._compiled_settings(view)
        if parts is None:
            return None
        prepare, base, refuse = parts
        decide = sequential_decide(view.row_ratio, view.row_prefetch, self.rule, self.epilogue,
                                   bool(self.draws_threshold), prepare, self.info_kernel)
        N = view.N

        def more(settings, state):
            return self._more_settings(N, int(state[4]), settings)

        return Decision(decide, base, self.carry0, more, refuse)

    def rows_from_order(self, view) -> bool:
        """True: the engine reads the rows of the chain's order, nothing else (unless a
        subclass rewrites ``decide``)."""
        return unchanged_below(self, SequentialTest, "decide")

    def _compiled_settings(self, view):
        """``(prepare, base, refuse)`` of the compiled decision, or None: by default the
        settings do not depend on the pair (``same_settings`` with ``base`` this test's
        ``_settings``) and nothing is refused."""
        return same_settings, self._settings(view, None, None, 0.0), None

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
        """The info of a finished run (``run.status`` may be NONFINITE): by default built by
        the compiled decision's own ``info_kernel`` (one definition for both loops), in the
        layout of :meth:`null_info`."""
        if self.info_kernel is None:
            raise NotImplementedError(f"{type(self).__name__} defines neither _info nor "
                                      "info_kernel")
        layout = InfoLayout.of(self.null_info())
        row = np.empty(len(layout.names))
        self.info_kernel(run.status, run.n_used, run.stage, run.mean, run.m2, run.values,
                         settings, run.carry, row)
        return layout.info(row)

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
