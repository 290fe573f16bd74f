"""Throughput of logistic regression: random rows (d = 50), and full passes over all N rows.

Random rows: the reference is what a user would write, one numba loop over the same random
rows computing l_i = log sigmoid(s x.theta') - log sigmoid(s x.theta). Measured for the public
``model.loglik_ratio`` (argument checks included), the unchecked batch kernel the samplers
use, and the rows an AustereTest decision reads (one compiled call per decision, rows drawn
without replacement inside). Target: ratio >= 0.5.

Full passes (issue 15): ns per row and GB/s of X read for ``sum_i log sigmoid(s_i x_i.theta)``
over all N rows (float64, d in {11, 51}, N in {10^6, 10^7}): ours on one thread and on every
core (``ModelView.full_loglik``), the exact test's l_i pass (two dot products a row), the
previous compiled kernels (one row's dot product at a time, before issue 15's rework; timed
in the same round robin, so comparable under load), the chunked batch-kernel route the
passes used before that, NumPy ``X @ theta`` + ``log_expit``, JAX's
jitted log density (``pip install .[bench]``; skipped, saying so, when JAX is missing) and
the streaming floor ``X.sum()``. Target: at or below JAX, both cores used.

Run:  python benchmarks/bench_throughput.py [--rows 1000000] [--batch 500]
                                            [--full-rows 1000000 10000000] [--dims 11 51]
Writes benchmarks/results/throughput.json.
"""

from __future__ import annotations

import argparse
import math
from concurrent.futures import ThreadPoolExecutor
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np
from scipy.special import log_expit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write  # noqa: E402

sys.path.insert(0, str(ROOT))   # measure this checkout, not whichever one is pip-installed

from samplers import AustereTest, IndexSampler, LogisticRegression  # noqa: E402
from samplers import ModelView, check_model  # noqa: E402
from samplers.datasets import logistic_regression  # noqa: E402
from samplers.models.logistic import log_sigmoid  # noqa: E402


#: Threads of the library's full passes (design._lib.jit.PASS_THREADS: every core).
PASS_THREADS = os.cpu_count() or 1


@numba.njit(cache=True)
def plain_loop(X, y, idx, theta, theta_new, out):
    for t in range(idx.shape[0]):
        i = idx[t]
        a = 0.0
        b = 0.0
        for j in range(X.shape[1]):
            a += X[i, j] * theta[j]
            b += X[i, j] * theta_new[j]
        s = 2.0 * y[i] - 1.0
        out[t] = -math.log1p(math.exp(-s * b)) + math.log1p(math.exp(-s * a))


def rate(fn, n_rows, repeat):
    fn()
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n_rows / best


@numba.njit(cache=True, error_model="numpy", nogil=True)
def _previous_eta(X, y, plus_minus, i, theta):
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    return s * a


@numba.njit(cache=True, error_model="numpy", nogil=True)
def previous_loglik_chunks(data, theta, N, chunk, sums, c0, c1):
    """The full_loglik kernel before issue 15's rework (one row's dot product at a time, a
    chain of d dependent additions), kept here to compare in the same run."""
    X, y, plus_minus, inv_temp = data
    eta = np.empty(chunk)
    values = np.empty(chunk)
    for c in range(c0, c1):
        start = c * chunk
        k = min(chunk, N - start)
        for t in range(k):
            eta[t] = _previous_eta(X, y, plus_minus, start + t, theta)
        for t in range(k):
            values[t] = log_sigmoid(eta[t]) * inv_temp
        total = 0.0
        for t in range(k):
            total += values[t]
        sums[c] = total


@numba.njit(cache=True, error_model="numpy", nogil=True)
def previous_ratio_chunks(data, theta, theta_new, N, chunk, means, m2s, c0, c1):
    """The exact test's l_i kernel before the rework (two row-at-a-time dot products, then
    the chunk's mean and M2 in two more passes)."""
    X, y, plus_minus, inv_temp = data
    eta = np.empty(chunk)
    eta_new = np.empty(chunk)
    values = np.empty(chunk)
    for c in range(c0, c1):
        start = c * chunk
        k = min(chunk, N - start)
        for t in range(k):
            eta[t] = _previous_eta(X, y, plus_minus, start + t, theta)
            eta_new[t] = _previous_eta(X, y, plus_minus, start + t, theta_new)
        for t in range(k):
            values[t] = (log_sigmoid(eta_new[t]) - log_sigmoid(eta[t])) * inv_temp
        total = 0.0
        for t in range(k):
            total += values[t]
        mean = total / k
        m2 = 0.0
        for t in range(k):
            dv = values[t] - mean
            m2 += dv * dv
        means[c], m2s[c] = mean, m2


