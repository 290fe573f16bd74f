"""Speed of the design engine, one run each (timings on a shared machine are noisy).

Each figure is the wall time and the process CPU time (summed over threads); on a loaded
machine the CPU time is the steadier measure of the work done.

* compile or cache load of the kernel (first call);
* ``sequential_error`` at N = 10^6, m = 50, eps = 0.001 (20,000 stages): mu_std = 0 alone
  and 100 values of mu_std;
* the full default grid (10 m x 9 eps) of the worst-case design at N = 10^6, with 1 and 2
  threads;
* the average design on a 100-pair trial chain, default grids: a logistic regression with
  N = 10^5 (pairs from exact random-walk MH) and one with N = 10^6 (pairs around the mode).

Writes ``benchmarks/results/bench_design.json``. Run: ``python benchmarks/bench_design.py``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402
from _design_refs import reference  # noqa: E402

from design import TrialChain, optimize, sequential_error  # noqa: E402

lp = reference("logistic_pairs")


def timed(f, *args, **kwargs):
    """(result, wall seconds, CPU seconds of this process over all threads)."""
    t, c = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - t, time.process_time() - c


def main():
    res = {}
    _, wall, cpu = timed(sequential_error, 0.0, m=10, epsilon=0.1, N=100)
    res["first_call"] = dict(seconds=wall, cpu_seconds=cpu)
    print(f"first call (compile or cache load): {wall:.2f} s")

    _, w0, c0 = timed(sequential_error, 0.0, m=50, epsilon=0.001, N=1_000_000)
    _, w100, c100 = timed(sequential_error, np.geomspace(1e-3, 300, 100), m=50,
                          epsilon=0.001, N=1_000_000)
    res["sequential_error_N1e6_m50"] = dict(mu0_seconds=w0, mu0_cpu_seconds=c0,
                                            mu100_seconds=w100, mu100_cpu_seconds=c100)
    print(f"sequential_error, N = 1e6, m = 50, eps = 0.001 (20,000 stages): mu = 0 "
          f"{w0:.2f} s (CPU {c0:.2f} s), 100 mu values {w100:.2f} s (CPU {c100:.2f} s)")

    for workers in (2, 1):
        d, wall, cpu = timed(optimize, 1_000_000, 0.05, method="worst-case", workers=workers)
        res[f"worst_case_default_grid_N1e6_workers{workers}"] = dict(
            seconds=wall, cpu_seconds=cpu, cells=d.error_grid.size,
            design=[d.m, d.epsilon, d.error, d.data_fraction])
        print(f"worst-case design, N = 1e6, default grid ({d.error_grid.size} cells), "
              f"{workers} thread(s): {wall:.2f} s (CPU {cpu:.2f} s) -> m = {d.m}, "
              f"eps = {d.epsilon:g}")

    for N, source in [(100_000, "mh"), (1_000_000, "laplace")]:
        model = lp.LogisticModel(*lp.make_data(N, 5, rng=1))
        if source == "mh":
            thetas, news = lp.mh_pairs(model, 100, rng=2, burn_in=100)
        else:
            thetas, news = lp.laplace_pairs(model, 100, rng=2)
        trial, t_trial, _ = timed(TrialChain.from_model, model, thetas, news)
        d, wall, cpu = timed(optimize, trial, 0.05, workers=2)
        res[f"average_default_grid_N{N:.0e}"] = dict(
            seconds=wall, cpu_seconds=cpu, trial_chain_seconds=t_trial, pairs=source,
            design=[d.m, d.epsilon, d.error, d.data_fraction])
        print(f"average design, 100 pairs ({source}), N = {N:.0e}, default grid, 2 threads: "
              f"{wall:.2f} s (CPU {cpu:.2f} s; trial chain scan {t_trial:.2f} s) -> "
              f"m = {d.m}, eps = {d.epsilon:g}")

    write("bench_design", res)


if __name__ == "__main__":
    main()
