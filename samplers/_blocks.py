"""The compiled chain loop: a block of steps in one numba call, from the objects' own parts.

:func:`samplers._chain.run_chain` calls Python once per step (the proposal, the prior, the
test and the bookkeeping each a few Python calls): about 100 us per step, far more than the
~100 rows a subsampling step reads. When the model, the proposal and the test each hand over
their compiled parts, the whole step (rows, gradient, move, prior, decision, the recorded
infos) is compiled, and :func:`samplers._chain.run_blocks` runs blocks of steps in one call
each, updating the progress bar and catching Ctrl-C between blocks.

The runner asks, it does not switch
-----------------------------------
:func:`mh_block` asks three objects, once per chain, in this order:

* the model: ``model.block_parts(view)`` -> :class:`~samplers.models.compiled.BlockModel`
  (its kernel data, prior kernel, per-decision data and gradient kernel;
  :meth:`samplers.models.BaseModel.block_parts`, :class:`~samplers.ControlVariates`);
* the proposal: ``proposal.compiled_move(view, model, state, n_samples)`` ->
  :class:`~samplers.proposals.Move` (a jitted ``propose`` and its parameters;
  :class:`~samplers.RandomWalk`, :class:`~samplers.Langevin` with a minibatch,
  :class:`~samplers.Independence`, :class:`~samplers.SGLD`);
* the test: ``test.compiled_decision(view)`` -> :class:`~samplers.mhtests.compiled.Decision`
  (a jitted ``decide``, its settings and the Python callbacks for its pauses and errors;
  every sequential test gets one generated from its rule, epilogue and info kernel by
  :class:`~samplers.mhtests.SequentialTest`, the exact test, TunaMH and ``AcceptAll`` write
  their own in their modules).

Any None means the Python loop, and :func:`compiled_parts` names which part was missing
(``sample(..., compiled=True)`` raises with it). The statuses the parts return are defined
in :mod:`samplers.mhtests.status`. Nothing here names a model, proposal or test class.

Bit-identical to the Python loop
--------------------------------
Each compiled part is the Python step written with the same arithmetic and the same draws
in the same order: the Generator is handed to the compiled block (numba's
``Generator.random`` and ``standard_normal`` are bit-compatible with NumPy's), rows come
from :func:`design._lib.rows.draw_rows` on the sampler's own order (as
``IndexSampler.take``), gradients from the model's batch kernel summed row by row (as
``grads.sum(axis=0)``, :func:`samplers.proposals.row_sums`), priors from the shared kernels
:func:`samplers.priors.prior_logpdf` and :func:`samplers.priors.prior_grad`. A sequential
test's decision runs the engine's compiled driver, the very function its Python ``decide``
runs on a compiled model. ``tests/samplers/test_blocks.py`` checks equal chains on both
loops for every compiled combination, and that a chain interrupted by Ctrl-C keeps its
completed blocks. (A block returns scalars and tuples of scalars only: boxing a returned
array runs Python code inside the compiled call, where a Ctrl-C would surface as a
SystemError; buffers the block regrows live in a structref, :class:`Buffer`.)

A step, and what the block hands back to Python
-----------------------------------------------
``propose`` writes theta_new; the block evaluates the prior there (NaN: PRIOR_NAN, +inf or
a non-finite log proposal ratio: PRIOR_INF, -inf: rejected without data) and the data-free
log ratio c; ``decide`` returns DECIDED, MORE (its settings ran out: ``Decision.more``
extends them and the block re-enters the same step), PYTHON_STEP (``Decision.python_step``
decides the step in Python) or an error status (``Decision.nonfinite`` or
``Decision.refuse`` raises the test's own error). For a model whose rows carry a per-pair
constant (control variates' P / N) the decision reads ``decision_data(data, theta,
theta_new)`` (:func:`with_decision_data`). FlyMC's block is in
:mod:`samplers._firefly.blocks`.
"""

from __future__ import annotations

import math
from functools import cache
from typing import NamedTuple

import numpy as np
from numba.core import types
from numba.experimental import structref

from design._lib.jit import jit
from .mhtests.compiled import Decision, InfoLayout
from .mhtests.status import (BAD_RANGE, DECIDED, MORE, OK, PRIOR_INF, PRIOR_NAN, PYTHON_STEP,
                             VIOLATION)
from .models.compiled import BlockModel, same_data
from .priors import prior_logpdf
from .proposals import Move, row_sums

__all__ = ["Block", "BlockModel", "Decision", "Move", "Parts", "compiled_model",
           "compiled_parts", "mh_block", "row_sums"]


