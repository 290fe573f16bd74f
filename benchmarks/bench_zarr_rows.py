"""Random rows and row ranges from a sharded Zarr v3 store, by inner chunk size.

A chain on control variates reads ~10-100 random rows per step, so the store's cost per
random row decides whether a chain on a store keeps up with one in memory. For N = 10^6 rows
of d = 11 float64 (88 bytes a row) written by :func:`samplers.sources.to_zarr` (uncompressed,
shards of 2^16 rows) with several inner chunk sizes, this measures

* microseconds per row of ``read_rows`` of 100 sorted random rows, through the direct
  shard reader of :class:`samplers.sources.ZarrSource` and through Zarr's own
  ``oindex`` (the codec pipeline), and
* the time of ``read_range`` of 2^18 consecutive rows (a full-data pass's block).

Writes ``benchmarks/results/bench_zarr_rows.json``.
Run: ``python benchmarks/bench_zarr_rows.py [--rows 1000000] [--repeats 200]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

from samplers.sources import ZarrSource, to_zarr  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=11)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--inner", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for inner in args.inner:
            path = os.path.join(tmp, f"inner{inner}.zarr")
            to_zarr(X, path, rows_per_chunk=inner, rows_per_shard=1 << 16, progress=False)
            src = ZarrSource(path)
            src.read_range(0, args.rows)                  # page cache warm, shards indexed
            draws = [np.sort(rng.choice(args.rows, 100, replace=False))
                     for _ in range(args.repeats)]
            t0 = time.perf_counter()
            for idx in draws:
                src.read_rows(idx)
            direct = (time.perf_counter() - t0) / (100 * args.repeats) * 1e6
            zarr_arr = src._arr
            n_zarr = max(3, args.repeats // 20)
            t0 = time.perf_counter()
            for idx in draws[:n_zarr]:
                zarr_arr.oindex[idx, :]
            through_zarr = (time.perf_counter() - t0) / (100 * n_zarr) * 1e6
            block = min(1 << 18, args.rows)
            t0 = time.perf_counter()
            out = src.read_range(0, block)
            range_ms = (time.perf_counter() - t0) * 1e3
            assert np.array_equal(out, X[:block])
            row = dict(inner_rows=inner, inner_bytes=inner * X.shape[1] * 8,
                       us_per_random_row_direct=direct, us_per_random_row_zarr=through_zarr,
                       ms_per_range_block=range_ms, block_rows=block)
            results.append(row)
            print(f"inner {inner:5d} rows ({row['inner_bytes'] // 1024:4d} KiB): "
                  f"random row {direct:6.2f} us direct, {through_zarr:7.1f} us through Zarr; "
                  f"{block} consecutive rows {range_ms:6.1f} ms", flush=True)
    write("bench_zarr_rows", {"rows": args.rows, "features": args.features,
                              "dtype": "float64", "results": results,
                              "load": os.getloadavg()})


if __name__ == "__main__":
    main()
