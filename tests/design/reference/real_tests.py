"""Simulation of the real tests (the samplers' engine, asked from each test through ``engine_spec``) on vectors of l_i.

Shared by the design tests: a population of l_i per trial pair, a TrialChain built from it by
``TrialChain.from_model`` (the same scan a user's model gets), and drivers that run
``AustereTest``, ``BarkerTest`` and ``ConfidenceTest`` decisions many times per pair with u
(or X_nc, X_corr) drawn at random, exactly as a chain would.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from design import TrialChain
from design._lib.rows import new_order
from validation._kernels import repeated_decisions


class Populations:
    """A "model" whose pair p (theta = [p]) has the l_i of ``pops[p]``; flat prior.

    ``bound`` adds ``loglik_ratio_range`` returning ``(centre, bound * max|l - centre|)``,
    ``centre`` the pair's entry of ``centres`` (default 0), as a control-variate wrapper
    reports its residual bound about P / N.
    """

    def __init__(self, pops, bound=None, centres=None):
        self.pops = [np.ascontiguousarray(p, dtype=float) for p in pops]
        self.N = self.pops[0].size
        if bound is not None:
            cs = np.zeros(len(self.pops)) if centres is None else np.asarray(centres, float)

            def loglik_ratio_range(theta, theta_new):
                p = int(theta[0])
                return float(cs[p]), bound * float(np.max(np.abs(self.pops[p] - cs[p])))

            self.loglik_ratio_range = loglik_ratio_range

    def loglik_ratio(self, theta, theta_new, idx):
        return self.pops[int(theta[0])][idx]

    def logprior(self, theta):
        return 0.0

    def trial(self, log_const):
        """TrialChain of all pairs; ``log_const`` the data-free log ratio c of each pair."""
        idx = np.arange(len(self.pops), dtype=float)[:, None]
        return TrialChain.from_model(self, idx, idx, np.asarray(log_const, dtype=float))


def simulate(test, l, log_const, n_tests, rng, C=None):
    """Run ``test`` ``n_tests`` times on the population ``l`` with data-free term ``log_const``.

    ``C`` is the range bound a ``ConfidenceTest`` gets from the model.
    Returns ``(delta_hat, se, rows)``: the estimated P(accept) minus the exact test's (MH for
    the Austere and confidence tests, with common random numbers; Barker's S(Delta) for the
    Barker test), its standard error, and the mean rows read.
    """
    l = np.ascontiguousarray(l, dtype=float)
    N = l.size
    order = new_order(N)
    acc = np.empty(n_tests, dtype=np.bool_)
    exact = np.empty(n_tests, dtype=np.bool_)
    used = np.empty(n_tests, dtype=np.int64)
    spec = test.engine_spec(N, C=None if C is None else float(C), log_const=log_const)
    repeated_decisions(spec)(l, order, float(np.mean(l)), math.nan, log_const, rng, acc, exact,
                             used)
    if spec.draws_threshold:        # MH with common random numbers
        d = acc.astype(float) - exact
    else:                           # Barker: against S(Delta)
        d = acc.astype(float) - special.expit(N * np.mean(l) + log_const)
    return float(d.mean()), float(d.std() / math.sqrt(n_tests)) or 1.0 / n_tests, float(
        used.mean())
