"""Ctrl-C in fit's chain step (``validation.workflow.steps.run_chains``): the chains run one
after the other stop at the chain the interrupt came in, with the draws made so far, even when
it came in that chain's last step (the next chain used to start), between two chains, or in a
later round of a target ESS."""

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from samplers import ChainInterrupted, ExactTest, RandomWalk
from validation.workflow import steps

ROOT = Path(__file__).resolve().parents[2]
X = np.random.default_rng(0).normal(1.0, 1.0, 500)


class Pressing:
    """A user's model (Python loop) that presses Ctrl-C (SIGINT to this process) during its
    ``at``-th log-likelihood call, as a user would; ``calls`` counts every call."""

    def __init__(self, at=-1):
        self.x, self.N, self.dim = X, X.size, 1
        self.at, self.calls = at, 0

    def loglik(self, theta, idx):
        self.calls += 1
        if self.calls == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        return -0.5 * (self.x[idx] - theta[0]) ** 2

    def logprior(self, theta):
        return 0.0


def _run(model, draws, **kw):
    return steps.run_chains(model, ExactTest(), RandomWalk(0.3), [1.0], draws, chains=2,
                            rng=5, parallel=False, progress=False, **kw)


@pytest.fixture
def default_sigint(no_gc_callbacks):
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this process's SIGINT handler is not Python's default")


def _calls_per_chain(draws):
    counting = Pressing()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = _run(counting, draws)
    assert full.chains.samples.shape == (2, draws, 1) and not full.interrupted
    return counting.calls // 2, full


@pytest.mark.parametrize("where", ["last step", "middle"])
def test_ctrl_c_in_a_sequential_chain_stops_there(default_sigint, where):
    per_chain, full = _calls_per_chain(30)
    at = per_chain if where == "last step" else per_chain // 2
    model = Pressing(at)
    with pytest.warns(ChainInterrupted):
        got = _run(model, 30)
    assert got.interrupted
    assert model.calls <= per_chain + 1          # the second chain never started
    k = got.chains.samples.shape[1]
    assert got.chains.samples.shape[0] == 1 and 0 < k <= 30
    assert k == 30 if where == "last step" else k < 30
    np.testing.assert_array_equal(got.chains.samples[0], full.chains.samples[0, :k])


def test_ctrl_c_as_the_second_chain_starts_keeps_the_first(default_sigint, monkeypatch):
    """A Ctrl-C before the second chain made a step (it raises in ``sample``) kept nothing."""
    import samplers

    real, seen = samplers.sample, []

    def sample(*args, **kwargs):
        seen.append(1)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(samplers, "sample", sample)
    with pytest.warns(ChainInterrupted, match="1 chain"):
        got = _run(Pressing(), 20)
    assert got.interrupted and got.chains.samples.shape == (1, 20, 1)


def test_ctrl_c_in_a_later_round_keeps_the_earlier_rounds(default_sigint, monkeypatch):
    import samplers

    real, seen = samplers.sample, []

    def sample(*args, **kwargs):
        seen.append(1)
        if len(seen) == 3:                 # round 2's first chain, before its first step
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(samplers, "sample", sample)
    with pytest.warns(ChainInterrupted):
        got = _run(Pressing(), 20, ess=10**6)
    assert got.interrupted and got.rounds == 2
    assert got.chains.samples.shape == (2, 20, 1)


PARALLEL_CHILD = r'''
import signal, time, warnings
import numpy as np
from samplers import ExactTest, GaussianMean, RandomWalk
from validation.workflow import steps
signal.signal(signal.SIGINT, signal.default_int_handler)   # whatever the launcher left
model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 2000))
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    got = steps.run_chains(model, ExactTest(), RandomWalk(0.05), [1.0], 10**8, chains=2,
                           rng=1, parallel=True, progress=False)
print("DONE", time.perf_counter(), got.chains.samples.shape, got.interrupted, flush=True)
'''


def _children(pid):
    """Live child processes of ``pid`` (Linux: from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
def test_ctrl_c_to_the_main_process_alone_stops_the_parallel_chains():
    """A Ctrl-C that reaches only the main process (a notebook's interrupt, ``kill -INT``),
    not the worker processes as a terminal's does: the workers ran on to the end of their
    chains (10^8 steps here) while fit waited for them."""
    proc = subprocess.Popen([sys.executable, "-c", PARALLEL_CHILD], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)                   # the workers fork after the parent compiled
        workers = _children(proc.pid)
        assert len(workers) == 2, proc.communicate(timeout=5)
        time.sleep(2.0)                       # the chains make steps
        proc.send_signal(signal.SIGINT)       # the main process alone
        sent = time.perf_counter()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    line = next((x for x in out.splitlines() if x.startswith("DONE")), err[-2000:])
    assert line.startswith("DONE"), line
    assert float(line.split()[1]) - sent < 15.0          # not 10^8 steps on
    assert line.endswith("True")
    shape = eval(line.split(" ", 2)[2].rsplit(" ", 1)[0])
    assert shape[0] == 2 and 0 < shape[1] < 10**8
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{w}").exists() for w in workers)   # no worker left running


class Warning_(Pressing):
    """A model that warns (a RuntimeWarning, as an overflow would) in each chain: no Ctrl-C."""

    def loglik(self, theta, idx):
        self.calls += 1
        if self.calls % 40 == 1:
            warnings.warn("a model's own warning", RuntimeWarning)
        return -0.5 * (self.x[idx] - theta[0]) ** 2


def test_a_warning_in_a_chain_is_passed_on_and_does_not_stop_the_chains():
    """Only a ChainInterrupted warning says a chain was interrupted: any other warning a
    chain shows reaches the caller and the next chains run."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = _run(Warning_(), 30)
    assert got.chains.samples.shape == (2, 30, 1) and not got.interrupted
    assert any(issubclass(w.category, RuntimeWarning) for w in seen)
    assert not any(issubclass(w.category, ChainInterrupted) for w in seen)
