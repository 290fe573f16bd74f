"""Chains whose rows live in a store read them through a row feed (samplers/_rowfeed.py).

The feed only changes where the kernels find the rows (slots in memory, filled from the
store ahead of the steps), never which rows are drawn or how they are used: every chain on a
store must equal the chain on the same rows in memory at the same seed, bit for bit, on both
loops, whether its rows were predicted, fetched on demand or fetched again after a refill.
"""

import numpy as np
import pytest

import samplers._rowfeed as rowfeed
from design._lib.rows import (FEED_BLOCK, IndexSampler, attach_feed, blocks_without_slot,
                              give_slots, slot_of)
from samplers import (AustereTest, ChainInterrupted, ControlVariates, ExactTest, GaussianPrior,
                      Langevin, LogisticRegression, RandomWalk, TunaMHTest, sample,
                      sample_chains)
from samplers.sources import open_store, write_store

zarr = pytest.importorskip("zarr")

N, D = 20_000, 4


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, D - 1))])
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.array([0.3, -0.8, 0.5, 0.2])))).astype(float)
    return X, y


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The control-variate model in memory and on a zarr store of the same rows."""
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
    assert a.stats.keys() == b.stats.keys()
    for k in a.stats:
        assert np.array_equal(a.stats[k], b.stats[k]), k
        assert a.stats[k].dtype == b.stats[k].dtype, k


@pytest.mark.parametrize("compiled", [None, False])
def test_chain_on_store_equals_chain_in_memory(models, compiled):
    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    theta0 = memory.centre.theta
    steps = 400 if compiled is None else 60
    a = sample(memory, test, walk, theta0, steps, rng=11, compiled=compiled)
    b = sample(store, test, walk, theta0, steps, rng=11, compiled=compiled)
    _same(a, b)
    assert a.store_reads is None
    reads = b.store_reads
    assert reads.rows_read == a.stats["n_used"].sum()
    assert reads.rows_fetched >= reads.rows_on_demand


def test_rows_fetched_grow_with_rows_read_not_n(tmp_path):
    """At N = 10^6 a chain of 150 steps reading ~30 rows each fetches the rows its next
    outputs of the bit generator can reach: at most a window of rows for each output it
    looks at (about twice those the steps use: the rows' uniforms, the proposal's and the
    threshold's draws), whatever N; a small part of the data."""
    n, steps = 10**6, 150
    X, y = _data(n, seed=3)
    write_store(tmp_path / "big.zarr", X, y, rows_per_chunk=64, rows_per_shard=1 << 16,
                progress=False)
    memory = ControlVariates(LogisticRegression(X, y))
    store = ControlVariates(LogisticRegression(*open_store(tmp_path / "big.zarr")),
                            center=memory.centre.theta)
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    a = sample(memory, test, walk, memory.centre.theta, steps, rng=5)
    b = sample(store, test, walk, memory.centre.theta, steps, rng=5)
    _same(a, b)
    reads = b.store_reads
    outputs = reads.rows_read + steps * (D + 4)    # rows' uniforms, proposal, threshold
    per_output = max(rowfeed.WINDOW, rowfeed.WINDOW_MAX) + 2 * FEED_BLOCK + 2
    assert reads.rows_fetched <= per_output * (2 * outputs + 64 * reads.reads)
    assert reads.rows_fetched < n / 4
    assert reads.rows_on_demand <= reads.rows_read


def test_decisions_beyond_the_window_fetch_on_demand(models, monkeypatch):
    """A window of 2 positions predicts almost nothing of 30-row decisions: their rows are
    fetched when the order hands them out, and the chain is the same."""
    memory, store = models
    monkeypatch.setattr(rowfeed, "WINDOW", 2)
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    a = sample(memory, test, walk, memory.centre.theta, 100, rng=4)
    b = sample(store, test, walk, memory.centre.theta, 100, rng=4)
    _same(a, b)
    assert b.store_reads.rows_on_demand > 0


def test_refills_and_an_unpredictable_generator(models, monkeypatch):
    """Slots for a few hundred rows force refills (every row fetched again when needed);
    an MT19937 generator cannot be looked ahead (every row fetched on demand): the same
    chains. Far from the mode, decisions read many rows (some past the capacity)."""
    memory, store = models
    monkeypatch.setattr(rowfeed, "MEMORY", 200 * D * 8)
    walk = RandomWalk(0.05)
    test = AustereTest(m=30, epsilon=0.05)
    a = sample(memory, test, walk, np.zeros(D), 60, rng=8)
    b = sample(store, test, walk, np.zeros(D), 60, rng=8)
    _same(a, b)
    assert b.store_reads.refills > 0
    mt = np.random.Generator(np.random.MT19937(3))
    mt2 = np.random.Generator(np.random.MT19937(3))
    a = sample(memory, test, walk, memory.centre.theta, 60, rng=mt)
    b = sample(store, test, walk, memory.centre.theta, 60, rng=mt2)
    _same(a, b)
    assert b.store_reads.rows_on_demand > 0     # nothing predicted: rows 0 .. window - 1
    assert b.store_reads.rows_fetched <= (b.store_reads.rows_on_demand * FEED_BLOCK
                                          + (b.store_reads.refills + 1) * 2 * rowfeed.WINDOW)


def test_minibatch_langevin_reads_its_rows_through_the_feed(models):
    memory, store = models
    prop = Langevin.from_laplace(memory, batch_size=20)
    test = AustereTest(m=30, epsilon=0.05)
    a = sample(memory, test, prop, memory.centre.theta, 100, rng=9)
    b = sample(store, test, prop, memory.centre.theta, 100, rng=9)
    _same(a, b)
    # the minibatch's 20 rows per step (n_grad counts their gradients at both points)
    assert b.store_reads.rows_read == b.stats["n_used"].sum() + 20 * 100



def test_chains_cut_after_an_interrupt_keep_what_they_read(models):
    """After Ctrl-C, sample_chains cuts the chains to the shortest (each worker process
    returns its own partial chain); every chain keeps its store_reads (what it read over
    all the steps it ran, the cut ones included)."""
    from concurrent.futures import Future

    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)

    class Interrupted:
        """Runs the chains here; the second stops after 40 steps, as a worker interrupted
        by Ctrl-C returns its partial chain."""

        def __init__(self):
            self.steps = [100, 40]

        def submit(self, fn, model, test, proposal, theta0, n, rng):
            future = Future()
            future.set_result(fn(model, test, proposal, theta0, self.steps.pop(0), rng))
            return future

    with pytest.warns(ChainInterrupted, match="cut to the 40 steps"):
        chains = sample_chains(store, test, walk, memory.centre.theta, 100, n_chains=2,
                               rng=4, executor=Interrupted())
    assert chains.samples.shape == (2, 40, D)
    for chain in chains.chains:
        assert chain.store_reads is not None
        assert chain.store_reads.rows_read >= chain.stats["n_used"].sum()


