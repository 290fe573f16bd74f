"""Firefly Monte Carlo: exact MCMC that queries the likelihoods of the bright rows only.

One iteration (Maclaurin & Adams 2014, Algorithm 1) updates the brightness variables z given
theta, then theta given z, through the pure step :func:`firefly_step`; :func:`firefly` runs
it in the toolkit's chain loop and returns a :class:`~samplers.Chain`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from .._chain import Chain, run_blocks, run_chain
from design._lib.checks import as_generator, check_int
from design._lib.rows import IndexSampler
from .._view import check_model
from ..proposals import Langevin, Proposal
from .blocks import firefly_block
from .brightness import BrightSet
from .target import PseudoPosterior, total_at
from .thetaupdates import PseudoView, Slice, metropolis_update, slice_update
from .zupdates import ExplicitZ, ImplicitZ

__all__ = ["FireflyState", "FireflyInfo", "FireflyKernel", "firefly_step", "firefly"]


class FireflyKernel(NamedTuple):
    """What makes a Firefly step, recorded as ``Chain.kernel``: the collapsible bound, the
    z-update (brightness resampling) and the theta-update (a proposal or ``Slice``)."""

    bound: Any
    z_update: Any
    theta_update: Any


class FireflyState(NamedTuple):
    """Where a Firefly chain is.

    ``z`` and ``log_odds`` are large (O(N)) and updated in place, O(1) per flip; the rest is
    immutable.
    """

    theta: np.ndarray
    #: Log pseudo-prior at theta: log p(theta) + sum_n log B_n(theta).
    base: float
    #: The proposal's cached state at theta; None when z changed since it was computed.
    pstate: Any
    z: BrightSet
    #: log_odds[n] = log((L_n(theta) - B_n(theta)) / B_n(theta)), valid for the bright n.
    log_odds: np.ndarray


class FireflyInfo(NamedTuple):
    """What one iteration measured."""

    #: Whether theta moved.
    accepted: bool
    #: Bright rows during the theta-update (after the z-update).
    n_bright: int
    #: Likelihood queries of the iteration: rows whose likelihood (or its gradient) was
    #: evaluated, by the z-update and the theta-update together.
    n_used: int
    #: Rows whose likelihood gradient was evaluated.
    n_grad: int
    #: Pseudo-posterior evaluations of the theta-update (1 for MH, varies for slice).
    n_evals: int
    n_brightened: int
    n_darkened: int


def firefly_step(rng, state: FireflyState, target: PseudoPosterior, theta_update, z_update,
                 rows) -> tuple[FireflyState, FireflyInfo]:
    """One Firefly iteration: z given theta, then theta given z.

    ``theta_update(rng, target, bright, theta, value, base, pstate)`` returns a
    :class:`~samplers._firefly.thetaupdates.ThetaResult`.
    """
    z, log_odds = state.z, state.log_odds
    zinfo = z_update.update(rng, state.theta, target, z, log_odds, rows)
    bright = z.bright
    changed = zinfo.n_brightened + zinfo.n_darkened > 0
    value = state.base + total_at(log_odds, bright)
    res = theta_update(rng, target, bright, state.theta, value, state.base,
                       None if changed else state.pstate)
    if res.log_odds is not None:
        log_odds[bright] = res.log_odds
    info = FireflyInfo(res.accepted, bright.shape[0], zinfo.n_queried + res.n_queried, res.n_grad,
                       res.n_evals, zinfo.n_brightened, zinfo.n_darkened)
    return FireflyState(res.theta, res.base, res.pstate, z, log_odds), info


def _check_bound(model, bound):
    for attr in ("log_bound", "log_bound_sum"):
        if not callable(getattr(bound, attr, None)):
            raise TypeError(f"bound must have a callable {attr}(theta, ...) (see "
                            f"samplers.models.Bound); {type(bound).__name__} has none")
    if getattr(bound, "N", None) != model.N:
        raise ValueError(f"bound.N must equal model.N = {model.N}, got {getattr(bound, 'N', None)!r}")
    bound_model = getattr(bound, "model", model)
    if bound_model is not model:
        raise ValueError(f"bound was built for another model ({bound_model!r}); build it from "
                         "the model you sample")


def _theta_update(theta_update, target):
    """Check the theta-update against the target; return it as a function of the step."""
    view = PseudoView(target, np.empty(0, dtype=np.int64))
    if isinstance(theta_update, Slice):
        theta_update.check(view)
        return partial(slice_update, theta_update)
    if not isinstance(theta_update, Proposal):
        raise TypeError(f"theta_update must be a Proposal (RandomWalk, Langevin) or a Slice, "
                        f"got {type(theta_update).__name__}")
    if not theta_update.has_q_ratio or theta_update.uses_iteration:
        raise TypeError(f"theta_update is a Metropolis-Hastings step in Firefly Monte Carlo: it "
                        f"needs a proposal with a reverse density and no step-size schedule, "
                        f"got {type(theta_update).__name__}")
    if isinstance(theta_update, Langevin) and theta_update.batch_size is not None:
        raise ValueError(f"Langevin in Firefly Monte Carlo uses the gradient over the bright rows: "
                         f"batch_size must be None, got {theta_update.batch_size}")
    if theta_update.needs_gradients and target.pair_grads is None:
        raise TypeError(f"{type(theta_update).__name__} needs model.grad_loglik, "
                        "model.grad_logprior, bound.grad_log_bound and bound.grad_log_bound_sum")
    theta_update.check(view)
    return partial(metropolis_update, theta_update)


def firefly(model, bound, theta_update, theta0, n_samples, rng=None, *, z_update=None,
            progress=None, compiled=None) -> Chain:
    """Run a Firefly Monte Carlo chain: exact MCMC on the bright rows only.

    Parameters
    ----------
    model : Model
        Any model (built-in or following the :class:`~samplers.models.Model` protocol).
    bound : Bound
        Collapsible lower bounds ``0 < B_n(theta) <= L_n(theta)`` of this model's
        likelihoods: :class:`~samplers.models.JaakkolaJordanBound`,
        :class:`~samplers.models.StudentTBound`, or any :class:`~samplers.models.Bound`.
    theta_update : RandomWalk, Langevin or Slice
        How theta moves given z: Metropolis-Hastings with a proposal (``Langevin`` uses
        the gradient over the bright rows, ``batch_size=None``), or slice sampling.
    theta0 : array_like of shape (d,)
        Starting point; the log prior and the log-likelihood must be finite there.
    n_samples : int
        Number of iterations.
    rng : None, int or numpy.random.Generator
        Equal seeds give identical chains.
    z_update : ImplicitZ or ExplicitZ
        How the brightness variables move given theta; default ``ImplicitZ()``
        (Algorithm 2, ``q_db = 0.01``).
    progress : bool or None
        Show a progress bar on stderr; None (default): only if stderr is a terminal. It
        never changes the result. Ctrl-C and exceptions mid-chain behave as in
        :func:`~samplers.sample` (the chain so far is returned or attached).
    compiled : bool or None
        None (default): the compiled block loop (``samplers/_firefly/blocks.py``) when
        there is one, i.e. a built-in bound of the sampled built-in model with a built-in
        prior, ``ImplicitZ`` or ``ExplicitZ`` and a ``RandomWalk`` theta-update; else the
        Python loop. False: the Python loop; True: the compiled loop or a TypeError.
        Decided once, before the first iteration; both give the same chain for a seed.

    Returns
    -------
    Chain
        ``samples`` (theta after each iteration) and ``stats``: ``accepted`` (theta
        moved), ``n_bright``, ``n_used`` (likelihood queries), ``n_grad``, ``n_evals``,
        ``n_brightened``, ``n_darkened``; ``chain.kernel`` is the :class:`FireflyKernel`
        (bound, z-update, theta-update), ``chain.test`` and ``chain.proposal`` are None.

    Notes
    -----
    With ``p(z_n = 1 | theta) = 1 - B_n(theta)/L_n(theta)`` the joint density is
    ``p(theta) prod_n B_n(theta) prod_{n bright} (L_n(theta)/B_n(theta) - 1)`` (eq. 2), whose
    theta-marginal is the exact posterior. The product of all bounds is computed from
    sufficient statistics, so an iteration costs O(bright + touched) likelihood queries and
    O(bright + touched) other work, never O(N). All rows start dark; z then relaxes to its
    conditional within a few iterations when ``q_db`` exceeds the typical bright
    probability.

    Before the first iteration ``B_n <= L_n`` is checked at theta0 on up to 1024 rows spread
    over the data, and for a bound that is not built in, its collapsed sum against the sum
    over its rows (two O(N) passes, once). During the chain every gap computed is checked:
    a bound above its likelihood raises ``ValueError`` naming the row and the point.

    References
    ----------
    D. Maclaurin, R. P. Adams (2014). Firefly Monte Carlo: exact MCMC with subsets of data.
    UAI 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import (GaussianPrior, ImplicitZ, JaakkolaJordanBound, LogisticRegression,
    ...                       RandomWalk, firefly)
    >>> from samplers.datasets import logistic_regression
    >>> X, y, theta = logistic_regression(5000, 2, rng=0)
    >>> model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0))
    >>> bound = JaakkolaJordanBound.map_tuned(model, rng=1)
    >>> chain = firefly(model, bound, RandomWalk(0.03), bound.theta_tuned, 500, rng=2,
    ...                 z_update=ImplicitZ(q_db=0.01))
    >>> chain.samples.shape
    (500, 3)
    >>> bool(chain.stats["n_used"].mean() < 0.05 * model.N)  # likelihood queries per iteration
    True
    """
    n_samples = check_int("n_samples", n_samples, low=1)
    rng = as_generator(rng)
    view, theta = check_model(model, theta0)
    _check_bound(model, bound)
    z_update = ImplicitZ() if z_update is None else z_update
    if not isinstance(z_update, (ImplicitZ, ExplicitZ)):
        raise TypeError(f"z_update must be ImplicitZ or ExplicitZ, got {type(z_update).__name__}")
    target = PseudoPosterior(model, bound, view.dim)
    update = _theta_update(theta_update, target)
    target.check_start(theta)

    rows = IndexSampler(view.N, rng) if isinstance(z_update, ExplicitZ) else None
    base = target.base(theta)
    if not math.isfinite(base):
        raise ValueError(f"the log pseudo-prior at theta0 must be finite, got {base}")
    state = FireflyState(theta, base, None, BrightSet(view.N), np.full(view.N, -np.inf))
    kernel = FireflyKernel(bound, z_update, theta_update)
    block = None if compiled is False else firefly_block(
        view, target, z_update, theta_update, rng, rows, state, n_samples)
    if block is None and compiled:
        raise TypeError(f"no compiled Firefly loop for {type(bound).__name__} with "
                        f"{type(z_update).__name__} and {type(theta_update).__name__}; pass "
                        "compiled=None (or False) to run the Python loop")
    if block is not None:
        def finish_block(samples, done, wall):
            return Chain(samples, block.stats(done), view.N, wall, None, None, theta, kernel)

        return run_blocks(block, n_samples, finish_block, progress=progress)[0]

    def finish(samples, infos, wall):
        stats = {name: np.array([getattr(info, name) for info in infos])
                 for name in FireflyInfo._fields}
        return Chain(samples, stats, view.N, wall, None, None, theta, kernel)

    return run_chain(lambda s: firefly_step(rng, s, target, update, z_update, rows), state,
                     n_samples, finish, progress=progress)[0]
