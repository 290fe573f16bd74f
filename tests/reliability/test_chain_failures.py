"""Reliability case 1 of issue 16: a failure or Ctrl-C mid-chain keeps the samples so far."""

import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest

from samplers import _chain
from samplers import (AustereTest, ChainInterrupted, ExactTest, GaussianMean, RandomWalk, sample,
                      sample_chains)

X = np.random.default_rng(0).normal(1.0, 1.0, 2_000)


class Failing:
    """A user's model whose log-likelihood raises ``error`` on its ``after``-th call."""

    def __init__(self, error, after):
        self.x, self.N, self.dim = X, X.size, 1
        self.error, self.after, self.calls = error, after, 0

    def loglik(self, theta, idx):
        self.calls += 1
        if self.calls == self.after:
            raise self.error
        return -0.5 * (self.x[idx] - theta[0]) ** 2

    def logprior(self, theta):
        return 0.0


def test_ctrl_c_returns_the_chain_so_far_with_a_warning():
    model = Failing(KeyboardInterrupt(), after=31)
    with pytest.warns(ChainInterrupted, match=r"interrupted after \d+ of 100 steps") as rec:
        chain = sample(model, ExactTest(), RandomWalk(0.05), [1.0], 100, rng=0)
    k = chain.samples.shape[0]
    assert 0 < k < 100 and f"after {k} of 100" in str(rec[0].message)
    assert all(v.shape == (k,) for v in chain.stats.values())
    full = sample(Failing(None, after=-1), ExactTest(), RandomWalk(0.05), [1.0], 100, rng=0)
    np.testing.assert_array_equal(chain.samples, full.samples[:k])   # the same chain, cut


def test_ctrl_c_before_any_step_propagates():
    with pytest.raises(KeyboardInterrupt):
        sample(Failing(KeyboardInterrupt(), after=2), ExactTest(), RandomWalk(0.05), [1.0], 10,
               rng=0)


def test_model_error_carries_partial_chain_step_and_theta():
    model = Failing(RuntimeError("disk went away"), after=12)
    with pytest.raises(RuntimeError, match="disk went away") as info:
        sample(model, ExactTest(), RandomWalk(0.05), [1.0], 50, rng=0)
    exc = info.value
    assert 0 < exc.step < 50
    assert exc.partial_chain.samples.shape == (exc.step, 1)
    np.testing.assert_array_equal(exc.theta, exc.partial_chain.samples[-1])
    if hasattr(exc, "__notes__"):
        assert f"step {exc.step + 1} of 50" in exc.__notes__[0]


def test_sample_chains_keeps_interrupted_chains_cut_to_a_common_length():
    model = Failing(KeyboardInterrupt(), after=21)  # shared by the threads: one chain is hit
    with ThreadPoolExecutor(1) as pool, pytest.warns(ChainInterrupted):
        chains = sample_chains(model, ExactTest(), RandomWalk(0.05), [1.0], 40, n_chains=2,
                               rng=3, executor=pool)
    k = chains.samples.shape[1]
    assert chains.samples.shape == (2, k, 1) and 0 < k < 40
    assert chains.to_arviz()["posterior"]["theta"].shape == (2, k, 1)


def test_ctrl_c_while_waiting_for_workers_returns_finished_chains():
    class InterruptedFuture:
        def result(self, timeout=None):
            raise KeyboardInterrupt

        def cancel(self):
            return True

    class Executor:
        """Runs the first chain at once; the user presses Ctrl-C while waiting for the second."""

        def __init__(self):
            self.n = 0

        def submit(self, fn, *args):
            self.n += 1
            if self.n == 1:
                with ThreadPoolExecutor(1) as pool:
                    return pool.submit(fn, *args)
            return InterruptedFuture()

    model = GaussianMean(X)
    with pytest.warns(ChainInterrupted):
        chains = sample_chains(model, AustereTest(m=200), RandomWalk(0.05), [1.0], 30,
                               n_chains=2, rng=1, executor=Executor())
    assert len(chains) == 1 and chains.samples.shape == (1, 30, 1)


def test_a_worker_ctrl_c_as_its_chain_returns_keeps_the_chain_and_stops_the_next(monkeypatch):
    """A worker of sample_chains' own pool, played in this process: a Ctrl-C whose handler
    runs just after the chain returned, in the pool's wrapper (here the chain is a C call
    that sends the signal as it ends), does not raise there, which lost the finished chain
    and let the worker's next chain run to its end; the next chain stops before its first
    step instead."""
    monkeypatch.setattr(_chain, "_INTERRUPTED", False)
    previous = signal.signal(signal.SIGINT, _chain._on_interrupt)
    try:
        kept = _chain._in_worker(partial(os.kill, os.getpid(), signal.SIGINT))
        assert kept is None                          # returned, no KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is _chain._on_interrupt
        ran = []
        with pytest.raises(KeyboardInterrupt):
            _chain._in_worker(ran.append, 1)
        assert ran == []
    finally:
        signal.signal(signal.SIGINT, previous)


def _slow_pid(_):
    time.sleep(0.3)
    return os.getpid()


def test_sample_chains_pool_knows_its_own_workers_only():
    """The pool finds its workers without the executor's private state: the processes that
    ran its tasks, and not those of another pool of this process."""
    with ProcessPoolExecutor(2) as other, _chain._WorkerPool(2) as pool:
        theirs = set(other.map(_slow_pid, range(4)))
        ours = set(pool.map(_slow_pid, range(4)))
        workers = {proc.pid for proc in pool.workers()}
        assert ours <= workers and len(workers) == 2 and not workers & theirs
