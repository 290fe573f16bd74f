"""Full-data Metropolis-Hastings, the baseline every approximate test is compared with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from .base import AcceptanceTest, nonfinite_decision

__all__ = ["ExactInfo", "ExactTest"]


class ExactInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Mean of the l_i over all N rows.
    l_mean: float
    #: Population standard deviation of the l_i over all N rows.
    l_std: float


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
