"""samplers.datasets.generate_store: a Zarr store written block by block from a generator.

The store must hold exactly the rows the documented rule makes (block k is
``make_rows(n, default_rng([key, k]))``), whatever the block and shard sizes, and never more
than about a block in memory.
"""

import tracemalloc

import numpy as np
import pytest

from samplers.datasets import generate_store
from samplers.sources import open_store, verify

pytest.importorskip("zarr")


def logistic_rows(n, rng):
    X = np.empty((n, 3), dtype=np.float32)
    X[:, 0] = 1.0
    X[:, 1:] = rng.standard_normal((n, 2), dtype=np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X.astype(float) @ [0.2, 1.0, -0.5])))
    return X, y.astype(np.float32)


def reference(N, make_rows, key, block):
    """The rows by the documented rule, made in memory."""
    parts = [make_rows(min(block, N - s), np.random.default_rng([key, s // block]))
             for s in range(0, N, block)]
    if isinstance(parts[0], tuple):
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    return np.concatenate(parts), None


@pytest.mark.parametrize("block, shard", [(300, 64), (64, 448), (1000, 1024), (2500, 96)])
def test_rows_follow_the_rule_whatever_the_blocks_and_shards(tmp_path, block, shard):
    N = 1001
    X, y = generate_store(tmp_path / "s.zarr", N, logistic_rows, rng=11, block=block,
                          rows_per_chunk=32, rows_per_shard=shard, progress=False)
    Xr, yr = reference(N, logistic_rows, 11, block)
    assert X.shape == (N, 3) and y.shape == (N,) and X.dtype == np.float32
    np.testing.assert_array_equal(X.read_range(0, N), Xr)
    np.testing.assert_array_equal(y.read_range(0, N), yr)
    idx = np.array([1000, 0, 517, 63, 64])
    np.testing.assert_array_equal(X.read_rows(idx), Xr[idx])
    assert verify(X) == X.checksum and verify(y) == y.checksum
    Xo, yo = open_store(tmp_path / "s.zarr")       # what a model opens
    np.testing.assert_array_equal(Xo.read_range(990, 1001), Xr[990:])


def test_equal_seeds_equal_stores_and_a_prefix_is_a_smaller_store(tmp_path):
    a, _ = generate_store(tmp_path / "a.zarr", 700, logistic_rows, rng=3, block=128,
                          progress=False)
    b, _ = generate_store(tmp_path / "b.zarr", 700, logistic_rows, rng=3, block=128,
                          progress=False)
    c, _ = generate_store(tmp_path / "c.zarr", 300, logistic_rows, rng=3, block=128,
                          progress=False)
    d, _ = generate_store(tmp_path / "d.zarr", 700, logistic_rows, rng=4, block=128,
                          progress=False)
    assert a.checksum == b.checksum
    np.testing.assert_array_equal(a.read_range(0, 300), c.read_range(0, 300))
    assert not np.array_equal(a.read_range(0, 300), d.read_range(0, 300))
    g1, _ = generate_store(tmp_path / "g1.zarr", 300, logistic_rows,
                           rng=np.random.default_rng(5), progress=False)
    g2, _ = generate_store(tmp_path / "g2.zarr", 300, logistic_rows,
                           rng=np.random.default_rng(5), progress=False)
    assert g1.checksum == g2.checksum


def test_x_alone_and_dtype(tmp_path):
    def normals(n, rng):
        return rng.standard_normal((n, 2))

    X, y = generate_store(tmp_path / "x.zarr", 500, normals, rng=1, block=200,
                          dtype=np.float32, progress=False)
    assert y is None and X.dtype == np.float32
    np.testing.assert_array_equal(X.read_range(0, 500),
                                  reference(500, normals, 1, 200)[0].astype(np.float32))


def test_memory_is_a_block_not_the_data(tmp_path):
    """200,000 rows of 3 float64 (6.4 MB with y) in blocks of 1,000 rows (24 KB): the
    writer's peak Python allocations stay far below the data's size. Zarr's own asyncio
    machinery takes 0.3-0.55 MB whatever N (measured), so the data must be large beside it:
    at 40,000 rows (0.96 MB) a quarter of the data was within that noise."""
    def rows(n, rng):
        X = rng.standard_normal((n, 3))
        return X, (X[:, 0] > 0).astype(float)

    generate_store(tmp_path / "warm.zarr", 2000, rows, rng=0, block=1000,
                   rows_per_chunk=64, rows_per_shard=1024, progress=False)
    tracemalloc.start()
    try:
        generate_store(tmp_path / "m.zarr", 200_000, rows, rng=0, block=1000,
                       rows_per_chunk=64, rows_per_shard=1024, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200_000 * 32 / 4, peak


def test_bad_input_is_named(tmp_path):
    good = logistic_rows
    with pytest.raises(ValueError, match="N must be"):
        generate_store(tmp_path / "a.zarr", 0, good, rng=1, progress=False)
    with pytest.raises(ValueError, match="block must be"):
        generate_store(tmp_path / "a.zarr", 10, good, rng=1, block=0, progress=False)
    with pytest.raises(TypeError, match="make_rows must be a callable"):
        generate_store(tmp_path / "a.zarr", 10, "rows", rng=1, progress=False)
    with pytest.raises(ValueError, match="non-negative seed, got -1"):
        generate_store(tmp_path / "a.zarr", 10, good, rng=-1, progress=False)
    with pytest.raises(ValueError, match=r"must return X of 10 rows.*shape \(9, 3\)"):
        generate_store(tmp_path / "a.zarr", 10, lambda n, rng: good(n - 1, rng), rng=1,
                       progress=False)
    with pytest.raises(TypeError, match="float32 or float64.*int64"):
        generate_store(tmp_path / "a.zarr", 10, lambda n, rng: np.zeros((n, 2), np.int64),
                       rng=1, progress=False)

    def changing(n, rng):
        return rng.standard_normal((n, 2 if n == 8 else 3))

    with pytest.raises(ValueError, match="same kind of rows for every block: block 1"):
        generate_store(tmp_path / "a.zarr", 12, changing, rng=1, block=8, progress=False)
