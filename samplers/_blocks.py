"""Compiled chain loops: a block of steps in one numba call, for built-in models.

:func:`samplers._chain.run_chain` calls Python once per step (the proposal, the prior, the
test and the bookkeeping each a few Python calls): about 100 us per step, far more than the
~100 rows a subsampling step reads. For a built-in model with a built-in prior and proposal
the whole step (rows, gradient, move, prior, decision, the recorded infos) is compiled, and
:func:`samplers._chain.run_blocks` runs blocks of steps in one call each, updating the
progress bar and catching Ctrl-C between blocks.

Bit-identical to the Python loop
--------------------------------
The compiled step is the Python step written again with the same arithmetic and the same
draws in the same order: the Generator is handed to the compiled block (numba's
``Generator.random`` and ``standard_normal`` are bit-compatible with NumPy's), rows come from
:func:`design._lib.rows.draw_rows` on the sampler's own order (as ``IndexSampler.take``),
gradients from the model's batch kernel summed row by row (as ``grads.sum(axis=0)``), priors
and moves from the shared kernels :func:`samplers.priors.prior_logpdf`,
:func:`samplers.priors.prior_grad`, :func:`samplers.proposals.walk_move` and
:func:`samplers.proposals.gaussian_log_density`. A step-size
schedule is evaluated in Python for the block ahead, so any :class:`StepSchedule` works.
A test's per-decision constants that come from the model are computed inside the step by
the same jitted function its Python method calls: the confidence test's range is the model's
``_ratio_range(consts, theta, theta_new)`` (:class:`~samplers.models.BaseModel`), which is
what ``_loglik_ratio_bound`` returns, with the constants ``_range_data()`` read once per
chain (for :class:`~samplers.ControlVariates`, ``(P / N, B)`` from
:func:`~samplers.models.control_variates.cv_ratio_range`). ``tests/samplers/test_blocks.py`` checks equal chains on both loops for every compiled
combination, and that a chain interrupted by Ctrl-C keeps its completed blocks. (A block
returns scalars and tuples of scalars only: boxing a returned array runs Python code inside
the compiled call, where a Ctrl-C would surface as a SystemError; buffers the block regrows
live in a structref, :class:`Buffer`.)

Which chains are compiled is decided once, at the start of the chain (:func:`sgld_block`
and :func:`mh_block` return None for anything else, and the Python loop runs): a model
(:func:`block_model`) whose ``logprior``, ``grad_logprior``, gradient kernels and decision
data are :class:`~samplers.models.BaseModel`'s, with a built-in prior (not a subclass), or a
:class:`~samplers.ControlVariates` (orders 1 and 2) around such a model with GLM kernels
(logistic, linear, Student-t, Gaussian mean); ``SGLD`` with ``AcceptAll``; ``RandomWalk``
(any scale, so ``RandomWalk.from_laplace`` too), minibatch ``Langevin`` (plain or
preconditioned, so the control-variate gradient of ``Langevin.from_laplace(cv, batch)``)
or ``Independence`` with a test of :func:`mh_decision` (these classes exactly: exact on one
chunk of rows, Austere, FPC-normal, Barker with either stopping rule, confidence with the
range from the model or a full-data scan, TunaMH without a proxy). FlyMC's block is in
:mod:`samplers._firefly.blocks`.

Control variates
----------------
The wrapper's rows carry the per-pair constant P / N (``ControlVariates._decision_data``)
and its gradients the per-row shift ``(g + H u) / N`` (``_grad_loglik``). In a block its
data is ``(rows, g, H, N)`` (``ControlVariates._block_data``) and both are computed inside
the step with the arithmetic of ``proxy_total`` and ``_proxy_grad``
(:func:`~samplers.models.control_variates.cv_decision_data`,
:func:`~samplers.models.control_variates.cv_batch_grad`): the decision data by wrapping the
test's ``decide`` (:func:`with_decision_data`), the gradients as the model's
:attr:`BlockModel.grads`, which the minibatch Langevin and SGLD blocks call.
"""

from __future__ import annotations

import math
from functools import cache
from typing import NamedTuple

import numpy as np
from numba.core import types
from numba.experimental import structref

from design._lib.jit import jit
from design._lib.rows import draw_rows, restart_order
from design._lib.rules import BOUNDS
from .models._base import BaseModel
from .models._kernels import batch_grad, batch_ratio
from .priors import pairwise_sum, prior_grad, prior_logpdf
from .proposals import gaussian_log_density, langevin_log_q, langevin_move, walk_move

