"""A chain's rows from a store: fetched ahead in sorted blocks, read from memory by the kernels.

A minibatch chain reads a few random rows per step. From a chunked store (zarr, HDF5, a
user's :class:`~samplers.sources.RowSource`) every read call costs far more than a step in
memory, so the rows must be fetched ahead, in few large sorted reads, and the compiled
kernels must find them where they read rows today: ``X[i, j]`` of the model's
``kernel_data()``. A :class:`RowFeed` does both, for one chain:

* **Where the rows go: slots.** Each store-backed array of the model gets an array in
  memory (an anonymous private mapping of the array's full shape, no swap reserved: only
  the pages written take memory). Fetched rows go to consecutive *slots* (rows of that
  array), and the chain's row order hands out the slot of each row it draws instead of the
  row (:func:`design._lib.rows.attach_feed`: a hash table from rows to slots, in compiled
  code). Inside the chain the model's ``kernel_data()`` holds these arrays
  (:func:`chain_rows`), so every compiled loop runs unchanged, the same machine code as on
  an in-memory array, on rows that sit together in memory. When more than half of
  ``capacity`` slots (``memory`` bytes) are used, they are all given back and filled again
  from slot 0 (:meth:`RowFeed.refill`): the memory is fixed, and after the first fill no
  page fault is paid again.
* **No row is read before it is fetched.** A row the order draws that has no slot is
  fetched at once, from compiled code (numba's object mode calls the feed), with the rest of
  its batch. Correctness never depends on the prediction below; only speed does.
* **Which rows come next** (the prediction). The rows a decision draws are
  ``j = i + floor(u (N - i))`` for position i of its order and a uniform u, or a row an
  earlier swap of the same order displaced, which is below the number of rows that order has
  handed out (every displaced position holds a row from a position before the current one).
  Each uniform is one 64-bit output of the chain's bit generator, ``(w >> 11) 2^-53``, and
  the stream of outputs is fixed by the seed, whatever theta does. So, before a run of
  steps, the feed copies the generator's state, reads its next ``ahead`` outputs
  (``random_raw``) and fetches, in one sorted read, for each output w the rows its uniform
  would give at positions ``0 .. window - 1`` (the range ``[j(0), j(window - 1)]``: j is
  nondecreasing in i, by steps of 0 or 1) plus the rows ``0 .. window - 1`` (displaced
  rows); the window follows the rows read per step (:data:`WINDOW`, :data:`WINDOW_MAX`). Outputs that become proposal or threshold draws fetch rows that are never read:
  the price of not knowing which output becomes which draw (a few per step, against tens of
  rows). A range of ``window`` consecutive rows costs a row-chunked store about what one row
  costs (one chunk). A decision reading more than ``window`` rows finds its later rows on
  demand. The steps then run in sub-blocks short enough not to use up the outputs looked at.

* **Keyed orders** (``sample(..., row_draws="keyed")``): the uniforms of each order come
  from its own counter-based stream (:func:`design._lib.rows.keyed_uniforms`), so the rows
  of every later decision are known exactly, not one window per generator output. The feed
  then works out the rows at positions ``0 .. window - 1`` of as many next orders as 90%
  of the capacity holds (:func:`design._lib.rows.keyed_plan_rows`: the first steps of each
  order's shuffle), gives them consecutive slots in the order the chain will read them
  (the order's *plan*, :func:`design._lib.rows.give_plan`) and reads them, sorted, once
  per capacity's worth of steps (:meth:`RowFeed._prefetch_keyed`). The order then finds a
  planned row's slot from its position (one sequential read that checks the row, no hash
  table), and the chain reads its rows from consecutive slots; a row read twice is fetched
  twice (a few percent). About one row is fetched per row read, and the rows are dense
  enough that the reads of a zarr store become a sweep of its shards in large sequential
  reads (``samplers/_shardread.py``). At N = 10^7 (88-byte rows, 128 MiB of slots) that is
  one sweep of the store every ~40,000 steps.
* **How rows are read**: an uncompressed sharded zarr array (what ``to_zarr`` writes) by a
  compiled loop that joins nearby rows into one ``pread`` (``samplers/_shardread.py``);
  any other source through its ``read_into`` or ``read_rows``.

Because only the physical place of the rows changes, a chain on a store is **bit-identical
to the chain on the same data in memory** at equal seeds and equal ``row_draws``, on either
loop, whatever the window, the look-ahead or the memory.

Which chains read their rows this way: those whose test and proposal read rows only from the
chain's order (``rows_from_order(view)``: the sequential tests with a model range, the
random-walk, independence and minibatch Langevin proposals, SGLD and ``AcceptAll``). Any
other chain on a store-backed model (an exact test's full pass, a range scanned from all
rows, the Poisson-minibatch tests, a full-gradient Langevin) runs on the Python loop over
the store-backed model's batch methods, which read the rows each batch needs with
``read_rows``.
"""

