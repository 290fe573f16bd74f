"""Regenerate the results page, the gallery and README's headline results from JSON outputs.

Each benchmark writes ``benchmarks/results/<name>.json``; this script turns the ones it
knows into table rows (the paper's number, ours, how it was measured) and rewrites the block
between ``<!-- results:begin -->`` and ``<!-- results:end -->`` of the documentation's
results page, ``docs/results.md``. Each notebook run at full size writes
``benchmarks/results/notebook_<name>.json`` with its closing table and its figures
(``notebooks/_notebook.py``): its rows join the table, and its figures the gallery page
``docs/gallery/index.md`` (between ``<!-- gallery:begin -->`` and ``<!-- gallery:end -->``).
README.md keeps a few headline rows of the same table (``HEADLINES``, between
``<!-- headline:begin -->`` and ``<!-- headline:end -->``), linking to the results page.

Run:  python benchmarks/report.py [--check]   (--check: exit 1 if a page is out of date)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
GALLERY_BEGIN, GALLERY_END = "<!-- gallery:begin -->", "<!-- gallery:end -->"
HEADLINE_BEGIN, HEADLINE_END = "<!-- headline:begin -->", "<!-- headline:end -->"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results.md"
GALLERY_PAGE = ROOT / "docs" / "gallery" / "index.md"
#: The rows README shows, each the start of a row's "what" on the results page: one per
#: claim a reader checks first (data read per step, the design's promise kept, speed against
#: the peers, a paper's table reproduced, exactness).
HEADLINES = (
    "rows read per step / minibatch (confidence: first batch) of the designed CV tests",
    "min bulk ESS/s vs NumPyro HMCECS (Taylor proxy, m = 1000) and NUTS, logistic d = 11, "
    "N = 1,000,000",
    "Korattikara et al. average design, tolerance 0.05: the design's verdict",
    "Seita et al. Table 1: rows per iteration, MHminibatch |",
    "Maclaurin & Adams Table 1, MAP-tuned FlyMC",
    "discretised posterior: measured d_TV",
)


def _load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def _pm(pair, digits=1):
    return f"{_fmt(pair[0], digits)} ± {_fmt(pair[1], digits)}" if pair else "–"


def rows_gmm_seita(r):
    s = r["settings"]
    how = f"`bench_gmm_seita.py`, {s['trials']} trials × {s['samples']} samples"
    out = []
    for name, v in r["results"].items():
        paper = v.get("paper", {}).get("rows")
        out.append((f"Seita et al. Table 1: rows per iteration, {name}", _pm(paper),
                    _pm((v["mean_rows_per_iteration"], v["sd_over_trials"])), how))
    tables = [(name, v, v["paper"]) for name, v in r["results"].items()
              if "chi2" in v.get("paper", {})]
    tables += [(name, v, {}) for name, v in r.get("references", {}).items()
               if name.startswith("exact Barker")]
    for name, v, paper in tables:
        ours = f"{_pm(v['eq39'])} / {_pm(v['chi2'])}"
        theirs = f"{_pm(paper['eq39'])} / {_pm(paper['chi2'])}" if paper else "–"
        out.append((f"Seita et al. Table 4: eq. 39 / chi-squared, {name}", theirs, ours,
                    f"{how}, {v['pooled_bins']} pooled bins (docs/correction.md §6)"))
    long = r.get("long_runs")
    if long:
        names = [n for n in long if isinstance(long[n], dict)]
        out.append((
            "Gaussian mixture, 10^6-sample chains: (posterior sd − true) / MCSE, θ₁ and θ₂, "
            + "; ".join(names),
            "within ±3",
            "; ".join(f"{long[n]['z_sd'][0]:+.1f}, {long[n]['z_sd'][1]:+.1f}" for n in names),
            "`bench_gmm_seita.py`; the stopping-rule bias at b ≈ 170 (docs/correction.md §6)",
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


def rows_control_variates(r):
    """``bench_control_variates.py``: the designed control-variate tests against HMCECS and
    NUTS (``control_variates.json``, joined by ``control_variates_1e6.json`` and
    ``control_variates_1e7.json`` for sizes run on their own: one run per file, ratios are
    within a file)."""
    rows = list(r["rows"])
    loads = [r.get("machine", {}).get("load_average_1min")]
    for name in ("control_variates_1e6", "control_variates_1e7"):
        extra = _load(name)
        if extra is not None and "rows" in extra:
            have = {x["N"] for x in rows}
            rows += [x for x in extra["rows"] if x["N"] not in have]
            loads.append(extra.get("machine", {}).get("load_average_1min"))
    for x in rows:      # the verdict of bench_control_variates.verdict, for partial files
        if "accuracy" not in x:
            x["accuracy"] = ("ESS<1000" if x["min_ess"] < 1000 else
                             "ok" if max(x["max_mean_error"], x["max_sd_error"]) <= 0.05
                             else "miss")
    ns = sorted({x["N"] for x in rows})
    loads = [f"{x:.1f}" for x in loads if x is not None]
    how = ("`bench_control_variates.py`, one run per N" + (f" (load at the end: {', '.join(loads)})"
                                                          if loads else "")
           + "; reference: Laplace importance sampling with the Laplace moments as control "
           "variates")
    pick = lambda n, name: next((x for x in rows if x["N"] == n and x["sampler"] == name), None)
    cv_names = list(dict.fromkeys(x["sampler"] for x in rows if x["family"] == "cv"))
    shown = ("CV austere (rw)", "CV austere (indep)", "CV barker (indep)",
             "FlyMC (MAP-tuned, MALA)")
    out = []
    for n in ns:
        hm = next((x for x in rows if x["N"] == n and x["family"] == "hmcecs"), None)
        nu = next((x for x in rows if x["N"] == n and x["family"] == "nuts"), None)
        if hm is None:
            continue
        cells = []
        for name in shown:
            x = pick(n, name)
            if x is not None:
                vs_nuts = f", {x['ess_per_s'] / nu['ess_per_s']:,.0f}x NUTS" if nu else ""
                cells.append(f"{name} {x['ess_per_s'] / hm['ess_per_s']:.1f}x{vs_nuts} "
                             f"(ESS {x['min_ess']:,.0f}, {x.get('accuracy', '?')})")
        base = f"HMCECS {hm['ess_per_s']:.0f} ESS/s (ESS {hm['min_ess']:,.0f}, set-up " \
               f"{hm['setup_seconds']:.0f} s)"
        if nu:
            base += f", NUTS {nu['ess_per_s']:.2f} ESS/s (ESS {nu['min_ess']:,.0f})"
        out.append((f"min bulk ESS/s vs NumPyro HMCECS (Taylor proxy, m = 1000) and NUTS, "
                    f"logistic d = 11, N = {n:,}", "≥ 10x HMCECS at N = 10^6 (CV tests), "
                    "growing with N", "; ".join(cells), f"{how}; {base}"))
    lo, hi = ns[0], ns[-1]
    if hi > lo:
        cells = []
        for name in cv_names:
            a, b = pick(lo, name), pick(hi, name)
            if a and b:
                cells.append(f"{name.replace('CV ', '')} {b['rows_per_step'] / a['rows_per_step']:.2f}")
        out.append((f"rows read per step of the designed CV tests, N = {hi:,} / N = {lo:,}",
                    "≤ 1.5", "; ".join(cells), how))
    cells = []
    for name in cv_names:
        per = [pick(n, name) for n in ns]
        per = [x for x in per if x is not None and "minibatch" in x]
        if per:
            cells.append(f"{name.replace('CV ', '')} " + ", ".join(
                f"{x['rows_per_step']:,.0f}/{x['minibatch']}" for x in per))
    if cells:
        out.append(("rows read per step / minibatch (confidence: first batch) of the designed "
                    f"CV tests at N = {', '.join(f'{n:,}' for n in ns)}", "≤ one minibatch",
                    "; ".join(cells), how))
    ratios = [x for x in rows if x["family"] == "cv"]
    within = sum(abs(x["predicted_over_realised"] - 1) <= 0.2 for x in ratios)
    conf = [x for x in ratios if x["test"] == "confidence"]
    out.append(("design's predicted rows per step / realised in the chain (CV tests, all N)",
                "within 20%", f"{within} of {len(ratios)} within 20%; confidence test: " + "; ".join(
                    f"{x['sampler'].replace('CV confidence ', '')} N = {x['N']:,}: "
                    f"{x['predicted_over_realised']:.2f} ({x.get('prediction_gap_in_se', 0):+.1f} se, "
                    f"{x.get('pairs', '?')} pairs)" for x in conf), how))
    acc = [x for x in rows if x["sampler"] == "CV austere (indep)"]
    if acc:
        out.append(("accuracy of CV austere (indep): max |mean − ref| / ref sd, max |sd / ref sd − 1|, "
                    "max |z| (mean error over its MCSE, reference's included), per N",
                    "≤ 0.05 at ESS ≥ 1000",
                    "; ".join(f"N = {x['N']:,}: {x['max_mean_error']:.3f}, {x['max_sd_error']:.3f}, "
                              f"|z| {x['max_abs_z']:.1f} (ESS {x['min_ess']:,.0f})" for x in acc),
                    how))
    return [tuple(_cell(c) for c in row) for row in out]


def rows_worst_case(r):
    i, j = r["epsilon"].index(0.001), r["m"].index(50)
    big = r["large_N"][0]
    return [(
        "Korattikara et al. worst-case table, N = 13,000, eps = 0.001, m = 50: E(0), stages",
        f"{r['published_error'][i][j]:.4f}, {r['published_stages'][i][j]:.1f}",
        f"{r['ours_error'][i][j]:.4f}, {r['ours_stages'][i][j]:.1f} (largest gap over 60 cells "
        f"{r['max_abs_diff_error']:.1e}); at N = 10^6 their 100-bin scheme gives "
        f"{big['bins100'][0]:.4f} vs {big['ours'][0]:.4f}",
        "`worst_case_table.py`; their 100 equal bins reproduced exactly",
    )]


def rows_average_vs_worst(r):
    out = []
    by = {(row["tolerance"], row["design"]): row for row in r["rows"]}
    for tol in (0.05, 0.1):
        avg, worst = by.get((tol, "average")), by.get((tol, "worst case"))
        if not (avg and worst and avg["feasible"] and worst["feasible"]):
            continue
        out.append((
            f"Korattikara et al. Fig. 6, tolerance {tol}: mean abs error on 100 fresh pairs, "
            "data used",
            "average design meets it with less data",
            f"average {avg['fresh_error']:.4f} with {avg['fresh_data']:.2f} of the data; "
            f"worst case {worst['fresh_error']:.4f} with {worst['fresh_data']:.2f}",
            f"`bench_average_vs_worst.py`, logistic regression N = {r['N']:,}",
        ))
    return out


def rows_design_speed(r):
    w = r["worst_case_N1e6"]
    a = r["average_N1e6"]
    return [("design speed: worst case, default grid, N = 10^6; average (trial pairs and grid), "
             "N = 10^6", "a few seconds", f"{w['seconds']:.1f} s; {a['total_seconds']:.1f} s",
             f"`bench_design.py`, wall time at load average "
             f"{a.get('load_average_1min_before', r['machine']['load_average_1min']):.1f} "
             f"on 2 cores")]


def rows_correction(r):
    m = {row["sigma"]: row for row in r["minimax"]}
    paper = {row["sigma"]: row for row in r["ridge"] if row["N"] == 4000 and row["lambda"] == 10}
    row = m[1.0]
    return [(
        "Barker correction, sigma = 1: L-inf error of N(0,1) * C vs the logistic cdf",
        f"{paper[1.0]['paper']:.1e} (N = 4000, lambda = 10)",
        f"{row['linf']:.2e} (certified floor {row['floor_lower']:.2e}); built in "
        f"{row['build_seconds']:.1f} s; the paper's ridge construction reproduced",
        "`correction_table3.py`, docs/correction.md",
    )]


def rows_fig5(r):
    p, a, b = r["posterior"], r["sgld"], r["sgld_mh"]
    return [(
        "Korattikara et al. Fig. 5: posterior mean, L1 linear regression",
        f"{p['mean']:.4f} (quadrature)",
        f"plain SGLD {a['mean']:.4f}; SGLD + Austere test {b['mean']:.4f}",
        "`fig5_sgld_mh.py`",
    )]


def rows_esgld(r):
    s = r["summary"]
    paper = r["paper_table1"]["eSGLD"]
    key = next(k for k in s if k.startswith("eSGLD moves=10") and "50000" in k)
    v = s[key]
    return [(
        "Song et al. Table 1 (N = 50,000, p = 2,001): eSGLD FSR / NSR",
        f"{paper['fsr'][0]} / {paper['nsr'][0]}, {paper['cpu_min']} CPU min",
        f"{v['fsr']['mean']:.2f} / {v['nsr']['mean']:.2f}, {v['cpu_s']['mean']:.1f} CPU s",
        f"`bench_esgld.py`, {r['settings']['datasets']} datasets",
    )]


def rows_validation_fig4(r):
    d = r["datasets"]
    gauss, logn = d["normal(0, 0.1^2)"], d["lognormal(0, 2)"]
    seq = logn["sequential"]
    k = max(range(len(seq["mu_std"])), key=lambda i: seq["error"][i] - seq["predicted_error"][i])
    chains = logn["chains"]
    return [
        ("CLT check, (mean, log sd) model, b = 500: KS distance of the minibatch t statistic "
         "to Student-t, N(0, 0.1^2) vs lognormal(0, 2) data",
         "t-test fails on lognormal (Bardenet et al. Fig. 4c)",
         f"{gauss['clt']['ks_distance_max']:.3f} (passes) vs "
         f"{logn['clt']['ks_distance_max']:.2f} (fails)", "`validation_fig4.py`"),
        ("real sequential t-test error vs the DP's prediction, lognormal data, "
         f"mu_std = {seq['mu_std'][k]:g}", "–",
         f"{seq['error'][k]:.2f} vs {seq['predicted_error'][k]:.2f}", "`validation_fig4.py`"),
        ("marginal of sigma / sample sd, lognormal data: AustereTest(500, 0.05), "
         "ConfidenceTest(0.01), exact", "Austere far off (Fig. 4c)",
         ", ".join(f"{chains[c]['sigma_mean_over_sample_sd']:.2f}"
                   for c in ("AustereTest", "ConfidenceTest", "exact MH")),
         "`validation_fig4.py`"),
    ]


def rows_validation_bounds(r):
    rows = [x for sweep in r["sweeps"].values() for x in sweep]
    ratio = [x["bound"] / x["tv"] for x in rows if x["tv"] > 1e-10 and x["bound"] < 1]
    return [(
        "discretised posterior: measured d_TV of the stationary laws within Theorem 1's bound "
        "(Austere, confidence, Barker tests)", "bound holds",
        f"{sum(x['holds'] for x in rows)}/{len(rows)} settings; non-vacuous bounds "
        f"{min(ratio):.0f}-{max(ratio):.0f}x the distance", "`validation_bounds.py`")]


def _cell(text):
    """Text for a Markdown table cell: a literal | would end the cell."""
    return str(text).replace("|", "\\|")


def rows_notebook(r):
    """A notebook's closing table (written by ``Notebook.report`` of ``notebooks/_notebook.py``)."""
    how = f"`notebooks/{r['notebook']}.ipynb`"
    return [(_cell(row["what"]), _cell(row["paper"]), _cell(row["ours"]),
             how + (f", {_cell(row['how'])}" if row.get("how") else ""))
            for row in r["rows"]]


