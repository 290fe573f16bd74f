"""Song et al. (2020), section 4 and Table 1: eSGLD variable selection vs reversible-jump MH.

Ten data sets from ``y = X beta + N(0, 1)``, N = 50,000, p = 2001, beta_1..5 = 1,
beta_6..8 = -1, the rest 0, covariates with mutual correlation 0.5 (shared factor,
``samplers.datasets.correlated_regression``). eSGLD with n = 200, m = 10, 5,000 iterations,
2,000 burn-in, constant step 1e-6, run twice: with one reversible-jump proposal per model
(``moves=1``, the literal reading of Algorithm 1) and with ``moves=10``. The baselines,
full-data reversible-jump MH (``ExactTest``) and reversible-jump MH with the sequential test
of Korattikara et al. (``AustereTest``, section 6.3), run on the first ``--rj-N`` rows of the
same data sets (same p), beside eSGLD on those rows, all timed in the same run (CPU seconds of
this process; numba compilation is done before timing). Prints the table beside the paper's
and writes ``benchmarks/results/esgld.json``.

    python benchmarks/bench_esgld.py                      # the full study
    python benchmarks/bench_esgld.py --datasets 3 --rj-datasets 2   # a shorter run
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

from design import reference_tables  # noqa: E402
from samplers import AustereTest, ExactTest  # noqa: E402
from samplers.datasets import correlated_regression  # noqa: E402
from samplers.esgld import ReversibleJump, SparseLinearRegression, esgld_select, rjmcmc_select  # noqa: E402

COEF = [1.0] * 5 + [-1.0] * 3

#: Song et al. (2020), Table 1: mean (sd) over 10 data sets; CPU in minutes for one data set.
PAPER = reference_tables.SONG_TABLE1


def timed(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def record(fit, beta, cpu):
    s = fit.scores(beta)
    return {"fsr": s.fsr, "nsr": s.nsr, "mse1": s.mse1, "mse0": s.mse0, "cpu_s": cpu,
            "selected": fit.selected.tolist(), "rows_read": fit.rows_read,
            "final_mean_model_size": float(fit.model_size[-100:].mean())}


def warm_up():
    """Compile the numba kernels before anything is timed."""
    X, y, _ = correlated_regression(600, 12, [1.0], rng=0)
    esgld_select(X, y, 1.0, n=50, n_iter=20, burn_in=5, step_size=1e-5, rng=0)
    model = SparseLinearRegression(X, y, 1.0)
    for test in (ExactTest(), AustereTest(m=100, epsilon=0.05)):
        rjmcmc_select(model, test, ReversibleJump(), n_iter=20, rng=0)


def main(args) -> dict:
    t0 = time.process_time()
    warm_up()
    compile_s = time.process_time() - t0
    runs: dict[str, list] = {}
    for d in range(args.datasets):
        (X, y, beta), gen_s = timed(lambda: correlated_regression(args.N, args.p, COEF, rng=args.seed + d))
        print(f"data set {d}: generated in {gen_s:.1f} s CPU", flush=True)
        for moves in args.moves:
            fit, cpu = timed(lambda: esgld_select(
                X, y, 1.0, n=args.n, m=args.m, moves=moves, step_size=args.step, n_iter=args.iters,
                burn_in=args.burn, rng=1000 + d))
            runs.setdefault(f"eSGLD moves={moves}, N={args.N}", []).append(record(fit, beta, cpu))
            print(f"  eSGLD moves={moves:<3d} N={args.N}: {runs[f'eSGLD moves={moves}, N={args.N}'][-1]}", flush=True)
        if d < args.rj_datasets:
            Xs, ys = X[: args.rj_N], y[: args.rj_N]
            step = args.step * args.N / args.rj_N  # keep step * N constant
            fit, cpu = timed(lambda: esgld_select(
                Xs, ys, 1.0, n=args.n, m=args.m, moves=max(args.moves), step_size=step,
                n_iter=args.iters, burn_in=args.burn, rng=2000 + d))
            runs.setdefault(f"eSGLD moves={max(args.moves)}, N={args.rj_N}", []).append(record(fit, beta, cpu))
            model = SparseLinearRegression(Xs, ys, 1.0)
            proposal = ReversibleJump(birth_sd=1.0, update_sd=args.rj_update_sd)
            for name, test in (("RJMH (ExactTest)", ExactTest()),
                               ("RJ-Austere (m=500, eps=0.01)", AustereTest(m=500, epsilon=0.01))):
                fit, cpu = timed(lambda: rjmcmc_select(model, test, proposal, n_iter=args.rj_iters,
                                                       burn_in=args.rj_iters // 4, rng=3000 + d))
                key = f"{name}, N={args.rj_N}"
                runs.setdefault(key, []).append(record(fit, beta, cpu))
                print(f"  {key}: {runs[key][-1]}", flush=True)
        del X, y

    print(f"\nSong et al. (2020) Table 1 setting: p = {args.p}, eSGLD n = {args.n}, m = {args.m}, "
          f"{args.iters} iterations ({args.burn} burn-in), step {args.step:g} at N = {args.N};\n"
          f"reversible jump: {args.rj_iters} transitions ({args.rj_iters // 4} burn-in), birth sd 1, "
          f"update sd {args.rj_update_sd}. Mean (sd) over data sets; CPU seconds per data set "
          f"(numba compilation, {compile_s:.1f} s, excluded).\n")
    header = f"{'method':44s} {'sets':>4s} {'FSR':>13s} {'NSR':>13s} {'MSE1':>21s} {'MSE0':>21s} {'CPU s':>14s}"
    print(header)
    print("-" * len(header))

    def cell(mean, sd, fmt):
        return f"{mean:{fmt}} ({sd:{fmt}})"

    for name, row in PAPER.items():
        print(f"{'paper: ' + name + ', N=50000':44s} {10:4d} {cell(*row['fsr'], '.2f'):>13s} "
              f"{cell(*row['nsr'], '.3f'):>13s} {cell(*row['mse1'], '.2e'):>21s} "
              f"{cell(*row['mse0'], '.2e'):>21s} {row['cpu_min'] * 60:14.0f}")
    summary = {}
    for name, rows in runs.items():
        arr = {k: np.array([r[k] for r in rows]) for k in ("fsr", "nsr", "mse1", "mse0", "cpu_s")}
        summary[name] = {k: {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0}
                         for k, v in arr.items()}
        s = summary[name]
        print(f"{'ours: ' + name:44s} {len(rows):4d} {cell(s['fsr']['mean'], s['fsr']['sd'], '.2f'):>13s} "
              f"{cell(s['nsr']['mean'], s['nsr']['sd'], '.3f'):>13s} "
              f"{cell(s['mse1']['mean'], s['mse1']['sd'], '.2e'):>21s} "
              f"{cell(s['mse0']['mean'], s['mse0']['sd'], '.2e'):>21s} "
              f"{cell(s['cpu_s']['mean'], s['cpu_s']['sd'], '.1f'):>14s}")
    payload = {"settings": vars(args), "compile_cpu_s": compile_s, "paper_table1": dict(PAPER),
               "summary": summary, "runs": runs}
    write(args.out, payload)
    return payload


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--N", type=int, default=50_000)
    parser.add_argument("--p", type=int, default=2001)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--m", type=int, default=10)
    parser.add_argument("--moves", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--iters", type=int, default=5000)
    parser.add_argument("--burn", type=int, default=2000)
    parser.add_argument("--step", type=float, default=1e-6)
    parser.add_argument("--rj-N", type=int, default=5000)
    parser.add_argument("--rj-datasets", type=int, default=10)
    parser.add_argument("--rj-iters", type=int, default=20_000)
    parser.add_argument("--rj-update-sd", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=2020)
    parser.add_argument("--out", default="esgld", help="results/<out>.json")
    main(parser.parse_args())