__all__ = ["Block", "BlockModel", "Decision", "block_model", "compiled_model", "mh_block",
           "mh_decision", "sgld_block"]

#: Statuses a compiled block returns: all steps done, the log prior was NaN, or +inf.
OK, PRIOR_NAN, PRIOR_INF = 0, 1, 2


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
    """``(data, prior)`` of a built-in model whose prior and gradients the compiled loops
    can evaluate exactly as its methods do, else None."""
    return _builtin_parts(view.model)


def _builtin_parts(model):
    if not isinstance(model, BaseModel):
        return None
    cls = type(model)
    if (cls.logprior is not BaseModel.logprior or cls.grad_logprior is not BaseModel.grad_logprior
            or cls._grad_loglik is not BaseModel._grad_loglik):
        return None
    prior = model.prior._kernel()
    if prior is None:
        return None
    try:
        data = model._kernel_data()
    except (TypeError, NotImplementedError):
        return None
    return data, prior


@jit
def same_data(data, theta, theta_new):
    """The decision data of a model whose rows carry no per-pair constant: its data."""
    return data


class BlockModel(NamedTuple):
    """What the compiled MH and SGLD blocks read of a model (:func:`block_model`)."""

    #: The tuple ``grads`` and ``decision_data`` read.
    data: tuple
    #: The prior's kernel tuple (:meth:`Prior._kernel`).
    prior: tuple
    #: ``decision_data(data, theta, theta_new) -> tuple``: what the row-ratio kernel reads in
    #: one decision (the model's ``_decision_data``), jitted.
    decision_data: object
    #: ``grads(data, idx, theta, out)``: the per-row gradients ``view.grad`` gives, jitted.
    grads: object


def block_model(view):
    """The :class:`BlockModel` of a chain's model, or None (the Python loop runs).

    A model with a ``_block_model(view)`` method builds its own (a wrapper composing the
    parts of the model it wraps, e.g. :class:`~samplers.ExactRows`); otherwise:

    A built-in model (:func:`compiled_model`) whose rows carry no per-pair constant, or a
    :class:`~samplers.ControlVariates` (this class exactly) around such a model with GLM
    kernels: its block data is ``(rows, g, H, N)`` and the proxy's total P and gradient
    ``g + H u`` are computed in the step (``cv_decision_data``, ``cv_batch_grad``) with the
    arithmetic of ``proxy_total`` and ``_proxy_grad``. Its prior and log prior are the wrapped
    model's (``ControlVariates.logprior`` returns them).
    """
    from .models.control_variates import ControlVariates, cv_batch_grad, cv_decision_data

    model = view.model
    own = getattr(model, "_block_model", None)
    if own is not None:         # a wrapper that builds its parts on its model's (ExactRows)
        return own(view)
    if type(model) is ControlVariates:
        data = model._block_data()
        inner = _builtin_parts(model.model)
        if data is None or inner is None or model.prior is not model.model.prior:
            return None
        if type(model.model)._decision_data is not BaseModel._decision_data:
            return None
        return BlockModel(data, inner[1], cv_decision_data,
                          cv_batch_grad(view.row_grad, view.row_prefetch))
    parts = compiled_model(view)
    if parts is None or type(model)._decision_data is not BaseModel._decision_data:
        return None
    return BlockModel(parts[0], parts[1], same_data, batch_grad(view.row_grad, view.row_prefetch))


def prior_failure(status, theta_new, lp_new=math.inf, log_q_ratio=0.0):
    """The ValueError ``mh_step`` raises for a log prior of NaN, or a log prior of +inf or
    a non-finite log proposal ratio, at theta_new."""
    if status == PRIOR_NAN:
        return ValueError(f"the log prior is NaN at theta_new={theta_new}")
    return ValueError(f"the log prior ({lp_new}) or log proposal ratio ({log_q_ratio}) is not "
                      f"finite at theta_new={theta_new}")


@jit
def row_sums(g, acc):
    """``g.sum(axis=0)`` bit for bit: rows added in order for d > 1, and NumPy's pairwise
    sum when d = 1 (then the reduced axis is contiguous and NumPy sums it pairwise)."""
    d = g.shape[1]
    if d == 1:
        acc[0] = pairwise_sum(g[:, 0])
        return
    for j in range(d):
        acc[j] = g[0, j]
    for t in range(1, g.shape[0]):
        for j in range(d):
            acc[j] += g[t, j]


