"""The stationary-distribution bounds checked on a discretised one-parameter posterior."""

import matplotlib
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from samplers import AustereTest, ConfidenceTest, Gaussian, GaussianMean
from validation import FixedBatchBarker, GridChain, stationary_check
from validation._grid import stationary_distribution

matplotlib.use("Agg")

N = 1000


def grid_around_posterior(model, points=17, width=4.0):
    mean, sd = model.posterior()
    return GridChain(model, mean + np.linspace(-width, width, points) * sd, proposal_sd=sd)


@pytest.fixture(scope="module")
def gaussian_grid():
    return grid_around_posterior(GaussianMean(np.random.default_rng(30).normal(size=N)))


@pytest.fixture(scope="module")
def two_point_grid():
    """Data +-1: two-point l_i, on which Hoeffding's bound is nearly tight and the
    confidence test errs measurably."""
    return grid_around_posterior(GaussianMean(np.random.default_rng(31).choice([-1.0, 1.0], N)))


@pytest.fixture(scope="module")
def tempered_grid():
    """Temperature 100: Var(Delta*) = N / (100 b) < 1 at the batch sizes below, as the
    Barker test needs (Seita et al. 2017, section 1)."""
    return grid_around_posterior(GaussianMean(np.random.default_rng(30).normal(size=N),
                                              temperature=100.0))


def test_exact_kernels_leave_the_posterior_invariant(gaussian_grid):
    g = gaussian_grid
    mean, sd = g.model.posterior()
    closed_form = stats.norm.pdf(g.grid, mean, sd)
    np.testing.assert_allclose(g.target, closed_form / closed_form.sum(), rtol=1e-9)
    for rule in ("metropolis", "barker"):
        P = g.exact_kernel(rule)
        assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0)
        flow = g.target[:, None] * P
        np.testing.assert_allclose(flow, flow.T, atol=1e-15)        # detailed balance
        np.testing.assert_allclose(stationary_distribution(P), g.target, rtol=1e-9)


def test_proposal_is_symmetric_and_local(gaussian_grid):
    g = gaussian_grid
    Q = np.zeros((g.grid.size,) * 2)
    Q[g.pair_from, g.pair_to] = g.proposal
    np.testing.assert_array_equal(Q, Q.T)
    assert np.all(np.diag(Q) == 0) and np.all(Q.sum(axis=1) <= 1 + 1e-12)
    reach = np.abs(g.pair_from - g.pair_to).max()
    h = (g.grid[-1] - g.grid[0]) / (g.grid.size - 1)
    assert reach == round(4.0 * g.proposal_sd / h) == 8


@given(st.lists(st.floats(0.01, 1.0), min_size=3, max_size=6))
def test_stationary_distribution_of_a_reversible_chain(weights):
    """A birth-death chain is reversible for pi_i proportional to the product of its
    up/down ratios; the solver must find it."""
    K = len(weights)
    up = np.array(weights) / 2
    P = np.zeros((K, K))
    for i in range(K - 1):
        P[i, i + 1] = up[i]
        P[i + 1, i] = 0.25
    P[np.arange(K), np.arange(K)] = 1 - P.sum(axis=1)
    pi = np.cumprod(np.concatenate([[1.0], up[:-1] / 0.25]))
    np.testing.assert_allclose(stationary_distribution(P), pi / pi.sum(), rtol=1e-9)


def check_and_shrink(results):
    """Measured TV below Theorem 1's bound for each setting; both shrink with the knob."""
    for r in results:
        assert r.holds, str(r)
        assert r.kernel_distance <= r.delta_max + 1e-15
        assert r.bound <= r.bound_delta_max + 1e-15
        assert r.eta > 0.999 and r.eta_steps < 0.5   # one local step barely contracts
    loose, tight = results
    assert tight.tv < loose.tv / 3 and tight.bound < loose.bound / 3


