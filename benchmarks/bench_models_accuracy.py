"""GLM families through ``validation.fit`` beside NumPyro NUTS and HMCECS: accuracy and speed.

Data (``bench_models.make_data``): d = 10 standard-normal covariates and an intercept, N rows
(``--sizes``); Poisson, probit and negative-binomial responses (dispersion r = 2). The models:
``samplers.GLM`` with the prior N(0, 10^2) on every coefficient and, for the negative binomial,
its **dispersion estimated** (theta's last coordinate ``log r``, prior N(0, 3^2), GLM's
default). NumPyro gets the same likelihood and prior.

For each family and N:

* **reference**: importance sampling from a multivariate t (5 df, scale 1.2 x the Laplace
  covariance at the GLM's mode), ``--is-draws`` draws, the log-likelihood written
  independently in JAX (not our kernels; float64, in chunks of at most 2 x 10^7 rows x draws,
  one thread per core); its weights' ESS is recorded;
* **fit**: ``validation.fit(model, tolerance=0.01, draws=--draws)`` (two chains);
* **NumPyro NUTS** and **HMCECS** (Taylor proxy at the mode, ``--hmcecs-m`` rows per
  subsample, 100 blocks): one chain, ``--warmup`` warm-up and ``--numpyro-draws`` draws, run
  twice so the second run times sampling alone; the mode (for HMCECS's proxy and both
  starts) by Newton's method in JAX with autodiff derivatives (``_jax_mode.newton_mode_jax``;
  JAX's BFGS stopped far from the mode at large N), counted in the all-in time; its gradient
  norm and its distance to the GLM's mode in posterior sds are printed and recorded
  (``mode_check``). ``--laplace-mass`` gives NUTS (and HMCECS's inner NUTS) the inverse of
  that Newton Hessian as a fixed dense inverse mass matrix (as ``bench_fit.py --laplace-mass``:
  the default adaptation starts from the identity, far from variances of 1e-6 at N = 10^6).

Recorded per sampler: seconds all-in and sampling only, min bulk ESS over the coordinates,
ESS per second both ways, rows read per step (fit: the chain's realised rows; NUTS: N x
leapfrog steps; HMCECS: m x leapfrog steps, the proxy's sums aside), and the accuracy: max
over coordinates of |mean error| / sd and |sd error| / sd against the reference (target 0.05
at ESS >= 1000), with the Monte Carlo standard error of a mean error beside it
(``sqrt(1/ESS + 1/ESS_reference)`` in sds).

Run:  python benchmarks/bench_models_accuracy.py [--sizes 100000] [--families ...]
Writes benchmarks/results/models_accuracy.json (load average included).
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]   # this checkout first, then _common
from _common import write  # noqa: E402
from _jax_mode import autodiff_grad_hess, mode_check, newton_mode_jax  # noqa: E402
from bench_models import D, PRIOR_SD, make_data, min_ess  # noqa: E402

from samplers import GLM, ControlVariates, GaussianPrior  # noqa: E402

LOG_R_SD = 3.0
FAMILIES = ("poisson", "probit", "negative_binomial")


def glm_model(data):
    if data.family == "negative_binomial":
        prior = GaussianPrior(0.0, np.r_[np.full(D + 1, PRIOR_SD), LOG_R_SD])
        return GLM(data.X, data.y, "negative_binomial", prior=prior)
    args = dict(poisson=dict(family="poisson"),
                probit=dict(family="bernoulli", link="probit"))[data.family]
    return GLM(data.X, data.y, prior=GaussianPrior(0.0, PRIOR_SD), **args)


def jax_loglik(family, X, y):
    """``loglik(theta) -> sum_i log p(y_i | theta)`` in JAX (the independent reference)."""
    import jax.numpy as jnp
    from jax.scipy.special import gammaln, log_ndtr

    k = X.shape[1]

    def loglik(theta):
        eta = X @ theta[:k]
        if family == "poisson":
            return jnp.sum(y * eta - jnp.exp(eta) - gammaln(y + 1.0))
        if family == "probit":
            return jnp.sum(jnp.where(y > 0, log_ndtr(eta), log_ndtr(-eta)))
        r = jnp.exp(theta[k])
        log_mu_r = jnp.logaddexp(eta, theta[k])            # log(mu + r)
        return jnp.sum(gammaln(y + r) - gammaln(r) - gammaln(y + 1.0) + r * (theta[k] - log_mu_r)
                       + y * (eta - log_mu_r))

    return loglik


def log_prior(theta, k):
    lp = -0.5 * np.sum(theta[..., :k] ** 2, axis=-1) / PRIOR_SD**2
    if theta.shape[-1] > k:
        lp = lp - 0.5 * theta[..., k] ** 2 / LOG_R_SD**2
    return lp


def reference(data, cv, n_draws, seed):
    import jax
    from scipy import stats

    jax.config.update("jax_enable_x64", True)
    mode, cov = cv.center.theta, cv.laplace_covariance()
    q = stats.multivariate_t(loc=mode, shape=1.2**2 * cov, df=5.0, seed=seed)
    thetas = q.rvs(n_draws).reshape(n_draws, mode.size)
    f = jax.jit(jax.vmap(jax_loglik(data.family, jax.numpy.asarray(data.X),
                                    jax.numpy.asarray(data.y))))
    step = max(1, min(200, 20_000_000 // data.X.shape[0]))   # draws per call: <= 2e7 etas

    def chunk(a):
        return np.asarray(f(jax.numpy.asarray(thetas[a:a + step])))

    # one thread per core: XLA runs each call on one core and releases the GIL
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        ll = np.concatenate(list(pool.map(chunk, range(0, n_draws, step))))
    logw = ll + log_prior(thetas, data.X.shape[1]) - q.logpdf(thetas)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ thetas
    return dict(mean=mean, sd=np.sqrt(w @ (thetas - mean) ** 2), ess=float(1.0 / np.sum(w**2)),
                fit_mode=np.asarray(mode))


def accuracy(x, ref):
    """Largest |mean error| and |sd error| over the coordinates, in reference sds, with
    their Monte Carlo standard errors: ``sqrt(1/ESS + 1/ESS_ref)`` (of an sd error, over
    sqrt(2)); where the reference carries its own per-coordinate standard errors
    (``mcse_mean``, ``mcse_sd``: ``is_reference.importance_reference``) the reference's part
    is the largest of them in sds instead, and ``max_z_mean`` / ``max_z_sd`` are the largest
    per-coordinate errors over their own standard errors."""
    s = x.reshape(-1, x.shape[-1])
    e = min_ess(x)
    err_mean = np.abs(s.mean(axis=0) - ref["mean"]) / ref["sd"]
    err_sd = np.abs(s.std(axis=0) - ref["sd"]) / ref["sd"]
    out = dict(max_mean_error_sd=float(np.max(err_mean)), max_sd_error_sd=float(np.max(err_sd)),
               mcse_mean_sd=float(np.sqrt(1.0 / e + 1.0 / ref["ess"])),
               mcse_sd_sd=float(np.sqrt(0.5 / e + 0.5 / ref["ess"])), min_ess=e)
    if "mcse_mean" in ref:
        rm, rs = ref["mcse_mean"] / ref["sd"], ref["mcse_sd"] / ref["sd"]
        out.update(mcse_mean_sd=float(np.sqrt(1.0 / e + np.max(rm) ** 2)),
                   mcse_sd_sd=float(np.sqrt(0.5 / e + np.max(rs) ** 2)),
                   ref_mcse_mean_sd=float(np.max(rm)), ref_mcse_sd_sd=float(np.max(rs)),
                   max_z_mean=float(np.max(err_mean / np.sqrt(1.0 / e + rm**2))),
                   max_z_sd=float(np.max(err_sd / np.sqrt(0.5 / e + rs**2))))
    return out


def fit_row(model, ref, draws, seed):
    from validation import fit

    t0 = time.perf_counter()
    idata = fit(model, tolerance=0.01, draws=draws, rng=seed, progress=False)
    wall = time.perf_counter() - t0
    a = idata.posterior.attrs
    x = np.asarray(idata.posterior.theta.values)
    acc = accuracy(x, ref)
    chain_s = a["timings"]["chains"]
    return dict(sampler="fit (GLM)", route=a["route"], all_in_s=wall, sampling_s=chain_s,
                timings=a["timings"], draws=int(x.shape[0] * x.shape[1]),
                ess_per_s_all_in=acc["min_ess"] / wall,
                ess_per_s_sampling=acc["min_ess"] / chain_s,
                rows_per_step=float(a["rows_realised"]), **acc)


def numpyro_row(data, ref, args, seed, hmcecs):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import log_ndtr
    from numpyro.infer import HMCECS, MCMC, NUTS

    jax.config.update("jax_enable_x64", True)
    X, y = jnp.asarray(data.X), jnp.asarray(data.y)
    N, k = data.X.shape
    nb = data.family == "negative_binomial"
    loglik = jax_loglik(data.family, X, y)
    t0 = time.perf_counter()

    def neg(th):
        lp = -0.5 * th[:k] @ th[:k] / PRIOR_SD**2
        if nb:
            lp = lp - 0.5 * th[k] ** 2 / LOG_R_SD**2
        return -(loglik(th) + lp)

    mode, hess, grad, newton_steps = newton_mode_jax(
        autodiff_grad_hess(lambda th: -neg(th)), np.zeros(k + nb))
    t_mode = time.perf_counter() - t0
    check = dict(newton_steps=newton_steps, seconds=t_mode,
                 **mode_check(mode, hess, grad, ref["fit_mode"], ref["sd"]))
    print(f"    {'HMCECS' if hmcecs else 'NUTS'} mode (Newton, {newton_steps} steps, "
          f"{t_mode:.1f} s): gradient norm {check['grad_norm']:.2e}, Newton decrement "
          f"{check['newton_decrement']:.1e}, largest distance to the GLM's mode "
          f"{check['max_distance_to_fit_mode_sd']:.2e} posterior sds", flush=True)
    m = args.hmcecs_m if hmcecs else None

    def likelihood(Xs, ys, theta, log_r):
        eta = Xs @ theta
        if data.family == "poisson":
            return dist.Poisson(jnp.exp(eta)), ys
        if data.family == "probit":
            return dist.Bernoulli(logits=log_ndtr(eta) - log_ndtr(-eta)), ys
        return dist.NegativeBinomial2(jnp.exp(eta), jnp.exp(log_r)), ys

    def model(X, y):
        theta = numpyro.sample("theta", dist.Normal(0.0, PRIOR_SD).expand([k]).to_event(1))
        log_r = numpyro.sample("log_r", dist.Normal(0.0, LOG_R_SD)) if nb else None
        if m is None:
            d, obs = likelihood(X, y, theta, log_r)
            numpyro.sample("obs", d, obs=obs)
            return
        with numpyro.plate("N", N, subsample_size=m) as idx:
            d, obs = likelihood(X[idx], y[idx], theta, log_r)
            numpyro.sample("obs", d, obs=obs)

    init = {"theta": mode[:k]}
    if nb:
        init["log_r"] = mode[k]
    nuts = {}
    if getattr(args, "laplace_mass", False):
        # theta (then log r) in one dense block, in the Newton Hessian's order
        sites = ("theta", "log_r") if nb else ("theta",)
        nuts = dict(dense_mass=[sites], inverse_mass_matrix={sites: jnp.linalg.inv(hess)},
                    adapt_mass_matrix=False)
    kernel = (HMCECS(NUTS(model, **nuts), num_blocks=100, proxy=HMCECS.taylor_proxy(init))
              if hmcecs else NUTS(model, **nuts))
    mcmc = MCMC(kernel, num_warmup=args.warmup, num_samples=args.numpyro_draws, num_chains=1,
                progress_bar=False)
    t1 = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(seed), X, y, init_params=init)
    jax.block_until_ready(mcmc.post_warmup_state)
    t_warm = time.perf_counter() - t1
    runs, steps = [], []
    field = "hmc_state.num_steps" if hmcecs else "num_steps"   # leapfrog steps per draw
    times = []
    for _ in range(2):      # the first run compiles the sampling loop; the second samples only
        t = time.perf_counter()
        mcmc.run(mcmc.post_warmup_state.rng_key, X, y, extra_fields=(field,))
        s = mcmc.get_samples()
        draws = np.asarray(s["theta"])
        if nb:
            draws = np.column_stack([draws, np.asarray(s["log_r"])])
        runs.append(draws)
        steps.append(np.asarray(mcmc.get_extra_fields()[field], dtype=float))
        times.append(time.perf_counter() - t)
        mcmc.post_warmup_state = mcmc.last_state
    x = np.concatenate(runs)[None]
    acc = accuracy(x, ref)
    all_in = t_mode + t_warm + sum(times)
    sampling = 2 * times[1]
    return dict(sampler="NumPyro HMCECS" if hmcecs else "NumPyro NUTS", all_in_s=all_in,
                sampling_s=sampling, mode_s=t_mode, warmup_s=t_warm, draws=int(x.shape[1]),
                mode_check=check, settings=dict(
                    warmup=args.warmup, draws_per_run=args.numpyro_draws, mode="Newton",
                    mass=("Laplace, dense, fixed" if nuts else "identity, adapted"),
                    **(dict(subsample=m, num_blocks=100) if hmcecs else {})),
                ess_per_s_all_in=acc["min_ess"] / all_in,
                ess_per_s_sampling=acc["min_ess"] / sampling,
                rows_per_step=float(np.concatenate(steps).mean() * (m if hmcecs else N)), **acc)


def show(N, family, r):
    print(f"{N:>8} {family:<18} {r['sampler']:<15} all-in {r['all_in_s']:7.1f} s, sampling "
          f"{r['sampling_s']:7.2f} s, min ESS {r['min_ess']:6.0f}, ESS/s {r['ess_per_s_all_in']:7.1f}"
          f" all-in / {r['ess_per_s_sampling']:8.1f} sampling, {r['rows_per_step']:10.1f} rows/step;"
          f" max |mean err| {r['max_mean_error_sd']:.3f} sd, |sd err| {r['max_sd_error_sd']:.3f}"
          f" sd (MC se {r['mcse_mean_sd']:.3f})", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--draws", type=int, default=5000, help="fit's steps per chain")
    ap.add_argument("--is-draws", type=int, default=20_000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--numpyro-draws", type=int, default=1000)
    ap.add_argument("--hmcecs-m", type=int, default=1000)
    ap.add_argument("--no-numpyro", action="store_true")
    ap.add_argument("--laplace-mass", action="store_true",
                    help="NUTS and HMCECS take the Newton mode's Laplace covariance as a "
                         "fixed dense inverse mass matrix")
    ap.add_argument("--out", default="models_accuracy")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    print(f"load average {load_before:.2f} on {os.cpu_count()} cores", flush=True)
    rng = np.random.default_rng(20261127)
    rows = []
    for N in args.sizes:
        for family in args.families:
            data = make_data(family, N, rng)
            model = glm_model(data)
            t0 = time.perf_counter()
            ref = reference(data, ControlVariates(model), args.is_draws, 1)
            print(f"{N:>8} {family:<18} reference: importance sampling, weights' ESS "
                  f"{ref['ess']:.0f} of {args.is_draws} ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
            results = [fit_row(model, ref, args.draws, int(rng.integers(2**31)))]
            show(N, family, results[-1])
            if not args.no_numpyro:
                for hmcecs in (False, True):
                    results.append(numpyro_row(data, ref, args, int(rng.integers(2**31)), hmcecs))
                    show(N, family, results[-1])
            rows.append(dict(N=N, family=family, d=D + 1, truth=data.theta.tolist(),
                             reference=dict(kind="importance sampling (t, 5 df)",
                                            ess=ref["ess"], mean=ref["mean"].tolist(),
                                            sd=ref["sd"].tolist()),
                             results=results))
            write(args.out, {"settings": vars(args), "load_average": {
                "before": load_before, "now": os.getloadavg()[0]}, "rows": rows})
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
