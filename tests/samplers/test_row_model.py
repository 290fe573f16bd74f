"""A user's own compiled model (``samplers.models.RowModel``): numba row kernels on the
compiled chain loop. Against the built-in logistic regression (the same arithmetic: the
same rows and chains bit for bit), the compiled loop against the Python loop, control
variates around it, ``fit`` on a Poisson RowModel against quadrature, and bad kernels and
data refused before any pass."""

import math
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from scipy.special import gammaln

from design._lib.vecmath import log_sigmoid
from samplers import (AustereTest, ControlVariates, GaussianPrior, Langevin, LogisticRegression,
                      RandomWalk, sample)
from samplers.models import RowModel
from samplers.models._glm import glm_sums
from validation import fit

from .test_user_models import check_posterior, grid_posterior, poisson_data


# --- the logistic regression written as the built-in's arithmetic -------------------------


@numba.njit
def logistic_row(data, i, theta):
    X, y = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    return log_sigmoid((2.0 * y[i] - 1.0) * a)


@numba.njit
def logistic_grad(data, i, theta, out):
    X, y = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    s = 2.0 * y[i] - 1.0
    w = s * math.exp(log_sigmoid(-s * a))
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@numba.njit
def logistic_hess(data, i, theta, out):
    X, _ = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    p = 1.0 / (1.0 + math.exp(-a))
    w = -p * (1.0 - p)
    for j in range(X.shape[1]):
        for k in range(X.shape[1]):
            out[j, k] = w * X[i, j] * X[i, k]


@numba.njit
def logistic_hvp(data, i, theta, v, out):
    X, _ = data
    a = 0.0
    b = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
        b += X[i, j] * v[j]
    p = 1.0 / (1.0 + math.exp(-a))
    w = -p * (1.0 - p) * b
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


# --- Poisson regression --------------------------------------------------------------------


@numba.njit
def poisson_row(data, i, theta):
    X, y, c = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    return y[i] * eta - math.exp(eta) - c[i]


@numba.njit
def poisson_grad(data, i, theta, out):
    X, y, _ = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    w = y[i] - math.exp(eta)
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@numba.njit
def poisson_hess(data, i, theta, out):
    X, _, _ = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    w = -math.exp(eta)
    for j in range(X.shape[1]):
        for k in range(X.shape[1]):
            out[j, k] = w * X[i, j] * X[i, k]


@pytest.fixture(scope="module")
def logistic():
    rng = np.random.default_rng(0)
    N, d = 3000, 4
    X = np.column_stack([np.ones(N), rng.normal(size=(N, d - 1))])
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-X @ [0.2, 1.0, -0.5, 0.3]))).astype(float)
    prior = GaussianPrior(0.0, 5.0)
    return (RowModel(logistic_row, (X, y), dim=d, logprior=prior, grad_row=logistic_grad,
                     hess_row=logistic_hess),
            LogisticRegression(X, y, prior=prior), X, y)


def test_rows_equal_the_builtin_bit_for_bit(logistic):
    model, builtin, X, _ = logistic
    theta, theta_new, idx = np.array([0.1, 0.5, -0.2, 0.0]), np.array([0.15, 0.4, -0.1, 0.1]), \
        np.arange(model.N)
    assert np.array_equal(model.loglik(theta, idx), builtin.loglik(theta, idx))
    assert np.array_equal(model.loglik_ratio(theta, theta_new, idx),
                          builtin.loglik_ratio(theta, theta_new, idx))
    assert np.array_equal(model.grad_loglik(theta, idx), builtin.grad_loglik(theta, idx))
    L, g, H = model.loglik_sums(theta)
    L0, g0, H0 = glm_sums(builtin, theta)
    assert L == pytest.approx(L0, rel=1e-13)
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-12 * np.abs(g0).max())
    np.testing.assert_allclose(H, H0, rtol=1e-12, atol=1e-12 * np.abs(H0).max())
    hess = model.hess_loglik(theta, idx[:5])
    p = 1.0 / (1.0 + np.exp(-X[:5] @ theta))
    np.testing.assert_allclose(hess, -(p * (1 - p))[:, None, None] * X[:5, :, None]
                               * X[:5, None, :], rtol=1e-13)


