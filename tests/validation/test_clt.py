"""clt_check: populations of known shape, the Gaussian vs lognormal example of Bardenet et al.
(2014, section 4.1), and the result object."""

import math

import matplotlib
import numpy as np
import pytest
from scipy import stats

from samplers import ExactTest, Gaussian, GaussianMean, RandomWalk, sample
from validation import clt_check, loglik_ratios, proposal_pairs

matplotlib.use("Agg")

N = 100_000


@pytest.fixture(scope="module")
def exponential():
    return np.random.default_rng(10).exponential(size=N)


@pytest.fixture(scope="module")
def normal():
    return np.random.default_rng(11).normal(size=N)


def test_known_shape_of_an_exponential_population(exponential):
    """Skewness 2 and excess kurtosis 6 (within 5 sampling sds at N = 1e5: 0.026 and 0.30,
    measured over 200 samples), and the t statistic's skewness -2 gamma / sqrt(b) (the
    first Edgeworth term of Student's t, Hall 1987), within 5 Monte Carlo SEs plus 0.03
    for the O(b^-3/2) terms."""
    res = clt_check(exponential, batch_size=100, n_sim=20_000, search=False, rng=0)
    assert abs(res.skewness[0] - 2.0) < 5 * 0.026
    assert abs(res.excess_kurtosis[0] - 6.0) < 5 * 0.30
    t_skew = stats.skew(res.t_statistics[0])
    assert abs(t_skew + 2 * res.skewness[0] / 10) < 5 * math.sqrt(6 / 20_000) + 0.03
    # Novak's bound from the population's absolute moments: E|X| = 2/e, E|X|^3 = 12/e - 2
    e1, e3 = 2 / math.e, 12 / math.e - 2
    assert res.novak[0] == pytest.approx((6.4 * e3 + 2 * e1) / 10, rel=0.02)


def test_known_shape_of_a_gaussian_population(normal):
    res = clt_check(normal, batch_size=100, n_sim=20_000, search=False, rng=0)
    assert abs(res.skewness[0]) < 5 * math.sqrt(6 / N)
    assert abs(res.excess_kurtosis[0]) < 5 * math.sqrt(24 / N)
    e1, e3 = math.sqrt(2 / math.pi), 2 * math.sqrt(2 / math.pi)
    assert res.novak[0] == pytest.approx((6.4 * e3 + 2 * e1) / 10, rel=0.01)
    # Student-t is exact for i.i.d. Gaussian draws (b << N): the distance is noise alone
    assert res.passed and res.ks_pvalue[0] > 1e-3


def test_verdicts_and_smallest_batch_size(exponential, normal):
    """Student-t is the right law for Gaussian l_i at any b; exponential l_i need a batch
    of a few dozen (KS about 0.12 sqrt(4 / b) by the Edgeworth term)."""
    both = np.stack([normal, exponential])
    small = clt_check(both, batch_size=10, n_sim=5000, tolerance=0.05, rng=1)
    assert list(small.ks_distance <= 0.05) == [True, False] and not small.passed
    b = small.min_batch_size
    assert b is not None and 10 < b < 200
    at_b = clt_check(exponential, batch_size=b, n_sim=5000, search=False, rng=2)
    assert at_b.ks_distance[0] <= 0.05 + at_b.noise        # borderline there, up to noise
    assert not clt_check(exponential, batch_size=b // 2, n_sim=5000, search=False,
                         rng=2).passed
    large = clt_check(both, batch_size=400, n_sim=5000, tolerance=0.05, rng=1)
    assert large.passed and large.min_batch_size <= 400


def test_novak_batch_size_is_where_the_bound_meets_the_tolerance(normal):
    res = clt_check(normal, batch_size=100, n_sim=2000, tolerance=0.1, search=False, rng=0)
    b = res.novak_batch_size[0]
    assert res.novak[0] * math.sqrt(100 / b) <= 0.1 < res.novak[0] * math.sqrt(100 / (b - 1))


