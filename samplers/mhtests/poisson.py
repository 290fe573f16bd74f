"""Exact minibatch Metropolis-Hastings: SMH, TunaMH and MH-SS as pluggable tests.

Why these are not sequential tests run by :mod:`~samplers.mhtests.engine`: the engine reads
rows of one without-replacement order in stages and stops by a rule on the running moments
of the l_i. A Poisson-factor test fixes its batch size B before reading any row (one
Poisson draw from the pair's bound), draws rows *with* replacement with probability
``c_i / C`` (an alias table), needs each row's own bound ``b_i`` and a thinning uniform
per row, and decides from a product over the kept rows, not from a mean and a variance.
None of that is a stage rule over moments, so the three tests share their own compiled
loop below and implement :class:`~samplers.mhtests.base.AcceptanceTest` directly; the
full-data fallback is :class:`~samplers.ExactTest`'s decision. Without a proxy (TunaMH on a
built-in model) the compiled chain loop runs the whole decision with the same loop and the
same draws (:func:`poisson_decide`, the test's compiled decision).

All three decide with a Poisson number of rows and leave the posterior exactly invariant.
Write the log target as ``log p0(theta) + sum_i proxy_i(theta) + sum_i r_i(theta)``, the
proxy a Taylor expansion at a centre (order k in {1, 2}; ``proxy = 0`` for k = 0) whose
total over all rows costs O(d^2) (:class:`~samplers.models.remainder.TaylorRemainder`), and
``delta_i = r_i(theta') - r_i(theta)`` the residual change of row i, bounded by
``|delta_i| <= b_i = c_i phi(theta, theta')``. One step:

1. (deterministic factor) accept with probability ``min(1, exp(c + P))``, ``c`` the log
   prior and proposal ratio and ``P = sum_i proxy_i(theta') - proxy_i(theta)``; reject
   otherwise without reading data;
2. (Poisson factor) draw ``B ~ Poisson(lambda + C phi)``, ``lambda = chi C^2 phi^2``,
   ``C = sum_i c_i``, rows ``i ~ c_i / C`` with replacement, and keep row i with
   probability ``(lambda c_i / C + phi_i) / (lambda c_i / C + b_i)``: the kept rows are
   independent ``s_i ~ Poisson(lambda c_i / C + phi_i)``, where

       phi_i = gamma max(0, -delta_i) + (1 - gamma) (b_i - max(0, delta_i)),
       phi_i' = phi_i + delta_i

   (``phi_i'`` is ``phi_i`` of the reverse move, both in [0, b_i]);
3. accept with probability
   ``min(1, prod_kept (lambda c_i / C + phi_i') / (lambda c_i / C + phi_i))``.

Step 2-3 is Metropolis-Hastings on (theta, s) with ``s`` drawn afresh each step: the ratio
of the reverse to the forward auxiliary law is ``exp(-sum_i delta_i) prod_i (.)^{s_i}``, and
``exp(-sum_i delta_i)`` cancels the target's residual factor ``exp(sum_i delta_i)``; steps
1 and 3 form a factorised acceptance (Cornish et al. 2019, eq. 4), reversible because each
factor is. ``gamma = 1, chi = 0`` is SMH (a kept row has ratio 0: the step is rejected, so
the Poisson factor is ``prod_i min(1, exp(delta_i))``; Cornish et al., Algorithm 1 with
Poisson thinning, section 3.1), ``gamma = 1/2`` with ``k = 0`` and ``chi > 0`` is TunaMH
(Zhang, Cooper & De Sa 2020, Algorithm 1), and ``gamma = 0`` with control variates is
MH-SS (Prado, Nemeth & Sherlock 2024, Algorithm 2 with their gamma = 0, "phi_min"). When
the expected batch ``lambda + C phi`` reaches N the step is plain MH on all rows instead
(a choice made symmetrically from the pair, so still reversible).

Every row read is checked: ``|delta_i| > b_i`` means the model's bound is wrong, and the
chain would silently target the wrong law, so the step raises :class:`BoundViolation`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

import numpy as np

from design._lib.checks import check_finite_array, check_interval
from design._lib.jit import jit
from design._lib.prefetch import prefetch_ahead

from .._poisson import PoissonBatches, alias_rows, uniform_rows
from ..models.control_variates import ControlVariates
from ..models.remainder import (TaylorRemainder, has_remainder_bounds, remainder_phi,
                                remainder_totals)
from .base import AcceptanceTest, unchanged_below
from .compiled import Decision
from .exact import ExactTest
from .status import DECIDED, PYTHON_STEP, VIOLATION

__all__ = ["SMHTest", "TunaMHTest", "ScalableSubsamplingTest", "ExactMinibatchInfo",
           "BoundViolation"]

#: Relative slack on a bound before a row counts as violating it (rounding of delta_i).
BOUND_RTOL = 1e-9
#: Absolute slack (rounding of the differences of log-densities summed into delta_i).
BOUND_ATOL = 1e-11

_OK, _VIOLATION = 0, 1


class BoundViolation(ValueError):
    """A row's residual change exceeded its per-row bound: the bound is wrong for this model."""


