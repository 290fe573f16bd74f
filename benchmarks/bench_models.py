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
2. **fit** (``--fit``; ``--fit-only`` skips the timing): every route of :data:`FIT_ROUTES`
   (Poisson, probit and negative binomial with the dispersion **estimated**, theta's last
   coordinate ``log r`` with prior N(0, 3^2), each as ``GLM``, as a ``JaxModel`` and as a
   NumPyro model through ``from_numpyro``, handed to ``validation.fit`` as they are: fit
   translates the JAX ones to numba itself), at every N of ``--fit-sizes``, fitted by
   ``validation.fit(model, tolerance=0.01, draws=--draws, ess=--ess)``; beside them NumPyro
   NUTS and HMCECS on the same data and prior (``bench_models_accuracy.numpyro_row``:
   ``--warmup`` warm-up steps, ``--numpyro-draws`` draws sampled twice, the second run timing
   sampling alone; ``--nuts-max-n`` caps the sizes they run at, ``--numpyro-samplers``
   picks them (``hmcecs negative_binomial:nuts``: HMCECS everywhere, NUTS on one family); their mode by Newton's method in JAX, its gradient norm and distance to the
   GLM's mode in posterior sds printed and recorded as ``mode_check``; ``--laplace-mass``
   gives them the Laplace covariance at that mode as a fixed dense inverse mass matrix, which
   N = 10^6 needs). Recorded: seconds all-in
   and sampling only, min bulk ESS, ESS per second both ways, rows read per step, the model
   route fit took, and the accuracy against an **importance-sampling reference**
   (``--reference psis``, the default: ``is_reference.importance_reference``, ``--is-draws``
   draws of a defensive mixture of the GLM's Laplace approximation and a wider t, weighted
   by a compiled log-likelihood written apart from the library's kernels, Pareto-smoothed,
   its Pareto k, weights' ESS and per-coordinate standard errors recorded; ``--reference
   jax-t``: ``bench_models_accuracy.reference``, a multivariate t around the Laplace fit
   weighted by a JAX log-likelihood, as the runs before 2026-11-27 23:00 used;
   ``--reference-file FILE...`` takes it from ``is_reference.py``'s JSON and
   ``--reuse-reference FILE`` from an earlier run's JSON, where they drew the same data
   (same N, family, true coefficients; and draws for the latter)):
   max over coordinates of |mean error| / sd and |sd error| / sd (target 0.05), with the
   Monte Carlo standard errors of a mean error, ``sqrt(1 / ESS + 1 / ESS_reference)`` in
   sds (with a PSIS reference: ``sqrt(1 / ESS + se_ref^2)``, ``se_ref`` the reference's
   largest standard error in sds, and the largest per-coordinate z recorded as
   ``max_z_mean`` / ``max_z_sd``), and of an sd error (the same over sqrt(2)) beside them. A route whose ``fit``
   refuses the model records the refusal. The data of each (N, family) depend only on the
   sizes and families chosen before it, not on ``--fit-routes`` or ``--numpyro-samplers``
   (every route's and sampler's seed is drawn whether it runs or not).

   At N = 10^6 a reference costs N x draws family evaluations: with the JAX t reference
   about 60 (probit) and 100-160 ns (negative binomial) each on this 2-core machine, and
   its weights' ESS is about half the draws; the compiled PSIS reference costs 30-55 ns per
   row and draw (both threads, at a load of 6-10) and its ESS is about 95% of the draws, so
   20,000 draws (ESS ~19,000) take about 10 min. Make them once with ``is_reference.py``
   and hand them in::

       python benchmarks/is_reference.py --N 1000000 --family probit --draws 20000
       python benchmarks/bench_models.py --fit-only --fit-sizes 1000000 --fit-families \
           probit --reference-file benchmarks/results/is_reference_probit_1000000.json \
           --numpyro-samplers

Run:  python benchmarks/bench_models.py [--sizes 100000 1000000] [--steps 20000] [--repeats 1]
          [--fit | --fit-only] [--fit-sizes 100000 1000000] [--fit-routes ...] [--draws 2000]
          [--ess 10000] [--is-draws 20000] [--warmup 500] [--numpyro-draws 1000]
          [--nuts-max-n 1000000] [--numpyro-samplers nuts hmcecs] [--laplace-mass]
          [--reference psis | jax-t] [--reference-file results/is_reference_*.json]
          [--reuse-reference results/models_fit.json] [--out models]
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


# --- the fit part: every route through validation.fit, beside NumPyro --------------------

LOG_R_SD = 3.0
FIT_FAMILIES = ("poisson", "probit", "negative_binomial")


