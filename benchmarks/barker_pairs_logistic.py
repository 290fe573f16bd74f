"""Issue 17, part 4: per-decision errors of the Barker rules on the tempered logistic workload
of ``barker_presized_logistic.py``, both directions of each pair.

Pairs ``(theta, theta')`` are drawn from the Laplace approximation and the random-walk
proposal of the chain; each test decides ``--decisions`` times on the pair's l_i and on the
reversed pair's (``-l_i``) with :func:`validation.simulate_acceptance`, against Barker's
``S(Delta)``. What biases a chain's sds is the error's effect on the log ratio of forward and
backward acceptance, ``log a(theta, theta') - log a(theta', theta) = Delta + shift``
(``shift ~ e_f / S(Delta) - e_b / S(-Delta)``): a shift proportional to ``-Delta`` flattens
the target. The script fits ``shift = slope * Delta`` (weighted least squares over pairs);
for a near-Gaussian posterior the sds come out about ``1 / sqrt(1 + slope)`` times the exact.

``--variant`` separates the candidate causes on the same pairs: ``real`` (the l_i as they
are), ``sym`` (each l_i reflected about the mean with a random sign: no skewness, the same
kurtosis) and ``gauss`` (Gaussian l_i with the same mean and sd).

Run:  python benchmarks/barker_pairs_logistic.py --variant real --tests presized presized_m2
      python benchmarks/barker_pairs_logistic.py --quick
Writes benchmarks/results/barker_pairs_logistic_<variant>[_quick].json.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import machine, write  # noqa: E402
from barker_presized_logistic import workload  # noqa: E402

from samplers import BarkerTest, laplace_approximation  # noqa: E402
from validation import simulate_acceptance  # noqa: E402

TESTS = {
    "presized": BarkerTest(m=50, delta=None, stopping="presized"),
    "presized_m2": BarkerTest(m=50, delta=None, stopping="presized", margin=2.0),
    "presized_skew": BarkerTest(m=50, delta=None, stopping="presized", skew=True),
    "sequential": BarkerTest(m=50, delta=None),
    "sequential_skew": BarkerTest(m=50, delta=None, skew=True),
}


def summary(D, ef, sf, eb, sb, n):
    """Mean error, chi^2 per decision set and the fitted slope of the log-ratio shift."""
    Sf, Sb = special.expit(D), special.expit(-D)
    floor = np.sqrt(Sf * Sb / n)          # a pair whose decisions all agreed has se 0
    sf, sb = np.maximum(sf, floor), np.maximum(sb, floor)
    shift = ef / Sf - eb / Sb
    w = 1.0 / ((sf / Sf) ** 2 + (sb / Sb) ** 2)
    slope = float(np.sum(w * D * shift) / np.sum(w * D * D))
    slope_se = float(1.0 / np.sqrt(np.sum(w * D * D)))
    err = np.r_[ef, eb]
    return dict(mean_error=float(err.mean()),
                mean_error_se=float(np.sqrt(np.sum(sf**2) + np.sum(sb**2)) / err.size),
                mean_abs_error=float(np.mean(np.abs(err))),
                chi2_per_dof=float(np.mean(np.r_[ef / sf, eb / sb] ** 2)),
                slope=slope, slope_se=slope_se, sd_factor=1.0 / math.sqrt(1.0 + slope))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", choices=["real", "sym", "gauss"], default="real")
    parser.add_argument("--tests", nargs="*", default=["presized", "presized_m2"],
                        choices=sorted(TESTS))
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--max-delta", type=float, default=8.0,
                        help="pairs with |Delta| above this are left out of the fit")
    parser.add_argument("--quick", action="store_true", help="4 pairs x 2,000 decisions")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.decisions = 4, 2_000
    model = workload(20_000, 100.0, np.random.default_rng(2026))
    lap = laplace_approximation(model)
    mode, cov = np.asarray(lap.mode), np.asarray(lap.covariance)
    step = 2.38 / np.sqrt(model.dim) * np.sqrt(np.diag(cov))
    idx = np.arange(model.N)
    sim_rng = np.random.default_rng(11)
    rows = {name: [] for name in args.tests}
    pairs = []
    t0 = time.perf_counter()
    for p in range(args.pairs):
        rp = np.random.default_rng([7, p])
        theta = rp.multivariate_normal(mode, cov)
        l = model.loglik_ratio(theta, theta + step * rp.standard_normal(model.dim), idx)
        if args.variant == "gauss":
            l = l.mean() + l.std() * rp.standard_normal(l.size)
        elif args.variant == "sym":
            l = l.mean() + (l - l.mean()) * rp.choice([-1.0, 1.0], l.size)
        z = (l - l.mean()) / l.std()
        pairs.append((l.size * l.mean(), np.mean(z**3), np.mean(z**4)))
        for name in args.tests:
            f = simulate_acceptance(TESTS[name], l, n=args.decisions, rng=sim_rng)
            b = simulate_acceptance(TESTS[name], -l, n=args.decisions, rng=sim_rng)
            rows[name].append((f.delta, f.delta_se, b.delta, b.delta_se,
                               (f.rows_per_decision + b.rows_per_decision) / 2))
    pairs = np.array(pairs)
    keep = np.abs(pairs[:, 0]) < args.max_delta
    D = pairs[keep, 0]
    print(f"{args.variant} l_i: {args.pairs} pairs ({keep.sum()} with |Delta| < "
          f"{args.max_delta:g}) x {args.decisions:,} decisions each way; median |Delta| "
          f"{np.median(np.abs(D)):.2f}, |skewness| {np.median(np.abs(pairs[:, 1])):.2f}, "
          f"kurtosis {np.median(pairs[:, 2]):.1f}; {time.perf_counter() - t0:.0f} s; {machine()}")
    out = {"settings": vars(args), "pairs": pairs.tolist(), "rules": {}}
    for name in args.tests:
        a = np.array(rows[name])[keep]
        r = summary(D, a[:, 0], a[:, 1], a[:, 2], a[:, 3], args.decisions)
        r.update(test=repr(TESTS[name]), rows_per_decision=float(a[:, 4].mean()),
                 per_pair=np.array(rows[name]).tolist())
        out["rules"][name] = r
        print(f"{name:16s} rows {r['rows_per_decision']:7.1f}  mean error "
              f"{r['mean_error']:+.5f} ± {r['mean_error_se']:.5f}  mean |error| "
              f"{r['mean_abs_error']:.4f}  chi2/dof {r['chi2_per_dof']:.2f}  slope "
              f"{r['slope']:+.4f} ± {r['slope_se']:.4f}  (sd x {r['sd_factor']:.4f})")
    write(f"barker_pairs_logistic_{args.variant}" + ("_quick" if args.quick else ""), out)


if __name__ == "__main__":
    main()
