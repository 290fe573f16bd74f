"""validation.fit: the control-variate workflow in one call (issue 12, part 4).

The reference posterior is independent of every sampler: the exact log posterior of a small
two-parameter logistic regression integrated on a grid (quadrature).
"""

import warnings

import numpy as np
import pytest

from samplers import ControlVariates, GaussianPrior, LogisticRegression, import_arviz
from validation import fit

N = 3000


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(12)
    X = np.column_stack([rng.normal(size=N), np.ones(N)])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


def grid_posterior(model, center, sd, half=8.0, n=161):
    """Posterior mean and sd by quadrature on an n x n grid of +-half sds about center."""
    a = center[0] + sd[0] * np.linspace(-half, half, n)
    b = center[1] + sd[1] * np.linspace(-half, half, n)
    A, B = np.meshgrid(a, b, indexing="ij")
    pts = np.column_stack([A.ravel(), B.ravel()])
    s = 2 * model.y - 1
    logp = np.array([np.sum(-np.logaddexp(0.0, -s * (model.X @ p))) for p in pts])
    logp += -0.5 * np.sum(pts ** 2, axis=1) / 100.0
    w = np.exp(logp - logp.max())
    w /= w.sum()
    mean = w @ pts
    return mean, np.sqrt(w @ (pts - mean) ** 2)


@pytest.fixture(scope="module")
def run(model):
    return fit(model, draws=4000, n_trial=10, on_clt_failure="warn", rng=3)


def test_attrs_describe_the_design_and_data_use(run, model):
    attrs = run.posterior.attrs
    assert run.posterior.theta.shape == (1, 4000, 2)
    for key in ("design", "test", "settings", "rows_predicted", "rows_realised",
                "rows_predicted_chain", "error_predicted", "error_predicted_chain",
                "clt_passed", "clt_max_ks", "explanation", "center", "tolerance"):
        assert key in attrs, key
    assert attrs["test"] == "austere"
    assert attrs["error_predicted"] <= attrs["tolerance"]
    assert 10 <= attrs["rows_realised"] < 0.05 * model.N     # about one minibatch per step
    # predicted rows per step (trial pairs) against the chain's mean, within 20%
    assert abs(attrs["rows_predicted"] / attrs["rows_realised"] - 1) < 0.2
    for step in range(1, 8):
        assert f"{step}. " in attrs["explanation"]


def test_posterior_matches_quadrature_within_mcse(run, model):
    cv = ControlVariates(model)
    sd_lap = np.sqrt(np.diag(cv.laplace_covariance()))
    ref_mean, ref_sd = grid_posterior(model, cv.center.theta, sd_lap)
    samples = run.posterior.theta.values[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ess = import_arviz().ess(run).theta.values
    assert ess.min() > 300
    mcse = ref_sd / np.sqrt(ess)
    np.testing.assert_array_less(np.abs(samples.mean(axis=0) - ref_mean), 5 * mcse)
    # sd: relative MCSE about 1 / sqrt(2 ESS)
    np.testing.assert_array_less(np.abs(samples.std(axis=0) / ref_sd - 1), 5 / np.sqrt(2 * ess))


def test_equal_seeds_give_identical_chains(model):
    a = fit(model, draws=200, test="barker", n_trial=10, on_clt_failure="warn", rng=7)
    b = fit(model, draws=200, test="barker", n_trial=10, on_clt_failure="warn", rng=7)
    np.testing.assert_array_equal(a.posterior.theta.values, b.posterior.theta.values)
    assert a.posterior.attrs["explanation"] == b.posterior.attrs["explanation"]


def test_failed_clt_check_redesigns_with_a_larger_batch(model):
    idata = fit(model, draws=100, test="barker", n_trial=10, rng=5)
    attrs = idata.posterior.attrs
    assert attrs["clt_passed"] == "False"          # skewed residuals at b = 10
    assert "FAILED; it passes from b =" in attrs["explanation"]
    assert attrs["rows_realised"] > 10


def test_confidence_needs_no_clt_check(model):
    idata = fit(model, draws=100, test="confidence", n_trial=10, rng=5)
    assert idata.posterior.attrs["clt_passed"] == "not needed"


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(tolerance=1.2), ValueError, "tolerance"),
    (dict(draws=0), ValueError, "draws"),
    (dict(test="exact"), ValueError, "test must be one of"),
    (dict(n_trial=3), ValueError, "n_trial"),
    (dict(order=3), ValueError, "order must be 1 or 2"),
    (dict(on_clt_failure="ignore"), ValueError, "on_clt_failure"),
    (dict(center=[np.inf, 0.0]), ValueError, "center"),
])
def test_bad_input_is_named(model, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fit(model, **{"draws": 10, **kwargs})


def test_a_model_without_loglik_is_refused():
    class NoLoglik:
        N = 100

        def logprior(self, theta):
            return 0.0

    with pytest.raises(TypeError, match="loglik"):
        fit(NoLoglik(), draws=10)


def test_a_wrapper_with_center_is_refused(model):
    with pytest.raises(ValueError, match="already one"):
        fit(ControlVariates(model), draws=10, center=[0.0, 0.0])


def test_a_far_center_is_reported_not_refused(model):
    cv = ControlVariates(model)
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    idata = fit(model, draws=50, test="confidence", n_trial=10, center=cv.center.theta + 3 * sd,
                rng=2)
    assert "warning: the center is more than one posterior sd from the mode" in \
        idata.posterior.attrs["explanation"]
