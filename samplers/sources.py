"""Row sources: data a model reads by rows, in memory or in a store larger than memory.

A *row source* is the one small protocol between the models and wherever the rows live
(:class:`RowSource`): ``shape`` (rows first), ``dtype``, ``name`` (for messages),
``read_range(start, stop)`` (a C-contiguous copy of rows ``start .. stop - 1``),
``read_rows(idx)`` (rows ``idx`` in the order given; the source sorts and groups them
internally), ``reopen()``, and pickling *without the data*: a store source pickles as
its path, array name, shape, dtype and checksum, and the receiving process reopens it.

:func:`as_source` turns what a user holds into a source:

========================  =====================  ==========================================
input                     source                 random rows (``read_rows``)
========================  =====================  ==========================================
numpy array               :class:`ArraySource`   fancy indexing (pickles its array)
``numpy.memmap``          :class:`MemmapSource`  fancy indexing (pickles path and offset)
Zarr v3 array             :class:`ZarrSource`    one inner chunk per row (sharded stores)
h5py dataset              :class:`H5Source`      indices sorted and deduplicated per read
``dask.array``            :class:`DaskSource`    from its ``backing=`` source, or refused
anything with the above   itself                 its own ``read_rows``
========================  =====================  ==========================================

The built-in models read numpy arrays and memmaps in place, as before; any other source
is read by blocks of rows (:meth:`samplers.models.BaseModel.row_block`) in every full-data
pass, so a pass holds a few blocks, never N rows.

:func:`to_zarr` and :func:`write_store` write a sharded Zarr v3 store (small inner chunks
along the rows, so one random row costs one small read) with a checksum per shard in the
array's attributes; :func:`open_store` opens such a store as ``(X, y)`` sources and checks
its shape and dtype against the attributes; :func:`verify` re-reads a store and compares the
checksums (the models' data checks do this in the same pass, see
:func:`read_blocks`). Zarr, h5py and dask are imported only when such an input is used.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(1000, 3))
>>> path = os.path.join(tempfile.mkdtemp(), "X.zarr")
>>> src = to_zarr(X, path, rows_per_chunk=64, rows_per_shard=256, progress=False)
>>> src.shape, src.dtype == np.float64
((1000, 3), True)
>>> bool(np.array_equal(src.read_rows(np.array([7, 2, 7])), X[[7, 2, 7]]))
True
>>> import pickle
>>> len(pickle.dumps(src)) < 2000          # a path, not the data
True
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading
import zlib
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

import numpy as np

from design._lib.progress import progress_bar

__all__ = ["RowSource", "ArraySource", "MemmapSource", "ZarrSource", "H5Source", "DaskSource",
           "as_source", "is_in_memory", "read_blocks", "task_part", "to_zarr", "write_store",
           "open_store", "verify", "ChecksumError", "CHECKSUM_ATTR"]

#: The attribute of a Zarr array that holds what :func:`to_zarr` wrote: shape, dtype and a
#: checksum per block of rows.
CHECKSUM_ATTR = "austerity"
#: Bytes of rows a full-data pass reads per block (two blocks are held: one read ahead).
BLOCK_BYTES = 16 << 20
_DIGEST = "crc32"


class ChecksumError(ValueError):
    """The rows of a store differ from the checksum written with them."""


@runtime_checkable
class RowSource(Protocol):
    """What a model needs of a data source (see the module docstring).

    Examples
    --------
    A user's store: anything with these members is accepted as is by :func:`as_source`.

    >>> import numpy as np
    >>> class Squares:
    ...     shape, dtype, name = (10,), np.dtype(np.float64), "squares"
    ...     def read_range(self, start, stop):
    ...         return np.arange(start, stop, dtype=float) ** 2
    ...     def read_rows(self, idx):
    ...         return np.asarray(idx, dtype=float) ** 2
    ...     def reopen(self):
    ...         return self
    >>> isinstance(Squares(), RowSource)
    True
    >>> as_source(Squares()).read_range(2, 4).tolist()
    [4.0, 9.0]
    """

    shape: tuple
    dtype: np.dtype
    name: str

    def read_range(self, start: int, stop: int) -> np.ndarray: ...

    def read_rows(self, idx: np.ndarray) -> np.ndarray: ...

    def reopen(self) -> "RowSource": ...


_PROTOCOL = ("shape", "dtype", "read_range", "read_rows", "reopen")


# --- helpers every source uses ------------------------------------------------------------


def _check_range(src, start, stop):
    n = src.shape[0]
    start, stop = int(start), int(stop)
    if not 0 <= start <= stop <= n:
        raise ValueError(f"rows [{start}, {stop}) are outside {src.name}'s {n} rows")
    return start, stop


def _check_idx(src, idx) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        raise TypeError(f"idx must be a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
    arr = arr.astype(np.intp, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= src.shape[0]):
        raise ValueError(f"idx must lie in [0, {src.shape[0] - 1}] for {src.name}, got values "
                         f"in [{arr.min()}, {arr.max()}]")
    return arr


def _sorted_unique(idx):
    """``(rows, inverse)``: the distinct rows in increasing order, and where each of ``idx``
    is among them (``rows[inverse] == idx``)."""
    if idx.size < 2 or bool(np.all(idx[1:] > idx[:-1])):
        return idx, None
    rows, inverse = np.unique(idx, return_inverse=True)
    return rows, inverse.ravel()


def _contiguous(rows) -> bool:
    return rows.size > 0 and int(rows[-1]) - int(rows[0]) == rows.size - 1


def _check_float(name, dtype, what):
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must hold float32 or float64 rows, got dtype {dtype} ({what}); "
                        "write a float copy, e.g. `austerity convert IN OUT.zarr --dtype "
                        "float64`")
    return dtype


class _SourceBase:
    """Shared members: ``ndim``, ``nbytes``, ``__len__``, ``__repr__``."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"{type(self).__name__} {self.name!r} is not converted to a numpy "
                        f"array implicitly ({self.shape[0]} rows may not fit in memory): read "
                        "rows with read_range(start, stop) or read_rows(idx)")

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, shape={self.shape}, dtype={self.dtype})"


# --- numpy arrays and memmaps ---------------------------------------------------------------


