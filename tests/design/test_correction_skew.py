"""Skew-corrected tables (appendix A.5) and the simulated acceptance of the Barker test."""

import numpy as np
import pytest
from scipy import integrate, special, stats

from design import correction
from design.acceptance import barker_acceptance


@pytest.fixture(scope="module")
def family():
    return correction.default_skew()


def skewed_limit_error(density, x, z, eta, sigma=1.0):
    """Independent route: quad_vec of (Phi + eta phi'')((z - y)/sigma) against the table."""
    z = np.asarray(z, dtype=float)
    h = x[1] - x[0]

    def kernel(v):
        return special.ndtr(v) + eta * (v * v - 1) * stats.norm.pdf(v)

    total = np.zeros_like(z)
    for j in np.flatnonzero(density):
        f = lambda y, j=j: kernel((z - y) / sigma) * density[j] * (1 - abs(y - x[j]) / h)
        total += integrate.quad_vec(f, x[j] - h, x[j] + h, points=[x[j]], epsabs=1e-15,
                                    epsrel=1e-13)[0]
    return total - special.expit(z)


def test_every_row_is_a_density_with_small_error(family):
    assert np.all(family.density >= 0)
    assert np.abs(family.cdf_nodes[:, -1] - 1).max() < 1e-12
    assert family.skew[0] == 0 and family.skew_max == pytest.approx(0.2)
    assert family.linf_error.max() < 1e-6
    assert family.interpolation_error < 5e-6


@pytest.mark.parametrize("row", [0, 10, 40])
def test_row_error_confirmed_by_quadrature(family, row):
    err = skewed_limit_error(family.density[row], family.x, np.linspace(-12, 12, 49),
                             family.skew[row])
    assert np.abs(err).max() <= family.linf_error[row] * (1 + 1e-6) + 1e-13


def test_mixture_between_rows_stays_within_the_bound(family):
    eta = 0.5 * (family.skew[20] + family.skew[21])
    d = family.density_at(eta)
    assert np.allclose(d, 0.5 * (family.density[20] + family.density[21]))
    err = skewed_limit_error(d, family.x, np.linspace(-8, 8, 65), eta)
    assert np.abs(err).max() <= family.error_bound(eta)


def test_negative_skew_is_the_mirror_image(family):
    a = family.sample(0.0731, size=1000, rng=3)
    b = family.sample(-0.0731, size=1000, rng=3)
    assert np.array_equal(a, -b)
    assert np.array_equal(family.density_at(-0.05), family.density_at(0.05)[::-1])


def test_skew_samples_follow_the_mixture(family):
    eta = 0.0123
    draws = family.sample(eta, size=20_000, rng=11)
    d = family.density_at(eta)
    cdf = correction.CorrectionTable(family.x, d, sigma=1.0, linf_error=0.0).cdf
    assert stats.kstest(draws, cdf).pvalue > 1e-3


def test_skew_kernel_matches_its_python_version(family):
    a = family.cdf_arrays()
    rng = np.random.default_rng(0)
    for eta, u1, u2 in zip(rng.uniform(-0.3, 0.3, 20), rng.random(20), rng.random(20)):
        args = (eta, u1, u2, a.x0, a.spacing, a.skew_step, a.density, a.cdf)
        assert correction.skew_ppf_kernel(*args) == correction.skew_ppf_kernel.py_func(*args)


def test_skew_parameter_checks_its_arguments():
    assert correction.skew_parameter(0.27, sigma=0.9) == pytest.approx(0.27 / (3 * 0.729))
    with pytest.raises(ValueError, match="third_cumulant must be a finite"):
        correction.skew_parameter(np.nan)
    with pytest.raises(ValueError, match="sigma must be in"):
        correction.skew_parameter(0.1, sigma=2.0)


# --- the Barker test on a skewed population ---------------------------------------------------


def population(kind, n, b, s2, rng):
    """l_i with Var(Delta*) = s2 at batch size b; Delta = 0 is set by log_const."""
    base = rng.standard_exponential(n) if kind == "exponential" else rng.standard_normal(n)
    l = base * np.sqrt(s2 * b) / (n * base.std())
    return l, -n * l.mean()


def test_skew_correction_removes_the_order_root_b_error():
    """Exponential l_i (skewness 2), b = 64: the plain test is off by ~4e-3 at Delta = 0,
    as the skewed limit predicts, and the skew-corrected test by an order of magnitude less."""
    b, s2 = 64, 0.5
    l, c = population("exponential", 200_000, b, s2, np.random.default_rng(1))
    plain = barker_acceptance(l, b, log_const=c, n_tests=40_000, rng=2)
    fixed = barker_acceptance(l, b, log_const=c, table=correction.default_skew(),
                              n_tests=40_000, rng=2)
    assert plain.logistic == pytest.approx(0.5)
    # prediction of the derived limit: -eta sigma^3 S'''(0) = eta / 8, eta = k3 / 3
    k3 = (200_000 ** 3) * stats.moment(l, 3) / b ** 2
    predicted = k3 / 3 / 8
    assert plain.error == pytest.approx(predicted, rel=0.2)
    assert plain.error > 20 * plain.standard_error
    assert abs(fixed.error) < plain.error / 5


def test_gaussian_population_is_unbiased_at_delta_zero():
    b = 50
    l, c = population("normal", 100_000, b, 0.5, np.random.default_rng(4))
    est = barker_acceptance(l, b, log_const=c, n_tests=20_000, rng=5)
    assert abs(est.error) < 4 * est.standard_error + 1e-7


def test_acceptance_is_reproducible_and_leaves_the_population_alone():
    l, c = population("exponential", 5_000, 20, 0.5, np.random.default_rng(6))
    before = l.copy()
    a = barker_acceptance(l, 20, log_const=c, n_tests=2_000, rng=7)
    b = barker_acceptance(l, 20, log_const=c, n_tests=2_000, rng=7)
    assert a == b
    assert np.array_equal(l, before)


def test_acceptance_refuses_bad_arguments():
    l = np.zeros(100)
    with pytest.raises(ValueError, match="batch_size must be"):
        barker_acceptance(l, 200)
    with pytest.raises(TypeError, match="table must be"):
        barker_acceptance(l, 10, table="default")


def test_finite_population_factor_removes_a_predicted_bias():
    """Without 1 - b/N the variance estimate is too large by b/N and the test errs by
    about -(b/N)(s^2/2) S''(Delta) (heat equation); with it, the error is within noise."""
    n, b, s2, delta = 20_000, 2_000, 0.5, 2.3
    l, c = population("normal", n, b, s2, np.random.default_rng(8))
    kw = dict(log_const=c + delta, n_tests=20_000, rng=9)
    with_fpc = barker_acceptance(l, b, **kw)
    without = barker_acceptance(l, b, fpc=False, **kw)
    sd = special.expit(delta) * (1 - special.expit(delta))
    s_second = sd * (1 - 2 * special.expit(delta))
    predicted = -(b / n) * (s2 / 2) * s_second
    assert without.error - with_fpc.error == pytest.approx(predicted, rel=0.05)
    assert abs(with_fpc.error) < 4 * with_fpc.standard_error + 1e-5
