"""Load the design reference modules kept beside the tests (``tests/design/reference``).

They are imported under their file name, as the test suite's fixtures do, so that numba's
cache of their compiled functions is shared.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "design" / "reference"


def reference(name: str):
    """Import ``tests/design/reference/<name>.py`` as module ``name``."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REFERENCE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
