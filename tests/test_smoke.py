"""The smoke subset (``pytest -m smoke`` on the files .ci/run names): one short chain per
test and sampler, checked against the closed-form posterior of a Gaussian mean. CI runs it,
with the ArviZ, README and demo tests, on Python 3.13 with the newest dependencies and on Python 3.10 with the lowest
declared ones (``.ci/run``)."""

import numpy as np
import pytest

from samplers import (SGLD, AcceptAll, AustereTest, BarkerTest, ConfidenceTest, ExactTest,
                      GaussianMean, GaussianPrior, JaakkolaJordanBound, Langevin,
                      LogisticRegression, RandomWalk, firefly, sample)
from samplers.datasets import logistic_regression

pytestmark = pytest.mark.smoke

X = np.random.default_rng(0).normal(0.3, 1.0, 20_000)
MODEL = GaussianMean(X)
POST_MEAN, POST_SD = X.mean(), 1.0 / np.sqrt(X.size)   # flat prior, unit variance


@pytest.mark.parametrize("test, proposal", [
    (ExactTest(), RandomWalk(2 * POST_SD)),
    (AustereTest(m=500, epsilon=0.05), RandomWalk(2 * POST_SD)),
    (ConfidenceTest(delta=0.05), RandomWalk(2 * POST_SD)),
    (BarkerTest(m=1_000), RandomWalk(0.5 * POST_SD)),
    (ExactTest(), Langevin(POST_SD**2)),
    (AcceptAll(), SGLD(0.1 * POST_SD**2, batch_size=500)),
], ids=["exact", "austere", "confidence", "barker", "langevin", "sgld"])
def test_one_chain(test, proposal):
    chain = sample(MODEL, test, proposal, [POST_MEAN], 1_500, rng=1)
    s = chain.samples[300:, 0]
    assert np.all(np.isfinite(s))
    # a loose check against the closed form (5 posterior sds); the statistical checks
    # with MCSE-derived tolerances are in tests/samplers/test_correctness.py
    assert abs(s.mean() - POST_MEAN) < 5 * POST_SD
    assert chain.to_arviz()["posterior"]["theta"].shape == (1, 1_500, 1)


def test_one_firefly_chain():
    Xl, y, _ = logistic_regression(3_000, 2, rng=0)
    model = LogisticRegression(Xl, y, prior=GaussianPrior(0.0, 5.0))
    bound = JaakkolaJordanBound.map_tuned(model, rng=1)
    chain = firefly(model, bound, RandomWalk(0.03), bound.theta_tuned, 300, rng=2)
    assert chain.samples.shape == (300, 3) and np.all(np.isfinite(chain.samples))
    assert chain.stats["n_used"].mean() < model.N
