"""Chain output, ArviZ conversion and several chains through executors."""

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from samplers import AustereTest, Chains, ExactTest, GaussianMean, RandomWalk, sample, sample_chains
from samplers.datasets import write_memmap

MODEL = GaussianMean(np.random.default_rng(3).normal(0.5, 0.1, 20_000))


def test_chain_records_and_summary():
    chain = sample(MODEL, AustereTest(m=200, epsilon=0.05), RandomWalk(0.01), [0.5], 300, rng=0)
    assert chain.samples.shape == (300, 1)
    assert set(chain.stats) == {"accepted", "log_const", "n_grad", "n_used", "n_stages",
                                "mean", "sd", "first_mean"}
    assert chain.stats["accepted"].dtype == bool
    assert np.all(chain.stats["n_used"] % 200 == 0) or chain.stats["n_used"].max() == MODEL.N
    # a rejected step repeats the previous state; an accepted one moves
    moved = np.r_[True, np.any(np.diff(chain.samples, axis=0) != 0, axis=1)]
    np.testing.assert_array_equal(moved[1:], chain.stats["accepted"][1:])
    text = str(chain)
    assert "AustereTest" in text and "rows read per step" in text
    assert 0 < chain.mean_data_fraction <= 1


def test_to_arviz_carries_samples_and_stats():
    chain = sample(MODEL, ExactTest(), RandomWalk(0.01), [0.5], 50, rng=0)
    idata = chain.to_arviz()
    assert idata.posterior["theta"].shape == (1, 50, 1)
    assert idata.sample_stats["n_used"].shape == (1, 50)
    assert idata.attrs["N"] == MODEL.N
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    assert float(az.ess(idata).theta.values[0]) > 1


def test_chains_through_a_thread_pool_are_reproducible_and_independent():
    kwargs = dict(n_chains=3, rng=11)
    with ThreadPoolExecutor(3) as pool:
        a = sample_chains(MODEL, AustereTest(m=100), RandomWalk(0.01), [0.5], 200, executor=pool, **kwargs)
    with ThreadPoolExecutor(1) as pool:
        b = sample_chains(MODEL, AustereTest(m=100), RandomWalk(0.01), [0.5], 200, executor=pool, **kwargs)
    assert isinstance(a, Chains) and len(a) == 3
    np.testing.assert_array_equal(a.samples, b.samples)
    assert not np.array_equal(a[0].samples, a[1].samples)  # independent streams
    idata = a.to_arviz()
    assert idata.posterior["theta"].shape == (3, 200, 1)
    assert a.stats["n_used"].shape == (3, 200)


def test_default_process_pool_with_memmapped_data(tmp_path):
    x = write_memmap(tmp_path / "x.npy", 30_000, lambda n, rng: rng.normal(0.5, 0.1, n), rng=0)
    model = GaussianMean(x)
    starts = np.array([[0.49], [0.51]])
    chains = sample_chains(model, AustereTest(m=300), RandomWalk(0.01), starts, 100, n_chains=2, rng=4)
    with ThreadPoolExecutor(2) as pool:
        same = sample_chains(model, AustereTest(m=300), RandomWalk(0.01), starts, 100, n_chains=2,
                             rng=4, executor=pool)
    np.testing.assert_array_equal(chains.samples, same.samples)


def test_sample_chains_refuses_bad_model_before_submitting():
    class Exploding:
        def submit(self, *args, **kwargs):
            raise AssertionError("nothing should be submitted")

    with pytest.raises(ValueError, match="theta0"):
        sample_chains(MODEL, ExactTest(), RandomWalk(0.1), [np.inf], 5, n_chains=2, executor=Exploding())