def _fit_prior(family, k):
    """GaussianPrior(0, 10) on the coefficients, N(0, 3^2) on log r (negative binomial)."""
    if family == "negative_binomial":
        return GaussianPrior(0.0, np.r_[np.full(k, PRIOR_SD), LOG_R_SD])
    return GaussianPrior(0.0, PRIOR_SD)


def fit_glm(d):
    args = dict(poisson=dict(family="poisson"), probit=dict(family="bernoulli", link="probit"),
                negative_binomial=dict(family="negative_binomial"))[d.family]
    return GLM(d.X, d.y, prior=_fit_prior(d.family, d.X.shape[1]), **args)


def fit_jax(d):
    """The family's row log-likelihood in jax.numpy, as a JaxModel (fit translates it)."""
    import jax.numpy as jnp
    from jax.scipy.special import gammaln, log_ndtr

    k = d.X.shape[1]

    def poisson(theta, row):
        x, y = row
        eta = x @ theta
        return y * eta - jnp.exp(eta) - gammaln(y + 1.0)

    def probit(theta, row):
        x, y = row
        eta = x @ theta
        return jnp.where(y > 0, log_ndtr(eta), log_ndtr(-eta))

    def negative_binomial(theta, row):
        x, y = row
        eta, log_r = x @ theta[:k], theta[k]
        r = jnp.exp(log_r)
        log_mu_r = jnp.logaddexp(eta, log_r)
        return (gammaln(y + r) - gammaln(r) - gammaln(y + 1.0) + r * (log_r - log_mu_r)
                + y * (eta - log_mu_r))

    row = dict(poisson=poisson, probit=probit, negative_binomial=negative_binomial)[d.family]
    nb = d.family == "negative_binomial"
    return JaxModel(row, (d.X, d.y), _fit_prior(d.family, k), dim=k + nb)


