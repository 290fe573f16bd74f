"""Set-up time of ``ControlVariates(LogisticRegression(X, y), order=2)``: the mode search
(Newton, one full pass per trial point) and the control-variate sums at the mode, all one-off
O(N) passes (issue 15, item 2).

Prints seconds, passes and ns per row per pass for each (N, d); the data are
``samplers.datasets.logistic_regression(N, d - 1)`` (d columns with the intercept).

Run:  python benchmarks/bench_cv_setup.py [--rows 1000000 10000000] [--dims 11 51] [--repeat 2]
Writes benchmarks/results/cv_setup.json.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write  # noqa: E402

sys.path.insert(0, str(ROOT))   # measure this checkout, not whichever one is pip-installed

from samplers import ControlVariates, LogisticRegression  # noqa: E402
from samplers.datasets import logistic_regression  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[11, 51])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    # compile everything once on a small problem
    X, y, _ = logistic_regression(5_000, 10, rng=0)
    ControlVariates(LogisticRegression(X, y), order=2)
    table = []
    print(f"  {'N':>11s} {'d':>3s}  {'seconds':>8s} {'passes':>6s} {'ns/row/pass':>11s}")
    for N in args.rows:
        for d in args.dims:
            X, y, _ = logistic_regression(N, d - 1, rng=np.random.default_rng(1))
            model = LogisticRegression(X, y)
            best = math.inf
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                cv = ControlVariates(model, order=2)
                best = min(best, time.perf_counter() - t0)
            passes = cv.center.n_passes
            row = {"N": N, "d": d, "seconds": best, "passes": passes,
                   "ns_per_row_per_pass": best / (N * passes) * 1e9,
                   "mode": cv.center.theta.tolist()}
            table.append(row)
            print(f"  {N:11,d} {d:3d}  {best:8.3f} {passes:6d} {row['ns_per_row_per_pass']:11.2f}",
                  flush=True)
            del X, y, model, cv
    write("cv_setup", {"settings": vars(args), "setup": table})


if __name__ == "__main__":
    main()
