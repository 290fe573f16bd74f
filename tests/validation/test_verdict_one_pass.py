"""The verdict without per-row storage: the statistics of every check pair from one pass over
the data (or from the trial chain that made it), the l_i computed only at the rows the
simulations draw (drawn first: a path's rows come from its keyed order, a minibatch's from
the rng as before)."""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import stats

from design import TrialChain, optimize
from design._lib.rows import new_order, set_keyed
from samplers import AustereTest, ControlVariates, GaussianPrior, LogisticRegression
from validation import clt_check, loglik_ratios
from validation._clt import _Source
from validation._verdict import _path_acceptance, windowed_path_acceptance


def _logistic_cv(N, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.standard_normal((N, 2))])
    X[:, 1] = rng.gamma(0.5, 2.0, N)          # a skewed covariate: skewed residuals
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.2, 0.6, -0.5]))).astype(float)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0)))
    scale = 20.0 / math.sqrt(N)      # residual sd ~1e-4: far above their rounding
    draws = cv.center.theta + scale * rng.standard_normal((5, 3))
    return cv, (draws[:-1], draws[1:])


def test_paths_read_ahead_equal_the_paths_drawn_as_they_go():
    """A path whose rows are drawn ahead (a prefix of its keyed order, a longer one when it
    reads past it) gives the P(accept | path) of the same keyed order drawn stage by stage
    (``windowed_path_acceptance``, itself checked against the engine in test_verdict): bit
    for bit, for prefixes too short for most paths."""
    rng = np.random.default_rng(3)
    N, m = 30_000, 60
    l = rng.gamma(1.5, 1.0, N) * 0.02
    l = l - l.mean() + 1e-5
    spec = AustereTest(m=m, epsilon=0.05).path_spec(N)
    key = np.array([11, 12], dtype=np.uint64)
    drawn = np.empty(300)
    order = new_order(N)
    set_keyed(order, key)            # restarted once per path: path j reads epoch j + 1
    windowed_path_acceptance(spec.radius, spec.grow)(l, order, spec.settings, -0.2,
                                                     np.random.default_rng(0), drawn)
    src = _Source(l, None, 1 << 16)
    src.full = lambda p: None                   # read ahead, as for a model at large N
    for first in (m, 5 * m):
        ahead = _path_acceptance(src, 0, spec, -0.2, key, new_order(N), np.arange(1, 301),
                                 float(np.mean(l)), first)
        np.testing.assert_array_equal(ahead, drawn)
    # with every l_i at hand the paths run in place on the same keyed orders
    in_place = _path_acceptance(_Source(l, None, 1 << 16), 0, spec, -0.2, key, new_order(N),
                                np.arange(1, 301), float(np.mean(l)), m)
    np.testing.assert_array_equal(in_place, drawn)
    assert 0.05 < drawn.mean() < 0.95


def test_keyed_paths_have_the_law_of_the_rng_paths():
    """The verdict's paths now read keyed orders instead of orders drawn from the rng: the
    mean P(accept | path) of both (8,000 paths each) agrees within 4 standard errors, and
    a two-sample KS test does not reject their laws."""
    rng = np.random.default_rng(4)
    N, m = 20_000, 50
    l = rng.lognormal(0.0, 1.0, N) * 0.01
    l = l - l.mean() + 2e-5
    spec = AustereTest(m=m, epsilon=0.1).path_spec(N)
    n = 8000
    old = np.empty(n)
    windowed_path_acceptance(spec.radius, spec.grow)(l, new_order(N), spec.settings, 0.0,
                                                     np.random.default_rng(5), old)
    new = _path_acceptance(_Source(l, None, 1 << 16), 0, spec, 0.0,
                           np.array([7, 8], dtype=np.uint64), new_order(N), np.arange(n),
                           float(np.mean(l)), 2 * m)
    se = math.sqrt(old.var() / n + new.var() / n)
    assert abs(old.mean() - new.mean()) < 4 * se
    assert stats.ks_2samp(old, new).pvalue > 1e-3


class _Counting:
    """A model that counts the rows its per-row methods are asked for."""

    def __init__(self, model):
        self.model, self.N, self.rows, self.calls = model, model.N, 0, []

    def loglik(self, theta, idx):
        self.rows += len(idx)
        self.calls.append(len(idx))
        return self.model.loglik(theta, idx)

    def loglik_ratio(self, theta, theta_new, idx):
        self.rows += len(idx)
        self.calls.append(len(idx))
        return self.model.loglik_ratio(theta, theta_new, idx)

    def logprior(self, theta):
        return self.model.logprior(theta)


