"""Trial-pair statistics in one chunked pass equal the per-pair passes (to rounding)."""

import numpy as np
import pytest

from design import TrialChain
from samplers.models import LogisticRegression


def per_pair_reference(model, thetas, theta_news, chunk):
    """The former algorithm: one pass over the data per pair, Chan et al.'s update."""
    mus, sigmas = [], []
    for theta, theta_new in zip(thetas, theta_news):
        n, mean, m2 = 0, 0.0, 0.0
        for start in range(0, model.N, chunk):
            idx = np.arange(start, min(start + chunk, model.N))
            l = np.asarray(model.loglik(theta_new, idx)) - np.asarray(model.loglik(theta, idx))
            cm = l.mean()
            nb, delta = l.size, cm - mean
            mean, m2 = mean + delta * nb / (n + nb), m2 + np.sum((l - cm) ** 2) + (
                delta * delta * n * nb / (n + nb))
            n += nb
        mus.append(mean)
        sigmas.append(np.sqrt(m2 / model.N))
    return np.array(mus), np.array(sigmas)


class UserLinearModel:
    """A user's model (no loglik_many): Poisson regression with log link, by hand."""

    def __init__(self, X, y):
        self.X, self.y, self.N = X, y, X.shape[0]

    def loglik(self, theta, idx):
        eta = self.X[idx] @ theta
        return self.y[idx] * eta - np.exp(eta)

    def logprior(self, theta):
        return -0.5 * float(theta @ theta)


