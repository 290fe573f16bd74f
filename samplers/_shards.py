"""Rows of an uncompressed zarr v3 array on local disk, read straight from its chunk files.

zarr-python reads a random row through its codec pipeline: about a hundred microseconds
per chunk and a millisecond per call, against ten or twenty microseconds for a whole chain
step in memory. When the chunks are stored as raw bytes (the ``bytes`` codec alone, inside
a shard or not) and each chunk spans whole rows, row ``i`` is a run of ``row_bytes``
contiguous bytes at an offset the shard index gives, so a sorted batch of rows is read by
one compiled copy per file from a read-only memory map of it (the page cache does the I/O).
Anything else (compression, a transpose, a remote store, chunks splitting a row) is not
handled here: :func:`raw_rows` returns None and the caller reads through the array's own
``read_rows``.

The format (zarr v3 specification; the sharding codec): ``zarr.json`` holds the shape,
data type, chunk grid, chunk key encoding and codecs; a chunk's file is ``c/<i>/<j>``
(``c.<i>.<j>`` with separator ``.``); a shard file holds its inner chunks and an index of
``(offset, nbytes)`` little-endian uint64 pairs per inner chunk, at its end (or start),
followed by a crc32c checksum (4 bytes) when the index codecs include it; ``2**64 - 1``
marks a missing inner chunk (its rows hold the fill value).
"""

from __future__ import annotations

import json
import mmap
import os
import sys
from collections import OrderedDict

import numpy as np

from design._lib.jit import jit

__all__ = ["RawRows", "raw_rows"]

#: Shard files kept mapped at once (each mapping holds a file descriptor).
OPEN_FILES = 128
_MISSING = np.uint64(2**64 - 1)


@jit
def _gather(files, offsets, outer, inner, row_bytes, rows, slots, out, absent):
    """``out[slots[t]] = bytes of row rows[t]`` (uint8 rows of ``row_bytes``), from the
    mapped file of its shard (``files[shard]``) at its inner chunk's offset
    (``offsets[shard, chunk]``); ``absent[t] = True`` for a row of a missing chunk."""
    for t in range(rows.shape[0]):
        r = rows[t]
        shard = r // outer
        local = r - shard * outer
        start = offsets[shard, local // inner]
        if start < 0:
            absent[t] = True
            continue
        start += (local % inner) * row_bytes
        src = files[shard]
        dst = slots[t]
        for b in range(row_bytes):
            out[dst, b] = src[start + b]


def _map_file(path) -> np.ndarray:
    """The bytes of a file, mapped privately (never written) with its pages mapped at once
    (``MAP_POPULATE`` where the system has it: one fault per page read later would cost
    more than the file's pages in the page cache)."""
    with open(path, "rb") as f:
        flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)
        mapped = mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return np.frombuffer(mapped, dtype=np.uint8)


