"""Long importance-sampling references for the GLM benchmarks (Poisson, probit, negative binomial).

The accuracy of a sampler at N = 10^6 is judged against a reference posterior mean and sd.
NUTS there costs seconds per draw, so the reference is **importance sampling from the
Laplace approximation**, with every draw's full-data log-likelihood computed exactly:

* **proposal** ``q``: a defensive mixture around the mode ``m`` and Laplace covariance ``S``
  (both handed in: the benchmarks take the GLM's Newton mode),
  ``alpha N(m, S) + (1 - alpha) t_5(m, scale^2 S)`` (default ``alpha = 0.9``, ``scale =
  1.5``). At N = 10^6 the posterior is close to its Laplace approximation, so the Gaussian
  part gives most of the efficiency, and the heavier t part bounds the weights
  ``p / q <= p / ((1 - alpha) t)`` in the tails;
* **log-likelihood** of every draw over all N rows by a compiled pass written apart from
  the library's kernels (:func:`loglik_sums`): for a block of draws, each row's
  ``eta = x_i . theta`` for all draws of the block (a loop vectorised over the draws), then
  the family's log-density, summed per draw; rows split into blocks run in parallel on all
  numba threads. Terms that do not depend on the row's ``eta`` are summed by count: the
  negative binomial's ``lgamma(y + r) - lgamma(r)`` over the distinct values of ``y``
  (``sum_y n_y (lgamma(y + r) - lgamma(r))``), and terms free of theta (``lgamma(y + 1)``)
  are left out (they cancel in the normalised weights);
* **weights** ``log p(y | theta) + log prior(theta) - log q(theta)``, smoothed by Pareto
  smoothed importance sampling (PSIS, ``arviz.psislw``), whose shape estimate ``k`` is
  reported: the estimate is reliable for ``k < 0.7`` (Vehtari et al. 2024), and
  :func:`importance_reference` raises if it is not, asking for more draws or a heavier
  proposal;
* **estimates**: the weighted mean and sd per coordinate, the weights' ESS
  ``1 / sum w^2``, and per-coordinate Monte Carlo standard errors of the self-normalised
  estimates (delta method): ``se(mean_j) = sqrt(sum_i w_i^2 (theta_ij - mean_j)^2)`` and
  ``se(sd_j) = sqrt(sum_i w_i^2 ((theta_ij - mean_j)^2 - sd_j^2)^2) / (2 sd_j)``, both also in
  units of ``sd_j``.

Cost: N x draws family evaluations (one ``exp``; probit an ``erfc`` and a ``log``; negative
binomial an ``exp`` and a ``log1p``), about 10^10 for 10^4 draws at N = 10^6. Run alone it
estimates that cost on a few draws first (``--pilot``), then runs the full count::

    python benchmarks/is_reference.py --N 1000000 --family probit --draws 20000

(data as ``bench_models.py --fit-only --fit-sizes N`` draws them for ``--fit-families FAMILY``,
or for ``--fit-families A B FAMILY`` with ``--after A B``; ``bench_models.py --reference psis``
calls :func:`importance_reference` itself).

References
----------
Vehtari, Simpson, Gelman, Yao, Gabry (2024). Pareto smoothed importance sampling. JMLR 25(72).
Owen and Zhou (2000). Safe and effective importance sampling. JASA 95(449) (defensive mixtures).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]   # this checkout first, then _common

FAMILY_CODES = {"poisson": 0, "probit": 1, "negative_binomial": 2}
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@numba.njit(cache=True, error_model="numpy")
def _log_ndtr(z):
    """log Phi(z), accurate in both tails (erfc form; asymptotic series below -20)."""
    if z > 0.0:
        return math.log1p(-0.5 * math.erfc(z * _SQRT1_2))
    if z > -20.0:
        return math.log(0.5 * math.erfc(-z * _SQRT1_2))
    u = 1.0 / (z * z)
    return (-0.5 * z * z - math.log(-z) - _LOG_SQRT_2PI
            + math.log1p(u * (-1.0 + u * (3.0 + u * (-15.0 + u * 105.0)))))


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _loglik_sums(code, X, y, beta_t, log_r, n_blocks):
    """Per draw, sum over rows of the family's eta-dependent log-density.

    ``beta_t`` is (k, B) (draws along the fast axis); ``log_r`` (B,) is used by the negative
    binomial only. Returns (B,). Poisson: ``y eta - exp(eta)``; probit: ``log Phi(+-eta)``;
    negative binomial: ``y eta - (y + r) log(exp(eta) + r)`` (the rest summed by the caller).
    """
    N, k = X.shape
    B = beta_t.shape[1]
    partial = np.zeros((n_blocks, B))
    r = np.exp(log_r)
    for c in numba.prange(n_blocks):
        lo = c * N // n_blocks
        hi = (c + 1) * N // n_blocks
        eta = np.empty(B)
        acc = partial[c]
        for i in range(lo, hi):
            for b in range(B):
                eta[b] = 0.0
            for j in range(k):
                xij = X[i, j]
                for b in range(B):
                    eta[b] += xij * beta_t[j, b]
            yi = y[i]
            if code == 0:
                for b in range(B):
                    acc[b] += yi * eta[b] - math.exp(eta[b])
            elif code == 1:
                if yi > 0.0:
                    for b in range(B):
                        acc[b] += _log_ndtr(eta[b])
                else:
                    for b in range(B):
                        acc[b] += _log_ndtr(-eta[b])
            else:
                for b in range(B):
                    # log(exp(eta) + r) = logaddexp(eta, log r)
                    e, lr = eta[b], log_r[b]
                    hi_ = e if e > lr else lr
                    lse = hi_ + math.log1p(math.exp(-abs(e - lr)))
                    acc[b] += yi * e - (yi + r[b]) * lse
    out = np.zeros(B)
    for c in range(n_blocks):
        for b in range(B):
            out[b] += partial[c, b]
    return out


def loglik_sums(family, X, y, thetas, block=1000):
    """Full-data log-likelihood of every draw, up to a constant free of theta.

    Parameters
    ----------
    family : {"poisson", "probit", "negative_binomial"}
        Log link (Poisson, negative binomial NB2 with ``theta[-1] = log r``) or the probit link.
    X : (N, k) float64 array
    y : (N,) float64 array (counts, or 0/1)
    thetas : (B, k) or (B, k + 1) array of draws (negative binomial: last column log r)
    block : int
        Draws per compiled call (memory: one eta buffer of ``block`` per thread).

    Returns
    -------
    (B,) array: ``sum_i log p(y_i | theta_b)`` less ``sum_i c(y_i)`` (``lgamma(y + 1)`` for the
    count families, nothing for probit).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.c_[rng.normal(size=(50, 2)), np.ones(50)]
    >>> y = rng.poisson(1.0, 50).astype(float)
    >>> th = rng.normal(0, 0.1, (3, 3))
    >>> direct = [np.sum(y * (X @ t) - np.exp(X @ t)) for t in th]
    >>> bool(np.allclose(loglik_sums("poisson", X, y, th), direct))
    True
    """
    from scipy.special import gammaln

    if family not in FAMILY_CODES:
        raise ValueError(f"family must be one of {sorted(FAMILY_CODES)}, got {family!r}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
    k = X.shape[1]
    nb = family == "negative_binomial"
    if thetas.shape[1] != k + nb:
        raise ValueError(f"thetas must have {k + nb} columns for {family}, got {thetas.shape[1]}")
    n_blocks = 8 * numba.get_num_threads()
    out = np.empty(thetas.shape[0])
    for a in range(0, thetas.shape[0], block):
        th = thetas[a:a + block]
        log_r = th[:, k].copy() if nb else np.zeros(th.shape[0])
        out[a:a + block] = _loglik_sums(FAMILY_CODES[family], X, y,
                                        np.ascontiguousarray(th[:, :k].T), log_r, n_blocks)
    if nb:
        # sum_i [lgamma(y_i + r) - lgamma(r) + r log r], by the distinct values of y
        values, counts = np.unique(y, return_counts=True)
        r = np.exp(thetas[:, k])
        out += (counts @ (gammaln(values[:, None] + r) - gammaln(r))
                + X.shape[0] * r * thetas[:, k])
    return out


def _proposal(mode, cov, n, rng, alpha, scale, df=5.0):
    """Draws and log-density of alpha N(mode, cov) + (1 - alpha) t_df(mode, scale^2 cov)."""
    from scipy import stats
    from scipy.special import logsumexp

    g = stats.multivariate_normal(mode, cov)
    t = stats.multivariate_t(mode, scale**2 * cov, df=df)
    n_g = rng.binomial(n, alpha)
    thetas = np.concatenate([g.rvs(n_g, random_state=rng).reshape(n_g, mode.size),
                             t.rvs(n - n_g, random_state=rng).reshape(n - n_g, mode.size)])
    logq = logsumexp([math.log(alpha) + g.logpdf(thetas),
                      math.log1p(-alpha) + t.logpdf(thetas)], axis=0)
    return thetas, logq


def importance_reference(family, X, y, mode, cov, logprior, n_draws, rng=None, *,
                         alpha=0.9, scale=1.5, max_k=0.7, log=None):
    """Posterior mean and sd by PSIS from a defensive mixture around the Laplace fit.

    Parameters
    ----------
    family, X, y
        As :func:`loglik_sums`.
    mode, cov : arrays (d,), (d, d)
        The posterior mode and the Laplace covariance there.
    logprior : callable
        ``logprior(thetas) -> (B,)`` log prior density of (B, d) draws.
    n_draws : int
    rng : seed or Generator
    alpha, scale : float
        The mixture weight of the Gaussian part and the t part's scale factor.
    max_k : float
        Raise RuntimeError when the Pareto shape estimate is at or above it.
    log : callable or None
        Called with a progress line after every 2,000 draws.

    Returns
    -------
    dict with ``mean``, ``sd``, ``mcse_mean``, ``mcse_sd`` (arrays, absolute), ``ess``
    (the smoothed weights' ``1 / sum w^2``), ``pareto_k``, ``seconds`` (log-likelihood pass),
    ``draws`` and a ``kind`` string.
    """
    import arviz as az

    rng = np.random.default_rng(rng)
    mode = np.asarray(mode, dtype=float)
    thetas, logq = _proposal(mode, np.asarray(cov, dtype=float), n_draws, rng, alpha, scale)
    t0 = time.perf_counter()
    ll = np.empty(n_draws)
    step = 2000
    for a in range(0, n_draws, step):
        ll[a:a + step] = loglik_sums(family, X, y, thetas[a:a + step])
        if log is not None:
            el = time.perf_counter() - t0
            log(f"    reference: {min(a + step, n_draws)} of {n_draws} draws, {el:.0f} s, "
                f"load {os.getloadavg()[0]:.1f}")
    seconds = time.perf_counter() - t0
    logw = ll + logprior(thetas) - logq
    lw, k = az.psislw(logw - logw.max())
    w = np.exp(lw - lw.max())
    w /= w.sum()
    mean = w @ thetas
    dev2 = (thetas - mean) ** 2
    var = w @ dev2
    sd = np.sqrt(var)
    out = dict(mean=mean, sd=sd, ess=float(1.0 / np.sum(w**2)), pareto_k=float(k),
               mcse_mean=np.sqrt(w**2 @ dev2), mcse_sd=np.sqrt(w**2 @ (dev2 - var) ** 2) / (2 * sd),
               seconds=seconds, draws=int(n_draws), raw_ess=float(
                   1.0 / np.sum((np.exp(logw - logw.max()) / np.exp(logw - logw.max()).sum())**2)),
               kind=(f"PSIS from {alpha:g} N(mode, Laplace cov) + {1 - alpha:g} t_5(mode, "
                     f"{scale:g}^2 Laplace cov), compiled log-likelihood written apart "
                     "(benchmarks/is_reference.py)"))
    if not k < max_k:
        raise RuntimeError(f"importance sampling unreliable: Pareto k = {k:.2f} >= {max_k} "
                           f"({n_draws} draws); use more draws or a heavier proposal")
    return out


def compare(ref, path, data):
    """Print how far an earlier reference (``bench_models.py`` JSON rows on the same data) is
    from ``ref``: per coordinate, the mean and sd differences over their joint standard error
    (the earlier one's ``sd / sqrt(ESS)`` and ``sd / sqrt(2 ESS)``, plus ``ref``'s own)."""
    import json

    for row in json.loads(Path(path).read_text())["rows"]:
        old = row.get("reference") or {}
        if (row.get("part") != "fit" or row["N"] != data.X.shape[0]
                or row["family"] != data.family
                or not np.array_equal(np.asarray(row["truth"]), data.theta)):
            continue
        sd = ref["sd"]
        dm = (np.asarray(old["mean"]) - ref["mean"]) / sd
        ds = (np.asarray(old["sd"]) - sd) / sd
        se_m = np.sqrt(1.0 / old["ess"] + (ref["mcse_mean"] / sd) ** 2)
        se_s = np.sqrt(0.5 / old["ess"] + (ref["mcse_sd"] / sd) ** 2)
        print(f"  vs {old.get('draws')}-draw reference in {Path(path).name} (ESS {old['ess']:.0f}):"
              f" max |mean diff| {np.max(np.abs(dm)):.3f} sd (se {np.max(se_m):.3f}, max z "
              f"{np.max(np.abs(dm) / se_m):.2f}), max |sd diff| {np.max(np.abs(ds)):.3f} sd "
              f"(se {np.max(se_s):.3f}, max z {np.max(np.abs(ds) / se_s):.2f})", flush=True)


def main(argv=None):
    from _common import write
    from bench_models import FIT_FAMILIES, FIT_ROUTES, LOG_R_SD, PRIOR_SD, fit_glm, make_data

    from samplers import ControlVariates

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--N", type=int, default=1_000_000)
    ap.add_argument("--family", default="probit", choices=FIT_FAMILIES)
    ap.add_argument("--after", nargs="*", default=[], choices=FIT_FAMILIES,
                    help="the families bench_models.py --fit-families lists before FAMILY "
                         "(their data are drawn first, so FAMILY's are the same)")
    ap.add_argument("--draws", type=int, default=20_000)
    ap.add_argument("--pilot", type=int, default=200, help="draws timed first (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare-with", nargs="*", default=None,
                    help="bench_models.py JSON files whose references on the same data "
                         "(N, family, truth) are compared with this one")
    ap.add_argument("--out", default=None,
                    help="results file name (default is_reference_FAMILY_N); bench_models.py "
                         "--reference-file reads it")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(20261128)
    for family in args.after:
        # the data and seeds bench_models.py's fit part draws before FAMILY's
        make_data(family, args.N, rng)
        for _ in range(len(FIT_ROUTES) + 2):
            rng.integers(2**31)
    data = make_data(args.family, args.N, rng)
    cv = ControlVariates(fit_glm(data))
    mode, cov = np.asarray(cv.center.theta), cv.laplace_covariance()
    k = data.X.shape[1]

    def logprior(th):
        lp = -0.5 * np.sum(th[:, :k] ** 2, axis=1) / PRIOR_SD**2
        return lp - 0.5 * th[:, k] ** 2 / LOG_R_SD**2 if th.shape[1] > k else lp

    if args.pilot:
        th, _ = _proposal(mode, cov, args.pilot, np.random.default_rng(0), 0.9, 1.5)
        loglik_sums(args.family, data.X[:1000], data.y[:1000], th[:2])     # compile
        t0 = time.perf_counter()
        loglik_sums(args.family, data.X, data.y, th)
        s = time.perf_counter() - t0
        print(f"pilot: {args.pilot} draws x {args.N} rows in {s:.1f} s ({1e9 * s / args.pilot / args.N:.2f} ns per "
              f"row-draw, {numba.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}): "
              f"{args.draws} draws would take about {s * args.draws / args.pilot:.0f} s", flush=True)
    ref = importance_reference(args.family, data.X, data.y, mode, cov, logprior, args.draws,
                               args.seed, log=lambda line: print(line, flush=True))
    z = np.max(np.abs(ref["mean"] - mode) / ref["sd"])
    print(f"{args.family} N={args.N}: ESS {ref['ess']:.0f} of {args.draws} (raw {ref['raw_ess']:.0f}), "
          f"Pareto k {ref['pareto_k']:.3f}, {ref['seconds']:.0f} s; max mcse mean "
          f"{np.max(ref['mcse_mean'] / ref['sd']):.4f} sd, sd {np.max(ref['mcse_sd'] / ref['sd']):.4f} sd;"
          f" largest |mean - mode| {z:.3f} sd")
    for path in args.compare_with or []:
        compare(ref, path, data)
    write(args.out or f"is_reference_{args.family}_{args.N}", dict(
        settings=vars(args), load_average=dict(before=load_before, now=os.getloadavg()[0]),
        N=args.N, family=args.family, truth=data.theta.tolist(), mode=mode.tolist(),
        **{key: (v.tolist() if isinstance(v, np.ndarray) else v) for key, v in ref.items()}))


if __name__ == "__main__":
    main()