class ArraySource(_SourceBase):
    """An in-memory numpy array as a row source (pickles its array).

    Examples
    --------
    >>> import numpy as np
    >>> src = ArraySource(np.arange(6.0).reshape(3, 2), "X")
    >>> src.read_rows(np.array([2, 0])).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """

    def __init__(self, array: np.ndarray, name: str = "data"):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{name} must be a numpy array, got {type(array).__name__}")
        self.array, self.name = array, name
        self.shape, self.dtype = array.shape, array.dtype

    def read_range(self, start, stop) -> np.ndarray:
        start, stop = _check_range(self, start, stop)
        return np.array(self.array[start:stop], order="C", copy=True)

    def read_rows(self, idx) -> np.ndarray:
        return np.ascontiguousarray(self.array[_check_idx(self, idx)])

    def reopen(self) -> "ArraySource":
        return self

    def task_part(self, start: int, stop: int):
        """What a task of a full-data pass on another process carries to read rows [start,
        stop) (:func:`task_part`): those rows only, as a view of the array (pickled, they
        are the range's bytes, not the whole array's)."""
        start, stop = _check_range(self, start, stop)
        return self.array[start:stop]


def task_part(source, start: int, stop: int):
    """What a task on rows [start, stop) of ``source`` carries to another process.

    For :meth:`samplers.models.BaseModel.block_recipe`: an array of those rows, or a small
    picklable source whose ``read_range(start, stop)`` reads them.

    A store source is itself (it pickles as its path). Data held in this process are cut to
    the range, so each row is sent once, to the task that reads it, rather than the whole
    data to every task: an :class:`ArraySource` gives its rows; a :class:`DaskSource` its
    backing store's part, else its array cut to the range with the graph culled to the
    chunks the range needs. A user's source may define ``task_part(start, stop)``.

    Examples
    --------
    >>> import pickle
    >>> import numpy as np
    >>> src = ArraySource(np.zeros((100_000, 4)), "X")
    >>> len(pickle.dumps(src)) > 3_000_000, len(pickle.dumps(task_part(src, 0, 1000))) < 33_000
    (True, True)
    """
    part = getattr(source, "task_part", None)
    return source if part is None else part(start, stop)


class _RowsFrom:
    """Rows ``first ..`` of a larger source: ``read_range(start, stop)`` reads rows ``start -
    first .. stop - first - 1`` of ``source`` (a :class:`DaskSource` cut to a task's range)."""

    def __init__(self, source, first: int):
        self.source, self.first = source, int(first)
        self.name, self.dtype = source.name, source.dtype
        self.shape = (self.first + source.shape[0],) + tuple(source.shape[1:])

    def read_range(self, start, stop) -> np.ndarray:
        return self.source.read_range(int(start) - self.first, int(stop) - self.first)

    def read_rows(self, idx) -> np.ndarray:
        return self.source.read_rows(np.asarray(idx) - self.first)

    def reopen(self) -> "_RowsFrom":
        return _RowsFrom(self.source.reopen(), self.first)


def memmap_spec(arr: np.ndarray):
    """Describe an array that lives in a memory-mapped file (its file, byte offset, dtype,
    shape and strides), or return None for an array in memory."""
    base = arr
    while base is not None and not isinstance(base, mmap.mmap):
        if isinstance(base, np.memmap) and isinstance(getattr(base, "_mmap", None), mmap.mmap):
            mm = base._mmap
            filename = base.filename
            break
        base = getattr(base, "base", None)
    else:
        return None
    if filename is None:
        return None
    map_start = np.frombuffer(mm, dtype=np.uint8).ctypes.data
    # np.memmap maps from the allocation-granularity boundary below its offset.
    file_start = base.offset - base.offset % mmap.ALLOCATIONGRANULARITY
    byte_offset = file_start + (arr.ctypes.data - map_start)
    return {
        "filename": filename,
        "dtype": arr.dtype.str,
        "shape": arr.shape,
        "strides": arr.strides,
        "byte_offset": int(byte_offset),
    }


def open_memmap_spec(spec) -> np.ndarray:
    """Re-open, read-only, an array described by :func:`memmap_spec`."""
    dtype = np.dtype(spec["dtype"])
    shape, strides = tuple(spec["shape"]), tuple(spec["strides"])
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides)) if all(shape) else 1
    raw = np.memmap(spec["filename"], dtype=np.uint8, mode="r", offset=spec["byte_offset"],
                    shape=(span + dtype.itemsize - 1,))
    return np.ndarray(shape, dtype=dtype, buffer=raw, offset=0, strides=strides)


class MemmapSource(ArraySource):
    """A memory-mapped array (``np.memmap`` or ``np.load(..., mmap_mode='r')``): read in
    place, pickled as its file, byte offset, dtype, shape and strides.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> np.save(path, np.arange(5.0))
    >>> src = as_source(np.load(path, mmap_mode="r"), "x")
    >>> type(src).__name__, src.read_range(1, 3).tolist()
    ('MemmapSource', [1.0, 2.0])
    """

    def __init__(self, array: np.ndarray, name: str = "data"):
        spec = memmap_spec(array)
        if spec is None:
            raise TypeError(f"{name} is not backed by a memory-mapped file; use ArraySource")
        super().__init__(array, name)
        self.spec = spec

    @property
    def path(self) -> str:
        return self.spec["filename"]

    def reopen(self) -> "MemmapSource":
        return MemmapSource(open_memmap_spec(self.spec), self.name)

    def task_part(self, start: int, stop: int) -> "MemmapSource":
        """Itself: it pickles as its file, offset and shape (:func:`task_part`)."""
        return self

    def __getstate__(self):
        return {"spec": self.spec, "name": self.name}

    def __setstate__(self, state):
        self.__init__(open_memmap_spec(state["spec"]), state["name"])


# --- Zarr v3 ---------------------------------------------------------------------------------


def _import_zarr():
    try:
        import zarr
    except ImportError as exc:   # pragma: no cover - zarr is in the [distributed] extra
        raise ImportError("Zarr stores need zarr >= 3: pip install 'austerity[distributed]'"
                          ) from exc
    return zarr


