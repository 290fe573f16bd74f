"""``austerity convert``: a ``.npy``, ``.h5`` or ``.parquet`` file to a sharded Zarr v3 store.

Usage::

    austerity convert X.npy store.zarr --y y.npy
    austerity convert data.npy store.zarr --y-column 0          # y is column 0 of data.npy
    austerity convert data.h5 store.zarr --dataset X --y y
    austerity convert data.h5 store.zarr --dataset table --y-column 10
    austerity convert data.parquet store.zarr --y-column label [--columns a b c]
    austerity convert X.npy store.zarr --y y.npy --overwrite    # replace an existing store

The input is read by blocks (a ``.npy`` is memory-mapped, an HDF5 dataset sliced, a Parquet
file read by row groups), never loaded whole; the store holds arrays ``X`` and ``y``
(:func:`samplers.sources.write_store`: small inner chunks along the rows, sharded, with a
checksum per shard), which :func:`samplers.sources.open_store` opens for any built-in model.
The store is written beside the output and renamed into place when complete: a conversion
that fails leaves no partial store behind. Parquet nulls and non-numeric columns are refused
(naming the column, and the first null's row): there is no float for a null, and turning it
into NaN would only move the error to the model's data check; drop or fill them first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

__all__ = ["add_convert_parser", "run_convert", "convert", "ParquetSource"]


def add_convert_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``convert`` subcommand (``run=run_convert``) to an argparse subparsers object."""
    p = subparsers.add_parser(
        "convert", help="write a .npy, .h5 or .parquet file as a sharded Zarr v3 store",
        description="Convert data to a Zarr v3 store with arrays X and y, chunked along the "
                    "rows (a random row costs one small read) and sharded, with a checksum "
                    "per shard, read by blocks (never loaded whole).")
    p.add_argument("input", type=Path, help="a .npy, .h5/.hdf5 or .parquet file")
    p.add_argument("output", type=Path, help="the store to write (a directory, e.g. data.zarr)")
    p.add_argument("--dataset", metavar="NAME", help="the HDF5 dataset holding X (or X and y)")
    p.add_argument("--y", metavar="FILE_OR_NAME",
                   help="y as its own array: a .npy file (for a .npy input) or an HDF5 dataset")
    p.add_argument("--y-column", metavar="COLUMN",
                   help="y is this column of the input (an index; for Parquet, a name); X is "
                        "the other columns")
    p.add_argument("--columns", nargs="+", metavar="NAME",
                   help="Parquet: the columns of X (default: every numeric column but y)")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="type written (default: the input's if float, else float64)")
    p.add_argument("--rows-per-chunk", type=int, default=None,
                   help="rows per inner chunk (default: about 4 KiB of rows)")
    p.add_argument("--rows-per-shard", type=int, default=None,
                   help="rows per shard file (default: about 16 MiB of rows)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUTPUT if it exists (the old store is removed only once "
                        "the new one is complete)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run_convert)
    return p


def run_convert(args) -> int:
    """Run ``austerity convert``: 0 on success, 2 (a message on stderr) for a bad input."""
    t0 = time.perf_counter()
    try:
        digests = convert(args.input, args.output, dataset=args.dataset, y=args.y,
                          y_column=args.y_column, columns=args.columns, dtype=args.dtype,
                          rows_per_chunk=args.rows_per_chunk,
                          rows_per_shard=args.rows_per_shard, overwrite=args.overwrite,
                          progress=not args.quiet)
    except (ValueError, TypeError, FileNotFoundError, ImportError, OSError) as exc:
        print(f"austerity convert: {exc}", file=sys.stderr)
        return 2
    from samplers.sources import open_store

    X, y = open_store(args.output)
    print(f"wrote {args.output}: X {X.shape} {X.dtype}"
          + ("" if y is None else f", y {y.shape} {y.dtype}")
          + f" in {time.perf_counter() - t0:.1f} s")
    for key, digest in digests.items():
        print(f"checksum {key}: {digest}")
    return 0


# --- inputs as row sources ---------------------------------------------------------------------


class _Columns:
    """A row source of some columns of a 2-D source (read by blocks, the columns copied)."""

    def __init__(self, src, cols, name):
        self.src, self.cols, self.name = src, cols, name
        self.dtype = src.dtype
        self.shape = (src.shape[0],) if isinstance(cols, int) else (src.shape[0], len(cols))

    def read_range(self, start, stop):
        import numpy as np

        return np.ascontiguousarray(self.src.read_range(start, stop)[:, self.cols])

    def read_rows(self, idx):
        import numpy as np

        return np.ascontiguousarray(self.src.read_rows(idx)[:, self.cols])

    def reopen(self):
        return _Columns(self.src.reopen(), self.cols, self.name)


class ParquetSource:
    """Columns of a Parquet file as a row source (pyarrow), read by row groups.

    It holds the file open until :meth:`close` (or the end of a ``with`` block).

    Parameters
    ----------
    path : str or os.PathLike
    columns : list of str
        One column gives a 1-D source, several a 2-D one (rows x columns).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> pq.write_table(pa.table({"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}), path,
    ...                row_group_size=2)
    >>> with ParquetSource(path, ["a", "b"]) as src:
    ...     src.read_range(1, 3).tolist()
    [[2.0, 5.0], [3.0, 6.0]]
    """

    def __init__(self, path, columns, *, name=None, dtype=None):
        import numpy as np

        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from exc
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"no Parquet file at {self.path!r} (path does not exist)")
        self._file = pq.ParquetFile(self.path)
        try:
            self._open(columns, name, dtype)
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Close the file (its reads end; the cached row group is dropped)."""
        self._cache = (-1, None)
        self._file.close()

    def _open(self, columns, name, dtype):
        import numpy as np

        names = self._file.schema_arrow.names
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"the Parquet file {self.path!r} has no column(s) {missing}; it "
                             f"has {names}")
        self.columns = list(columns)
        self.name = name or ",".join(self.columns)
        meta = self._file.metadata
        self._group_rows = np.array([meta.row_group(i).num_rows
                                     for i in range(meta.num_row_groups)], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(self._group_rows)))
        n = int(self._starts[-1])
        self.shape = (n,) if len(self.columns) == 1 else (n, len(self.columns))
        self.dtype = np.dtype(np.float64 if dtype is None else dtype)
        schema = self._file.schema_arrow
        for c in self.columns:
            kind = schema.field(c).type
            if not _numeric(kind):
                raise TypeError(f"the column {c!r} of {self.path!r} holds {kind}, which cannot "
                                "be written as float rows; accepted: integer, floating-point "
                                "or boolean columns (choose the columns of X with --columns)")
        self._cache = (-1, None)
        for g in range(meta.num_row_groups):     # the footer's counts: no row is read
            group = meta.row_group(g)
            for j in range(group.num_columns):
                col = group.column(j)
                stats = col.statistics
                if (col.path_in_schema in self.columns and stats is not None
                        and stats.has_null_count and stats.null_count):
                    self._group(g)               # raises, naming the first null's row

    def _group(self, g):
        import numpy as np

        if self._cache[0] != g:
            table = self._file.read_row_group(int(g), columns=self.columns)
            for c in self.columns:
                column = table.column(c)
                if column.null_count:
                    import pyarrow.compute as pc

                    first = int(np.flatnonzero(pc.is_null(column).to_numpy(
                        zero_copy_only=False))[0])
                    raise ValueError(
                        f"the column {c!r} of {self.path!r} has {column.null_count} null(s) in "
                        f"rows [{int(self._starts[g])}, {int(self._starts[g + 1])}), the first "
                        f"at row {int(self._starts[g]) + first}: a null has no float value "
                        "(it would become NaN, which every model refuses); drop or fill "
                        "the nulls before converting (e.g. pyarrow.compute.fill_null, "
                        "pandas dropna)")
            cols = [table.column(c).to_numpy(zero_copy_only=False).astype(self.dtype)
                    for c in self.columns]
            self._cache = (g, cols[0] if len(cols) == 1 else np.column_stack(cols))
        return self._cache[1]

    def read_range(self, start, stop):
        import numpy as np

        parts = []
        g = int(np.searchsorted(self._starts, start, side="right")) - 1
        row = start
        while row < stop:
            lo = int(self._starts[g])
            block = self._group(g)
            hi = min(stop, lo + block.shape[0])
            parts.append(block[row - lo:hi - lo])
            row, g = hi, g + 1
        if not parts:
            return np.empty((0,) + self.shape[1:], dtype=self.dtype)
        return np.ascontiguousarray(np.concatenate(parts))

    def read_rows(self, idx):
        import numpy as np

        idx = np.asarray(idx, dtype=np.intp)
        out = np.empty((idx.shape[0],) + self.shape[1:], dtype=self.dtype)
        groups = np.searchsorted(self._starts, idx, side="right") - 1
        for g in np.unique(groups):
            sel = groups == g
            out[sel] = self._group(int(g))[idx[sel] - int(self._starts[g])]
        return out

    def reopen(self):
        return ParquetSource(self.path, self.columns, name=self.name, dtype=self.dtype)


def _column_index(y_column, ncols, what):
    try:
        k = int(y_column)
    except (TypeError, ValueError):
        raise ValueError(f"--y-column must be a column index for {what}, got {y_column!r}"
                         ) from None
    if not -ncols <= k < ncols:
        raise ValueError(f"--y-column must lie in [0, {ncols - 1}] for {what} with {ncols} "
                         f"columns, got {y_column}")
    return k % ncols


def _split(src, y_column, what):
    """``(X, y)`` sources: ``y`` one column of a 2-D source, ``X`` the others."""
    if len(src.shape) != 2:
        raise ValueError(f"--y-column needs a 2-D input; {what} has shape {tuple(src.shape)}")
    k = _column_index(y_column, src.shape[1], what)
    rest = [j for j in range(src.shape[1]) if j != k]
    if not rest:
        raise ValueError(f"{what} has one column: nothing is left for X after --y-column")
    return _Columns(src, rest, "X"), _Columns(src, k, "y")


def _inputs(path, *, dataset, y, y_column, columns, dtype, files):
    """The ``(X, y)`` row sources of an input file (``y`` None if there is none); a file
    they read through is entered in ``files`` (a ``contextlib.ExitStack``), which closes it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no input at {str(path)!r} (path does not exist)")
    if y is not None and y_column is not None:
        raise ValueError("give at most one of --y and --y-column")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        import numpy as np

        if dataset is not None or columns is not None:
            raise ValueError("--dataset and --columns are for .h5 and .parquet inputs")
        X = _npy(path, "X")
        if y_column is not None:
            return _split(X, y_column, str(path))
        if y is None:
            return X, None
        if Path(y).suffix.lower() != ".npy":
            raise ValueError(f"--y must be a .npy file for a .npy input, got {y!r}")
        return X, _npy(Path(y), "y")
    if suffix in (".h5", ".hdf5", ".he5"):
        import h5py

        if dataset is None:
            with h5py.File(path, "r") as f:
                names = list(f.keys())
            raise ValueError(f"an HDF5 input needs --dataset NAME (the file holds {names})")
        if columns is not None:
            raise ValueError("--columns is for Parquet inputs")
        f = files.enter_context(h5py.File(path, "r"))
        for name in (dataset, y):
            if name is not None and name not in f:
                raise ValueError(f"no dataset {name!r} in {str(path)!r}; it holds {list(f.keys())}")
        X = _h5_rows(f[dataset], "X", dtype)
        if y_column is not None:
            return _split(X, y_column, f"{path}:{dataset}")
        return X, None if y is None else _h5_rows(f[y], "y", dtype)
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        if dataset is not None or y is not None:
            raise ValueError("--dataset and --y are for .h5 and .npy inputs; for Parquet "
                             "give --y-column NAME")
        with pq.ParquetFile(path) as f:
            schema = f.schema_arrow
        numeric = [f.name for f in schema if _numeric(f.type)]
        ycol = None if y_column is None else str(y_column)
        if ycol is not None and ycol not in schema.names:
            raise ValueError(f"--y-column {ycol!r} is not a column of {str(path)!r}; it has "
                             f"{schema.names}")
        xcols = list(columns) if columns is not None else [c for c in numeric if c != ycol]
        if not xcols:
            raise ValueError(f"{str(path)!r} has no numeric column for X")
        Xs = files.enter_context(ParquetSource(path, xcols, name="X", dtype=dtype))
        if len(xcols) == 1:      # X is 2-D even with one column
            Xs = _Columns2D(Xs)
        return Xs, None if ycol is None else files.enter_context(
            ParquetSource(path, [ycol], name="y", dtype=dtype))
    raise ValueError(f"input must be a .npy, .h5/.hdf5 or .parquet file, got {str(path)!r}")


