"""Issue 27, items 5 and 9: ``validation.fit`` runs on the built-in models whose proxy is
exact, and the remedy an infeasible-design error names works when followed."""

import warnings

import numpy as np
import pytest

import design
import validation
from design import TrialChain
from design._edgeworth import edgeworth_pair_errors
from samplers import GaussianMean, LinearRegression


# --- item 5: an exact order-2 proxy leaves residuals of rounding size, not a broken bound ----


@pytest.mark.parametrize("make", [
    lambda rng: GaussianMean(rng.normal(1.0, 2.0, 3_000)),
    lambda rng: LinearRegression(rng.normal(size=(3_000, 2)), rng.normal(size=3_000)),
], ids=["GaussianMean", "LinearRegression"])
def test_fit_runs_on_models_whose_proxy_is_exact(make):
    model = make(np.random.default_rng(0))
    idata = validation.fit(model, draws=200, n_trial=10, rng=0)
    attrs = idata.attrs
    assert idata.posterior["theta"].shape[:2] == (2, 200)   # fit runs two chains by default
    assert attrs["rows_realised"] <= 0.05 * model.N   # about one minibatch per step


def test_a_bound_broken_beyond_rounding_is_still_refused():
    class Unit:
        def __init__(self, x):
            self.x, self.N = x, len(x)

        def loglik(self, theta, idx):
            return -0.5 * (self.x[idx] - theta[0]) ** 2

        def logprior(self, theta):
            return 0.0

        def loglik_ratio_range(self, theta, theta_new):
            return 0.0, 1e-9            # the l_i reach ~0.05: a wrong claim

    with pytest.raises(ValueError, match="loglik_ratio_range is not a bound for pair 0"):
        TrialChain.from_model(Unit(np.random.default_rng(1).normal(size=500)), [[0.0]], [[0.1]])


# --- item 9: "add it to the grid" works -----------------------------------------------------

N_SKEW = 5_000


def skewed_trial(n=10, skewness=3.0, kurtosis=20.0):
    """Trial pairs whose l_i are skewed (the Gaussian law is optimistic at small m)."""
    rng = np.random.default_rng(0)
    sigma = np.full(n, 1e-3)
    return TrialChain(mu=3 * rng.normal(size=n) * sigma / np.sqrt(N_SKEW), sigma=sigma,
                      c0=np.zeros(n), N=N_SKEW, skewness=np.full(n, skewness),
                      kurtosis=np.full(n, kurtosis), abs_z1=np.full(n, 0.7),
                      abs_z3=np.full(n, 3.0), max_abs=np.full(n, 0.05))


def test_edgeworth_design_follows_its_own_advice():
    trial, tol = skewed_trial(), 0.01
    grid, m_grid = [0.05, 0.1, 0.15, 0.2], [50, 100, 150]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # cells outside the expansion
        with pytest.raises(design.InfeasibleDesignError, match="add it to the grid") as info:
            design.optimize(trial, tol, law="edgeworth", epsilon_grid=grid, m_grid=m_grid)
        err = info.value
        d = design.optimize(trial, tol, law="edgeworth", epsilon_grid=grid + [err.epsilon],
                            m_grid=m_grid)
        # the default grid holds feasible cells below the capped search's first 12: found now
        d_default = design.optimize(trial, tol, law="edgeworth")
    assert (d.m, d.epsilon) == (err.m, err.epsilon) and d.error <= tol
    assert d_default.error <= tol
    delta, _ = edgeworth_pair_errors(
        trial, d_default.m, d_default.epsilon,
        x_edge=design._optimize.mu_table_edge(N_SKEW, d_default.m, d_default.epsilon, "normal"))
    assert np.mean(np.abs(delta)) == pytest.approx(d_default.error, rel=1e-12)


def test_gaussian_design_follows_its_own_advice():
    trial, tol = skewed_trial(), 0.002
    grid = [0.1, 0.2]
    with pytest.raises(design.InfeasibleDesignError, match="add it to the grid") as info:
        design.optimize(trial, tol, epsilon_grid=grid)
    err = info.value
    d = design.optimize(trial, tol, epsilon_grid=grid + [err.epsilon],
                        m_grid=sorted({*design._optimize.DEFAULT_M_GRID, err.m}))
    assert d.error <= tol and d.data_fraction <= err.data_fraction


# --- every other message in design/ and validation/ that names a remedy -----------------------


def test_clt_check_n_sim_advice_works():
    import re

    l = np.random.default_rng(3).normal(size=(2, 2_000))
    with pytest.raises(ValueError, match=r"use n_sim >= \d+") as info:
        validation.clt_check(l, batch_size=50, n_sim=100, tolerance=0.05, search=False, rng=0)
    need = int(re.search(r"n_sim >= (\d+)", str(info.value)).group(1))
    result = validation.clt_check(l, batch_size=50, n_sim=need, tolerance=0.05, search=False,
                                  rng=0)
    assert result is not None


def test_edgeworth_law_advice_works():
    bare = skewed_trial()
    bare = TrialChain(mu=bare.mu, sigma=bare.sigma, c0=bare.c0, N=bare.N)
    with pytest.raises(ValueError, match="pass skewness= and kurtosis= to TrialChain"):
        design.optimize(bare, 0.01, law="edgeworth")
    shaped = TrialChain(mu=bare.mu, sigma=bare.sigma, c0=bare.c0, N=bare.N,
                        skewness=np.full(bare.n_pairs, 0.1), kurtosis=np.full(bare.n_pairs, 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert design.optimize(shaped, 0.01, law="edgeworth").error <= 0.01
