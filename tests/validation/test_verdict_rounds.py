"""fit's verdict, made cheaper without changing it: the l_i of all check pairs from one pass
(``loglik_ratios_many``), the paths simulated in rounds that stop once the verdict of all
of them is clear (``sequential=True``), the Edgeworth prediction left out (``edgeworth=False``)."""

import math

import numpy as np
import pytest

from design import TrialChain, optimize
from samplers import ControlVariates, Gaussian, GaussianPrior, LogisticRegression
from validation import acceptance_check, clt_check, loglik_ratios
from validation._ratios import loglik_ratios_many
from validation._verdict import _clear_verdict, _looks


def _logistic_cv(N=20_000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.standard_normal((N, 2))])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.5]))).astype(float)
    return ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0))), rng


@pytest.mark.parametrize("wrapped", [True, False])
def test_one_pass_for_all_pairs_equals_the_per_pair_passes(wrapped):
    cv, rng = _logistic_cv()
    model = cv if wrapped else cv.model
    draws = cv.center.theta + 0.02 * rng.standard_normal((6, 3))
    thetas, news = draws[:-1], draws[1:]
    many = loglik_ratios_many(model, thetas, news, chunk=3001)
    for p in range(5):
        one = loglik_ratios(model, thetas[p], news[p])
        # a difference of two O(1) log-likelihoods against the fused ratio: the same values
        # but for the rounding of the log-likelihoods (~1e-16 each)
        np.testing.assert_allclose(many[p], one, rtol=0, atol=1e-14)
        assert np.std(one) > 1e-8                         # far above that rounding


def test_one_pass_refuses_non_finite_ratios_and_bad_shapes():
    class Stub:
        N = 10

        def __init__(self, shape_ok=True):
            self.shape_ok = shape_ok

        def loglik_many(self, thetas, idx):
            out = np.zeros((idx.size, thetas.shape[0] + (0 if self.shape_ok else 1)))
            out[idx == 7, 0] = np.nan
            return out

    thetas, news = np.array([[0.0], [1.0]]), np.array([[1.0], [2.0]])
    with pytest.raises(ValueError, match="log-likelihood ratio of row 7"):
        loglik_ratios_many(Stub(), thetas, news, chunk=4)
    with pytest.raises(ValueError, match="must return shape"):
        loglik_ratios_many(Stub(False), thetas, news, chunk=4, workers=1)


def _lognormal_pairs(sigma, n_pairs, seed):
    """The (mean, log sd) model of a Gaussian on lognormal(0, sigma) data and pairs of a
    random walk at the posterior's scale (test_verdict's Figure 4 set-up)."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(0.0, sigma, 20_000) if sigma > 0 else rng.normal(0.0, 0.1, 20_000)
    n, s = x.shape[0], float(x.std())
    mode = np.array([float(x.mean()), math.log(s)])
    L = np.diag([s / math.sqrt(n), 1 / math.sqrt(2 * n)])
    thetas = mode + (L @ rng.normal(size=(2, n_pairs))).T
    news = thetas + (2.38 / math.sqrt(2)) * (L @ rng.normal(size=(2, n_pairs))).T
    return Gaussian(x), (thetas, news)


@pytest.mark.parametrize("sigma, passes", [(0.0, True), (2.0, False)])
def test_rounds_stop_early_with_the_full_runs_verdict(sigma, passes):
    """A clear pass (Gaussian data) and a clear fail (lognormal(0, 2) data): the rounds stop
    before the full 1,000 paths and give the full run's verdict."""
    model, pairs = _lognormal_pairs(sigma, 5, 7)
    if passes:      # a design well within its tolerance (an optimal one sits at its edge)
        kw = dict(m=500, epsilon=0.001, tolerance=0.03)
    else:
        kw = dict(design=optimize(TrialChain.from_model(model, *pairs, progress=False), 0.03))
    full = acceptance_check(model, pairs, n_paths=1000, rng=3, **kw)
    rounds = acceptance_check(model, pairs, n_paths=1000, rng=3, sequential=True, **kw)
    assert full.passed is passes and rounds.passed is passes
    assert full.n_paths == 1000 and rounds.n_paths < 1000
    # the same paths at the first look: estimates within the full run's noise
    assert abs(rounds.mean_abs_simulated - full.mean_abs_simulated) < 4 * (
        rounds.mean_abs_simulated_se + full.mean_abs_simulated_se)


