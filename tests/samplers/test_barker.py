"""The minibatch Barker test: stopping rule, acceptance probability, exact limit, bounds.

Compiled vs reference bit-identity is in test_accept.py, the chain against a closed-form
posterior in test_correctness.py, bad settings in test_inputs.py.
"""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special, stats

from design import correction
from design.acceptance import barker_acceptance
from samplers import BarkerTest, FlatPrior, GaussianMean, IndexSampler
from design._lib.moments import abs_central_sums, batch_moments3, merge_moments3
from design._lib.rules import novak_error, novak_lower_bound
from samplers._view import check_model

THETA, THETA_NEW = np.array([0.0]), np.array([0.01])


def population_model(l):
    """A GaussianMean whose l_i between THETA and THETA_NEW are the given values.

    With sigma = 1 and a flat prior, ``l_i = d (x_i - d/2)`` for ``d = THETA_NEW - THETA``.
    """
    d = THETA_NEW[0] - THETA[0]
    return GaussianMean(np.asarray(l) / d + d / 2, sigma=1.0, prior=FlatPrior())


def brute_force(test, l_drawn, log_const):
    """Algorithm 1's stopping rule with NumPy, eps recomputed from scratch at every stage."""
    N, m, sigma = l_drawn.shape[0], test.m, test.sigma
    for stage in range(1, N):
        b = min(stage * m, N)
        z = l_drawn[:b]
        if b == N:
            return dict(n_used=N, n_stages=stage, epsilon=0.0, var_delta=0.0, skew=0.0)
        s2 = N**2 * z.var(ddof=1) / b * ((1 - b / N) if test.fpc else 1.0)
        std = (z - z.mean()) / z.std()
        eps = (6.4 * np.mean(np.abs(std) ** 3) + 2 * np.mean(np.abs(std))) / math.sqrt(b)
        if s2 < sigma**2 and (test.delta is None or eps <= test.delta):
            k3 = stats.kstat(z, 3) * N**3 / b**2
            if test.fpc:
                k3 *= (1 - b / N) * (1 - 2 * b / N)
            return dict(n_used=b, n_stages=stage, epsilon=eps, var_delta=s2,
                        skew=k3 / (3 * sigma**3))
    raise AssertionError("unreachable")


def decide(test, model, log_const, rng):
    view, theta = check_model(model, THETA)
    return test.decide(rng, view, IndexSampler(view.N, rng), theta, THETA_NEW.copy(), log_const)


POPULATIONS = {
    "normal": lambda rng, n: rng.normal(0.0, 1.0, n),
    "exponential": lambda rng, n: rng.exponential(1.0, n),
    "student-t3": lambda rng, n: rng.standard_t(3, n),
}


@pytest.mark.parametrize("population", list(POPULATIONS))
@pytest.mark.parametrize("test", [
    BarkerTest(m=40, delta=0.6),
    BarkerTest(m=25, delta=0.95, fpc=False),
    BarkerTest(m=60, delta=None),
    BarkerTest(m=30, delta=0.8, skew=True),
], ids=repr)
def test_stopping_rule_and_reported_statistics_match_a_brute_force_reference(population, test):
    # l_i scaled so that Var(Delta*) crosses sigma^2 after a few stages; the O(batch)
    # skipping of the eps pass must stop exactly where recomputing eps every stage does.
    N = 20_000
    rng = np.random.default_rng(1)
    l = POPULATIONS[population](rng, N) * 3.0 / N
    model = population_model(l)
    for seed in range(6):
        c = float(rng.normal(0.0, 2.0))
        rows = IndexSampler(N, np.random.default_rng(seed)).take(N)
        expected = brute_force(test, model.loglik_ratio(THETA, THETA_NEW, rows), c)
        _, info = decide(test, model, c, np.random.default_rng(seed))
        assert (info.n_used, info.n_stages) == (expected["n_used"], expected["n_stages"])
        for key in ("epsilon", "var_delta", "skew"):
            assert getattr(info, key) == pytest.approx(expected[key], rel=1e-9, abs=1e-15), key
        assert info.batch == info.n_used      # the sequential rule decides with every row read
        b = info.n_used
        assert info.mean == pytest.approx(np.mean(model.loglik_ratio(THETA, THETA_NEW,
                                                                     rows[:b])), rel=1e-9)
        if test.delta is not None:
            assert info.epsilon <= test.delta


