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
error; it is not the authors' code. ``PAPER_TABLE`` holds their published output for
N = 13,000 (source: the README of yutian_chen/MATLAB_files in
github.com/DanielTakeshi/New_MH_Test, printed to 5 significant digits).
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import ndtr

PAPER_N = 13_000
PAPER_EPS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.2)
PAPER_M = (50, 100, 150, 200, 250, 300, 350, 400, 450, 500)
PAPER_ERROR = np.array([
    [0.031258, 0.025380, 0.022334, 0.019729, 0.017977, 0.017198, 0.016237, 0.014892, 0.013680, 0.012836],
    [0.11400, 0.095591, 0.085945, 0.077058, 0.071121, 0.068988, 0.065894, 0.060773, 0.056170, 0.053069],
    [0.18735, 0.16060, 0.14633, 0.13258, 0.12337, 0.12047, 0.11581, 0.10731, 0.099666, 0.094580],
    [0.43297, 0.40626, 0.38950, 0.37013, 0.35615, 0.35311, 0.34632, 0.33020, 0.31495, 0.30469],
    [0.49243, 0.48470, 0.47841, 0.46970, 0.46248, 0.46089, 0.45705, 0.44705, 0.43657, 0.42902],
    [0.49999, 0.49994, 0.49984, 0.49960, 0.49928, 0.49916, 0.49889, 0.49813, 0.49704, 0.49604],
])
PAPER_STAGES = np.array([
    [251.35, 126.49, 84.954, 63.638, 51.008, 43.215, 37.366, 32.489, 28.582, 25.648],
    [226.83, 116.18, 78.812, 59.474, 47.931, 40.754, 35.354, 30.850, 27.231, 24.498],
    [203.06, 105.92, 72.586, 55.196, 44.736, 38.178, 33.234, 29.110, 25.784, 23.260],
    [94.586, 55.730, 40.903, 32.717, 27.534, 24.097, 21.465, 19.273, 17.466, 16.045],
    [37.260, 25.563, 20.425, 17.358, 15.287, 13.815, 12.660, 11.693, 10.876, 10.205],
    [6.1591, 5.6047, 5.2510, 4.9892, 4.7812, 4.6096, 4.4629, 4.3340, 4.2188, 4.1158],
])


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