# --- SGLD -----------------------------------------------------------------------------------


@cache
def sgld_kernel(grads):
    """The compiled block of SGLD steps with :class:`~samplers.AcceptAll` (memoised per
    model kind, ``grads`` its :attr:`BlockModel.grads`): ``samplers.sgld.SGLD.propose`` and
    ``mh_step`` written as one loop."""

    @jit
    def block(data, rng, order, theta, theta_new, lp, hs, temperature, batch, prior,
              samples, accepted, log_const, n_grad, start, stop):
        d = theta.shape[0]
        code, pa, pb, pconst = prior
        u = np.empty(batch)
        rows = np.empty(batch, dtype=np.intp)
        g = np.empty((batch, d))
        acc = np.empty(d)
        gp = np.empty(d)
        w = order.n_total / batch
        for i in range(start, stop):
            h = hs[i - start]
            restart_order(order)
            draw_rows(rng, order, u, rows)
            grads(data, rows, theta, g)
            row_sums(g, acc)
            prior_grad(code, pa, pb, pconst, theta, gp)
            half = 0.5 * h
            sd = math.sqrt(h * temperature)
            for j in range(d):
                drift = half * (gp[j] + w * acc[j])
                theta_new[j] = theta[j] + drift + sd * rng.standard_normal()
            n_grad[i] = batch
            lp_new = prior_logpdf(code, pa, pb, pconst, theta_new)
            if not lp_new > -math.inf:
                if lp_new != lp_new:
                    return PRIOR_NAN, i, lp
                accepted[i] = False
                log_const[i] = -math.inf
            elif lp_new == math.inf:
                return PRIOR_INF, i, lp
            else:
                accepted[i] = True
                log_const[i] = lp_new - lp + 0.0
                lp = lp_new
                theta[:] = theta_new
            samples[i] = theta
        return OK, stop, lp

    return block


class _SGLDBlock(Block):
    def __init__(self, kernel, data, prior, rng, batches, state, proposal, n_samples):
        self._kernel, self._data, self._prior = kernel, data, prior
        self._rng, self._order = rng, batches.kernel_state()
        self.theta = np.array(state.theta, dtype=float)
        self._theta_new = np.empty_like(self.theta)
        self._lp = float(state.logprior)
        self._iteration0 = state.iteration
        self._proposal = proposal
        self.accepted = np.zeros(n_samples, dtype=bool)
        self.log_const = np.zeros(n_samples)
        self.n_grad = np.zeros(n_samples, dtype=np.int64)

    def run(self, start, stop, samples):
        schedule = self._proposal._schedule
        hs = np.array([schedule(self._iteration0 + i) for i in range(start, stop)], dtype=float)
        status, done, self._lp = self._kernel(
            self._data, self._rng, self._order, self.theta, self._theta_new, self._lp, hs,
            self._proposal.temperature, self._proposal.batch_size, self._prior, samples,
            self.accepted, self.log_const, self.n_grad, start, stop)
        self.done = done
        if status != OK:
            raise prior_failure(status, self._theta_new.copy())

    def stats(self, n):
        zeros = np.zeros(n, dtype=np.int64)
        return {"accepted": self.accepted[:n].copy(), "log_const": self.log_const[:n].copy(),
                "n_grad": self.n_grad[:n].copy(), "n_used": zeros, "n_stages": zeros.copy()}


def sgld_block(view, test, proposal, rng, batches, state, n_samples):
    """The compiled SGLD chain (:class:`Block`), or None when the chain is not plain SGLD
    (``SGLD`` itself, not a subclass, with ``AcceptAll``) on a :func:`block_model`."""
    from .sgld import SGLD, AcceptAll

    if type(proposal) is not SGLD or type(test) is not AcceptAll:
        return None
    model = block_model(view)
    if model is None:
        return None
    kernel = sgld_kernel(model.grads)
    return _SGLDBlock(kernel, model.data, model.prior, rng, batches, state, proposal,
                      n_samples)


