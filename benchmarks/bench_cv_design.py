"""The design with and without control variates: predicted against realised (issue 12, part 3).

Logistic regression, d = 10 + intercept, N(0, 10^2) prior, the Laplace-scaled random walk
(``RandomWalk.from_laplace``), N in ``--sizes``. For the plain model and for
``ControlVariates(model)`` (second-order Taylor proxy at the mode):

1. trial pairs: theta from the Laplace approximation N(mode, Sigma), theta' one walk step
   away; ``TrialChain.from_model`` (the wrapper's ratios: residuals);
2. ``design.optimize(trial, tolerance, test=...)`` for the Austere, Barker and confidence
   tests, and the ready test from ``from_design`` (Austere with Student-t thresholds,
   Algorithm 1);
3. realised on *fresh* pairs drawn the same way: ``--tests`` decisions of the real test
   per pair through ``sample`` with a proposal that flips between the pair's two points
   (so both directions are tested), giving the rows read and Delta = P(accept) - P_exact
   (MH's min(1, e^A) for Austere and confidence, Barker's S(A) for Barker) per direction,
   against ``design.evaluate`` at the same pairs; averages over directions are weighted by
   the number of decisions made in each; mean |Delta| is an over-estimate (binomial noise
   adds to it);
4. realised in a chain: ``--steps`` steps of the designed test from the mode, mean rows read
   per step.

Run:  python benchmarks/bench_cv_design.py [--sizes 100000 1000000] [--tolerance 0.01]
          [--pairs 40] [--fresh 10] [--tests 1000] [--steps 300] [--models plain cv]
          [--out cv_design]
Writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import math
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
    BarkerTest,
    ConfidenceTest,
    ControlVariates,
    Proposal,
    GaussianPrior,
    LogisticRegression,
    RandomWalk,
    sample,
)


D = 10




class PairFlip(Proposal):
    """Proposes ``b`` from ``a`` and ``a`` from ``b``: the real test's decisions at one pair,
    in both directions, through the ordinary chain loop (``sample``)."""

    def __init__(self, a, b):
        self.a, self.b = np.array(a, dtype=float), np.array(b, dtype=float)

    def propose(self, rng, view, batches, theta, pstate):
        target = self.b if np.array_equal(theta, self.a) else self.a
        return target.copy(), 0.0, pstate, 0


def pairs(cv, n, rng):
    cov = cv.laplace_covariance()
    L = np.linalg.cholesky(cov)
    d = cov.shape[0]
    theta = cv.center.theta + rng.standard_normal((n, d)) @ L.T
    step = (2.38 / math.sqrt(d)) * rng.standard_normal((n, d)) @ L.T
    return theta, theta + step


def ready_test(d):
    if d.test == "austere":
        return AustereTest.from_design(d, threshold="t")
    return BarkerTest.from_design(d) if d.test == "barker" else ConfidenceTest.from_design(d)


def settings(d):
    if d.test == "austere":
        return f"m={d.m}, eps={d.epsilon:g}"
    if d.test == "barker":
        return f"m={d.m}, delta={d.delta}"
    return f"b0={d.batch_size}, gamma={d.gamma:g}, delta={d.delta:g}"


def realised_on_pairs(model, test, thetas, news, n_tests, rng):
    """Per direction (a -> b and b -> a of each fresh pair): mean rows read, the realised
    Delta = P(accept) - P_exact and its binomial standard error, and the number of decisions."""
    N = model.N
    barker = isinstance(test, BarkerTest)
    rows, dhat, se, count = [], [], [], []
    for a, b in zip(thetas, news):
        A = N * float(np.mean(model.loglik_ratio(a, b, np.arange(N)))) + float(
            model.logprior(b) - model.logprior(a))
        chain = sample(model, test, PairFlip(a, b), a, n_tests, rng=rng)
        before = np.vstack([a[None, :], chain.samples[:-1]])
        forward = np.all(before == a, axis=1)
        for direction, sign in ((forward, 1.0), (~forward, -1.0)):
            k = int(direction.sum())
            exact = (1.0 / (1.0 + math.exp(-sign * A)) if barker
                     else math.exp(min(0.0, sign * A)))
            acc = chain.stats["accepted"][direction]
            rows.append(float(chain.stats["n_used"][direction].mean()) if k else math.nan)
            dhat.append(float(acc.mean()) - exact if k else math.nan)
            se.append(math.sqrt(max(exact * (1 - exact), 1.0 / max(k, 1)) / max(k, 1)))
            count.append(k)
    return np.array(rows), np.array(dhat), np.array(se), np.array(count)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--fresh", type=int, default=10)
    ap.add_argument("--tests", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--kinds", nargs="+", default=["austere", "barker", "confidence"])
    ap.add_argument("--models", nargs="+", default=["plain", "cv"], choices=["plain", "cv"])
    ap.add_argument("--out", default="cv_design", help="results/<out>.json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(20261123)
    out = []
    print(f"tolerance {args.tolerance}, {args.pairs} trial pairs, {args.fresh} fresh pairs x "
          f"{args.tests} real decisions, chains of {args.steps} steps")
    print("rows pred: the design's prediction (trial pairs); fresh: its prediction at the "
          "fresh pairs (both directions); real: the real test there; chain: rows per step "
          "of a random-walk chain; ratio = real / fresh.\nerr pred: the design's mean "
          "|Delta| (trial pairs); |D| fresh: predicted at the fresh pairs; |D| real, D real: "
          "realised there (|D| real includes the binomial noise); gap: largest "
          "|realised - predicted| per direction in standard errors")
    print(f"{'N':>9} {'model':>6} {'test':>10} {'settings':>28} {'rows pred':>10} "
          f"{'fresh':>10} {'rows real':>10} {'chain':>10} {'ratio':>6} {'err pred':>9} "
          f"{'|D| fresh':>9} {'|D| real':>9} {'D real':>16} {'gap':>6} {'design s':>8}")
    for N in args.sizes:
        X, y = cv_logistic_dataset(N, rng, D)
        plain = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
        cv = ControlVariates(plain)
        walk = RandomWalk.from_laplace(cv)
        th, nw = pairs(cv, args.pairs, rng)
        fth, fnw = pairs(cv, args.fresh, rng)
        for label, model in (("plain", plain), ("cv", cv)):
            if label not in args.models:
                continue
            t0 = time.perf_counter()
            trial = design.TrialChain.from_model(model, th, nw)
            t_trial = time.perf_counter() - t0
            # both directions of each fresh pair: (a, b) and (b, a)
            fresh = design.TrialChain.from_model(model, np.vstack([fth, fnw]),
                                                 np.vstack([fnw, fth]))
            for kind in args.kinds:
                t0 = time.perf_counter()
                try:
                    d = design.optimize(trial, args.tolerance, test=kind)
                except design.InfeasibleDesignError as exc:
                    print(f"{N:>9} {label:>6} {kind:>10}  infeasible: {exc}")
                    continue
                t_design = time.perf_counter() - t0
                test = ready_test(d)
                n_tests = args.tests if label == "cv" else max(50, args.tests // 5)
                chain = sample(model, test, walk, cv.center.theta, args.steps, rng=rng)
                chain_rows = float(chain.stats["n_used"].mean())
                pred = d.data_fraction * N
                f_err, f_frac = design.evaluate(d, fresh)   # the design at the fresh pairs
                rows, dhat, se, count = realised_on_pairs(model, test, fth, fnw, n_tests, rng)
                # realised per direction, in the order (a->b, b->a) per pair; fresh is
                # (all a->b, then all b->a)
                n_f = fth.shape[0]
                order = np.ravel(np.column_stack([np.arange(n_f), n_f + np.arange(n_f)]))
                f_err, f_frac = f_err[order], f_frac[order]
                ran = count > 0
                weights = count[ran] / count[ran].sum()
                pred_fresh = float(np.sum(weights * f_frac[ran]) * N)
                real_rows = float(np.sum(weights * rows[ran]))
                gap_z = (dhat[ran] - f_err[ran]) / se[ran]
                row = dict(N=N, model=label, test=kind, settings=settings(d),
                           rows_predicted=pred, rows_predicted_fresh=pred_fresh,
                           rows_predicted_se=getattr(d, "data_fraction_se", 0.0) * N,
                           rows_realised_pairs=real_rows,
                           rows_realised_chain=chain_rows,
                           data_fraction_predicted=d.data_fraction,
                           data_fraction_realised_pairs=real_rows / N,
                           data_fraction_realised_chain=chain_rows / N,
                           error_predicted=d.error,
                           error_predicted_fresh=float(np.mean(np.abs(f_err))),
                           delta_predicted_fresh=float(np.mean(f_err)),
                           # averages over decisions (each direction weighted by how
                           # often the flip chain made it)
                           mean_abs_delta_predicted_fresh=float(
                               np.sum(weights * np.abs(f_err[ran]))),
                           mean_abs_delta_realised=float(np.sum(weights * np.abs(dhat[ran]))),
                           mean_delta_realised=float(np.sum(weights * dhat[ran])),
                           mean_delta_se=float(np.sqrt(np.sum((weights * se[ran]) ** 2))),
                           max_abs_gap_in_se=float(np.max(np.abs(gap_z))),
                           tolerance=args.tolerance, acceptance=chain.acceptance_rate,
                           trial_seconds=t_trial, design_seconds=t_design,
                           summary=str(d))
                out.append(row)
                print(f"{N:>9} {label:>6} {kind:>10} {settings(d):>28} {pred:>10.1f} "
                      f"{pred_fresh:>10.1f} {real_rows:>10.1f} {chain_rows:>10.1f} "
                      f"{real_rows / pred_fresh:>6.2f} {d.error:>9.2g} "
                      f"{row['mean_abs_delta_predicted_fresh']:>9.2g} "
                      f"{row['mean_abs_delta_realised']:>9.2g} "
                      f"{row['mean_delta_realised']:>+8.4f}±{row['mean_delta_se']:.4f} "
                      f"{row['max_abs_gap_in_se']:>6.1f} {t_design:>8.1f}",
                      flush=True)
    write(args.out, dict(args=vars(args), rows=out))


if __name__ == "__main__":
    main()
