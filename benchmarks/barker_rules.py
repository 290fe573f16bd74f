"""Research (issue 17, part 4): the Barker test's error at fixed Gaussian-mixture pairs
under several stopping rules: Algorithm 1's sequential rule, and a pilot of ``a`` rows that
sizes a *fresh* batch aimed at ``Var(Delta*) = 1 / kappa``, whose ``s^2 >= sigma^2`` case
is either clipped (``X_nc = 0``: no selection) or redrawn at double size (selection again),
or decided with the pilot's variance. Pairs as ``bench_gmm_seita._pair_errors``.

Run:  python benchmarks/barker_rules.py 12 50000          # pairs, decisions per pair
      python benchmarks/barker_rules.py 12 50000 kappa    # the margin sweep of the clip rule
Writes benchmarks/results/barker_rules[_kappa].json.

Rao-Blackwellised: given the batch the decision reads, P(accept | batch) = H(Delta*, tau),
H(x, tau) = P(x + N(0, tau^2) + X_corr > 0), tabulated from the correction table.
"""
import math
import sys
from pathlib import Path

import numba
import numpy as np
from scipy import special, stats

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402
from bench_gmm_seita import Posterior  # noqa: E402

from design import correction  # noqa: E402
from samplers import GaussianMixture  # noqa: E402
from samplers.datasets import gaussian_mixture  # noqa: E402

XG = np.linspace(-40, 40, 8001)
TG = np.linspace(0, 1, 201)


def h_table():
    t = correction.default()
    return np.array([1 - t.convolved_cdf(-XG, tau) for tau in TG])


@numba.njit(cache=True)
def H(tab, x, tau):
    if x <= -40.0:
        return 0.0
    if x >= 40.0:
        return 1.0
    fx = (x + 40.0) / 0.01
    i = min(int(fx), 7999)
    wx = fx - i
    ft = tau / 0.005
    j = min(int(ft), 199)
    wt = ft - j
    return ((1 - wt) * ((1 - wx) * tab[j, i] + wx * tab[j, i + 1])
            + wt * ((1 - wx) * tab[j + 1, i] + wx * tab[j + 1, i + 1]))


@numba.njit(cache=True)
def batch(l, perm, b):
    n = l.shape[0]
    s = 0.0
    for i in range(b):
        j = i + int(np.random.random() * (n - i))
        perm[i], perm[j] = perm[j], perm[i]
        s += l[perm[i]]
    mean = s / b
    m2 = 0.0
    for i in range(b):
        d = l[perm[i]] - mean
        m2 += d * d
    return mean, m2


@numba.njit(cache=True)
def run(l, c, tab, rule, m, a, kappa, reps, seed):
    """rule 0: sequential (Algorithm 1, variance only); 1: pilot of a rows sizes a fresh
    batch, fallback clip; 2: same, fallback fresh doubled batch; 3: pilot variance used for
    the top-up (no own variance)."""
    np.random.seed(seed)
    N = l.shape[0]
    perm = np.arange(N)
    out = np.empty(reps)
    rows = np.empty(reps)
    fails = 0
    for r in range(reps):
        if rule == 0:
            n = 0
            s = 0.0
            while True:
                n += m
                # sequential: merge stage into running sums (simple: recompute from perm)
                tot = 0.0
                for i in range(n - m, n):
                    j = i + int(np.random.random() * (N - i))
                    perm[i], perm[j] = perm[j], perm[i]
                tot = 0.0
                for i in range(n):
                    tot += l[perm[i]]
                mean = tot / n
                m2 = 0.0
                for i in range(n):
                    d = l[perm[i]] - mean
                    m2 += d * d
                s2 = N * N * m2 / (n - 1) / n * (1 - n / N)
                if s2 < 1.0:
                    break
            out[r] = H(tab, N * mean + c, math.sqrt(1 - s2))
            rows[r] = n
            continue
        pm, pm2 = batch(l, perm, a)
        v = pm2 / (a - 1)
        # smallest b with N^2 v (1/b - 1/N) <= 1/kappa
        b = int(math.ceil(N * N * v / (1.0 / kappa + N * v)))
        b = max(b, a)
        used = a
        while True:
            mean, m2 = batch(l, perm, b)
            used += b
            s2 = N * N * m2 / (b - 1) / b * (1 - b / N)
            if rule == 3:
                s2 = N * N * v / b * (1 - b / N)
            if s2 < 1.0:
                out[r] = H(tab, N * mean + c, math.sqrt(1 - s2))
                break
            fails += 1
            if rule == 1:
                out[r] = H(tab, N * mean + c, 0.0)
                break
            b = 2 * b
        rows[r] = used
    return out, rows, fails


def main(n_pairs=12, reps=200_000, rules=None):
    rng = np.random.default_rng(2017)
    x = gaussian_mixture(1_000_000, rng=rng)
    model = GaussianMixture(x, temperature=10_000.0)
    post = Posterior(model, x)
    tab = h_table()
    thetas = post.chain(rng.spawn(1)[0], 500 * n_pairs, 0.15, [0.5, 0.0], True)[::500]
    rules = rules or {"seq": (0, 50, 0, 0), "pilot50 k1.3 clip": (1, 50, 50, 1.3),
             "pilot50 k1.3 dbl": (2, 50, 50, 1.3), "pilot30 k1.5 dbl": (2, 50, 30, 1.5),
             "pilot50 k1.3 pv": (3, 50, 50, 1.3)}
    tot = {k: [] for k in rules}
    for theta in thetas:
        theta_new = theta + 0.15 * rng.standard_normal(2)
        l = model.loglik_ratio(theta, theta_new, np.arange(model.N))
        c = float(model.logprior(theta_new) - model.logprior(theta))
        delta = float(l.sum()) + c
        S = special.expit(delta)
        line = f"D {delta:+6.2f} sk {stats.skew(l):+5.2f} N2var {model.N**2 * l.var():6.0f} |"
        for k, (rule, m, a, kap) in rules.items():
            p, rows, fails = run(l, c, tab, rule, m, a, kap, reps, int(rng.integers(2**31)))
            err, se = p.mean() - S, p.std() / math.sqrt(reps)
            tot[k].append((err, se, rows.mean()))
            line += f" {k}: {err:+.4f}({se:.4f}) b{rows.mean():4.0f} f{fails / reps:.3f} |"
        print(line, flush=True)
    summary = {}
    for k, v in tot.items():
        e = np.array(v)
        summary[k] = {"rms_error": float(np.sqrt(np.mean(e[:, 0]**2))),
                      "mean_abs_z": float(np.mean(np.abs(e[:, 0] / e[:, 1]))),
                      "rows": float(e[:, 2].mean()), "per_pair": e.tolist()}
        print(f"{k:22s} rms err {summary[k]['rms_error']:.4f} mean|z| "
              f"{summary[k]['mean_abs_z']:.2f} rows {summary[k]['rows']:.0f}")
    return summary


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "kappa":
        write("barker_rules_kappa", {"rules": main(
            int(sys.argv[1]), int(sys.argv[2]),
            {f"clip k{k}": (1, 50, 50, k) for k in (1.0, 1.3, 1.6, 2.0)})})
    else:
        write("barker_rules", {"rules": main(*(int(a) for a in sys.argv[1:]))})