class _Columns2D:
    """A 1-D source seen as one column."""

    def __init__(self, src):
        self.src, self.name, self.dtype = src, src.name, src.dtype
        self.shape = (src.shape[0], 1)

    def read_range(self, start, stop):
        return self.src.read_range(start, stop).reshape(-1, 1)

    def read_rows(self, idx):
        return self.src.read_rows(idx).reshape(-1, 1)

    def reopen(self):
        return _Columns2D(self.src.reopen())


def _numeric(arrow_type) -> bool:
    import pyarrow.types as t

    return t.is_integer(arrow_type) or t.is_floating(arrow_type) or t.is_boolean(arrow_type)


def _npy(path, name):
    import numpy as np

    from samplers.sources import as_source

    try:
        arr = np.load(path, mmap_mode="r")
    except ValueError as exc:
        raise ValueError(f"{str(path)!r} is not a plain .npy array ({exc})") from None
    return _float_source(arr, name, None)


def _h5_rows(dataset, name, dtype):
    """An HDF5 dataset read by slices through the file :func:`convert` opened (and closes),
    cast to float if it holds integers or booleans."""
    import numpy as np

    kind = np.dtype(dataset.dtype)
    if kind.kind not in "iubf":
        raise TypeError(f"{name} (the HDF5 dataset {dataset.name!r}) must hold numbers, got "
                        f"dtype {kind}")
    if dtype is None:
        dtype = kind if kind in (np.float32, np.float64) else np.float64
    return _Cast(dataset, name, np.dtype(dtype))


