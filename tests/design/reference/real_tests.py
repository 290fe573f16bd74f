"""Simulation of the real tests (samplers' own compiled decision loops) on vectors of l_i.

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
from samplers import _seq
from samplers._accept import _BOUNDS
from design._lib.jit import jit
from design._lib.rows import new_order, restart_order
from samplers.models._kernels import prefetch_data0
from validation._kernels import vector_ratio


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


def _austere_driver(loop):
    @jit
    def run(l, order, m, log_const, crit, rng, accepted, exact, n_used):
        N = l.shape[0]
        data = (l,)
        theta = np.zeros(1)
        mu = np.mean(l)
        for k in range(accepted.shape[0]):
            mu0 = (-rng.standard_exponential() - log_const) / N
            restart_order(order)
            _, acc, _, n, _, _, _ = loop(data, theta, theta, rng, order, 0, m, mu0, crit,
                                         0, 0.0, 0.0, 0)
            accepted[k] = acc
            exact[k] = mu > mu0
            n_used[k] = n
    return run


def _barker_driver(loop):
    @jit
    def run(l, order, m, log_const, sigma, delta, check_eps, fpc, skewed, x0, h, step,
            density, cdf, rng, accepted, n_used):
        data = (l,)
        theta = np.zeros(1)
        for k in range(accepted.shape[0]):
            restart_order(order)
            _, acc, n, _, _, _, _, _ = loop(data, theta, theta, rng, order, m, log_const, sigma,
                                            delta, check_eps, fpc, skewed, x0, h, step,
                                            density, cdf)
            accepted[k] = acc
            n_used[k] = n
    return run


_DRIVERS = {}


def _driver(kind):
    if kind not in _DRIVERS:
        if kind == "austere":
            _DRIVERS[kind] = _austere_driver(_seq.austere_loop(vector_ratio, prefetch_data0))
        else:
            _DRIVERS[kind] = _barker_driver(_seq.barker_loop(vector_ratio, prefetch_data0))
    return _DRIVERS[kind]


def simulate(test, l, log_const, n_tests, rng, C=None):
    """Run ``test`` ``n_tests`` times on the population ``l`` with data-free term ``log_const``.

    ``C`` is the range bound a ``ConfidenceTest`` gets from the model.
    Returns ``(delta_hat, se, rows)``: the estimated P(accept) minus the exact test's (MH for
    the Austere and confidence tests, with common random numbers; Barker's S(Delta) for the
    Barker test), its standard error, and the mean rows read.
    """
    from validation._kernels import repeated_confidence

    l = np.ascontiguousarray(l, dtype=float)
    N = l.size
    order = new_order(N)
    acc = np.empty(n_tests, dtype=np.bool_)
    used = np.empty(n_tests, dtype=np.int64)
    kind = type(test).__name__
    if kind == "AustereTest":
        exact = np.empty(n_tests, dtype=np.bool_)
        crit = test.critical_values(N, -(-N // test.m))
        _driver("austere")(l, order, test.m, log_const, crit, rng, acc, exact, used)
        d = acc.astype(float) - exact
    elif kind == "ConfidenceTest":
        exact = np.empty(n_tests, dtype=np.bool_)
        repeated_confidence()(l, order, float(np.mean(l)), log_const, float(C), test.delta, test.p,
                              test.gamma, _BOUNDS.index(test.bound), test.batch_size, rng,
                              acc, exact, used)
        d = acc.astype(float) - exact
    else:
        _driver("barker")(l, order, test.m, log_const, *test._settings(), *test._draw_args,
                          rng, acc, used)
        d = acc.astype(float) - special.expit(N * np.mean(l) + log_const)
    return float(d.mean()), float(d.std() / math.sqrt(n_tests)) or 1.0 / n_tests, float(
        used.mean())
