"""The multivariate-t and defensive-mixture independence proposals.

Their compiled moves give the bits of the Python ``propose`` (the draws, the move and the log q
ratio), whole chains included; their MH chains leave a closed-form posterior invariant; the
proposals are deliberately narrower than the posterior and off-center, the case in which a
Gaussian independence proposal's weights are unbounded and its chain sticks, so a wrong log q
ratio or a wrong draw would show as a bias. Tolerances: 5 Monte Carlo standard errors from
ArviZ's ESS-based MCSE, seeds fixed.
"""

import warnings

import numpy as np
import pytest

from samplers import (AustereTest, ControlVariates, ExactTest, GaussianMean, GaussianPrior,
                      LinearRegression, MixtureIndependence, StudentTIndependence, sample)
from samplers.proposals import (mixture_log_density, mixture_propose, student_t_log_density,
                                student_t_propose)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

PROPOSALS = {
    "t": lambda mean, cov: StudentTIndependence(mean, cov, df=4.0),
    "mixture": lambda mean, cov: MixtureIndependence(mean, cov, weight=0.2, inflation=3.0),
}
LOG_DENSITY = {"t": student_t_log_density, "mixture": mixture_log_density}
PROPOSE = {"t": student_t_propose, "mixture": mixture_propose}


def _random_proposal(kind, d, rng):
    A = rng.normal(size=(d, d))
    return PROPOSALS[kind](rng.normal(size=d), A @ A.T + d * np.eye(d))


@pytest.mark.parametrize("kind", sorted(PROPOSALS))
def test_compiled_move_is_the_python_propose_bit_for_bit(kind):
    rng = np.random.default_rng(30)
    for d in (1, 3, 11):
        q = _random_proposal(kind, d, rng)
        params = q._kernel()
        for seed in range(30):
            x = q.mean + rng.normal(size=d) * 3.0
            assert LOG_DENSITY[kind](x, *params[:1], *params[2:]) == q.log_density(x)
            new, lq, _, n = q.propose(np.random.default_rng(seed), None, None, x, None)
            out = np.empty(d)
            lq_c, n_c = PROPOSE[kind](None, np.random.default_rng(seed), None, x, out, params, 0)
            assert np.array_equal(out, new) and lq_c == lq and n_c == n == 0


@pytest.mark.parametrize("kind", sorted(PROPOSALS))
def test_compiled_chain_equals_python_chain(kind):
    rng = np.random.default_rng(31)
    X = np.column_stack([np.ones(3000), rng.normal(size=(3000, 2))])
    y = X @ [0.5, -1.0, 2.0] + rng.normal(size=3000)
    cv = ControlVariates(LinearRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    q = PROPOSALS[kind](cv.center.theta, 0.8 * cv.laplace_covariance())
    for test in (ExactTest(), AustereTest(m=40, epsilon=0.05)):
        python = sample(cv, test, q, cv.center.theta, 300, rng=32, compiled=False)
        compiled = sample(cv, test, q, cv.center.theta, 300, rng=32, compiled=True)
        assert np.array_equal(python.samples, compiled.samples)
        for name in python.stats:
            assert np.array_equal(python.stats[name], compiled.stats[name], equal_nan=True)
        assert 0.3 < compiled.acceptance_rate < 0.99


def _linear_posterior():
    """A 2-parameter linear regression with known noise and a Gaussian prior: posterior
    N(V X'y / s^2, V), V = (X'X / s^2 + I / tau^2)^-1."""
    rng = np.random.default_rng(33)
    X = np.column_stack([np.ones(50), rng.normal(size=50)])
    y = X @ [0.3, -0.8] + 2.0 * rng.normal(size=50)
    V = np.linalg.inv(X.T @ X / 4.0 + np.eye(2) / 9.0)
    model = LinearRegression(X, y, noise_sd=2.0, prior=GaussianPrior(0.0, 3.0))
    return model, V @ X.T @ y / 4.0, V


@pytest.mark.parametrize("kind", sorted(PROPOSALS))
def test_exact_mh_chain_matches_the_closed_form(kind):
    model, mean, V = _linear_posterior()
    sd = np.sqrt(np.diag(V))
    # off by half a posterior sd and 0.6 times as wide: the Gaussian's weights would be
    # unbounded here; the t's and the mixture's wide component's are not
    q = PROPOSALS[kind](mean + 0.5 * sd, 0.36 * V)
    chain = sample(model, ExactTest(), q, mean, 20_000, rng=34)
    idata = chain.to_arviz()
    mcse_mean = az.mcse(idata, method="mean").theta.values
    mcse_sd = az.mcse(idata, method="sd").theta.values
    assert 0.2 < chain.acceptance_rate < 0.95
    np.testing.assert_array_less(np.abs(chain.samples.mean(axis=0) - mean), 5 * mcse_mean)
    np.testing.assert_array_less(np.abs(chain.samples.std(axis=0) - sd), 5 * mcse_sd)
    # the 5% and 95% quantiles, the tails a narrow proposal would miss, within 5 MCSE
    for j in range(2):
        for p in (0.05, 0.95):
            ref = mean[j] + sd[j] * {0.05: -1.6448536269514722, 0.95: 1.6448536269514722}[p]
            se = float(az.mcse(chain.samples[:, j][None, :], method="quantile", prob=p))
            assert abs(np.quantile(chain.samples[:, j], p) - ref) < 5 * se, (j, p)


def test_equal_seeds_identical_inputs_untouched_and_bad_input():
    model = GaussianMean(np.random.default_rng(35).normal(0.5, 1.0, 500),
                         prior=GaussianPrior(0.0, 10.0))
    mean, cov = np.array([0.5]), np.array([[0.002]])
    for kind in PROPOSALS:
        q = PROPOSALS[kind](mean, cov)
        a = sample(model, ExactTest(), q, [0.5], 200, rng=4).samples
        b = sample(model, ExactTest(), q, [0.5], 200, rng=4).samples
        np.testing.assert_array_equal(a, b)
    assert mean[0] == 0.5 and cov[0, 0] == 0.002
    with pytest.raises(ValueError, match=r"df must be in \(0, inf\), got -1"):
        StudentTIndependence(mean, cov, df=-1.0)
    with pytest.raises(ValueError, match=r"weight must be in \(0, 1\), got 1.5"):
        MixtureIndependence(mean, cov, weight=1.5)
    with pytest.raises(ValueError, match="inflation must be > 1, got 0.5"):
        MixtureIndependence(mean, cov, inflation=0.5)
    with pytest.raises(TypeError, match="ControlVariates or a LaplaceApproximation"):
        StudentTIndependence.from_laplace(np.eye(1))
    cv = ControlVariates(model)
    t = StudentTIndependence.from_laplace(cv, df=6.0, scale=2.0)
    np.testing.assert_allclose(t.covariance, 4.0 * cv.laplace_covariance())
    assert t.df == 6.0 and np.array_equal(t.mean, cv.center.theta)
    m = MixtureIndependence.from_laplace(cv, weight=0.1, inflation=2.5)
    assert (m.weight, m.inflation) == (0.1, 2.5)


@pytest.mark.parametrize("kind", sorted(PROPOSALS))
def test_reads_no_rows_so_a_store_chain_keeps_its_row_feed(kind):
    """An independence proposal reads no rows: a chain on a store keeps the row feed (a
    subclass that overrides propose is not vouched for)."""
    q = _random_proposal(kind, 3, np.random.default_rng(1))
    assert q.rows_from_order(None)

    class Custom(type(q)):
        def propose(self, *args):
            return super().propose(*args)

    assert not Custom(q.mean, q.covariance).rows_from_order(None)