def test_delta_forces_the_batch_past_novak_floor():
    # eps >= 8.4 / sqrt(b) for any data: delta = 0.3 needs b >= 784 even when the variance
    # condition holds from the first stage.
    model = population_model(np.random.default_rng(2).normal(0.0, 1e-5, 50_000))
    _, loose = decide(BarkerTest(m=50, delta=None), model, 0.0, np.random.default_rng(0))
    _, strict = decide(BarkerTest(m=50, delta=0.3), model, 0.0, np.random.default_rng(0))
    assert loose.n_used == 50 and loose.epsilon > 1.0
    assert strict.n_used >= (8.4 / 0.3) ** 2 and strict.epsilon <= 0.3


@pytest.mark.parametrize("log_const", [-3.0, 0.4, 2.0])
def test_reading_every_row_is_barkers_exact_test(log_const):
    N = 500
    l = np.random.default_rng(3).normal(0.0, 0.05, N)
    model = population_model(l)
    delta = N * float(np.mean(model.loglik_ratio(THETA, THETA_NEW, np.arange(N)))) + log_const
    for seed in range(40):
        accepted, info = decide(BarkerTest(m=N), model, log_const, np.random.default_rng(seed))
        rng = np.random.default_rng(seed)
        rng.random(N)                                  # the rows' uniforms
        u = rng.random()
        assert accepted == (delta + math.log(u / (1 - u)) > 0)
        assert info[:5] == (N, 1, 0.0, 0.0, 0.0) and info.batch == N
        assert info.mean == pytest.approx((delta - log_const) / N, rel=1e-12)


def _acceptance_frequency(test, model, log_const, n_decisions, seed):
    view, theta = check_model(model, THETA)
    rng = np.random.default_rng(seed)
    batches = IndexSampler(view.N, rng)
    accepted = 0
    for _ in range(n_decisions):
        a, info = test.decide(rng, view, batches, theta, THETA_NEW, log_const)
        assert info.n_stages == 1  # no selection by the stopping rule
        accepted += a
    return accepted / n_decisions


@pytest.mark.parametrize("seed, delta_target, fpc", [(0, -2.5, True), (1, 0.0, True),
                                                     (2, 1.32, True), (3, 1.32, False)])
def test_acceptance_probability_is_the_logistic_of_delta(seed, delta_target, fpc):
    # Delta* from a symmetric, Gaussian-shaped population (normal quantiles), a batch of
    # 80 % of it so that the finite-population factor matters, and an estimated
    # Var(Delta*) of sigma^2 / 2. The frequency over 30,000 decisions is compared with
    # S(Delta) and with the Rao-Blackwellised simulator of design.acceptance (an independent
    # implementation, SE ~1e-5). At fixed b the s-estimation term s^4 S''''/(4(b - 1)) is
    # below 1e-5 here. Without the factor the estimate exceeds the true variance
    # s^2 (1 - b/N) by s^2 b/N, so the Gaussian part has variance sigma^2 - s^2 b/N and the
    # test accepts with 1 - F(-Delta) for F the cdf of N(0, sigma^2 - s^2 b/N) + X_corr
    # (+0.021 over S(Delta) at Delta = 1.32, 7 binomial SE; -(b/N)(s^2/2) S''(Delta) to
    # first order).
    N, b, n_dec, s2 = 1250, 1000, 30_000, 0.5
    q = special.ndtri((np.arange(N) + 0.5) / N)
    factor = (1 - b / N) if fpc else 1.0
    model = population_model(q / q.std(ddof=1) * math.sqrt(s2 * b / (N**2 * factor)))
    l = model.loglik_ratio(THETA, THETA_NEW, np.arange(N))
    log_const = delta_target - N * float(l.mean())
    freq = _acceptance_frequency(BarkerTest(m=b, fpc=fpc), model, log_const, n_dec, seed)
    ref = barker_acceptance(l, b, log_const=log_const, fpc=fpc, n_tests=20_000, rng=seed)
    se = math.sqrt(ref.probability * (1 - ref.probability) / n_dec)
    assert abs(freq - ref.probability) < 4.5 * se + 4 * ref.standard_error
    S = special.expit(delta_target)
    if fpc:
        assert abs(freq - S) < 4.5 * se
        assert abs(ref.probability - S) < 1e-5 + 4 * ref.standard_error
    else:
        tau = math.sqrt(1.0 - s2 * b / N)
        biased = 1.0 - correction.default().convolved_cdf(-delta_target, tau)
        assert ref.probability == pytest.approx(biased, abs=1e-4)
        assert abs(freq - biased) < 4.5 * se and freq - S > 3 * se


