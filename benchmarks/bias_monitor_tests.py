"""Issue 17, part 3: the bias monitor of BarkerTest and ConfidenceTest against simulation.

A logistic regression whose first covariate is a standardized lognormal(0, 1) (skewness
about 6, so the Barker test's normality error is measurable), chains of the sequential
Barker rule (``delta=None``, the authors' rule), the presized rule and the confidence
sampler, each run step by step with ``samplers.mh_step`` so that its proposals are kept.
At ``--pairs`` of each chain's pairs the real test is run ``--reps`` times on the pair's real
l_i (``validation.simulate_acceptance``: the engine's own rule and draw) and

    Delta = P_test(accept) - P_target(accept),

``P_target = S(N mu + c)`` (Barker's logistic) or ``min(1, exp(N mu + c))`` (MH), is compared
with the monitor's estimate (``test.decision_errors``) at the same decisions: the mean signed
error over the pairs (the systematic part, which the per-pair noise averages out) and the
mean |Delta| (raw, and with each pair's sampling variance removed,
``sqrt(max(d^2 - se^2, 0))``). The confidence test, which reads nearly every row of this
data, is repeated at most 2,000 times per pair.

Run:  python benchmarks/bias_monitor_tests.py           # N = 30,000, 600 steps, 40 pairs
      python benchmarks/bias_monitor_tests.py --quick   # N = 10,000, 200 steps, 10 pairs
Writes benchmarks/results/bias_monitor_tests[_quick].json.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import chain_with_pairs, machine, write  # noqa: E402

from samplers import (  # noqa: E402
    BarkerTest, ConfidenceTest, GaussianPrior, LogisticRegression, RandomWalk)
from validation import simulate_acceptance  # noqa: E402


def skewed_logistic(N, rng):
    rng = np.random.default_rng(rng)
    X = rng.normal(size=(N, 3))
    z = rng.lognormal(0.0, 1.0, N)
    X[:, 0] = (z - z.mean()) / z.std()
    X[:, -1] = 1.0
    theta = np.array([0.8, -0.5, 0.3])
    y = (rng.random(N) < special.expit(X @ theta)).astype(float)
    return X, y, theta


def simulated(view, test, theta, theta_new, c, reps, rng):
    """The real test's Delta at one pair from ``reps`` decisions, its SE and rows read."""
    l = view.ratio(theta, theta_new, np.arange(view.N))
    C = float(view.range(theta, theta_new)[1]) if isinstance(test, ConfidenceTest) else None
    r = simulate_acceptance(test, l, log_const=c, n=reps, C=C, rng=rng)
    return r.delta, r.delta_se, r.rows_per_decision


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--reps", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.steps, args.pairs, args.reps = 10_000, 200, 10, 20_000
    X, y, theta = skewed_logistic(args.rows, 3)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    proposal = RandomWalk(1.0 / math.sqrt(args.rows))
    cases = {"barker sequential m=50": BarkerTest(m=50, delta=None),
             "barker presized m=50": BarkerTest(m=50, delta=None, stopping="presized"),
             "barker delta=0.5": BarkerTest(m=100),
             "confidence delta=0.05": ConfidenceTest(delta=0.05, batch_size=100)}
    print(f"N {args.rows}, {args.steps} steps, {args.pairs} pairs x {args.reps} decisions; "
          f"{machine()}", flush=True)
    out = {"settings": vars(args), "machine": machine(), "cases": {}}
    rng = np.random.default_rng(7)
    for name, test in cases.items():
        view, pairs, stats = chain_with_pairs(model, test, proposal, theta, args.steps, 11)
        est = test.decision_errors(stats, view.N)
        picks = np.sort(rng.choice(args.steps, size=min(args.pairs, args.steps), replace=False))
        # the confidence test reads (nearly) every row here: fewer repetitions keep it short
        reps = min(args.reps, 2000) if isinstance(test, ConfidenceTest) else args.reps
        sim = np.array([simulated(view, test, *pairs[k], stats["log_const"][k], reps, rng)
                        for k in picks])
        d, se = sim[:, 0], sim[:, 1]
        signed_est = test.decision_errors(stats, view.N)   # |.| estimates; signed below
        if isinstance(test, BarkerTest):
            from design import barker_decision_errors
            c = stats["log_const"][picks]
            signed_est = barker_decision_errors(
                stats["mean"][picks], stats["var_delta"][picks], stats["skew"][picks],
                stats["batch"][picks], stats["n_used"][picks], c, N=view.N, sigma=test.sigma,
                fpc=test.fpc, stopping=test.stopping, absolute=False)
        else:
            signed_est = signed_est[picks] * np.nan
        r = out["cases"][name] = {
            "rows_per_step": float(stats["n_used"].mean()),
            "monitor_mean_abs_chain": float(np.mean(est)),
            "monitor_mean_abs_pairs": float(np.mean(est[picks])),
            "monitor_mean_signed_pairs": float(np.nanmean(signed_est)) if np.any(
                np.isfinite(signed_est)) else None,
            "simulated_mean_signed_pairs": float(d.mean()),
            "simulated_mean_signed_se": float(np.sqrt(np.sum(se**2)) / len(se)),
            "simulated_mean_abs_pairs": float(np.mean(np.abs(d))),
            "simulated_mean_abs_noise_corrected": float(np.mean(np.sqrt(np.maximum(
                d**2 - se**2, 0.0)))),
            "simulated_per_pair_se_mean": float(se.mean()),
        }
        print(f"{name:24s} rows/step {r['rows_per_step']:7.0f}  monitor |D| chain "
              f"{r['monitor_mean_abs_chain']:.2e} pairs {r['monitor_mean_abs_pairs']:.2e}  "
              f"simulated |D| {r['simulated_mean_abs_pairs']:.2e} (noise-corrected "
              f"{r['simulated_mean_abs_noise_corrected']:.2e}, per-pair se "
              f"{r['simulated_per_pair_se_mean']:.1e})  signed: monitor "
              f"{r['monitor_mean_signed_pairs']} simulated {r['simulated_mean_signed_pairs']:+.2e}"
              f" +- {r['simulated_mean_signed_se']:.1e}", flush=True)
    write("bias_monitor_tests_quick" if args.quick else "bias_monitor_tests", out)


if __name__ == "__main__":
    main()
