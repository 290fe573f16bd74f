"""The real accept/reject test run many times on one pair's l_i."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from design._lib.checks import check_int
from design._lib.rows import new_order

from ._kernels import repeated_decisions

__all__ = ["SimulatedAcceptance", "simulate_acceptance"]


@dataclass(frozen=True)
class SimulatedAcceptance:
    """The error of a test at one pair, by repeating its decision.

    Attributes
    ----------
    accept_rate : float
        Fraction of the ``n`` decisions that accepted.
    target : float
        The acceptance probability the test approximates: ``min(1, exp(N mu + c))`` for an
        MH test, ``S(N mu + c)`` (logistic) for the Barker test.
    delta, delta_se : float
        ``P_test(accept) - target`` and its Monte Carlo standard error.
    rows_per_decision : float
        Mean rows read.
    """

    accept_rate: float
    target: float
    delta: float
    delta_se: float
    rows_per_decision: float


def simulate_acceptance(test, l, *, log_const=0.0, n=10_000, C=None,
                        rng=None) -> SimulatedAcceptance:
    """Run a sequential test ``n`` times on the l_i of one pair and measure its error.

    Parameters
    ----------
    test : samplers.AustereTest, samplers.BarkerTest, samplers.ConfidenceTest, ...
        Any sequential test (its own rule and draw run, in the engine's compiled driver).
    l : array_like
        The pair's N log-likelihood ratios.
    log_const : float
        The data-free log ratio ``c``.
    n : int
        Decisions (each on a fresh random row order; an MH test draws a fresh u).
    C : float, optional
        The range of the l_i for a test that needs one (default ``max |l_i|``).
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    SimulatedAcceptance

    Notes
    -----
    For an MH test each decision is compared with exact MH at the same ``u`` (common random
    numbers: the per-decision difference has variance at most the error rate); the Barker
    test draws no u and is compared with Barker's acceptance ``S(N mu + c)``.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import BarkerTest
    >>> from validation import simulate_acceptance
    >>> l = np.random.default_rng(0).normal(0.0, 1e-3, 20_000)
    >>> r = simulate_acceptance(BarkerTest(m=100, delta=None), l, n=2000, rng=1)
    >>> abs(r.delta) < 5 * r.delta_se + 1e-3
    True
    """
    from samplers import BarkerTest

    n = check_int("n", n, low=2)
    l = np.ascontiguousarray(l, dtype=np.float64).ravel()
    if l.size < 2 or not np.all(np.isfinite(l)):
        raise ValueError(f"l must be a finite vector of at least 2 values, got shape {l.shape}")
    log_const = float(log_const)
    if not math.isfinite(log_const):
        raise ValueError(f"log_const must be finite, got {log_const}")
    rng = np.random.default_rng(rng)
    N = l.shape[0]
    mu = float(np.mean(l))
    C = float(np.max(np.abs(l))) if C is None else float(C)
    spec = test.engine_spec(N, C=C, log_const=log_const)
    acc, exact = np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_)
    used = np.zeros(n, dtype=np.int64)
    repeated_decisions(spec)(l, new_order(N), mu, math.nan, log_const, rng, acc, exact, used)
    if isinstance(test, BarkerTest):
        target = float(special.expit(N * mu + log_const))
        d = acc - target
    else:
        target = float(math.exp(min(N * mu + log_const, 0.0)))
        d = acc.astype(float) - exact
    return SimulatedAcceptance(float(acc.mean()), target, float(d.mean()),
                               float(d.std(ddof=1) / math.sqrt(n)), float(used.mean()))
