"""The average design's screen skips candidates that cannot read less than the best design
found, by a lower bound on a cell's data fraction from its row's cells run in full
(``_Evaluator.data_lower_bound``): at every knot of the programme's table pi-bar lies in
[m / N, 1] and cannot fall as epsilon falls. The data fraction itself, a spline-weighted mean
of those knot values with some weights negative, need not fall with epsilon; the bound holds
anyway. On control-variate pairs (residual sd ~1e-7 per row, every design about one
minibatch) the screen's margins alone cannot rule anything out."""

import numpy as np
import pytest

from design import TrialChain, optimize


def _cv_like_trial(n_pairs=20, N=200_000, seed=0):
    rng = np.random.default_rng(seed)
    return TrialChain(mu=rng.normal(0, 1.0, n_pairs) / N,
                      sigma=rng.uniform(0.5, 2.0, n_pairs) * 1e-6, c0=np.zeros(n_pairs), N=N)


@pytest.mark.parametrize("tolerance", [0.01, 0.002])
def test_pruned_screen_finds_the_full_search_design_with_fewer_cells(count_evaluations,
                                                                     tolerance):
    trial = _cv_like_trial()
    kw = dict(m_grid=[10, 20, 50, 100], epsilon_grid=[0.005, 0.02, 0.05, 0.1, 0.2],
              workers=1)
    full = optimize(trial, tolerance, search="full", **kw)
    calls = count_evaluations()
    fast = optimize(trial, tolerance, **kw)
    assert (fast.m, fast.epsilon) == (full.m, full.epsilon)
    assert (fast.error, fast.data_fraction) == (full.error, full.data_fraction)
    assert fast.data_fraction >= fast.m / trial.N           # the floor holds
    in_full = [c for c in calls if not c[2]]
    assert 1 <= len(in_full) <= 2          # without the floors: every feasible cell
    # here the data fractions fall with epsilon along each row
    rows = np.diff(full.data_grid, axis=1)
    assert np.all(rows <= 0)
    assert np.all(full.data_grid >= np.array(kw["m_grid"])[:, None] / trial.N)


def test_knot_tables_do_not_fall_as_epsilon_falls():
    """What the bound relies on: the programme's pi-bar at each knot, merged plan (large
    N / m) or not, does not fall as epsilon falls and stays in [m / N, 1], to
    ``ORDER_SLACK`` (measured: increases below 1e-13)."""
    from design._acceptance_error import PairIntegrals, mu_table_edge
    from design._optimize import ORDER_SLACK
    from design._sequential import run_dp

    epsilons = [0.001, 0.005, 0.02, 0.05, 0.1, 0.2]
    for N, m in [(2_000, 10), (2_000, 200), (1_000_000, 10), (1_000_000, 1000)]:
        trial = TrialChain(mu=np.zeros(1), sigma=np.ones(1), c0=np.zeros(1), N=N)
        knots = PairIntegrals(trial, mu_table_edge(N, 10, epsilons[0], "normal")).knots
        tables = np.array([run_dp(knots, m, eps, N, "normal")["data_fraction"]
                           for eps in epsilons])
        assert np.max(np.diff(tables, axis=0)) <= 0.01 * ORDER_SLACK, (N, m)
        assert np.min(tables) >= m / N - 0.01 * ORDER_SLACK
        assert np.max(tables) <= 1.0 + 0.01 * ORDER_SLACK
        assert np.ptp(tables[:, 0]) > 0.01        # epsilon does move pi-bar


def test_data_bound_holds_where_the_data_fraction_rises_with_epsilon():
    """With negative spline weights the data fraction can rise with epsilon, so the data of
    a larger epsilon is no lower bound; the box bound over the knot values is, for every
    knot-wise ordered pair of tables."""
    from types import SimpleNamespace

    from design._optimize import _Evaluator

    rng = np.random.default_rng(3)
    rises = 0
    for _ in range(200):
        n, N, m = 12, 10_000, 50
        weights = rng.normal(0.02, 0.06, n)             # some negative, as spline weights
        ev = SimpleNamespace(data_weights=weights, tail_mean=0.1, N=N)
        larger = m / N + rng.uniform(0, 0.3, n)         # pi-bar at the larger epsilon
        smaller = np.minimum(1.0, larger + rng.exponential(0.1, n) * (rng.random(n) < 0.5))
        middle = larger + rng.uniform(0, 1, n) * (smaller - larger)
        data = lambda t: weights @ t + 0.1 * m / N     # noqa: E731
        rises += data(middle) < data(larger)
        assert _Evaluator.data_lower_bound(ev, m, larger=[larger]) <= data(middle)
        assert _Evaluator.data_lower_bound(ev, m, larger=[larger],
                                           smaller=[smaller]) <= data(middle)
        assert _Evaluator.data_lower_bound(ev, m) <= data(middle)
    assert rises > 20                  # the old rule (the larger epsilon's data) fails here


def _random_trial(seed):
    """A trial chain of 1-12 pairs, with control-variate-like or plain residual sd: few
    pairs give the mean spline weights negative entries."""
    rng = np.random.default_rng(seed)
    N = int(rng.choice([2_000, 50_000]))
    n_pairs = int(rng.choice([1, 2, 3, 12]))
    sigma = (rng.uniform(0.5, 2.0, n_pairs) * 1e-6 if rng.random() < 0.4 else
             rng.uniform(0.3, 2.0, n_pairs) / np.sqrt(N))
    return TrialChain(mu=rng.normal(0, 1.5, n_pairs) / N, sigma=sigma,
                      c0=np.zeros(n_pairs), N=N), float(rng.choice([0.01, 0.05]))


def test_skip_gives_the_unskipped_searches_design(monkeypatch):
    """Ten random trial chains: the screen with the row bound, the screen without it and
    the full search choose the same design (or all find none), and the bound saves cells."""
    from design import InfeasibleDesignError, _optimize

    kw = dict(m_grid=[10, 40, 200], epsilon_grid=[0.005, 0.02, 0.1, 0.2], workers=1)

    def outcome(trial, tolerance, **extra):
        try:
            d = optimize(trial, tolerance, **kw, **extra)
        except InfeasibleDesignError as e:
            return ("infeasible", e.m, e.epsilon), 0
        return (d.m, d.epsilon, d.error, d.data_fraction), int(np.sum(~np.isnan(d.error_grid)))

    original = _optimize._Evaluator.data_lower_bound
    found, saved = 0, 0
    for seed in range(10):
        trial, tolerance = _random_trial(seed)
        full, _ = outcome(trial, tolerance, search="full")
        with_skip, cells = outcome(trial, tolerance)
        monkeypatch.setattr(_optimize._Evaluator, "data_lower_bound",
                            lambda self, m, larger=(), smaller=(): -np.inf)
        without, cells_without = outcome(trial, tolerance)
        monkeypatch.setattr(_optimize._Evaluator, "data_lower_bound", original)
        assert with_skip == without == full, seed
        found += full[0] != "infeasible"
        saved += cells_without - cells
    assert found >= 5 and saved > 0