def test_chain_equals_the_builtin_and_the_python_loop(logistic):
    model, builtin, _, _ = logistic
    proposal = Langevin(5e-4, batch_size=50)   # rows, gradients, prior: every kernel read
    run = lambda m, compiled: sample(m, AustereTest(m=100, epsilon=0.05), proposal, np.zeros(4),
                                     300, rng=3, compiled=compiled)
    chain = run(model, True)
    assert np.array_equal(chain.samples, run(builtin, True).samples)
    assert np.array_equal(chain.samples, run(model, False).samples)
    assert chain.stats["accepted"].mean() > 0.02   # the chains moved


@pytest.mark.parametrize("kernel, order", [("hess", 1), ("hvp", 2)])
def test_control_variates_equal_the_builtin_and_run_compiled(logistic, order, kernel):
    _, builtin, X, y = logistic
    second = {"hess_row": logistic_hess} if kernel == "hess" else {"hvp_row": logistic_hvp}
    model = RowModel(logistic_row, (X, y), dim=4, logprior=builtin.prior,
                     grad_row=logistic_grad, **second)
    cv, ref = ControlVariates(model, order=order), ControlVariates(builtin, order=order)
    np.testing.assert_allclose(cv.center.theta, ref.center.theta, rtol=0, atol=1e-10)
    theta = ref.center.theta + 0.02
    theta_new = theta + np.array([0.01, -0.02, 0.0, 0.01])
    idx = np.arange(cv.N)
    np.testing.assert_allclose(cv.loglik_ratio(theta, theta_new, idx),
                               ref.loglik_ratio(theta, theta_new, idx), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cv.loglik(theta, idx), ref.loglik(theta, idx), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cv.grad_loglik(theta, idx[:50]), ref.grad_loglik(theta, idx[:50]),
                               rtol=0, atol=1e-10)
    if (kernel, order) != ("hvp", 2):
        return   # one compiled chain: each compiles the whole decision (seconds)
    run = lambda compiled: sample(cv, AustereTest(m=50, epsilon=0.05),
                                  RandomWalk.from_laplace(cv), cv.center.theta, 200, rng=5,
                                  compiled=compiled)
    assert np.array_equal(run(True).samples, run(False).samples)


def test_finite_differences_stand_in_for_missing_derivatives(logistic):
    model, _, X, y = logistic
    bare = RowModel(logistic_row, (X, y), dim=4, logprior=model.prior)
    theta, idx = np.array([0.1, 0.5, -0.2, 0.0]), np.arange(40)
    np.testing.assert_allclose(bare.grad_loglik(theta, idx), model.grad_loglik(theta, idx),
                               rtol=0, atol=1e-8)
    np.testing.assert_allclose(bare.hess_loglik(theta, idx), model.hess_loglik(theta, idx),
                               rtol=0, atol=1e-6)
    from_hvp = RowModel(logistic_row, (X, y), dim=4, grad_row=logistic_grad,
                        hvp_row=logistic_hvp)   # the Hessian as the columns of hvp_row
    np.testing.assert_allclose(from_hvp.hess_loglik(theta, idx), model.hess_loglik(theta, idx),
                               rtol=1e-14, atol=1e-15)


def test_temperature_tempers_every_kernel(logistic):
    model, _, X, y = logistic
    hot = RowModel(logistic_row, (X, y), dim=4, grad_row=logistic_grad,
                   hess_row=logistic_hess, hvp_row=logistic_hvp, temperature=4.0)
    theta, idx = np.array([0.1, 0.5, -0.2, 0.0]), np.arange(20)
    np.testing.assert_allclose(hot.loglik(theta, idx), model.loglik(theta, idx) / 4, rtol=1e-15)
    np.testing.assert_allclose(hot.grad_loglik(theta, idx), model.grad_loglik(theta, idx) / 4,
                               rtol=1e-15)
    np.testing.assert_allclose(hot.hess_loglik(theta, idx), model.hess_loglik(theta, idx) / 4,
                               rtol=1e-15)


