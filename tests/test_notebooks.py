"""The notebooks in ``notebooks/``: committed without outputs, and they run at small size.

Each notebook is executed in a fresh kernel with ``AUSTERITY_NOTEBOOK_SIZE=small`` and its
figures and results sent to a temporary folder (``AUSTERITY_NOTEBOOK_OUTPUT``), so a test run
never changes the committed notebooks or the committed figures and results. A new notebook
``notebooks/NN_name.ipynb`` is picked up by the glob; give it a time limit in ``TIMEOUT`` if
the default does not suit it.
"""

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))

#: Seconds per cell at small size (nbclient's limit is per cell).
DEFAULT_TIMEOUT = 60
TIMEOUT: dict[str, int] = {}


def _run_all():
    spec = importlib.util.spec_from_file_location("run_all", NOTEBOOKS / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_notebooks():
    assert PATHS, f"no notebooks found in {NOTEBOOKS}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.outputs or cell.execution_count is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} carry outputs or execution counts; "
                       "commit notebooks stripped (run them with notebooks/run_all.py)")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_runs_at_small_size(path, tmp_path, monkeypatch):
    monkeypatch.setenv("AUSTERITY_NOTEBOOK_SIZE", "small")
    monkeypatch.setenv("AUSTERITY_NOTEBOOK_OUTPUT", str(tmp_path))
    before = path.read_bytes()
    _run_all().execute(path, timeout=TIMEOUT.get(path.stem, DEFAULT_TIMEOUT))
    assert path.read_bytes() == before
    # The notebook wrote its closing table and the figures it names, there and nowhere else.
    results = json.loads((tmp_path / f"notebook_{path.stem}.json").read_text())
    assert results["size"] == "small" and results["rows"]
    for figure in results["figures"]:
        assert (tmp_path / figure["file"]).is_file()


def test_notebook_helper_doctests(monkeypatch):
    """``notebooks/_notebook.py`` lives outside the packages, so the suite's doctest
    collection does not see it: run its examples here."""
    import doctest
    import sys

    spec = importlib.util.spec_from_file_location("_notebook", NOTEBOOKS / "_notebook.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_notebook", module)   # dataclasses look it up
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
