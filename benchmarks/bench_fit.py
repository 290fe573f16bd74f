"""``validation.fit`` all-in beside NumPyro HMCECS and NUTS (issue 23).

Workloads (``--workloads``, default all; each its own seed):

* ``d10-N1e5``, ``d10-N1e6``, ``d10-N1e7``: logistic regression, 10 standard-normal
  covariates and an intercept (``_common.cv_logistic_dataset``); 10^7 rows written chunk by
  chunk to ``.npy`` files and read as memmaps (:func:`samplers.datasets.write_memmap`);
* ``d100-N2e5``, ``d100-N1e6``: the same with 100 covariates, where the random walk needs about
  d times more steps per effective draw and HMCECS's gradients pay off;
* ``rare-N2e5``, ``rare-N1e6``: :func:`samplers.datasets.rare_covariate_logistic` (a binary
  covariate active in 40 rows at a 6% base rate, d = 5): heterogeneous rows, where the
  minibatch CLT fails.

For each: ``fit(model, tolerance=0.01, ess=--ess)`` timed whole (mode, proxy, trial pairs,
design, route, verdict, chains) and its chains alone (``attrs["timings"]["chains"]``), the
route chosen, its predicted and realised rows per effective sample; NumPyro HMCECS (Taylor
proxy at the mode, ``num_blocks=100``, subsample ``--hmcecs-m``) and NUTS (full data) all-in
(mode by BFGS in JAX, compilation, warm-up, sampling) and sampling only (NUTS up to
``--nuts-max-n`` rows); min bulk ESS per second of each; accuracy against an
importance-sampling reference (exact full-data weights, ``--ref-draws`` draws, its weights'
ESS printed; from a multivariate t with 5 degrees of freedom at the mode, Laplace scale x 1.2,
for d <= 20, and from the Laplace Gaussian itself above, where a t's radial law no longer
matches): max |mean error| and |sd error| in posterior sds and the largest 5% / 95% quantile
error in posterior sds. fit's predicted and realised cost (rows per effective sample) and
ESS per step are printed beside its figures. On the rare-covariate workload, exact MH
(random walk, all rows, ``--exact-draws`` steps per chain) gives the baseline ESS per second.
Every row records the 1-minute load average when it finished; a markdown table of all rows
goes beside the JSON (``results/<out>.md``).

Run ``python benchmarks/bench_fit.py --workloads d10-N1e5,rare-N2e5`` for the small sizes;
results go to ``benchmarks/results/bench_fit.json``. Timings are whole-process figures on the
machine the JSON names, with its load.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]   # this checkout first, then _common
from _common import RESULTS, cv_logistic_dataset, write  # noqa: E402

from samplers import (ControlVariates, GaussianPrior, LogisticRegression,  # noqa: E402
                      datasets, import_arviz)
from validation import fit  # noqa: E402

PRIOR_SD = 10.0
#: Rows from which a workload's data are written to disk and read as memmaps.
MEMMAP_ROWS = 5_000_000
#: name: (d or "rare", N, seed). Seed 2 at N = 10^6 is avoided: ControlVariates' Newton mode
#: search did not converge in 60 steps on it (samplers.models.control_variates; not looked into).
WORKLOADS = {
    "d10-N1e5": (10, 100_000, 1), "d10-N1e6": (10, 1_000_000, 7),
    "d10-N1e7": (10, 10_000_000, 3), "d100-N2e5": (100, 200_000, 4),
    "d100-N1e6": (100, 1_000_000, 5), "rare-N2e5": ("rare", 200_000, 6),
    "rare-N1e6": ("rare", 1_000_000, 8),
}


def data(kind, N, seed, tmpdir):
    """The workload's (X, y): in memory below ``MEMMAP_ROWS`` rows, else memmaps written in
    chunks (one chunk in memory at a time)."""
    rng = np.random.default_rng(seed)
    if kind == "rare":
        X, y, _ = datasets.rare_covariate_logistic(N, rng=rng, rare_rows=40)
        return X, y
    if N < MEMMAP_ROWS:
        return cv_logistic_dataset(N, rng, kind)
    theta = rng.normal(0.0, 1.0 / np.sqrt(kind), kind + 1)

    def rows(n, r):
        X = r.normal(size=(n, kind + 1))
        X[:, -1] = 1.0
        return X

    X = datasets.write_memmap(Path(tmpdir) / "X.npy", N, rows, rng=rng)
    done = [0]

    def labels(n, r):
        eta = np.asarray(X[done[0]:done[0] + n]) @ theta
        done[0] += n
        return (r.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(float)

    y = datasets.write_memmap(Path(tmpdir) / "y.npy", N, labels, rng=rng)
    return X, y


def ess_bulk(x):
    """Bulk ESS per coordinate of draws of shape (chains, draws, d)."""
    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([float(az.ess(x[:, :, j], method="bulk")) for j in range(x.shape[2])])


# --- reference ---------------------------------------------------------------------------------

def loglik_jax(X, y, thetas, block_rows=1 << 17):
    """Full-data log-likelihood at each row of ``thetas`` (JAX, blocks of rows)."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def block(th, Xb, sb):
        return jnp.sum(jax.nn.log_sigmoid(sb[:, None] * (Xb @ th.T)), axis=0)

    th = jnp.asarray(thetas)
    total = np.zeros(len(thetas))
    for r in range(0, X.shape[0], block_rows):
        Xb = jnp.asarray(np.asarray(X[r:r + block_rows]))
        sb = jnp.asarray(2.0 * np.asarray(y[r:r + block_rows]) - 1.0)
        total += np.asarray(block(th, Xb, sb))
    return total


