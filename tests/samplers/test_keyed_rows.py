"""Keyed row draws (``row_draws="keyed"``): each order's uniforms from its own counter-based
stream, so a chain on a store fetches exactly the rows it will read.

The stream is Philox4x64-10 (checked against NumPy's ``Philox``); the orders it gives are
uniform (a chi-square check) and known in advance (``keyed_rows_ahead``); a keyed chain on a
store equals the keyed chain on the same rows in memory, on both loops, whether its rows were
fetched ahead or on demand, and fetches about the rows it reads, whatever N. The compiled
shard reader is checked against the rows themselves.
"""

import os

import numpy as np
import pytest
from scipy import stats

import samplers._rowfeed as rowfeed
from design._lib.rows import (IndexSampler, attach_feed, blocks_without_slot, give_plan,
                              give_slots, keyed_plan_rows, keyed_rows_ahead, keyed_uniforms,
                              philox4x64, register_feed, restart_order, slots_given,
                              unregister_feed)
from samplers import AustereTest, ControlVariates, GaussianPrior, Langevin, LogisticRegression
from samplers import RandomWalk, sample, sample_chains
from samplers.sources import open_store, write_store

N, D = 20_000, 4


def test_philox_equals_numpys():
    key = np.array([0x0123456789ABCDEF, 2**64 - 3], dtype=np.uint64)
    for counter in [(1, 0, 0, 0), (7, 2**40 + 5, 3, 2**63)]:
        bg = np.random.Philox(key=key, counter=np.array([counter[0] - 1, *counter[1:]],
                                                        dtype=np.uint64))
        got = philox4x64(*[np.uint64(c) for c in counter], key[0], key[1])
        assert list(got) == list(bg.random_raw(4))


