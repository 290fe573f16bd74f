"""Firefly Monte Carlo against regular MH on a logistic regression shaped like the paper's.

Maclaurin & Adams (2014), section 4.1 and Table 1: MNIST 7 vs 9, 50 principal components
plus a bias, N = 12,214, a Gaussian prior, random-walk MH tuned to acceptance 0.234 for each
algorithm, z by implicit MH resampling (q_db = 0.1 untuned, 0.01 MAP-tuned). Here the rows are
synthetic: standard-normal features, true coefficients N(0, 8^2/50) (a linear predictor with
sd 8, so the classes overlap little, as MNIST 7s and 9s do: 93% accuracy at the mode, and
the untuned bound leaves about half the points bright, as in the paper), labels drawn from
the model; a linear program confirms the classes are not separable.

Part 1 (Table 1): regular MH (ExactTest), untuned FlyMC (xi = 1.5) and MAP-tuned FlyMC (MAP
from map_estimate: 300 Newton and averaged stochastic-approximation steps on 1,000 rows), all
started at the MAP estimate (the paper started from the prior; starting at the mode removes
the long random-walk burn-in of every method, which the paper excluded from its figures). Likelihood queries per
iteration, ArviZ bulk ESS per 1,000 iterations and per likelihood query (mean and minimum
over the 51 coefficients), speedup in ESS per query relative to regular MH, and wall time.

A sweep over q_db for MAP-tuned FlyMC shows where its queries come from.

Part 2 (scaling): MAP-tuned FlyMC at N and 10 N with the same dimension: bright count,
queries and time per iteration, with q_db fixed and with q_db ~ 1/N (constant dark
proposals), beside regular MH's time per iteration.

Run:  python benchmarks/bench_firefly.py [--iters 30000] [--burn 3000] [--quick]
Writes benchmarks/results/firefly.json. Timings share the machine with other jobs: compare
ratios within one run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

from samplers import (  # noqa: E402
    ExactTest,
    GaussianPrior,
    ImplicitZ,
    JaakkolaJordanBound,
    LogisticRegression,
    RandomWalk,
    firefly,
    import_arviz,
    map_estimate,
    sample,
)
from samplers.datasets import logistic_regression  # noqa: E402
from design import reference_tables  # noqa: E402

az = import_arviz()  # ArviZ quiet, with the toolkit's fixes (samplers/_arviz.py)

N_PAPER, D, SCALE, PRIOR_SD = 12_214, 50, 8.0, 2.0
PAPER = reference_tables.MACLAURIN_TABLE1  # Table 1, MNIST: queries/iteration, ESS/1000 it., speedup


def make_model(N, seed=7):
    X, y, _ = logistic_regression(N, D, rng=seed, scale=SCALE)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, PRIOR_SD))


def separable(model) -> bool:
    """Is there w with s_i x_i . w >= 1 for every row (a linear program)?"""
    s = 2 * model.y - 1
    res = linprog(np.zeros(model.dim), A_ub=-(s[:, None] * model.X), b_ub=-np.ones(model.N),
                  bounds=[(None, None)] * model.dim, method="highs")
    return res.status == 0


def tune(run, scale, rounds=12, iters=500, target=0.234):
    """Random-walk step size for acceptance ~ target: Robbins-Monro on log scale (pilot runs)."""
    for k in range(rounds):
        acc = run(scale, iters, 100 + k).acceptance_rate
        scale *= math.exp(3.0 * (acc - target) / math.sqrt(k + 1))
    return scale


class _GradientRows:
    """A model that counts the row gradients and likelihoods asked of it."""

    def __init__(self, model):
        self.model, self.N, self.dim, self.rows = model, model.N, model.dim, 0

    def grad_loglik(self, theta, idx):
        self.rows += len(idx)
        return self.model.grad_loglik(theta, idx)

    def loglik(self, theta, idx):
        self.rows += len(idx)
        return self.model.loglik(theta, idx)

    def logprior(self, theta):
        return self.model.logprior(theta)

    def grad_logprior(self, theta):
        return self.model.grad_logprior(theta)


def ess(chain, burn):
    idata = az.convert_to_dataset(chain.samples[None, burn:])
    return az.ess(idata, method="bulk").x.values


def table1(args):
    model = make_model(N_PAPER)
    t0 = time.perf_counter()
    mode = map_estimate(model, n_steps=300, batch_size=1000, rng=0)
    t_map = time.perf_counter() - t0
    t0 = time.perf_counter()
    bounds = {"untuned FlyMC": JaakkolaJordanBound(model, xi=1.5)}
    t_untuned = time.perf_counter() - t0
    t0 = time.perf_counter()
    bounds["MAP-tuned FlyMC"] = JaakkolaJordanBound.map_tuned(model, mode)
    t_tuned = time.perf_counter() - t0
    q_db = {"untuned FlyMC": 0.1, "MAP-tuned FlyMC": 0.01}
    print(f"data: N = {model.N}, d = {model.dim}, separable: {separable(model)}, "
          f"accuracy at the MAP estimate {np.mean((model.X @ mode > 0) == model.y):.3f}")
    counter = _GradientRows(model)
    map_estimate(counter, n_steps=300, batch_size=1000, rng=0)
    print(f"setup: MAP estimate {t_map:.2f} s (300 steps x 1000 rows; {counter.rows:,} row "
          f"gradients = {counter.rows / model.N:.0f} N), bounds {t_untuned:.2f} s / "
          f"{t_tuned:.2f} s (one pass each)\n")

    def runner(name):
        if name == "regular MH":
            return lambda s, n, seed: sample(model, ExactTest(), RandomWalk(s), mode, n, rng=seed)
        return lambda s, n, seed: firefly(model, bounds[name], RandomWalk(s), mode, n, rng=seed,
                                          z_update=ImplicitZ(q_db[name]))

    rows = {}
    for name in PAPER:
        run = runner(name)
        scale = tune(run, 0.01)
        chain = run(scale, args.iters, 1)
        used = chain.stats["n_used"][args.burn:]
        e = ess(chain, args.burn)
        n_kept = args.iters - args.burn
        rows[name] = {
            "step_size": scale,
            "acceptance": float(chain.stats["accepted"][args.burn:].mean()),
            "queries_per_iter": float(used.mean()),
            "bright_per_iter": float(chain.stats["n_bright"][args.burn:].mean())
            if "n_bright" in chain.stats else float(model.N),
            "ess_mean_per_1000": float(e.mean() / n_kept * 1000),
            "ess_min_per_1000": float(e.min() / n_kept * 1000),
            "ess_mean_per_query": float(e.mean() / used.sum()),
            "ess_min_per_query": float(e.min() / used.sum()),
            "us_per_iter": 1e6 * chain.wall_time / args.iters,
            "ess_mean_per_s": float(e.mean() / (chain.wall_time * n_kept / args.iters)),
        }
        print(f"  {name}: step {scale:.4f}, acceptance {rows[name]['acceptance']:.3f}, "
              f"{rows[name]['us_per_iter']:.0f} us/iter")
    base = rows["regular MH"]
    for r in rows.values():
        r["speedup_mean"] = r["ess_mean_per_query"] / base["ess_mean_per_query"]
        r["speedup_min"] = r["ess_min_per_query"] / base["ess_min_per_query"]
        r["wall_speedup"] = r["ess_mean_per_s"] / base["ess_mean_per_s"]

    print(f"\nTable 1 ({args.iters} iterations, first {args.burn} dropped; ESS = ArviZ bulk, "
          "mean [min] over 51 coefficients)")
    head = (f"{'':17s}{'queries/iter':>13s}{'bright':>8s}{'ESS/1000 it':>15s}{'speedup':>15s}"
            f"{'ESS/s x':>9s}   | paper: {'queries':>7s}{'ESS/1000':>9s}{'speedup':>8s}")
    print(head)
    for name, r in rows.items():
        pq, pe, ps = PAPER[name]
        print(f"{name:17s}{r['queries_per_iter']:13,.0f}{r['bright_per_iter']:8,.0f}"
              f"{r['ess_mean_per_1000']:8.1f} [{r['ess_min_per_1000']:4.1f}]"
              f"{r['speedup_mean']:8.1f} [{r['speedup_min']:4.1f}]{r['wall_speedup']:9.1f}"
              f"   |        {pq:7,d}{pe:9.1f}{ps:8.1f}")
    tuned = rows["MAP-tuned FlyMC"]
    print(f"\nMAP-tuned: bright fraction {tuned['bright_per_iter'] / model.N:.4f}, "
          f"queries {tuned['queries_per_iter'] / model.N:.4f} of N "
          f"(q_db N = {0.01 * (model.N - tuned['bright_per_iter']):.0f} of them dark proposals)")
    print(f"\nMAP-tuned FlyMC, other q_db (same step size {tuned['step_size']:.4f}):")
    print(f"{'q_db':>8s}{'queries/iter':>13s}{'bright':>8s}{'ESS/1000 it':>13s}{'speedup':>9s}")
    sweep = []
    for q in (0.002, 0.005, 0.01, 0.05):
        chain = firefly(model, bounds["MAP-tuned FlyMC"], RandomWalk(tuned["step_size"]), mode,
                        args.iters, rng=1, z_update=ImplicitZ(q))
        used = chain.stats["n_used"][args.burn:]
        e = ess(chain, args.burn)
        row = {"q_db": q, "queries_per_iter": float(used.mean()),
               "bright_per_iter": float(chain.stats["n_bright"][args.burn:].mean()),
               "ess_mean_per_1000": float(e.mean() / (args.iters - args.burn) * 1000),
               "speedup_mean": float(e.mean() / used.sum()) / base["ess_mean_per_query"]}
        sweep.append(row)
        print(f"{q:8.3f}{row['queries_per_iter']:13,.0f}{row['bright_per_iter']:8.1f}"
              f"{row['ess_mean_per_1000']:13.1f}{row['speedup_mean']:9.1f}")
    return {"N": model.N, "d": model.dim, "scale": SCALE, "prior_sd": PRIOR_SD,
            "separable": separable(model), "map_seconds": t_map,
            "map_row_gradients_and_likelihoods": counter.rows, "q_db": q_db, "rows": rows,
            "q_db_sweep": sweep,
            "paper": {k: dict(zip(("queries", "ess_per_1000", "speedup"), v))
                      for k, v in PAPER.items()}}


def scaling(args, step_at_paper_n):
    out = []
    print("\nScaling: MAP-tuned FlyMC at two N (same d); time and queries per iteration")
    print(f"{'N':>9s}{'q_db':>10s}{'bright':>8s}{'queries':>9s}{'us/iter':>9s}{'MH ms/iter':>12s}")
    for N in (N_PAPER, 10 * N_PAPER):
        model = make_model(N, seed=11)
        mode = map_estimate(model, n_steps=300, batch_size=max(1000, -(-25 * N // 300)), rng=0)
        bound = JaakkolaJordanBound.map_tuned(model, mode)
        step = step_at_paper_n * math.sqrt(N_PAPER / N)  # posterior sd ~ 1/sqrt(N)
        mh = sample(model, ExactTest(), RandomWalk(step), mode, args.mh_iters, rng=2)
        for q_db in sorted({0.01, 0.01 * N_PAPER / N}, reverse=True):
            chain = firefly(model, bound, RandomWalk(step), mode, args.scale_iters, rng=3,
                            z_update=ImplicitZ(q_db))
            burn = args.scale_iters // 5
            row = {"N": N, "q_db": q_db,
                   "bright": float(chain.stats["n_bright"][burn:].mean()),
                   "queries": float(chain.stats["n_used"][burn:].mean()),
                   "us_per_iter": 1e6 * chain.wall_time / args.scale_iters,
                   "mh_ms_per_iter": 1e3 * mh.wall_time / args.mh_iters}
            out.append(row)
            print(f"{N:9,d}{q_db:10.5f}{row['bright']:8.1f}{row['queries']:9.1f}"
                  f"{row['us_per_iter']:9.1f}{row['mh_ms_per_iter']:12.2f}")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=30_000)
    parser.add_argument("--burn", type=int, default=3_000)
    parser.add_argument("--scale-iters", type=int, default=5_000)
    parser.add_argument("--mh-iters", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.iters, args.burn, args.scale_iters, args.mh_iters = 3000, 500, 1000, 50
    t1 = table1(args)
    sc = scaling(args, t1["rows"]["MAP-tuned FlyMC"]["step_size"])
    write("firefly", {"settings": vars(args), "table1": t1, "scaling": sc})


if __name__ == "__main__":
    main()
