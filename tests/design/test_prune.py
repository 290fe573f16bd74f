"""``search="prune"``: the average design's screen, a row of m screened only when its least
possible data fraction (m / N) is below the best feasible design found. The same design as
``search="screen"`` to the bit, fewer programme runs where the designs read about one
minibatch (control variates), and ``Design.complete_screen`` gives back the screened grids
``search="screen"`` returns, to the bit."""

import numpy as np
import pytest

from design import TrialChain, optimize


def _cv_like_trial(n_pairs=20, N=200_000, seed=0):
    """Residual-like pairs: a tiny sd per row, every design about one minibatch."""
    rng = np.random.default_rng(seed)
    return TrialChain(mu=rng.normal(0, 1.0, n_pairs) / N,
                      sigma=rng.uniform(0.5, 2.0, n_pairs) * 1e-6, c0=np.zeros(n_pairs), N=N)


def _raw_trial(n_pairs=30, N=200_000, seed=3):
    """Pairs without control variates: data fractions far above m / N, nothing pruned."""
    rng = np.random.default_rng(seed)
    return TrialChain(mu=rng.normal(0, 1.5, n_pairs) / N,
                      sigma=rng.uniform(0.5, 1.5, n_pairs) / np.sqrt(N), c0=np.zeros(n_pairs),
                      N=N)


def _same_design(a, b):
    assert (a.m, a.epsilon, a.threshold) == (b.m, b.epsilon, b.threshold)
    assert (a.error, a.data_fraction) == (b.error, b.data_fraction)      # to the bit


@pytest.mark.parametrize("seed, tolerance", [(0, 0.01), (1, 0.002), (2, 0.01)])
def test_prune_gives_the_screen_design_with_fewer_runs(count_evaluations, seed, tolerance):
    trial = _cv_like_trial(seed=seed)
    kw = dict(m_grid=[20, 50, 100, 200], epsilon_grid=[0.005, 0.02, 0.1, 0.2], workers=2)
    calls = count_evaluations()
    screened = optimize(trial, tolerance, search="screen", **kw)
    n_screen = len(calls)
    calls.clear()
    pruned = optimize(trial, tolerance, search="prune", **kw)
    _same_design(pruned, screened)
    assert len(calls) < n_screen
    # only the rows below the design's data were screened; the rest are NaN
    rows = ~np.isnan(pruned.screen_error_grid).all(axis=1)
    assert np.all(np.asarray(kw["m_grid"])[rows] / trial.N < pruned.data_fraction)
    assert rows.sum() < rows.size
    full = pruned.complete_screen(trial)
    np.testing.assert_array_equal(full.screen_error_grid, screened.screen_error_grid)
    np.testing.assert_array_equal(full.screen_data_grid, screened.screen_data_grid)
    assert full.complete_screen(trial) is full


def test_prune_screens_every_row_where_no_row_can_be_ruled_out():
    trial = _raw_trial()
    kw = dict(m_grid=[20, 50, 200], epsilon_grid=[0.001, 0.005, 0.02, 0.1, 0.2], workers=1)
    for tolerance in (0.02,):
        screened = optimize(trial, tolerance, search="screen", **kw)
        pruned = optimize(trial, tolerance, search="prune", **kw)
        _same_design(pruned, screened)
        np.testing.assert_array_equal(pruned.screen_error_grid, screened.screen_error_grid)


def test_prune_infeasible_raises_the_screen_error():
    trial = _raw_trial(n_pairs=10)
    kw = dict(m_grid=[20, 200], epsilon_grid=[0.05, 0.2], workers=1)
    errors = []
    for search in ("screen", "prune"):
        with pytest.raises(ValueError) as info:
            optimize(trial, 1e-6, search=search, **kw)
        errors.append(info.value)
    assert str(errors[0]) == str(errors[1])
    assert (errors[0].m, errors[0].epsilon) == (errors[1].m, errors[1].epsilon)