#: Flags of a shard file opened for reading (binary on Windows: no newline translation).
_O_READ = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def _read_at(fd: int, buf: np.ndarray, pos: int) -> int:
    """Read ``buf.shape[0]`` bytes of the file ``fd`` from byte ``pos`` into ``buf`` (a
    writable contiguous 1-D uint8 array); return the bytes read, fewer only where the file
    ends.

    One call of ``os.preadv`` (or ``read``) may return fewer bytes than asked without
    reaching the end of the file: Linux returns at most 0x7ffff000 bytes per call, so a
    read of 2 GiB or more is always short, and a network file system may stop earlier. The
    reads are repeated from where the last one stopped until ``buf`` is full or a read
    returns nothing (the end of the file). Where ``os.preadv`` does not exist (Windows,
    some platforms) ``os.pread`` reads a copy of the bytes; where neither does, the file
    offset is moved with ``os.lseek`` (each reader opens its own descriptor, so no other
    thread moves it).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "b.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(range(10)))
    >>> fd = os.open(path, _O_READ)
    >>> buf = np.zeros(4, dtype=np.uint8)
    >>> _read_at(fd, buf, 7), buf.tolist()      # three bytes left in the file
    (3, [7, 8, 9, 0])
    >>> os.close(fd)
    """
    n, done = buf.shape[0], 0
    preadv, pread = getattr(os, "preadv", None), getattr(os, "pread", None)
    while done < n:
        part = buf[done:]
        if preadv is not None:
            got = preadv(fd, [part], pos + done)
        else:
            if pread is not None:
                data = pread(fd, part.shape[0], pos + done)
            else:
                os.lseek(fd, pos + done, os.SEEK_SET)
                data = os.read(fd, part.shape[0])
            got = len(data)
            part[:got] = np.frombuffer(data, dtype=np.uint8)
        if got <= 0:
            break
        done += got
    return done


class _ShardReader:
    """Direct reads of an uncompressed sharded Zarr v3 array on a local disk.

    Each shard is a file of inner chunks followed by an index of (offset, nbytes) per inner
    chunk; with the ``bytes`` codec alone an inner chunk is the rows' raw little-endian
    bytes. A row is then one small read (:func:`_read_at` into the caller's array) at ``offset
    + (row % inner) * row_bytes`` in its shard's file, instead of a trip through Zarr's
    codec pipeline (hundreds of microseconds per call); the indexes of the last
    :attr:`MAX_OPEN` shards are kept. Built only for that exact layout
    (:meth:`for_array`); any other array is read through Zarr.
    """

    MAX_OPEN = 256
    _EMPTY = np.uint64(2**64 - 1)

    def __init__(self, root, shape, dtype, shard_rows, inner_rows, fill):
        self.root, self.shape, self.dtype = root, shape, dtype
        self.shard_rows, self.inner_rows = shard_rows, inner_rows
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        self.n_inner = shard_rows // inner_rows
        self.fill = fill
        self._open: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def for_array(cls, arr, root):
        """A reader for ``arr`` (stored under the directory ``root``), or None if its layout
        is not the one this reader knows."""
        try:
            meta = arr.metadata
            (codec,) = meta.codecs
            if type(codec).__name__ != "ShardingCodec":
                return None
            (inner,) = codec.codecs
            endian = getattr(getattr(inner, "endian", None), "value", None)
            if type(inner).__name__ != "BytesCodec" or endian not in ("little", None):
                return None
            if getattr(codec.index_location, "value", codec.index_location) != "end":
                return None
            if [type(c).__name__ for c in codec.index_codecs] != ["BytesCodec", "Crc32cCodec"]:
                return None
            enc = meta.chunk_key_encoding
            if type(enc).__name__ != "DefaultChunkKeyEncoding" or enc.separator != "/":
                return None
            shard = tuple(meta.chunk_grid.chunk_shape)
            inner_shape = tuple(codec.chunk_shape)
            if (shard[1:] != tuple(arr.shape[1:]) or inner_shape[1:] != shard[1:]
                    or shard[0] % inner_shape[0]):
                return None
            dtype = np.dtype(arr.dtype)
            if dtype.byteorder == ">":
                return None
            fill = meta.fill_value
            fill = 0.0 if fill is None else float(fill)
        except (AttributeError, ValueError, TypeError):
            return None
        return cls(root, tuple(arr.shape), dtype, shard[0], inner_shape[0], fill)

    def _shard(self, s):
        """``(path, index (n_inner, 2), file size)`` of shard s (cached), or ``(None, None,
        0)`` when the shard was never written (all fill value)."""
        with self._lock:
            hit = self._open.get(s)
            if hit is not None:
                self._open.move_to_end(s)
                return hit
        path = os.path.join(self.root, "c", str(s), *(["0"] * (len(self.shape) - 1)))
        try:
            fd = os.open(path, _O_READ)
        except FileNotFoundError:
            hit = (None, None, 0)
        else:
            try:
                size = os.fstat(fd).st_size
                need = self.n_inner * 16 + 4
                if size < need:
                    raise ValueError(f"the Zarr shard file {path!r} is {size} bytes, shorter "
                                     f"than its index ({need} bytes): the store is damaged")
                raw = np.empty(need - 4, dtype=np.uint8)
                if _read_at(fd, raw, size - need) != raw.shape[0]:
                    raise ValueError(f"the Zarr shard file {path!r} ends inside its index: "
                                     "the store is damaged")
            finally:
                os.close(fd)
            hit = (path, raw.view("<u8").reshape(self.n_inner, 2), size)
        with self._lock:
            self._open[s] = hit
            while len(self._open) > self.MAX_OPEN:
                self._open.popitem(last=False)
        return hit

    def _read_runs(self, path, size, flat, dst_starts, dst_stops, positions):
        """Read runs of whole rows from one shard file straight into ``flat``
        (:func:`_read_at`: no mapping of the file, so a pass leaves nothing of it in the
        process's memory)."""
        rb = self.row_bytes
        fd = os.open(path, _O_READ)
        try:
            for u, v, p in zip(dst_starts, dst_stops, positions):
                want = (v - u) * rb
                if p + want > size or _read_at(fd, flat[u:v].reshape(-1), p) != want:
                    raise ValueError(f"the Zarr shard file {path!r} ends before the rows it "
                                     "indexes: the store is damaged")
        finally:
            os.close(fd)

    def read_range(self, start, stop, out):
        """Fill ``out`` with rows ``start .. stop - 1``: per shard, one read of its bytes when
        its inner chunks follow each other in the file (as :func:`to_zarr` writes them),
        else one read per inner chunk (memory O(chunks), not O(rows))."""
        rb, inner = self.row_bytes, self.inner_rows
        flat = out.reshape(out.shape[0], -1).view(np.uint8).reshape(out.shape[0], rb)
        row = start
        while row < stop:
            s = row // self.shard_rows
            base = s * self.shard_rows
            hi = min(stop, base + self.shard_rows)
            path, index, size = self._shard(s)
            if path is None:
                out[row - start:hi - start] = self.fill
                row = hi
                continue
            c0, c1 = (row - base) // inner, (hi - 1 - base) // inner
            offsets = index[c0:c1 + 1, 0]
            if not np.any(offsets == self._EMPTY) and bool(np.all(np.diff(offsets) == inner * rb)):
                first = int(offsets[0]) + ((row - base) % inner) * rb
                self._read_runs(path, size, flat, [row - start], [hi - start], [first])
            else:
                us, vs, ps = [], [], []
                for c in range(c0, c1 + 1):
                    lo_r = max(row, base + c * inner)
                    hi_r = min(hi, base + (c + 1) * inner)
                    off = index[c, 0]
                    if off == self._EMPTY:
                        out[lo_r - start:hi_r - start] = self.fill
                        continue
                    us.append(lo_r - start)
                    vs.append(hi_r - start)
                    ps.append(int(off) + (lo_r - base - c * inner) * rb)
                self._read_runs(path, size, flat, us, vs, ps)
            row = hi

    def read(self, rows, out):
        """Fill ``out[k]`` with row ``rows[k]`` (``rows`` sorted increasing): per shard, one
        read per run of rows that follow each other in its file."""
        rb = self.row_bytes
        flat = out.reshape(out.shape[0], -1).view(np.uint8).reshape(out.shape[0], rb)
        shards = rows // self.shard_rows
        bounds = np.flatnonzero(np.diff(shards)) + 1
        starts = np.concatenate(([0], bounds)).tolist()
        stops = np.concatenate((bounds, [rows.size])).tolist()
        for a, b in zip(starts, stops):
            s = int(shards[a])
            path, index, size = self._shard(s)
            if path is None:
                out[a:b] = self.fill
                continue
            local = rows[a:b] - s * self.shard_rows
            chunk = local // self.inner_rows
            offsets = index[chunk, 0]
            empty = offsets == self._EMPTY
            pos = (offsets.astype(np.int64) + (local % self.inner_rows).astype(np.int64) * rb)
            if empty.any():
                out[a:b][empty] = self.fill
            breaks = np.flatnonzero((np.diff(pos) != rb) | empty[1:] | empty[:-1]) + 1
            lo = np.concatenate(([0], breaks)).tolist()
            hi = np.concatenate((breaks, [b - a])).tolist()
            keep = [k for k, u in enumerate(lo) if not empty[u]]
            self._read_runs(path, size, flat, [a + lo[k] for k in keep],
                            [a + hi[k] for k in keep], [int(pos[lo[k]]) for k in keep])