# --- Metropolis-Hastings with a compiled decision ---------------------------------------------
#
# A step is: the proposal (``propose``), the prior at theta_new, the data-free log ratio c,
# the test's decision (``decide``) and the bookkeeping. ``propose`` and ``decide`` are
# jitted functions with fixed signatures, so one factory builds the block for any pair:
#
#   propose(data, rng, order, theta, theta_new, params) -> (log_q_ratio, n_grad)
#   decide(data, theta, theta_new, rng, order, log_const, settings, state, resume, carry,
#          values, info) -> (status, accepted, carry, values)
#
# ``decide`` writes the test's info fields into the float row ``info`` and returns DECIDED,
# MORE (its settings ran out: its state is in the float array ``state``; the block returns
# to Python, which extends the settings and re-enters with ``resume`` at the same step), or
# an error status (a NaN or +inf batch mean: Python raises the test's own error). ``carry``
# is the engine rule's carry (the test's ``carry0`` at each new decision, what the rule left
# when it asked for MORE on resume) and ``values`` the engine's buffer of l_i, kept across
# decisions and blocks.

DECIDED, MORE, NAN_MEAN, INF_MEAN = 0, -1, 4, 5


@jit
def walk_propose(data, rng, order, theta, theta_new, params):
    """:meth:`RandomWalk.propose`: d standard normals, then :func:`walk_move`."""
    diag, chol = params
    z = np.empty(theta.shape[0])
    for j in range(theta.shape[0]):
        z[j] = rng.standard_normal()
    walk_move(theta, diag, chol, z, theta_new)
    return 0.0, 0


@jit
def independence_propose(data, rng, order, theta, theta_new, params):
    """:meth:`Independence.propose`: ``mean + L z`` (:func:`walk_move` from the mean) and
    ``log phi(theta) - log phi(theta_new)`` (:func:`gaussian_log_density`)."""
    mean, factor, inverse = params
    d = theta.shape[0]
    z = np.empty(d)
    for j in range(d):
        z[j] = rng.standard_normal()
    walk_move(mean, np.empty(0), factor, z, theta_new)
    lq = (gaussian_log_density(theta, mean, inverse)
          - gaussian_log_density(theta_new, mean, inverse))
    return lq, 0


@cache
def langevin_propose(grads):
    """:meth:`Langevin.propose` with a minibatch (``batch_size`` rows, the same rows for the
    forward and the reverse gradient) for one model kind (memoised; ``grads`` its
    :attr:`BlockModel.grads`)."""

    @jit
    def propose(data, rng, order, theta, theta_new, params):
        h, chol, batch, prior, N = params
        code, pa, pb, pconst = prior
        d = theta.shape[0]
        restart_order(order)
        rows = np.empty(batch, dtype=np.intp)
        draw_rows(rng, order, np.empty(batch), rows)
        g = np.empty((batch, d))
        w = N / batch
        grad = np.empty(d)
        grad_new = np.empty(d)
        gp = np.empty(d)
        acc = np.empty(d)
        grads(data, rows, theta, g)
        row_sums(g, acc)
        prior_grad(code, pa, pb, pconst, theta, gp)
        for j in range(d):
            grad[j] = gp[j] + w * acc[j]
        z = np.empty(d)
        for j in range(d):
            z[j] = rng.standard_normal()
        langevin_move(theta, grad, h, chol, z, theta_new)
        grads(data, rows, theta_new, g)
        row_sums(g, acc)
        prior_grad(code, pa, pb, pconst, theta_new, gp)
        for j in range(d):
            grad_new[j] = gp[j] + w * acc[j]
        lq = (langevin_log_q(theta, theta_new, grad_new, h, chol)
              - langevin_log_q(theta_new, theta, grad, h, chol))
        return lq, 2 * batch

    return propose


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
    """The compiled block of MH steps for one proposal and one decision (memoised)."""

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
                lq, ng = propose(data, rng, order, theta, theta_new, pparams)
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
    """A compiled MH chain: ``decision`` is what :func:`mh_decision` gives for the test."""

    def __init__(self, kernel, data, prior, pparams, decision, rng, batches, state, test,
                 n_samples):
        self._kernel, self._data, self._prior, self._pparams = kernel, data, prior, pparams
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
        null = test.null_info()
        self._null = np.array([float(v) for v in null], dtype=float)
        self._fields = type(null)._fields
        self._int_fields = tuple(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                 for v in null)
        self._bool_fields = tuple(isinstance(v, (bool, np.bool_)) for v in null)
        self.accepted = np.zeros(n_samples, dtype=bool)
        self.log_const = np.zeros(n_samples)
        self.n_grad = np.zeros(n_samples, dtype=np.int64)
        self.info = np.zeros((n_samples, len(self._fields)))

    def run(self, start, stop, samples):
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
        for k, name in enumerate(self._fields):
            column = self.info[:n, k]
            if self._int_fields[k]:
                column = column.astype(np.int64)
            elif self._bool_fields[k]:
                column = column != 0.0
            out[name] = column.copy()
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


