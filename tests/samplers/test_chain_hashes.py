"""Stored hashes of short chains: a refactor that changes any existing test's chain fails here.

Each case runs a short chain of a built-in model with a fixed seed and hashes its samples and
per-step stats (SHA-256 of the raw float64/int64/bool bytes). The hashes in
``chain_hashes.json`` were written by this file (``python tests/samplers/test_chain_hashes.py
--update``) at the commit that added it; rewrite them only in a commit whose purpose is to
change the chains (for example a new row sampler), and say so in its message.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from samplers import (
    SGLD,
    AcceptAll,
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ExactTest,
    GaussianMean,
    GaussianMixture,
    GaussianPrior,
    ImplicitZ,
    JaakkolaJordanBound,
    Langevin,
    LogisticRegression,
    RandomWalk,
    firefly,
    sample,
)
from samplers.datasets import gaussian_mixture, logistic_regression

STORE = Path(__file__).with_name("chain_hashes.json")
STEPS = 60


def _models():
    rng = np.random.default_rng(20261123)
    X, y, theta = logistic_regression(5_000, 3, rng=rng)
    return {
        "mean": (GaussianMean(rng.normal(1.0, 1.0, 8_000)), np.array([1.0]), 0.02),
        "logistic": (LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)), theta, 0.03),
        "mixture": (GaussianMixture(gaussian_mixture(6_000, rng=rng), temperature=20.0),
                    np.array([0.0, 1.0]), 0.2),
    }


TESTS = {
    "exact": ExactTest(),
    "austere_t": AustereTest(m=100, epsilon=0.05),
    "austere_normal": AustereTest(m=57, epsilon=0.1, threshold="normal"),
    "confidence_bs": ConfidenceTest(delta=0.1, batch_size=50),
    "confidence_hoeffding": ConfidenceTest(delta=0.1, bound="hoeffding", gamma=1.5),
    "confidence_bernstein_full": ConfidenceTest(delta=0.1, bound="bernstein", range="full-data"),
    "barker": BarkerTest(m=100),
    "barker_nodelta": BarkerTest(m=50, delta=None),
    "barker_skew": BarkerTest(m=80, delta=None, skew=True),
}


def _digest(chain) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(chain.samples, dtype=np.float64).tobytes())
    for name in sorted(chain.stats):
        h.update(name.encode())
        h.update(np.ascontiguousarray(chain.stats[name]).tobytes())
    return h.hexdigest()


def _cases():
    models = _models()
    cases = {}
    for mname, (model, theta0, scale) in models.items():
        for tname, test in TESTS.items():
            cases[f"{mname}-{tname}"] = (
                lambda model=model, test=test, theta0=theta0, scale=scale:
                sample(model, test, RandomWalk(scale), theta0, STEPS, rng=7))
    model, theta0, _ = models["logistic"]
    cases["logistic-langevin-austere"] = lambda: sample(
        model, AustereTest(m=100, epsilon=0.05), Langevin(2e-4, batch_size=200), theta0, STEPS, rng=8)
    cases["logistic-sgld"] = lambda: sample(
        model, AcceptAll(), SGLD(1e-4, 100), theta0, STEPS, rng=9)
    cases["logistic-firefly"] = lambda: firefly(
        model, JaakkolaJordanBound(model, 1.5), RandomWalk(0.03), theta0, STEPS, rng=10,
        z_update=ImplicitZ(0.1))
    return cases


CASES = _cases()


def _stored() -> dict:
    return json.loads(STORE.read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_chain_unchanged(name):
    stored = _stored()
    assert name in stored, f"no stored hash for {name}; run this file with --update"
    assert _digest(CASES[name]()) == stored[name], (
        f"the chain of {name} changed; if that is intended, rerun "
        f"`python {Path(__file__).relative_to(Path.cwd()) if Path.cwd() in Path(__file__).parents else __file__} --update`"
        " and say why in the commit")


if __name__ == "__main__":
    if "--update" not in sys.argv:
        sys.exit("usage: python tests/samplers/test_chain_hashes.py --update")
    STORE.write_text(json.dumps({k: _digest(f()) for k, f in sorted(CASES.items())}, indent=1) + "\n")
    print(f"wrote {len(CASES)} hashes to {STORE}")
