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
:func:`samplers.priors.prior_grad` and :func:`samplers.proposals.walk_move`. A step-size
schedule is evaluated in Python for the block ahead, so any :class:`StepSchedule` works.
``tests/samplers/test_blocks.py`` checks equal chains on both loops for every compiled
combination, and that a chain interrupted by Ctrl-C keeps its completed blocks.

Which chains are compiled is decided once, at the start of the chain (:func:`sgld_block`
returns None for anything else, and the Python loop runs): a model whose ``logprior``,
``grad_logprior`` and gradient kernels are :class:`~samplers.models.BaseModel`'s with a
built-in prior (not a subclass), and the exact proposal classes named.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from design._lib.jit import jit
from design._lib.rows import draw_rows, restart_order
from .models._base import BaseModel
from .models._kernels import batch_grad
from .priors import pairwise_sum, prior_grad, prior_logpdf

__all__ = ["Block", "compiled_model", "sgld_block"]

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
    model = view.model
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


def prior_failure(status, theta_new):
    """The ValueError ``mh_step`` raises for a log prior of NaN or +inf at theta_new."""
    if status == PRIOR_NAN:
        return ValueError(f"the log prior is NaN at theta_new={theta_new}")
    return ValueError(f"the log prior (inf) or log proposal ratio (0.0) is not finite at "
                      f"theta_new={theta_new}")


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
def sgld_kernel(row_grad, row_prefetch):
    """The compiled block of SGLD steps with :class:`~samplers.AcceptAll` (memoised per
    model kind): ``samplers.sgld.SGLD.propose`` and ``mh_step`` written as one loop."""
    grads = batch_grad(row_grad, row_prefetch)

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
    (``SGLD`` itself, not a subclass, with ``AcceptAll``) on a :func:`compiled_model`."""
    from .sgld import SGLD, AcceptAll

    if type(proposal) is not SGLD or type(test) is not AcceptAll:
        return None
    parts = compiled_model(view)
    if parts is None:
        return None
    kernel = sgld_kernel(view.row_grad, view.row_prefetch)
    return _SGLDBlock(kernel, *parts, rng, batches, state, proposal, n_samples)