class Decision(NamedTuple):
    """A test's compiled decision for :func:`mh_kernel`."""

    decide: object
    settings: tuple
    #: The test's carry before its first stage (``()`` for a test without one).
    carry0: tuple
    #: ``more(settings, state) -> settings`` after MORE.
    more: object
    #: ``nonfinite(mean, theta_new)``: raises the test's error for a NaN or +inf mean.
    nonfinite: object
    #: ``refuse(state, theta, theta_new)``: raises the test's error after BAD_RANGE or
    #: VIOLATION (what it needs is in ``state``).
    refuse: object = None
    #: ``python_step(rng, theta, theta_new, c) -> (accepted, info)`` after PYTHON_STEP.
    python_step: object = None


def proposal_params(view, proposal, model):
    """``(propose, params)`` for a compiled proposal on a :class:`BlockModel`, or None:
    ``RandomWalk`` (any scale, so also ``from_laplace``), minibatch ``Langevin`` (plain or
    preconditioned) and ``Independence`` (these classes exactly)."""
    from .proposals import Independence, Langevin, RandomWalk

    if type(proposal) is RandomWalk:
        return walk_propose, proposal._kernel(view.dim)
    if type(proposal) is Independence:
        return independence_propose, proposal._kernel()
    if type(proposal) is Langevin and proposal.batch_size is not None:
        h, chol = proposal._kernel()
        return (langevin_propose(model.grads),
                (h, chol, proposal.batch_size, model.prior, view.N))
    return None


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


def mh_block(view, test, proposal, rng, batches, state, n_samples):
    """The compiled MH chain (:class:`Block`) or None (see the module docstring)."""
    model = block_model(view)
    if model is None:
        return None
    prop = proposal_params(view, proposal, model)
    decision = mh_decision(view, test)
    if prop is None or decision is None:
        return None
    decide = decision.decide
    if model.decision_data is not same_data:
        decide = with_decision_data(decide, model.decision_data)
    kernel = mh_kernel(prop[0], decide)
    return _MHBlock(kernel, model.data, model.prior, prop[1], decision, rng, batches, state,
                    test, n_samples)


# --- the tests' compiled decisions -----------------------------------------------------------
#
# The sequential tests run on the engine's compiled driver (samplers.mhtests.engine), the very
# function their ``decide`` calls for a compiled model; what ``SequentialTest.decide`` does
# around it in Python (draw u, ask for the settings, decide without data, restart the order,
# decide a non-finite batch, build the info) is written here once, with two small jitted
# pieces per test:
#
#   prepare(data, theta, theta_new, N, base, c) -> (code, settings, value)
#
# the decision's settings from the chain's ``base`` and the data-free log ratio c (its
# ``_settings``), with ``code`` RUN (run the engine), KNOWN (``_decide_without_data``: every
# l_i equals ``value``, accept iff value > mu0, no row read), NAN_MEAN (the settings are NaN:
# the test's NaN error) or BAD_RANGE (the confidence test's range ``value`` is infinite); and
# ``write_info(status, n_used, stage, mean, m2, values, settings, carry, info)`` (its
# ``_info``; ``status == KNOWN_INFO`` after a decision without data).

RUN, KNOWN, BAD_RANGE = 0, 1, 6
#: Statuses of the Poisson-factor tests' decide: a row broke its bound (the test's
#: BoundViolation); the step is decided in Python (its full-data fallback, nothing drawn).
VIOLATION, PYTHON_STEP = 7, 8
#: The engine status ``write_info`` gets for a decision made without data (GROW never ends
#: a decision, so the value is free).
KNOWN_INFO = 0


@jit
def same_settings(data, theta, theta_new, N, base, c):
    """The settings of a test whose settings do not depend on the decision."""
    return RUN, base, 0.0


@jit
def counts_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """``(n_used, n_stages)``: the info of the FPC-normal test."""
    info[0], info[1] = n_used, stage