class ExactMinibatchInfo(NamedTuple):
    #: Rows read (Poisson rows up to the decision, or N on a full-data step).
    n_used: int
    #: 1 if any row was read, else 0 (decided by the deterministic factor, or B = 0).
    n_stages: int
    #: The Poisson batch size B drawn (0 if step 1 rejected before drawing it).
    batch: int
    #: Its expectation ``lambda + C phi(theta, theta')`` for this pair.
    rate: float
    #: Rows kept by the thinning (the s_i > 0 events).
    n_kept: int
    #: Whether the step fell back to plain MH on all N rows (rate >= N).
    full_data: bool


@cache
def _decision_loop(row_ratio, row_prefetch):
    """The compiled Poisson factor (steps 2-3 of the module docstring) over drawn rows."""

    @jit
    def kernel(data, idx, v, theta, theta_new, c_all, c_uniform, phi, lam_over_c, gamma,
               stop_at_zero):
        log_ratio = 0.0
        n_kept = 0
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            delta = row_ratio(data, idx[t], theta, theta_new)
            c = c_uniform if c_uniform > 0.0 else c_all[idx[t]]
            b = c * phi
            if not abs(delta) <= b * (1.0 + BOUND_RTOL) + BOUND_ATOL:
                return _VIOLATION, log_ratio, t + 1, n_kept, t, delta, b
            pos = max(delta, 0.0)
            neg = max(-delta, 0.0)
            fwd = min(max(gamma * neg + (1.0 - gamma) * (b - pos), 0.0), b)
            bwd = min(max(fwd + delta, 0.0), b)
            lam = lam_over_c * c
            if v[t] * (lam + b) < lam + fwd:
                n_kept += 1
                if lam + bwd <= 0.0:
                    log_ratio = -math.inf
                    if stop_at_zero:
                        return _OK, log_ratio, t + 1, n_kept, -1, 0.0, 0.0
                else:
                    log_ratio += math.log((lam + bwd) / (lam + fwd))
        return _OK, log_ratio, idx.shape[0], n_kept, -1, 0.0, 0.0

    return kernel


@cache
def poisson_decide(loop):
    """:meth:`_PoissonFactorTest.decide` without a proxy (order 0: ``P = 0``, TunaMH on a
    plain model) as a compiled ``decide`` over the test's Poisson factor ``loop``
    (memoised), with the same draws in the same order. ``settings = (C, chi, gamma,
    stop_at_zero, c, c_uniform, prob, alias, weighted)``; info ``(n_used, n_stages, batch,
    rate, n_kept, full_data)``. A pair whose expected batch reaches N returns PYTHON_STEP
    before drawing anything: the full-data step (:class:`~samplers.ExactTest`'s decision, on
    every core) runs in Python."""

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
        if status != _OK:
            state[0], state[1], state[2] = idx[bad], delta, bound
            return VIOLATION, False, carry, values
        info[0], info[1], info[2], info[4] = n_read, 1, B, n_kept
        if n_kept == 0:
            return DECIDED, True, carry, values
        if log_ratio == -math.inf:
            return DECIDED, False, carry, values
        return DECIDED, -rng.standard_exponential() < log_ratio, carry, values

    return decide


