"""Issue 17, part 3: the bias monitor's estimate against the real test's error, simulated.

A logistic regression (``samplers.datasets.logistic_regression``), a design from an exact
trial chain (``design.optimize``), the designed ``AustereTest`` and the same test with
``epsilon`` far above the design. Each chain is run step by step with ``samplers.mh_step``
so that its proposals are kept. The monitor's estimate (``test.decision_errors``: the
design's dynamic programme at each decision's own mean and sd of the l_i) is compared, on
``--pairs`` of the chain's decisions, with the real test's error simulated at those pairs:

    Delta = P_test(accept) - min(1, exp(sum l_i + c)),

with ``u`` stratified over the window where the test can err (outside it the error is
below 1e-12) and ``mu0(u)`` imposed on the real compiled test by peeking its Generator.

Run:  python benchmarks/bias_monitor.py            # N = 50,000, 1500 steps, 80 pairs
      python benchmarks/bias_monitor.py --quick    # N = 20,000, 300 steps, 20 pairs
Writes benchmarks/results/bias_monitor[_quick].json.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write  # noqa: E402

import design  # noqa: E402
from samplers import (  # noqa: E402
    AustereTest, BiasWarning, ExactTest, GaussianPrior, IndexSampler, LogisticRegression,
    RandomWalk, State, check_model, mh_step, sample)
from samplers.datasets import logistic_regression  # noqa: E402


def run(model, test, proposal, theta0, n, seed):
    """A chain step by step; returns the per-step (theta, theta_new, c) and the stats."""
    view, theta = check_model(model, theta0)
    rng = np.random.default_rng(seed)
    batches = IndexSampler(view.N, rng)
    state = State(theta, float(view.logprior(theta)), proposal.init(view, theta))
    pairs, infos = [], []
    for _ in range(n):
        before = state.theta
        peek = np.random.Generator(type(rng.bit_generator)())
        peek.bit_generator.state = rng.bit_generator.state
        theta_new = proposal.propose(peek, view, batches, before, state.pstate)[0]
        state, info = mh_step(rng, state, view, test, proposal, batches)
        pairs.append((before, theta_new))
        infos.append(info)
    stats = {"log_const": np.array([i.log_const for i in infos]),
             "mean": np.array([i.test.mean for i in infos]),
             "sd": np.array([i.test.sd for i in infos]),
             "first_mean": np.array([i.test.first_mean for i in infos]),
             "n_used": np.array([i.test.n_used for i in infos])}
    return view, pairs, stats


def simulated_error(view, test, theta, theta_new, c, n_u, rng):
    """Real test's Delta at one pair, u stratified over the window where it can err."""
    N = view.N
    l = model_ratios(view, theta, theta_new)
    mu, sigma = float(l.mean()), float(l.std())
    pa = 1.0 if l.sum() + c >= 0 else math.exp(l.sum() + c)
    if sigma == 0.0:
        return 0.0, 0.0
    q1 = special.ndtri(1 - test.epsilon)
    reach = (q1 + 8.0) * math.sqrt((N - test.m) / test.m) * sigma / math.sqrt(N - 1)
    lo = min(1.0, math.exp(min(N * (mu - reach) + c, 0.0)))
    hi = min(1.0, math.exp(min(N * (mu + reach) + c, 0.0)))
    if hi <= lo:
        return 0.0, 0.0
    batches = IndexSampler(N, rng)
    out = np.empty(n_u)
    for k in range(n_u):
        u = lo + (hi - lo) * (k + rng.random()) / n_u
        mu0 = (math.log(u) - c) / N
        peek = np.random.Generator(type(rng.bit_generator)())
        peek.bit_generator.state = rng.bit_generator.state
        e = peek.standard_exponential()
        accepted, _ = test.decide(rng, view, batches, theta, theta_new, -N * mu0 - e)
        out[k] = float(accepted) - float(u < pa)
    return (hi - lo) * out.mean(), (hi - lo) * out.std(ddof=1) / math.sqrt(n_u)


def model_ratios(view, theta, theta_new):
    return view.ratio(theta, theta_new, np.arange(view.N))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--pairs", type=int, default=80)
    parser.add_argument("--u", type=int, default=400, help="stratified u per pair")
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.steps, args.pairs, args.u = 20_000, 300, 20, 200
    X, y, theta = logistic_regression(args.rows, 4, rng=3)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    proposal = RandomWalk(1.5 / math.sqrt(args.rows))
    trial = design.TrialChain.from_chain(sample(model, ExactTest(), proposal, theta, 200, rng=4))
    plan = design.optimize(trial, tolerance=args.tolerance)
    designed = AustereTest.from_design(plan)
    loose = dataclasses.replace(designed, epsilon=min(0.45, 20 * designed.epsilon))
    print(f"N {args.rows}, design m {plan.m}, epsilon {plan.epsilon:.4g}, tolerance "
          f"{plan.tolerance}, predicted mean |Delta| {plan.error:.4g}; {machine()}")
    out = {"settings": vars(args), "machine": machine(), "design": {
        "m": plan.m, "epsilon": plan.epsilon, "tolerance": plan.tolerance,
        "predicted_error": plan.error}, "cases": {}}
    rng = np.random.default_rng(7)
    for name, test in (("designed", designed), ("epsilon x20", loose)):
        view, pairs, stats = run(model, test, proposal, theta, args.steps, 11)
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
        sim, se = [], []
        for k in picks:
            d, s = simulated_error(view, test, pairs[k][0], pairs[k][1],
                                   stats["log_const"][k], args.u, rng)
            sim.append(d)
            se.append(s)
        sim, se = np.array(sim), np.array(se)
        # mean |Delta| over the picked pairs; the simulation's noise inflates |d| by about
        # E|N(0, se^2)| where |d| ~ se, so both raw and noise-corrected values are given
        abs_sim = float(np.mean(np.abs(sim)))
        abs_sim_se = float(np.sqrt(np.sum(se**2)) / len(se))
        abs_corr = float(np.mean(np.sqrt(np.maximum(sim**2 - se**2, 0.0))))
        mon = float(np.mean(np.abs(est[picks])))
        r = out["cases"][name] = {
            "epsilon": test.epsilon, "rows_per_step": float(stats["n_used"].mean()),
            "monitor_mean_abs_error_chain": float(np.mean(np.abs(est))),
            "monitor_mean_abs_error_pairs": mon,
            "simulated_mean_abs_error_pairs": abs_sim,
            "simulated_mean_abs_error_noise_corrected": abs_corr,
            "simulated_se": abs_sim_se,
            "monitor_mean_signed_pairs": float(np.mean(signed[picks])),
            "simulated_mean_signed_pairs": float(np.mean(sim)),
            "ratio_monitor_to_simulated": mon / abs_sim if abs_sim > 0 else math.nan,
            "warning_fired": fired, "tolerance": test.tolerance}
        print(f"{name:12s} eps {test.epsilon:.4g} rows/step {r['rows_per_step']:8.0f}  "
              f"monitor mean|D| chain {r['monitor_mean_abs_error_chain']:.4f}, pairs {mon:.4f}"
              f"  simulated {abs_sim:.4f} +- {abs_sim_se:.4f} (noise-corrected {abs_corr:.4f})"
              f"  ratio {r['ratio_monitor_to_simulated']:.3f}  signed {np.mean(signed[picks]):+.4f}"
              f" vs {np.mean(sim):+.4f}  warning {fired}", flush=True)
    write("bias_monitor_quick" if args.quick else "bias_monitor", out)


if __name__ == "__main__":
    main()
