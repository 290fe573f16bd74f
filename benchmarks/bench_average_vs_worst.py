"""Average against worst-case design, measured on fresh pairs (paper section 6.5, Fig. 6).

A synthetic logistic regression (N = 100,000, 5 coefficients, prior N(0, 10^2)) is run by
exact random-walk MH from its mode; the first 100 pairs (theta, theta') after burn-in form
the trial chain, the next 100 the fresh set. For each tolerance three designs are chosen on
the trial chain -- average over (m, eps), average over eps with m = 600 fixed (the paper's
simple rule), and worst case -- and measured on the fresh pairs by the DP: mean |Delta|
(with its standard error over pairs) and the mean fraction of data used.

Writes ``benchmarks/results/bench_average_vs_worst.json``; ``--plot FILE`` also saves the
two panels of Fig. 6 (error on fresh pairs, data use) against the target.
Run: ``python benchmarks/bench_average_vs_worst.py``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402
from _design_refs import reference  # noqa: E402

from design import InfeasibleDesignError, TrialChain, acceptance_error, optimize  # noqa: E402

lp = reference("logistic_pairs")

TOLERANCES = (0.02, 0.03, 0.05, 0.1, 0.2)
DESIGNS = {
    "average": dict(method="average"),
    "average, m = 600": dict(method="average", m_grid=[600]),
    "worst case": dict(method="worst-case"),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", metavar="FILE", help="save the Fig. 6 panels here")
    args = parser.parse_args(argv)
    t0 = time.time()
    model = lp.LogisticModel(*lp.make_data(100_000, 5, rng=1))
    thetas, news = lp.mh_pairs(model, 200, rng=2, burn_in=200)
    trial = TrialChain.from_model(model, thetas[:100], news[:100])
    fresh = TrialChain.from_model(model, thetas[100:], news[100:])
    print(f"logistic regression, N = {model.N:,}; exact MH acceptance rate on the trial "
          f"pairs {trial.accept_prob.mean():.2f}")
    rows = []
    print(f"{'tolerance':>9} {'design':>17} {'m':>5} {'eps':>6} | {'trial err':>9} | "
          f"{'fresh mean |Delta|':>19} {'fresh data':>10}")
    for tol in TOLERANCES:
        for name, kw in DESIGNS.items():
            source = trial if kw["method"] == "average" else trial.N
            try:
                d = optimize(source, tol, **kw)
            except InfeasibleDesignError as exc:
                print(f"{tol:>9} {name:>17}   infeasible on the grid ({exc.best_on_grid})")
                rows.append(dict(tolerance=tol, design=name, feasible=False))
                continue
            f = acceptance_error(fresh, m=d.m, epsilon=d.epsilon)
            se = float(np.std(np.abs(f.delta), ddof=1) / np.sqrt(fresh.n_pairs))
            rows.append(dict(tolerance=tol, design=name, feasible=True, m=d.m,
                             epsilon=d.epsilon, trial_error=d.error,
                             trial_data=d.data_fraction, fresh_error=f.mean_abs_delta,
                             fresh_error_se=se, fresh_data=f.mean_data_fraction))
            print(f"{tol:>9} {name:>17} {d.m:>5} {d.epsilon:>6g} | {d.error:>9.4f} | "
                  f"{f.mean_abs_delta:>11.4f} ± {se:.4f} {f.mean_data_fraction:>10.3f}")
    write("bench_average_vs_worst", dict(description=__doc__.splitlines()[0], N=model.N,
                                         rows=rows, runtime_seconds=round(time.time() - t0, 1)))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
        for name in DESIGNS:
            rs = [r for r in rows if r["design"] == name and r["feasible"]]
            tol = [r["tolerance"] for r in rs]
            ax1.errorbar(tol, [r["fresh_error"] for r in rs],
                         [r["fresh_error_se"] for r in rs], marker="o", label=name)
            ax2.plot(tol, [r["fresh_data"] for r in rs], marker="o", label=name)
        ax1.plot(TOLERANCES, TOLERANCES, "k--", lw=1, label="target")
        ax1.set(xlabel="target error (trial pairs)", ylabel="mean |Delta| on fresh pairs")
        ax2.set(xlabel="target error (trial pairs)", ylabel="data fraction on fresh pairs")
        ax1.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"saved {args.plot}")


if __name__ == "__main__":
    main()