class Block:
    """A compiled chain for :func:`samplers._chain.run_blocks`.

    ``run(start, stop, samples)`` makes steps ``start .. stop - 1``, writing the state after
    step i to ``samples[i]`` and its infos to the block's own arrays; ``done`` counts the
    completed steps and ``theta`` is the current point (also after a failure, which raises
    from ``run`` with ``done`` the steps completed before it). ``stats(n)`` gives the infos of
    the first n steps as ``Chain.stats``.
    """

    done = 0
    theta: np.ndarray

    def run(self, start, stop, samples):
        raise NotImplementedError

    def stats(self, n) -> dict:
        raise NotImplementedError


def compiled_model(view):
    """``(data, prior)`` of a model whose rows carry no per-pair constant and whose compiled
    parts exist (:func:`block_parts`), else None (FlyMC's block reads these)."""
    parts = block_parts(view)
    if parts is None or parts.decision_data is not same_data:
        return None
    return parts.data, parts.prior


def block_parts(view):
    """The model's :class:`BlockModel` (``model.block_parts(view)``), or None."""
    ask = getattr(view.model, "block_parts", None)
    return None if ask is None else ask(view)


def prior_failure(status, theta_new, lp_new=math.inf, log_q_ratio=0.0):
    """The ValueError ``mh_step`` raises for a log prior of NaN, or a log prior of +inf or
    a non-finite log proposal ratio, at theta_new."""
    if status == PRIOR_NAN:
        return ValueError(f"the log prior is NaN at theta_new={theta_new}")
    return ValueError(f"the log prior ({lp_new}) or log proposal ratio ({log_q_ratio}) is not "
                      f"finite at theta_new={theta_new}")


@structref.register
class BufferType(types.StructRef):
    """numba type of :class:`Buffer`."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Buffer(structref.StructRefProxy):
    """The engine's buffer of l_i (field ``values``), kept by a compiled MH block between
    calls and decisions. The kernel stores the buffer (regrown or not) here instead of
    returning it: boxing a returned array runs Python code inside the compiled call, where a
    Ctrl-C then surfaced as a SystemError and lost the block's results."""


structref.define_boxing(BufferType, Buffer)
structref.define_attributes(BufferType)
_BUFFER = BufferType([("values", types.float64[::1])])


@jit
def new_buffer():
    """An empty :class:`Buffer`."""
    buffer = structref.new(_BUFFER)
    buffer.values = np.empty(0)
    return buffer


@cache
def mh_kernel(propose, decide):
    """The compiled block of steps for one proposal and one decision (memoised): propose,
    the prior at theta_new, the data-free log ratio c, the decision, the bookkeeping."""

    @jit
    def block(data, rng, order, theta, theta_new, lp, pparams, prior, settings, state,
              pending, resume, carry0, carry, buffer, samples, accepted, log_const, n_grad,
              info, null_info, start, stop):
        code, pa, pb, pconst = prior
        values = buffer.values
        for i in range(start, stop):
            again = resume and i == start
            if again:
                lp_new, c = pending[0], pending[1]
            else:
                lq, ng = propose(data, rng, order, theta, theta_new, pparams, i)
                n_grad[i] = ng
                lp_new = prior_logpdf(code, pa, pb, pconst, theta_new)
                if not lp_new > -math.inf:
                    if lp_new != lp_new:
                        buffer.values = values
                        return PRIOR_NAN, i, lp, carry
                    accepted[i] = False
                    log_const[i] = -math.inf
                    info[i, :] = null_info
                    samples[i] = theta
                    continue
                if lp_new == math.inf or not math.isfinite(lq):
                    pending[0], pending[3] = lp_new, lq
                    buffer.values = values
                    return PRIOR_INF, i, lp, carry
                c = lp_new - lp + lq
                log_const[i] = c
                carry = carry0
            status, acc, carry, values = decide(data, theta, theta_new, rng, order, c,
                                                settings, state, again, carry, values, info[i])
            if status != DECIDED:
                pending[0], pending[1] = lp_new, c
                buffer.values = values
                return status, i, lp, carry
            accepted[i] = acc
            if acc:
                theta[:] = theta_new
                lp = lp_new
            samples[i] = theta
        buffer.values = values
        return OK, stop, lp, carry

    return block