def gaussian_model_pairs(x, n_pairs, rng):
    """Pairs near the posterior mode of the (mean, log sd) model, random-walk proposals of
    1.7 posterior sds per coordinate (2.4 / sqrt(2), the optimal random-walk scale)."""
    m, s = x.mean(), x.std()
    sd = np.array([s, 1 / math.sqrt(2)]) / math.sqrt(x.size)
    thetas = np.array([m, math.log(s)]) + rng.normal(size=(n_pairs, 2)) * sd
    return thetas, thetas + 1.7 * rng.normal(size=(n_pairs, 2)) * sd


def test_bardenet_section_4_1_gaussian_passes_lognormal_fails():
    """x ~ N(0, 0.1^2) and x ~ lognormal(0, 2), N = 1e5, the (mean, log sd) model, b = 500:
    the t statistic is close to Student-t on Gaussian data and far from it on lognormal."""
    rng = np.random.default_rng(12)
    gauss = rng.normal(0.0, 0.1, N)
    lognormal = rng.lognormal(0.0, 2.0, N)
    ok = clt_check(Gaussian(gauss), gaussian_model_pairs(gauss, 4, rng), batch_size=500,
                   n_sim=10_000, search=False, rng=1)
    bad = clt_check(Gaussian(lognormal), gaussian_model_pairs(lognormal, 4, rng),
                    batch_size=500, n_sim=10_000, rng=1)
    assert ok.passed and ok.ks_distance.max() < 0.035
    assert not bad.passed and bad.ks_distance.min() > 0.3
    assert bad.min_batch_size is None           # not even half the data is enough
    assert np.abs(bad.skewness).min() > 50 and np.abs(ok.skewness).max() < 3.5
    assert np.all(bad.jarque_bera_pvalue < 1e-10) and np.all(bad.lilliefors_pvalue < 1e-3)


def test_pairs_from_a_model_give_the_same_result_as_their_l_vectors():
    x = np.random.default_rng(13).normal(size=5000)
    model = GaussianMean(x)
    chain = sample(model, ExactTest(), RandomWalk(0.02), [0.0], 60, rng=3)
    pairs = proposal_pairs(chain, model, 3, rng=4)
    l = np.stack([loglik_ratios(model, a, b) for a, b in zip(*pairs)])
    from_model = clt_check(model, pairs, batch_size=50, n_sim=2000, tolerance=0.1, rng=5)
    from_rows = clt_check(l, batch_size=50, n_sim=2000, tolerance=0.1, rng=5)
    # the same rows and l_i; the model's mean comes from its pass over all pairs (Chan's
    # chunked merge) instead of np.mean of the kept vector: equal to rounding
    np.testing.assert_allclose(from_model.t_statistics, from_rows.t_statistics, rtol=1e-11,
                               atol=1e-13)
    for name in ("mean", "sd", "skewness", "excess_kurtosis", "novak"):
        np.testing.assert_allclose(getattr(from_model, name), getattr(from_rows, name),
                                   rtol=1e-9)
    assert from_model.min_batch_size == from_rows.min_batch_size


def test_same_seed_same_result_and_inputs_untouched(exponential):
    before = exponential.copy()
    a = clt_check(exponential, batch_size=30, n_sim=2000, tolerance=0.1, rng=7)
    b = clt_check(exponential, batch_size=30, n_sim=2000, tolerance=0.1, rng=7)
    np.testing.assert_array_equal(a.t_statistics, b.t_statistics)
    assert a.min_batch_size == b.min_batch_size
    np.testing.assert_array_equal(exponential, before)
    with pytest.raises(ValueError):
        a.ks_distance[0] = 0.0


