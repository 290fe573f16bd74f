"""A JAX row function translated to numba (``samplers.models.compile_jax_model``): each
supported primitive against JAX on random inputs (log-likelihood, gradient, Hessian-vector
product), the NumPyro bridge's Poisson, logistic and Gaussian models, the compiled chain of a
translated model, and the fallback that names an untranslated primitive."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax.scipy.special import digamma, gammaln, xlogy  # noqa: E402

from samplers import (AustereTest, ControlVariates, GaussianPrior, RandomWalk,  # noqa: E402
                      sample)
from samplers.models import JaxModel, RowModel, compile_jax_model  # noqa: E402
from samplers.models.jaxpr_numba import (UnsupportedPrimitive,  # noqa: E402
                                          translate_row_function)

D = 3


def arithmetic(theta, row):        # add sub mul div neg integer_pow pow sqrt abs max min
    x, y = row
    eta = x @ theta
    return (-(eta - y) ** 2 / 2.0 + jnp.sqrt(1.0 + eta ** 2) - jnp.abs(theta[0]) * 0.1
            + jnp.maximum(eta, y) - jnp.minimum(theta[1], 0.5) + (1.5 + theta[2] ** 2) ** 0.7)


def transcendental(theta, row):    # exp log log1p expm1 tanh logistic lgamma digamma
                                   # (polygamma in the derivatives) erf
    x, y = row
    eta = 0.3 * (x @ theta)
    return (jnp.exp(eta) * 0.1 - jnp.log(2.0 + jnp.tanh(eta)) + jnp.log1p(jnp.exp(-eta ** 2))
            + jnp.expm1(0.5 * theta[0]) + jax.nn.sigmoid(eta) + gammaln(y + 2.0 + eta ** 2)
            + digamma(3.0 + jnp.cos(eta)) + jax.scipy.special.erf(eta)
            + jax.nn.log_sigmoid(eta) + jax.nn.softplus(-eta))


def control_flow(theta, row):      # comparisons, select_n (where), clip, xlogy
    x, y = row
    eta = x @ theta
    return (jnp.where(eta > 0.0, eta, 0.5 * eta) + jnp.where(y >= 1.0, -eta ** 2, eta)
            + jnp.clip(eta, -1.0, 1.0) ** 2 + xlogy(y, 1.0 + jnp.exp(eta)))


def shapes(theta, row):            # reshape, slice, rev, concatenate (split), transpose,
    x, y = row                     # reduce_sum/max over axes, matrix-vector products
    A = jnp.reshape(jnp.concatenate([theta, theta[::-1]]), (2, 3))
    v = A.T @ (A @ x) + (A.T @ jnp.array([1.0, -0.5])) * y
    return jnp.sum(v * theta) - jnp.max(jnp.tanh(v)) + jnp.sum(jnp.outer(theta, x)[1:, :2])


def softmax_row(theta, row):       # a multinomial-logit row: logsumexp, one-hot data
    x, onehot = row
    logits = jnp.stack([0.0 * theta[0], x @ theta, 0.5 * x @ theta[::-1]])
    return jnp.sum(onehot * jax.nn.log_softmax(logits))


FUNCTIONS = [arithmetic, transcendental, control_flow, shapes, softmax_row]


def _data(fn, rng, N=40):
    x = rng.normal(size=(N, D))
    if fn is softmax_row:
        return x, np.eye(3)[rng.integers(0, 3, N)]
    return x, rng.poisson(1.5, N).astype(float)


def _compare(jax_model, kernels, rng, n_theta=3):
    """The translated kernels, called row by row from Python, against the JaxModel's
    vmapped log-likelihoods, gradients and Hessians (times a random vector)."""
    f_loglik, f_grad, f_hvp = kernels
    arrays = tuple(jax_model._leaves)
    idx = np.arange(jax_model.N)
    d = jax_model.dim
    for _ in range(n_theta):
        theta, v = rng.normal(0.0, 0.7, d), rng.normal(size=d)
        ll, g, H = (jax_model.loglik(theta, idx), jax_model.grad_loglik(theta, idx),
                    jax_model.hess_loglik(theta, idx))
        ours = np.array([f_loglik(arrays, i, theta) for i in idx])
        np.testing.assert_allclose(ours, ll, rtol=1e-12, atol=1e-12 * (1 + np.abs(ll).max()))
        out = np.empty(d)
        for i in idx:
            f_grad(arrays, i, theta, out)
            np.testing.assert_allclose(out, g[i], rtol=1e-12, atol=1e-12 * (1 + np.abs(g).max()))
            f_hvp(arrays, i, theta, v, out)
            Hv = H[i] @ v
            np.testing.assert_allclose(out, Hv, rtol=1e-11, atol=1e-12 * (1 + np.abs(H).max()))


def _kernels(jax_model):
    return translate_row_function(jax_model._row_fn, jax_model._treedef, jax_model._leaves,
                                  jax_model.dim)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_translated_kernels_equal_jax_on_random_inputs(fn):
    rng = np.random.default_rng(0)
    jax_model = JaxModel(fn, _data(fn, rng), dim=D)
    _compare(jax_model, _kernels(jax_model), rng)


def test_an_untranslated_primitive_is_named_and_the_jax_path_kept():
    def cumulative(theta, row):
        x, y = row
        return jnp.sum(jnp.cumsum(x * theta)) - y
    rng = np.random.default_rng(1)
    jax_model = JaxModel(cumulative, _data(cumulative, rng), dim=D)
    with pytest.warns(UserWarning, match="'cumsum' has no numba translation"):
        assert compile_jax_model(jax_model) is jax_model
    with pytest.raises(UnsupportedPrimitive) as info:
        compile_jax_model(jax_model, warn=False)
    assert info.value.primitive == "cumsum"


def test_a_translated_model_has_the_jax_models_mode_and_ratios():
    """The translated model's control variates against the JaxModel's. Its chain on the
    compiled loop is test_numpyro_prior_translates_and_the_chain_runs_compiled's (a
    translated model, its prior translated too); a RowModel with a built-in prior on the
    compiled loop is test_row_model.py's. A chain here would compile the whole decision
    again (a translated model's kernels are not cached: ~20 CPU-s in every run)."""
    rng = np.random.default_rng(2)
    X = np.column_stack([np.ones(4000), rng.normal(size=(4000, 2))])
    y = rng.poisson(np.exp(X @ [0.5, 0.3, -0.2])).astype(float)

    def poisson(theta, row):
        x, y = row
        eta = x @ theta
        return y * eta - jnp.exp(eta) - gammaln(y + 1.0)

    jax_model = JaxModel(poisson, (X, y), GaussianPrior(0.0, 10.0), dim=3)
    cv = ControlVariates(compile_jax_model(jax_model))
    reference = ControlVariates(jax_model)
    np.testing.assert_allclose(cv.center.theta, reference.center.theta, rtol=0, atol=1e-10)
    theta = cv.center.theta + 0.01
    theta_new = theta + np.array([0.01, -0.01, 0.02])
    idx = np.arange(4000)
    np.testing.assert_allclose(cv.loglik_ratio(theta, theta_new, idx),
                               reference.loglik_ratio(theta, theta_new, idx), rtol=0, atol=1e-11)


numpyro = pytest.importorskip("numpyro")
import numpyro.distributions as dist  # noqa: E402

from samplers.models import from_numpyro  # noqa: E402


def np_poisson(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(X @ beta)), obs=y)


