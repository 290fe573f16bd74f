"""design.optimize for every test kind, against simulation of the real tests.

Each design's predictions (rows read, error in the acceptance probability) are compared
with the samplers' own compiled decision loops (``AustereTest``, ``BarkerTest``,
``ConfidenceTest``, built by ``from_design``) run many times per trial pair on the pair's
real l_i with u drawn at random (``reference/real_tests.py``). Tolerances: rows within 20 %
(the brief's target), each pair's error within 4.5 standard errors of the prediction (with a
Bonferroni margin over the pairs, about 1e-4 false failures per test), and the realised
mean |Delta| (an over-estimate: noise only adds to it) under the tolerance.
"""

import math

import numpy as np
import pytest

from design import (BarkerDesign, ConfidenceDesign, Design, TrialChain, acceptance,
                    optimize)
from design._barker_design import barker_error_fixed
from design._confidence_design import confidence_radius
from samplers import AustereTest, BarkerTest, ConfidenceTest
from design._lib.rules import BOUNDS as _BOUNDS
from design._lib.rules import confidence_radius_code

Z = 4.5
TOL = 0.01


def _residual_like(rng, n_pairs, N, sd, kind="t3"):
    """Populations shaped like control-variate residuals: tiny sd, heavy tails, a shift."""
    pops = []
    for _ in range(n_pairs):
        base = rng.standard_t(3, size=N) if kind == "t3" else rng.normal(size=N)
        base = (base - base.mean()) / base.std()
        pops.append(base * sd * rng.uniform(0.5, 2.0))
    return pops


def _with_ratios(pops, rng, spread=1.5):
    """Data-free terms c giving each pair a log MH ratio N mean(l) + c ~ N(0, spread^2)."""
    N = pops[0].size
    A = rng.normal(0.0, spread, len(pops))
    return [float(A[p] - N * np.mean(pops[p])) for p in range(len(pops))]


def _check_against_real(real_tests, design, test, pops, cs, n_tests, rng, C=None):
    N = pops[0].size
    rows, dhat, se = [], [], []
    for p, (l, c) in enumerate(zip(pops, cs)):
        d, s, used = real_tests.simulate(test, l, c, n_tests, rng,
                                         C=None if C is None else C[p])
        rows.append(used)
        dhat.append(d)
        se.append(s)
    rows, dhat, se = map(np.asarray, (rows, dhat, se))
    predicted_rows = design.data_fraction * N
    assert np.mean(rows) == pytest.approx(predicted_rows, rel=0.2)
    gap = np.abs(dhat - design.pair_error) if hasattr(design, "pair_error") else None
    return rows, dhat, se, gap


# --- the trial chain of a control-variate model --------------------------------------------


class WrapperLike:
    """l_i = x_i h (h = theta' - theta); proxy_i = x_i h - a_i h^2 known in total, so the
    wrapper's ratio is r_i + P/N with residual r_i = a_i h^2 (as ControlVariates)."""

    def __init__(self, x, a):
        self.x, self.a, self.N = x, a, x.size

    def full(self, theta, theta_new, idx):
        h = theta_new[0] - theta[0]
        return self.x[idx] * h + self.a[idx] * h * h

    def proxy_total(self, theta, theta_new):
        h = theta_new[0] - theta[0]
        return float(np.sum(self.x) * h)

    def loglik_ratio(self, theta, theta_new, idx):
        h = theta_new[0] - theta[0]
        return self.a[idx] * h * h + self.proxy_total(theta, theta_new) / self.N

    def loglik_ratio_range(self, theta, theta_new):
        h = theta_new[0] - theta[0]
        return self.proxy_total(theta, theta_new) / self.N, float(np.max(np.abs(self.a))) * h * h

    def logprior(self, theta):
        return 0.0