class ZarrSource(_SourceBase):
    """A Zarr v3 array (local directory store) as a row source.

    Parameters
    ----------
    path : str or os.PathLike
        The store's directory (of the array, or of a group holding it).
    array : str, optional
        The array's name inside the group at ``path`` ("" for an array at ``path``).
    name : str, optional
        For messages (default: the array's name, or the path).

    Notes
    -----
    Opening checks the shape and dtype against those :func:`to_zarr` recorded in the
    array's attributes (a store rewritten under the same name is refused). An uncompressed
    sharded array (what :func:`to_zarr` writes) is read directly from its shard files, one
    small read per row (:class:`_ShardReader`); any other layout through Zarr.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "x.zarr")
    >>> src = to_zarr(np.arange(10.0), path, rows_per_chunk=4, rows_per_shard=8, progress=False)
    >>> ZarrSource(path).read_rows(np.array([9, 0])).tolist()
    [9.0, 0.0]
    """

    def __init__(self, path, array: str = "", *, name: str | None = None, _arr=None):
        zarr = _import_zarr()
        self.path = os.fspath(path)
        self.array_name = array
        self.name = name or (array or os.path.basename(self.path.rstrip("/")) or self.path)
        if _arr is None:
            if not os.path.exists(self.path):
                raise FileNotFoundError(f"no Zarr store at {self.path!r} (path does not exist)")
            try:
                _arr = zarr.open_array(store=self.path, path=array, mode="r")
            except Exception as exc:   # zarr raises several types for a missing node
                raise ValueError(f"no Zarr v3 array {array!r} in the store {self.path!r} "
                                 f"({type(exc).__name__}: {exc})") from exc
        self._arr = _arr
        self.shape = tuple(int(n) for n in _arr.shape)
        self.dtype = _check_float(self.name, _arr.dtype, f"the Zarr array in {self.path!r}")
        self.attrs = dict(_arr.attrs.get(CHECKSUM_ATTR, {}) or {})
        if self.attrs:
            want = (tuple(self.attrs.get("shape", ())), self.attrs.get("dtype"))
            if want != (self.shape, self.dtype.str):
                raise ValueError(f"the Zarr array {self.name!r} in {self.path!r} has shape "
                                 f"{self.shape} and dtype {self.dtype.str}, but its attributes "
                                 f"record {want[0]} and {want[1]}: it was changed after it was "
                                 "written; write it again")
        self._reader = _ShardReader.for_array(_arr, os.path.join(self.path, array))

    @classmethod
    def from_array(cls, arr, name: str | None = None) -> "ZarrSource":
        """The source of an open ``zarr.Array`` on a local directory store."""
        root = getattr(arr.store, "root", None)
        if root is None:       # a local path opened through fsspec (dask.array.from_zarr)
            path = getattr(arr.store, "path", None)
            fs = getattr(arr.store, "fs", None)
            protocol = getattr(getattr(fs, "sync_fs", fs), "protocol", None)
            local = protocol in ("file", "local") or (
                isinstance(protocol, tuple) and "file" in protocol)
            if isinstance(path, str) and os.path.isdir(path) and (fs is None or local
                                                                    or protocol is None):
                root = path
        if root is None:
            raise TypeError(f"{name or 'the Zarr array'} is not on a local directory store "
                            f"({type(arr.store).__name__}); write it to a local store with "
                            "samplers.sources.to_zarr, or wrap your store in a RowSource")
        return cls(os.fspath(root), arr.path, name=name, _arr=arr)

    @property
    def checksum(self) -> str | None:
        """The total digest :func:`to_zarr` recorded (None for a store written elsewhere)."""
        return (self.attrs.get("checksum") or {}).get("digest")

    @property
    def verify_rows(self) -> int | None:
        """Rows per checksum block (None without checksums)."""
        return (self.attrs.get("checksum") or {}).get("block_rows")

    def verify_block(self, start: int, block: np.ndarray) -> None:
        """Compare rows ``start .. start + len(block) - 1`` (a whole checksum block) with
        the checksum recorded for them; :class:`ChecksumError` naming the rows if not."""
        info = self.attrs.get("checksum") or {}
        rows = info.get("block_rows")
        if not rows or start % rows:
            return
        if info.get("algorithm", _DIGEST) != _DIGEST:
            older = str(info.get("algorithm")).startswith("blake2b")   # this one's predecessor
            raise ChecksumError(
                f"{self.name!r} in {self.path!r} was written by "
                f"{'an older' if older else 'another'} version of "
                f"austerity: its checksums are {info.get('algorithm')!r}, this version writes "
                f"and checks "
                f"{_DIGEST!r}, so they cannot be compared (the rows are not known to be "
                "damaged): rewrite it with `austerity convert DATA STORE --overwrite` (or "
                "samplers.sources.write_store) from the original data")
        k = start // rows
        digests = info.get("blocks", [])
        if k >= len(digests) or block.shape[0] != min(rows, self.shape[0] - start):
            return
        if _block_digest(block) != digests[k]:
            raise ChecksumError(
                f"rows [{start}, {start + block.shape[0]}) of {self.name!r} in {self.path!r} "
                "differ from the checksum written with them: the store is corrupted (a damaged "
                "or rewritten chunk); write it again from the original data")

    def read_range(self, start, stop) -> np.ndarray:
        start, stop = _check_range(self, start, stop)
        if self._reader is not None:
            out = np.empty((stop - start,) + self.shape[1:], dtype=self.dtype)
            if stop > start:
                self._reader.read_range(start, stop, out)
            return out
        return np.ascontiguousarray(self._arr[start:stop])

    def read_rows(self, idx) -> np.ndarray:
        idx = _check_idx(self, idx)
        rows, inverse = _sorted_unique(idx)
        if _contiguous(rows):
            out = self.read_range(int(rows[0]), int(rows[-1]) + 1)
        elif self._reader is not None:
            out = np.empty((rows.size,) + self.shape[1:], dtype=self.dtype)
            if rows.size:
                self._reader.read(rows.astype(np.int64), out)
        elif _contiguous(rows):
            out = self.read_range(int(rows[0]), int(rows[-1]) + 1)
        else:
            sel = (rows,) + (slice(None),) * (len(self.shape) - 1)
            out = np.ascontiguousarray(self._arr.oindex[sel])
        return out if inverse is None else out[inverse]

    def reopen(self) -> "ZarrSource":
        return ZarrSource(self.path, self.array_name, name=self.name)

    def __getstate__(self):
        return {"path": self.path, "array": self.array_name, "name": self.name,
                "shape": self.shape, "dtype": self.dtype.str, "checksum": self.checksum}

    def __setstate__(self, state):
        self.__init__(state["path"], state["array"], name=state["name"])
        if (self.shape, self.dtype.str, self.checksum) != (
                tuple(state["shape"]), state["dtype"], state["checksum"]):
            raise ValueError(f"the Zarr array {self.name!r} in {self.path!r} changed since it "
                             f"was opened: shape {self.shape} dtype {self.dtype.str} checksum "
                             f"{self.checksum}, expected {tuple(state['shape'])} "
                             f"{state['dtype']} {state['checksum']}")


