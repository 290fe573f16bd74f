"""Heavy rows read exactly (issue 23): the ExactRows wrapper, the heavy-row rule, the split
seen by the design and the CLT verdict, and a chain on the split against an independent
reference (self-normalised importance sampling on all rows)."""

import warnings

import numpy as np
import pytest

import design
import validation
from samplers import (
    AustereTest,
    ControlVariates,
    ExactRows,
    ExactTest,
    GaussianPrior,
    Independence,
    LogisticRegression,
    heavy_rows,
    sample,
)
from samplers.datasets import logistic_regression, rare_covariate_logistic
from samplers.models.compiled import compiled_view
from samplers.models.exact_rows import rest_row, row_scales

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

N = 5000
RARE = 20
PRIOR = GaussianPrior(0.0, 10.0)


@pytest.fixture(scope="module")
def rare():
    X, y, _ = rare_covariate_logistic(N, rng=11, rare_rows=RARE)
    cv = ControlVariates(LogisticRegression(X, y, prior=PRIOR))
    return X, y, cv


def _pair(cv, rng, step=1.0):
    cov = cv.laplace_covariance()
    theta = rng.multivariate_normal(cv.center.theta, cov)
    return theta, theta + step * rng.multivariate_normal(np.zeros(cv.dim), cov)


def test_rest_row_matches_the_complement():
    rows = np.array([0, 3, 4, 9, 17])
    rest = np.setdiff1d(np.arange(20), rows)
    adj = rows - np.arange(rows.size)
    got = [rest_row(adj, j) for j in range(rest.size)]
    assert got == rest.tolist()
    assert [rest_row.py_func(adj, j) for j in range(rest.size)] == rest.tolist()
    assert rest_row(np.empty(0, dtype=np.int64), 7) == 7


def test_heavy_rows_are_the_rare_rows_and_none_on_alike_rows(rare):
    X, _, cv = rare
    rows = heavy_rows(cv)
    assert rows.tolist() == np.flatnonzero(X[:, 3] == 1.0).tolist()
    Xg, yg, _ = logistic_regression(N, 4, rng=3)
    assert heavy_rows(ControlVariates(LogisticRegression(Xg, yg, prior=PRIOR))).size == 0
    # the group is found whenever it fits under the cap; none past it, none at max_rows=0
    assert heavy_rows(cv, max_rows=RARE).tolist() == rows.tolist()
    assert heavy_rows(cv, max_rows=0).size == 0


