"""The penalty test: Metropolis-Hastings with a noisy log ratio, corrected by its variance.

Ceperley & Dewing (1999) accept a move whose log acceptance ratio is known only through an
estimate ``Delta* ~ N(Delta, sigma^2)`` with probability ``min(1, exp(Delta* - sigma^2 /
2))``. Averaged over the noise this acceptance still satisfies detailed balance: for
Gaussian noise of known variance it is an exact randomized acceptance (Nicholls, Fox &
Muir Watt 2012), the "penalty" ``sigma^2 / 2`` cancelling the bias that the
noise gives ``exp(Delta*)``. On tall data ``Delta* = N mean_b + c`` is the minibatch
estimate of the log ratio from ``b`` rows drawn without replacement, and ``sigma^2`` its
estimated variance ``N^2 s^2 (1 - b/N) / b``, ``s^2`` the sample variance of the l_i.

The estimate is Gaussian only approximately (the l_i are averaged, so by the CLT) and
``sigma^2`` is estimated, so the test is exact only in the limit; its error is small where
``sigma^2`` is, which is where it is useful: on a :class:`~samplers.ControlVariates` model
the l_i are the residuals of a Taylor proxy and, at posterior scale, ``N s`` shrinks like
``N^{-1/2}`` (order 2), so a batch of a few tens of rows gives ``sigma^2 << 1`` and an
acceptance rate within noise of exact MH's.

The test is one stage: it reads ``m`` rows (all N when ``m >= N``: then it is exact MH) and
stops. It is written as a rule for the engine (:mod:`samplers.mhtests.engine`) and an info
kernel; :class:`~samplers.mhtests.base.SequentialTest` generates both the Python decision
and the compiled one from them, so this file is all there is to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from design._lib.checks import check_int
from design._lib.jit import jit

from .base import SequentialTest
from .status import GROW, NONFINITE

__all__ = ["PenaltyInfo", "PenaltySettings", "PenaltyTest", "penalty_rule"]

#: Stopping statuses: the batch decided (with its penalty), or all N rows were read (exact).
STOP, EXACT = 1, 2


class PenaltySettings(NamedTuple):
    """Rows per decision."""

    m: int


class PenaltyInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Mean of the l_i read (``N mean + c`` is the estimate ``Delta*``).
    mean: float
    #: The estimated variance ``sigma^2`` of ``Delta*`` (twice the penalty; 0 when all N rows
    #: were read, NaN after a non-finite batch).
    var_delta: float


@jit
def penalty_variance(n, N, m2):
    """``N^2 s^2 (1 - n/N) / n`` with ``s^2 = m2 / (n - 1)``: the unbiased estimate of the
    variance of ``N mean`` over n rows drawn without replacement (as
    :class:`~samplers.FPCNormalTest`'s)."""
    return N * (N * (m2 / (n - 1.0))) * (1.0 - n / N) / n


@jit
def penalty_rule(values, k, N, stage, mean, m2, m3, mu0, settings, carry):
    """The engine's rule: a first stage of ``settings.m`` rows, then accept iff
    ``N (mean - mu0) > sigma^2 / 2`` (that is ``log u < Delta* - sigma^2 / 2``), or iff
    ``mean > mu0`` (exact MH) when all N rows were read. ``carry = (sigma^2,)``."""
    n = values.shape[0]
    if n == 0:
        return GROW, False, carry, settings.m
    if n == N:
        return EXACT, mean > mu0, (0.0,), 0
    var = penalty_variance(n, N, m2)
    return STOP, N * (mean - mu0) > 0.5 * var, (var,), 0


@jit
def penalty_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """The info row of a decision (:class:`PenaltyInfo`): ``(n_used, n_stages, mean,
    var_delta)``, the last two NaN after a non-finite batch."""
    info[0], info[1] = n_used, stage
    if status == NONFINITE:
        info[2] = info[3] = math.nan
        return
    info[2], info[3] = mean, carry[0]


@dataclass(frozen=True)
class PenaltyTest(SequentialTest):
    """The penalty method of Ceperley & Dewing (1999) on a minibatch of ``m`` rows.

    Accepts iff ``log u < Delta* - sigma^2 / 2`` with ``Delta* = N mean_m + c`` (``c`` the
    data-free log ratio) and ``sigma^2 = N^2 s^2 (1 - m/N) / m`` its estimated variance; see
    the module docstring for when this is close to exact MH.

    Parameters
    ----------
    m : int
        Rows per decision, ``m >= 2``; ``m >= N`` reads all rows (exact MH).

    Notes
    -----
    If ``Delta* ~ N(Delta, sigma^2)`` with ``sigma`` known, then
    ``E[min(1, exp(Delta* - sigma^2/2))] = Phi(Delta/sigma - sigma/2) + exp(Delta)
    Phi(-Delta/sigma - sigma/2)``, and the ratio of this function at ``Delta`` and ``-Delta``
    is ``exp(Delta)``: detailed balance holds (Ceperley & Dewing 1999; Nicholls et al.
    2012). Randomness, in order: ``u`` (one standard exponential), then the rows (one
    uniform each), as every sequential test draws them.

    References
    ----------
    Ceperley, D. M., & Dewing, M. (1999). The penalty method for random walks with uncertain
    energies. J. Chem. Phys. 110(20), 9812-9820.
    Nicholls, G. K., Fox, C., & Muir Watt, A. (2012). Coupled MCMC with a randomized
    acceptance probability. arXiv:1205.6857.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, LogisticRegression, RandomWalk, sample
    >>> from samplers.mhtests.penalty import PenaltyTest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 2)); y = (X @ [1.0, -1.0] + rng.logistic(size=20_000) > 0)
    >>> cv = ControlVariates(LogisticRegression(X, y.astype(float)))
    >>> walk = RandomWalk.from_laplace(cv)
    >>> chain = sample(cv, PenaltyTest(m=20), walk, cv.center.theta, 300, rng=1)
    >>> int(chain.stats["n_used"].max()), bool(chain.stats["var_delta"].mean() < 0.05)
    (20, True)
    """

    m: int = 100

    rule = staticmethod(penalty_rule)
    info_kernel = staticmethod(penalty_info)
    carry0 = (math.nan,)

    def __post_init__(self):
        object.__setattr__(self, "m", check_int("m", self.m, low=2))

    def _settings(self, view, theta, theta_new, log_const):
        return PenaltySettings(self.m)

    def _vector_settings(self, N, C, log_const):
        return PenaltySettings(self.m)

    def null_info(self):
        return PenaltyInfo(0, 0, math.nan, math.nan)