@dataclass(frozen=True)
class _PoissonFactorTest(AcceptanceTest):
    """The shared engine (see the module docstring); subclasses fix order, chi and gamma."""

    order: int = 2
    chi: float = 0.0
    gamma: float = 0.0
    sampling: str = "weighted"
    center: object = None
    _prepared: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "chi", check_interval("chi", self.chi, 0.0, math.inf,
                                                       closed="left"))
        object.__setattr__(self, "gamma", check_interval("gamma", self.gamma, 0.0, 1.0,
                                                         closed="both"))
        if self.sampling not in ("weighted", "uniform"):
            raise ValueError(f"sampling must be 'weighted' or 'uniform', got {self.sampling!r}")
        if self.center is not None:
            object.__setattr__(self, "center", check_finite_array("center", self.center, ndim=1))

    def __getstate__(self):
        # The prepared tables belong to one model object in one process: a worker rebuilds
        # them, but from the bounds c_i computed here (they travel with their model, keyed
        # again on arrival), so a chain sent with its model (one pickle) does not redo the
        # O(N) pass over the rows on its worker.
        state = dict(self.__dict__)
        state["_prepared"] = [(v[0], v[1].rem.c if isinstance(v[1], _Prepared) else v[1])
                              for key, v in self._prepared.items()
                              if isinstance(v[1], _Prepared) or key[0] == "c"]
        return state

    def __setstate__(self, state):
        entries = state.pop("_prepared", [])
        self.__dict__.update(state)
        object.__setattr__(self, "_prepared", {("c", id(m)): (m, c) for m, c in entries})

    # -- set-up, once per model ------------------------------------------------------------

    def check(self, view):
        if not has_remainder_bounds(view.model):
            raise TypeError(
                f"{type(self).__name__} needs a model with per-row remainder bounds "
                f"(samplers.models.remainder); {type(view.model).__name__} has none. Built-in: "
                "LogisticRegression, LinearRegression, RobustRegression, GaussianMean (or a "
                "ControlVariates wrapping one)"
            )
        self.prepare(view.model)

    def prepare(self, model, *, executor=None):
        """The remainder bounds and Poisson batches for ``model`` (one O(N) pass, cached; on
        ``executor``'s workers when given, see :class:`~samplers.TaylorRemainder`)."""
        entry = self._prepared.get(id(model))
        if entry is not None and entry[0] is model:
            return entry[1]
        if self.center is not None and self.center.shape[0] != model.dim:
            raise ValueError(f"center must have {model.dim} element(s), got "
                             f"{self.center.shape[0]}")
        carried = self._prepared.get(("c", id(model)))
        c = carried[1] if carried is not None and carried[0] is model else None
        rem = TaylorRemainder(model, self.order, self.center, executor=executor, c=c)
        if not (math.isfinite(rem.c_sum) and math.isfinite(rem.c_max)):
            bad = int(np.flatnonzero(~np.isfinite(rem.c))[0])
            raise ValueError(
                f"{type(self).__name__} needs a finite bound c_i for every row, but row {bad} "
                f"of {type(model).__name__} has c_{bad} = {rem.c[bad]} (a NaN or infinite "
                "value in its data, e.g. a model built under skip_data_checks): the Poisson "
                "rate would be NaN. Remove or fix the row")
        if self.sampling == "weighted" and rem.c_sum > 0:
            batches, C, c_uniform = PoissonBatches(model.N, rem.c), rem.c_sum, 0.0
        else:
            batches, C, c_uniform = PoissonBatches(model.N), model.N * rem.c_max, rem.c_max
        loop = _decision_loop(rem.row_ratio, rem.row_prefetch)
        prep = _Prepared(rem, batches, C, c_uniform, loop, rem.decision_data())
        self._prepared.clear()
        self._prepared[id(model)] = (model, prep)
        return prep

    def expected_batch(self, model, theta, theta_new, *, executor=None, c_sum=None) -> float:
        """``lambda + C phi(theta, theta')``: the Poisson batch's mean for this pair.

        ``c_sum``: an estimate of ``sum_i c_i`` to price with instead of the pass
        (:func:`~samplers.models.remainder.sampled_remainder_sum`'s ``estimate``; weighted
        sampling on a :class:`~samplers.ControlVariates` model of this order only).

        With ``executor`` (a cluster, as ``ControlVariates(executor=)``), for a
        :class:`~samplers.ControlVariates` model whose bounds are not prepared yet, ``C``
        comes from one pass there (:func:`~samplers.models.remainder.remainder_totals`,
        kept for the next pairs) instead of :meth:`prepare`'s per-row bounds and alias
        table (24 bytes a row on this process): pricing the test needs only their sum or
        maximum. Equal to the prepared value to rounding.
        """
        theta, theta_new = np.asarray(theta, float), np.asarray(theta_new, float)
        if c_sum is not None:
            if not (self.sampling == "weighted" and isinstance(model, ControlVariates)
                    and model.order == self.order >= 1 and (
                        self.center is None or np.array_equal(self.center, model.center.theta))):
                raise ValueError("c_sum prices weighted sampling on a ControlVariates model "
                                 f"of order {self.order} at its centre; got sampling="
                                 f"{self.sampling!r} on {type(model).__name__}")
            C = check_interval("c_sum", c_sum, 0.0, math.inf)
            phi = remainder_phi(model.center.theta, self.order, theta, theta_new)
            return self.chi * (C * phi) ** 2 + C * phi
        entry = self._prepared.get(id(model))
        if executor is None or (entry is not None and entry[0] is model) or not (
                isinstance(model, ControlVariates) and model.order == self.order >= 1
                and (self.center is None or np.array_equal(self.center, model.center.theta))
                and has_remainder_bounds(model)):
            prep = self.prepare(model)
            C, phi = prep.C, prep.rem.phi(theta, theta_new)
        else:
            key = ("rate", id(model))
            got = self._prepared.get(key)
            if got is None or got[0] is not model:
                c_sum, c_max = remainder_totals(model, executor)
                if not (math.isfinite(c_sum) and math.isfinite(c_max)):
                    self.prepare(model)             # the error naming the bad row
                C = (c_sum if self.sampling == "weighted" and c_sum > 0
                     else model.N * c_max)
                got = self._prepared[key] = (model, C)
            C, phi = got[1], remainder_phi(model.center.theta, self.order, theta, theta_new)
        return self.chi * (C * phi) ** 2 + C * phi

    # -- one decision ----------------------------------------------------------------------

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        prep = self.prepare(view.model)
        rem = prep.rem
        phi = rem.phi(theta, theta_new)
        cphi = prep.C * phi
        lam = self.chi * cphi * cphi
        rate = lam + cphi
        if rate >= view.N:
            return self._full_data(rng, view, theta, theta_new, log_const, rate)
        if not -rng.standard_exponential() < log_const + rem.proxy(theta, theta_new):
            return False, ExactMinibatchInfo(0, 0, 0, rate, 0, False)
        B = int(rng.poisson(rate))
        if B == 0:
            return True, ExactMinibatchInfo(0, 0, 0, rate, 0, False)
        idx = prep.batches.rows(rng, B)
        v = rng.random(B)
        # rows read in place; or, from a store, the batch's rows read into memory
        data, rows, c_all = ((prep.data, idx, rem.c) if not rem.store_backed
                             else rem.rows_data(idx))
        status, log_ratio, n_read, n_kept, bad, delta, bound = prep.loop(
            data, rows, v, theta, theta_new, c_all, prep.c_uniform, phi, lam / prep.C,
            self.gamma,
            self.gamma == 1.0 and self.chi == 0.0,
        )
        if status == _VIOLATION:
            self._refuse(view, idx[bad], delta, bound, theta, theta_new)
        info = ExactMinibatchInfo(n_read, 1, B, rate, n_kept, False)
        if n_kept == 0:
            return True, info
        if log_ratio == -math.inf:
            return False, info
        return bool(-rng.standard_exponential() < log_ratio), info

    def _refuse(self, view, row, delta, bound, theta, theta_new):
        if math.isnan(delta):
            raise ValueError(f"the residual of row {row} is NaN between theta={theta} and "
                             f"theta_new={theta_new}; the log-likelihood is not defined there")
        raise BoundViolation(
            f"row {row}: the residual change |r_i(theta') - r_i(theta)| = {abs(delta):.6g} "
            f"exceeds its bound c_i phi(theta, theta') = {bound:.6g} (theta={theta}, "
            f"theta_new={theta_new}); {type(view.model).__name__}'s per-row remainder bound "
            f"(order {self.order}) is wrong, and a chain using it would not target the "
            "posterior. Fix the model's _link_derivative_bound."
        )

    def _full_data(self, rng, view, theta, theta_new, log_const, rate):
        """Plain MH on all N rows: the :class:`~samplers.ExactTest` decision itself."""
        accepted, _ = ExactTest().decide(rng, view, None, theta, theta_new, log_const)
        return accepted, ExactMinibatchInfo(view.N, 1, 0, rate, 0, True)

    def null_info(self):
        return ExactMinibatchInfo(0, 0, 0, 0.0, 0, False)

    def compiled_decision(self, view):
        """:func:`poisson_decide` for a test without a proxy (order 0, no control variates:
        TunaMH on a built-in model); None otherwise (the Python loop adds the proxy)."""
        if not unchanged_below(self, _PoissonFactorTest, "decide", "_full_data", "prepare"):
            return None
        prep = self.prepare(view.model)
        if self.order != 0 or prep.rem.cv is not None:
            return None
        table = prep.batches.table
        weighted = table is not None
        prob = table.prob if weighted else np.empty(0)
        alias = table.alias if weighted else np.empty(0, dtype=np.int64)
        base = (float(prep.C), float(self.chi), float(self.gamma),
                bool(self.gamma == 1.0 and self.chi == 0.0), prep.rem.c, float(prep.c_uniform),
                prob, alias, weighted)

        def refuse(state, theta, theta_new):
            self._refuse(view, int(state[0]), float(state[1]), float(state[2]), theta,
                         theta_new)

        def python_step(rng, theta, theta_new, c):
            return self.decide(rng, view, None, theta, theta_new, float(c))

        return Decision(poisson_decide(prep.loop), base, refuse=refuse,
                        python_step=python_step)


