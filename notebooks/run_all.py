"""Execute the notebooks and keep the executed copies outside git.

    python notebooks/run_all.py                   # every notebook, full size
    python notebooks/run_all.py 03 06             # the notebooks whose names start so
    python notebooks/run_all.py --size small      # what CI runs (figures to a temporary folder)
    python notebooks/run_all.py --strip           # clear outputs of the notebooks in place

Executed copies go to ``notebooks/executed/`` (ignored by git); the committed notebooks stay
without outputs. At full size the notebooks write their figures to ``docs/figures/`` and their
numbers to ``benchmarks/results/notebook_<name>.json``; then run
``python benchmarks/report.py`` to regenerate the documentation's gallery and results page.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def notebooks(prefixes=()) -> list[Path]:
    """The numbered notebooks, optionally those whose names start with one of ``prefixes``."""
    found = sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in found if not prefixes or p.name.startswith(tuple(prefixes))]


def execute(path: Path, *, timeout=None) -> nbformat.NotebookNode:
    """Run ``path`` in a fresh kernel with the notebook folder as working directory."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def strip(path: Path) -> bool:
    """Clear the outputs and execution counts of ``path`` in place; True if it changed."""
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None):
            cell.outputs, cell.execution_count, changed = [], None, True
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="name prefixes, e.g. 03 or 06_firefly")
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--out", type=Path, default=HERE / "executed",
                        help="folder for the executed copies (default notebooks/executed)")
    parser.add_argument("--strip", action="store_true",
                        help="clear the outputs of the notebooks in place (before committing)")
    args = parser.parse_args(argv)
    if args.strip:
        for path in notebooks(args.names):
            print(f"{path.name}: {'stripped' if strip(path) else 'clean'}")
        return 0
    paths = notebooks(args.names)
    if not paths:
        print(f"no notebook matches {args.names}", file=sys.stderr)
        return 1
    os.environ["AUSTERITY_NOTEBOOK_SIZE"] = args.size   # inherited by the kernels
    args.out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        t0 = time.perf_counter()
        print(f"{path.name} ({args.size}) ...", end=" ", flush=True)
        nb = execute(path)
        nbformat.write(nb, args.out / path.name)
        print(f"{time.perf_counter() - t0:.0f} s -> {args.out / path.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
