"""The one Metropolis-Hastings chain loop, and the chains it returns.

:func:`mh_step` is a pure transition ``(rng, state) -> (state, info)``; :func:`sample` runs
it ``n_samples`` times for any pair of proposal and accept/reject test and collects the
samples and the per-step infos; :func:`sample_chains` runs several chains on independent
random streams through any ``concurrent.futures``-style executor.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .mhtests import AcceptanceTest
from design._lib.checks import as_generator, check_int
from design._lib.rows import IndexSampler
from ._view import check_model
from .proposals import Proposal

__all__ = ["State", "StepInfo", "mh_step", "sample", "sample_chains", "Chain", "Chains"]


class State(NamedTuple):
    """Where the chain is: the point, its log prior, and the proposal's cached state."""

    theta: np.ndarray
    logprior: float
    pstate: Any
    #: Transitions made so far, accepted or not (what step-size schedules are functions of).
    iteration: int = 0


class StepInfo(NamedTuple):
    """What one transition measured."""

    accepted: bool
    #: Data-free log ratio c = log prior ratio + log q ratio (-inf if the prior rejects).
    log_const: float
    #: Rows whose gradient the proposal evaluated.
    n_grad: int
    #: The test's own info (n_used, n_stages, ...).
    test: NamedTuple


def mh_step(rng, state: State, view, test: AcceptanceTest, proposal: Proposal,
            batches: IndexSampler) -> tuple[State, StepInfo]:
    """One Metropolis-Hastings transition with a pluggable accept/reject test.

    A proposal with ``uses_iteration = True`` also receives ``iteration=state.iteration``
    (e.g. for a decaying step size); the returned state counts one more transition.
    """
    if proposal.uses_iteration:
        proposed = proposal.propose(rng, view, batches, state.theta, state.pstate,
                                    iteration=state.iteration)
    else:
        proposed = proposal.propose(rng, view, batches, state.theta, state.pstate)
    theta_new, log_q_ratio, pstate_new, n_grad = proposed
    state = state._replace(iteration=state.iteration + 1)
    lp_new = float(view.logprior(theta_new))
    if not lp_new > -math.inf:
        if math.isnan(lp_new):
            raise ValueError(f"the log prior is NaN at theta_new={theta_new}")
        return state, StepInfo(False, -math.inf, n_grad, test.null_info())
    if lp_new == math.inf or not math.isfinite(log_q_ratio):
        raise ValueError(f"the log prior ({lp_new}) or log proposal ratio ({log_q_ratio}) "
                         f"is not finite at theta_new={theta_new}")
    log_const = lp_new - state.logprior + log_q_ratio
    accepted, tinfo = test.decide(rng, view, batches, state.theta, theta_new, log_const)
    if accepted:
        state = State(theta_new, lp_new, pstate_new, state.iteration)
    return state, StepInfo(bool(accepted), log_const, n_grad, tinfo)


@dataclass(frozen=True)
class Chain:
    """The output of :func:`sample`.

    Attributes
    ----------
    samples : ndarray of shape (n_samples, d)
        The state after each transition (``theta0`` excluded).
    stats : dict of ndarray
        Per-step records: ``accepted``, ``log_const`` (data-free log ratio c), ``n_grad``
        and the test's own fields, at least ``n_used`` (rows the decision read) and
        ``n_stages``.
    N : int
        Number of data rows of the model.
    wall_time : float
        Seconds spent in the chain loop.
    test, proposal
        The test and proposal that produced the chain.
    """

    samples: np.ndarray
    stats: dict
    N: int
    wall_time: float
    test: AcceptanceTest
    proposal: Proposal
    theta0: np.ndarray = field(repr=False)

    @property
    def acceptance_rate(self) -> float:
        return float(np.mean(self.stats["accepted"]))

    @property
    def mean_data_fraction(self) -> float:
        """Average fraction of the N rows a test read per step."""
        return float(np.mean(self.stats["n_used"])) / self.N

    def to_arviz(self, var_name: str = "theta"):
        """ArviZ InferenceData: ``posterior[var_name]`` and the per-step stats as sample stats."""
        return Chains((self,)).to_arviz(var_name)

    def __str__(self):
        used = self.stats["n_used"]
        return (
            f"Chain of {self.samples.shape[0]} samples of {self.samples.shape[1]} parameter(s), "
            f"{type(self.test).__name__}, {type(self.proposal).__name__}\n"
            f"  acceptance rate {self.acceptance_rate:.3f}\n"
            f"  rows read per step: mean {used.mean():.1f} of N = {self.N} "
            f"({100 * self.mean_data_fraction:.2f}%), median {np.median(used):.0f}, max {used.max()}\n"
            f"  wall time {self.wall_time:.2f} s ({1e3 * self.wall_time / len(used):.3f} ms/step)"
        )


