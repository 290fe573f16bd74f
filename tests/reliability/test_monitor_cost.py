"""Issue 27, item 1: the bias check after a chain is cheaper where control variates put the
pairs (``|mu_c|`` far beyond the error table, ``kappa`` tiny): the shortcuts of
``design._monitor._errors`` against the O(grid) recursion they skip."""

import math

import numpy as np
import pytest

from design import _monitor, decision_errors

N, M, EPS = 100_000, 200, 0.05


@pytest.mark.parametrize("kappa_edge", [1e-7, 1e-3, 0.05, _monitor._SERIES_MAX])
def test_whole_table_series_matches_the_recursion(kappa_edge):
    grid, err, moments = _monitor.error_table(N, M, EPS, "normal", moments=True)
    kappa = kappa_edge / grid[-1]
    ahead, behind, decay = (np.empty_like(grid) for _ in range(3))
    _monitor._tail_sums(kappa, grid, err, ahead, behind, decay)
    a0, b1 = ahead[0], behind[-1]
    _monitor._whole_table(kappa, grid[-1], moments, ahead, behind)
    np.testing.assert_allclose([ahead[0], behind[-1]], [a0, b1], rtol=1e-12, atol=0)


def test_control_variate_like_decisions_match_the_full_recursion(monkeypatch):
    """Decisions far beyond either end of the table (most of a control-variate chain's) and
    some inside it: the compiled estimates against the kernel's Python form with the series
    switched off (every decision then takes the O(grid) recursion)."""
    rng = np.random.default_rng(5)
    n = 600
    sd = 3e-8 * rng.uniform(0.5, 2.0, n)                      # kappa ~ 1e-5
    x = np.concatenate([rng.normal(0.0, 2e4, n - 100), rng.normal(0.0, 30.0, 100)])
    used = rng.integers(200, 400, n).astype(float)
    mean = np.zeros(n)
    c = N * x * sd / math.sqrt(N - 1)
    fast = decision_errors(mean, sd, used, c, N=N, m=M, epsilon=EPS)
    grid, err, moments = _monitor.error_table(N, M, EPS, "normal", moments=True)
    m0, v0 = _monitor._prior(mean, sd, used, c, float(N))
    monkeypatch.setattr(_monitor, "_SERIES_MAX", -1.0)
    slow = np.empty(n)
    _monitor._errors.py_func(mean, sd, used, c, float(N), True, m0, v0, grid, err, moments,
                             _monitor._GH_X, _monitor._GH_W, slow, 0, n)
    assert np.sum(fast == 0.0) > 100 and np.sum(fast > 0.0) > 300   # both shortcuts ran
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-15)
