"""The one place that sets numba's compilation options.

Every compiled kernel in the toolkit is decorated with :func:`jit`. Kernels are small,
private and take arrays that were validated and coerced in Python before the call.
``error_model="numpy"`` lets floating-point division follow IEEE rules (inf/nan) instead
of raising, and no ``fastmath`` is used because log-densities can legitimately be -inf.

Caching closures
----------------
The compiled loops are built by factories (``samplers._seq``, ``samplers.models._kernels``)
as closures over other compiled functions. numba keys the on-disk cache of a closure by a
pickle of its closure cells, and a pickled dispatcher carries the dispatcher's uuid, which
numba draws at random in each process: every new process missed the cache, recompiled the
loops (seconds for the Barker test) and appended another entry to the cache files. So
:func:`jit` (and :func:`intrinsic`) gives each dispatcher a uuid derived from what it compiles (module, qualified
name, bytecode and the pickled closure cells, whose dispatchers are pinned the same way):
equal code gives equal keys across processes, and changed code still misses.
"""

from __future__ import annotations

import hashlib
import uuid

import numba
from numba.core.serialize import dumps
from numba.extending import intrinsic as numba_intrinsic

__all__ = ["intrinsic", "jit", "row_jit"]

OPTIONS = dict(cache=True, error_model="numpy", nogil=True)

_NAMESPACE = uuid.UUID("5b0c3a8e-2f4d-4c1e-9a57-6d2f1e0b7c93")


def jit(func=None, **options):
    """``numba.njit`` with the toolkit's options and a uuid stable across processes.

    >>> from design._lib.moments import batch_moments3
    >>> batch_moments3._uuid == stable_uuid(batch_moments3.py_func)
    True
    """
    if func is None:
        return lambda f: jit(f, **options)
    dispatcher = numba.njit(func, **{**OPTIONS, **options})
    dispatcher._set_uuid(stable_uuid(func))
    return dispatcher


def row_jit(func):
    """For the per-row kernels of the models: inlined into the loops that call them (numba
    IR inlining), which lets the compiler keep the model's data tuple out of the row loop."""
    return jit(func, inline="always")


def intrinsic(func):
    """``numba.extending.intrinsic`` with a uuid stable across processes (a compiled
    function that calls an intrinsic pickles it, uuid included, into its cache key)."""
    wrapped = numba_intrinsic(func)
    wrapped._set_uuid(stable_uuid(func))
    return wrapped


def stable_uuid(func) -> str:
    """A uuid determined by ``func``'s module, name, bytecode and closure cells."""
    digest = hashlib.sha256()
    digest.update(f"{func.__module__}.{func.__qualname__}".encode())
    digest.update(func.__code__.co_code)
    if func.__closure__:
        digest.update(dumps(tuple(cell.cell_contents for cell in func.__closure__)))
    return str(uuid.uuid5(_NAMESPACE, digest.hexdigest()))
