"""The design at any N: merged stages against the exact dynamic programme.

The fast path (``run_dp`` defaults: merged stages where the step in log information time is
below ``merge``, early stop at negligible survival) must agree with the exact programme
(``merge=0, stop_tol=0``, the reference path) to 1e-6 wherever the exact one runs, and its
error must stay inside the bound C merge^2 the module documents for larger merge steps.
"""

import numpy as np
import pytest

from design import sequential_error
from design._sequential import run_dp
from design._stages import (DEFAULT_MERGE, MERGE_ERROR_DATA, MERGE_ERROR_E, merge_step,
                            plan_stages, visited_stages)

# (m, epsilon, N, threshold): N / m from 10^4 to 2.5 10^4, so that stages are merged
AGREEMENT_CASES = [
    (50, 0.001, 1_000_000, "normal"),
    (50, 0.05, 1_000_000, "t"),
    (100, 0.01, 1_000_000, "normal"),
    (16, 0.2, 400_000, "normal"),
    (40, 0.005, 500_000, "t"),
]
MUS = np.array([0.0, 0.3, 1.0, 2.0, 3.0, 10.0])


@pytest.fixture(scope="module")
def exact_runs():
    return {c: run_dp(MUS, *c, merge=0, stop_tol=0) for c in AGREEMENT_CASES}


