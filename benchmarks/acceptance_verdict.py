"""Issue 17: the sequential test's error on skewed l_i, predicted and simulated, and the
verdicts of ``clt_check`` in the currency of the design.

1. **Evidence** (``--part evidence``): a logistic regression whose covariates include one with
   skewness ~4.7 and excess kurtosis ~52 (standardized lognormal(0, 0.9)), N = 3e5 (full) or
   3e4 (small). Pairs (theta, theta'): theta from the Laplace approximation of the posterior,
   theta' one random-walk step (covariance 2.38^2 / d times the posterior's, the chain's
   proposal). Per pair, Delta = P(accept) - Pa of the real sequential t-test (Algorithm 1,
   t thresholds) simulated on the real l_i with u integrated out
   (``validation.acceptance_check``) beside the Gaussian and the Edgeworth-corrected
   predictions (``design.acceptance_error(law=...)``): z scores, and how many pairs the
   Gaussian programme misses by more than 3 SE where the corrected one is within 3 SE.
2. **Verdicts** (``--part verdicts``): a design is chosen on each dataset's trial pairs
   (``design.optimize``, Gaussian programme, tolerance ``--tolerance``) and
   ``validation.clt_check(..., design=d)`` judges it on the same pairs (the design's
   promise is the mean over its trial pairs): lognormal(0, 2) data of
   Bardenet et al. (2014) Figure 4 (must FAIL), N(0, 0.1^2) data (must PASS), the skewed
   logistic regression (must PASS); ``design.optimize(..., law="edgeworth")`` beside it.

    python benchmarks/acceptance_verdict.py [--size small|full] [--part evidence|verdicts|all]

Writes ``benchmarks/results/acceptance_verdict_<size>_<part>.json``. At full size each part takes
about 22 minutes on the shared 2-core machine at load average 8-14 (2026-11-23; about 7-10
minutes each at load 2).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402

from design import TrialChain, optimize  # noqa: E402
from samplers import Gaussian, LogisticRegression, laplace_approximation  # noqa: E402
from validation import acceptance_check, clt_check  # noqa: E402

SIZES = {
    "small": dict(N_lr=30_000, N_fig4=20_000, pairs=6, paths=1500, verdict_pairs=6,
                  verdict_paths=1500, n_sim=4000),
    "full": dict(N_lr=300_000, N_fig4=100_000, pairs=16, paths=4000, verdict_pairs=12,
                 verdict_paths=1500, n_sim=20_000),
}


def skewed_logistic(N, rng, d=6):
    """Intercept, one standardized lognormal(0, 0.9) covariate (skewness ~4.7, excess
    kurtosis ~52), d - 2 standard normal ones; labels from the model."""
    x1 = rng.lognormal(0.0, 0.9, N)
    x1 = (x1 - x1.mean()) / x1.std()
    X = np.column_stack([np.ones(N), x1, rng.normal(size=(N, d - 2))])
    beta = np.array([-0.5, 1.0, 0.5, -0.5, 0.25, 0.0])[:d]
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(float)
    return LogisticRegression(X, y)


def logistic_pairs(model, n_pairs, rng):
    """theta ~ Laplace posterior, theta' = theta + one random-walk step (2.38^2 / d)."""
    lap = laplace_approximation(model, rng=rng)
    d = lap.mode.size
    L = np.linalg.cholesky(lap.covariance)
    thetas = lap.mode + (L @ rng.normal(size=(d, n_pairs))).T
    news = thetas + 2.38 / math.sqrt(d) * (L @ rng.normal(size=(d, n_pairs))).T
    return thetas, news


def gaussian_pairs(x, n_pairs, rng):
    """The (mean, log sd) model of Figure 4 near its mode, random walk 2.38^2 / 2 times the
    posterior covariance (as ``validation_fig4.py``)."""
    n = x.shape[0]
    s = float(x.std())
    mode = np.array([float(x.mean()), math.log(s)])
    cov = np.diag([s**2 / n, 1 / (2 * n)])
    L = np.linalg.cholesky(cov)
    thetas = mode + (L @ rng.normal(size=(2, n_pairs))).T
    news = thetas + (2.38 / math.sqrt(2)) * (L @ rng.normal(size=(2, n_pairs))).T
    return Gaussian(x), (thetas, news)