def test_clear_verdict_waits_near_the_tolerance():
    se = np.full(10, 0.004)                        # the 1 / 250 floor at the first look
    assert _clear_verdict(np.full(10, 0.001), se, 250, 2000, 0.05) is True
    assert _clear_verdict(np.full(10, 0.2), se, 250, 2000, 0.05) is False
    assert _clear_verdict(np.full(10, 0.05), se, 250, 2000, 0.05) is None
    assert _looks(2000) == [250, 500, 1000, 2000] and _looks(100) == [100]


def test_rounds_decide_as_the_full_run_at_the_stated_rate():
    """Monte Carlo of the rule itself: true mean |Delta| at the tolerance plus or minus
    0.5, 2 and 30 final standard errors (hard and clear cases); every early decision taken
    agrees with the full run's in 600 replications (stated rate below 0.15%), and the clear
    cases do stop early."""
    rng = np.random.default_rng(1)
    tol, n_paths, P, spread = 0.01, 2000, 10, 0.05
    se_final = spread / math.sqrt(n_paths) / math.sqrt(P)
    disagree, early = 0, {0.5: 0, 2.0: 0, 30.0: 0}
    for rep in range(600):
        k = [0.5, 2.0, 30.0][rep % 3]
        truth = tol + rng.choice([-1.0, 1.0]) * k * se_final
        delta = truth * rng.choice([-1.0, 1.0], P)
        paths = 0.5 + delta[:, None] + spread * rng.standard_normal((P, n_paths))

        def est(n):
            sim = paths[:, :n].mean(axis=1) - 0.5
            return sim, np.maximum(paths[:, :n].std(axis=1, ddof=1) / math.sqrt(n), 1.0 / n)

        sim, se = est(n_paths)
        final = np.abs(sim).mean() <= tol + 2 * math.sqrt(np.sum(se ** 2)) / P
        for n in _looks(n_paths)[:-1]:
            verdict = _clear_verdict(*est(n), n, n_paths, tol)
            if verdict is not None:
                early[k] += 1
                disagree += verdict != final
                break
    assert disagree == 0
    assert early[30.0] > 150 and early[0.5] < early[30.0]


def test_without_the_edgeworth_prediction_the_verdict_is_the_same():
    model, pairs = _lognormal_pairs(0.0, 4, 5)
    d = optimize(TrialChain.from_model(model, *pairs, progress=False), 0.03)
    with_it = clt_check(model, pairs, design=d, n_sim=3200, search=False, n_paths=400, rng=2)
    without = clt_check(model, pairs, design=d, n_sim=3200, search=False, n_paths=400, rng=2,
                        edgeworth=False)
    a, b = with_it.acceptance, without.acceptance
    assert a.passed == b.passed
    np.testing.assert_array_equal(a.delta_simulated, b.delta_simulated)
    np.testing.assert_array_equal(a.delta_gaussian, b.delta_gaussian)
    np.testing.assert_array_equal(a.edgeworth_reliable, b.edgeworth_reliable)
    assert np.isnan(b.delta_edgeworth).all() and b.edgeworth_agrees is None
    assert "Edgeworth not computed" in str(b)


def test_supporting_ks_stops_at_a_clear_failure_and_is_unchanged_otherwise():
    """Lognormal(0, 2) l_i at the design's m: some pair's KS distance is far above the
    tolerance after 1,000 minibatches, so the rounds stop there; without rounds (the
    default) clt_check simulates all of n_sim, as before."""
    model, pairs = _lognormal_pairs(2.0, 2, 7)
    d = optimize(TrialChain.from_model(model, *pairs, progress=False), 0.03)
    full = clt_check(model, pairs, design=d, n_sim=3200, search=False, n_paths=50, rng=2)
    fast = clt_check(model, pairs, design=d, n_sim=3200, search=False, n_paths=50, rng=2,
                     sequential=True)
    assert full.n_sim == 3200 and full.t_statistics.shape == (2, 3200)
    assert fast.n_sim == 1000 and fast.t_statistics.shape == (2, 1000)
    assert not full.ks_passed and not fast.ks_passed
    np.testing.assert_array_equal(fast.t_statistics, full.t_statistics[:, :1000])
    assert fast.passed == full.passed