from __future__ import annotations

import copy
import math
import mmap
import sys
from dataclasses import dataclass

import numpy as np

from design._lib.jit import jit
from design._lib.rows import (FEED_BLOCK, attach_feed, blocks_without_slot, clear_slots,
                              detach_feed, feed_rows_seen, give_plan, give_slots,
                              keyed_plan_rows, keyed_rows_after, order_epoch, order_keyed,
                              register_feed, rows_taken, slots_given, unregister_feed)

from ._shardread import shard_filler

__all__ = ["FeedStats", "RowFeed", "chain_feed", "fed_model", "sort_rows"]

#: Positions of a decision's order covered by the prediction before the first step; then
#: the rows read per step so far, rounded up to a multiple of 8, within [8, WINDOW_MAX]
#: (the rows of a longer decision are fetched on demand).
WINDOW = 32
WINDOW_MAX = 64
#: Outputs of the bit generator looked at before each run of steps.
AHEAD = 1 << 14
#: Bytes of slots (summed over a model's store-backed arrays) kept between refills.
MEMORY = 1 << 27


def _per_row(model, value) -> bool:
    """Whether a model's field holds one entry per row: a row source, or an array of N
    rows (what ``BaseModel.row_block`` cuts too)."""
    if isinstance(value, np.ndarray):
        return value.ndim > 0 and value.shape[0] == model.N
    return value is not None and hasattr(value, "read_rows") and hasattr(value, "read_range")


def _row_arrays(model) -> list:
    """The distinct per-row fields of a model and of the models it wraps
    (``_row_fields``, ``_wrapped_fields``): the arrays a chain's rows are read from."""
    found = {}

    def walk(m):
        for name in getattr(m, "_row_fields", ()):
            value = m.__dict__.get(name)
            if _per_row(m, value):
                found.setdefault(id(value), value)
        for name in getattr(m, "_wrapped_fields", ()):
            inner = m.__dict__.get(name)
            if inner is not None:
                walk(inner)

    walk(model)
    return list(found.values())


#: What a fed model asks of the store-backed model it copies: its ranges and bounds come from
#: data summaries (maximum row norm, ...), which the store-backed model computes by passes
#: over the store, while the copy's arrays hold only the fetched rows.
_SUMMARIES = ("_range_data", "_loglik_ratio_bound", "_loglik_ratio_range",
              "loglik_ratio_bound", "loglik_ratio_range")