def reference(X, y, mode, cov, n_draws, rng, df=5.0, widen=1.2):
    """Importance sampling from a multivariate t at the mode (``df`` None: the Gaussian
    N(mode, widen^2 cov)): weighted means, sds, quantiles, and the weights' ESS."""
    from scipy import stats

    d = mode.size
    q = (stats.multivariate_normal(mean=mode, cov=widen ** 2 * cov, seed=rng) if df is None
         else stats.multivariate_t(loc=mode, shape=widen ** 2 * cov, df=df, seed=rng))
    thetas = q.rvs(n_draws).reshape(n_draws, d)
    ll = np.concatenate([loglik_jax(X, y, thetas[a:a + 500]) for a in range(0, n_draws, 500)])
    logw = ll - 0.5 * np.sum(thetas ** 2, axis=1) / PRIOR_SD ** 2 - q.logpdf(thetas)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ thetas
    sd = np.sqrt(w @ (thetas - mean) ** 2)
    qs = np.array([[_wquantile(thetas[:, j], w, p) for j in range(d)] for p in (0.05, 0.95)])
    return dict(mean=mean, sd=sd, q05=qs[0], q95=qs[1], ess=float(1.0 / np.sum(w ** 2)))


def _wquantile(x, w, p):
    order = np.argsort(x)
    c = np.cumsum(w[order])
    return float(np.interp(p, c - 0.5 * w[order], x[order]))


