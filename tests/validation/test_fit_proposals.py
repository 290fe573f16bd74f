"""fit's proposal by how well the Laplace approximation fits (PSIS's Pareto-k), and the ESS per
step of the independence sampler predicted from the trial draws' importance weights.

Reference posteriors are independent of every sampler: importance sampling with 200,000
draws of a wide multivariate t and exact full-data weights (the weights' ESS is checked).
"""

import warnings

import numpy as np
import pytest

from samplers import ExactTest, GaussianPrior, LogisticRegression, import_arviz, sample
from validation import fit
from validation.workflow import route as routes
from validation.workflow import steps


def separated_logistic():
    """N = 300, an intercept, a normal covariate and a binary one equal to 1 in 3 rows, all
    with y = 1 (quasi-separation): the binary coefficient's posterior is bounded only by the
    prior (sd 10), strongly right-skewed around a mode near 6 with Laplace sd 3.8."""
    rng = np.random.default_rng(40)
    x = rng.normal(size=300)
    rare = np.zeros(300)
    rare[rng.choice(300, 3, replace=False)] = 1.0
    y = (rng.random(300) < 1 / (1 + np.exp(-(0.8 * x - 1.0)))).astype(float)
    y[rare == 1] = 1.0
    return LogisticRegression(np.column_stack([x, rare, np.ones(300)]), y,
                              prior=GaussianPrior(0.0, 10.0))


def is_reference(model, mode, cov, n=200_000, seed=0):
    """Posterior mean and sd by importance sampling from a t_3 at the mode, scale 2 x Laplace."""
    from scipy import stats

    q = stats.multivariate_t(loc=mode, shape=4.0 * cov, df=3.0, seed=seed)
    th = q.rvs(n)
    s = 2 * model.y - 1
    ll = np.concatenate([-np.logaddexp(0.0, -s[None, :] * (th[a:a + 10_000] @ model.X.T)).sum(1)
                         for a in range(0, n, 10_000)])
    logw = ll - 0.5 * np.sum(th ** 2, axis=1) / 100.0 - q.logpdf(th)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    assert 1.0 / np.sum(w ** 2) > 10_000                  # the reference is itself reliable
    mean = w @ th
    return mean, np.sqrt(w @ (th - mean) ** 2)


@pytest.fixture(scope="module")
def skewed():
    return separated_logistic()


def _ess(x):
    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([float(az.ess(x[:, :, j], method="bulk")) for j in range(x.shape[2])])


def test_a_skewed_posterior_makes_fit_avoid_the_plain_gaussian(skewed):
    idata = fit(skewed, draws=3000, n_trial=40, parallel=False, rng=0)
    a = idata.posterior.attrs
    gauss = a["proposals_tried"].split(";")[0].split()
    assert gauss[0] == "independence" and float(gauss[2]) > steps.K_GOOD
    assert a["proposal"] in ("t", "mixture", "walk") and a["proposal"] in a["route"]
    assert "PSIS: k <= 0.5 good, <= 0.7 ok, above bad" in a["explanation"]
    # and the posterior it samples is right: mean and sd within 5 MCSE of the reference
    mean, sd = is_reference(skewed, np.array(a["center"]),
                            steps.mode_and_proxy(skewed).covariance)
    x = idata.posterior.theta.values
    ess = _ess(x)
    s = x.reshape(-1, 3)
    np.testing.assert_array_less(np.abs(s.mean(axis=0) - mean), 5 * sd / np.sqrt(ess))
    np.testing.assert_array_less(np.abs(s.std(axis=0) / sd - 1), 5 / np.sqrt(2 * ess))


@pytest.mark.parametrize("kind", ["t", "mixture"])
def test_a_forced_heavy_tailed_proposal_runs_and_is_exact(skewed, kind):
    idata = fit(skewed, draws=3000, route=f"exact/{kind}", n_trial=40, parallel=False, rng=1)
    a = idata.posterior.attrs
    assert a["route"] == f"exact / {kind}" and a["proposal"] == kind
    assert 0.1 < a["acceptance_rate"] < 0.95
    mean, sd = is_reference(skewed, np.array(a["center"]),
                            steps.mode_and_proxy(skewed).covariance)
    x = idata.posterior.theta.values
    ess = _ess(x)
    s = x.reshape(-1, 3)
    np.testing.assert_array_less(np.abs(s.mean(axis=0) - mean), 5 * sd / np.sqrt(ess))


