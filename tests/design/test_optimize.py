"""optimize: the chosen grid point, both methods, the infeasible case, checks, str and plot."""

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from design import (Design, InfeasibleDesignError, TrialChain, acceptance_error, optimize,
                    sequential_error)

matplotlib.use("Agg")

N = 20_000
M_GRID = [50, 200, 1000]
EPS_GRID = [0.001, 0.01, 0.05, 0.2]


def _trial(n_pairs=30, seed=0):
    rng = np.random.default_rng(seed)
    sigma = rng.uniform(0.5, 1.5, n_pairs) / np.sqrt(N)
    return TrialChain(mu=rng.normal(0, 1.5, n_pairs) / N, sigma=sigma,
                      c0=np.zeros(n_pairs), N=N)


def _check_choice(d):
    feasible = d.error_grid <= d.tolerance
    assert feasible.any() and d.error <= d.tolerance
    assert d.data_fraction == pytest.approx(np.min(d.data_grid[feasible]))
    i = list(d.m_grid).index(d.m)
    k = list(d.epsilon_grid).index(d.epsilon)
    assert (d.error_grid[i, k], d.data_grid[i, k]) == (d.error, d.data_fraction)


def test_worst_case_design():
    d = optimize(N, 0.05, method="worst-case", m_grid=M_GRID, epsilon_grid=EPS_GRID)
    assert isinstance(d, Design) and d.method == "worst-case" and d.n_pairs is None
    _check_choice(d)
    r = sequential_error(0.0, m=d.m, epsilon=d.epsilon, N=N)
    assert d.error == pytest.approx(r.error, abs=1e-10)
    assert d.data_fraction == pytest.approx(r.data_fraction, abs=1e-10)
    # the worst case needs only N: a TrialChain gives the same design
    d2 = optimize(_trial(), 0.05, method="worst-case", m_grid=M_GRID, epsilon_grid=EPS_GRID,
                  workers=1)
    np.testing.assert_array_equal(d2.error_grid, d.error_grid)
    assert (d2.m, d2.epsilon) == (d.m, d.epsilon)


@pytest.mark.parametrize("tolerance", [0.02, 0.1, 0.3])
@pytest.mark.parametrize("threshold", ["normal", "t"])
def test_worst_case_bisection_finds_the_full_search_design(tolerance, threshold):
    """The default worst-case search (bisection in epsilon) evaluates a few cells per m and
    picks the same design as evaluating the whole grid; the cells it did evaluate hold the
    same numbers."""
    kw = dict(method="worst-case", m_grid=[20, 50, 100, 200, 1000],
              epsilon_grid=[0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2],
              prediction_threshold=threshold)
    full = optimize(N, tolerance, search="full", **kw)
    fast = optimize(N, tolerance, **kw)
    assert (fast.m, fast.epsilon) == (full.m, full.epsilon)
    assert (fast.error, fast.data_fraction) == (full.error, full.data_fraction)
    done = ~np.isnan(fast.error_grid)
    assert done.sum() < 0.5 * done.size
    np.testing.assert_array_equal(fast.error_grid[done], full.error_grid[done])
    np.testing.assert_array_equal(fast.data_grid[done], full.data_grid[done])
    # the full grid is monotone in epsilon, which is what makes bisection exact
    assert np.all(np.diff(full.error_grid, axis=1) > 0)
    assert np.all(np.diff(full.data_grid, axis=1) < 0)
    assert "evaluated: bisection in epsilon" in str(fast)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=12), st.integers(1, 9))
def test_bisection_cells_locate_every_boundary(boundaries, n_eps):
    """For any monotone feasibility table the search evaluates the last feasible cell of
    every row (and none twice), whatever the boundaries."""
    from design._optimize import _cells_bisect

    b = [min(x, n_eps) for x in boundaries]
    seen = set()
    for batch in _cells_bisect(len(b), n_eps, lambda i, k: (i, k) in seen and k < b[i]):
        assert not seen & set(batch)
        seen |= set(batch)
    for i, bi in enumerate(b):
        row = {k for (r, k) in seen if r == i}
        assert bi == 0 or bi - 1 in row
        assert bi == n_eps or bi in row or bi == 0 and 0 in row


def test_bisection_is_for_the_worst_case_only():
    with pytest.raises(ValueError, match="search='bisect' needs method='worst-case'"):
        optimize(_trial(), 0.01, search="bisect", m_grid=M_GRID, epsilon_grid=EPS_GRID)
    with pytest.raises(ValueError, match="search must be one of"):
        optimize(N, 0.01, method="worst-case", search="coarse")
    with pytest.raises(ValueError, match="search='screen' needs method='average'"):
        optimize(N, 0.01, method="worst-case", search="screen")