def test_the_cut_for_a_row_sample_runs_the_rule_past_the_cap(rare):
    """heavy_rows(sample_rows=k): the heavy rows unchanged, and the rows a row sample reads
    exactly, the rule run on up to k rows (the rows left are then each within 20 times the
    rms of the rows below them), or None when it does not stop by then."""
    X, _, cv = rare
    rows = heavy_rows(cv)
    got, exact = heavy_rows(cv, sample_rows=200)
    assert got.tolist() == rows.tolist() and exact.tolist() == rows.tolist()
    # Pareto scales of tail index 0.4 (the residual scales |x|^3 of t(1.2) covariates): the
    # sqrt(N) cap stops the rule before it is met (at about N / 100 rows for large N)
    a = np.random.default_rng(5).pareto(0.4, N) + 1.0
    capped = heavy_rows(cv, scales=a)
    assert capped.size == int(np.ceil(np.sqrt(N)))
    got, exact = heavy_rows(cv, scales=a, sample_rows=N // 4)
    assert got.tolist() == capped.tolist()
    assert np.all(np.isin(capped, exact)) and exact.size > capped.size
    rest = np.sort(np.delete(a, exact))[::-1]
    below = np.sqrt(np.cumsum(rest[::-1] ** 2)[::-1][1:] / np.arange(rest.size - 1, 0, -1))
    assert np.all(rest[:-1] <= 20.0 * below)           # every row left: the rule holds
    rest = np.sort(np.delete(a, capped))[::-1]          # after the cap it did not
    assert rest[0] > 20.0 * np.sqrt(np.mean(rest[1:] ** 2))
    assert heavy_rows(cv, scales=a, sample_rows=exact.size - 1)[1] is None
    assert heavy_rows(cv, scales=a, sample_rows=exact.size)[1].tolist() == exact.tolist()
    none = heavy_rows(cv, scales=a, max_rows=0, sample_rows=0)
    assert none[0].size == 0 and none[1].size == 0


def test_row_scales_is_the_laplace_variance_of_the_predictor(rare):
    X, _, cv = rare
    S = cv.laplace_covariance()
    v = np.einsum("ij,jk,ik->i", X, S, X)
    np.testing.assert_allclose(row_scales(cv), v ** 1.5, rtol=1e-10)


def test_row_scales_on_threads_are_the_one_thread_bits(rare, monkeypatch):
    """The scan runs its chunks on every core (here 10 chunks of 500 rows): each row's value
    is the same bits as the whole array's in one call on one thread."""
    import samplers.models.exact_rows as er

    X, _, cv = rare
    want = np.empty(N)
    er.quadratic_forms(np.ascontiguousarray(X, dtype=float), cv.laplace_covariance(), 1.5,
                       want)
    monkeypatch.setattr(er, "SCAN_CHUNK", 500)
    np.testing.assert_array_equal(row_scales(cv), want)


@pytest.mark.parametrize("order", [1, 2])
def test_residual_scales_are_the_taylor_residual_at_the_reach(rare, order, monkeypatch):
    """residual_scales against NumPy: the logistic row's residual f(eta* +- h) less its
    Taylor polynomial at eta*, h = radius sqrt(x' Sigma x), the larger in size (chunks of
    500 rows on the threads: the same values as one chunk)."""
    import samplers.models.exact_rows as er
    from scipy.special import expit, log_expit

    X, y, _ = rare
    cv = ControlVariates(LogisticRegression(X, y, prior=PRIOR), order=order)
    S = cv.laplace_covariance()
    h = 2.5 * np.sqrt(np.einsum("ij,jk,ik->i", X, S, X))
    eta = X @ cv.center.theta
    f = lambda e: y * log_expit(e) + (1 - y) * log_expit(-e)              # noqa: E731
    p = expit(eta)
    f1, f2 = y - p, -p * (1 - p) * (order == 2)
    edge = [f(eta + s * h) - f(eta) - f1 * s * h - 0.5 * f2 * h * h for s in (1, -1)]
    want = np.maximum(np.abs(edge[0]), np.abs(edge[1]))
    got = er.residual_scales(cv, radius=2.5)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12 * want.max())
    monkeypatch.setattr(er, "SCAN_CHUNK", 500)
    np.testing.assert_array_equal(er.residual_scales(cv, radius=2.5), got)
    # the rows that carry a residual are not the saturated ones (|eta*| large)
    assert np.all(got[np.abs(eta) > 30] < 1e-6 * np.median(got))


def test_residual_scales_needs_a_glm_and_a_radius(rare):
    import samplers.models.exact_rows as er
    from samplers import GaussianMean

    _, _, cv = rare
    with pytest.raises(ValueError, match="radius"):
        er.residual_scales(cv, radius=-1.0)
    with pytest.raises(TypeError, match="built-in GLM"):
        er.residual_scales(LogisticRegression(*rare[:2], prior=PRIOR))
    mean = ControlVariates(GaussianMean(np.arange(10.0)))
    assert np.all(er.residual_scales(mean) == 0.0)      # a quadratic: no residual


@pytest.mark.parametrize("data", ["logistic", "rare", "t1.2"])
@pytest.mark.parametrize("order", [1, 2])
def test_one_pass_gives_both_scales_bit_for_bit(rare, data, order, monkeypatch):
    """row_and_residual_scales (fit's one pass) is row_scales and residual_scales, bit for
    bit, on Gaussian, rare-covariate and t(1.2) covariates, orders 1 and 2, and on the
    threads' chunks (500 rows) as on one."""
    import samplers.models.exact_rows as er

    rng = np.random.default_rng(2)
    if data == "logistic":
        X, y, _ = logistic_regression(4000, 4, rng=rng)
    elif data == "rare":
        X, y = rare[:2]
    else:
        X = np.column_stack([np.ones(4000), rng.standard_t(1.2, size=(4000, 2))])
        y = (rng.random(4000) < 0.5 + 0.4 * np.sign(X @ [0.3, 1.0, -0.5])).astype(float)
    cv = ControlVariates(LogisticRegression(X, y, prior=PRIOR), order=order)
    a, w = er.row_and_residual_scales(cv)
    np.testing.assert_array_equal(a, er.row_scales(cv))
    np.testing.assert_array_equal(w, er.residual_scales(cv))
    monkeypatch.setattr(er, "SCAN_CHUNK", 500)
    a5, w5 = er.row_and_residual_scales(cv, radius=2.5)
    np.testing.assert_array_equal(a5, a)
    np.testing.assert_array_equal(w5, er.residual_scales(cv, radius=2.5))


