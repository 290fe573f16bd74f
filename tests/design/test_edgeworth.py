"""The Edgeworth-corrected dynamic programme: the Gaussian programme at zero skewness and
kurtosis, its symmetries, the per-pair u integral, and optimize(law="edgeworth").

The comparison with the real test on skewed l_i (an independent simulation) is in
tests/validation/test_verdict.py."""

import warnings

import numpy as np
import pytest

from design import TrialChain, acceptance_error, evaluate, optimize, sequential_error
from design._edgeworth import edgeworth_dp, edgeworth_reliable

MUS = np.array([0.0, 0.5, 1.0, 2.0, 5.0, 20.0])


@pytest.mark.parametrize("m, eps, N", [(50, 0.1, 20_000), (200, 0.02, 5000),
                                       (100, 0.05, 100_000)])
def test_zero_shape_is_the_gaussian_programme(m, eps, N):
    """With skewness = kurtosis = 0 the corrected programme is the Gaussian walk: the only
    differences are its coarser merge step (0.5 delta^2 = 2e-4) and its node rule."""
    err, frac = edgeworth_dp(MUS, m, eps, N, 0.0, 0.0)
    ref = sequential_error(MUS, m=m, epsilon=eps, N=N)
    np.testing.assert_allclose(err, ref.error, atol=2e-4)
    np.testing.assert_allclose(frac, ref.data_fraction, atol=5e-4)
    back, _ = edgeworth_dp(-MUS, m, eps, N, 0.0, 0.0)        # even in mu_std
    np.testing.assert_allclose(back, err, atol=1e-12)


def test_mirror_symmetry_and_direction_of_the_skew():
    """Negating the l_i negates mu_std and the skewness: E(mu; gamma) = E(-mu; -gamma).
    Right-skewed l_i make the t statistic left-skewed: more wrong stops below (mu > 0)
    and fewer above (mu < 0) than the Gaussian walk."""
    kw = dict(m=100, epsilon=0.05, N=50_000)
    plus = sequential_error(MUS[1:], law="edgeworth", skewness=2.0, kurtosis=8.0, **kw)
    minus = sequential_error(-MUS[1:], law="edgeworth", skewness=-2.0, kurtosis=8.0, **kw)
    np.testing.assert_allclose(plus.error, minus.error, atol=1e-12)
    gauss = sequential_error(MUS[1:], **kw).error
    below = sequential_error(-MUS[1:], law="edgeworth", skewness=2.0, kurtosis=8.0, **kw)
    assert np.all(plus.error[:4] > gauss[:4]) and np.all(below.error[:4] < gauss[:4])
    assert plus.law == "edgeworth" and plus.expected_stages is None


def test_acceptance_error_zero_shape_and_bounds():
    rng = np.random.default_rng(3)
    N, P = 40_000, 6
    sigma = np.exp(rng.normal(np.log(2 / np.sqrt(N)), 0.5, P))
    mu = rng.normal(0, 2, P) * sigma / np.sqrt(N) - 0.5 / N
    tc = TrialChain(mu=mu, sigma=sigma, c0=np.zeros(P), N=N, skewness=np.zeros(P),
                    kurtosis=np.zeros(P))
    g = acceptance_error(tc, m=100, epsilon=0.05)
    e = acceptance_error(tc, m=100, epsilon=0.05, law="edgeworth")
    np.testing.assert_allclose(e.delta, g.delta, atol=2e-4)
    np.testing.assert_allclose(e.data_fraction, g.data_fraction, atol=5e-4)
    assert e.law == "edgeworth" and e.reliable.all() and g.reliable is None
    skewed = TrialChain(mu=mu, sigma=sigma, c0=np.zeros(P), N=N, skewness=np.full(P, 2.0),
                        kurtosis=np.full(P, 10.0))
    s = acceptance_error(skewed, m=100, epsilon=0.05, law="edgeworth")
    assert np.all(np.abs(s.delta) <= 1.0) and np.all((s.data_fraction > 0) & (
        s.data_fraction <= 1))
    assert np.max(np.abs(s.delta - g.delta)) > 5e-3      # the correction does something


def test_reliability_rule():
    np.testing.assert_array_equal(edgeworth_reliable([0.5, 4.0, 1.0], [3.0, 20.0, 60.0], 100),
                                  [True, True, False])
    assert not edgeworth_reliable(6.0, 0.0, 100)


def _trial(N, P, skew, kurt, seed=5):
    rng = np.random.default_rng(seed)
    sigma = np.full(P, 1.5 / np.sqrt(N))
    mu = rng.normal(0, 1.5, P) * sigma / np.sqrt(N)
    return TrialChain(mu=mu, sigma=sigma, c0=np.zeros(P), N=N, skewness=np.full(P, skew),
                      kurtosis=np.full(P, kurt))


