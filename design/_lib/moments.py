"""Running mean and variance of the l_i seen so far, merged batch by batch (Chan et al.).

The arithmetic lives in small jitted functions shared by the Python reference path and the
compiled test loops, so both produce bit-identical statistics.
"""

from __future__ import annotations

import math

from .jit import jit


@jit
def batch_moments(values):
    """Mean and sum of squared deviations of ``values`` in two passes (NaN/inf propagate)."""
    n = values.shape[0]
    total = 0.0
    for v in values:
        total += v
    mean = total / n
    m2 = 0.0
    for v in values:
        d = v - mean
        m2 += d * d
    return mean, m2


@jit
def merge_moments(n, mean, m2, k, b_mean, b_m2):
    """Merge a batch (k, b_mean, b_m2) into (n, mean, m2): Chan, Golub & LeVeque (1979)."""
    total = n + k
    delta = b_mean - mean
    return total, mean + delta * k / total, m2 + b_m2 + delta * delta * n * k / total


class RunningMoments:
    """Count, mean and M2 (sum of squared deviations) of a stream of batches.

    The pairwise merge stays accurate when the mean is small compared with the spread, as
    the l_i of a good proposal usually are.
    """

    __slots__ = ("n", "mean", "m2")

    def __init__(self):
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, values) -> bool:
        """Merge a batch; return False (with ``mean`` set to the batch mean) if not finite."""
        b_mean, b_m2 = batch_moments(values)
        if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
            self.mean = b_mean
            return False
        self.n, self.mean, self.m2 = merge_moments(self.n, self.mean, self.m2,
                                                   values.shape[0], b_mean, b_m2)
        return True

    def sample_sd(self) -> float:
        """Standard deviation with n - 1 in the denominator."""
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0

    def population_sd(self) -> float:
        """Standard deviation with n in the denominator."""
        return math.sqrt(self.m2 / self.n) if self.n > 0 else 0.0


@jit
def batch_moments3(values):
    """Mean and sums of squared and cubed deviations of ``values`` (two passes)."""
    n = values.shape[0]
    total = 0.0
    for v in values:
        total += v
    mean = total / n
    m2 = 0.0
    m3 = 0.0
    for v in values:
        d = v - mean
        d2 = d * d
        m2 += d2
        m3 += d2 * d
    return mean, m2, m3


@jit
def merge_moments3(n, mean, m2, m3, k, b_mean, b_m2, b_m3):
    """:func:`merge_moments` plus the sum of cubed deviations (Pébay 2008, eq. 2.1)."""
    total, new_mean, new_m2 = merge_moments(n, mean, m2, k, b_mean, b_m2)
    delta = b_mean - mean
    new_m3 = (m3 + b_m3 + delta ** 3 * n * k * (n - k) / (total * total)
              + 3.0 * delta * (n * b_m2 - k * m2) / total)
    return total, new_mean, new_m2, new_m3


def merge_moments4(n, mean, m2, m3, m4, k, b_mean, b_m2, b_m3, b_m4):
    """:func:`merge_moments3` plus the sum of fourth powers of the deviations (Pébay 2008,
    eq. 2.1)."""
    total, new_mean, new_m2, new_m3 = merge_moments3(n, mean, m2, m3, k, b_mean, b_m2, b_m3)
    delta = b_mean - mean
    new_m4 = (m4 + b_m4 + delta ** 4 * n * k * (n * n - n * k + k * k) / total ** 3
              + 6.0 * delta * delta * (n * n * b_m2 + k * k * m2) / (total * total)
              + 4.0 * delta * (n * b_m3 - k * m3) / total)
    return total, new_mean, new_m2, new_m3, new_m4


@jit
def abs_central_sums(values, center):
    """``sum |v - center|`` and ``sum |v - center|^3`` over ``values``."""
    s1 = 0.0
    s3 = 0.0
    for v in values:
        d = abs(v - center)
        s1 += d
        s3 += d * d * d
    return s1, s3
