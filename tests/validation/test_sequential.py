"""sequential_check: the real sequential t-test on real l_i against the dynamic programme."""

import math
import warnings

import matplotlib
import numpy as np
import pytest

from samplers import Gaussian, GaussianMean
from validation import loglik_ratios, sequential_check

matplotlib.use("Agg")

#: The dynamic programme with normal thresholds models Algorithm 1 (Student-t thresholds,
#: estimated sd) to within about 1% of E (tests/design/test_simulation.py).
DP_MODEL_ERROR = 0.01


def test_gaussian_l_agree_with_the_prediction():
    l = np.random.default_rng(20).normal(size=20_000)
    res = sequential_check(l, m=200, epsilon=0.05, mu_std=[-2.0, 0.0, 1.0, 5.0],
                           n_tests=3000, rng=1)
    assert np.all(np.abs(res.gap) < 5 * res.error_se + DP_MODEL_ERROR), res.gap
    frac_gap = res.data_fraction - res.predicted_data_fraction
    assert np.all(np.abs(frac_gap) < 5 * res.data_fraction_se + 0.01 * res.data_fraction)
    assert res.agrees


def test_lognormal_data_err_far_above_the_prediction():
    """Bardenet et al. (2014), Figure 4(c): the (mean, log sd) model on lognormal(0, 2) data.
    At a pair near the posterior mode the l_i are right-skewed (skewness > 100): a minibatch
    mostly misses the rare large l_i, so the real test decides "below mu0" far more often
    than predicted when mu is just above mu0 (0 <= mu_std <= 2: 0.7-0.9 against 0.13-0.42),
    and almost never errs when mu is below it (the error is not even in mu_std)."""
    rng = np.random.default_rng(21)
    x = rng.lognormal(0.0, 2.0, 100_000)
    theta = np.array([x.mean(), math.log(x.std())])
    step = np.array([x.std(), 1 / math.sqrt(2)]) / math.sqrt(x.size)
    res = sequential_check(Gaussian(x), (theta, theta + step), m=500, epsilon=0.05,
                           mu_std=[-2.0, 0.0, 1.0, 2.0], n_tests=1500, rng=2)
    assert not res.agrees and res.skewness > 50
    real, pred, se = res.error[1:], res.predicted_error[1:], res.error_se[1:]
    assert np.all(real - pred > 0.3 + 5 * se) and np.all(real > 2 * pred), res.error
    assert res.error[0] < res.predicted_error[0] / 4


def test_model_and_vector_give_the_same_check():
    x = np.random.default_rng(22).exponential(size=3000)
    model = GaussianMean(x)
    pair = ([0.9], [1.0])
    kwargs = dict(m=100, epsilon=0.1, mu_std=[0.0, 1.0], n_tests=500, rng=3)
    a = sequential_check(model, pair, **kwargs)
    b = sequential_check(loglik_ratios(model, *pair), **kwargs)
    np.testing.assert_array_equal(a.error, b.error)
    np.testing.assert_array_equal(a.data_fraction, b.data_fraction)


def test_report_and_plot():
    l = np.random.default_rng(23).exponential(size=2000)
    res = sequential_check(l, m=100, epsilon=0.1, mu_std=[-1.0, 0.0, 1.0], n_tests=300,
                           rng=4)
    text = str(res)
    assert "Real sequential t-test vs the dynamic programme" in text
    assert text.count("\n") == 7
    assert res.max_gap == res.gap[np.argmax(np.abs(res.gap))]
    fig = res.plot()
    assert len(fig.axes) == 2
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(m=1), ValueError, r"m must be in \[2, 100\]"),
    (dict(m=101), ValueError, r"m must be in \[2, 100\]"),
    (dict(epsilon=0.5), ValueError, r"epsilon must be in \(0, 0.5\)"),
    (dict(threshold="z"), ValueError, "threshold must be 't' or 'normal'"),
    (dict(prediction_threshold="z"), ValueError, "prediction_threshold must be"),
    (dict(mu_std=[]), ValueError, "at least one value"),
    (dict(mu_std=[np.inf]), ValueError, "mu_std must be finite"),
    (dict(n_tests=5), ValueError, "n_tests must be >= 10"),
    (dict(tolerance=1.5), ValueError, r"tolerance must be in \(0, 1\)"),
    (dict(false_alarm=0.0), ValueError, r"false_alarm must be in \(0, 1\)"),
    (dict(m=None), TypeError, "needs m and epsilon"),
])
def test_argument_checks(kwargs, error, message):
    l = np.random.default_rng(0).normal(size=100)
    args = dict(m=10, epsilon=0.1, n_tests=20) | kwargs
    with warnings.catch_warnings():          # tolerance= is deprecated (and warns)
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(error, match=message):
            sequential_check(l, **args)
    with pytest.raises(TypeError, match="pair must be"):
        sequential_check(GaussianMean(l), pair=[0.0], m=10, epsilon=0.1)