@pytest.fixture(scope="module")
def large():
    """N = 2^18 + 1000: the pass's one-pass route (pilot, Chan/Pebay moments, binned
    absolute moments)."""
    return _logistic_cv((1 << 18) + 1000, seed=1)


def test_one_pass_statistics_equal_the_numpy_reference(large):
    cv, (thetas, news) = large
    res = clt_check(cv, (thetas, news), batch_size=100, n_sim=2000, tolerance=0.1,
                    search=False, rng=1)
    for p in range(len(thetas)):
        l = loglik_ratios(cv, thetas[p], news[p])
        mu, sd = l.mean(), l.std()
        z = (l - mu) / sd
        # the pass's l_i are differences of loglik_many's columns, the reference's the fused
        # ratio: control-variate residuals whose per-row rounding is that of
        # the O(1) log-likelihoods, ~1e-12 sd here; the moments agree to that
        assert res.mean[p] == pytest.approx(mu, abs=1e-9 * sd)
        assert res.sd[p] == pytest.approx(sd, rel=1e-8)
        assert res.skewness[p] == pytest.approx(np.mean(z ** 3), rel=1e-8, abs=1e-9)
        assert res.excess_kurtosis[p] + 3 == pytest.approx(np.mean(z ** 4), rel=1e-8)
        novak = (6.4 * np.mean(np.abs(z) ** 3) + 2 * np.mean(np.abs(z))) / math.sqrt(100)
        assert res.novak[p] == pytest.approx(novak, rel=2e-6)     # certified to 1e-6 each
        assert abs(res.skewness[p]) > 0.1                       # a shape worth checking


def test_with_an_executor_the_check_is_the_same(large):
    cv, pairs = large
    plan = optimize(TrialChain.from_model(cv, *pairs, progress=False), 0.05)
    kw = dict(design=plan, n_sim=2000, tolerance=0.1, search=False, n_paths=200, rng=2,
              edgeworth=False)
    here = clt_check(cv, pairs, **kw)
    with ThreadPoolExecutor(2) as pool:
        there = clt_check(cv, pairs, executor=pool, **kw)
    for name in ("mean", "sd", "skewness", "excess_kurtosis", "novak", "t_statistics"):
        np.testing.assert_array_equal(getattr(here, name), getattr(there, name))
    np.testing.assert_array_equal(here.acceptance.delta_simulated,
                                  there.acceptance.delta_simulated)


def test_given_the_trial_chain_the_check_reads_only_the_rows_it_simulates(large,
                                                                           monkeypatch):
    """With ``trial=`` no pass runs: the model is asked only for the simulated rows (each
    call a sorted set of at most a block of rows; the small-N shortcut that keeps a pair's
    l_i is turned off), and the result equals the check that makes its own pass to rounding
    (the same decision)."""
    import validation._clt

    cv, pairs = large
    monkeypatch.setattr(validation._clt, "_FULL_ROWS", 0)
    trial = TrialChain.from_model(cv, *pairs, progress=False)
    plan = optimize(trial, 0.05)
    kw = dict(design=plan, n_sim=1000, tolerance=0.2, search=False, n_paths=200, rng=3,
              edgeworth=False)
    counting = _Counting(cv)
    given = clt_check(counting, pairs, trial=trial, **kw)
    own = clt_check(cv, pairs, **kw)
    assert counting.rows < 0.5 * cv.N and max(counting.calls) <= 1 << 20
    assert given.acceptance.passed == own.acceptance.passed
    for name in ("mean", "sd", "skewness", "excess_kurtosis", "novak", "t_statistics"):
        np.testing.assert_allclose(getattr(given, name), getattr(own, name), rtol=1e-9,
                                   atol=1e-12)
    np.testing.assert_allclose(given.acceptance.delta_simulated,
                               own.acceptance.delta_simulated, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="same 3 pairs.*got 4 pairs"):
        clt_check(cv, (pairs[0][:3], pairs[1][:3]), trial=trial, **kw)
    with pytest.raises(TypeError, match="trial= goes with a model"):
        clt_check(np.ones((2, 100)) + np.arange(100), trial=trial, batch_size=10,
                  n_sim=2000, tolerance=0.1)