@pytest.mark.parametrize("make_test", [lambda: TunaMHTest(chi=1e-4), ExactTest])
def test_chains_reading_other_rows_use_the_models_reads(models, make_test):
    """An exact minibatch test draws its own rows and the exact test reads every row: no
    feed (``rows_from_order`` is False); the store-backed model reads what they ask for with
    ``read_rows`` and by blocks, and the chains are the in-memory ones."""
    memory, store = (m.model for m in models)
    walk = RandomWalk(0.01)
    test = make_test()
    theta0 = models[0].centre.theta
    a = sample(memory, test, walk, theta0, 15, rng=2)
    b = sample(store, test, walk, theta0, 15, rng=2)
    _same(a, b)
    assert b.store_reads is None


def test_slot_table_against_a_dict():
    """Blocks given slots are found, row by row, at their block's slot plus the row's place
    in it; blocks_without_slot lists the blocks of row ranges that have none, once each, in
    order."""
    order = IndexSampler(10_000, rng=0).kernel_state()
    attach_feed(order, 0)
    rng = np.random.default_rng(1)
    given = {}
    for _ in range(40):   # enough blocks for the table to grow several times
        blocks = np.setdiff1d(rng.integers(0, 10_000 // FEED_BLOCK, 50), list(given))
        for b, first in zip(blocks, give_slots(order, blocks.astype(np.int64))):
            given[int(b)] = int(first)
    rows = rng.integers(0, 10_000, 3000)
    expect = [given[r // FEED_BLOCK] + r % FEED_BLOCK if r // FEED_BLOCK in given else -1
              for r in rows]
    assert [slot_of(order, int(r)) for r in rows] == expect
    lo = np.sort(rng.integers(0, 9_900, 80)).astype(np.int64)
    hi = lo + rng.integers(0, 90, 80)
    want = sorted({b for a, z in zip(lo, hi) for b in range(a // FEED_BLOCK, z // FEED_BLOCK + 1)
                   if b not in given})
    assert blocks_without_slot(order, lo, hi).tolist() == want


def test_rows_in_memory_beside_a_store_are_read_through_the_slots(models):
    """X in the store and y in memory: the order hands out slots, so y is copied into slots
    too (else the kernels would read y at a slot's number)."""
    memory, store = models
    lr = store.model
    mixed = LogisticRegression(lr.X, lr.y.read_range(0, N), prior=memory.model.prior)
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    a = sample(memory.model, test, walk, memory.centre.theta, 100, rng=6)
    b = sample(mixed, test, walk, memory.centre.theta, 100, rng=6)
    _same(a, b)
    assert b.store_reads is not None


class _FailingStore:
    """A user's row source whose small reads (the rows fetched on demand) fail."""

    def __init__(self, arr):
        self._arr, self.shape, self.dtype, self.name = arr, arr.shape, arr.dtype, "X"

    def read_range(self, start, stop):
        return np.ascontiguousarray(self._arr[start:stop])

    def read_rows(self, idx):
        if len(idx) < 200:
            raise OSError("the store went away")
        return self._arr[idx]

    def reopen(self):
        return self


def test_a_failed_read_on_demand_stops_the_chain_with_its_error(models, monkeypatch):
    """A row fetched from compiled code (object mode) whose read fails: the store's error
    comes out of ``sample``."""
    monkeypatch.setattr(rowfeed, "WINDOW", 2)
    X, y = _data()
    model = LogisticRegression(_FailingStore(X), y)
    with pytest.raises(OSError, match="went away"):
        sample(model, AustereTest(m=30, epsilon=0.05), RandomWalk(0.05), np.zeros(D), 50,
               rng=1)


def test_fit_rounds_joined_and_cut_keep_what_they_read(models):
    """validation.fit joins its rounds of chains end to end and cuts them to a common
    length: the joined chain's store_reads add up its rounds'."""
    from validation.workflow.steps import _join

    memory, store = models
    walk = RandomWalk.from_laplace(memory)
    test = AustereTest(m=30, epsilon=0.05)
    theta0 = memory.centre.theta
    rounds = [[sample(store, test, walk, theta0, n, rng=seed) for seed, n in ((1, 30), (2, 25))],
              [sample(store, test, walk, theta0, 20, rng=seed) for seed in (3, 4)]]
    joined = _join(rounds)
    assert [c.samples.shape[0] for c in joined] == [45, 45]
    for k, chain in enumerate(joined):
        assert chain.store_reads.rows_read == sum(r[k].store_reads.rows_read for r in rounds)
        assert chain.store_reads.reads == sum(r[k].store_reads.reads for r in rounds)


def test_slot_pages_made_present_stay_zero_and_writable():
    """_Mapped.populate makes the first rows' pages present (on Linux 5.14+, where it can)
    without changing what they hold; released pages read zero again and are populated
    again when asked."""
    from samplers._rowfeed import _Mapped

    m = _Mapped((50_000, 3), np.float64)
    m.populate(10_000)
    if m._present:   # the kernel has MADV_POPULATE_WRITE
        assert m._present >= 10_000 * 24 and m._present % 4096 == 0
    assert not m.array[:10_000].any()
    m.array[:20_000] = 1.5
    m.populate(20_000)   # already written: the values stay
    assert np.all(m.array[:20_000] == 1.5)
    m.release(5_000)
    assert np.all(m.array[:5_000] == 1.5) and not m.array[6_000:].any()
    assert m._present <= 5_000 * 24 + 4096
    m.populate(30_000)
    m.release()
    assert m._present == 0 and not m.array.any()