def accuracy(x, ref):
    """Errors in posterior sds of draws x (chains, draws, d) against the reference, each the
    largest over the coordinates, with the Monte Carlo standard error at that coordinate
    (``*_mcse``: the chain's, from arviz's ``mcse``, and the reference's, from its weights' ESS,
    combined) and the largest error in units of its MCSE over the coordinates (``*_z``): a
    bias shows as z well above 3-4 (the largest of d normal errors is about
    sqrt(2 log d) MCSEs)."""
    az = import_arviz()
    s = x.reshape(-1, x.shape[2])
    sd, d = ref["sd"], x.shape[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mc = {
            "mean": np.array([float(az.mcse(x[:, :, j], method="mean")) for j in range(d)]),
            "sd": np.array([float(az.mcse(x[:, :, j], method="sd")) for j in range(d)]),
            "q05": np.array([float(az.mcse(x[:, :, j], method="quantile", prob=0.05))
                             for j in range(d)]),
            "q95": np.array([float(az.mcse(x[:, :, j], method="quantile", prob=0.95))
                             for j in range(d)])}
    # the reference's own error: mean sd / sqrt(ESS), sd 1 / sqrt(2 ESS) (in sds), a 5% or
    # 95% quantile sqrt(p (1 - p)) / phi(1.645) / sqrt(ESS) = 2.11 / sqrt(ESS) sds (Gaussian)
    ref_mc = {"mean": 1.0, "sd": 1.0 / np.sqrt(2.0), "q05": 2.11, "q95": 2.11}
    err = {"mean": s.mean(axis=0) - ref["mean"], "sd": s.std(axis=0) - sd,
           "q05": np.quantile(s, 0.05, axis=0) - ref["q05"],
           "q95": np.quantile(s, 0.95, axis=0) - ref["q95"]}
    out = {}
    for key, e in err.items():
        e = np.abs(e) / sd
        mcse = np.sqrt((mc[key] / sd) ** 2 + ref_mc[key] ** 2 / ref["ess"])
        j = int(np.argmax(e))
        out[f"{key}_error"] = float(e[j])
        out[f"{key}_mcse"] = float(mcse[j])
        out[f"{key}_z"] = float(np.max(e / mcse))
    return out


# --- samplers ----------------------------------------------------------------------------------

def fit_row(model, ref, args, seed):
    t0 = time.perf_counter()
    idata = fit(model, tolerance=0.01, draws=args.draws, ess=args.ess, max_seconds=args.cap,
                rng=seed, progress=False)
    wall = time.perf_counter() - t0
    a = idata.posterior.attrs
    x = idata.posterior.theta.values
    e = ess_bulk(x)
    chain_s = a["timings"]["chains"]
    return dict(sampler="fit", route=a["route"], pareto_k=a["pareto_k"],
                proposals_tried=a["proposals_tried"], all_in_s=wall,
                sampling_s=chain_s, setup_s=wall - chain_s, timings=a["timings"],
                draws=int(x.shape[0] * x.shape[1]), min_ess=float(e.min()),
                ess_per_s_all_in=float(e.min() / wall), ess_per_s_sampling=float(e.min() / chain_s),
                rows_per_step=a["rows_realised"], cost_predicted=a["cost_predicted"],
                cost_realised=a["cost_realised"], rhat=a["rhat"], candidates=a["candidates"],
                ess_per_step_predicted=a["ess_per_step_predicted"],
                ess_per_step_realised=a["ess_per_step_realised"],
                acceptance_predicted=a["acceptance_predicted"],
                acceptance_realised=a["acceptance_rate"], load=os.getloadavg()[0],
                **accuracy(x, ref))


def exact_row(model, ref, args, seed):
    t0 = time.perf_counter()
    idata = fit(model, draws=args.exact_draws, route="exact/walk", rng=seed, progress=False)
    wall = time.perf_counter() - t0
    x = idata.posterior.theta.values
    e = ess_bulk(x)
    chain_s = idata.posterior.attrs["timings"]["chains"]
    return dict(sampler="exact MH (walk)", all_in_s=wall, sampling_s=chain_s,
                draws=int(x.shape[0] * x.shape[1]), min_ess=float(e.min()),
                ess_per_s_all_in=float(e.min() / wall),
                ess_per_s_sampling=float(e.min() / chain_s), load=os.getloadavg()[0],
                **accuracy(x, ref))


def numpyro_row(X, y, ref, args, seed, hmcecs):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.optimize import minimize
    from numpyro.infer import HMCECS, MCMC, NUTS

    jax.config.update("jax_enable_x64", True)
    N, k = X.shape
    Xj, yj = jnp.asarray(np.asarray(X)), jnp.asarray(np.asarray(y))
    t0 = time.perf_counter()

    def neg(th):
        return -(jnp.sum(jax.nn.log_sigmoid((2 * yj - 1) * (Xj @ th)))
                 - 0.5 * th @ th / PRIOR_SD ** 2)

    mode = minimize(neg, jnp.zeros(k), method="BFGS").x
    jax.block_until_ready(mode)
    t_mode = time.perf_counter() - t0
    m = args.hmcecs_m if hmcecs else None

    def model(X, y):
        theta = numpyro.sample("theta", dist.Normal(0.0, PRIOR_SD).expand([k]).to_event(1))
        if m is None:
            numpyro.sample("obs", dist.Bernoulli(logits=X @ theta), obs=y)
            return
        with numpyro.plate("N", N, subsample_size=m) as idx:
            numpyro.sample("obs", dist.Bernoulli(logits=X[idx] @ theta), obs=y[idx])

    kernel = (HMCECS(NUTS(model), num_blocks=100, proxy=HMCECS.taylor_proxy({"theta": mode}))
              if hmcecs else NUTS(model))
    mcmc = MCMC(kernel, num_warmup=args.warmup, num_samples=args.numpyro_draws,
                num_chains=1, progress_bar=False)
    t1 = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(seed), Xj, yj, init_params={"theta": mode})
    jax.block_until_ready(mcmc.post_warmup_state)
    t_warm = time.perf_counter() - t1
    t2 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, Xj, yj)
    x = np.asarray(mcmc.get_samples()["theta"])[None]
    t_first = time.perf_counter() - t2            # compiles the sampling loop, then samples
    mcmc.post_warmup_state = mcmc.last_state
    t3 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, Xj, yj)
    x2 = np.asarray(mcmc.get_samples()["theta"])[None]
    t_sample = time.perf_counter() - t3           # the same length again: sampling only
    x = np.concatenate([x, x2], axis=1)
    e = ess_bulk(x)
    all_in = t_mode + t_warm + t_first + t_sample
    return dict(sampler="NumPyro HMCECS" if hmcecs else "NumPyro NUTS", all_in_s=all_in,
                sampling_s=2 * t_sample, mode_s=t_mode, warmup_s=t_warm,
                compile_s=max(t_first - t_sample, 0.0), draws=int(x.shape[1]),
                min_ess=float(e.min()), ess_per_s_all_in=float(e.min() / all_in),
                ess_per_s_sampling=float(e.min() / (2 * t_sample)), load=os.getloadavg()[0],
                **accuracy(x, ref))