class _Prepared(NamedTuple):
    rem: TaylorRemainder
    batches: PoissonBatches
    C: float
    c_uniform: float
    loop: object
    data: tuple


def _check_order(order, allowed):
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order not in allowed:
        raise ValueError(f"order must be one of {allowed}, got {order!r}")
    return int(order)


@dataclass(frozen=True)
class SMHTest(_PoissonFactorTest):
    """Scalable Metropolis-Hastings (Cornish et al. 2019): factorised acceptance with
    Poisson thinning over the residual factors of a Taylor proxy.

    Accepts with probability ``min(1, exp(c + P)) prod_i min(1, exp(delta_i))`` (their eq. 4
    with the proxy's total P in the deterministic factor), reading ``B ~ Poisson(C phi)``
    rows (with replacement, ``P(i) = c_i / C``) and stopping at the first row that rejects.
    With posterior-scale proposals ``E[B] = O(1)`` for order 1 and ``O(N^{-1/2})`` for order
    2 (their section 3.3). See :mod:`samplers.mhtests.poisson` for the algebra.

    Parameters
    ----------
    order : {1, 2}
        Order of the Taylor proxy (the model may also be a :class:`~samplers.ControlVariates`
        of that order, whose centre is then used).
    sampling : {"weighted", "uniform"}
        Rows drawn with probability ``c_i / C`` (an alias table, built once) or uniformly
        (with ``C = N max_i c_i``, a looser bound).
    center : array of shape (d,), optional
        Expansion point; default the posterior mode (found by
        :class:`~samplers.ControlVariates`).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean, RandomWalk, SMHTest, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 100_000))
    >>> chain = sample(model, SMHTest(order=1), RandomWalk(0.005), [1.0], 300, rng=1)
    >>> bool(chain.stats["n_used"].mean() < 10)
    True
    """

    def __init__(self, order=2, *, sampling="weighted", center=None):
        object.__setattr__(self, "order", _check_order(order, (1, 2)))
        super().__init__(order=self.order, chi=0.0, gamma=1.0, sampling=sampling, center=center)

    def __repr__(self):
        return f"SMHTest(order={self.order}, sampling={self.sampling!r})"


