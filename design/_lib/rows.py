"""Sampling rows without replacement in memory and time proportional to the rows drawn.

A test that reads a random subset of the data asks for "the next k rows of a uniformly random
order" and may come back for more; at the next decision it begins a new order. Each order is
a Fisher-Yates shuffle of ``range(N)`` run lazily, one position at a time: drawing the row at
position ``i`` swaps position ``i`` with a uniform position ``j`` in ``[i, N)`` (Knuth, TAOCP
vol. 2, Algorithm 3.4.2P) and hands out what ``j`` held. Only the positions a swap has
displaced differ from the identity, so the order is stored *sparsely*: an open-addressing
hash table (linear probing, Fibonacci hashing) maps displaced positions to the rows they hold
("sparse Fisher-Yates"). Drawing ``n`` rows costs O(n) time and O(n) memory whatever N is,
and ``IndexSampler(10**9)`` allocates a few kilobytes.

When an order has drawn many rows (from N/64 to N/32 of them), it is converted to a dense
int32 permutation (4 bytes a row, O(N) time paid for by the rows already drawn) and the
shuffle goes on in place; :func:`restart_order` releases it. So an order's memory is at most
64 bytes per row drawn while sparse (the table is at most N bytes), at most 256 bytes per
row drawn once dense, and never more than 5 N bytes (while converting); N >= 2**31 stays
sparse. The rows drawn do not depend on
the representation: both consume one uniform per row, ``j = i + floor(u (N - i))``, exactly
as the persistent partial Fisher-Yates used before, so the first order of a sampler gives the
same rows as that code did.

Where the uniforms come from (``row_draws``): ``"shared"`` (default) draws them from the
chain's Generator, interleaved with its other draws; ``"keyed"`` from a counter-based stream
of the order itself (Philox4x64-10 keyed by two words drawn once from the Generator, at
counter (restart number, position); :func:`keyed_uniforms`), so the rows of every future
order are known in advance (:func:`keyed_rows_ahead`): what a chain on a store needs to fetch
exactly the rows it will read. Both give uniformly random orders; for equal seeds they give
different chains.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import objmode, types
from numba.experimental import structref

from .checks import as_generator, check_int
from .jit import jit
from .prefetch import PREFETCH_DISTANCE, prefetch_item

__all__ = ["FEED_BLOCK", "IndexSampler", "Order", "ROW_DRAWS", "attach_feed", "clear_slots",
           "detach_feed", "draw_rows", "feed_rows_seen", "give_plan", "give_slots",
           "keyed_plan_rows", "keyed_rows_ahead",
           "keyed_rows_after", "keyed_uniforms", "new_order", "order_epoch", "order_keyed", "philox4x64", "register_feed",
           "restart_order", "set_keyed",
           "row_total", "rows_taken", "blocks_without_slot", "slot_of", "slots_given",
           "take_rows", "unregister_feed"]

#: Where an order's uniforms come from (module notes).
ROW_DRAWS = ("shared", "keyed")
#: Smallest hash table (slots; a power of two).
_MIN_SLOTS = 1024
#: An order goes dense (an int32 permutation, 4 bytes a row) when its table would need more
#: than N / _DENSE_FRACTION slots (16 bytes each): the table stays below N bytes, the peak
#: while converting below 5 N bytes, and the order has read at least N / 64 rows.
_DENSE_FRACTION = 16
#: Orders of this many rows or more stay sparse (their rows do not fit an int32).
_DENSE_MAX = 2**31
#: Empty slot marker (positions are >= 0).
_EMPTY = -1
#: Fibonacci hashing multiplier, 2**64 / golden ratio (Knuth, TAOCP vol. 3, 6.4).
_FIB = np.uint64(0x9E3779B97F4A7C15)


@structref.register
class OrderType(types.StructRef):
    """numba type of :class:`Order` (fields: see :func:`new_order`)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Order(structref.StructRefProxy):
    """The state of one random order of ``range(N)``, shared by Python and compiled code.

    Fields (read them in compiled code): ``n_total`` (N), ``taken`` (rows handed out since
    the last :func:`restart_order`), ``entries`` (displaced positions in the table), ``bits``
    (log2 of the table's slots), ``table`` (slot s holds a position at ``2 s`` and the row
    there at ``2 s + 1``, one cache line for both; position ``-1`` marks an empty slot) and
    ``dense`` (an int32 permutation of all N rows once the order has been densified,
    otherwise empty); with a row feed (:func:`attach_feed`): ``feed`` (its number, 0 for
    none), ``slot_keys`` / ``slot_vals`` (a hash table from the rows in memory to their
    slots in the feed's arrays: open addressing, key -1 for an empty slot), ``slots``
    (slots given out), ``seen`` (rows handed out) and ``block_shift`` (log2 of the rows
    per slot block); ``keyed`` (uniforms from the keyed stream, not the chain's Generator),
    ``key`` (two uint64) and ``epoch`` (restarts so far); a keyed order's *plan*
    (:func:`give_plan`): ``plan_rows`` (the row at position ``p < W`` of epoch
    ``plan_epoch + e`` at ``e W + p``, in slot ``plan_first + e W + p``; ``W =
    plan_window``, 0 for no plan).
    """


