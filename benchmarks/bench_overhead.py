"""Per-step overhead of the chain loops: microseconds per step at fixed small rows per step.

A subsampling chain that reads ~100 rows per step should cost about what those rows cost
(~0.1 us each for a logistic regression with d = 11); whatever a step costs beyond that is the
loop's overhead (Python calls, small allocations, the Generator handed to compiled code).
This script times one chain per sampler on built-in models and prints, for each, the
microseconds per step, the rows read per step and the time those rows alone take (the model's
compiled batch kernel on as many random rows), so that overhead = total - rows.

Samplers, on a logistic regression (d = 11) started at its mode, with settings that fix the
rows per step (they measure the loop, not the tests' statistical efficiency): exact MH (all
rows of a small model, --exact-N), the Austere t-test with ``epsilon = 0.5`` and normal
critical values (critical value 0: it decides after its first ``m`` rows), the minibatch
Barker test (``delta=None``, a random-walk step small enough that ``s^2 < 1`` after the first
``m`` rows), the confidence sampler (``batch_size = m``, a step small enough for the bound to
separate mu0 after about ``m`` rows), the exact minibatch TunaMH test (a random-walk step
and ``chi`` chosen so that the Poisson batch's mean ``chi (C phi)^2 + C phi`` is about ``m``:
``C phi = chi (C phi)^2 = m / 2``), the penalty test (``PenaltyTest(m)``: one batch of
``m`` rows per decision), FlyMC (MAP-tuned Jaakkola-Jordan bound, implicit
z-updates with ``q_db = 0.001``, random-walk theta-updates; about 100 bright rows) and SGLD
(``batch_size = m``).

Control variates (``--cv-N`` rows, default 10^6, logistic regression d = 10 + intercept from
``_common.cv_logistic_dataset``, ``ControlVariates(model)`` at the mode, order 2): the same
Austere test with ``RandomWalk.from_laplace(cv)`` ("cv-austere-rw") and with
``Independence.from_laplace(cv)`` ("cv-austere-indep"), and the penalty test with the walk
("cv-penalty-rw"), started at the mode. Their steps
add the proxy's total P (O(d^2)) per decision to the rows; "row us" is the wrapper's row
kernel on as many random rows.

The "row us" column is an estimate of the rows' own cost: the model's compiled batch kernel
on as many random rows (for the exact test: the same kernel on consecutive rows, which
overstates its vectorised full pass, so its "overhead" column is not meaningful). With ``--loops python,compiled``
(the default once the compiled loop exists) each sampler runs on both paths of ``sample`` /
``firefly`` (``compiled=False`` is the Python reference loop) and the ratio is printed: both
columns come from the same run.

SGLD is also timed beside BlackJAX's SGLD (``blackjax.sgld``) run in ``jax.lax.scan`` (one
jitted call for the whole chain) on the same data, same batch size and step size; BlackJAX
draws its minibatch rows with replacement (``jax.random.randint``), the toolkit without.
Needs the optional ``bench`` extra (jax, blackjax); skipped with a note without it.

Run:  python benchmarks/bench_overhead.py [--steps 20000] [--rows 100] [--N 100000]
          [--cv-N 1000000] [--only austere,cv-austere-rw,cv-austere-indep] [--out overhead]
Writes benchmarks/results/<out>.json (machine load included: timings on a shared machine
compare within one run).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import cv_logistic_dataset, write  # noqa: E402

from samplers import (  # noqa: E402
    SGLD,
    AcceptAll,
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ControlVariates,
    ExactTest,
    GaussianPrior,
    ImplicitZ,
    Independence,
    JaakkolaJordanBound,
    LogisticRegression,
    RandomWalk,
    TunaMHTest,
    check_model,
    firefly,
    map_estimate,
    sample,
)
from samplers.mhtests.penalty import PenaltyTest  # noqa: E402
from samplers.datasets import logistic_regression  # noqa: E402

D = 10  # covariates; plus an intercept column: d = 11


def make_model(N, seed=0):
    X, y, _ = logistic_regression(N, D, rng=seed)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0))
    return model, map_estimate(model, rng=seed)


def has_loop_switch() -> bool:
    """Whether ``sample`` has the ``compiled`` switch (the compiled block loop)."""
    return "compiled" in inspect.signature(sample).parameters


def timed(run, steps, repeats):
    """Median seconds per step of ``run(steps, seed)`` over ``repeats`` runs (after a warm-up
    run that compiles), and the last chain."""
    run(min(steps, 200), 0)
    times, chain = [], None
    for r in range(repeats):
        t0 = time.perf_counter()
        chain = run(steps, 1 + r)
        times.append((time.perf_counter() - t0) / steps)
    return float(np.median(times)), chain


def row_seconds(model, rows, kind, rng):
    """Seconds per row of the model's compiled batch kernel: ``kind`` "ratio" (l_i of random
    rows), "grad" (row gradients of random rows) or "full" (l_i of consecutive rows), through
    the model view's unchecked batch functions, on at least 20,000 rows per call."""
    theta = np.zeros(model.dim)
    theta_new = np.full(model.dim, 1e-3)
    k = max(int(round(rows)), 20_000)
    if kind == "full":   # consecutive rows, all N of them repeated up to k
        idx = np.tile(np.arange(model.N, dtype=np.intp), -(-k // model.N))
    else:
        idx = np.sort(rng.choice(model.N, size=min(k, model.N), replace=False)).astype(np.intp)
        rng.shuffle(idx)
    view, _ = check_model(model, theta)   # the unchecked batch functions the samplers call
    call = ((lambda: view.grad(theta, idx)) if kind == "grad"
            else (lambda: view.ratio(theta, theta_new, idx)))
    call()
    reps = max(1, 200_000 // idx.shape[0])
    t0 = time.perf_counter()
    for _ in range(reps):
        call()
    return (time.perf_counter() - t0) / (reps * idx.shape[0])


def samplers(model, small, theta_mode, small_mode, bound, rows, sgld_step):
    """name -> (chain runner(steps, seed, **loop), the model it reads)."""
    walk = RandomWalk(1e-5)      # Barker: s^2 < 1 after the first 100 rows
    tiny = RandomWalk(3e-8)      # confidence: the bound separates mu0 within ~100 rows
    fly_walk = RandomWalk(0.004)
    # TunaMH: E[B] = chi (C phi)^2 + C phi = rows with C phi = rows / 2, phi = |step| (a
    # random walk of scale s in d dimensions has |step| about s sqrt(d))
    tuna = TunaMHTest(chi=2.0 / rows)
    tuna_walk = RandomWalk(0.5 * rows / tuna.prepare(model).C / np.sqrt(model.dim))
    return {
        "exact": (lambda n, s, **kw: sample(small, ExactTest(), RandomWalk(0.05), small_mode,
                                            n, rng=s, progress=False, **kw), small),
        "austere": (lambda n, s, **kw: sample(model, AustereTest(m=rows, epsilon=0.5, threshold="normal"), walk,
                                              theta_mode, n, rng=s, progress=False, **kw), model),
        "barker": (lambda n, s, **kw: sample(model, BarkerTest(m=rows, delta=None), walk,
                                             theta_mode, n, rng=s, progress=False, **kw), model),
        "confidence": (lambda n, s, **kw: sample(
            model, ConfidenceTest(delta=0.1, batch_size=rows, bound="bernstein-serfling"),
            tiny, theta_mode, n, rng=s, progress=False, **kw), model),
        "tunamh": (lambda n, s, **kw: sample(model, tuna, tuna_walk, theta_mode, n, rng=s,
                                             progress=False, **kw), model),
        "penalty": (lambda n, s, **kw: sample(model, PenaltyTest(m=rows), walk, theta_mode, n,
                                              rng=s, progress=False, **kw), model),
        "flymc": (lambda n, s, **kw: firefly(model, bound, fly_walk, theta_mode, n, rng=s,
                                             z_update=ImplicitZ(q_db=0.001), progress=False,
                                             **kw), model),
        "sgld": (lambda n, s, **kw: sample(model, AcceptAll(), SGLD(sgld_step, batch_size=rows),
                                           theta_mode, n, rng=s, progress=False, **kw), model),
    }


def cv_samplers(N, rows):
    """The control-variate chains: name -> (runner, model); the wrapper is built once, by
    its chunked Newton pass (not timed)."""
    X, y = cv_logistic_dataset(N, np.random.default_rng(5), d=D)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    test = AustereTest(m=rows, epsilon=0.5, threshold="normal")
    walk, indep = RandomWalk.from_laplace(cv), Independence.from_laplace(cv)
    mode = cv.center.theta
    return {
        "cv-austere-rw": (lambda n, s, **kw: sample(cv, test, walk, mode, n, rng=s,
                                                    progress=False, **kw), cv),
        "cv-austere-indep": (lambda n, s, **kw: sample(cv, test, indep, mode, n, rng=s,
                                                       progress=False, **kw), cv),
        "cv-penalty-rw": (lambda n, s, **kw: sample(cv, PenaltyTest(m=rows), walk, mode, n,
                                                    rng=s, progress=False, **kw), cv),
    }


def rows_per_step(name, chain):
    if name == "sgld":
        return float(np.mean(chain.stats["n_grad"]))
    return float(np.mean(chain.stats["n_used"]))


def blackjax_sgld(model, rows, step_size, steps, repeats):
    """Seconds per step of BlackJAX's SGLD in one ``lax.scan`` (or None and a note)."""
    try:
        import blackjax
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, "jax/blackjax not installed (pip install .[bench])"
    jax.config.update("jax_enable_x64", True)
    X = jnp.asarray(model.X)
    s = jnp.asarray(2.0 * model.y - 1.0)
    N = model.N
    prior_var = 25.0

    def logprior(theta):
        return -0.5 * jnp.sum(theta ** 2) / prior_var

    def loglik(theta, batch):
        x, sign = batch
        return jax.nn.log_sigmoid(sign * (x @ theta))

    grad_fn = blackjax.sgmcmc.gradients.grad_estimator(
        logprior, lambda th, b: jnp.sum(loglik(th, b)), N)
    sgld = blackjax.sgld(grad_fn)

    @jax.jit
    def chain(key, theta0):
        def body(theta, key):
            k_rows, k_step = jax.random.split(key)
            idx = jax.random.randint(k_rows, (rows,), 0, N)
            theta = sgld.step(k_step, theta, (X[idx], s[idx]), step_size)
            return theta, theta
        return jax.lax.scan(body, theta0, jax.random.split(key, steps))[1]

    theta0 = jnp.zeros(model.dim)
    chain(jax.random.PRNGKey(0), theta0).block_until_ready()   # compile
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        chain(jax.random.PRNGKey(1 + r), theta0).block_until_ready()
        times.append((time.perf_counter() - t0) / steps)
    return float(np.median(times)), f"jax {jax.__version__}, blackjax {blackjax.__version__}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20_000, help="steps per timed chain")
    ap.add_argument("--python-steps", type=int, default=3000,
                    help="steps per timed chain on the Python loop")
    ap.add_argument("--rows", type=int, default=100, help="rows per step (batch sizes)")
    ap.add_argument("--N", type=int, default=100_000, help="rows of the subsampled model")
    ap.add_argument("--exact-N", type=int, default=1000, help="rows of the exact test's model")
    ap.add_argument("--cv-N", type=int, default=1_000_000,
                    help="rows of the control-variate model (cv-* samplers)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated samplers to run")
    ap.add_argument("--out", default="overhead")
    args = ap.parse_args(argv)

    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    model, theta_mode = make_model(args.N)
    small, small_mode = make_model(args.exact_N, seed=1)
    bound = JaakkolaJordanBound.map_tuned(model, theta_mode)
    sgld_step = 1e-5 * 1e5 / args.N
    runners = samplers(model, small, theta_mode, small_mode, bound, args.rows, sgld_step)
    only = args.only.split(",") if args.only else []
    if not only or any(n.startswith("cv-") for n in only):
        runners.update(cv_samplers(args.cv_N, args.rows))
    wanted = [n for n in runners if not only or n in only]
    # "python": sample(compiled=False), the reference loop; "compiled": the compiled block loop
    # (a sampler without one is timed with compiled=None, i.e. the Python loop, "auto(py)")
    loops = ["python", "compiled"] if has_loop_switch() else ["current"]
    print(f"N = {args.N} (exact: {args.exact_N}, cv: {args.cv_N}), d = {model.dim}, "
          f"rows per step = {args.rows}, "
          f"loops = {loops}, load average {load_before:.2f} on {os.cpu_count()} cores")
    header = (f"{'sampler':<16} {'loop':<9} {'us/step':>9} {'rows/step':>10} {'row us':>8} "
              f"{'overhead us':>12}")
    print(header)
    table = {}
    for name in wanted:
        run, its_model = runners[name]
        table[name] = {}
        for loop in loops:
            kw = {} if loop == "current" else {"compiled": loop == "compiled"}
            has_block = True
            if loop == "compiled":
                try:
                    run(2, 0, compiled=True)
                except TypeError:   # no compiled loop for this sampler: sample() picks Python
                    has_block, kw = False, {"compiled": None}
            steps = args.python_steps if loop in ("python", "current") else args.steps
            if name == "exact":
                steps = max(steps // 10, 200)
            per_step, chain = timed(lambda n, s: run(n, s, **kw), steps, args.repeats)
            rows = rows_per_step(name, chain)
            kind = {"exact": "full", "sgld": "grad"}.get(name, "ratio")
            per_row = row_seconds(its_model, rows, kind, rng)
            row_us = 1e6 * rows * per_row
            table[name][loop] = {"us_per_step": 1e6 * per_step, "rows_per_step": rows,
                                 "row_us_per_step": row_us,
                                 "overhead_us_per_step": 1e6 * per_step - row_us,
                                 "steps": steps, "compiled_loop": loop == "compiled" and has_block}
            shown = loop if has_block else "auto(py)"
            print(f"{name:<16} {shown:<9} {1e6 * per_step:9.2f} {rows:10.1f} {row_us:8.2f} "
                  f"{1e6 * per_step - row_us:12.2f}", flush=True)
        if "python" in table[name] and "compiled" in table[name]:
            ratio = table[name]["python"]["us_per_step"] / table[name]["compiled"]["us_per_step"]
            table[name]["speedup"] = ratio
            print(f"{'':<16} {'speedup':<9} {ratio:9.1f}x")

    peer = None
    if "sgld" in wanted:
        bj, note = blackjax_sgld(model, args.rows, sgld_step, args.steps, args.repeats)
        if bj is None:
            print(f"BlackJAX SGLD: skipped ({note})")
        else:
            ours = table["sgld"][loops[-1]]["us_per_step"]
            peer = {"us_per_step": 1e6 * bj, "note": note,
                    "ours_over_blackjax": ours / (1e6 * bj)}
            print(f"{'sgld':<16} {'blackjax':<9} {1e6 * bj:9.2f}   (lax.scan, rows with "
                  f"replacement; ours/{'blackjax'} = {ours / (1e6 * bj):.2f}, {note})")
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.2f} before, {load_after:.2f} after")
    write(args.out, {
        "settings": {"N": args.N, "exact_N": args.exact_N, "cv_N": args.cv_N, "d": model.dim, "rows": args.rows,
                     "steps": args.steps, "python_steps": args.python_steps,
                     "repeats": args.repeats, "sgld_step": sgld_step, "loops": loops},
        "load_average": {"before": load_before, "after": load_after},
        "samplers": table,
        "blackjax_sgld": peer,
    })


if __name__ == "__main__":
    main()
