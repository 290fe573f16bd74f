"""Updates of theta given the brightness variables: MH with any proposal, or slice sampling.

Both target the pseudo-posterior of :mod:`samplers._firefly.target` for the current bright
set; one evaluation of it queries the likelihood of every bright row and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from design._lib.checks import check_int
from ..proposals import RandomWalk
from .target import total

__all__ = ["Slice", "ThetaResult", "metropolis_update", "slice_update", "PseudoView"]


class ThetaResult(NamedTuple):
    """The outcome of one theta-update."""

    theta: np.ndarray
    #: Log pseudo-prior at theta (log prior plus the collapsed sum of log bounds).
    base: float
    #: Log-odds of brightness of the bright rows at the new theta, or None if it did not move.
    log_odds: Any
    #: The proposal's cached state at theta (valid while z is unchanged).
    pstate: Any
    accepted: bool
    #: Pseudo-posterior evaluations (each queries every bright row).
    n_evals: int
    #: Likelihood queries (rows whose likelihood, or its gradient, was evaluated).
    n_queried: int
    n_grad: int


class PseudoView:
    """What a :class:`~samplers.proposals.Proposal` sees of the pseudo-posterior.

    It mirrors :class:`samplers._view.ModelView` for the bright set: ``N`` is the number of
    bright rows, and ``full_grad`` is the gradient of the log pseudo-posterior (O(bright)).
    The log-odds computed with the last gradient are kept, so MALA's proposal and its MH test
    share one pass over the bright rows.
    """

    def __init__(self, target, bright):
        self.model = target.model
        self.dim = target.dim
        self.N = bright.shape[0]
        self.logprior = target.logprior
        self.grad_logprior = target.grad_logprior
        self.grad = target.pair_grads  # None when the model or bound lacks gradients
        self._target = target
        self._bright = bright
        self.last = None

    def full_grad(self, theta):
        grad, log_odds = self._target.density_grad(theta, self._bright)
        self.last = (theta, log_odds)
        return grad


def metropolis_update(proposal, rng, target, bright, theta, value, base, pstate) -> ThetaResult:
    """One Metropolis-Hastings step on the pseudo-posterior with any proposal.

    ``value`` is the log pseudo-posterior at theta for the current bright set; ``pstate`` the
    proposal's state at theta, or None to recompute it (the bright set changed).
    """
    B = bright.shape[0]
    view = PseudoView(target, bright)
    n_queried = n_grad = 0
    if pstate is None and proposal.needs_gradients:
        n_queried = n_grad = B
    if pstate is None:
        pstate = proposal.init(view, theta)
    theta_new, log_q_ratio, pstate_new, n_grad_new = proposal.propose(rng, view, None, theta, pstate)
    n_grad += n_grad_new
    n_queried += n_grad_new
    base_new = target.base(theta_new)
    if base_new == -math.inf:  # the prior rules theta_new out: no (more) likelihood is read
        return ThetaResult(theta, base, None, pstate, False, 0, n_queried, n_grad)
    if view.last is not None and view.last[0] is theta_new:
        lo_new = view.last[1]  # the proposal's gradient pass already read these rows
    else:
        lo_new = target.log_odds(theta_new, bright)
        n_queried += B
    value_new = base_new + total(lo_new)
    if value_new == -math.inf:  # a bright row's bound touches its likelihood at theta_new
        return ThetaResult(theta, base, None, pstate, False, 1, n_queried, n_grad)
    if not math.isfinite(log_q_ratio):
        raise ValueError(f"the log proposal ratio is {log_q_ratio} at theta_new={theta_new}")
    if -rng.standard_exponential() < value_new - value + log_q_ratio:
        return ThetaResult(theta_new, base_new, lo_new, pstate_new, True, 1, n_queried, n_grad)
    return ThetaResult(theta, base, None, pstate, False, 1, n_queried, n_grad)


@dataclass(frozen=True)
class Slice:
    """Slice sampling along a random direction, with stepping out and shrinkage (Neal 2003).

    Each update draws a direction ``v = L e`` (``e ~ N(0, I)``, ``L`` from ``scale`` as for
    :class:`~samplers.RandomWalk`), a level ``log y = f(theta) - Exp(1)`` and an interval of
    width one (in units of v) around 0 placed at random; steps its ends out by one while
    they are inside the slice (at most ``max_steps`` steps in all), then samples uniformly
    from the interval, shrinking it towards 0 after each point outside the slice. The
    direction does not depend on theta, so each update leaves the target invariant.

    Parameters
    ----------
    scale : float, array of shape (d,), or array of shape (d, d)
        Scale of the direction, about the posterior's spread: a standard deviation,
        per-coordinate ones, or a covariance matrix.
    max_steps : int
        Stepping-out budget m (Neal's Figure 3), >= 1.

    Notes
    -----
    The number of density evaluations varies from update to update (recorded as
    ``n_evals``); in Firefly Monte Carlo each one queries every bright row.

    References
    ----------
    R. M. Neal (2003). Slice sampling. Ann. Statist. 31(3), 705-767.

    Examples
    --------
    >>> import numpy as np
    >>> sampler = Slice(scale=2.0)
    >>> logp = lambda x: (-0.5 * float(x @ x), None)
    >>> rng, x, fx = np.random.default_rng(0), np.zeros(2), 0.0
    >>> draws = []
    >>> for _ in range(2000):
    ...     x, fx, _, _ = sampler.step(rng, logp, x, fx)
    ...     draws.append(x)
    >>> bool(abs(np.var(draws) - 1.0) < 0.15)
    True
    """

    scale: object = 1.0
    max_steps: int = 10
    _directions: RandomWalk = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "max_steps", check_int("max_steps", self.max_steps, low=1))
        object.__setattr__(self, "_directions", RandomWalk(self.scale))

    def check(self, view) -> None:
        """Refuse a scale whose dimension does not match theta."""
        self._directions.check(view)

    def step(self, rng, log_density, theta, value):
        """One update of ``theta`` for ``log_density(theta) -> (value, aux)``.

        Returns ``(theta_new, value_new, aux_new, n_evals)``; ``aux_new`` is what
        ``log_density`` returned with the accepted point.
        """
        v = self._directions.propose(rng, None, None, np.zeros_like(theta), None)[0]
        level = value - rng.standard_exponential()
        lo = -rng.random()
        hi = lo + 1.0
        left = int(self.max_steps * rng.random())
        right = self.max_steps - 1 - left
        n_evals = 0
        while left > 0:
            n_evals += 1
            if not log_density(theta + lo * v)[0] > level:
                break
            lo -= 1.0
            left -= 1
        while right > 0:
            n_evals += 1
            if not log_density(theta + hi * v)[0] > level:
                break
            hi += 1.0
            right -= 1
        while True:
            s = lo + rng.random() * (hi - lo)
            point = theta + s * v
            f, aux = log_density(point)
            n_evals += 1
            if f > level:
                return point, f, aux, n_evals
            if s < 0.0:
                lo = s
            else:
                hi = s


def slice_update(sampler, rng, target, bright, theta, value, base, pstate) -> ThetaResult:
    """One slice-sampling update of theta on the pseudo-posterior."""
    queried = []

    def log_density(point):
        f, point_base, lo = target.density(point, bright)
        if lo is not None:  # None: the prior ruled the point out without a query
            queried.append(lo.shape[0])
        return f, (point_base, lo)

    theta_new, _, (base_new, lo_new), n_evals = sampler.step(rng, log_density, theta, value)
    return ThetaResult(theta_new, base_new, lo_new, None, True, n_evals, sum(queried), 0)
