"""Rows read per step of AustereTest with and without control variates (issue 12).

Logistic regression, d = 10 + intercept, N(0, 10^2) prior, the Laplace-scaled random walk
(``RandomWalk.from_laplace``: 2.38 / sqrt(d) in units of the Laplace covariance at the mode),
AustereTest(m, epsilon=0.01), at N = 10^5 and 10^6. Each chain starts at the mode, makes a
short burn-in and then ``--steps`` steps; reported: mean and median rows read per step, the
fraction of N, the acceptance rate and the time per step. With control variates the chain
runs on ``ControlVariates(model)`` (second-order Taylor proxy at the mode).

Second, the cost per row of the two ways a control-variate row kernel can get the proxy's
weights ``f'(eta*_i), f''(eta*_i)``: recomputed from the row (three dot products, one extra
exp: what ``ControlVariates`` does, O(1) extra memory) or read from stored per-row arrays
(``eta*_i, f'_i, f''_i``: two dot products, 3 N extra floats to store and read). Both are
timed on the same random rows with the compiled batch loop; the plain model's ratio kernel
is the baseline.

Run:  python benchmarks/cv_rows_per_step.py [--steps 1000] [--sizes 100000 1000000] [--m 500]
Writes benchmarks/results/cv_rows_per_step.json.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write  # noqa: E402

from samplers import (  # noqa: E402
    AustereTest,
    ControlVariates,
    GaussianPrior,
    LogisticRegression,
    RandomWalk,
    sample,
)
from samplers._jit import row_jit  # noqa: E402
from samplers._prefetch import prefetch_row  # noqa: E402
from samplers.models._kernels import batch_ratio  # noqa: E402
from samplers.models.logistic import log_sigmoid  # noqa: E402

D = 10


def dataset(N, rng):
    theta = rng.normal(0.0, 1.0 / np.sqrt(D), D + 1)
    X = rng.normal(size=(N, D + 1))
    X[:, -1] = 1.0
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ theta)))).astype(float)
    return X, y


def run_chain(model, cv, test, steps, seed):
    proposal = RandomWalk.from_laplace(cv)
    start = cv.centre.theta
    burn = sample(model, test, proposal, start, max(50, steps // 10), rng=seed)
    chain = sample(model, test, proposal, burn.samples[-1], steps, rng=seed + 1)
    used = chain.stats["n_used"]
    return {
        "mean_rows": float(used.mean()),
        "median_rows": float(np.median(used)),
        "p90_rows": float(np.percentile(used, 90)),
        "fraction_of_N": float(used.mean() / model.N),
        "acceptance": chain.acceptance_rate,
        "ms_per_step": 1e3 * chain.wall_time / steps,
    }


# --- the stored-weights alternative, for the per-row cost comparison -------------------------


@row_jit
def _stored_ratio(data, i, theta, theta_new):
    # data = (X, y, eta_star, f1, f2, shift); eta*, f', f'' read from per-row arrays
    X, y, eta_star, f1, f2, shift = data
    a = 0.0
    a_new = 0.0
    for j in range(X.shape[1]):
        x = X[i, j]
        a += x * theta[j]
        a_new += x * theta_new[j]
    s = 2.0 * y[i] - 1.0
    d = a_new - a
    proxy = d * (f1[i] + 0.5 * f2[i] * (a_new + a - 2.0 * eta_star[i]))
    return (log_sigmoid(s * a_new) - log_sigmoid(s * a)) - proxy + shift


@row_jit
def _stored_prefetch(data, i):
    prefetch_row(data[0], i)
    prefetch_row(data[1], i)
    prefetch_row(data[2], i)
    prefetch_row(data[3], i)
    prefetch_row(data[4], i)


def row_costs(model, cv, rng, n_rows=200_000, repeats=7):
    """ns per row of the plain ratio, the on-the-fly CV ratio and the stored-weights CV ratio."""
    X, y = model.X, model.y
    eta = np.empty(model.N)
    for s in range(0, model.N, 1 << 16):
        eta[s:s + (1 << 16)] = X[s:s + (1 << 16)] @ cv.centre.theta
    sg = 2.0 * y - 1.0
    p = 1.0 / (1.0 + np.exp(-sg * eta))
    f1, f2 = sg * (1.0 - p), -p * (1.0 - p)
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    theta = cv.centre.theta + sd * rng.normal(size=cv.dim)
    theta_new = theta + 0.5 * sd * rng.normal(size=cv.dim)
    idx = rng.integers(0, model.N, n_rows).astype(np.intp)
    out = np.empty(n_rows)
    shift = cv.proxy_total(theta, theta_new) / cv.N
    kernels = {
        "plain": (batch_ratio(model._row_ratio, model._row_prefetch), model._kernel_data()),
        "cv_recompute": (batch_ratio(cv._row_ratio, cv._row_prefetch),
                         cv._decision_data(theta, theta_new)),
        "cv_stored": (batch_ratio(_stored_ratio, _stored_prefetch), (X, y, eta, f1, f2, shift)),
    }
    results = {}
    values = {}
    for name, (kernel, data) in kernels.items():
        kernel(data, idx[:10], theta, theta_new, out[:10])  # compile
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            kernel(data, idx, theta, theta_new, out)
            best = min(best, time.perf_counter() - t0)
        results[name] = 1e9 * best / n_rows
        values[name] = out.copy()
    assert np.allclose(values["cv_recompute"], values["cv_stored"], rtol=1e-8, atol=1e-15)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--m", type=int, default=500)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(12)
    test = AustereTest(m=args.m, epsilon=0.01)
    rows = []
    for N in args.sizes:
        X, y = dataset(N, rng)
        model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
        t0 = time.perf_counter()
        cv = ControlVariates(model)
        fit_s = time.perf_counter() - t0
        for label, target in (("plain", model), ("control variates", cv)):
            r = run_chain(target, cv, test, args.steps, seed=N % 1000 + 1)
            r.update(N=N, sampler=label, m=args.m, epsilon=0.01, mode_seconds=fit_s,
                     mode_passes=cv.centre.n_passes)
            rows.append(r)
            print(f"N={N:>9,d}  {label:<17s} rows/step mean {r['mean_rows']:>11,.0f}  median "
                  f"{r['median_rows']:>10,.0f}  ({100 * r['fraction_of_N']:6.2f}% of N)  "
                  f"accept {r['acceptance']:.2f}  {r['ms_per_step']:8.3f} ms/step")
        costs = row_costs(model, cv, rng)
        print(f"N={N:>9,d}  ns per random row: plain {costs['plain']:.1f}, CV recomputing "
              f"f', f'' {costs['cv_recompute']:.1f}, CV with stored weights "
              f"{costs['cv_stored']:.1f}  (mode: {fit_s:.2f} s, {cv.centre.n_passes} passes)")
        rows.append({"N": N, "ns_per_row": costs})
    write("cv_rows_per_step", {"steps": args.steps, "rows": rows})


if __name__ == "__main__":
    main()