def fit_numpyro(d):
    """The family as a NumPyro model (a plate over the rows), through from_numpyro."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import log_ndtr

    from samplers.models import from_numpyro

    family = d.family

    def model(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, PRIOR_SD).expand([X.shape[1]]))
        log_r = (numpyro.sample("log_r", dist.Normal(0.0, LOG_R_SD))
                 if family == "negative_binomial" else None)
        with numpyro.plate("data", X.shape[0]):
            eta = X @ beta
            if family == "poisson":
                numpyro.sample("y", dist.Poisson(jnp.exp(eta)), obs=y)
            elif family == "probit":
                numpyro.sample("y", dist.Bernoulli(logits=log_ndtr(eta) - log_ndtr(-eta)), obs=y)
            else:
                numpyro.sample("y", dist.NegativeBinomial2(jnp.exp(eta), jnp.exp(log_r)), obs=y)

    return from_numpyro(model, d.X, d.y)


#: The fit part's routes (theta ordered as the GLM's: coefficients, then log r).
FIT_ROUTES = [
    Route("GLM", FIT_FAMILIES, fit_glm),
    Route("JaxModel", FIT_FAMILIES, fit_jax),
    Route("from_numpyro", FIT_FAMILIES, fit_numpyro),
]


def run_fit(model, ref, draws, ess, seed):
    """``validation.fit`` on ``model``: timings, ESS, rows per step and accuracy (or the
    refusal)."""
    from bench_models_accuracy import accuracy
    from validation import fit

    t0 = time.perf_counter()
    try:
        idata = fit(model, tolerance=0.01, draws=draws, ess=ess, rng=seed, progress=False)
    except (TypeError, ValueError, RuntimeError) as exc:
        return {"refused": f"{type(exc).__name__}: {exc}"}
    wall = time.perf_counter() - t0
    a = idata.posterior.attrs
    x = np.asarray(idata.posterior.theta.values)
    acc = accuracy(x, ref)
    chain_s = a["timings"]["chains"]
    return dict(sampler="validation.fit", route=a["route"], model_route=a["model_route"],
                all_in_s=wall, sampling_s=chain_s, timings=a["timings"],
                draws=int(x.shape[0] * x.shape[1]), ess_per_s_all_in=acc["min_ess"] / wall,
                ess_per_s_sampling=acc["min_ess"] / chain_s,
                rows_per_step=float(a["rows_realised"]), **acc)


def _show(N, family, name, r):
    if "refused" in r:
        print(f"{N:>8} {family:<18} {name:<16} refused: {r['refused'][:200]}", flush=True)
        return
    print(f"{N:>8} {family:<18} {name:<16} all-in {r['all_in_s']:7.1f} s, sampling "
          f"{r['sampling_s']:7.2f} s, min ESS {r['min_ess']:6.0f}, ESS/s "
          f"{r['ess_per_s_all_in']:7.1f} all-in / {r['ess_per_s_sampling']:8.1f} sampling, "
          f"{r['rows_per_step']:10.1f} rows/step; max |mean err| {r['max_mean_error_sd']:.3f} "
          f"sd, |sd err| {r['max_sd_error_sd']:.3f} sd (MC se {r['mcse_mean_sd']:.3f} / "
          f"{r.get('mcse_sd_sd', float('nan')):.3f}); load {r.get('load', float('nan')):.1f}"
          + (f" [{r['model_route']}; {r['route']}]" if "model_route" in r else ""), flush=True)


def _earlier_reference(path, data, draws):
    """The reference an earlier run (``path``, this script's JSON) computed on the same data
    (same N, family, true coefficients and number of draws), or None."""
    import json

    for row in json.loads(Path(path).read_text())["rows"]:
        ref = row.get("reference") or {}
        if (row.get("part") == "fit" and row["N"] == data.X.shape[0]
                and row["family"] == data.family and ref.get("draws") == draws
                and np.array_equal(np.asarray(row["truth"]), data.theta)):
            return dict(ref, path=str(path), **{
                key: np.asarray(ref[key]) for key in ("mean", "sd", "mcse_mean", "mcse_sd")
                if key in ref}, ess=float(ref["ess"]), seconds=ref.get("seconds"))
    return None


def _reference_file(path, data):
    """A reference written by ``is_reference.py`` (its JSON) if it was drawn for the same
    data (N, family and true coefficients), else None."""
    import json

    ref = json.loads(Path(path).read_text())
    if (ref["N"] != data.X.shape[0] or ref["family"] != data.family
            or not np.array_equal(np.asarray(ref["truth"]), data.theta)):
        return None
    return dict(ref, path=str(path), **{key: np.asarray(ref[key]) for key in
                                        ("mean", "sd", "mcse_mean", "mcse_sd")})


def _psis_reference(data, cv, draws):
    """``is_reference.importance_reference`` around the GLM's Laplace fit (compiled pass)."""
    from is_reference import importance_reference

    k = data.X.shape[1]

    def logprior(th):
        lp = -0.5 * np.sum(th[:, :k] ** 2, axis=1) / PRIOR_SD**2
        return lp - 0.5 * th[:, k] ** 2 / LOG_R_SD**2 if th.shape[1] > k else lp

    ref = importance_reference(data.family, data.X, data.y, np.asarray(cv.center.theta),
                               cv.laplace_covariance(), logprior, draws, 1)
    return dict(ref, fit_mode=np.asarray(cv.center.theta))


def fit_part(args, save, rows):
    """Step 2: every fit route and NumPyro NUTS / HMCECS against the importance-sampling
    reference, at every N of ``args.fit_sizes`` (data from their own stream)."""
    from bench_models_accuracy import numpyro_row, reference

    rng = np.random.default_rng(20261128)
    for N in args.fit_sizes:
        for family in args.fit_families:
            data = make_data(family, N, rng)
            # every route's and sampler's seed, drawn whether it runs or not: the next
            # family's data do not depend on which of them run
            seeds = [int(rng.integers(2**31)) for _ in FIT_ROUTES]
            numpyro_seeds = [int(rng.integers(2**31)) for _ in range(2)]
            t0 = time.perf_counter()
            cv = ControlVariates(fit_glm(data))
            earlier = None
            for path in args.reference_file or []:
                earlier = earlier or _reference_file(path, data)
            if earlier is None and args.reuse_reference:
                earlier = _earlier_reference(args.reuse_reference, data, args.is_draws)
            if earlier is not None:
                ref = dict(earlier, fit_mode=np.asarray(cv.center.theta))
                ref_s, reused = earlier["seconds"], earlier["path"]
            elif args.reference == "psis":
                ref = _psis_reference(data, cv, args.is_draws)
                ref_s, reused = time.perf_counter() - t0, None
            else:
                ref = reference(data, cv, args.is_draws, 1)
                ref["kind"] = ("importance sampling (t, 5 df) with a JAX log-likelihood "
                               "written apart")
                ref_s, reused = time.perf_counter() - t0, None
            print(f"{N:>8} {family:<18} reference: importance sampling, weights' ESS "
                  f"{ref['ess']:.0f} of {ref.get('draws', args.is_draws)} ({ref_s:.1f} s"
                  + (f", from {reused})" if reused else ")")
                  + (f", Pareto k {ref['pareto_k']:.2f}" if "pareto_k" in ref else "")
                  + f"; load {os.getloadavg()[0]:.1f}", flush=True)
            row = dict(N=N, family=family, d=D + 1, part="fit", truth=data.theta.tolist(),
                       reference=dict(kind=ref.get("kind", "importance sampling (t, 5 df) "
                                                   "with a JAX log-likelihood written apart"),
                                      ess=ref["ess"], draws=ref.get("draws", args.is_draws),
                                      seconds=ref_s, reused_from=reused,
                                      mean=ref["mean"].tolist(), sd=ref["sd"].tolist(),
                                      **{key: np.asarray(ref[key]).tolist() for key in
                                         ("pareto_k", "mcse_mean", "mcse_sd") if key in ref}),
                       results=[])
            rows.append(row)
            for route, seed in zip(FIT_ROUTES, seeds):
                if args.fit_routes is not None and route.name not in args.fit_routes:
                    continue
                t0 = time.perf_counter()
                try:
                    model = route.build(data)
                except (TypeError, ValueError) as exc:
                    r = {"refused": f"{type(exc).__name__}: {exc}"}
                else:
                    built = time.perf_counter() - t0
                    r = run_fit(model, ref, args.draws, args.ess, seed)
                    if "refused" not in r:
                        r["build_s"] = built
                        r["all_in_s"] += built          # building the model is set-up too
                        r["ess_per_s_all_in"] = r["min_ess"] / r["all_in_s"]
                r["model"] = route.name
                r["load"] = os.getloadavg()[0]
                row["results"].append(r)
                _show(N, family, route.name, r)
                save()
            if N <= args.nuts_max_n and not args.no_numpyro:
                for hmcecs, seed in zip((False, True), numpyro_seeds):
                    which = "hmcecs" if hmcecs else "nuts"
                    if not {which, f"{family}:{which}"} & set(args.numpyro_samplers):
                        continue
                    try:
                        r = numpyro_row(data, ref, args, seed, hmcecs)
                    except Exception as exc:    # a NumPyro failure is a result too
                        r = {"sampler": "NumPyro HMCECS" if hmcecs else "NumPyro NUTS",
                             "refused": f"{type(exc).__name__}: {exc}"}
                    r["load"] = os.getloadavg()[0]
                    row["results"].append(r)
                    _show(N, family, r["sampler"], r)
                    save()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of timing chains over all routes, interleaved (each route "
                         "keeps its fastest)")
    ap.add_argument("--fit", action="store_true", help="also run the fit part")
    ap.add_argument("--fit-only", action="store_true", help="run the fit part alone")
    ap.add_argument("--fit-sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--fit-families", nargs="+", default=list(FIT_FAMILIES),
                    choices=FIT_FAMILIES)
    ap.add_argument("--fit-routes", nargs="*", default=None,
                    help="fit route names (default: all of FIT_ROUTES)")
    ap.add_argument("--draws", type=int, default=2000, help="fit's first round per chain")
    ap.add_argument("--ess", type=float, default=10_000, help="fit's target min bulk ESS")
    ap.add_argument("--is-draws", type=int, default=20_000,
                    help="draws of the importance-sampling reference")
    ap.add_argument("--warmup", type=int, default=500, help="NumPyro's warm-up steps")
    ap.add_argument("--numpyro-draws", type=int, default=1000,
                    help="NumPyro's draws per run (two runs)")
    ap.add_argument("--hmcecs-m", type=int, default=1000, help="HMCECS's rows per subsample")
    ap.add_argument("--nuts-max-n", type=int, default=10**7,
                    help="largest N NumPyro NUTS and HMCECS run at")
    ap.add_argument("--no-numpyro", action="store_true")
    ap.add_argument("--numpyro-samplers", nargs="*", default=["nuts", "hmcecs"],
                    help="which NumPyro samplers the fit part runs: nuts, hmcecs, or "
                         "FAMILY:nuts / FAMILY:hmcecs for one family only")
    ap.add_argument("--laplace-mass", action="store_true",
                    help="NumPyro NUTS and HMCECS take the Laplace covariance at their Newton "
                         "mode as a fixed dense inverse mass matrix")
    ap.add_argument("--reference", choices=("psis", "jax-t"), default="psis",
                    help="how a missing reference is made: psis (is_reference.py: a "
                         "defensive Laplace / t mixture, compiled log-likelihood, PSIS; "
                         "default) or jax-t (the t proposal and JAX log-likelihood of "
                         "bench_models_accuracy.reference)")
    ap.add_argument("--reference-file", nargs="*", default=None,
                    help="is_reference.py JSON files, used where they were drawn on the same "
                         "data (before --reuse-reference)")
    ap.add_argument("--reuse-reference", default=None,
                    help="an earlier run's JSON whose references are reused where it drew "
                         "the same data")
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
    # 1. time per step of every route (all sizes first: the fits and references are slower);
    # the routes' chains run in --repeats interleaved rounds and each keeps its fastest, so
    # a change of load during the run falls on every route alike
    for N in [] if args.fit_only else args.sizes:
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
    # 2. validation.fit on every fit route, beside NumPyro, against importance sampling
    if args.fit or args.fit_only:
        fit_part(args, save, rows)
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