def test_default_grid_with_smaller_m_is_the_screen_design(count_evaluations):
    """The dispatch's default grid, where m = 50 wins and m = 30, 20, 10 are tried at its
    epsilon: the same design and grids as the screen (after ``complete_screen``)."""
    n = 100_000
    rng = np.random.default_rng(5)
    tc = TrialChain(mu=rng.normal(0, 1, 20) / n, sigma=rng.uniform(0.5, 2.0, 20) * 1e-6,
                    c0=np.zeros(20), N=n)
    calls = count_evaluations()
    screened = optimize(tc, 0.01)
    n_screen = len(calls)
    calls.clear()
    pruned = optimize(tc, 0.01, search="prune")
    assert pruned.m < 50
    _same_design(pruned, screened)
    assert len(calls) < n_screen / 4
    np.testing.assert_array_equal(pruned.m_grid, screened.m_grid)
    full = pruned.complete_screen(tc)
    np.testing.assert_array_equal(full.screen_error_grid, screened.screen_error_grid)
    np.testing.assert_array_equal(full.screen_data_grid, screened.screen_data_grid)


def test_prune_and_complete_screen_check_their_arguments():
    trial = _cv_like_trial()
    with pytest.raises(ValueError, match="search='prune' needs method='average'"):
        optimize(200_000, 0.01, method="worst-case", search="prune")
    d = optimize(trial, 0.01, m_grid=[20, 200], epsilon_grid=[0.1], search="prune")
    with pytest.raises(TypeError, match="trial_chain must be a TrialChain, got int"):
        d.complete_screen(200_000)
    with pytest.raises(ValueError, match="trial_chain must be the design's pairs"):
        d.complete_screen(_cv_like_trial(n_pairs=5))


def _runs(monkeypatch):
    """Collect each compiled programme run (not a cache hit) as (m, epsilon, merge, thread)."""
    import threading

    from design import _sequential

    _sequential._dp_cache.clear()
    runs = []
    original = _sequential._run_dp

    def counting(mus, m, epsilon, N, threshold, **kw):
        runs.append((m, epsilon, kw.get("merge"), threading.current_thread().name))
        return original(mus, m, epsilon, N, threshold, **kw)

    monkeypatch.setattr(_sequential, "_run_dp", counting)
    return runs