def test_sequential_test_by_dynamic_programme(gaussian_grid):
    res = [stationary_check(gaussian_grid, AustereTest(m=50, epsilon=eps))
           for eps in (0.05, 0.005)]
    check_and_shrink(res)
    for r in res:                                   # |Delta| <= E(0, m, eps) for every pair
        assert r.delta_max <= r.delta_prior


def test_sequential_test_simulated_agrees_with_the_dp_on_gaussian_l(gaussian_grid):
    """Gaussian data give Gaussian l_i for this model: the real test (simulated, u
    integrated out) and the dynamic programme's model of it give nearly the same stationary
    law: the DP models the test with Student-t thresholds to within a few percent at m = 50,
    and 300 paths per pair add Monte Carlo noise of similar size."""
    test = AustereTest(m=50, epsilon=0.05)
    dp = stationary_check(gaussian_grid, test)
    sim = stationary_check(gaussian_grid, test, method="simulation", n_tests=300, rng=1)
    assert sim.n_tests == 300 and dp.n_tests is None
    assert abs(sim.tv - dp.tv) < 0.1 * dp.tv
    assert 0.5 * float(np.abs(sim.approx - dp.approx).sum()) < 0.15 * dp.tv


def test_confidence_test(two_point_grid):
    res = [stationary_check(two_point_grid, ConfidenceTest(delta=d, bound="hoeffding",
                                                           batch_size=10), n_tests=300, rng=2)
           for d in (0.5, 0.05)]
    check_and_shrink(res)
    for r, d in zip(res, (0.5, 0.05)):              # Lemma 3.1: |alpha - alpha~| <= delta
        assert r.delta_prior == d and r.delta_max <= d


def test_barker_test(tempered_grid):
    res = [stationary_check(tempered_grid, FixedBatchBarker(b), n_tests=500, rng=3)
           for b in (20, 80)]
    check_and_shrink(res)
    assert all(r.bound_prior >= 1.0 for r in res)  # Novak's bound is vacuous at these b


def test_report_and_plot(gaussian_grid):
    res = stationary_check(gaussian_grid, AustereTest(m=50, epsilon=0.01))
    text = str(res)
    assert "Theorem 1 on k =" in text and "holds" in text and "Proposition 3.2" in text
    fig = res.plot()
    assert len(fig.axes) == 2
    matplotlib.pyplot.close(fig)


def test_argument_checks(gaussian_grid):
    model = gaussian_grid.model
    with pytest.raises(ValueError, match="at least 3 points"):
        GridChain(model, [0.0, 0.1], 0.1)
    with pytest.raises(ValueError, match="equally spaced"):
        GridChain(model, [0.0, 0.1, 0.3], 0.1)
    with pytest.raises(ValueError, match="equally spaced"):
        GridChain(model, [0.2, 0.1, 0.0], 0.1)
    with pytest.raises(ValueError, match="proposal_sd must be"):
        GridChain(model, [0.0, 0.1, 0.2], 0.0)
    with pytest.raises(ValueError, match="2 element"):
        GridChain(Gaussian(np.arange(5.0)), [0.0, 0.1, 0.2], 0.1)
    with pytest.raises(TypeError, match="GridChain"):
        stationary_check(model, AustereTest())
    with pytest.raises(TypeError, match="AustereTest, ConfidenceTest or FixedBatchBarker"):
        stationary_check(gaussian_grid, "barker")
    with pytest.raises(ValueError, match="method must be 'dp' or 'simulation'"):
        stationary_check(gaussian_grid, AustereTest(m=50), method="exact")
    with pytest.raises(ValueError, match="method must be 'simulation'"):
        stationary_check(gaussian_grid, ConfidenceTest(), method="dp")
    with pytest.raises(ValueError, match="test.m must be <= N = 1000"):
        stationary_check(gaussian_grid, AustereTest(m=2000))
    with pytest.raises(ValueError, match="batch_size must be >= 3"):
        FixedBatchBarker(2)
    with pytest.raises(TypeError, match="CorrectionTable or None"):
        FixedBatchBarker(50, table=np.zeros(3))
