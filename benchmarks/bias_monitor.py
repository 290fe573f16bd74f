"""Issue 17, part 3: the bias monitor's estimate against the real test's error, simulated.

A logistic regression (``samplers.datasets.logistic_regression``), a design
(``design.optimize``), the designed ``AustereTest`` and the same test with ``epsilon`` far
above the design, for one of two proposals (``--proposal``):

* ``walk``: ``RandomWalk(1.5 / sqrt(N))`` on 4 covariates, designed on an exact trial chain;
* ``independence``: ``Independence.from_laplace(ControlVariates(model))`` on 10 covariates,
  designed on 100 pairs drawn from the Laplace approximation (as ``austerity demo`` does;
  acceptance near 0.99: every pair's standardized log ratio mu_c is near 0, and where
  mu_std(u) falls on the dynamic programme's error curve is set by u).

Each chain is run step by step with ``samplers.mh_step`` so that its proposals are kept. The monitor's estimate (``test.decision_errors``: the
design's dynamic programme at each decision's sd, averaged over the posterior of the pair's
mu given the rows read) is compared, on ``--pairs`` of the chain's decisions, with the real
test's error simulated at those pairs by ``validation.acceptance_check`` (``--paths`` random
row orders per pair, u integrated out exactly):

    Delta = P_test(accept) - min(1, exp(sum l_i + c)),

and with the DP at each pair's true mu and sigma (what the monitor would give if it knew mu).

Run:  python benchmarks/bias_monitor.py            # N = 50,000, 1500 steps, 150 pairs
      python benchmarks/bias_monitor.py --quick    # N = 20,000, 300 steps, 30 pairs
      python benchmarks/bias_monitor.py --proposal independence  # N = 100,000, 400 steps,
                                                   # 40 pairs x 300 paths
Writes benchmarks/results/bias_monitor[_independence][_quick].json.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import chain_with_pairs, machine, write  # noqa: E402

import design  # noqa: E402
from samplers import (  # noqa: E402
    AustereTest, BiasWarning, ControlVariates, ExactTest, GaussianPrior, Independence,
    LogisticRegression, RandomWalk, sample)
from samplers.datasets import logistic_regression  # noqa: E402
from validation import acceptance_check  # noqa: E402
from validation.workflow.demo import plain_design  # noqa: E402

#: Per proposal: (rows, steps, pairs, paths, tolerance, covariates) and the --quick sizes.
SIZES = {"walk": ((50_000, 1500, 150, 1000, 0.02, 4), (20_000, 300, 30, 300)),
         "independence": ((100_000, 400, 40, 300, 0.01, 10), (20_000, 200, 30, 200))}


def model_ratios(view, theta, theta_new):
    return view.ratio(theta, theta_new, np.arange(view.N))


def laplace_trial(model, rng, n_trial=100):
    """The demo's setting: ``Independence.from_laplace(ControlVariates(model))``, its start
    at the mode and ``n_trial`` pairs drawn from the Laplace approximation (both points
    independent draws, as the chain's pairs are at stationarity)."""
    cv = ControlVariates(model)
    proposal = Independence.from_laplace(cv)
    start = cv.center.theta
    thetas = np.array([proposal.propose(rng, None, None, start, None)[0]
                       for _ in range(n_trial)])
    news = np.array([proposal.propose(rng, None, None, t, None)[0] for t in thetas])
    log_q = np.array([proposal.log_density(a) - proposal.log_density(b)
                      for a, b in zip(thetas, news)])
    return proposal, start, design.TrialChain.from_model(model, thetas, news, log_q)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--proposal", choices=sorted(SIZES), default="walk")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--pairs", type=int)
    parser.add_argument("--paths", type=int, help="row orders per pair")
    parser.add_argument("--tolerance", type=float)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    full, quick = SIZES[args.proposal]
    sizes = dict(zip(("rows", "steps", "pairs", "paths"), quick if args.quick else full[:4]))
    sizes["tolerance"] = full[4]
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    X, y, theta = logistic_regression(args.rows, full[5], rng=3)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    if args.proposal == "walk":
        proposal = RandomWalk(1.5 / math.sqrt(args.rows))
        trial = design.TrialChain.from_chain(sample(model, ExactTest(), proposal, theta, 200,
                                                    rng=4))
        plan = design.optimize(trial, tolerance=args.tolerance)
    else:
        proposal, theta, trial = laplace_trial(model, rng=np.random.default_rng(4))
        plan = plain_design(trial, args.tolerance)
    designed = AustereTest.from_design(plan)
    loose = dataclasses.replace(designed, epsilon=min(0.45, 20 * designed.epsilon))
    print(f"{args.proposal}: N {args.rows}, design m {plan.m}, epsilon {plan.epsilon:.4g}, tolerance "
          f"{plan.tolerance}, predicted mean |Delta| {plan.error:.4g}; {machine()}")
    out = {"settings": vars(args), "machine": machine(), "design": {
        "m": plan.m, "epsilon": plan.epsilon, "tolerance": plan.tolerance,
        "predicted_error": plan.error}, "cases": {}}
    rng = np.random.default_rng(7)
    for name, test in (("designed", designed), ("epsilon x20", loose)):
        view, pairs, stats = chain_with_pairs(model, test, proposal, theta, args.steps, 11)
        est = test.decision_errors(stats, view.N)
        signed = design.decision_errors(stats["mean"], stats["sd"], stats["n_used"],
                                        stats["log_const"],
                                        N=view.N, m=test.m,
                                        epsilon=test.epsilon, absolute=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chain = sample(model, test, proposal, theta, args.steps, rng=11)
        fired = any(issubclass(w.category, BiasWarning) for w in caught)
        assert np.allclose(chain.acceptance_errors, est)   # same decisions as mh_step's
        picks = np.sort(rng.choice(args.steps, size=min(args.pairs, args.steps), replace=False))
        L = np.array([model_ratios(view, *pairs[k]) for k in picks])
        check = acceptance_check(L, m=test.m, epsilon=test.epsilon, tolerance=test.tolerance,
                                 threshold=test.threshold, log_const=stats["log_const"][picks],
                                 n_paths=args.paths, rng=rng)
        sim, se = check.delta_simulated, check.delta_simulated_se
        abs_sim, abs_sim_se = check.mean_abs_simulated, check.mean_abs_simulated_se
        mon = float(np.mean(np.abs(est[picks])))
        r = out["cases"][name] = {
            "epsilon": test.epsilon, "rows_per_step": float(stats["n_used"].mean()),
            "monitor_mean_abs_error_chain": float(np.mean(np.abs(est))),
            "monitor_mean_abs_error_pairs": mon,
            "simulated_mean_abs_error_pairs": abs_sim,
            "dp_at_true_mu_mean_abs_error_pairs": check.mean_abs_gaussian,
            "simulated_se": abs_sim_se,
            "ratio_se": mon * abs_sim_se / abs_sim**2 if abs_sim > 0 else math.nan,
            "monitor_mean_signed_pairs": float(np.mean(signed[picks])),
            "simulated_mean_signed_pairs": float(np.mean(sim)),
            "ratio_monitor_to_simulated": mon / abs_sim if abs_sim > 0 else math.nan,
            "acceptance_rate": float(chain.acceptance_rate),
            "warning_fired": fired, "tolerance": test.tolerance}
        print(f"{name:12s} eps {test.epsilon:.4g} rows/step {r['rows_per_step']:8.0f}  "
              f"monitor mean|D| chain {r['monitor_mean_abs_error_chain']:.4f}, pairs {mon:.4f}"
              f"  simulated {abs_sim:.4f} +- {abs_sim_se:.4f} (DP at the true mu {check.mean_abs_gaussian:.4f})"
              f"  ratio {r['ratio_monitor_to_simulated']:.3f}  signed {np.mean(signed[picks]):+.4f}"
              f" vs {np.mean(sim):+.4f}  warning {fired}", flush=True)
    suffix = ("" if args.proposal == "walk" else "_" + args.proposal) + ("_quick" if args.quick
                                                                         else "")
    write("bias_monitor" + suffix, out)


if __name__ == "__main__":
    main()
