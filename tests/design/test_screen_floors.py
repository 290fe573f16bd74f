"""The average design's screen skips candidates that cannot read less than the best design
found: below m / N no test reads, and within a row the data fraction cannot fall as epsilon
falls. On control-variate pairs (residual sd ~1e-7 per row, every design about one
minibatch) the screen's margins alone cannot rule anything out."""

import numpy as np
import pytest

from design import TrialChain, optimize


def _cv_like_trial(n_pairs=20, N=200_000, seed=0):
    rng = np.random.default_rng(seed)
    return TrialChain(mu=rng.normal(0, 1.0, n_pairs) / N,
                      sigma=rng.uniform(0.5, 2.0, n_pairs) * 1e-6, c0=np.zeros(n_pairs), N=N)


@pytest.mark.parametrize("tolerance", [0.01, 0.002])
def test_pruned_screen_finds_the_full_search_design_with_fewer_cells(monkeypatch, tolerance):
    from design import _optimize

    trial = _cv_like_trial()
    kw = dict(m_grid=[10, 20, 50, 100], epsilon_grid=[0.005, 0.02, 0.05, 0.1, 0.2],
              workers=1)
    full = optimize(trial, tolerance, search="full", **kw)
    calls = []
    original = _optimize._Evaluator.__call__

    def counting(self, m, eps, screen=False):
        calls.append((m, eps, screen))
        return original(self, m, eps, screen=screen)

    monkeypatch.setattr(_optimize._Evaluator, "__call__", counting)
    fast = optimize(trial, tolerance, **kw)
    assert (fast.m, fast.epsilon) == (full.m, full.epsilon)
    assert (fast.error, fast.data_fraction) == (full.error, full.data_fraction)
    assert fast.data_fraction >= fast.m / trial.N           # the floor holds
    in_full = [c for c in calls if not c[2]]
    assert 1 <= len(in_full) <= 2          # without the floors: every feasible cell
    # the data fractions fall with epsilon along each row (what the row bound relies on)
    rows = np.diff(full.data_grid, axis=1)
    assert np.all(rows <= 0)
    assert np.all(full.data_grid >= np.array(kw["m_grid"])[:, None] / trial.N)
