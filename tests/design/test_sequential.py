"""sequential_error: the compiled dynamic programme against an independent dense reference,
convergence under refinement, mass conservation, shapes and argument checks."""

import numpy as np
import pytest

from design import SequentialError, sequential_error
from design._sequential import (DEFAULT_RESOLUTION, _run_dp, run_dp, stage_sizes,
                                stage_thresholds)

# (m, epsilon, N, threshold): m dividing N or not, normal and Student-t thresholds, the
# two-stage edge case, and m = 2 (one degree of freedom at the first stage)
DENSE_CASES = [
    (100, 0.05, 2000, "normal"),
    (150, 0.01, 2000, "t"),
    (50, 0.001, 1000, "normal"),
    (333, 0.1, 5000, "t"),
    (49, 0.2, 50, "normal"),
    (2, 0.2, 30, "t"),
]
MUS = (0.0, 0.3, -1.5, 4.0)


@pytest.mark.parametrize("case", DENSE_CASES, ids=lambda c: "-".join(map(str, c)))
def test_matches_dense_nystrom_reference(case, dense_dp):
    m, eps, N, thr = case
    res = sequential_error(np.array(MUS), m=m, epsilon=eps, N=N, threshold=thr)
    for k, mu in enumerate(MUS):
        # the reference puts the (possibly negative) drift into every kernel directly
        E, pibar, stages, p_full = dense_dp.dense_sequential_error(mu, m, eps, N, thr)
        assert res.error[k] == pytest.approx(E, abs=1e-9)
        assert res.data_fraction[k] == pytest.approx(pibar, abs=1e-9)
        assert res.p_full[k] == pytest.approx(p_full, abs=1e-9)
        assert res.expected_stages[k] == pytest.approx(stages, rel=1e-9)


@pytest.mark.parametrize("threshold", ["normal", "t"])
def test_converged_under_refinement_at_large_N(threshold):
    """The kernel narrows to ~2 sqrt(m/N) = 0.03 here; refining every discretisation
    parameter of the exact programme by 1.6 changes nothing above 1e-8 (the issue asks for
    1e-6). (The fast path, at a lighter resolution from N / m = 2000, is checked against
    the exact programme in test_merge.py.)"""
    mus = np.array([0.0, 0.2, 1.0, 5.0, 40.0])
    args = (mus, 50, 0.005, 200_000, threshold)
    base = run_dp(*args, merge=0, stop_tol=0)
    fine = run_dp(*args, resolution=DEFAULT_RESOLUTION.refined(1.6), merge=0, stop_tol=0)
    for key in ("error", "data_fraction", "p_full", "p_early_correct"):
        np.testing.assert_allclose(base[key], fine[key], rtol=0, atol=1e-8, err_msg=key)
    np.testing.assert_allclose(base["expected_stages"], fine["expected_stages"], rtol=1e-9)


def test_read_only_drifts_reuse_the_compiled_programme():
    """The knots of cached pair integrals are read-only: the programme copies them to a
    writeable array rather than compile a second signature of its kernel (~10 s cold)."""
    from design import _dp

    mus = np.array([0.0, 0.5, 2.0])
    mus.setflags(write=False)
    res = _run_dp(mus, 40, 0.01, 3000, "normal")
    mus_types = {sig[3] for sig in _dp.dp_kernel.signatures}
    assert mus_types and all(t.mutable for t in mus_types), mus_types
    np.testing.assert_array_equal(
        res["error"], _run_dp(np.array([0.0, 0.5, 2.0]), 40, 0.01, 3000, "normal")["error"])


def test_fast_driftless_path_matches_full_path():
    """Worst-case designs skip the interior quadrature; mu = 0 must be unchanged."""
    for m, eps, N, thr in [(50, 0.001, 100_000, "normal"), (300, 0.1, 50_000, "t")]:
        full = run_dp(np.zeros(1), m, eps, N, thr, interior=True, merge=0, stop_tol=0)
        fast = run_dp(np.zeros(1), m, eps, N, thr, interior=False, merge=0, stop_tol=0)
        for key in ("error", "data_fraction", "p_full", "expected_stages"):
            assert fast[key][0] == pytest.approx(full[key][0], rel=1e-9, abs=1e-11), key


@pytest.mark.parametrize("case", [(50, 0.001, 100_000, "normal"), (500, 0.2, 20_000, "t"),
                                  (7, 0.05, 1000, "normal")])
