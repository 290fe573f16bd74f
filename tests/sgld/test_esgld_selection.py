"""eSGLD for variable selection (Song et al. 2020, Algorithm 1): compiled kernel against an
independent NumPy reference, a small version of the paper's simulation, inputs."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from samplers.datasets import correlated_regression
from samplers.esgld import SpikeSlabPrior, esgld_select, selection_scores
from samplers.esgld._selection import esgld_update, model_chain, subsample_residuals


def reference_update(X, y, rows, theta, order, k, u, moves, k_max, coef, log_size, slab_sd,
                     spike_sd, h, noise_scale, z):
    """One eSGLD iteration written from the definitions: every log ratio from scratch (full
    subsample log-likelihood, scipy log densities), no incremental residuals."""
    Xs, ys = X[rows], y[rows]
    p = theta.shape[0]
    order = order.copy()

    def log_target(size):
        S = order[:size]
        r = ys - Xs[:, S] @ theta[S]
        out = -0.5 * coef * float(r @ r) + log_size[size]
        inside = np.zeros(p, dtype=bool)
        inside[S] = True
        out += stats.norm.logpdf(theta[inside], 0, slab_sd).sum()
        return out + stats.norm.logpdf(theta[~inside], 0, spike_sd).sum()

    def pick(lo, hi, v):
        return min(lo + int(v * (hi - lo)), hi - 1)

    models = []
    for s in range(u.shape[0]):
        current = log_target(k)
        move = int(3 * u[s, 0])
        saved = order.copy()
        new_k, log_q = k, None
        if move == 0 and k < k_max:
            q = pick(k, p, u[s, 1])
            order[[q, k]] = order[[k, q]]
            new_k, log_q = k + 1, math.log(p - k) - math.log(k + 1)
        elif move == 1 and k > 0:
            q = pick(0, k, u[s, 1])
            order[[q, k - 1]] = order[[k - 1, q]]
            new_k, log_q = k - 1, math.log(k) - math.log(p - k + 1)
        elif move == 2 and 0 < k < p:
            a, b = pick(0, k, u[s, 1]), pick(k, p, u[s, 2])
            order[[a, b]] = order[[b, a]]
            log_q = 0.0
        if log_q is not None and math.log(u[s, 3]) < log_target(new_k) - current + log_q:
            k = new_k
        else:
            order = saved
        if (s + 1) % moves == 0:
            models.append(order[:k].copy())
    grad = np.zeros(p)
    for S in models:
        inside = np.zeros(p, dtype=bool)
        inside[S] = True
        r = ys - Xs[:, S] @ theta[S]
        g = np.where(inside, coef * (Xs.T @ r) - theta / slab_sd**2, -theta / spike_sd**2)
        grad += g / len(models)
    counts = np.zeros(p, dtype=np.int64)
    for S in models:
        counts[S] += 1
    return theta + 0.5 * h * grad + noise_scale * z, order, k, counts


def run_kernel(X, y, rows, theta, order, k, u, moves, k_max, coef, log_size, slab, spike, h,
               noise, z, compiled=True):
    fn = esgld_update if compiled else esgld_update.py_func
    order = order.copy()
    p = theta.shape[0]
    out, grad, counts = np.empty(p), np.empty(p), np.empty(p, dtype=np.int64)
    k_new, _ = fn(X, y, rows, theta, order, k, u, moves, z, k_max, coef, log_size, slab, spike,
                  h, noise, out, grad, counts)
    return out, order, k_new, counts


@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 12), k=st.integers(0, 12),
       m=st.integers(1, 6), moves=st.integers(1, 3), k_max=st.integers(0, 12))
def test_compiled_iteration_matches_numpy_reference(seed, p, k, m, moves, k_max):
    rng = np.random.default_rng(seed)
    N, n = 60, 15
    k_max = min(k_max, p)
    k = min(k, k_max)
    X = rng.normal(size=(N, p))
    y = X[:, 0] * 0.3 + rng.normal(size=N)
    rows = rng.choice(N, n, replace=False).astype(np.intp)
    theta = rng.normal(0, 0.2, p)
    order = rng.permutation(p).astype(np.int64)
    u = rng.random((m * moves, 4))
    z = rng.standard_normal(p)
    log_size = SpikeSlabPrior(max_size=k_max).log_size_table(p)
    args = (X, y, rows, theta, order, k, u, moves, k_max, N / n, log_size, 1.0, 0.05, 1e-3, 0.03, z)
    got = run_kernel(*args)
    ref = reference_update(X, y, rows, theta, order, k, u, moves, k_max, N / n, log_size, 1.0,
                           0.05, 1e-3, 0.03, z)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(got[1], ref[1])
    assert got[2] == ref[2]
    np.testing.assert_array_equal(got[3], ref[3])
    interpreted = run_kernel(*args, compiled=False)
    np.testing.assert_allclose(interpreted[0], got[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(interpreted[1], got[1])


def test_model_chain_leaves_the_conditional_model_posterior_invariant():
    # Detailed balance on a discrete toy: p = 3 variables, all 8 models enumerated. The
    # inclusion frequencies of a long chain must match the exact conditional probabilities
    # pi(gamma_j = 1 | theta, X_{n,N}) (SE about 0.002; tolerance 0.01).
    rng = np.random.default_rng(4)
    N, n, p = 400, 40, 3
    X = rng.normal(size=(N, p))
    y = X @ np.array([0.15, 0.05, 0.0]) + rng.normal(size=N)
    rows = np.arange(n, dtype=np.intp)
    theta = np.array([0.05, 0.03, -0.02])
    coef, slab, spike = N / n, 0.5, 0.04
    log_size = SpikeSlabPrior(slab_sd=slab, b=1.0).log_size_table(p)
    models = np.array([[(g >> j) & 1 for j in range(p)] for g in range(2**p)], dtype=bool)
    log_post = []
    for gamma in models:
        r = y[rows] - X[rows][:, gamma] @ theta[gamma]
        log_post.append(-0.5 * coef * r @ r + log_size[gamma.sum()]
                        + stats.norm.logpdf(theta[gamma], 0, slab).sum()
                        + stats.norm.logpdf(theta[~gamma], 0, spike).sum())
    weights = np.exp(np.array(log_post) - max(log_post))
    exact = weights @ models / weights.sum()
    assert np.all((exact > 0.1) & (exact < 0.9))  # a toy where every variable is uncertain
    steps = 300_000
    order = np.arange(p, dtype=np.int64)
    resid = np.empty(n)
    subsample_residuals(X, y, rows, theta, order, 0, resid)
    grad, counts = np.zeros(p), np.zeros(p, dtype=np.int64)
    model_chain(X, rows, theta, order, 0, rng.random((steps, 4)), 1, p, coef, log_size, slab,
                spike, resid, grad, counts)
    np.testing.assert_allclose(counts / steps, exact, atol=0.01)


@pytest.fixture(scope="module")
def small_study():
    """Song et al.'s design scaled down: N = 20,000, p = 201, rho = 0.5, 2 datasets."""
    out = []
    for d in range(2):
        X, y, beta = correlated_regression(20_000, 201, [1.0] * 5 + [-1.0] * 3, rng=300 + d)
        fit = esgld_select(X, y, 1.0, n=200, m=10, moves=10, step_size=2.5e-6, n_iter=3000,
                           burn_in=1000, rng=d)
        out.append((X, y, beta, fit))
    return out