@pytest.mark.slow
def test_fit_on_a_poisson_row_model_matches_quadrature():
    X, y = poisson_data()
    model = RowModel(poisson_row, (X, y, gammaln(y + 1.0)), dim=2,
                     logprior=GaussianPrior(0.0, 10.0), grad_row=poisson_grad,
                     hess_row=poisson_hess, names=["intercept", "x"])
    L, g, H = model.loglik_sums(np.array([0.3, -0.2]))
    eta = X @ [0.3, -0.2]
    assert L == pytest.approx(np.sum(y * eta - np.exp(eta) - gammaln(y + 1.0)), rel=1e-13)
    np.testing.assert_allclose(H, -(X * np.exp(eta)[:, None]).T @ X, rtol=1e-12)
    idata = fit(model, tolerance=0.05, draws=2000, n_trial=10, rng=3)
    assert idata.posterior.attrs["rows_realised"] < 0.2 * len(y)
    check_posterior(idata, grid_posterior(X, y))


_TYPED_AT_A_PROMPT = '''
import numpy as np
from samplers.models import RowModel
source = """
import numba, numpy as np
@numba.njit
def row(data, i, theta):
    X, y = data
    a = X[i, 0] * theta[0] + X[i, 1] * theta[1]
    return y[i] * a - np.exp(a)
"""
scope = {}
exec(source, scope)   # no file behind it, as in a notebook cell
X = np.column_stack([np.ones(50), np.linspace(-1.0, 1.0, 50)])
print(RowModel(scope["row"], (X, np.ones(50)), dim=2).loglik_sums(np.array([0.3, -0.2]))[0])
'''


