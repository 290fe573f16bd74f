"""acceptance_error: Eq. 6 against a direct integration over u, the interpolation table,
signs and bounds."""

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from design import TrialChain, acceptance_error, sequential_error
from design._acceptance_error import PairIntegrals, mu_table_edge
from design._sequential import run_dp

N = 10_000
# Pa = 1; Pa = e^-1 with a wide u-weight; c0 != 0 with a tiny sigma (kappa ~ 0.2);
# Pa ~ 2e-9 (mu_std(1) = -6) with a large sigma
PAIRS = TrialChain(mu=[2e-4, -1e-4, 5e-5, -3e-3], sigma=[0.05, 0.05, 0.002, 0.1],
                   c0=[0.0, 0.0, 1e-4, -1e-3], N=N)


def delta_by_u(mu, sigma, c0, m, eps, n_nodes=400):
    """Delta and data use by Gauss-Legendre directly in u, split at Pa, with the nodes
    clustered towards the left end of each piece (u -> 0 is mu_std -> infinity)."""
    pa = min(1.0, np.exp(N * (mu - c0)))
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    s = (t + 1) / 2
    delta = data = 0.0
    for a, b, sign in [(0.0, pa, -1.0), (pa, 1.0, +1.0)]:
        if b <= a:
            continue
        u = a + (b - a) * s**4
        du = (b - a) * 2 * s**3 * w
        mu_std = (mu - (np.log(u) / N + c0)) * np.sqrt(N - 1) / sigma
        r = sequential_error(mu_std, m=m, epsilon=eps, N=N)
        delta += sign * np.sum(r.error * du)
        data += np.sum(r.data_fraction * du)
    return delta, data


@pytest.mark.parametrize("m, eps", [(500, 0.05), (100, 0.01)])
def test_matches_direct_integration_over_u(m, eps):
    r = acceptance_error(PAIRS, m=m, epsilon=eps)
    for p in range(PAIRS.n_pairs):
        d, data = delta_by_u(PAIRS.mu[p], PAIRS.sigma[p], PAIRS.c0[p], m, eps)
        assert r.delta[p] == pytest.approx(d, abs=1e-7)
        assert r.data_fraction[p] == pytest.approx(data, abs=1e-7)
    assert r.mean_abs_delta == pytest.approx(np.mean(np.abs(r.delta)))


def test_signs_and_bound():
    """Pa = 1: the test can only reject wrongly (Delta <= 0); Pa ~ 0: only accept wrongly.
    Errors partly cancel, so |Delta| <= E(0)."""
    r = acceptance_error(PAIRS, m=100, epsilon=0.05)
    assert r.accept_prob[0] == 1.0 and r.delta[0] < 0
    assert r.accept_prob[3] < 1e-8 and r.delta[3] > 0
    e0 = sequential_error(0.0, m=100, epsilon=0.05, N=N).error
    assert np.all(np.abs(r.delta) <= e0)
    assert np.all((r.data_fraction >= 100 / N) & (r.data_fraction <= 1))


def test_table_interpolation_is_accurate():
    """E and pi-bar between the knots of the mu_std table, against direct evaluation."""
    m, eps, n = 50, 0.01, 200_000
    integrals = PairIntegrals(TrialChain(mu=[0.0], sigma=[1.0], c0=[0.0], N=n),
                              mu_table_edge(n, m, eps, "normal"))
    table = run_dp(integrals.knots, m, eps, n, "normal")
    rng = np.random.default_rng(3)
    mu = np.exp(rng.uniform(np.log(1e-4), np.log(integrals.mu_max), 300))
    direct = run_dp(mu, m, eps, n, "normal")
    t = np.arcsinh(mu * np.sqrt(n - 1))
    for key in ("error", "data_fraction"):
        interp = CubicSpline(integrals.knots_t, table[key])(t)
        assert np.max(np.abs(interp - direct[key])) < 2e-7, key


def test_table_edge_is_beyond_every_decision():
    """Beyond the table, every pair stops at stage 1 on the right side."""
    m, eps = 100, 0.001
    edge = mu_table_edge(N, m, eps, "t")
    r = sequential_error(edge, m=m, epsilon=eps, N=N, threshold="t")
    assert r.error < 1e-20
    assert r.data_fraction == pytest.approx(m / N, rel=1e-12)


def test_exact_test_has_no_error():
    r = acceptance_error(PAIRS, m=N, epsilon=0.2)
    np.testing.assert_allclose(r.delta, 0.0, atol=1e-15)
    np.testing.assert_allclose(r.data_fraction, 1.0, rtol=1e-12)


def test_bad_input():
    with pytest.raises(TypeError, match="trial_chain must be a TrialChain, got dict"):
        acceptance_error({"mu": [0.0]}, m=100, epsilon=0.1)
    with pytest.raises(ValueError, match=r"m must be in \[2, 10000\], got 20000"):
        acceptance_error(PAIRS, m=20_000, epsilon=0.1)
    with pytest.raises(ValueError, match="epsilon must be in"):
        acceptance_error(PAIRS, m=100, epsilon=-0.1)


def test_basis_integrals_equal_the_basis_evaluated_at_every_node():
    """The per-interval power sums give the same integrals as w @ basis(t) (NumPy/SciPy
    reference), nodes on knots, at both ends and in empty rows included."""
    from design._acceptance_error import basis_integrals

    rng = np.random.default_rng(12)
    knots = np.linspace(0.0, 3.0, 13)
    basis = CubicSpline(knots, np.eye(knots.size))
    t = np.concatenate([rng.uniform(0.0, 3.0, 500), knots])
    rows = rng.integers(0, 4, t.size)
    rows[rows == 2] = 3                                   # row 2 has no nodes
    w1, w2 = rng.normal(size=t.size), rng.uniform(size=t.size)
    A1, A2 = basis_integrals(basis, rows, t, (w1, w2), 4)
    B = basis(t)
    for r in range(4):
        sel = rows == r
        np.testing.assert_allclose(A1[r], w1[sel] @ B[sel], rtol=0, atol=1e-13)
        np.testing.assert_allclose(A2[r], w2[sel] @ B[sel], rtol=0, atol=1e-13)
    assert not A1[2].any()
