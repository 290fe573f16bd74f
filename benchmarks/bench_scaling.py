"""Per-step cost of a subsampling test does not grow with N.

The same model (logistic regression, d = 10 + intercept), the same test and the same rows
read per step at N = 10^5, 10^6 and 10^7 in memory, and 10^7 as a memmap on disk (880 MB).
The test is AustereTest(m=500, epsilon=0.45): its critical value is small, so nearly every
decision is taken on the first 500 rows at every size and the data read per step match.
Reports time per step and per row; the issue's target is memmap-10^7 / 10^5 <= 1.3.

The 10^5 dataset (8.8 MB) fits in this machine's L3 cache and the others do not, so that
ratio also measures cache misses; 10^7 / 10^6 (both far larger than cache) isolates any
growth with N.

Run:  python benchmarks/bench_scaling.py [--steps 4000]
Writes benchmarks/results/scaling.json. The memmap goes to a temporary folder (removed).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

from samplers import AustereTest, GaussianPrior, LogisticRegression, RandomWalk, sample  # noqa: E402
from samplers.datasets import write_memmap  # noqa: E402

D = 10
THETA = np.random.default_rng(0).normal(0, 1 / np.sqrt(D), D + 1)


def rows(n, rng):
    X = rng.normal(size=(n, D + 1))
    X[:, -1] = 1.0
    return X


def labels_for(X_path, y_path, N, rng):
    X = np.load(X_path, mmap_mode="r")
    out = np.lib.format.open_memmap(y_path, mode="w+", dtype=np.float64, shape=(N,))
    for s in range(0, N, 1 << 18):
        p = 1 / (1 + np.exp(-(np.asarray(X[s:s + (1 << 18)]) @ THETA)))
        out[s:s + p.shape[0]] = rng.random(p.shape[0]) < p
    out.flush()
    del out
    return np.load(y_path, mmap_mode="r")


def time_steps(model, steps, seed):
    test = AustereTest(m=500, epsilon=0.45)
    # proposal at the posterior scale for this N: sd ~ 1 / sqrt(N) per coordinate
    proposal = RandomWalk(0.5 / np.sqrt(model.N))
    sample(model, test, proposal, THETA, 20, rng=seed)  # warm up: compile, fault pages in
    chain = sample(model, test, proposal, THETA, steps, rng=seed)
    rows_read = chain.stats["n_used"]
    return {
        "N": model.N,
        "us_per_step": 1e6 * chain.wall_time / steps,
        "ns_per_row": 1e9 * chain.wall_time / rows_read.sum(),
        "mean_rows_per_step": float(rows_read.mean()),
        "acceptance_rate": chain.acceptance_rate,
    }


def in_memory(N, seed):
    rng = np.random.default_rng(seed)
    X = rows(N, rng)
    y = (rng.random(N) < 1 / (1 + np.exp(-(X @ THETA)))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0, 10))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--steps", type=int, default=4000)
    args = parser.parse_args(argv)

    runs = {}
    for N in args.sizes:
        runs[f"{N} in memory"] = time_steps(in_memory(N, N % 97), args.steps, 2)
    big = max(args.sizes)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        Xm = write_memmap(Path(tmp) / "X.npy", big, rows, rng=3)
        ym = labels_for(Path(tmp) / "X.npy", Path(tmp) / "y.npy", big, np.random.default_rng(4))
        model = LogisticRegression(Xm, ym, prior=GaussianPrior(0, 10))
        setup = time.perf_counter() - t0
        runs[f"{big} memmap"] = time_steps(model, args.steps, 2)
        del model, Xm, ym

    small = runs[f"{min(args.sizes)} in memory"]
    for name, r in runs.items():
        print(f"{name:>22s}: {r['us_per_step']:8.1f} us/step  {r['ns_per_row']:7.1f} ns/row  "
              f"{r['mean_rows_per_step']:6.1f} rows/step  accept {r['acceptance_rate']:.2f}")
    ratios = {
        "memmap_big_over_small": runs[f"{big} memmap"]["us_per_step"] / small["us_per_step"],
        "memory_big_over_small": runs[f"{big} in memory"]["us_per_step"] / small["us_per_step"],
    }
    if len(args.sizes) > 2:
        mid = sorted(args.sizes)[-2]
        ratios["memory_big_over_next"] = (runs[f"{big} in memory"]["us_per_step"]
                                          / runs[f"{mid} in memory"]["us_per_step"])
    for k, v in ratios.items():
        print(f"  time per step, {k.replace('_', ' ')}: {v:.2f}")
    print(f"  (writing the {big:,}-row memmap took {setup:.1f} s)")
    write("scaling", {"settings": vars(args), "runs": runs, "ratios": ratios,
                      "memmap_setup_seconds": setup})


if __name__ == "__main__":
    main()
