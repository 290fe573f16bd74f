"""Memory of a chain on a tall memmap, and the cost of a row sampler at any N (issue 15).

1. ``IndexSampler(N)``: construction time (the first call in a process also loads numba's
   compiled functions from the cache) and the memory it holds, N = 10^6 .. 10^9.
2. A chain on an N-row float32 memmap (default 10^8 rows, d = 2, labels in a second file:
   1.2 GB in a temporary directory): an AustereTest chain with a random-walk proposal.
   Reported: the process's *anonymous* resident memory (RssAnon: what it allocates, not the
   file pages of the memmap it reads) before the chain, its peak during the chain (sampled
   every 2 ms) and the growth; file-backed resident memory (RssFile: the memmap's pages the
   chain has read, in the page cache) beside it. Target: a few MB of anonymous growth.

Run the same script against another checkout (e.g. ``PYTHONPATH=/path/to/old python
benchmarks/bench_memory.py``) for before/after numbers.

Run:  python benchmarks/bench_memory.py [--rows 100000000] [--dim 2] [--steps 100]
                                        [--scale 0.1] [--dir DIR] [--keep]
Writes benchmarks/results/memory.json (``--out`` renames it).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

import samplers  # noqa: E402
from samplers import AustereTest, IndexSampler, LogisticRegression, RandomWalk, sample  # noqa: E402
from samplers.datasets import write_memmap  # noqa: E402

MB = 2**20


def status() -> dict:
    """RssAnon, RssFile and VmHWM of this process, in MB (Linux /proc/self/status)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024 / MB
    return out


class PeakAnon:
    """Samples RssAnon every ``interval`` seconds in a thread; ``peak`` is the largest seen."""

    def __init__(self, interval=0.002):
        self.interval = interval
        self.peak = status()["RssAnon"]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, status()["RssAnon"])
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, status()["RssAnon"])


def sampler_costs(sizes):
    print("IndexSampler(N): construction time and anonymous memory it adds")
    t0 = time.perf_counter()
    IndexSampler(1, rng=0).take(1)
    print(f"  first IndexSampler(1) and take(1) in this process (loads compiled code): "
          f"{(time.perf_counter() - t0) * 1e3:.0f} ms")
    rows = []
    for N in sizes:
        before = status()["RssAnon"]
        t0 = time.perf_counter()
        s = IndexSampler(N, rng=0)
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.take(500)
        first = time.perf_counter() - t0
        grown = status()["RssAnon"] - before
        rows.append({"N": N, "construct_ms": built * 1e3, "first_take_500_ms": first * 1e3,
                     "anon_MB": grown})
        print(f"  N = {N:>13,d}: construct {built * 1e3:9.3f} ms, first take(500) "
              f"{first * 1e3:8.3f} ms, +{grown:8.1f} MB anonymous")
        del s
    return rows


def make_data(directory: Path, N: int, d: int):
    t0 = time.perf_counter()
    theta = np.linspace(-1.0, 1.0, d)

    def rows(n, rng):
        return rng.standard_normal((n, d), dtype=np.float32)

    X = write_memmap(directory / "X.npy", N, rows, chunk=1 << 21, rng=1, dtype=np.float32)

    def labels(n, rng, start=[0]):
        x = X[start[0]:start[0] + n].astype(np.float64)
        start[0] += n
        return (rng.random(n) < 1.0 / (1.0 + np.exp(-(x @ theta)))).astype(np.float32)

    y = write_memmap(directory / "y.npy", N, labels, chunk=1 << 21, rng=2, dtype=np.float32)
    print(f"wrote {(X.nbytes + y.nbytes) / 1e9:.2f} GB of float32 memmaps in "
          f"{time.perf_counter() - t0:.0f} s")
    return X, y, theta


def chain_memory(X, y, theta, steps, scale):
    t0 = time.perf_counter()
    model = LogisticRegression(X, y)
    print(f"model built in {time.perf_counter() - t0:.0f} s (one scan of the labels and rows)")
    test = AustereTest(m=500, epsilon=0.05)
    proposal = RandomWalk(scale)
    sample(model, test, proposal, theta, 3, rng=0)       # compile / load caches first
    before = status()
    t0 = time.perf_counter()
    with PeakAnon() as peak:
        chain = sample(model, test, proposal, theta, steps, rng=1)
    elapsed = time.perf_counter() - t0
    after = status()
    used = chain.stats["n_used"]
    out = {"steps": steps, "seconds": elapsed, "rows_read_mean": float(used.mean()),
           "rows_read_max": int(used.max()), "anon_before_MB": before["RssAnon"],
           "anon_peak_MB": peak.peak, "anon_growth_MB": peak.peak - before["RssAnon"],
           "file_before_MB": before["RssFile"], "file_after_MB": after["RssFile"]}
    print(f"chain: {steps} AustereTest steps in {elapsed:.1f} s, rows read per step "
          f"{out['rows_read_mean']:.0f} (max {out['rows_read_max']})")
    print(f"  anonymous RSS: {before['RssAnon']:.1f} MB before, peak {peak.peak:.1f} MB during "
          f"-> growth {out['anon_growth_MB']:.2f} MB")
    print(f"  file-backed RSS (memmap pages read): {before['RssFile']:.1f} -> "
          f"{after['RssFile']:.1f} MB")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--scale", type=float, default=0.1,
                        help="random-walk step; the posterior sd is about 2e-4 at 10^8 rows, and "
                             "steps that small make the test read most rows (then memory is "
                             "8-16 bytes per row read); large steps are the subsampling regime")
    parser.add_argument("--sizes", type=int, nargs="*",
                        default=[10**6, 10**7, 10**8, 10**9])
    parser.add_argument("--dir", type=Path, default=None,
                        help="directory for the memmaps (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the memmap files")
    parser.add_argument("--out", default="memory",
                        help="results name (benchmarks/results/<out>.json)")
    args = parser.parse_args(argv)
    print(f"samplers from {Path(samplers.__file__).parent}")

    sizes = sampler_costs(args.sizes)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="austerity-memory-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if (directory / "X.npy").exists() and (directory / "y.npy").exists():
            X, y = np.load(directory / "X.npy", mmap_mode="r"), np.load(directory / "y.npy", mmap_mode="r")
            theta = np.linspace(-1.0, 1.0, args.dim)
            print(f"reusing the memmaps in {directory}")
        else:
            X, y, theta = make_data(directory, args.rows, args.dim)
        chain = chain_memory(X, y, theta, args.steps, args.scale)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    write(args.out, {"settings": {k: str(v) if isinstance(v, Path) else v
                                  for k, v in vars(args).items()},
                     "index_sampler": sizes, "chain": chain})


if __name__ == "__main__":
    main()
