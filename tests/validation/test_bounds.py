"""The stationary-distribution bounds: arithmetic, argument checks, Delta_max from a design."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from design import TrialChain, acceptance_error, optimize, sequential_error
from validation import delta_max, stationary_bound, subsampling_bound

unit_open = st.floats(0.0, 1.0, exclude_min=True, exclude_max=True)
unit_left = st.floats(0.0, 1.0, exclude_max=True)


def test_stationary_bound_arithmetic():
    assert stationary_bound(0.01, 0.5) == pytest.approx(0.02)
    assert stationary_bound(0.0, 0.9) == 0.0
    assert stationary_bound(0.3, 0.0) == pytest.approx(0.3)
    assert stationary_bound(1.0, 0.75) == pytest.approx(4.0)


def test_subsampling_bound_arithmetic():
    assert subsampling_bound(0.01, 1.0, 2, 0.5) == pytest.approx(0.04)
    assert subsampling_bound(0.1, 3.0, 1, 0.0) == pytest.approx(0.3)
    assert subsampling_bound(0.02, 2.5, 10, 0.9) == pytest.approx(2.5 * 10 * 0.02 / 0.1)


@given(unit_left, unit_left, unit_left)
def test_stationary_bound_is_monotone(d, eta, bump):
    d2 = d + (1 - d) * bump
    eta2 = eta + (1 - eta) * bump * 0.5
    assert stationary_bound(d2, eta) >= stationary_bound(d, eta)
    assert stationary_bound(d, eta2) >= stationary_bound(d, eta)


@given(unit_open, unit_left, st.integers(1, 50))
def test_subsampling_bound_with_a_one_step_doeblin_constant(delta, rho, m):
    """With A = 1 and m = 1 the two bounds coincide; m steps cost m times as much."""
    assert subsampling_bound(delta, 1.0, 1, rho) == pytest.approx(stationary_bound(delta, rho))
    assert subsampling_bound(delta, 1.0, m, rho) == pytest.approx(
        m * subsampling_bound(delta, 1.0, 1, rho))


@pytest.mark.parametrize("eta", [1.0, 1.5, -0.1, math.nan, math.inf])
def test_stationary_bound_refuses_eta_outside_0_1(eta):
    with pytest.raises(ValueError, match=r"eta must be in \[0, 1\)"):
        stationary_bound(0.1, eta)


@pytest.mark.parametrize("d", [-0.1, 1.1, math.nan])
def test_stationary_bound_refuses_delta_max_outside_0_1(d):
    with pytest.raises(ValueError, match=r"delta_max must be in \[0, 1\]"):
        stationary_bound(d, 0.5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(delta=0.0), r"delta must be in \(0, 1\)"),
    (dict(delta=1.0), r"delta must be in \(0, 1\)"),
    (dict(delta=-0.5), r"delta must be in \(0, 1\)"),
    (dict(rho=1.0), r"rho must be in \[0, 1\)"),
    (dict(rho=-0.01), r"rho must be in \[0, 1\)"),
    (dict(A=0.0), r"A must be in \(0, inf\)"),
    (dict(A=math.inf), r"A must be in \(0, inf\)"),
    (dict(m=0), r"m must be >= 1"),
])
def test_subsampling_bound_refuses_bad_values(kwargs, message):
    args = dict(delta=0.01, A=1.0, m=2, rho=0.5) | kwargs
    with pytest.raises(ValueError, match=message):
        subsampling_bound(**args)


@pytest.mark.parametrize("call", [
    lambda: stationary_bound("0.1", 0.5),
    lambda: stationary_bound(0.1, None),
    lambda: subsampling_bound(0.1, 1.0, 2.5, 0.5),
])
def test_bounds_refuse_wrong_types(call):
    with pytest.raises(TypeError):
        call()


def test_delta_max_worst_case_is_E_at_zero():
    got = delta_max(m=500, epsilon=0.05, N=100_000)
    assert got == sequential_error(0.0, m=500, epsilon=0.05, N=100_000).error
    assert delta_max(m=500, epsilon=0.01, N=100_000) < got


def test_delta_max_over_a_trial_chain():
    rng = np.random.default_rng(0)
    tc = TrialChain(mu=rng.normal(0, 1e-4, 30), sigma=np.full(30, 0.05), c0=np.zeros(30),
                    N=10_000)
    got = delta_max(m=200, epsilon=0.05, trial_chain=tc)
    assert got == np.abs(acceptance_error(tc, m=200, epsilon=0.05).delta).max()
    assert 0 < got <= delta_max(m=200, epsilon=0.05, N=10_000)


def test_delta_max_from_a_design():
    d = optimize(10_000, tolerance=0.3, method="worst-case", m_grid=[100, 500],
                 epsilon_grid=[0.01, 0.05], workers=1)
    assert delta_max(d) == pytest.approx(d.error, rel=1e-9)
    with pytest.raises(TypeError, match="not both"):
        delta_max(d, m=100)
    with pytest.raises(TypeError, match="design.Design"):
        delta_max({"m": 100})


def test_delta_max_needs_a_test():
    with pytest.raises(TypeError, match="needs a design"):
        delta_max(m=100, epsilon=0.05)
    tc = TrialChain(mu=[0.0], sigma=[0.01], c0=[0.0], N=1000)
    with pytest.raises(ValueError, match="differs"):
        delta_max(m=100, epsilon=0.05, N=2000, trial_chain=tc)
