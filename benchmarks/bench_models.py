"""Model routes: microseconds per step and ``validation.fit`` accuracy, per family and route.

Data: d = 10 standard-normal covariates and an intercept, N rows (``--sizes``), coefficients
N(0, 0.3^2 / d) plus an intercept of 0.5 (probit: 0), responses drawn from each family
(negative binomial with dispersion r = 2, known to the model). Prior N(0, 10^2) on every
coefficient.

A *route* is one small entry of :data:`ROUTES`: a name, the family it fits and
``build(data) -> model``. For every family and route, at every N:

1. **time per step**: ``ControlVariates(model)`` (order 2, mode by its Newton pass) and a
   chain of ``--steps`` steps of the fixed test ``AustereTest(m=100, epsilon=0.05)`` with
   ``RandomWalk.from_laplace`` from the mode, on the compiled loop when the route has one
   (else the Python loop): microseconds per step (``chain.wall_time``, the loop alone) and
   rows read per step. The built-in ``LogisticRegression`` runs the same chain on the
   logistic data as the yardstick: the ratio column is a route's time per step over it
   (target: within 1.5x for the compiled routes), in wall time and in the thread's CPU
   time (the whole ``sample`` call; on a loaded machine the waits for a core are out of it);
   ``GLM`` also times the families of :data:`MORE_FAMILIES` and ``GLM estimated`` the gamma
   shape and Gaussian sd estimated (timed only);
   Routes of a user's own Poisson model: ``numba RowModel`` (numba row kernels with a
   Hessian-vector product; ``... hess`` with the full row Hessian), ``JaxModel numba`` (a
   JaxModel's row function translated to numba by ``compile_jax_model``), ``JaxModel JAX``
   (the JaxModel itself, a JAX call per batch on the Python loop) and ``python protocol``
   (NumPy methods). JAX routes need jax installed;
2. **fit** (``--fit``, at N <= ``--fit-max-n``): ``validation.fit(model, tolerance=0.01,
   draws=--draws)``: seconds all-in, min bulk ESS over the 11 coordinates, ESS per second
   all-in and sampling only (the chain's wall time), rows read per step, and the accuracy
   against a long reference chain (``--reference-draws`` draws of NumPyro NUTS when NumPyro
   is installed, else of the exact MH test on the compiled loop): max over coordinates of
   |mean error| / sd and |sd error| / sd (the target is 0.05 at ESS >= 1000; the Monte Carlo
   standard error of the mean error is printed beside it). A route whose ``fit`` refuses the
   model records the refusal.

Run:  python benchmarks/bench_models.py [--sizes 100000 1000000] [--steps 20000] [--repeats 1]
          [--fit]
          [--fit-max-n 100000] [--draws 40000] [--reference-draws 4000] [--out models]
Writes benchmarks/results/<out>.json (machine load included: compare within one run).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numba
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]   # this checkout first, then _common
from _common import write  # noqa: E402

from samplers import (  # noqa: E402
    GLM,
    AustereTest,
    ControlVariates,
    ExactTest,
    GaussianPrior,
    LogisticRegression,
    RandomWalk,
    import_arviz,
    sample,
)
from samplers.models import JaxModel, RowModel, compile_jax_model  # noqa: E402

az = import_arviz()
D = 10
PRIOR_SD = 10.0
DISPERSION = 2.0
FAMILIES = ("logistic", "poisson", "probit", "negative_binomial")
#: Families timed only (``GLM`` and ``GLM estimated`` routes; no fit reference written):
#: Bernoulli with the cloglog link, binomial with TRIALS trials, gamma with shape SHAPE,
#: Gaussian with noise sd NOISE_SD.
MORE_FAMILIES = ("cloglog", "binomial", "gamma", "gaussian")
TRIALS, SHAPE, NOISE_SD = 5, 3.0, 0.7


@dataclass(frozen=True)
class Data:
    family: str
    X: np.ndarray
    y: np.ndarray
    theta: np.ndarray


def make_data(family, N, rng) -> Data:
    theta = rng.normal(0.0, 0.3 / np.sqrt(D), D + 1)
    theta[-1] = 0.0 if family == "probit" else 0.5
    X = rng.normal(size=(N, D + 1))
    X[:, -1] = 1.0
    eta = X @ theta
    if family == "logistic":
        y = rng.random(N) < 1.0 / (1.0 + np.exp(-eta))
    elif family == "probit":
        from scipy.special import ndtr

        y = rng.random(N) < ndtr(eta)
    elif family == "poisson":
        y = rng.poisson(np.exp(eta))
    elif family == "negative_binomial":
        mu = np.exp(eta)
        y = rng.negative_binomial(DISPERSION, DISPERSION / (DISPERSION + mu))
    elif family == "cloglog":
        y = rng.random(N) < -np.expm1(-np.exp(eta))
    elif family == "binomial":
        y = rng.binomial(TRIALS, 1.0 / (1.0 + np.exp(-eta)))
    elif family == "gamma":
        y = rng.gamma(SHAPE, np.exp(eta) / SHAPE)
    else:
        y = eta + NOISE_SD * rng.normal(size=N)
    return Data(family, X, y.astype(float), theta)


def _prior():
    return GaussianPrior(0.0, PRIOR_SD)


_GLM_ARGS = {
    "logistic": dict(family="bernoulli", link="logit"),
    "probit": dict(family="bernoulli", link="probit"),
    "poisson": dict(family="poisson"),
    "negative_binomial": dict(family="negative_binomial", dispersion=DISPERSION),
    "cloglog": dict(family="bernoulli", link="cloglog"),
    "binomial": dict(family="binomial", trials=TRIALS),
    "gamma": dict(family="gamma", shape=SHAPE),
    "gaussian": dict(family="gaussian", scale=NOISE_SD),
}
#: The family parameter estimated (theta's last coordinate its log, prior N(0, 3^2)).
_ESTIMATED_ARGS = {
    "negative_binomial": dict(family="negative_binomial"),
    "gamma": dict(family="gamma"),
    "gaussian": dict(family="gaussian", scale="estimate"),
}


def estimated_glm(d):
    return GLM(d.X, d.y, prior=GaussianPrior(0.0, np.r_[np.full(D + 1, PRIOR_SD), 3.0]),
               **_ESTIMATED_ARGS[d.family])


class PoissonProtocol:
    """A Poisson regression written to the documented protocol in NumPy (the user's model
    before GLM): loglik, logprior and the per-row derivatives ControlVariates asks for."""

    def __init__(self, X, y):
        from scipy.special import gammaln

        self.X, self.y, self.N, self.dim = X, y, X.shape[0], X.shape[1]
        self._c = gammaln(y + 1.0)

    def loglik(self, theta, idx):
        eta = self.X[idx] @ theta
        return self.y[idx] * eta - np.exp(eta) - self._c[idx]

    def grad_loglik(self, theta, idx):
        x = self.X[idx]
        return (self.y[idx] - np.exp(x @ theta))[:, None] * x

    def hess_loglik(self, theta, idx):
        x = self.X[idx]
        return -np.exp(x @ theta)[:, None, None] * x[:, :, None] * x[:, None, :]

    def logprior(self, theta):
        return float(-0.5 * np.sum(theta**2) / PRIOR_SD**2)

    def grad_logprior(self, theta):
        return -theta / PRIOR_SD**2


@dataclass(frozen=True)
class Route:
    """One way to build a model: ``build(data)`` for the families in ``families``."""

    name: str
    families: tuple
    build: Callable
    compiled: bool = True
    fit: bool = True        # False: timed only (its accuracy run lives elsewhere)


# --- a user's own model: numba row kernels (RowModel), and a JaxModel, translated or not ----


@numba.njit
def poisson_row(data, i, theta):
    X, y, log_y_factorial = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    return y[i] * eta - math.exp(eta) - log_y_factorial[i]


@numba.njit
def poisson_grad(data, i, theta, out):
    X, y, _ = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    w = y[i] - math.exp(eta)
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@numba.njit
def poisson_hvp(data, i, theta, v, out):
    X, _, _ = data
    eta = 0.0
    xv = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
        xv += X[i, j] * v[j]
    w = -math.exp(eta) * xv
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@numba.njit
def poisson_hess(data, i, theta, out):
    X, _, _ = data
    eta = 0.0
    for j in range(X.shape[1]):
        eta += X[i, j] * theta[j]
    w = -math.exp(eta)
    for j in range(X.shape[1]):
        for k in range(X.shape[1]):
            out[j, k] = w * X[i, j] * X[i, k]


def row_model(d, second="hvp"):
    from scipy.special import gammaln

    kernels = {"hvp_row": poisson_hvp} if second == "hvp" else {"hess_row": poisson_hess}
    return RowModel(poisson_row, (d.X, d.y, gammaln(d.y + 1.0)), dim=d.X.shape[1],
                    logprior=_prior(), grad_row=poisson_grad, **kernels)


def jax_model(d):
    import jax.numpy as jnp
    from jax.scipy.special import gammaln

    def row(theta, r):
        x, y = r
        eta = x @ theta
        return y * eta - jnp.exp(eta) - gammaln(y + 1.0)

    return JaxModel(row, (d.X, d.y), _prior(), dim=d.X.shape[1])


#: The routes (helpers add theirs here: JaxModel, from_numpyro, a numba user kernel).
ROUTES = [
    Route("builtin", ("logistic",), lambda d: LogisticRegression(d.X, d.y, prior=_prior())),
    Route("GLM", FAMILIES, lambda d: GLM(d.X, d.y, prior=_prior(), **_GLM_ARGS[d.family])),
    Route("numba RowModel", ("poisson",), row_model),
    Route("numba RowModel hess", ("poisson",), lambda d: row_model(d, "hess")),
    Route("JaxModel numba", ("poisson",), lambda d: compile_jax_model(jax_model(d), warn=False)),
    Route("JaxModel JAX", ("poisson",), jax_model, compiled=False),
    Route("python protocol", ("poisson",), lambda d: PoissonProtocol(d.X, d.y), compiled=False),
    # the dispersion estimated: theta = (beta, log r), prior N(0, 3^2) on log r
    Route("GLM r estimated", ("negative_binomial",), estimated_glm,
          fit=False),   # fit's accuracy with r estimated: bench_models_accuracy.py
    # timed only: the other families, and the gamma shape and Gaussian sd estimated
    Route("GLM", MORE_FAMILIES, lambda d: GLM(d.X, d.y, prior=_prior(), **_GLM_ARGS[d.family]),
          fit=False),
    Route("GLM estimated", ("gamma", "gaussian"), estimated_glm, fit=False),
]


# --- references --------------------------------------------------------------------------


def numpyro_reference(data, draws, seed):
    """Posterior draws of NumPyro NUTS (4 chains of ``draws / 4`` after as many warm-up
    steps) on the same likelihood and prior, or None without NumPyro."""
    try:
        import jax
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    X, y = data.X, data.y

    def model():
        theta = numpyro.sample("theta", dist.Normal(0.0, PRIOR_SD).expand([X.shape[1]]))
        eta = X @ theta
        if data.family == "logistic":
            numpyro.sample("y", dist.Bernoulli(logits=eta), obs=y)
        elif data.family == "probit":
            numpyro.sample("y", dist.Bernoulli(probs=jax.scipy.stats.norm.cdf(eta)), obs=y)
        elif data.family == "poisson":
            numpyro.sample("y", dist.Poisson(jax.numpy.exp(eta)), obs=y)
        else:
            numpyro.sample("y", dist.NegativeBinomial2(jax.numpy.exp(eta), DISPERSION), obs=y)

    per_chain = max(draws // 4, 250)
    mcmc = MCMC(NUTS(model), num_warmup=per_chain, num_samples=per_chain, num_chains=4,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed))
    return np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])


def exact_reference(model, draws, seed):
    cv = ControlVariates(model)
    chain = sample(model, ExactTest(), RandomWalk.from_laplace(cv), cv.center.theta,
                   draws * 20, rng=seed, progress=False)
    return chain.samples[None, ::20]


def min_ess(samples):
    """Min bulk ESS over coordinates of ``samples`` (chains, draws, d)."""
    return float(az.ess(az.convert_to_dataset(samples), method="bulk").x.values.min())


# --- measurements ------------------------------------------------------------------------


def timing_chain(model, steps, compiled, seed):
    """The fixed timing chain on ``model``'s control variates, compiled and warmed: a
    function that runs it once and returns ``(microseconds per step, rows per step)``."""
    cv = ControlVariates(model)
    walk = RandomWalk.from_laplace(cv)
    test = AustereTest(m=100, epsilon=0.05)
    sample(cv, test, walk, cv.center.theta, 50, rng=0, compiled=compiled or None,
           progress=False)   # compile

    def run():
        cpu = time.thread_time()
        chain = sample(cv, test, walk, cv.center.theta, steps, rng=seed,
                       compiled=compiled or None, progress=False)
        cpu = time.thread_time() - cpu
        return (1e6 * chain.wall_time / steps, float(chain.stats["n_used"].mean()),
                1e6 * cpu / steps)
    return run


def run_fit(model, draws, seed, ref):
    from validation import fit

    t0 = time.perf_counter()
    try:
        idata = fit(model, tolerance=0.01, draws=draws, rng=seed, progress=False)
    except (TypeError, ValueError, RuntimeError) as exc:
        return {"refused": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - t0
    post = idata.posterior
    samples = np.asarray(post["theta"].values)
    wall = float(np.sum(post.attrs.get("wall_time") or idata.attrs.get("wall_time")))
    ess = min_ess(samples)
    flat = samples.reshape(-1, samples.shape[-1])
    ref_flat = ref.reshape(-1, ref.shape[-1])
    sd = ref_flat.std(axis=0)
    mean_err = np.abs(flat.mean(axis=0) - ref_flat.mean(axis=0)) / sd
    sd_err = np.abs(flat.std(axis=0) - sd) / sd
    return dict(seconds_all_in=seconds, seconds_sampling=wall, min_ess=ess,
                ess_per_s_all_in=ess / seconds, ess_per_s_sampling=ess / wall,
                rows_per_step=float(post.attrs["rows_realised"]),
                test=str(post.attrs["test"]), settings=str(post.attrs["settings"]),
                max_mean_error_sd=float(mean_err.max()), max_sd_error_sd=float(sd_err.max()),
                mcse_mean_sd=float(1.0 / np.sqrt(ess) + 1.0 / np.sqrt(min_ess(ref))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of timing chains over all routes, interleaved (each route "
                         "keeps its fastest)")
    ap.add_argument("--fit", action="store_true", help="also run validation.fit")
    ap.add_argument("--fit-max-n", type=int, default=100_000)
    ap.add_argument("--draws", type=int, default=40_000)
    ap.add_argument("--reference-draws", type=int, default=4000)
    ap.add_argument("--routes", nargs="*", default=None, help="route names (default: all)")
    ap.add_argument("--out", default="models")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(20261127)
    routes = [r for r in ROUTES if args.routes is None or r.name in args.routes]
    print(f"load average {load_before:.2f} on {os.cpu_count()} cores; {args.steps} steps per "
          "timing chain (AustereTest(m=100, epsilon=0.05) on ControlVariates)")
    rows = []

    def save():
        write(args.out, {"settings": vars(args), "load_average": {
            "before": load_before, "now": os.getloadavg()[0]}, "rows": rows})

    datasets = {}
    models = {}
    # 1. time per step of every route (all sizes first: the fits and references are slower);
    # the routes' chains run in --repeats interleaved rounds and each keeps its fastest, so
    # a change of load during the run falls on every route alike
    for N in args.sizes:
        used = {f for route in routes for f in route.families}
        data = datasets[N] = {f: make_data(f, N, rng) for f in FAMILIES + MORE_FAMILIES
                              if f in FAMILIES or f in used}
        timed = []
        for family in FAMILIES + MORE_FAMILIES:
            for route in routes:
                if family not in route.families:
                    continue
                t0 = time.perf_counter()
                model = route.build(data[family])
                built = time.perf_counter() - t0
                try:
                    run = timing_chain(model, args.steps, route.compiled,
                                       int(rng.integers(2**31)))
                except RuntimeError as exc:   # ControlVariates' mode search
                    rows.append(dict(N=N, family=family, route=route.name,
                                     failed=f"{type(exc).__name__}: {exc}"))
                    print(f"{N:>9} {family:<18} {route.name:<16} failed: {str(exc)[:120]}",
                          flush=True)
                    save()
                    continue
                timed.append((family, route, model, built, run, []))
        for _ in range(args.repeats):
            for *_, run, results in timed:
                results.append(run())
        base = next((min(r)[0] for family, route, *_, r in timed if route.name == "builtin"),
                    math.nan)
        base_cpu = next((min(x[2] for x in r) for family, route, *_, r in timed
                         if route.name == "builtin"), math.nan)
        for family, route, model, built, run, results in timed:
            us, used, _ = min(results)
            cpu = min(r[2] for r in results)
            row = dict(N=N, family=family, route=route.name, compiled=route.compiled,
                       build_seconds=built, us_per_step=us, rows_per_step_fixed=used,
                       us_per_step_all=[r[0] for r in results],
                       ratio_to_builtin_logistic=us / base,
                       # the thread's CPU time over the whole sample() call (set-up
                       # included): on a loaded machine, time spent waiting for a core is
                       # out of it
                       cpu_us_per_step=cpu, cpu_ratio_to_builtin_logistic=cpu / base_cpu)
            print(f"{N:>9} {family:<18} {route.name:<20} {us:8.1f} us/step "
                  f"{used:6.1f} rows/step  x{row['ratio_to_builtin_logistic']:.2f} "
                  f"of the built-in logistic (CPU time: {cpu:7.1f} us/step, "
                  f"x{row['cpu_ratio_to_builtin_logistic']:.2f})", flush=True)
            rows.append(row)
            save()
            if args.fit and N <= args.fit_max_n and route.fit:
                models[N, family, route.name] = (model, row)
    # 2. validation.fit against a reference chain
    refs = {}
    for (N, family, name), (model, row) in models.items():
        if (N, family) not in refs:
            t0 = time.perf_counter()
            ref = numpyro_reference(datasets[N][family], args.reference_draws, 1)
            kind = "numpyro NUTS"
            if ref is None:
                ref = exact_reference(model, args.reference_draws, 1)
                kind = "exact MH"
            refs[N, family] = ref, kind
            print(f"{N:>9} {family:<18} reference: {kind}, min ESS {min_ess(ref):.0f}, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
        ref, kind = refs[N, family]
        row["fit"] = f = run_fit(model, args.draws, int(rng.integers(2**31)), ref)
        row["reference"] = kind
        row["reference_min_ess"] = min_ess(ref)
        if "refused" in f:
            print(f"{N:>9} {family:<18} {name:<16} fit refused: {f['refused'][:150]}",
                  flush=True)
        else:
            print(f"{N:>9} {family:<18} {name:<16} fit: {f['seconds_all_in']:.1f} s all-in "
                  f"({f['seconds_sampling']:.2f} s sampling), ESS {f['min_ess']:.0f}, ESS/s "
                  f"{f['ess_per_s_all_in']:.0f} all-in / {f['ess_per_s_sampling']:.0f} "
                  f"sampling, {f['rows_per_step']:.1f} rows/step; max |mean err| "
                  f"{f['max_mean_error_sd']:.3f} sd, max |sd err| {f['max_sd_error_sd']:.3f} "
                  f"sd (MC se of a mean error ~{f['mcse_mean_sd']:.3f} sd)", flush=True)
        save()
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
