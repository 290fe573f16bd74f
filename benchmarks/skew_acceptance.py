"""Acceptance error of the minibatch Barker test on skewed populations, with and without the
skew-corrected correction (Seita et al. 2017, appendix A.5, left there as future work).

At a fixed pair (theta, theta') the population of l_i (N = 10^6) is scaled so that
Var(Delta*) = 0.5 sigma^2 at each batch size b, and shifted (log_const) to a chosen
Delta. design.acceptance.barker_acceptance simulates the test (minibatches without
replacement, Delta* = N mean + c, s^2 = N^2 var (1 - b/N) / b, X_nc ~ N(0, sigma^2 - s^2),
X_corr from the table; Rao-Blackwellised, with control variates) and compares P(accept)
with S(Delta). A last block shows what omitting the factor 1 - b/N costs.

Expected: the plain test's error is -eta sigma^3 S'''(Delta), eta = k3(Delta*)/(3 sigma^3),
i.e. O(b^-1/2) (the paper's G_n, the t-statistic's Edgeworth term, predicts another sign and
size, printed for comparison); the skew-corrected test's error is O(1/b). For Gaussian l_i
at Delta != 0 the remaining O(1/b) term comes from the variance estimate,
s^4 S''''(Delta) / (4 (b - 1)).

    python benchmarks/skew_acceptance.py [--tests 400000] [--report]

Prints a table and the fitted slopes of log|error| against log b, and writes
benchmarks/results/skew_acceptance.json.
"""

from __future__ import annotations

import argparse
import json
import time
import sys
from pathlib import Path

import numpy as np
from scipy import special, stats

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common

from design import correction
from design.acceptance import barker_acceptance

RESULTS = Path(__file__).resolve().parent / "results" / "skew_acceptance.json"
N = 1_000_000
BATCHES = (32, 64, 128, 256, 512, 1024, 2048)
FIT_FROM = 64           # slopes use b >= 64 (at b = 32, 4 % of batches are clipped)
S2 = 0.5


def populations(rng):
    return {
        "exponential": rng.standard_exponential(N),
        "lognormal(0, 0.5)": rng.lognormal(0.0, 0.5, N),
        "normal": rng.standard_normal(N),
    }


def s3(x):
    """Third derivative of the logistic cdf."""
    s = special.expit(x)
    return s * (1 - s) * (1 - 6 * s * (1 - s))


def s1(x):
    s = special.expit(x)
    return s * (1 - s)


def s2nd(x):
    """Second derivative of the logistic cdf."""
    s = special.expit(x)
    return s * (1 - s) * (1 - 2 * s)


def s4(x):
    """Fourth derivative of the logistic cdf."""
    s = special.expit(x)
    d1 = s * (1 - s)
    return d1 * (1 - 2 * s) * (1 - 12 * d1)


def slope(bs, errs, ses):
    """Least-squares slope of log|error| on log b over b >= FIT_FROM, on the cells whose
    error is resolved (beyond 4 SE); None with fewer than two such cells."""
    keep = (np.abs(errs) > 4 * ses) & (np.asarray(bs) >= FIT_FROM)
    if keep.sum() < 2:
        return None
    return float(np.polyfit(np.log(np.asarray(bs)[keep]), np.log(np.abs(errs[keep])), 1)[0])


def fit_slopes(rows):
    out = []
    for name in dict.fromkeys(r["population"] for r in rows):
        for delta in dict.fromkeys(r["delta"] for r in rows if r["population"] == name):
            sel = [r for r in rows if r["population"] == name and r["delta"] == delta]
            fit = {"population": name, "delta": delta}
            for key in ("plain", "skew"):
                fit[key] = slope([r["b"] for r in sel], np.array([r[key] for r in sel]),
                                 np.array([r[key + "_se"] for r in sel]))
            out.append(fit)
    return out


def markdown(data) -> str:
    """The results as the markdown table of docs/correction.md."""
    lines = ["| population | Delta | b | eta | plain test | predicted (ours) | predicted (paper's G_n) "
             "| skew-corrected | clipped |", "|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(
            f"| {r['population']} | {r['delta']:g} | {r['b']} | {r['eta']:.4f} | "
            f"{r['plain']:+.2e} | {r['predicted_plain']:+.2e} | {r['predicted_paper_Gn']:+.1e} | "
            f"{r['skew']:+.1e} | {100 * r['clipped']:.1f} % |")
    lines.append("")
    for r in data.get("no_fpc", []):
        lines.append(f"- without the finite-population factor (Algorithm 1 as printed), "
                     f"exponential, Delta = 2.3, b = {r['b']}: error {r['error_without_fpc']:+.2e} "
                     f"instead of {r['error_with_fpc']:+.2e}; shift {r['shift']:+.2e}, predicted "
                     f"{r['predicted_shift']:+.2e}")
    for f in fit_slopes(data["rows"]):
        lines.append(f"- {f['population']}, Delta = {f['delta']:g}: slope of log|error| against "
                     f"log b (b >= {FIT_FROM}), plain {fmt(f['plain'])}, "
                     f"skew-corrected {fmt(f['skew'])}")
    return "\n".join(lines)


