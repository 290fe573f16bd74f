"""Bardenet et al. (2014), section 4.1 and Figure 4: the CLT check on Gaussian and lognormal
data, the real sequential test against its prediction, and the chains' marginal of sigma.

Data: x ~ N(0, 0.1^2) and x ~ lognormal(0, 2), N = 10^5; the Gaussian (mean, log sd)
model with flat priors (``samplers.Gaussian``); random-walk proposals with covariance
2.38^2 / 2 times the posterior's (about 1.7 posterior sds per coordinate).

1. An exact-MH chain (also the trial run); pairs near the posterior mode are drawn from it
   with its own proposal (``validation.proposal_pairs``).
2. ``validation.clt_check`` at b = 500 on those pairs.
3. ``validation.sequential_check`` (m = 500, epsilon = 0.05) at the pair the CLT check
   found worst.
4. Chains of AustereTest(m=500, epsilon=0.05) and ConfidenceTest(delta=0.01, Bernstein-
   Serfling, gamma = 2, p = 2, first subsample 500) beside exact MH: the marginal of sigma
   (Figure 4(b, c) of the paper).

    python benchmarks/validation_fig4.py [--steps 10000] [--pairs 20] [--seed 2014]

Prints the reports and writes ``benchmarks/results/validation_fig4.json`` and the PNGs
``validation_fig4_clt_<data>.png``, ``validation_fig4_sequential_<data>.png`` and
``validation_fig4_marginals.png``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import RESULTS, write  # noqa: E402

from samplers import AustereTest, ConfidenceTest, ExactTest, Gaussian, RandomWalk, sample  # noqa: E402
from validation import clt_check, proposal_pairs, sequential_check  # noqa: E402

N = 100_000
BATCH = 500
EPSILON = 0.05
DELTA = 0.01
BURN_IN = 0.1


def datasets(seed, n=N):
    """The two datasets of the paper, ``n`` points each: N(0, 0.1^2) and lognormal(0, 2)."""
    rng = np.random.default_rng(seed)
    return {"normal(0, 0.1^2)": rng.normal(0.0, 0.1, n),
            "lognormal(0, 2)": rng.lognormal(0.0, 2.0, n)}


def problem(x):
    """The (mean, log sd) model of ``x`` with flat priors, its posterior mode (the start of
    every chain) and a random walk with 2.38^2 / 2 times the posterior's covariance."""
    n = x.shape[0]
    s_hat = float(x.std())
    theta0 = [float(x.mean()), math.log(s_hat)]
    cov = np.diag([s_hat**2 / n, 1 / (2 * n)]) * 2.38**2 / 2
    return Gaussian(x), theta0, RandomWalk(cov)


def slug(name):
    return name.split("(")[0]


def run_chain(model, test, proposal, theta0, steps, seed):
    t0 = time.perf_counter()
    chain = sample(model, test, proposal, theta0, steps, rng=seed)
    sigma = np.exp(chain.samples[int(BURN_IN * steps):, 1])
    print(f"  {type(test).__name__:15s} acceptance {chain.acceptance_rate:.2f}, data "
          f"{chain.mean_data_fraction:.3f}, {time.perf_counter() - t0:.1f} s")
    return chain, sigma


