"""fit's heavy-tails gate on a row sample against the full data's: how often the sampled
kurtosis raised by 2 standard errors (``SampledTrial.kurtosis_upper``) covers each pair's
full-data excess kurtosis (``cover_pairs``; the estimate alone: ``cover_pairs_estimate``;
the median pair's: ``cover_median``), and how often the gate's decision (the median pair's
above ``HEAVY_KURTOSIS``) is the one the full data give (``gate_agrees``), with the share of
samples that stayed samples, the rows read and the CPU seconds of one summary.

Each data set is a logistic regression (intercept + 2 covariates from a normal, t(3), t(2)
or t(1.2); or ``rare_covariate_logistic``) at 2^18-2^20 rows, with fit's split: control
variates at the mode, :func:`samplers.heavy_rows` with ``sample_rows = 8 sqrt(N)`` (where its
cut does not stop, fit reads every row and the gate is exact: reported as such), the heavy
rows read exactly (:class:`samplers.ExactRows`) and 40 chained Laplace pairs summarised on
the rest by :meth:`design.TrialChain.from_row_sample` at its defaults, with fit's residual
scales (:func:`samplers.residual_scales`), once per sample seed. ``missed``: samples left
sampled whose median pair's raised kurtosis is below a tenth of the full data's (they drew
none of the rows carrying it); ``gate_missed``: samples whose gate decision is not the full
data's. With ``--before`` each sample also runs without the scales' check (``before_*``
columns, the same draws), ``fired`` counts the samples it changed and ``unseen_fourth_*``
gives the ratio it reads (the rows not drawn's sum of scale^4 over the sample's estimate).

    PYTHONPATH=$PWD python benchmarks/kurtosis_gate.py --seeds 30 --out /tmp/gate.json
    ... --min-rows 0        # the sample never grows for its fourth moment (as before)
    ... --before            # with and without the scales' check
"""

import argparse
import json
import math
import time

import numpy as np

from design import TrialChain
from samplers import (ControlVariates, ExactRows, GaussianPrior, LogisticRegression, heavy_rows,
                      residual_scales)
from samplers.datasets import rare_covariate_logistic
from validation.workflow.fit import HEAVY_KURTOSIS

KINDS = {
    "normal": lambda rng, shape: rng.standard_normal(shape),
    "t(3)": lambda rng, shape: rng.standard_t(3.0, size=shape),
    "t(2)": lambda rng, shape: rng.standard_t(2.0, size=shape),
    "t(1.2)": lambda rng, shape: rng.standard_t(1.2, size=shape),
}


def _newton_mode(X, y, prior_sd=10.0):
    theta = np.zeros(X.shape[1])
    for _ in range(100):
        p = 0.5 * (1.0 + np.tanh(0.5 * (X @ theta)))
        grad = X.T @ (y - p) - theta / prior_sd ** 2
        hess = (X * (p * (1.0 - p))[:, None]).T @ X + np.eye(X.shape[1]) / prior_sd ** 2
        step = np.linalg.solve(hess, grad)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-12:
            return theta
    raise RuntimeError("no mode")