def fmt(v):
    return "n/a (fewer than 2 errors beyond 4 SE)" if v is None else f"{v:.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=400_000)
    parser.add_argument("--report", action="store_true",
                        help="only print the markdown table of the saved results")
    args = parser.parse_args(argv)
    if args.report:
        print(markdown(json.loads(RESULTS.read_text())))
        return
    rng = np.random.default_rng(20170811)
    base, family = correction.default(), correction.default_skew()
    rows = []
    start = time.perf_counter()
    for name, raw in populations(rng).items():
        skewness = float(stats.skew(raw))
        deltas = {"exponential": (0.0, 2.3), "normal": (0.0, 1.0)}.get(name, (0.0,))
        for delta in deltas:
            for b in BATCHES:
                l = raw * np.sqrt(S2 * b) / (N * raw.std())
                c = delta - N * l.mean()
                k3 = N ** 3 * stats.moment(l, 3) / b ** 2
                eta = k3 / 3.0
                kappa = skewness / (6 * np.sqrt(b))        # the paper's y' = y / (6 sqrt(b))
                row = {"population": name, "skewness": skewness, "delta": delta, "b": b,
                       "eta": eta,
                       # our limit: P - S = -eta sigma^3 S'''(Delta)
                       "predicted_plain": -eta * s3(delta),
                       # the paper's G_n (t-statistic Edgeworth term at the sigma scale)
                       "predicted_paper_Gn": -kappa * (2 * s3(delta) + 3 * s1(delta)),
                       # O(1/b) term of the variance estimate for Gaussian l_i:
                       # Var(s_hat^2) S''''(Delta) / 8 = s^4 S''''(Delta) / (4 (b - 1))
                       "predicted_variance_term": S2 ** 2 * s4(delta) / (4 * (b - 1))}
                seed = int(rng.integers(2 ** 63))       # common random numbers for both
                for key, table in (("plain", base), ("skew", family)):
                    est = barker_acceptance(l, b, log_const=c, table=table,
                                            n_tests=args.tests, rng=seed)
                    row[key] = est.error
                    row[key + "_se"] = est.standard_error
                    row["clipped"] = est.clipped
                rows.append(row)
                print(f"{name:18s} Delta={delta:3.1f} b={b:5d} eta={eta:+.4f}  "
                      f"plain {row['plain']:+.2e} ± {row['plain_se']:.0e} "
                      f"(ours {row['predicted_plain']:+.2e}, paper G_n "
                      f"{row['predicted_paper_Gn']:+.1e}, var-term "
                      f"{row['predicted_variance_term']:+.1e})  "
                      f"skew {row['skew']:+.2e} ± {row['skew_se']:.0e}  "
                      f"clipped {row['clipped']:.4f}", flush=True)
    slopes = fit_slopes(rows)
    # Algorithm 1 as printed: no finite-population factor in the variance estimate
    no_fpc = []
    raw = populations(np.random.default_rng(20170811))["exponential"]
    for b in (512, 2048):
        l = raw * np.sqrt(S2 * b) / (N * raw.std())
        seed = int(rng.integers(2 ** 63))
        pair = {}
        for fpc in (True, False):
            est = barker_acceptance(l, b, log_const=2.3 - N * l.mean(), table=family, fpc=fpc,
                                    n_tests=args.tests, rng=seed)
            pair[fpc] = est
        shift = pair[False].error - pair[True].error
        predicted = -(b / N) * (S2 / 2) * s2nd(2.3)
        no_fpc.append({"b": b, "delta": 2.3, "error_with_fpc": pair[True].error,
                       "error_without_fpc": pair[False].error, "shift": shift,
                       "predicted_shift": predicted, "se": pair[True].standard_error})
        print(f"no fpc, b={b}: error {pair[False].error:+.2e} vs {pair[True].error:+.2e} with "
              f"fpc; shift {shift:+.2e}, predicted -(b/N)(s^2/2)S''(Delta) = {predicted:+.2e}")
    data = {"N": N, "var_delta_star": S2, "sigma": 1.0, "tests_per_cell": args.tests,
            "rows": rows, "slopes": slopes, "no_fpc": no_fpc,
            "seconds": time.perf_counter() - start}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1))
    print(markdown(data))
    print(f"wrote {RESULTS} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