@jit
def austere_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """:meth:`AustereTest._info`: ``(n_used, n_stages, mean, sd, first_mean)``, the last
    three NaN after a non-finite batch; ``first_mean`` summed as ``np.mean`` sums."""
    info[0], info[1] = n_used, stage
    if status == -2:   # NONFINITE (samplers.mhtests.engine)
        info[2] = info[3] = info[4] = math.nan
        return
    first = min(settings[0], n_used)
    info[2] = mean
    info[3] = math.sqrt(max(m2, 0.0) / n_used)
    info[4] = pairwise_sum(values[:first]) / first


@jit
def barker_settings(data, theta, theta_new, N, base, c):
    """:meth:`BarkerTest._settings`: ``(m, c, sigma, ...)``."""
    return RUN, (base[0], c) + base[1:], 0.0


@jit
def barker_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """:meth:`BarkerTest._info` of the sequential rule: ``(n, stage, eps, s2, eta, mean,
    batch)``, NaN (batch 0) after a non-finite batch; the batch is every row read."""
    info[0], info[1] = n_used, stage
    if status == 1 or status == 2:   # STOP, EXACT
        info[2], info[3], info[4] = carry[1], carry[0], carry[2]
        info[5], info[6] = mean, n_used
    else:
        info[2] = info[3] = info[4] = info[5] = math.nan
        info[6] = 0


@jit
def presized_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """:meth:`BarkerTest._info` of the presized rule: as :func:`barker_info`, but the batch
    of a STOP decision is the rows after the pilot (``carry[4]`` rows)."""
    barker_info(status, n_used, stage, mean, m2, values, settings, carry, info)
    if status == 1:   # STOP
        info[6] = n_used - int(carry[4])


@jit
def confidence_checked(center, C, base, scanned):
    """:meth:`ConfidenceTest._settings` and ``_decide_without_data`` from a range
    ``(center, C)``: ``base = (consts, delta, p, gamma, bound code, b0)``."""
    settings = (C, base[1], base[2], base[3], base[4], base[5], scanned, center)
    if not math.isfinite(C):
        return (NAN_MEAN if C != C else BAD_RANGE), settings, C
    if C == 0.0:
        return KNOWN, settings, center
    return RUN, settings, 0.0


@cache
def confidence_model_settings(ratio_range):
    """``prepare`` of ``ConfidenceTest(range="model")`` on a model whose range is the jitted
    ``ratio_range(consts, theta, theta_new)`` (``consts = base[0]``)."""

    @jit
    def prepare(data, theta, theta_new, N, base, c):
        center, C = ratio_range(base[0], theta, theta_new)
        return confidence_checked(center, C, base, 0)

    return prepare


@cache
def confidence_scan_settings(row_ratio, row_prefetch):
    """``prepare`` of ``ConfidenceTest(range="full-data")``: ``C = max_i |l_i|`` over all N
    rows in chunks of ``FULL_CHUNK`` (as ``ConfidenceTest._range``: NaN as soon as a chunk
    holds one)."""
    from ._view import FULL_CHUNK

    ratios = batch_ratio(row_ratio, row_prefetch)

    @jit
    def prepare(data, theta, theta_new, N, base, c):
        size = min(FULL_CHUNK, N)
        rows = np.empty(size, dtype=np.intp)
        out = np.empty(size)
        C = 0.0
        for start in range(0, N, FULL_CHUNK):
            k = min(FULL_CHUNK, N - start)
            for t in range(k):
                rows[t] = start + t
            ratios(data, rows[:k], theta, theta_new, out[:k])
            chunk_max = 0.0
            for t in range(k):
                a = abs(out[t])
                if a != a:
                    chunk_max = a
                    break
                if t == 0 or a > chunk_max:
                    chunk_max = a
            if not chunk_max <= C:
                C = chunk_max
                if C != C:
                    break
        return confidence_checked(0.0, C, base, N)

    return prepare


@jit
def confidence_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """:meth:`ConfidenceTest._info` (and ``_decide_without_data``'s, with ``mean`` the
    centre): ``(n_used, n_stages, n_scanned, mean, sd, C)``, sd 0 without data."""
    info[0], info[1], info[2] = n_used, stage, settings[6]
    info[3] = mean
    info[4] = math.sqrt(max(m2, 0.0) / n_used) if n_used > 0 else 0.0
    info[5] = settings[0] if status != KNOWN_INFO else 0.0


