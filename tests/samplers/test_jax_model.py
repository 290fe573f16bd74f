"""JaxModel (issue 24, part 3): its log-likelihoods, gradients, Hessians and full-pass sums
against the compiled LogisticRegression on the same data, control variates on it equal to
the built-in's, fit on a Poisson JaxModel against quadrature, and bad input."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from samplers import ControlVariates, GaussianPrior, LogisticRegression  # noqa: E402
from samplers.models import JaxModel  # noqa: E402
from validation import fit  # noqa: E402

from .test_user_models import check_posterior, grid_posterior, poisson_data  # noqa: E402

N = 3000


def logistic_row(theta, row):
    x, y = row
    eta = x @ theta
    return y * eta - jnp.logaddexp(0.0, eta)


def poisson_row(theta, row):
    x, y = row
    eta = x @ theta
    return y * eta - jnp.exp(eta) - jax.scipy.special.gammaln(y + 1.0)


@pytest.fixture(scope="module")
def pair():
    """The same logistic regression as a JaxModel (chunk 256: several chunks and padding)
    and as the compiled built-in."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, 3))])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.5, 0.3]))).astype(float)
    prior = GaussianPrior(0.0, 5.0)
    return (JaxModel(logistic_row, (X, y), prior, dim=4, chunk=256),
            LogisticRegression(X, y, prior=prior))


def test_rows_gradients_and_hessians_equal_the_builtin(pair):
    model, ref = pair
    rng = np.random.default_rng(1)
    theta, theta_new = np.array([0.1, 0.9, -0.4, 0.2]), np.array([0.12, 0.88, -0.41, 0.25])
    for n in (1, 37, 300, 700):                  # one padded bucket .. several chunks
        idx = rng.integers(0, N, n)
        np.testing.assert_allclose(model.loglik(theta, idx), ref.loglik(theta, idx),
                                   rtol=0, atol=1e-13)
        np.testing.assert_allclose(model.loglik_ratio(theta, theta_new, idx),
                                   ref.loglik_ratio(theta, theta_new, idx), rtol=0, atol=1e-13)
        np.testing.assert_allclose(model.grad_loglik(theta, idx), ref.grad_loglik(theta, idx),
                                   rtol=0, atol=1e-13)
    idx = rng.integers(0, N, 50)
    x = ref.X[idx]
    p = 1 / (1 + np.exp(-x @ theta))
    hess = -(p * (1 - p))[:, None, None] * x[:, :, None] * x[:, None, :]
    np.testing.assert_allclose(model.hess_loglik(theta, idx), hess, rtol=1e-12, atol=1e-15)
    assert model.logprior(theta) == ref.logprior(theta)
    np.testing.assert_array_equal(model.grad_logprior(theta), ref.grad_logprior(theta))


def test_full_pass_sums_equal_numpy(pair):
    model, ref = pair
    theta = np.array([0.1, 0.9, -0.4, 0.2])
    L, g, H = model.loglik_sums(theta)
    rows = np.arange(N)
    x = ref.X
    p = 1 / (1 + np.exp(-x @ theta))
    assert L == pytest.approx(ref.loglik(theta, rows).sum(), rel=1e-12)
    np.testing.assert_allclose(g, ref.grad_loglik(theta, rows).sum(axis=0), rtol=1e-11)
    np.testing.assert_allclose(H, -(x * (p * (1 - p))[:, None]).T @ x, rtol=1e-11)
    assert model.loglik_sums(theta, hessian=False)[2] is None


def test_control_variates_on_a_jax_model_equal_the_builtin(pair):
    model, ref = pair
    cv, cv_ref = ControlVariates(model), ControlVariates(ref)
    assert cv.center.method == "newton"
    np.testing.assert_allclose(cv.center.theta, cv_ref.center.theta, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cv.center.hess, cv_ref.center.hess, rtol=1e-11)
    theta = cv.center.theta + 0.05
    theta_new = theta - 0.03
    idx = np.random.default_rng(2).integers(0, N, 200)
    np.testing.assert_allclose(cv.loglik_ratio(theta, theta_new, idx),
                               cv_ref.loglik_ratio(theta, theta_new, idx), rtol=0, atol=1e-12)
    for order in (1, 2):                        # the fused residuals against the generic path
        c = cv.center.theta
        proxy = lambda t: (model.grad_loglik(c, idx) @ (t - c) + 0.5 * (order == 2) * np.einsum(
            "nij,i,j->n", model.hess_loglik(c, idx), t - c, t - c))
        generic = model.loglik_ratio(theta, theta_new, idx) - (proxy(theta_new) - proxy(theta))
        np.testing.assert_allclose(model.residual_ratio(theta, theta_new, idx, c, order),
                                   generic, rtol=0, atol=1e-12)


def test_fit_on_a_poisson_jax_model_matches_quadrature():
    X, y = poisson_data()
    model = JaxModel(poisson_row, (X, y), lambda t: -0.5 * jnp.sum(t ** 2) / 100.0, dim=2,
                     names=["intercept", "x"])
    idata = fit(model, tolerance=0.05, draws=2000, n_trial=10, rng=3)
    assert idata.posterior.attrs["rows_realised"] < 0.2 * len(y)
    check_posterior(idata, grid_posterior(X, y))
    # fit translated the row function and the JAX prior to numba by itself (step 0)
    attrs = idata.posterior.attrs
    assert attrs["model_route"] == "JAX -> numba"
    assert attrs["explanation"].startswith("0. model: row log-likelihood, gradient and "
                                           "Hessian-vector product translated")
    assert "timings" in attrs and "model_route" in attrs["timings"]


