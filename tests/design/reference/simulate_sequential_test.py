"""Monte Carlo reference for the error and data use of the *real* sequential t-test.

This simulates Algorithm 1 of Korattikara, Chen & Welling (2014) as a sampler would run it,
without the Gaussian-random-walk approximation behind ``design.sequential_error``:

* the population l_1..l_N is Gaussian and standardised *exactly* to mean mu and population
  standard deviation sigma = 1 (ddof = 0), with mu0 = 0, so mu_std = mu sqrt(N - 1) exactly;
* minibatches of m are drawn without replacement and nested (n_j = min(j m, N));
* at each stage the test uses the sample mean, the sample standard deviation (ddof = 1), the
  finite-population correction s = s_l / sqrt(n) * sqrt(1 - (n - 1)/(N - 1)), and stops when
  |t| exceeds the threshold (Student-t with n - 1 dof, or normal); at n = N the decision is
  exact.

How this avoids O(N) work per simulated test at N = 10^6: a uniformly random order of a
population of i.i.d. N(0, 1) values is again i.i.d., and the test only needs the sums and
within-sums of squares of the consecutive minibatches, plus the population totals (for the
exact standardisation). The population totals T ~ N(0, N) and SS ~ chi2_{N-1} are drawn
first; each minibatch of b of the R remaining values is then revealed conditionally on the
remaining totals: its sum is b T/R + Y sqrt(b (R - b)/R) and the remaining sum of squares
splits as (within-batch, Y^2, rest) in Dirichlet((b-1)/2, 1/2, (R-b-1)/2) proportions, with
Y standard normal. This is exact, costs O(1) per stage, and touches only the stages used.

Conventions: the decision is wrong if the test stops early on the side opposite to the sign
of mu_std; for mu_std = 0 an early stop below counts as wrong (the limit mu_std -> 0+), the
same convention as ``design.sequential_error``.

Run ``python simulate_sequential_test.py`` to regenerate ``simulate_sequential_test.json``
(about 13 minutes on 2 shared cores); ``--quick`` runs N = 10^4 only; ``--compare`` prints
the stored run beside ``design.sequential_error`` (standardised differences z = (MC - DP)
/ SE for the DP with Student-t and with normal thresholds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import stats

from design._lib.jit import jit

GRID_N = (10_000, 1_000_000)
GRID_M = (100, 500)
GRID_EPS = (0.01, 0.05, 0.1)
GRID_MU = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0)
GRID_THRESHOLD = ("t", "normal")
SEED = 20140621  # ICML 2014


@jit
def _chi2(rng, dof):
    if dof <= 0:
        return 0.0
    return 2.0 * rng.standard_gamma(0.5 * dof)


@jit
def _simulate_kernel(rng, N, m, q, mu_std, n_sim, known_sigma):
    """Run ``n_sim`` sequential tests; return (n_wrong, sum pi, sum pi^2, sum j, sum j^2).

    With ``known_sigma`` the statistic uses the population sd instead of the sample sd: the
    Gaussian-random-walk model of the dynamic programme, used to validate this simulator.
    """
    mu_l = mu_std / math.sqrt(N - 1.0)
    n_wrong = 0
    s_pi = 0.0
    s_pi2 = 0.0
    s_j = 0.0
    s_j2 = 0.0
    for _ in range(n_sim):
        T = math.sqrt(N) * rng.standard_normal()
        SS = _chi2(rng, N - 1)
        zbar = T / N
        sdz = math.sqrt(SS / N)
        R = N
        t_rem = T
        ss_rem = SS
        n = 0
        mean_s = 0.0
        ss_s = 0.0
        j = 0
        wrong = False
        while True:
            j += 1
            b = m if m < R else R
            if b == R:
                sum_b = t_rem
                ss_b = ss_rem
                ss_next = 0.0
            else:
                x1 = _chi2(rng, b - 1)
                y = rng.standard_normal()
                x3 = _chi2(rng, R - b - 1)
                scale = ss_rem / (x1 + y * y + x3)
                ss_b = x1 * scale
                ss_next = x3 * scale
                sum_b = b * t_rem / R + y * math.sqrt(scale) * math.sqrt(b * (R - b) / R)
            a = sum_b / b
            if n == 0:
                mean_s = a
                ss_s = ss_b
            else:
                ss_s += ss_b + n * b / (n + b) * (mean_s - a) ** 2
                mean_s = (n * mean_s + b * a) / (n + b)
            n += b
            R -= b
            t_rem -= sum_b
            ss_rem = ss_next
            if R == 0:
                break  # n = N: the exact decision, always correct
            lbar = mu_l + (mean_s - zbar) / sdz
            if known_sigma:
                s = math.sqrt((N - n) / (n * (N - 1.0)))
            else:
                var_s = ss_s / ((n - 1) * sdz * sdz)
                s = math.sqrt(var_s / n * (1.0 - (n - 1.0) / (N - 1.0)))
            t = lbar / s
            if abs(t) > q[j - 1]:
                wrong = (t < 0.0) if mu_std >= 0.0 else (t > 0.0)
                break
        pi = n / N
        n_wrong += wrong
        s_pi += pi
        s_pi2 += pi * pi
        s_j += j
        s_j2 += j * j
    return n_wrong, s_pi, s_pi2, s_j, s_j2


def stage_thresholds(N, m, epsilon, threshold):
    """Threshold on |t| at each stage n_j = j m < N (the last stage is exact)."""
    n = np.arange(1, -(-N // m)) * m
    if threshold == "normal":
        return np.full(n.shape, stats.norm.isf(epsilon))
    return stats.t.isf(epsilon, n - 1)


def simulate(N, m, epsilon, mu_std, threshold, n_sim, rng, known_sigma=False):
    """Monte Carlo estimate of E, pi-bar and the expected number of stages, with SEs.

    Returns a dict with keys E, E_se, pibar, pibar_se, stages, stages_se, n_sim.
    """
    rng = np.random.default_rng(rng)
    q = stage_thresholds(N, m, epsilon, threshold)
    nw, s_pi, s_pi2, s_j, s_j2 = _simulate_kernel(rng, N, m, q, float(mu_std), int(n_sim),
                                                 bool(known_sigma))
    E = nw / n_sim
    pibar = s_pi / n_sim
    stages = s_j / n_sim
    return {
        "E": E,
        "E_se": math.sqrt(max(E * (1 - E), 1.0 / n_sim) / n_sim),
        "pibar": pibar,
        "pibar_se": math.sqrt(max(s_pi2 / n_sim - pibar**2, 0.0) / n_sim),
        "stages": stages,
        "stages_se": math.sqrt(max(s_j2 / n_sim - stages**2, 0.0) / n_sim),
        "n_sim": int(n_sim),
    }


def _cases(quick):
    grid_n = (10_000,) if quick else GRID_N
    for N in grid_n:
        for m in GRID_M:
            for eps in GRID_EPS:
                for thr in GRID_THRESHOLD:
                    for mu in GRID_MU:
                        yield N, m, eps, thr, mu


def compare(path):
    """Print the stored Monte Carlo run beside the dynamic programme."""
    from design import sequential_error

    with open(path) as fh:
        rows = json.load(fh)["rows"]
    print(f"{'N':>8} {'m':>4} {'eps':>5} {'thr':>6} {'mu':>4} | {'E (MC)':>15} "
          f"{'z DP t':>7} {'z DP n':>7} | {'pibar (MC)':>15} {'z DP t':>7} {'z DP n':>7}")
    zs = {"t": [], "normal": []}
    for r in sorted(rows, key=lambda r: (r["N"], r["m"], r["epsilon"], r["threshold"],
                                         r["mu_std"])):
        z = {}
        for thr in ("t", "normal"):
            dp = sequential_error(r["mu_std"], m=r["m"], epsilon=r["epsilon"], N=r["N"],
                                  threshold=thr)
            z[thr] = ((r["E"] - dp.error) / r["E_se"],
                      (r["pibar"] - dp.data_fraction) / r["pibar_se"])
        zs[r["threshold"]].append(z)
        print(f"{r['N']:>8} {r['m']:>4} {r['epsilon']:>5} {r['threshold']:>6} "
              f"{r['mu_std']:>4} | {r['E']:.4f}±{r['E_se']:.4f}  {z['t'][0]:>6.2f} "
              f"{z['normal'][0]:>7.2f} | {r['pibar']:.4f}±{r['pibar_se']:.4f}  "
              f"{z['t'][1]:>6.2f} {z['normal'][1]:>7.2f}")
    for real in ("t", "normal"):
        for dp in (("t", "normal") if real == "t" else ("normal",)):
            a = np.abs([v for z in zs[real] for v in z[dp]])
            print(f"real test with {real} thresholds vs DP with {dp} thresholds: "
                  f"{np.sum(a <= 3)}/{a.size} within 3 SE, max |z| {a.max():.2f}, "
                  f"rms z {np.sqrt(np.mean(a**2)):.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-sim", type=int, default=50_000)
    parser.add_argument("--quick", action="store_true", help="N = 10^4 only")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--compare", action="store_true",
                        help="print the stored run beside the DP and exit")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__),
                                                      "simulate_sequential_test.json"))
    args = parser.parse_args(argv)
    if args.compare:
        compare(args.out)
        return
    cases = list(_cases(args.quick))
    seeds = np.random.SeedSequence(SEED).spawn(len(cases))
    t0 = time.time()

    def run(i):
        N, m, eps, thr, mu = cases[i]
        res = simulate(N, m, eps, mu, thr, args.n_sim, np.random.default_rng(seeds[i]))
        res.update(N=N, m=m, epsilon=eps, threshold=thr, mu_std=mu)
        print(f"{N:>8} {m:>4} {eps:<5} {thr:<6} {mu:>5}: E={res['E']:.4f}"
              f"±{res['E_se']:.4f} pibar={res['pibar']:.4f}±{res['pibar_se']:.4f}",
              flush=True)
        return res

    with ThreadPoolExecutor(args.workers) as pool:
        rows = list(pool.map(run, range(len(cases))))
    out = {
        "description": "Monte Carlo of the real sequential t-test (Korattikara et al. 2014, "
                       "Algorithm 1); see the module docstring of simulate_sequential_test.py",
        "command": "python " + " ".join([os.path.basename(__file__)] + (argv or sys.argv[1:])),
        "seed": SEED,
        "n_sim": args.n_sim,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "runtime_seconds": round(time.time() - t0, 1),
        "rows": rows,
    }
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {len(rows)} rows to {args.out} in {out['runtime_seconds']} s")


if __name__ == "__main__":
    main()