def test_one_pass_without_residuals_and_its_errors(rare):
    import samplers.models.exact_rows as er
    from samplers import GaussianMean

    mean = ControlVariates(GaussianMean(np.arange(10.0)))
    a, w = er.row_and_residual_scales(mean)
    np.testing.assert_array_equal(a, er.row_scales(mean))
    assert np.all(w == 0.0)                             # a quadratic: no residual
    with pytest.raises(TypeError, match="built-in GLM"):
        er.row_and_residual_scales(LogisticRegression(*rare[:2], prior=PRIOR))
    with pytest.raises(ValueError, match="radius"):
        er.row_and_residual_scales(rare[2], radius=0.0)


def test_split_keeps_the_full_sums_and_its_kernel_the_python_bits(rare):
    _, _, cv = rare
    split = ExactRows(cv, "auto")
    assert split.N == N - RARE and split.rows.size == RARE == split.n_exact
    rng = np.random.default_rng(5)
    theta, theta_new = _pair(cv, rng)
    full = cv.loglik_ratio(theta, theta_new, np.arange(N))
    rest = split.loglik_ratio(theta, theta_new, np.arange(split.N))
    np.testing.assert_allclose(rest.sum(), full.sum(), rtol=1e-11, atol=1e-13)
    assert split.exact_ratio(theta, theta_new) == pytest.approx(full[split.rows].sum(),
                                                                rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(split.loglik(theta, np.arange(split.N)).sum(),
                               cv.loglik(theta, np.arange(N)).sum(), rtol=1e-12)
    np.testing.assert_allclose(split.grad_loglik(theta, np.arange(split.N)).sum(axis=0),
                               cv.grad_loglik(theta, np.arange(N)).sum(axis=0),
                               rtol=1e-9, atol=1e-9)
    idx = rng.integers(0, split.N, 300)
    assert np.array_equal(compiled_view(split).ratio(theta, theta_new, idx),
                          split.loglik_ratio(theta, theta_new, idx))
    mapped = split.rest_rows(idx)
    np.testing.assert_array_equal(mapped, np.setdiff1d(np.arange(N), split.rows)[idx])
    centre, half = split.loglik_ratio_range(theta, theta_new)
    assert np.all(np.abs(rest - centre) <= half)


def test_bad_input_is_refused_and_the_callers_rows_untouched(rare):
    _, _, cv = rare
    rows = np.array([7, 3, 5])
    split = ExactRows(cv, rows)
    assert rows.tolist() == [7, 3, 5] and split.rows.tolist() == [3, 5, 7]
    with pytest.raises(ValueError, match="distinct"):
        ExactRows(cv, [1, 1])
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 4999\]"):
        ExactRows(cv, [5000])
    with pytest.raises(TypeError, match="1-D integer"):
        ExactRows(cv, [0.5])
    with pytest.raises(ValueError, match="'auto'"):
        ExactRows(cv, "all")
    with pytest.raises(ValueError, match="at least 2"):
        ExactRows(cv, np.arange(N - 1))
    with pytest.raises(ValueError, match="threshold must be > 1"):
        heavy_rows(cv, threshold=0.5)
    with pytest.raises(ValueError, match="max_rows"):
        heavy_rows(cv, max_rows=N)
    with pytest.raises(ValueError, match=r"sample_rows must be in \[0, N - 2\].*got -1"):
        heavy_rows(cv, sample_rows=-1)
    with pytest.raises(TypeError, match="sample_rows must be an integer or None, got 1.5"):
        heavy_rows(cv, sample_rows=1.5)
    with pytest.raises(TypeError, match="GLM"):
        heavy_rows(cv.model)


def test_design_and_verdict_see_the_split(rare):
    """The trial pairs record the rest's l_i (N = n, mu n = the full sum), and the designed
    Austere test passes the simulated verdict reading m rows of the rest."""
    _, _, cv = rare
    split = ExactRows(cv, "auto")
    rng = np.random.default_rng(8)
    pairs = [_pair(cv, rng, step=2.38 / np.sqrt(cv.dim)) for _ in range(10)]
    thetas, news = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    trial = design.TrialChain.from_model(split, thetas, news, progress=False, workers=1)
    assert trial.N == split.N
    rest = split.loglik_ratio(thetas[0], news[0], np.arange(split.N))
    full = cv.loglik_ratio(thetas[0], news[0], np.arange(N))
    assert trial.mu[0] * split.N == pytest.approx(full.sum(), rel=1e-9, abs=1e-12)
    assert trial.sigma[0] == pytest.approx(rest.std(), rel=1e-9)
    whole = design.TrialChain.from_model(cv, thetas, news, progress=False, workers=1)
    assert np.max(np.abs(trial.kurtosis)) < 0.25 * np.max(np.abs(whole.kurtosis))
    plan = design.optimize(trial, 0.01)
    clt = validation.clt_check(split, (thetas, news), design=plan, n_sim=4000, n_paths=500,
                               search=False, rng=9, progress=False)
    assert clt.acceptance.m == plan.m and clt.passed


