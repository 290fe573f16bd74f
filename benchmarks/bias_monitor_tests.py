"""Issue 17, part 3: the Barker test's bias monitor against simulation of the real test.

A logistic regression whose first covariate is a standardized lognormal(0, 1) (skewness
about 6, so the Barker test's normality error is measurable), chains of the sequential
Barker rule (``delta=None``, the authors' rule, m = 50), the default ``delta = 0.5``
(m = 100) and the presized rule, each run step by step with ``samplers.mh_step`` so that
its proposals are kept. At ``--pairs`` of each chain's pairs the error

    Delta = P_test(accept) - S(N mu + c)

is simulated with ``--reps`` batches of the real stopping rule on the pair's real l_i, the
acceptance draw integrated out (``_barker_sim.barker_pair_error``: Rao-Blackwellised, with a
martingale control variate; the first ``--checks`` pairs are also simulated by repeating the
real decision, ``validation.simulate_acceptance``, and the z of the two is printed), and
compared with the monitor's estimate (``design.barker_decision_errors``) at the decisions
the chain made there: the mean |Delta| over the pairs (simulated: each pair's sampling
variance removed, ``sqrt(max(d^2 - se^2, 0))``), their ratio with its standard error (from
the simulation's noise; the pairs are common to both), and the signed means. The monitor's
series evaluated at each pair's population moments instead of one batch's
(``population_series``) separates the derivation's error from the plug-in's (chi2 of
population series vs simulation over the pairs). The presized rule (errors ~1e-3) is only
compared with the real test repeated, at the noise of that simulation.

Run:  python benchmarks/bias_monitor_tests.py           # N = 30,000, 300 steps, 30 pairs
      python benchmarks/bias_monitor_tests.py --quick   # N = 10,000, 200 steps, 20 pairs
Writes benchmarks/results/bias_monitor_tests[_quick].json (with the command and the load).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's packages
from _barker_sim import barker_pair_error  # noqa: E402
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


def population_series(test, l, c):
    """The monitor's series (``design.barker_decision_errors``' Notes) at the pair's
    population moments instead of one batch's: ``E e_tau S'(Delta)`` at ``n*`` (where
    ``E s^2 = sigma^2``) plus the fixed-batch terms with the excess kurtosis, written out
    here independently of the package."""
    N = l.size
    V = float(l.var())
    mu3 = float(np.mean((l - l.mean()) ** 3))
    kappa = float(np.mean((l - l.mean()) ** 4)) / V**2 - 3.0
    Delta = N * float(l.mean()) + c
    b = N * N * V / (test.sigma**2 + N * V)               # n*
    if b <= test.m or b >= N:
        return float("nan")
    p = special.expit(Delta)
    d1 = p * (1 - p)
    d3 = d1 * (1 - 6 * p + 6 * p * p)
    d4 = d1 * (1 - 2 * p) * (1 - 12 * p + 12 * p * p)
    f = 1.0 - b / N
    s2 = N * N * V * N / (N - 1.0) * f / b
    cubic = N**3 * mu3 * f / b**2 * ((1 - 2 * b / N) / 6 - f / 2)
    quartic = s2 * s2 * (1 / (4 * (b - 1)) - kappa / (12 * b))
    shift = -N * mu3 * f / (b * V)
    return float(shift * d1 + cubic * d3 + quartic * d4)


def barker_case(view, test, pairs, stats, picks, reps, checks, rng):
    """Monitor vs the Rao-Blackwellised simulation at the picked pairs of a sequential
    Barker chain; the first ``checks`` pairs also against the real test repeated."""
    from design import barker_decision_errors

    est = test.decision_errors(stats, view.N)
    signed = barker_decision_errors(
        stats["mean"], stats["var_delta"], stats["skew"], stats["batch"], stats["n_used"],
        stats["log_const"], N=view.N, sigma=test.sigma, fpc=test.fpc, stopping=test.stopping,
        m=test.m, absolute=False)
    sim, pop, real = [], [], []
    for j, k in enumerate(picks):
        theta, theta_new = pairs[k]
        c = float(stats["log_const"][k])
        l = view.ratio(theta, theta_new, np.arange(view.N))
        sim.append(barker_pair_error(test, l, c, reps, int(rng.integers(2**31))))
        pop.append(population_series(test, l, c))
        if j < checks:
            r = simulate_acceptance(test, l, log_const=c, n=5 * reps, rng=rng)
            real.append((r.delta, r.delta_se, sim[-1][0], sim[-1][1]))
    sim = np.array(sim)
    d, se = sim[:, 0], sim[:, 1]
    pop = np.array(pop)
    e = signed[picks]
    true_abs = np.sqrt(np.maximum(d**2 - se**2, 0.0))      # |Delta| less its noise
    sim_abs, sim_abs_se = float(true_abs.mean()), float(np.sqrt(np.sum(se**2)) / len(se))
    mon_abs = float(np.abs(e).mean())
    fin = np.isfinite(pop)
    real = np.array(real).reshape(-1, 4)
    return {
        "rows_per_step": float(stats["n_used"].mean()),
        "pairs": len(picks),
        "monitor_mean_abs_chain": float(np.mean(est)),
        "monitor_mean_abs_pairs": mon_abs,
        "simulated_mean_abs_pairs": sim_abs,
        "simulated_mean_abs_se": sim_abs_se,
        "ratio_monitor_to_simulated": mon_abs / sim_abs,
        "ratio_se": mon_abs / sim_abs**2 * sim_abs_se,
        "monitor_mean_signed_pairs": float(e.mean()),
        "simulated_mean_signed_pairs": float(d.mean()),
        "simulated_mean_signed_se": sim_abs_se,
        "population_series_mean_abs": float(np.abs(pop[fin]).mean()),
        "population_series_pairs": int(fin.sum()),
        "population_series_chi2": float(np.sum(((pop[fin] - d[fin]) / se[fin]) ** 2)),
        "simulated_per_pair_se_mean": float(se.mean()),
        "real_test_check_z": [float((a - b) / math.hypot(sa, sb)) for a, sa, b, sb in real],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--reps", type=int, default=10_000)
    parser.add_argument("--checks", type=int, default=3,
                        help="pairs also simulated with the real test repeated")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.steps, args.pairs, args.reps, args.checks = 10_000, 200, 20, 10_000, 2
    command = "python benchmarks/bias_monitor_tests.py" + (" --quick" if args.quick else "")
    X, y, theta = skewed_logistic(args.rows, 3)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    proposal = RandomWalk(1.0 / math.sqrt(args.rows))
    cases = {"barker sequential m=50": BarkerTest(m=50, delta=None),
             "barker delta=0.5 m=100": BarkerTest(m=100),
             "barker presized m=50": BarkerTest(m=50, delta=None, stopping="presized")}
    print(f"N {args.rows}, {args.steps} steps, {args.pairs} pairs x {args.reps} batches; "
          f"{machine()}", flush=True)
    out = {"command": command, "settings": vars(args), "machine": machine(), "cases": {}}
    rng = np.random.default_rng(7)
    for name, test in cases.items():
        view, pairs, stats = chain_with_pairs(model, test, proposal, theta, args.steps, 11)
        picks = np.sort(rng.choice(args.steps, size=min(args.pairs, args.steps), replace=False))
        if test.stopping == "sequential":
            r = barker_case(view, test, pairs, stats, picks, args.reps, args.checks, rng)
            print(f"{name:24s} rows/step {r['rows_per_step']:7.0f}  monitor |D| "
                  f"{r['monitor_mean_abs_pairs']:.2e} simulated {r['simulated_mean_abs_pairs']:.2e}"
                  f" +- {r['simulated_mean_abs_se']:.1e}: ratio "
                  f"{r['ratio_monitor_to_simulated']:.2f} +- {r['ratio_se']:.2f}; signed "
                  f"{r['monitor_mean_signed_pairs']:+.2e} vs {r['simulated_mean_signed_pairs']:+.2e};"
                  f" population series {r['population_series_mean_abs']:.2e} (chi2 "
                  f"{r['population_series_chi2']:.0f} / {r['population_series_pairs']}); "
                  f"real-test z {np.round(r['real_test_check_z'], 1).tolist()}", flush=True)
        else:      # presized: the real test repeated (no Rao-Blackwellised simulator)
            est = test.decision_errors(stats, view.N)
            sim = np.array([simulated(view, test, *pairs[k], stats["log_const"][k],
                                      5 * args.reps, rng) for k in picks])
            d, se = sim[:, 0], sim[:, 1]
            r = {"rows_per_step": float(stats["n_used"].mean()),
                 "monitor_mean_abs_chain": float(np.mean(est)),
                 "monitor_mean_abs_pairs": float(np.mean(est[picks])),
                 "simulated_mean_signed_pairs": float(d.mean()),
                 "simulated_mean_signed_se": float(np.sqrt(np.sum(se**2)) / len(se)),
                 "simulated_mean_abs_noise_corrected": float(np.mean(np.sqrt(np.maximum(
                     d**2 - se**2, 0.0)))),
                 "simulated_per_pair_se_mean": float(se.mean())}
            print(f"{name:24s} rows/step {r['rows_per_step']:7.0f}  monitor |D| "
                  f"{r['monitor_mean_abs_pairs']:.2e}  simulated |D| (noise-corrected) "
                  f"{r['simulated_mean_abs_noise_corrected']:.2e}, per-pair se "
                  f"{r['simulated_per_pair_se_mean']:.1e}", flush=True)
        out["cases"][name] = r
    write("bias_monitor_tests_quick" if args.quick else "bias_monitor_tests", out)


if __name__ == "__main__":
    main()