def test_trial_chain_of_a_control_variate_model_records_the_residuals(tmp_path):
    rng = np.random.default_rng(0)
    N = 5000
    model = WrapperLike(rng.normal(size=N), rng.standard_t(3, size=N))
    thetas = rng.normal(0, 0.01, (6, 1))
    news = thetas + rng.normal(0, 0.01, (6, 1))
    tc = TrialChain.from_model(model, np.stack([thetas, news], axis=1))   # (model, pairs)
    for p in range(6):
        full = model.full(thetas[p], news[p], np.arange(N))
        resid = model.loglik_ratio(thetas[p], news[p], np.arange(N))
        assert tc.mu[p] == pytest.approx(full.mean(), rel=1e-9)          # the true mean
        assert tc.sigma[p] == pytest.approx(resid.std(), rel=1e-9)       # the residuals' sd
        assert tc.sigma[p] < 0.05 * full.std()
        z = (resid - resid.mean()) / resid.std()
        assert tc.kurtosis[p] == pytest.approx(np.mean(z**4) - 3, rel=1e-9)
        centre, half = model.loglik_ratio_range(thetas[p], news[p])
        assert tc.range_bound[p] == half                                 # about P / N
    same = TrialChain.from_model(model, thetas, news)
    np.testing.assert_array_equal(same.sigma, tc.sigma)
    tc.save(tmp_path / "t.npz")
    back = TrialChain.load(tmp_path / "t.npz")
    for name in ("skewness", "kurtosis", "abs_z1", "abs_z3", "max_abs", "range_bound"):
        np.testing.assert_array_equal(getattr(back, name), getattr(tc, name))


def test_trial_chain_of_samplers_control_variates():
    """The real wrapper: the trial chain records the residuals' sd and the residual bound
    about P/N (the range ConfidenceTest uses), and the true mean."""
    from samplers import ControlVariates, LogisticRegression

    rng = np.random.default_rng(10)
    N = 4000
    X = np.column_stack([np.ones(N), rng.normal(size=(N, 2))])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.5]))).astype(float)
    plain = LogisticRegression(X, y)
    cv = ControlVariates(plain)
    thetas = cv.center.theta + rng.normal(0, 0.03, (4, 3))
    news = thetas + rng.normal(0, 0.03, (4, 3))
    tc = TrialChain.from_model(cv, thetas, news)
    full = TrialChain.from_model(plain, thetas, news)
    np.testing.assert_allclose(tc.mu, full.mu, rtol=1e-8)
    assert np.all(tc.sigma < 0.1 * full.sigma)
    for p in range(4):
        r = cv.loglik_ratio(thetas[p], news[p], np.arange(N))
        assert tc.sigma[p] == pytest.approx(r.std(), rel=1e-9)
        assert tc.range_bound[p] == pytest.approx(
            cv.loglik_ratio_range(thetas[p], news[p])[1], rel=1e-12)