def show(name, r):
    print(f"  {r['sampler']:<16} {r.get('route', ''):<26} all-in {r['all_in_s']:8.2f} s  "
          f"sampling {r['sampling_s']:8.2f} s  min ESS {r['min_ess']:7.0f}  ESS/s all-in "
          f"{r['ess_per_s_all_in']:9.1f}  sampling {r['ess_per_s_sampling']:9.1f}  "
          f"load {r['load']:.1f}", flush=True)
    print("    errors (sds, max over coordinates) with the MCSE there and max |err| / MCSE: "
          + "  ".join(f"{k} {r[k + '_error']:.3f} (mcse {r.get(k + '_mcse', np.nan):.3f}, "
                      f"z {r.get(k + '_z', np.nan):.1f})" for k in ("mean", "sd", "q05", "q95")),
          flush=True)
    if "cost_predicted" in r:
        print(f"    predicted {r['cost_predicted']:,.0f} vs realised {r['cost_realised']:,.0f} "
              f"rows per effective sample; ESS per step predicted "
              f"{r['ess_per_step_predicted']:.3f} vs realised {r['ess_per_step_realised']:.3f};"
              f" proposals tried: {r['proposals_tried']}; timings {r['timings']}", flush=True)


def _err(r, key) -> str:
    """An error with its MCSE, when the row has one (older JSON files do not)."""
    e = f"{r[key + '_error']:.3f}"
    return e if key + "_mcse" not in r else e + f" ± {r[key + '_mcse']:.3f}"


