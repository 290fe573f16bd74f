"""The closed-form expected batch of the exact minibatch tests against simulation.

* The bound on ``E[phi_k]`` (hence ``E[B] = C E[phi]``) against a Monte Carlo average over
  the Gaussian ``u`` and ``Delta`` it assumes: never below it, and within 30% at d = 11.
* The growth with N: ``N^{(1-k)/2}``.
* Against a real chain: the mean Poisson rate of SMH-2 on a logistic regression lies within a
  factor 2 of the prediction from its own ``c_sum`` and Laplace covariance.
"""

import math

import numpy as np
import pytest

from design import exact_design, exact_expected_batch


def simulated_mean_phi(order, h, Sigma, n=200_000, seed=0):
    rng = np.random.default_rng(seed)
    L = np.linalg.cholesky(Sigma)
    u = rng.normal(size=(n, Sigma.shape[0])) @ L.T
    step = h * rng.normal(size=(n, Sigma.shape[0])) @ L.T
    nu, nv, ns = (np.linalg.norm(a, axis=1) for a in (u, u + step, step))
    if order == 0:
        return ns.mean()
    return (ns * 0.5 * (nu**order + nv**order)).mean()


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("h", [0.1, 0.72, 1.5])
def test_expected_batch_bounds_the_simulated_mean_and_is_close(order, h):
    rng = np.random.default_rng(order)
    A = rng.normal(size=(11, 11))
    Sigma = (A @ A.T / 11 + np.eye(11)) * 1e-4
    N, c_mean = 10**5, 0.7
    pred = exact_expected_batch(h, order=order, N=N, c_mean=c_mean, trace=np.trace(Sigma),
                                trace_sq=np.trace(Sigma @ Sigma))
    sim = N * c_mean * simulated_mean_phi(order, h, Sigma)
    assert sim <= pred * (1 + 1e-2)
    assert pred <= 1.3 * sim


def test_batch_grows_like_n_to_the_one_minus_order_over_two():
    for order, expo in [(0, 0.5), (1, 0.0), (2, -0.5)]:
        b = [exact_expected_batch(0.7, order=order, N=N, c_mean=1.0, trace=11 / N)
             for N in (1e5, 1e7)]
        assert math.isclose(b[1] / b[0], 100.0**expo, rel_tol=1e-12)
        des = exact_design(order=order, N=1e6, d=11, c_mean=1.0, trace=11e-6)
        assert des.growth_exponent == expo
    tuna = [exact_expected_batch(0.3, order=0, N=N, c_mean=1.0, trace=11 / N, chi=1e-3)
            for N in (1e5, 1e7)]
    assert 10 < tuna[1] / tuna[0] < 100  # between sqrt(N) and N


def test_design_scale_shrinks_when_rows_cost_acceptance():
    common = dict(order=1, N=1e5, d=11, c_mean=2.0, trace=50 / 1e5)
    mhss, smh = exact_design(**common, kappa=0.0), exact_design(**common, kappa=1.0)
    assert smh.h < mhss.h
    assert smh.expected_batch < mhss.expected_batch


def test_prediction_matches_a_real_smh_chain():
    from samplers import (ControlVariates, GaussianPrior, LogisticRegression, RandomWalk,
                          SMHTest, sample)

    rng = np.random.default_rng(3)
    N, d = 50_000, 6
    X = np.column_stack([np.ones(N), rng.normal(size=(N, d - 1))])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ (rng.normal(size=d) / np.sqrt(d))))).astype(float)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    Sigma = cv.laplace_covariance()
    h = 2.38 / math.sqrt(d)
    test = SMHTest(2)
    chain = sample(cv, test, RandomWalk(h * h * Sigma), cv.center.theta, 4000, rng=1)
    rem = test.prepare(cv).rem
    pred = exact_expected_batch(h, order=2, N=N, c_mean=rem.c_sum / N, trace=np.trace(Sigma),
                                trace_sq=np.trace(Sigma @ Sigma))
    realised = chain.stats["rate"].mean()
    assert 0.5 * pred < realised < 2.0 * pred, (realised, pred)


@pytest.mark.parametrize("kwargs, match", [
    (dict(h=0.0), "h must be > 0"),
    (dict(order=3), "order must be 0, 1 or 2"),
    (dict(trace=-1.0), "trace must be > 0"),
    (dict(chi=-1.0), "chi must be >= 0"),
    (dict(order=2, chi=1.0), "order 0"),
])
def test_bad_input(kwargs, match):
    args = dict(h=0.5, order=1, N=1000, c_mean=1.0, trace=1e-3) | kwargs
    h = args.pop("h")
    with pytest.raises(ValueError, match=match):
        exact_expected_batch(h, **args)