def main(steps, n_pairs, seed):
    out = {"settings": dict(N=N, batch_size=BATCH, m=BATCH, epsilon=EPSILON, delta=DELTA,
                            steps=steps, burn_in=BURN_IN, pairs=n_pairs, seed=seed),
           "datasets": {}}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (name, x) in zip(axes, datasets(seed).items()):
        print(f"\n=== x ~ {name} ===")
        model, theta0, proposal = problem(x)
        s_hat = float(x.std())

        exact, sigma_exact = run_chain(model, ExactTest(), proposal, theta0, steps, seed + 1)
        pairs = proposal_pairs(exact, model, n_pairs, burn_in=BURN_IN, rng=seed + 2)

        t0 = time.perf_counter()
        clt = clt_check(model, pairs, batch_size=BATCH, rng=seed + 3)
        clt_time = time.perf_counter() - t0
        print(clt)
        print(f"  ({clt_time:.1f} s)")
        clt.plot().savefig(RESULTS / f"validation_fig4_clt_{slug(name)}.png", dpi=110)

        worst = clt.worst_pair
        t0 = time.perf_counter()
        seq = sequential_check(model, (pairs[0][worst], pairs[1][worst]), m=BATCH,
                               epsilon=EPSILON, rng=seed + 4)
        seq_time = time.perf_counter() - t0
        print(seq)
        print(f"  ({seq_time:.1f} s)")
        seq.plot().savefig(RESULTS / f"validation_fig4_sequential_{slug(name)}.png", dpi=110)

        chains = {"exact MH": (exact, sigma_exact)}
        chains["AustereTest"] = run_chain(model, AustereTest(m=BATCH, epsilon=EPSILON),
                                          proposal, theta0, steps, seed + 5)
        chains["ConfidenceTest"] = run_chain(
            model, ConfidenceTest(delta=DELTA, batch_size=BATCH), proposal, theta0, steps,
            seed + 6)
        lo = min(np.quantile(v[1], 0.001) for v in chains.values())
        hi = max(np.quantile(v[1], 0.999) for v in chains.values())
        bins = np.linspace(lo, hi, 80)
        marginals = {}
        styles = (dict(color="k"), dict(color="C3"), dict(color="C0", ls="--"))
        for (label, (chain, sigma)), style in zip(chains.items(), styles):
            dens, edges = np.histogram(sigma, bins=bins, density=True)
            ax.stairs(dens, edges, lw=1.5, **style,
                      label=f"{label} ({100 * chain.mean_data_fraction:.0f}% of data)")
            marginals[label] = dict(
                data_fraction=chain.mean_data_fraction, acceptance=chain.acceptance_rate,
                sigma_mean_over_sample_sd=float(sigma.mean() / s_hat),
                sigma_sd_over_sample_sd=float(sigma.std() / s_hat),
                sigma_mode_offset=float(edges[np.argmax(dens)] / s_hat - 1.0),
                wall_time=chain.wall_time)
        ax.plot([s_hat], [0], marker="^", color="red", ms=12, clip_on=False, ls="none",
                label="empirical sd (posterior max)")
        ax.set_xlabel("sigma")
        ax.set_ylabel("marginal density")
        ax.set_title(f"x ~ {name}, N = 10^5: CLT check "
                     f"{'passes' if clt.passed else 'fails'} (KS {clt.ks_distance.max():.2g})",
                     fontsize="small")
        ax.legend(fontsize="x-small")

        out["datasets"][name] = dict(
            sample_sd=s_hat,
            clt=dict(passed=clt.passed, tolerance=clt.tolerance, n_sim=clt.n_sim,
                     ks_distance_max=float(clt.ks_distance.max()),
                     ks_distance_median=float(np.median(clt.ks_distance)),
                     skewness_abs_max=float(np.abs(clt.skewness).max()),
                     excess_kurtosis_max=float(clt.excess_kurtosis.max()),
                     novak_min=float(clt.novak.min()),
                     novak_batch_size=int(clt.novak_batch_size.max()),
                     min_batch_size=clt.min_batch_size, seconds=clt_time),
            sequential=dict(pair=worst, skewness=seq.skewness, agrees=seq.agrees,
                            mu_std=seq.mu_std.tolist(), error=seq.error.tolist(),
                            error_se=seq.error_se.tolist(),
                            predicted_error=seq.predicted_error.tolist(),
                            data_fraction=seq.data_fraction.tolist(),
                            predicted_data_fraction=seq.predicted_data_fraction.tolist(),
                            max_gap=seq.max_gap, seconds=seq_time),
            chains=marginals)
        print("  sigma marginal / sample sd:", {k: round(v["sigma_mean_over_sample_sd"], 4)
                                                for k, v in marginals.items()})
    fig.suptitle("Marginal of sigma (Bardenet et al. 2014, Figure 4): AustereTest(m=500, "
                 "eps=0.05), ConfidenceTest(delta=0.01), exact MH", fontsize="small")
    fig.tight_layout()
    fig.savefig(RESULTS / "validation_fig4_marginals.png", dpi=110)
    return out


if __name__ == "__main__":
    matplotlib.use("Agg")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2014)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    result = main(args.steps, args.pairs, args.seed)
    result["seconds"] = time.perf_counter() - t0
    write("validation_fig4", result)
