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
