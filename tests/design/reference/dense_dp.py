"""Brute-force reference for the sequential-test dynamic programme (NumPy/SciPy only).

An independent route to E, pi-bar and the expected number of stages, used to check the fast
kernel in ``design._dp``. It shares no code with the package beyond the problem statement:

* the drift mu_std is put into every transition kernel directly (no reweighting);
* the density of z_j on [-q_j, q_j] is carried on composite Gauss-Legendre panels a quarter
  of the narrowest kernel standard deviation wide (dense Nystrom, O(nodes^2) per stage);
* exits are integrated exactly against the Gaussian kernel (normal cdf), not by quadrature.

It is slow (dense matrices) and meant for J up to a few hundred stages.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import ndtr

_GL_T, _GL_W = np.polynomial.legendre.leggauss(12)


def _panels(lo, hi, width):
    n = max(1, int(np.ceil((hi - lo) / width)))
    edges = np.linspace(lo, hi, n + 1)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    x = (mid[:, None] + half[:, None] * _GL_T[None, :]).ravel()
    w = (half[:, None] * _GL_W[None, :]).ravel()
    return x, w


def schedule(m, N):
    """Stage sizes n_j = min(j m, N), j = 1..J."""
    J = -(-N // m)
    return np.minimum(np.arange(1, J + 1) * m, N)


def thresholds(n, epsilon, threshold):
    if threshold == "normal":
        return np.full(n.shape, stats.norm.isf(epsilon))
    return stats.t.isf(epsilon, n - 1)


def dense_sequential_error(mu_std, m, epsilon, N, threshold="normal", refine=1.0):
    """Return (E, pibar, expected_stages, p_final) for one standardized mean ``mu_std``.

    E is the probability of stopping on the wrong side (for mu_std = 0: below, the limit
    from mu_std > 0); p_final the probability of reaching n = N (always a correct decision).
    """
    n = schedule(m, N)
    J = n.size
    if J == 1:
        return 0.0, 1.0, 1.0, 1.0
    nm = n[:-1]                      # monitored stages 1..J-1
    tau = nm / (N - nm)
    pi = n / N
    q = thresholds(nm, epsilon, threshold)
    mu = float(mu_std)
    sgn = 1.0 if mu >= 0 else -1.0   # wrong side is below when mu >= 0
    s = np.sqrt(np.diff(tau) / tau[1:])              # kernel sd j -> j+1
    rho = np.sqrt(tau[:-1] / tau[1:])
    c = mu * np.diff(tau) / np.sqrt(tau[1:])
    scale = np.concatenate([[1.0], s])               # structure scale of the density at stage j
    # stage 1: z_1 ~ N(mu sqrt(tau_1), 1)
    a1 = mu * np.sqrt(tau[0])
    width = min(scale[0], s[0] if s.size else 1.0) / (4.0 * refine)
    x, w = _panels(-q[0], q[0], width)
    g = stats.norm.pdf(x - a1)
    low = ndtr(-q[0] - a1)
    high = ndtr(-(q[0] - a1))
    wrong = low if sgn > 0 else high
    surv = [float(np.sum(w * g))]
    for j in range(J - 2):
        nxt = s[j + 1] if j + 1 < s.size else s[j]
        width = min(s[j], nxt) / (4.0 * refine)
        y, wy = _panels(-q[j + 1], q[j + 1], width)
        mean = rho[j] * x + c[j]
        wg = w * g
        low = float(np.sum(wg * ndtr((-q[j + 1] - mean) / s[j])))
        high = float(np.sum(wg * ndtr(-(q[j + 1] - mean) / s[j])))
        wrong += low if sgn > 0 else high
        kern = stats.norm.pdf((y[:, None] - mean[None, :]) / s[j]) / s[j]
        g = kern @ wg
        x, w = y, wy
        surv.append(float(np.sum(w * g)))
    surv = np.array(surv)
    pibar = pi[0] + np.sum(np.diff(pi) * surv)
    stages = 1.0 + np.sum(surv)
    return float(wrong), float(pibar), float(stages), float(surv[-1])