def _data(N, d, rng):
    X = np.column_stack([np.ones(N), rng.standard_normal((N, d - 1))])
    beta = rng.normal(0, 0.5, d)
    return X, beta


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("chunk", [4096, 7001])
def test_logistic_one_pass_equals_per_pair_passes(workers, chunk):
    rng = np.random.default_rng(3)
    X, beta = _data(30_000, 5, rng)
    y = (rng.random(30_000) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    model = LogisticRegression(X, y, temperature=1.5)
    thetas = beta + rng.normal(0, 0.02, (12, 5))
    news = thetas + rng.normal(0, 0.01, (12, 5))
    tc = TrialChain.from_model(model, thetas, news, chunk=chunk, workers=workers,
                               progress=False)
    mu, sigma = per_pair_reference(model, thetas, news, chunk)
    np.testing.assert_allclose(tc.mu, mu, rtol=1e-9, atol=1e-16)
    np.testing.assert_allclose(tc.sigma, sigma, rtol=1e-9)


@pytest.mark.parametrize("workers", [1, 2])
def test_user_model_one_pass_equals_per_pair_passes(workers):
    rng = np.random.default_rng(4)
    X, beta = _data(20_000, 3, rng)
    y = rng.poisson(np.exp(X @ beta)).astype(float)
    model = UserLinearModel(X, y)
    thetas = beta + rng.normal(0, 0.01, (7, 3))
    news = thetas + rng.normal(0, 0.005, (7, 3))
    tc = TrialChain.from_model(model, thetas, news, chunk=3000, workers=workers,
                               progress=False)
    mu, sigma = per_pair_reference(model, thetas, news, 3000)
    np.testing.assert_allclose(tc.mu, mu, rtol=1e-9, atol=1e-16)
    np.testing.assert_allclose(tc.sigma, sigma, rtol=1e-9)


def test_result_does_not_depend_on_the_number_of_threads():
    """Chunks are merged in chunk order, so threads change nothing, not even rounding."""
    rng = np.random.default_rng(5)
    X, beta = _data(50_000, 4, rng)
    y = (rng.random(50_000) < 0.5).astype(float)
    model = LogisticRegression(X, y)
    thetas = beta + rng.normal(0, 0.02, (5, 4))
    news = thetas + rng.normal(0, 0.01, (5, 4))
    one = TrialChain.from_model(model, thetas, news, chunk=2048, workers=1, progress=False)
    two = TrialChain.from_model(model, thetas, news, chunk=2048, workers=2, progress=False)
    np.testing.assert_array_equal(one.mu, two.mu)
    np.testing.assert_array_equal(one.sigma, two.sigma)


def test_loglik_many_matches_loglik_and_checks_shapes():
    rng = np.random.default_rng(6)
    X, beta = _data(500, 3, rng)
    y = np.where(rng.random(500) < 0.5, -1.0, 1.0)
    model = LogisticRegression(X.astype(np.float32), y)
    thetas = rng.normal(size=(4, 3))
    idx = rng.permutation(500)[:77]
    many = model.loglik_many(thetas, idx)
    for k in range(4):          # the same arithmetic in the same order: the same bits
        np.testing.assert_array_equal(many[:, k], model.loglik(thetas[k], idx))
    with pytest.raises(ValueError, match="thetas must have shape"):
        model.loglik_many(np.zeros((2, 4)), idx)


@pytest.mark.parametrize("plus_minus", [False, True])
def test_loglik_many_kernel_matches_numpy(plus_minus):
    """The compiled loop of LogisticRegression.loglik_many against plain NumPy/SciPy
    (log_expit of the signed predictors over 1/K), large predictors included."""
    from scipy.special import log_expit

    rng = np.random.default_rng(13)
    X = rng.normal(size=(400, 3)) * np.array([1.0, 30.0, 300.0])
    y = rng.choice([-1.0, 1.0] if plus_minus else [0.0, 1.0], 400)
    model = LogisticRegression(X, y, temperature=2.5)
    thetas = rng.normal(size=(9, 3))
    idx = rng.integers(0, 400, 250)
    sign = y[idx] if plus_minus else 2.0 * y[idx] - 1.0
    eta = np.zeros((idx.size, 9))
    for j in range(3):          # summed over j in order, as the kernel does (at |eta| ~ 500
        eta += X[idx, j][:, None] * thetas[:, j]   # one ulp of eta is 1e-13 of exp(-eta))
    ref = log_expit(sign[:, None] * eta) / 2.5
    np.testing.assert_allclose(model.loglik_many(thetas, idx), ref, rtol=1e-13, atol=1e-300)
    assert model.loglik_many(thetas[:0], idx).shape == (250, 0)


def test_a_bad_loglik_many_is_refused():
    class Bad(UserLinearModel):
        def loglik_many(self, thetas, idx):
            return np.zeros((idx.size, 1))

    rng = np.random.default_rng(7)
    X, beta = _data(1000, 2, rng)
    with pytest.raises(ValueError, match="loglik_many must return shape"):
        TrialChain.from_model(Bad(X, np.ones(1000)), np.zeros((2, 2)), np.ones((2, 2)),
                              progress=False)


def test_shared_states_of_a_chain_are_evaluated_once():
    """Pairs of an MH chain share states: loglik_many sees each distinct vector once."""
    rng = np.random.default_rng(8)
    X, beta = _data(5000, 3, rng)
    y = (rng.random(5000) < 0.5).astype(float)
    seen = []

    class Counting(LogisticRegression):
        def loglik_many(self, thetas, idx):
            seen.append(thetas.shape[0])
            return super().loglik_many(thetas, idx)

    model = Counting(X, y)
    states = beta + rng.normal(0, 0.02, (6, 3))
    thetas, news = states[:-1], states[1:]            # every move accepted: 6 distinct
    tc = TrialChain.from_model(model, thetas, news, chunk=1000, workers=1, progress=False)
    assert set(seen) == {6}
    mu, sigma = per_pair_reference(model, thetas, news, 1000)
    np.testing.assert_allclose(tc.mu, mu, rtol=1e-9, atol=1e-16)
    np.testing.assert_allclose(tc.sigma, sigma, rtol=1e-9)


def test_compiled_pair_kernels_match_numpy():
    """The per-chunk kernels of both passes against plain NumPy on the same block."""
    from design._pair_scan import _pair_columns_moments, _pair_columns_shape

    rng = np.random.default_rng(11)
    ll = rng.normal(size=(777, 9)) * rng.uniform(0.1, 3.0, 9)
    old, new = np.array([0, 2, 4, 4, 8]), np.array([1, 3, 5, 0, 7])
    L = ll[:, new] - ll[:, old]
    mean, m2, finite = _pair_columns_moments(ll, old, new)
    assert finite
    np.testing.assert_allclose(mean, L.mean(axis=0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(m2, ((L - L.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-12)
    c = L.mean(axis=0) + 0.01
    d = L - c
    ref = np.stack([L.min(0), L.max(0), (d**3).sum(0), (d**4).sum(0), np.abs(d).sum(0),
                    (np.abs(d) ** 3).sum(0)], axis=1)
    np.testing.assert_allclose(_pair_columns_shape(ll, old, new, c), ref, rtol=1e-11,
                               atol=1e-12)
    ll[5, 3] = np.inf
    assert not _pair_columns_moments(ll, old, new)[2]


@pytest.mark.parametrize("workers", [1, 2])
def test_shape_pass_is_the_same_for_both_model_interfaces(workers):
    """All pairs' shape sums from loglik_many blocks equal those from per-pair ratios."""
    from design._pair_scan import pair_moments, pair_shape_sums

    rng = np.random.default_rng(5)
    X, beta = _data(3000, 3, rng)
    y = (rng.uniform(size=3000) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    model = LogisticRegression(X, y)
    thetas = beta + 0.1 * rng.normal(size=(6, 3))
    news = thetas + 0.05 * rng.normal(size=(6, 3))

    class RatioOnly:
        N = 3000

        def loglik_ratio(self, theta, theta_new, idx):
            return model.loglik_ratio(theta, theta_new, idx)

    mu, _ = pair_moments(model, thetas, news, N=3000, chunk=700, workers=workers)
    many = pair_shape_sums(model, thetas, news, mu, N=3000, chunk=700, workers=workers)
    ratio = pair_shape_sums(RatioOnly(), thetas, news, mu, N=3000, chunk=700, workers=workers)
    np.testing.assert_allclose(many, ratio, rtol=1e-9, atol=1e-12)


def test_memmapped_data_give_the_same_statistics(tmp_path):
    """A float32 memmap is read in place, chunk by chunk: the same trial chain as the same
    values in memory, bit for bit."""
    rng = np.random.default_rng(14)
    X, beta = _data(20_000, 4, rng)
    y = (rng.random(20_000) < 1 / (1 + np.exp(-X @ beta))).astype(np.float32)
    Xm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float32,
                                   shape=X.shape)
    Xm[:] = X
    Xm.flush()
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    thetas = beta + rng.normal(0, 0.02, (6, 4))
    news = thetas + rng.normal(0, 0.01, (6, 4))
    kw = dict(chunk=3000, workers=2, progress=False)
    on_disk = TrialChain.from_model(LogisticRegression(Xm, y), thetas, news, **kw)
    in_memory = TrialChain.from_model(LogisticRegression(np.array(Xm), y), thetas, news, **kw)
    for name in ("mu", "sigma", "skewness", "kurtosis", "abs_z1", "abs_z3", "max_abs"):
        np.testing.assert_array_equal(getattr(on_disk, name), getattr(in_memory, name))


def test_one_pass_kernel_matches_numpy():
    """The one-pass chunk kernel: mean and M2 are the moments kernel's bits; M3, M4, the
    ends, and the binned and upper-tail sums about the pilot agree with plain NumPy."""
    from design._pair_scan import _pair_columns_moments, _pair_columns_stats

    rng = np.random.default_rng(12)
    ll = rng.normal(size=(2000, 9)) * rng.uniform(0.1, 3.0, 9)
    old, new = np.array([0, 2, 4, 4, 8]), np.array([1, 3, 5, 0, 7])
    L = ll[:, new] - ll[:, old]
    pilot = L.mean(axis=0) + 0.01
    width = 0.2 * L.std(axis=0)
    nbins = 16
    moments, ends, sums, finite = _pair_columns_stats(ll, old, new, pilot, width, nbins)
    mean, m2, _ = _pair_columns_moments(ll, old, new)
    assert finite
    np.testing.assert_array_equal(moments[:, 0], mean)
    np.testing.assert_array_equal(moments[:, 1], m2)
    d = L - mean
    np.testing.assert_allclose(moments[:, 2], (d**3).sum(0), rtol=1e-11, atol=1e-10)
    np.testing.assert_allclose(moments[:, 3], (d**4).sum(0), rtol=1e-12)
    np.testing.assert_array_equal(ends, np.stack([L.min(0), L.max(0)], axis=1))
    e = L - pilot
    for p in range(L.shape[1]):
        ep, w = e[:, p], width[p]
        inside = np.abs(ep) < w
        k = np.clip(np.floor((ep[inside] + w) * (nbins / (2 * w))).astype(int), 0, nbins - 1)
        for j in range(4):
            ref = np.bincount(k, weights=ep[inside] ** j, minlength=nbins)
            np.testing.assert_allclose(sums[p, :nbins, j], ref, rtol=1e-11, atol=1e-12)
        a = np.abs(ep)
        np.testing.assert_allclose(sums[p, nbins], [np.sum(ep >= 0), a.sum(), (ep * a).sum(),
                                                    (a**3).sum()], rtol=1e-11)


def _two_pass(model, thetas, news, N, chunk, workers):
    from design._pair_scan import pair_moments, pair_shape_sums

    mu, sigma = pair_moments(model, thetas, news, N=N, chunk=chunk, workers=workers,
                             progress=False)
    return mu, sigma, pair_shape_sums(model, thetas, news, mu, N=N, chunk=chunk,
                                      workers=workers, progress=False)


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_one_pass_statistics_equal_the_two_passes(monkeypatch, generic, workers):
    """pair_statistics (one pass: moments merged by Chan/Pebay, absolute moments about a
    pilot mean with a binned window) against the two exact passes: mu and sigma the same
    bits, the third and fourth moments to rounding, sum |d| and sum |d|^3 within the
    certified ABS_TOL (1e-6, in fact far closer)."""
    from design import _pair_scan

    monkeypatch.setattr(_pair_scan, "ONE_PASS_FROM", 1000)
    monkeypatch.setattr(_pair_scan, "PILOT_BLOCKS", 256)
    rng = np.random.default_rng(21)
    N = 40_000
    X, beta = _data(N, 4, rng)
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    logistic = LogisticRegression(X, y)
    model = (type("Generic", (), dict(N=N, loglik_ratio=staticmethod(logistic.loglik_ratio)))()
             if generic else logistic)
    thetas = beta + rng.normal(0, 0.02, (9, 4))
    news = thetas + rng.normal(0, 0.01, (9, 4))
    mu, sigma, shape = _pair_scan.pair_statistics(model, thetas, news, N=N, chunk=3000,
                                                  workers=workers, progress=False)
    mu2, sigma2, shape2 = _two_pass(model, thetas, news, N, 3000, workers)
    np.testing.assert_array_equal(mu, mu2)
    np.testing.assert_array_equal(sigma, sigma2)
    np.testing.assert_array_equal(shape[:, :2], shape2[:, :2])
    scale = N * sigma2[:, None] ** np.array([3, 4])
    np.testing.assert_allclose(shape[:, 2:4] / scale, shape2[:, 2:4] / scale, atol=1e-12)
    np.testing.assert_allclose(shape[:, 4:], shape2[:, 4:], rtol=1e-6)


def test_one_pass_falls_back_to_the_exact_shape_pass(monkeypatch):
    """A pair whose absolute moments the one pass cannot certify (here: a zero tolerance)
    gets the exact shape pass about its mean."""
    from design import _pair_scan

    monkeypatch.setattr(_pair_scan, "ONE_PASS_FROM", 1000)
    monkeypatch.setattr(_pair_scan, "PILOT_BLOCKS", 128)
    monkeypatch.setattr(_pair_scan, "ABS_TOL", 0.0)
    rng = np.random.default_rng(22)
    N = 20_000
    X, beta = _data(N, 3, rng)
    y = (rng.random(N) < 0.5).astype(float)
    model = LogisticRegression(X, y)
    thetas = beta + rng.normal(0, 0.02, (4, 3))
    news = thetas + rng.normal(0, 0.01, (4, 3))
    _, _, shape = _pair_scan.pair_statistics(model, thetas, news, N=N, chunk=2000,
                                             workers=1, progress=False)
    _, _, shape2 = _two_pass(model, thetas, news, N, 2000, 1)
    np.testing.assert_allclose(shape[:, 4:], shape2[:, 4:], rtol=1e-13)


def test_one_pass_reads_a_memmap(monkeypatch, tmp_path):
    """The one pass over memory-mapped rows gives the in-memory result, bit for bit."""
    from design import _pair_scan

    monkeypatch.setattr(_pair_scan, "ONE_PASS_FROM", 1000)
    monkeypatch.setattr(_pair_scan, "PILOT_BLOCKS", 64)
    rng = np.random.default_rng(23)
    N = 12_000
    X, beta = _data(N, 3, rng)
    y = (rng.random(N) < 0.5).astype(float)
    mapped = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=float,
                                       shape=X.shape)
    mapped[:] = X
    mapped.flush()
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    thetas = beta + rng.normal(0, 0.02, (5, 3))
    news = thetas + rng.normal(0, 0.01, (5, 3))
    out = [_pair_scan.pair_statistics(LogisticRegression(data, y), thetas, news, N=N,
                                      chunk=1500, workers=2, progress=False)
           for data in (X, mapped)]
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_from_model_two_pass_is_the_reference(monkeypatch):
    """TrialChain.from_model(two_pass=True) runs the two exact passes: the same mu and
    sigma bits as the one pass, and the shape fields the one pass approximates."""
    from design import _pair_scan

    monkeypatch.setattr(_pair_scan, "ONE_PASS_FROM", 1000)
    monkeypatch.setattr(_pair_scan, "PILOT_BLOCKS", 128)
    rng = np.random.default_rng(24)
    N = 15_000
    X, beta = _data(N, 3, rng)
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    model = LogisticRegression(X, y)
    thetas = beta + rng.normal(0, 0.02, (6, 3))
    news = thetas + rng.normal(0, 0.01, (6, 3))
    one = TrialChain.from_model(model, thetas, news, chunk=2500, progress=False)
    two = TrialChain.from_model(model, thetas, news, chunk=2500, progress=False,
                                two_pass=True)
    mu, sigma, shape = _two_pass(model, thetas, news, N, 2500, 2)
    np.testing.assert_array_equal(two.mu, mu)
    np.testing.assert_array_equal(two.abs_z1, shape[:, 4] / N / sigma)
    np.testing.assert_array_equal(one.mu, two.mu)
    np.testing.assert_array_equal(one.sigma, two.sigma)
    for name in ("skewness", "kurtosis", "abs_z1", "abs_z3"):
        np.testing.assert_allclose(getattr(one, name), getattr(two, name), rtol=1e-6,
                                   atol=1e-12)
