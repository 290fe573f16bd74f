"""Plain SGLD as a kernel of the shared chain loop: schedules, temperature, exact AR(1) law."""

import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from samplers import (
    SGLD,
    AcceptAll,
    AustereTest,
    ConstantStep,
    GaussianMean,
    GaussianPrior,
    IndexSampler,
    Langevin,
    PolynomialDecay,
    State,
    mh_step,
    sample,
    sample_chains,
)
from samplers._view import check_model

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

N = 20_000
X = np.random.default_rng(7).normal(0.3, 1.0, N)
MODEL = GaussianMean(X, sigma=1.0, prior=GaussianPrior(0.0, 10.0))


class FlatView:
    """A model view with zero gradient: an SGLD move is then pure noise sqrt(h_t tau) z."""

    N = 100

    def grad_logprior(self, theta):
        return np.zeros_like(theta)

    def grad(self, theta, idx):
        return np.zeros((idx.shape[0], theta.shape[0]))


@pytest.mark.parametrize("schedule", [ConstantStep(1e-3), PolynomialDecay(0.5, 3.0, 0.6)])
@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_move_uses_the_step_of_its_iteration_and_the_temperature(schedule, temperature):
    proposal = SGLD(schedule, batch_size=10, temperature=temperature)
    for t in (0, 1, 17):
        rng, twin = np.random.default_rng(t), np.random.default_rng(t)
        batches = IndexSampler(FlatView.N, rng)
        theta_new, log_q, pstate, n_grad = proposal.propose(rng, FlatView(), batches,
                                                            np.zeros(3), None, iteration=t)
        twin.random(10)  # the minibatch draw
        expected = math.sqrt(schedule(t) * temperature) * twin.standard_normal(3)
        np.testing.assert_allclose(theta_new, expected, rtol=1e-15)
        assert (log_q, pstate, n_grad) == (0.0, None, 10)


def test_chain_loop_counts_iterations_for_schedules():
    view, theta = check_model(MODEL, [0.3])
    rng = np.random.default_rng(0)
    state = State(theta, MODEL.logprior(theta), None)
    for expected in range(1, 4):
        state, info = mh_step(rng, state, view, AcceptAll(), SGLD(1e-6, 50), IndexSampler(N, rng))
        assert state.iteration == expected and info.accepted and info.test.n_used == 0


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_constant_step_sgld_has_the_stationary_law_of_its_ar1_recursion(temperature):
    # For a Gaussian mean with known sigma the SGLD step is linear:
    #   theta' = theta + (h/2)(b - H theta + xi) + sqrt(h tau) z,  H = N/sigma^2 + 1/s0^2,
    # with minibatch noise xi of variance V = N^2/n (1 - (n-1)/(N-1)) var(x) (rows drawn
    # without replacement), so theta is AR(1) with mean b/H (the posterior mean) and variance
    # (h^2 V/4 + h tau) / (1 - (1 - hH/2)^2). Checked within 5 Monte Carlo SEs.
    n, H = 200, N + 1 / 100.0
    h = 0.2 / H
    chain = sample(MODEL, AcceptAll(), SGLD(h, batch_size=n, temperature=temperature),
                   [X.mean()], 20_000, rng=3)
    post_mean, _ = MODEL.posterior()
    V = N**2 / n * (1 - (n - 1) / (N - 1)) * X.var()
    sd = math.sqrt((h * h * V / 4 + h * temperature) / (1 - (1 - h * H / 2) ** 2))
    idata = chain.to_arviz()
    s = chain.samples[:, 0]
    assert abs(s.mean() - post_mean) < 5 * float(az.mcse(idata, method="mean").theta.values[0])
    assert abs(s.std() - sd) < 5 * float(az.mcse(idata, method="sd").theta.values[0])
    assert chain.acceptance_rate == 1.0 and chain.stats["n_used"].sum() == 0
    assert np.all(chain.stats["n_grad"] == n)


