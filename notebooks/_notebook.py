"""What the notebooks in ``notebooks/`` share: their run size and where their results go.

Project tooling, not part of the packages (it lives beside the notebooks and is imported
by its file name, the notebooks running in this folder).

A notebook begins with::

    from _notebook import Notebook      # this file; a notebook runs in notebooks/
    nb = Notebook("03_bias_variance")
    N = nb.pick(small=2_000, full=12_214)

The environment variable ``AUSTERITY_NOTEBOOK_SIZE`` selects the size: ``full`` (the
default, run by hand: the paper's setting, minutes) or ``small`` (what CI runs: the same
code on a problem small enough for seconds). At full size :meth:`Notebook.save_figure`
writes ``docs/figures/<name>_<figure>.png`` and :meth:`Notebook.report` writes
``benchmarks/results/notebook_<name>.json``, the files the documentation's gallery and
results page are built from (``python benchmarks/report.py``); at small size both go
to a temporary folder, so running the notebooks in CI never overwrites what is committed.
``AUSTERITY_NOTEBOOK_OUTPUT`` sends both to a folder of your choice at either size.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Notebook", "Row", "SIZES"]

SIZES = ("small", "full")
SIZE_VARIABLE = "AUSTERITY_NOTEBOOK_SIZE"
OUTPUT_VARIABLE = "AUSTERITY_NOTEBOOK_OUTPUT"

#: The source checkout (this file is ``<root>/notebooks/_notebook.py``).
ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import machine  # noqa: E402  the benchmarks' record of the machine


@dataclass(frozen=True)
class Row:
    """One line of a notebook's closing table: the paper's number beside ours.

    ``what`` names the quantity, ``paper`` quotes the paper (or a target), ``ours`` is
    computed in the notebook, ``note`` is a sentence on any difference, ``how`` the setting
    (shown in the README's reproduction table).
    """

    what: str
    paper: str
    ours: str
    note: str = ""
    how: str = ""


class Table:
    """A notebook's closing table; Jupyter shows it as Markdown. ``path``: its JSON file."""

    def __init__(self, rows, path=None):
        self.rows = tuple(rows)
        self.path = path

    def _repr_markdown_(self) -> str:
        lines = ["| | paper | ours | difference |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(markdown_cell(c) for c in (r.what, r.paper, r.ours, r.note)) + " |"
                  for r in self.rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._repr_markdown_()


def markdown_cell(text: str) -> str:
    r"""``text`` made safe for a Markdown table cell (a literal ``|`` would end the cell).

    >>> print(markdown_cell("max |z| = 2"))
    max \|z\| = 2
    """
    return str(text).replace("|", "\\|").replace("\n", " ")


def _size_from_environment() -> str:
    size = os.environ.get(SIZE_VARIABLE, "full").strip().lower() or "full"
    if size not in SIZES:
        raise ValueError(f"{SIZE_VARIABLE} must be 'small' or 'full', got {size!r}")
    return size


class Notebook:
    """Size switch and output destinations of one notebook.

    Parameters
    ----------
    name : str
        The notebook's file name without ``.ipynb``, e.g. ``"02_test_design"``.
    size : {"small", "full"}, optional
        Overrides ``AUSTERITY_NOTEBOOK_SIZE``.
    output : path, optional
        Overrides ``AUSTERITY_NOTEBOOK_OUTPUT``: one folder for figures and results.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     nb = Notebook("00_example", size="small", output=tmp)
    ...     n = nb.pick(small=100, full=10_000)
    ...     table = nb.report([Row("a number", "1.0", f"{n / 100:.1f}", "none")], n=n)
    ...     (n, table.path.name, table.path.parent == nb.figure_dir)
    (100, 'notebook_00_example.json', True)
    >>> print(table)
    | | paper | ours | difference |
    |---|---|---|---|
    | a number | 1.0 | 1.0 | none |
    """

    def __init__(self, name: str, *, size: str | None = None, output=None):
        self.name = name
        self.size = _size_from_environment() if size is None else size
        if self.size not in SIZES:
            raise ValueError(f"size must be 'small' or 'full', got {self.size!r}")
        if output is None:
            output = os.environ.get(OUTPUT_VARIABLE) or None
        if output is not None:
            self.figure_dir = self.results_dir = Path(output)
        elif self.size == "small":
            self.figure_dir = self.results_dir = Path(tempfile.gettempdir()) / "austerity-notebooks"
        else:
            if not (ROOT / "pyproject.toml").is_file():
                raise RuntimeError(
                    f"at full size the notebooks write into the source checkout, but {ROOT} is "
                    f"not one; set {OUTPUT_VARIABLE} to a folder")
            self.figure_dir = ROOT / "docs" / "figures"
            self.results_dir = ROOT / "benchmarks" / "results"
        self.figures: list[dict] = []
        self._t0 = time.perf_counter()

    def __repr__(self):
        return (f"Notebook({self.name!r}, size={self.size!r}): figures to {self.figure_dir}, "
                f"results to {self.results_path}")

    @property
    def full(self) -> bool:
        """True at full size."""
        return self.size == "full"

    def pick(self, *, small, full):
        """The value for this run's size."""
        return full if self.full else small

    @property
    def results_path(self) -> Path:
        return self.results_dir / f"notebook_{self.name}.json"

    def save_figure(self, fig, figure: str, caption: str = "") -> Path:
        """Save ``fig`` as ``<name>_<figure>.png``; the caption goes to the README gallery."""
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        path = self.figure_dir / f"{self.name}_{figure}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        self.figures = [f for f in self.figures if f["file"] != path.name]
        self.figures.append({"file": path.name, "caption": caption})
        return path

    def report(self, rows, **numbers) -> Table:
        """Write the closing table and the headline numbers as JSON; return the table.

        ``rows`` are :class:`Row`; ``numbers`` any results worth keeping beside them (numbers,
        strings, lists, dicts, NumPy scalars and arrays). The returned :class:`Table` shows
        itself as Markdown when it ends a cell.
        """
        rows = [r if isinstance(r, Row) else Row(**r) for r in rows]
        payload = {
            "notebook": self.name,
            "size": self.size,
            "machine": machine(),
            "runtime_seconds": round(time.perf_counter() - self._t0, 1),
            "rows": [asdict(r) for r in rows],
            "figures": self.figures,
            "numbers": numbers,
        }
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.results_path.write_text(json.dumps(payload, indent=2, default=_plain) + "\n")
        return Table(rows, self.results_path)


def _plain(obj):
    """JSON fallback for NumPy scalars and arrays."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
