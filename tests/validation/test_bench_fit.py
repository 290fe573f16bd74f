"""``benchmarks/bench_fit.py`` times fit's first call strictly: its top imports nothing of the
project, SciPy, ArviZ or JAX, and its ``--child`` process times ``fit`` before any of those
that the parent loads is imported, on data equal to the parent's (a fingerprint mismatch is
an error, not a silent benchmark of other data)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fit.py"
#: What the parent loads before its fit rows and a fit row's process must not have.
HEAVY = ("samplers", "validation", "design", "scipy", "scipy.stats", "arviz", "jax", "numpyro")


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_fit_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    saved = sys.path[:]
    try:
        spec.loader.exec_module(module)     # it puts the checkout and benchmarks/ first
    finally:
        sys.path[:] = saved
    return module


def test_top_imports_stay_light():
    code = (f"import importlib.util as u, sys; s = u.spec_from_file_location('b', {str(BENCH)!r});"
            f" m = u.module_from_spec(s); s.loader.exec_module(m);"
            f" print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def _run_child(bf, tmp_path, **changes):
    kind, N, seed = 3, 3000, 5
    X, y = bf.data(kind, N, seed, str(tmp_path))
    spec = dict(kind=kind, N=N, seed=seed, data_dir=str(tmp_path), warm=True,
                fingerprint=bf.fingerprint(X, y), out=str(tmp_path),
                fit=dict(draws=300, rng=1, n_trial=10, parallel=False, progress=False))
    spec.update(changes)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return subprocess.run([sys.executable, str(BENCH), "--child", str(path)],
                          capture_output=True, text=True)


@pytest.mark.slow
def test_child_times_fit_cold_and_warm(tmp_path):
    bf = _load_bench()
    done = _run_child(bf, tmp_path)
    assert done.returncode == 0, done.stderr
    res = json.loads((tmp_path / "result.json").read_text())
    loaded = set(res["loaded_before_fit"])
    assert not loaded & {"scipy.stats", "arviz", "xarray", "jax", "numpyro"}, loaded
    first, second = res["calls"]
    assert first["wall_s"] > 0 and second["wall_s"] > 0 and res["import_s"] > 0
    assert first["timings"]["chains"] < first["wall_s"]
    # equal seeds, equal chains: the warm call's ESS is the first call's, bit for bit
    assert (second["route"], second["ess_bulk"]) == (first["route"], first["ess_bulk"])
    draws = np.load(tmp_path / "draws.npy")
    assert draws.shape[0] == 2 and draws.shape[1] >= 300 and draws.shape[2] == 4


def test_child_refuses_other_data(tmp_path):
    bf = _load_bench()
    done = _run_child(bf, tmp_path, fingerprint=[0.0, 0.0, 0.0])
    assert done.returncode != 0
    assert "rebuilt other data" in done.stderr
    assert not (tmp_path / "result.json").exists()


@pytest.mark.slow
def test_child_imports_the_third_party_modules_before_the_clock_when_asked(tmp_path):
    bf = _load_bench()
    done = _run_child(bf, tmp_path, warm=False, preimport=list(bf.THIRD_PARTY))
    assert done.returncode == 0, done.stderr
    res = json.loads((tmp_path / "result.json").read_text())
    assert {"scipy.stats", "arviz"} <= set(res["loaded_before_fit"]), res["loaded_before_fit"]
    assert res["preimport_s"] > 0 and len(res["calls"]) == 1
    # the result step then imports nothing: it is a small share of the call
    assert res["calls"][0]["timings"]["result"] < 0.5 * res["calls"][0]["wall_s"]


def _row(sampler, ess_s, **more):
    errors = {f"{k}_{what}": 0.01 for k in ("mean", "sd", "q05", "q95")
              for what in ("error", "mcse")}
    return dict(sampler=sampler, all_in_s=10.0, sampling_s=5.0, min_ess=1000.0,
                ess_per_s_all_in=ess_s, ess_per_s_sampling=2 * ess_s, load=1.0,
                **errors, **more)


def test_summary_names_each_exact_baseline_and_the_imports_apart_figure():
    bf = _load_bench()
    fit = _row("fit", 100.0, route="austere / independence", setup_s=9.0,
               cost_predicted=30.0, cost_realised=34.0, apart_all_in_s=5.0,
               apart_ess_per_s_all_in=200.0)
    rows = [fit, _row("exact MH (walk)", 1.0), _row("exact MH (independence)", 10.0),
            _row("NumPyro HMCECS", 5.0)]
    out = {"rare-N1e6": dict(N=1_000_000, d=5, rows=rows)}
    text = bf.table(out)
    # fit 100 ESS/s all-in against: the walk's 1 all-in, the independence proposal's 10,
    # HMCECS's 10 sampling-only (20 with the imports apart)
    assert "100.0x exact MH's (walk) ESS/s all-in" in text
    assert "10.0x exact MH's (independence) ESS/s all-in" in text
    assert "10.00x HMCECS sampling-only (target >= 10x) (20.00x with the third-party" in text
    assert "exact MH (independence) 5.00x (all-in 10.0x)" in text
