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
