"""Set-up of ``validation.fit`` step by step (issue 23, part 4: set-up in proportion).

For each N: the logistic regression of ``samplers.datasets.logistic_regression(N, 10)``
(10 standard-normal covariates and an intercept, seed 7, prior N(0, 10^2)); a warm-up
``fit`` on its first 20,000 rows (imports and compilation), then the measured
``fit(model, tolerance=0.01, rng=1, parallel=False)``. Prints each step's wall seconds
(``attrs["timings"]``), the set-up (all but the chains), the process CPU seconds of the whole
call (all threads; the chains run in this process, on one thread) and the load average, the
route, the design and the verdict.

Run:  python benchmarks/bench_fit_setup.py [--rows 200000 1000000]
Writes benchmarks/results/bench_fit_setup.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write  # noqa: E402

sys.path.insert(0, str(ROOT))   # measure this checkout, not whichever one is pip-installed

from samplers import GaussianPrior, LogisticRegression  # noqa: E402
from samplers.datasets import logistic_regression  # noqa: E402
from validation import fit  # noqa: E402


def run(N):
    X, y, _ = logistic_regression(N, 10, rng=7)
    prior = GaussianPrior(0.0, 10.0)
    fit(LogisticRegression(X[:20_000], y[:20_000], prior=prior), draws=200, rng=1,
        parallel=False, progress=False)
    model = LogisticRegression(X, y, prior=prior)
    load = os.getloadavg()[0]
    cpu = time.process_time()
    a = fit(model, tolerance=0.01, rng=1, parallel=False, progress=False).posterior.attrs
    cpu = time.process_time() - cpu
    t = dict(a["timings"])
    return dict(N=N, timings=t, setup_s=t["total"] - t["chains"], cpu_s=cpu,
                load=[load, os.getloadavg()[0]], route=a["route"], design=a["settings"],
                verdict=a["clt_passed"], error_simulated=a["clt_error_simulated"],
                ess_bulk=a["ess_bulk"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    args = parser.parse_args(argv)
    results = []
    for N in args.rows:
        r = run(N)
        results.append(r)
        steps = {k: v for k, v in r["timings"].items() if k not in ("route", "total")}
        print(f"N = {N:,} (load {r['load'][0]:.1f} -> {r['load'][1]:.1f}): set-up "
              f"{r['setup_s']:.2f} s of {r['timings']['total']:.2f} s all-in, "
              f"{r['cpu_s']:.2f} CPU-s all-in; "
              + ", ".join(f"{k} {v:.2f}" for k, v in steps.items()), flush=True)
        print(f"   {r['route']}, {r['design']}, verdict {r['verdict']} (simulated mean "
              f"|error| {r['error_simulated']:.3g}), min bulk ESS {r['ess_bulk']:.0f}")
    write("bench_fit_setup", {"results": results})


if __name__ == "__main__":
    main()
