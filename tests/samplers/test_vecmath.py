"""The branch-free exp / log1p / log sigmoid of design._lib.vecmath against SciPy and libm,
and the full logistic pass through them against the per-row kernels."""

import math

import numpy as np
import pytest
from scipy.special import log_expit

from design._lib.jit import jit
from design._lib.vecmath import exp_nonpositive, log1p_unit, log_sigmoid


@jit
def _map(fn_code, x, out):
    for i in range(x.shape[0]):
        if fn_code == 0:
            out[i] = exp_nonpositive(x[i])
        elif fn_code == 1:
            out[i] = log1p_unit(x[i])
        else:
            out[i] = log_sigmoid(x[i])


def ulps(got, ref):
    return np.abs(got - ref) / np.spacing(np.maximum(np.abs(ref), np.finfo(float).tiny))


def run(code, x):
    out = np.empty_like(x)
    _map(code, x, out)
    return out


RNG = np.random.default_rng(0)


def test_exp_within_3_ulp_on_its_range():
    x = np.concatenate([-np.geomspace(1e-300, 708, 50_000), RNG.uniform(-50, 0, 50_000), [0.0, -0.0]])
    assert ulps(run(0, x), np.exp(x)).max() <= 3
    assert run(0, np.array([-800.0]))[0] == pytest.approx(math.exp(-708.0), rel=1e-14)


def test_log1p_within_3_ulp_on_the_unit_interval():
    t = np.concatenate([np.geomspace(1e-300, 1, 50_000), RNG.random(50_000), [0.0, 1.0]])
    assert ulps(run(1, t), np.log1p(t)).max() <= 3


def test_log_sigmoid_within_3_ulp_and_never_overflows():
    z = np.concatenate([np.linspace(-700, 700, 100_001), RNG.normal(0, 5, 100_000),
                        [0.0, -0.0, 1e-300, -1e-300]])
    assert ulps(run(2, z), log_expit(z)).max() <= 3
    far = np.array([-1e300, -800.0, 800.0, 1e300, np.inf, -np.inf])
    got = run(2, far)
    np.testing.assert_allclose(got[:2], far[:2], rtol=1e-15)
    assert np.all(np.abs(got[2:4]) < 1e-300) and got[4] <= 0 and got[5] == -np.inf
    assert np.isnan(run(2, np.array([np.nan]))[0])
