"""Heavy rows read exactly (issue 23, part 3) on the rare-covariate workload.

Data: :func:`samplers.datasets.rare_covariate_logistic` (N = 2 x 10^5, d = 5, a binary
covariate active in 40 rows, 6% base rate), Gaussian prior sd 10. Control variates at the
mode; the heavy rows (:func:`samplers.heavy_rows`) go to :class:`samplers.ExactRows`. For
the split and for the plain control variates, as ``validation.fit`` does it: 40 trial pairs
(theta ~ Laplace, theta' one Laplace walk step away), ``design.optimize`` at the tolerance,
the simulated verdict (``validation.clt_check(design=...)``) on 10 of them. Then chains with
the Laplace random walk from the mode: the designed Austere test on the split, the designed
test on the control variates, SMH-2 (``SMHTest(order=2)``) on the control variates, and
exact MH (``ExactTest``) on the plain model; rows read per step (for the split: the test's
rows plus the heavy rows, read in every decision), ms per step, acceptance, min bulk ESS per
second, and the error of posterior means, sds and 5% / 95% quantiles (in posterior sds)
against self-normalised importance sampling on all rows (Student-t(5) around the Laplace
approximation, covariance x 1.5).

Usage::

    python benchmarks/bench_heavy_rows.py                  # the defaults below
    python benchmarks/bench_heavy_rows.py --N 200000 --steps 20000 --smh-steps 5000 --exact-steps 1000

Writes ``benchmarks/results/heavy_rows.json``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common

import design
import validation
from _common import write
from samplers import (AustereTest, BarkerTest, ConfidenceTest, ControlVariates, ExactRows,
                      ExactTest, GaussianPrior, LogisticRegression, RandomWalk, SMHTest,
                      check_model, sample)
from samplers.datasets import rare_covariate_logistic

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

READY = {"austere": AustereTest, "barker": BarkerTest, "confidence": ConfidenceTest}


def reference(model, cv, draws, rng):
    """Self-normalised importance sampling on all rows: (draws, weights, ESS)."""
    view, _ = check_model(model, cv.center.theta)
    S = 1.5 * cv.laplace_covariance()
    L = np.linalg.cholesky(S)
    d = cv.dim
    z = rng.standard_normal((draws, d))
    w = np.sqrt(5.0 / rng.chisquare(5.0, draws))
    theta = cv.center.theta + (z @ L.T) * w[:, None]
    q = np.linalg.solve(L, (theta - cv.center.theta).T)
    logq = -0.5 * (5.0 + d) * np.log1p(np.sum(q ** 2, axis=0) / 5.0)
    lw = np.array([view.full_loglik(t) + model.logprior(t) for t in theta]) - logq
    wt = np.exp(lw - lw.max())
    wt /= wt.sum()
    return theta, wt, 1.0 / float(np.sum(wt ** 2))


def weighted_quantile(x, w, q):
    order = np.argsort(x)
    c = np.cumsum(w[order])
    return float(x[order][np.searchsorted(c, q * c[-1])])


def accuracy(samples, ref, idata=None):
    theta, wt, _ = ref
    mean = wt @ theta
    sd = np.sqrt(wt @ (theta - mean) ** 2)
    out = {"mean": [], "sd": [], "q05": [], "q95": []}
    for j in range(theta.shape[1]):
        s = samples[:, j]
        out["mean"].append(abs(s.mean() - mean[j]) / sd[j])
        out["sd"].append(abs(s.std() - sd[j]) / sd[j])
        out["q05"].append(abs(np.quantile(s, 0.05) - weighted_quantile(theta[:, j], wt, 0.05))
                          / sd[j])
        out["q95"].append(abs(np.quantile(s, 0.95) - weighted_quantile(theta[:, j], wt, 0.95))
                          / sd[j])
    result = {k: float(max(v)) for k, v in out.items()}
    if idata is not None:     # the mean errors in Monte Carlo standard errors (ArviZ's, from ESS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mcse = az.mcse(idata, method="mean").theta.values
        result["mean_in_mcse"] = float(np.max(np.abs(samples.mean(axis=0) - wt @ theta) / mcse))
    return result


def designed(model, thetas, news, tolerance, seed):
    """Trial pairs -> design -> simulated verdict, as validation.fit does it (timed)."""
    t0 = time.perf_counter()
    trial = design.TrialChain.from_model(model, thetas, news, progress=False)
    t1 = time.perf_counter()
    plan = design.optimize(trial, tolerance)
    t2 = time.perf_counter()
    verdict = None
    if plan.test == "austere":
        clt = validation.clt_check(model, (thetas[:10], news[:10]), design=plan, n_sim=20_000,
                                   n_paths=2000, search=False, rng=seed, progress=False)
        a = clt.acceptance
        verdict = {"passed": bool(clt.passed), "mean_abs_simulated": a.mean_abs_simulated,
                   "se": a.mean_abs_simulated_se, "mean_abs_gaussian": a.mean_abs_gaussian}
    t3 = time.perf_counter()
    return plan, {
        "test": plan.test, "m": int(getattr(plan, "m", 0) or 0),
        "epsilon": float(getattr(plan, "epsilon", float("nan")) or float("nan")),
        "rows_predicted": float(plan.data_fraction * model.N), "error_predicted": plan.error,
        "max_abs_skewness": float(np.max(np.abs(trial.skewness))),
        "max_kurtosis": float(np.max(trial.kurtosis)),
        "verdict": verdict,
        "seconds": {"trial": t1 - t0, "design": t2 - t1, "verdict": t3 - t2}}


def run(name, model, test, walk, theta0, steps, seed, extra_rows, ref):
    sample(model, test, walk, theta0, 50, rng=seed + 1, progress=False)   # compile, warm
    t0 = time.perf_counter()
    chain = sample(model, test, walk, theta0, steps, rng=seed, progress=False)
    wall = time.perf_counter() - t0
    rows = float(np.mean(chain.stats["n_used"])) + extra_rows
    idata = chain.to_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ess = float(np.min(az.ess(idata, method="bulk").theta.values))
    out = {"steps": steps, "seconds": wall, "ms_per_step": 1e3 * wall / steps,
           "rows_per_step": rows, "acceptance": float(np.mean(chain.stats["accepted"])),
           "min_bulk_ess": ess, "ess_per_second": ess / wall,
           "accuracy_in_sd": accuracy(chain.samples, ref, idata) if ess >= 200 else None}
    print(f"{name:34s} {rows:10,.1f} rows/step {out['ms_per_step']:8.3f} ms/step  "
          f"acc {out['acceptance']:.3f}  ESS {ess:7.0f}  ESS/s {out['ess_per_second']:8.1f}"
          + (f"  max err mean {out['accuracy_in_sd']['mean']:.3f} sd "
             f"{out['accuracy_in_sd']['sd']:.3f} q05 {out['accuracy_in_sd']['q05']:.3f} q95 "
             f"{out['accuracy_in_sd']['q95']:.3f} (mean: {out['accuracy_in_sd']['mean_in_mcse']:.1f} "
             "MCSE)" if out["accuracy_in_sd"] else ""))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--N", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--smh-steps", type=int, default=5000)
    p.add_argument("--exact-steps", type=int, default=1000)
    p.add_argument("--tolerance", type=float, default=0.01)
    p.add_argument("--reference-draws", type=int, default=20_000)
    args = p.parse_args(argv)
    load = os.getloadavg()[0]
    X, y, _ = rare_covariate_logistic(args.N, rng=args.seed)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    t0 = time.perf_counter()
    cv = ControlVariates(model)
    t1 = time.perf_counter()
    split = ExactRows(cv, "auto")
    t2 = time.perf_counter()
    K = split.n_exact
    print(f"N = {args.N:,}, d = {cv.dim}; heavy rows: {K} (rare covariate in "
          f"{int(np.sum(X[split.rows, 3]))} of them); control variates {t1 - t0:.2f} s, "
          f"heavy_rows {t2 - t1:.2f} s; load {load:.1f}")
    rng = np.random.default_rng(args.seed + 1)
    cov = cv.laplace_covariance()
    f = np.linalg.cholesky(cov)
    d = cv.dim
    thetas = cv.center.theta + rng.standard_normal((40, d)) @ f.T
    news = thetas + (2.38 / math.sqrt(d)) * rng.standard_normal((40, d)) @ f.T
    plans, designs = {}, {}
    for name, m in (("split", split), ("cv", cv)):
        plans[name], designs[name] = designed(m, thetas, news, args.tolerance, args.seed + 2)
        print(f"design on {name}: {designs[name]}")
    ref = reference(model, cv, args.reference_draws, np.random.default_rng(args.seed + 3))
    print(f"reference: importance sampling, {args.reference_draws} draws, ESS {ref[2]:.0f}")
    walk = RandomWalk.from_laplace(cv)
    theta0 = cv.center.theta
    chains = {
        "split + designed test": run(
            f"ExactRows + {plans['split'].test}", split,
            READY[plans["split"].test].from_design(plans["split"]), walk, theta0, args.steps,
            args.seed + 4, K, ref),
        "cv + designed test": run(
            f"ControlVariates + {plans['cv'].test}", cv,
            READY[plans["cv"].test].from_design(plans["cv"]), walk, theta0, args.steps,
            args.seed + 5, 0, ref),
        "cv + SMH-2": run("ControlVariates + SMHTest(order=2)", cv, SMHTest(order=2), walk,
                          theta0, args.smh_steps, args.seed + 6, 0, ref),
        "exact MH": run("exact MH (ExactTest, plain model)", model, ExactTest(), walk, theta0,
                        args.exact_steps, args.seed + 7, 0, ref),
    }
    base = chains["exact MH"]
    for name, c in chains.items():
        c["speedup_vs_exact_ms_per_step"] = base["ms_per_step"] / c["ms_per_step"]
        c["speedup_vs_exact_ess_per_second"] = c["ess_per_second"] / base["ess_per_second"]
    print("\nESS per second relative to exact MH: " + ", ".join(
        f"{k} {v['speedup_vs_exact_ess_per_second']:.1f}x" for k, v in chains.items()))
    write("heavy_rows", {"args": vars(args), "load_at_start": load,
                         "load_at_end": os.getloadavg()[0], "heavy_rows": K,
                         "setup_seconds": {"control_variates": t1 - t0, "heavy_rows": t2 - t1},
                         "reference_ess": ref[2], "designs": designs, "chains": chains})


if __name__ == "__main__":
    main()
