"""Correction tables: the fit, its error checked independently, the ridge reproduction,
the certified floor, sampling and the compiled kernels."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, linalg, optimize, special, stats

from design import _fit, _kernels, correction

FEW = settings(max_examples=30, derandomize=True, deadline=None)


@pytest.fixture(scope="module")
def table():
    return correction.default()


def quad_convolved_cdf(tab, z, tau):
    """Independent route: scipy.integrate.quad_vec of Phi((z - y)/tau) C(y), hat by hat."""
    z = np.asarray(z, dtype=float)
    h = tab.spacing
    total = np.zeros_like(z)
    for j in np.flatnonzero(tab.density):
        y0 = tab.x[j]

        def f(y, y0=y0, dj=tab.density[j]):
            return special.ndtr((z - y) / tau) * dj * (1.0 - abs(y - y0) / h)

        total += integrate.quad_vec(f, y0 - h, y0 + h, points=[y0], epsabs=1e-16,
                                    epsrel=1e-13)[0]
    return total


# --- the shipped table ------------------------------------------------------------------------


def test_default_table_is_a_density_with_error_below_1e6(table):
    assert table.sigma == 1.0 and table.method == "lp"
    assert np.all(table.density >= 0)
    assert table.density[0] == table.density[-1] == 0
    assert table.cdf_nodes[-1] == pytest.approx(1.0, abs=1e-12)
    assert integrate.trapezoid(table.density, table.x) == pytest.approx(1.0, abs=1e-12)
    assert table.linf_error <= 1e-6
    assert correction.default() is table                      # cached


def test_default_error_confirmed_by_scipy_quadrature(table):
    """The convolution's cdf, by quadrature, stays within the reported error and attains it."""
    worst = table.diagnostics["worst_x"]
    z = np.r_[np.linspace(-14, 14, 41), worst, -worst]
    err = quad_convolved_cdf(table, z, table.sigma) - special.expit(z)
    assert np.abs(err).max() <= table.linf_error * (1 + 1e-6) + 1e-13
    assert abs(err[-2]) == pytest.approx(table.linf_error, rel=1e-3)   # attained where reported
    # the closed-form convolution agrees with the quadrature
    assert np.abs(table.convolved_cdf(z) - special.expit(z) - err).max() < 1e-13


def test_default_moments_match_the_logistic(table):
    # Var(X_norm) + Var(X_corr) = Var(logistic): a check on the tails the cdf error cannot see
    assert table.mean == pytest.approx(0.0, abs=1e-12)
    assert table.variance == pytest.approx(np.pi ** 2 / 3 - 1.0, abs=1e-4)


def test_rebuilding_reproduces_the_shipped_table(table):
    rebuilt = correction.build(1.0)
    assert np.array_equal(rebuilt.x, table.x)
    assert np.abs(rebuilt.density - table.density).max() < 1e-9
    assert rebuilt.linf_error == pytest.approx(table.linf_error, rel=1e-6)


# --- building ---------------------------------------------------------------------------------


def test_lp_build_at_other_sigma_is_within_its_error():
    tab = correction.build(0.9, spacing=0.1)
    assert tab.linf_error < 1e-8
    z = np.linspace(-10, 10, 15)
    err = quad_convolved_cdf(tab, z, 0.9) - special.expit(z)
    assert np.abs(err).max() <= tab.linf_error * (1 + 1e-6) + 1e-13


def test_floor_at_sigma_1_1_rules_out_1e6_and_is_nearly_reached():
    floor = correction.error_floor(1.1, spacing=0.1)
    assert 1e-6 < floor.lower <= floor.upper < 1.3 * floor.lower


def test_floor_at_sigma_1_brackets_the_default_table(table):
    floor = correction.error_floor(1.0)
    assert 4e-8 < floor.lower <= table.linf_error == pytest.approx(floor.upper)
    assert table.linf_error < 1.2 * floor.lower


def test_curvature_bound_is_an_upper_bound_on_the_supremum():
    def f(a):
        return np.sin(7 * a) * np.exp(-a) + 0.3 * np.cos(3 * a)
    bound = _fit._sup_with_curvature(f, 0.0, 3.0, 0.05, curvature=49 + 14 + 1 + 2.7, tol=1e-12)
    brute = f(np.linspace(0, 3, 3_000_001)).max()
    assert brute <= bound <= brute + 1e-9


