"""validation.fit's route chooser and steps (issue 23 parts 1, 2, 3, 5; issue 25 part 4; issue 27).

The chooser is tested on hand-made candidates (its logic alone); the importance-weight
diagnostics against ArviZ's PSIS and against a simulated independence sampler; fit's
routes against the quadrature posterior of tests/validation/test_fit.py.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from samplers import ControlVariates, GaussianPrior, LogisticRegression, import_arviz
from validation import fit
from validation.workflow import route as routes
from validation.workflow import steps

from ..reliability.test_interrupts import _abort
from .test_fit import N, grid_posterior

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(12)
    X = np.column_stack([rng.normal(size=N), np.ones(N)])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


@pytest.fixture(scope="module")
def reference(model):
    cv = ControlVariates(model)
    return grid_posterior(model, cv.center.theta, np.sqrt(np.diag(cv.laplace_covariance())))


def _close_to_reference(idata, reference, k=5.0):
    mean, sd = reference
    x = idata.posterior.theta.values.reshape(-1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ess = import_arviz().ess(idata).theta.values
    np.testing.assert_array_less(np.abs(x.mean(axis=0) - mean), k * sd / np.sqrt(ess))
    np.testing.assert_array_less(np.abs(x.std(axis=0) / sd - 1), k / np.sqrt(2 * ess))


# --- the chooser on hand-made candidates ---------------------------------------------------

def cand(test, rows, ess=0.9, sound=True, proposal="independence"):
    return routes.Candidate(test, proposal, rows, 0.9, ess, test in ("smh", "mh-ss", "exact"),
                            sound)


def test_the_cheapest_sound_candidate_wins_and_the_verdict_runs_only_when_needed():
    asked = []

    def verify(c):
        asked.append(c.name)
        return routes.Candidate(c.test, c.proposal, c.rows, c.acceptance, c.ess_per_step,
                                False, True)

    exact, smh = cand("exact", 1e5), cand("mh-ss", 3.0)
    out = routes.choose_route([cand("austere", 10.0, sound=None), smh, exact], verify)
    assert out.chosen.test == "austere" and asked == ["austere / independence"]
    asked.clear()          # a designed test dearer than an exact one is never verified
    out = routes.choose_route([cand("austere", 5000.0, sound=None), smh, exact], verify)
    assert out.chosen is smh and asked == []
    assert "cheaper than exact MH" in out.reason and len(out.lines()) == 4


def test_a_failed_verdict_passes_the_turn_and_nothing_dearer_than_exact_mh_runs():
    def fail(c):
        return routes.Candidate(c.test, c.proposal, c.rows, c.acceptance, c.ess_per_step,
                                False, False)

    exact = cand("exact", 2e5)
    out = routes.choose_route([cand("austere", 10.0, sound=None), cand("smh", 3e5), exact],
                              fail)
    assert out.chosen is exact               # SMH here costs more than exact MH
    assert "failed their verdict: austere / independence" in out.reason
    assert all(c.cost >= out.chosen.cost for c in out.candidates if c.sound)


def test_ess_per_step_of_the_independence_sampler_matches_a_simulation():
    """IMH on N(0, 1) with q = N(0, 1.5^2): the acceptance predicted from importance weights
    of draws of q against a long simulated chain (its acceptance rate, MCSE ~0.003)."""
    rng = np.random.default_rng(3)
    s = 1.5
    draws = rng.normal(0.0, s, 4000)
    logw = -0.5 * draws ** 2 + 0.5 * (draws / s) ** 2
    predicted = steps._imh_acceptance(logw)
    x, acc, n = 0.0, 0, 200_000
    props, us = rng.normal(0.0, s, n), np.log(rng.random(n))
    lw = lambda t: -0.5 * t * t + 0.5 * (t / s) ** 2     # noqa: E731
    for t, u in zip(props, us):
        if u < lw(t) - lw(x):
            x, acc = t, acc + 1
    assert abs(predicted - acc / n) < 0.02
    assert routes.ess_per_step("independence", 0.5, 3, 0.5) == pytest.approx(1 / 3)


@pytest.mark.parametrize("make", [
    lambda r: r.normal(size=400) * 0.3,
    lambda r: np.log(r.pareto(0.8, 400)),
    lambda r: r.standard_t(3, 120),
])
def test_pareto_k_matches_arviz_psis(make):
    az = pytest.importorskip("arviz")
    if not hasattr(az, "psislw"):
        pytest.skip("this ArviZ has no psislw")
    lw = make(np.random.default_rng(5))
    assert steps.pareto_k(lw) == pytest.approx(float(az.psislw(lw.copy())[1]), rel=1e-10)


# --- fit's routes ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def auto(model):
    return fit(model, draws=1500, n_trial=10, parallel=False, rng=11)


def test_the_automatic_route_is_the_cheapest_and_accurate(auto, reference):
    a = auto.posterior.attrs
    assert a["proposal"] == "independence"          # Laplace fits at N = 3000, d = 2
    costs = {line.split("  ")[0].strip(): float(line.split("cost")[1].split("rows")[0]
                                                .replace(",", ""))
             for line in a["candidates"].splitlines()}
    chosen = next(x for x in a["candidates"].splitlines() if x.startswith(a["route"]))
    assert costs[a["route"]] == pytest.approx(a["cost_predicted"], abs=0.5), chosen
    assert a["cost_predicted"] <= costs["exact / independence"]
    assert "chosen: " in a["explanation"] and "<- chosen" in a["explanation"]
    assert set(a["timings"]) >= {"mode_and_proxy", "laplace_draws", "trial_pairs", "design",
                                 "route", "chains", "total"}
    assert a["rhat"] < 1.05 and a["ess_bulk"] > 1000
    # predicted and realised cost per effective sample within a factor 2
    assert 0.5 < a["cost_realised"] / a["cost_predicted"] < 2.0
    _close_to_reference(auto, reference)


@pytest.mark.parametrize("forced", ["smh/walk", "exact/independence"])
def test_a_forced_route_runs_and_is_exact(model, reference, forced):
    idata = fit(model, draws=800 if "walk" not in forced else 3000, route=forced,
                n_trial=10, parallel=False, rng=4)
    a = idata.posterior.attrs
    assert a["route"] == forced.replace("/", " / ")
    assert a["clt_passed"] == "not needed" and a["error_predicted"] == 0.0
    _close_to_reference(idata, reference)


def test_a_far_center_still_samples_the_posterior(model, reference):
    """issue 27: chains started at a far center returned the transient as the posterior."""
    cv = ControlVariates(model)
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    idata = fit(model, draws=1500, n_trial=10, center=cv.center.theta + 30 * sd,
                parallel=False, rng=6)
    np.testing.assert_allclose(idata.posterior.attrs["center"], cv.center.theta, atol=1e-6)
    _close_to_reference(idata, reference)


def test_ess_target_extends_the_chains(model):
    idata = fit(model, draws=100, ess=800, test="austere", n_trial=10, parallel=False, rng=8)
    a = idata.posterior.attrs
    assert a["ess_bulk"] >= 800 and idata.posterior.theta.shape[1] > 100
    assert "round(s)" in a["explanation"]


def test_parallel_chains_equal_sequential_ones(model):
    kw = dict(draws=300, test="austere", n_trial=10, rng=9)
    a = fit(model, parallel=True, **kw).posterior.theta.values
    b = fit(model, parallel=False, **kw).posterior.theta.values
    np.testing.assert_array_equal(a, b)


def test_each_step_can_be_called_alone(model):
    px = steps.mode_and_proxy(model)
    draws = steps.laplace_draws(px, 30, rng=1)
    choice = steps.choose_proposal(px, draws, proposal="walk")
    pairs = steps.trial_pairs(px, choice, draws, rng=2)
    plan = steps.design_test(pairs, 0.01, "barker")
    v = steps.verdict(px, pairs, plan, 0.01, on_clt_failure="warn", rng=3)
    ran = steps.run_chains(px.cv, steps.make_test(v.plan), choice.proposal, px.mode, 200,
                           chains=2, parallel=False, rng=4)
    err, rows = steps.after_run_check(px, v.plan, ran.chains[0], choice.proposal, rng=5)
    assert ran.chains.samples.shape == (2, 200, 2) and rows >= 1 and err < 0.5
    assert choice.kind == "walk" and pairs.trial.n_pairs == 30


CHILD = textwrap.dedent("""
    import os, sys, time, warnings
    import numpy as np
    import samplers._chain as chain_module
    from samplers import GaussianPrior, LogisticRegression
    from validation import fit

    # the chain loops, printing STEPPED once per chain of the run when its second step
    # (block) starts: one step is then kept, whatever the load. Patched before fit, so the
    # forked pool workers run them too; n <= 2 is fit's 2-step compile of the kernels.
    run_chain, run_blocks = chain_module.run_chain, chain_module.run_blocks
    chain_module.run_chain = lambda step, state, n, *args, **kwargs: run_chain(
        Announcing(step) if n > 2 else step, state, n, *args, **kwargs)
    chain_module.run_blocks = lambda block, n, *args, **kwargs: run_blocks(
        Announcing(block) if n > 2 else block, n, *args, **kwargs)

    class Announcing:
        def __init__(self, work):
            self.work, self.calls = work, 0
        def __call__(self, state):               # a step of the Python loop
            self.announce()
            return self.work(state)
        def run(self, start, stop, samples):     # a block of the compiled loop
            self.announce()
            return self.work.run(start, stop, samples)
        def __getattr__(self, name):
            return getattr(self.work, name)
        def announce(self):
            self.calls += 1
            if self.calls == 2:       # one write: two workers' lines do not interleave
                os.write(1, b"STEPPED\\n")

    rng = np.random.default_rng(12)
    X = np.column_stack([rng.normal(size=3000), np.ones(3000)])
    y = (rng.random(3000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    m = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        idata = fit(m, draws=10**7, route="{route}", n_trial=10, parallel={parallel}, rng=1,
                    progress=True)
    print("DONE", time.perf_counter(), idata.posterior.theta.shape,
          idata.posterior.attrs["interrupted"],
          any("interrupted" in str(w.message) for w in seen), flush=True)
""")


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [False, True])
def test_ctrl_c_stops_fit_at_once_and_keeps_the_draws(parallel, tmp_path):
    """issue 27: a Ctrl-C in the first chain was swallowed, the second chain ran in full.

    The Ctrl-C is sent once every chain running has announced a kept step (STEPPED on
    stdout, from the chain loop the child wraps; the pool's workers print it too): a Ctrl-C
    before any step has nothing to keep, and fit then raises KeyboardInterrupt, as
    documented. No sleep decides where it lands."""
    import multiprocessing

    if parallel and (multiprocessing.get_context().get_start_method() != "fork"
                     or (os.cpu_count() or 1) < 2):
        pytest.skip("the workers announce their steps only when forked, two at once")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}   # stacks on abort
    running = 2 if parallel else 1               # one after the other: the first chain
    with open(tmp_path / "stderr", "w+") as err:  # the bars (a pipe left unread could fill)
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD.format(route="mh-ss/independence",
                                                parallel=parallel)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
            start_new_session=True)
        # a hung child fails, not hangs, the run, with every thread's stack of the group's
        # processes in the message; its group: workers left by a dead child hold stdout open
        watchdog = threading.Timer(600, _abort, (proc.pid, True))
        watchdog.start()
        try:
            stepped, sent, out = 0, None, []
            for line in proc.stdout:
                out.append(line)
                stepped += line.count("STEPPED")
                if stepped == running and sent is None:
                    os.killpg(proc.pid, signal.SIGINT)
                    sent = time.perf_counter()
            proc.wait(timeout=60)
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        err.seek(0)
        assert sent is not None, f"no chain stepped: {err.read()[-2000:]}"
        line = next((x for x in out if x.startswith("DONE")), None)
        assert line is not None, f"no result (exit {proc.returncode}): {err.read()[-20000:]}"
    assert float(line.split()[1]) - sent < 15.0          # stopped promptly, not 10^7 steps on
    assert "True True" in line                            # attrs and ChainInterrupted warning
    shape = eval(line.split(" ", 2)[2].rsplit(" ", 2)[0])
    # in parallel both chains, cut to one length; one after the other the first chain's draws
    assert shape[0] == (2 if parallel else 1) and 0 < shape[1] < 10**7


@pytest.fixture(scope="module")
def rare():
    """A rare binary covariate: 10 rows of 20,000 carry it (issue 23, part 3)."""
    from samplers import datasets

    X, y, _ = datasets.rare_covariate_logistic(20_000, rng=5, rare_rows=10)
    return X, y, LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


def _importance_reference(X, y, mode, cov, n_draws, rng, df=5.0, widen=1.2):
    """Self-normalised importance sampling from a multivariate t at the mode, on all rows:
    (weighted mean, weighted sd, weights' ESS)."""
    from scipy import stats

    q = stats.multivariate_t(loc=mode, shape=widen ** 2 * cov, df=df, seed=rng)
    thetas = q.rvs(n_draws)
    ll = np.concatenate([
        np.sum(y[:, None] * (eta := X @ thetas[a:a + 500].T) - np.logaddexp(0.0, eta), axis=0)
        for a in range(0, n_draws, 500)])
    logw = ll - 0.5 * np.sum(thetas ** 2, axis=1) / 10.0 ** 2 - q.logpdf(thetas)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ thetas
    return mean, np.sqrt(w @ (thetas - mean) ** 2), 1.0 / float(np.sum(w ** 2))


@pytest.mark.slow
def test_heavy_rows_are_read_exactly_and_the_designed_route_is_accurate(rare):
    """issue 23 part 3: the 10 rows of the rare covariate dominate the residuals (median
    excess kurtosis about 2,000); read exactly, the rest's residuals are near-normal and the
    designed test on the rest samples the posterior at its minibatch plus 10 rows per step."""
    X, y, model = rare
    idata = fit(model, draws=1500, n_trial=10, parallel=False, rng=1)
    a = idata.posterior.attrs
    assert a["heavy_rows"] == 10 and a["route"] == "austere+exact-rows / independence"
    assert "10 found" in a["explanation"] and "exactly in every decision" in a["explanation"]
    # the realised cost counts the heavy rows on top of the chain's minibatch rows
    used = idata.sample_stats.n_used.values
    assert a["rows_realised"] == pytest.approx(used.mean() + 10, rel=1e-12)
    assert a["rows_realised"] == pytest.approx(a["rows_predicted"], rel=0.25)
    exact = next(line for line in a["candidates"].splitlines()
                 if line.startswith("exact / independence"))
    assert a["cost_predicted"] * 5 < float(exact.split("cost")[1].split("rows")[0]
                                           .replace(",", ""))
    # the rare coefficient (column 3) and the rest against importance sampling on all rows
    cv = ControlVariates(model)
    mean, sd, ess_ref = _importance_reference(X, y, cv.center.theta, cv.laplace_covariance(),
                                              8000, np.random.default_rng(3))
    assert ess_ref > 2000
    x = idata.posterior.theta.values.reshape(-1, X.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ess = import_arviz().ess(idata).theta.values
    assert ess.min() > 300 and a["rhat"] < 1.05
    inv = 1 / ess + 1 / ess_ref
    np.testing.assert_array_less(np.abs(x.mean(axis=0) - mean), 5 * sd * np.sqrt(inv))
    # the sd's relative MC-SE, sqrt((excess kurtosis + 2) / 4 / n): the rare coefficient's
    # posterior is skewed and heavier-tailed than a normal
    kurt = np.mean((x - x.mean(axis=0)) ** 4, axis=0) / x.var(axis=0) ** 2 - 3
    np.testing.assert_array_less(np.abs(x.std(axis=0) / sd - 1),
                                 5 * np.sqrt((kurt + 2) / 4 * inv))


@pytest.mark.slow
def test_heterogeneous_rows_take_an_exact_route_without_heavy_rows(rare):
    """issue 23: a rare binary covariate (10 rows of 20,000) makes the residuals' excess
    kurtosis about 2,000; with the heavy rows not read exactly (``heavy_rows=False``) the
    designed test is refused unforced: an exact route runs, and nothing dearer than exact MH."""
    _, _, model = rare
    a = fit(model, draws=300, n_trial=10, parallel=False, heavy_rows=False,
            rng=1).posterior.attrs
    assert a["test"] in ("smh", "mh-ss", "exact") and a["clt_passed"] in ("False", "not needed")
    assert "failed their verdict: austere" in a["explanation"] and a["heavy_rows"] == 0
    assert "not looked for (heavy_rows=False)" in a["explanation"]
    exact = next(line for line in a["candidates"].splitlines()
                 if line.startswith("exact / independence"))
    # (the candidates' lines round the cost to a whole row)
    assert a["cost_predicted"] <= float(exact.split("cost")[1].split("rows")[0]
                                        .replace(",", "")) + 0.5


@pytest.mark.parametrize("bad, error, words", [
    ("yes", ValueError, "'auto', False"), (True, TypeError, "1-D array"),
    (None, TypeError, "1-D array"), (np.array([0.5, 2.0]), TypeError, "integer"),
    (np.array([[1, 2]]), TypeError, "1-D"), ([3, 3], ValueError, "distinct"),
    ([0, 3000], ValueError, "[0, 2999]"), (np.arange(2999), ValueError, "at least 2")])
def test_bad_heavy_rows_are_refused_before_any_pass(model, bad, error, words):
    with pytest.raises(error, match="heavy_rows") as info:
        fit(model, heavy_rows=bad)
    assert words in str(info.value)


def test_given_heavy_rows_are_read_exactly_in_every_decision(model):
    rows = np.array([2, 0, 7])
    idata = fit(model, draws=200, test="austere", heavy_rows=rows, n_trial=10,
                parallel=False, rng=2)
    a = idata.posterior.attrs
    np.testing.assert_array_equal(rows, [2, 0, 7])          # the caller's array untouched
    assert a["heavy_rows"] == 3 and a["route"] == "austere+exact-rows / independence"
    assert "3 given (heavy_rows=)" in a["explanation"]
    used = idata.sample_stats.n_used.values
    assert a["rows_realised"] == pytest.approx(used.mean() + 3, rel=1e-12)
    assert a["rows_predicted"] >= 3 + 1