# --- HDF5 ------------------------------------------------------------------------------------


class H5Source(_SourceBase):
    """An HDF5 dataset (h5py) as a row source; random rows are read with their indices
    sorted and deduplicated (h5py needs increasing indices) and put back in the caller's
    order.

    Examples
    --------
    >>> import os, tempfile
    >>> import h5py, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("x", data=np.arange(10.0))
    >>> H5Source(path, "x").read_rows(np.array([5, 1, 5])).tolist()
    [5.0, 1.0, 5.0]
    """

    def __init__(self, path, dataset: str, *, name: str | None = None):
        try:
            import h5py
        except ImportError as exc:   # pragma: no cover - h5py is in the [distributed] extra
            raise ImportError("HDF5 datasets need h5py: pip install 'austerity[distributed]'"
                              ) from exc
        self.path, self.dataset = os.fspath(path), str(dataset)
        self.name = name or self.dataset.strip("/") or self.path
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"no HDF5 file at {self.path!r} (path does not exist)")
        self._file = h5py.File(self.path, "r")
        if self.dataset not in self._file:
            names = list(self._file.keys())
            self._file.close()
            raise ValueError(f"no dataset {self.dataset!r} in {self.path!r}; it holds {names}")
        self._ds = self._file[self.dataset]
        self.shape = tuple(int(n) for n in self._ds.shape)
        self.dtype = _check_float(self.name, self._ds.dtype, f"the HDF5 dataset in {self.path!r}")
        self._lock = threading.Lock()   # one h5py file handle: reads are serialised anyway

    def read_range(self, start, stop) -> np.ndarray:
        start, stop = _check_range(self, start, stop)
        with self._lock:
            return np.ascontiguousarray(self._ds[start:stop])

    def read_rows(self, idx) -> np.ndarray:
        idx = _check_idx(self, idx)
        rows, inverse = _sorted_unique(idx)
        with self._lock:
            if rows.size == 0:
                out = np.empty((0,) + self.shape[1:], dtype=self.dtype)
            elif _contiguous(rows):
                out = self._ds[int(rows[0]):int(rows[-1]) + 1]
            else:
                out = self._ds[rows]
        out = np.ascontiguousarray(out)
        return out if inverse is None else out[inverse]

    def reopen(self) -> "H5Source":
        return H5Source(self.path, self.dataset, name=self.name)

    def __getstate__(self):
        return {"path": self.path, "dataset": self.dataset, "name": self.name,
                "shape": self.shape, "dtype": self.dtype.str}

    def __setstate__(self, state):
        self.__init__(state["path"], state["dataset"], name=state["name"])
        if (self.shape, self.dtype.str) != (tuple(state["shape"]), state["dtype"]):
            raise ValueError(f"the HDF5 dataset {self.name!r} in {self.path!r} changed since "
                             f"it was opened: shape {self.shape} dtype {self.dtype.str}, "
                             f"expected {tuple(state['shape'])} {state['dtype']}")


