"""IndexSampler: without replacement, uniform, O(k) per call and O(rows drawn) memory at any N,
reproducible, a fresh order at every restart."""

import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from design._lib.rows import _MIN_SLOTS, _table_bytes, draw_rows, new_order, rows_taken
from samplers import IndexSampler


def fisher_yates_reference(N, u):
    """The textbook Fisher-Yates steps from the identity, in NumPy: row handed out at step t."""
    perm = np.arange(N)
    out = []
    for t, ut in enumerate(u):
        j = min(t + int(np.floor(ut * (N - t))), N - 1)
        perm[t], perm[j] = perm[j], perm[t]
        out.append(perm[t])
    return np.array(out, dtype=np.intp)


@given(N=st.integers(1, 3000), sizes=st.lists(st.integers(0, 700), max_size=8),
       seed=st.integers(0, 99), restarts=st.integers(0, 2))
def test_rows_are_distinct_until_restart(N, sizes, seed, restarts):
    # N up to 3000 with up to 5600 rows drawn crosses the table's growth and the switch to a
    # dense permutation; restarts before the checked order start from a used state.
    s = IndexSampler(N, rng=seed)
    for _ in range(restarts):
        s.take(sizes[0] if sizes else 1)
        s.restart()
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


@pytest.mark.parametrize("N, sizes", [(50, [20, 30]), (5000, [7, 300, 693]),
                                      (10**6, [1000, 5000]), (3000, [100, 1500, 1400])])
def test_an_order_is_the_textbook_shuffle(N, sizes):
    # Sparse (table), grown, and densified orders all hand out the rows of Fisher-Yates run
    # from the identity on the same uniforms, after any number of earlier orders.
    s = IndexSampler(N, rng=3)
    s.take(min(N, 900))
    for _ in range(2):
        s.restart()
        state = np.random.default_rng(3)
        state.bit_generator.state = s._rng.bit_generator.state
        u = state.random(sum(sizes))
        got = np.concatenate([s.take(k) for k in sizes])
        np.testing.assert_array_equal(got, fisher_yates_reference(N, u))


def test_compiled_draw_consumes_the_generator_like_take():
    N, k = 10**7, 64
    a, b = IndexSampler(N, rng=np.random.default_rng(4)), new_order(N)
    rng_b = np.random.default_rng(4)
    out, u = np.empty(k, np.intp), np.empty(k)
    for _ in range(3):
        draw_rows(rng_b, b, u, out)
        np.testing.assert_array_equal(out, a.take(k))
    assert rows_taken(b) == a.taken == 3 * k
    assert a._rng.random() == rng_b.random()


def test_first_rows_are_uniform_after_many_restarts():
    # Which row lands first, and which land in a 3-row batch, must be uniform over range(N).
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


@pytest.mark.parametrize("skip", [0, 1500])
def test_pairs_are_uniform(skip):
    # All ordered pairs of consecutive rows are equally likely (joint uniformity), also deep
    # into an order (skip rows first: the table holds many displaced positions then).
    N, reps = 6 if skip == 0 else 1506, 30_000
    s = IndexSampler(N, rng=2)
    counts = np.zeros((6, 6))
    for _ in range(reps if skip == 0 else reps // 10):
        s.restart()
        s.take(skip)
        a, b = s.take(2)
        if skip:  # of N - skip = 6 rows left, which two came next (relabelled 0..5)
            left = np.sort(np.concatenate([[a, b], s.take(4)]))
            a, b = np.searchsorted(left, a), np.searchsorted(left, b)
        counts[a, b] += 1
    off = counts[~np.eye(6, dtype=bool)]
    assert counts.trace() == 0
    assert stats.chisquare(off).pvalue > 1e-3


def test_equal_seeds_equal_orders():
    a, b = IndexSampler(1000, rng=5), IndexSampler(1000, rng=5)
    for k in (10, 100, 7):
        np.testing.assert_array_equal(a.take(k), b.take(k))
    a.restart(), b.restart()
    np.testing.assert_array_equal(a.take(50), b.take(50))


def test_memory_does_not_grow_with_N():
    # The sampler's memory is the hash table, sized to the rows drawn, never O(N).
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        s = IndexSampler(10**9, rng=0)
        s.take(5000)
        elapsed = time.perf_counter() - t0
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000                                    # NumPy's own allocations
    assert _table_bytes(s._order) <= 16 * 4 * 5000               # 16 bytes a slot, >= 1/4 full
    assert elapsed < 30                                         # not O(N) (a generous bound)
    s.restart()
    s.take(10)
    s.restart()                                                 # shrinks back after a small order
    assert _table_bytes(s._order) <= 16 * _MIN_SLOTS


def test_exhausting_an_order_densifies_then_restart_releases_it():
    N = 40_000
    s = IndexSampler(N, rng=6)
    got = s.take(N)
    assert sorted(got.tolist()) == list(range(N)) and s.remaining == 0
    assert s.take(5).shape == (0,)
    assert 4 * N <= _table_bytes(s._order) <= 4 * N + 16 * 1024  # dense int32 permutation
    s.restart()
    assert _table_bytes(s._order) <= 16 * _MIN_SLOTS
    assert s.take(3).dtype == np.intp


@pytest.mark.parametrize("N", [0, -3])
def test_bad_N(N):
    with pytest.raises(ValueError, match="N must be >= 1"):
        IndexSampler(N)