def test_small_simulation_selects_exactly_the_true_predictors(small_study):
    for X, y, beta, fit in small_study:
        scores = fit.scores(beta)
        assert scores.fsr == 0 and scores.nsr == 0, scores
        np.testing.assert_array_equal(fit.selected, np.flatnonzero(beta))
        # estimates of the true coefficients close to the full-data least-squares fit
        ols = np.linalg.lstsq(X[:, :8], y, rcond=None)[0]
        se = 1 / math.sqrt(X.shape[0] * 0.5)  # sd of a coefficient, equicorrelated design
        assert np.max(np.abs(fit.beta[:8] - ols)) < 4 * se
        assert scores.mse0 < 1e-6
        assert fit.rows_read == 3000 * 200
        assert fit.samples.shape == (200, 201)


def test_equal_seeds_give_identical_runs():
    X, y, beta = correlated_regression(2000, 30, [1.0, -1.0], rng=0)
    runs = [esgld_select(X, y, 1.0, n=50, step_size=1e-5, n_iter=200, burn_in=50, rng=9)
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0].samples, runs[1].samples)
    np.testing.assert_array_equal(runs[0].inclusion, runs[1].inclusion)
    other = esgld_select(X, y, 1.0, n=50, step_size=1e-5, n_iter=200, burn_in=50, rng=10)
    assert not np.array_equal(other.samples, runs[0].samples)