def test_decaying_step_chains_follow_the_exact_time_varying_law():
    # With a schedule h_t the same linear recursion has a time-varying law: from theta_0,
    #   m_{t+1} = m_t + (h_t/2)(N xbar - H m_t),
    #   v_{t+1} = (1 - h_t H/2)^2 v_t + h_t^2 V/4 + h_t tau.
    # Across 64 independent chains theta_T must match (m_T, v_T) within 5 SEs.
    n, H, T, k = 100, N + 1 / 100.0, 300, 64
    schedule = PolynomialDecay(a=0.6 / H, b=1.0, gamma=0.55)
    V = N**2 / n * (1 - (n - 1) / (N - 1)) * X.var()
    post_mean, post_sd = MODEL.posterior()
    m, v = post_mean + 30 * post_sd, 0.0
    for t in range(T):
        h = schedule(t)
        m, v = m + h / 2 * (N * X.mean() - H * m), (1 - h * H / 2) ** 2 * v + h * h * V / 4 + h
    with ThreadPoolExecutor(2) as pool:
        chains = sample_chains(MODEL, AcceptAll(), SGLD(schedule, batch_size=n),
                               [post_mean + 30 * post_sd], T, n_chains=k, rng=5, executor=pool)
    last = chains.samples[:, -1, 0]
    assert abs(last.mean() - m) < 5 * math.sqrt(v / k)
    assert abs(last.var(ddof=1) - v) < 5 * v * math.sqrt(2 / (k - 1))


def test_equal_seeds_give_identical_sgld_chains():
    runs = [sample(MODEL, AcceptAll(), SGLD(1e-5, 64), [0.3], 300, rng=11) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].samples, runs[1].samples)
    other = sample(MODEL, AcceptAll(), SGLD(1e-5, 64), [0.3], 300, rng=12)
    assert not np.array_equal(other.samples, runs[0].samples)


def test_sgld_cannot_be_followed_by_an_mh_test_but_langevin_can():
    with pytest.raises(TypeError, match="SGLD has no reverse proposal density.*Langevin"):
        sample(MODEL, AustereTest(m=500), SGLD(1e-5, 100), [0.3], 5, rng=0)
    # the Langevin proposal without correction is allowed (it is simply uncorrected MALA)
    assert sample(MODEL, AcceptAll(), Langevin(1e-5, 100), [0.3], 5, rng=0).acceptance_rate == 1


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: SGLD(step_size=0.0), ValueError, r"step_size must be in \(0, inf\), got 0.0"),
        (lambda: SGLD(step_size=-1e-3), ValueError, r"step_size must be in \(0, inf\), got -0.001"),
        (lambda: SGLD(step_size="1e-3"), TypeError, "step_size must be a positive number or a"),
        (lambda: SGLD(batch_size=0), ValueError, r"batch_size must be >= 1, got 0"),
        (lambda: SGLD(temperature=0), ValueError, r"temperature must be in \(0, inf\), got 0"),
        (lambda: ConstantStep(math.inf), ValueError, r"step_size must be in \(0, inf\), got inf"),
        (lambda: PolynomialDecay(a=0.0), ValueError, r"a must be in \(0, inf\), got 0.0"),
        (lambda: PolynomialDecay(a=1.0, b=0.0), ValueError, r"b must be in \(0, inf\), got 0.0"),
        (lambda: PolynomialDecay(a=1.0, gamma=1.5), ValueError, r"gamma must be in \(0, 1\], got 1.5"),
    ],
)
def test_bad_settings_are_refused(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_batch_larger_than_data_is_refused():
    with pytest.raises(ValueError, match=f"batch_size must be <= N = {N}, got {N + 1}"):
        sample(MODEL, AcceptAll(), SGLD(1e-5, N + 1), [0.3], 5, rng=0)


def test_model_without_gradients_is_refused():
    class NoGrad:
        N = 10

        def loglik(self, theta, idx):
            return np.zeros(len(idx))

        def logprior(self, theta):
            return 0.0

    with pytest.raises(TypeError, match="SGLD needs model.grad_loglik and model.grad_logprior"):
        sample(NoGrad(), AcceptAll(), SGLD(1e-5, 5), [0.0], 5, rng=0)
