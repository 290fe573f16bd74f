"""Issue 17, part 4 on a second workload: the presized Barker rule on a logistic regression
with a skewed covariate, against exact MH.

A tempered logistic regression (N = 10^5 rows by default, temperature K = 500, so the
posterior is that of N / K = 200 rows): intercept, one standardized lognormal(0, 1)
covariate (skewness ~6, excess kurtosis ~100 before standardizing) and one standard normal
covariate; labels from the model. The l_i of a random-walk pair are then right-skewed,
the case where the sequential rule's stopping on the batch variance biases the chain.
Each test runs ``--chains`` chains of ``--steps`` steps on independent streams from the
Laplace mode; the reference is exact MH (``ExactTest``) with ``--ref-factor`` times as many
steps per chain, or (``--reference importance``) self-normalised importance sampling from a
Student-t (5 degrees of freedom) around the Laplace approximation, whose standard errors are
several times smaller than the MH chain's MCSE at a fraction of its cost. Reported: pooled
posterior means and sds, z = (test - reference) / sqrt(MCSE_test^2 + SE_reference^2) from
ArviZ's multi-chain MCSE, and rows read per step.

Run:  python benchmarks/barker_presized_logistic.py                 # 4 x 100,000 steps
      python benchmarks/barker_presized_logistic.py --quick         # 2 x 5,000 steps
      python benchmarks/barker_presized_logistic.py --N 20000 --temperature 100 \
          --steps 100000 --reference importance --draws 200000
Writes benchmarks/results/barker_presized_logistic[_quick].json.
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

from samplers import (BarkerTest, ExactTest, LogisticRegression, RandomWalk,  # noqa: E402
                      import_arviz, laplace_approximation, sample)

TESTS = {
    "exact": ExactTest(),
    "presized": BarkerTest(m=50, delta=None, stopping="presized"),
    "sequential": BarkerTest(m=50, delta=None),
    "presized_skew": BarkerTest(m=50, delta=None, stopping="presized", skew=True),
}


def workload(N, temperature, rng):
    x1 = rng.lognormal(0.0, 1.0, N)
    X = np.column_stack([np.ones(N), (x1 - x1.mean()) / x1.std(), rng.normal(size=N)])
    beta = np.array([-0.5, 1.0, 0.5])
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(float)
    return LogisticRegression(X, y, temperature=temperature)


def importance_reference(model, mode, cov, draws, rng, *, nu=5.0, inflate=1.3, chunk=2_000):
    """Posterior mean and sd by self-normalised importance sampling from a Student-t
    (``nu`` degrees of freedom, scale ``inflate`` times the Laplace covariance), with their
    delta-method standard errors and the importance ESS. One pass over the rows per chunk
    of draws (``loglik_many``)."""
    d = mode.shape[0]
    chol = np.linalg.cholesky(cov) * inflate
    prec = np.linalg.inv(cov) / inflate**2
    idx = np.arange(model.N)
    log_w, thetas = [], []
    for start in range(0, draws, chunk):
        k = min(chunk, draws - start)
        z = rng.standard_normal((k, d))
        th = mode + (z @ chol.T) / np.sqrt(rng.chisquare(nu, k) / nu)[:, None]
        q = np.einsum("ij,jk,ik->i", th - mode, prec, th - mode)
        log_q = -0.5 * (nu + d) * np.log1p(q / nu)
        log_p = model.loglik_many(th, idx).sum(axis=0) + np.array([model.logprior(t)
                                                                   for t in th])
        log_w.append(log_p - log_q)
        thetas.append(th)
    log_w, th = np.concatenate(log_w), np.concatenate(thetas)
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    mean = w @ th
    var = w @ (th - mean) ** 2
    sd = np.sqrt(var)
    se_mean = np.sqrt((w**2) @ (th - mean) ** 2)
    se_sd = np.sqrt((w**2) @ ((th - mean) ** 2 - var) ** 2) / (2.0 * sd)
    return dict(test=f"importance sampling, t{nu:g} x {inflate:g} Laplace, {draws:,} draws",
                mean=mean, sd=sd, mcse_mean=se_mean, mcse_sd=se_sd,
                ess=np.full(d, 1.0 / np.sum(w**2)), rows_per_step=float(model.N),
                acceptance_rate=float("nan"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--N", type=int, default=100_000)
    parser.add_argument("--temperature", type=float, default=500.0)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--ref-factor", type=int, default=2)
    parser.add_argument("--reference", choices=["exact", "importance"], default="exact",
                        help="exact MH chains, or importance sampling from the Laplace fit")
    parser.add_argument("--draws", type=int, default=200_000,
                        help="importance draws (--reference importance)")
    parser.add_argument("--tests", nargs="*", default=["presized", "sequential"],
                        choices=sorted(set(TESTS) - {"exact"}))
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="2 chains of 5,000 steps")
    parser.add_argument("--tag", default="", help="suffix of the results file's name")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.chains = 5_000, 2
    az = import_arviz()
    rng = np.random.default_rng(args.seed)
    model = workload(args.N, args.temperature, rng)
    lap = laplace_approximation(model)
    mode, cov = np.asarray(lap.mode), np.asarray(lap.covariance)
    proposal = RandomWalk(2.38 / np.sqrt(model.dim) * np.sqrt(np.diag(cov)))
    print(f"N = {args.N:,}, K = {args.temperature:g}, mode {np.round(mode, 3)}, posterior sd "
          f"(Laplace) {np.round(np.sqrt(np.diag(cov)), 4)}; {args.chains} chains x "
          f"{args.steps:,} steps per test; {machine()}", flush=True)
    out = {"settings": vars(args), "machine": machine(), "runs": {}}

    def run(name, steps):
        t0 = time.perf_counter()
        chains = [sample(model, TESTS[name], proposal, mode, steps, rng=s, progress=False)
                  for s in rng.spawn(args.chains)]
        wall = time.perf_counter() - t0
        s = np.stack([c.samples for c in chains])
        idata = az.convert_to_inference_data(s)
        flat = s.reshape(-1, s.shape[-1])
        return dict(test=repr(TESTS[name]), mean=flat.mean(axis=0), sd=flat.std(axis=0),
                    mcse_mean=az.mcse(idata, method="mean").x.values,
                    mcse_sd=az.mcse(idata, method="sd").x.values,
                    ess=az.ess(idata).x.values,
                    rows_per_step=float(np.mean([c.stats["n_used"].mean() for c in chains])),
                    acceptance_rate=float(np.mean([c.acceptance_rate for c in chains])),
                    seconds=wall)

    if args.reference == "importance":
        t0 = time.perf_counter()
        ref = importance_reference(model, mode, cov, args.draws, rng)
        ref["seconds"] = time.perf_counter() - t0
    else:
        ref = run("exact", args.ref_factor * args.steps)
    print(f"{args.reference:12s} sd {np.round(ref['sd'], 4)} MCSE {np.round(ref['mcse_sd'], 4)}  "
          f"mean {np.round(ref['mean'], 4)}  acc {ref['acceptance_rate']:.3f}  "
          f"{ref['seconds']:.0f} s", flush=True)
    out["runs"][args.reference] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                            for k, v in ref.items()}
    for name in args.tests:
        r = run(name, args.steps)
        r["z_mean"] = (r["mean"] - ref["mean"]) / np.hypot(r["mcse_mean"], ref["mcse_mean"])
        r["z_sd"] = (r["sd"] - ref["sd"]) / np.hypot(r["mcse_sd"], ref["mcse_sd"])
        r["rel_sd"] = r["sd"] / ref["sd"] - 1.0
        print(f"{name:12s} rows/step {r['rows_per_step']:7.1f}  sd {np.round(r['sd'], 4)} "
              f"MCSE {np.round(r['mcse_sd'], 4)}  z(sd) {np.round(r['z_sd'], 2)}  "
              f"z(mean) {np.round(r['z_mean'], 2)}  sd/exact-1 {np.round(r['rel_sd'], 4)}  "
              f"acc {r['acceptance_rate']:.3f}  {r['seconds']:.0f} s", flush=True)
        out["runs"][name] = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                             for k, v in r.items()}
    write(("barker_presized_logistic_quick" if args.quick else "barker_presized_logistic")
          + (f"_{args.tag}" if args.tag else ""), out)


if __name__ == "__main__":
    main()