structref.define_boxing(OrderType, Order)
structref.define_attributes(OrderType)

_ORDER = OrderType([("n_total", types.int64), ("taken", types.int64),
                    ("entries", types.int64), ("bits", types.int64),
                    ("table", types.int64[::1]),
                    ("dense", types.int32[::1]),
                    ("feed", types.int64), ("slot_keys", types.int64[::1]),
                    ("slot_vals", types.int64[::1]), ("slots", types.int64),
                    ("seen", types.int64), ("block_shift", types.int64),
                    ("keyed", types.boolean), ("key", types.uint64[::1]),
                    ("epoch", types.int64), ("plan_rows", types.int64[::1]),
                    ("plan_first", types.int64), ("plan_epoch", types.int64),
                    ("plan_window", types.int64)])


def _log2(slots):
    return slots.bit_length() - 1


_MIN_BITS = _log2(_MIN_SLOTS)


@jit
def new_order(n_total):
    """A fresh order of ``range(n_total)`` with an empty table of ``_MIN_SLOTS`` slots."""
    order = structref.new(_ORDER)
    order.n_total = n_total
    order.taken = 0
    order.entries = 0
    order.bits = _MIN_BITS
    order.table = np.full(2 * _MIN_SLOTS, _EMPTY, dtype=np.int64)
    order.dense = np.empty(0, dtype=np.int32)
    order.feed = 0
    order.slot_keys = np.empty(0, dtype=np.int64)
    order.slot_vals = np.empty(0, dtype=np.int64)
    order.slots = 0
    order.seen = 0
    order.block_shift = _BLOCK_SHIFT
    order.keyed = False
    order.key = np.zeros(2, dtype=np.uint64)
    order.epoch = 0
    order.plan_rows = np.empty(0, dtype=np.int64)
    order.plan_first = 0
    order.plan_epoch = 0
    order.plan_window = 0
    return order


@jit
def row_total(order):
    """N, the number of rows the order runs over."""
    return order.n_total


@jit
def rows_taken(order):
    """Rows handed out since the last :func:`restart_order`."""
    return order.taken


@jit
def _table_bytes(order):
    """Bytes held by the order's arrays (for tests and benchmarks)."""
    return 8 * order.table.shape[0] + 4 * order.dense.shape[0]


@jit
def _hash(key, bits):
    """Fibonacci hashing: the top ``bits`` bits of ``key * 2**64 / phi`` (mod 2**64)."""
    return np.int64((np.uint64(key) * _FIB) >> np.uint64(64 - bits))


@jit
def _slot(table, bits, key):
    """The slot holding ``key``, or the empty slot where it would go (linear probing)."""
    mask = (1 << bits) - 1
    s = _hash(key, bits)
    while table[2 * s] != key and table[2 * s] != _EMPTY:
        s = (s + 1) & mask
    return s


