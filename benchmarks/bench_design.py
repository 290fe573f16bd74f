"""Speed and memory of the design engine, one run each (timings on a shared machine are noisy).

Each figure is the wall time and the process CPU time (summed over threads); on a loaded
machine the CPU time is the steadier measure of the work done. Each case runs in its own
process, so its peak RSS is its own.

* compile or cache load of the kernel (first call);
* ``sequential_error`` at N = 10^6, m = 50, eps = 0.001 (20,000 stages): mu_std = 0 alone
  and 100 values of mu_std;
* the worst-case design on the default grid (10 m x 9 eps) at N = 10^6, 10^7 and 10^9
  (2 threads): the default search (bisection in epsilon, a few cells per m) and at
  N = 10^6 also the full grid; at N = 10^6 the full grid through the exact programme (every
  stage, no early stop: the engine before issue 15) with the largest difference over the
  cells both evaluated; at N = 10^7 four cells against the exact programme;
* the average design on a 100-pair trial chain of a logistic regression with N = 10^6
  (pairs around the mode, d = 5): the trial-pair statistics (two chunked passes for all
  pairs: moments, then shape; the compiled ``LogisticRegression.loglik_many``), then the
  default grid; with ``--reference`` also the former one-pass-per-pair scan of the means.

``--before DIR`` also runs the same cases with an older checkout's own copy of this script
(``DIR/benchmarks/bench_design.py``, e.g. ``git worktree add DIR main``), one process per
case, interleaved with this checkout's (before, after, before, ...), so both see the same
machine load; the results go under ``"before"``.

Writes ``benchmarks/results/bench_design.json``.
Run: ``python benchmarks/bench_design.py [--quick] [--reference] [--before DIR]``
(``--quick``: N = 10^6 cases only).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))             # this checkout's packages, not an installed copy
from _common import write  # noqa: E402
WORST_TOLERANCE = 0.15   # feasible on the default grid at every N benchmarked


def timed(f, *args, **kwargs):
    """(result, wall seconds, CPU seconds of this process over all threads)."""
    t, c = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - t, time.process_time() - c


def peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def case_first_call():
    from design import sequential_error
    _, wall, cpu = timed(sequential_error, 0.0, m=10, epsilon=0.1, N=100)
    _, w0, c0 = timed(sequential_error, 0.0, m=50, epsilon=0.001, N=1_000_000)
    _, w100, c100 = timed(sequential_error, np.geomspace(1e-3, 300, 100), m=50,
                          epsilon=0.001, N=1_000_000)
    return dict(first_call_seconds=wall, first_call_cpu_seconds=cpu, mu0_seconds=w0,
                mu0_cpu_seconds=c0, mu100_seconds=w100, mu100_cpu_seconds=c100)


def _exact_grid(N, m_grid, eps_grid):
    """The engine before issue 15: every stage, no early stop, the same grid loop."""
    from design import optimize
    d = optimize(N, 0.49, method="worst-case", m_grid=m_grid, epsilon_grid=eps_grid,
                 workers=2, progress=False, exact=True, search="full")
    return d.error_grid, d.data_grid


def _warm_up():
    """Compile (or load from numba's cache) the exact and the merged programmes."""
    from design import sequential_error
    sequential_error([0.0, 1.0], m=10, epsilon=0.1, N=100)
    sequential_error([0.0, 1.0], m=2, epsilon=0.1, N=100_000)


def case_worst(N):
    from design import optimize
    _warm_up()
    d, wall, cpu = timed(optimize, N, WORST_TOLERANCE, method="worst-case", workers=2,
                         progress=False)
    done = ~np.isnan(d.error_grid)
    res = dict(seconds=wall, cpu_seconds=cpu, cells=int(done.sum()),
               design=[d.m, d.epsilon, d.error, d.data_fraction])
    if N == 10**6:
        full, w, c = timed(optimize, N, WORST_TOLERANCE, method="worst-case", workers=2,
                           progress=False, search="full")
        res.update(full_grid_seconds=w, full_grid_cpu_seconds=c,
                   full_grid_same_design=[full.m, full.epsilon] == [d.m, d.epsilon])
        (E, P), w, c = timed(_exact_grid, N, d.m_grid.tolist(), d.epsilon_grid.tolist())
        res.update(exact_seconds=w, exact_cpu_seconds=c,
                   max_abs_diff_error=float(np.max(np.abs(E - full.error_grid))),
                   max_abs_diff_data=float(np.max(np.abs(P - full.data_grid))))
    elif N == 10**7:
        m_sub, e_sub = [100, 500], [0.001, 0.05]
        (E, P), w, c = timed(_exact_grid, N, m_sub, e_sub)
        fast = optimize(N, 0.49, method="worst-case", m_grid=m_sub, epsilon_grid=e_sub,
                        workers=2, progress=False, search="full")
        res.update(exact_cells=4, exact_seconds=w, exact_cpu_seconds=c,
                   max_abs_diff_error=float(np.max(np.abs(E - fast.error_grid))),
                   max_abs_diff_data=float(np.max(np.abs(P - fast.data_grid))))
    res["peak_rss_mb"] = peak_rss_mb()
    return res


def _per_pair_scan(model, thetas, news, chunk=65_536):
    """The former TrialChain.from_model: one pass over the data per pair."""
    mus = []
    for theta, new in zip(thetas, news):
        n, mean, m2 = 0, 0.0, 0.0
        for start in range(0, model.N, chunk):
            idx = np.arange(start, min(start + chunk, model.N))
            l = model.loglik_ratio(theta, new, idx)
            cm = l.mean()
            nb, delta = l.size, cm - mean
            mean, m2 = mean + delta * nb / (n + nb), m2 + np.sum((l - cm) ** 2) + (
                delta * delta * n * nb / (n + nb))
            n += nb
        mus.append(mean)
    return np.array(mus)


def case_average(reference_scan=False):
    from _design_refs import reference

    from design import TrialChain, optimize
    from samplers.models import LogisticRegression

    lp = reference("logistic_pairs")
    N = 1_000_000
    X, y = lp.make_data(N, 5, rng=1)
    thetas, news = lp.laplace_pairs(lp.LogisticModel(X, y), 100, rng=2)
    model = LogisticRegression(X, y)          # flat prior: c0 differs, mu and sigma do not
    _warm_up()
    TrialChain.from_model(model, thetas[:2], news[:2], progress=False)   # compile or load
    trial, t_trial, c_trial = timed(TrialChain.from_model, model, thetas, news,
                                    progress=False)
    res = dict(trial_chain_seconds=t_trial, trial_chain_cpu_seconds=c_trial)
    if reference_scan:
        mu_old, t_old, c_old = timed(_per_pair_scan, model, thetas, news)
        res.update(per_pair_scan_seconds=t_old, per_pair_scan_cpu_seconds=c_old,
                   max_abs_diff_mu=float(np.max(np.abs(mu_old - trial.mu))))
    d, wall, cpu = timed(optimize, trial, 0.05, workers=2, progress=False)
    res.update(grid_seconds=wall, grid_cpu_seconds=cpu, total_seconds=t_trial + wall,
               total_cpu_seconds=c_trial + cpu, design=[d.m, d.epsilon, d.error,
                                                        d.data_fraction],
               peak_rss_mb=peak_rss_mb())
    return res


CASES = {"first_call": case_first_call, "average_N1e6": case_average,
         "average_N1e6_reference": lambda: case_average(reference_scan=True),
         **{f"worst_case_N1e{k}": (lambda k=k: case_worst(10**k)) for k in (6, 7, 9)}}


def run_case(name, root=ROOT):
    """Run one case in a fresh process with ``root``'s copy of this script; return its dict."""
    out = subprocess.run([sys.executable, str(Path(root) / "benchmarks" / "bench_design.py"),
                          "--case", name], cwd=root, check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _show(name, r):
    print(f"{name}: " + ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()),
        flush=True)


def main(quick=False, reference_scan=False, before=None):
    import os
    res = {"load_average_at_start": os.getloadavg()}
    names = ["first_call", "worst_case_N1e6", "average_N1e6"]
    if not quick:
        names[2:2] = ["worst_case_N1e7", "worst_case_N1e9"]
    if before is not None:
        res["before"] = {"checkout": str(before)}
    for name in names:
        if before is not None:
            r = run_case(name, before)
            res["before"][name] = r
            _show(f"before {name}", r)
        r = run_case(name + ("_reference" if reference_scan and name == "average_N1e6"
                             else ""))
        res[name] = r
        _show(name, r)
    res["load_average_at_end"] = os.getloadavg()
    write("bench_design", res)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        print(json.dumps(CASES[sys.argv[2]]()))
    else:
        before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
        main(quick="--quick" in sys.argv, reference_scan="--reference" in sys.argv,
             before=before)
