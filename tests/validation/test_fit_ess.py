"""fit's bulk ESS and R-hat (NumPy, no ArviZ import) against ArviZ's own estimators."""

import numpy as np
import pytest

from validation.workflow.steps import (_ess_rhat, _fast_fft_len, _split_ranks, _z_scale,
                                       bulk_ess, rank_rhat)


def _ar1(rng, chains, draws, phi=0.9, shift=0.1):
    e = rng.normal(size=(chains, draws + 50))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, x.shape[1]):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x[:, 50:] + shift * np.arange(chains)[:, None]


@pytest.mark.parametrize("chains, draws", [(2, 1000), (4, 333), (2, 5), (3, 4), (8, 100),
                                           (2, 3001)])
def test_equal_to_arviz(chains, draws):
    from samplers import import_arviz

    az = import_arviz()
    rng = np.random.default_rng(chains * 1000 + draws)
    for x in (_ar1(rng, chains, draws), np.exp(_ar1(rng, chains, draws, phi=0.5, shift=1.0))):
        assert bulk_ess(x) == pytest.approx(float(az.ess(x, method="bulk")), rel=1e-10)
        assert rank_rhat(x) == pytest.approx(float(az.rhat(x)), rel=1e-10)


def test_z_scale_equals_scipy_stats_bit_for_bit():
    """The rank normalisation, written with NumPy and scipy.special so that fit does not
    import scipy.stats, gives ArviZ's values (rankdata, then norm.ppf) bit for bit: with
    ties, NaN and infinities."""
    from scipy import stats

    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 401))
    x[1, :50] = np.round(x[1, :50], 1)           # ties
    x[0, 3], x[2, 9], x[2, 10] = np.nan, np.inf, -np.inf
    for a in (x, x[:, :7], np.ones((2, 5)), np.round(x, 0), x[:1, :1]):
        r = stats.rankdata(a, method="average", nan_policy="omit")
        expected = stats.norm.ppf((r - 3 / 8) / (r.size - 2 * (3 / 8) + 1)).reshape(a.shape)
        np.testing.assert_array_equal(_z_scale(a), expected)


def test_undefined_and_constant():
    x = np.random.default_rng(0).normal(size=(2, 100))
    assert np.isnan(rank_rhat(x[:1]))            # one chain
    assert np.isnan(bulk_ess(x[:, :3]))          # fewer than 4 draws
    y = x.copy()
    y[1, 7] = np.nan
    assert np.isnan(bulk_ess(y)) and np.isnan(rank_rhat(y))
    assert bulk_ess(np.ones((2, 50))) == 100.0   # constant draws: ArviZ gives the draw count
    with pytest.raises(ValueError, match="draws must have shape"):
        bulk_ess(np.zeros((2, 3, 4)))


def test_fft_length_is_five_smooth():
    for n in range(1, 3000):
        m = _fast_fft_len(n)
        assert m >= n
        r = m
        for p in (2, 3, 5):
            while r % p == 0:
                r //= p
        assert r == 1
        assert all(not _five_smooth(k) for k in range(n, m))


def _five_smooth(k):
    for p in (2, 3, 5):
        while k % p == 0:
            k //= p
    return k == 1


def test_ess_rhat_of_chains_is_min_and_max():
    from types import SimpleNamespace

    rng = np.random.default_rng(3)
    x = np.stack([_ar1(rng, 2, 400, phi=p) for p in (0.2, 0.95)], axis=-1)   # (2, 400, 2)
    runs = [SimpleNamespace(samples=x[c]) for c in range(2)]
    ess, rhat = _ess_rhat(runs)
    assert ess == min(bulk_ess(x[:, :, j]) for j in range(2))
    assert rhat == max(rank_rhat(x[:, :, j]) for j in range(2))
    assert ess < 200                                  # the phi = 0.95 coordinate


def test_ess_rhat_without_rhat_gives_the_same_ess():
    """The rounds that only decide whether to go on skip R-hat (NaN), not the ESS; a
    parameter with a NaN draw makes both NaN, as bulk_ess and rank_rhat do."""
    from types import SimpleNamespace

    rng = np.random.default_rng(4)
    x = np.stack([_ar1(rng, 2, 300, phi=p) for p in (0.5, 0.9, 0.1)], axis=-1)
    runs = [SimpleNamespace(samples=x[c]) for c in range(2)]
    ess, rhat = _ess_rhat(runs)
    only, none = _ess_rhat(runs, rhat=False)
    assert only == ess and np.isnan(none) and not np.isnan(rhat)
    assert _ess_rhat(runs, ranks=_split_ranks(runs)) == (ess, rhat)     # ranks reused
    x[1, 7, 2] = np.nan
    runs = [SimpleNamespace(samples=x[c]) for c in range(2)]
    assert np.isnan(bulk_ess(x[:, :, 2])) and np.isnan(rank_rhat(x[:, :, 2]))
    # the NaN parameter is the last: Python's min and max would have passed it over
    assert all(np.isnan(v) for v in _ess_rhat(runs))
    assert np.isnan(_ess_rhat(runs, rhat=False)[0])
