"""Exact minibatch MH (SMH, TunaMH, MH-SS): Poisson rows, remainder bounds, exactness.

* The alias table and the Poisson batches against plain NumPy references and their laws.
* The per-row bounds ``|delta_i| <= c_i phi(theta, theta')`` on every row at many random
  pairs, for every model and order, with the residuals checked against an independent NumPy
  computation; a deliberately too-small bound is refused by a running chain.
* Exactness by closed form on a 4-row logistic regression: the acceptance probability of
  each test is ``min(1, exp(c + P)) E_s[min(1, prod_i rho_i^{s_i})]`` with the ``s_i``
  independent Poisson variables of the auxiliary law, enumerated (truncated where the
  Poisson tail is below 1e-15); for SMH this equals the product form
  ``min(1, exp(c + P)) prod_i min(1, exp(delta_i))``. The enumerated acceptance satisfies
  detailed balance with the exact posterior, and the real ``decide`` accepts at that rate
  (binomial 5-SE band).
* Statistical correctness: posterior mean and covariance of each test against exact MH on a
  logistic regression (N = 2,000, d = 5) and against the closed form on the Gaussian mean,
  within 5 Monte Carlo standard errors (ArviZ's ESS-based MCSE of both chains).
"""

import math
import warnings

import numpy as np
import pytest
from scipy import special, stats

from samplers import (
    AliasTable,
    BoundViolation,
    ControlVariates,
    ExactTest,
    GaussianMean,
    GaussianMixture,
    GaussianPrior,
    Langevin,
    LinearRegression,
    LogisticRegression,
    PoissonBatches,
    RandomWalk,
    RobustRegression,
    ScalableSubsamplingTest,
    SMHTest,
    TaylorRemainder,
    TunaMHTest,
    sample,
)
from samplers._poisson import alias_rows, uniform_rows
from samplers._view import check_model
from samplers.models import _glm

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


# --- Poisson minibatches ----------------------------------------------------------------------


def alias_rows_numpy(prob, alias, u):
    """Independent NumPy version of the alias look-up."""
    n = prob.shape[0]
    j = np.minimum((u[0::2] * n).astype(np.intp), n - 1)
    return np.where(u[1::2] < prob[j], j, alias[j])


def test_alias_kernel_matches_numpy_reference_and_its_python_function():
    w = np.random.default_rng(0).gamma(0.5, size=257)
    table = AliasTable(w)
    u = np.random.default_rng(1).random(2 * 5000)
    out = np.empty(5000, dtype=np.intp)
    alias_rows(table.prob, table.alias, u, out)
    np.testing.assert_array_equal(out, alias_rows_numpy(table.prob, table.alias, u))
    ref = np.empty_like(out)
    alias_rows.py_func(table.prob, table.alias, u, ref)
    np.testing.assert_array_equal(out, ref)
    uni = np.empty(5000, dtype=np.intp)
    uniform_rows(257, u[:5000], uni)
    np.testing.assert_array_equal(uni, np.minimum((u[:5000] * 257).astype(np.intp), 256))


