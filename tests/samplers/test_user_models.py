"""``validation.fit`` on a user's model that follows only the protocol (issue 24, part 1):
``N``, ``dim``, ``loglik``, ``logprior`` and nothing else; the derivatives come from finite
differences, the trial chain records no range (only the confidence design needs one), and
the posterior is right against quadrature on a grid."""

import numpy as np
import pytest
from scipy.special import gammaln

import design
from samplers import ControlVariates, GaussianPrior
from validation import fit

N_ROWS = 2000
TRUE = np.array([0.4, -0.3])


def poisson_data(N=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=N)])
    y = rng.poisson(np.exp(X @ TRUE)).astype(float)
    return X, y


class PlainPoisson:
    """A Poisson regression written to the protocol only: no derivatives, no bounds."""

    def __init__(self, X, y, sd=10.0):
        self.X, self.y, self.sd = X, y, sd
        self.N, self.dim = X.shape

    def loglik(self, theta, idx):
        eta = self.X[idx] @ theta
        return self.y[idx] * eta - np.exp(eta) - gammaln(self.y[idx] + 1.0)

    def logprior(self, theta):
        return -0.5 * float(np.sum(np.asarray(theta) ** 2)) / self.sd ** 2


def grid_posterior(X, y, sd=10.0, n=161):
    """Posterior mean and sd of each coordinate of a two-parameter Poisson regression by
    quadrature on a grid of +-7 Laplace sds about the mode (the independent reference)."""
    theta = np.zeros(2)
    for _ in range(50):                                   # Newton for the mode
        mu = np.exp(X @ theta)
        g = X.T @ (y - mu) - theta / sd ** 2
        H = -(X * mu[:, None]).T @ X - np.eye(2) / sd ** 2
        theta = theta - np.linalg.solve(H, g)
    scale = np.sqrt(np.diag(np.linalg.inv(-H)))
    axes = [theta[j] + scale[j] * np.linspace(-7, 7, n) for j in range(2)]
    A, B = np.meshgrid(*axes, indexing="ij")
    pts = np.column_stack([A.ravel(), B.ravel()])
    eta = pts @ X.T
    logp = (eta * y - np.exp(eta)).sum(axis=1) - 0.5 * (pts ** 2).sum(axis=1) / sd ** 2
    w = np.exp(logp - logp.max())
    w /= w.sum()
    mean = w @ pts
    sdev = np.sqrt(w @ (pts - mean) ** 2)
    return mean, sdev


@pytest.fixture(scope="module")
def data():
    return poisson_data()


@pytest.fixture(scope="module")
def reference(data):
    return grid_posterior(*data)


def check_posterior(idata, reference, n_se=5.0):
    """Chain mean and sd against the reference, tolerance ``n_se`` Monte Carlo standard
    errors (ArviZ's ESS-based MCSE of the mean and of the sd)."""
    import arviz as az

    theta = np.asarray(idata.posterior.theta).reshape(-1, 2)
    mcse_mean = np.asarray(az.mcse(idata, method="mean")["theta"]).ravel()
    mcse_sd = np.asarray(az.mcse(idata, method="sd")["theta"]).ravel()
    mean, sd = reference
    assert np.all(np.abs(theta.mean(axis=0) - mean) <= n_se * mcse_mean), (
        theta.mean(axis=0), mean, mcse_mean)
    assert np.all(np.abs(theta.std(axis=0) - sd) <= n_se * mcse_sd), (
        theta.std(axis=0), sd, mcse_sd)


def test_trial_chain_of_a_user_model_has_no_range_and_confidence_design_says_so(data):
    cv = ControlVariates(PlainPoisson(*data))
    rng = np.random.default_rng(0)
    thetas = cv.center.theta + 0.02 * rng.standard_normal((10, 2))
    news = thetas + 0.02 * rng.standard_normal((10, 2))
    trial = design.TrialChain.from_model(cv, thetas, news, progress=False)
    assert trial.range_bound is None and trial.skewness is not None
    assert design.optimize(trial, 0.05).test == "austere"     # the Austere design runs
    with pytest.raises(ValueError, match="range_bound"):
        design.optimize(trial, 0.05, test="confidence")


def test_fit_on_a_plain_protocol_model_matches_quadrature(data, reference):
    idata = fit(PlainPoisson(*data), tolerance=0.05, draws=2000, n_trial=10, rng=3)
    assert idata.posterior.attrs["test"] == "austere"
    assert idata.posterior.attrs["rows_realised"] < 0.2 * N_ROWS
    check_posterior(idata, reference)


def test_fit_says_what_is_missing_before_reading_the_rows(data):
    class NoDim(PlainPoisson):
        def __init__(self, X, y):
            super().__init__(X, y)
            del self.dim

    class Big(PlainPoisson):
        N = 2 * 10**6                           # above the finite-difference limit

        def __init__(self, X, y):
            super().__init__(X, y)
            self.N = 2 * 10**6

        def loglik(self, theta, idx):           # any O(N) pass would fail on these rows
            raise AssertionError("a row was read")

    with pytest.raises(TypeError, match="has no dim: give the model an integer attribute dim"):
        fit(NoDim(*data))
    with pytest.raises(TypeError, match="needs model.grad_loglik and model.hess_loglik"):
        fit(Big(*data))