def test_callers_arrays_are_not_modified():
    X, y, beta = correlated_regression(2000, 30, [1.0, -1.0], rng=0)
    theta0 = np.full(30, 0.01)
    copies = X.copy(), y.copy(), theta0.copy()
    esgld_select(X, y, 1.0, n=50, step_size=1e-5, n_iter=50, burn_in=10, theta0=theta0, rng=1)
    for before, after in zip(copies, (X, y, theta0)):
        np.testing.assert_array_equal(before, after)


def test_scores_follow_their_definitions():
    s = selection_scores([0, 1, 5], np.array([0.9, 0.0, 0.0, 0.0, 0.0, 0.2]),
                         np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0]))
    assert s.fsr == pytest.approx(1 / 3) and s.nsr == 0.0
    assert s.mse1 == pytest.approx((0.01 + 1.0) / 2) and s.mse0 == pytest.approx(0.04 / 4)
    assert selection_scores([], np.zeros(3), np.array([1.0, 0, 0])).nsr == 1.0


X_BAD, Y_BAD, _ = correlated_regression(100, 5, [1.0], rng=0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n": 101}, ValueError, r"n must be in \[1, 100\], got 101"),
        ({"n": 0}, ValueError, r"n must be in \[1, 100\], got 0"),
        ({"m": 0}, ValueError, r"m must be >= 1, got 0"),
        ({"moves": 0}, ValueError, r"moves must be >= 1, got 0"),
        ({"step_size": 0.0}, ValueError, r"step_size must be in \(0, inf\), got 0.0"),
        ({"step_size": -1e-6}, ValueError, r"step_size must be in \(0, inf\), got -1e-06"),
        ({"step_size": 1e-4, "spike_sd": 1e-3}, ValueError, r"step_size must be < 4 spike_sd\*\*2"),
        ({"burn_in": 10, "n_iter": 10}, ValueError, r"burn_in must be in \[0, 9\], got 10"),
        ({"theta0": np.zeros(4)}, ValueError, "theta0 must have p = 5 elements, got 4"),
        ({"prior": "spike"}, TypeError, "prior must be a SpikeSlabPrior"),
        ({"temperature": 0}, ValueError, r"temperature must be in \(0, inf\)"),
    ],
)
def test_bad_settings_are_refused(kwargs, error, match):
    settings = {"n": 10, "n_iter": 20, "burn_in": 5} | kwargs
    with pytest.raises(error, match=match):
        esgld_select(X_BAD, Y_BAD, 1.0, **settings)


def test_bad_data_are_refused():
    with pytest.raises(ValueError, match=r"y must have one value per row of X \(100\), got 99"):
        esgld_select(X_BAD, Y_BAD[:99], 1.0)
    X = X_BAD.copy()
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="X must be finite; row 3"):
        esgld_select(X, Y_BAD, 1.0)
    with pytest.raises(ValueError, match=r"slab_sd must be in \(0, inf\)"):
        SpikeSlabPrior(slab_sd=0.0)