@pytest.mark.parametrize("bad, match", [
    (dict(sigma=0.0), "sigma must be in"),
    (dict(sigma=1.9), "sigma must be in"),
    (dict(method="nnls"), "method must be one of"),
    (dict(lam=1.0), "lam applies only"),
    (dict(spacing=0.07), "whole number"),
    (dict(spacing=0.01), "at most 2000"),
    (dict(half_width=5.0), "half_width must be in"),
    (dict(method="ridge", lam=-1.0), "lam must be in"),
])
def test_build_refuses_bad_settings(bad, match):
    with pytest.raises(ValueError, match=match):
        correction.build(**bad)


def test_constructor_refuses_invalid_densities():
    x = np.linspace(-2, 2, 5)
    good = np.array([0.0, 0.25, 0.5, 0.25, 0.0])
    correction.CorrectionTable(x, good, sigma=1.0, linf_error=0.1)
    with pytest.raises(ValueError, match="non-negative"):
        correction.CorrectionTable(x, good - [0, 0.3, 0, -0.3, 0], 1.0, 0.1)
    with pytest.raises(ValueError, match="integrate to 1"):
        correction.CorrectionTable(x, 2 * good, 1.0, 0.1)
    with pytest.raises(ValueError, match="0 at both ends"):
        correction.CorrectionTable(x, np.array([0.1, 0.2, 0.4, 0.2, 0.1]), 1.0, 0.1)
    with pytest.raises(ValueError, match="equal spacing"):
        correction.CorrectionTable(np.array([-2, -1, 0, 1.5, 2]), good, 1.0, 0.1)


def test_table_copies_and_freezes_its_arrays():
    x = np.linspace(-2, 2, 5)
    d = np.array([0.0, 0.25, 0.5, 0.25, 0.0])
    tab = correction.CorrectionTable(x, d, sigma=1.0, linf_error=0.1)
    d[2] = 99.0
    assert tab.density[2] == 0.5
    with pytest.raises(ValueError):
        tab.density[2] = 1.0
    with pytest.raises(AttributeError):
        tab.sigma = 2.0


# --- the paper's ridge construction -----------------------------------------------------------


@pytest.mark.parametrize("sigma, n, lam, paper", [
    (1.0, 4000, 10.0, 8.9e-4),    # the setting the paper uses
    (1.0, 2000, 1.0, 1.1e-3),
    (0.8, 4000, 100.0, 8.3e-4),
    (1.1, 2000, 0.01, 2.4e-2),
])
def test_ridge_reproduces_table_3(sigma, n, lam, paper):
    sol = correction.ridge_deconvolution(sigma, n_points=n, lam=lam)
    assert float(f"{sol.clipped_linf:.1e}") == paper
    assert sol.iterations < 50


def test_ridge_solver_matches_a_dense_solve():
    n, lam, sigma, v = 300, 10.0, 1.0, 20.0
    h = v / n
    big_x = np.arange(-2 * n, 2 * n + 1) * h
    m = special.ndtr((big_x[:, None] - np.arange(-n, n + 1)[None, :] * h) / sigma)
    dense = linalg.solve(m.T @ m + lam * np.eye(2 * n + 1), m.T @ special.expit(big_x),
                         assume_a="pos")
    sol = correction.ridge_deconvolution(sigma, n_points=n, lam=lam)
    assert np.abs(sol.masses - dense).max() < 1e-10
    assert sol.raw_linf == pytest.approx(np.abs(m @ dense - special.expit(big_x)).max(), rel=1e-8)


def test_ridge_table_is_a_valid_but_much_worse_correction(table):
    ridge = correction.build(1.0, method="ridge")
    assert np.all(ridge.density >= 0)
    assert ridge.diagnostics["negative_mass"] > 5e-4        # what clipping removed
    assert 4e-4 < ridge.linf_error < ridge.diagnostics["paper_linf"]
    assert ridge.linf_error > 1000 * table.linf_error


# --- sampling and the table's own distribution -----------------------------------------------


def test_samples_pass_a_ks_test_against_the_table_cdf(table):
    draws = table.sample(20_000, rng=42)
    assert stats.kstest(draws, table.cdf).pvalue > 1e-3


def test_samples_are_reproducible_and_shaped(table):
    a = table.sample((3, 4), rng=7)
    assert a.shape == (3, 4)
    assert np.array_equal(a, table.sample((3, 4), rng=np.random.default_rng(7)))
    assert isinstance(table.sample(rng=1), float)


