"""The CLT check's normality p-values equal statsmodels' public functions."""

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
