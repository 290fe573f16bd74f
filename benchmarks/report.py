"""Regenerate the results table of README.md from the benchmarks' JSON outputs.

Each benchmark writes ``benchmarks/results/<name>.json``; this script turns the ones it
knows into table rows (the paper's number, ours, how it was measured) and rewrites the block
between ``<!-- results:begin -->`` and ``<!-- results:end -->`` in README.md.

Run:  python benchmarks/report.py [--check]   (--check: exit 1 if README is out of date)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def rows_gmm_seita(r):
    out = []
    s = r["settings"]
    for name, v in r["results"].items():
        paper = (f"{_fmt(v['paper_mean'], 1)} ± {_fmt(v['paper_sd'], 1)}"
                 if v.get("paper_mean") else "–")
        out.append((
            f"Seita et al. Table 1: rows per iteration, {name}",
            paper,
            f"{_fmt(v['mean_rows_per_iteration'], 1)} ± {_fmt(v['sd_over_trials'], 1)}",
            f"`bench_gmm_seita.py`, {s['trials']} trials × {s['samples']} samples",
        ))
    return out


def rows_scaling(r):
    q = r["ratios"]
    out = [(
        "time per step, N = 10^7 memmap / N = 10^5 in memory (same rows per step)",
        "target ≤ 1.3",
        f"{q['memmap_big_over_small']:.2f}",
        "`bench_scaling.py`; 10^5 rows fit in L3 cache, 10^7 do not",
    )]
    if "memory_big_over_next" in q:
        out.append(("time per step, N = 10^7 / N = 10^6, both in memory (no cache advantage)",
                    "no growth with N", f"{q['memory_big_over_next']:.2f}", "`bench_scaling.py`"))
    return out


def rows_throughput(r):
    ratios = r["ratio_to_plain_loop"]
    return [(
        "l_i throughput, logistic d = 50, random rows, vs a plain numba loop",
        "target ≥ 0.5",
        f"{ratios['model.loglik_ratio (public)']:.2f} (public API), "
        f"{ratios['AustereTest decision']:.2f} (inside a test)",
        "`bench_throughput.py`",
    )]


def rows_firefly(r):
    t = r["table1"]
    out = []
    for name, v in t["rows"].items():
        p = t["paper"][name]
        out.append((
            f"Maclaurin & Adams Table 1 (MNIST-shaped synthetic): {name}, queries per iteration / "
            "ESS per 1000 it / speedup in ESS per query",
            f"{_fmt(p['queries'])} / {p['ess_per_1000']:.1f} / {p['speedup']:.1f}",
            f"{_fmt(v['queries_per_iter'])} / {v['ess_mean_per_1000']:.1f} / "
            f"{v['speedup_mean']:.1f}",
            f"`bench_firefly.py`, {r['settings']['iters']} iterations, mean ESS over "
            f"{t['d']} coefficients",
        ))
    sc = {(row["N"], row["q_db"]): row for row in r["scaling"]}
    small, big = min(n for n, _ in sc), max(n for n, _ in sc)
    a = sc[(small, max(q for n, q in sc if n == small))]
    b = sc[(big, min(q for n, q in sc if n == big))]
    out.append((
        f"FlyMC time per iteration, N = {big:,} / N = {small:,} (q_db N constant)",
        "no growth with N",
        f"{b['us_per_iter'] / a['us_per_iter']:.2f} (regular MH: "
        f"{b['mh_ms_per_iter'] / a['mh_ms_per_iter']:.1f})",
        "`bench_firefly.py`",
    ))
    return out


SECTIONS = [("gmm_seita", rows_gmm_seita), ("scaling", rows_scaling), ("throughput", rows_throughput),
            ("firefly", rows_firefly)]


def table() -> str:
    lines = ["| what | paper / target | ours | how |", "|---|---|---|---|"]
    machines = set()
    for name, fn in SECTIONS:
        r = _load(name)
        if r is None:
            continue
        machines.add(f"{r['machine']['cpu']} ({r['machine']['cores']} cores)")
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in fn(r)]
    lines.append("")
    lines.append("Measured on " + "; ".join(sorted(machines)) + ", a shared machine: times are "
                 "noisy, compare ratios measured in one run.")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    readme = ROOT / "README.md"
    text = readme.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table()}\n{END}{tail}"
    if args.check:
        if new != text:
            print("README.md results table is out of date: run python benchmarks/report.py")
            return 1
        return 0
    readme.write_text(new)
    print("README.md results table regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
