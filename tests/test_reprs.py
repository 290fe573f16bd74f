"""Results print summaries, never whole arrays (issue 16: Chain's repr was 25.7k characters)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import design
import validation
from samplers import ExactTest, GaussianMean, RandomWalk, sample, sample_chains

MODEL = GaussianMean(np.random.default_rng(0).normal(0.5, 1.0, 5_000))


def _short(text, limit):
    assert len(text) < limit, text
    assert "..." not in text.replace("(...)", "")  # no numpy ellipsis of a long array


@pytest.fixture(scope="module")
def trial():
    rng = np.random.default_rng(1)
    thetas = 0.5 + 0.014 * rng.standard_normal((40, 1))
    return design.TrialChain.from_model(MODEL, thetas, thetas + 0.03 * rng.standard_normal((40, 1)))


def test_chain_and_chains(tmp_path):
    chain = sample(MODEL, ExactTest(), RandomWalk(np.eye(1) * 1e-3), [0.5], 2_000, rng=0)
    _short(repr(chain), 300)
    assert repr(chain).startswith("Chain(n_samples=2000, d=1, N=5000")
    assert "acceptance rate" in str(chain)
    with ThreadPoolExecutor(2) as pool:
        chains = sample_chains(MODEL, ExactTest(), RandomWalk(0.03), [0.5], 2_000, n_chains=3,
                               rng=0, executor=pool)
    _short(repr(chains), 300)
    text = str(chains)
    assert text.startswith("3 chains of 2000 samples")
    assert len(text.splitlines()) == 5 + 3
    assert str(chains) != repr(chains)


def test_trial_chain_design_and_clt_check(trial):
    _short(repr(trial), 300)
    assert repr(trial).startswith("TrialChain(n_pairs=40, N=5000")
    assert "exact acceptance probability" in str(trial)
    plan = design.optimize(trial, 0.05, m_grid=[100, 500], epsilon_grid=[0.01, 0.05])
    _short(repr(plan), 300)
    assert repr(plan).startswith(f"Design(m={plan.m}, epsilon=")
    rng = np.random.default_rng(2)
    thetas = 0.5 + 0.01 * rng.standard_normal((3, 1))
    check = validation.clt_check(MODEL, (thetas, thetas + 0.01), batch_size=100, n_sim=2_000, tolerance=0.1,
                                 search=False, rng=3)
    _short(repr(check), 300)
    assert repr(check).startswith(f"CLTCheck(passed={bool(check.passed)}, batch_size=100")
