"""Cost of one accept/reject decision of the sequential tests (microseconds per decision).

Runs ``test.decide`` directly (no proposal, no chain bookkeeping) on built-in models with
compiled row kernels, cycling over proposals ``theta_new = theta + scale z sd`` (sd about
the posterior sd, z in +-0.25, +-0.5, +-1, +-2, +-4, ``scale`` per test: 1 for the
sequential and confidence tests, 0.01 for the Barker test, whose variance condition needs
small steps), so decisions take from one to many minibatches; it reports the best of ``--repeat`` timings of ``--decisions`` decisions
each. This is the figure the sequential-test engine must not make worse: one compiled call
per decision, rows drawn inside.

Run:  python benchmarks/bench_decide.py [--decisions 3000] [--repeat 5] [--label NAME]
Writes benchmarks/results/decide[_NAME].json.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

from samplers import (  # noqa: E402
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    GaussianMean,
    IndexSampler,
    LogisticRegression,
)
from samplers import check_model  # noqa: E402
from samplers.datasets import logistic_regression  # noqa: E402


def cases():
    rng = np.random.default_rng(0)
    mean = GaussianMean(rng.normal(1.0, 1.0, 100_000))
    X, y, theta = logistic_regression(100_000, 10, rng=rng)
    logistic = LogisticRegression(X, y)
    mu, sd = (np.array([v]) for v in mean.posterior())
    direction = rng.normal(size=11) / math.sqrt(11)
    return {
        "mean": (mean, mu, sd),
        "logistic": (logistic, theta, 0.005 * direction),
    }


Z = np.array([0.25, -0.25, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0])


TESTS = {
    "austere_t_m500": (AustereTest(m=500, epsilon=0.05), 1.0),
    "austere_normal_m100": (AustereTest(m=100, epsilon=0.1, threshold="normal"), 4.0),
    "confidence_b100": (ConfidenceTest(delta=0.1, batch_size=100), 1.0),
    "barker_m100": (BarkerTest(m=100), 0.01),
    "barker_m100_nodelta": (BarkerTest(m=100, delta=None), 0.01),
}


def time_decisions(test, model, theta, proposals, n, repeat):
    view, theta = check_model(model, theta)
    rng = np.random.default_rng(1)
    batches = IndexSampler(view.N, rng)
    n_used = 0
    k = len(proposals)
    for j in range(20):  # compile / warm up
        test.decide(rng, view, batches, theta, proposals[j % k], 0.0)
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for j in range(n):
            _, info = test.decide(rng, view, batches, theta, proposals[j % k], 0.0)
            n_used += info.n_used
        best = min(best, time.perf_counter() - t0)
    return 1e6 * best / n, n_used / (n * repeat)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    results = {}
    for mname, (model, theta, step) in cases().items():
        for tname, (test, scale) in TESTS.items():
            proposals = [theta + scale * z * step for z in Z]
            us, rows = time_decisions(test, model, theta, proposals, args.decisions, args.repeat)
            results[f"{mname}/{tname}"] = {"us_per_decision": us, "rows_per_decision": rows}
            print(f"{mname:9s} {tname:22s} {us:8.2f} us/decision  ({rows:7.0f} rows)")
    write("decide" + (f"_{args.label}" if args.label else ""),
          {"decisions": args.decisions, "repeat": args.repeat, "results": results})


if __name__ == "__main__":
    main()
