"""from_numpyro (issue 24, part 5): a NumPyro logistic regression equal to the compiled
LogisticRegression row by row, a constrained site's prior with its log-Jacobian and its
names, and the model shapes the bridge refuses."""

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")

import jax.numpy as jnp  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

from samplers import GaussianPrior, LogisticRegression  # noqa: E402
from samplers.models import JaxModel, from_numpyro  # noqa: E402

N = 2000


def logistic(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)


def regression(x, y):
    a = numpyro.sample("a", dist.Normal(0.0, 3.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    with numpyro.plate("rows", len(y)):
        numpyro.sample("y", dist.Normal(a * x, sigma), obs=y)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, 2))])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.5]))).astype(float)
    return X, y


def test_logistic_equals_the_builtin(data):
    X, y = data
    model = from_numpyro(logistic, X, y=y)
    ref = LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0))
    assert isinstance(model, JaxModel)
    assert (model.N, model.dim, model.plate, model.observed) == (N, 3, "data", ["y"])
    assert model.names == ["beta[0]", "beta[1]", "beta[2]"]
    theta, theta_new = np.array([0.1, 0.9, -0.4]), np.array([0.15, 0.95, -0.45])
    idx = np.random.default_rng(1).integers(0, N, 100)
    np.testing.assert_allclose(model.loglik(theta, idx), ref.loglik(theta, idx),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.loglik_ratio(theta, theta_new, idx),
                               ref.loglik_ratio(theta, theta_new, idx), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.grad_loglik(theta, idx), ref.grad_loglik(theta, idx),
                               rtol=0, atol=1e-12)
    # the prior up to its constant, and its gradient
    assert model.logprior(theta_new) - model.logprior(theta) == pytest.approx(
        ref.logprior(theta_new) - ref.logprior(theta), rel=1e-12)
    np.testing.assert_allclose(model.grad_logprior(theta), ref.grad_logprior(theta), rtol=1e-12)
    np.testing.assert_allclose(model.constrain(theta)["beta"], theta)


def test_a_plate_of_fixed_size_counts_each_row_once(data):
    X, y = data

    def fixed(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([3]))
        with numpyro.plate("data", N):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    model = from_numpyro(fixed, X, y)
    ref = LogisticRegression(X, y)
    theta, idx = np.array([0.1, 0.9, -0.4]), np.arange(0, N, 13)
    np.testing.assert_allclose(model.loglik(theta, idx), ref.loglik(theta, idx),
                               rtol=0, atol=1e-12)


def test_positive_site_is_sampled_on_the_log_scale_with_its_jacobian():
    rng = np.random.default_rng(2)
    x = rng.normal(size=300)
    y = 0.7 * x + 0.5 * rng.normal(size=300)
    model = from_numpyro(regression, x, y)
    assert model.names == ["a", "log(sigma)"]
    u = np.array([0.6, np.log(0.4)])
    sigma = np.exp(u[1])
    expected_prior = (stats.norm.logpdf(0.6, 0.0, 3.0) + stats.halfnorm.logpdf(sigma, scale=2.0)
                      + u[1])                                  # log |d sigma / d u| = u
    assert model.logprior(u) == pytest.approx(expected_prior, rel=1e-12)
    idx = np.arange(0, 300, 7)
    np.testing.assert_allclose(model.loglik(u, idx),
                               stats.norm.logpdf(y[idx], 0.6 * x[idx], sigma), rtol=1e-12)
    out = model.constrain(np.array([u, u + 0.1]))
    np.testing.assert_allclose(out["sigma"], [sigma, np.exp(u[1] + 0.1)], rtol=1e-14)


def test_model_shapes_outside_the_bridge_are_refused(data):
    X, y = data

    def no_plate(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta).to_event(1), obs=y)

    def subsampled(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0], subsample_size=100):
            batch_X = numpyro.subsample(X, event_dim=1)
            batch_y = numpyro.subsample(y, event_dim=0)
            numpyro.sample("y", dist.Bernoulli(logits=batch_X @ beta), obs=batch_y)

    def local_latent(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            z = numpyro.sample("z", dist.Normal(0.0, 1.0))
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta + z), obs=y)

    def prior_only(X, y):
        numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))

    def fixed_size(X, y):           # the rows are not arguments: a plate over 5 rows
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", 5):
            numpyro.sample("y", dist.Normal(beta, 1.0), obs=np.zeros(5))

    with pytest.raises(ValueError, match="no plate over the data: the observed site"):
        from_numpyro(no_plate, X, y)
    with pytest.raises(ValueError, match="subsamples \\(100 of 2000 rows\\)"):
        from_numpyro(subsampled, X, y)
    with pytest.raises(ValueError, match="latent site\\(s\\) \\['z'\\] inside the plate"):
        from_numpyro(local_latent, X, y)
    with pytest.raises(ValueError, match="has no observed site"):
        from_numpyro(prior_only, X, y)
    with pytest.raises(ValueError, match="no argument has the plate 'data''s 5 rows"):
        from_numpyro(fixed_size, X, y)
    with pytest.raises(TypeError, match="model_fn must be a NumPyro model"):
        from_numpyro("logistic", X, y)


def test_observed_data_outside_the_support_are_refused(data):
    """Negative counts, fractional Poisson counts and a Bernoulli y not in {0, 1}: the site
    and the first such row named, before any pass of the model."""
    X, y = data

    def poisson(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("counts", dist.Poisson(jnp.exp(X @ beta)), obs=y)

    def logistic(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    counts = np.ones(X.shape[0])
    for k, bad, match in ((5, -1.0, "row 5 holds -1.0"), (7, 1.5, "row 7 holds 1.5")):
        c = counts.copy()
        c[k] = bad
        with pytest.raises(ValueError, match=f"observed site 'counts' is outside the support "
                                             f"of its Poisson .*{match}"):
            from_numpyro(poisson, X, c)
    y2 = y.copy()
    y2[3] = 2.0
    with pytest.raises(ValueError, match="'y' is outside the support of its Bernoulli.*row 3 "
                                         "holds 2.0 \\(1 of 2000"):
        from_numpyro(logistic, X, y2)
    assert from_numpyro(poisson, X, counts).N == X.shape[0]   # in the support: accepted
