"""``austerity convert``: .npy, .h5 and .parquet to a sharded Zarr v3 store, read back equal."""

import numpy as np
import pytest

from validation.workflow.cli import main

zarr = pytest.importorskip("zarr")
h5py = pytest.importorskip("h5py")
sources = pytest.importorskip("samplers.sources")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3000, 4))
Y = (RNG.random(3000) < 0.4).astype(float)


def _check(store, capsys, dtype=np.float64):
    Xs, ys = sources.open_store(store)
    assert Xs.dtype == dtype and ys.dtype == dtype
    np.testing.assert_array_equal(Xs.read_range(0, 3000), X.astype(dtype))
    np.testing.assert_array_equal(ys.read_range(0, 3000), Y.astype(dtype))
    out = capsys.readouterr().out
    assert f"checksum X: {Xs.checksum}" in out and f"checksum y: {ys.checksum}" in out
    assert sources.verify(Xs, progress=False) == Xs.checksum
    return Xs.checksum


def test_npy_round_trip(tmp_path, capsys):
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", Y)
    np.save(tmp_path / "Xy.npy", np.column_stack([X[:, :2], Y, X[:, 2:]]))
    assert main(["convert", str(tmp_path / "X.npy"), str(tmp_path / "a.zarr"), "--y",
                 str(tmp_path / "y.npy"), "--rows-per-chunk", "64", "--rows-per-shard",
                 "512", "--quiet"]) == 0
    first = _check(tmp_path / "a.zarr", capsys)
    assert main(["convert", str(tmp_path / "Xy.npy"), str(tmp_path / "b.zarr"),
                 "--y-column", "2", "--rows-per-chunk", "64", "--rows-per-shard", "512",
                 "--quiet"]) == 0
    assert _check(tmp_path / "b.zarr", capsys) == first   # the same rows and shards, the same digest
    assert main(["convert", str(tmp_path / "X.npy"), str(tmp_path / "c.zarr"), "--y",
                 str(tmp_path / "y.npy"), "--dtype", "float32", "--quiet"]) == 0
    _check(tmp_path / "c.zarr", capsys, np.float32)


def test_h5_round_trip(tmp_path, capsys):
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"], f["y"] = X, Y
        f["table"] = np.column_stack([Y.astype(np.int8), X])     # y as integers, column 0
    assert main(["convert", str(tmp_path / "d.h5"), str(tmp_path / "a.zarr"),
                 "--dataset", "X", "--y", "y", "--quiet"]) == 0
    _check(tmp_path / "a.zarr", capsys)
    assert main(["convert", str(tmp_path / "d.h5"), str(tmp_path / "b.zarr"),
                 "--dataset", "table", "--y-column", "0", "--quiet"]) == 0
    _check(tmp_path / "b.zarr", capsys)


def test_parquet_round_trip_by_row_groups(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "d": X[:, 3],
                      "label": Y.astype(np.int64), "note": ["x"] * 3000})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=700)
    assert main(["convert", str(tmp_path / "d.parquet"), str(tmp_path / "a.zarr"),
                 "--y-column", "label", "--rows-per-shard", "512", "--rows-per-chunk", "64",
                 "--quiet"]) == 0
    _check(tmp_path / "a.zarr", capsys)


def test_a_converted_store_feeds_a_model_and_detects_corruption(tmp_path, capsys):
    from samplers import LogisticRegression

    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", Y)
    assert main(["convert", str(tmp_path / "X.npy"), str(tmp_path / "s.zarr"), "--y",
                 str(tmp_path / "y.npy"), "--rows-per-chunk", "64", "--rows-per-shard",
                 "1024", "--quiet"]) == 0
    Xs, ys = sources.open_store(tmp_path / "s.zarr")
    mem, on_store = LogisticRegression(X, Y), LogisticRegression(Xs, ys)
    theta = np.array([0.1, -0.2, 0.3, 0.0])
    idx = np.array([2999, 0, 1500])
    np.testing.assert_array_equal(on_store.loglik(theta, idx), mem.loglik(theta, idx))
    shard = tmp_path / "s.zarr" / "X" / "c" / "1" / "0"          # rows [1024, 2048)
    raw = bytearray(shard.read_bytes())
    raw[100] ^= 0x01
    shard.write_bytes(bytes(raw))
    Xs, ys = sources.open_store(tmp_path / "s.zarr")
    with pytest.raises(sources.ChecksumError, match=r"rows \[1024, 2048\) of 'X'"):
        LogisticRegression(Xs, ys)