def test_kernels_around_a_kernel_typed_at_a_prompt_load_from_disk_in_the_next_process(tmp_path):
    """The loops compiled around a user's kernel are cached on disk under its code's uuid:
    a second process loads them instead of compiling them again (even for a kernel with no
    file, defined by exec as in a notebook)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), NUMBA_DEBUG_CACHE="1")

    def run():
        out = subprocess.run([sys.executable, "-c", _TYPED_AT_A_PROMPT], env=env,
                             capture_output=True, text=True, check=True)
        return out.stdout + out.stderr

    first, second = run(), run()
    assert "data saved" in first
    assert "data loaded" in second and "data saved" not in second


@numba.njit
def returns_vector(data, i, theta):
    return data[0][i] * theta


@numba.njit
def returns_int(data, i, theta):
    return 1


@numba.njit
def nan_at_row0(data, i, theta):
    return math.nan if i == 0 else 0.0


@numba.njit
def wrong_grad(data, i, theta, out):
    X, y, _ = data
    for j in range(X.shape[1]):
        out[j] = X[i, j]


@numba.njit
def leaves_a_hole(data, i, theta, out):
    out[0] = 0.0


def test_bad_kernels_and_data_are_refused_before_any_pass():
    X, y = poisson_data(N=50)
    data = (X, y, gammaln(y + 1.0))
    with pytest.raises(TypeError, match="loglik_row must be a numba-compiled"):
        RowModel(poisson_row.py_func, data, dim=2)
    with pytest.raises(TypeError, match="grad_row must be a numba-compiled"):
        RowModel(poisson_row, data, dim=2, grad_row=lambda *a: None)
    with pytest.raises(TypeError, match="data must be a tuple of arrays, got one array"):
        RowModel(poisson_row, X, dim=2)
    with pytest.raises(TypeError, match=r"data\[1\] must be a NumPy array"):
        RowModel(poisson_row, (X, list(y), y), dim=2)
    with pytest.raises(ValueError, match=r"same number of rows, got \[50, 49, 50\]"):
        RowModel(poisson_row, (X, y[:-1], y), dim=2)
    with pytest.raises(TypeError, match="must return a float"):
        RowModel(returns_vector, (y,), dim=2)
    with pytest.raises(TypeError, match="must return a float"):
        RowModel(returns_int, (y,), dim=2)
    with pytest.raises(TypeError, match="fails on row 0"):
        RowModel(poisson_row, (y,), dim=2)           # a kernel that does not type
    with pytest.raises(ValueError, match="returns NaN at row 0"):
        RowModel(nan_at_row0, (y,), dim=2)
    with pytest.raises(ValueError, match="grad_row disagrees with central differences"):
        RowModel(poisson_row, data, dim=2, grad_row=wrong_grad)
    with pytest.raises(ValueError, match="hess_row leaves non-finite values"):
        RowModel(poisson_row, data, dim=2, hess_row=leaves_a_hole)
    with pytest.raises(TypeError, match="logprior must be"):
        RowModel(poisson_row, data, dim=2, logprior="flat")
    bad = X.copy()
    bad[7, 1] = np.nan
    with pytest.raises(ValueError, match="row 7"):
        RowModel(poisson_row, (bad, y, gammaln(y + 1.0)), dim=2)
    assert np.isfinite(X).all()   # the caller's arrays untouched


@numba.njit
def nan_past_0_2(data, i, theta):
    # finite at theta = 0 (the mode search's start), NaN past theta[0] = 0.2 (the mode is near
    # 0.4): a guard that returns nan
    return math.nan if theta[0] > 0.2 else poisson_row(data, i, theta)


def test_a_log_likelihood_nan_on_the_way_to_the_mode_is_named():
    X, y = poisson_data(N=300)
    model = RowModel(nan_past_0_2, (X, y, gammaln(y + 1.0)), dim=2, grad_row=poisson_grad,
                     hess_row=poisson_hess, logprior=GaussianPrior(0.0, 10.0))
    with pytest.raises(ValueError, match=r"log posterior is nan within .* it must be finite"):
        ControlVariates(model)


def test_a_python_log_prior_runs_on_the_python_loop():
    X, y = poisson_data(N=200)
    model = RowModel(poisson_row, (X, y, gammaln(y + 1.0)), dim=2,
                     logprior=lambda t: -0.5 * float(t @ t) / 100.0, grad_row=poisson_grad)
    assert model.grad_logprior(np.array([1.0, 2.0])) == pytest.approx([-0.01, -0.02], rel=1e-6)
    with pytest.raises(TypeError, match="no compiled parts"):
        sample(model, AustereTest(m=50, epsilon=0.05), RandomWalk(0.05), np.zeros(2), 10,
               rng=0, compiled=True)
    chain = sample(model, AustereTest(m=50, epsilon=0.05), RandomWalk(0.05), np.zeros(2), 10,
                   rng=0)
    assert chain.samples.shape == (10, 2)


def test_control_variate_rows_on_several_threads_equal_one_thread():
    """The residual kernels' scratch is stack memory of each thread: a full pass over three
    chunks on two threads gives the bits of one thread and of the batch loop."""
    from samplers._view import FULL_CHUNK, ModelView

    rng = np.random.default_rng(4)
    N = 2 * FULL_CHUNK + 1000
    X = np.column_stack([np.ones(N), rng.normal(size=N)])
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-X @ [0.3, -0.8]))).astype(float)
    cv = ControlVariates(RowModel(logistic_row, (X, y), dim=2, grad_row=logistic_grad,
                                  hvp_row=logistic_hvp, logprior=GaussianPrior(0.0, 5.0)))
    view = ModelView(cv, 2)
    theta = cv.center.theta + 0.01
    theta_new = theta + np.array([0.005, -0.01])
    ok1, one = view.full_ratio_moments(theta, theta_new, threads=1)
    ok2, two = view.full_ratio_moments(theta, theta_new, threads=2)
    assert ok1 and ok2 and (one.mean, one.m2) == (two.mean, two.m2)
    rows = cv.loglik_ratio(theta, theta_new, np.arange(N))
    assert one.mean == pytest.approx(rows.mean(), rel=1e-12)
    assert one.m2 == pytest.approx(((rows - rows.mean()) ** 2).sum(), rel=1e-9)


def test_row_blocks_are_refused_and_fit_steps_run_the_sums_here(logistic):
    """A RowModel names no per-row fields: copying it as a "block" would read the first rows
    of the whole data, so row blocks (and an executor's passes by blocks) are refused, and
    fit's first step runs the control variates' sums in this process."""
    from concurrent.futures import ThreadPoolExecutor

    from validation import loglik_ratios
    from validation.workflow.steps import mode_and_proxy

    model, builtin, *_ = logistic
    for wrapped in (model, ControlVariates(model)):
        with pytest.raises(TypeError, match="blocks"):
            wrapped.row_block(0, 10)
    assert not ControlVariates.sums_on_blocks(model)
    assert ControlVariates.sums_on_blocks(builtin)
    theta, new = np.zeros(4), np.full(4, 0.01)
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(TypeError):
            loglik_ratios(model, theta, new, executor=pool)
        proxy = mode_and_proxy(model, executor=pool)
    np.testing.assert_allclose(proxy.mode, mode_and_proxy(model).mode, rtol=1e-12)