@dataclass(frozen=True)
class TunaMHTest(_PoissonFactorTest):
    """TunaMH (Zhang, Cooper & De Sa 2020, Algorithm 1): a Poisson minibatch of mean
    ``chi C^2 M^2 + C M`` with ``|l_i| <= c_i M(theta, theta')``, ``M = ||theta' - theta||``.

    No control variates: for logistic regression ``c_i = ||x_i|| / K`` (1-Lipschitz).
    ``chi`` trades the batch size against the acceptance rate: a kept row multiplies the
    ratio by ``(lambda c_i / C + (b_i + l_i) / 2) / (lambda c_i / C + (b_i - l_i) / 2)``, close
    to 1 only when ``lambda >> C M``, i.e. ``chi >> 1 / (C M)``. At posterior scale ``C M``
    grows like ``sqrt(N)`` and the batch ``chi C^2 M^2 + C M`` needed for MH-like acceptance
    like ``N`` (``benchmarks/bench_exact_minibatch.py``: at N = 10^6, d = 10, about 10^4 rows
    for acceptance 0.13); the control-variate tests avoid this.

    Parameters
    ----------
    chi : float
        > 0.
    sampling : {"weighted", "uniform"}

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import LogisticRegression, RandomWalk, TunaMHTest, sample
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 2)); y = (X @ [1.0, -1.0] + rng.logistic(size=20_000) > 0)
    >>> chain = sample(LogisticRegression(X, y.astype(float)), TunaMHTest(chi=1e-5),
    ...                RandomWalk(0.005), [1.0, -1.0], 200, rng=1)
    >>> bool(chain.stats["n_used"].mean() < 20_000)
    True
    """

    def __init__(self, chi=1e-4, *, sampling="weighted"):
        if isinstance(chi, bool) or not isinstance(chi, (int, float, np.floating, np.integer)):
            raise TypeError(f"chi must be a real number > 0, got {chi!r}")
        if not (math.isfinite(chi) and chi > 0):
            raise ValueError(f"chi must be > 0 (TunaMH's batch-size/acceptance trade-off), "
                             f"got {chi!r}")
        super().__init__(order=0, chi=float(chi), gamma=0.5, sampling=sampling,
                         center=None)

    def __repr__(self):
        return f"TunaMHTest(chi={self.chi:g}, sampling={self.sampling!r})"


