"""Ctrl-C in fit's chain step (``validation.workflow.steps.run_chains``): the chains run one
after the other stop at the chain the interrupt came in, with the draws made so far, even when
it came in that chain's last step (the next chain used to start), between two chains, or in a
later round of a target ESS."""

import os
import signal
import warnings

import numpy as np
import pytest

from samplers import ChainInterrupted, ExactTest, RandomWalk
from validation.workflow import steps

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
