"""Print a pip constraints file pinning each runtime dependency to its declared lower bound.

``python .ci/lowest_constraints.py > lowest.txt; pip install -c lowest.txt -e .`` installs
the oldest versions pyproject.toml claims to support (pip has no ``--resolution lowest``).
A dependency without a ``>=`` bound is left free.
"""

import re
import sys
import tomllib
from pathlib import Path

root = Path(__file__).resolve().parent.parent
project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
for requirement in project["dependencies"]:
    match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*(.*)", requirement)
    name, spec = match.group(1), match.group(2)
    lower = re.search(r">=\s*([0-9][^,;\s]*)", spec)
    if lower is None:
        print(f"# {name}: no lower bound declared", file=sys.stderr)
        continue
    print(f"{name}=={lower.group(1)}")