def fed_model(model, arrays):
    """A shallow copy of a store-backed model whose per-row fields (``_row_fields``, and
    those of the models it wraps, ``_wrapped_fields``; in a store or in memory) are the
    slot arrays ``arrays[id(field)]`` of a :class:`RowFeed`, so that its row kernels and
    ``kernel_data()`` work as for data in memory, indexed by slots; ranges and bounds stay
    the store-backed model's (:data:`_SUMMARIES`)."""
    new = copy.copy(model)
    state = new.__dict__
    for name in getattr(model, "_row_fields", ()):
        value = state.get(name)
        if value is not None and id(value) in arrays:
            state[name] = arrays[id(value)]
    for name in getattr(model, "_wrapped_fields", ()):
        inner = state.get(name)
        if inner is not None and hasattr(inner, "data_sources"):
            state[name] = fed_model(inner, arrays)
    state["_store_backed"] = False
    for name in _SUMMARIES:
        if hasattr(model, name):
            state[name] = getattr(model, name)
    return new


@dataclass(frozen=True)
class FeedStats:
    """What a chain's row feed read from the store.

    Attributes
    ----------
    rows_read : int
        Rows the chain's order handed out (the rows its tests and proposals read).
    rows_fetched : int
        Rows fetched from the store (each store-backed array once per row), ahead and on
        demand.
    rows_on_demand : int
        Of these, rows fetched when the order handed them out (beyond the prediction).
    reads : int
        Reads per store-backed array (one per sorted block fetched ahead, one per batch of
        rows fetched on demand).
    refills : int
        Times the slots were given back (half of them used; for a keyed order, the next
        look-ahead's rows did not fit beside them).
    """

    rows_read: int
    rows_fetched: int
    rows_on_demand: int
    reads: int
    refills: int


#: ``madvise`` advice that makes the pages of a range present and writable in one call
#: (Linux 5.14 and later; absent from Python's mmap module before 3.13), or None.
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform == "linux" else None)


