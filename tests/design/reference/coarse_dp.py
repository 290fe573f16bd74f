"""Re-implementation of the authors' coarse dynamic programme (100 equal bins).

The worst-case values Korattikara et al. used for their designs (and that Seita et al.,
UAI 2017, appendix C.2.1, obtained from them for N = 13,000) come from a dynamic programme
on the data-fraction parametrisation pi_j = n_j / N with:

* the distribution of z_j held on L = 100 equal bins covering [-G, G] (G = Phi^-1(1 - eps)),
  the mass of a bin sitting at its centre (midpoint rule);
* transition z_j | z_{j-1} ~ N(b_j z_{j-1} + a_j mu_std, sig_j^2), the same Gaussian random
  walk as ``design.sequential_error`` in another parametrisation;
* exit probabilities from the normal cdf at +-G, the surviving mass renormalised to
  1 - (total exited) at every stage;
* the last stage (pi_J = 1) decided exactly.

This file is written from that description to show that the published numbers are this
scheme's, so their differences from ``design.sequential_error`` are its discretisation
error; it is not the authors' code. Their published output for N = 13,000 is
``design.reference_tables.KORATTIKARA_WORST_CASE`` (``PAPER_*`` below, for the tests).
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import ndtr

from design.reference_tables import KORATTIKARA_WORST_CASE

PAPER_N = KORATTIKARA_WORST_CASE.N
PAPER_EPS = KORATTIKARA_WORST_CASE.epsilon
PAPER_M = KORATTIKARA_WORST_CASE.m
PAPER_ERROR = KORATTIKARA_WORST_CASE.error
PAPER_STAGES = KORATTIKARA_WORST_CASE.stages


def coarse_sequential_error(mu_std, m, epsilon, N, bins=100):
    """(E, expected stages) by the 100-equal-bin scheme, normal thresholds."""
    J = -(-N // m)
    pi = np.minimum(np.arange(1, J + 1) * m, N) / N
    G = stats.norm.isf(epsilon)
    width = 2 * G / bins
    centres = -G + width * (np.arange(bins) + 0.5)
    c_prev, p_prev = np.zeros(1), np.ones(1)
    p_low = np.zeros(J)
    p_high = np.zeros(J)
    exited = 0.0
    for j in range(J):
        if pi[j] >= 1.0:  # last stage: exact decision (mu_std = 0 counts as above)
            (p_low if mu_std < 0 else p_high)[j] = p_prev.sum()
            break
        prev = pi[j - 1] if j else 0.0
        a = (pi[j] - prev) / (1 - prev) / np.sqrt(pi[j] * (1 - pi[j]))
        b = np.sqrt(prev / pi[j] * (1 - pi[j]) / (1 - prev))
        sig = np.sqrt((pi[j] - prev) / pi[j] / (1 - prev))
        mean = a * mu_std + b * c_prev
        p_low[j] = ndtr((-G - mean) / sig) @ p_prev
        p_high[j] = ndtr(-(G - mean) / sig) @ p_prev
        dens = stats.norm.pdf((centres[:, None] - mean[None, :]) / sig) / sig
        p_new = width * dens @ p_prev
        step = p_low[j] + p_high[j]
        if exited + step >= 1:       # the scheme's guard against mass above one
            p_low[j], p_high[j] = np.array([p_low[j], p_high[j]]) / step * max(1 - exited, 0)
            p_new[:] = 0
            exited = 1.0
        else:
            exited += step
            p_new *= (1 - exited) / p_new.sum()
        c_prev, p_prev = centres, p_new
    err = p_high.sum() if mu_std < 0 else p_low.sum()
    stages = np.arange(1, J + 1) @ (p_low + p_high)
    return float(err), float(stages)