def test_evaluate_reproduces_the_design(three_designs):
    from design import acceptance_error, evaluate

    tc, designs = three_designs
    for kind, d in designs.items():
        err, frac = evaluate(d, tc)
        if kind == "austere":
            r = acceptance_error(tc, m=d.m, epsilon=d.epsilon, threshold=d.prediction_threshold)
            np.testing.assert_allclose(frac, r.data_fraction, rtol=1e-12)
        else:
            np.testing.assert_allclose(err, d.pair_error, rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(frac, d.pair_data_fraction, rtol=1e-12)
    with pytest.raises(ValueError, match="trial_chain.N must be the design's N = 20000"):
        evaluate(designs["barker"], TrialChain(mu=[0.0], sigma=[1.0], c0=[0.0], N=100))


def test_from_model_refuses_a_range_that_does_not_hold_the_rows():
    rng = np.random.default_rng(1)
    model = WrapperLike(rng.normal(size=500), rng.normal(size=500))
    model.loglik_ratio_range = lambda th, th_new: (0.0, 1e-12)
    with pytest.raises(ValueError, match="loglik_ratio_range is not a bound for pair 0"):
        TrialChain.from_model(model, [[0.0]], [[0.1]])


# --- the Austere test ----------------------------------------------------------------------


def test_austere_design_on_residuals_reads_one_small_minibatch(real_tests):
    rng = np.random.default_rng(2)
    N = 20_000
    pops = _residual_like(rng, 10, N, sd=N**-1.5)
    cs = _with_ratios(pops, rng)
    trial = real_tests.Populations(pops).trial(cs)
    d = optimize(trial, TOL)
    assert isinstance(d, Design) and d.test == "austere"
    assert d.m == 10                          # below the default grid: the m floor is gone
    assert d.data_fraction * N == pytest.approx(10, rel=0.01) and d.error <= TOL
    assert "minibatch size m      10" in str(d)
    test = AustereTest.from_design(d, threshold="t")
    rows, dhat, se, _ = _check_against_real(real_tests, d, test, pops, cs, 4000, rng)
    assert np.all(np.abs(rows - 10) <= 2)            # one minibatch per step, per pair
    assert np.all(np.abs(dhat) <= Z * se + 1e-12)   # predicted error ~1e-8: none visible
    assert np.mean(np.abs(dhat)) <= TOL


# --- the Barker test -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["exp", "negexp", "t5"])
def test_barker_closed_form_matches_the_simulator(kind):
    """The fixed-batch error of the closed form against design.acceptance (40,000 batches,
    Rao-Blackwellised): within 1e-4 + 35 % + 5 SE where s^2 <= 0.6 (measured gaps are
    below 1e-3; the closed form is second order)."""
    rng = np.random.default_rng(3)
    N = 50_000
    base = {"exp": rng.exponential(size=N), "negexp": -rng.exponential(size=N),
            "t5": rng.standard_t(5, size=N)}[kind]
    base = (base - base.mean()) / base.std()
    z = base
    for b in (50, 200):
        for s2 in (0.2, 0.6):
            l = base * math.sqrt(s2 * b / (N * N * (1 - b / N)))
            for D in (-1.5, 0.5):
                c = D - N * l.mean()
                sim = acceptance.barker_acceptance(l, b, log_const=c, n_tests=40_000, rng=4)
                cf = barker_error_fixed(b, N=N, delta=D, variance=l.var(),
                                        skewness=np.mean(z**3), kurtosis=np.mean(z**4) - 3)
                assert abs(cf - sim.error) <= 1e-4 + 0.35 * abs(sim.error) + 5 * sim.standard_error


def test_barker_design_on_residuals(real_tests):
    rng = np.random.default_rng(5)
    N = 20_000
    pops = _residual_like(rng, 10, N, sd=N**-1.5)
    cs = _with_ratios(pops, rng)
    trial = real_tests.Populations(pops).trial(cs)
    d = optimize(trial, TOL, test="barker")
    assert isinstance(d, BarkerDesign) and d.test == "barker"
    assert (d.m, d.delta) == (10, None) and d.grown_fraction == 0
    assert d.data_fraction * N == pytest.approx(10) and d.error < 1e-6
    text = str(d)
    assert "rows per stage m      10" in text and "variance condition" in text
    test = BarkerTest.from_design(d)
    assert (test.m, test.delta) == (10, None)
    rows, dhat, se, gap = _check_against_real(real_tests, d, test, pops, cs, 4000, rng)
    assert np.all(gap <= Z * se)
    assert np.mean(np.abs(dhat)) <= TOL


def test_barker_design_without_control_variates(real_tests):
    """Gaussian-shaped l_i whose batch must grow (s^2 > 1 at 50 rows): the stopping batch is
    random, the prediction of rows holds, and with no skew there is no selection bias."""
    rng = np.random.default_rng(6)
    N = 50_000
    pops = []
    for _ in range(8):
        base = rng.normal(size=N)
        s2_at_50 = rng.uniform(2.0, 8.0)
        pops.append((base - base.mean()) / base.std() * math.sqrt(s2_at_50 * 50) / N)
    cs = _with_ratios(pops, rng)
    trial = real_tests.Populations(pops).trial(cs)
    d = optimize(trial, TOL, test="barker", m_grid=[20, 50], delta_grid=[None])
    assert d.grown_fraction > 0.5 and "selection bias" in str(d)
    rows, dhat, se, gap = _check_against_real(real_tests, d, BarkerTest.from_design(d),
                                              pops, cs, 4000, rng)
    assert np.all(gap <= Z * se)
    assert np.mean(np.abs(dhat)) <= TOL


def test_barker_selection_term_is_accurate(real_tests):
    """Negatively skewed l_i whose batch grows: the real test errs by +0.03 (the selection
    bias of stopping on the batch variance, docs/correction.md section 6); the design's
    first-order term (optional stopping, design._barker_design._stopping_shift) is within
    the simulation's noise, and the earlier regression term, 1.3-6 times too large, would
    not be."""
    rng = np.random.default_rng(7)
    N = 50_000
    pops = []
    for _ in range(4):
        base = -rng.exponential(size=N)
        pops.append((base - base.mean()) / base.std() * math.sqrt(2.0 * 50) / N)
    cs = [float(0.3 - N * np.mean(l)) for l in pops]
    trial = real_tests.Populations(pops).trial(cs)
    d = optimize(trial, 0.49, test="barker", m_grid=[50], delta_grid=[None])
    _, dhat, se, _ = _check_against_real(real_tests, d, BarkerTest.from_design(d), pops, cs,
                                         4000, rng)
    assert np.all(dhat > 0) and np.all(d.pair_error > 0)
    assert np.all(np.abs(dhat - d.pair_error) <= Z * se)
    assert np.mean(d.pair_error) == pytest.approx(np.mean(dhat), rel=0.25)


# --- the confidence sampler ----------------------------------------------------------------


def test_confidence_radius_is_the_samplers():
    for code, bound in enumerate(_BOUNDS):
        for t, N, C, sd, dt in ((100, 10**6, 1.0, 0.1, 1e-3), (6000, 10**4, 0.2, 0.05, 0.3)):
            assert confidence_radius(bound, t, N, C, sd, dt) == pytest.approx(
                confidence_radius_code(code, t, N, C, sd, dt), rel=1e-14)


@pytest.mark.parametrize("residuals", [True, False])
def test_confidence_design(real_tests, residuals):
    rng = np.random.default_rng(8)
    N = 20_000
    if residuals:           # heavy-tailed residuals with a shift P/N and their range
        pops = _residual_like(rng, 8, N, sd=N**-1.5)
        shift = rng.normal(0, 1.0, 8) / N
        pops = [l + s for l, s in zip(pops, shift)]
        model = real_tests.Populations(pops, bound=1.0, centres=shift)
    else:                   # plain l_i of sd 0.1 / sqrt(N): the test reads a large share
        pops = _residual_like(rng, 8, N, sd=0.1 / math.sqrt(N), kind="normal")
        model = real_tests.Populations(pops, bound=1.0)
    cs = _with_ratios(pops, rng)
    trial = model.trial(cs)
    d = optimize(trial, TOL, test="confidence")
    assert isinstance(d, ConfidenceDesign) and d.test == "confidence" and d.delta == TOL
    assert "growth factor gamma" in str(d)
    # the predicted data use comes with its standard error over the pairs
    frac = d.pair_data_fraction
    assert d.data_fraction == pytest.approx(np.mean(frac))
    assert d.data_fraction_se == pytest.approx(np.std(frac, ddof=1) / math.sqrt(frac.size))
    assert d.pairs_for_10pc == math.ceil((np.std(frac, ddof=1) / np.mean(frac) / 0.1) ** 2)
    test = ConfidenceTest.from_design(d)
    assert (test.batch_size, test.gamma, test.delta) == (d.batch_size, d.gamma, TOL)
    rows, dhat, se, gap = _check_against_real(real_tests, d, test, pops, cs, 2000, rng,
                                              C=trial.range_bound)
    assert np.all(gap <= Z * se + 1e-12)
    assert np.mean(np.abs(dhat)) <= TOL
    if residuals:           # the range term 2 C L / t, not the sd, sets the stop: C / sd ~ 30
        assert d.batch_size == 10 and d.data_fraction < 0.01


# --- from_design and bad input -------------------------------------------------------------


@pytest.fixture(scope="module")
def three_designs():
    rng = np.random.default_rng(9)
    n = 12
    N = 20_000
    tc = TrialChain(mu=rng.normal(0, 1, n) / N, sigma=np.full(n, 1e-7), c0=np.zeros(n), N=N,
                    skewness=np.zeros(n), kurtosis=np.zeros(n), abs_z1=np.full(n, 0.8),
                    abs_z3=np.full(n, 1.6), range_bound=np.full(n, 1e-6))
    return tc, {kind: optimize(tc, TOL, test=kind, **({"m_grid": [10, 50]}
                                                      if kind == "austere" else {}))
                for kind in ("austere", "barker", "confidence")}


@pytest.mark.parametrize("cls", [AustereTest, BarkerTest, ConfidenceTest])
def test_from_design_refuses_another_kind(three_designs, cls):
    _, designs = three_designs
    kind = {AustereTest: "austere", BarkerTest: "barker", ConfidenceTest: "confidence"}[cls]
    assert isinstance(cls.from_design(designs[kind]), cls)
    for other, d in designs.items():
        if other != kind:
            with pytest.raises(ValueError, match=f"needs a design made with test='{kind}', "
                                                 f"got a {type(d).__name__} made for "
                                                 f"test='{other}'"):
                cls.from_design(d)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(test="metropolis"), ValueError, r"test must be one of \('austere', 'barker', "
                                          r"'confidence'\), got 'metropolis'"),
    (dict(tolerance=0.7), ValueError, r"tolerance must be in \(0, 0.5\), got 0.7"),
    (dict(tolerance=0.0, test="barker"), ValueError, r"tolerance must be in \(0, 0.5\), got 0.0"),
    (dict(test="barker", epsilon_grid=[0.1]), TypeError,
     r"epsilon_grid applies to test='austere', not test='barker'"),
    (dict(test="austere", gamma_grid=[2.0]), TypeError,
     r"gamma_grid applies to test='confidence', not test='austere'"),
    (dict(test="barker", delta_grid=[None, 1.5]), ValueError,
     r"delta_grid\[1\] must be in \(0, 1\), got 1.5"),
    (dict(test="confidence", bound="chernoff"), ValueError, r"bound must be one of"),
    (dict(test="confidence", gamma_grid=[1.0]), ValueError,
     r"gamma_grid\[0\] must be in \(1, inf\), got 1.0"),
    (dict(test="barker", m_grid=[1]), ValueError, r"m_grid\[0\] must be in \[2, 20000\], got 1"),
])
def test_bad_arguments(three_designs, kwargs, exc, match):
    tc, _ = three_designs
    args = dict(tolerance=TOL) | kwargs
    with pytest.raises(exc, match=match):
        optimize(tc, **args)


