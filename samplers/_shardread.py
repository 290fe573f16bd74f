"""A row feed's reads from an uncompressed sharded Zarr array, in compiled code.

A :class:`~samplers._rowfeed.RowFeed` fills its slots with sorted rows. From a Zarr array
that :func:`samplers.sources.to_zarr` wrote (uncompressed shards whose inner chunks hold the
rows' raw bytes, :class:`samplers.sources._ShardReader`) a row is ``row_bytes`` bytes at a
known offset of its shard's file. Reading them one call per row costs a system call each
(4-10 us here, more than the row's bytes), so the reads are made by a compiled loop over the
sorted rows that joins rows whose bytes lie within :data:`GAP` bytes of each other into one
``pread`` (libc's, called from numba) of at most :data:`BUFFER` bytes, and copies each row
from that buffer to its slot. Bytes between the rows are read and dropped: a gap of
:data:`GAP` bytes costs about what a call costs. Once the rows wanted are dense enough (a
feed fetching many decisions' rows ahead), the reads become a sweep of the shards in large
sequential calls. Nothing is mapped, so a process holds only the buffer and the slots.

On a platform without ``pread`` in its C library (Windows) :func:`shard_filler` returns None
and the feed reads through the source's ``read_rows``.
"""

from __future__ import annotations

import ctypes
import os
from collections import OrderedDict

import numpy as np

from numba import types

from design._lib.jit import jit

__all__ = ["BUFFER", "GAP", "shard_filler"]

#: Bytes between two rows' bytes below which one read covers both.
GAP = 1 << 14
#: Bytes of the largest single read (and of the buffer it goes to).
BUFFER = 1 << 20
#: Shard files kept open per source.
MAX_FILES = 64
#: Times a failed ``pread`` is made again before the failure is reported: a call that a
#: signal interrupts (EINTR: a profiler's timer, a resize) fails without having read
#: anything and succeeds when repeated; a real I/O error fails every time.
RETRIES = 64
_EMPTY = np.uint64(2**64 - 1)


def _has_pread() -> bool:
    """Whether the C library this process runs on has ``pread`` (POSIX; not Windows)."""
    try:
        return hasattr(ctypes.CDLL(None), "pread")
    except (OSError, TypeError):   # Windows: CDLL(None) fails
        return False


#: libc's ``pread(fd, buf, count, offset)``, linked by name when compiled (so the compiled
#: loop can be cached: no pointer of this process is baked into it).
_pread = types.ExternalFunction("pread", types.intp(types.int32, types.uintp, types.uintp,
                                                      types.int64))