def table(out) -> str:
    """All rows as one markdown table, fit's ratio to HMCECS sampling-only beside each."""
    head = ("| workload | sampler | route | all-in s | sampling s | min ESS | ESS/s all-in | "
            "ESS/s sampling | fit all-in / HMCECS sampling | mean err ± MCSE | sd err ± MCSE | "
            "q05 err ± MCSE | q95 err ± MCSE | cost pred / real | ESS/step pred / real | load |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, w in out.items():
        hmcecs = next((r for r in w["rows"] if r["sampler"] == "NumPyro HMCECS"), None)
        for r in w["rows"]:
            ratio = ("" if hmcecs is None or r["sampler"] != "fit" else
                     f"{r['ess_per_s_all_in'] / hmcecs['ess_per_s_sampling']:.2f}x")
            cost = (f"{r['cost_predicted']:,.0f} / {r['cost_realised']:,.0f}"
                    if "cost_predicted" in r else "")
            eps = (f"{r['ess_per_step_predicted']:.3f} / {r['ess_per_step_realised']:.3f}"
                   if "ess_per_step_predicted" in r else "")
            lines.append(
                f"| {name} (N = {w['N']:,}, d = {w['d']}) | {r['sampler']} | "
                f"{r.get('route', '')} | {r['all_in_s']:.1f} | {r['sampling_s']:.1f} | "
                f"{r['min_ess']:.0f} | {r['ess_per_s_all_in']:.1f} | "
                f"{r['ess_per_s_sampling']:.1f} | {ratio} | "
                + " | ".join(_err(r, k) for k in ("mean", "sd", "q05", "q95")) + f" | {cost} | "
                f"{eps} | {r['load']:.1f} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--ess", type=float, default=1000.0)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--cap", type=float, default=300.0, help="fit's sampling-time cap (s)")
    p.add_argument("--ref-draws", type=int, default=20_000)
    p.add_argument("--exact-draws", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--numpyro-draws", type=int, default=1000)
    p.add_argument("--hmcecs-m", type=int, default=1000)
    p.add_argument("--skip", default="", help="comma list of: fit, nuts, hmcecs, exact")
    p.add_argument("--nuts-max-n", type=int, default=1_000_000,
                   help="largest N at which NUTS (full-data gradients) runs")
    p.add_argument("--ref-gaussian-above-d", type=int, default=20,
                   help="the reference draws from the Laplace Gaussian above this d")
    p.add_argument("--ref-widen", type=float, default=None,
                   help="scale of the reference's proposal relative to the Laplace fit "
                        "(default 1.2 for the t, 1.0 for the Gaussian; above 1 the Gaussian "
                        "reference does not share the tails of fit's Gaussian proposal)")
    p.add_argument("--seed", type=int, default=None, help="replaces each workload's seed")
    p.add_argument("--out", default="bench_fit", help="results/<out>.json")
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    out = {}
    for name in args.workloads.split(","):
        kind, N, seed = WORKLOADS[name]
        seed = seed if args.seed is None else args.seed
        with tempfile.TemporaryDirectory() as tmp:
            X, y = data(kind, N, seed, tmp)
            model = LogisticRegression(X, y, prior=GaussianPrior(0.0, PRIOR_SD))
            print(f"{name}: N = {N:,}, d = {X.shape[1]}, load {os.getloadavg()[0]:.1f}",
                  flush=True)
            cv = ControlVariates(model)
            gauss = X.shape[1] > args.ref_gaussian_above_d
            ref = reference(X, y, cv.center.theta, cv.laplace_covariance(), args.ref_draws,
                            np.random.default_rng(seed + 100), df=None if gauss else 5.0,
                            widen=args.ref_widen or (1.0 if gauss else 1.2))
            print(f"  reference: importance sampling from the Laplace "
                  f"{'Gaussian' if gauss else 't (df 5)'}, scale x "
                  f"{args.ref_widen or (1.0 if gauss else 1.2):g}, weights' ESS "
                  f"{ref['ess']:,.0f} of {args.ref_draws:,}", flush=True)
            rows = [] if "fit" in skip else [fit_row(model, ref, args, seed)]
            if rows:
                show(name, rows[-1])
            if kind == "rare" and "exact" not in skip:
                rows.append(exact_row(model, ref, args, seed))
                show(name, rows[-1])
            for which in ("hmcecs", "nuts"):
                if which not in skip and not (which == "nuts" and N > args.nuts_max_n):
                    rows.append(numpyro_row(X, y, ref, args, seed, which == "hmcecs"))
                    show(name, rows[-1])
            out[name] = dict(N=N, d=int(X.shape[1]), reference_ess=ref["ess"],
                             reference="laplace-gaussian" if gauss else "t5", seed=seed,
                             reference_widen=args.ref_widen or (1.0 if gauss else 1.2), rows=rows,
                             load_after=os.getloadavg()[0])
            del X, y, model, cv
        save(args, out)          # after each workload: a long run keeps what it finished
    print(table(out))


def save(args, out):
    """The JSON (with the machine) and the markdown table of the workloads so far."""
    write(args.out, {"args": vars(args), "workloads": out})
    (RESULTS / f"{args.out}.md").write_text(table(out) + "\n")


if __name__ == "__main__":
    main()
