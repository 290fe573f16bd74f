"""TrialChain: construction and checks, scanning a model, a recorded chain, the file format."""

from types import SimpleNamespace

import numpy as np
import pytest

from design import TrialChain


class GaussianLocation:
    """x_i ~ N(theta, 1), prior N(0, 10^2): loglik per datum, optional fused ratio."""

    def __init__(self, x, fused):
        self.x = x
        self.N = x.size
        self.calls = 0
        if fused:
            self.loglik_ratio = self._ratio

    def loglik(self, theta, idx):
        self.calls += 1
        return -0.5 * (self.x[idx] - theta[0]) ** 2

    def _ratio(self, theta, theta_new, idx):
        self.calls += 1
        xi = self.x[idx]
        return -0.5 * (xi - theta_new[0]) ** 2 + 0.5 * (xi - theta[0]) ** 2

    def logprior(self, theta):
        return float(-0.5 * theta[0] ** 2 / 100.0)


def _direct(x, thetas, theta_news, lqr):
    l = -0.5 * (x[None, :] - theta_news) ** 2 + 0.5 * (x[None, :] - thetas) ** 2
    dprior = -0.5 * (theta_news[:, 0] ** 2 - thetas[:, 0] ** 2) / 100.0
    return l.mean(axis=1), l.std(axis=1), -(dprior + lqr) / x.size


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("chunk", [1000, 333, 10_000])
def test_from_model_matches_a_direct_computation(fused, chunk):
    rng = np.random.default_rng(1)
    x = rng.normal(0.3, 1.0, size=1000)
    thetas = rng.normal(0.3, 0.05, size=(4, 1))
    theta_news = thetas + rng.normal(0, 0.05, size=(4, 1))
    lqr = rng.normal(0, 0.1, size=4)
    keep = [a.copy() for a in (thetas, theta_news, lqr)]
    model = GaussianLocation(x, fused)
    tc = TrialChain.from_model(model, thetas, theta_news, lqr, chunk=chunk)
    mu, sigma, c0 = _direct(x, thetas, theta_news, lqr)
    np.testing.assert_allclose(tc.mu, mu, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tc.sigma, sigma, rtol=1e-10)
    np.testing.assert_allclose(tc.c0, c0, rtol=1e-12)
    assert tc.N == 1000
    n_chunks = -(-1000 // chunk)
    assert model.calls == 2 * 4 * n_chunks * (1 if fused else 2)   # two passes per pair
    l = -0.5 * (x[None, :] - theta_news) ** 2 + 0.5 * (x[None, :] - thetas) ** 2
    z = (l - l.mean(axis=1, keepdims=True)) / l.std(axis=1, keepdims=True)
    np.testing.assert_allclose(tc.skewness, np.mean(z**3, axis=1), rtol=1e-9)
    np.testing.assert_allclose(tc.kurtosis, np.mean(z**4, axis=1) - 3, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tc.abs_z1, np.mean(np.abs(z), axis=1), rtol=1e-9)
    np.testing.assert_allclose(tc.abs_z3, np.mean(np.abs(z) ** 3, axis=1), rtol=1e-9)
    np.testing.assert_array_equal(tc.max_abs, np.abs(l).max(axis=1))
    assert tc.range_bound is None           # the model has no loglik_ratio_bound
    for a, b in zip((thetas, theta_news, lqr), keep):
        np.testing.assert_array_equal(a, b)


def test_from_model_keeps_precision_when_mean_is_tiny():
    """l_i = 1e8 + small noise: a one-pass sum of squares would lose all digits."""
    class Offset:
        N = 10_000
        noise = np.random.default_rng(2).normal(size=10_000)

        def loglik_ratio(self, theta, theta_new, idx):
            return 1e8 + self.noise[idx]

        def logprior(self, theta):
            return 0.0

    tc = TrialChain.from_model(Offset(), np.zeros((1, 1)), np.ones((1, 1)), chunk=777)
    assert tc.sigma[0] == pytest.approx(Offset.noise.std(), rel=1e-7)


def test_from_model_rejects_bad_model_output():
    class Bad(GaussianLocation):
        def loglik(self, theta, idx):
            out = super().loglik(theta, idx)
            out[0] = np.nan
            return out

    model = Bad(np.zeros(50), fused=False)
    with pytest.raises(ValueError, match="finite"):
        TrialChain.from_model(model, np.zeros((1, 1)), np.ones((1, 1)))

    class Short(GaussianLocation):
        def loglik(self, theta, idx):
            return super().loglik(theta, idx)[:-1]

    with pytest.raises(ValueError, match="got shape"):
        TrialChain.from_model(Short(np.zeros(50), False), np.zeros((1, 1)), np.ones((1, 1)))
    with pytest.raises(ValueError, match="same shape"):
        TrialChain.from_model(model, np.zeros((2, 1)), np.ones((3, 1)))
    with pytest.raises(ValueError, match="log_q_ratios must have length 1"):
        TrialChain.from_model(GaussianLocation(np.zeros(50), True), np.zeros((1, 1)),
                              np.ones((1, 1)), log_q_ratios=[0.0, 1.0])


def test_from_chain_reads_the_recorded_statistics():
    chain = SimpleNamespace(N=5000, stats={
        "l_mean": np.array([1e-4, -2e-4]), "l_std": np.array([0.01, 0.02]),
        "log_const": np.array([0.5, -1.0]), "accepted": np.array([True, False])})
    tc = TrialChain.from_chain(chain)
    np.testing.assert_array_equal(tc.mu, [1e-4, -2e-4])
    np.testing.assert_array_equal(tc.sigma, [0.01, 0.02])
    np.testing.assert_allclose(tc.c0, [-0.5 / 5000, 1.0 / 5000])
    assert tc.N == 5000
    stacked = SimpleNamespace(N=5000, stats={k: np.stack([v, v]) for k, v in chain.stats.items()})
    assert TrialChain.from_chain(stacked).n_pairs == 4
    # a step whose proposal left the prior's support ran no test: it is left out
    skipped = SimpleNamespace(N=5000, stats={
        "l_mean": np.array([1e-4, np.nan]), "l_std": np.array([0.01, np.nan]),
        "log_const": np.array([0.5, -np.inf])})
    assert TrialChain.from_chain(skipped).n_pairs == 1
    skipped.stats["l_mean"][0] = np.nan
    with pytest.raises(ValueError, match="none of the 2 steps"):
        TrialChain.from_chain(skipped)
    del chain.stats["l_std"]
    with pytest.raises(TypeError, match=r"missing \['l_std'\]"):
        TrialChain.from_chain(chain)
    with pytest.raises(TypeError, match="stats"):
        TrialChain.from_chain(object())


def test_from_chain_of_an_exact_mh_run():
    """For exact MH, P(accept | pair) = Pa: the chain's acceptance rate must match the mean
    Pa of the trial chain built from it, which checks c0 = -log_const / N end to end."""
    from samplers import ExactTest, GaussianPrior, LogisticRegression, RandomWalk, sample
    from samplers.datasets import logistic_regression

    X, y, theta = logistic_regression(20_000, d=3, rng=0)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    chain = sample(model, ExactTest(), RandomWalk(0.02), theta, 400, rng=1)
    tc = TrialChain.from_chain(chain)
    assert tc.n_pairs == 400 and tc.N == 20_000
    pa = tc.accept_prob
    se = np.sqrt(np.sum(pa * (1 - pa))) / pa.size
    assert 0.1 < pa.mean() < 0.9
    assert abs(chain.stats["accepted"].mean() - pa.mean()) < 4 * se


def test_construction_checks_and_immutability():
    mu = np.array([1e-4, 0.0])
    tc = TrialChain(mu=mu, sigma=[0.1, 0.2], c0=[0.0, 0.0], N=100)
    mu[0] = 5.0                                  # the chain holds its own copy ...
    assert tc.mu[0] == 1e-4
    with pytest.raises(ValueError):              # ... which is read-only
        tc.mu[0] = 1.0
    with pytest.raises(AttributeError):
        tc.N = 3
    assert tc.accept_prob[1] == 1.0
    assert tc.mu_std_at_one[0] == pytest.approx(1e-4 * np.sqrt(99) / 0.1)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(sigma=[0.1, 0.0]), ValueError, r"sigma must be > 0 .* pair 1 with sigma = 0.0"),
    (dict(sigma=[0.1, np.inf]), ValueError, "sigma must be finite"),
    (dict(mu=[np.nan, 0.0]), ValueError, "mu must be finite"),
    (dict(c0=[0.0]), ValueError, "same length, got 2, 2 and 1"),
    (dict(N=1), ValueError, "N must be >= 2, got 1"),
    (dict(N=2.5), TypeError, "N must be an integer"),
    (dict(mu=[], sigma=[], c0=[]), ValueError, "at least one pair"),
    (dict(mu=[[0.0, 0.0]]), ValueError, "mu must have 1 dimension"),
])
def test_bad_trial_chain(kwargs, exc, match):
    args = dict(mu=[0.0, 0.0], sigma=[0.1, 0.1], c0=[0.0, 0.0], N=100)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        TrialChain(**args)