@cache
def engine_decide(row_ratio, row_prefetch, rule, epilogue, draws_threshold, prepare,
                  write_info):
    """``SequentialTest.decide``'s compiled path as a ``decide`` (memoised)."""
    from .mhtests.engine import GROW, MORE as ENGINE_MORE, NONFINITE, compiled_driver

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
        if status == ENGINE_MORE:
            state[1], state[2], state[3], state[4] = mu0, n, k, stage
            state[5], state[6], state[7] = mean, m2, m3
            return MORE, False, carry, values
        write_info(status, n, stage, mean, m2, values, settings, carry, info)
        if status == NONFINITE:
            state[0] = mean
            if mean != mean:
                return NAN_MEAN, False, carry, values
            if mean == math.inf:
                return INF_MEAN, False, carry, values
            return DECIDED, False, carry, values
        return DECIDED, acc, carry, values

    return decide


@cache
def exact_decide(ratio_chunks):
    """:meth:`ExactTest.decide` as a ``decide`` for a model of one chunk of rows (N <=
    ``FULL_CHUNK``: the pass the Python loop runs, in the calling thread)."""
    from ._view import FULL_CHUNK, _merge_chunks

    @jit
    def decide(data, theta, theta_new, rng, order, c, base, state, resume, carry, values,
               info):
        N = order.n_total
        log_u = -rng.standard_exponential()
        means = np.empty(1)
        m2s = np.empty(1)
        ratio_chunks(data, theta, theta_new, N, FULL_CHUNK, means, m2s, 0, 1)
        ok, n, mean, m2 = _merge_chunks(N, FULL_CHUNK, means, m2s)
        info[0], info[1], info[2] = N, 1, mean
        if not ok:
            info[3] = math.nan
            state[0] = mean
            if mean != mean:
                return NAN_MEAN, False, carry, values
            if mean == math.inf:
                return INF_MEAN, False, carry, values
            return DECIDED, False, carry, values
        info[3] = math.sqrt(m2 / n) if n > 0 else 0.0
        return DECIDED, log_u < mean * N + c, carry, values

    return decide


@cache
def poisson_decide(loop):
    """:meth:`_PoissonFactorTest.decide <samplers.mhtests.poisson>` without a proxy (TunaMH on
    a plain model: ``P = 0``) as a ``decide``, over the test's compiled Poisson factor
    ``loop`` (memoised). ``base = (C, chi, gamma, stop_at_zero, c, c_uniform, prob, alias,
    weighted)``; info ``(n_used, n_stages, batch, rate, n_kept, full_data)``. A pair whose
    expected batch reaches N returns PYTHON_STEP before drawing anything: the full-data
    step (:class:`~samplers.ExactTest`'s decision, on every core) runs in Python."""
    from ._poisson import alias_rows, uniform_rows

    @jit
    def decide(data, theta, theta_new, rng, order, c, base, state, resume, carry, values,
               info):
        C, chi, gamma, stop_at_zero, c_all, c_uniform, prob, alias, weighted = base
        N = order.n_total
        d = theta.shape[0]
        diff = np.empty(d)
        for j in range(d):
            diff[j] = theta_new[j] - theta[j]
        phi = math.sqrt(np.dot(diff, diff))   # TaylorRemainder.phi at order 0 (BLAS ddot)
        cphi = C * phi
        lam = chi * cphi * cphi
        rate = lam + cphi
        if rate >= N:
            return PYTHON_STEP, False, carry, values
        info[0] = info[1] = info[2] = info[4] = info[5] = 0.0
        info[3] = rate
        if not -rng.standard_exponential() < c + 0.0:
            return DECIDED, False, carry, values
        B = rng.poisson(rate)
        if B == 0:
            return DECIDED, True, carry, values
        idx = np.empty(B, dtype=np.intp)
        if weighted:
            u = np.empty(2 * B)
            for t in range(2 * B):
                u[t] = rng.random()
            alias_rows(prob, alias, u, idx)
        else:
            u = np.empty(B)
            for t in range(B):
                u[t] = rng.random()
            uniform_rows(N, u, idx)
        v = np.empty(B)
        for t in range(B):
            v[t] = rng.random()
        status, log_ratio, n_read, n_kept, bad, delta, bound = loop(
            data, idx, v, theta, theta_new, c_all, c_uniform, phi, lam / C, gamma,
            stop_at_zero)
        if status != 0:   # _VIOLATION (samplers.mhtests.poisson)
            state[0], state[1], state[2] = idx[bad], delta, bound
            return VIOLATION, False, carry, values
        info[0], info[1], info[2], info[4] = n_read, 1, B, n_kept
        if n_kept == 0:
            return DECIDED, True, carry, values
        if log_ratio == -math.inf:
            return DECIDED, False, carry, values
        return DECIDED, -rng.standard_exponential() < log_ratio, carry, values

    return decide