class _Mapped:
    """An array of a given shape over an anonymous private mapping: a page takes memory once
    written; :meth:`populate` makes the pages of the first rows present before a read
    writes them, :meth:`release` gives back the pages from row ``start`` on."""

    def __init__(self, shape, dtype):
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        size = max(count * dtype.itemsize, 1)
        # MAP_NORESERVE (Linux's 0x4000, absent from Python's mmap module): the mapping
        # spans the store's rows but takes memory only where written, so it must not be
        # charged against RAM + swap up front (a store larger than both would fail here)
        noreserve = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)
        flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20) | noreserve
        self._map = mmap.mmap(-1, size, flags=flags)
        self.array = np.frombuffer(self._map, dtype=dtype, count=count).reshape(shape)
        self._row_bytes = count * dtype.itemsize // max(shape[0], 1)
        self._present = 0   # bytes from the start made present by populate()

    def populate(self, stop):
        """Make the pages of rows ``0 .. stop - 1`` present (those not made so already), in
        one call: a read into fresh slots otherwise takes a page fault every 4 KiB, which
        cost as much as the read itself (the rows are written anyway, so the memory is the
        same). Nothing happens where the system lacks ``MADV_POPULATE_WRITE``."""
        end = min(-(-stop * self._row_bytes // mmap.PAGESIZE) * mmap.PAGESIZE, len(self._map))
        if _POPULATE_WRITE is None or end <= self._present:
            return
        try:
            self._map.madvise(_POPULATE_WRITE, self._present, end - self._present)
        except (OSError, ValueError):   # an older kernel: the pages fault in as written
            return
        self._present = end

    def release(self, start=0):
        begin = -(-start * self._row_bytes // mmap.PAGESIZE) * mmap.PAGESIZE
        if begin < len(self._map) and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, begin, len(self._map) - begin)
            self._present = min(self._present, begin)


def _uniforms_of_raw(bit_generator) -> bool:
    """Whether ``Generator.random()`` on this bit generator is ``(w >> 11) 2^-53`` of its
    next raw 64-bit output (PCG64, PCG64DXSM, Philox, SFC64; not MT19937), checked on a
    copy."""
    try:
        copy = type(bit_generator)()
        copy.state = bit_generator.state
        raw = copy.random_raw(8)
        copy.state = bit_generator.state
        u = np.random.Generator(copy).random(8)
    except Exception:   # a bit generator without random_raw or a settable state
        return False
    return bool(np.array_equal(u, (raw >> np.uint64(11)).astype(np.float64) * 2.0**-53))


class RowFeed:
    """The rows of one chain's store-backed arrays, fetched ahead into slots in memory
    (module notes).

    Parameters
    ----------
    sources : list of RowSource or numpy.ndarray
        The model's per-row fields (row sources, and arrays in memory beside them), N rows
        each: the order hands out slots, so every per-row field is read through them.
    rng : numpy.random.Generator
        The chain's Generator (looked at, never advanced).
    order : design._lib.rows.Order
        The chain's row order (``IndexSampler.kernel_state()``): from now on it hands out
        slots.
    dim : int
        The parameter's dimension (a proposal draws about as many outputs per step).
    window, ahead, memory : int, optional
        Positions of a decision covered by the prediction, outputs of the bit generator
        looked at per run of steps, and bytes of slots kept between refills (with a keyed
        order, 8 more bytes a slot for its row in the order's plan; default the module's
        :data:`WINDOW`, :data:`AHEAD`, :data:`MEMORY`).
    """

    def __init__(self, sources, rng, order, dim, *, window=None, ahead=None, memory=None):
        window = WINDOW if window is None else window
        ahead = AHEAD if ahead is None else ahead
        memory = MEMORY if memory is None else memory
        self.N = int(sources[0].shape[0])
        self._sources = list(sources)
        #: A keyed order's rows are known exactly (fetched row by row); otherwise slots go
        #: by blocks of FEED_BLOCK rows, and the last block's may pass row N - 1.
        self.keyed = bool(order_keyed(order))
        self.block = 1 if self.keyed else FEED_BLOCK
        padded = -(-self.N // self.block) * self.block
        row_bytes = sum(np.dtype(s.dtype).itemsize * math.prod(s.shape[1:])
                        for s in self._sources)
        if self.keyed:   # a planned slot also holds its row in the order's plan (int64)
            row_bytes += 8
        #: Slots kept between refills.
        self.capacity = int(min(padded, max(8 * int(window) + self.block,
                                            memory // max(row_bytes, 1))))
        # Slots never run out: a row has at most one slot in the order's table, so between
        # refills the table's slots are at most N; a keyed order's planned slots (at most the
        # capacity: a look-ahead refills first when they would not fit) come on top, since a
        # decision that reads past the window gets table slots for rows the plan also holds.
        # The mapping is virtual: only the slots used take memory.
        slots = padded + (self.capacity if self.keyed else 0)
        self._maps = [_Mapped((slots,) + tuple(s.shape[1:]), s.dtype) for s in self._sources]
        self.arrays = {id(s): m.array for s, m in zip(self._sources, self._maps)}
        self._fills = [_filler(s) for s in self._sources]
        self._rng, self._order = rng, order
        self.window, self.ahead = int(window), int(ahead)
        self._peek = None
        if _uniforms_of_raw(rng.bit_generator):
            self._peek = type(rng.bit_generator)()
        self._last_raw = np.empty(0, dtype=np.uint64)
        self.rows_fetched = self.rows_on_demand = self.reads = self.refills = 0
        self.dim = int(dim)
        self._steps = 0
        self._epoch0 = order_epoch(order)
        self._until = self._fetched_window = -1   # keyed: epochs fetched, and their window
        #: Steps the chain will make (None: unknown): a keyed feed fetches no further.
        self.planned = None
        self._number = register_feed(self._on_demand)
        attach_feed(order, self._number, self.block.bit_length() - 1)

    def _fill(self, blocks) -> None:
        """Give ``blocks`` (sorted, int64, without slots) slots and read their rows of every
        source into them, one read per source."""
        if blocks.shape[0] == 0:
            return
        first = give_slots(self._order, blocks)
        if self.block == 1:
            rows, slots = blocks, first
        else:
            offsets = np.arange(self.block, dtype=np.int64)
            rows = (blocks[:, None] * self.block + offsets).reshape(-1)
            slots = (first[:, None] + offsets).reshape(-1)
            inside = rows < self.N
            rows, slots = rows[inside], slots[inside]
        self._read(rows, slots)

    def _read(self, rows, slots) -> None:
        """Read the rows ``rows`` (sorted, int64) of every source into the slots ``slots``,
        one read per source."""
        stop = int(slots.max()) + 1 if slots.shape[0] else 0
        for fill, m in zip(self._fills, self._maps):
            m.populate(stop)
            fill(rows, slots, m.array)
        self.rows_fetched += rows.shape[0]
        self.reads += 1

    def _on_demand(self, rows):
        """Called by the order (from compiled code) with the rows of a batch that have no
        slot: their blocks are fetched. A keyed order's decision that read past the window
        will likely read on: the rows of as many positions again as it has read are
        fetched with them (a decision of n rows calls here about log2(n / window) times)."""
        self.rows_on_demand += rows.shape[0]
        if self.keyed:
            ahead = keyed_rows_after(self._order, max(rows_taken(self._order), WINDOW))
            rows = np.sort(np.concatenate([rows.astype(np.int64), ahead]))
            self._fill(blocks_without_slot(self._order, rows, rows))   # once each
            return
        self._fill(np.unique(rows.astype(np.int64) // self.block))

    def prefetch(self, steps=None) -> None:
        """Fetch, in one sorted read, the rows the next outputs of the chain's bit generator
        can give at positions below ``window`` (and rows ``0 .. window - 1``): ``ahead``
        outputs, or those of the next ``steps`` steps (twice the outputs per step seen so
        far) if fewer; first give every slot back if more than half of them are used (never
        when every row has room). A keyed order's rows are known: :meth:`_prefetch_keyed`."""
        if self.keyed:
            self._prefetch_keyed(steps)
            return
        if self.capacity < self._maps[0].array.shape[0] and (
                slots_given(self._order) > self.capacity // 2):
            self.refill()
        N, W = self.N, min(self._window(), self.N)
        lo, hi = [], []
        if slots_given(self._order) == 0:
            lo.append(np.zeros(1, dtype=np.int64))
            hi.append(np.full(1, W - 1, dtype=np.int64))
        if self._peek is not None:
            self._peek.state = self._rng.bit_generator.state
            count = self.ahead
            if steps is not None:
                count = min(count, int(2 * steps * self._per_step()) + 64)
            raw = self._new_outputs(self._peek.random_raw(count))
            if raw.shape[0]:
                u = (raw >> np.uint64(11)).astype(np.float64) * 2.0**-53
                i = W - 1
                first = np.minimum((u * N).astype(np.int64), N - 1)
                last = np.minimum(i + (u * (N - i)).astype(np.int64), N - 1)
                lo.append(np.maximum(first - 1, 0))
                hi.append(np.minimum(last + 1, N - 1))
        if not lo:
            return
        lo, hi = np.concatenate(lo), np.concatenate(hi)
        by = np.argsort(lo, kind="stable")
        blocks = blocks_without_slot(self._order, lo[by], hi[by])
        room = (self.capacity - slots_given(self._order)) // FEED_BLOCK
        if blocks.shape[0] > room:   # keep the slots within the capacity
            blocks = blocks[:max(room, 0)]
        self._fill(blocks)

    def _prefetch_keyed(self, steps) -> None:
        """Fetch, in one sorted read, the rows a keyed order hands out at positions below
        the window in as many of its next epochs as the capacity holds, unless those
        fetched last time cover the next ``steps`` steps (at the epochs per step seen so
        far). The rows are known exactly (:func:`~design._lib.rows.keyed_plan_rows`) and
        take slots in the order the chain reads them (:func:`~design._lib.rows.give_plan`):
        the order finds each one's slot by its position, and the chain reads its rows from
        consecutive slots. Every slot is given back first if they do not fit beside the
        slots already given."""
        W = min(self._window(), self.N)
        epoch = order_epoch(self._order)
        if rows_taken(self._order) > 0:   # the current order is done: a step restarts it
            epoch += 1
        need = epoch + 2 + (self._epochs_ahead() if steps is None
                            else int(math.ceil(1.1 * steps * self._epochs_per_step())))
        if need <= self._until and W <= self._fetched_window:
            return
        count = self._epochs_ahead()
        if self.planned is not None:   # no further than the chain's last step
            left = max(self.planned - self._steps, 1)
            count = min(count, int(math.ceil(1.1 * left * self._epochs_per_step())) + 2)
        rows = keyed_plan_rows(self._order, epoch, count, W)
        if slots_given(self._order) + rows.shape[0] > self.capacity:
            self.refill()
        first = give_plan(self._order, epoch, W, rows)
        by = sort_rows(rows, self.N)
        self._read(rows[by], by + first)
        self._until, self._fetched_window = epoch + count, W

    def _epochs_ahead(self) -> int:
        """Epochs whose rows (a window each) 90% of the capacity holds (the rest for rows
        fetched on demand): the fewer look-aheads, the cheaper each row (the reads of a
        look-ahead become a sweep of the store once its rows are dense)."""
        return max(1, int(0.9 * self.capacity) // min(self._window(), self.N) - 1)

    def _epochs_per_step(self) -> float:
        """Restarts of the order per step so far (1 before the first step)."""
        if not self._steps:
            return 1.0
        return max(order_epoch(self._order) - self._epoch0, 1) / self._steps

    def _new_outputs(self, raw):
        """The outputs of ``raw`` not looked at by the previous prefetch (which read the
        same stream from an earlier point), unless a refill came between."""
        last = self._last_raw
        self._last_raw = raw
        if last.shape[0] == 0:
            return raw
        hits = np.flatnonzero(last == raw[0])
        if hits.shape[0] == 0:
            return raw
        overlap = min(last.shape[0] - int(hits[0]), raw.shape[0])
        if not np.array_equal(last[hits[0]:hits[0] + overlap], raw[:overlap]):
            return raw
        return raw[overlap:]

    def refill(self) -> None:
        """Give every slot back (the rows are fetched again when needed), and the memory of
        the slots beyond the capacity (used only by a decision that read more rows)."""
        given = slots_given(self._order)
        clear_slots(self._order)
        if given > self.capacity:
            for m in self._maps:
                m.release(self.capacity)
        self._last_raw = np.empty(0, dtype=np.uint64)
        self._until = -1
        self.refills += 1

    def _window(self) -> int:
        """Positions covered: ``window`` before the first step, then the rows read per step
        so far rounded up to a multiple of 8, within [8, max(window, WINDOW_MAX)]."""
        if not self._steps:
            return self.window
        rows = feed_rows_seen(self._order) / self._steps
        if self.keyed:    # rows per order (a step may restart it more than once)
            rows /= self._epochs_per_step()
        return int(min(max(8, 8 * math.ceil(rows / 8)), max(self.window, WINDOW_MAX)))

    def _per_step(self) -> float:
        """Outputs of the bit generator per step: the rows handed out per step so far (the
        window before the first step) plus a proposal's and a threshold's draws."""
        rows = feed_rows_seen(self._order) / self._steps if self._steps else self.window
        return rows + self.dim + 4

    def steps_ahead(self, steps_done: int) -> int:
        """Steps to run before the next :meth:`prefetch`: about half the outputs it looks
        at."""
        self._steps = steps_done
        if self.keyed:   # the epochs that the capacity holds
            return max(1, int(self._epochs_ahead() / self._epochs_per_step()))
        return max(1, int(self.ahead / 2 / self._per_step()))

    def stats(self) -> FeedStats:
        """What the feed read so far (:class:`FeedStats`)."""
        return FeedStats(int(feed_rows_seen(self._order)), self.rows_fetched,
                         self.rows_on_demand, self.reads, self.refills)

    def close(self) -> None:
        """Hand out rows again and give back the memory."""
        detach_feed(self._order)
        unregister_feed(self._number)
        for m in self._maps:
            m.release()
        for fill in self._fills:
            getattr(fill, "close", lambda: None)()
        self.arrays = {}


#: Widest digit of :func:`sort_rows` (2**11 counts: its scatter goes to few enough places).
_DIGIT_BITS = 11


@jit
def sort_rows(rows, n_total):
    """``np.argsort(rows, kind="stable")`` for rows in ``[0, n_total)``: a least-significant
    digit radix sort, ``ceil(log2(n_total) / 11)`` passes of O(len(rows)) each (three at
    N = 10^7), carrying each row with its index; a comparison sort of the rows planned per
    look-ahead (about a million, in random order) costs several times more."""
    n = rows.shape[0]
    bits = 1
    while bits < 63 and (np.int64(1) << bits) < n_total:
        bits += 1
    passes = (bits + _DIGIT_BITS - 1) // _DIGIT_BITS
    width = (bits + passes - 1) // passes
    mask = (np.int64(1) << width) - 1
    keys, idx = rows.copy(), np.arange(n)
    keys2, idx2 = np.empty(n, dtype=rows.dtype), np.empty(n, dtype=np.int64)
    count = np.empty((np.int64(1) << width) + 1, dtype=np.int64)
    for q in range(passes):
        shift = q * width
        count[:] = 0
        for i in range(n):
            count[((keys[i] >> shift) & mask) + 1] += 1
        for k in range(1, count.shape[0]):
            count[k] += count[k - 1]
        for i in range(n):
            d = (keys[i] >> shift) & mask
            at = count[d]
            count[d] = at + 1
            keys2[at] = keys[i]
            idx2[at] = idx[i]
        keys, keys2 = keys2, keys
        idx, idx2 = idx2, idx
    return idx


def _filler(source):
    """``fill(rows, slots, out)``: ``out[slots] = source's rows`` for sorted int64 rows:
    the source's own ``read_into(rows, slots, out)`` if it has one, else ``read_rows`` (an
    uncompressed zarr array is read straight from its shard files, ``samplers.sources``)."""
    if isinstance(source, np.ndarray):   # a per-row array in memory beside a store's

        def copy_rows(rows, slots, out):
            out[slots] = source[rows]

        return copy_rows
    into = getattr(source, "read_into", None)
    if callable(into):
        return into
    direct = shard_filler(source)   # an uncompressed sharded zarr array: compiled reads
    if direct is not None:
        return direct

    def fill(rows, slots, out):
        # a keyed look-ahead may plan a row twice (two epochs): the source reads it once
        unique, back = np.unique(rows, return_inverse=True)
        out[slots] = np.asarray(source.read_rows(unique))[back]

    return fill


def chain_feed(view, test, proposal, rng, batches):
    """The :class:`RowFeed` of a chain on a store-backed model whose test and proposal read
    rows only from the chain's order (``rows_from_order(view)``), or None (the model is in
    memory, or the chain runs on the model's batch methods, which read rows with
    ``read_rows``). The feed's :attr:`RowFeed.view` is the chain's model view."""
    model = view.model
    if not getattr(model, "_store_backed", False):
        return None
    sources = _row_arrays(model)
    for part in (test, proposal):
        ask = getattr(part, "rows_from_order", None)
        if ask is None or not ask(view):
            return None
    from ._view import ModelView

    feed = RowFeed(sources, rng, batches.kernel_state(), view.dim)
    try:
        feed.view = ModelView(fed_model(view.model, feed.arrays), view.dim)
    except BaseException:
        feed.close()          # registered and attached: nothing may keep it alive
        raise
    return feed
