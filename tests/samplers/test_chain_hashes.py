"""Stored short chains: a refactor that changes any existing test's chain fails here.

Each case runs a short chain of a built-in model with a fixed seed; its samples and per-step
stats are stored in ``chain_reference.npz`` (written by ``python
tests/samplers/test_chain_hashes.py --update``; rewrite it only in a commit whose purpose is
to change the chains, for example a new row sampler, and say so in its message).

Integer and boolean stats (acceptances, rows used, stages) must match exactly; float samples
and stats to a relative 1e-9. Not to the bit: the models that call ``exp``/``log`` (the
Gaussian mixture, the logistic gradient) get those from the C library, whose last bit can
differ between processors (glibc picks its ``exp``/``log`` variant by CPU at run time), and
the SHA-256 digests this file stored before came out different on another machine with the
same code and the same numpy, numba and scipy. A changed decision changes a chain far beyond
1e-9, so the comparison still catches every real change; that both loops give the same bits on
one machine is checked exactly by ``test_blocks.py``.
"""

from __future__ import annotations

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

STORE = Path(__file__).with_name("chain_reference.npz")
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


def _arrays(chain) -> dict:
    """The chain's samples and stats as named arrays (``samples``, ``stat:<name>``)."""
    out = {"samples": np.asarray(chain.samples, dtype=np.float64)}
    for name in sorted(chain.stats):
        out[f"stat:{name}"] = np.asarray(chain.stats[name])
    return out


def _same(name, got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want), f"{name}: fields {sorted(got)} != stored {sorted(want)}"
    for key, value in want.items():
        new = got[key]
        assert new.shape == value.shape and new.dtype == value.dtype, (
            f"{name}: {key} has shape {new.shape} dtype {new.dtype}, stored {value.shape} "
            f"{value.dtype}")
        if np.issubdtype(value.dtype, np.floating):
            np.testing.assert_allclose(new, value, rtol=1e-9, atol=1e-12, equal_nan=True,
                                       err_msg=f"{name}: {key}")
        else:
            np.testing.assert_array_equal(new, value, err_msg=f"{name}: {key}")


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
    with np.load(STORE) as data:
        stored = {}
        for key in data.files:
            case, field = key.split("|", 1)
            stored.setdefault(case, {})[field] = data[key]
    return stored


@pytest.mark.parametrize("name", sorted(CASES))
def test_chain_unchanged(name):
    stored = _stored()
    assert name in stored, f"no stored chain for {name}; run this file with --update"
    try:
        _same(name, _arrays(CASES[name]()), stored[name])
    except AssertionError as exc:
        raise AssertionError(
            f"the chain of {name} changed; if that is intended, rerun `python "
            f"tests/samplers/test_chain_hashes.py --update` and say why in the commit\n{exc}"
        ) from None


if __name__ == "__main__":
    if "--update" not in sys.argv:
        sys.exit("usage: python tests/samplers/test_chain_hashes.py --update")
    arrays = {f"{case}|{field}": value for case, f in sorted(CASES.items())
              for field, value in _arrays(f()).items()}
    np.savez_compressed(STORE, **arrays)
    print(f"wrote {len(CASES)} chains to {STORE}")