def test_keyed_uniforms_and_rows_against_a_reference():
    """Position p of epoch e: word p % 4 of Philox at counter (p // 4, e); the rows are a
    Fisher-Yates shuffle of those uniforms (a NumPy reference), and equal seeds agree."""
    key = np.array([5, 9], dtype=np.uint64)
    u = np.empty(11)
    keyed_uniforms(key, 3, 2, u)
    raw = [philox4x64(np.uint64(p // 4), np.uint64(3), np.uint64(0), np.uint64(0),
                      key[0], key[1])[p % 4] for p in range(2, 13)]
    assert np.array_equal(u, (np.array(raw, dtype=np.uint64) >> np.uint64(11)) * 2.0**-53)

    s, t = IndexSampler(50, rng=4, row_draws="keyed"), IndexSampler(50, rng=4, row_draws="keyed")
    first = np.concatenate([s.take(7), s.take(5)])
    assert np.array_equal(first, t.take(12))
    u = np.empty(12)   # the key: two words drawn from the seed's Generator; epoch 0
    keyed_uniforms(np.random.default_rng(4).integers(0, 2**64, size=2, dtype=np.uint64), 0,
                   0, u)
    perm = np.arange(50)
    for i in range(12):
        j = i + int(u[i] * (50 - i))
        perm[i], perm[j] = perm[j], perm[i]
    assert np.array_equal(first, perm[:12])


def test_keyed_orders_are_uniform():
    """The first two rows of 6000 keyed orders of 4 rows: every ordered pair equally likely
    (chi-square, 11 degrees of freedom, false alarm 1e-4 at this fixed seed)."""
    s = IndexSampler(4, rng=1, row_draws="keyed")
    counts = np.zeros((4, 4))
    for _ in range(6000):
        s.restart()
        a, b = s.take(2)
        counts[a, b] += 1
    observed = counts[~np.eye(4, dtype=bool)]
    assert stats.chisquare(observed).pvalue > 1e-4


def test_rows_ahead_contain_every_row_of_the_first_positions():
    s = IndexSampler(1000, rng=2, row_draws="keyed")
    order = s.kernel_state()
    ahead = set(keyed_rows_ahead(order, 1, 50, 16).tolist())
    for _ in range(50):
        restart_order(order)
        assert set(s.take(16).tolist()) <= ahead


def _plan_reference(key, N, epoch, W):
    """The first W rows of a keyed order's epoch: a full NumPy Fisher-Yates shuffle of its
    uniforms."""
    u = np.empty(W)
    keyed_uniforms(key, epoch, 0, u)
    perm = np.arange(N)
    for i in range(W):
        j = i + int(u[i] * (N - i))
        perm[i], perm[j] = perm[j], perm[i]
    return perm[:W]


@pytest.mark.parametrize("N, W", [(1000, 16), (12, 12), (5, 8), (40, 39)])
def test_plan_rows_are_the_rows_handed_out(N, W):
    """keyed_plan_rows gives, epoch by epoch, exactly the first W rows the order hands out
    (a NumPy shuffle as reference; N small enough that swaps meet displaced positions)."""
    s = IndexSampler(N, rng=5, row_draws="keyed")
    order = s.kernel_state()
    key = np.random.default_rng(5).integers(0, 2**64, size=2, dtype=np.uint64)
    plan = keyed_plan_rows(order, 0, 6, W)
    w = min(W, N)
    assert plan.shape == (6 * w,)
    for e in range(6):
        want = _plan_reference(key, N, e, w)
        assert np.array_equal(plan[e * w:(e + 1) * w], want)
        assert np.array_equal(s.take(w), want)
        s.restart()
    assert np.array_equal(keyed_plan_rows(order, 4, 1, W), plan[4 * w:5 * w])


def test_planned_positions_take_their_planned_slots():
    """With a plan, the order hands out slot first + e W + p for the row planned at position
    p of epoch e; past the window, in an epoch not planned, or where a row is not the one
    planned, it falls back to the table (and calls the feed for rows without a slot)."""
    N, W = 500, 8
    s = IndexSampler(N, rng=8, row_draws="keyed")
    order = s.kernel_state()
    asked = []

    def fetch(rows):
        asked.append(rows.copy())
        rows = np.sort(rows)
        give_slots(order, blocks_without_slot(order, rows, rows))

    number = register_feed(fetch)
    try:
        attach_feed(order, number, 0)
        give_slots(order, np.array([1, 2, 3], dtype=np.int64))   # slots 0, 1, 2 by the table
        rows = keyed_plan_rows(order, 0, 3, W)
        first = give_plan(order, 0, W, rows)
        assert first == 3 and slots_given(order) == 3 + 3 * W
        for e in range(3):
            got = np.concatenate([s.take(3), s.take(W - 3)])
            assert np.array_equal(got, first + e * W + np.arange(W))
            assert not asked
            beyond = s.take(2)   # positions W, W + 1: fetched on demand, slots after the plan
            assert len(asked) == 1 and np.all(beyond >= first + 3 * W)
            asked.clear()
            s.restart()
        got = s.take(W)       # epoch 3: not planned
        assert len(asked) == 1 and np.all(got >= first + 3 * W)
    finally:
        unregister_feed(number)


def test_bad_row_draws_is_refused():
    with pytest.raises(ValueError, match="row_draws"):
        IndexSampler(10, rng=0, row_draws="random")
    model = ControlVariates(LogisticRegression(*_data(200)))
    with pytest.raises(ValueError, match="row_draws must be one of"):
        sample(model, AustereTest(m=30), RandomWalk(0.1), np.zeros(D), 5, row_draws="keys")


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, D - 1))])
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.array([0.3, -0.8, 0.5, 0.2])))).astype(float)
    return X, y


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The control-variate model in memory and on a zarr store of the same rows."""
    pytest.importorskip("zarr")
    X, y = _data()
    path = tmp_path_factory.mktemp("store") / "data.zarr"
    write_store(path, X, y, rows_per_chunk=64, rows_per_shard=4096, progress=False)
    prior = GaussianPrior(0.0, 5.0)
    memory = ControlVariates(LogisticRegression(X, y, prior=prior))
    Xs, ys = open_store(path)
    store = ControlVariates(LogisticRegression(Xs, ys, prior=prior))
    return memory, store


def _same(a, b):
    assert np.array_equal(a.samples, b.samples)
    for k in a.stats:
        assert np.array_equal(a.stats[k], b.stats[k]), k


@pytest.mark.parametrize("compiled", [None, False])
def test_keyed_chain_on_store_equals_keyed_chain_in_memory(models, compiled):
    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    theta0 = memory.centre.theta
    steps = 400 if compiled is None else 60
    a = sample(memory, test, walk, theta0, steps, rng=11, compiled=compiled, row_draws="keyed")
    b = sample(store, test, walk, theta0, steps, rng=11, compiled=compiled, row_draws="keyed")
    c = sample(store, test, walk, theta0, steps, rng=11, compiled=compiled, row_draws="keyed")
    _same(a, b)
    _same(b, c)
    shared = sample(memory, test, walk, theta0, steps, rng=11, compiled=compiled)
    assert not np.array_equal(shared.samples, a.samples)
    reads = b.store_reads
    assert reads.rows_read == a.stats["n_used"].sum()
    # exact prediction: about the rows read (a window of 32 for 30-row decisions, the rows
    # of longer decisions on demand), not a window per output of the generator
    assert reads.rows_fetched <= 1.25 * reads.rows_read + 64
    assert reads.rows_on_demand <= 0.1 * reads.rows_read


def test_keyed_compiled_and_python_loops_agree(models):
    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    a = sample(store, test, walk, memory.centre.theta, 50, rng=3, row_draws="keyed")
    b = sample(store, test, walk, memory.centre.theta, 50, rng=3, row_draws="keyed",
               compiled=False)
    _same(a, b)


def test_keyed_decisions_beyond_the_window_and_refills(models, monkeypatch):
    """A window of 8 positions for 30-row decisions (the rest on demand), slots for a few
    hundred rows (refills between look-aheads), and a minibatch Langevin proposal (two
    orders a step): the same chains as in memory."""
    memory, store = models
    monkeypatch.setattr(rowfeed, "WINDOW", 8)
    monkeypatch.setattr(rowfeed, "WINDOW_MAX", 8)
    monkeypatch.setattr(rowfeed, "MEMORY", 300 * D * 8)
    test = AustereTest(m=30, epsilon=0.05)
    walk = RandomWalk.from_laplace(memory)
    a = sample(memory, test, walk, memory.centre.theta, 150, rng=4, row_draws="keyed")
    b = sample(store, test, walk, memory.centre.theta, 150, rng=4, row_draws="keyed")
    _same(a, b)
    assert b.store_reads.rows_on_demand > 0 and b.store_reads.refills > 0
    prop = Langevin.from_laplace(memory, batch_size=20)
    a = sample(memory, test, prop, memory.centre.theta, 60, rng=9, row_draws="keyed")
    b = sample(store, test, prop, memory.centre.theta, 60, rng=9, row_draws="keyed")
    _same(a, b)


def test_sample_chains_passes_row_draws(models):
    from concurrent.futures import ThreadPoolExecutor

    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    with ThreadPoolExecutor(2) as pool:
        got = sample_chains(store, test, walk, memory.centre.theta, 40, n_chains=2, rng=5,
                            executor=pool, row_draws="keyed")
    streams = np.random.default_rng(5).spawn(2)
    one = sample(memory, test, walk, memory.centre.theta, 40, rng=streams[1],
                 row_draws="keyed")
    assert np.array_equal(got.samples[1], one.samples)


def test_compiled_shard_reads_equal_the_rows(tmp_path):
    """Sorted rows, near and far apart, across shards, read by the compiled reader into
    slots in any order; a shard whose index points past its end is refused."""
    pytest.importorskip("zarr")
    from samplers import _shardread
    from samplers.sources import ZarrSource, to_zarr

    X = np.random.default_rng(0).normal(size=(5000, 3)).astype(np.float32)
    path = tmp_path / "x.zarr"
    to_zarr(X, path, rows_per_chunk=16, rows_per_shard=512, progress=False)
    src = ZarrSource(path)
    fill = _shardread.shard_filler(src)
    if fill is None:
        pytest.skip("no pread in this C library")
    rng = np.random.default_rng(1)
    rows = np.unique(np.concatenate([rng.integers(0, 5000, 300), np.arange(1000, 1040)]))
    slots = rng.permutation(rows.size)
    out = np.zeros((rows.size, 3), dtype=np.float32)
    fill(rows.astype(np.int64), slots.astype(np.int64), out)
    assert np.array_equal(out[slots], X[rows])
    shard = path / "c" / "9" / "0"
    raw = bytearray(shard.read_bytes())
    index_at = len(raw) - (512 // 16) * 16 - 4      # (offset, nbytes) per inner chunk
    raw[index_at:index_at + 8] = np.uint64(len(raw) + 10).tobytes()
    shard.write_bytes(bytes(raw))
    src = ZarrSource(path)
    fill = _shardread.shard_filler(src)
    with pytest.raises(ValueError, match="damaged"):
        fill(np.array([9 * 512 + 5], dtype=np.int64), np.zeros(1, np.int64), out)
    fill.close()


def test_compiled_shard_reads_of_rows_wider_than_the_buffer(tmp_path):
    """A row of more than BUFFER bytes (here 1.1 MB) is read whole into a buffer that grows to
    fit it (a 1 MiB buffer was overrun: wrong rows, then a crash)."""
    pytest.importorskip("zarr")
    from samplers import _shardread
    from samplers.sources import ZarrSource, to_zarr

    X = np.random.default_rng(2).normal(size=(3, 140_000))
    assert X[0].nbytes > _shardread.BUFFER
    to_zarr(X, tmp_path / "wide.zarr", rows_per_chunk=1, rows_per_shard=2, progress=False)
    fill = _shardread.shard_filler(ZarrSource(tmp_path / "wide.zarr"))
    if fill is None:
        pytest.skip("no pread in this C library")
    out = np.zeros_like(X)
    fill(np.arange(3, dtype=np.int64), np.array([2, 0, 1], dtype=np.int64), out)
    fill.close()
    assert np.array_equal(out[[2, 0, 1]], X)


def test_a_pread_interrupted_by_a_signal_is_made_again_not_called_damage(tmp_path,
                                                                         monkeypatch):
    """read_shard's loop (its Python form, with libc's pread replaced by one that fails as a
    call interrupted by a signal does: -1, nothing read) reads the same rows as the compiled
    one; a call that keeps failing is an OSError naming the file, not a damaged store."""
    pytest.importorskip("zarr")
    import ctypes

    from samplers import _shardread
    from samplers.sources import ZarrSource, to_zarr

    X = np.random.default_rng(3).normal(size=(2000, 3))
    to_zarr(X, tmp_path / "x.zarr", rows_per_chunk=16, rows_per_shard=512, progress=False)
    fill = _shardread.shard_filler(ZarrSource(tmp_path / "x.zarr"))
    if fill is None:
        pytest.skip("no pread in this C library")
    calls = {"n": 0, "fail_every": 2}

    def pread(fd, address, count, offset):        # every other call interrupted
        calls["n"] += 1
        if calls["n"] % calls["fail_every"]:
            return -1
        data = os.pread(int(fd), int(count), int(offset))
        ctypes.memmove(int(address), data, len(data))
        return len(data)

    monkeypatch.setattr(_shardread, "_pread", pread)
    monkeypatch.setattr(_shardread, "read_shard", _shardread.read_shard.py_func)
    rows = np.array([0, 1, 2, 40, 700, 701, 1999], dtype=np.int64)
    out = np.zeros((rows.size, 3))
    fill(rows, np.arange(rows.size, dtype=np.int64), out)
    assert np.array_equal(out, X[rows]) and calls["n"] > 2
    calls["fail_every"] = 10 ** 9                 # every call fails: an I/O error
    with pytest.raises(OSError, match="reading the Zarr shard file .* failed"):
        fill(rows, np.arange(rows.size, dtype=np.int64), out)
    fill.close()


def test_chains_cut_after_an_interruption_keep_their_store_reads(models):
    """sample_chains cuts interrupted chains to the shortest: each keeps what it read."""
    from samplers._chain import ChainInterrupted, _common_length

    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    long, short = (sample(store, test, walk, memory.centre.theta, n, rng=n,
                          row_draws="keyed") for n in (30, 20))
    with pytest.warns(ChainInterrupted):
        cut = _common_length([long, short], interrupted=True)
    assert cut.chains[0].samples.shape[0] == 20
    assert cut.chains[0].store_reads == long.store_reads
    assert cut.chains[1].store_reads == short.store_reads


def test_fit_rounds_draw_keyed_rows_on_a_store_and_shared_in_memory(models):
    """validation.fit's chains: keyed row draws when the model's rows sit in a store (the
    chain fetches only the rows it reads), the shared scheme in memory (chains as before)."""
    from validation.workflow.steps import _round

    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    theta0 = memory.centre.theta[None, :]
    streams = lambda: [np.random.default_rng(3)]    # noqa: E731  (a fresh stream per call)
    on_store, _ = _round(store, test, walk, theta0, 200, streams(), False, False)
    in_memory, _ = _round(memory, test, walk, theta0, 200, streams(), False, False)
    _same(on_store[0], sample(memory, test, walk, theta0[0], 200, rng=np.random.default_rng(3),
                              row_draws="keyed"))
    _same(in_memory[0], sample(memory, test, walk, theta0[0], 200,
                               rng=np.random.default_rng(3)))
    assert on_store[0].store_reads.rows_fetched <= 1.25 * on_store[0].store_reads.rows_read + 64


@pytest.mark.parametrize("n_total, size", [(1, 5), (3, 0), (10_000, 3000), (2**40, 500),
                                           (2**62, 200)])
def test_sort_rows_is_a_stable_argsort(n_total, size):
    """The feed's radix sort equals NumPy's stable argsort (repeats included)."""
    rows = np.random.default_rng(size).integers(0, n_total, size)
    assert np.array_equal(rowfeed.sort_rows(rows, n_total), np.argsort(rows, kind="stable"))


@pytest.mark.parametrize("share", [0.3, 0.6, 1.0])
def test_a_decision_reading_past_the_plan_stays_within_the_slots(share):
    # the look-ahead's planned slots plus table slots for the rows a long decision fetches
    # on demand (the plan's rows among them): slot arrays of N rows overflowed at 30% of N
    from design._lib.rows import draw_rows, restart_order

    N = 20_000
    X = np.arange(N, dtype=np.float64)[:, None]
    fed = IndexSampler(N, rng=1, row_draws="keyed").kernel_state()
    plain = IndexSampler(N, rng=1, row_draws="keyed").kernel_state()
    feed = rowfeed.RowFeed([X], np.random.default_rng(2), fed, dim=2, memory=16 * 4000)
    feed.prefetch()
    k = int(share * N)
    got, want = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64)
    for order, out in ((fed, got), (plain, want)):
        restart_order(order)
        draw_rows(np.random.default_rng(3), order, np.empty(k), out)
    assert got.max() < feed.arrays[id(X)].shape[0]
    np.testing.assert_array_equal(feed.arrays[id(X)][got, 0], want.astype(float))