@pytest.fixture(scope="module")
def reference(rare):
    """Posterior mean and sd of every coefficient by self-normalised importance sampling
    from a Student-t (df 5) around the Laplace approximation, on all rows."""
    X, y, cv = rare
    rng = np.random.default_rng(12)
    S = cv.laplace_covariance() * 1.5
    L = np.linalg.cholesky(S)
    draws = 20_000
    z = rng.standard_normal((draws, cv.dim))
    w = np.sqrt(5.0 / rng.chisquare(5.0, draws))
    theta = cv.center.theta + (z @ L.T) * w[:, None]
    loglik = np.empty(draws)
    for start in range(0, draws, 1000):             # 1000 x N predictors at a time
        eta = theta[start:start + 1000] @ X.T
        loglik[start:start + 1000] = (y * eta - np.logaddexp(0.0, eta)).sum(axis=1)
    logprior = -0.5 * np.sum(theta ** 2, axis=1) / 100.0
    q = np.linalg.solve(L, (theta - cv.center.theta).T)
    logq = -0.5 * (5.0 + cv.dim) * np.log1p(np.sum(q ** 2, axis=0) / 5.0)
    lw = loglik + logprior - logq
    wt = np.exp(lw - lw.max())
    wt /= wt.sum()
    mean = wt @ theta
    sd = np.sqrt(wt @ (theta - mean) ** 2)
    ess = 1.0 / np.sum(wt ** 2)
    return mean, sd, ess


def test_austere_chain_on_the_split_matches_the_reference(rare, reference):
    """A designed-size Austere test on the split (m = 20 rows of the rest plus the 20 rare
    rows per decision) against importance sampling on all rows: means and sds within 5
    Monte Carlo standard errors (ArviZ's, from the ESS) plus the reference's own error."""
    _, _, cv = rare
    split = ExactRows(cv, "auto")
    mean, sd, ess_ref = reference
    assert ess_ref > 5000
    prop = Independence.from_laplace(cv, scale=1.2)
    chain = sample(split, AustereTest(m=20, epsilon=0.05), prop, cv.center.theta, 4000, rng=3,
                   progress=False)
    again = sample(split, AustereTest(m=20, epsilon=0.05), prop, cv.center.theta, 50, rng=3,
                   progress=False, compiled=False)            # the Python loop: same chain
    assert np.array_equal(again.samples, chain.samples[:50])
    assert np.array_equal(again.stats["n_used"], chain.stats["n_used"][:50])
    assert np.mean(chain.stats["n_used"]) < 100
    idata = chain.to_arviz()
    mcse_mean = az.mcse(idata, method="mean").theta.values
    mcse_sd = az.mcse(idata, method="sd").theta.values
    s = chain.samples
    ref_se = sd / np.sqrt(ess_ref)
    assert np.all(np.abs(s.mean(axis=0) - mean) < 5 * mcse_mean + 5 * ref_se), (
        s.mean(axis=0), mean, mcse_mean)
    assert np.all(np.abs(s.std(axis=0) - sd) < 5 * mcse_sd + 5 * ref_se), (
        s.std(axis=0), sd, mcse_sd)


def test_exact_test_on_the_split_is_exact_mh(rare):
    """ExactTest on the split sums all rows (rest plus heavy): the chain is exact MH on the
    control variates up to rounding of the sum's order (same accept decisions here)."""
    _, _, cv = rare
    split = ExactRows(cv, "auto")
    prop = Independence.from_laplace(cv, scale=1.2)
    a = sample(split, ExactTest(), prop, cv.center.theta, 200, rng=4, progress=False)
    b = sample(cv, ExactTest(), prop, cv.center.theta, 200, rng=4, progress=False)
    np.testing.assert_allclose(a.samples, b.samples, rtol=0, atol=0)