class RawRows:
    """Reader of rows of an uncompressed zarr v3 array in a local directory
    (:func:`raw_rows` builds it, or returns None for another layout)."""

    def __init__(self, root, meta):
        from numba import typed, types

        self.root = root
        self.shape = tuple(int(n) for n in meta["shape"])
        self.dtype = np.dtype(meta["data_type"])
        fill = meta.get("fill_value", 0)
        self._fill = np.array(0 if fill is None else fill, dtype=self.dtype)
        self.row_bytes = self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))
        enc = meta["chunk_key_encoding"]
        self._sep = enc.get("configuration", {}).get("separator", "/")
        self._outer = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
        codec = meta["codecs"][0]
        if codec["name"] == "sharding_indexed":
            conf = codec["configuration"]
            self._inner = int(conf["chunk_shape"][0])
            self._per_shard = -(-self._outer // self._inner)
            self._checksum = 4 if any(c["name"] == "crc32c" for c in conf["index_codecs"]) else 0
            self._index_at_end = conf.get("index_location", "end") == "end"
        else:
            self._inner, self._per_shard = self._outer, 0
        shards = -(-self.shape[0] // self._outer)
        #: The mapped bytes of each open shard file (empty: not open) and the offsets of its
        #: inner chunks (-1: missing chunk; -2: shard not open).
        self._files = typed.List.empty_list(types.uint8[::1])
        empty = np.empty(0, dtype=np.uint8)
        for _ in range(shards):
            self._files.append(empty)
        self._offsets = np.full((shards, max(self._per_shard, 1)), -2, dtype=np.int64)
        self._open_now = OrderedDict()

    def _key(self, shard):
        parts = ["c", str(shard)] + ["0"] * (len(self.shape) - 1)
        if self._sep == "/":
            return os.path.join(self.root, *parts)
        return os.path.join(self.root, ".".join(parts))

    def _open(self, shard, keep):
        """Map shard ``shard``'s file and read its index (closing the least recently used
        shard beyond :data:`OPEN_FILES`, except those in ``keep``)."""
        path = self._key(shard)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            self._offsets[shard] = -1   # absent: every row holds the fill value
            return
        data = _map_file(path)
        if self._per_shard:
            size = 16 * self._per_shard + self._checksum
            index = data[-size:] if self._index_at_end else data[:size]
            pairs = np.frombuffer(index[:16 * self._per_shard].tobytes(),
                                  dtype="<u8").reshape(-1, 2)
            self._offsets[shard] = np.where(pairs[:, 0] == _MISSING, -1,
                                            pairs[:, 0].astype(np.int64, copy=False))
        else:
            self._offsets[shard, 0] = 0
        self._files[shard] = data
        self._open_now[shard] = True
        while len(self._open_now) > OPEN_FILES:
            old = next(iter(self._open_now))
            if old in keep:
                break
            del self._open_now[old]
            self._files[old] = np.empty(0, dtype=np.uint8)
            self._offsets[old] = -2

    def _read(self, rows, slots, out):
        """``out[slots] = array[rows]`` (int64 arrays; ``out`` C-contiguous)."""
        shards = np.unique(rows // self._outer)
        closed = shards[self._offsets[shards, 0] == -2]
        keep = set(shards.tolist()) if closed.shape[0] else ()
        for shard in closed.tolist():
            self._open(shard, keep)
        absent = np.zeros(rows.shape[0], dtype=np.bool_)
        flat = out.reshape(out.shape[0], -1).view(np.uint8)
        _gather(self._files, self._offsets, self._outer, self._inner, self.row_bytes, rows,
                slots, flat, absent)
        if absent.any():
            out[slots[absent]] = self._fill

    def read_into(self, rows, slots, out) -> None:
        """``out[slots] = array[rows]`` for int64 ``rows`` and ``slots``; ``out`` is a
        C-contiguous array of the array's dtype and row shape (e.g. a chain feed's slots)."""
        self._read(np.ascontiguousarray(rows, dtype=np.int64),
                   np.ascontiguousarray(slots, dtype=np.int64), out)

    def read_rows(self, rows) -> np.ndarray:
        """The rows ``rows`` (any order, repeats allowed), as a new array."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        out = np.empty((rows.shape[0],) + self.shape[1:], dtype=self.dtype)
        self._read(rows, np.arange(rows.shape[0], dtype=np.int64), out)
        return out


def raw_rows(path) -> RawRows | None:
    """A :class:`RawRows` reader of the zarr v3 array in directory ``path``, or None when its
    chunks are not raw little-endian bytes spanning whole rows (then read it with zarr)."""
    try:
        with open(os.path.join(path, "zarr.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    try:
        if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
            return None
        if meta["chunk_grid"]["name"] != "regular" or meta["chunk_key_encoding"]["name"] != "default":
            return None
        if meta.get("storage_transformers"):
            return None
        shape = meta["shape"]
        outer = meta["chunk_grid"]["configuration"]["chunk_shape"]
        if list(outer[1:]) != list(shape[1:]):
            return None
        codecs = meta["codecs"]
        if len(codecs) != 1:
            return None
        codec = codecs[0]
        if codec["name"] == "sharding_indexed":
            conf = codec["configuration"]
            if list(conf["chunk_shape"][1:]) != list(shape[1:]) or not _raw(conf["codecs"]):
                return None
            index = conf.get("index_codecs", [])
            if [c["name"] for c in index] not in (["bytes"], ["bytes", "crc32c"]):
                return None
            if index[0].get("configuration", {}).get("endian", "little") != "little":
                return None
        elif not _raw(codecs):
            return None
        np.dtype(meta["data_type"])
    except (KeyError, TypeError, IndexError):
        return None
    return RawRows(path, meta)


def _raw(codecs) -> bool:
    """Whether a codec list is the ``bytes`` codec alone, in this machine's byte order."""
    if len(codecs) != 1 or codecs[0]["name"] != "bytes":
        return False
    endian = codecs[0].get("configuration", {}).get("endian", "little")
    return endian == sys.byteorder
