"""A sequential test with one normal critical value and Cochran's unbiased variance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from scipy import special

from design._lib.checks import check_int, check_interval
from design._lib.jit import jit

from .base import IntervalTest

__all__ = ["FPCNormalInfo", "FPCNormalSettings", "FPCNormalTest"]


class FPCNormalSettings(NamedTuple):
    """Rows per stage and the normal critical value ``z = Phi^-1(1 - epsilon)``."""

    m: int
    z: float


class FPCNormalInfo(NamedTuple):
    n_used: int
    n_stages: int


@jit
def fpc_normal_radius(n, N, stage, mean, m2, settings):
    """``z sqrt(s^2 (1 - n/N) / n)``, ``s^2 = m2 / (n - 1)``; infinite before two rows."""
    if n < 2:
        return math.inf
    return settings.z * math.sqrt(m2 / (n - 1) * (1.0 - n / N) / n)


@jit
def fpc_normal_stages(n, N, stage, settings):
    """Every stage reads ``settings.m`` rows."""
    return settings.m


@jit
def fpc_normal_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """The info row of a decision: ``(n_used, n_stages)`` (:class:`FPCNormalInfo`)."""
    info[0], info[1] = n_used, stage


@dataclass(frozen=True)
class FPCNormalTest(IntervalTest):
    """Sequential test with a normal threshold and the unbiased without-replacement variance.

    Reads stages of ``m`` rows without replacement. After ``n`` rows with mean ``l_bar`` and
    sample variance ``s^2 = sum (l_i - l_bar)^2 / (n - 1)`` it estimates the variance of
    ``l_bar`` by

        v_n = s^2 (1 - n/N) / n,

    the unbiased estimator under simple random sampling without replacement (Cochran 1977,
    Sampling Techniques, Theorem 2.4 with eq. 2.16), and decides as soon as
    ``|l_bar - mu0| > z sqrt(v_n)`` with ``z = Phi^-1(1 - epsilon)``: accept iff
    ``l_bar > mu0``. At n = N the decision is exact (``v_N = 0``).

    How it differs from ``AustereTest(threshold="normal")``: that test (Korattikara et al.
    2014, Algorithm 1) uses the finite-population factor ``1 - (n - 1)/(N - 1)``, i.e.
    ``(N - n)/(N - 1)`` where this one uses ``(N - n)/N``; its standard error is larger by
    ``sqrt(N / (N - 1))``, so this test stops at the same stage or earlier, with the same
    error to O(1/N). It also needs no table of critical values (one ``z`` for every
    stage), so it never pauses to extend one. Its error is predicted by
    :func:`design.sequential_error` with ``threshold="normal"``.

    It is written as a plain rule: :func:`fpc_normal_radius` and :func:`fpc_normal_stages`
    are all the engine (:mod:`samplers.mhtests.engine`) and the checks need.

    Parameters
    ----------
    m : int
        Rows per stage, ``2 <= m <= N``.
    epsilon : float
        Per-stage error level in (0, 0.5).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import FPCNormalTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 100_000))
    >>> chain = sample(model, FPCNormalTest(m=500, epsilon=0.05), RandomWalk(0.005), [1.0],
    ...                300, rng=2)
    >>> bool(chain.stats["n_used"].mean() < 100_000)
    True
    """

    m: int = 500
    epsilon: float = 0.01

    radius = staticmethod(fpc_normal_radius)
    grow = staticmethod(fpc_normal_stages)
    info_kernel = staticmethod(fpc_normal_info)

    def __post_init__(self):
        object.__setattr__(self, "m", check_int("m", self.m, low=2))
        object.__setattr__(self, "epsilon", check_interval("epsilon", self.epsilon, 0.0, 0.5))

    def check(self, view):
        if self.m > view.N:
            raise ValueError(f"m must be <= N = {view.N} (the number of rows), got {self.m}")

    def _settings(self, view, theta, theta_new, log_const):
        return FPCNormalSettings(self.m, float(special.ndtri(1.0 - self.epsilon)))

    def _vector_settings(self, N, C, log_const):
        return self._settings(None, None, None, log_const)

    def design_parameters(self):
        return self.m, self.epsilon

    def a_priori_error(self, N):
        """``E(0, m, epsilon)`` of the dynamic programme with normal thresholds."""
        from design import sequential_error

        return float(sequential_error(0.0, m=self.m, epsilon=self.epsilon, N=N,
                                      threshold="normal").error)

    def null_info(self):
        return FPCNormalInfo(0, 0)