# --- dask ------------------------------------------------------------------------------------


class DaskSource(_SourceBase):
    """A ``dask.array`` as a row source: ranges are computed block by block (the passes);
    random rows come from ``backing``, the store the array was loaded from.

    Parameters
    ----------
    array : dask.array.Array
        With known chunk sizes along the rows.
    backing : RowSource or array, optional
        The same rows in a store with random access. By default, the Zarr array or h5py
        dataset the dask array was loaded from unchanged (``dask.array.from_zarr``,
        ``dask.array.from_array(dataset)``), found in its graph; without one,
        :meth:`read_rows` refuses.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> x = np.arange(8.0)
    >>> src = as_source(da.from_array(x, chunks=3), "x", backing=x)
    >>> src.read_range(2, 5).tolist(), src.read_rows(np.array([7, 0])).tolist()
    ([2.0, 3.0, 4.0], [7.0, 0.0])
    """

    def __init__(self, array, name: str = "data", backing=None):
        shape = tuple(array.shape)
        if any(isinstance(n, float) and n != n for n in shape):
            raise ValueError(f"{name} is a dask array of unknown shape {shape}; call "
                             "compute_chunk_sizes() on it first")
        self.array, self.name = array, name
        self.shape = tuple(int(n) for n in shape)
        self.dtype = _check_float(name, array.dtype, "a dask array")
        self.backing = None
        if backing is None:
            backing = _loaded_from(array)
        if backing is not None:
            self.backing = as_source(backing, f"{name} (backing store)")
            if tuple(self.backing.shape) != self.shape:
                raise ValueError(f"backing must hold the same rows as {name}: shape "
                                 f"{tuple(self.backing.shape)}, expected {self.shape}")

    def read_range(self, start, stop) -> np.ndarray:
        start, stop = _check_range(self, start, stop)
        out = self.array[start:stop].compute(scheduler="synchronous")
        return np.ascontiguousarray(out, dtype=self.dtype)

    def read_rows(self, idx) -> np.ndarray:
        if self.backing is None:
            raise TypeError(
                f"{self.name} is a dask array without a backing store for random rows: a "
                "chain reads rows at random, which a dask graph cannot do cheaply. Pass the "
                f"store it was loaded from: as_source({self.name}, backing=zarr_array) (or "
                "an h5py dataset, a memmap, any RowSource), or build the model from that "
                "store directly")
        return self.backing.read_rows(idx)

    def reopen(self) -> "DaskSource":
        return self if self.backing is None else DaskSource(
            self.array, self.name, self.backing.reopen())

    def task_part(self, start: int, stop: int):
        """What a task on rows [start, stop) carries (:func:`task_part`): the
        backing store's part (a store pickles as its path), else the array cut to those rows
        with its graph culled to the chunks they need. Pickling the array itself would put
        its whole graph, and for an array made from numpy data all the data, into every
        task."""
        start, stop = _check_range(self, start, stop)
        if self.backing is not None:
            return task_part(self.backing, start, stop)
        import dask

        (cut,) = dask.optimize(self.array[start:stop])
        return _RowsFrom(DaskSource(cut, self.name), start)


def _loaded_from(array):
    """The Zarr array or h5py dataset a dask array was loaded from without any operation
    after (its graph: the store and one getter per chunk), or None."""
    try:
        layers = array.dask.layers
        graph = dict(array.__dask_graph__())
    except (AttributeError, TypeError):
        return None
    if len(layers) > 2:      # computed from the store: its rows may differ from the store's
        return None
    shape = tuple(array.shape)
    for key, value in graph.items():
        if (isinstance(key, str) and key.startswith("original-")
                and (_is_zarr_array(value) or _is_h5_dataset(value))
                and tuple(value.shape) == shape):
            try:
                return as_source(value, "backing")
            except (TypeError, ValueError, OSError):
                return None
    return None


# --- dispatch --------------------------------------------------------------------------------


def _is_zarr_array(x) -> bool:
    mod = type(x).__module__ or ""
    return mod.startswith("zarr") and hasattr(x, "store") and hasattr(x, "oindex")


def _is_h5_dataset(x) -> bool:
    mod = type(x).__module__ or ""
    return mod.startswith("h5py") and type(x).__name__ == "Dataset"


def _is_dask_array(x) -> bool:
    mod = type(x).__module__ or ""
    return mod.startswith("dask") and hasattr(x, "chunks") and hasattr(x, "compute")


def as_source(x, name: str = "data", *, backing=None):
    """Turn ``x`` into a row source (see the table in the module docstring).

    Parameters
    ----------
    x : numpy array, memmap, zarr.Array, h5py.Dataset, dask.array.Array or RowSource
    name : str
        Used in messages.
    backing : optional
        For a dask array: the store its rows can be read from at random.

    Raises
    ------
    TypeError
        For anything else (naming its type and what is accepted), or a store whose dtype is
        not float32/float64.

    Examples
    --------
    >>> import numpy as np
    >>> type(as_source(np.zeros((3, 2)), "X")).__name__
    'ArraySource'
    """
    if isinstance(x, np.ndarray):
        return MemmapSource(x, name) if memmap_spec(x) is not None else ArraySource(x, name)
    if _is_dask_array(x):
        return DaskSource(x, name, backing)
    if backing is not None:
        raise TypeError(f"backing= is for a dask array; {name} is a {type(x).__name__}")
    if _is_zarr_array(x):
        return ZarrSource.from_array(x, name)
    if _is_h5_dataset(x):
        return H5Source(x.file.filename, x.name, name=name)
    if all(hasattr(x, attr) for attr in _PROTOCOL):
        if not hasattr(x, "name"):
            raise TypeError(f"{name} has read_range/read_rows but no name attribute; give it "
                            "one (used in messages)")
        return x
    raise TypeError(
        f"{name} must be a numpy array, a numpy memmap, a Zarr v3 array, an h5py dataset, a "
        f"dask array or a RowSource (shape, dtype, name, read_range, read_rows, reopen), got "
        f"{type(x).__name__}")


