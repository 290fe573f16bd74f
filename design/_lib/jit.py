"""The one place that sets numba's compilation options.

Every compiled kernel in the toolkit is decorated with :func:`jit`. Kernels are small,
private and take arrays that were validated and coerced in Python before the call.
``error_model="numpy"`` lets floating-point division follow IEEE rules (inf/nan) instead
of raising, and no ``fastmath`` is used because log-densities can legitimately be -inf.

Caching closures
----------------
The compiled loops are built by factories (``samplers.mhtests.engine``, ``samplers.models._kernels``)
as closures over other compiled functions. numba keys the on-disk cache of a closure by a
pickle of its closure cells, and a pickled dispatcher carries the dispatcher's uuid, which
numba draws at random in each process: every new process missed the cache, recompiled the
loops (seconds for the Barker test) and appended another entry to the cache files. So
:func:`jit` (and :func:`intrinsic`) gives each dispatcher a uuid derived from what it compiles (module,
qualified name, bytecode, constants and names, and the closure cells, whose dispatchers
are pinned the same way): equal code gives equal keys across processes, and changed code
in a closure's cells still misses.

That hook, ``_set_uuid``, is private to numba (as is ``numba.core.serialize.dumps``), so
``pyproject.toml`` bounds numba's version and this module checks for it at every use: if a
numba release removes or changes it, the kernels fall back to numba's plain caching (correct
results, but the factory-built loops recompile in each new process) and one
:class:`NumbaCacheWarning` says so. ``tests/samplers/test_jit.py`` is the canary: a second
process must compile nothing.
"""

from __future__ import annotations

import hashlib
import os
import uuid
import warnings

import numba
from numba.extending import intrinsic as numba_intrinsic

try:  # private: pickles closure cells the way numba's cache does
    from numba.core.serialize import dumps
except ImportError:  # pragma: no cover - depends on the installed numba
    dumps = None

__all__ = ["PASS_THREADS", "NumbaCacheWarning", "intrinsic", "jit", "row_jit"]

OPTIONS = dict(cache=True, error_model="numpy", nogil=True)

#: Threads a full-data pass runs its compiled chunk kernels on (:mod:`design._lib.passes`):
#: every core. The kernels release the GIL (``nogil=True``), so plain Python threads run them
#: in parallel; numba's ``parallel=True`` is not used because its OpenMP threading layer
#: aborts a process forked after a parallel region (``sample_chains``' default process pool).
PASS_THREADS = os.cpu_count() or 1

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
    _pin_uuid(dispatcher, func)
    return dispatcher


def row_jit(func):
    """For the per-row kernels of the models: inlined into the loops that call them (numba
    IR inlining), which lets the compiler keep the model's data tuple out of the row loop."""
    return jit(func, inline="always")


def intrinsic(func):
    """``numba.extending.intrinsic`` with a uuid stable across processes (a compiled
    function that calls an intrinsic pickles it, uuid included, into its cache key)."""
    wrapped = numba_intrinsic(func)
    _pin_uuid(wrapped, func)
    return wrapped


class NumbaCacheWarning(UserWarning):
    """The installed numba no longer offers the private hook that pins dispatcher uuids."""


#: Set once the fallback has been announced (one warning per process).
_warned = False


def _pin_uuid(compiled, func) -> None:
    """Give ``compiled`` (a dispatcher or an intrinsic) the uuid :func:`stable_uuid` derives
    from ``func``, through numba's private ``_set_uuid``; without it, keep numba's random
    uuid (plain caching) and warn once."""
    hook = getattr(compiled, "_set_uuid", None)
    if hook is None or dumps is None:
        missing = ("numba.core.serialize.dumps" if dumps is None
                   else f"{type(compiled).__name__}._set_uuid")
        _fall_back(f"numba {numba.__version__} has no {missing}")
        return
    try:
        uid = stable_uuid(func)
        hook(uid)
        compiled._stable_uuid = uid     # stands for it in the uuids of closures over it
    except Exception as exc:  # a changed private hook: any failure means "cannot pin"
        _fall_back(f"numba {numba.__version__}'s {type(compiled).__name__}._set_uuid "
                   f"failed ({type(exc).__name__}: {exc})")


def _fall_back(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            f"{reason}: austerity's compiled loops fall back to numba's plain caching; results "
            f"are unchanged, but loops built by factories recompile in every new process "
            f"(seconds). austerity is tested with numba>=0.59,<0.69.",
            NumbaCacheWarning, stacklevel=4)   # the module that defines the kernel


def stable_uuid(func) -> str:
    """A uuid determined by ``func``'s module, name, code (bytecode, constants and the names
    it reads, nested functions' too) and closure cells.

    A cell holding a dispatcher (or intrinsic) pinned here is taken as its own uuid and
    options, which its code and cells determine in turn, rather than pickled whole: a
    factory's closure over closures pickled every function below it again (about 50 kB and
    30-40 ms for each of the chains' block loops, a tenth of a second of a first ``fit``).
    A closure's on-disk cache key is numba's pickle of its cells (a pinned dispatcher by
    this uuid), so a change in a compiled function a closure holds, a constant included,
    misses the cache. A global one a kernel calls is numba's own limit: its cache entry is
    keyed by its own file's time stamp only (a change in another file is not seen)."""
    digest = hashlib.sha256()
    digest.update(f"{func.__module__}.{func.__qualname__}".encode())
    _digest_code(func.__code__, digest)
    if func.__closure__:
        digest.update(dumps(tuple(_token(cell.cell_contents) for cell in func.__closure__)))
    return str(uuid.uuid5(_NAMESPACE, digest.hexdigest()))


def _digest_code(code, digest) -> None:
    """Add ``code``'s bytecode, the names it reads and its constants (nested code objects
    recursively) to ``digest``: a constant changed (``x * 2.0`` to ``x * 3.0``) leaves the
    bytecode as it was. Not ``marshal.dumps``, whose bytes follow reference counts."""
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, type(code)):
            _digest_code(const, digest)
        else:
            digest.update(_const_repr(const).encode())


def _const_repr(const) -> str:
    """A constant's repr, the same in every process (a frozenset's items sorted: its order
    follows string hashing, which is salted per process)."""
    if isinstance(const, frozenset):
        return "frozenset(" + ", ".join(sorted(map(_const_repr, const))) + ")"
    if isinstance(const, tuple):
        return "(" + ", ".join(map(_const_repr, const)) + ",)"
    return repr(const)


def _token(obj):
    """What stands for a closure cell's contents in :func:`stable_uuid`: a pinned compiled
    function's uuid and options, anything else itself."""
    if isinstance(obj, type) or not type(obj).__module__.startswith("numba."):
        return obj
    uid = getattr(obj, "_stable_uuid", None)
    if not isinstance(uid, str):
        return obj
    return ("pinned", type(obj).__name__, uid, repr(sorted(getattr(obj, "targetoptions",
                                                                   {}).items())))