def test_optimize_edgeworth_reports_the_change():
    grid = dict(m_grid=[50, 100, 200], epsilon_grid=[0.01, 0.02, 0.05, 0.1])
    flat = _trial(20_000, 4, 0.0, 0.0)
    g = optimize(flat, 0.05, **grid)
    e = optimize(flat, 0.05, law="edgeworth", **grid)
    assert (e.m, e.epsilon) == (g.m, g.epsilon) == (e.gaussian_m, e.gaussian_epsilon)
    assert abs(e.error - g.error) < 2e-4 and e.law == "edgeworth" and g.law == "gaussian"
    assert g.gaussian_m is None and g.corrected_cells is None
    skewed = _trial(20_000, 4, 3.0, 20.0)
    d = optimize(skewed, 0.05, law="edgeworth", **grid)
    assert d.error <= 0.05 and d.gaussian_corrected_error is not None
    assert (d.m, d.epsilon, d.error, d.data_fraction) in {c for c in d.corrected_cells}
    err, frac = evaluate(d, skewed)
    assert abs(np.mean(np.abs(err)) - d.error) < 1e-12
    gerr, _ = evaluate(d, skewed, law="gaussian")
    assert not np.allclose(gerr, err)
    assert "Gaussian DP's choice" in str(d) and "law='edgeworth'" in repr(d)


def test_bad_law_arguments():
    tc = TrialChain(mu=[1e-5], sigma=[1e-3], c0=[0.0], N=10_000)
    with pytest.raises(ValueError, match="law must be 'gaussian' or 'edgeworth'"):
        acceptance_error(tc, m=100, epsilon=0.05, law="normal")
    with pytest.raises(ValueError, match="needs the skewness and kurtosis"):
        acceptance_error(tc, m=100, epsilon=0.05, law="edgeworth")
    with pytest.raises(ValueError, match="needs the skewness and kurtosis"):
        optimize(tc, 0.05, law="edgeworth", m_grid=[100], epsilon_grid=[0.05])
    with pytest.raises(TypeError, match="law applies to test='austere'"):
        optimize(tc, 0.05, test="confidence", law="edgeworth")
    with pytest.raises(TypeError, match="needs skewness= and kurtosis="):
        sequential_error(0.0, m=100, epsilon=0.05, N=10_000, law="edgeworth")
    with pytest.raises(TypeError, match="apply to law='edgeworth' only"):
        sequential_error(0.0, m=100, epsilon=0.05, N=10_000, skewness=1.0)
    with pytest.raises(ValueError, match="threshold='normal'"):
        sequential_error(0.0, m=100, epsilon=0.05, N=10_000, threshold="t",
                         law="edgeworth", skewness=1.0, kurtosis=0.0)


def test_optimize_edgeworth_infeasible_names_the_nearest_setting():
    from design import InfeasibleDesignError

    skewed = _trial(20_000, 3, 3.0, 20.0)
    with pytest.raises(InfeasibleDesignError, match="Edgeworth-corrected") as info:
        optimize(skewed, 0.08, law="edgeworth", m_grid=[100], epsilon_grid=[0.05, 0.1])
    err = info.value
    assert err.best_on_grid[:2] == (100, 0.05) and err.epsilon < 0.05
    assert err.m == 100 and err.error <= 0.08
    # Gaussian error 0.101 > 0.1 at eps = 0.05, corrected 0.092: only the correction finds it
    d = optimize(skewed, 0.1, law="edgeworth", m_grid=[100], epsilon_grid=[0.05])
    assert d.gaussian_m is None and d.error <= 0.1 and "Gaussian DP's choice  none" in str(d)


def test_optimize_edgeworth_warns_outside_the_expansion():
    """At kurtosis 40 the expansion is trusted from m = 80 on (max(kappa, gamma^2) / m <=
    0.5): a search over m = 50 relies on cells outside it and says so, naming the cells, the
    pairs and the simulation to run instead; inside the expansion it stays silent."""
    heavy = _trial(20_000, 4, 3.0, 40.0)
    with pytest.warns(UserWarning, match=r"outside the Edgeworth expansion.*m = 50") as rec:
        optimize(heavy, 0.2, law="edgeworth", m_grid=[50], epsilon_grid=[0.02, 0.05])
    text = str(rec[0].message)
    assert "pairs 0, 1, 2, 3" in text and "validation.acceptance_check" in text
    assert rec[0].filename == __file__                   # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimize(heavy, 0.2, law="edgeworth", m_grid=[100], epsilon_grid=[0.02, 0.05])
        optimize(_trial(20_000, 4, 3.0, 20.0), 0.2, law="edgeworth",
                 m_grid=[50, 100], epsilon_grid=[0.02, 0.05])
