"""Issue 17, part 4: the presized Barker rule on Seita et al.'s Gaussian mixture, long chains.

The Gaussian-mixture workload of ``bench_gmm_seita.py`` (N = 10^6, K = 10^4, random walk sd
0.15, start (0.5, 0)). For each test, ``--chains`` chains of ``--steps`` steps on independent
streams; the posterior mean and sd of the pooled chains against the grid's (the exact
posterior of the binned data), in units of ArviZ's multi-chain Monte Carlo standard error,
and the rows read per step beside the paper's 182.3 (Table 1) and the 757 of the default
``delta = 0.5``.

Run:  python benchmarks/barker_presized.py                     # 4 x 250,000 steps per test
      python benchmarks/barker_presized.py --quick             # 2 x 5,000 steps (a smoke run)
      python benchmarks/barker_presized.py --tests presized --chains 4 --steps 500000
Writes benchmarks/results/barker_presized[_quick].json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import machine, write  # noqa: E402
from bench_gmm_seita import Posterior  # noqa: E402

from design import reference_tables  # noqa: E402
from samplers import BarkerTest, GaussianMixture, RandomWalk, import_arviz, sample  # noqa: E402
from samplers.datasets import gaussian_mixture  # noqa: E402

TESTS = {
    "presized": BarkerTest(m=50, delta=None, stopping="presized"),
    "presized_skew": BarkerTest(m=50, delta=None, stopping="presized", skew=True),
    "sequential": BarkerTest(m=50, delta=None),
    "sequential, delta = 0.5": BarkerTest(m=50, delta=0.5),
}
PAPER_ROWS = reference_tables.SEITA_GMM["MHminibatch"]["rows"][0]
DELTA_05_ROWS = 757.2   # docs/correction.md, section 6 (10 trials of 3000 steps)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=250_000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--tests", nargs="*", default=["presized", "sequential"],
                        choices=sorted(TESTS))
    parser.add_argument("--seed", type=int, default=2017)
    parser.add_argument("--quick", action="store_true", help="2 chains of 5,000 steps")
    parser.add_argument("--tag", default="", help="suffix of the results file's name")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.chains = 5_000, 2
    az = import_arviz()
    rng = np.random.default_rng(args.seed)
    x = gaussian_mixture(1_000_000, rng=rng)
    model = GaussianMixture(x, temperature=10_000.0)
    post = Posterior(model, x)
    p1, p2 = post.cell_prob.sum(axis=1), post.cell_prob.sum(axis=0)
    truth_mean = np.array([p1 @ post.g1, p2 @ post.g2])
    truth_sd = np.sqrt(np.array([p1 @ post.g1**2, p2 @ post.g2**2]) - truth_mean**2)
    print(f"grid: mean {np.round(truth_mean, 4)}, sd {np.round(truth_sd, 4)}; "
          f"{args.chains} chains x {args.steps:,} steps per test; {machine()}")
    out = {"settings": vars(args), "machine": machine(), "grid_mean": truth_mean.tolist(),
           "grid_sd": truth_sd.tolist(), "paper_rows": PAPER_ROWS,
           "delta_05_rows": DELTA_05_ROWS, "runs": {}}
    for name in args.tests:
        test = TESTS[name]
        t0 = time.perf_counter()
        chains = [sample(model, test, RandomWalk(0.15), [0.5, 0.0], args.steps, rng=s,
                         progress=False) for s in rng.spawn(args.chains)]
        wall = time.perf_counter() - t0
        s = np.stack([c.samples for c in chains])
        idata = az.convert_to_inference_data(s)
        mcse_mean = az.mcse(idata, method="mean").x.values
        mcse_sd = az.mcse(idata, method="sd").x.values
        flat = s.reshape(-1, 2)
        mean, sd = flat.mean(axis=0), flat.std(axis=0)
        rows = float(np.mean([c.stats["n_used"].mean() for c in chains]))
        clipped = float(np.mean([np.mean(c.stats["var_delta"] >= 1.0) for c in chains]))
        r = out["runs"][name] = {
            "test": repr(test), "rows_per_step": rows,
            "rows_vs_paper": rows / PAPER_ROWS, "rows_vs_delta_05": rows / DELTA_05_ROWS,
            "acceptance_rate": float(np.mean([c.acceptance_rate for c in chains])),
            "clipped_fraction": clipped, "mean": mean.tolist(), "sd": sd.tolist(),
            "mcse_mean": mcse_mean.tolist(), "mcse_sd": mcse_sd.tolist(),
            "ess": az.ess(idata).x.values.tolist(),
            "z_mean": ((mean - truth_mean) / mcse_mean).tolist(),
            "z_sd": ((sd - truth_sd) / mcse_sd).tolist(), "seconds": wall}
        print(f"{name:24s} rows/step {rows:6.1f} ({r['rows_vs_paper']:.2f} x 182.3, "
              f"{r['rows_vs_delta_05']:.2f} x 757)  sd {np.round(sd, 4)} "
              f"MCSE {np.round(mcse_sd, 4)}  z(sd) {np.round(r['z_sd'], 2)}  "
              f"z(mean) {np.round(r['z_mean'], 2)}  ESS {np.round(r['ess'], 0)}  "
              f"clipped {clipped:.3f}  {wall:.0f} s", flush=True)
    write(("barker_presized_quick" if args.quick else "barker_presized")
          + (f"_{args.tag}" if args.tag else ""), out)


if __name__ == "__main__":
    main()
