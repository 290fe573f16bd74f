"""Stochastic-gradient Langevin dynamics on the shared chain loop, and step-size schedules.

Plain SGLD (Welling & Teh 2011; Song et al. 2020, eq. 1) moves by

    theta' = theta + (h_t / 2) g(theta) + sqrt(h_t tau) z,    z ~ N(0, I),

with ``g = grad log p0(theta) + (N/n) sum_{i in batch} grad log p(x_i | theta)`` estimated
from a fresh minibatch of n rows, ``h_t`` a constant or decaying step size and ``tau`` the
temperature. It is one kernel of the shared chain loop::

    sample(model, AcceptAll(), SGLD(step_size, batch_size), theta0, n_samples)

:class:`SGLD` proposes the move and :class:`AcceptAll` accepts it without reading data
(``n_used = 0``; the rows read for the gradient are counted in ``n_grad``). The same drift
corrected by a minibatch Metropolis-Hastings test, with the proposal's log density ratio on
the same minibatch in ``mu0`` (Korattikara et al. 2014, section 6.4), is::

    sample(model, AustereTest(m, epsilon), Langevin(step_size, batch_size), theta0, n_samples)

and works with any :class:`~samplers.AcceptanceTest`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

import numpy as np

from design._lib.checks import check_int, check_interval, check_positive
from design._lib.jit import jit
from design._lib.rows import draw_rows, restart_order
from .mhtests import AcceptanceTest
from .mhtests.compiled import Decision
from .mhtests.status import DECIDED
from .priors import prior_grad
from .proposals import (Move, Proposal, check_gradient_model, minibatch_grad, row_sums,
                        unchanged_below)

__all__ = [
    "StepSchedule",
    "ConstantStep",
    "PolynomialDecay",
    "as_schedule",
    "AcceptAll",
    "AcceptAllInfo",
    "SGLD",
]


class StepSchedule:
    """Base class of step-size schedules: ``schedule(t)`` is the step size ``h_t > 0`` of
    transition ``t = 0, 1, 2, ...``."""

    def __call__(self, t: int) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class ConstantStep(StepSchedule):
    """The constant step size ``h_t = size`` (Song et al. 2020, Theorem 1).

    Examples
    --------
    >>> ConstantStep(1e-6)(12345)
    1e-06
    """

    size: float

    def __post_init__(self):
        object.__setattr__(self, "size", check_positive("step_size", self.size))

    def __call__(self, t):
        return self.size


@dataclass(frozen=True)
class PolynomialDecay(StepSchedule):
    """Decaying step size ``h_t = a (b + t)^(-gamma)`` (Welling & Teh 2011, section 3).

    Parameters
    ----------
    a : float
        Scale, > 0.
    b : float
        Offset, > 0 (so that ``h_0 = a b^(-gamma)`` is finite).
    gamma : float
        Decay exponent in (0, 1]. The SGLD averages are consistent for ``gamma`` in (0, 1)
        without weighting (Song et al. 2020, Theorem 2; Teh et al. 2016); with ``gamma = 1``
        Teh et al. recommend step-weighted averages.

    Examples
    --------
    >>> schedule = PolynomialDecay(a=1e-3, b=10.0, gamma=0.55)
    >>> bool(schedule(0) > schedule(100) > schedule(10_000) > 0)
    True
    """

    a: float
    b: float = 1.0
    gamma: float = 0.55

    def __post_init__(self):
        object.__setattr__(self, "a", check_positive("a", self.a))
        object.__setattr__(self, "b", check_positive("b", self.b))
        object.__setattr__(self, "gamma", check_interval("gamma", self.gamma, 0.0, 1.0,
                                                         closed="right"))

    def __call__(self, t):
        return self.a * (self.b + t) ** -self.gamma


def as_schedule(step_size) -> StepSchedule:
    """A :class:`StepSchedule` as given, or a positive number as a :class:`ConstantStep`."""
    if isinstance(step_size, StepSchedule):
        return step_size
    if isinstance(step_size, (int, float, np.floating, np.integer)) and not isinstance(step_size, bool):
        return ConstantStep(step_size)
    raise TypeError(f"step_size must be a positive number or a StepSchedule, got {step_size!r}")


class AcceptAllInfo(NamedTuple):
    n_used: int
    n_stages: int


@jit
def accept_all_decide(data, theta, theta_new, rng, order, c, settings, state, resume, carry,
                      values, info):
    """:meth:`AcceptAll.decide` compiled: accept, read nothing, info ``(0, 0)``."""
    info[0] = info[1] = 0.0
    return DECIDED, True, carry, values


@cache
def sgld_propose(grads):
    """:meth:`SGLD.propose` for one model kind (memoised; ``grads`` its
    ``BlockModel.grads``): ``params = (hs, temperature, batch, prior)``, ``hs[i]`` the step
    size of step i (evaluated block by block)."""

    @jit
    def propose(data, rng, order, theta, theta_new, params, i):
        hs, temperature, batch, prior = params
        code, pa, pb, pconst = prior
        d = theta.shape[0]
        rows = np.empty(batch, dtype=np.intp)
        g = np.empty((batch, d))
        acc = np.empty(d)
        gp = np.empty(d)
        w = order.n_total / batch
        h = hs[i]
        restart_order(order)
        draw_rows(rng, order, np.empty(batch), rows)
        grads(data, rows, theta, g)
        row_sums(g, acc)
        prior_grad(code, pa, pb, pconst, theta, gp)
        half = 0.5 * h
        sd = math.sqrt(h * temperature)
        for j in range(d):
            drift = half * (gp[j] + w * acc[j])
            theta_new[j] = theta[j] + drift + sd * rng.standard_normal()
        return 0.0, batch

    return propose


@dataclass(frozen=True)
class AcceptAll(AcceptanceTest):
    """The "test" of uncorrected samplers such as plain SGLD: accepts every proposal.

    It reads no data (``n_used = 0``). A proposal outside the prior's support (log prior
    ``-inf``) is still refused by the chain loop.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import AcceptAll, GaussianMean, SGLD, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 10_000))
    >>> chain = sample(model, AcceptAll(), SGLD(1e-5, batch_size=100), [1.0], 200, rng=0)
    >>> chain.acceptance_rate, int(chain.stats["n_used"].sum()), int(chain.stats["n_grad"][0])
    (1.0, 0, 100)
    """

    accepts_all = True

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        return True, AcceptAllInfo(0, 0)

    def null_info(self):
        return AcceptAllInfo(0, 0)

    def rows_from_order(self, view) -> bool:
        """True: accepting reads no rows."""
        return unchanged_below(self, AcceptAll, "decide")

    def compiled_decision(self, view):
        if not unchanged_below(self, AcceptAll, "decide", "null_info"):
            return None
        return Decision(accept_all_decide, ())


@dataclass(frozen=True)
class SGLD(Proposal):
    """The stochastic-gradient Langevin move (Welling & Teh 2011; Song et al. 2020, eq. 1).

    ``theta' = theta + (h_t/2) g(theta) + sqrt(h_t tau) z`` with ``g`` estimated from a fresh
    minibatch of ``batch_size`` rows drawn without replacement (see the module docstring).
    SGLD never computes the reverse proposal density, so it runs uncorrected, with
    :class:`AcceptAll`; for the corrected move use :class:`~samplers.Langevin` with a
    ``batch_size`` and any acceptance test.

    Parameters
    ----------
    step_size : float or StepSchedule
        ``h > 0``, or a schedule ``h_t`` such as :class:`PolynomialDecay`.
    batch_size : int
        Rows per gradient estimate, ``1 <= batch_size <= N``.
    temperature : float
        ``tau > 0``; the injected noise has variance ``h_t tau``, so the chain targets
        roughly the posterior raised to ``1/tau``.

    Notes
    -----
    Per step the cost is ``batch_size`` row gradients, never O(N). With a constant step the
    chain's stationary law is biased by O(h) and by the minibatch noise in ``g``; a decaying
    step removes the bias in the limit (Teh et al. 2016).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import AcceptAll, GaussianMean, PolynomialDecay, SGLD, sample
    >>> x = np.random.default_rng(0).normal(1.0, 1.0, 10_000)
    >>> proposal = SGLD(PolynomialDecay(a=1e-4, b=100.0, gamma=0.55), batch_size=100)
    >>> chain = sample(GaussianMean(x), AcceptAll(), proposal, [0.0], 2000, rng=1)
    >>> bool(abs(chain.samples[1000:, 0].mean() - x.mean()) < 0.05)
    True
    """

    step_size: object = 1e-3
    batch_size: int = 100
    temperature: float = 1.0
    _schedule: StepSchedule = field(init=False, repr=False, compare=False)

    needs_gradients = True
    uses_iteration = True
    has_q_ratio = False

    def __post_init__(self):
        object.__setattr__(self, "_schedule", as_schedule(self.step_size))
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, low=1))
        object.__setattr__(self, "temperature", check_positive("temperature", self.temperature))

    def check(self, view):
        check_gradient_model(self, view)

    def rows_from_order(self, view) -> bool:
        """True: the minibatch's rows come from the order."""
        return unchanged_below(self, SGLD, "propose", "_gradient")

    def compiled_move(self, view, model, state, n_samples):
        """The move with the step-size schedule evaluated in Python block by block (so any
        :class:`StepSchedule` works)."""
        if not unchanged_below(self, SGLD, "propose", "_gradient"):
            return None
        hs = np.zeros(n_samples)
        schedule, first = self._schedule, state.iteration

        def before_block(start, stop):
            hs[start:stop] = [schedule(first + i) for i in range(start, stop)]

        return Move(sgld_propose(model.grads),
                    (hs, float(self.temperature), self.batch_size, model.prior), before_block)

    def _gradient(self, rng, view, theta, idx):
        """The estimate ``g`` of the log-posterior gradient from rows ``idx``."""
        return minibatch_grad(view, theta, idx)

    def propose(self, rng, view, batches, theta, pstate, iteration=0):
        h = self._schedule(iteration)
        batches.restart()
        idx = batches.take(self.batch_size)
        drift = 0.5 * h * self._gradient(rng, view, theta, idx)
        noise = math.sqrt(h * self.temperature) * rng.standard_normal(theta.shape[0])
        return theta + drift + noise, 0.0, None, idx.shape[0]
