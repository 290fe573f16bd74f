"""The documentation site (issue 27): it builds with warnings as errors, every public name has
a page, and the results page is what benchmarks/report.py regenerates."""

import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGES = ("design", "samplers", "validation")


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_modules():
    """Public modules with an ``__all__`` (the command line of validation.workflow aside),
    found here independently of the docs' own extension."""
    out = []
    for package in PACKAGES:
        out.append(package)
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__,
                                          package + "."):
            if any(p.startswith("_") for p in info.name.split(".")):
                continue
            if info.name.startswith("validation.workflow"):
                continue
            if getattr(importlib.import_module(info.name), "__all__", None):
                out.append(info.name)
    return out


def build(out: Path) -> Path:
    """The site built by ``python -m sphinx -W`` into ``out`` (one build per test run: the
    build writes its generated pages into docs/, so two builds must not run at once, as two
    xdist workers would run two fixtures)."""
    for name in ("sphinx", "myst_nb", "numpydoc", "pydata_sphinx_theme"):
        pytest.importorskip(name, reason=f"the docs build needs {name}: pip install -e .[docs]")
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"sphinx -W failed:\n{run.stderr[-6000:]}"
    return out / "html"


@pytest.mark.slow
def test_docs_build_and_every_public_name_has_a_page(tmp_path):
    site = build(tmp_path)
    check_pages(site)
    check_every_public_name_has_a_page(site)


def check_pages(site):
    for page in ("index", "getting_started", "user_guide/workflow", "user_guide/big_data",
                 "user_guide/own_model", "theory", "results", "gallery/index", "api/index",
                 "architecture", "correction", "design_tests"):
        assert (site / f"{page}.html").exists(), page
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert notebooks and all((site / "gallery" / f"{n}.html").exists() for n in notebooks)
    # the gallery shows each notebook's saved figures, copied into the site
    assert list((site / "_images").glob("01_quickstart_*.png"))
    assert "explanation" in (site / "getting_started.html").read_text()


def check_every_public_name_has_a_page(site):
    """Each name of each public module's ``__all__``, read now: a submodule has its module
    page; an object has a page of its own (under one of the modules exporting it) that
    describes it, and the module's page links to it."""
    missing, modules = [], public_modules()
    for module in modules:
        mod = importlib.import_module(module)
        page = site / "api" / f"{module}.html"
        if not page.exists():
            missing.append(module)
            continue
        html = page.read_text()
        for name in mod.__all__:
            obj = getattr(mod, name)
            if type(obj).__name__ == "module":
                if not (site / "api" / f"{obj.__name__}.html").exists():
                    missing.append(f"{module}.{name}")
                continue
            homes = [f"{m}.{name}" for m in modules
                     if getattr(importlib.import_module(m), name, None) is obj
                     and name in importlib.import_module(m).__all__]
            found = [h for h in homes if (site / "api" / "generated" / f"{h}.html").exists()
                     and f'id="{h}"' in (site / "api" / "generated" / f"{h}.html").read_text()]
            if not found or f"generated/{found[0]}.html" not in html:
                missing.append(f"{module}.{name}")
    assert not missing, f"public names without an API page: {missing}"
    fit = (site / "api" / "generated" / "validation.fit.html").read_text()
    assert "Parameters" in fit and "tolerance" in fit


def test_results_page_and_readme_are_up_to_date():
    report = _load(ROOT / "benchmarks" / "report.py", "report")
    assert report.main(["--check"]) == 0, "run python benchmarks/report.py"
    page = (DOCS / "results.md").read_text()
    block = page.split("<!-- results:begin -->")[1].split("<!-- results:end -->")[0]
    assert block.count("\n|") > 40         # the full table lives on the results page


def test_docstring_bars_are_escaped_outside_literals_and_blocks():
    ext = _load(DOCS / "_ext" / "austerity_docs.py", "austerity_docs")
    lines = ["The mean |Delta| and ``|x|`` and :math:`|y|`.", "", ".. math::", "",
             "    |r_i| \\le 1", "", "Back |here|.", ">>> abs(-1)  # |x|", "1"]
    assert ext.escape_bars(lines) == [
        "The mean \\|Delta\\| and ``|x|`` and :math:`|y|`.", "", ".. math::", "",
        "    |r_i| \\le 1", "", "Back \\|here\\|.", ">>> abs(-1)  # |x|", "1"]


def test_numpydoc_template_is_compiled_once_and_formats_as_numpydoc():
    """The build's numpydoc compiles its docstring template once (it compiled it for every
    docstring, a fifth of the build's CPU) and formats each docstring as numpydoc does."""
    pytest.importorskip("numpydoc")
    from numpydoc import docscrape_sphinx
    from numpydoc import numpydoc as nd

    import design
    import validation

    ext = _load(DOCS / "_ext" / "austerity_docs.py", "austerity_docs")
    saved = nd.get_doc_object
    try:
        ext._numpydoc_template_once()
        configs = [{}, {}]
        docs = [str(nd.get_doc_object(f, "function", config=c))
                for f, c in zip((validation.fit, design.optimize), configs)]
    finally:
        nd.get_doc_object = saved
    assert configs[1]["template"] is configs[0]["template"]
    assert docs == [str(docscrape_sphinx.get_doc_object(f, "function", config={}))
                    for f in (validation.fit, design.optimize)]
    assert "Parameters" in docs[0]
