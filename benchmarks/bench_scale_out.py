"""Full-data passes on a Dask cluster over a Zarr store, against the same passes in memory.

Logistic regression, d = 10 covariates + intercept, rows in a float32 Zarr v3 store on local
disk, written once per N under ``--store-dir`` (outside the repository; 10^8 rows are 4.8 GB)
by ``samplers.datasets.generate_store``: block k of 2^20 rows from ``default_rng([SEED, k])``,
one block in memory at a time, so the rows are the same at every run and the first rows of a
larger store are a smaller one's. Measured, in one run:

1. **passes through the cluster** (a ``LocalCluster`` of 2 worker processes, one thread and a
   2 GB memory limit each; every task rebuilds about 10^6 rows from the store and returns
   per-chunk sums) at each size of ``--rows``: the model's data checks (on the client), the
   mode (``ControlVariates(model, executor=client)``: Newton's passes, the sums at the center
   and the row norms), one sums pass at the center, the trial statistics of ``--pairs``
   pairs (``design.TrialChain.from_model``), with ``--heavy-rows`` ``samplers.heavy_rows``'
   pass, and a chain on the store (an Austere test with control variates, m = 100,
   independence proposal): seconds per step and rows read per step;
2. **the same passes in memory** (numpy float32 arrays, the two local threads) at
   ``--memory-rows`` (default the smallest N; 0 for none), and the ratio cluster / memory;
3. the peak resident memory of the client and of each worker (``ru_maxrss``; the client's
   sampled every half second during ``fit`` and given per step of ``fit``);
4. ``validation.fit(store_model, tolerance=0.01, executor=client)`` at each size of
   ``--fit-rows`` (default the largest of ``--rows``): the timings of its steps (each printed
   as it ends, with the client's RSS and the workers' peaks so far, so a run stopped by
   ``timeout`` says how far it got), rows read per step, the peak RSS of the client (sampled
   every 0.5 s) and of each worker (sampled every 2 s from the client, and ``ru_maxrss``;
   whether a worker was restarted), and its posterior mean against the Laplace
   approximation (mode, Hessian) from the same passes, in posterior sds, with the Monte
   Carlo standard error of each mean. ``--fit-only`` skips the timed passes of 1-3 (the
   Laplace approximation is then one sums pass at fit's mode); ``--checks-on-cluster``
   runs the model's data checks on the cluster.

The load of the machine is printed and saved: timings are only comparable within one run.

Run:  python benchmarks/bench_scale_out.py [--rows 1e7 1e8] [--fit-rows ...] [--pairs 10]
      [--memory-rows N] [--heavy-rows] [--store-dir DIR] [--fit-only] [--checks-on-cluster]
      [--fit-draws 2000] [--out NAME]
e.g.  python benchmarks/bench_scale_out.py --rows 1e8 --fit-only --fit-rows 1e6 1e7 1e8 \
      --fit-draws 2000 --checks-on-cluster --store-dir DIR --out scale_out_fit_1e8
Writes benchmarks/results/NAME.json (default scale_out.json).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

D = 10                      # covariates, plus an intercept column
BLOCK = 1 << 20             # rows the generator makes at a time (one seed each)
SEED = 20260101
THETA = np.concatenate([[-0.3], np.linspace(-1.0, 1.0, D)]) / np.sqrt(D)
N_PAIRS = 10                # trial pairs of the statistics pass (the cost grows with them)


def make_rows(n, rng):
    """n rows of the benchmark's data from ``rng``: ``X`` (n, D + 1) float32 with an intercept
    column and ``y`` (n,) float32 labels of the logistic model at ``THETA``."""
    X = np.empty((n, D + 1), dtype=np.float32)
    X[:, 0] = 1.0
    X[:, 1:] = rng.standard_normal((n, D), dtype=np.float32)
    p = 1.0 / (1.0 + np.exp(-(X.astype(np.float64) @ THETA)))
    y = (rng.random(n) < p).astype(np.float32)
    return X, y


def rows_in_memory(n):
    """The store's first n rows, made in memory by the rule of
    ``samplers.datasets.generate_store`` (block k from ``default_rng([SEED, k])``)."""
    parts = [make_rows(min(BLOCK, n - s), np.random.default_rng([SEED, s // BLOCK]))
             for s in range(0, n, BLOCK)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def store_path(store_dir: Path, n: int) -> Path:
    return store_dir / f"logistic_d{D}_{n}.zarr"


def ensure_store(store_dir: Path, n: int) -> Path:
    """The store of n rows, written once, block by block (``generate_store``: one block of
    rows in memory at a time), and verified by its checksums when a model opens it."""
    from samplers.datasets import generate_store

    path = store_path(store_dir, n)
    done = path.with_suffix(".done")
    if not done.exists():
        t = time.perf_counter()
        store_dir.mkdir(parents=True, exist_ok=True)
        generate_store(path, n, make_rows, rng=SEED, block=BLOCK, progress=True)
        done.write_text("ok\n")
        print(f"wrote {path} ({n:,} rows) in {time.perf_counter() - t:.0f} s", flush=True)
    return path


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _worker_peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def trial_pairs(cv, n_pairs, seed=1):
    """Pairs theta ~ N(mode, Sigma), theta' = theta + a step of 0.5 sd (the walk's scale)."""
    rng = np.random.default_rng(seed)
    L = np.linalg.cholesky(cv.laplace_covariance())
    thetas = cv.center.theta + rng.standard_normal((n_pairs, cv.dim)) @ L.T
    news = thetas + 0.5 * rng.standard_normal((n_pairs, cv.dim)) @ L.T / np.sqrt(cv.dim)
    return thetas, news


def time_passes(model, executor, label, n, pairs=N_PAIRS):
    """Seconds and ns/row of the mode search, one sums pass and the trial statistics of
    ``pairs`` pairs (none for 0)."""
    import design
    from samplers import ControlVariates

    t = time.perf_counter()
    cv = ControlVariates(model, executor=executor)
    mode_s = time.perf_counter() - t
    passes = cv.center.n_passes + 1                  # Newton's and the center's, the norms
    t = time.perf_counter()
    ControlVariates(model, center=cv.center.theta, executor=executor)   # one pass: the sums
    sums_s = time.perf_counter() - t
    trial_s = float("nan")
    if pairs:
        thetas, news = trial_pairs(cv, pairs)
        t = time.perf_counter()
        design.TrialChain.from_model(cv, thetas, news, progress=False, executor=executor)
        trial_s = time.perf_counter() - t
    out = {"mode_seconds": mode_s, "mode_passes": passes,
           "mode_ns_per_row_pass": 1e9 * mode_s / (passes * n),
           "sums_seconds": sums_s, "sums_ns_per_row": 1e9 * sums_s / n,
           "trial_seconds": trial_s, "trial_ns_per_row": 1e9 * trial_s / n,
           "trial_ns_per_row_pair": 1e9 * trial_s / (n * max(pairs, 1)),
           "trial_pairs": pairs}
    print(f"  {label:<28} mode {mode_s:7.1f} s ({passes} passes, "
          f"{out['mode_ns_per_row_pass']:6.1f} ns/row/pass)  sums {sums_s:6.1f} s "
          f"({out['sums_ns_per_row']:6.1f} ns/row)  trial stats {trial_s:6.1f} s "
          f"({out['trial_ns_per_row']:6.1f} ns/row)", flush=True)
    return cv, out


def warm_up(client):
    """Compile every kernel the timed passes use, here and on the workers (numba caches
    what it can on disk; the control variates' row kernels are compiled per process)."""
    from samplers import GaussianPrior, LogisticRegression

    n = 3 << 16
    model = LogisticRegression(*rows_in_memory(n), prior=GaussianPrior(0.0, 10.0))
    for executor in (None, client):
        cv, _ = time_passes(model, executor, "warm-up" + (" (cluster)" if executor else ""), n)
    chain_steps(cv, 5)


def chain_steps(cv, steps, seed=3):
    """Seconds per step of an Austere chain with control variates (m = 100, epsilon 0.05)
    and the independence proposal from the Laplace approximation."""
    from samplers import AustereTest, Independence, sample

    chain = sample(cv, AustereTest(m=100, epsilon=0.05), Independence.from_laplace(cv),
                   cv.center.theta, steps, rng=seed, progress=False)
    rows = float(np.mean(chain.stats["n_used"]))
    return chain.wall_time / steps, rows


class RSSWatch:
    """The client's resident memory sampled every ``every`` seconds on a thread (from
    /proc/self/statm), so its peak can be put against the step of ``fit`` that ran then."""

    def __init__(self, every=0.5):
        import threading

        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.perf_counter()
        self._thread.start()

    def _run(self):
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.is_set():
            try:
                with open("/proc/self/statm") as f:
                    rss = int(f.read().split()[1]) * page / 2**20
            except OSError:
                return
            self.samples.append((time.perf_counter() - self.t0, rss))
            self._stop.wait(self.every)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.samples


def peak_per_step(samples, timings):
    """The client's peak RSS (MB) within each step of ``fit``, its steps taken in the order
    they ran (``timings`` keeps their seconds in that order; a step run twice is merged)."""
    out, t = {}, 0.0
    for name, sec in timings.items():
        if name in ("total", "route"):       # "route" wraps the verdict: not a step of its own
            continue
        inside = [rss for when, rss in samples if t <= when <= t + sec + 0.5]
        out[name] = max(inside) if inside else float("nan")
        t += sec
    return out


def _worker_rss_mb():
    """A worker's current resident memory (MB), from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class WorkerWatch:
    """Each worker's resident memory sampled every ``every`` seconds from the client (the
    workers' ``ru_maxrss`` is their peak since start; this also catches a worker restarted
    by its nanny, whose peak would start again)."""

    def __init__(self, client, every=2.0):
        import threading

        self.client, self.every, self.peak, self.pids = client, every, {}, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                rss = self.client.run(_worker_rss_mb)
                pids = self.client.run(os.getpid)
            except Exception:            # the cluster closing, a worker restarting
                rss, pids = {}, {}
            for w, v in rss.items():
                self.peak[w] = max(self.peak.get(w, 0.0), v)
            for w, pid in pids.items():
                self.pids.setdefault(w, set()).add(pid)
            self._stop.wait(self.every)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


class _steps_logged:
    """Print each step of ``fit`` as it ends (its seconds, the client's RSS then and the
    workers' peaks so far), so a run stopped by ``timeout`` still says how far it got. It
    wraps fit's step clock (``validation.workflow.fit._Clock``) for the duration."""

    def __init__(self, t0, watch, workers):
        self.t0, self.watch, self.workers = t0, watch, workers

    def __enter__(self):
        from validation.workflow import fit as fit_module

        self.cls, self.call = fit_module._Clock, fit_module._Clock.__call__
        log = self

        def call(clock, name, fn, *args, **kwargs):
            t = time.perf_counter()
            print(f"    [{t - log.t0:7.1f} s] {name} ...", flush=True)
            try:
                return log.call(clock, name, fn, *args, **kwargs)
            finally:
                rss = log.watch.samples[-1][1] if log.watch.samples else float("nan")
                print(f"    [{time.perf_counter() - log.t0:7.1f} s] {name} done in "
                      f"{time.perf_counter() - t:.1f} s; client RSS {rss:.0f} MB (peak "
                      f"{max((r for _, r in log.watch.samples), default=float('nan')):.0f}), "
                      "workers' peak " + ", ".join(f"{v:.0f}" for v in log.workers.peak.values())
                      + f" MB; load {os.getloadavg()[0]:.1f}", flush=True)

        self.cls.__call__ = call
        return self

    def __exit__(self, *exc):
        self.cls.__call__ = self.call
        return False


def run_fit(model, client, n, draws, n_trial, cv):
    """``validation.fit`` on the store with the client's and the workers' memory watched,
    its accuracy against the Laplace approximation ``cv`` (mode and Hessian from the same
    passes; None: one sums pass at fit's mode). fit's steps are logged as they end."""
    import validation

    watch, workers = RSSWatch(), WorkerWatch(client)
    pids_before = client.run(os.getpid)
    t = time.perf_counter()
    try:
        with _steps_logged(t, watch, workers):
            idata = validation.fit(model, tolerance=0.01, draws=draws, n_trial=n_trial, rng=1,
                                   executor=client)
    finally:
        samples = watch.stop()
        worker_peak = workers.stop()
    seconds = time.perf_counter() - t
    restarted = client.run(os.getpid) != pids_before
    post = idata.posterior
    theta = post["theta"].values.reshape(-1, D + 1)
    sums_seconds = None
    if cv is None:      # the Laplace approximation at fit's own mode: one sums pass
        from samplers import ControlVariates

        t = time.perf_counter()
        cv = ControlVariates(model, center=np.asarray(post.attrs["center"]), executor=client)
        sums_seconds = time.perf_counter() - t
        print(f"  sums pass at fit's mode (the Laplace approximation's Hessian): "
              f"{sums_seconds:.1f} s, {1e9 * sums_seconds / n:.0f} ns/row", flush=True)
    sd = np.sqrt(np.diag(cv.laplace_covariance()))
    off = np.abs(theta.mean(axis=0) - cv.center.theta) / sd
    ess_mean = _ess_mean(post["theta"].values)
    out = {
        "rows": n, "seconds": seconds, "route": post.attrs["route"],
        "timings": post.attrs["timings"], "rows_realised": post.attrs["rows_realised"],
        "rows_predicted": post.attrs["rows_predicted"],
        "heavy_rows": post.attrs["heavy_rows"],
        "max_mean_offset_in_laplace_sd": float(off.max()),
        "mean_offset_in_laplace_sd": off.tolist(),
        "monte_carlo_se_in_laplace_sd": (1.0 / np.sqrt(ess_mean)).tolist(),
        "max_sd_ratio": float(np.max(theta.std(axis=0) / sd)),
        "min_sd_ratio": float(np.min(theta.std(axis=0) / sd)),
        "ess_bulk": post.attrs["ess_bulk"], "draws": draws,
        "client_rss_mb_peak_per_step": peak_per_step(samples, post.attrs["timings"]),
        "client_rss_mb_peak": max(r for _, r in samples),
        "workers_rss_mb_peak_sampled": worker_peak, "workers_restarted": bool(restarted),
        "sums_pass_seconds": sums_seconds}
    print(f"fit on the {n:.0e}-row store: {seconds:.0f} s, route {out['route']}, "
          f"{out['rows_realised']:.1f} rows per step (predicted {out['rows_predicted']:.1f}); "
          f"posterior mean within {off.max():.3f} Laplace sds of the mode (Monte Carlo se "
          f"{np.max(out['monte_carlo_se_in_laplace_sd']):.3f}); sd ratio "
          f"{out['min_sd_ratio']:.3f}..{out['max_sd_ratio']:.3f}; ESS {out['ess_bulk']:.0f}",
          flush=True)
    print("  steps (s): " + ", ".join(f"{k} {v:.1f}" for k, v in out["timings"].items()))
    print("  workers' RSS peak, sampled every 2 s (MB): " + ", ".join(
        f"{v:.0f}" for v in worker_peak.values())
          + ("; a worker was restarted during fit" if restarted else "; no worker restarted"))
    print("  client RSS peak per step (MB): " + ", ".join(
        f"{k} {v:.0f}" for k, v in out["client_rss_mb_peak_per_step"].items()), flush=True)
    return out


def _ess_mean(draws):
    """Bulk ESS of each coordinate's mean (chains, draws, d)."""
    import arviz

    return np.array([float(arviz.ess(draws[:, :, j], method="bulk"))
                     for j in range(draws.shape[2])])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, nargs="+", default=[1e7, 1e8],
                        help="store sizes whose passes are timed on the cluster")
    parser.add_argument("--fit-rows", type=float, nargs="*", default=None,
                        help="sizes to run validation.fit on (default: the largest of --rows)")
    parser.add_argument("--memory-rows", type=float, default=None,
                        help="size of the in-memory comparison (default: the smallest of "
                             "--rows; 0 for none)")
    parser.add_argument("--pairs", type=int, nargs="+", default=[N_PAIRS],
                        help="trial pairs timed at each size of --rows (one number: all)")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/austerity-scale"))
    parser.add_argument("--fit-draws", type=int, default=500)
    parser.add_argument("--chain-steps", type=int, default=300)
    parser.add_argument("--no-fit", action="store_true")
    parser.add_argument("--fit-only", action="store_true",
                        help="skip the timed passes of --rows (the kernels are still compiled "
                             "first); the Laplace approximation is then one sums pass at "
                             "fit's mode")
    parser.add_argument("--checks-on-cluster", action="store_true",
                        help="run the model's data checks on the cluster (executor=)")
    parser.add_argument("--heavy-rows", action="store_true",
                        help="time samplers.heavy_rows' pass on the cluster at each size")
    parser.add_argument("--out", default="scale_out")
    args = parser.parse_args(argv)
    sizes = [] if args.fit_only else sorted(int(n) for n in args.rows)
    fit_sizes = ([] if args.no_fit else [max(int(n) for n in args.rows)] if args.fit_rows is None
                 else sorted(int(n) for n in args.fit_rows))
    small = (sizes[0] if sizes else 0) if args.memory_rows is None else int(args.memory_rows)
    pairs = dict(zip(sizes, args.pairs * len(sizes) if len(args.pairs) == 1 else args.pairs))

    import distributed

    from samplers import GaussianPrior, LogisticRegression
    from samplers.sources import open_store

    load0 = os.getloadavg()
    print(f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} on {os.cpu_count()} cores",
          flush=True)
    paths = {n: ensure_store(args.store_dir, n) for n in sorted(set(sizes + fit_sizes))}
    prior = GaussianPrior(0.0, 10.0)
    result = {"d": D + 1, "dtype": "float32", "sizes": sizes, "cluster": {}, "memory": {},
              "fit_sizes": fit_sizes, "load_before": load0, "fit": {}, "load": {}}
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       memory_limit="2GB", dashboard_address=None)
    client = distributed.Client(cluster)
    cvs = {}
    try:
        warm_up(client)
        print("passes through a LocalCluster of 2 workers (1 thread, 2 GB each) on the store:")
        for n in sizes:
            X, y = open_store(paths[n])
            t = time.perf_counter()
            model = LogisticRegression(X, y, prior=prior)      # the data checks: local
            checks_s = time.perf_counter() - t
            print(f"  N = {n:.0e}: the model's data checks (NaN/inf, the shards' checksums; "
                  f"on this process) {checks_s:.1f} s", flush=True)
            result["load"][f"passes_{n}"] = os.getloadavg()[0]
            cvs[n], result["cluster"][str(n)] = time_passes(model, client, f"N = {n:.0e} store",
                                                             n, pairs[n])
            result["cluster"][str(n)]["data_checks_seconds"] = checks_s
            if args.heavy_rows:
                from samplers import heavy_rows

                t = time.perf_counter()
                heavy = heavy_rows(cvs[n], executor=client)
                result["cluster"][str(n)]["heavy_rows_seconds"] = time.perf_counter() - t
                result["cluster"][str(n)]["heavy_rows"] = int(heavy.size)
                print(f"  heavy rows on the cluster: {heavy.size} in "
                      f"{time.perf_counter() - t:.1f} s", flush=True)
            if args.chain_steps:
                chain_steps(cvs[n], 5)
                sec, rows = chain_steps(cvs[n], args.chain_steps)
                result["cluster"][str(n)]["chain_step_seconds"] = sec
                result["cluster"][str(n)]["chain_rows_per_step"] = rows
                print(f"  chain on the store (Austere + control variates, m = 100): "
                      f"{1e6 * sec:.0f} us and {rows:.1f} rows per step", flush=True)
            result["cluster"][str(n)]["client_peak_rss_mb"] = peak_mb()
            result["cluster"][str(n)]["workers_peak_rss_mb"] = client.run(_worker_peak_mb)
        result["peak_rss_mb"] = {"client_after_cluster_passes": peak_mb(),
                                 "workers": client.run(_worker_peak_mb)}
        print(f"  peak RSS: client {peak_mb():.0f} MB, workers "
              + ", ".join(f"{v:.0f} MB" for v in result["peak_rss_mb"]["workers"].values()),
              flush=True)
        for n in fit_sizes:
            X, y = open_store(paths[n])
            t = time.perf_counter()
            model = LogisticRegression(X, y, prior=prior,
                                       executor=client if args.checks_on_cluster else None)
            print(f"fit at N = {n:.0e}: the model's data checks "
                  f"{time.perf_counter() - t:.1f} s"
                  + (" (on the cluster)" if args.checks_on_cluster else " (here)"), flush=True)
            result["load"][f"fit_{n}_before"] = os.getloadavg()
            result["fit"][str(n)] = run_fit(model, client, n, args.fit_draws, 10, cvs.get(n))
            result["load"][f"fit_{n}_after"] = os.getloadavg()
            print(f"  load average during fit: {result['load'][f'fit_{n}_after'][1]:.1f} "
                  "(5 min)", flush=True)
            result["peak_rss_mb"][f"client_after_fit_{n}"] = peak_mb()
            result["peak_rss_mb"][f"workers_after_fit_{n}"] = client.run(_worker_peak_mb)
            print(f"  peak RSS after fit: client {peak_mb():.0f} MB, workers " + ", ".join(
                f"{v:.0f} MB" for v in result["peak_rss_mb"][f"workers_after_fit_{n}"].values()),
                flush=True)
        if small and small in cvs:
            step_store = result["cluster"][str(small)].get("chain_step_seconds")
            rows_store = result["cluster"][str(small)].get("chain_rows_per_step")
    finally:
        client.close()
        cluster.close()

    if small and small in cvs:
        print(f"the same passes in memory at N = {small:.0e} (numpy float32, 2 local threads):")
        X, y = rows_in_memory(small)
        model = LogisticRegression(X, y, prior=prior)
        cv_mem, result["memory"][str(small)] = time_passes(
            model, None, f"N = {small:.0e} memory", small, pairs[small])
        same = bool(np.array_equal(cv_mem.center.theta, cvs[small].center.theta)
                    and np.array_equal(cv_mem.center.hess, cvs[small].center.hess))
        chain_steps(cv_mem, 5)
        step_mem, rows_mem = chain_steps(cv_mem, args.chain_steps)
        c, m = result["cluster"][str(small)], result["memory"][str(small)]
        result["ratios_cluster_over_memory"] = {
            k: c[k] / m[k] for k in ("mode_ns_per_row_pass", "sums_ns_per_row",
                                     "trial_ns_per_row")}
        result["center_equal_bit_for_bit"] = same
        result["chain_step"] = {"store_seconds": step_store, "memory_seconds": step_mem,
                                "ratio": step_store / step_mem,
                                "rows_per_step_store": rows_store,
                                "rows_per_step_memory": rows_mem, "rows": small}
        print("ratios cluster (store) / memory at N = "
              f"{small:.0e}: " + ", ".join(f"{k} {v:.2f}x"
                                           for k, v in result["ratios_cluster_over_memory"].items())
              + f"; center equal bit for bit: {same}")
        print(f"chain step: store {1e6 * step_store:.0f} us vs memory {1e6 * step_mem:.0f} us "
              f"({step_store / step_mem:.1f}x) at {rows_store:.0f} / {rows_mem:.0f} rows per step")
    result["load_after"] = os.getloadavg()
    print(f"load average after: {result['load_after'][0]:.2f}")
    path = write(args.out, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