@dataclass(frozen=True)
class Chains:
    """Several chains from :func:`sample_chains` (a tuple of :class:`Chain`)."""

    chains: tuple

    def __len__(self):
        return len(self.chains)

    def __getitem__(self, k) -> Chain:
        return self.chains[k]

    def __iter__(self):
        return iter(self.chains)

    @property
    def N(self) -> int:
        """Number of data rows of the model the chains sampled."""
        return self.chains[0].N

    @property
    def samples(self) -> np.ndarray:
        """Array of shape (n_chains, n_samples, d)."""
        return np.stack([c.samples for c in self.chains])

    @property
    def stats(self) -> dict:
        """Per-step stats stacked to shape (n_chains, n_samples)."""
        return {k: np.stack([c.stats[k] for c in self.chains]) for k in self.chains[0].stats}

    def to_arviz(self, var_name: str = "theta"):
        """ArviZ InferenceData with one chain per element, for ESS, R-hat and plots."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            import arviz as az
        first = self.chains[0]
        return az.from_dict(
            posterior={var_name: self.samples},
            sample_stats=self.stats,
            dims={var_name: [f"{var_name}_dim"]},
            attrs={
                "test": repr(first.test),
                "proposal": repr(first.proposal),
                "N": first.N,
                "wall_time": [c.wall_time for c in self.chains],
            },
        )


def _progress(i, n, t0, stream=sys.stderr):
    done = (i + 1) / n
    rate = (i + 1) / max(time.perf_counter() - t0, 1e-9)
    bar = "#" * int(30 * done)
    stream.write(f"\r  sampling [{bar:<30}] {100 * done:5.1f}% {i + 1}/{n} {rate:8.1f} it/s")
    if i + 1 == n:
        stream.write("\n")
    stream.flush()


def run_chain(step, state, n_samples: int, *, progress=False):
    """Run ``state, info = step(state)`` ``n_samples`` times: the one chain loop of the toolkit.

    ``state`` has a ``theta`` field. Returns ``(samples, infos, wall_time)``: the theta after
    each step (array of shape (n_samples, d)), the list of infos and the seconds spent.
    """
    samples = np.empty((n_samples, np.shape(state.theta)[0]))
    infos = []
    t0 = time.perf_counter()
    next_report = t0
    for i in range(n_samples):
        state, info = step(state)
        samples[i] = state.theta
        infos.append(info)
        if progress and (time.perf_counter() >= next_report or i + 1 == n_samples):
            _progress(i, n_samples, t0)
            next_report = time.perf_counter() + 0.5
    return samples, infos, time.perf_counter() - t0


def sample(model, test, proposal, theta0, n_samples, rng=None, *, progress=False) -> Chain:
    """Run one Metropolis-Hastings chain with the given accept/reject test.

    Parameters
    ----------
    model : Model
        Any object following the :class:`~samplers.models.Model` protocol.
    test : AcceptanceTest
        :class:`ExactTest`, :class:`AustereTest`, :class:`ConfidenceTest`, ...
    proposal : Proposal
        :class:`RandomWalk` or :class:`Langevin`.
    theta0 : array_like of shape (d,)
        Starting point; the log prior and the log-likelihood must be finite there.
    n_samples : int
        Number of transitions.
    rng : None, int or numpy.random.Generator
        Equal seeds give identical chains.
    progress : bool
        Print a progress bar to stderr (it never changes the result).

    Returns
    -------
    Chain

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import AustereTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 10_000))
    >>> chain = sample(model, AustereTest(m=500, epsilon=0.05), RandomWalk(0.01), [1.0], 500,
    ...                rng=42)
    >>> chain.samples.shape
    (500, 1)
    >>> bool(np.array_equal(chain.samples, sample(model, AustereTest(m=500, epsilon=0.05),
    ...      RandomWalk(0.01), [1.0], 500, rng=42).samples))
    True
    """
    if not isinstance(test, AcceptanceTest):
        raise TypeError(f"test must be an AcceptanceTest (ExactTest, AustereTest, ...), "
                        f"got {type(test).__name__}")
    if not isinstance(proposal, Proposal):
        raise TypeError(f"proposal must be a Proposal (RandomWalk, Langevin), "
                        f"got {type(proposal).__name__}")
    if not (proposal.has_q_ratio or test.accepts_all):
        raise TypeError(f"{type(proposal).__name__} has no reverse proposal density, so only "
                        f"AcceptAll can follow it, not {type(test).__name__}; use "
                        "Langevin(step_size, batch_size) for a corrected SGLD step")
    n_samples = check_int("n_samples", n_samples, low=1)
    rng = as_generator(rng)
    view, theta = check_model(model, theta0)
    if test.needs_gradients and view.grad is None:
        raise TypeError(f"{type(test).__name__} needs model.grad_loglik; "
                        f"{type(model).__name__} does not provide it")
    test.check(view)
    proposal.check(view)

    batches = IndexSampler(view.N, rng)
    state = State(theta, float(view.logprior(theta)), proposal.init(view, theta))
    samples, infos, wall = run_chain(
        lambda s: mh_step(rng, s, view, test, proposal, batches), state, n_samples, progress=progress
    )

    stats = {
        "accepted": np.fromiter((s.accepted for s in infos), bool, n_samples),
        "log_const": np.fromiter((s.log_const for s in infos), float, n_samples),
        "n_grad": np.fromiter((s.n_grad for s in infos), np.int64, n_samples),
    }
    for name in type(infos[0].test)._fields:
        stats[name] = np.array([getattr(s.test, name) for s in infos])
    return Chain(samples, stats, view.N, wall, test, proposal, theta)


def sample_chains(model, test, proposal, theta0, n_samples, n_chains=4, rng=None, *,
                  executor=None) -> Chains:
    """Run ``n_chains`` independent chains, each on its own stream ``rng.spawn(n_chains)[k]``.

    Parameters
    ----------
    theta0 : array_like of shape (d,) or (n_chains, d)
        One starting point for all chains, or one per chain.
    executor : concurrent.futures.Executor, optional
        Anything with ``submit(fn, *args)`` returning futures with ``result()``: a thread or
        process pool, or a cluster executor such as ``dask.distributed.Client.get_executor()``.
        Defaults to a process pool with ``min(n_chains, os.cpu_count())`` workers. Models
        whose data are memmaps are sent to workers as references to their files.

    Returns
    -------
    Chains

    Examples
    --------
    >>> import numpy as np
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from samplers import ExactTest, GaussianMean, RandomWalk, sample_chains
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 1000))
    >>> with ThreadPoolExecutor(2) as pool:
    ...     chains = sample_chains(model, ExactTest(), RandomWalk(0.05), [1.0], 100,
    ...                            n_chains=2, rng=7, executor=pool)
    >>> chains.samples.shape
    (2, 100, 1)
    """
    n_chains = check_int("n_chains", n_chains, low=1)
    n_samples = check_int("n_samples", n_samples, low=1)
    rng = as_generator(rng)
    starts = np.asarray(theta0, dtype=float)
    if starts.ndim == 2:
        if starts.shape[0] != n_chains:
            raise ValueError(f"theta0 of shape {starts.shape} must have one row per chain "
                             f"({n_chains})")
    else:
        starts = np.broadcast_to(starts.reshape(-1), (n_chains, starts.size))
    for start in starts:  # refuse a bad model or start here, before any worker runs
        check_model(model, start)
    streams = rng.spawn(n_chains)
    own = executor is None
    if own:
        executor = ProcessPoolExecutor(max_workers=min(n_chains, os.cpu_count() or 1))
    try:
        futures = [executor.submit(sample, model, test, proposal, starts[k].copy(), n_samples,
                                   streams[k]) for k in range(n_chains)]
        return Chains(tuple(f.result() for f in futures))
    finally:
        if own:
            executor.shutdown()