def test_mass_is_conserved(case):
    """Band exits and interior survival are computed separately; their sum is conserved
    stage by stage, and at mu = 0 the right-side stops (survival differences) equal the
    wrong-side stops (band) by symmetry."""
    m, eps, N, thr = case
    r = run_dp(np.zeros(1), m, eps, N, thr, interior=True, merge=0, stop_tol=0)
    surv_before = np.concatenate([[1.0], r["survival"][:-1]])
    np.testing.assert_allclose(surv_before - r["survival"], r["exits"], rtol=0, atol=1e-11)
    assert r["p_early_correct"][0] == pytest.approx(r["error"][0], abs=1e-10)
    total = r["error"][0] + r["p_early_correct"][0] + r["p_full"][0]
    assert total == pytest.approx(1.0, abs=1e-10)


def test_published_example_value():
    """N = 13,000, m = 50, eps = 0.001 at mu_std = 0: the dense reference gives
    E = 0.0310980 and 251.3866 stages (the authors' 100-bin value is 0.031258 / 251.35)."""
    r = sequential_error(0.0, m=50, epsilon=0.001, N=13_000)
    assert r.error == pytest.approx(0.0310980480, abs=1e-9)
    assert r.expected_stages == pytest.approx(251.386579, abs=1e-5)
    assert r.n_stages == 260


def test_shapes_and_symmetry():
    mu = np.array([[0.0, -1.0], [1.0, 2.5]])
    r = sequential_error(mu, m=200, epsilon=0.05, N=10_000)
    assert isinstance(r, SequentialError)
    for field in ("error", "data_fraction", "expected_stages", "p_early_correct", "p_full"):
        assert getattr(r, field).shape == (2, 2)
    assert r.error[0, 1] == r.error[1, 0]
    s = sequential_error(2.5, m=200, epsilon=0.05, N=10_000)
    assert isinstance(s.error, float) and s.error == r.error[1, 1]
    assert "m=200" in repr(s)


def test_does_not_mutate_input():
    mu = np.array([-1.0, 0.5])
    before = mu.copy()
    sequential_error(mu, m=100, epsilon=0.1, N=1000)
    np.testing.assert_array_equal(mu, before)


def test_exact_test_when_m_equals_N():
    r = sequential_error([0.0, 3.0], m=500, epsilon=0.2, N=500)
    np.testing.assert_array_equal(r.error, 0.0)
    np.testing.assert_array_equal(r.data_fraction, 1.0)
    np.testing.assert_array_equal(r.p_full, 1.0)
    assert r.n_stages == 1


def test_stage_sizes_when_m_does_not_divide_N():
    np.testing.assert_array_equal(stage_sizes(300, 1000), [300, 600, 900, 1000])
    np.testing.assert_array_equal(stage_sizes(500, 1000), [500, 1000])


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(m=1), ValueError, r"m must be in \[2, 1000\], got 1"),
    (dict(m=1001), ValueError, r"m must be in \[2, 1000\], got 1001"),
    (dict(m=10.5), TypeError, "m must be an integer"),
    (dict(epsilon=0.0), ValueError, r"epsilon must be in \(0, 0.5\), got 0.0"),
    (dict(epsilon=0.5), ValueError, r"epsilon must be in \(0, 0.5\), got 0.5"),
    (dict(epsilon=0.7), ValueError, "epsilon must be in"),
    (dict(N=1, m=2), ValueError, "N must be >= 2, got 1"),
    (dict(N=1000.0), TypeError, "N must be an integer"),
    (dict(threshold="z"), ValueError, "threshold must be 'normal' or 't', got 'z'"),
    (dict(mu_std=[0.0, np.nan]), ValueError, "mu_std must be finite"),
])
def test_bad_input(kwargs, exc, match):
    args = dict(mu_std=0.0, m=100, epsilon=0.05, N=1000, threshold="normal")
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        sequential_error(args.pop("mu_std"), **args)


@pytest.mark.parametrize("threshold", ["normal", "t"])
@pytest.mark.parametrize("epsilon", [1e-6, 0.001, 0.05, 0.2, 0.5])
def test_stage_thresholds_equal_scipy_stats_bit_for_bit(threshold, epsilon):
    """The thresholds come from scipy.special (scipy.stats costs a third of a second to
    import on a first design): they are the very values scipy.stats gives."""
    from scipy import stats

    n = stage_sizes(7, 10_000)        # 2 .. 10,000 rows: df from 6 to 9,999
    n = np.concatenate([[2, 3], n])   # and 1 and 2 degrees of freedom
    expected = (np.full(n.shape, stats.norm.isf(epsilon)) if threshold == "normal"
                else stats.t.isf(epsilon, n - 1))
    np.testing.assert_array_equal(stage_thresholds(n, epsilon, threshold), expected)