def test_compiled_loop_with_minibatch_gradients_is_the_python_loop(rare):
    """The compiled block's heavy-row sums (decision data and gradients, built on the control
    variates' block parts) give the Python loop's chain bit for bit."""
    from samplers import Langevin

    _, _, cv = rare
    split = ExactRows(cv, "auto")
    prop = Langevin.from_laplace(cv, 50)
    test = AustereTest(m=20, epsilon=0.05)
    a = sample(split, test, prop, cv.center.theta, 100, rng=6, progress=False, compiled=True)
    b = sample(split, test, prop, cv.center.theta, 100, rng=6, progress=False, compiled=False)
    assert np.array_equal(a.samples, b.samples)
    assert np.array_equal(a.stats["n_used"], b.stats["n_used"])


def test_the_splits_passes_by_row_blocks_equal_the_local_ones(rare, monkeypatch):
    """ExactRows.block_recipe: each block of the rest rebuilds the wrapped model's rows and
    carries the whole data's exact part, so the split's passes on an executor (its trial
    pairs, the verdict's l_i, log-posteriors) give the local values bit for bit."""
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    import design._lib.distribute as distribute
    from samplers import log_posterior

    monkeypatch.setattr(distribute, "RANGE_ROWS", 1024)      # several blocks, heavy rows split
    _, _, cv = rare
    split = ExactRows(cv, "auto")
    assert split.rows.size == RARE
    block = pickle.loads(pickle.dumps(split.block_recipe(1000, 3000)))()
    theta, theta_new = _pair(cv, np.random.default_rng(4))
    np.testing.assert_array_equal(block.loglik_ratio(theta, theta_new, np.arange(2000)),
                                  split.loglik_ratio(theta, theta_new, np.arange(1000, 3000)))
    np.testing.assert_array_equal(block.grad_loglik(theta, np.arange(5)),
                                  split.grad_loglik(theta, np.arange(1000, 1005)))
    assert block.block_parts(None) is None                   # no chains on a block
    rng = np.random.default_rng(5)
    pairs = [_pair(cv, rng, 0.3) for _ in range(3)]
    thetas, news = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    with ThreadPoolExecutor(2) as pool:
        for two_pass in (False, True):
            a = design.TrialChain.from_model(split, thetas, news, progress=False,
                                             two_pass=two_pass)
            b = design.TrialChain.from_model(split, thetas, news, progress=False,
                                             two_pass=two_pass, executor=pool)
            for field in ("mu", "sigma", "skewness", "kurtosis", "abs_z3", "max_abs"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        np.testing.assert_array_equal(
            validation.loglik_ratios(split, theta, theta_new),
            validation.loglik_ratios(split, theta, theta_new, executor=pool))
        np.testing.assert_array_equal(
            log_posterior(split, thetas[None], progress=False),
            log_posterior(split, thetas[None], progress=False, executor=pool))


def test_a_split_of_a_users_model_has_no_row_blocks():
    class Users:
        N, dim = 10, 1

        def loglik(self, theta, idx):
            return -0.5 * (np.asarray(idx, float) - theta[0]) ** 2

        def logprior(self, theta):
            return 0.0

    with pytest.raises(TypeError, match="no block_recipe"):
        ExactRows(Users(), np.array([3])).block_recipe(0, 5)


def test_fit_with_an_executor_runs_the_splits_passes_there_and_gives_the_same_draws(
        monkeypatch):
    """fit(executor=) with heavy rows: the split's trial pairs, verdict and after-run check
    go through ExactRows.block_recipe to the executor, and the draws are the local fit's."""
    from concurrent.futures import ThreadPoolExecutor

    X, y, _ = rare_covariate_logistic(20_000, rng=1)
    model = LogisticRegression(X, y, prior=PRIOR)
    kw = dict(draws=200, n_trial=10, rng=5, test="austere")
    here = validation.fit(model, parallel=False, **kw)
    calls = []
    recipe = ExactRows.block_recipe
    monkeypatch.setattr(ExactRows, "block_recipe",
                        lambda self, a, b: calls.append((a, b)) or recipe(self, a, b))
    with ThreadPoolExecutor(2) as pool:
        there = validation.fit(model, executor=pool, **kw)
    assert here.posterior.attrs["heavy_rows"] == there.posterior.attrs["heavy_rows"] > 0
    assert len(calls) >= 3
    np.testing.assert_array_equal(here.posterior.theta.values, there.posterior.theta.values)
