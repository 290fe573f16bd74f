"""Invariants of sequential_error over random tests (hypothesis, with the project's
derandomised, capped profile from tests/conftest.py)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from design import sequential_error


@st.composite
def sequential_tests(draw):
    N = draw(st.integers(2, 3000))
    m = draw(st.integers(2, max(2, min(N, 600))))
    eps = draw(st.floats(0.001, 0.49))
    threshold = draw(st.sampled_from(["normal", "t"]))
    return dict(m=m, epsilon=eps, N=N, threshold=threshold)


mu_values = st.lists(st.floats(0.0, 30.0), min_size=1, max_size=6)


@given(sequential_tests(), mu_values)
def test_probabilities_are_probabilities(test, mus):
    r = sequential_error(np.array(mus), **test)
    pi1 = min(test["m"], test["N"]) / test["N"]
    assert np.all((r.error >= 0) & (r.error <= 1))
    assert np.all((r.data_fraction >= pi1 - 1e-12) & (r.data_fraction <= 1 + 1e-12))
    assert np.all((r.expected_stages >= 1 - 1e-12) & (r.expected_stages <= r.n_stages + 1e-9))
    for p in (r.p_early_correct, r.p_full):
        assert np.all((p >= -1e-10) & (p <= 1 + 1e-10))


@given(sequential_tests())
def test_outcome_probabilities_sum_to_one(test):
    """At mu = 0 the early right-side stops come from survival differences and the wrong
    ones from the band integral, which by symmetry must agree; for every mu the three
    outcomes are exhaustive."""
    r = sequential_error(np.array([0.0, 0.7, 3.0]), **test)
    np.testing.assert_allclose(r.error + r.p_early_correct + r.p_full, 1.0, atol=1e-10)
    assert abs(r.p_early_correct[0] - r.error[0]) < 1e-9


@given(sequential_tests(), mu_values)
def test_error_is_even_and_decreasing_in_mu(test, mus):
    mus = np.sort(np.array(mus))
    r = sequential_error(np.concatenate([[0.0], mus, -mus]), **test)
    k = mus.size
    pos, neg = r.error[1:k + 1], r.error[k + 1:]
    np.testing.assert_array_equal(pos, neg)
    assert r.error[0] <= 0.5
    assert np.all(np.diff(r.error[:k + 1]) <= 1e-12)


@given(st.integers(2, 5000), st.floats(0.001, 0.49), st.sampled_from(["normal", "t"]),
       mu_values)
def test_whole_data_when_the_batch_is_the_population(N, eps, threshold, mus):
    r = sequential_error(np.array(mus), m=N, epsilon=eps, N=N, threshold=threshold)
    np.testing.assert_array_equal(r.data_fraction, 1.0)
    np.testing.assert_array_equal(r.error, 0.0)
