"""Cost of a Barker decision per row read: O(batch), also when Corollary 1's bound drives it.

The stopping rule needs eps = (6.4 mean|z|^3 + 2 mean|z|) / sqrt(b) about the *current* batch
mean, which no running sum gives; recomputing it at every stage would cost O(b^2 / m) per
decision. ``BarkerTest`` skips the pass while a running lower bound already exceeds delta.
This script times decisions at one fixed pair of the Gaussian-mixture workload (N = 10^6,
K = 10^4) whose size is set by the variance condition (delta=None), by the bound
(delta = 0.1 and 0.02: thousands of stages of m = 50) and, for reference, a single stage of
20,000 rows and the sequential t-test. Equal nanoseconds per row mean no quadratic term.

Run:  python benchmarks/barker_cost.py [--reps 200]
Writes benchmarks/results/barker_cost.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

from samplers import AustereTest, BarkerTest, GaussianMixture, IndexSampler  # noqa: E402
from samplers import check_model  # noqa: E402
from samplers.datasets import gaussian_mixture  # noqa: E402

CASES = {
    "BarkerTest(m=50, delta=None)": BarkerTest(m=50, delta=None),
    "BarkerTest(m=50), delta = 0.5": BarkerTest(m=50),
    "BarkerTest(m=50, delta=0.1)": BarkerTest(m=50, delta=0.1),
    "BarkerTest(m=50, delta=0.02)": BarkerTest(m=50, delta=0.02),
    "BarkerTest(m=20000), one stage": BarkerTest(m=20_000),
    "AustereTest(m=50, epsilon=1e-6)": AustereTest(m=50, epsilon=1e-6),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args(argv)
    model = GaussianMixture(gaussian_mixture(1_000_000, rng=0), temperature=10_000.0)
    view, theta = check_model(model, [0.5, 0.0])
    theta_new = np.array([0.6, -0.1])
    out = {}
    for name, test in CASES.items():
        rng = np.random.default_rng(0)
        batches = IndexSampler(view.N, rng)
        test.decide(rng, view, batches, theta, theta_new, 0.0)  # compile
        rows, stages = 0, 0
        t0 = time.perf_counter()
        for _ in range(args.reps):
            _, info = test.decide(rng, view, batches, theta, theta_new, 0.0)
            rows += info.n_used
            stages += info.n_stages
        seconds = time.perf_counter() - t0
        out[name] = {"rows_per_decision": rows / args.reps, "stages": stages / args.reps,
                     "ns_per_row": 1e9 * seconds / rows,
                     "us_per_decision": 1e6 * seconds / args.reps}
        r = out[name]
        print(f"{name:36s} {r['rows_per_decision']:10,.0f} rows {r['stages']:8,.0f} stages "
              f"{r['ns_per_row']:7.1f} ns/row {r['us_per_decision']:10,.1f} us/decision")
    write("barker_cost", {"settings": vars(args), "results": out})
    print("\n| decision | rows | stages | ns per row | µs per decision |\n|---|---|---|---|---|")
    for name, r in out.items():
        print(f"| {name} | {r['rows_per_decision']:,.0f} | {r['stages']:,.0f} | "
              f"{r['ns_per_row']:.0f} | {r['us_per_decision']:,.0f} |")


if __name__ == "__main__":
    main()