@dataclass(frozen=True)
class ScalableSubsamplingTest(_PoissonFactorTest):
    """MH-SS (Prado, Nemeth & Sherlock 2024): control variates inside a TunaMH-style
    Poisson test.

    The rows kept by the thinning have Poisson rates ``lambda c_i / C + phi_i`` with
    ``phi_i = gamma max(0, -delta_i) + (1 - gamma)(b_i - max(0, delta_i))``; their gamma = 0
    (the default) keeps more rows than SMH but never forces a rejection, so it accepts more.
    ``gamma = 1`` is SMH; ``chi > 0`` adds TunaMH's extra rate.

    Parameters
    ----------
    order : {1, 2}
    chi : float
        >= 0 (0 in the paper's MH-SS).
    gamma : float
        In [0, 1].
    sampling : {"weighted", "uniform"}
    center : array of shape (d,), optional

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean, RandomWalk, ScalableSubsamplingTest, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 100_000))
    >>> chain = sample(model, ScalableSubsamplingTest(order=1), RandomWalk(0.005), [1.0], 300,
    ...                rng=1)
    >>> bool(chain.acceptance_rate > 0.5)
    True
    """

    def __init__(self, order=2, *, chi=0.0, gamma=0.0, sampling="weighted", center=None):
        object.__setattr__(self, "order", _check_order(order, (1, 2)))
        super().__init__(order=self.order, chi=chi, gamma=gamma, sampling=sampling,
                         center=center)

    def __repr__(self):
        return (f"ScalableSubsamplingTest(order={self.order}, chi={self.chi:g}, "
                f"gamma={self.gamma:g}, sampling={self.sampling!r})")
