"""design.optimize and AustereTest default to the same test (issue 16): copying m and epsilon
by hand runs the test the design was made for, and a mismatched threshold is refused."""

import inspect

import pytest

import design
from samplers import AustereTest


def _plan(**kwargs):
    trial = design.TrialChain(mu=[1e-5, -2e-5, 3e-6], sigma=[0.01, 0.02, 0.015],
                              c0=[0.0, 0.0, 0.0], N=50_000)
    return design.optimize(trial, 0.1, m_grid=[200, 500], epsilon_grid=[0.005, 0.01, 0.05],
                           workers=1, **kwargs)


def test_the_defaults_agree():
    default = inspect.signature(design.optimize).parameters["threshold"].default
    assert default == AustereTest().threshold == "t"
    plan = _plan()
    assert plan.threshold == "t" and plan.prediction_threshold == "normal"
    assert AustereTest.from_design(plan) == AustereTest(m=plan.m, epsilon=plan.epsilon)


def test_the_prediction_model_is_separate_from_the_test():
    # the default prediction ("normal" critical values in the DP) is the old default design
    plan, same = _plan(), _plan(threshold="normal")
    assert (plan.m, plan.epsilon, plan.error) == (same.m, same.epsilon, same.error)
    assert _plan(prediction_threshold="t").error != plan.error


def test_a_threshold_other_than_the_designs_is_refused():
    plan = _plan()
    with pytest.raises(ValueError, match="differs from the design's threshold 't'"):
        AustereTest.from_design(plan, threshold="normal")
    test = AustereTest.from_design(plan, threshold="normal", allow_mismatch=True)
    assert test.threshold == "normal"
    assert AustereTest.from_design(_plan(threshold="normal")).threshold == "normal"


def test_bad_prediction_threshold():
    with pytest.raises(ValueError, match="prediction_threshold must be 'normal' or 't', got 'z'"):
        _plan(prediction_threshold="z")