@jit
def _grow(order, bits):
    """Rehash the table into ``2**bits`` slots."""
    table = np.full(2 << bits, _EMPTY, dtype=np.int64)
    old = order.table
    for s in range(0, old.shape[0], 2):
        key = old[s]
        if key != _EMPTY:
            t = _slot(table, bits, key)
            table[2 * t] = key
            table[2 * t + 1] = old[s + 1]
    order.table, order.bits = table, bits


@jit
def _densify(order):
    """Replace the table by the full permutation it stands for (O(N), done once per order)."""
    dense = np.arange(order.n_total, dtype=np.int32)
    table = order.table
    for s in range(0, table.shape[0], 2):
        if table[s] != _EMPTY:
            dense[table[s]] = table[s + 1]
    order.dense = dense
    order.table = np.full(2 * _MIN_SLOTS, _EMPTY, dtype=np.int64)
    order.bits = _MIN_BITS
    order.entries = 0


@jit
def _reserve(order, k):
    """Make room for ``k`` more rows: keep the table at most half full, or go dense when it
    would need more than N / _DENSE_FRACTION slots."""
    if order.dense.shape[0] > 0:
        return
    need = 2 * (order.entries + k)
    bits = order.bits
    while (1 << bits) < need:
        bits += 1
    if bits == order.bits:
        return
    if order.n_total < _DENSE_MAX and (1 << bits) > order.n_total // _DENSE_FRACTION:
        _densify(order)
    else:
        _grow(order, bits)


@jit
def _target(start, t, u, n_total):
    """Position swapped with ``start + t``: ``start + t + floor(u (N - start - t))``."""
    i = start + t
    j = i + int(u * (n_total - i))
    return j if j < n_total else n_total - 1  # u within an ulp of one


@jit
def _dense_shuffle(perm, start, u, out):
    """Partial Fisher-Yates on a full permutation: for t < len(u), swap position
    ``start + t`` with the position ``_target`` picks from ``u[t]`` and copy the row it now
    holds to ``out[t]``. The targets depend only on ``u``, so the entries touched next are
    prefetched (they are cache misses in a large permutation)."""
    n_total = perm.shape[0]
    k = u.shape[0]
    for t in range(min(k, PREFETCH_DISTANCE)):
        prefetch_item(perm, _target(start, t, u[t], n_total), 0)
    for t in range(k):
        ahead = t + PREFETCH_DISTANCE
        if ahead < k:
            prefetch_item(perm, _target(start, ahead, u[ahead], n_total), 0)
        i = start + t
        j = _target(start, t, u[t], n_total)
        row = perm[j]
        perm[j] = perm[i]
        perm[i] = row
        out[t] = row


@jit
def _sparse_shuffle(order, u, out):
    """The same steps on the hash table: position p holds the row stored with it if displaced,
    else p.

    Position i is never read again once its row is handed out, so only position j is
    written (the row position i held); the table gains at most one entry per row.
    """
    n_total, start, bits = order.n_total, order.taken, order.bits
    table = order.table
    entries = order.entries
    k = u.shape[0]
    # The slots a step reads are known from u: ask for those PREFETCH_DISTANCE steps ahead
    # (a table larger than the cache makes every probe a miss otherwise).
    for t in range(min(k, PREFETCH_DISTANCE)):
        prefetch_item(table, 2 * _hash(_target(start, t, u[t], n_total), bits), 0)
        prefetch_item(table, 2 * _hash(start + t, bits), 0)
    for t in range(k):
        ahead = t + PREFETCH_DISTANCE
        if ahead < k:
            prefetch_item(table, 2 * _hash(_target(start, ahead, u[ahead], n_total), bits), 0)
            prefetch_item(table, 2 * _hash(start + ahead, bits), 0)
        i = start + t
        j = _target(start, t, u[t], n_total)
        sj = _slot(table, bits, j)
        row_j = table[2 * sj + 1] if table[2 * sj] == j else j
        if j != i:
            si = _slot(table, bits, i)
            row_i = table[2 * si + 1] if table[2 * si] == i else i
            if table[2 * sj] != j:
                table[2 * sj] = j
                entries += 1
            table[2 * sj + 1] = row_i
        out[t] = row_j
    order.entries = entries


