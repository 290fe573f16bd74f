"""Speed and memory of the design engine, one run each (timings on a shared machine are noisy).

Each figure is the wall time and the process CPU time (summed over threads); on a loaded
machine the CPU time is the steadier measure of the work done. Each case runs in its own
process, so its peak RSS is its own; the 1-minute load average before each case is recorded.

* ``first_call``: compile or cache load of the kernel (first call); ``sequential_error`` at
  N = 10^6, m = 50, eps = 0.001 (20,000 stages): mu_std = 0 alone and 100 values of mu_std;
* ``worst``: the worst-case design on the default grid (10 m x 9 eps) at N = 10^6, 10^7 and
  10^9 (``--worst-sizes``; 2 threads): the default search (bisection in epsilon, a few cells
  per m) and at N = 10^6 also the full grid; at N = 10^6 the full grid through the exact
  programme (every stage, no early stop: the engine before issue 15) with the largest
  difference over the cells both evaluated; at N = 10^7 four cells against the exact
  programme;
* ``average``: the average design on a trial chain of ``--pairs`` (100) pairs of a logistic
  regression with ``--rows`` (10^6) rows (pairs around the mode, d = 5): the trial-pair
  statistics (one chunked pass for all pairs, ``TrialChain.from_model``; the
  compiled ``LogisticRegression.loglik_many``), then the default grid search (a screen of
  every cell, the full programme at the few it cannot rule out). With ``--reference`` also
  the references it replaces, in the same process: the two exact passes
  (``TrialChain.from_model(..., two_pass=True)``) and the full grid (``search="full"``), with
  the agreement (largest relative differences of the trial fields; differences of the
  chosen design's error and data fraction, over the cells both evaluated, and of the
  screened values); with ``--per-pair`` the former one-pass-per-pair scan of the means.

``--before DIR`` also runs the same cases with an older checkout's own copy of this script
(``DIR/benchmarks/bench_design.py``, e.g. ``git archive main | tar -x -C DIR``), one process
per case, interleaved with this checkout's (before, after, before, ...; ``--repeat`` times),
so both see the same machine load; the results go under ``"before"``. The older script is
called as ``bench_design.py --case NAME`` (its default sizes only).

Writes ``benchmarks/results/bench_design.json`` for a run of every case, else
``bench_design_<cases>.json`` (``--out`` overrides).
Run: ``python benchmarks/bench_design.py [--only {first_call,worst,average} ...] [--quick]
[--rows N] [--pairs P] [--worst-sizes 6 7 9] [--reference] [--per-pair] [--before DIR]
[--repeat K] [--out NAME]`` (``--quick``: N = 10^6 only for the worst case).
"""

from __future__ import annotations

import argparse
import json
import os
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