def test_average_design():
    trial = _trial()
    d = optimize(trial, 0.01, m_grid=M_GRID, epsilon_grid=EPS_GRID, threshold="t",
                 prediction_threshold="t")
    assert d.method == "average" and d.n_pairs == 30 and d.threshold == "t"
    _check_choice(d)
    # the optimiser tabulates E over the whole grid's mu_std range, acceptance_error over
    # this design's: different knots, so agreement to the interpolation error (<= 1e-7)
    r = acceptance_error(trial, m=d.m, epsilon=d.epsilon, threshold="t")
    assert d.error == pytest.approx(r.mean_abs_delta, abs=1e-7)
    assert d.data_fraction == pytest.approx(r.mean_data_fraction, abs=1e-7)
    # the average |Delta| is below the worst case E(0) at every grid point
    w = optimize(N, 0.49, method="worst-case", m_grid=M_GRID, epsilon_grid=EPS_GRID,
                 threshold="t", prediction_threshold="t", search="full")
    full = optimize(trial, 0.01, m_grid=M_GRID, epsilon_grid=EPS_GRID, threshold="t",
                    prediction_threshold="t", search="full")
    assert np.all(full.error_grid <= w.error_grid)
    assert full.screen_error_grid is None and d.screen_error_grid is not None
    assert "evaluated: screened" in str(d)


def _merged_trial(n_pairs=40, seed=3, n=200_000):
    """Pairs at N = 2e5, where m = 20 merges stages in the design's own programme too."""
    rng = np.random.default_rng(seed)
    sigma = rng.uniform(0.5, 1.5, n_pairs) / np.sqrt(n)
    return TrialChain(mu=rng.normal(0, 1.5, n_pairs) / n, sigma=sigma,
                      c0=np.zeros(n_pairs), N=n)


@pytest.mark.parametrize("tolerance, threshold", [(0.01, "normal"), (0.03, "t"),
                                                  (0.1, "normal"), (0.007, "t")])
def test_average_screen_finds_the_full_search_design(tolerance, threshold):
    """The default average search (a coarse screen of every cell, the full programme at a
    few) picks the same design, with the same numbers, as the full grid; the screened values
    are within the margins the search relies on, at every cell."""
    from design._optimize import _Evaluator

    trial = _merged_trial()
    kw = dict(m_grid=[20, 50, 200], epsilon_grid=[0.001, 0.005, 0.02, 0.1, 0.2],
              prediction_threshold=threshold, workers=2)
    full = optimize(trial, tolerance, search="full", **kw)
    fast = optimize(trial, tolerance, **kw)
    assert (fast.m, fast.epsilon) == (full.m, full.epsilon)
    assert (fast.error, fast.data_fraction) == (full.error, full.data_fraction)
    done = ~np.isnan(fast.error_grid)
    assert done.sum() <= 4
    np.testing.assert_array_equal(fast.error_grid[done], full.error_grid[done])
    np.testing.assert_array_equal(fast.data_grid[done], full.data_grid[done])
    ev = _Evaluator("average", trial.N, threshold, trial, 20, 0.001)
    for i, m in enumerate(kw["m_grid"]):
        margin_err, margin_data = ev.screen_margins(m)
        # the margins hold with room to spare: at most half of them is used
        assert np.all(np.abs(fast.screen_error_grid[i] - full.error_grid[i])
                      <= 0.5 * margin_err)
        assert np.all(np.abs(fast.screen_data_grid[i] - full.data_grid[i])
                      <= 0.5 * margin_data)


def test_average_screen_infeasible_matches_the_full_search():
    trial = _merged_trial(n_pairs=10)
    kw = dict(m_grid=[20, 200], epsilon_grid=[0.05, 0.2], workers=1)
    errors = []
    for search in ("full", "auto"):
        with pytest.raises(InfeasibleDesignError) as info:
            optimize(trial, 0.001, search=search, **kw)
        errors.append(info.value)
    assert errors[0].best_on_grid == errors[1].best_on_grid
    assert (errors[0].m, errors[0].epsilon) == (errors[1].m, errors[1].epsilon)


def test_infeasible_names_a_feasible_setting():
    with pytest.raises(InfeasibleDesignError) as info:
        optimize(N, 0.02, method="worst-case", m_grid=[50, 100], epsilon_grid=[0.01, 0.05])
    err = info.value
    assert isinstance(err, ValueError)
    assert err.best_on_grid[:2] == (100, 0.01)
    assert err.m == 100 and err.epsilon < 0.01
    assert sequential_error(0.0, m=err.m, epsilon=err.epsilon, N=N).error <= 0.02
    msg = str(err)
    assert "no (m, epsilon) on the grid meets tolerance 0.02" in msg
    assert f"Nearest feasible setting found: m = 100, epsilon = {err.epsilon:.3g}" in msg