class _MHBlock(Block):
    """A compiled chain of a model's :class:`BlockModel`, a proposal's :class:`Move` and a
    test's :class:`Decision`."""

    def __init__(self, kernel, data, prior, move, decision, rng, batches, state, test,
                 n_samples):
        self._kernel, self._data, self._prior = kernel, data, prior
        self._pparams, self._before = move.params, move.before_block
        self._decision = decision
        self._settings = decision.settings
        self._rng, self._order = rng, batches.kernel_state()
        self._test = test
        self.theta = np.array(state.theta, dtype=float)
        self._theta_new = np.empty_like(self.theta)
        self._lp = float(state.logprior)
        self._state = np.zeros(16)
        self._pending = np.zeros(4)
        self._values = new_buffer()
        self._layout = InfoLayout.of(test.null_info())
        self._null = self._layout.null
        self.accepted = np.zeros(n_samples, dtype=bool)
        self.log_const = np.zeros(n_samples)
        self.n_grad = np.zeros(n_samples, dtype=np.int64)
        self.info = np.zeros((n_samples, len(self._layout.names)))

    def run(self, start, stop, samples):
        if self._before is not None:
            self._before(start, stop)
        resume = False
        carry0 = self._decision.carry0
        carry = carry0
        while True:
            status, done, self._lp, carry = self._kernel(
                self._data, self._rng, self._order, self.theta, self._theta_new, self._lp,
                self._pparams, self._prior, self._settings, self._state, self._pending, resume,
                carry0, carry, self._values, samples, self.accepted, self.log_const,
                self.n_grad, self.info, self._null, start, stop)
            self.done = done
            if status == OK:
                return
            if status == MORE:
                self._settings = self._decision.more(self._settings, self._state)
                start, resume = done, True
                continue
            if status == PYTHON_STEP:
                self._python_step(done, samples)
                self.done = start = done + 1
                resume = False
                if start == stop:
                    return
                continue
            theta_new = self._theta_new.copy()
            if status in (PRIOR_NAN, PRIOR_INF):
                raise prior_failure(status, theta_new, self._pending[0], self._pending[3])
            if status in (BAD_RANGE, VIOLATION):
                self._decision.refuse(self._state, self.theta.copy(), theta_new)   # raises
            self._decision.nonfinite(self._state[0], theta_new)   # raises the test's error
            raise AssertionError("unreachable: a non-finite mean that decides")

    def stats(self, n):
        out = {"accepted": self.accepted[:n].copy(), "log_const": self.log_const[:n].copy(),
               "n_grad": self.n_grad[:n].copy()}
        for k, name in enumerate(self._layout.names):
            out[name] = self._layout.column(self.info[:n], k)
        return out

    def _python_step(self, i, samples):
        """Finish step i in Python (the decision asked for it: e.g. a Poisson-factor test's
        full-data step, whose pass runs on every core): the test's own ``decide`` on the
        pending proposal, then the bookkeeping of ``mh_kernel``."""
        lp_new, c = self._pending[0], self._pending[1]
        accepted, info = self._decision.python_step(self._rng, self.theta, self._theta_new, c)
        self.accepted[i] = accepted
        self.info[i, :] = [float(v) for v in info]
        if accepted:
            self.theta[:] = self._theta_new
            self._lp = lp_new
        samples[i] = self.theta


@cache
def with_decision_data(decide, decision_data):
    """``decide`` reading the model's per-decision data (``decision_data(data, theta,
    theta_new)``, e.g. control variates' P / N) instead of the block's data (memoised)."""

    @jit
    def decide_on(data, theta, theta_new, rng, order, c, settings, state, resume, carry,
                  values, info):
        return decide(decision_data(data, theta, theta_new), theta, theta_new, rng, order, c,
                      settings, state, resume, carry, values, info)

    return decide_on


class Parts(NamedTuple):
    """Each object's compiled part for one chain, asked in this order; ``missing`` names the
    first that is None (then the chain runs on the Python loop)."""

    model: BlockModel | None = None
    move: Move | None = None
    decision: Decision | None = None
    missing: str | None = None


def compiled_parts(view, test, proposal, state, n_samples) -> Parts:
    """Ask the model, the proposal and the test for their compiled parts (:class:`Parts`)."""
    model = block_parts(view)
    if model is None:
        return Parts(missing=f"the model ({type(view.model).__name__}) has no compiled parts "
                             "(block_parts gave None: a user's model, prior or gradient)")
    ask = getattr(proposal, "compiled_move", None)
    move = None if ask is None else ask(view, model, state, n_samples)
    if move is None:
        return Parts(model, missing=f"the proposal ({type(proposal).__name__}) has no "
                                    "compiled move (compiled_move gave None)")
    ask = getattr(test, "compiled_decision", None)
    decision = None if ask is None else ask(view)
    if decision is None:
        return Parts(model, move, missing=f"the test ({type(test).__name__}) has no compiled "
                                          "decision on this model (compiled_decision gave None)")
    return Parts(model, move, decision)


def mh_block(view, test, proposal, rng, batches, state, n_samples, parts=None):
    """The compiled chain (:class:`Block`), or None (see the module docstring); ``parts``
    from :func:`compiled_parts` if already asked."""
    if parts is None:
        parts = compiled_parts(view, test, proposal, state, n_samples)
    if parts.missing is not None:
        return None
    model, move, decision = parts.model, parts.move, parts.decision
    decide = decision.decide
    if model.decision_data is not same_data:
        decide = with_decision_data(decide, model.decision_data)
    kernel = mh_kernel(move.propose, decide)
    return _MHBlock(kernel, model.data, model.prior, move, decision, rng, batches, state,
                    test, n_samples)