def notebook_results():
    """The full-size notebook results, in notebook order: ``[(name, payload)]``."""
    out = []
    for path in sorted(RESULTS.glob("notebook_*.json")):
        r = json.loads(path.read_text())
        if r.get("size") == "full":
            out.append((path.stem, r))
    return out


SECTIONS = [
    ("gmm_seita", rows_gmm_seita),
    ("worst_case_table", rows_worst_case),
    ("bench_average_vs_worst", rows_average_vs_worst),
    ("bench_design", rows_design_speed),
    ("correction_table3", rows_correction),
    ("fig5_sgld_mh", rows_fig5),
    ("esgld", rows_esgld),
    ("firefly", rows_firefly),
    ("control_variates", rows_control_variates),
    ("scaling", rows_scaling),
    ("throughput", rows_throughput),
    ("validation_fig4", rows_validation_fig4),
    ("validation_bounds", rows_validation_bounds),
]


def rows() -> tuple[list[tuple[str, str, str, str]], set[str]]:
    """Every row of the results table, and the machines they were measured on."""
    out, machines = [], set()
    sections = [(name, fn, _load(name)) for name, fn in SECTIONS]
    sections += [(name, rows_notebook, r) for name, r in notebook_results()]
    for name, fn, r in sections:
        if r is None:
            continue
        m = r.get("machine", {})
        if "cpu" in m:
            machines.add(f"{m['cpu']} ({m['cores']} cores)")
        out += list(fn(r))
    return out, machines