def test_str_and_plot():
    d = optimize(_trial(), 0.02, m_grid=M_GRID, epsilon_grid=EPS_GRID)
    text = str(d)
    assert f"minibatch size m      {d.m}" in text
    assert f"per-stage error eps   {d.epsilon:g}" in text
    assert "average design over 30 trial pairs" in text and "N = 20,000" in text
    ax = d.plot()
    assert len(ax.get_lines()) == len(M_GRID) + 2       # one per m, tolerance, choice
    assert ax.get_xscale() == "log"


def test_grid_is_read_only():
    d = optimize(N, 0.49, method="worst-case", m_grid=[100], epsilon_grid=[0.01])
    with pytest.raises(ValueError):
        d.error_grid[0, 0] = 0.0


def test_default_grid_drops_m_above_N():
    d = optimize(600, 0.45, method="worst-case", epsilon_grid=[0.2])
    np.testing.assert_array_equal(d.m_grid, [50, 75, 100, 150, 200, 300, 400, 500])


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(tolerance=0.0), ValueError, r"tolerance must be in \(0, 0.5\), got 0.0"),
    (dict(tolerance=1.2), ValueError, r"tolerance must be in \(0, 0.5\), got 1.2"),
    (dict(method="best"), ValueError, "method must be 'average' or 'worst-case', got 'best'"),
    (dict(threshold="z"), ValueError, "threshold must be 'normal' or 't'"),
    (dict(m_grid=[1, 100]), ValueError, r"m_grid\[0\] must be in \[2, 20000\], got 1"),
    (dict(m_grid=[100, 20_001]), ValueError, r"m_grid\[1\] must be in \[2, 20000\], got 20001"),
    (dict(epsilon_grid=[0.1, 0.5]), ValueError, r"epsilon_grid\[1\] must be in \(0, 0.5\)"),
    (dict(epsilon_grid=[]), ValueError, "epsilon_grid must be a non-empty"),
    (dict(workers=0), ValueError, "workers must be >= 1"),
])
def test_bad_input(kwargs, exc, match):
    args = dict(tolerance=0.1, method="worst-case", m_grid=[100], epsilon_grid=[0.1])
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        optimize(N, **args)


def test_average_design_needs_a_trial_chain():
    with pytest.raises(TypeError, match="the average design needs a TrialChain, got int"):
        optimize(N, 0.01)
    with pytest.raises(ValueError, match=r"trial_chain \(N\) must be >= 2, got 1"):
        optimize(1, 0.01, method="worst-case")


def test_smaller_m_rows_keep_the_screened_grids_aligned():
    """When the grid's smallest m wins, m = 30, 20, 10 are tried at the chosen epsilon; the
    screened grids get the same extra rows as the full ones."""
    n = 100_000
    rng = np.random.default_rng(0)
    tc = TrialChain(mu=rng.normal(0, 1, 20) / n, sigma=np.full(20, 1e-7), c0=np.zeros(20),
                    N=n)
    d = optimize(tc, 0.01)
    assert d.m < 50 and d.m_grid[0] == 10
    assert d.screen_error_grid.shape == d.error_grid.shape == (d.m_grid.size, 9)
    k = list(d.epsilon_grid).index(d.epsilon)
    i = list(d.m_grid).index(d.m)
    assert (d.error_grid[i, k], d.data_grid[i, k]) == (d.error, d.data_fraction)
    assert abs(d.screen_error_grid[i, k] - d.error) < 1e-3


def test_screen_reuses_itself_where_it_is_the_full_programme(count_evaluations):
    """Where neither plan merges a stage (N / m small), the screen is the design's own
    programme: no cell is run twice, and the design is the full search's."""
    calls = count_evaluations()
    trial = _trial()
    fast = optimize(trial, 0.01, m_grid=M_GRID, epsilon_grid=EPS_GRID, workers=1)
    assert len(calls) == len(M_GRID) * len(EPS_GRID) and all(c[2] for c in calls)
    full = optimize(trial, 0.01, m_grid=M_GRID, epsilon_grid=EPS_GRID, workers=1,
                    search="full")
    assert (fast.m, fast.epsilon, fast.error, fast.data_fraction) == (
        full.m, full.epsilon, full.error, full.data_fraction)
    np.testing.assert_array_equal(fast.screen_error_grid, full.error_grid)