def previous_pass(view, kernel, *args, pool):
    """A previous kernel over all chunks, in blocks on ``pool`` (as the library's passes)."""
    chunk = view.FULL_CHUNK
    count = -(-view.N // chunk)
    out = [np.empty(count) for _ in range(2 if kernel is previous_ratio_chunks else 1)]
    step = max(1, -(-count // (PASS_THREADS * 4)))
    futures = [pool.submit(kernel, view.kernel_data(), *args, view.N, chunk, *out, c0,
                           min(c0 + step, count)) for c0 in range(0, count, step)]
    for future in futures:
        future.result()
    if kernel is previous_ratio_chunks:   # the mean of the l_i, as full_ratio_moments
        sizes = np.minimum(chunk, view.N - chunk * np.arange(count))
        return float(out[0] @ sizes) / view.N
    return float(sum(out[0]))


def jax_log_density():
    """JAX's jitted log density of logistic regression, or None (with the reason) if JAX is
    not installed."""
    try:
        import jax
    except ImportError:
        return None, "jax not installed (pip install .[bench])"
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    @jax.jit
    def log_density(theta, X, s):
        return jnp.sum(jax.nn.log_sigmoid(s * (X @ theta)))

    @jax.jit
    def ratio_moments(theta, theta_new, X, s):
        # the exact test's pass: l_i at two parameter vectors, their mean and variance
        l = jax.nn.log_sigmoid(s * (X @ theta_new)) - jax.nn.log_sigmoid(s * (X @ theta))
        return jnp.mean(l), jnp.var(l)

    return (log_density, ratio_moments, jax.device_put), f"jax {jax.__version__}"


def full_passes(sizes, dims, repeat):
    """ns/row and GB/s of a full logistic log-likelihood pass, ours beside the peers."""
    jax_fns, jax_note = jax_log_density()
    print(f"\nfull logistic pass over all N rows (float64; {PASS_THREADS} threads = every core; "
          f"{jax_note})")
    print(f"  {'N':>11s} {'d':>3s}  {'route':44s} {'ns/row':>8s} {'GB/s':>6s}  value")
    table = []
    pool = ThreadPoolExecutor(PASS_THREADS)
    for N in sizes:
        for d in dims:
            rng = np.random.default_rng(1)
            X = rng.standard_normal((N, d))
            y = (rng.random(N) < 0.5).astype(float)
            s = 2.0 * y - 1.0
            theta = rng.normal(0, 0.3, d)
            theta_new = theta + 1e-3
            view = ModelView(LogisticRegression(X, y), d)
            gb = (X.nbytes + y.nbytes) / 1e9
            routes = {
                "ours, 1 thread (full_loglik)": lambda: view.full_loglik(theta, threads=1),
                f"ours, {PASS_THREADS} threads (full_loglik)": lambda: view.full_loglik(theta),
                "ours, exact-test l_i pass, 1 thread": lambda: view.full_ratio_moments(
                    theta, theta_new, threads=1)[1].mean,
                f"ours, exact-test l_i pass, {PASS_THREADS} threads": lambda: view.full_ratio_moments(
                    theta, theta_new)[1].mean,
                f"previous kernel, {PASS_THREADS} threads (full_loglik)": lambda: previous_pass(
                    view, previous_loglik_chunks, theta, pool=pool),
                f"previous kernel, exact-test l_i pass, {PASS_THREADS} threads": lambda: previous_pass(
                    view, previous_ratio_chunks, theta, theta_new, pool=pool),
                "before: chunked batch kernel, 1 thread": lambda: sum(
                    float(view.model._loglik(theta, idx).sum()) for idx in view.chunks()),
                "numpy X @ theta + log_expit": lambda: float(log_expit(s * (X @ theta)).sum()),
            }
            if jax_fns is not None:
                log_density, ratio_moments, put = jax_fns
                Xj, sj, thj, thj_new = put(X), put(s), put(theta), put(theta_new)
                routes["jax.jit log density"] = lambda: float(log_density(thj, Xj, sj))
                routes["jax.jit l_i pass (two thetas, mean and var)"] = lambda: float(
                    ratio_moments(thj, thj_new, Xj, sj)[0])
            routes["streaming floor X.sum()"] = lambda: float(X.sum())
            # round robin over the routes, best of `repeat`: on a shared machine a burst of
            # load then spreads over every route instead of spoiling one route's timings
            times = {name: math.inf for name in routes}
            for fn in routes.values():
                fn()
            for _ in range(repeat):
                for name, fn in routes.items():
                    t0 = time.perf_counter()
                    fn()
                    times[name] = min(times[name], time.perf_counter() - t0)
            for name, fn in routes.items():
                t = times[name]
                read = X.nbytes / 1e9 if name.startswith("streaming") else gb
                row = {"N": N, "d": d, "route": name, "ns_per_row": t / N * 1e9,
                       "GB_per_s": read / t, "value": fn()}
                table.append(row)
                print(f"  {N:11,d} {d:3d}  {name:44s} {row['ns_per_row']:8.2f} "
                      f"{row['GB_per_s']:6.2f}  {row['value']:.6g}")
            del X, y, view, routes
            if jax_fns is not None:
                del Xj, sj, thj, thj_new
    return table, jax_note


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--full-rows", type=int, nargs="*", default=[1_000_000, 10_000_000],
                        help="N of the full-pass table (none: skip it)")
    parser.add_argument("--dims", type=int, nargs="+", default=[11, 51])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    X, y, theta = logistic_regression(args.rows, 50, rng=rng, intercept=False)
    model = LogisticRegression(X, y)
    theta_new = theta + rng.normal(0, 1e-3, theta.shape)
    batches = [rng.integers(0, args.rows, args.batch) for _ in range(args.batches)]
    n_rows = args.batch * args.batches
    out = np.empty(args.batch)

    def reference():
        for idx in batches:
            plain_loop(X, y, idx, theta, theta_new, out)

    def public():
        for idx in batches:
            model.loglik_ratio(theta, theta_new, idx)

    def kernel():
        for idx in batches:
            model._loglik_ratio(theta, theta_new, idx)

    # A decision that must read exactly `batch` rows: epsilon near 1/2 puts the critical
    # value near 0, so the first stage decides.
    view, theta0 = check_model(model, theta)
    test = AustereTest(m=args.batch, epsilon=0.4999)
    dec_rng = np.random.default_rng(5)
    sampler = IndexSampler(args.rows, dec_rng)
    used = []

    def decisions():
        used.clear()
        for _ in range(args.batches):
            _, info = test.decide(dec_rng, view, sampler, theta0, theta_new, 0.0)
            used.append(info.n_used)

    results = {"plain numba loop": rate(reference, n_rows, 5)}
    results["model.loglik_ratio (public)"] = rate(public, n_rows, 5)
    results["model._loglik_ratio (kernel)"] = rate(kernel, n_rows, 5)
    decisions()
    results["AustereTest decision"] = rate(decisions, sum(used), 5)
    base = results["plain numba loop"]
    print(f"logistic regression, d = 50, N = {args.rows:,}, random rows in batches of {args.batch}")
    for name, r in results.items():
        print(f"  {name:32s} {r / 1e6:8.2f} M rows/s   ratio {r / base:5.2f}")
    full, jax_note = full_passes(args.full_rows, args.dims, args.repeat)
    write("throughput", {"settings": {**vars(args), "pass_threads": PASS_THREADS,
                                      "full_chunk": ModelView.FULL_CHUNK, "jax": jax_note},
                         "rows_per_second": results,
                         "ratio_to_plain_loop": {k: v / base for k, v in results.items()},
                         "full_pass": full})


if __name__ == "__main__":
    main()