def test_fit_says_which_route_a_jax_model_took():
    """A model translated already is used as given (never translated twice); a row function
    with a primitive that has no translation keeps the JAX path, and the explanation names
    the primitive and the Python loop."""
    from samplers.models import RowModel, compile_jax_model
    from validation.workflow.steps import model_route

    X, y = poisson_data(N=2000)
    model = compile_jax_model(JaxModel(poisson_row, (X, y), GaussianPrior(0.0, 10.0), dim=2))
    assert isinstance(model, RowModel)
    assert model_route(model).model is model and model_route(model).route == "as given"

    # control variates around a JaxModel: rebuilt around its translation, the same center and
    # sums (no pass), the residuals equal to rounding
    cv = ControlVariates(JaxModel(poisson_row, (X, y), GaussianPrior(0.0, 10.0), dim=2))
    reached = model_route(cv)
    assert reached.route == "JAX -> numba" and isinstance(reached.model, ControlVariates)
    assert isinstance(reached.model.model, RowModel) and reached.model.center is cv.center
    assert reached.lines[0].startswith("0. model (inside the ControlVariates")
    theta = cv.center.theta + 0.01
    idx = np.arange(0, 2000, 7)
    np.testing.assert_allclose(reached.model.loglik_ratio(theta, theta + 0.02, idx),
                               cv.loglik_ratio(theta, theta + 0.02, idx), rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="N = 2000 rows and dim = 2"):
        cv.with_model(LogisticRegression(X[:10], (y[:10] > 0).astype(float)))

    def cumulative(theta, row):             # cumsum: no numba translation
        x, y = row
        eta = jnp.sum(jnp.cumsum(x * theta)) - x[0] * theta[0]
        return y * eta - jnp.exp(eta)

    jax_model = JaxModel(cumulative, (X, y), GaussianPrior(0.0, 10.0), dim=2)
    idata = fit(jax_model, tolerance=0.05, draws=100, n_trial=10, parallel=False, rng=1)
    attrs = idata.posterior.attrs
    assert attrs["model_route"] == "JAX"
    first = attrs["explanation"].splitlines()[0]
    assert "'cumsum' has no numba translation" in first and "Python loop" in first


def test_x64_stays_scoped(pair):
    model, _ = pair
    before = bool(jax.config.jax_enable_x64)
    assert model.loglik(np.zeros(4), np.arange(3)).dtype == np.float64
    assert bool(jax.config.jax_enable_x64) == before      # the global flag is left alone


def test_bad_input_is_refused_before_any_pass():
    X = np.ones((10, 2))
    y = np.zeros(10)
    with pytest.raises(ValueError, match="one scalar per row, got shape \\(2,\\)"):
        JaxModel(lambda t, r: r[0] * t, (X, y), dim=2)
    with pytest.raises(ValueError, match="same number of rows, got \\[10, 9\\]"):
        JaxModel(logistic_row, (X, y[:9]), dim=2)
    with pytest.raises(TypeError, match="fails on row 0 with theta of shape \\(3,\\)"):
        JaxModel(logistic_row, (X, y), dim=3)
    with pytest.raises(ValueError, match="data array 1 must be finite; row 4"):
        JaxModel(logistic_row, (X, np.where(np.arange(10) == 4, np.nan, y)), dim=2)
    with pytest.raises(TypeError, match="loglik_row must be a function"):
        JaxModel("row", (X, y), dim=2)
    with pytest.raises(TypeError, match="logprior must be"):
        JaxModel(logistic_row, (X, y), logprior=3.0, dim=2)
    with pytest.raises(ValueError, match="names must have one entry per parameter \\(2\\)"):
        JaxModel(logistic_row, (X, y), dim=2, names=["a"])
    with pytest.raises(ValueError, match="chunk must be a power of two"):
        JaxModel(logistic_row, (X, y), dim=2, chunk=100)
    model = JaxModel(logistic_row, (X, y), dim=2)
    with pytest.raises(ValueError, match="theta must have 2 element"):
        model.loglik(np.zeros(3), np.arange(2))
    with pytest.raises(ValueError, match="idx must lie in \\[0, 9\\]"):
        model.loglik(np.zeros(2), np.array([10]))


def test_nan_log_likelihood_at_the_mode_is_refused():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(200), rng.normal(size=200)])
    y = rng.poisson(1.0, 200).astype(float)

    def bad_row(theta, row):                    # NaN on every row: sqrt of a negative
        return poisson_row(theta, row) + jnp.sqrt(-1.0 - theta[0] ** 2)

    # fit translates the model to numba, whose row kernel is checked at its first point
    # before any pass; on the JAX path, the mode search refuses it
    with pytest.raises(ValueError, match="loglik_row returns NaN at row 0"):
        fit(JaxModel(bad_row, (X, y), dim=2))
    with pytest.raises(ValueError, match="log-likelihood is nan|log posterior is finite"):
        ControlVariates(JaxModel(bad_row, (X, y), dim=2))