def data(kind, N, seed):
    rng = np.random.default_rng(seed)
    if kind == "rare":
        X, y, _ = rare_covariate_logistic(N, rng=rng)
    else:
        X = np.column_stack([np.ones(N), KINDS[kind](rng, (N, 2))])
        eta = np.clip(X @ np.full(3, 0.3), -50, 50)
        y = (rng.random(N) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    return X, y


def _summary(got, full, prefix=""):
    """The coverage and gate columns of the samples ``got`` against the ``full`` trial."""
    upper = np.array([g.kurtosis_upper for g in got])
    est = np.array([g.trial.kurtosis for g in got])
    heavy = bool(np.median(full.kurtosis) > HEAVY_KURTOSIS)
    low = np.median(upper, axis=1) < np.median(full.kurtosis)
    out = dict(
        sampled=float(np.mean([g.sampled for g in got])),
        rows_read=float(np.median([g.rows_read for g in got])),
        cover_pairs=float(np.mean(upper >= full.kurtosis)),
        cover_pairs_estimate=float(np.mean(est >= full.kurtosis)),
        cover_median=float(np.mean(~low)),
        median_of_upper=float(np.median(np.median(upper, axis=1))),
        median_of_estimate=float(np.median(np.median(est, axis=1))),
        gate_agrees=float(np.mean((np.median(upper, axis=1) > HEAVY_KURTOSIS) == heavy)),
        gate_heavy=float(np.mean(np.median(upper, axis=1) > HEAVY_KURTOSIS)),
        # samples left sampled whose median pair's raised kurtosis is below a tenth of the
        # full data's (they drew none of the rows carrying it: they look like lighter data)
        missed=int(np.sum([g.sampled and np.median(g.kurtosis_upper)
                           < 0.1 * np.median(full.kurtosis) for g in got])),
        gate_missed=int(np.sum((np.median(upper, axis=1) > HEAVY_KURTOSIS) != heavy)))
    return {prefix + k: v for k, v in out.items()}


def case(kind, N, data_seed, seeds, n_pairs=40, before=False, **sample):
    X, y = data(kind, N, data_seed)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    cv = ControlVariates(model, center=_newton_mode(X, y))
    rows, exact = heavy_rows(cv, sample_rows=min(math.ceil(8 * math.sqrt(N)), N - 2))
    rng = np.random.default_rng(100 + data_seed)
    chol = np.linalg.cholesky(cv.laplace_covariance())
    thetas = cv.center.theta + rng.standard_normal((n_pairs + 1, cv.dim)) @ chol.T
    out = {"kind": kind, "N": N, "data_seed": data_seed, "heavy": int(rows.size)}
    split = ExactRows(cv, rows) if rows.size else cv
    t0 = time.process_time()
    full = TrialChain.from_model(split, thetas[:-1], thetas[1:], progress=False, workers=1)
    out["exact_cpu"] = time.process_time() - t0
    out["full_median_kurtosis"] = float(np.median(full.kurtosis))
    out["full_heavy"] = bool(np.median(full.kurtosis) > HEAVY_KURTOSIS)
    if exact is None:
        out["sampled"] = "cut does not stop: every pass exact"
        return out
    # the sample's exact rows other than the heavy ones, numbered among the rest's rows
    extra = exact[~np.isin(exact, rows)]
    on_rest = (extra - np.searchsorted(rows, extra)).astype(np.intp)
    rest_scales = np.delete(residual_scales(cv), rows)        # as fit passes them

    def run(**kw):
        got, cpu = [], 0.0
        for s in range(seeds):
            t0 = time.process_time()
            got.append(TrialChain.from_row_sample(split, thetas[:-1], thetas[1:], rng=s,
                                                  exact_rows=on_rest, progress=False,
                                                  workers=1, **sample, **kw))
            cpu += time.process_time() - t0
        return got, cpu / seeds

    got, cpu = run(scales=rest_scales)
    out.update(sample_cpu=cpu, **_summary(got, full))
    if before:      # the same samples without the check of the rows not drawn (as before)
        old, cpu_old = run(scales=rest_scales, shape_unseen=1e300)
        out.update(sample_cpu_before=cpu_old, **_summary(old, full, "before_"))
        out["fired"] = int(sum(g.rows_read != h.rows_read or g.sampled != h.sampled
                               for g, h in zip(got, old)))
        ratio = [h.unseen_fourth for h in old if h.sampled]
        if ratio:       # the unsampled rows' scale^4 over the sample's estimate
            out["unseen_fourth_median"] = float(np.median(ratio))
            out["unseen_fourth_max"] = float(np.max(ratio))
    spread = [np.median(g.fourth_moment_rows) for g in got if g.sampled]
    if spread:      # rows of the sample carrying the median pair's fourth moment
        out.update(fourth_rows_median=float(np.median(spread)),
                   fourth_rows_range=[float(np.min(spread)), float(np.max(spread))])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=30)
    p.add_argument("--kinds", default="normal,t(3),t(2),t(1.2),rare")
    p.add_argument("--sizes", default="262144,524288,1048576")
    p.add_argument("--start", type=int, default=None, help="the first sample's rows")
    p.add_argument("--se-tolerance", type=float, default=None)
    p.add_argument("--min-rows", type=float, default=None,
                   help="from_row_sample's shape_rows (0: never read more rows for the "
                        "fourth moment, as before)")
    p.add_argument("--before", action="store_true",
                   help="also run each sample without the check of the rows it did not "
                        "draw (shape_unseen): before_* columns, fired = samples it changed")
    p.add_argument("--data-seeds", default="1")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    sample = {k: v for k, v in (("start", args.start), ("se_tolerance", args.se_tolerance),
                                ("shape_rows", args.min_rows)) if v is not None}
    rows = []
    for kind in args.kinds.split(","):
        for N in map(int, args.sizes.split(",")):
            for ds in map(int, args.data_seeds.split(",")):
                r = case(kind, N, ds, args.seeds, before=args.before, **sample)
                rows.append(r)
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                  for k, v in r.items()}), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