@FEW
@given(st.floats(0.0, 1.0))
def test_cdf_inverts_ppf(u):
    tab = correction.default()
    assert tab.cdf(tab.ppf(u)) == pytest.approx(u, abs=1e-12)


def test_ppf_kernel_matches_root_finding_and_its_python_version(table):
    a = table.cdf_arrays()
    for u in np.random.default_rng(3).random(25):
        root = optimize.brentq(lambda y: table.cdf(y) - u, -30, 30, xtol=1e-14)
        got = correction.ppf_kernel(u, a.x0, a.spacing, a.density, a.cdf)
        assert got == pytest.approx(root, abs=1e-9)
        assert got == correction.ppf_kernel.py_func(u, a.x0, a.spacing, a.density, a.cdf)


def test_cdf_kernel_integrates_the_pdf(table):
    y = np.linspace(-6, 6, 13)
    direct = [integrate.quad(table.pdf, -30, yi, points=table.x[table.density > 0][:50],
                             limit=500, epsabs=1e-13)[0] for yi in y]
    assert np.abs(table.cdf(y) - direct).max() < 1e-9
    assert table.cdf(-1e9) == 0.0 and table.cdf(1e9) == pytest.approx(1.0, abs=1e-12)
    assert math.isnan(table.cdf(np.nan))


def test_ppf_refuses_values_outside_the_unit_interval(table):
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]"):
        table.ppf([0.5, 1.5])


# --- the hat-plus-Gaussian kernels ------------------------------------------------------------


@FEW
@given(st.floats(-3.0, 3.0), st.sampled_from([0.005, 0.05, 0.2]), st.floats(0.0, 2.0))
def test_hat_normal_cdf_matches_quadrature(z, h, tau):
    def integrand(y):
        p = special.ndtr((z - y) / tau) if tau > 0 else float(y <= z)
        return p * (h - abs(y)) / h ** 2
    kinks = [0.0] + ([z] if -h < z < h else [])
    ref = integrate.quad(integrand, -h, h, points=kinks, epsabs=1e-15, epsrel=1e-13)[0]
    got = _kernels.hat_normal_cdf(z, h, tau)
    assert got == pytest.approx(ref, abs=5e-14)          # the documented accuracy
    assert got + _kernels.hat_normal_cdf(-z, h, tau) == pytest.approx(1.0, abs=5e-14)


@FEW
@given(st.floats(-4.0, 4.0), st.sampled_from([0.005, 0.05, 0.2]), st.floats(0.3, 2.0))
def test_hat_normal_d2_matches_quadrature(z, h, tau):
    def integrand(y):
        v = (z - y) / tau
        return (v * v - 1) * stats.norm.pdf(v) * (h - abs(y)) / h ** 2
    ref = integrate.quad(integrand, -h, h, points=[0.0], epsabs=1e-15, epsrel=1e-13)[0]
    assert _kernels.hat_normal_d2(z, h, tau) == pytest.approx(ref, abs=5e-14)


def test_convolved_cdf_without_noise_is_the_table_cdf(table):
    y = np.linspace(-5, 5, 41)
    assert np.abs(table.convolved_cdf(y, noise_sd=0.0) - table.cdf(y)).max() < 1e-12


@FEW
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.floats(0.0, 1.5))
def test_any_table_gives_a_distribution(weights, tau):
    """Invariants of arbitrary tables: unit mass, draws on the support, a monotone cdf."""
    inner = np.asarray(weights)
    if inner.sum() == 0:
        inner = np.ones_like(inner)
    x = np.linspace(-1.0, 1.0, inner.size + 2)
    density = np.r_[0.0, inner, 0.0]
    density /= np.trapezoid(density, x)
    tab = correction.CorrectionTable(x, density, sigma=1.0, linf_error=1.0)
    assert tab.cdf_nodes[-1] == pytest.approx(1.0, abs=1e-12)
    draws = tab.sample(200, rng=0)
    assert draws.min() >= x[0] and draws.max() <= x[-1]
    z = np.linspace(-8, 8, 161)
    f = tab.convolved_cdf(z, noise_sd=tau)
    assert np.all(np.diff(f) >= -1e-13) and f[0] < 1e-6 and f[-1] > 1 - 1e-6
