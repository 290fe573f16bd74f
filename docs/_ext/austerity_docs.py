"""Sphinx extension: the API reference and the notebook gallery, written from the code.

At ``builder-inited`` (before Sphinx reads any source) it writes

* ``docs/api/``: one page per public module (a module whose dotted name has no part starting
  with ``_`` and that has a non-empty ``__all__``, the command line of
  ``validation.workflow`` excepted), listing every name of its ``__all__``. Each object gets
  one autosummary stub page, under the first module that exports it (the packages
  ``design``, ``samplers``, ``validation`` first, so ``samplers.AustereTest`` rather than
  ``samplers.mhtests.austere.AustereTest``); the other modules that re-export it link there.
  So the reference follows ``__all__`` with no edits: a name added to or removed from an
  ``__all__`` appears or disappears at the next build.
* ``docs/gallery/``: a copy of each notebook of ``notebooks/``, opened by a Markdown cell
  with its saved figures and its closing table (``benchmarks/results/notebook_<name>.json``,
  written by its full-size run). The notebooks are committed without outputs; a locally
  executed copy in ``notebooks/executed/`` is used instead when present. Nothing is
  executed at build time (``nb_execution_mode = "off"``).

Both folders are generated and ignored by git. :func:`public_modules` and :func:`homes` are
what ``tests/test_docs.py`` checks the built site against.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGES = ("design", "samplers", "validation")
#: public modules left out of the reference: the command line (documented in the user guide)
EXCLUDED = ("validation.workflow",)


def public_modules() -> list[str]:
    """Every public module with a non-empty ``__all__``: the packages first, then the rest
    in alphabetical order."""
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        found.append(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            parts = info.name.split(".")
            if any(p.startswith("_") for p in parts) or info.name.startswith(EXCLUDED):
                continue
            if getattr(importlib.import_module(info.name), "__all__", None):
                found.append(info.name)
    return [m for m in PACKAGES] + sorted(m for m in found if m not in PACKAGES)


def homes(modules) -> dict[tuple[str, str], str]:
    """``{(module, name): full name of the page documenting it}`` for every name of every
    module's ``__all__``. An object's page sits under the first module (in ``modules``'
    order) that exports it; a submodule named in an ``__all__`` is its own module page."""
    first: dict[int, str] = {}
    out = {}
    for module in modules:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if type(obj).__name__ == "module":
                out[(module, name)] = obj.__name__
                continue
            key = id(obj) if callable(obj) or isinstance(obj, type) else id((module, name))
            out[(module, name)] = first.setdefault(key, f"{module}.{name}")
    return out


def _first_line(module) -> str:
    doc = (importlib.import_module(module).__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ").rstrip(".") if doc else module


def _write(path: Path, text: str) -> None:
    """Write only on change, so an unchanged page is not read again."""
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def write_api(out: Path) -> None:
    modules = public_modules()
    home = homes(modules)
    for module in modules:
        mod = importlib.import_module(module)
        own, elsewhere, submodules = [], [], []
        for name in mod.__all__:
            target = home[(module, name)]
            if type(getattr(mod, name)).__name__ == "module":
                submodules.append(target)
            elif target == f"{module}.{name}":
                own.append(name)
            else:
                elsewhere.append(target)
        title = f"``{module}``"
        lines = [title, "=" * len(title), "", f".. automodule:: {module}", "   :no-members:",
                 "", f".. currentmodule:: {module}", ""]
        if own:
            lines += [".. autosummary::", "   :toctree: generated/", ""]
            lines += [f"   {name}" for name in own] + [""]
        if elsewhere:
            lines += ["Also exported here, documented where they are defined for users:", "",
                      ".. autosummary::", ""]
            lines += [f"   ~{target}" for target in elsewhere] + [""]
        if submodules:
            lines += ["Modules:", ""]
            lines += [f"* :doc:`{target}`" for target in submodules] + [""]
        _write(out / f"{module}.rst", "\n".join(lines))
    index = ["API reference", "=============", "",
             "Every name of every public module's ``__all__``, generated from the docstrings. "
             "Each object has one page, under the package that exports it to users "
             "(``samplers.AustereTest``); submodules that re-export it link there.", ""]
    for package in PACKAGES:
        members = [m for m in modules if m == package or m.startswith(package + ".")]
        index += [f".. rubric:: {package}", "", ".. list-table::", "   :widths: 30 70", ""]
        index += [f"   * - :doc:`{m}`\n     - {_first_line(m)}" for m in members] + [""]
        index += [".. toctree::", "   :hidden:", ""] + [f"   {m}" for m in members] + [""]
    _write(out / "index.rst", "\n".join(index))


def _gallery_cell(name: str) -> str | None:
    path = ROOT / "benchmarks" / "results" / f"notebook_{name}.json"
    if not path.exists():
        return None
    r = json.loads(path.read_text())
    text = ["**Results of the full-size run** (the notebook below is stored without outputs; "
            "`python notebooks/run_all.py` executes it).", ""]
    for fig in r.get("figures", []):
        text += [f"![{fig['caption']}](../figures/{fig['file']})", "", f"*{fig['caption']}*", ""]
    if r.get("rows"):
        text += ["| what | paper / target | ours |", "|---|---|---|"]
        cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
        text += [f"| {cell(x['what'])} | {cell(x['paper'])} | {cell(x['ours'])} |"
                 for x in r["rows"]]
    return "\n".join(text)


def write_gallery(out: Path) -> None:
    names = []
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        executed = ROOT / "notebooks" / "executed" / path.name
        nb = json.loads((executed if executed.exists() else path).read_text())
        nb["nbformat_minor"] = max(nb.get("nbformat_minor", 0), 5)
        for i, c in enumerate(nb["cells"]):
            c.setdefault("id", f"cell-{i}")
        cell = _gallery_cell(path.stem)
        if cell is not None:
            cells = nb["cells"]
            at = 1 if cells and cells[0]["cell_type"] == "markdown" else 0
            cells.insert(at, {"cell_type": "markdown", "id": "gallery-results", "metadata": {},
                              "source": cell.splitlines(keepends=True)})
        _write(out / path.name, json.dumps(nb, indent=1))
        names.append(path.stem)
    for stale in out.glob("*.ipynb"):
        if stale.stem not in names:
            stale.unlink()


_LITERAL = re.compile(r"(``.+?``|(?::[\w:+-]+:)?`[^`]+`_{0,2})")


def escape_bars(lines: list[str]) -> list[str]:
    """The docstrings write absolute values as plain text, ``|Delta|``, which reStructuredText
    reads as a substitution reference: escape each ``|`` of running text, leaving inline
    literals and roles, doctest blocks and indented literal / directive blocks (``::``, as
    ``.. math::``) as written."""
    out, block, doctest = [], None, False
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            doctest = False
            out.append(line)
            continue
        if block is not None and indent > block:
            out.append(line)
            continue
        block = None
        if doctest or line.lstrip().startswith(">>>"):
            doctest = True
            out.append(line)
            continue
        parts = _LITERAL.split(line)
        # in literals, the dot product "theta . x_i" is written with a middle dot: autosummary
        # ends a summary at the first ". " even inside a literal, leaving it unclosed
        out.append("".join(p.replace(" . ", " \u00b7 ") if i % 2 else p.replace("|", "\\|")
                           for i, p in enumerate(parts)))
        if line.rstrip().endswith("::"):
            block = indent
    return out


def _escape_docstring(app, what, name, obj, options, lines) -> None:
    lines[:] = escape_bars(lines)


def _generate(app, config) -> None:
    srcdir = Path(app.srcdir)
    write_api(srcdir / "api")
    write_gallery(srcdir / "gallery")


def _numpydoc_template_once():
    """numpydoc (1.x) builds a Jinja environment and compiles its docstring template anew for
    every docstring it formats (about 1,900 compilations here, a fifth of the build's CPU).
    Its ``get_doc_object`` is replaced by one that compiles the template at the first call,
    through numpydoc's own code, and hands that template to the later ones: the same template
    from the same loader, so the same pages."""
    from numpydoc import docscrape_sphinx as ds
    from numpydoc import numpydoc as nd

    if not hasattr(ds, "get_doc_object_orig"):     # another numpydoc: leave it as it is
        return
    first = nd.get_doc_object
    templates = {}

    def get_doc_object(obj, what=None, doc=None, config=None, builder=None):
        config = {} if config is None else config
        if id(builder) not in templates:
            out = first(obj, what, doc, config=config, builder=builder)
            templates[id(builder)] = config["template"]
            return out
        config["template"] = templates[id(builder)]
        return ds.get_doc_object_orig(obj, what=what, doc=doc, config=config,
                                      class_doc=ds.SphinxClassDoc,
                                      func_doc=ds.SphinxFunctionDoc, obj_doc=ds.SphinxObjDoc)

    nd.get_doc_object = get_doc_object


def setup(app):
    # config-inited: the pages exist before Sphinx lists the sources and autosummary
    # writes its stubs
    app.connect("config-inited", _generate)
    _numpydoc_template_once()
    app.connect("autodoc-process-docstring", _escape_docstring, priority=100)  # before numpydoc
    return {"parallel_read_safe": True, "parallel_write_safe": True}