def test_the_ladder_and_its_thresholds(skewed):
    """Gaussian k-hat + se <= 0.5 (or sd + se <= 0.25): the Gaussian; k-hat + se in
    (0.5, 0.7]: the t, measured on its own draws, if it fits and costs at most 1/T_PRICE in
    ESS per step, else the Gaussian if the t fits, else as above 0.7: the mixture if it fits,
    else the walk (forced choices skip the ladder). The draws are MAX_DRAWS already, so no
    more are drawn and the values set here decide (k-hat's se there is about 0.15)."""
    px = steps.mode_and_proxy(skewed)
    draws = steps.laplace_draws(px, steps.MAX_DRAWS - 1, rng=0)

    def at(k, spread=1.0, ess=draws.ess_per_step):
        lw = draws.log_weights * spread / np.std(draws.log_weights)
        return steps.LaplaceDraws(draws.thetas, lw, draws.trial, k, draws.acceptance,
                                  draws.seconds, ess)

    assert steps.choose_proposal(px, at(0.2), rng=1).kind == "independence"
    assert steps.choose_proposal(px, at(0.9, spread=0.2), rng=1).kind == "independence"
    assert steps.choose_proposal(px, at(0.45), rng=1).tried[0][5] is False   # 0.45 + se > 0.5
    ok = steps.choose_proposal(px, at(0.45, ess=1e-3), rng=1)     # the t is cheap enough
    assert [t[0] for t in ok.tried][:2] == ["independence", "t"]
    t_fits = ok.tried[1][5]
    assert ok.kind == "t" if t_fits else ok.tried[2][0] == "mixture"
    dear = steps.choose_proposal(px, at(0.45, ess=1.0), rng=1)    # the t costs over 2x
    if t_fits:
        assert dear.kind == "independence" and "the Gaussian kept" in dear.lines[0]
        assert dear.draws.kind == "independence"
    bad = steps.choose_proposal(px, at(0.9), rng=1)
    assert [t[0] for t in bad.tried] == ["independence", "mixture"]
    assert bad.kind == ("mixture" if bad.tried[1][5] else "walk")
    assert bad.kind == "walk" or bad.draws.kind == "mixture"
    for kind in steps.PROPOSAL_KINDS:
        forced = steps.choose_proposal(px, at(0.9), proposal=kind, rng=1)
        assert forced.kind == kind and forced.tried == ()


def test_pareto_k_se_matches_the_spread_of_k_hat():
    """k-hat's standard error against its sd over 40 sets of n weights with a known tail
    (lognormal log weights with sd 0.5 and Pareto weights with k = 0.6): within a factor
    1.6 at 41 and 656 weights (the sd of 40 values is itself 11% noisy)."""
    rng = np.random.default_rng(3)
    for make in (lambda n: 0.5 * rng.normal(size=n), lambda n: np.log(rng.pareto(1 / 0.6, n))):
        for n in (41, 656):
            ks = np.array([steps.pareto_k(make(n)) for _ in range(40)])
            se = np.mean([steps.pareto_k_se(k, n) for k in ks])
            assert 1 / 1.6 < se / ks.std() < 1.6, (n, se, ks.std())


def test_more_draws_continue_the_log_weights(skewed):
    """The pooled log weights equal the exact log posterior minus the proposal's log density
    at every draw, up to one constant, for the Gaussian and the mixture; the trial pairs stay
    the first draws'."""
    from scipy.special import log_expit

    px = steps.mode_and_proxy(skewed)
    X, s = skewed.X, 2 * skewed.y - 1
    for kind in ("independence", "mixture"):
        got = (steps.laplace_draws(px, 10, rng=0) if kind == "independence"
               else steps.proposal_draws(px, kind, 10, rng=0))
        more = steps.more_draws(px, got, 25, rng=1)
        q = steps.independence_proposal(px, kind)
        th = more.thetas
        exact = (log_expit(s[None, :] * (th @ X.T)).sum(axis=1) - 0.5 * (th ** 2).sum(1) / 100
                 - np.array([q.log_density(t) for t in th]))
        assert th.shape == (36, 3) and np.array_equal(th[:11], got.thetas)
        np.testing.assert_allclose(more.log_weights - more.log_weights[0], exact - exact[0],
                                   atol=1e-8)
        assert more.trial is got.trial and more.pareto_k == steps.pareto_k(more.log_weights)


def _logistic(N, d, seed):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=(N, d)), np.ones(N)])
    theta = rng.normal(0.0, 1.0 / np.sqrt(d), d + 1)
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