@pytest.mark.parametrize("delta_target", [-0.5, 0.5])
def test_presized_rule_removes_the_selection_bias_of_the_sequential_rule(delta_target):
    # Negatively skewed l_i (minus an exponential, skewness -2), scaled so that the first
    # stage of 50 rows has Var(Delta*) = 2 sigma^2: Algorithm 1 grows the batch (about 120
    # rows) and stops on a batch whose small sample variance comes with a large Delta*, so
    # it accepts 0.027-0.036 too often (8-10 binomial SE at 20,000 decisions; the skew
    # table does not help). The presized rule sizes its batch from a pilot whose rows do
    # not enter Delta' (samplers.mhtests.barker_presized): with the skew table it has no error
    # left at this precision, and without it only the fixed-batch skew term
    # -S'''(Delta) k3 / 3 (about 0.004 here) plus clipping (4.5 SE + 0.006 allowed).
    N, n_dec = 20_000, 20_000
    raw = -np.random.default_rng(5).exponential(1.0, N)
    model = population_model((raw - raw.mean()) / raw.std() * math.sqrt(2.0 * 50) / N)
    l = model.loglik_ratio(THETA, THETA_NEW, np.arange(N))
    log_const = delta_target - float(l.sum())
    S = special.expit(delta_target)
    view, theta = check_model(model, THETA)

    def error(test, seed):
        rng = np.random.default_rng(seed)
        batches = IndexSampler(N, rng)
        hits, rows = 0, 0
        for _ in range(n_dec):
            accepted, info = test.decide(rng, view, batches, theta, THETA_NEW, log_const)
            hits += accepted
            rows += info.n_used
        p = hits / n_dec
        return p - S, math.sqrt(p * (1 - p) / n_dec), rows / n_dec

    seq, se, seq_rows = error(BarkerTest(m=50, delta=None), 1)
    assert seq > 5 * se and seq_rows > 80
    pre, se, pre_rows = error(BarkerTest(m=50, delta=None, stopping="presized"), 2)
    assert abs(pre) < 4.5 * se + 0.006 and pre_rows < 2 * seq_rows
    pre_skew, se, _ = error(BarkerTest(m=50, delta=None, stopping="presized", skew=True), 3)
    assert abs(pre_skew) < 4.5 * se


def test_presized_batch_size_is_the_smallest_meeting_the_target():
    # b is the smallest size with N'^2 v (1/b - 1/N') <= sigma^2 / margin, at least m and
    # at most N' = N - a (then every row is read and the decision is exact).
    from samplers.mhtests.barker_presized import presized_batch

    N, a, margin = 10_000, 50, 1.3
    for v in (1e-8, 3e-7, 2e-6, 1e-4):
        b = presized_batch(a, N, v * (a - 1), 1.0, margin, True, a)
        rest = N - a
        def pred(k):
            return rest**2 * v * (1 / k - 1 / rest)
        assert a <= b <= rest
        assert b == rest or pred(b) <= 1 / margin * (1 + 1e-12)
        assert b == a or pred(b - 1) > 1 / margin
        b_nofpc = presized_batch(a, N, v * (a - 1), 1.0, margin, False, a)
        assert b_nofpc == min(max(math.ceil(margin * rest**2 * v), a), rest)
    model = population_model(np.random.default_rng(6).normal(0.0, 1.0, 400))
    for seed in range(5):  # a population too small for the target: every row, exactly
        _, info = decide(BarkerTest(m=50, delta=None, fpc=False, stopping="presized"), model,
                         0.2, np.random.default_rng(seed))
        # (the pilot grows once: 100 rows, a quarter of the 300 left, before it sizes b)
        assert info[:5] == (400, 3, 0.0, 0.0, 0.0) and info.batch == 400


