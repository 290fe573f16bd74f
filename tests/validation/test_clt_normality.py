"""The CLT check's normality p-values equal statsmodels' public functions; its KS distance,
noise and p-values equal scipy.stats' without importing it on the check's path."""

import numpy as np
import pytest

from validation._clt import _jarque_bera_pvalue, _lilliefors


def test_equal_to_statsmodels():
    pytest.importorskip("statsmodels")
    from statsmodels.stats.diagnostic import lilliefors
    from statsmodels.stats.stattools import jarque_bera, omni_normtest
    from scipy import stats

    rng = np.random.default_rng(5)
    for x in (rng.normal(size=100), rng.standard_t(3, size=1000), rng.exponential(size=400)):
        assert _jarque_bera_pvalue(x) == jarque_bera(x)[1]
        assert _lilliefors() is lilliefors
        assert stats.normaltest(x).pvalue == omni_normtest(x).pvalue   # the CLT check's omnibus
        assert _lilliefors()(x, pvalmethod="approx") == lilliefors(x, pvalmethod="approx")
    assert _jarque_bera_pvalue(rng.exponential(size=400)) < 1e-6


@pytest.mark.parametrize("level", [0.05, 1e-3])
def test_ks_noise_bounds_the_exact_kolmogorov_quantile_tightly(level):
    """The KS noise comes from scipy.special (no scipy.stats import on a first fit): the
    one-sided Smirnov quantile at level / 2, an upper bound of the two-sided quantile
    within 2.2e-6 of it, over the draw counts the checks use and beyond."""
    from scipy import stats

    from validation._clt import _ks_noise

    for n in (100, 200, 1000, 1414, 5000, 20_000, 102_400):   # 10^6: as close, 90 s
        exact = stats.kstwo.isf(level, n)
        assert exact * (1 - 1e-9) <= _ks_noise(n, level) <= exact * (1 + 2.2e-6)
        assert stats.kstwo.sf(_ks_noise(n, level), n) <= level * (1 + 1e-9)



@pytest.mark.parametrize("level", [0.05, 1e-3])
def test_ks_noise_closed_form_bound_is_above_the_quantile_and_decides_like_it(level):
    """clt_check's n_sim check reads the closed-form bound first (the exact quantile costs a
    few tenths of a second at 20,000 draws): it never lies below the quantile, so a check
    it passes the quantile passes too; and it is within 2% of it from 1,000 draws on.

    At 10^6 draws the quantile itself (``smirnovi``) costs 90 s, so there the same two
    inequalities are read through the survival function, which is decreasing: the bound is
    above the quantile when the chance of exceeding it is at most ``level / 2``, and within
    2% when the chance of exceeding bound / 1.02 is at least ``level / 2`` (3 s)."""
    from scipy import special

    from validation._clt import _ks_noise, _ks_noise_bound

    for n in (100, 200, 1000, 1414, 5000, 20_000, 102_400):
        exact, bound = _ks_noise(n, level), _ks_noise_bound(n, level)
        assert exact <= bound
        if n >= 1000:
            assert bound <= 1.02 * exact
    bound = _ks_noise_bound(10**6, level)
    assert special.smirnov(10**6, bound) <= level / 2
    assert special.smirnov(10**6, bound / 1.02) >= level / 2


def test_ks_distance_and_lazy_pvalues_equal_scipy_and_statsmodels_bit_for_bit():
    """clt_check's KS distance is scipy.stats.kstest's statistic, and the p-values it
    computes when first read are those scipy and statsmodels give for its stored t
    statistics and minibatch means."""
    pytest.importorskip("statsmodels")
    from scipy import stats
    from statsmodels.stats.diagnostic import lilliefors

    from validation import clt_check
    from validation._clt import ks_distance

    rng = np.random.default_rng(2)
    l = np.vstack([rng.normal(size=20_000), rng.lognormal(0, 1, 20_000)])
    res = clt_check(l, batch_size=50, n_sim=2000, tolerance=0.1, search=False, rng=3)
    law = stats.t(49).cdf
    for p in range(2):
        t, means = res.t_statistics[p], res.minibatch_means[p]
        ks = stats.kstest(t, law)
        assert res.ks_distance[p] == ks.statistic == ks_distance(t, 49)
        assert res.ks_pvalue[p] == ks.pvalue
        assert res.omnibus_pvalue[p] == stats.normaltest(means).pvalue
        assert res.lilliefors_pvalue[p] == lilliefors(means, pvalmethod="approx")[1]
        assert res.jarque_bera_pvalue[p] == _jarque_bera_pvalue(means)
    assert res.ks_pvalue[1] < 1e-6 < res.ks_pvalue[0]     # the lognormal's skew shows
    for a in (res.ks_pvalue, res.jarque_bera_pvalue, res.minibatch_means):
        assert not a.flags.writeable
    assert res.ks_pvalue is res.ks_pvalue                 # computed once
