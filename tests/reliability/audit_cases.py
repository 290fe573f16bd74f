"""The reliability audit's case table for issue 27: each case is an input, the behaviour
expected of it (an error of a given type whose message names the argument, or a result that
passes a check), and the item of the issue it comes from.

Read by ``tests/reliability/test_audit.py`` (one test per case, in-process) and by
``benchmarks/audit.py`` (each case in its own process under a time limit, counted per class:
ok, silent-wrong, unclear, hang, crash). Cases whose fix lives on another branch carry
``pending``: the fix they wait for; the test marks them xfail and the audit counts them apart.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Case:
    """``run()`` either raises ``error`` with a message matching ``words`` (a regex), or, with
    ``error=None``, returns a value for which ``check(value)`` is true."""

    id: str
    item: str
    run: Callable
    error: type | None = None
    words: str = ""
    check: Callable = lambda value: True
    pending: str | None = None


def classify(case: Case) -> tuple[str, str]:
    """Run ``case`` in this process: ``("ok" | "silent-wrong" | "unclear", detail)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = case.run()
        except BaseException as exc:          # noqa: BLE001 (SystemExit, KeyboardInterrupt too)
            text = f"{type(exc).__name__}: {exc}"
            if case.error is None:
                return "unclear", f"expected a result, got {text}"
            if not isinstance(exc, case.error):
                return "unclear", f"expected {case.error.__name__}, got {text}"
            message = str(exc.code) if isinstance(exc, SystemExit) else str(exc)
            if not re.search(case.words, message):
                return "unclear", f"message lacks {case.words!r}: {text}"
            return "ok", text
    if case.error is not None:
        return "silent-wrong", f"expected {case.error.__name__}, got a result {value!r:.200}"
    if not case.check(value):
        return "silent-wrong", f"the result fails its check: {value!r:.200}"
    return "ok", "result passes its check"


# --- inputs ---------------------------------------------------------------------------------


def _x(n=3_000, seed=0):
    return np.random.default_rng(seed).normal(1.0, 2.0, n)


def _logistic(N, d, seed, nan_row=None):
    from samplers import LogisticRegression
    from samplers.models import skip_data_checks
    from samplers.priors import GaussianPrior

    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 1.0 / np.sqrt(d), (N, d))
    y = (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-X @ rng.normal(0.0, 0.5, d)))).astype(float)
    if nan_row is None:
        return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    X[nan_row, 0] = np.nan
    with skip_data_checks():
        return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


def _chain():
    from samplers import ExactTest, GaussianMean, RandomWalk, sample

    return sample(GaussianMean(_x(500)), ExactTest(), RandomWalk(0.1), [1.0], 20, rng=0)


def _fit(model, **kw):
    import validation

    return validation.fit(model, draws=200, n_trial=10, rng=0, **kw)


def _draws_ok(idata, draws):
    """Every chain of ``fit``'s posterior holds ``draws`` finite draws."""
    theta = idata.posterior["theta"].values
    return theta.shape[1] == draws and bool(np.isfinite(theta).all())


def _fit_gaussian_mean():
    from samplers import GaussianMean

    return _fit(GaussianMean(_x()))


def _fit_linear():
    from samplers import LinearRegression

    rng = np.random.default_rng(1)
    return _fit(LinearRegression(rng.normal(size=(3_000, 2)), rng.normal(size=3_000)))


def _mode_d100():
    from samplers import ControlVariates

    return ControlVariates(_logistic(20_000, 100, seed=1)).center


def _edgeworth_remedy():
    import design
    from design import TrialChain

    n, N = 10, 5_000
    rng = np.random.default_rng(0)
    sigma = np.full(n, 1e-3)
    trial = TrialChain(mu=3 * rng.normal(size=n) * sigma / np.sqrt(N), sigma=sigma,
                       c0=np.zeros(n), N=N, skewness=np.full(n, 3.0), kurtosis=np.full(n, 20.0),
                       abs_z1=np.full(n, 0.7), abs_z3=np.full(n, 3.0), max_abs=np.full(n, 0.05))
    grid, m_grid = [0.05, 0.1, 0.15, 0.2], [50, 100, 150]
    try:
        design.optimize(trial, 0.01, law="edgeworth", epsilon_grid=grid, m_grid=m_grid)
    except design.InfeasibleDesignError as err:
        return design.optimize(trial, 0.01, law="edgeworth", epsilon_grid=grid + [err.epsilon],
                               m_grid=m_grid)
    return None


class _NoN:
    def loglik(self, theta, idx):
        return np.zeros(len(idx))

    def logprior(self, theta):
        return 0.0


class _WrongSignature:
    N, dim = 100, 1

    def loglik(self, theta):
        return np.zeros(self.N)

    def logprior(self, theta):
        return 0.0


def _log_posterior(model, samples):
    from samplers import log_posterior

    return log_posterior(model, samples, progress=False)