def test_a_model_with_only_n_and_loglik_is_checked_and_an_equal_pair_is_named():
    """The one-pass statistics ask for a prior; clt_check reads only the l_i, so a model
    with N and loglik alone (what clt_check documents) still works, and a pair whose l_i
    are all equal is named by its own index (the pass runs for every pair at once)."""
    x = np.random.default_rng(0).normal(size=5000)

    class Bare:
        N = 5000

        def loglik(self, theta, idx):
            return -0.5 * (x[idx] - theta[0]) ** 2

    th = np.array([[0.0], [0.01], [0.02]])
    check = clt_check(Bare(), (th, th + 0.003), n_sim=4000, rng=1, progress=False)
    assert check.t_statistics.shape == (3, 4000)
    same = th + 0.003
    same[2] = th[2]
    with pytest.raises(ValueError, match=r"all equal .* first pair 2 ") as err:
        clt_check(Bare(), (th, same), n_sim=4000, rng=1, progress=False)
    assert not str(err.value).startswith("pair 0")


def test_long_paths_read_on_by_bounded_blocks_and_give_the_same_values(monkeypatch):
    """The paths that read past their first rows read on from where they stopped (never the
    same rows twice), the longest alone by blocks of ``_BLOCK_VALUES`` rows: with that bound
    at 256 l_i, no read asks for more, and every P(accept | path) is the one drawn stage by
    stage, bit for bit."""
    from validation import _verdict

    rng = np.random.default_rng(5)
    N, m = 20_000, 20
    l = rng.gamma(1.5, 1.0, N) * 0.02
    l = l - l.mean() + 2e-6                 # mu near the window: most paths read long
    spec = AustereTest(m=m, epsilon=0.02).path_spec(N)
    key = np.array([3, 9], dtype=np.uint64)
    drawn = np.empty(100)
    order = new_order(N)
    set_keyed(order, key)
    windowed_path_acceptance(spec.radius, spec.grow)(l, order, spec.settings, 0.0,
                                                     np.random.default_rng(0), drawn)
    src = _Source(l, None, 1 << 16)
    src.full = lambda p: None
    asked = []
    values = src.values
    src.values = lambda p, rows: asked.append(np.size(rows)) or values(p, rows)
    monkeypatch.setattr(_verdict, "_BLOCK_VALUES", 256)
    got = _path_acceptance(src, 0, spec, 0.0, key, new_order(N), np.arange(1, 101),
                           float(np.mean(l)), 3 * m)
    np.testing.assert_array_equal(got, drawn)
    assert max(asked) <= 256 and sum(asked) > 20 * 256    # long paths, read by blocks
    # a block shorter than a stage (m = 20 rows over 8): the stage's rows carried on, grown
    monkeypatch.setattr(_verdict, "_BLOCK_VALUES", 8)
    got = _path_acceptance(src, 0, spec, 0.0, key, new_order(N), np.arange(1, 101),
                           float(np.mean(l)), 3 * m)
    np.testing.assert_array_equal(got, drawn)
    # the rows read ahead: at most about twice the rows the paths needed, never re-read
    monkeypatch.setattr(_verdict, "_BLOCK_VALUES", 1 << 20)
    asked.clear()
    _path_acceptance(src, 0, spec, 0.0, key, new_order(N), np.arange(1, 101),
                     float(np.mean(l)), 3 * m)
    needed = _rows_needed(l, spec, key, 100)
    assert needed.sum() <= sum(asked) <= 2 * needed.sum() + 100 * 3 * m


def _rows_needed(l, spec, key, n):
    """Rows each of the paths 1..n reads, from the in-place kernel's order (its rows taken)."""
    from design._lib.rows import rows_taken
    from validation._kernels import set_epoch

    N = l.shape[0]
    out = np.empty(n, dtype=np.int64)
    run = windowed_path_acceptance(spec.radius, spec.grow)
    one = np.empty(1)
    order = new_order(N)
    set_keyed(order, key)
    for k in range(n):
        set_epoch(order, k)
        run(l, order, spec.settings, 0.0, np.random.default_rng(0), one)
        out[k] = rows_taken(order)
    return out


def test_an_in_memory_model_gives_the_same_l_i_without_looking_for_repeats(large):
    cv, (thetas, news) = large
    src = _Source(cv, (thetas, news), 1 << 16)
    assert src._in_memory
    rows = np.random.default_rng(2).integers(0, cv.N, (40, 30))
    rows[1, :5] = rows[0, :5]                                  # repeats
    direct = src.values(1, rows)
    src._in_memory = False
    np.testing.assert_array_equal(direct, src.values(1, rows))