@jit
def read_shard(fd, size, offsets, inner, row_bytes, local, slots, out, buf, gap, empty):
    """Copy the rows ``local`` (sorted, relative to the shard) of one shard file into
    ``out[slots]`` (rows of ``row_bytes`` bytes): runs of rows whose bytes lie within
    ``gap`` bytes of each other, within ``len(buf)`` bytes in all, are one ``pread``.
    Rows of an inner chunk never written (offset ``_EMPTY``) are listed in ``empty``.
    Returns the number listed, -1 if the file ends before a row's bytes, or -2 if a
    ``pread`` failed ``RETRIES + 1`` times running (an I/O error: its errno is not seen
    here; one interrupted by a signal, EINTR, is made again)."""
    n = local.shape[0]
    cap = buf.shape[0]
    ne = 0
    k = 0
    while k < n:
        off = offsets[local[k] // inner]
        if off == _EMPTY:
            empty[ne] = k
            ne += 1
            k += 1
            continue
        start = np.int64(off) + (local[k] % inner) * row_bytes
        end = start + row_bytes
        j = k + 1
        while j < n:
            nxt = offsets[local[j] // inner]
            if nxt == _EMPTY:
                break
            p = np.int64(nxt) + (local[j] % inner) * row_bytes
            if p < end or p - end > gap or p + row_bytes - start > cap:
                break
            end = p + row_bytes
            j += 1
        if end > size:
            return -1
        got = 0
        want = end - start
        failed = 0
        while got < want:
            r = _pread(np.int32(fd), buf.ctypes.data + np.uint64(got), np.uint64(want - got),
                       start + got)
            if r == 0:
                return -1
            if r < 0:
                failed += 1
                if failed > RETRIES:
                    return -2
                continue
            failed = 0
            got += r
        for q in range(k, j):
            p = np.int64(offsets[local[q] // inner]) + (local[q] % inner) * row_bytes - start
            s = slots[q]
            for b in range(row_bytes):
                out[s, b] = buf[p + b]
        k = j
    return ne


class _ShardFill:
    """``fill(rows, slots, out)`` of a zarr source read by :func:`read_shard` (module notes)."""

    def __init__(self, reader):
        self._reader = reader
        self._files: OrderedDict = OrderedDict()
        # one row wider than BUFFER still fits (read_shard joins rows only within the
        # buffer, but always reads a run's first row whole)
        self._buf = np.empty(max(BUFFER, int(reader.row_bytes)), dtype=np.uint8)

    def _fd(self, s, path):
        fd = self._files.get(s)
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
            self._files[s] = fd
            while len(self._files) > MAX_FILES:
                os.close(self._files.popitem(last=False)[1])
        else:
            self._files.move_to_end(s)
        return fd

    def __call__(self, rows, slots, out):
        r = self._reader
        flat = out.reshape(out.shape[0], -1).view(np.uint8)
        shards = rows // r.shard_rows
        bounds = np.flatnonzero(np.diff(shards)) + 1
        starts = np.concatenate(([0], bounds)).tolist()
        stops = np.concatenate((bounds, [rows.size])).tolist()
        empty = np.empty(rows.size, dtype=np.int64)
        for a, b in zip(starts, stops):
            s = int(shards[a])
            path, index, size = r._shard(s)
            if path is None:
                out[slots[a:b]] = r.fill
                continue
            offsets = np.ascontiguousarray(index[:, 0])
            local = rows[a:b] - s * r.shard_rows
            got = read_shard(self._fd(s, path), size, offsets, r.inner_rows, r.row_bytes,
                              local, slots[a:b], flat, self._buf, GAP, empty)
            if got == -2:
                _raise_read_error(self._fd(s, path), path, size)
            if got < 0:
                raise ValueError(f"the Zarr shard file {path!r} ends before the rows it "
                                 "indexes: the store is damaged")
            if got:
                out[slots[a:b][empty[:got]]] = r.fill

    def close(self):
        while self._files:
            os.close(self._files.popitem()[1])


def _raise_read_error(fd, path, size):
    """The ``OSError`` of a shard file whose reads keep failing: the file is read again here,
    a MiB at a time, so that the read that fails names its errno and offset (Python's
    ``os.pread`` makes an interrupted call again itself)."""
    step = 1 << 20
    for offset in range(0, max(int(size), 1), step):
        try:
            os.pread(fd, step, offset)
        except OSError as exc:
            raise OSError(exc.errno, f"reading the Zarr shard file {path!r} failed at byte "
                          f"{offset}: {exc.strerror}") from exc
    raise OSError(f"reading the Zarr shard file {path!r} failed {RETRIES + 1} times running "
                  "(pread returned -1)")


def shard_filler(source):
    """``fill(rows, slots, out)`` (``out[slots] = rows of source``, rows sorted int64) for a
    :class:`~samplers.sources.ZarrSource` read directly from its shard files, or None (another
    source, another layout, or no ``pread``). The filler has a ``close()`` for its open files.
    """
    reader = getattr(source, "_reader", None)
    if not _HAS_PREAD or reader is None or not hasattr(reader, "_shard"):
        return None
    return _ShardFill(reader)


_HAS_PREAD = _has_pread()
