"""The error in the acceptance probability, pair by pair: predicted and simulated (private).

A design promises a mean |Delta| over pairs, Delta = P(the test accepts) - Pa (u ~ U(0, 1)
integrated out, Korattikara et al. 2014, Eq. 6). For each pair of real l_i this module gives
three estimates of Delta:

* ``gaussian`` -- the Gaussian dynamic programme the design used (:func:`design.acceptance_error`);
* ``edgeworth`` -- the programme with the Edgeworth-corrected per-stage law (skewness and
  excess kurtosis of the l_i; ``law="edgeworth"``);
* ``simulated`` -- the real sequential t-test on the real l_i, u integrated out exactly:
  for one random order of the rows the thresholds mu0 the test accepts form a half-line
  below a path threshold tau (``validation._kernels``), so P(accept | path) =
  min(1, exp(N tau + c)) and Delta = mean over paths - Pa, with the standard error of that
  mean. A path only needs reading until its undecided interval leaves the window of
  thresholds where min(1, exp(N mu0 + c)) is in (e^-40, 1): the same rows a test at the
  hardest u of the window reads.
"""

from __future__ import annotations

import math

import numpy as np

from design._lib.jit import jit
from design._lib.rows import restart_order

from ._kernels import _extend, _narrow, austere_se

__all__ = ["austere_path_acceptance"]

#: Width of the window of thresholds, in units of 1 / N of log u (exp(-40) ~ 4e-18).
_WINDOW = 40.0


@jit
def austere_path_acceptance(l, order, m, crit, log_const, rng, out):
    """P(accept | path) of the sequential t-test for ``out.size`` random row orders.

    ``crit`` are the critical values of |t| per stage, ``log_const`` the data-free part c of
    the log MH ratio (exact MH accepts iff log u < sum l_i + c). Each path draws rows as a
    chain's test does (stages of m rows, :func:`design._lib.rows.draw_rows`) until its
    undecided interval [a, b] leaves the window [(-c - 40) / N, -c / N] or all N rows are
    read; then P(accept | path) = min(1, exp(N tau + c)), tau = min(max(mean, a), b).
    """
    N = l.shape[0]
    mu = np.mean(l)
    hi_win = -log_const / N
    lo_win = (-log_const - _WINDOW) / N
    u, rows, buf = np.empty(m), np.empty(m, dtype=np.intp), np.empty(m)
    for k in range(out.shape[0]):
        a, b = -math.inf, math.inf
        n, mean, m2, stage = 0, 0.0, 0.0, 0
        restart_order(order)
        while n < N and a < b and a < hi_win and b > lo_win:
            n, mean, m2 = _extend(l, order, rng, n, mean, m2, min(m, N - n), u, rows, buf)
            if n < N:
                r = crit[stage] * austere_se(m2, n, N)
                a, b = _narrow(a, b, mean - r, mean + r)
            stage += 1
        tau = min(max(mu, a), b)      # outside the window only its side matters
        out[k] = math.exp(min(N * tau + log_const, 0.0))