@jit
def take_rows(order, u, out):
    """Hand out the next ``len(u)`` rows of the order into ``out``, one uniform each.

    The caller guarantees ``len(u) <= N - taken``.
    """
    k = u.shape[0]
    _reserve(order, k)
    if order.dense.shape[0] > 0:
        _dense_shuffle(order.dense, order.taken, u, out)
    else:
        _sparse_shuffle(order, u, out)
    order.taken += k
    if order.feed != 0:
        _to_slots(order, out)


@jit
def draw_rows(rng, order, u, out):
    """Draw ``len(u)`` uniforms into ``u`` and take the next rows into ``out``.

    The uniforms come from ``rng``, exactly as ``IndexSampler.take`` draws them
    (``rng.random(k)``), or, for a keyed order (``IndexSampler(row_draws="keyed")``), from
    the order's own counter-based stream (:func:`keyed_uniforms`), leaving ``rng`` alone.
    """
    if order.keyed:
        keyed_uniforms(order.key, order.epoch, order.taken, u)
    else:
        for t in range(u.shape[0]):
            u[t] = rng.random()
    take_rows(order, u, out)


# --- keyed row draws: the rows of every order known in advance ------------------------------
#
# With ``row_draws="keyed"`` the uniform of position p of the order's e-th restart (its
# *epoch*) is a fixed function of (key, e, p): word ``p % 4`` of Philox4x64-10 (Salmon et
# al. 2011, the bit generator ``numpy.random.Philox`` runs) at counter ``(p // 4, e, 0, 0)``
# and the order's 128-bit key, as ``(w >> 11) 2^-53`` like ``Generator.random``. So the rows
# of any future order are known before the chain gets there (a store's rows can be fetched
# exactly, :func:`keyed_rows_ahead`), whatever the chain's other draws do.

_PHILOX_M0 = np.uint64(0xD2E7470EE14C6C93)
_PHILOX_M1 = np.uint64(0xCA5A826395121157)
_PHILOX_W0 = np.uint64(0x9E3779B97F4A7C15)
_PHILOX_W1 = np.uint64(0xBB67AE8584CAA73B)
_LOW32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_U11 = np.uint64(11)
_U0 = np.uint64(0)


@jit
def _mulhilo(a, b):
    """The high and low 64-bit words of the 128-bit product ``a * b``."""
    a0, a1 = a & _LOW32, a >> _U32
    b0, b1 = b & _LOW32, b >> _U32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _U32) + (p01 & _LOW32) + (p10 & _LOW32)
    return p11 + (p01 >> _U32) + (p10 >> _U32) + (mid >> _U32), a * b