def _float_source(x, name, dtype):
    """A source of ``x``, its blocks cast to float when it holds another type."""
    import numpy as np

    from samplers.sources import as_source

    if np.dtype(x.dtype) in (np.float32, np.float64):
        return as_source(x, name)
    if np.dtype(x.dtype).kind not in "iub":
        raise TypeError(f"{name} must hold numbers, got dtype {x.dtype}")
    return _Cast(x, name, np.dtype(np.float64 if dtype is None else dtype))


class _Cast:
    """Integer or boolean rows read by slices and cast to float."""

    def __init__(self, x, name, dtype):
        self.x, self.name, self.dtype = x, name, dtype
        self.shape = tuple(x.shape)

    def read_range(self, start, stop):
        import numpy as np

        return np.ascontiguousarray(self.x[start:stop], dtype=self.dtype)

    def read_rows(self, idx):
        import numpy as np

        rows, inverse = np.unique(np.asarray(idx), return_inverse=True)   # h5py: increasing
        return np.ascontiguousarray(self.x[rows], dtype=self.dtype)[inverse.ravel()]

    def reopen(self):
        return self


def convert(input, output, *, dataset=None, y=None, y_column=None, columns=None, dtype=None,
            rows_per_chunk=None, rows_per_shard=None, overwrite=False, progress=True) -> dict:
    """Write ``input`` (``.npy``, ``.h5``, ``.parquet``) as a Zarr v3 store at ``output``.

    Arguments as the command line's (see the module docstring); returns ``{"X": checksum,
    "y": checksum}`` (:func:`samplers.sources.write_store`).

    ``output`` must not exist (a store is not overwritten by mistake) unless it is an empty
    directory or ``overwrite`` is true. The store is written to a hidden sibling directory
    (``.NAME.partial-XXXX`` beside ``output``) and renamed to ``output`` once complete, so a
    conversion that fails or is interrupted leaves nothing at ``output`` (its partial
    sibling is removed), and with ``overwrite`` the old store is replaced only by a complete
    new one. A Parquet column holding nulls or a type other than numbers is refused, naming
    the column (and the first null's row) before any row is written where the file's footer
    records the null counts.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from samplers.sources import open_store
    >>> folder = tempfile.mkdtemp()
    >>> np.save(os.path.join(folder, "d.npy"), np.arange(12.0).reshape(4, 3))
    >>> sums = convert(os.path.join(folder, "d.npy"), os.path.join(folder, "d.zarr"),
    ...                y_column=2, progress=False)
    >>> X, y = open_store(os.path.join(folder, "d.zarr"))
    >>> X.read_range(0, 2).tolist(), y.read_range(0, 4).tolist()
    ([[0.0, 1.0], [3.0, 4.0]], [2.0, 5.0, 8.0, 11.0])
    >>> sorted(os.listdir(folder))                  # no partial sibling left
    ['d.npy', 'd.zarr']
    """
    import numpy as np

    from samplers.sources import write_store

    output = Path(output)
    if not isinstance(overwrite, (bool, np.bool_)):
        raise TypeError(f"overwrite must be True or False, got {overwrite!r}")
    replace = output.exists() and not (output.is_dir() and not any(output.iterdir()))
    if replace and not overwrite:
        raise ValueError(f"the output {str(output)!r} exists; give a new path, or "
                         "--overwrite (overwrite=True) to replace it")
    if replace and Path(input).resolve() == output.resolve():
        raise ValueError(f"the output {str(output)!r} is the input: give another path")
    with contextlib.ExitStack() as files:
        X, ys = _inputs(input, dataset=dataset, y=y, y_column=y_column, columns=columns,
                        dtype=dtype, files=files)
        if ys is not None and ys.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows and y {ys.shape[0]}: a store whose rows "
                             "differ between X and y cannot be written")
        output.parent.mkdir(parents=True, exist_ok=True)
        partial = output.parent / f".{output.name}.partial-{uuid.uuid4().hex[:8]}"
        try:
            digests = write_store(partial, X, ys, rows_per_chunk=rows_per_chunk,
                                  rows_per_shard=rows_per_shard, dtype=dtype,
                                  progress=progress)
            _move_into_place(partial, output)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return digests


def _move_into_place(partial: Path, output: Path) -> None:
    """Rename the complete store ``partial`` to ``output``; an old ``output`` (a store being
    overwritten, or an empty directory) is moved aside first and removed only once the new
    store is in place (put back if the rename fails)."""
    old = None
    if output.exists() or output.is_symlink():
        old = output.parent / f".{output.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(output, old)
    try:
        os.replace(partial, output)
    except BaseException:
        if old is not None:
            os.replace(old, output)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
