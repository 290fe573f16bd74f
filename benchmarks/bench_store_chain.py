"""Time per chain step with the rows in a store (zarr, HDF5) against the rows in memory.

A control-variate chain (``ControlVariates`` around a logistic regression, d = 10 plus an
intercept, float64) with ``AustereTest(m=30)`` and the Laplace random walk, started at the
mode: about 30 rows per step. The same chain (same seed) runs on the in-memory model and on
the same rows written to a store; the chains must be bit-identical (the script checks), so
the rows per step are equal and the ratio of times is the cost of the store. Each run has a
warm-up (``--warmup`` steps, not timed: the feed's slots take their pages, the store's files
enter the page cache) and a timed run of ``--steps`` steps from another seed; the feed's
counters of the timed run are printed (rows read, rows fetched ahead and on demand, reads).

Each configuration runs with both row schemes of ``sample(row_draws=...)``, memory against
store at the same scheme: ``shared`` (the default: row uniforms from the chain's Generator;
the feed must guess which outputs become rows) and ``keyed`` (row uniforms from the order's
own counter-based stream: the feed fetches exactly the rows of the next decisions).

Run: ``python benchmarks/bench_store_chain.py --N 1000000 10000000 --dtype float64
float32``. Writes ``results/bench_store_chain.json`` (``--tag long``:
``bench_store_chain_long.json``). One run per configuration (``--repeats``: that many
memory/store pairs, interleaved); the load is printed. ``--store-dir DIR`` keeps the zarr
stores in DIR and reuses them (writing a 10^7-row store takes about a minute).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from _common import machine, write
from samplers import AustereTest, ControlVariates, LogisticRegression, RandomWalk, sample
from samplers.sources import H5Source, open_store, write_store

D = 10


def make_data(N, seed=0, chunk=1 << 20, dtype=np.float64):
    """X (N, d + 1) with an intercept column and labels y, made chunk by chunk."""
    rng = np.random.default_rng(seed)
    beta = np.linspace(1.0, -1.0, D + 1) / np.sqrt(D)
    X = np.empty((N, D + 1), dtype=dtype)
    y = np.empty(N, dtype=dtype)
    for start in range(0, N, chunk):
        stop = min(N, start + chunk)
        X[start:stop, 0] = 1.0
        X[start:stop, 1:] = rng.normal(size=(stop - start, D))
        p = 1.0 / (1.0 + np.exp(-(X[start:stop] @ beta)))
        y[start:stop] = (rng.random(stop - start) < p).astype(float)
    return X, y


def write_h5(path, X, y):
    import h5py

    with h5py.File(path, "w") as f:
        rows = max(1, 4096 // (X.shape[1] * 8))
        f.create_dataset("X", data=X, chunks=(rows, X.shape[1]))
        f.create_dataset("y", data=y, chunks=(4096 // 8,))


def timed(model, test, walk, theta0, warmup, steps, row_draws):
    sample(model, test, walk, theta0, warmup, rng=1, progress=False, row_draws=row_draws)
    t0 = time.perf_counter()
    chain = sample(model, test, walk, theta0, steps, rng=2, progress=False,
                   row_draws=row_draws)
    return chain, time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--N", type=int, nargs="+", default=[10**6, 10**7])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=5000)
    parser.add_argument("--h5-steps", type=int, default=2000,
                        help="timed steps on the HDF5 file (its reads are slower)")
    parser.add_argument("--dtype", nargs="+", default=["float64"],
                        choices=["float64", "float32"])
    parser.add_argument("--stores", nargs="+", default=["zarr", "hdf5"],
                        choices=["zarr", "hdf5"])
    parser.add_argument("--row-draws", nargs="+", default=["shared", "keyed"],
                        choices=["shared", "keyed"])
    parser.add_argument("--dir", default=None, help="where the stores are written")
    parser.add_argument("--store-dir", default=None,
                        help="keep the zarr stores here and reuse them (dataN<dtype>.zarr, "
                             "the same rows: make_data's seed is fixed)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed pairs (memory, then store) per configuration, "
                             "interleaved; each pair is one result row")
    parser.add_argument("--tag", default="", help="appended to the results file's name")
    args = parser.parse_args()
    results = []
    test = AustereTest(m=30, epsilon=0.05)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for N, dtype in [(N, dt) for N in args.N for dt in args.dtype]:
            X, y = make_data(N, dtype=np.dtype(dtype))
            memory = ControlVariates(LogisticRegression(X, y))
            theta0 = memory.centre.theta
            walk = RandomWalk.from_laplace(memory)
            stores = {}
            if "zarr" in args.stores:
                zpath = os.path.join(args.store_dir or tmp, f"data{N}{dtype}.zarr")
                if args.store_dir is None or not os.path.exists(zpath):
                    write_store(zpath, X, y, progress=False)
                Xz, yz = open_store(zpath)
                stores["zarr"] = ControlVariates(LogisticRegression(Xz, yz), center=theta0)
            if "hdf5" in args.stores:
                hpath = os.path.join(tmp, f"data{N}{dtype}.h5")
                write_h5(hpath, X, y)
                stores["hdf5"] = ControlVariates(LogisticRegression(
                    H5Source(hpath, "X"), H5Source(hpath, "y")), center=theta0)
            for (kind, model), row_draws in [(km, r) for km in stores.items()
                                             for r in args.row_draws]:
                steps = args.steps if kind == "zarr" else args.h5_steps
                warm = args.warmup if kind == "zarr" else args.h5_steps // 4
                for repeat in range(args.repeats):
                    ref, t_mem = timed(memory, test, walk, theta0, warm, steps, row_draws)
                    got, t_store = timed(model, test, walk, theta0, warm, steps, row_draws)
                    same = (np.array_equal(ref.samples, got.samples)
                            and all(np.array_equal(ref.stats[k], got.stats[k]) for k in ref.stats))
                    reads = got.store_reads
                    row = {"N": N, "store": kind, "dtype": dtype, "d": D + 1,
                           "row_draws": row_draws, "steps": steps, "repeat": repeat,
                           "rows_per_step": float(ref.stats["n_used"].mean()),
                           "us_per_step_memory": 1e6 * t_mem / steps,
                           "us_per_step_store": 1e6 * t_store / steps,
                           "ratio": t_store / t_mem, "bit_identical": bool(same),
                           "rows_fetched_per_step": reads.rows_fetched / steps,
                           "rows_on_demand_per_step": reads.rows_on_demand / steps,
                           "reads": reads.reads, "refills": reads.refills,
                           "load": os.getloadavg()[0]}
                    results.append(row)
                    print(f"N={N:>9} {dtype} {kind:5} {row_draws:6} rows/step "
                          f"{row['rows_per_step']:5.1f}  memory {row['us_per_step_memory']:7.1f} "
                          f"us/step  store {row['us_per_step_store']:8.1f} us/step  ratio "
                          f"{row['ratio']:5.2f}  fetched {row['rows_fetched_per_step']:6.0f} "
                          f"rows/step ({row['rows_on_demand_per_step']:.2f} on demand)  "
                          f"identical {same}  load {row['load']:.1f}", flush=True)
            del X, y, memory, stores
    write("bench_store_chain" + (f"_{args.tag}" if args.tag else ""),
          {"machine": machine(), "results": results})


if __name__ == "__main__":
    main()