def np_logistic(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)


def np_gaussian(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)


@pytest.mark.parametrize("model_fn", [np_poisson, np_logistic, np_gaussian],
                         ids=lambda f: f.__name__)
def test_numpyro_bridge_models_translate(model_fn):
    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(60), rng.normal(size=(60, 2))])
    eta = X @ [0.3, 0.5, -0.4]
    y = {np_poisson: rng.poisson(np.exp(eta)), np_logistic: rng.random(60) < 1 / (1 + np.exp(-eta)),
         np_gaussian: eta + rng.normal(size=60)}[model_fn].astype(float)
    bridge = from_numpyro(model_fn, X, y)
    _compare(bridge, _kernels(bridge), rng, n_theta=2)
    if model_fn is np_gaussian:   # the model as a whole: the bridge's prior, Jacobian, names
        model = compile_jax_model(bridge, warn=False)
        assert isinstance(model, RowModel) and model.names == bridge.names
        u = rng.normal(0.0, 0.5, bridge.dim)
        assert model.logprior(u) == pytest.approx(bridge.logprior(u), rel=1e-14)
        np.testing.assert_allclose(model.loglik(u, np.arange(60)), bridge.loglik(u, np.arange(60)),
                                   rtol=1e-12)


def test_floor_and_ceil_stay_floats_beyond_the_integers():
    """numba's math.floor/ceil return int64 (overflow; inf or NaN becomes INT_MIN): the
    translation uses np.floor/np.ceil, float in and out, as JAX does."""
    def rounding(theta, row):
        x, _ = row
        return -0.5 * jnp.floor(x[0] * theta[0]) + jnp.ceil(x[1] * theta[1])

    x = np.array([[1e300, 2.5], [-4.75, -3.5], [7.25, 1e25]])
    model = JaxModel(rounding, (x, np.zeros(3)), dim=2)
    f_loglik, *_ = _kernels(model)
    for theta in (np.array([1.0, 1.0]), np.array([1e10, np.inf])):   # inf: not INT_MIN
        ours = np.array([f_loglik(tuple(model._leaves), i, theta) for i in range(3)])
        np.testing.assert_array_equal(ours, np.asarray(model.loglik(theta, np.arange(3))))