def _same_grids(a, b):
    for name in ("m_grid", "epsilon_grid", "error_grid", "data_grid", "screen_error_grid",
                 "screen_data_grid"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def _cv_like_trial_small_sd(N=1_000_000, n_pairs=10, seed=4, scale=0.1):
    """``_cv_like_trial`` with sds ``scale`` times smaller: m = 10 meets the tolerance."""
    t = _cv_like_trial(n_pairs=n_pairs, N=N, seed=seed)
    return TrialChain(mu=t.mu, sigma=t.sigma * scale, c0=t.c0, N=N)


@pytest.mark.parametrize("trial, small", [
    (_cv_like_trial_small_sd(), 10),                        # m = 10 wins: its programme early
    (_cv_like_trial(N=1_000_000, n_pairs=10, seed=4), 30),   # m = 10 screened out, 30 wins
    (_raw_trial(n_pairs=10, N=200_000, seed=3), None)])      # a larger m wins: wasted
def test_early_start_of_the_smaller_m_search_changes_nothing(monkeypatch, trial, small):
    """The dispatch starts the smaller-m search's first cell (m = 10 at the first full
    job's epsilon: its screen, then its full programme if the screen leaves it a candidate)
    on a thread of its own; the later search finds them in the programme's cache. The design
    and every grid are those of a search without the early start, to the bit; where the
    guess was right the same programmes ran, each once."""
    from design import _dispatch
    from design._stages import DEFAULT_MERGE

    runs = _runs(monkeypatch)
    early = optimize(trial, 0.01, search="prune")
    runs = list(runs)
    started = [r[:3] for r in runs if r[3] == "design-early-small-m"]
    monkeypatch.setattr(_dispatch._EarlySmallM, "MIN_STAGES", np.inf)   # no early start
    runs_plain = _runs(monkeypatch)
    plain = optimize(trial, 0.01, search="prune")
    assert not [r for r in runs_plain if r[3] == "design-early-small-m"]
    _same_design(early, plain)
    _same_grids(early, plain)
    assert (early.m if early.m < 50 else None) == small
    if small is not None:
        assert started == [(10, early.epsilon, 0.02)] + (
            [(10, early.epsilon, DEFAULT_MERGE)] if small == 10 else [])
        assert sorted(r[:3] for r in runs) == sorted(r[:3] for r in runs_plain)


def test_early_start_needs_two_workers_and_a_long_programme(monkeypatch):
    runs = _runs(monkeypatch)
    d = optimize(_cv_like_trial_small_sd(), 0.01, search="prune", workers=1)
    assert d.m < 50 and not [r for r in runs if r[3] == "design-early-small-m"]
    runs.clear()
    d = optimize(_cv_like_trial_small_sd(N=50_000), 0.01, search="prune")
    assert d.m < 50 and not [r for r in runs if r[3] == "design-early-small-m"]
    runs.clear()        # the full search's first job is at the least epsilon: no guess
    optimize(_cv_like_trial_small_sd(), 0.01, search="full")
    assert not [r for r in runs if r[3] == "design-early-small-m"]


def test_exact_programme_reaches_the_minibatch_sizes_below_the_grid(monkeypatch):
    """``exact=True`` runs the unmerged programme everywhere, also at the small m the
    dispatch tries below the grid, and starts no early (merged) programme."""
    from design._optimize import SCREEN_MERGE

    runs = _runs(monkeypatch)
    d = optimize(_cv_like_trial_small_sd(N=200_000), 0.01, exact=True)
    assert d.m < 50
    assert {r[2] for r in runs} <= {0.0, SCREEN_MERGE}       # the screens stay merged
    assert (d.m, d.epsilon, 0.0) in [r[:3] for r in runs]
    assert not [r for r in runs if r[3] == "design-early-small-m"]


def test_ctrl_c_in_the_search_does_not_wait_for_the_early_start(monkeypatch):
    from design import _dispatch, _optimize

    joined = []
    monkeypatch.setattr(_dispatch._EarlySmallM, "join", lambda self: joined.append(self))

    def interrupted(*args, on_full=None, **kw):
        on_full(_optimize.DEFAULT_M_GRID[0], 1e-3)
        raise KeyboardInterrupt

    monkeypatch.setattr(_optimize, "optimize", interrupted)
    with pytest.raises(KeyboardInterrupt):
        optimize(_cv_like_trial_small_sd(), 0.01, search="prune")
    assert not joined


def test_pair_integrals_are_built_once_per_trial_and_edge():
    from design._acceptance_error import PairIntegrals, pair_integrals

    trial = _cv_like_trial(n_pairs=5)
    a = pair_integrals(trial, 400.0)
    assert pair_integrals(trial, 400.0) is a
    assert pair_integrals(trial, 300.0) is not a
    assert pair_integrals(_cv_like_trial(n_pairs=5), 400.0) is not a     # another chain
    fresh = PairIntegrals(trial, 400.0)
    for name in ("knots", "tail", "A_err", "A_data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(fresh, name))
        assert not getattr(a, name).flags.writeable


def test_pair_integrals_keep_a_few_edges_per_trial():
    """The cache sits under the public acceptance_error: a loop over edges must not keep
    every edge's arrays alive."""
    from design._acceptance_error import INTEGRALS_PER_TRIAL, _integrals, pair_integrals

    trial = _cv_like_trial(n_pairs=5)
    first = pair_integrals(trial, 100.0)
    for edge in range(2, 3 * INTEGRALS_PER_TRIAL):
        pair_integrals(trial, 100.0 * edge)
    assert len(_integrals[trial]) == INTEGRALS_PER_TRIAL
    assert pair_integrals(trial, 100.0) is not first          # the oldest was dropped
