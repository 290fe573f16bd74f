"""The compiled Firefly block loop (samplers/_firefly/blocks.py) against the Python loop.

Equal seeds give bit-identical chains (samples and every info) on both loops, for each
compiled combination; errors (a bound above its likelihood) are reported alike; other
theta-updates take the Python loop.
"""

from __future__ import annotations

import numpy as np
import pytest

from samplers import (
    ExplicitZ,
    FlatPrior,
    GaussianPrior,
    ImplicitZ,
    JaakkolaJordanBound,
    LaplacePrior,
    Langevin,
    LogisticRegression,
    RandomWalk,
    RobustRegression,
    Slice,
    StudentTBound,
    firefly,
)
from samplers.datasets import logistic_regression


def _logistic(prior=None):
    X, y, theta = logistic_regression(4000, 3, rng=21)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0) if prior is None else prior), theta


def _robust():
    rng = np.random.default_rng(22)
    X = np.column_stack([rng.normal(size=3000), np.ones(3000)])
    y = X @ [1.0, -0.5] + 0.5 * rng.standard_t(4.0, size=3000)
    return RobustRegression(X, y, df=4.0, scale=0.5, prior=GaussianPrior(0.0, 5.0)), np.array([1.0, -0.5])


def _same(a, b):
    assert np.array_equal(a.samples, b.samples)
    assert sorted(a.stats) == sorted(b.stats)
    for name in a.stats:
        assert a.stats[name].dtype == b.stats[name].dtype, name
        assert np.array_equal(a.stats[name], b.stats[name]), name


CASES = {
    "untuned-implicit": lambda: (*_logistic(), "jj", RandomWalk(0.03), ImplicitZ(0.1)),
    "tuned-implicit-qbd": lambda: (*_logistic(), "jj-map", RandomWalk(0.03), ImplicitZ(0.01, 0.5)),
    "explicit": lambda: (*_logistic(), "jj", RandomWalk(0.03), ExplicitZ(0.05)),
    "covariance-walk": lambda: (*_logistic(), "jj", RandomWalk(np.diag([4e-4, 9e-4, 1e-3, 6e-4])),
                                ImplicitZ(0.1)),
    "laplace-prior": lambda: (*_logistic(LaplacePrior(0.0, 3.0)), "jj", RandomWalk(0.03),
                              ImplicitZ(0.1)),
    "flat-prior": lambda: (*_logistic(FlatPrior()), "jj", RandomWalk(0.03), ImplicitZ(0.1)),
    "robust-t": lambda: (*_robust(), "t", RandomWalk(0.02), ImplicitZ(0.05)),
}


def _bound(model, kind):
    if kind == "jj":
        return JaakkolaJordanBound(model, 1.5)
    if kind == "jj-map":
        return JaakkolaJordanBound.map_tuned(model, rng=1)
    return StudentTBound.map_tuned(model, rng=1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_equals_python(name):
    model, theta0, kind, walk, z_update = CASES[name]()
    bound = _bound(model, kind)
    python = firefly(model, bound, walk, theta0, 400, rng=30, z_update=z_update, compiled=False)
    compiled = firefly(model, bound, walk, theta0, 400, rng=30, z_update=z_update, compiled=True)
    _same(python, compiled)
    assert 0.05 < compiled.acceptance_rate < 0.95


def test_a_bound_above_its_likelihood_is_reported_alike():
    model, theta0 = _logistic()
    errors = []
    for compiled in (False, True):
        bound = JaakkolaJordanBound(model, 1.5)
        bound._coef[5, 0] += 5.0   # row 5 (not among the rows probed at theta0)'s bound now exceeds its likelihood
        with pytest.raises(ValueError, match="the bound exceeds the likelihood") as info:
            firefly(model, bound, RandomWalk(0.03), theta0, 2000, rng=31,
                    z_update=ImplicitZ(0.5), compiled=compiled)
        errors.append((str(info.value), info.value.step))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("update", [Slice(0.05), Langevin(1e-3)])
def test_other_theta_updates_take_the_python_loop(update):
    model, theta0 = _logistic()
    bound = JaakkolaJordanBound(model, 1.5)
    with pytest.raises(TypeError, match="no compiled Firefly loop"):
        firefly(model, bound, update, theta0, 5, rng=0, compiled=True)
    assert firefly(model, bound, update, theta0, 5, rng=0).samples.shape == (5, 4)