def test_alias_table_draws_rows_in_proportion_to_weights():
    w = np.array([0.0, 1.0, 2.0, 3.0, 0.5, 10.0])
    table = AliasTable(w)
    # The table is a mixture of columns: its exact law, from prob and alias, equals w / sum w.
    law = table.prob / w.size
    np.add.at(law, table.alias, (1.0 - table.prob) / w.size)
    np.testing.assert_allclose(law, w / w.sum(), atol=1e-15)
    n = 200_000
    counts = np.bincount(table.draw(np.random.default_rng(2), n), minlength=w.size)
    p = w / w.sum()
    assert np.all(np.abs(counts - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1e-9)
    assert counts[0] == 0


def test_poisson_batches_size_law_and_reproducibility():
    batches = PoissonBatches(50, np.arange(1.0, 51.0))
    sizes = np.array([batches.draw(np.random.default_rng(s), 2.5).shape[0] for s in range(4000)])
    assert abs(sizes.mean() - 2.5) < 5 * math.sqrt(2.5 / 4000)
    assert abs(sizes.var() - 2.5) < 0.3
    a = batches.draw(np.random.default_rng(9), 40.0)
    b = batches.draw(np.random.default_rng(9), 40.0)
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 50


@pytest.mark.parametrize("weights, match", [
    (np.array([1.0, -1.0]), "finite and >= 0"),
    (np.zeros(3), "positive sum"),
    (np.array([1.0, np.nan]), "finite"),
])
def test_alias_table_refuses_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        AliasTable(weights)


# --- per-row remainder bounds -----------------------------------------------------------------


def logistic_model(N, d, seed, temperature=1.0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, d - 1))])
    beta = np.linspace(0.5, -0.5, d)
    y = (rng.random(N) < special.expit(X @ beta)).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0), temperature=temperature)


def bound_models():
    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(400), rng.normal(size=(400, 2))])
    yl = X @ [0.3, -1.0, 2.0] + rng.normal(0, 0.7, 400)
    yr = X @ [0.3, -1.0, 2.0] + rng.standard_t(4, 400)
    return [
        (logistic_model(400, 3, 4), (0, 1, 2)),
        (logistic_model(400, 3, 5, temperature=2.0), (0, 1, 2)),
        (LinearRegression(X, yl, noise_sd=0.7), (1, 2)),
        (RobustRegression(X, yr, df=4.0, scale=1.0), (0, 1, 2)),
        (GaussianMean(rng.normal(0.3, 2.0, 400), sigma=2.0), (1, 2)),
    ]


@pytest.mark.parametrize("model, orders", bound_models(),
                         ids=["logistic", "logistic-K2", "linear", "robust", "gaussian-mean"])
def test_bounds_hold_on_every_row_at_random_pairs(model, orders):
    rng = np.random.default_rng(11)
    idx = np.arange(model.N)
    for order in orders:
        rem = TaylorRemainder(model, order)
        worst = 0.0
        for _ in range(100):
            scale = 10.0 ** rng.uniform(-3, 0.5)
            theta = rem.center + scale * rng.normal(size=model.dim)
            theta_new = theta + scale * 10.0 ** rng.uniform(-1, 0.5) * rng.normal(size=model.dim)
            delta, c = rem.residuals(theta, theta_new, idx)
            bound = c * rem.phi(theta, theta_new)
            assert np.all(np.abs(delta) <= bound * (1 + 1e-9) + 1e-11), (order, theta, theta_new)
            # the residuals add up with the proxy to the true log-likelihood ratio
            full = model.loglik_ratio(theta, theta_new, idx).sum()
            assert math.isclose(delta.sum() + rem.proxy(theta, theta_new), full,
                                rel_tol=1e-8, abs_tol=1e-8)
            if bound.max() > 0:
                worst = max(worst, float(np.max(np.abs(delta) / np.where(bound > 0, bound, 1))))
        if rem.c_sum > 0:  # not vacuous: some row comes within a factor 10 of its bound
            assert worst > 0.1, (order, worst)
        assert math.isclose(rem.c_sum, rem.c.sum()) and rem.c_max == rem.c.max()


