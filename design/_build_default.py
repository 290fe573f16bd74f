"""Build the tables shipped in ``design/data`` with the library's own :func:`build` code.

Run from the repository root::

    python -m design._build_default

It writes ``design/data/correction_sigma1.npz`` (``build(1.0)``, the minimax table) and
``design/data/skew_correction_sigma1.npz`` (``build_skew(1.0)``), and prints what it built.
"""

from __future__ import annotations

import time
from pathlib import Path

from . import correction

DATA = Path(__file__).resolve().parent / "data"


def main() -> None:
    DATA.mkdir(exist_ok=True)
    start = time.perf_counter()
    table = correction.build(1.0)
    table.save(DATA / correction._DEFAULT_FILE)
    print(f"{table}  ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    family = correction.build_skew(1.0)
    family.save(DATA / correction._DEFAULT_SKEW_FILE)
    print(f"{family}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