def _barker_presized():
    from samplers import BarkerTest, GaussianMean, RandomWalk, sample

    return sample(GaussianMean(_x(5_000)), BarkerTest(stopping="presized"), RandomWalk(0.03),
                  [1.0], 20, rng=0)


def _demo_trial_3():
    from validation.workflow.cli import main

    return main(["demo", "--trial", "3"])


def _austere_large_epsilon():
    from samplers import AustereTest, GaussianMean, RandomWalk, sample

    return sample(GaussianMean(_x(20_000)), AustereTest(m=100, epsilon=0.6), RandomWalk(0.02),
                  [1.0], 50, rng=0)


def _tunamh_nan_row():
    from samplers import RandomWalk, TunaMHTest, sample

    model = _logistic(20_000, 3, seed=0, nan_row=123)
    return sample(model, TunaMHTest(), RandomWalk(0.02), np.zeros(3), 50, rng=0)


def _fit_far_center():
    from samplers import LogisticRegression

    rng = np.random.default_rng(2)
    X = rng.normal(size=(5_000, 2))
    y = (rng.uniform(size=5_000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    from samplers import ControlVariates

    model = LogisticRegression(X, y)
    idata = _fit(model, center=[30.0, -30.0])
    mean = np.asarray(idata.posterior["theta"]).reshape(-1, 2).mean(axis=0)
    return mean - ControlVariates(model).center.theta    # posterior sds are ~0.03


def _truncated_memmap():
    import os
    import tempfile

    from samplers import ExactTest, GaussianMean, RandomWalk, sample
    from samplers.datasets import write_memmap

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.npy")
        x = write_memmap(path, 200_000, lambda n, rng: rng.normal(size=n), rng=0)
        model = GaussianMean(x)
        os.truncate(path, 4096)
        return sample(model, ExactTest(), RandomWalk(0.01), [0.0], 5, rng=0)


# --- the table --------------------------------------------------------------------------------

CASES = (
    Case("fit-gaussian-mean", "5", _fit_gaussian_mean,
         check=lambda idata: _draws_ok(idata, 200)),
    Case("fit-linear-regression", "5", _fit_linear,
         check=lambda idata: _draws_ok(idata, 200)),
    Case("mode-search-d100", "8", _mode_d100,
         check=lambda center: center.method == "newton" and center.offset < 1.5e-6),
    Case("edgeworth-remedy-followed", "9", _edgeworth_remedy,
         check=lambda d: d is not None and d.error <= 0.01),
    Case("fit-on-a-class", "10", lambda: _fit(__import__("samplers").LogisticRegression),
         TypeError, r"model must be a model instance, got the class LogisticRegression"),
    Case("fit-model-without-N", "10", lambda: _fit(_NoN()),
         TypeError, r"model must have an attribute N.*_NoN has none"),
    Case("nan-data-skipped-checks", "10",
         lambda: __import__("samplers").ControlVariates(_logistic(2_000, 3, 0, nan_row=7)),
         ValueError, r"log-likelihood is nan.*data hold NaN.*skip_data_checks"),
    Case("to-arviz-names-string", "10", lambda: _chain().to_arviz(names="abc"),
         TypeError, r"names must be a sequence of strings.*'abc'"),
    Case("to-arviz-empty-var-name", "10", lambda: _chain().to_arviz(var_name=""),
         ValueError, r"var_name must be a non-empty name, got ''"),
    Case("log-posterior-strings", "10",
         lambda: _log_posterior(__import__("samplers").GaussianMean(_x(100)), [["a"], ["b"]]),
         TypeError, r"samples must be an array of real numbers.*\[\['a'\], \['b'\]\]"),
    Case("log-posterior-wrong-loglik-signature", "10",
         lambda: _log_posterior(_WrongSignature(), np.zeros((3, 1))),
         TypeError, r"model\.loglik must accept \(theta, idx\), got _WrongSignature\.loglik"),
    Case("barker-presized-default-delta", "10", _barker_presized,
         check=lambda chain: chain.samples.shape == (20, 1) and chain.test.delta is None),
    Case("demo-trial-3", "10", _demo_trial_3,
         SystemExit, r"^austerity demo: --trial must be >= 10, got 3$"),
    # the cases whose fixes came from the other parts of issue 27
    Case("austere-epsilon-above-half", "2", _austere_large_epsilon,
         check=lambda chain: chain.samples.shape == (50, 1)),
    Case("tunamh-nan-row", "3", _tunamh_nan_row, ValueError, r"(?i)nan|not finite"),
    Case("fit-far-center", "4", _fit_far_center,
         check=lambda offset: bool(np.all(np.abs(offset) < 0.15))),
    Case("truncated-memmap", "6", _truncated_memmap, ValueError, r"x\.npy"),
)

BY_ID = {case.id: case for case in CASES}