def table() -> str:
    found, machines = rows()
    lines = ["| what | paper / target | ours | how |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in found]
    lines.append("")
    lines.append("Measured on " + "; ".join(sorted(machines)) + ", a shared machine: times are "
                 "noisy, compare ratios measured in one run.")
    return "\n".join(lines)


def headlines() -> str:
    """README's few rows: the first row whose "what" starts with each of ``HEADLINES``."""
    found, _ = rows()
    lines = ["| what | paper / target | ours |", "|---|---|---|"]
    for start in HEADLINES:
        row = next((r for r in found if f"{r[0]} |".startswith(start)), None)
        if row is None:
            raise SystemExit(f"report.py: no results row starts with {start!r} (HEADLINES)")
        lines.append(f"| {row[0]} | {row[1]} | {row[2]} |")
    return "\n".join(lines)


def gallery() -> str:
    """The notebooks' figures, each with its caption and a link to its notebook's page (the
    gallery page sits beside the notebooks' copies the documentation build makes)."""
    lines = []
    for _, r in notebook_results():
        for fig in r.get("figures", []):
            lines += [f"![{fig['file']}](../figures/{fig['file']})", "",
                      f"*{fig['caption']}* ([{r['notebook']}]({r['notebook']}.ipynb))", ""]
    return "\n".join(lines).rstrip("\n")


def _replace_block(text, begin, end, body):
    if begin not in text or end not in text:
        raise SystemExit(f"report.py: the page lacks the markers {begin} ... {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def pages() -> dict[Path, str]:
    """Each page this script writes, with its regenerated text."""
    blocks = {RESULTS_PAGE: [(BEGIN, END, table())],
              GALLERY_PAGE: [(GALLERY_BEGIN, GALLERY_END, gallery())],
              README: [(HEADLINE_BEGIN, HEADLINE_END, headlines())]}
    out = {}
    for path, replacements in blocks.items():
        text = path.read_text()
        for begin, end, body in replacements:
            text = _replace_block(text, begin, end, body)
        out[path] = text
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    new = pages()
    stale = [path for path, text in new.items() if path.read_text() != text]
    names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
    if args.check:
        if stale:
            print(f"{names} out of date: run python benchmarks/report.py")
            return 1
        return 0
    for path in stale:
        path.write_text(new[path])
    print(f"regenerated: {names}" if stale else "results page, gallery and README up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
