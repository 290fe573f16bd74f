"""Pricing a Poisson-factor test on a cluster: the bounds' sum and maximum from one pass over
row ranges (``remainder_totals``), never the per-row bounds and alias table on the client.

A thread pool stands for the cluster (``executor=`` takes any ``concurrent.futures``
executor; the Dask path of ``map_ranges`` is tested in test_distributed.py).
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import design._lib.distribute as distribute
from samplers import (ControlVariates, GaussianPrior, LogisticRegression,
                      ScalableSubsamplingTest, SMHTest)
from samplers.datasets import logistic_regression
from samplers.models.remainder import TaylorRemainder, remainder_totals


@pytest.fixture(autouse=True)
def small_ranges(monkeypatch):
    monkeypatch.setattr(distribute, "RANGE_ROWS", 1 << 14)     # 70,000 rows: 5 tasks


@pytest.fixture(scope="module")
def cv():
    X, y, _ = logistic_regression(70_000, 3, rng=4)
    return ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))


def test_totals_are_the_bounds_sum_and_maximum(cv):
    rem = TaylorRemainder(cv, 2)
    with ThreadPoolExecutor(2) as pool:
        c_sum, c_max = remainder_totals(cv, pool)
    assert c_max == rem.c_max
    assert c_sum == pytest.approx(rem.c_sum, rel=1e-12)
    with pytest.raises(TypeError, match="needs a ControlVariates.*got LogisticRegression"):
        remainder_totals(cv.model, None)


@pytest.mark.parametrize("test", [SMHTest(), SMHTest(sampling="uniform"),
                                  ScalableSubsamplingTest(chi=1e-3)])
def test_expected_batch_on_a_cluster_prices_without_the_per_row_table(cv, test):
    rng = np.random.default_rng(1)
    pairs = cv.center.theta + 0.02 * rng.normal(size=(4, 2, cv.dim))
    local = type(test)(**{k: getattr(test, k) for k in ("sampling",)}
                       | ({"chi": test.chi} if isinstance(test, ScalableSubsamplingTest)
                          else {}))
    want = [local.expected_batch(cv, a, b) for a, b in pairs]
    with ThreadPoolExecutor(2) as pool:
        got = [test.expected_batch(cv, a, b, executor=pool) for a, b in pairs]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert id(cv) not in test._prepared           # no bounds per row, no alias table here
    # once prepared (the test is run), the prepared value is used, with or without executor
    test.prepare(cv)
    with ThreadPoolExecutor(2) as pool:
        np.testing.assert_array_equal(
            [test.expected_batch(cv, a, b, executor=pool) for a, b in pairs], want)


def test_a_plain_model_is_priced_by_the_local_tables(cv):
    """Without a ControlVariates (a centre of the test's own) the test prepares its bounds
    as before, executor or not."""
    test = SMHTest(order=2, center=cv.center.theta)
    theta = cv.center.theta + 0.01
    with ThreadPoolExecutor(2) as pool:
        b = test.expected_batch(cv.model, theta, theta + 0.01, executor=pool)
    assert id(cv.model) in test._prepared
    assert b == pytest.approx(SMHTest().expected_batch(cv, theta, theta + 0.01), rel=1e-12)


def test_the_bounds_pass_runs_on_the_executor_and_travels_with_the_chain(cv, monkeypatch):
    """TaylorRemainder(executor=): each range's c_i from its worker, the local values bit for
    bit; a prepared test pickled with its model carries them, so the chain's process does
    not make the pass again."""
    import pickle

    import samplers.models.remainder as remainder

    local = TaylorRemainder(cv, 2)
    with ThreadPoolExecutor(2) as pool:
        remote = TaylorRemainder(cv, 2, executor=pool)
        test = SMHTest()
        prep = test.prepare(cv, executor=pool)
    np.testing.assert_array_equal(remote.c, local.c)
    np.testing.assert_array_equal(prep.rem.c, local.c)
    model, sent = pickle.loads(pickle.dumps((cv, test)))

    def no_pass(*args):
        raise AssertionError("the bounds were computed again")

    monkeypatch.setattr(remainder, "_block_c", no_pass)
    np.testing.assert_array_equal(sent.prepare(model).rem.c, local.c)
    with pytest.raises(AssertionError, match="again"):      # without them: the pass
        pickle.loads(pickle.dumps(SMHTest())).prepare(model)
    with pytest.raises(ValueError, match=r"c must have shape \(70000,\)"):
        TaylorRemainder(cv, 2, c=np.ones(3))