@pytest.mark.parametrize("case", AGREEMENT_CASES, ids=lambda c: "-".join(map(str, c)))
def test_fast_path_agrees_with_exact_dp(case, exact_runs):
    fast = run_dp(MUS, *case)
    assert fast["stages"].size < 0.8 * (case[2] // case[0])      # it did merge
    exact = exact_runs[case]
    for key in ("error", "data_fraction", "p_full", "p_early_correct"):
        np.testing.assert_allclose(fast[key], exact[key], rtol=0, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(fast["expected_stages"], exact["expected_stages"], rtol=1e-5)


@pytest.mark.parametrize("merge", [2e-3, 4e-3])
@pytest.mark.parametrize("case", AGREEMENT_CASES[:3], ids=lambda c: "-".join(map(str, c)))
def test_error_bound_holds_for_coarser_merges(case, merge, exact_runs):
    """|error| <= MERGE_ERROR_E merge^2 and |data| <= MERGE_ERROR_DATA merge^2."""
    fast = run_dp(MUS, *case, merge=merge)
    exact = exact_runs[case]
    assert np.max(np.abs(fast["error"] - exact["error"])) <= MERGE_ERROR_E * merge**2
    assert np.max(np.abs(fast["data_fraction"] - exact["data_fraction"])) <= (
        MERGE_ERROR_DATA * merge**2)


def test_the_siegmund_shift_is_what_makes_merging_accurate(exact_runs, monkeypatch):
    """Without the threshold shift the merged checks miss crossings: the error is of order
    sqrt(merge), hundreds of times the bound; the shift brings it inside."""
    import design._stages as stages

    case = AGREEMENT_CASES[0]
    monkeypatch.setattr(stages, "SIEGMUND_RHO", 0.0)
    unshifted = run_dp(np.zeros(1), *case, interior=False, merge=4e-3)
    err = abs(unshifted["error"][0] - exact_runs[case]["error"][0])
    assert err > 100 * MERGE_ERROR_E * 4e-3**2


@pytest.mark.parametrize("case", [(200, 0.01, 1_000_000, "t"), (500, 0.001, 1_500_000,
                                  "normal")], ids=lambda c: "-".join(map(str, c)))
def test_fast_resolution_agrees_with_exact_dp_without_merging(case):
    """N / m = 3000-5000: no stage merged, the fast path only uses the lighter resolution."""
    fast = run_dp(MUS, *case)
    exact = run_dp(MUS, *case, merge=0, stop_tol=0)
    assert fast["stages"].size == exact["stages"].size
    for key in ("error", "data_fraction", "p_full"):
        np.testing.assert_allclose(fast[key], exact[key], rtol=0, atol=1e-8, err_msg=key)


def test_small_N_is_the_exact_programme_bit_for_bit():
    """Without a merged stage the fast path is the reference plan: the same numbers, not
    close ones, apart from drifts retired once their survival is below 1e-13."""
    args = (np.array([0.0, 0.7, 4.0]), 100, 0.01, 150_000, "t")      # N / m < FAST_FROM
    ref = run_dp(*args, merge=0, stop_tol=0)
    no_stop = run_dp(*args, stop_tol=0)
    fast = run_dp(*args)
    assert fast["stages"].size == 150_000 // 100 - 1
    for key in ("error", "data_fraction", "p_full", "expected_stages"):
        np.testing.assert_array_equal(no_stop[key], ref[key])
        np.testing.assert_allclose(fast[key], ref[key], rtol=1e-12, atol=1e-12)


def test_early_stop_changes_nothing_above_its_tolerance():
    """eps = 0.2 stops almost every path in the first stages; stopping the programme once
    the survival is below 1e-13 changes the outputs by less than that."""
    args = (np.array([0.0, 2.0]), 200, 0.2, 300_000, "normal")
    stop = run_dp(*args, merge=0)
    full = run_dp(*args, merge=0, stop_tol=0)
    for key in ("error", "data_fraction", "p_full"):
        np.testing.assert_allclose(stop[key], full[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize("K", [50.0, 1e4 + 0.5, 2e7, 1e9 / 3])
def test_visited_stages_are_a_valid_plan(K):
    """Start at 1, end at the last monitored stage, increase, every merged step spans at most
    ``merge`` of log tau, and two consecutive steps span more (the greedy is maximal)."""
    J1 = int(np.ceil(K)) - 1
    delta = merge_step(K)
    j = visited_stages(J1, K, delta)
    assert j[0] == 1 and j[-1] == J1 and np.all(np.diff(j) > 0)
    t = np.log(j) - np.log(K - j)
    step = np.diff(t)
    merged = np.diff(j) > 1
    assert np.all(step[merged] <= delta * (1 + 1e-9))
    assert np.all(step[:-1] + step[1:] > delta * (1 - 1e-9))
    assert j.size <= 16_000                                   # bounded at any N


def test_no_monitored_stage_gives_an_empty_plan():
    # m >= N leaves J - 1 = 0 monitored stages; this looped for ever (fit at N = 50)
    for merge in (DEFAULT_MERGE, 0.0):
        assert visited_stages(0, 1.0, merge).size == 0
    assert visited_stages(1, 2.0, DEFAULT_MERGE).tolist() == [1]


def test_plan_weights_add_up_to_the_exact_ones():
    """Interpolating the survival between visited stages keeps the total weights: the data
    fraction of a walk that never stops is 1, and its stage count is J."""
    N, m = 3_000_000, 60
    plan = plan_stages(m, N, lambda n: np.full(n.shape, 3.0), DEFAULT_MERGE)
    assert plan.merged
    assert plan.pi[-1] == pytest.approx(1.0, abs=1e-12)
    assert 1.0 + plan.wst.sum() == pytest.approx(N // m, rel=1e-12)


def test_merge_step_grows_only_beyond_the_budget():
    assert merge_step(2e4) == DEFAULT_MERGE
    assert DEFAULT_MERGE < merge_step(2e7) < 3e-3
    assert merge_step(100.0, merge=0.0) == 0.0


def test_sequential_error_runs_at_N_1e9_in_bounded_memory():
    """N = 10^9, m = 50: 2 10^7 stages in the exact programme; the plan visits ~12,000."""
    r = sequential_error([0.0, 1.0], m=50, epsilon=0.01, N=10**9)
    assert 0.0 < r.error[0] < 0.5 and 0.0 < r.data_fraction[0] < 1.0
    total = r.error + r.p_early_correct + r.p_full
    np.testing.assert_allclose(total, 1.0, atol=1e-10)



def test_public_exact_switch():
    """sequential_error(exact=True) is the reference programme; the default agrees to 1e-6."""
    kw = dict(m=100, epsilon=0.02, N=1_000_000)
    fast = sequential_error([0.0, 1.5], **kw)
    exact = sequential_error([0.0, 1.5], **kw, exact=True)
    ref = run_dp(np.array([0.0, 1.5]), 100, 0.02, 1_000_000, "normal", merge=0, stop_tol=0)
    np.testing.assert_array_equal(exact.error, ref["error"])
    np.testing.assert_allclose(fast.error, exact.error, rtol=0, atol=1e-6)
    np.testing.assert_allclose(fast.data_fraction, exact.data_fraction, rtol=0, atol=1e-6)


def test_grid_dots_match_a_direct_gaussian_sum():
    """The compiled lockstep grid sums against the trapezoid sum written out in NumPy."""
    from design import _dp

    rng = np.random.default_rng(3)
    M, h, rho, s, W = 150, 0.02, 0.99, 0.035, 7.0
    F = np.exp(-0.5 * (np.arange(M + 1) * h) ** 2) * (1 + 0.1 * rng.uniform(size=M + 1))
    pad = _dp._grid_pad(rho, h, s, W)
    G = _dp._padded(F, M, pad)
    ys = np.concatenate([[0.0, 1e-3], rng.uniform(0, rho * M * h + W * s, 40), [3 * M * h]])
    out = np.empty(ys.size)
    _dp._grid_dots(ys, G, M + pad, h, rho, s, W, out)
    i = np.arange(-M, M + 1)
    diff = ys[:, None] - rho * h * i[None, :]
    kern = np.where(np.abs(diff) <= W * s, np.exp(-0.5 * (diff / s) ** 2), 0.0)
    ref = h * kern @ F[np.abs(i)] / (s * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-300)
    assert out[-1] == 0.0                          # a window beyond the grid
