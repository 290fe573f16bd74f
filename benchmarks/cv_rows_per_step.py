"""Rows read per step of AustereTest with and without control variates (issue 12).

Logistic regression, d = 10 + intercept, N(0, 10^2) prior, the Laplace-scaled random walk
(``RandomWalk.from_laplace``: 2.38 / sqrt(d) in units of the Laplace covariance at the mode),
AustereTest(m, epsilon=0.01), at N = 10^5 and 10^6. Each chain starts at the mode, makes a
short burn-in and then ``--steps`` steps; reported: mean and median rows read per step, the
fraction of N, gradient rows per step, the acceptance rate, the minimum bulk ESS over the
coordinates and the time per step. With control variates the chain runs on
``ControlVariates(model)`` (second-order Taylor proxy at the mode), with the random walk and
with ``Langevin.from_laplace(cv, batch_size=m)`` (MALA with the control-variate gradient).

Second, the cost per row of the two ways a control-variate row kernel can get the proxy's
weights ``f'(eta*_i), f''(eta*_i)``: recomputed from the row (three dot products, one extra
exp: what ``ControlVariates`` does, O(1) extra memory) or read from stored per-row arrays
(``eta*_i, f'_i, f''_i``: two dot products, 3 N extra floats to store and read). Both are
timed on the same random rows with the compiled batch loop; the plain model's ratio kernel
is the baseline.

Run:  python benchmarks/cv_rows_per_step.py [--steps 1000] [--sizes 100000 1000000] [--m 500]
      [--cv-only]
Writes benchmarks/results/cv_rows_per_step.json (``..._cv_only_m<m>.json`` with --cv-only).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numba
import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import cv_logistic_dataset, write  # noqa: E402

from samplers import (  # noqa: E402
    AustereTest,
    ControlVariates,
    GaussianPrior,
    Langevin,
    LogisticRegression,
    RandomWalk,
    sample,
)

D = 10




def run_chain(model, cv, test, steps, seed, proposal=None):
    proposal = RandomWalk.from_laplace(cv) if proposal is None else proposal
    start = cv.center.theta
    burn = sample(model, test, proposal, start, max(50, steps // 10), rng=seed)
    chain = sample(model, test, proposal, burn.samples[-1], steps, rng=seed + 1)
    used = chain.stats["n_used"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        ess = float(az.ess(chain.to_arviz()).theta.values.min())
    return {
        "min_ess": ess,
        "grad_rows": float(chain.stats["n_grad"].mean()),
        "mean_rows": float(used.mean()),
        "median_rows": float(np.median(used)),
        "p90_rows": float(np.percentile(used, 90)),
        "fraction_of_N": float(used.mean() / model.N),
        "acceptance": chain.acceptance_rate,
        "ms_per_step": 1e3 * chain.wall_time / steps,
    }


# --- the stored-weights alternative, for the per-row cost comparison -------------------------
# Both variants are written here with plain numba (no prefetching), so that they differ only in
# where f'(eta*_i), f''(eta*_i) come from; the library's public loglik_ratio (compiled loop with
# prefetching, plus a Python call) is timed beside them.


@numba.njit(cache=True)
def _log_sigmoid(z):
    if z >= 0.0:
        return -math.log1p(math.exp(-z))
    return z - math.log1p(math.exp(z))


@numba.njit(cache=True)
def cv_recompute(X, y, center, theta, theta_new, shift, idx, out):
    for t in range(idx.shape[0]):
        i = idx[t]
        a = 0.0
        a_new = 0.0
        a_c = 0.0
        for j in range(X.shape[1]):
            x = X[i, j]
            a += x * theta[j]
            a_new += x * theta_new[j]
            a_c += x * center[j]
        s = 2.0 * y[i] - 1.0
        z = s * a_c
        e = math.exp(-abs(z))
        q = e / (1.0 + e) if z >= 0.0 else 1.0 / (1.0 + e)
        f1 = s * q
        f2 = -e / ((1.0 + e) * (1.0 + e))
        d = a_new - a
        proxy = d * (f1 + 0.5 * f2 * (a_new + a - 2.0 * a_c))
        out[t] = (_log_sigmoid(s * a_new) - _log_sigmoid(s * a)) - proxy + shift


@numba.njit(cache=True)
def cv_stored(X, y, eta_star, f1, f2, theta, theta_new, shift, idx, out):
    for t in range(idx.shape[0]):
        i = idx[t]
        a = 0.0
        a_new = 0.0
        for j in range(X.shape[1]):
            x = X[i, j]
            a += x * theta[j]
            a_new += x * theta_new[j]
        s = 2.0 * y[i] - 1.0
        d = a_new - a
        proxy = d * (f1[i] + 0.5 * f2[i] * (a_new + a - 2.0 * eta_star[i]))
        out[t] = (_log_sigmoid(s * a_new) - _log_sigmoid(s * a)) - proxy + shift


def _best(fn, repeats):
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def row_costs(model, cv, rng, n_rows=200_000, repeats=7):
    """ns per random row: the library's plain and CV ratios (public API), and the bare
    recompute and stored-weights kernels."""
    X, y = model.X, model.y
    eta = np.empty(model.N)
    for s in range(0, model.N, 1 << 16):
        eta[s:s + (1 << 16)] = X[s:s + (1 << 16)] @ cv.center.theta
    sg = 2.0 * y - 1.0
    p = 1.0 / (1.0 + np.exp(-sg * eta))
    f1, f2 = sg * (1.0 - p), -p * (1.0 - p)
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    theta = cv.center.theta + sd * rng.normal(size=cv.dim)
    theta_new = theta + 0.5 * sd * rng.normal(size=cv.dim)
    idx = rng.integers(0, model.N, n_rows).astype(np.intp)
    shift = cv.proxy_total(theta, theta_new) / cv.N
    out_a, out_b = np.empty(n_rows), np.empty(n_rows)
    center = np.array(cv.center.theta)
    runs = {
        "library_plain": lambda: model.loglik_ratio(theta, theta_new, idx),
        "library_cv": lambda: cv.loglik_ratio(theta, theta_new, idx),
        "bare_cv_recompute": lambda: cv_recompute(X, y, center, theta, theta_new, shift, idx, out_a),
        "bare_cv_stored": lambda: cv_stored(X, y, eta, f1, f2, theta, theta_new, shift, idx, out_b),
    }
    for fn in runs.values():
        fn()  # compile
    costs = {name: 1e9 * _best(fn, repeats) / n_rows for name, fn in runs.items()}
    want = cv.loglik_ratio(theta, theta_new, idx)
    assert np.allclose(out_a, want, rtol=1e-8, atol=1e-15)
    assert np.allclose(out_b, want, rtol=1e-8, atol=1e-15)
    return costs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--m", type=int, default=500)
    parser.add_argument("--cv-only", action="store_true",
                        help="skip the plain chains and the per-row timings (fast)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(12)
    test = AustereTest(m=args.m, epsilon=0.01)
    rows = []
    for N in args.sizes:
        X, y = cv_logistic_dataset(N, rng, D)
        model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
        t0 = time.perf_counter()
        cv = ControlVariates(model)
        fit_s = time.perf_counter() - t0
        mala = Langevin.from_laplace(cv, batch_size=args.m)
        targets = (("plain", model, None), ("control variates", cv, None),
                   ("CV + MALA (CV gradient)", cv, mala))
        for label, target, proposal in targets[1:] if args.cv_only else targets:
            r = run_chain(target, cv, test, args.steps, seed=N % 1000 + 1, proposal=proposal)
            r.update(N=N, sampler=label, m=args.m, epsilon=0.01, mode_seconds=fit_s,
                     mode_passes=cv.center.n_passes)
            rows.append(r)
            print(f"N={N:>9,d}  {label:<24s} rows/step mean {r['mean_rows']:>10,.0f}  median "
                  f"{r['median_rows']:>9,.0f}  ({100 * r['fraction_of_N']:6.2f}% of N)  "
                  f"grad rows {r['grad_rows']:>5,.0f}  accept {r['acceptance']:.2f}  "
                  f"min ESS {r['min_ess']:6.0f}  {r['ms_per_step']:8.3f} ms/step")
        if args.cv_only:
            continue
        costs = row_costs(model, cv, rng)
        print(f"N={N:>9,d}  ns per random row: library plain {costs['library_plain']:.1f}, "
              f"library CV {costs['library_cv']:.1f}; bare kernels: CV recomputing f', f'' "
              f"{costs['bare_cv_recompute']:.1f}, CV with stored weights "
              f"{costs['bare_cv_stored']:.1f}  (mode: {fit_s:.2f} s, {cv.center.n_passes} passes)")
        rows.append({"N": N, "ns_per_row": costs})
    name = "cv_rows_per_step" + (f"_cv_only_m{args.m}" if args.cv_only else "")
    write(name, {"steps": args.steps, "rows": rows})


if __name__ == "__main__":
    main()
