"""IndexSampler: without replacement, uniform, O(k) per call, reproducible."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from samplers import IndexSampler
from design._lib.rows import _partial_shuffle


@given(N=st.integers(1, 300), sizes=st.lists(st.integers(0, 120), max_size=8), seed=st.integers(0, 99))
def test_rows_are_distinct_until_restart(N, sizes, seed):
    s = IndexSampler(N, rng=seed)
    seen = []
    for k in sizes:
        got = s.take(k)
        assert got.shape == (min(k, N - len(seen)),)
        seen.extend(got.tolist())
    assert len(seen) == len(set(seen))
    assert all(0 <= i < N for i in seen)
    assert s.taken == len(seen) and s.remaining == N - len(seen)
    s.restart()
    assert s.remaining == N and sorted(s.take(N).tolist()) == list(range(N))


def test_first_rows_are_uniform_even_after_many_restarts():
    # Which row lands first, and which land in a 3-row batch, must be uniform over range(N)
    # however the persistent permutation was left by earlier draws.
    N, reps = 20, 20_000
    s = IndexSampler(N, rng=1)
    first = np.zeros(N)
    in_batch = np.zeros(N)
    for _ in range(reps):
        s.restart()
        batch = s.take(3)
        first[batch[0]] += 1
        in_batch[batch] += 1
    assert stats.chisquare(first).pvalue > 1e-3
    assert stats.chisquare(in_batch).pvalue > 1e-3


def test_pairs_are_uniform():
    # All ordered pairs of the first two rows are equally likely (joint uniformity).
    N, reps = 6, 30_000
    s = IndexSampler(N, rng=2)
    counts = np.zeros((N, N))
    for _ in range(reps):
        s.restart()
        a, b = s.take(2)
        counts[a, b] += 1
    off = counts[~np.eye(N, dtype=bool)]
    assert counts.trace() == 0
    assert stats.chisquare(off).pvalue > 1e-3


def test_kernel_matches_numpy_reference():
    rng = np.random.default_rng(3)
    perm = rng.permutation(50).astype(np.int32)
    u = rng.random(20)
    ref = perm.copy()
    expected = []
    for t, ut in enumerate(u):  # the textbook partial Fisher-Yates step, in NumPy
        j = t + int(np.floor(ut * (50 - t)))
        ref[t], ref[j] = ref[j], ref[t]
        expected.append(ref[t])
    out = np.empty(20, dtype=np.intp)
    _partial_shuffle(perm, 0, u, out)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(perm, ref)


def test_equal_seeds_equal_orders():
    a, b = IndexSampler(1000, rng=5), IndexSampler(1000, rng=5)
    for k in (10, 100, 7):
        np.testing.assert_array_equal(a.take(k), b.take(k))


def test_large_N_uses_compact_permutation():
    s = IndexSampler(10**6, rng=0)
    assert s.kernel_state()[0].dtype == np.int32
    assert s.take(5).dtype == np.intp


@pytest.mark.parametrize("N", [0, -3])
def test_bad_N(N):
    with pytest.raises(ValueError, match="N must be >= 1"):
        IndexSampler(N)