@jit
def philox4x64(c0, c1, c2, c3, k0, k1):
    """Philox4x64-10 of the counter ``(c0, c1, c2, c3)`` under the key ``(k0, k1)`` (four
    uint64 words; Random123's ``philox4x64_R(10, ...)``)."""
    for r in range(10):
        if r > 0:
            k0 = k0 + _PHILOX_W0
            k1 = k1 + _PHILOX_W1
        hi0, lo0 = _mulhilo(_PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(_PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


@jit
def keyed_uniforms(key, epoch, start, u):
    """``u[t]``: the uniform of position ``start + t`` of order ``epoch`` under ``key``
    (two uint64): word ``p % 4`` of ``philox4x64((p // 4, epoch, 0, 0), key)`` for
    ``p = start + t``, as ``(w >> 11) 2^-53``."""
    n = u.shape[0]
    e = np.uint64(epoch)
    t = 0
    while t < n:
        p = start + t
        w = philox4x64(np.uint64(p >> 2), e, _U0, _U0, key[0], key[1])
        for q in range(p & 3, 4):
            if t < n:
                u[t] = np.float64(w[q] >> _U11) * (1.0 / 9007199254740992.0)
                t += 1


@jit
def keyed_rows_ahead(order, first_epoch, n_epochs, window):
    """The rows a keyed order hands out at positions ``0 .. window - 1`` of its epochs
    ``first_epoch .. first_epoch + n_epochs - 1`` (the targets of their swaps), followed by
    the rows ``0 .. window - 1`` (a swap's displaced row comes from an earlier position):
    a superset of the rows those positions give, unsorted, with repeats."""
    N = order.n_total
    W = min(window, N)
    out = np.empty((n_epochs + 1) * W, dtype=np.int64)
    u = np.empty(W)
    m = 0
    for e in range(first_epoch, first_epoch + n_epochs):
        keyed_uniforms(order.key, e, 0, u)
        for t in range(W):
            out[m] = _target(0, t, u[t], N)
            m += 1
    for t in range(W):
        out[m] = t
        m += 1
    return out


@jit
def keyed_rows_after(order, count):
    """The rows a keyed order can hand out at its next ``count`` positions (from
    ``taken``): their swaps' targets, then the rows ``0 .. taken + count - 1`` (a displaced
    row comes from an earlier position); unsorted, with repeats."""
    N, start = order.n_total, order.taken
    count = min(count, N - start)
    u = np.empty(max(count, 0))
    keyed_uniforms(order.key, order.epoch, start, u)
    out = np.empty(2 * u.shape[0] + start, dtype=np.int64)
    for t in range(u.shape[0]):
        out[t] = _target(start, t, u[t], N)
    for t in range(u.shape[0] + start):
        out[u.shape[0] + t] = t
    return out


@jit
def set_keyed(order, key):
    """Make ``order`` draw its uniforms from its keyed stream under ``key`` (two uint64)."""
    order.keyed = True
    order.key = key.copy()


@jit
def order_keyed(order):
    """Whether the order draws its uniforms from its keyed stream."""
    return order.keyed


@jit
def order_epoch(order):
    """The order's number of restarts (its epoch: the keyed stream it draws from)."""
    return order.epoch


@jit
def _take_keyed(order, u, out):
    keyed_uniforms(order.key, order.epoch, order.taken, u)
    take_rows(order, u, out)


# --- row feeds: rows that live in a store, brought into memory before they are read --------
#
# A chain whose rows live in a store (zarr, HDF5, ...) reads them from arrays in memory that
# hold the rows fetched so far, each in a slot (samplers' chain feed), by blocks of
# FEED_BLOCK consecutive rows in consecutive slots. The order hands out the slots of its
# rows instead of the rows themselves: the kernels index those arrays with them, exactly as
# they index the data with rows. A row without a slot is fetched at once, in compiled code,
# by calling back into Python (numba's object mode) the feed that :func:`attach_feed`
# registered, which gives its block slots (:func:`give_slots`). The rows drawn never depend
# on this: a feed only decides where the data are read from.

#: Row feeds by number: ``fetch(rows)`` gives the rows slots and fills them.
_FEEDS = {}
_NEXT_FEED = [0]
_FEEDS_LOCK = threading.Lock()


def register_feed(fetch) -> int:
    """Register ``fetch(rows)`` (called with an int64 array of distinct rows without a slot;
    it must give their blocks slots, :func:`give_slots`, and fill them) and return its
    number for :func:`attach_feed`."""
    with _FEEDS_LOCK:            # chains started together on threads get distinct numbers
        _NEXT_FEED[0] += 1
        number = _NEXT_FEED[0]
        _FEEDS[number] = fetch
    return number


def unregister_feed(number) -> None:
    """Forget feed ``number`` (after :func:`detach_feed` on every order that used it)."""
    _FEEDS.pop(number, None)


def _call_feed(number, rows):
    _FEEDS[number](rows)


@jit(nogil=False)
def _fetch_missing(number, rows):
    """Call feed ``number`` from compiled code (object mode holds the GIL)."""
    with objmode():
        _call_feed(number, rows)


#: Rows per block of a feed: a row's slot is its block's first slot plus its place in the
#: block, so the hash table and the fetches work by blocks of consecutive rows.
FEED_BLOCK = 8
_BLOCK_SHIFT = 3


@jit
def slot_of(order, row):
    """The slot of ``row`` in the order's feed, or -1."""
    keys = order.slot_keys
    bits = _log2_len(keys)
    mask = keys.shape[0] - 1
    shift = order.block_shift
    block = row >> shift
    s = _hash(block, bits)
    while keys[s] != _EMPTY:
        if keys[s] == block:
            return order.slot_vals[s] + (row & ((1 << shift) - 1))
        s = (s + 1) & mask
    return -1


@jit
def _log2_len(keys):
    n, bits = keys.shape[0], 0
    while (1 << bits) < n:
        bits += 1
    return bits


@jit
def _insert(keys, vals, key, value):
    bits = _log2_len(keys)
    mask = keys.shape[0] - 1
    s = _hash(key, bits)
    while keys[s] != _EMPTY:
        s = (s + 1) & mask
    keys[s] = key
    vals[s] = value


@jit
def give_slots(order, blocks):
    """Give the distinct blocks ``blocks`` (of :data:`FEED_BLOCK` rows; none with slots)
    the next slots, in order, and return the first slot of each; the table doubles while it
    would be more than half full."""
    keys = order.slot_keys
    shift = order.block_shift
    need = 2 * ((order.slots >> shift) + blocks.shape[0])
    if need > keys.shape[0]:
        size = max(keys.shape[0], _MIN_SLOTS)
        while size < need:
            size *= 2
        new_keys = np.full(size, _EMPTY, dtype=np.int64)
        new_vals = np.empty(size, dtype=np.int64)
        for s in range(keys.shape[0]):
            if keys[s] != _EMPTY:
                _insert(new_keys, new_vals, keys[s], order.slot_vals[s])
        order.slot_keys, order.slot_vals = new_keys, new_vals
    out = np.empty(blocks.shape[0], dtype=np.int64)
    for t in range(blocks.shape[0]):
        out[t] = order.slots
        _insert(order.slot_keys, order.slot_vals, blocks[t], order.slots)
        order.slots += 1 << shift
    return out


@jit
def blocks_without_slot(order, lo, hi):
    """The blocks of :data:`FEED_BLOCK` rows meeting the row ranges ``[lo[k], hi[k]]``
    (sorted by ``lo``) that have no slots, in increasing order and each once."""
    shift = order.block_shift
    total = 0
    for k in range(lo.shape[0]):
        total += (hi[k] >> shift) - (lo[k] >> shift) + 1
    out = np.empty(total, dtype=np.int64)
    m = 0
    last = -1
    for k in range(lo.shape[0]):
        for b in range(max(lo[k] >> shift, last + 1), (hi[k] >> shift) + 1):
            if slot_of(order, b << shift) < 0:
                out[m] = b
                m += 1
            last = b
    return out[:m]


@jit
def keyed_plan_rows(order, first_epoch, n_epochs, window):
    """The rows a keyed order hands out at positions ``0 .. W - 1`` (``W = min(window,
    N)``) of its epochs ``first_epoch .. first_epoch + n_epochs - 1``, exactly and in the
    order handed out: ``W`` per epoch, the row of position p of epoch ``first_epoch + e``
    at ``e W + p``. The first W steps of each epoch's shuffle are run on a table of at most
    W displaced positions (the steps of :func:`_sparse_shuffle`, O(W^2) per epoch)."""
    N = order.n_total
    W = min(window, N)
    out = np.empty(n_epochs * W, dtype=np.int64)
    u = np.empty(W)
    keys = np.empty(W, dtype=np.int64)
    vals = np.empty(W, dtype=np.int64)
    for e in range(n_epochs):
        keyed_uniforms(order.key, first_epoch + e, 0, u)
        m = 0
        for t in range(W):
            j = _target(0, t, u[t], N)
            row_j, row_t, at_j = j, t, -1
            for q in range(m):
                if keys[q] == j:
                    row_j, at_j = vals[q], q
                if keys[q] == t:
                    row_t = vals[q]
            if j != t:
                if at_j < 0:
                    keys[m] = j
                    at_j = m
                    m += 1
                vals[at_j] = row_t
            out[e * W + t] = row_j
    return out


@jit
def give_plan(order, first_epoch, window, rows):
    """Make ``rows`` (:func:`keyed_plan_rows` of ``first_epoch`` and ``window``) the
    order's plan: the row at position ``p < W`` of epoch ``first_epoch + e`` gets slot
    ``first + e W + p``, where ``first`` (returned) is the next free slot; the feed fills
    them. The order then finds a planned row's slot by its position, with no lookup in the
    table (:func:`_to_slots` checks that the row is the one planned). Replaces the last
    plan; slots given by the table stay."""
    W = min(window, order.n_total)
    first = order.slots
    order.plan_rows = rows
    order.plan_epoch = first_epoch
    order.plan_window = W
    order.plan_first = first
    order.slots += rows.shape[0]
    return first


@jit
def _plan_slot(order, position, row):
    """The slot the plan gives ``row`` at ``position`` of the current epoch, or -1."""
    W = order.plan_window
    e = order.epoch - order.plan_epoch
    if position >= W or e < 0:
        return -1
    at = e * W + position
    if at >= order.plan_rows.shape[0] or order.plan_rows[at] != row:
        return -1
    return order.plan_first + at


@jit
def _drop_plan(order):
    order.plan_rows = np.empty(0, dtype=np.int64)
    order.plan_window = 0


@jit
def clear_slots(order):
    """Forget every slot and the plan (the feed then refills from slot 0)."""
    order.slot_keys[:] = _EMPTY
    order.slots = 0
    _drop_plan(order)


@jit
def _to_slots(order, rows):
    """Replace each row of ``rows`` (distinct; the order's last ``len(rows)`` positions) by
    its slot: the plan's for a planned position, else the table's, fetching the rows without
    one (the feed is called with them, and fetches their blocks)."""
    order.seen += rows.shape[0]
    start = order.taken - rows.shape[0]
    slots = np.empty(rows.shape[0], dtype=np.int64)
    missing = 0
    for t in range(rows.shape[0]):
        slots[t] = _plan_slot(order, start + t, rows[t])
        if slots[t] < 0:
            slots[t] = slot_of(order, rows[t])
        if slots[t] < 0:
            missing += 1
    if missing:
        out = np.empty(missing, dtype=np.int64)
        m = 0
        for t in range(rows.shape[0]):
            if slots[t] < 0:
                out[m] = rows[t]
                m += 1
        _fetch_missing(order.feed, out)
        for t in range(rows.shape[0]):
            if slots[t] < 0:
                slots[t] = slot_of(order, rows[t])
    for t in range(rows.shape[0]):
        rows[t] = slots[t]


@jit
def attach_feed(order, number, block_shift=_BLOCK_SHIFT):
    """Hand out the slots of rows in feed ``number`` (:func:`register_feed`) instead of the
    rows, fetching rows without a slot; slots go by blocks of ``2**block_shift`` rows
    (default :data:`FEED_BLOCK`)."""
    order.block_shift = block_shift
    order.slot_keys = np.full(_MIN_SLOTS, _EMPTY, dtype=np.int64)
    order.slot_vals = np.empty(_MIN_SLOTS, dtype=np.int64)
    order.slots = 0
    order.feed = number
    order.seen = 0
    _drop_plan(order)


@jit
def detach_feed(order):
    """Hand out rows again."""
    order.feed = 0
    order.slot_keys = np.empty(0, dtype=np.int64)
    order.slot_vals = np.empty(0, dtype=np.int64)
    order.slots = 0
    _drop_plan(order)


@jit
def feed_rows_seen(order):
    """Rows the order has handed out since :func:`attach_feed`."""
    return order.seen


@jit
def slots_given(order):
    """Slots given out since the last :func:`clear_slots`."""
    return order.slots


@jit
def restart_order(order):
    """Begin a new order: clear the table in O(its size), which the last order paid for
    (it is shrunk when much larger than that order needed), and release a dense
    permutation."""
    bits = _MIN_BITS
    while (1 << bits) < 2 * order.entries:
        bits += 1
    if order.dense.shape[0] > 0:
        order.dense = np.empty(0, dtype=np.int32)
    elif order.bits > bits + 2:
        order.table = np.full(2 << bits, _EMPTY, dtype=np.int64)
        order.bits = bits
    elif order.entries > 0:
        order.table[:] = _EMPTY
    order.entries = 0
    order.taken = 0
    order.epoch += 1


class IndexSampler:
    """Next-k rows of a uniformly random without-replacement order of ``range(N)``.

    Parameters
    ----------
    N : int
        Number of rows.
    rng : None, int or numpy.random.Generator
        Source of randomness; the sampler keeps (and advances) this generator.
    row_draws : {"shared", "keyed"}, optional
        Where the uniforms that pick the rows come from: ``"shared"`` (default) from
        ``rng``, one per row; ``"keyed"`` from the order's own counter-based stream, keyed by
        two words drawn from ``rng`` here, so the rows of any later order are known in
        advance (module notes).

    Notes
    -----
    :meth:`restart` begins a fresh random order; :meth:`take` returns the next ``k`` rows of
    it (fewer when the order is exhausted). Between restarts the rows returned are distinct,
    and every ordered selection of ``n`` rows is equally likely (a Fisher-Yates shuffle run
    ``n`` steps; the integer draw ``floor(u (N - i))`` from a 53-bit uniform is biased by at
    most ``N / 2**53``). ``take(k)`` costs O(k) time and the order O(rows taken) memory,
    whatever ``N``: the shuffle is stored as a hash table of displaced positions (see the
    module notes), never as a permutation of all N rows.

    Examples
    --------
    >>> from design._lib.rows import IndexSampler
    >>> s = IndexSampler(10**9, rng=0)   # no O(N) allocation
    >>> first = s.take(4)
    >>> more = s.take(4)
    >>> len(set(first) | set(more))
    8
    >>> s.restart(); s.remaining
    1000000000
    >>> keyed = IndexSampler(10**9, rng=0, row_draws="keyed")   # rows known in advance
    >>> keyed.take(3).tolist() == IndexSampler(10**9, rng=0, row_draws="keyed").take(3).tolist()
    True
    """

    def __init__(self, N, rng=None, row_draws="shared"):
        self.N = check_int("N", N, low=1)
        if row_draws not in ROW_DRAWS:
            raise ValueError(f"row_draws must be one of {ROW_DRAWS}, got {row_draws!r}")
        self._rng = as_generator(rng)
        self._order = new_order(self.N)
        self.row_draws = row_draws
        if row_draws == "keyed":
            set_keyed(self._order, self._rng.integers(0, 2**64, size=2, dtype=np.uint64))

    @property
    def taken(self) -> int:
        """Rows handed out since the last :meth:`restart`."""
        return rows_taken(self._order)

    @property
    def remaining(self) -> int:
        """Rows of the current order not handed out yet."""
        return self.N - rows_taken(self._order)

    def restart(self) -> None:
        """Begin a new uniformly random order (O(rows taken in the last one))."""
        restart_order(self._order)

    def kernel_state(self) -> Order:
        """The order's state for compiled test loops that draw rows themselves.

        A compiled loop takes rows with :func:`draw_rows` (which consumes the Generator and
        shuffles exactly as :meth:`take` does); the state advances in place, so
        :attr:`taken` is up to date when the loop returns.
        """
        return self._order

    def take(self, k) -> np.ndarray:
        """Return the next ``min(k, remaining)`` rows of the current order as an intp array."""
        k = min(int(k), self.remaining)
        out = np.empty(max(k, 0), dtype=np.intp)
        if k > 0 and self.row_draws == "keyed":
            _take_keyed(self._order, np.empty(k), out)
        elif k > 0:
            take_rows(self._order, self._rng.random(k), out)
        return out
