"""The layers of docs/architecture.md hold: import-linter's contracts (pyproject.toml) pass,
they name every private module, and the notebooks and benchmarks use public API only.

Bottom to top: ``design._lib`` (shared helpers) < ``design`` < ``samplers`` < ``validation`` <
``validation.workflow`` (the command line and the demo). No package imports another's private
module, ``design._lib`` excepted.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("design", "samplers", "validation")
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in CONFIG["contracts"]}

#: Private modules that the notebooks and benchmarks may still import, and why (none: the
#: compiled model view is public, ``samplers.check_model`` / ``samplers.ModelView``).
ALLOWED_PRIVATE: dict[str, str] = {}

#: Benchmarks that load an independent reference implementation kept with the tests (a NumPy
#: oracle, not library code; the papers' numbers themselves are in design.reference_tables).
READS_TEST_ORACLES = {
    "_design_refs.py": "coarse_dp (the authors' 100-bin scheme), logistic_pairs (NumPy pairs)",
    "audit.py": "the reliability audit's case table, tests/reliability/audit_cases.py",
}


def lint_imports() -> str:
    """``lint-imports`` beside this interpreter (the venv's console script), else on PATH."""
    script = Path(sys.executable).with_name("lint-imports")
    found = str(script) if script.is_file() else shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is not installed (pip install -e .[dev])")
    return found


def test_import_contracts_are_kept():
    run = subprocess.run([lint_imports(), "--no-cache", "--config", "pyproject.toml"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"import-linter contracts broken:\n{run.stdout}\n{run.stderr}"
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in run.stdout, run.stdout


def private_modules(package: str) -> set[str]:
    """The outermost private modules of ``package`` on disk (``samplers._firefly``,
    ``samplers.models._kernels``, ...): a name whose last part starts with ``_``."""
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for i, part in enumerate(parts[1:], start=1):
            if part.startswith("_"):
                found.add(".".join(parts[:i + 1]))
                break
    return found


#: Who may not import a package's private modules: every other package (validation's app
#: layer included for validation).
SOURCES = {"design": {"samplers", "validation"}, "samplers": {"design", "validation"},
           "validation": {"design", "samplers", "validation.workflow"}}


@pytest.mark.parametrize("package", PACKAGES)
def test_the_private_contracts_name_every_private_module(package):
    """import-linter's wildcards cannot match part of a name (``samplers._*``), so the
    contracts list the private modules; a new one must be added to its contract."""
    contract = CONTRACTS[f"private-{package}"]
    expected = private_modules(package) - {"design._lib"}
    listed = set(contract["forbidden_modules"])
    assert listed == expected, (f"pyproject.toml, contract private-{package}: add "
                                f"{sorted(expected - listed)}, remove {sorted(listed - expected)}")
    assert set(contract["source_modules"]) == SOURCES[package]


def test_the_app_layer_contract_covers_all_of_validation():
    sources = set(CONTRACTS["app-on-top"]["source_modules"])
    assert sources == {"validation"} | private_modules("validation")


def imported_modules(source: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` names (any depth)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def notebook_source(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    code = ("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    # IPython magics and shell lines are not Python
    return "\n".join(line for cell in code for line in cell.splitlines()
                     if not line.lstrip().startswith(("%", "!")))


SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "notebooks").glob("*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", SCRIPTS + NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebooks_and_benchmarks_use_public_api(path):
    source = notebook_source(path) if path.suffix == ".ipynb" else path.read_text()
    bad = []
    for name in sorted(imported_modules(source)):
        parts = name.split(".")
        if parts[0] == "tests":
            bad.append(f"{name} (the test suite is no library)")
        elif parts[0] in PACKAGES and any(p.startswith("_") for p in parts[1:]):
            private = ".".join(parts[:next(i for i, p in enumerate(parts) if p.startswith("_")) + 1])
            if private not in ALLOWED_PRIVATE:
                bad.append(name)
    assert not bad, f"{path.name} imports private modules: {bad}"
    if path.name not in READS_TEST_ORACLES:
        assert '"tests"' not in source, f"{path.name} puts the test suite on its path"


def modules_loaded_by(*argv: str) -> set[str]:
    """The modules a fresh interpreter has loaded after ``python -c CODE`` (``argv = ("-c",
    CODE)``) or ``python -m MODULE ARGS...`` (``argv = (MODULE, *ARGS)``)."""
    if argv[0] == "-c":
        code = argv[1]
    else:
        code = (f"import runpy, sys\nsys.argv = {list(argv)!r}\ntry:\n"
                f"    runpy.run_module({argv[0]!r}, run_name='__main__', alter_sys=True)\n"
                f"except SystemExit:\n    pass")
    code += "\nimport sys\nprint('\\n'.join(sys.modules), file=sys.stderr)"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    return set(run.stderr.split())


HEAVY = ("samplers", "validation._", "numba", "scipy", "design._correction_build")
#: What SciPy's numerical subpackages are (numba itself loads the bare ``scipy`` package).
SCIPY_NUMERICS = ("scipy.optimize", "scipy.stats", "scipy.signal", "scipy.sparse",
                  "scipy.interpolate", "scipy.linalg", "scipy.special")


@pytest.mark.parametrize("argv, allowed", [
    (("-c", "import design"), ()),
    (("-c", "import design.reference_tables"), ()),
    (("-c", "import design.correction"), ("numba", "scipy")),   # the run-time table
    (("-c", "import samplers"), ("samplers", "numba", "scipy")),
    (("validation.workflow.cli", "--help"), ()),
    (("validation.workflow.cli", "design", "--help"), ()),
    (("validation.workflow.cli", "correction", "build", "--help"), ()),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) and v else None)
def test_imports_stay_light(argv, allowed):
    """``import design`` loads no sampler (Firefly included), SciPy or numba; the run-time
    correction table loads no SciPy numerics and no table builder; ``austerity --help``
    loads nothing numerical. Speed itself is measured, not asserted (docs/architecture.md)."""
    loaded = modules_loaded_by(*argv)
    heavy = sorted(m for m in loaded if m.startswith(HEAVY) and not m.startswith(allowed))
    if "samplers" not in allowed:
        heavy += sorted(m for m in loaded if m.startswith(SCIPY_NUMERICS) and m not in heavy)
    assert not heavy, f"{' '.join(argv)} loaded {heavy[:10]}{' ...' if len(heavy) > 10 else ''}"