def evidence(size, rng, m, epsilon):
    cfg = SIZES[size]
    model = skewed_logistic(cfg["N_lr"], rng)
    pairs = logistic_pairs(model, cfg["pairs"], rng)
    t0 = time.perf_counter()
    r = acceptance_check(model, pairs, m=m, epsilon=epsilon, tolerance=0.05,
                         n_paths=cfg["paths"], rng=rng)
    took = time.perf_counter() - t0
    print(r)
    miss = np.abs(r.z_gaussian) > 3
    fixed = miss & (np.abs(r.z_edgeworth) <= 3)
    print(f"\npairs the Gaussian DP misses by > 3 SE: {int(miss.sum())}; of those within 3 SE "
          f"under the corrected DP: {int(fixed.sum())}; corrected DP beyond 3 SE anywhere: "
          f"{int((np.abs(r.z_edgeworth) > 3).sum())}  ({took:.0f} s)")
    per_pair = {k: getattr(r, k).tolist() for k in (
        "skewness", "excess_kurtosis", "accept_prob", "delta_simulated", "delta_simulated_se",
        "delta_gaussian", "delta_edgeworth", "z_gaussian", "z_edgeworth")}
    return dict(N=cfg["N_lr"], m=m, epsilon=epsilon, n_paths=cfg["paths"], seconds=took,
                **per_pair,
                gaussian_misses=int(miss.sum()), corrected_within_3se_of_those=int(fixed.sum()),
                corrected_beyond_3se=int((np.abs(r.z_edgeworth) > 3).sum()),
                gaussian_agrees=r.gaussian_agrees, edgeworth_agrees=r.edgeworth_agrees)


def verdict(name, model, trial_pairs, check_pairs, tolerance, cfg, rng, expect):
    trial = TrialChain.from_model(model, *trial_pairs, progress=False)
    d = optimize(trial, tolerance)
    print(f"\n=== {name}: {d!r}")
    t0 = time.perf_counter()
    c = clt_check(model, check_pairs, design=d, n_sim=cfg["n_sim"], search=False,
                  n_paths=cfg["verdict_paths"], rng=rng)
    took = time.perf_counter() - t0
    print(c)
    ok = c.passed == expect
    print(f"verdict {'PASS' if c.passed else 'FAIL'} (expected {'PASS' if expect else 'FAIL'}: "
          f"{'as required' if ok else 'NOT as required'}; KS alone: "
          f"{'pass' if c.ks_passed else 'fail'}), {took:.0f} s")
    a = c.acceptance
    return dict(design=dict(m=d.m, epsilon=d.epsilon, error=d.error, tolerance=d.tolerance),
                passed=c.passed, expected=expect, ks_passed=c.ks_passed,
                mean_abs_simulated=a.mean_abs_simulated, se=a.mean_abs_simulated_se,
                mean_abs_gaussian=a.mean_abs_gaussian, mean_abs_edgeworth=a.mean_abs_edgeworth,
                max_abs_skewness=float(np.abs(a.skewness).max()), seconds=took), trial


def verdicts(size, rng, tolerance):
    cfg = SIZES[size]
    out = {}
    n = cfg["N_fig4"]
    for name, x, expect in (("lognormal(0, 2)", rng.lognormal(0.0, 2.0, n), False),
                            ("normal(0, 0.1^2)", rng.normal(0.0, 0.1, n), True)):
        model, trial_pairs = gaussian_pairs(x, cfg["verdict_pairs"], rng)
        out[name], _ = verdict(name, model, trial_pairs, trial_pairs, tolerance, cfg, rng,
                               expect)
    model = skewed_logistic(cfg["N_lr"], rng)
    trial_pairs = logistic_pairs(model, cfg["verdict_pairs"], rng)
    out["skewed logistic"], trial = verdict("skewed logistic regression", model, trial_pairs,
                                            trial_pairs, tolerance, cfg, rng, True)
    t0 = time.perf_counter()
    corrected = optimize(trial, tolerance, law="edgeworth")
    print(f"\n{corrected}\n({time.perf_counter() - t0:.0f} s)")
    out["skewed logistic"]["law_edgeworth"] = dict(
        m=corrected.m, epsilon=corrected.epsilon, error=corrected.error,
        data_fraction=corrected.data_fraction, gaussian_m=corrected.gaussian_m,
        gaussian_epsilon=corrected.gaussian_epsilon,
        gaussian_corrected_error=corrected.gaussian_corrected_error)
    return out


def main(size, part, seed, tolerance, m, epsilon):
    out = dict(size=size, seed=seed, settings=SIZES[size], tolerance=tolerance)
    if part in ("evidence", "all"):
        out["evidence"] = evidence(size, np.random.default_rng(seed), m, epsilon)
    if part in ("verdicts", "all"):
        out["verdicts"] = verdicts(size, np.random.default_rng(seed + 1), tolerance)
    write(f"acceptance_verdict_{size}_{part}", out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=SIZES, default="small")
    ap.add_argument("--part", choices=("evidence", "verdicts", "all"), default="all")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--epsilon", type=float, default=0.05)
    a = ap.parse_args()
    main(a.size, a.part, a.seed, a.tolerance, a.m, a.epsilon)
