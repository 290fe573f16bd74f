"""Speed of drawing X_corr: vectorised sample(), the compiled kernel in a numba loop (the
Barker test's hot path: one draw per MH step), and the skew family.

    python benchmarks/correction_sampling.py

Prints ns per draw and writes benchmarks/results/correction_sampling.json.
"""

from __future__ import annotations

import json
import time
import sys
from pathlib import Path

import numba
import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common

from design import correction

RESULTS = Path(__file__).resolve().parent / "results" / "correction_sampling.json"
N = 2_000_000


@numba.njit
def one_at_a_time(u, x0, h, density, cdf):
    """A compiled caller drawing one value per iteration, as a sampler's step loop would."""
    total = 0.0
    for i in range(u.shape[0]):
        total += correction.ppf_kernel(u[i], x0, h, density, cdf)
    return total


@numba.njit
def skew_one_at_a_time(eta, u1, u2, x0, h, step, density, cdf):
    total = 0.0
    for i in range(u1.shape[0]):
        total += correction.skew_ppf_kernel(eta[i], u1[i], u2[i], x0, h, step, density, cdf)
    return total


def best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    rng = np.random.default_rng(0)
    table = correction.default()
    family = correction.default_skew()
    a = table.cdf_arrays()
    s = family.cdf_arrays()
    u = rng.random(N)
    u2 = rng.random(N)
    eta = rng.uniform(-0.2, 0.2, N)
    one_at_a_time(u[:10], a.x0, a.spacing, a.density, a.cdf)          # compile
    skew_one_at_a_time(eta[:10], u[:10], u2[:10], s.x0, s.spacing, s.skew_step, s.density, s.cdf)
    table.sample(10, rng=0)
    family.sample(0.01, 10, rng=0)
    results = {
        "table.sample (vectorised, incl. rng.random)": best_of(lambda: table.sample(N, rng=1)),
        "ppf_kernel in a numba loop": best_of(
            lambda: one_at_a_time(u, a.x0, a.spacing, a.density, a.cdf)),
        "skew family.sample (one eta)": best_of(lambda: family.sample(0.05, N, rng=1)),
        "skew_ppf_kernel in a numba loop (eta varies)": best_of(
            lambda: skew_one_at_a_time(eta, u, u2, s.x0, s.spacing, s.skew_step, s.density,
                                       s.cdf)),
        "reference: rng.random": best_of(lambda: rng.random(N)),
        "reference: rng.logistic": best_of(lambda: rng.logistic(size=N)),
        "reference: rng.standard_normal": best_of(lambda: rng.standard_normal(N)),
    }
    ns = {k: 1e9 * v / N for k, v in results.items()}
    for k, v in ns.items():
        print(f"{k:48s} {v:6.1f} ns/draw")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"draws": N, "ns_per_draw": ns,
                                   "note": "best of 5, 2 shared cores"}, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