def test_save_load_round_trip(tmp_path):
    tc = TrialChain(mu=[1e-4, -3e-5], sigma=[0.1, 0.05], c0=[1e-6, 0.0], N=123_456)
    path = tmp_path / "trial.npz"
    tc.save(path)
    back = TrialChain.load(path)
    for field in ("mu", "sigma", "c0"):
        np.testing.assert_array_equal(getattr(back, field), getattr(tc, field))
    assert back.N == tc.N


def test_load_rejects_other_files(tmp_path):
    tc = TrialChain(mu=[0.0], sigma=[0.1], c0=[0.0], N=10)
    good = tmp_path / "good.npz"
    tc.save(good)
    raw = good.read_bytes()

    newer = tmp_path / "newer.npz"
    with np.load(good) as z:
        contents = dict(z)
    contents["version"] = np.array(3)
    with open(newer, "wb") as fh:
        np.savez(fh, **contents)
    with pytest.raises(ValueError, match="version 3; this version of austerity reads versions 1, 2"):
        TrialChain.load(newer)

    other = tmp_path / "other.npz"
    with open(other, "wb") as fh:
        np.savez(fh, mu=np.zeros(1))
    with pytest.raises(ValueError, match="not a TrialChain file"):
        TrialChain.load(other)

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="TrialChain file .* is unreadable"):
        TrialChain.load(truncated)

    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"definitely not a zip archive" * 10)
    with pytest.raises(ValueError, match="TrialChain file .* is unreadable"):
        TrialChain.load(garbage)

    npy = tmp_path / "array.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(ValueError, match="TrialChain file .* is unreadable"):
        TrialChain.load(npy)

    with pytest.raises(FileNotFoundError):
        TrialChain.load(tmp_path / "missing.npz")