def is_in_memory(x) -> bool:
    """Whether a model reads ``x`` in place with its compiled kernels (a numpy array or
    memmap) rather than by blocks through :func:`as_source`."""
    return isinstance(x, np.ndarray)


def read_blocks(source, block_rows: int | None = None, *, start: int = 0, stop: int | None = None,
                verify: bool = False, desc: str | None = None, progress=None):
    """Yield ``(start, rows)`` for consecutive blocks of a source, the next block read on a
    second thread while the caller works on this one.

    Parameters
    ----------
    source : RowSource or numpy array
    block_rows : int, optional
        Rows per block (default: :data:`BLOCK_BYTES` of rows; for a store with checksums,
        a multiple of its checksum block, so ``verify`` can check every block).
    verify : bool
        Compare each block with the checksum recorded with it (:class:`ChecksumError`).
    desc : str, optional
        A progress bar's label (shown on a terminal, see ``progress``).

    Examples
    --------
    >>> import numpy as np
    >>> [(s, b.tolist()) for s, b in read_blocks(np.arange(5.0), 2)]
    [(0, [0.0, 1.0]), (2, [2.0, 3.0]), (4, [4.0])]
    """
    src = source if not isinstance(source, np.ndarray) else ArraySource(source)
    n = src.shape[0] if stop is None else int(stop)
    vrows = getattr(src, "verify_rows", None) if verify else None
    if block_rows is None:
        row_bytes = max(1, int(np.prod(src.shape[1:], dtype=np.int64)) * np.dtype(src.dtype).itemsize)
        block_rows = max(1, BLOCK_BYTES // row_bytes)
        if vrows:
            block_rows = max(1, block_rows // vrows) * vrows
    block_rows = int(block_rows)
    starts = list(range(int(start), n, block_rows))
    if not starts:
        return
    check = bool(vrows) and block_rows % vrows == 0

    def read(s):          # on the second thread: the read, and the checksums (GIL released)
        block = src.read_range(s, min(s + block_rows, n))
        if check:
            for v in range(0, block.shape[0], vrows):
                src.verify_block(s + v, block[v:v + vrows])
        return block

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="austerity-read") as pool, \
            progress_bar(n - int(start), desc=desc or f"reading {src.name}", unit="row",
                         progress=progress if desc else False) as bar:
        ahead = pool.submit(read, starts[0])
        try:
            for k, s in enumerate(starts):
                block = ahead.result()
                if k + 1 < len(starts):
                    ahead = pool.submit(read, starts[k + 1])
                yield s, block
                bar.update(block.shape[0])
        finally:
            ahead.cancel()


# --- writing a store ---------------------------------------------------------------------------


def _block_digest(block: np.ndarray) -> str:
    """CRC-32 of a block's little-endian bytes (zlib, GIL released: about 4x faster than
    BLAKE2b here; it detects damage, not tampering)."""
    arr = np.ascontiguousarray(block)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return f"{zlib.crc32(arr.view(np.uint8).reshape(-1).data):08x}"


def _total_digest(digests) -> str:
    """The store's digest: BLAKE2b-128 of the blocks' CRCs in order."""
    h = hashlib.blake2b(digest_size=16)
    for dg in digests:
        h.update(bytes.fromhex(dg))
    return h.hexdigest()


def default_chunk_rows(row_bytes: int) -> int:
    """Rows per inner chunk: a power of two of about 4 KiB of rows (at least 16 rows, at
    most 4096), so a random row costs one small read (see :func:`to_zarr`)."""
    rows = max(16, min(4096, 4096 // max(1, row_bytes)))
    return 1 << (rows.bit_length() - 1)


def default_shard_rows(row_bytes: int, chunk_rows: int) -> int:
    """Rows per shard: a multiple of ``chunk_rows`` of about 16 MiB of rows (one file)."""
    return max(1, (16 << 20) // max(1, row_bytes) // chunk_rows) * chunk_rows


def _write_array(group_or_path, key, src, *, rows_per_chunk, rows_per_shard, dtype, bar):
    zarr = _import_zarr()
    shape = tuple(int(n) for n in src.shape)
    dtype = np.dtype(src.dtype if dtype is None else dtype)
    _check_float("dtype", dtype, "the type to write")
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    chunk = default_chunk_rows(row_bytes) if rows_per_chunk is None else int(rows_per_chunk)
    shard = (default_shard_rows(row_bytes, chunk) if rows_per_shard is None
             else int(rows_per_shard))
    if chunk < 1 or shard < chunk or shard % chunk:
        raise ValueError(f"rows_per_shard must be a positive multiple of rows_per_chunk, got "
                         f"rows_per_chunk={chunk}, rows_per_shard={shard}")
    kwargs = dict(shape=shape, dtype=dtype, chunks=(chunk,) + shape[1:],
                  shards=(shard,) + shape[1:], compressors=None, fill_value=0.0,
                  config={"write_empty_chunks": True})
    if key is None:
        arr = zarr.create_array(store=group_or_path, overwrite=True, **kwargs)
    else:
        arr = group_or_path.create_array(key, overwrite=True, **kwargs)
    digests = []
    for start in range(0, shape[0], shard):
        stop = min(start + shard, shape[0])
        block = np.ascontiguousarray(src.read_range(start, stop), dtype=dtype)
        arr[start:stop] = block
        digests.append(_block_digest(block))
        bar.update(stop - start)
    info = {"shape": list(shape), "dtype": dtype.str,
            "checksum": {"algorithm": _DIGEST, "block_rows": shard, "blocks": digests,
                         "digest": _total_digest(digests)}}
    arr.attrs[CHECKSUM_ATTR] = info
    return info


def _sourcify(x, name):
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    return as_source(x, name)


def to_zarr(source_or_array, path, *, rows_per_chunk: int | None = None,
            rows_per_shard: int | None = None, dtype=None, progress=True) -> ZarrSource:
    """Write rows to a sharded Zarr v3 array at ``path``, with a checksum per shard.

    Parameters
    ----------
    source_or_array : RowSource or array
        Read by shards (a memmap or store is never loaded whole).
    path : str or os.PathLike
        The array's directory (replaced if it exists).
    rows_per_chunk : int, optional
        Rows per inner chunk, the unit of a random read (default
        :func:`default_chunk_rows`: about 4 KiB of rows).
    rows_per_shard : int, optional
        Rows per shard file, a multiple of ``rows_per_chunk`` (default about 16 MiB).
    dtype : float32 or float64, optional
        Written type (default: the input's).
    progress : bool or None
        A progress bar (tqdm).

    Returns
    -------
    ZarrSource
        The written array, opened.

    Notes
    -----
    Uncompressed (``compressors=None``): random float rows compress little, and a random
    row is then a plain read of its bytes. Each shard's rows get a CRC-32 of their
    little-endian bytes, kept in the attribute ``"austerity"`` with the shape, dtype and a
    digest of them all (BLAKE2b-128 of the CRCs, the store's checksum);
    :func:`verify` and the models' data checks compare them.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "y.zarr")
    >>> src = to_zarr(np.ones(100), path, rows_per_chunk=16, rows_per_shard=32, progress=False)
    >>> len(src.checksum), src.verify_rows
    (32, 32)
    """
    src = _sourcify(source_or_array, "source_or_array")
    path = os.fspath(path)
    with progress_bar(src.shape[0], desc=f"writing {os.path.basename(path)}", unit="row",
                      progress=progress) as bar:
        _write_array(path, None, src, rows_per_chunk=rows_per_chunk,
                     rows_per_shard=rows_per_shard, dtype=dtype, bar=bar)
    return ZarrSource(path)


def write_store(path, X, y=None, *, rows_per_chunk: int | None = None,
                rows_per_shard: int | None = None, dtype=None, progress=True) -> dict:
    """Write ``X`` (and ``y``) as arrays ``"X"`` and ``"y"`` of one Zarr v3 group.

    What ``austerity convert`` writes; :func:`open_store` reads it back. Arguments as
    :func:`to_zarr` (``rows_per_shard`` applies to ``X``; ``y`` gets the same rows per
    shard and chunk, so a row of X and its y live in the same shard number).

    Returns
    -------
    dict
        ``{"X": digest, "y": digest}`` (the checksums written).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "d.zarr")
    >>> sums = write_store(path, np.zeros((50, 2)), np.ones(50), progress=False)
    >>> X, y = open_store(path)
    >>> X.shape, y.shape
    ((50, 2), (50,))
    """
    zarr = _import_zarr()
    Xs = _sourcify(X, "X")
    ys = None if y is None else _sourcify(y, "y")
    if ys is not None and ys.shape[0] != Xs.shape[0]:
        raise ValueError(f"y must have one row per row of X ({Xs.shape[0]}), got {ys.shape[0]}")
    if len(Xs.shape) not in (1, 2) or (ys is not None and len(ys.shape) != 1):
        raise ValueError(f"X must be 1-D or 2-D and y 1-D, got shapes {Xs.shape} and "
                         f"{None if ys is None else ys.shape}")
    dt = np.dtype(Xs.dtype if dtype is None else dtype)
    row_bytes = int(np.prod(Xs.shape[1:], dtype=np.int64)) * dt.itemsize
    chunk = default_chunk_rows(row_bytes) if rows_per_chunk is None else int(rows_per_chunk)
    shard = (default_shard_rows(row_bytes, chunk) if rows_per_shard is None
             else int(rows_per_shard))
    group = zarr.open_group(os.fspath(path), mode="w")
    total = Xs.shape[0] * (1 + (ys is not None))
    out = {}
    with progress_bar(total, desc=f"writing {os.path.basename(os.fspath(path))}", unit="row",
                      progress=progress) as bar:
        for key, src in (("X", Xs), ("y", ys)):
            if src is not None:
                out[key] = _write_array(group, key, src, rows_per_chunk=chunk,
                                        rows_per_shard=shard, dtype=dtype, bar=bar
                                        )["checksum"]["digest"]
    group.attrs[CHECKSUM_ATTR] = {"rows": Xs.shape[0], "arrays": sorted(out)}
    return out


def open_store(path):
    """The ``(X, y)`` sources of a store :func:`write_store` (``austerity convert``) wrote
    (``y`` is None if it has none).

    Checks that the path exists, that X and y have the same rows, and their shapes and
    dtypes against the attributes written with them (cheap: no row is read).

    Examples
    --------
    See :func:`write_store`.
    """
    zarr = _import_zarr()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no store at {path!r} (path does not exist)")
    try:
        group = zarr.open_group(path, mode="r")
    except Exception as exc:
        raise ValueError(f"{path!r} is not a Zarr v3 group ({type(exc).__name__}: {exc}); "
                         "write one with `austerity convert`") from exc
    names = set(group.array_keys())
    if "X" not in names:
        raise ValueError(f"the store {path!r} has no array 'X' (it holds {sorted(names)})")
    if CHECKSUM_ATTR not in group.attrs:   # written last: a write that stopped leaves none
        raise ValueError(f"the store {path!r} was not written to the end (no '{CHECKSUM_ATTR}' "
                         "attribute on its group: an interrupted write or another tool's "
                         "store); write it again with `austerity convert`")
    X = ZarrSource(path, "X", name="X")
    y = ZarrSource(path, "y", name="y") if "y" in names else None
    if y is not None and y.shape[0] != X.shape[0]:
        raise ValueError(f"the store {path!r} holds X with {X.shape[0]} rows and y with "
                         f"{y.shape[0]}: a store whose rows differ between X and y")
    return X, y


def verify(source, *, progress=None) -> str:
    """Re-read a store written by :func:`to_zarr` and compare every shard with its
    checksum; return the total digest (:class:`ChecksumError` naming the first bad rows).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> src = to_zarr(np.arange(40.0), os.path.join(tempfile.mkdtemp(), "v.zarr"),
    ...               rows_per_chunk=8, rows_per_shard=16, progress=False)
    >>> verify(src) == src.checksum
    True
    """
    src = as_source(source, "source")
    rows = getattr(src, "verify_rows", None)
    if not rows:
        raise ValueError(f"{src.name} has no checksum to verify (write it with to_zarr)")
    for _ in read_blocks(src, rows, verify=True, desc=f"verifying {src.name}",
                         progress=progress):
        pass
    return src.checksum
