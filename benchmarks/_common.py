"""Shared by the benchmark scripts: where results go and what machine produced them."""

from __future__ import annotations

import json
from pathlib import Path

from samplers._notebook import machine

RESULTS = Path(__file__).resolve().parent / "results"


def write(name: str, payload: dict) -> Path:
    """Write ``payload`` (plus machine info) to ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2, default=float) + "\n")
    print(f"\nwrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return path