def test_a_trial_chain_without_what_the_test_needs():
    tc = TrialChain(mu=[1e-5, -1e-5], sigma=[1e-3, 1e-3], c0=[0.0, 0.0], N=10_000)
    with pytest.raises(ValueError, match=r"the Barker design needs trial_chain.skewness, "
                                         r"trial_chain.kurtosis, trial_chain.abs_z1, "
                                         r"trial_chain.abs_z3 .* TrialChain.from_model"):
        optimize(tc, TOL, test="barker")
    with pytest.raises(ValueError, match=r"the confidence design needs trial_chain.range_bound"):
        optimize(tc, TOL, test="confidence")
    with pytest.raises(TypeError, match="the barker design needs a TrialChain, got int"):
        optimize(10_000, TOL, test="barker", method="worst-case")


# --- logistic regression with control variates ---------------------------------------------


@pytest.mark.slow
def test_designed_tests_on_a_logistic_regression_with_control_variates(real_tests):
    """N = 10^5, d = 10 + intercept, Laplace-scaled random walk: the designed Austere and
    Barker tests on ControlVariates read one minibatch per step, in a chain and at fresh
    pairs, within 20 % of the prediction, and err under the tolerance there."""
    from design import evaluate
    from samplers import ControlVariates, GaussianPrior, LogisticRegression, RandomWalk, sample

    rng = np.random.default_rng(11)
    N, d = 100_000, 10
    beta = rng.normal(0.0, 1.0 / np.sqrt(d), d + 1)
    X = np.column_stack([rng.normal(size=(N, d)), np.ones(N)])
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(float)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    L = np.linalg.cholesky(cv.laplace_covariance())

    def pairs(n):
        theta = cv.center.theta + rng.standard_normal((n, d + 1)) @ L.T
        return theta, theta + 2.38 / np.sqrt(d + 1) * rng.standard_normal((n, d + 1)) @ L.T

    trial = TrialChain.from_model(cv, *pairs(20))
    fa, fb = pairs(5)
    fresh = TrialChain.from_model(cv, fa, fb)
    walk = RandomWalk.from_laplace(cv)
    for kind in ("austere", "barker"):
        des = optimize(trial, TOL, test=kind)
        assert des.data_fraction * N <= 1.5 * des.m          # one minibatch per step
        test = (AustereTest.from_design(des, threshold="t") if kind == "austere"
                else BarkerTest.from_design(des))
        chain = sample(cv, test, walk, cv.center.theta, 300, rng=rng)
        assert chain.stats["n_used"].mean() == pytest.approx(des.data_fraction * N, rel=0.2)
        err, frac = evaluate(des, fresh)
        for p in range(5):
            l = cv.loglik_ratio(fa[p], fb[p], np.arange(N))
            c = float(cv.logprior(fb[p]) - cv.logprior(fa[p]))
            dhat, se, used = real_tests.simulate(test, l, c, 2000, rng)
            assert used == pytest.approx(frac[p] * N, rel=0.2)
            assert abs(dhat - err[p]) <= Z * se + 1e-12
            assert abs(dhat) <= TOL + Z * se
