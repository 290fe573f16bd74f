"""Full-data Metropolis-Hastings, the baseline every approximate test is compared with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np

from design._lib.jit import jit

from .base import AcceptanceTest, nonfinite_decision, unchanged_below
from .compiled import Decision, nonfinite_status
from .status import DECIDED

__all__ = ["ExactInfo", "ExactTest"]


class ExactInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Mean of the l_i over all N rows.
    l_mean: float
    #: Population standard deviation of the l_i over all N rows.
    l_std: float


@cache
def exact_decide(ratio_chunks):
    """:meth:`ExactTest.decide` as a compiled ``decide`` for a model of one chunk of rows
    (N <= ``FULL_CHUNK``: the pass the Python loop runs, in the calling thread)."""
    from .._view import FULL_CHUNK, _merge_chunks

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
            return nonfinite_status(mean), False, carry, values
        info[3] = math.sqrt(m2 / n) if n > 0 else 0.0
        return DECIDED, log_u < mean * N + c, carry, values

    return decide


@dataclass(frozen=True)
class ExactTest(AcceptanceTest):
    """Full-data Metropolis-Hastings: the baseline every approximate test is compared with.

    Reads all N rows in chunks each step (O(N), on every core for a built-in model);
    records the mean and population sd of the l_i, which is what a trial chain for
    :func:`design.optimize` needs.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ExactTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 2000))
    >>> chain = sample(model, ExactTest(), RandomWalk(0.05), [1.0], 200, rng=1)
    >>> int(chain.stats["n_used"][0])
    2000
    """

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        log_u = -rng.standard_exponential()
        finite, mom = view.full_ratio_moments(theta, theta_new)
        if not finite:
            accepted = nonfinite_decision(mom.mean, theta_new)
            return accepted, ExactInfo(view.N, 1, mom.mean, math.nan)
        accepted = log_u < mom.mean * view.N + log_const
        return accepted, ExactInfo(view.N, 1, mom.mean, mom.population_sd())

    def null_info(self):
        return ExactInfo(0, 0, math.nan, math.nan)

    def compiled_decision(self, view):
        """The full-data pass in the block, for a model of one chunk of rows; None for more
        rows (the Python loop runs the pass on every core) or no row kernels."""
        from .._view import FULL_CHUNK

        if (view.N > FULL_CHUNK or view.row_ratio is None
                or not unchanged_below(self, ExactTest, "decide")):
            return None
        return Decision(exact_decide(view._ratio_chunks), ())