def presized_brute_force(test, l_drawn):
    """The presized rule with NumPy: the pilot grows by m rows until the relative standard
    error of its variance, sqrt((kurtosis - 1) / a), is at most PILOT_RSE or it is a quarter of its
    batch; then the batch it sizes."""
    from samplers.mhtests.barker_presized import PILOT_RSE

    N, m, target = l_drawn.shape[0], test.m, test.sigma**2 / test.margin
    a = m
    while True:
        pilot = l_drawn[:a]
        rest = N - a
        v = pilot.var(ddof=1)
        b = math.ceil(rest * rest * v / (target + rest * v) if test.fpc else rest * rest * v
                      / target)
        b = min(max(b, min(m, rest)), rest)
        z = pilot - pilot.mean()
        kurtosis = a * np.sum(z**4) / np.sum(z**2) ** 2
        if 4 * a >= b or math.sqrt((kurtosis - 1) / a) <= PILOT_RSE * (1 + 1e-12):
            break
        a += m
    batch = l_drawn[a:a + b]
    s2 = rest**2 * batch.var(ddof=1) / b * ((1 - b / rest) if test.fpc else 1.0)
    return a, b, s2


@pytest.mark.parametrize("population", list(POPULATIONS))
def test_presized_pilot_grows_until_its_variance_is_reliable(population):
    # Heavy-tailed l_i make a small pilot's variance unreliable: sized from it, the batch is
    # often too small, its s^2 exceeds sigma^2, X_nc is clipped to 0 and the acceptance is
    # flatter than S (benchmarks/barker_pairs_logistic.py). The rule grows the pilot until
    # sqrt((kurtosis - 1) / a) <= PILOT_RSE; it must stop where the NumPy reference does.
    N = 20_000
    rng = np.random.default_rng(8)
    l = POPULATIONS[population](rng, N) * 20.0 / N
    model = population_model(l)
    test = BarkerTest(m=40, delta=None, stopping="presized")
    grew = 0
    for seed in range(8):
        rows = IndexSampler(N, np.random.default_rng(seed)).take(N)
        a, b, s2 = presized_brute_force(test, model.loglik_ratio(THETA, THETA_NEW, rows))
        _, info = decide(test, model, 0.1, np.random.default_rng(seed))
        assert (info.n_used - info.batch, info.batch) == (a, b)
        assert info.var_delta == pytest.approx(s2, rel=1e-9)
        grew += a > test.m
    if population == "student-t3":
        assert grew >= 6


def test_pickled_test_decides_identically():
    # sample_chains sends the test to worker processes; the default table is reloaded there.
    model = population_model(np.random.default_rng(4).normal(0.0, 3e-4, 5000))
    custom = correction.build(0.9, spacing=0.1)
    for test in (BarkerTest(m=40, delta=0.9), BarkerTest(m=30, delta=None, skew=True),
                 BarkerTest(m=50, correction=custom),
                 BarkerTest(m=20, delta=None, stopping="presized", margin=1.7)):
        back = pickle.loads(pickle.dumps(test))
        assert repr(back) == repr(test) and back.sigma == test.sigma
        for seed in range(5):
            assert (decide(back, model, 0.3, np.random.default_rng(seed))
                    == decide(test, model, 0.3, np.random.default_rng(seed)))


@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=60),
       st.floats(-1e3, 1e3))
def test_novak_lower_bound_never_exceeds_the_bound(values, center):
    v = np.array(values)
    n = v.shape[0]
    mean, m2, _ = batch_moments3(v)
    t1, t3 = abs_central_sums(v, center)
    s1, s3 = abs_central_sums(v, mean)
    eps = novak_error(n, m2, s1, s3)
    assert novak_lower_bound(n, mean, m2, center, t1, t3) <= eps * (1 + 1e-9) + 1e-300
    if m2 > 1e-20 * max(1.0, float(np.abs(v).max())) ** 2:
        assert eps >= 8.4 / math.sqrt(n) * (1 - 1e-9)


@given(st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=50), st.integers(1, 49))
def test_merged_third_moment_matches_a_direct_computation(values, split):
    v = np.array(values)
    split = min(split, v.shape[0] - 1)
    a, b = v[:split], v[split:]
    state = merge_moments3(0, 0.0, 0.0, 0.0, a.shape[0], *batch_moments3(a))
    n, mean, m2, m3 = merge_moments3(*state, b.shape[0], *batch_moments3(b))
    d = v - v.mean()
    scale = max(1.0, float(np.abs(v).max()))
    assert n == v.shape[0]
    assert mean == pytest.approx(v.mean(), abs=1e-12 * scale)
    assert m2 == pytest.approx(np.sum(d**2), rel=1e-9, abs=1e-9 * scale**2)
    assert m3 == pytest.approx(np.sum(d**3), rel=1e-8, abs=1e-8 * scale**3)
