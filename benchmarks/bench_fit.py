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
proxy at the mode, ``--hmcecs-blocks`` blocks, subsample ``--hmcecs-m``: NumPyro's example
uses 100 and 1300) and NUTS (full data) all-in (mode by Newton's method in JAX, compilation,
warm-up, sampling; the mode's gradient norm and its distance to ``ControlVariates``' mode in
posterior sds are printed and recorded as ``mode_check``) and sampling only (NUTS up to
``--nuts-max-n`` rows; ``--laplace-mass``
gives both the Laplace covariance as a fixed dense mass matrix); min bulk ESS per second
(wall) and per CPU-second (this process and its chain processes: fairer under load) of
each; accuracy against an importance-sampling reference (``--ref-draws`` draws, its weights'
ESS printed; from a multivariate t with 5 degrees of freedom at the mode, Laplace scale x 1.2,
for d <= 20, and from the Laplace Gaussian itself above, where a t's radial law no longer
matches; weights from exact full-data sums, or with ``--ref-method taylor4``, meant for the
d10 workloads (its tensors hold d^4 numbers), from the log-likelihood's degree-4 Taylor
polynomial at the mode, one pass, checked against exact sums at ``--ref-check`` draws): max
|mean error| and |sd error| in posterior sds and the largest 5% / 95% quantile error in
posterior sds, each with its Monte Carlo standard error (the draws' and the reference's).
fit's predicted and realised cost (rows per effective sample) and ESS per step are printed
beside its figures. On the rare-covariate workload, exact MH
(random walk, all rows, ``--exact-draws`` steps per chain) gives the baseline ESS per second;
``--exact-independence`` adds exact MH with fit's own independence proposal (all rows per
step), the stronger baseline a user who read fit's explanation could pick.
Every row records the 1-minute load average when it finished; a markdown table of all rows
goes beside the JSON (``results/<out>.md``), followed by one line per workload in the issue's
terms (route, set-up and chains, predicted and realised cost, the ratios to the targets, and on
the rare covariate the tail errors of fit, exact MH and HMCECS side by side).