def np_sites(X, y=None):
    """The usual sites: a vector Normal, a scalar Normal, and positive scales under their log
    transform (HalfNormal, HalfCauchy, Exponential)."""
    beta = numpyro.sample("beta", dist.Normal(0.0, 5.0).expand([X.shape[1]]))
    shift = numpyro.sample("shift", dist.Normal(1.0, 2.0))
    a = numpyro.sample("a", dist.HalfNormal(2.0))
    b = numpyro.sample("b", dist.HalfCauchy(1.0))
    c = numpyro.sample("c", dist.Exponential(3.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Normal(X @ beta + shift, a + b + c), obs=y)


def test_numpyro_prior_translates_and_the_chain_runs_compiled():
    """The bridge's prior (sites' log densities on the unconstrained scale plus the log
    Jacobians) translated to numba equals JAX's to 1e-12, gradient too, and the chain of the
    translated model runs on the compiled loop, identical to its Python loop."""
    from samplers.models.jaxpr_numba import translate_model, translate_prior
    from samplers.priors import CompiledPrior

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 2))
    y = X @ [1.0, -0.5] + 1.0 + rng.normal(size=300)
    bridge = from_numpyro(np_sites, X, y)
    assert bridge.names == ["log(a)", "log(b)", "beta[0]", "beta[1]", "log(c)", "shift"]
    prior = translate_prior(bridge._logprior_fn, bridge.dim)
    assert isinstance(prior, CompiledPrior)
    for _ in range(20):
        u = rng.normal(0.0, 2.0, bridge.dim)
        assert prior.logpdf(u) == pytest.approx(bridge.logprior(u), rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(prior.grad(u), bridge.grad_logprior(u), rtol=1e-12,
                                   atol=1e-12)
    t = translate_model(bridge)
    assert (t.rows, t.prior, t.compiled) == (True, "translated", True)
    cv = ControlVariates(t.model)
    run = lambda compiled: sample(cv, AustereTest(m=50, epsilon=0.05), RandomWalk.from_laplace(cv),
                                  cv.center.theta, 200, rng=6, compiled=compiled)
    chain = run(True)                # compiled=True raises when any part is missing
    assert np.array_equal(chain.samples, run(False).samples)
    # the chain moves (the three scales enter only through their sum, a ridge: a random walk
    # accepts about one step in nine here)
    assert chain.stats["accepted"].mean() > 0.05


def test_a_prior_without_translation_keeps_jax_and_the_python_loop():
    from samplers.models.jaxpr_numba import translate_model

    rng = np.random.default_rng(7)
    X = np.column_stack([np.ones(500), rng.normal(size=500)])
    y = rng.poisson(np.exp(X @ [0.3, 0.2])).astype(float)

    def poisson(theta, row):
        x, y = row
        eta = x @ theta
        return y * eta - jnp.exp(eta)

    def cumulative_prior(theta):       # cumsum has no translation
        return -0.005 * jnp.sum(jnp.cumsum(theta) ** 2)

    jax_model = JaxModel(poisson, (X, y), cumulative_prior, dim=2)
    t = translate_model(jax_model)
    assert (t.rows, t.prior, t.compiled) == (True, "JAX", False)
    assert "'cumsum'" in t.summary() and "Python loop" in t.summary()
    with pytest.warns(UserWarning, match="logprior stays a JAX function") as said:
        model = compile_jax_model(jax_model)
    assert len(said) == 1
    theta = np.array([0.2, -0.1])
    assert model.logprior(theta) == pytest.approx(jax_model.logprior(theta), rel=1e-14)
    cv = ControlVariates(model)
    with pytest.raises(TypeError, match="no compiled chain loop"):
        sample(cv, AustereTest(m=50, epsilon=0.05), RandomWalk.from_laplace(cv),
               cv.center.theta, 10, rng=0, compiled=True)


def test_a_translated_model_travels_to_another_process():
    """fit(executor=) sends the translated RowModel to its workers (pickle, as a process pool
    does; Dask's cloudpickle likewise): a fresh process without the translation's exec'd
    source rebuilds the compiled rows, and its log-likelihoods and gradients are this
    process's, bit for bit. (Checked by hand on a LocalCluster too: fit of a JaxModel with
    executor=client gives the local chains' draws.)"""
    import pickle
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(50), rng.normal(size=50)])
    y = rng.poisson(np.exp(X @ [0.5, 0.3])).astype(float)

    def poisson_row(theta, row):
        x, yy = row
        eta = x @ theta
        return yy * eta - jnp.exp(eta)

    model = compile_jax_model(JaxModel(poisson_row, (X, y), GaussianPrior(0.0, 10.0), dim=2))
    assert isinstance(model, RowModel)
    theta, idx = np.array([0.4, 0.2]), np.arange(50)
    child = ("import pickle, sys\nimport numpy as np\nm = pickle.loads(sys.stdin.buffer.read())\n"
             "t = np.array([0.4, 0.2]); i = np.arange(50)\n"
             "sys.stdout.buffer.write(pickle.dumps((type(m).__name__, m.loglik(t, i), "
             "m.grad_loglik(t, i))))\n")
    out = subprocess.run([sys.executable, "-c", child], input=pickle.dumps(model),
                         capture_output=True, timeout=300, check=True)
    name, ll, grad = pickle.loads(out.stdout)
    assert name == "RowModel"
    np.testing.assert_array_equal(ll, model.loglik(theta, idx))
    np.testing.assert_array_equal(grad, model.grad_loglik(theta, idx))
