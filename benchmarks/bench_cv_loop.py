"""ESS per second of designed control-variate Austere chains on the Python and the compiled loop.

Logistic regression, d = 10 covariates + intercept (``_common.cv_logistic_dataset``),
N(0, 10^2) prior, N in ``--sizes`` (default 10^5 and 10^6). For each N:
``ControlVariates(model)`` (order 2, at the mode found by its Newton pass), ``--pairs`` trial
pairs from the Laplace approximation with the proposal the chain uses,
``design.optimize(trial, --tolerance, test="austere")`` and ``AustereTest.from_design``, then
one chain of ``--steps`` steps from the mode with each proposal:

* ``rw``: ``RandomWalk.from_laplace(cv)`` (2.38 / sqrt(d) in units of the Laplace covariance);
* ``indep``: ``Independence.from_laplace(cv)`` (N(mode, Sigma)),

once with ``sample(..., compiled=False)`` (the Python loop, ``mh_step`` per step) and once
with ``compiled=True`` (the compiled block loop), with the same seed. The two chains are
bit-identical (checked and printed), so their ESS is the same and the ESS per second differs
by the wall time alone: the columns are min bulk ESS over the 11 coordinates (ArviZ), the
loop's seconds (``chain.wall_time``), microseconds per step, rows read per step, ESS per
second, acceptance, and "after s", what ``sample`` spends after the loop (the bias monitor's
per-decision error estimates of a designed test, the same on both loops), and the ratio of
the two loops' ESS per second.

Run:  python benchmarks/bench_cv_loop.py [--sizes 100000 1000000] [--steps 5000]
          [--tolerance 0.01] [--pairs 20] [--out cv_loop]
Writes benchmarks/results/<out>.json (machine load included: compare within one run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]   # this checkout first, then _common
from _common import cv_logistic_dataset, write  # noqa: E402

import design  # noqa: E402
from samplers import (  # noqa: E402
    AustereTest,
    ControlVariates,
    GaussianPrior,
    Independence,
    LogisticRegression,
    RandomWalk,
    import_arviz,
    sample,
)

az = import_arviz()
D = 10
PRIOR_SD = 10.0


def trial_pairs(cv, q, name, rng, pairs):
    """``(theta, theta_new, log_q_ratio)``: theta from the Laplace approximation ``q``, the
    move the chain's proposal would make."""
    L = np.linalg.cholesky(q.covariance)
    theta = q.mean + rng.standard_normal((pairs, cv.dim)) @ L.T
    if name == "rw":
        new = theta + (2.38 / np.sqrt(cv.dim)) * rng.standard_normal(theta.shape) @ L.T
        return theta, new, np.zeros(pairs)
    new = q.mean + rng.standard_normal((pairs, cv.dim)) @ L.T
    lq = np.array([q.log_density(a) - q.log_density(b) for a, b in zip(theta, new)])
    return theta, new, lq


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--out", default="cv_loop")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(20261123)
    print(f"load average {load_before:.2f} on {os.cpu_count()} cores; {args.steps} steps per "
          f"chain; tolerance {args.tolerance}")
    print(f"{'N':>9} {'proposal':<8} {'loop':<9} {'ESS':>7} {'seconds':>8} {'us/step':>8} "
          f"{'rows/step':>9} {'ESS/s':>9} {'accept':>6} {'after s':>8}")
    rows = []
    for N in args.sizes:
        X, y = cv_logistic_dataset(N, rng, d=D)
        cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, PRIOR_SD)))
        lap = Independence.from_laplace(cv)
        for name, prop in (("rw", RandomWalk.from_laplace(cv)), ("indep", lap)):
            trial = design.TrialChain.from_model(cv, *trial_pairs(cv, lap, name, rng, args.pairs),
                                                 progress=False)
            test = AustereTest.from_design(design.optimize(trial, args.tolerance, test="austere"))
            seed = int(rng.integers(2**31))
            sample(cv, test, prop, cv.center.theta, 50, rng=0, compiled=True)   # compile
            chains = {}
            for loop in ("python", "compiled"):
                t0 = time.perf_counter()
                chain = sample(cv, test, prop, cv.center.theta, args.steps, rng=seed,
                               compiled=loop == "compiled", progress=False)
                total = time.perf_counter() - t0
                seconds = chain.wall_time   # the loop alone: sample() then estimates the
                # decisions' errors for its bias monitor (a designed test), timed apart
                ess = float(az.ess(az.convert_to_dataset(chain.samples[None]),
                                   method="bulk").x.values.min())
                row = dict(N=N, proposal=name, loop=loop, steps=args.steps, min_ess=ess,
                           seconds=seconds, us_per_step=1e6 * seconds / args.steps,
                           rows_per_step=float(chain.stats["n_used"].mean()),
                           ess_per_s=ess / seconds, acceptance=chain.acceptance_rate,
                           after_loop_seconds=total - seconds,
                           test=f"m={test.m}, eps={test.epsilon:g}")
                chains[loop] = chain
                rows.append(row)
                print(f"{N:>9} {name:<8} {loop:<9} {ess:7.0f} {seconds:8.2f} "
                      f"{row['us_per_step']:8.1f} {row['rows_per_step']:9.1f} "
                      f"{row['ess_per_s']:9.0f} {row['acceptance']:6.2f} "
                      f"{total - seconds:8.2f}", flush=True)
            same = bool(np.array_equal(chains["python"].samples, chains["compiled"].samples))
            ratio = rows[-1]["ess_per_s"] / rows[-2]["ess_per_s"]
            rows[-1]["speedup"] = ratio
            rows[-1]["identical_to_python"] = same
            print(f"{'':>9} {name:<8} {'compiled/python ESS/s':<30} {ratio:6.1f}x  "
                  f"(chains identical: {same}; {rows[-1]['test']})")
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.2f} before, {load_after:.2f} after")
    write(args.out, {"settings": vars(args), "load_average": {"before": load_before,
                                                              "after": load_after},
                     "rows": rows})


if __name__ == "__main__":
    main()