**How fit is timed: its first call, in a fresh process.** Everything this script does before
a fit row (the reference's ``ControlVariates`` mode and numba kernels, SciPy's statistics,
ArviZ, JAX) would otherwise be loaded already when fit starts, and its first call would skip
the loading and imports that a user's first call pays. So each fit row (and exact MH's, the
same way) runs this file again in a fresh Python process (``--child``, :func:`child`) that
imports only NumPy and the project (``import_s``, not counted, as a user's ``import``),
rebuilds the workload's data from its seed or reopens the parent's memmaps (checked against
the parent's by :func:`fingerprint`), builds the model (``model_s``, not counted), and times
``fit(...)`` alone; its draws come back through a ``.npy`` file, and the ESS, the accuracy and
the peers are computed here, in the parent. The row records which of :data:`WATCHED`'s
modules were loaded when fit's clock started (numba only, which ``import samplers`` loads).
Before the timed process, an untimed one runs the same call (``--no-prime`` skips it), so
that numba's on-disk cache holds the compiled kernels, as on a user's second script (a
first-ever call also compiles; that is not what this measures). ``--warm`` times a second
call in the same process too (the table's "2nd call s"). The peers run in this process, their
clocks started after JAX and NumPyro are imported: their all-in figures leave out what fit's
include (the imports fit's first call makes: ArviZ, SciPy's statistics).
``--imports-apart`` times fit's first call once more, in a fresh process that imports those
modules (:data:`THIRD_PARTY`) before its clock, as the peers' figures do; its draws must equal
the first run's.

Run ``python benchmarks/bench_fit.py --workloads d10-N1e5,rare-N2e5`` for the small sizes;
results go to ``benchmarks/results/bench_fit.json``. The issue's table, one command at a time on
a quiet machine (durations estimated from runs at load 1-10; ``D`` keeps the memmaps):

* ``--workloads d10-N1e5,d10-N1e6 --ess 10000 --draws 3000 --laplace-mass --ref-method
  taylor4 --warm --imports-apart --skip nuts`` (about 3 minutes; NUTS apart: ``--skip
  fit,hmcecs``, a minute or two at 10^5, 10-20 minutes at 10^6);
* ``--workloads d10-N1e7 --data-dir D --write-only``, then the same as above with
  ``--workloads d10-N1e7 --data-dir D --skip hmcecs`` (HMCECS ran out of 24 GiB there; a few
  minutes);
* ``--workloads rare-N2e5 --ess 10000 --ref-draws 40000 --warm --exact-independence --skip
  nuts`` (5 minutes), and
  ``rare-N1e6`` the same (about half an hour, mostly the reference, exact MH and HMCECS);
* ``--workloads d100-N2e5 --warm --skip nuts`` (HMCECS about 20 minutes), ``d100-N1e6`` the
  same (HMCECS an hour or more). Timings are whole-process figures on the
machine the JSON names, with its load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]   # this checkout first, then _common
# Only the standard library, NumPy and _common (standard library only) at the top: the fit
# rows run this file again in a fresh process (``--child``), which must import nothing of the
# project, SciPy, ArviZ or JAX before it starts its clock. Everything else is imported where
# it is used.
from _common import RESULTS, cv_logistic_dataset, write  # noqa: E402

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
    chunks (one chunk in memory at a time) to ``tmpdir``, where a finished earlier write of the
    same workload (``done`` marker) is reopened instead (``--data-dir``). The same arguments
    give the same data: a fit row's fresh process builds its own copy from the seed (or
    reopens the parent's memmaps) and checks it with :func:`fingerprint`."""
    from samplers import datasets

    rng = np.random.default_rng(seed)
    if kind == "rare":
        X, y, _ = datasets.rare_covariate_logistic(N, rng=rng, rare_rows=40)
        return X, y
    if N < MEMMAP_ROWS:
        return cv_logistic_dataset(N, rng, kind)
    done_marker = Path(tmpdir) / f"done-{kind}-{N}-{seed}"
    if done_marker.exists():
        return (np.load(Path(tmpdir) / "X.npy", mmap_mode="r"),
                np.load(Path(tmpdir) / "y.npy", mmap_mode="r"))
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
    done_marker.touch()
    return X, y


def fingerprint(X, y):
    """Sums of the first and last 1,000 rows and of the labels: a fresh process checks that it
    rebuilt the parent's data."""
    return [float(np.sum(X[:1000])), float(np.sum(X[-1000:])), float(np.sum(y))]


def cpu_seconds():
    """CPU seconds of this process and its finished children (fit's chain processes): under
    load, a fairer clock than the wall for comparing samplers run at different moments."""
    import resource

    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def ess_bulk(x):
    """Bulk ESS per coordinate of draws of shape (chains, draws, d)."""
    from samplers import import_arviz

    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([float(az.ess(x[:, :, j], method="bulk")) for j in range(x.shape[2])])


# --- reference ---------------------------------------------------------------------------------

def loglik_jax(X, y, thetas, block_rows=1 << 17):
    """Full-data log-likelihood at each row of ``thetas`` (JAX, blocks of rows)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)     # else the first workload's sums are float32

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


def taylor4_loglik(X, y, center, block_rows=1 << 16):
    """The full-data logistic log-likelihood as its Taylor polynomial of degree 4 at ``center``
    (one pass): returns ``ll(thetas)``, exact up to ``sum_i |f^(5)| |x_i'u|^5 / 120`` with
    ``u = theta - center`` and ``|f^(5)| <= 1/8``, far below 1e-3 in a posterior's bulk and
    tails from N = 10^5 on; :func:`reference` checks it against exact full-data sums."""
    d = center.size
    iu, ju = np.triu_indices(d)
    pair = np.empty((d, d), dtype=int)
    pair[iu, ju] = pair[ju, iu] = np.arange(iu.size)
    c0, g, H = 0.0, np.zeros(d), np.zeros((d, d))
    T3, T4 = np.zeros((iu.size, d)), np.zeros((iu.size, iu.size))
    for r in range(0, X.shape[0], block_rows):
        Xb, yb = np.asarray(X[r:r + block_rows]), np.asarray(y[r:r + block_rows])
        eta = Xb @ center
        p = 1.0 / (1.0 + np.exp(-eta))
        v = p * (1.0 - p)
        c0 += float(np.sum(yb * eta - np.logaddexp(0.0, eta)))
        g += Xb.T @ (yb - p)
        H -= (Xb * v[:, None]).T @ Xb
        Z = Xb[:, iu] * Xb[:, ju]
        T3 -= (Z * (v * (1.0 - 2.0 * p))[:, None]).T @ Xb
        T4 -= (Z * (v * (1.0 - 6.0 * p + 6.0 * p * p))[:, None]).T @ Z
    T3 = T3[pair.ravel()]                          # (d*d, d): row a*d+b is the pair (a, b)
    T4 = T4[np.ix_(pair.ravel(), pair.ravel())]    # (d*d, d*d)

    def ll(thetas):
        U = np.atleast_2d(thetas) - center
        V = (U[:, :, None] * U[:, None, :]).reshape(len(U), d * d)
        return (c0 + U @ g + 0.5 * np.sum((U @ H) * U, axis=1)
                + np.sum((V @ T3) * U, axis=1) / 6.0 + np.sum((V @ T4) * V, axis=1) / 24.0)
    return ll


def reference(X, y, mode, cov, n_draws, rng, df=5.0, widen=1.2, method="exact", check=200):
    """Importance sampling from a multivariate t at the mode (``df`` None: the Gaussian
    N(mode, widen^2 cov)): weighted means, sds, quantiles, and the weights' ESS.

    ``method="taylor4"`` (logistic only) weighs by :func:`taylor4_loglik` at the mode, which
    costs O(d^4) per draw instead of a full-data pass, and checks it against exact full-data
    sums at ``check`` draws (half the farthest from the mode within the Laplace
    approximation's 1 - 1e-9 region, beyond which weights are nil, half at random): the
    largest difference in log-likelihood goes in ``taylor_check``."""
    from scipy import stats

    d = mode.size
    q = (stats.multivariate_normal(mean=mode, cov=widen ** 2 * cov, seed=rng) if df is None
         else stats.multivariate_t(loc=mode, shape=widen ** 2 * cov, df=df, seed=rng))
    thetas = q.rvs(n_draws).reshape(n_draws, d)
    extra = {}
    if method == "taylor4":
        poly = taylor4_loglik(X, y, mode)
        ll = np.concatenate([poly(thetas[a:a + 20_000]) for a in range(0, n_draws, 20_000)])
        dist2 = np.sum((thetas - mode) @ np.linalg.inv(cov) * (thetas - mode), axis=1)
        inside = np.flatnonzero(dist2 <= stats.chi2.ppf(1.0 - 1e-9, d))
        far = inside[np.argsort(dist2[inside])[::-1][:check // 2]]
        pick = np.concatenate([far, rng.choice(n_draws, check - far.size, replace=False)])
        exact = np.concatenate([loglik_jax(X, y, thetas[pick[a:a + 100]])
                                for a in range(0, pick.size, 100)])
        extra = dict(taylor_check=dict(
            draws=int(pick.size), max_abs_diff=float(np.max(np.abs(exact - ll[pick]))),
            max_mahalanobis=float(np.sqrt(dist2[far[0]]))))
    else:
        ll = np.concatenate([loglik_jax(X, y, thetas[a:a + 500])
                             for a in range(0, n_draws, 500)])
    logw = ll - 0.5 * np.sum(thetas ** 2, axis=1) / PRIOR_SD ** 2 - q.logpdf(thetas)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ thetas
    sd = np.sqrt(w @ (thetas - mean) ** 2)
    qs = np.array([[_wquantile(thetas[:, j], w, p) for j in range(d)] for p in (0.05, 0.95)])
    return dict(mean=mean, sd=sd, q05=qs[0], q95=qs[1], ess=float(1.0 / np.sum(w ** 2)),
                fit_mode=mode, **extra)


def _wquantile(x, w, p):
    order = np.argsort(x)
    c = np.cumsum(w[order])
    return float(np.interp(p, c - 0.5 * w[order], x[order]))


#: Monte Carlo standard error of the reference's statistics in posterior sds per 1/sqrt(weights'
#: ESS), Gaussian approximations: mean 1, sd 1/sqrt(2), p-quantile sqrt(p(1-p)) / phi(z_p).
REF_MCSE = dict(mean=1.0, sd=0.5 ** 0.5, q05=2.113, q95=2.113)


def accuracy(x, ref):
    """Errors in posterior sds of draws x (chains, draws, d) against the reference: for the
    mean, the sd and the 5% / 95% quantiles, the largest error over coordinates
    (``<stat>_error``), the Monte Carlo standard error of that coordinate's error
    (``<stat>_mcse``: the draws' by ArviZ, the reference's from :data:`REF_MCSE`, added in
    quadrature) and the largest ratio of error to its MCSE over coordinates (``<stat>_z``)."""
    from samplers import import_arviz

    az = import_arviz()
    s = x.reshape(-1, x.shape[2])
    sd = ref["sd"]
    err = dict(mean=s.mean(axis=0) - ref["mean"], sd=s.std(axis=0) - sd,
               q05=np.quantile(s, 0.05, axis=0) - ref["q05"],
               q95=np.quantile(s, 0.95, axis=0) - ref["q95"])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for stat, e in err.items():
            kw = (dict(method=stat) if stat in ("mean", "sd")
                  else dict(method="quantile", prob=float(stat[1:]) / 100))
            own = np.array([float(np.asarray(az.mcse(x[:, :, j], **kw)))
                            for j in range(x.shape[2])])
            mcse = np.hypot(own / sd, REF_MCSE[stat] / np.sqrt(ref["ess"]))
            a = np.abs(e) / sd
            j = int(np.argmax(a))
            out.update({f"{stat}_error": float(a[j]), f"{stat}_mcse": float(mcse[j]),
                        f"{stat}_z": float(np.max(a / mcse))})
    return out


# --- samplers ----------------------------------------------------------------------------------

#: fit's attributes that a fit row keeps (each call's, from the fresh process).
FIT_ATTRS = ("route", "pareto_k", "proposals_tried", "timings", "rows_realised",
             "cost_predicted", "cost_realised", "rhat", "candidates", "ess_bulk",
             "ess_per_step_predicted", "ess_per_step_realised", "acceptance_predicted",
             "acceptance_rate", "heavy_rows")
#: Modules a fit row's process lists if they are loaded when fit's clock starts: SciPy's
#: statistics, ArviZ and JAX are what the parent loads (reference, peers) and fit's first call
#: must pay for itself; numba is loaded by ``import samplers``, as in any user's script.
WATCHED = ("numba", "scipy", "scipy.stats", "arviz", "xarray", "jax", "numpyro",
           "statsmodels")
#: What ``--imports-apart`` loads before fit's clock in one more fresh process: the
#: third-party modules fit's first call imports (ArviZ and, under it, xarray, pandas and
#: matplotlib; SciPy's statistics and interpolation), which the peers' figures leave out too
#: (JAX and NumPyro are imported before their clocks). numba's start-up and the loading of
#: the project's cached kernels stay counted, as JAX's compilation is in the peers' all-in.
THIRD_PARTY = ("arviz", "scipy.stats", "scipy.interpolate")


def child(spec_path):
    """One fit row in this fresh process (``bench_fit.py --child SPEC``): imports the project
    (timed: ``import_s``), rebuilds the workload's data from its seed or reopens the parent's
    memmaps (checked by :func:`fingerprint`), builds the model (timed: ``model_s``), then
    times ``fit(model, **spec["fit"])`` alone, once, or twice with ``spec["warm"]`` (the
    second call warm: modules imported, compiled kernels loaded). Writes ``result.json`` (each
    call's wall and CPU seconds and :data:`FIT_ATTRS`) and the first call's draws
    (``draws.npy``) to ``spec["out"]``."""
    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    from samplers import GaussianPrior, LogisticRegression
    from validation import fit
    import_s = time.perf_counter() - t0
    X, y = data(spec["kind"], spec["N"], spec["seed"], spec["data_dir"])
    if fingerprint(X, y) != spec["fingerprint"]:
        raise RuntimeError(f"the fit row's process rebuilt other data: {fingerprint(X, y)} "
                           f"!= the parent's {spec['fingerprint']}")
    t1 = time.perf_counter()
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, PRIOR_SD))
    model_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    if spec.get("preimport"):
        import importlib

        from samplers import import_arviz
        import_arviz()                  # ArviZ 0.x or arviz_base, as fit's result step
        for name in spec["preimport"]:
            if name != "arviz":
                importlib.import_module(name)
    preimport_s = time.perf_counter() - t2
    loaded = [m for m in WATCHED if m in sys.modules]
    out, calls = Path(spec["out"]), []
    for k in range(2 if spec["warm"] else 1):
        t, c = time.perf_counter(), cpu_seconds()
        idata = fit(model, **spec["fit"])
        wall, cpu = time.perf_counter() - t, cpu_seconds() - c
        a = idata.posterior.attrs
        calls.append(dict(wall_s=wall, cpu_s=cpu, **{key: a[key] for key in FIT_ATTRS}))
        if k == 0:
            np.save(out / "draws.npy", idata.posterior.theta.values)
    (out / "result.json").write_text(json.dumps(
        dict(import_s=import_s, model_s=model_s, preimport_s=preimport_s,
             loaded_before_fit=loaded, calls=calls),
        default=float))


def run_fit(spec):
    """Run :func:`child` in a fresh Python process on ``spec`` (a dict); returns its result,
    with the first call's draws under ``"draws"``."""
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "spec.json"
        path.write_text(json.dumps(dict(spec, out=work)))
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(path)],
                       check=True)
        res = json.loads((Path(work) / "result.json").read_text())
        res["draws"] = np.load(Path(work) / "draws.npy")
    return res


def fresh_calls(spec, args, prime_fit=None):
    """:func:`run_fit`, after an untimed run in another fresh process with ``--prime`` (so
    that numba's on-disk cache holds the compiled kernels, as on a user's second script: a
    first-ever call also compiles them). ``prime_fit`` replaces some of fit's arguments in the
    priming run. Returns the result and the priming run's fit seconds (None without)."""
    prime_s = None
    if args.prime:
        primed = run_fit(dict(spec, warm=False, fit={**spec["fit"], **(prime_fit or {})}))
        prime_s = primed["calls"][0]["wall_s"]
    return run_fit(spec), prime_s


def _process(res, prime_s):
    """What every row run by :func:`run_fit` records about its process."""
    return dict(import_s=res["import_s"], model_s=res["model_s"], prime_s=prime_s,
                loaded_before_fit=res["loaded_before_fit"])


def fit_row(base, ref, args, seed):
    """fit's first call in a fresh process (and its second with ``--warm``)."""
    spec = dict(base, warm=args.warm,
                fit=dict(tolerance=0.01, draws=args.draws, ess=args.ess,
                         max_seconds=args.cap, rng=seed, progress=False))
    res, prime_s = fresh_calls(spec, args)
    a, x = res["calls"][0], res["draws"]
    e = ess_bulk(x)
    wall, cpu, chain_s = a["wall_s"], a["cpu_s"], a["timings"]["chains"]
    row = dict(sampler="fit", route=a["route"], pareto_k=a["pareto_k"],
               proposals_tried=a["proposals_tried"], all_in_s=wall,
               sampling_s=chain_s, setup_s=wall - chain_s, timings=a["timings"],
               cpu_s=cpu, ess_per_cpu_s=float(e.min() / cpu),
               draws=int(x.shape[0] * x.shape[1]), min_ess=float(e.min()),
               ess_per_s_all_in=float(e.min() / wall),
               ess_per_s_sampling=float(e.min() / chain_s),
               rows_per_step=a["rows_realised"], cost_predicted=a["cost_predicted"],
               cost_realised=a["cost_realised"], rhat=a["rhat"], candidates=a["candidates"],
               ess_per_step_predicted=a["ess_per_step_predicted"],
               ess_per_step_realised=a["ess_per_step_realised"],
               acceptance_predicted=a["acceptance_predicted"],
               acceptance_realised=a["acceptance_rate"], heavy_rows=a["heavy_rows"],
               load=os.getloadavg()[0], **_process(res, prime_s), **accuracy(x, ref))
    if args.imports_apart:
        apart = run_fit(dict(spec, warm=False, preimport=list(THIRD_PARTY)))
        if not np.array_equal(apart["draws"], x):
            raise RuntimeError("fit's first call with the third-party modules imported "
                               "before its clock drew other draws than without")
        row.update(apart_all_in_s=apart["calls"][0]["wall_s"],
                   apart_cpu_s=apart["calls"][0]["cpu_s"], apart_preimport_s=apart["preimport_s"],
                   apart_timings=apart["calls"][0]["timings"],
                   apart_ess_per_s_all_in=float(e.min() / apart["calls"][0]["wall_s"]),
                   apart_load=os.getloadavg()[0])
    if len(res["calls"]) > 1:
        w = res["calls"][1]
        row.update(warm_all_in_s=w["wall_s"], warm_cpu_s=w["cpu_s"],
                   warm_min_ess=w["ess_bulk"], warm_timings=w["timings"],
                   warm_ess_per_s_all_in=float(w["ess_bulk"] / w["wall_s"]))
    return row


def exact_row(base, ref, args, seed, proposal="walk"):
    """Exact MH (every row per step; the random walk, or fit's independence proposal) through
    fit, in a fresh process as fit's row (primed by a 200-step run with ``--prime``)."""
    spec = dict(base, warm=False,
                fit=dict(draws=args.exact_draws, route=f"exact/{proposal}", rng=seed,
                         progress=False))
    res, prime_s = fresh_calls(spec, args, prime_fit=dict(draws=min(200, args.exact_draws)))
    a, x = res["calls"][0], res["draws"]
    e = ess_bulk(x)
    wall, chain_s = a["wall_s"], a["timings"]["chains"]
    return dict(sampler=f"exact MH ({proposal})", all_in_s=wall, sampling_s=chain_s,
                draws=int(x.shape[0] * x.shape[1]), min_ess=float(e.min()),
                ess_per_s_all_in=float(e.min() / wall), cpu_s=a["cpu_s"],
                ess_per_cpu_s=float(e.min() / a["cpu_s"]),
                ess_per_s_sampling=float(e.min() / chain_s), load=os.getloadavg()[0],
                **_process(res, prime_s), **accuracy(x, ref))


def logistic_grad_hess(Xj, yj):
    """The logistic log posterior, its gradient and the negative Hessian, one jitted function
    (for :func:`_jax_mode.newton_mode_jax`, HMCECS's and NUTS's mode)."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def logpost_grad_hess(th):
        eta = Xj @ th
        p = jax.nn.sigmoid(eta)
        lp = (jnp.sum(yj * eta - jnp.logaddexp(0.0, eta)) - 0.5 * th @ th / PRIOR_SD ** 2)
        g = Xj.T @ (yj - p) - th / PRIOR_SD ** 2
        H = Xj.T @ (Xj * (p * (1 - p))[:, None]) + jnp.eye(th.size) / PRIOR_SD ** 2
        return lp, g, H
    return logpost_grad_hess


def numpyro_row(X, y, ref, args, seed, hmcecs):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from _jax_mode import mode_check, newton_mode_jax
    from numpyro.infer import HMCECS, MCMC, NUTS

    jax.config.update("jax_enable_x64", True)
    N, k = X.shape
    Xj, yj = jnp.asarray(np.asarray(X)), jnp.asarray(np.asarray(y))
    t0, c0 = time.perf_counter(), cpu_seconds()
    mode, hess, grad, newton_steps = newton_mode_jax(logistic_grad_hess(Xj, yj),
                                                     np.zeros(k))
    t_mode = time.perf_counter() - t0
    check = dict(newton_steps=newton_steps,
                 **mode_check(mode, hess, grad, ref["fit_mode"], ref["sd"]))
    print(f"    {'HMCECS' if hmcecs else 'NUTS'} mode (Newton, {newton_steps} steps, "
          f"{t_mode:.1f} s): gradient norm {check['grad_norm']:.2e}, Newton decrement "
          f"{check['newton_decrement']:.1e}, largest distance to fit's mode "
          f"{check['max_distance_to_fit_mode_sd']:.2e} posterior sds", flush=True)
    m = args.hmcecs_m if hmcecs else None

    def model(X, y):
        theta = numpyro.sample("theta", dist.Normal(0.0, PRIOR_SD).expand([k]).to_event(1))
        if m is None:
            numpyro.sample("obs", dist.Bernoulli(logits=X @ theta), obs=y)
            return
        with numpyro.plate("N", N, subsample_size=m) as idx:
            numpyro.sample("obs", dist.Bernoulli(logits=X[idx] @ theta), obs=y[idx])

    # --laplace-mass: NUTS takes the Laplace covariance as its (dense) inverse mass matrix and
    # adapts only its step size; else it starts from the identity, whose first warm-up trees
    # run to depth 10 when the posterior sds are ~1e-3 (1023 full-data gradients per draw at
    # N = 10^7), and the adaptation's regularisation (towards 1e-3 I) exceeds such variances
    nuts = (dict(dense_mass=True, inverse_mass_matrix=jnp.linalg.inv(hess),
                 adapt_mass_matrix=False) if args.laplace_mass else {})
    kernel = (HMCECS(NUTS(model, **nuts), num_blocks=args.hmcecs_blocks,
                     proxy=HMCECS.taylor_proxy({"theta": mode}))
              if hmcecs else NUTS(model, **nuts))
    warmup, draws = ((args.warmup, args.numpyro_draws) if hmcecs else
                     (args.nuts_warmup or args.warmup, args.nuts_draws or args.numpyro_draws))
    settings = dict(warmup=warmup, draws_per_run=draws, inner="NUTS",
                    mass="Laplace, dense, fixed" if args.laplace_mass else "identity, adapted",
                    **(dict(subsample=m, num_blocks=args.hmcecs_blocks) if hmcecs else {}))
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=1, progress_bar=False)
    t1 = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(seed), Xj, yj, init_params={"theta": mode})
    jax.block_until_ready(mcmc.post_warmup_state)
    t_warm = time.perf_counter() - t1
    t2 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, Xj, yj)
    x = np.asarray(mcmc.get_samples()["theta"])[None]
    t_first = time.perf_counter() - t2            # compiles the sampling loop, then samples
    mcmc.post_warmup_state = mcmc.last_state
    t3, c3 = time.perf_counter(), cpu_seconds()
    mcmc.run(mcmc.post_warmup_state.rng_key, Xj, yj)
    x2 = np.asarray(mcmc.get_samples()["theta"])[None]
    t_sample = time.perf_counter() - t3           # the same length again: sampling only
    cpu_sample, cpu = cpu_seconds() - c3, cpu_seconds() - c0
    x = np.concatenate([x, x2], axis=1)
    e = ess_bulk(x)
    all_in = t_mode + t_warm + t_first + t_sample
    return dict(sampler="NumPyro HMCECS" if hmcecs else "NumPyro NUTS", all_in_s=all_in,
                sampling_s=2 * t_sample, mode_s=t_mode, warmup_s=t_warm,
                compile_s=max(t_first - t_sample, 0.0), draws=int(x.shape[1]),
                min_ess=float(e.min()), ess_per_s_all_in=float(e.min() / all_in),
                ess_per_s_sampling=float(e.min() / (2 * t_sample)), load=os.getloadavg()[0],
                cpu_s=cpu, cpu_sampling_s=2 * cpu_sample, ess_per_cpu_s=float(e.min() / cpu),
                ess_per_cpu_s_sampling=float(e.min() / (2 * cpu_sample)),
                settings=settings, mode_check=check, **accuracy(x, ref))


def show(name, r):
    print(f"  {r['sampler']:<16} {r.get('route', ''):<26} all-in {r['all_in_s']:8.2f} s  "
          f"sampling {r['sampling_s']:8.2f} s  min ESS {r['min_ess']:7.0f}  ESS/s all-in "
          f"{r['ess_per_s_all_in']:9.1f}  sampling {r['ess_per_s_sampling']:9.1f}  "
          f"{_errors(r)}  load {r['load']:.1f}", flush=True)
    if "cpu_s" in r:
        print(f"    CPU-s all-in {r['cpu_s']:.1f} ({r['ess_per_cpu_s']:.1f} ESS per CPU-s)"
              + (f", sampling {r['cpu_sampling_s']:.1f} ({r['ess_per_cpu_s_sampling']:.1f})"
                 if "cpu_sampling_s" in r else "")
              + (f"; settings {r['settings']}" if "settings" in r else ""), flush=True)
    if "import_s" in r:
        print(f"    {_process_line(r)}", flush=True)
    if "cost_predicted" in r:
        print(f"    predicted {r['cost_predicted']:,.0f} vs realised {r['cost_realised']:,.0f} "
              f"rows per effective sample; ESS per step predicted "
              f"{r['ess_per_step_predicted']:.3f} vs realised {r['ess_per_step_realised']:.3f};"
              f" proposals tried: {r['proposals_tried']}; timings {r['timings']}", flush=True)


def _process_line(r):
    """How a row's fresh process ran: what came before fit's clock, the priming run, the
    second call."""
    return (f"fresh process: import of the project {r['import_s']:.2f} s and the model "
            f"{r['model_s']:.2f} s before fit's clock (not counted); loaded when it started: "
            f"{', '.join(r['loaded_before_fit']) or 'none of the watched modules'}"
            + ("" if r.get("prime_s") is None else
               f"; priming run (untimed) {r['prime_s']:.2f} s")
            + ("" if "apart_all_in_s" not in r else
               f"; in another fresh process with {', '.join(THIRD_PARTY)} imported before "
               f"the clock ({r['apart_preimport_s']:.2f} s, not counted) the first call took "
               f"{r['apart_all_in_s']:.2f} s")
            + ("" if "warm_all_in_s" not in r else
               f"; second call {r['warm_all_in_s']:.2f} s, min ESS {r['warm_min_ess']:.0f}, "
               f"{r['warm_ess_per_s_all_in']:.1f} ESS/s all-in"))


def _errors(r):
    """``mean err 0.012 (0.010)  ...``: each error in posterior sds with its MCSE."""
    return "  ".join(f"{k} err {r[f'{k}_error']:.3f}"
                    + (f" ({r[f'{k}_mcse']:.3f})" if f"{k}_mcse" in r else "")
                    for k in ("mean", "sd", "q05", "q95"))


def _cells(r):
    """The four errors as table cells, each with its MCSE in brackets when known."""
    return " | ".join(f"{r[f'{k}_error']:.3f}"
                      + (f" ({r[f'{k}_mcse']:.3f})" if f"{k}_mcse" in r else "")
                      for k in ("mean", "sd", "q05", "q95"))


#: The peers beside fit, by their rows' ``sampler``, and their short names.
PEERS = {"NumPyro HMCECS": "HMCECS", "NumPyro NUTS": "NUTS", "exact MH (walk)": "exact MH",
         "exact MH (independence)": "exact MH (independence)"}


def _ratios(r, rows):
    """fit's all-in ESS/s over each peer's sampling-only ESS/s (and per CPU-second, where
    both have it); over exact MH's all-in ESS/s too."""
    if r["sampler"] != "fit":
        return ""
    cells = []
    for peer in rows:
        short = PEERS.get(peer["sampler"])
        if short is None:
            continue
        cell = f"{short} {r['ess_per_s_all_in'] / peer['ess_per_s_sampling']:.2f}x"
        if "ess_per_cpu_s_sampling" in peer:
            cell += f" (CPU {r['ess_per_cpu_s'] / peer['ess_per_cpu_s_sampling']:.1f}x)"
        if short.startswith("exact MH"):
            cell += f" (all-in {r['ess_per_s_all_in'] / peer['ess_per_s_all_in']:.1f}x)"
        cells.append(cell)
    return "; ".join(cells)


def table(out) -> str:
    """All rows as one markdown table (fit's ratios to the peers beside it), then what the
    issue's targets ask of each workload (:func:`summary`)."""
    head = ("| workload | sampler | route | all-in s | sampling s | 2nd call s | min ESS | "
            "ESS/s all-in | ESS/s sampling | fit all-in ESS/s / peer's sampling ESS/s | "
            "mean err (MCSE) | sd err (MCSE) | q05 err (MCSE) | q95 err (MCSE) | "
            "cost pred / real (rows per ESS) | ESS/step pred / real | load |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, w in out.items():
        for r in w["rows"]:
            cost = (f"{r['cost_predicted']:,.0f} / {r['cost_realised']:,.0f}"
                    if "cost_predicted" in r else "")
            eps = (f"{r['ess_per_step_predicted']:.3f} / {r['ess_per_step_realised']:.3f}"
                   if "ess_per_step_predicted" in r else "")
            warm = f"{r['warm_all_in_s']:.1f}" if "warm_all_in_s" in r else ""
            lines.append(
                f"| {name} (N = {w['N']:,}, d = {w['d']}) | {r['sampler']} | "
                f"{r.get('route', '')} | {r['all_in_s']:.1f} | {r['sampling_s']:.1f} | {warm} | "
                f"{r['min_ess']:.0f} | {r['ess_per_s_all_in']:.1f} | "
                f"{r['ess_per_s_sampling']:.1f} | {_ratios(r, w['rows'])} | {_cells(r)} | "
                f"{cost} | {eps} | {r['load']:.1f} |")
    return "\n".join(lines + [""] + summary(out))


def _tails(r):
    return (f"q05 {r['q05_error']:.3f} ({r['q05_mcse']:.3f}), "
            f"q95 {r['q95_error']:.3f} ({r['q95_mcse']:.3f})")


def summary(out) -> list:
    """Per workload, in the issue's terms: fit's route, its first call split into set-up and
    chains, predicted vs realised cost per effective sample, the ratios to the targets
    (>= 10x HMCECS sampling-only at 10^6; >= 5x exact MH on the rare covariate), and on the
    rare covariate the tail errors (posterior sds, MCSE) of fit, exact MH and HMCECS side by
    side; then fit's ratio to HMCECS against N for each d."""
    lines, by_d = [], {}
    for name, w in out.items():
        rows = {r["sampler"]: r for r in w["rows"]}
        f = rows.get("fit")
        if f is None:
            continue
        say = (f"- **{name}**: route {f['route']}; fit's first call {f['all_in_s']:.2f} s "
               f"(set-up {f['setup_s']:.2f} s, chains {f['sampling_s']:.2f} s"
               + (f"; second call {f['warm_all_in_s']:.2f} s" if "warm_all_in_s" in f else "")
               + f"), min ESS {f['min_ess']:,.0f}; cost {f['cost_predicted']:,.0f} rows per "
               f"effective sample predicted, {f['cost_realised']:,.0f} realised")
        h = rows.get("NumPyro HMCECS")
        if h is not None:
            ratio = f["ess_per_s_all_in"] / h["ess_per_s_sampling"]
            say += (f"; {ratio:.2f}x HMCECS sampling-only"
                    + (" (target >= 10x)" if w["N"] == 1_000_000 else ""))
            if "apart_all_in_s" in f:
                say += (f" ({f['apart_ess_per_s_all_in'] / h['ess_per_s_sampling']:.2f}x "
                        f"with the third-party imports the peers' figures leave out "
                        f"excluded: first call {f['apart_all_in_s']:.2f} s)")
            by_d.setdefault(w["d"], []).append((w["N"], ratio))
        for proposal in ("walk", "independence"):
            e = rows.get(f"exact MH ({proposal})")
            if e is not None:
                say += (f"; {f['ess_per_s_all_in'] / e['ess_per_s_all_in']:.1f}x exact MH's "
                        f"({proposal}) ESS/s all-in, "
                        f"{f['ess_per_s_all_in'] / e['ess_per_s_sampling']:.1f}x its sampling "
                        "only (target >= 5x)")
        if name.startswith("rare"):
            say += "; tail errors in posterior sds (MCSE): fit " + _tails(f) + "".join(
                f", {PEERS[k]} " + _tails(rows[k]) for k in PEERS if k in rows)
        lines.append(say + f"; load {f['load']:.1f}")
    for d, pts in sorted(by_d.items()):
        if len(pts) > 1:
            lines.append(f"- fit all-in / HMCECS sampling-only against N at d = {d}: "
                         + ", ".join(f"{N:,} {x:.2f}x" for N, x in sorted(pts)))
    return lines


def main():
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--ess", type=float, default=1000.0)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--cap", type=float, default=300.0, help="fit's sampling-time cap (s)")
    p.add_argument("--ref-draws", type=int, default=20_000)
    p.add_argument("--exact-draws", type=int, default=2000)
    p.add_argument("--exact-independence", action="store_true",
                   help="on the rare-covariate workloads, also exact MH with fit's "
                        "independence proposal")
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--numpyro-draws", type=int, default=1000)
    p.add_argument("--hmcecs-m", type=int, default=1000)
    p.add_argument("--hmcecs-blocks", type=int, default=100)
    p.add_argument("--laplace-mass", action="store_true",
                   help="NUTS and HMCECS's inner NUTS take the Laplace covariance (the "
                        "mode's Newton Hessian) as their dense inverse mass matrix, unadapted")
    p.add_argument("--nuts-warmup", type=int, default=None, help="default: --warmup")
    p.add_argument("--nuts-draws", type=int, default=None, help="default: --numpyro-draws")
    p.add_argument("--skip", default="", help="comma list of: fit, nuts, hmcecs, exact")
    p.add_argument("--nuts-max-n", type=int, default=1_000_000,
                   help="largest N at which NUTS (full-data gradients) runs")
    p.add_argument("--ref-method", choices=("exact", "taylor4"), default="exact",
                   help="the reference's log-likelihood on the logistic workloads: exact "
                        "full-data sums per draw, or the degree-4 Taylor polynomial at the "
                        "mode (one pass, checked against exact sums at --ref-check draws)")
    p.add_argument("--ref-check", type=int, default=200)
    p.add_argument("--ref-gaussian-above-d", type=int, default=20,
                   help="the reference draws from the Laplace Gaussian above this d")
    p.add_argument("--ref-widen", type=float, default=None,
                   help="scale of the reference's proposal relative to the Laplace fit "
                        "(default 1.2 for the t, 1.0 for the Gaussian; above 1 the Gaussian "
                        "reference does not share the tails of fit's Gaussian proposal)")
    p.add_argument("--seed", type=int, default=None, help="replaces each workload's seed")
    p.add_argument("--out", default="bench_fit", help="results/<out>.json")
    p.add_argument("--data-dir", default=None,
                   help="keep the memmap workloads' files here (<data-dir>/<workload>/) and "
                        "reuse a finished write; default: a temporary directory")
    p.add_argument("--write-only", action="store_true",
                   help="write (or check) the workloads' data and stop")
    p.add_argument("--warm", action="store_true",
                   help="also time fit's second call in its process (warm: modules imported, "
                        "compiled kernels loaded)")
    p.add_argument("--imports-apart", action="store_true",
                   help="also time fit's first call in one more fresh process that imports "
                        "the third-party modules of THIRD_PARTY before the clock, as the "
                        "peers' clocks start after JAX and NumPyro are imported")
    p.add_argument("--no-prime", dest="prime", action="store_false",
                   help="do not run fit once, untimed, in another process before the timed "
                        "one (the priming run fills numba's on-disk cache; without it, a cold "
                        "cache's compilation is timed)")
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    out = {}
    for name in args.workloads.split(","):
        kind, N, seed = WORKLOADS[name]
        seed = seed if args.seed is None else args.seed
        keep = Path(args.data_dir) / name if args.data_dir else None
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        with (contextlib.nullcontext(str(keep)) if keep is not None
              else tempfile.TemporaryDirectory()) as tmp:
            X, y = data(kind, N, seed, tmp)
            if args.write_only:
                print(f"{name}: data in {tmp}, shape {X.shape}", flush=True)
                continue
            from samplers import ControlVariates, GaussianPrior, LogisticRegression

            model = LogisticRegression(X, y, prior=GaussianPrior(0.0, PRIOR_SD))
            print(f"{name}: N = {N:,}, d = {X.shape[1]}, load {os.getloadavg()[0]:.1f}",
                  flush=True)
            base = dict(kind=kind, N=N, seed=seed, data_dir=str(tmp),
                        fingerprint=fingerprint(X, y))
            cv = ControlVariates(model)
            gauss = X.shape[1] > args.ref_gaussian_above_d
            ref = reference(X, y, cv.center.theta, cv.laplace_covariance(), args.ref_draws,
                            np.random.default_rng(seed + 100), df=None if gauss else 5.0,
                            widen=args.ref_widen or (1.0 if gauss else 1.2),
                            method=args.ref_method if kind != "rare" else "exact",
                            check=args.ref_check)
            print(f"  reference: importance sampling from the Laplace "
                  f"{'Gaussian' if gauss else 't (df 5)'}, scale x "
                  f"{args.ref_widen or (1.0 if gauss else 1.2):g}, weights' ESS "
                  f"{ref['ess']:,.0f} of {args.ref_draws:,}", flush=True)
            if "taylor_check" in ref:
                print(f"  Taylor-4 log-likelihood vs exact full-data sums at "
                      f"{ref['taylor_check']['draws']} draws (out to Mahalanobis "
                      f"{ref['taylor_check']['max_mahalanobis']:.1f}): largest difference "
                      f"{ref['taylor_check']['max_abs_diff']:.2e}", flush=True)
            rows = []
            # each row saved as it comes: a run killed later (memory, time) keeps the rows before
            entry = out[name] = dict(N=N, d=int(X.shape[1]), reference_ess=ref["ess"],
                                     reference_taylor_check=ref.get("taylor_check"),
                                     reference="laplace-gaussian" if gauss else "t5", seed=seed,
                                     reference_widen=args.ref_widen or (1.0 if gauss else 1.2),
                                     rows=rows)
            if "fit" not in skip:
                rows.append(fit_row(base, ref, args, seed))
                show(name, rows[-1])
                save(args, out)
            if kind == "rare" and "exact" not in skip:
                rows.append(exact_row(base, ref, args, seed))
                show(name, rows[-1])
                if args.exact_independence:
                    rows.append(exact_row(base, ref, args, seed, proposal="independence"))
                    show(name, rows[-1])
            for which in ("hmcecs", "nuts"):
                if which not in skip and not (which == "nuts" and N > args.nuts_max_n):
                    rows.append(numpyro_row(X, y, ref, args, seed, which == "hmcecs"))
                    show(name, rows[-1])
                    save(args, out)
            entry["load_after"] = os.getloadavg()[0]
            del X, y, model, cv
        save(args, out)          # after each workload: a long run keeps what it finished
    print(table(out))


def save(args, out):
    """The JSON (with the machine) and the markdown table of the workloads so far."""
    write(args.out, {"args": {**vars(args), "data_dir": bool(args.data_dir)}, "workloads": out})
    (RESULTS / f"{args.out}.md").write_text(table(out) + "\n")


if __name__ == "__main__":
    main()
