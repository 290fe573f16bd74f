"""Long design computations stop promptly on Ctrl-C (or on an exception from a progress
callback), leaving no worker running, and report progress."""

import threading
import _thread

import numpy as np
import pytest

from design import TrialChain, optimize

GRID = dict(m_grid=[50, 100, 200, 400], epsilon_grid=[0.001, 0.01, 0.05, 0.1])


class Stop(Exception):
    pass


@pytest.mark.parametrize("workers", [1, 2])
def test_exception_from_the_progress_callback_stops_the_grid(workers):
    seen = []

    def progress(done, total):
        seen.append((done, total))
        raise Stop

    with pytest.raises(Stop):
        optimize(10**9, 0.1, method="worst-case", workers=workers, progress=progress,
                 search="full", **GRID)
    assert len(seen) == 1
    done, total = seen[0]
    assert total == 16 and done <= workers
    # the pool was shut down: no thread of ours is left running a cell
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]


def test_keyboard_interrupt_reaches_the_caller_and_cancels_the_rest():
    """Ctrl-C delivered to the main thread while it waits for the workers."""
    seen = []
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            optimize(10**9, 0.1, method="worst-case", workers=2, search="full",
                     progress=lambda done, total: seen.append(done))
    finally:
        timer.cancel()
    assert not seen or seen[-1] < 16          # stopped before the grid was done
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]


def test_progress_callback_sees_every_cell():
    seen = []
    d = optimize(100_000, 0.1, method="worst-case", workers=2, search="full",
                 progress=lambda done, total: seen.append((done, total)), **GRID)
    assert seen[-1] == (16, 16)
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)
    assert d.error_grid.shape == (4, 4)


@pytest.mark.parametrize("workers", [1, 2])
def test_bisection_reports_progress_and_stops_on_interrupt(workers):
    """The default worst-case search: the total is a bound that ends at the cells done;
    Ctrl-C between two batches (or inside one) stops it."""
    seen = []
    d = optimize(100_000, 0.1, method="worst-case", workers=workers,
                 progress=lambda done, total: seen.append((done, total)), **GRID)
    done = int(np.sum(~np.isnan(d.error_grid)))
    assert seen[-1] == (done, done) and done < 16
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)

    def progress(done, total):
        if done >= 2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        optimize(10**9, 0.1, method="worst-case", workers=workers, progress=progress, **GRID)
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]


@pytest.mark.parametrize("n_rows", [200_000, 300_000])     # two exact passes; one pass
def test_trial_statistics_pass_stops_on_an_exception_from_progress(n_rows):
    class Gaussian:
        N = n_rows
        x = np.random.default_rng(0).normal(size=n_rows)

        def loglik(self, theta, idx):
            return -0.5 * (self.x[idx] - theta[0]) ** 2

        def logprior(self, theta):
            return 0.0

    seen = []

    def progress(done, total):
        seen.append(done)
        if done >= 2:
            raise Stop

    thetas = np.zeros((3, 1))
    with pytest.raises(Stop):
        TrialChain.from_model(Gaussian(), thetas, thetas + 0.01, chunk=1000, workers=2,
                              progress=progress)
    assert seen[-1] < n_rows // 1000
    assert not [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]


def test_progress_bar_is_off_without_a_terminal_and_works_when_asked(capsys):
    """Under pytest stderr is captured (not a terminal): no bar by default; ``progress=True``
    draws one on stderr and changes no result."""
    quiet = optimize(20_000, 0.1, method="worst-case", workers=1, **GRID)
    assert capsys.readouterr().err == ""
    bar = optimize(20_000, 0.1, method="worst-case", workers=2, progress=True, **GRID)
    assert "design grid" in capsys.readouterr().err
    np.testing.assert_array_equal(quiet.error_grid, bar.error_grid)
