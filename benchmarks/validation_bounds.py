"""The stationary-distribution bounds against the measured distance, on a discretised posterior.

``samplers.GaussianMean`` (known sd 1, flat prior), N = 2,000, on a 41-point grid spanning
+-5 posterior sds, with a discretised random-walk proposal of one posterior sd
(``validation.GridChain``). For each approximate test and each setting of its knob,
``validation.stationary_check`` computes the stationary distribution of its kernel, the
total variation distance to the posterior, and the bounds:

* AustereTest(m = 100), epsilon from 0.2 to 0.001, on Gaussian data: acceptance
  probabilities from the dynamic programme, and by simulation of the real test at two
  epsilons; also on lognormal(0, 1) data, where the DP's Gaussian model is wrong;
* ConfidenceTest: Hoeffding's bound on two-point data (+-1, where it is nearly tight and
  the test errs measurably), delta from 0.9 to 0.01; Bernstein-Serfling on Gaussian data;
* the Barker test at a fixed batch size b from 20 to 320 (temperature 100, so that
  Var(Delta*) = N / (100 b) < 1, Seita et al.'s condition).

    python benchmarks/validation_bounds.py [--paths 500] [--replot]

On these unimodal chains every column minimum of P^k lies in an end row of the grid, so
Doeblin's constant equals Dobrushin's and Proposition 3.2 (A = 1) gives Theorem 1's number.

Writes ``benchmarks/results/validation_bounds.json`` and ``validation_bounds.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import RESULTS, write  # noqa: E402

from samplers import AustereTest, ConfidenceTest, GaussianMean  # noqa: E402
from validation import FixedBatchBarker, GridChain, stationary_check  # noqa: E402

N = 2000
POINTS = 41
WIDTH = 5.0
SEED = 2017
EPSILONS = (0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)
DELTAS = (0.9, 0.5, 0.2, 0.1, 0.05, 0.01)
BATCHES = (20, 40, 80, 160, 320)


def grid_chain(x, temperature=1.0):
    model = GaussianMean(x, temperature=temperature)
    mean, sd = model.posterior()
    return GridChain(model, mean + np.linspace(-WIDTH, WIDTH, POINTS) * sd, proposal_sd=sd)


def row(knob, res, seconds):
    r = dict(knob=knob, tv=res.tv, kernel_distance=res.kernel_distance,
             delta_max=res.delta_max, delta_prior=res.delta_prior, eta_one_step=res.eta,
             steps=res.steps, eta_steps=res.eta_steps, bound=res.bound,
             bound_delta_max=res.bound_delta_max, bound_prior=res.bound_prior,
             bound_subsampling=res.bound_subsampling, holds=res.holds, seconds=seconds)
    print(f"  {knob:>7g}  tv {res.tv:9.3g}  bound {res.bound:9.3g}  k Delta_max "
          f"{res.bound_delta_max:9.3g}  a priori {res.bound_prior:9.3g}  Prop 3.2 "
          f"{res.bound_subsampling:9.3g}  (k = {res.steps}, {seconds:.1f} s)")
    return r


def sweep(name, grid, tests, knobs, **kwargs):
    print(f"\n{name}")
    rows = []
    for knob, test in zip(knobs, tests):
        t0 = time.perf_counter()
        res = stationary_check(grid, test, **kwargs)
        rows.append(row(knob, res, time.perf_counter() - t0))
    return rows


def main(paths):
    rng = np.random.default_rng(SEED)
    gaussian = grid_chain(rng.normal(size=N))
    lognormal = grid_chain(rng.lognormal(0.0, 1.0, N))
    two_point = grid_chain(rng.choice([-1.0, 1.0], N))
    tempered = grid_chain(rng.normal(size=N), temperature=100.0)
    seeds = iter(np.random.SeedSequence(SEED).spawn(64))
    austere = [AustereTest(m=100, epsilon=e) for e in EPSILONS]
    sim_eps = (0.05, 0.005)
    sim_tests = [AustereTest(m=100, epsilon=e) for e in sim_eps]
    out = {"settings": dict(N=N, grid_points=POINTS, width_in_posterior_sds=WIDTH,
                            proposal_sd="one posterior sd", paths_per_pair=paths, seed=SEED,
                            pairs=gaussian.n_pairs),
           "sweeps": {}}
    s = out["sweeps"]
    s["AustereTest(m=100), Gaussian data, DP"] = sweep(
        "AustereTest, Gaussian data, dynamic programme", gaussian, austere, EPSILONS)
    s["AustereTest(m=100), Gaussian data, simulation"] = sweep(
        "AustereTest, Gaussian data, simulation", gaussian, sim_tests, sim_eps,
        method="simulation", n_tests=paths, rng=next(seeds))
    s["AustereTest(m=100), lognormal(0, 1) data, DP"] = sweep(
        "AustereTest, lognormal data, dynamic programme", lognormal, sim_tests, sim_eps)
    s["AustereTest(m=100), lognormal(0, 1) data, simulation"] = sweep(
        "AustereTest, lognormal data, simulation", lognormal, sim_tests, sim_eps,
        method="simulation", n_tests=paths, rng=next(seeds))
    s["ConfidenceTest(Hoeffding), two-point data"] = sweep(
        "ConfidenceTest, Hoeffding, two-point data", two_point,
        [ConfidenceTest(delta=d, bound="hoeffding", batch_size=10) for d in DELTAS], DELTAS,
        n_tests=paths, rng=next(seeds))
    s["ConfidenceTest(Bernstein-Serfling), Gaussian data"] = sweep(
        "ConfidenceTest, Bernstein-Serfling, Gaussian data", gaussian,
        [ConfidenceTest(delta=d, batch_size=10) for d in (0.9, 0.01)], (0.9, 0.01),
        n_tests=paths, rng=next(seeds))
    s["FixedBatchBarker, temperature 100"] = sweep(
        "Barker test at fixed batch size, temperature 100", tempered,
        [FixedBatchBarker(b) for b in BATCHES], BATCHES, n_tests=2 * paths, rng=next(seeds))
    out["all_hold"] = all(r["holds"] for rows in s.values() for r in rows)
    plot(s)
    return out


def plot(s):
    panels = [
        ("AustereTest(m = 100)", "per-stage error epsilon",
         ["AustereTest(m=100), Gaussian data, DP", "AustereTest(m=100), Gaussian data, simulation",
          "AustereTest(m=100), lognormal(0, 1) data, simulation",
          "AustereTest(m=100), lognormal(0, 1) data, DP"]),
        ("ConfidenceTest", "delta", ["ConfidenceTest(Hoeffding), two-point data"]),
        ("Barker test, fixed batch size", "batch size b", ["FixedBatchBarker, temperature 100"]),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 6))
    for ax, (title, xlabel, keys) in zip(axes, panels):
        x = [r["knob"] for r in s[keys[0]]]
        for i, key in enumerate(keys):
            rows = s[key]
            knobs = [r["knob"] for r in rows]
            label = key.split(", ", 1)[1] if len(keys) > 1 else ""
            ax.plot(knobs, [r["tv"] for r in rows], "o", color=f"C{i}",
                    label=f"measured d_TV {label}".strip())
            ax.plot(knobs, [r["bound"] for r in rows], "-", color=f"C{i}",
                    label=f"Theorem 1, kernel distance {label}".strip())
            if i == 0:
                ax.plot(knobs, [r["bound_delta_max"] for r in rows], "--", color="0.4",
                        label="Theorem 1, k Delta_max")
                ax.plot(knobs, [r["bound_prior"] for r in rows], ":", color="0.4",
                        label="Theorem 1, a priori Delta_max")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(top=2)
        ax.set_xticks(x, [f"{v:g}" for v in x], minor=False)
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel("total variation distance")
        ax.set_title(title, fontsize="small")
        ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.suptitle("Stationary distribution of approximate kernels vs the bounds, GaussianMean "
                 f"N = {N}, {POINTS}-point grid", fontsize="small")
    fig.tight_layout()
    fig.savefig(RESULTS / "validation_bounds.png", dpi=110)


def replot():
    """Redraw the figure from the stored JSON (no recomputation)."""
    import json

    plot(json.loads((RESULTS / "validation_bounds.json").read_text())["sweeps"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=500)
    parser.add_argument("--replot", action="store_true", help="redraw from the JSON")
    args = parser.parse_args()
    if args.replot:
        replot()
        sys.exit()
    RESULTS.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    result = main(args.paths)
    result["seconds"] = time.perf_counter() - t0
    write("validation_bounds", result)
