"""The compiled block loop of Firefly Monte Carlo (see :mod:`samplers._blocks`).

One compiled call runs a block of iterations of :func:`~samplers._firefly.sampler.firefly_step`
with a built-in bound of the sampled model (:class:`~samplers.models.QuadraticBound`), a
built-in prior, :class:`ImplicitZ` or :class:`ExplicitZ` z-updates and a
:class:`~samplers.RandomWalk` theta-update: the same draws in the same order (the geometric
skips' uniforms in chunks of the same size, the flips' uniforms, the walk's normals, the MH
exponential), the same kernels (``batch_pairs``, ``log_odds_checked``, ``_skips``,
``_implicit_flips``, ``_gibbs_flips``, ``total``, ``total_at``) and the collapsed bound sum
through the same BLAS products, so a chain is bit-identical to the Python loop's
(``tests/firefly/test_firefly_blocks.py``). Anything else (Langevin, Slice, a user's bound or
model) runs the Python loop.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from design._lib.jit import jit
from design._lib.rows import draw_rows, restart_order
from .._blocks import Block, compiled_model
from ..mhtests.status import OK, PRIOR_NAN
from ..models.bounds import batch_pairs
from ..priors import prior_logpdf
from ..proposals import RandomWalk, walk_move
from .target import log_odds_checked, total, total_at
from .zupdates import ExplicitZ, ImplicitZ, _dark_among, _gibbs_flips, _implicit_flips, _skips

__all__ = ["firefly_block"]

#: Status of a bound above its likelihood (or a non-finite pair) at row ``bad``.
BAD_BOUND = 3
#: Columns of the integer infos.
_INT_FIELDS = ("n_bright", "n_used", "n_grad", "n_evals", "n_brightened", "n_darkened")


@jit
def _uniforms(rng, k):
    u = np.empty(k)
    for t in range(k):
        u[t] = rng.random()
    return u


@jit
def bernoulli_positions_rng(rng, arr, start, stop, q):
    """:func:`~samplers._firefly.zupdates.bernoulli_positions` with the Generator in
    compiled code (the same uniforms, in chunks of the same size)."""
    if q == 1.0:
        return arr[start:stop].copy()
    log1m_q = math.log1p(-q)
    expected = (stop - start) * q
    chunk = int(expected + 4.0 * math.sqrt(expected)) + 8
    found, pos, done = _skips(arr, start - 1, stop, log1m_q, _uniforms(rng, chunk))
    while not done:
        more, pos, done = _skips(arr, pos, stop, log1m_q, _uniforms(rng, chunk))
        found = np.concatenate((found, more))
    return found


@cache
def firefly_kernel(row_eta, row_prefetch):
    """The compiled block of Firefly iterations for one bound kind (memoised)."""
    pairs = batch_pairs(row_eta, row_prefetch)

    @jit
    def checked_log_odds(data, theta, idx, err, where):
        ll = np.empty(idx.shape[0])
        lb = np.empty(idx.shape[0])
        pairs(data, idx, theta, ll, lb)
        out = np.empty(idx.shape[0])
        bad = log_odds_checked(ll, lb, out)
        if bad >= 0:
            err[0], err[1], err[2], err[3] = idx[bad], ll[bad], lb[bad], where
        return out, bad

    @jit
    def bound_sum(c0, b, A, inv_temp, theta):
        return (c0 + np.dot(b, theta) - np.dot(theta, np.dot(A, theta))) * inv_temp

    @jit
    def block(data, rng, order, arr, tab, count, log_odds, theta, theta_new, base,
              explicit_k, q_db, q_bd, diag, chol, prior, c0, b, A, inv_temp,
              samples, accepted, ints, err, start, stop):
        d = theta.shape[0]
        N = arr.shape[0]
        code, pa, pb, pconst = prior
        log_q_ratio = math.log(q_db / q_bd) if explicit_k == 0 else 0.0
        z = np.empty(d)
        for i in range(start, stop):
            # z given theta
            if explicit_k > 0:
                restart_order(order)
                idx = np.empty(explicit_k, dtype=np.intp)
                draw_rows(rng, order, np.empty(explicit_k), idx)
                dark = _dark_among(tab, count, idx)
                dark_lo, bad = checked_log_odds(data, theta, dark, err, 0.0)
                if bad >= 0:
                    return BAD_BOUND, i, base
                n_off, n_on = _gibbs_flips(arr, tab, count, log_odds, idx, dark_lo,
                                           _uniforms(rng, idx.shape[0]))
            else:
                B = count[0]
                dark = bernoulli_positions_rng(rng, arr, B, N, q_db)
                bright = bernoulli_positions_rng(rng, arr, 0, B, q_bd)
                dark_lo, bad = checked_log_odds(data, theta, dark, err, 0.0)
                if bad >= 0:
                    return BAD_BOUND, i, base
                n_off, n_on = _implicit_flips(arr, tab, count, log_odds, log_q_ratio, bright,
                                              dark, dark_lo,
                                              _uniforms(rng, bright.shape[0] + dark.shape[0]))
            n_queried = dark.shape[0]
            bright = arr[:count[0]]
            B = bright.shape[0]
            value = base + total_at(log_odds, bright)
            # theta given z: one random-walk MH step on the pseudo-posterior
            for j in range(d):
                z[j] = rng.standard_normal()
            walk_move(theta, diag, chol, z, theta_new)
            n_evals = 0
            moved = False
            lp = prior_logpdf(code, pa, pb, pconst, theta_new)
            if not lp > -math.inf:
                if lp != lp:
                    return PRIOR_NAN, i, base
                base_new = -math.inf
            else:
                base_new = lp + bound_sum(c0, b, A, inv_temp, theta_new)
            if base_new != -math.inf:
                lo_new, bad = checked_log_odds(data, theta_new, bright, err, 1.0)
                if bad >= 0:
                    return BAD_BOUND, i, base
                n_queried += B
                n_evals = 1
                value_new = base_new + total(lo_new)
                if value_new != -math.inf:
                    if -rng.standard_exponential() < value_new - value + 0.0:
                        moved = True
                        for t in range(B):
                            log_odds[bright[t]] = lo_new[t]
                        theta[:] = theta_new
                        base = base_new
            samples[i] = theta
            accepted[i] = moved
            ints[i, 0] = B
            ints[i, 1] = n_queried
            ints[i, 2] = 0
            ints[i, 3] = n_evals
            ints[i, 4] = n_on
            ints[i, 5] = n_off
        return OK, stop, base

    return block


class _FireflyBlock(Block):
    def __init__(self, kernel, data, prior, rng, rows, state, target, z_update, walk, n_samples):
        bound = target.bound
        self._kernel, self._data, self._prior = kernel, data, prior
        self._rng = rng
        self._target = target
        # ExplicitZ draws rows from its own sampler's order; ImplicitZ reads none.
        self._order = rows.kernel_state() if rows is not None else _dummy_order()
        self._explicit_k = (max(1, round(z_update.fraction * target.N))
                            if isinstance(z_update, ExplicitZ) else 0)
        self._q = ((z_update.q_db, z_update.q_bd) if isinstance(z_update, ImplicitZ)
                   else (1.0, 1.0))
        self._walk = walk._kernel(target.dim)
        self._bound = (float(bound._c0), np.array(bound._b, dtype=float),
                       np.ascontiguousarray(bound._A, dtype=float), float(bound._inv_temp))
        self._z, self._log_odds = state.z, state.log_odds
        self.theta = np.array(state.theta, dtype=float)
        self._theta_new = np.empty_like(self.theta)
        self._base = float(state.base)
        self.accepted = np.zeros(n_samples, dtype=bool)
        self._ints = np.zeros((n_samples, len(_INT_FIELDS)), dtype=np.int64)
        self._err = np.zeros(4)

    def run(self, start, stop, samples):
        z = self._z
        status, done, self._base = self._kernel(
            self._data, self._rng, self._order, z.arr, z.tab, z.counter, self._log_odds,
            self.theta, self._theta_new, self._base, self._explicit_k, *self._q, *self._walk,
            self._prior, *self._bound, samples, self.accepted, self._ints, self._err, start,
            stop)
        self.done = done
        if status == PRIOR_NAN:
            raise ValueError(f"the log prior is NaN at theta={self._theta_new.copy()}")
        if status == BAD_BOUND:   # at theta (z-update) or theta_new (theta-update)
            row, ll, lb, where = self._err
            at = self._theta_new if where else self.theta
            self._target._report(at.copy(), int(row), ll, lb)

    def stats(self, n):
        out = {"accepted": self.accepted[:n].copy()}
        for k, name in enumerate(_INT_FIELDS):
            out[name] = self._ints[:n, k].copy()
        return out


def _dummy_order():
    from design._lib.rows import new_order

    return new_order(1)


def firefly_block(view, target, z_update, theta_update, rng, rows, state, n_samples):
    """The compiled Firefly chain (:class:`~samplers._blocks.Block`), or None for the Python
    loop: a compiled target (a built-in bound of the sampled model) with a built-in prior,
    ``ImplicitZ`` or ``ExplicitZ`` and ``RandomWalk`` (these classes exactly)."""
    if not target.compiled or type(theta_update) is not RandomWalk:
        return None
    if type(z_update) not in (ImplicitZ, ExplicitZ):
        return None
    parts = compiled_model(view)
    if parts is None:
        return None
    bound = target.bound
    kernel = firefly_kernel(bound._row_eta, bound._row_prefetch)
    return _FireflyBlock(kernel, bound._kernel_data(), parts[1], rng, rows, state, target,
                         z_update, theta_update, n_samples)