def test_report_and_plot(exponential):
    res = clt_check(exponential, batch_size=30, n_sim=2000, tolerance=0.1, rng=7)
    text = str(res)
    assert "FAILS" in text or "PASSES" in text
    assert "KS distance to Student-t(29)" in text and "smallest passing batch size" in text
    fig = res.plot()
    qq, hist = fig.axes
    assert len(qq.lines[0].get_xdata()) == 2000 and hist.get_yscale() == "log"
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(batch_size=1), ValueError, r"batch_size must be in \[2, 99\]"),
    (dict(batch_size=100), ValueError, r"batch_size must be in \[2, 99\]"),
    (dict(batch_size=2.5), TypeError, "batch_size must be an integer"),
    (dict(tolerance=0.0), ValueError, r"tolerance must be in \(0, 1\)"),
    (dict(n_sim=50), ValueError, "n_sim must be >= 100"),
    (dict(n_sim=500, tolerance=0.05), ValueError, "use n_sim >= 3200"),
    (dict(rng="seed"), TypeError, "rng must be"),
])
def test_argument_checks(kwargs, error, message):
    l = np.random.default_rng(0).normal(size=100)
    args = dict(batch_size=10, n_sim=2000, tolerance=0.1) | kwargs
    with pytest.raises(error, match=message):
        clt_check(l, **args)


def test_source_checks():
    model = GaussianMean(np.zeros(10) + np.arange(10.0))
    with pytest.raises(ValueError, match="finite"):
        clt_check(np.array([1.0, np.nan, 2.0, 3.0, 4.0]), batch_size=2, n_sim=2000,
                  tolerance=0.1)
    with pytest.raises(TypeError, match="model with"):
        clt_check(np.ones(10), ([0.0], [1.0]))
    with pytest.raises(TypeError, match="proposal_pairs"):
        chain = sample(model, ExactTest(), RandomWalk(0.1), [0.0], 5, rng=0)
        clt_check(model, chain)
    with pytest.raises(ValueError, match="same non-empty shape"):
        clt_check(model, ([[0.0], [1.0]], [[0.5]]), batch_size=2)
    with pytest.raises(ValueError, match="all equal"):
        clt_check(model, ([[0.5]], [[0.5]]), batch_size=2, n_sim=2000, tolerance=0.1)


class _Counting:
    """GaussianMean over ``x`` counting the rows its log-likelihood is evaluated at."""

    def __init__(self, x):
        self.inner, self.N, self.dim, self.rows = GaussianMean(x), x.size, 1, 0

    def loglik(self, theta, idx):
        self.rows += np.size(idx)
        return self.inner.loglik(theta, idx)

    def logprior(self, theta):
        return self.inner.logprior(theta)


def test_the_search_above_the_kept_size_reads_a_pass_not_every_minibatch(monkeypatch):
    """Above ``_FULL_ROWS`` rows (2^22; 2^10 here) the batch-size search computed the l_i at
    every rung's rows: ~1,000 minibatches of b rows each, up to b = N/2, minutes a rung at
    2^23 rows. It now computes a pair's N l_i once its rungs ask for N/4 of them, and looks
    them up, within ``_KEPT_VALUES`` (one pair's worth here: the pairs take turns); the
    smallest passing batch size is the one found with every l_i kept."""
    from validation import _clt

    x = np.random.default_rng(14).lognormal(0.0, 1.5, 4096)
    pairs = (np.array([[0.0], [0.3]]), np.array([[0.02], [0.33]]))
    kw = dict(batch_size=8, n_sim=2000, tolerance=0.1, rng=6)
    small = _Counting(x)
    kept = clt_check(small, pairs, **kw)                # N <= _FULL_ROWS: l_i kept
    monkeypatch.setattr(_clt, "_FULL_ROWS", 1 << 10)
    monkeypatch.setattr(_clt, "_KEPT_VALUES", 4096)
    large = _Counting(x)
    got = clt_check(large, pairs, **kw)
    assert kept.min_batch_size is not None and kept.min_batch_size > 64
    assert got.min_batch_size == kept.min_batch_size
    np.testing.assert_array_equal(got.t_statistics, kept.t_statistics)
    assert large.rows < 30 * x.size, (large.rows, small.rows)   # 52 N before, 20 N now
