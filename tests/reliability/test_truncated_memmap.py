"""Issue 27, item 6: a memmap truncated on disk after its model was built is refused with an
error naming the file, before any row is read (reading past the end of a mapped file kills
the process with SIGBUS)."""

import os

import numpy as np
import pytest

from samplers import (AustereTest, ControlVariates, GaussianMean, LogisticRegression, RandomWalk,
                      check_model, sample)

N = 20_000


def truncated(path, rows):
    os.truncate(path, 128 + rows * 8)   # the .npy header is 128 bytes


def test_sample_refuses_a_truncated_memmap_naming_the_file(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).normal(1.0, 1.0, N))
    model = GaussianMean(np.load(path, mmap_mode="r"))
    chain = sample(model, AustereTest(m=100), RandomWalk(0.01), [1.0], 5, rng=0)   # intact
    assert chain.samples.shape == (5, 1)
    truncated(path, N // 2)
    with pytest.raises(ValueError, match=rf"x\.npy.*model\.x \({N} rows\) is {128 + N // 2 * 8} "
                                         rf"bytes, shorter than the {128 + N * 8} bytes"):
        sample(model, AustereTest(m=100), RandomWalk(0.01), [1.0], 5, rng=0)
    with pytest.raises(ValueError, match="truncated"):
        check_model(model, [1.0])


def test_control_variates_refuse_a_truncated_memmap_before_their_pass(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N, 2))
    y = (rng.random(N) < 0.5).astype(float)
    np.save(tmp_path / "X.npy", X)
    model = LogisticRegression(np.load(tmp_path / "X.npy", mmap_mode="r"), y)
    truncated(tmp_path / "X.npy", 10)
    with pytest.raises(ValueError, match=r"X\.npy.*LogisticRegression's model\.X"):
        ControlVariates(model)


def test_a_complete_file_and_a_deleted_one_are_accepted(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(1000.0))
    model = GaussianMean(np.load(path, mmap_mode="r"))
    check_model(model, [1.0])
    os.remove(path)                     # the mapping keeps the deleted file's data readable
    check_model(model, [1.0])