def test_logistic_residuals_match_an_independent_numpy_computation():
    model = logistic_model(300, 4, 6)
    rem = TaylorRemainder(model, 2)
    rng = np.random.default_rng(1)
    theta = rem.center + 0.1 * rng.normal(size=4)
    theta_new = theta + 0.05 * rng.normal(size=4)
    X, s = model.X, 2 * model.y - 1
    a, a_new, a_hat = X @ theta, X @ theta_new, X @ rem.center
    p = special.expit(-s * a_hat)
    g1, g2 = s * p, -p * (1 - p)
    ref = (special.log_expit(s * a_new) - special.log_expit(s * a) - g1 * (a_new - a)
           - 0.5 * g2 * ((a_new - a_hat) ** 2 - (a - a_hat) ** 2))
    delta, c = rem.residuals(theta, theta_new, np.arange(300))
    np.testing.assert_allclose(delta, ref, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(c, np.linalg.norm(X, axis=1) ** 3 / (6 * np.sqrt(3)) / 2)


def test_a_too_small_bound_is_refused_by_a_running_chain(monkeypatch):
    model = logistic_model(2000, 3, 7)
    # a third-derivative bound 20 times too small: rows read soon show residuals above it
    wrong = _glm._REGISTRY[LogisticRegression]._replace(m3=lambda m: 0.05 * m._inv_temp)
    monkeypatch.setitem(_glm._REGISTRY, LogisticRegression, wrong)
    start = ControlVariates(model).center.theta + 0.1
    with pytest.raises(BoundViolation, match="exceeds its bound"):
        sample(model, SMHTest(order=2), RandomWalk(0.05), start, 2000, rng=0)
    monkeypatch.undo()  # the true bound: the same chain runs
    chain = sample(model, SMHTest(order=2), RandomWalk(0.05), start, 2000, rng=0)
    assert chain.stats["n_used"].sum() > 0


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("make, exc, match", [
    (lambda: TunaMHTest(chi=0.0), ValueError, "chi must be > 0"),
    (lambda: TunaMHTest(chi=-1.0), ValueError, "chi must be > 0"),
    (lambda: TunaMHTest(chi="a"), TypeError, "chi must be a real number"),
    (lambda: SMHTest(order=3), ValueError, "order must be one of"),
    (lambda: SMHTest(order=0), ValueError, "order must be one of"),
    (lambda: ScalableSubsamplingTest(order=True), ValueError, "order must be one of"),
    (lambda: ScalableSubsamplingTest(chi=-0.1), ValueError, "chi must be in"),
    (lambda: ScalableSubsamplingTest(gamma=1.5), ValueError, "gamma must be in"),
    (lambda: SMHTest(sampling="alias"), ValueError, "sampling must be"),
])
def test_bad_settings_are_refused(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_models_without_bounds_are_refused():
    x = np.random.default_rng(0).normal(size=200)
    with pytest.raises(TypeError, match="per-row remainder bounds"):
        sample(GaussianMixture(x), SMHTest(2), RandomWalk(0.1), [0.0, 0.0], 5, rng=0)

    class UserModel:
        N = 100

        def loglik(self, theta, idx):
            return -0.5 * (theta[0] - 1.0) ** 2 * np.ones(len(idx))

        def logprior(self, theta):
            return 0.0

    with pytest.raises(TypeError, match="per-row remainder bounds"):
        sample(UserModel(), ScalableSubsamplingTest(1), RandomWalk(0.1), [0.0], 5, rng=0)
    with pytest.raises(ValueError, match="order=0 needs a bounded derivative 1"):
        sample(GaussianMean(x), TunaMHTest(1e-3), RandomWalk(0.1), [0.0], 5, rng=0)


def test_a_centre_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="center must have 3 element"):
        sample(logistic_model(100, 3, 1), SMHTest(2, center=[0.0, 0.0]), RandomWalk(0.1),
               np.zeros(3), 5, rng=0)


# --- exactness by enumeration on a tiny problem -----------------------------------------------


def poisson_factor(delta, c, phi, chi, gamma, C):
    """``E_s[min(1, prod_i rho_i^{s_i})]`` by enumerating independent Poisson s_i (a grid
    over each row's counts up to where its Poisson tail is below 1e-16)."""
    b = c * phi
    lam = chi * (C * phi) ** 2 * c / C
    pos, neg = np.maximum(delta, 0), np.maximum(-delta, 0)
    fwd = np.clip(gamma * neg + (1 - gamma) * (b - pos), 0, b)
    bwd = np.clip(fwd + delta, 0, b)
    rates = lam + fwd
    with np.errstate(divide="ignore"):
        log_rho = np.log(lam + bwd) - np.log(lam + fwd)
    prob = np.ones(())
    log_ratio = np.zeros(())
    for r, lr in zip(rates, log_rho):
        s = np.arange(int(stats.poisson.isf(1e-16, r)) + 2 if r > 0 else 1)
        prob = prob[..., None] * stats.poisson.pmf(s, r)
        with np.errstate(invalid="ignore"):
            log_ratio = log_ratio[..., None] + np.where(s > 0, s * lr, 0.0)
    return float(np.sum(prob * np.exp(np.minimum(log_ratio, 0.0))))


def closed_form_acceptance(test, model, theta, theta_new):
    """The acceptance probability of ``test`` for this pair (flat proposal ratio)."""
    prep = test.prepare(model)
    rem = prep.rem
    phi = rem.phi(theta, theta_new)
    rate = test.chi * (prep.C * phi) ** 2 + prep.C * phi
    log_post = (model.loglik_ratio(theta, theta_new, np.arange(model.N)).sum()
                + model.logprior(theta_new) - model.logprior(theta))
    if rate >= model.N:
        return min(1.0, math.exp(log_post)), True
    c_const = model.logprior(theta_new) - model.logprior(theta)
    det = min(1.0, math.exp(min(c_const + rem.proxy(theta, theta_new), 0.0)))
    delta, c = rem.residuals(theta, theta_new, np.arange(model.N))
    if test.sampling == "uniform":
        c = np.full_like(c, rem.c_max)
    return det * poisson_factor(delta, c, phi, test.chi, test.gamma, prep.C), False


TINY = logistic_model(4, 2, 21)
TINY_CENTRE = ControlVariates(TINY).center.theta + np.array([0.05, -0.03])
EXACT_TESTS = [
    SMHTest(1, center=TINY_CENTRE),
    SMHTest(2, center=TINY_CENTRE),
    SMHTest(2, center=TINY_CENTRE, sampling="uniform"),
    ScalableSubsamplingTest(1, center=TINY_CENTRE),
    ScalableSubsamplingTest(2, center=TINY_CENTRE),
    ScalableSubsamplingTest(2, center=TINY_CENTRE, chi=0.5, gamma=0.3),
    TunaMHTest(chi=0.05),
]


def tiny_pairs():
    rng = np.random.default_rng(5)
    for _ in range(3):
        theta = TINY_CENTRE + 0.6 * rng.normal(size=2)
        yield theta, theta + 0.5 * rng.normal(size=2)


@pytest.mark.parametrize("test", EXACT_TESTS, ids=repr)
def test_enumerated_acceptance_satisfies_detailed_balance(test):
    for theta, theta_new in tiny_pairs():
        fwd, full = closed_form_acceptance(test, TINY, theta, theta_new)
        bwd, _ = closed_form_acceptance(test, TINY, theta_new, theta)
        log_post = lambda t: TINY.loglik(t, np.arange(4)).sum() + TINY.logprior(t)  # noqa: E731
        assert math.isclose(math.exp(log_post(theta)) * fwd,
                            math.exp(log_post(theta_new)) * bwd, rel_tol=1e-9), (fwd, bwd, full)


def test_smh_acceptance_is_the_factorised_product():
    test = SMHTest(2, center=TINY_CENTRE)
    rem = test.prepare(TINY).rem
    for theta, theta_new in tiny_pairs():
        alpha, full = closed_form_acceptance(test, TINY, theta, theta_new)
        assert not full
        delta, _ = rem.residuals(theta, theta_new, np.arange(4))
        c = TINY.logprior(theta_new) - TINY.logprior(theta) + rem.proxy(theta, theta_new)
        product = min(1.0, math.exp(min(c, 0))) * np.prod(np.minimum(1.0, np.exp(delta)))
        assert math.isclose(alpha, product, rel_tol=1e-12)


@pytest.mark.parametrize("test", EXACT_TESTS, ids=repr)
def test_decide_accepts_at_the_enumerated_rate(test):
    view, _ = check_model(TINY, TINY_CENTRE)
    test.check(view)
    rng = np.random.default_rng(17)
    n = 10_000
    for theta, theta_new in tiny_pairs():
        alpha, full = closed_form_acceptance(test, TINY, theta, theta_new)
        log_const = TINY.logprior(theta_new) - TINY.logprior(theta)
        decisions = [test.decide(rng, view, None, theta, theta_new, log_const) for _ in range(n)]
        rate = np.mean([d for d, _ in decisions])
        assert abs(rate - alpha) <= 5 * math.sqrt(alpha * (1 - alpha) / n) + 1e-12, (rate, alpha)
        assert all(info.full_data == full for _, info in decisions)


# --- statistical correctness ------------------------------------------------------------------


def mcse_band(chain):
    idata = chain.to_arviz()
    return (az.mcse(idata, method="mean").theta.values, az.mcse(idata, method="sd").theta.values)


LOGISTIC = logistic_model(2000, 5, 2020)
LOGISTIC_CV = ControlVariates(LOGISTIC)
LAPLACE = LOGISTIC_CV.laplace_covariance()
PROPOSAL = RandomWalk((2.38**2 / 5) * LAPLACE)


@pytest.fixture(scope="module")
def exact_chain():
    return sample(LOGISTIC, ExactTest(), PROPOSAL, LOGISTIC_CV.center.theta, 20_000, rng=1)


@pytest.mark.slow
@pytest.mark.parametrize("test", [SMHTest(1), SMHTest(2), ScalableSubsamplingTest(1),
                                  ScalableSubsamplingTest(2), TunaMHTest(chi=1e-3)], ids=repr)
def test_logistic_posterior_matches_exact_mh(test, exact_chain):
    steps = 20_000
    proposal = PROPOSAL if not isinstance(test, TunaMHTest) else RandomWalk(0.3**2 * LAPLACE)
    chain = sample(LOGISTIC, test, proposal, LOGISTIC_CV.center.theta, steps, rng=2)
    m_ref, s_ref = mcse_band(exact_chain)
    m, s = mcse_band(chain)
    ref, out = exact_chain.samples, chain.samples
    tol_mean = 5 * np.hypot(m, m_ref)
    assert np.all(np.abs(out.mean(0) - ref.mean(0)) < tol_mean), (out.mean(0), ref.mean(0))
    assert np.all(np.abs(out.std(0) - ref.std(0)) < 5 * np.hypot(s, s_ref))
    # correlations: within 5 SE of a correlation estimate from the smaller ESS
    ess = float(np.min(az.ess(chain.to_arviz()).theta.values))
    ess_ref = float(np.min(az.ess(exact_chain.to_arviz()).theta.values))
    corr, corr_ref = np.corrcoef(out.T), np.corrcoef(ref.T)
    se = (1 - corr_ref**2) * np.sqrt(1 / ess + 1 / ess_ref)
    assert np.all(np.abs(corr - corr_ref) < 5 * se + 1e-12)
    assert chain.stats["n_used"].mean() < 0.05 * LOGISTIC.N or isinstance(test, TunaMHTest)


@pytest.mark.parametrize("test", [SMHTest(1), ScalableSubsamplingTest(1),
                                  SMHTest(1, sampling="uniform")], ids=repr)
def test_gaussian_mean_matches_closed_form(test):
    x = np.random.default_rng(2014).normal(0.5, 1.0, 50_000)
    model = GaussianMean(x, sigma=1.0, prior=GaussianPrior(0.0, 10.0))
    mean, sd = model.posterior()
    chain = sample(model, test, RandomWalk(2.4 * sd), [mean], 20_000, rng=3)
    m, s = mcse_band(chain)
    assert abs(chain.samples.mean() - mean) < 5 * m[0]
    assert abs(chain.samples.std() - sd) < 5 * s[0]
    assert chain.stats["n_used"].mean() < 20


def test_an_asymmetric_proposal_enters_through_the_deterministic_factor():
    # None of the three tests needs a symmetric proposal: log q(theta|theta') / q(theta'|theta)
    # is part of the deterministic factor. MALA with SMH-1 still targets the closed form.
    x = np.random.default_rng(7).normal(0.5, 1.0, 50_000)
    model = GaussianMean(x, sigma=1.0, prior=GaussianPrior(0.0, 10.0))
    mean, sd = model.posterior()
    chain = sample(model, SMHTest(1), Langevin((1.5 * sd) ** 2), [mean], 6000, rng=5)
    m, s = mcse_band(chain)
    assert abs(chain.samples.mean() - mean) < 5 * m[0]
    assert abs(chain.samples.std() - sd) < 5 * s[0]


def test_equal_seeds_give_identical_chains():
    test = ScalableSubsamplingTest(1)
    a = sample(LOGISTIC, test, PROPOSAL, LOGISTIC_CV.center.theta, 300, rng=8)
    b = sample(LOGISTIC, test, PROPOSAL, LOGISTIC_CV.center.theta, 300, rng=8)
    np.testing.assert_array_equal(a.samples, b.samples)
    np.testing.assert_array_equal(a.stats["n_used"], b.stats["n_used"])
    assert a.stats["n_used"].sum() > 0


def test_a_prepared_test_pickles_with_its_bounds_not_its_tables():
    # deepcopy goes through the same __reduce_ex__ / __getstate__ as pickle, without looking the
    # class up by name (the doctest collection may import samplers.mhtests.poisson a second time)
    import copy

    test = SMHTest(2)
    prep = test.prepare(LOGISTIC)
    state = test.__getstate__()["_prepared"]        # (model, c_i) only: no alias table, loop
    assert len(state) == 1 and state[0][0] is LOGISTIC and state[0][1] is prep.rem.c
    clone = copy.deepcopy(test)
    (key, (model, c)), = clone._prepared.items()    # keyed by the copied model, not prepared
    assert clone == test and key == ("c", id(model)) and model is not LOGISTIC
    np.testing.assert_array_equal(c, prep.rem.c)
    again = copy.deepcopy(clone)                    # a second hop keeps the carried bounds
    (key2, (model2, c2)), = again._prepared.items()
    assert key2 == ("c", id(model2)) and model2 is not model
    np.testing.assert_array_equal(c2, prep.rem.c)
    a = sample(LOGISTIC, test, PROPOSAL, LOGISTIC_CV.center.theta, 200, rng=3)
    b = sample(LOGISTIC, clone, PROPOSAL, LOGISTIC_CV.center.theta, 200, rng=3)
    np.testing.assert_array_equal(a.samples, b.samples)


def test_a_control_variates_model_gives_the_same_chain_as_the_plain_model():
    plain = sample(LOGISTIC, SMHTest(2), PROPOSAL, LOGISTIC_CV.center.theta, 300, rng=4)
    wrapped = sample(LOGISTIC_CV, SMHTest(2), PROPOSAL, LOGISTIC_CV.center.theta, 300, rng=4)
    np.testing.assert_array_equal(plain.samples, wrapped.samples)
    with pytest.raises(ValueError, match="order must match"):
        sample(LOGISTIC_CV, SMHTest(1), PROPOSAL, LOGISTIC_CV.center.theta, 3, rng=4)
    with pytest.raises(ValueError, match="center must be None for a ControlVariates model"):
        sample(LOGISTIC_CV, SMHTest(2, center=np.zeros(5)), PROPOSAL, LOGISTIC_CV.center.theta,
               3, rng=4)
