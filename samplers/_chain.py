"""The one Metropolis-Hastings chain loop, and the chains it returns.

:func:`mh_step` is a pure transition ``(rng, state) -> (state, info)``; :func:`sample` runs
it ``n_samples`` times for any pair of proposal and accept/reject test and collects the
samples and the per-step infos; :func:`sample_chains` runs several chains on independent
random streams through any ``concurrent.futures``-style executor.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Any, NamedTuple

import numpy as np

from .mhtests import AcceptanceTest
from design._lib.checks import as_generator, check_int
from design._lib.interrupts import HeldInterrupt, caused_by_interrupt
from design._lib.rows import ROW_DRAWS, IndexSampler
from design._lib.progress import compile_notice, progress_bar, progress_enabled
from design._lib.summary import short_array, short_repr
from ._blocks import Block, compiled_parts, mh_block
from ._rowfeed import chain_feed
from ._view import check_model
from .proposals import Proposal

__all__ = ["State", "StepInfo", "mh_step", "sample", "sample_chains", "Chain", "Chains",
           "ChainInterrupted", "BiasWarning"]


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
        The test and proposal that produced the chain (None for a sampler whose step is
        not one proposal and one accept/reject test: see ``kernel``).
    kernel
        What made each step when it is not a test and a proposal, e.g. Firefly's
        :class:`~samplers.FireflyKernel` (its bound, z-update and theta-update); None
        otherwise.
    store_reads
        For a chain whose rows were read from a store (zarr, HDF5, a user's row source),
        what it read (``FeedStats``: rows handed out, rows fetched ahead and on demand, read
        calls, releases); None for data in memory.
    """

    samples: np.ndarray
    stats: dict
    N: int
    wall_time: float
    test: AcceptanceTest | None
    proposal: Proposal | None
    theta0: np.ndarray = field(repr=False)
    kernel: Any = field(default=None, repr=False)
    store_reads: Any = field(default=None, repr=False)

    def _made_by(self) -> str:
        if self.kernel is not None:
            return f"kernel={short_repr(self.kernel)}"
        return f"test={short_repr(self.test)}, proposal={short_repr(self.proposal)}"

    def _made_by_names(self) -> str:
        if self.kernel is not None:   # e.g. FireflyKernel(JaakkolaJordanBound, ImplicitZ, ...)
            parts = self.kernel if isinstance(self.kernel, tuple) else ()
            return f"{type(self.kernel).__name__}({', '.join(type(p).__name__ for p in parts)})"
        return f"{type(self.test).__name__}, {type(self.proposal).__name__}"

    @property
    def acceptance_rate(self) -> float:
        return float(np.mean(self.stats["accepted"]))

    @property
    def mean_data_fraction(self) -> float:
        """Average fraction of the N rows a test read per step."""
        return float(np.mean(self.stats["n_used"])) / self.N

    @cached_property
    def acceptance_errors(self):
        """Estimated error ``Delta`` (approximate minus exact acceptance probability) of each
        decision the chain made, from what the decision computed; None for a test without
        an estimate (see ``test.decision_errors``; :class:`AustereTest`: Korattikara et
        al.'s Eq. 6 with the design's dynamic programme at the decision's mean and sd of
        the l_i). Computed on first use, O(steps)."""
        estimate = getattr(self.test, "decision_errors", None)   # FlyMC: test is None
        errors = None if estimate is None else estimate(self.stats, self.N)
        return None if errors is None else np.asarray(errors, dtype=float)

    @property
    def running_error(self):
        """Running mean of ``|Delta|`` over the decisions so far (array over steps), the
        quantity an average-error design bounds by its tolerance; None without estimates.
        :func:`validation.bias_monitor` adds a bound on the stationary error."""
        errors = self.acceptance_errors
        if errors is None:
            return None
        return np.cumsum(np.abs(errors)) / np.arange(1, errors.shape[0] + 1)

    @property
    def acceptance_error_se(self):
        """Monte Carlo standard error of the final :attr:`running_error` (batch means over
        ``floor(sqrt(steps))``-step batches, which allows for the decisions' correlation
        along the chain); None without estimates, NaN with fewer than 4 steps."""
        errors = self.acceptance_errors
        if errors is None:
            return None
        return batch_means_se(np.abs(errors))

    @property
    def bias_exceeded(self) -> bool:
        """Whether the estimated mean error exceeds the test's design tolerance by more than
        :data:`WARN_MARGIN_Z` = 2 standard errors (when the chain warns,
        :class:`BiasWarning`); False without a tolerance or estimates, and for chains of
        fewer than 4 decisions."""
        running = self.running_error
        if running is None or running.shape[0] == 0:
            return False
        return bias_exceeds(float(running[-1]), self.acceptance_error_se,
                            getattr(self.test, "tolerance", None))

    def check_bias(self) -> "Chain":
        """The bias check :func:`sample` runs after its loop (a :class:`BiasWarning` when
        :attr:`bias_exceeded`), for a chain sampled with ``bias_check=False``: e.g. once on
        chains joined from several rounds. Returns the chain; a Ctrl-C ends the check (with
        a :class:`ChainInterrupted` warning). The estimates stay cached on the chain
        (:attr:`acceptance_errors`), so ``to_arviz`` does not compute them again."""
        return check_bias(self)

    def to_arviz(self, var_name: str = "theta", names=None, *, model=None, progress=None):
        """ArviZ data: ``posterior[var_name]`` and the per-step stats as sample stats.

        See :meth:`Chains.to_arviz`.
        """
        return Chains((self,)).to_arviz(var_name, names, model=model, progress=progress)

    def __repr__(self):
        n, d = self.samples.shape
        return (f"Chain(n_samples={n}, d={d}, N={self.N}, {self._made_by()}, "
                f"acceptance_rate={self.acceptance_rate:.3f}, "
                f"mean_data_fraction={self.mean_data_fraction:.4g}, "
                f"wall_time={self.wall_time:.3g})")

    def __str__(self):
        used = self.stats["n_used"]
        return (
            f"Chain of {self.samples.shape[0]} samples of {self.samples.shape[1]} parameter(s), "
            f"{self._made_by_names()}\n"
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

    def __repr__(self):
        first = self.chains[0]
        n, d = first.samples.shape
        return (f"Chains(n_chains={len(self)}, n_samples={n}, d={d}, N={first.N}, "
                f"{first._made_by()})")

    def __str__(self):
        first = self.chains[0]
        n, d = first.samples.shape
        used = self.stats["n_used"]
        lines = [
            f"{len(self)} chains of {n} samples of {d} parameter(s), "
            f"{first._made_by_names()}",
            f"  acceptance rate {np.mean(self.stats['accepted']):.3f} over all chains",
            f"  rows read per step: mean {used.mean():.1f} of N = {first.N} "
            f"({100 * used.mean() / first.N:.2f}%)",
            f"  wall time per chain {min(c.wall_time for c in self):.2f}-"
            f"{max(c.wall_time for c in self):.2f} s",
            "  chain  accept  rows/step      mean of theta[0..]",
        ]
        for k, c in enumerate(self.chains):
            lines.append(f"  {k:>5}  {c.acceptance_rate:6.3f}  {c.stats['n_used'].mean():9.1f}  "
                         f"{short_array(c.samples.mean(axis=0))}")
        return "\n".join(lines)

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

    def _bias_attrs(self) -> dict:
        """The bias monitor's summary for the ArviZ attributes (empty without estimates)."""
        errors = [c.acceptance_errors for c in self.chains]
        if any(e is None for e in errors):
            return {}
        out = {"acceptance_error_mean": [float(np.mean(np.abs(e))) for e in errors]}
        tolerance = getattr(self.chains[0].test, "tolerance", None)
        if tolerance is not None:
            out["design_tolerance"] = float(tolerance)
        return out

    def to_arviz(self, var_name: str = "theta", names=None, *, model=None, progress=None):
        """ArviZ data with one chain per element, for ESS, R-hat, MCSE and plots.

        Parameters
        ----------
        var_name : str
            Name of the posterior variable.
        names : sequence of str, optional
            Parameter names, the coordinates of dimension ``<var_name>_dim`` (default
            ``0 .. d-1``).
        model : Model, optional
            The model the chains sampled. If given, ``sample_stats`` gains ``lp``, the exact
            unnormalised log posterior at every draw (:func:`samplers.log_posterior`: one
            chunked O(N) pass per distinct draw, after sampling; the chain itself never
            reads all rows). Without it there is no ``lp``.
        progress : bool or None
            Progress bar for the ``lp`` passes; None (default): only on a terminal.

        Returns
        -------
        arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
            ``posterior[var_name]`` with dims ``(chain, draw, <var_name>_dim)``;
            ``sample_stats`` holds the per-step records (``accepted``, ``n_used``, the
            test's info fields, ...); attrs ``test``, ``proposal``, ``N``, ``wall_time``,
            and for tests with an error estimate (:attr:`Chain.acceptance_errors`)
            ``acceptance_error_mean`` (mean ``|Delta|`` per chain) and, if the test was
            made from a design, ``design_tolerance``.
            With ArviZ 0.23 and NumPy >= 2.4 the first call switches ArviZ's numba
            acceleration off (its ``mcse(method="sd")`` fails there; see
            ``samplers/_arviz.py``).
        """
        from ._arviz import check_names, to_inference_data

        check_names(var_name, names)    # before the log posterior's O(N) passes
        first = self.chains[0]
        stats = self.stats
        if model is not None:
            from ._lp import log_posterior

            if getattr(model, "N", None) != first.N:
                raise ValueError(f"model must be the model the chains sampled: it has "
                                 f"N = {getattr(model, 'N', None)!r} rows, the chains {first.N}")
            stats["lp"] = log_posterior(model, self.samples, progress=progress)
        return to_inference_data(
            self.samples, stats, var_name=var_name, names=names,
            attrs={
                **({"kernel": repr(first.kernel)} if first.kernel is not None else
                   {"test": repr(first.test), "proposal": repr(first.proposal)}),
                "N": first.N,
                "wall_time": [c.wall_time for c in self.chains],
                **self._bias_attrs(),
            },
        )


class BiasWarning(UserWarning):
    """Warned when a chain's estimated mean error exceeds its test's design tolerance."""


#: A chain warns when its estimated mean error exceeds the design tolerance by more than this
#: many of its standard errors (a design exactly at its tolerance warns with probability
#: about 0.02; the same margin as ``validation.acceptance_check``'s verdict).
WARN_MARGIN_Z = 2.0


def batch_means_se(x) -> float:
    """Standard error of the mean of a series by batch means (``floor(sqrt(n))`` per batch)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    if n < 4:
        return math.nan
    size = int(math.isqrt(n))
    k = n // size
    means = x[n - k * size:].reshape(k, size).mean(axis=1)
    return float(np.std(means, ddof=1) / math.sqrt(k))


def bias_exceeds(mean_error, se, tolerance) -> bool:
    """Whether a chain's estimated mean error exceeds ``tolerance`` by more than
    :data:`WARN_MARGIN_Z` standard errors; False when ``se`` is NaN (fewer than 4 decisions:
    too few to tell bias from noise, e.g. the 2-step chain that compiles a block)."""
    if tolerance is None or se is None or not math.isfinite(se):
        return False
    return bool(mean_error > tolerance + WARN_MARGIN_Z * se)


def warn_if_biased(chain, stacklevel=3):
    """Warn (:class:`BiasWarning`) if the test records a design tolerance and the chain's
    estimated mean ``|Delta|`` exceeds it by more than :data:`WARN_MARGIN_Z` standard errors."""
    tolerance = getattr(chain.test, "tolerance", None)
    if tolerance is None:
        return
    if not chain.bias_exceeded:
        return
    running, se = chain.running_error, chain.acceptance_error_se
    warnings.warn(f"the estimated mean error of this chain's accept/reject decisions, "
                  f"{running[-1]:.3g} (standard error {se:.2g}), exceeds the tolerance "
                  f"{tolerance:g} its test was designed for ({short_repr(chain.test)}); see "
                  "chain.acceptance_errors and validation.bias_monitor(chain)", BiasWarning,
                  stacklevel=stacklevel)


class ChainInterrupted(UserWarning):
    """Warned when Ctrl-C stops a chain: the samples drawn so far are returned."""


def _describe_failure(exc, step, n_samples, theta, partial):
    """Attach where a chain failed to ``exc`` (attributes, and a note on Python >= 3.11)."""
    try:
        exc.step = step
        exc.theta = np.array(theta, copy=True)
        exc.partial_chain = partial
    except AttributeError:   # an exception type with __slots__: leave it as it is
        return
    if hasattr(exc, "add_note"):
        kept = "no completed step" if partial is None else (
            f"the {step} completed steps are in exc.partial_chain")
        exc.add_note(f"raised in step {step + 1} of {n_samples} of the chain, at theta = "
                     f"{np.array2string(np.asarray(theta), threshold=8, precision=6)}; {kept}")


def _interrupted(done, n_samples):
    """A Ctrl-C ended a loop after ``done`` steps: warn, or re-raise it if no step was made.
    (Called in the loop's ``except`` clause: a bare ``raise`` re-raises the interrupt.)"""
    if not done:
        raise KeyboardInterrupt
    warnings.warn(f"interrupted after {done} of {n_samples} steps: returning the {done} "
                  "samples drawn so far", ChainInterrupted, stacklevel=4)


def run_chain(step, state, n_samples: int, finish, *, progress=None, desc="sampling"):
    """Run ``state, info = step(state)`` ``n_samples`` times: the one chain loop of the toolkit.

    ``state`` has a ``theta`` field. Returns ``(chain, interrupted)``: ``chain =
    finish(samples, infos, wall_time)`` of the steps made (the theta after each step, an
    array of shape (steps, d); the list of infos; the seconds spent) and whether a Ctrl-C
    came (the caller then returns the chain without further work).

    Ctrl-C (``KeyboardInterrupt``) ends the loop early, when the step it came in ends (a
    second Ctrl-C: as soon as Python code runs again, except in a worker of
    :func:`sample_chains`' pool, where only the first counts and a step that hangs is ended
    by the pool terminating the worker): the chain of the completed steps is returned
    (fewer than ``n_samples``) with a :class:`ChainInterrupted` warning; with no completed
    step the interrupt propagates. One hold (:class:`HeldInterrupt`) spans the loop, the
    closing of the bar and ``finish`` (O(steps) array copies, well under a second at 10^6
    steps), so a Ctrl-C after the last step does not cost the chain: it is held until the
    chain is made, which is then returned with the warning (only the few bytecodes after the
    hold's release, the rest of its ``__exit__`` and the returns, where Python runs the
    handler, are not covered). Any other exception propagates with attributes ``step``
    (completed steps), ``theta`` (the state it was raised from) and ``partial_chain``
    (``finish(samples, infos, wall_time)`` of the completed steps, or None).
    """
    samples = np.empty((n_samples, np.shape(state.theta)[0]))
    infos = []
    t0 = time.perf_counter()
    stopped = False
    # Ctrl-C is taken between steps, not inside one: a KeyboardInterrupt raised while a
    # compiled test driver boxes the arrays it returns could crash the process (a segfault,
    # about 1 in 10 presses on the Python loop before this). A second Ctrl-C interrupts as
    # soon as Python code runs again, for a step that runs long (that press takes the old
    # risk: the user asked twice); after the loop every Ctrl-C is held.
    with HeldInterrupt(second_raises=True) as held:
        with progress_bar(n_samples, desc=desc, progress=progress) as bar:
            try:
                if _INTERRUPTED:     # a pool worker's Ctrl-C before the loop (_on_interrupt)
                    raise KeyboardInterrupt
                for i in range(n_samples):
                    state, info = step(state)
                    samples[i] = state.theta
                    infos.append(info)
                    bar.update()
                    if held.pending:
                        raise KeyboardInterrupt
                held.second_raises = False
            except KeyboardInterrupt:
                held.second_raises = False
                stopped = True
                _interrupted(len(infos), n_samples)
            except Exception as exc:
                held.second_raises = False
                if caused_by_interrupt(exc):   # a Ctrl-C that reached a compiled call's boxing
                    stopped = True
                    _interrupted(len(infos), n_samples)
                else:
                    wall = time.perf_counter() - t0
                    partial = None
                    if infos:
                        partial = finish(samples[:len(infos)].copy(), infos, wall)
                    _describe_failure(exc, len(infos), n_samples, state.theta, partial)
                    raise
        done = len(infos)
        chain = finish(samples[:done] if done < n_samples else samples, infos,
                       time.perf_counter() - t0)
    return chain, _interrupted_after(chain, held.pending, stopped)


#: Steps of the first compiled block; later blocks are sized to take about BLOCK_SECONDS.
FIRST_BLOCK = 16
BLOCK_SECONDS = 0.05


def run_blocks(block, n_samples: int, finish, *, progress=None, desc="sampling"):
    """Run a compiled chain (:class:`samplers._blocks.Block`) block by block.

    Returns ``(chain, interrupted)`` with ``chain = finish(samples, done, wall_time)`` of the
    steps run. The same contract as :func:`run_chain`, between blocks: the bar advances after
    each block; Ctrl-C is held until the block it came in ends (a block of the first run
    also compiles the kernels: a first Ctrl-C then waits for the compiler, a second one
    raises at once) and ends the chain with the steps of the completed blocks (a
    :class:`ChainInterrupted` warning; with none completed the interrupt propagates); the
    hold spans the loop, the closing of the bar and ``finish``; another exception propagates
    with ``step``, ``theta`` and ``partial_chain`` (``finish(samples, done, wall_time)``)
    attached. Blocks start at ``FIRST_BLOCK`` steps and are then sized to take about
    ``BLOCK_SECONDS``, so Ctrl-C is honoured within a fraction of a second; the chain does
    not depend on the block sizes.
    """
    samples = np.empty((n_samples, np.shape(block.theta)[0]))
    t0 = time.perf_counter()
    done, size = 0, FIRST_BLOCK
    stopped = False
    with HeldInterrupt(second_raises=True) as held:
        with progress_bar(n_samples, desc=desc, progress=progress) as bar:
            try:
                if _INTERRUPTED:     # a pool worker's Ctrl-C before the loop (_on_interrupt)
                    raise KeyboardInterrupt
                while done < n_samples:
                    stop = min(n_samples, done + size)
                    tb = time.perf_counter()
                    try:
                        block.run(done, stop, samples)
                    except SystemError as exc:
                        # A second Ctrl-C raised while a compiled block boxes what it
                        # returns (an array: numba calls back into Python to unpickle its
                        # dtype) comes out as a SystemError caused by the KeyboardInterrupt:
                        # it is the interrupt.
                        if caused_by_interrupt(exc):
                            raise KeyboardInterrupt from None
                        raise
                    elapsed = time.perf_counter() - tb
                    bar.update(stop - done)
                    done = stop
                    if held.pending:
                        raise KeyboardInterrupt
                    size = max(1, min(4 * size, int(size * BLOCK_SECONDS / max(elapsed, 1e-6))))
                held.second_raises = False
            except KeyboardInterrupt:
                held.second_raises = False
                stopped = True
                _interrupted(done, n_samples)
            except Exception as exc:
                held.second_raises = False
                done = block.done
                wall = time.perf_counter() - t0
                partial = None
                if done:
                    partial = finish(samples[:done].copy(), done, wall)
                _describe_failure(exc, done, n_samples, block.theta, partial)
                raise
        chain = finish(samples[:done] if done < n_samples else samples, done,
                       time.perf_counter() - t0)
    return chain, _interrupted_after(chain, held.pending, stopped)


def _interrupted_after(chain, pending, stopped):
    """Whether a Ctrl-C came in a loop's hold (``pending``, read after the hold is released,
    so that none it took is missed; ``stopped``: one ended the loop early and was warned
    about). One that came after the loop's last step, while the chain's records were
    assembled, gives a :class:`ChainInterrupted` warning. Either way the caller returns the
    chain without further work."""
    if pending and not stopped:
        warnings.warn(f"interrupted after the chain's {chain.samples.shape[0]} steps, while "
                      "its records were assembled: returning the chain; no check was run on "
                      "it", ChainInterrupted, stacklevel=4)
    return stopped or pending


def check_bias(chain, interrupted=False):
    """Run the post-loop bias check (:func:`warn_if_biased`) on a chain a loop made
    (:func:`run_chain`, :func:`run_blocks`) and return the chain; the check never costs the
    chain.

    Skipped when the chain was interrupted (in its loop or while it was made: the user asked
    to stop). A Ctrl-C during the check ends the check: the chain is returned unchecked with
    a :class:`ChainInterrupted` warning (``chain.acceptance_errors`` computes the estimate
    when asked)."""
    if interrupted:
        return chain
    try:
        warn_if_biased(chain, stacklevel=4)
    except KeyboardInterrupt:
        warnings.warn(f"interrupted during the bias check after the chain: returning its "
                      f"{chain.samples.shape[0]} samples unchecked (chain.acceptance_errors "
                      "or validation.bias_monitor(chain) computes the estimate when asked)",
                      ChainInterrupted, stacklevel=3)
    return chain


def sample(model, test, proposal, theta0, n_samples, rng=None, *, progress=None,
           compiled=None, row_draws="shared", bias_check=True) -> Chain:
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
    progress : bool or None
        Show a progress bar (tqdm) on stderr; None (default): only if stderr is a terminal.
        It never changes the result. While numba compiles a kernel for the first time a
        one-line notice is printed under the same condition.
    compiled : bool or None
        Which chain loop runs. None (default): the compiled block loop when there is one for
        this model, test and proposal, else the Python loop; False: the Python loop (the
        reference); True: the compiled loop or a TypeError. Decided once, before the first
        step; both loops give the same chain for the same seed (see Notes).
    row_draws : {"shared", "keyed"}
        Where the uniforms that pick a decision's rows come from. ``"shared"`` (default):
        the chain's Generator, between its other draws, so a chain is the same on any data
        source and equals the chains of earlier versions. ``"keyed"``: a counter-based
        stream of the chain's row order (``design._lib.rows``; keyed by two words drawn from
        ``rng`` at the start), so the rows of every later decision are known in advance: a
        chain on a store fetches exactly those, in long sorted reads, which makes its steps
        several times cheaper on data much larger than the feed's memory. Either choice
        gives a valid chain and equal seeds give identical chains; a keyed chain on a store
        equals the keyed chain on the same rows in memory, not the shared one.
    bias_check : bool
        Run the bias check after the loop (default). False leaves it to the caller, who
        calls :meth:`Chain.check_bias` once on the chain it keeps (a chain extended in
        rounds, as ``validation.fit`` does, is then checked once, joined, not per round). It
        never changes the samples.

    Returns
    -------
    Chain
        On Ctrl-C the chain so far (fewer samples, with a :class:`ChainInterrupted`
        warning). A Ctrl-C after the loop keeps the samples too: the loop's hold lasts until
        the chain's records are assembled, and the whole chain is returned (with the
        warning); during the bias check that follows (the estimated error of the decisions,
        for a test made from a design; seconds at 10^5 steps) it ends the check and the
        chain is returned unchecked (with the warning). After an interrupted loop the check
        is skipped. Only a Ctrl-C before the first step completes raises
        ``KeyboardInterrupt``, and one in the few bytecodes Python runs outside both (the
        hold's release and the calls and returns around the check) still does.

    Raises
    ------
    Exception
        An exception raised by the model (or the test) mid-chain propagates with attributes
        ``step``, ``theta`` and ``partial_chain`` (the :class:`Chain` of the completed
        steps).

    Notes
    -----
    The compiled loop (``samplers/_blocks.py``) runs blocks of steps in one numba call when
    the model, the proposal and the test each hand over their compiled parts
    (``model.block_parts``, ``proposal.compiled_move``, ``test.compiled_decision``): built-in
    models with a built-in prior, and :class:`~samplers.ControlVariates` around a built-in
    GLM; ``RandomWalk``, ``Independence``, minibatch ``Langevin`` and ``SGLD``; every
    sequential test (``AustereTest``, ``FPCNormalTest``, ``BarkerTest``, ``ConfidenceTest``
    with the model's range or a full-data scan), ``ExactTest`` (N up to one chunk,
    ``FULL_CHUNK`` rows), ``TunaMHTest`` without a proxy and ``AcceptAll``. Otherwise (a
    user's model or prior, full-gradient Langevin, SMH and MH-SS, ...) ``mh_step`` runs once
    per step on the Python loop, and with progress output on ``sample`` says so once, naming
    the missing part. Both draw the same random numbers in the same order and compute with
    the same arithmetic, so equal seeds give bit-identical chains on either loop; progress
    and Ctrl-C are handled between blocks.

    On a model whose rows are in a store (zarr, HDF5, a :class:`~samplers.sources.RowSource`)
    a chain whose test and proposal read rows only from the chain's row order (the
    sequential tests with a model range; random-walk, independence and minibatch Langevin
    proposals; SGLD) fetches its rows ahead, in sorted reads, into memory
    (``samplers/_rowfeed.py``): the chain is bit-identical to the chain on the same rows in
    memory, and ``chain.store_reads`` says what was read. Other chains on a store read the
    rows each step needs through the model (``read_rows``).

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
    with compile_notice(progress_enabled(progress)):   # kernels compile at the start
        view, theta = check_model(model, theta0)
        if test.needs_gradients and view.grad is None:
            raise TypeError(f"{type(test).__name__} needs model.grad_loglik; "
                            f"{type(model).__name__} does not provide it")
        test.check(view)
        proposal.check(view)

        if row_draws not in ROW_DRAWS:
            raise ValueError(f"row_draws must be one of {ROW_DRAWS}, got {row_draws!r}")
        batches = IndexSampler(view.N, rng, row_draws)
        state = State(theta, float(view.logprior(theta)), proposal.init(view, theta))
        feed = chain_feed(view, test, proposal, rng, batches)
        if feed is None:
            return _run(view, test, proposal, rng, batches, state, theta, n_samples, None,
                        progress=progress, compiled=compiled, bias_check=bias_check)
        feed.planned = n_samples
        try:   # rows from a store, fetched ahead (samplers/_rowfeed.py)
            return _run(feed.view, test, proposal, rng, batches, state, theta, n_samples,
                        feed, progress=progress, compiled=compiled, bias_check=bias_check)
        finally:
            feed.close()


class FedBlock(Block):
    """A compiled chain on a row feed: each block runs in sub-blocks, the feed fetching the
    rows ahead of each (``RowFeed.prefetch``); the chain does not depend on where the
    sub-blocks end."""

    def __init__(self, block, feed):
        self._block, self._feed = block, feed

    @property
    def theta(self):
        return self._block.theta

    @property
    def done(self):
        return self._block.done

    def run(self, start, stop, samples):
        while start < stop:
            end = min(stop, start + self._feed.steps_ahead(start))
            self._feed.prefetch(end - start)
            self._block.run(start, end, samples)
            start = end

    def stats(self, n):
        return self._block.stats(n)


def _fed_step(step, feed, n_samples):
    """``step`` preceded, every few steps, by ``feed.prefetch`` (the Python loop)."""
    if feed is None:
        return step
    count = [0, 0]   # steps made, step of the next prefetch

    def fed(state):
        if count[0] >= count[1]:
            ahead = min(feed.steps_ahead(count[0]), n_samples - count[0])
            feed.prefetch(ahead)
            count[1] = count[0] + ahead
        count[0] += 1
        return step(state)

    return fed


def _run(view, test, proposal, rng, batches, state, theta, n_samples, feed, *, progress,
         compiled, bias_check=True):
    """The loops of :func:`sample`, after its checks."""
    model = view.model
    block = None
    if compiled is not False:
        parts = compiled_parts(view, test, proposal, state, n_samples)
        block = mh_block(view, test, proposal, rng, batches, state, n_samples, parts)
        if block is None and compiled:
            raise TypeError(f"no compiled chain loop for {type(model).__name__} with "
                            f"{type(test).__name__} and {type(proposal).__name__}: "
                            f"{parts.missing}; pass compiled=None (or False) to run the "
                            "Python loop")
        if block is None:
            python_loop_notice(parts.missing, progress_enabled(progress))
    reads = (lambda: None) if feed is None else feed.stats
    if block is not None:
        if feed is not None:
            block = FedBlock(block, feed)

        def finish_block(samples, done, wall):
            return Chain(samples, block.stats(done), view.N, wall, test, proposal, theta,
                         store_reads=reads())

        chain, interrupted = run_blocks(block, n_samples, finish_block, progress=progress)
        return check_bias(chain, interrupted or not bias_check)

    def finish(samples, infos, wall):
        n = len(infos)
        stats = {
            "accepted": np.fromiter((s.accepted for s in infos), bool, n),
            "log_const": np.fromiter((s.log_const for s in infos), float, n),
            "n_grad": np.fromiter((s.n_grad for s in infos), np.int64, n),
        }
        for name in type(infos[0].test)._fields:
            stats[name] = np.array([getattr(s.test, name) for s in infos])
        return Chain(samples, stats, view.N, wall, test, proposal, theta, store_reads=reads())

    step = _fed_step(lambda s: mh_step(rng, s, view, test, proposal, batches), feed, n_samples)
    chain, interrupted = run_chain(step, state, n_samples, finish, progress=progress)
    return check_bias(chain, interrupted or not bias_check)


def compiled_block(view, test, proposal, rng, batches, state, n_samples):
    """The compiled chain for this model, test and proposal (a :class:`~samplers._blocks.Block`),
    or None for the Python loop."""
    return mh_block(view, test, proposal, rng, batches, state, n_samples)


_python_loop_said = set()


def python_loop_notice(missing: str, enabled: bool) -> None:
    """Say once per process and reason, on stderr (when progress output is on), that a
    chain runs on the Python loop and which compiled part was missing."""
    if not enabled or missing in _python_loop_said:
        return
    _python_loop_said.add(missing)
    from tqdm import tqdm

    tqdm.write(f"sampling on the Python loop (about 100 us per step): {missing}",
               file=sys.stderr)


def sample_chains(model, test, proposal, theta0, n_samples, n_chains=4, rng=None, *,
                  executor=None, progress=None, row_draws="shared", bias_check=True) -> Chains:
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
    progress : bool or None
        A progress bar over the chains; None (default): only if stderr is a terminal.
    row_draws : {"shared", "keyed"}
        Where each chain's row uniforms come from (:func:`sample`).
    bias_check : bool
        Each worker's bias check after its chain (:func:`sample`); False leaves it to the
        caller (:meth:`Chain.check_bias`).

    Returns
    -------
    Chains
        On Ctrl-C (or a chain interrupted in its worker) the chains completed or returned
        within a few seconds, all cut to the shortest, with a :class:`ChainInterrupted`
        warning. Another exception from a chain propagates as in :func:`sample`, carrying
        that chain's ``partial_chain``.

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
    if row_draws not in ROW_DRAWS:
        raise ValueError(f"row_draws must be one of {ROW_DRAWS}, got {row_draws!r}")
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
        executor = _WorkerPool(min(n_chains, os.cpu_count() or 1))
    interrupted = False
    try:
        quiet = partial(sample, progress=False, row_draws=row_draws,   # no bars from workers
                        bias_check=bias_check)
        if own:
            quiet = partial(_in_worker, quiet)
        futures = [executor.submit(quiet, model, test, proposal, starts[k].copy(), n_samples,
                                   streams[k]) for k in range(n_chains)]
        done = []
        with compile_notice(progress_enabled(progress)), \
                progress_bar(n_chains, desc="chains", unit="chain", progress=progress) as bar:
            try:
                for f in futures:
                    done.append(f.result())
                    bar.update()
            except KeyboardInterrupt:
                interrupted = True
                if own:
                    executor.interrupt()
                done += _gather_after_interrupt(futures[len(done):])
        if interrupted and not done:
            raise KeyboardInterrupt
    except KeyboardInterrupt:    # before the wait (or none came back): stop the workers too
        if not interrupted:
            interrupted = True
            if own:
                executor.interrupt()
        raise
    finally:
        if own:
            workers = executor.workers()
            executor.shutdown(wait=not interrupted, cancel_futures=interrupted)
            for proc in workers if interrupted else ():
                if proc.is_alive():     # given up on (a second Ctrl-C), or idle (it only noted one)
                    proc.terminate()
    return _common_length(done, interrupted)


class _WorkerPool(ProcessPoolExecutor):
    """The process pool :func:`sample_chains` makes. Its workers stay in this process's
    group (a terminal's Ctrl-C, or a kill of the group, reaches them as it reaches this
    process), and this process also forwards a Ctrl-C it gets alone (``kill -INT``, a
    notebook's interrupt; :meth:`interrupt`). A worker takes its first Ctrl-C as the
    interrupt of the chain it runs, or of the next one it takes up, and ignores the rest
    (:func:`_on_interrupt`), so that the terminal's and the forwarded copy do not cut the
    chain's wind-down and an idle worker does not die and break the pool.

    Each worker writes its pid into a shared array once its Ctrl-C handler is in place
    (:func:`_worker_setup`): :meth:`workers` are this pool's processes among this process's
    children, and a Ctrl-C is forwarded only to a worker that takes it safely."""

    def __init__(self, workers):
        context = multiprocessing.get_context()
        self._worker_pids = context.Array("q", workers)     # 0: a slot no worker took yet
        super().__init__(max_workers=workers, mp_context=context,
                         initializer=_worker_setup, initargs=(self._worker_pids,))

    def workers(self):
        """This pool's live worker processes (``multiprocessing.Process``)."""
        with self._worker_pids.get_lock():
            pids = set(self._worker_pids[:]) - {0}
        return [proc for proc in multiprocessing.active_children() if proc.pid in pids]

    def interrupt(self):
        """Send SIGINT to the live workers (a Ctrl-C that reached this process alone; one
        that also reached them is taken once)."""
        for proc in self.workers():
            try:
                if proc.is_alive():
                    os.kill(proc.pid, signal.SIGINT)
            except (OSError, ValueError):     # gone meanwhile
                pass


#: Set in a worker of :class:`_WorkerPool` by its first Ctrl-C. A pool serves one
#: :func:`sample_chains` call, so a chain the worker takes up after it stops at once.
_INTERRUPTED = False


def _worker_setup(pids):
    """A worker's initializer: install its Ctrl-C handler, then say its pid (a slot of
    ``pids``), so that no Ctrl-C is forwarded to it before it can take one."""
    global _INTERRUPTED
    _INTERRUPTED = False
    signal.signal(signal.SIGINT, _on_interrupt)
    with pids.get_lock():
        taken = pids[:]
        if 0 in taken:
            pids[taken.index(0)] = os.getpid()


def _on_interrupt(signum, frame):
    """A worker's SIGINT handler, for its whole life. The first Ctrl-C raises
    ``KeyboardInterrupt`` if it lands inside a chain (the chain returns its steps so far);
    if it lands outside one (idle, or a chain just returned) it is only noted, and the next
    chain :func:`_in_worker` is given stops before its first step. Later ones (the
    forwarded copy of a terminal's) are ignored. Where the chain holds a Ctrl-C
    (:class:`HeldInterrupt`: its loop through the assembly of its records) the holder takes
    this handler's place and asks :func:`_take_interrupt`, so the chain stops between steps
    and keeps what it made.

    Inside or outside is read from where the signal landed (the frames under
    :func:`_in_worker`'s call of the chain), not from a flag that ``_in_worker`` sets and
    clears: a Ctrl-C between the chain's return and the clearing would raise in
    ``_in_worker``, losing the finished chain (and the interrupt, for the worker's next
    chain). One landing in ``_in_worker`` before its call of the chain is only noted; the
    chain's loop reads the note before its first step (:func:`run_chain`,
    :func:`run_blocks`) and stops there."""
    if _take_interrupt() and _in_chain(frame):
        raise KeyboardInterrupt


def _take_interrupt():
    """Note a Ctrl-C in this worker; True for its first, the one acted on."""
    global _INTERRUPTED
    first, _INTERRUPTED = not _INTERRUPTED, True
    return first


_on_interrupt.take = _take_interrupt      # how HeldInterrupt asks while it holds Ctrl-C


def _in_chain(frame):
    """Whether ``frame`` runs under :func:`_in_worker`'s call of its chain (a caller of
    ``frame`` is ``_in_worker``; ``frame`` itself being ``_in_worker`` is outside)."""
    frame = None if frame is None else frame.f_back
    while frame is not None:
        if frame.f_code is _in_worker.__code__:
            return True
        frame = frame.f_back
    return False


def _in_worker(fn, *args):
    """Run the chain ``fn(*args)`` in a worker of :class:`_WorkerPool`: it takes a Ctrl-C
    as in the main process and returns the steps so far (:func:`_on_interrupt`); after a
    Ctrl-C this worker already had, it raises ``KeyboardInterrupt`` without a step."""
    if _INTERRUPTED:
        raise KeyboardInterrupt
    return fn(*args)


def _gather_after_interrupt(futures):
    """After Ctrl-C: the chains the interrupted workers send back (each stops between steps
    and returns its partial chain). Chains not started yet are cancelled; the others are
    waited for, however long a loaded machine (or a cold cache's compilation in a chain's
    finish) makes them take, until a second Ctrl-C, which gives up on those still out."""
    for f in futures:
        if hasattr(f, "cancel"):
            f.cancel()                  # only those not running yet: nothing to keep there
    out = []
    try:
        for f in futures:
            try:
                out.append(f.result())
            except KeyboardInterrupt:
                raise
            except BaseException:       # cancelled or failed: nothing to keep
                pass
    except KeyboardInterrupt:           # pressed again: the user does not want to wait
        for f in futures:
            if hasattr(f, "cancel"):
                f.cancel()
    return out


def _common_length(chains, interrupted) -> Chains:
    """Cut interrupted chains to the shortest, with a warning, so that they stack."""
    n = min(c.samples.shape[0] for c in chains)
    if interrupted or any(c.samples.shape[0] != n for c in chains):
        warnings.warn(f"interrupted: returning {len(chains)} chain(s) cut to the {n} steps "
                      "every one of them completed", ChainInterrupted, stacklevel=3)
        chains = [c if c.samples.shape[0] == n else replace(
            c, samples=c.samples[:n], stats={k: v[:n] for k, v in c.stats.items()})
            for c in chains]                 # kernel, store_reads kept (what the chain read)
    return Chains(tuple(chains))