def test_the_ladder_chooses_consistently_across_seeds(skewed):
    """Ten seeds of the Laplace draws and the ladder. N = 1000, d = 20 + intercept: a posterior
    where the Gaussian is fine (k-hat 0.25 +- 0.12 at 656 draws) but the log weights' sd
    (0.28) is above LOGW_SD_OK, so k-hat decides: the Gaussian every time. The separated
    logistic regression (sd of the log weights 2.3): never the Gaussian, and one choice in
    at least 9 of 10 seeds. Before k-hat's noise was counted (one k-hat from 41 draws), the
    separated one got the Gaussian in 6 of these 10 seeds (k-hat 0.39-0.53)."""
    from collections import Counter

    for model, expect in ((_logistic(1000, 20, 5), "independence"), (skewed, None)):
        px = steps.mode_and_proxy(model)
        kinds = Counter(steps.choose_proposal(px, steps.laplace_draws(px, 40, rng=seed),
                                              rng=seed + 100).kind for seed in range(10))
        kind, times = kinds.most_common(1)[0]
        assert times >= 9, kinds
        assert kind == expect if expect else kinds["independence"] == 0, kinds


def _easy():
    rng = np.random.default_rng(12)
    X = np.column_stack([rng.normal(size=3000), np.ones(3000)])
    y = (rng.random(3000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


def _small():
    """N = 200, two normal covariates and an intercept at -2: a mildly skewed posterior where
    the Laplace Gaussian's acceptance varies with the state (Pareto-k about 0.35-0.65)."""
    rng = np.random.default_rng(41)
    X = np.column_stack([rng.normal(size=(200, 2)), np.ones(200)])
    y = (rng.random(200) < 1 / (1 + np.exp(-(X @ [1.5, -1.0, -2.0])))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


@pytest.mark.parametrize("workload, kind", [("easy", "independence"), ("small", "independence"),
                                            ("small", "t")])
def test_predicted_ess_per_step_is_within_a_factor_of_the_realised(workload, kind):
    """The ESS per step of exact MH with an independence proposal, predicted from 41 draws
    of the proposal and their weights (:func:`steps.imh_ess_per_step`; the mean over 5 sets
    of draws, the prediction's bias, not one set's noise), against the min bulk ESS per step
    of 2 chains of 5,000 steps: within a factor 1.3 on a near-Gaussian posterior (N = 3000,
    d = 2) and on a mildly skewed one (N = 200, d = 3). On the skewed one the prediction from
    the mean acceptance alone, ``a / (2 - a)``, is further off (measured 1.44x against
    0.96x: the acceptance is lowest where the chain sits longest)."""
    model = _easy() if workload == "easy" else _small()
    px = steps.mode_and_proxy(model)
    got = [steps.laplace_draws(px, 40, s) if kind == "independence"
           else steps.proposal_draws(px, kind, 40, s) for s in range(5)]
    predicted = np.mean([g.ess_per_step for g in got])
    q = steps.independence_proposal(px, kind)
    x = np.stack([sample(model, ExactTest(), q, px.mode, 5000, rng=c).samples for c in (7, 8)])
    realised = _ess(x).min() / x.shape[0] / x.shape[1]
    assert 1 / 1.3 < predicted / realised < 1.3, (predicted, realised)
    old = np.mean([routes.ess_per_step(kind, g.acceptance, 3, g.acceptance) for g in got])
    if (workload, kind) == ("small", "independence"):
        assert abs(np.log(old / realised)) > 2 * abs(np.log(predicted / realised))


def test_a_flat_direction_at_the_mode_names_the_data_not_center():
    # a column of ones beside the intercept, flat prior: the message blamed center=, which
    # the user had not given
    # (seeds 0 and 1: Cholesky fails; 2 and 3: it passed by rounding, and fit sampled a
    # posterior sd of 10^6 in the flat direction, R-hat 2, without a word)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = np.column_stack([np.ones(500), rng.normal(size=500), np.ones(500)])
        y = (rng.random(500) < 0.4).astype(float)
        with pytest.raises(ValueError, match="^model: .*collinear columns"):
            steps.mode_and_proxy(LogisticRegression(X, y))
    # a proper prior, or covariates on scales 1e-3 and 1e3, leave a mode
    X[:, 2] = 1e-3 * rng.normal(size=500)
    X[:, 1] *= 1e3
    for prior in (None, GaussianPrior(0.0, 10.0)):
        px = steps.mode_and_proxy(LogisticRegression(X, y, prior=prior))
        assert np.all(np.isfinite(px.covariance))
