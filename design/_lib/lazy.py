"""Lazy package attributes (PEP 562): a package's ``__init__`` names what it exports and
from which submodule, and a submodule is imported on first use of one of its names.

So ``import design`` costs milliseconds and loads neither SciPy nor numba; ``design.optimize``
loads what the optimiser needs when it is first used. (SciPy and scikit-image do the same with
``lazy_loader.attach``.)
"""

from __future__ import annotations

import importlib
import sys


def attach(package: str, exports: dict[str, str], submodules=()):
    """``(__getattr__, __dir__, __all__)`` for ``package``.

    ``exports`` maps each exported name to the relative submodule that defines it
    (``{"optimize": "._optimize"}``); ``submodules`` are public submodules loaded on first
    attribute access (``design.correction``).

    Examples
    --------
    >>> import json
    >>> getattr_, dir_, all_ = attach("json", {"JSONDecoder": ".decoder"}, ["scanner"])
    >>> getattr_("JSONDecoder") is json.decoder.JSONDecoder, getattr_("scanner").__name__
    (True, 'json.scanner')
    >>> all_
    ['JSONDecoder', 'scanner']
    """
    exports = dict(exports)
    submodules = frozenset(submodules)

    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)      # later lookups skip this function
        return value

    def __dir__():
        return sorted(set(exports) | submodules)

    return __getattr__, __dir__, sorted(set(exports) | submodules)
