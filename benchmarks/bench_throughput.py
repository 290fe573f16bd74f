"""Throughput of l_i for logistic regression (d = 50) on random rows, against a plain loop.

The reference is what a user would write: one numba loop over the same random rows computing
l_i = log sigmoid(s x.theta') - log sigmoid(s x.theta). Measured for the public
``model.loglik_ratio`` (argument checks included), the unchecked batch kernel the samplers
use, and the rows an AustereTest decision reads (one compiled call per decision, rows drawn
without replacement inside). Target: ratio >= 0.5.

Run:  python benchmarks/bench_throughput.py [--rows 1000000] [--batch 500]
Writes benchmarks/results/throughput.json.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

from samplers import AustereTest, IndexSampler, LogisticRegression  # noqa: E402
from samplers._view import check_model  # noqa: E402
from samplers.datasets import logistic_regression  # noqa: E402


@numba.njit(cache=True)
def plain_loop(X, y, idx, theta, theta_new, out):
    for t in range(idx.shape[0]):
        i = idx[t]
        a = 0.0
        b = 0.0
        for j in range(X.shape[1]):
            a += X[i, j] * theta[j]
            b += X[i, j] * theta_new[j]
        s = 2.0 * y[i] - 1.0
        out[t] = -math.log1p(math.exp(-s * b)) + math.log1p(math.exp(-s * a))


def rate(fn, n_rows, repeat):
    fn()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n_rows / best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--batches", type=int, default=400)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    X, y, theta = logistic_regression(args.rows, 50, rng=rng, intercept=False)
    model = LogisticRegression(X, y)
    theta_new = theta + rng.normal(0, 1e-3, theta.shape)
    batches = [rng.integers(0, args.rows, args.batch) for _ in range(args.batches)]
    n_rows = args.batch * args.batches
    out = np.empty(args.batch)

    def reference():
        for idx in batches:
            plain_loop(X, y, idx, theta, theta_new, out)

    def public():
        for idx in batches:
            model.loglik_ratio(theta, theta_new, idx)

    def kernel():
        for idx in batches:
            model._loglik_ratio(theta, theta_new, idx)

    # A decision that must read exactly `batch` rows: epsilon near 1/2 puts the critical
    # value near 0, so the first stage decides.
    view, theta0 = check_model(model, theta)
    test = AustereTest(m=args.batch, epsilon=0.4999)
    dec_rng = np.random.default_rng(5)
    sampler = IndexSampler(args.rows, dec_rng)
    used = []

    def decisions():
        used.clear()
        for _ in range(args.batches):
            _, info = test.decide(dec_rng, view, sampler, theta0, theta_new, 0.0)
            used.append(info.n_used)

    results = {"plain numba loop": rate(reference, n_rows, 5)}
    results["model.loglik_ratio (public)"] = rate(public, n_rows, 5)
    results["model._loglik_ratio (kernel)"] = rate(kernel, n_rows, 5)
    decisions()
    results["AustereTest decision"] = rate(decisions, sum(used), 5)
    base = results["plain numba loop"]
    print(f"logistic regression, d = 50, N = {args.rows:,}, random rows in batches of {args.batch}")
    for name, r in results.items():
        print(f"  {name:32s} {r / 1e6:8.2f} M rows/s   ratio {r / base:5.2f}")
    write("throughput", {"settings": vars(args),
                         "rows_per_second": results,
                         "ratio_to_plain_loop": {k: v / base for k, v in results.items()}})


if __name__ == "__main__":
    main()