def _max_rel(a, b):
    """Largest |a - b| / |b| over the entries (0 where they are equal); None if either is
    None."""
    if a is None or b is None:
        return None
    a, b = np.asarray(a, float), np.asarray(b, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(a == b, 0.0, np.abs(a - b) / np.abs(b))
    return float(np.max(rel))


def _two_pass_trial(model, thetas, news):
    """TrialChain.from_model with the two exact passes (the statistics before the one pass)."""
    from design import TrialChain

    return TrialChain.from_model(model, thetas, news, progress=False, two_pass=True)


def case_average(rows=1_000_000, pairs=100, reference=False, per_pair=False):
    from _design_refs import reference as load_reference

    from design import TrialChain, optimize
    from samplers.models import LogisticRegression

    lp = load_reference("logistic_pairs")
    N = int(rows)
    X, y = lp.make_data(N, 5, rng=1)
    thetas, news = lp.laplace_pairs(lp.LogisticModel(X, y), int(pairs), rng=2)
    model = LogisticRegression(X, y)          # flat prior: c0 differs, mu and sigma do not
    _warm_up()
    TrialChain.from_model(model, thetas[:2], news[:2], progress=False)   # compile or load
    trial, t_trial, c_trial = timed(TrialChain.from_model, model, thetas, news,
                                    progress=False)
    res = dict(rows=N, pairs=int(pairs), trial_chain_seconds=t_trial,
               trial_chain_cpu_seconds=c_trial)
    if per_pair:
        mu_old, t_old, c_old = timed(_per_pair_scan, model, thetas, news)
        res.update(per_pair_scan_seconds=t_old, per_pair_scan_cpu_seconds=c_old,
                   max_abs_diff_mu=float(np.max(np.abs(mu_old - trial.mu))))
    d, wall, cpu = timed(optimize, trial, 0.05, workers=2, progress=False)
    res.update(grid_seconds=wall, grid_cpu_seconds=cpu, total_seconds=t_trial + wall,
               total_cpu_seconds=c_trial + cpu,
               design=[d.m, d.epsilon, d.error, d.data_fraction],
               cells_full_programme=int(np.sum(~np.isnan(d.error_grid))))
    if reference:
        ref_trial, t_ref, c_ref = timed(_two_pass_trial, model, thetas, news)
        res.update(reference_trial_chain_seconds=t_ref,
                   reference_trial_chain_cpu_seconds=c_ref,
                   trial_max_rel_diff={f: _max_rel(getattr(trial, f), getattr(ref_trial, f))
                                       for f in ("mu", "sigma", "c0", "skewness", "kurtosis",
                                                 "abs_z1", "abs_z3", "max_abs")})
        full, w_full, c_full = timed(optimize, ref_trial, 0.05, workers=2, progress=False,
                                     search="full")
        done = ~np.isnan(d.error_grid)
        res.update(
            reference_grid_seconds=w_full, reference_grid_cpu_seconds=c_full,
            reference_total_seconds=t_ref + w_full,
            reference_total_cpu_seconds=c_ref + c_full,
            reference_design=[full.m, full.epsilon, full.error, full.data_fraction],
            same_design=[d.m, d.epsilon] == [full.m, full.epsilon],
            abs_diff_error=abs(d.error - full.error),
            abs_diff_data=abs(d.data_fraction - full.data_fraction),
            max_abs_diff_error_cells=float(np.max(np.abs(d.error_grid[done]
                                                         - full.error_grid[done]))),
            max_abs_diff_data_cells=float(np.max(np.abs(d.data_grid[done]
                                                        - full.data_grid[done]))),
            max_abs_diff_screen_error=float(np.max(np.abs(d.screen_error_grid
                                                          - full.error_grid))),
            max_abs_diff_screen_data=float(np.max(np.abs(d.screen_data_grid
                                                         - full.data_grid))))
    res["peak_rss_mb"] = peak_rss_mb()
    return res


def case(name, args):
    """Run case ``name`` (``first_call``, ``worst_case_N1e<k>``, ``average_N1e6``) here."""
    if name == "first_call":
        return case_first_call()
    if name.startswith("worst_case_N1e"):
        return case_worst(10 ** int(name[len("worst_case_N1e"):]))
    if name.startswith("average"):
        return case_average(rows=args.rows, pairs=args.pairs, reference=args.reference,
                            per_pair=args.per_pair)
    raise ValueError(f"unknown case {name!r}")


def run_case(name, root=ROOT, extra=()):
    """Run one case in a fresh process with ``root``'s copy of this script; return its dict."""
    out = subprocess.run([sys.executable, str(Path(root) / "benchmarks" / "bench_design.py"),
                          "--case", name, *extra], cwd=root, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _show(name, r):
    print(f"{name}: " + ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()),
        flush=True)


def parse(argv=None):
    parser = argparse.ArgumentParser(
        description="Speed of the design engine (see the module docstring).")
    parser.add_argument("--only", nargs="+", choices=("first_call", "worst", "average"),
                        default=["first_call", "worst", "average"],
                        help="cases to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="worst case at N = 10^6 only")
    parser.add_argument("--worst-sizes", nargs="+", type=int, default=[6, 7, 9],
                        metavar="K", help="worst-case N = 10^K (default: 6 7 9)")
    parser.add_argument("--rows", type=int, default=1_000_000,
                        help="rows of the average case's data (default: 10^6)")
    parser.add_argument("--pairs", type=int, default=100,
                        help="trial pairs of the average case (default: 100)")
    parser.add_argument("--reference", action="store_true",
                        help="average case: also the two-pass statistics and the full grid, "
                             "with the agreement")
    parser.add_argument("--per-pair", action="store_true",
                        help="average case: also the former one-pass-per-pair scan")
    parser.add_argument("--before", metavar="DIR",
                        help="also run an older checkout's cases, interleaved")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each case (interleaved with --before; default: 1)")
    parser.add_argument("--out", help="results file name, without .json")
    parser.add_argument("--case", help=argparse.SUPPRESS)    # one case, in this process
    return parser.parse_args(argv)


def main(args):
    names = []
    if "first_call" in args.only:
        names.append("first_call")
    if "worst" in args.only:
        names += [f"worst_case_N1e{k}" for k in ([6] if args.quick else args.worst_sizes)]
    if "average" in args.only:
        names.append("average_N1e6")
    default_size = args.rows == 1_000_000 and args.pairs == 100
    extra = ["--rows", str(args.rows), "--pairs", str(args.pairs)]
    extra += ["--reference"] * args.reference + ["--per-pair"] * args.per_pair
    res = {"load_average_at_start": os.getloadavg(), "argv": sys.argv[1:]}
    if args.before is not None:
        res["before"] = {"checkout": str(args.before)}
    for name in names:
        for rep in range(args.repeat):
            key = name if args.repeat == 1 else f"{name}_run{rep + 1}"
            if args.before is not None and (default_size or not name.startswith("average")):
                load = os.getloadavg()[0]
                r = dict(run_case(name, args.before), load_average_1min_before=load)
                res["before"][key] = r
                _show(f"before {key}", r)
            load = os.getloadavg()[0]
            r = dict(run_case(name, extra=extra), load_average_1min_before=load)
            res[key] = r
            _show(key, r)
    res["load_average_at_end"] = os.getloadavg()
    everything = set(args.only) == {"first_call", "worst", "average"} and not args.quick
    write(args.out or ("bench_design" if everything else
                       "bench_design_" + "_".join(args.only) + "_quick" * args.quick), res)


if __name__ == "__main__":
    arguments = parse()
    if arguments.case is not None:
        print(json.dumps(case(arguments.case, arguments)))
    else:
        main(arguments)
