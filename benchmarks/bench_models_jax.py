"""Your own model by JAX and through NumPyro, fitted by ``validation.fit``, beside NumPyro
NUTS and HMCECS (issue 24; the JaxModel / from_numpyro rows of ``bench_models.py``).

For each family -- Poisson (log link), probit (Bernoulli with the normal cdf), negative
binomial (log link, dispersion r estimated: theta = (beta, log r)) -- on N rows with d = 10
covariates and an intercept, prior beta ~ N(0, 10^2), log r ~ N(0, 2^2) (r ~ LogNormal(0, 2)):

* **JaxModel**: the row's log-likelihood written in ``jax.numpy``, ``validation.fit``;
* **from_numpyro**: the same model written in NumPyro (a plate over the rows),
  ``validation.fit``;
* **NumPyro NUTS** on all rows (the long run is also the reference: accuracy is max over the
  coordinates of |mean - reference mean| / reference sd and |sd - reference sd| / reference sd,
  target <= 0.05 at ESS >= 1000);
* **NumPyro HMCECS** (Taylor proxy at the NUTS reference mean, subsample 1000 rows,
  ``num_blocks=100``);
* **microseconds per step** of the same designed test and walk on the control variates of
  the JaxModel, of the JaxModel translated to numba (``compile_jax_model``: a RowModel on
  the compiled loop), of a plain Python protocol model (NumPy ``loglik``, ``grad_loglik``,
  ``hess_loglik``), and of the built-in compiled ``LogisticRegression`` on the same X (the
  yardstick: targets JaxModel within 5x of it).

Reported per route: min bulk ESS (ArviZ), ESS per second all-in (model built, mode, design,
checks, chain) and sampling only (the chain's wall time), rows read per step, microseconds per
step, the accuracy. One run per N; the load average is recorded. Writes
``results/models_jax_<N>.json``.

JAX's asynchronous CPU dispatch is switched off for the whole run (``--async-dispatch``
keeps it): a JaxModel chain makes one small jitted call per decision, which synchronous
dispatch runs on the calling thread (75 against 150 us per call at load 13, one
measurement); the NumPyro runs are long programs, indifferent to it.

Usage: ``python benchmarks/bench_models_jax.py [--N 100000] [--draws 40000]
[--ref-draws 3000] [--families poisson,probit,negbin] [--no-hmcecs] [--async-dispatch]``
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import gammaln, log_ndtr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write  # noqa: E402

sys.path.insert(0, str(ROOT))   # measure this checkout, not whichever one is pip-installed

import design  # noqa: E402
from samplers import (AustereTest, ControlVariates, GaussianPrior, LogisticRegression,  # noqa: E402
                      RandomWalk, sample)
from samplers.models import JaxModel, compile_jax_model, from_numpyro  # noqa: E402
from validation import fit  # noqa: E402

D = 10
BETA_SD = 10.0
LOGR_SD = 2.0
HMCECS_SUBSAMPLE = 1000


# --- data and models ------------------------------------------------------------------------


def dataset(family, N, rng):
    X = np.column_stack([np.ones(N), rng.normal(size=(N, D)) / math.sqrt(D)])
    beta = np.concatenate([[0.3], rng.normal(0.0, 0.5, D)])
    eta = X @ beta
    if family == "poisson":
        y = rng.poisson(np.exp(eta)).astype(float)
    elif family == "probit":
        y = (rng.random(N) < 0.5 * (1 + np.vectorize(math.erf)(eta / math.sqrt(2)))).astype(float)
    else:
        r = 3.0
        y = rng.negative_binomial(r, r / (r + np.exp(eta))).astype(float)
    return X, y


def dim(family):
    return D + 1 + (family == "negbin")


def jax_row(family):
    import jax.numpy as jnp
    from jax.scipy.special import gammaln as jgammaln, log_ndtr as jlog_ndtr

    if family == "poisson":
        def row(theta, r):
            x, y = r
            eta = x @ theta
            return y * eta - jnp.exp(eta) - jgammaln(y + 1.0)
    elif family == "probit":
        def row(theta, r):
            x, y = r
            eta = x @ theta
            return y * jlog_ndtr(eta) + (1.0 - y) * jlog_ndtr(-eta)
    else:
        def row(theta, r):
            x, y = r
            eta = x @ theta[:-1]
            s = theta[-1]
            k = jnp.exp(s)
            log_k_mu = jnp.logaddexp(s, eta)                 # log(r + mu)
            return (jgammaln(y + k) - jgammaln(k) - jgammaln(y + 1.0)
                    + k * (s - log_k_mu) + y * (eta - log_k_mu))
    return row


def jax_logprior(family):
    import jax.numpy as jnp

    if family != "negbin":
        return lambda t: -0.5 * jnp.sum(t ** 2) / BETA_SD ** 2
    return lambda t: (-0.5 * jnp.sum(t[:-1] ** 2) / BETA_SD ** 2
                      - 0.5 * t[-1] ** 2 / LOGR_SD ** 2)


def numpyro_model(family, subsample=None):
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import ndtr

    def model(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, BETA_SD).expand([X.shape[1]]))
        r = (numpyro.sample("r", dist.LogNormal(0.0, LOGR_SD)) if family == "negbin"
             else None)
        with numpyro.plate("data", X.shape[0], subsample_size=subsample) as idx:
            Xb, yb = (X, y) if subsample is None else (X[idx], y[idx])
            eta = Xb @ beta
            if family == "poisson":
                d = dist.Poisson(jax_exp(eta))
            elif family == "probit":
                d = dist.Bernoulli(probs=jax_clip(ndtr(eta)))
            else:
                d = dist.NegativeBinomial2(mean=jax_exp(eta), concentration=r)
            numpyro.sample("y", d, obs=yb)

    return model


def jax_exp(x):
    import jax.numpy as jnp
    return jnp.exp(x)


def jax_clip(p):
    import jax.numpy as jnp
    return jnp.clip(p, 1e-300, 1.0 - 1e-16)


class PlainModel:
    """The family written to the protocol in NumPy: loglik, grad_loglik, hess_loglik."""

    def __init__(self, family, X, y):
        self.family, self.X, self.y = family, X, y
        self.N = X.shape[0]
        self.dim = dim(family)

    def _parts(self, theta, idx):
        x, y = self.X[idx], self.y[idx]
        if self.family == "negbin":
            return x, y, x @ theta[:-1], theta[-1]
        return x, y, x @ theta, None

    def loglik(self, theta, idx):
        x, y, eta, s = self._parts(theta, idx)
        if self.family == "poisson":
            return y * eta - np.exp(eta) - gammaln(y + 1.0)
        if self.family == "probit":
            return y * log_ndtr(eta) + (1 - y) * log_ndtr(-eta)
        k = math.exp(s)
        lkm = np.logaddexp(s, eta)
        return gammaln(y + k) - gammaln(k) - gammaln(y + 1) + k * (s - lkm) + y * (eta - lkm)

    def _glm_derivs(self, eta, y):
        if self.family == "poisson":
            mu = np.exp(eta)
            return y - mu, -mu
        # probit: d/deta of y log Phi + (1-y) log Phi(-eta)
        lp, lm = log_ndtr(eta), log_ndtr(-eta)
        phi = np.exp(-0.5 * eta ** 2) / math.sqrt(2 * math.pi)
        a, b = phi / np.exp(lp), phi / np.exp(lm)
        f1 = y * a - (1 - y) * b
        f2 = y * (-eta * a - a * a) + (1 - y) * (eta * b - b * b)
        return f1, f2

    def grad_loglik(self, theta, idx):
        if self.family == "negbin":
            return self._fd(theta, idx, self.loglik)
        x, y, eta, _ = self._parts(theta, idx)
        return self._glm_derivs(eta, y)[0][:, None] * x

    def hess_loglik(self, theta, idx):
        if self.family == "negbin":
            return self._fd(theta, idx, self.grad_loglik)
        x, y, eta, _ = self._parts(theta, idx)
        f2 = self._glm_derivs(eta, y)[1]
        return f2[:, None, None] * x[:, :, None] * x[:, None, :]

    def _fd(self, theta, idx, fn):
        cols = []
        for j in range(self.dim):
            h = 1e-5 * (1 + abs(theta[j]))
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            cols.append((fn(up, idx) - fn(down, idx)) / (2 * h))
        return np.stack(cols, axis=-1)

    def logprior(self, theta):
        theta = np.asarray(theta)
        if self.family != "negbin":
            return -0.5 * float(theta @ theta) / BETA_SD ** 2
        return (-0.5 * float(theta[:-1] @ theta[:-1]) / BETA_SD ** 2
                - 0.5 * theta[-1] ** 2 / LOGR_SD ** 2)


# --- measures -------------------------------------------------------------------------------


def ess_bulk(samples):
    import arviz as az
    return np.asarray(az.ess(az.convert_to_dataset(samples[None]), method="bulk").x.values)


def accuracy(samples, ref):
    mean, sd = ref
    return dict(max_mean_error=float(np.max(np.abs(samples.mean(0) - mean) / sd)),
                max_sd_error=float(np.max(np.abs(samples.std(0) - sd) / sd)))


def numpyro_run(model, X, y, warmup, draws, seed, init=None, hmcecs_center=None):
    import jax
    from numpyro.infer import HMCECS, MCMC, NUTS

    kernel = NUTS(model)
    if hmcecs_center is not None:
        kernel = HMCECS(kernel, num_blocks=100, proxy=HMCECS.taylor_proxy(hmcecs_center))
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, progress_bar=False)
    t0 = time.perf_counter()
    if True:
        X, y = jax.numpy.asarray(X), jax.numpy.asarray(y)
        mcmc.warmup(jax.random.PRNGKey(seed), X, y, init_params=init)
        jax.block_until_ready(mcmc.post_warmup_state)
        t_warm = time.perf_counter() - t0
        t1 = time.perf_counter()
        field = "hmc_state.num_steps" if hmcecs_center is not None else "num_steps"
        mcmc.run(mcmc.post_warmup_state.rng_key, X, y, extra_fields=(field,))
        s = mcmc.get_samples()
        jax.block_until_ready(s)
        t_run = time.perf_counter() - t1
        steps = float(np.mean(np.asarray(mcmc.get_extra_fields()[field])))
    theta = np.asarray(s["beta"], dtype=float)
    if "r" in s:
        theta = np.column_stack([theta, np.log(np.asarray(s["r"], dtype=float))])
    return theta, t_warm, t_run, steps


def fit_row(name, family, build, N, args, ref, rng_seed):
    t0 = time.perf_counter()
    model = build()
    idata = fit(model, tolerance=args.tolerance, draws=args.draws, n_trial=40, rng=rng_seed)
    allin = time.perf_counter() - t0
    theta = np.asarray(idata.posterior.theta).reshape(-1, model.dim)
    attrs = {**idata.posterior.attrs, **(getattr(idata, "attrs", None) or {})}
    wall = float(np.sum(attrs["wall_time"]))
    e = ess_bulk(theta)
    row = dict(route=name, family=family, N=N, steps=args.draws, min_ess=float(e.min()),
               ess_per_s_all_in=float(e.min() / allin), ess_per_s_sampling=float(e.min() / wall),
               seconds_all_in=allin, seconds_sampling=wall,
               us_per_step=1e6 * wall / args.draws,
               rows_per_step=float(idata.posterior.attrs["rows_realised"]),
               design=idata.posterior.attrs["settings"], test=idata.posterior.attrs["test"],
               acceptance=float(idata.posterior.attrs["acceptance_rate"]),
               **accuracy(theta, ref))
    return row, model


def us_per_step(model, steps, rng):
    """Microseconds per step of the same Austere test and walk on the model's control
    variates (the design at tolerance 0.01 on 20 Laplace pairs)."""
    cv = ControlVariates(model)
    walk = RandomWalk.from_laplace(cv)
    cov = cv.laplace_covariance()
    d = cv.dim
    f = np.linalg.cholesky(cov)
    thetas = cv.center.theta + rng.standard_normal((20, d)) @ f.T
    news = thetas + 2.38 / math.sqrt(d) * rng.standard_normal((20, d)) @ f.T
    plan = design.optimize(design.TrialChain.from_model(cv, thetas, news, progress=False), 0.01)
    test = AustereTest.from_design(plan)
    sample(cv, test, walk, cv.center.theta, 200, rng=rng)            # warm: compile
    chain = sample(cv, test, walk, cv.center.theta, steps, rng=rng)
    return 1e6 * chain.wall_time / steps, float(np.mean(chain.stats["n_used"]))


def show(r):
    print(f"{r['N']:>8} {r['family']:<8} {r['route']:<26} ESS {r.get('min_ess', float('nan')):>7.0f} "
          f"ESS/s all-in {r.get('ess_per_s_all_in', float('nan')):>8.1f} sampling "
          f"{r.get('ess_per_s_sampling', float('nan')):>8.1f}  rows/step "
          f"{r.get('rows_per_step', float('nan')):>9.1f}  us/step {r.get('us_per_step', float('nan')):>8.1f}"
          f"  mean err {r.get('max_mean_error', float('nan')):.3f} sd err "
          f"{r.get('max_sd_error', float('nan')):.3f}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--N", type=int, nargs="+", default=[100_000])
    p.add_argument("--draws", type=int, default=40_000)
    p.add_argument("--ref-draws", type=int, default=3000)
    p.add_argument("--ref-warmup", type=int, default=500)
    p.add_argument("--hmcecs-draws", type=int, default=2000)
    p.add_argument("--tolerance", type=float, default=0.01)
    p.add_argument("--step-draws", type=int, default=3000)
    p.add_argument("--families", default="poisson,probit,negbin")
    p.add_argument("--no-hmcecs", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--async-dispatch", action="store_true",
                   help="keep JAX's asynchronous CPU dispatch (default: off, see the Notes "
                        "of JaxModel: it halves a JaxModel's time per step)")
    args = p.parse_args(argv)
    import jax
    import jax.numpy as jnp

    if not args.async_dispatch:      # before JAX's first computation (a process setting)
        jax.config.update("jax_cpu_enable_async_dispatch", False)

    # NumPyro's samplers in float64 (the JaxModel routes scope it themselves)
    jax.config.update("jax_enable_x64", True)
    for N in args.N:
        rows = []
        rng = np.random.default_rng(args.seed)
        for family in args.families.split(","):
            X, y = dataset(family, N, rng)
            # the reference: a long NUTS run on all rows
            theta, t_warm, t_run, steps = numpyro_run(numpyro_model(family), X, y,
                                                      args.ref_warmup, args.ref_draws, 1)
            e = ess_bulk(theta)
            ref = (theta.mean(0), theta.std(0))
            nuts = dict(route="NumPyro NUTS (reference)", family=family, N=N,
                        steps=args.ref_draws, min_ess=float(e.min()),
                        ess_per_s_all_in=float(e.min() / (t_warm + t_run)),
                        ess_per_s_sampling=float(e.min() / t_run), seconds_all_in=t_warm + t_run,
                        seconds_sampling=t_run, us_per_step=1e6 * t_run / args.ref_draws,
                        rows_per_step=float(N * steps), max_mean_error=0.0, max_sd_error=0.0)
            rows.append(nuts)
            show(nuts)
            if not args.no_hmcecs:
                center = {"beta": jnp.asarray(ref[0][:D + 1])}
                if family == "negbin":
                    center["r"] = jnp.asarray(math.exp(ref[0][-1]))
                th, tw, tr, st = numpyro_run(numpyro_model(family, HMCECS_SUBSAMPLE), X, y,
                                             args.ref_warmup, args.hmcecs_draws, 2,
                                             init=center, hmcecs_center=center)
                e = ess_bulk(th)
                row = dict(route="NumPyro HMCECS (m=1000)", family=family, N=N,
                           steps=args.hmcecs_draws, min_ess=float(e.min()),
                           ess_per_s_all_in=float(e.min() / (tw + tr)),
                           ess_per_s_sampling=float(e.min() / tr), seconds_all_in=tw + tr,
                           seconds_sampling=tr, us_per_step=1e6 * tr / args.hmcecs_draws,
                           rows_per_step=float(HMCECS_SUBSAMPLE * st), **accuracy(th, ref))
                rows.append(row)
                show(row)
            row, jmodel = fit_row("JaxModel + fit", family,
                                  lambda: JaxModel(jax_row(family), (X, y), jax_logprior(family),
                                                   dim=dim(family)), N, args, ref, 3)
            rows.append(row)
            show(row)
            row, _ = fit_row("from_numpyro + fit", family,
                             lambda: from_numpyro(numpyro_model(family), X, y), N, args, ref, 4)
            rows.append(row)
            show(row)
            # microseconds per step of one designed test on each route's control variates
            srng = np.random.default_rng(5)
            translated = compile_jax_model(jmodel)   # a RowModel, or jmodel with a warning
            for name, model in (("JaxModel", jmodel),
                                (f"JaxModel translated ({type(translated).__name__})",
                                 translated),
                                ("plain Python protocol model", PlainModel(family, X, y))):
                us, used = us_per_step(model, args.step_draws, srng)
                r = dict(route=f"us/step: {name}", family=family, N=N, us_per_step=us,
                         rows_per_step=used)
                rows.append(r)
                show(r)
            if family == "probit":                   # the yardstick: the compiled logistic
                yl = (rng.random(N) < 1 / (1 + np.exp(-X @ np.r_[0.3, np.full(D, 0.3)]))
                      ).astype(float)
                us, used = us_per_step(LogisticRegression(X, yl, prior=GaussianPrior(0.0, BETA_SD)),
                                       args.step_draws, srng)
                r = dict(route="us/step: built-in LogisticRegression", family="logistic", N=N,
                         us_per_step=us, rows_per_step=used)
                rows.append(r)
                show(r)
        print(f"load average at the end: {os.getloadavg()}")
        write(f"models_jax_{N}", dict(N=N, args=vars(args), rows=rows))


if __name__ == "__main__":
    main()
