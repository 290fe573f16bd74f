"""Exact minibatch MH on logistic regression: SMH-1/2, MH-SS-1/2, TunaMH against exact MH.

For each d in {10, 30} (plus an intercept column) and N in {10^5, 10^6, 10^7} (10^7 as a
memmap in a temporary folder, skipped with --no-memmap or when the disk is short):
expected batch E[B] (the Poisson mean lambda + C phi, averaged over steps), rows actually
read per step, acceptance rate, min bulk ESS per second and per row read. The proposal is
the random walk with the Laplace covariance at the mode scaled by 2.38^2 / d for every
sampler except TunaMH (whose batch grows with the step; it runs at 0.3^2 / d, with chi = 1e-4
and with chi = 4 / (C E||Delta||), large enough for its acceptance to approach MH's). Also the
control-variate wrapper (issue 12) under the Austere test designed by ``design.optimize`` for
tolerance 0.01 on 100 trial pairs, the Austere and Barker tests with fixed settings, and
the penalty test (``PenaltyTest(m=20)``: 20 rows per step, approximately exact where the
residuals' variance is small).

Usage::

    python benchmarks/bench_exact_minibatch.py --size small          # N = 10^5, 10^6; d = 10
    python benchmarks/bench_exact_minibatch.py --size full           # everything
    python benchmarks/bench_exact_minibatch.py --d 10 --N 100000 1000000 --steps 20000

Writes ``benchmarks/results/exact_minibatch.json``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import warnings
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common

from _common import write
from design import TrialChain, exact_design, exact_expected_batch, optimize
from samplers import (
    AustereTest,
    BarkerTest,
    ControlVariates,
    ExactTest,
    GaussianPrior,
    LogisticRegression,
    RandomWalk,
    ScalableSubsamplingTest,
    SMHTest,
    TunaMHTest,
    sample,
)
from samplers.mhtests.penalty import PenaltyTest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def make_data(N, d, rng, folder=None):
    """X = [1, N(0, I_d)], beta ~ N(0, 1/d) (as in MH-SS's simulations), y ~ Bernoulli."""
    beta = rng.normal(0.0, 1.0, d + 1) / np.sqrt(d + 1)
    if folder is None:
        X = np.empty((N, d + 1))
        y = np.empty(N)
    else:
        X = np.lib.format.open_memmap(Path(folder) / "X.npy", mode="w+", shape=(N, d + 1))
        y = np.lib.format.open_memmap(Path(folder) / "y.npy", mode="w+", shape=(N,))
    chunk = 1 << 18
    for s in range(0, N, chunk):
        e = min(s + chunk, N)
        X[s:e, 0] = 1.0
        X[s:e, 1:] = rng.normal(size=(e - s, d))
        y[s:e] = rng.random(e - s) < 1.0 / (1.0 + np.exp(-(X[s:e] @ beta)))
    if folder is not None:
        X.flush()
        y.flush()
    return X, y


def summarise(chain, name, seconds_setup=0.0):
    idata = chain.to_arviz()
    moves = int(np.sum(chain.stats["accepted"]))
    # a chain that (almost) never moves has no meaningful ESS (ArviZ would report n)
    ess = float(np.min(az.ess(idata, method="bulk").theta.values)) if moves >= 10 else 0.0
    rows = float(chain.stats["n_used"].sum())
    out = {
        "sampler": name,
        "steps": int(chain.samples.shape[0]),
        "acceptance": chain.acceptance_rate,
        "rows_per_step": rows / chain.samples.shape[0],
        "E_B": float(np.mean(chain.stats["rate"])) if "rate" in chain.stats else None,
        "full_data_steps": (float(np.mean(chain.stats["full_data"]))
                            if "full_data" in chain.stats else None),
        "min_bulk_ess": ess,
        "accepted_moves": moves,
        "wall_s": chain.wall_time,
        "ess_per_s": ess / chain.wall_time,
        "ess_per_row": ess / rows if rows > 0 else float("inf"),
        "ms_per_step": 1e3 * chain.wall_time / chain.samples.shape[0],
    }
    eb = "-" if out["E_B"] is None else f"{out['E_B']:.3g}"
    print(f"  {name:<28} E[B] {eb:>8}  rows/step {out['rows_per_step']:>10.3g}  "
          f"acc {out['acceptance']:.3f}  minESS {ess:7.1f}  ESS/s {out['ess_per_s']:9.3g}  "
          f"ESS/row {out['ess_per_row']:9.3g}  {out['ms_per_step']:.3f} ms/step", flush=True)
    return out


def designed_austere(cv, cov, h, n_pairs, rng):
    """``AustereTest.from_design(optimize(trial, tolerance=0.01))`` on the control-variate
    model, the trial from ``n_pairs`` pairs of the Laplace approximation and the walk."""
    chol = np.linalg.cholesky(cov)
    dim = cov.shape[0]
    thetas = cv.center.theta + rng.normal(size=(n_pairs, dim)) @ chol.T
    news = thetas + h * rng.normal(size=(n_pairs, dim)) @ chol.T
    t0 = time.perf_counter()
    des = optimize(TrialChain.from_model(cv, thetas, news), tolerance=0.01)
    print(f"  designed Austere on CV: m = {des.m}, epsilon = {des.epsilon:g}, predicted data use "
          f"{des.data_fraction:.3g} of N ({time.perf_counter() - t0:.1f} s for trial and design)",
          flush=True)
    return AustereTest.from_design(des, threshold="t"), des


def run_case(N, d, steps, exact_steps, rng, folder=None, only=None):
    t0 = time.perf_counter()
    X, y = make_data(N, d, rng, folder)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    cvs = {k: ControlVariates(model, order=k) for k in (1, 2)}
    cv = cvs[2]
    setup = time.perf_counter() - t0
    start = cv.center.theta
    cov = cv.laplace_covariance()
    dim = d + 1
    walk = RandomWalk((2.38**2 / dim) * cov)
    tuna_walk = RandomWalk((0.3**2 / dim) * cov)
    # TunaMH keeps MH's acceptance only when its extra rate dominates: lambda >> C M, i.e.
    # chi >> 1 / (C E||Delta||) (Zhang et al. 2020, section 4); chi = 4 / (C E||Delta||).
    c_tuna = TunaMHTest(chi=1.0).prepare(model).C
    step_norm = 0.3 / np.sqrt(dim) * np.sqrt(np.trace(cov))
    chi_tuna = 4.0 / (c_tuna * step_norm)
    print(f"N = {N:,}, d = {d} (+1): data and mode {setup:.1f} s, centre offset "
          f"{cv.center.offset:.2g}", flush=True)
    # designed scales (design.exact_design): c_bar from the bound pass, tr Sigma from Laplace
    trace, trace_sq = float(np.trace(cov)), float(np.trace(cov @ cov))
    designed = {}
    # pairs from the Laplace approximation and the 2.38/sqrt(d) walk, 4,000 random rows: the
    # fraction kappa of the bound the residuals use (SMH's acceptance loss per expected row)
    chol = np.linalg.cholesky(cov)
    pair_rng = np.random.default_rng(7)
    pairs = []
    for _ in range(50):
        th = start + chol @ pair_rng.normal(size=dim)
        pairs.append((th, th + 2.38 / np.sqrt(dim) * chol @ pair_rng.normal(size=dim)))
    rows = pair_rng.integers(0, N, 4000)
    for name, target, test in [("SMH-1", cvs[1], SMHTest(1)),
                               ("MH-SS-1", cvs[1], ScalableSubsamplingTest(1))]:
        rem = test.prepare(target).rem
        kappa = rem.tightness(pairs, rows) if name.startswith("SMH") else 0.0
        des = exact_design(order=rem.order, N=N, d=dim, c_mean=rem.c_sum / N, trace=trace,
                           trace_sq=trace_sq, chi=test.chi, kappa=kappa)
        designed[name] = (test, des)
        print(f"  design {name}: kappa {kappa:.3g}, h sqrt(d) = {des.h * np.sqrt(dim):.3f}, "
              f"predicted E[B] "
              f"{des.expected_batch:.3g}, acceptance {des.acceptance:.3f}", flush=True)
    pred2 = {}
    for k in (1, 2):
        rem = SMHTest(k).prepare(cvs[k]).rem
        pred2[k] = exact_expected_batch(2.38 / np.sqrt(dim), order=k, N=N, c_mean=rem.c_sum / N,
                                        trace=trace, trace_sq=trace_sq)
    print(f"  predicted E[B] at h = 2.38/sqrt(d): order 1 {pred2[1]:.3g}, order 2 {pred2[2]:.3g}")
    results = []
    want = (lambda name: True) if not only else (lambda name: any(o in name for o in only))
    austere_designed = (designed_austere(cv, cov, 2.38 / np.sqrt(dim), 100, rng)
                        if want("designed Austere") else (None, None))
    cases = [
        ("exact MH", model, ExactTest(), walk, exact_steps),
        ("SMH-1", cvs[1], SMHTest(1), walk, steps),
        ("SMH-2", cv, SMHTest(2), walk, steps),
        ("MH-SS-1", cvs[1], ScalableSubsamplingTest(1), walk, steps),
        ("MH-SS-2", cv, ScalableSubsamplingTest(2), walk, steps),
        ("CV + Penalty(m=20)", cv, PenaltyTest(m=20), walk, steps),
        ("TunaMH (chi=1e-4)", model, TunaMHTest(chi=1e-4), tuna_walk, max(steps // 20, 200)),
        (f"TunaMH (chi={chi_tuna:.2g})", model, TunaMHTest(chi=chi_tuna), tuna_walk,
         max(steps // 20, 200)),
        ("SMH-1, designed h", cvs[1], designed["SMH-1"][0],
         RandomWalk(designed["SMH-1"][1].h ** 2 * cov), steps),
        ("MH-SS-1, designed h", cvs[1], designed["MH-SS-1"][0],
         RandomWalk(designed["MH-SS-1"][1].h ** 2 * cov), steps),
        ("CV + designed Austere (tol 0.01)", cv, austere_designed[0], walk, steps // 4),
        ("CV + Austere(m=100, 0.01)", cv, AustereTest(m=100, epsilon=0.01), walk, steps // 4),
        ("CV + Barker(m=100)", cv, BarkerTest(m=100), walk, steps // 4),
    ]
    for name, target, test, proposal, n in cases:
        if n <= 0 or test is None or not want(name):
            continue
        if hasattr(test, "prepare"):
            t1 = time.perf_counter()
            test.prepare(target)  # the alias table: one O(N) pass, reported as set-up
            prep_s = time.perf_counter() - t1
        else:
            prep_s = 0.0
        chain = sample(target, test, proposal, start, n, rng=rng.spawn(1)[0])
        res = summarise(chain, name)
        res["setup_s"] = prep_s
        results.append(res)
    return {"N": N, "d": d, "setup_s": setup, "offset": cv.center.offset, "samplers": results,
            "predicted_E_B_at_2.38": pred2,
            "designs": {k: vars(v[1]) for k, v in designed.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=["small", "full"], default="small")
    ap.add_argument("--d", type=int, nargs="*")
    ap.add_argument("--N", type=float, nargs="*")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--exact-steps", type=int)
    ap.add_argument("--no-memmap", action="store_true", help="skip N = 10^7 (memmap)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--name", default="exact_minibatch", help="results file name")
    ap.add_argument("--only", nargs="*", help="run only samplers whose name contains one of these")
    args = ap.parse_args(argv)
    ds = args.d or ([10] if args.size == "small" else [10, 30])
    Ns = [int(n) for n in (args.N or ([1e5, 1e6] if args.size == "small" else [1e5, 1e6, 1e7]))]
    steps = args.steps or (10_000 if args.size == "small" else 30_000)
    exact_steps = args.exact_steps if args.exact_steps is not None else 300
    rng = np.random.default_rng(args.seed)
    cases = []
    for d in ds:
        for N in Ns:
            if N >= 10**7:
                if args.no_memmap:
                    print(f"skipping N = {N:,} (--no-memmap)")
                    continue
                tmp = Path(tempfile.mkdtemp(prefix="exact_mb_"))
                need = N * (d + 2) * 8 * 1.2
                if shutil.disk_usage(tmp).free < need:
                    print(f"skipping N = {N:,}: {need / 1e9:.1f} GB of disk needed")
                    shutil.rmtree(tmp)
                    continue
                try:
                    cases.append(run_case(N, d, steps, min(exact_steps, 20), rng, tmp, args.only))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            else:
                ex = exact_steps if N <= 10**5 else max(exact_steps // 3, 50)
                cases.append(run_case(N, d, steps, ex, rng, only=args.only))
    ratios = {}
    for d in ds:
        by_n = {c["N"]: {s["sampler"]: s for s in c["samplers"]} for c in cases if c["d"] == d}
        if len(by_n) >= 2:
            lo, hi = min(by_n), max(by_n)
            for name in ("SMH-1", "SMH-2", "MH-SS-1", "MH-SS-2"):
                a, b = by_n[lo].get(name), by_n[hi].get(name)
                if a and b and a["E_B"]:
                    ratios[f"d={d} {name} E[B] N={hi:.0e}/N={lo:.0e}"] = b["E_B"] / a["E_B"]
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    write(args.name, {"size": args.size, "steps": steps, "cases": cases,
                              "E_B_ratios": ratios})


if __name__ == "__main__":
    main()