def poisson_decision(view, test):
    """The compiled decision of a Poisson-factor test without a proxy (``TunaMHTest`` on a
    built-in model), or None (a proxy, i.e. control variates, takes the Python loop)."""
    from .mhtests.base import nonfinite_decision

    prep = test.prepare(view.model)
    if prep.rem.cv is not None:
        return None
    table = prep.batches.table
    weighted = table is not None
    prob = table.prob if weighted else np.empty(0)
    alias = table.alias if weighted else np.empty(0, dtype=np.int64)
    base = (float(prep.C), float(test.chi), float(test.gamma),
            bool(test.gamma == 1.0 and test.chi == 0.0), prep.rem.c, float(prep.c_uniform),
            prob, alias, weighted)

    def refuse(state, theta, theta_new):
        test._refuse(view, int(state[0]), float(state[1]), float(state[2]), theta, theta_new)

    def python_step(rng, theta, theta_new, c):
        return test.decide(rng, view, None, theta, theta_new, float(c))

    return Decision(poisson_decide(prep.loop), base, (), None, nonfinite_decision, refuse,
                    python_step)


def confidence_prepare(view, test):
    """``(prepare, base)`` of a :class:`~samplers.ConfidenceTest` on this model, or None: the
    range from the model's jitted ``_ratio_range`` (a built-in model whose range methods are
    :class:`~samplers.models.BaseModel`'s, or :class:`~samplers.ControlVariates` around a
    built-in GLM: ``(P / N, B)``), or from a compiled scan of all N rows."""
    tail = (test.delta, test.p, test.gamma, BOUNDS.index(test.bound), test.batch_size)
    if test.range == "full-data":
        return confidence_scan_settings(view.row_ratio, view.row_prefetch), ((),) + tail
    from .models.control_variates import ControlVariates

    model = view.model
    cls = type(model)
    if cls is ControlVariates:   # (P / N, B): the wrapper's own jitted range
        if model._glm is None:
            return None
    elif (not isinstance(model, BaseModel) or model._ratio_range is None
            or cls._loglik_ratio_range is not BaseModel._loglik_ratio_range
            or cls._loglik_ratio_bound is not BaseModel._loglik_ratio_bound):
        return None
    return confidence_model_settings(model._ratio_range), (model._range_data(),) + tail


def mh_decision(view, test):
    """The compiled decision of ``test`` on this model (:class:`Decision`), or None: the
    exact test (one chunk of rows), the Austere, FPC-normal, Barker (both stopping rules) and
    confidence tests (these classes exactly; the confidence test with its range from a
    built-in model's jitted ``_ratio_range`` or from a scan of all rows), and TunaMH
    (:func:`poisson_decision`)."""
    from .mhtests import (AustereTest, BarkerTest, ConfidenceTest, ExactTest, FPCNormalTest,
                          TunaMHTest)
    from .mhtests.base import nonfinite_decision

    N = view.N
    cls = type(test)
    refuse = None
    if cls is ExactTest:
        from ._view import FULL_CHUNK

        if N > FULL_CHUNK:   # the Python loop runs the pass on every core
            return None
        return Decision(exact_decide(view._ratio_chunks), (), (), None, nonfinite_decision)
    if cls in (AustereTest, FPCNormalTest):
        make = same_settings
        write = austere_info if cls is AustereTest else counts_info
        base = test._settings(view, None, None, 0.0)
    elif cls is BarkerTest:   # either stopping rule: its rule and epilogue are the test's
        make = barker_settings
        write = presized_info if test.stopping == "presized" else barker_info
        base = test._draw_args
    elif cls is ConfidenceTest:
        parts = confidence_prepare(view, test)
        if parts is None:
            return None
        (make, base), write = parts, confidence_info

        def refuse(state, theta, theta_new):
            test._check_range(state[0], theta_new)
    elif cls is TunaMHTest:
        return poisson_decision(view, test)
    else:
        return None
    decide = engine_decide(view.row_ratio, view.row_prefetch, test.rule, test.epilogue,
                           bool(test.draws_threshold), make, write)

    def more(settings, state):
        return test._more_settings(N, int(state[4]), settings)

    return Decision(decide, base, test.carry0, more, nonfinite_decision, refuse)