@pytest.mark.parametrize("args, message", [
    (["nope.npy", "o.zarr"], "does not exist"),
    (["d.h5", "o.zarr"], "needs --dataset NAME"),
    (["d.h5", "o.zarr", "--dataset", "Z"], "no dataset 'Z'"),
    (["X.npy", "o.zarr", "--y", "short.npy"], "rows differ between X and y"),
    (["X.npy", "o.zarr", "--y-column", "9"], "--y-column must lie in"),
    (["X.npy", "X.npy"], "exists"),
    (["d.txt", "o.zarr"], "must be a .npy, .h5"),
])
def test_bad_input(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    np.save("X.npy", X)
    np.save("short.npy", Y[:-1])
    (tmp_path / "d.txt").write_text("1 2 3")
    with h5py.File("d.h5", "w") as f:
        f["X"] = X
    assert main(["convert", *args, "--quiet"]) == 2
    assert message in capsys.readouterr().err


def _left_in(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("statistics", [True, False])
def test_parquet_nulls_are_refused_naming_the_column_and_row(tmp_path, capsys, statistics):
    """A null has no float value: refused, naming the column and the first null's row
    (from the footer's null counts before any row is written; without them, when the row
    group is read, mid-way through the write), and no store or partial store is left."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    b = pa.array([None if i in (2345, 2400) else float(i) for i in range(3000)])
    table = pa.table({"a": X[:, 0], "b": b, "label": Y})
    pq.write_table(table, tmp_path / "n.parquet", row_group_size=700,
                   write_statistics=statistics)
    assert main(["convert", str(tmp_path / "n.parquet"), str(tmp_path / "n.zarr"),
                 "--y-column", "label", "--rows-per-chunk", "64", "--rows-per-shard", "512",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the column 'b'" in err and "2 null(s) in rows [2100, 2800)" in err
    assert "the first at row 2345" in err
    assert _left_in(tmp_path) == ["n.parquet"]


@pytest.mark.parametrize("flag", ["--columns", "--y-column"])
def test_a_parquet_string_column_is_refused_naming_it_and_its_type(tmp_path, capsys, flag):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"a": X[:, 0], "note": ["x"] * 3000, "label": Y}),
                   tmp_path / "s.parquet")
    extra = ["--columns", "a", "note", "--y-column", "label"] if flag == "--columns" else [
        "--y-column", "note"]
    assert main(["convert", str(tmp_path / "s.parquet"), str(tmp_path / "s.zarr"), *extra,
                 "--quiet"]) == 2
    assert "the column 'note'" in capsys.readouterr().err
    assert _left_in(tmp_path) == ["s.parquet"]


def test_a_failed_conversion_leaves_no_partial_store_and_overwrite_replaces(tmp_path, capsys,
                                                                            monkeypatch):
    """A write that fails mid-way (here the third shard of X) leaves neither the output nor
    its partial sibling; an existing store is replaced only with --overwrite, and only by a
    complete one: a failed overwrite leaves the old store as it was."""
    from validation.workflow import convert as convert_module

    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", Y)
    args = ["convert", str(tmp_path / "X.npy"), str(tmp_path / "s.zarr"), "--y",
            str(tmp_path / "y.npy"), "--rows-per-chunk", "64", "--rows-per-shard", "512",
            "--quiet"]
    real = sources.ArraySource.read_range
    calls = []

    def failing(self, start, stop):
        calls.append(start)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(self, start, stop)

    monkeypatch.setattr(sources.ArraySource, "read_range", failing)
    assert main(args) == 2
    assert "disk full" in capsys.readouterr().err
    assert _left_in(tmp_path) == ["X.npy", "y.npy"]
    monkeypatch.setattr(sources.ArraySource, "read_range", real)
    assert main(args) == 0
    first = _check(tmp_path / "s.zarr", capsys)
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    calls.clear()
    monkeypatch.setattr(sources.ArraySource, "read_range", failing)
    assert main([*args, "--overwrite"]) == 2
    capsys.readouterr()
    monkeypatch.setattr(sources.ArraySource, "read_range", real)
    old, _ = sources.open_store(tmp_path / "s.zarr")          # the old store, untouched
    assert sources.verify(old, progress=False) == old.checksum == first
    np.save(tmp_path / "X.npy", X[::-1].copy())
    assert main([*args, "--overwrite"]) == 0
    Xs, _ = sources.open_store(tmp_path / "s.zarr")
    np.testing.assert_array_equal(Xs.read_range(0, 3000), X[::-1])
    assert _left_in(tmp_path) == ["X.npy", "s.zarr", "y.npy"]
    with pytest.raises(TypeError, match="overwrite must be True or False"):
        convert_module.convert(tmp_path / "X.npy", tmp_path / "t.zarr", overwrite="yes")


def test_the_hdf5_input_is_closed_after_a_conversion_or_an_error(tmp_path):
    """convert reads an HDF5 input through one handle, closed when it returns or raises
    (while the error is alive too): the file can then be opened for writing."""
    from validation.workflow.convert import convert

    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"], f["y"] = X, Y.astype(np.int8)
    convert(tmp_path / "d.h5", tmp_path / "a.zarr", dataset="X", y="y", progress=False)
    with h5py.File(tmp_path / "d.h5", "a") as f:
        f["Z"] = X[:10]
    with pytest.raises(ValueError, match="no dataset 'W'") as info:
        convert(tmp_path / "d.h5", tmp_path / "b.zarr", dataset="X", y="W", progress=False)
    with h5py.File(tmp_path / "d.h5", "a") as f:
        del f["Z"]
    assert info.value is not None
    Xs, ys = sources.open_store(tmp_path / "a.zarr")
    np.testing.assert_array_equal(ys.read_range(0, 3000), Y)


def _open_fds_on(path):
    """How many of this process's file descriptors point at ``path`` (Linux /proc)."""
    import os

    target, count = os.path.realpath(path), 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.path.realpath(f"/proc/self/fd/{fd}") == target
        except OSError:
            pass
    return count


def test_the_parquet_input_is_closed_after_a_conversion_or_an_error(tmp_path):
    """convert's Parquet sources are closed when it returns or raises (while the error, and
    so its frames, are alive), not when the garbage collector finds them."""
    import gc
    import os

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from validation.workflow.convert import convert

    table = pa.table({"a": X[:, 0], "b": X[:, 1], "label": Y.astype(np.int8)})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=700)
    gc.disable()
    try:
        convert(tmp_path / "d.parquet", tmp_path / "a.zarr", y_column="label", progress=False)
        assert _open_fds_on(tmp_path / "d.parquet") == 0
        with pytest.raises(ValueError, match="no column") as info:
            convert(tmp_path / "d.parquet", tmp_path / "b.zarr", y_column="label",
                    columns=["a", "zz"], progress=False)
        assert info.value is not None and _open_fds_on(tmp_path / "d.parquet") == 0
        with pytest.raises(ValueError, match="multiple of rows_per_chunk") as info:
            convert(tmp_path / "d.parquet", tmp_path / "c.zarr", y_column="label",
                    rows_per_chunk=64, rows_per_shard=100, progress=False)   # both opened
        assert info.value is not None and _open_fds_on(tmp_path / "d.parquet") == 0
    finally:
        gc.enable()
