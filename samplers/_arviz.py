"""ArviZ conversion for ArviZ 0.x (``InferenceData``) and 1.x (``xarray.DataTree``).

ArviZ 1.x moved the converters to ``arviz_base``: ``from_dict`` takes one dictionary of
groups and returns a DataTree; 0.x takes one keyword per group and returns an
InferenceData. Both results have a ``posterior`` group with dims ``(chain, draw, <dim>)``,
the parameter names as coordinates of ``<dim>``, and a ``sample_stats`` group; both work
with ``az.summary``, ``az.ess``, ``az.mcse`` and ``az.plot_trace``.

A note on ArviZ 0.23 with NumPy >= 2.4: the numba path of ``az.mcse(..., method="sd")``
calls ``float()`` on a one-element array, which NumPy 2.4 refuses (TypeError; NumPy 1.25
to 2.3 warn that it is deprecated). The first
:func:`import_arviz` (every ``to_arviz()`` goes through it) probes that function once and,
only if it fails, switches ArviZ's optional numba acceleration off with ArviZ's public
``az.Numba.disable_numba()``; the NumPy path computes the same quantities. ArviZ 1.x is not
affected. Call ``az.Numba.enable_numba()`` to undo it.

:func:`to_inference_data` on ArviZ 1.x imports only ``arviz_base`` (``from_dict``, the same
function ``arviz.from_dict`` is): ``import arviz`` also imports ``arviz_stats`` and
``arviz_plots`` (matplotlib), about 1.5 s more of a first ``fit``'s ``result`` step than
``arviz_base``. :func:`import_arviz` still gives the whole module.
"""

from __future__ import annotations

import sys
from importlib import metadata

import numpy as np

from design._lib.warnstate import caught_warnings

__all__ = ["import_arviz", "arviz_major", "check_names", "to_inference_data"]

_checked = False


def import_arviz():
    """Import ArviZ quietly (no refactor announcement) and work around its known defects.

    Returns the ``arviz`` module (0.x or 1.x). With ArviZ 0.23 and NumPy >= 2.4 it switches
    ArviZ's numba acceleration off once, because ``az.mcse(..., method="sd")`` fails on that
    path (module docstring).

    Examples
    --------
    >>> from samplers import import_arviz
    >>> az = import_arviz()
    >>> int(az.__version__.split(".")[0]) in (0, 1)
    True
    """
    global _checked
    with caught_warnings("ignore", FutureWarning), \
            caught_warnings("ignore", message=".*ArviZ is undergoing a major refactor.*"):
        import arviz as az
    if not _checked:
        _checked = True
        if arviz_major(az) == 0 and _numba_mcse_broken(az):
            az.Numba.disable_numba()
    return az


def arviz_major(az=None) -> int:
    """ArviZ's major version (0 or 1)."""
    if az is None:
        az = import_arviz()
    return int(str(az.__version__).split(".")[0])


def _numba_mcse_broken(az) -> bool:
    """Does ArviZ 0.x's numba ``_sqrt`` give an array ``float()`` refuses (NumPy >= 2.4)?"""
    numba_state = getattr(az, "Numba", None)
    if numba_state is None or not getattr(numba_state, "numba_flag", False):
        return False
    try:
        from arviz.stats.stats_utils import _sqrt
    except ImportError:   # a later 0.x without the helper: nothing to work around
        return False
    # ArviZ 0.x's _sqrt is a numba ufunc (DUFunc): on shape-(1,) arrays it gives a shape-(1,)
    # array, as every ufunc does. Calling it would compile it (0.08 s of a first fit), so a
    # ufunc is probed through NumPy's own, which answers the same question
    probe = (lambda a, b: np.sqrt(a + b)) if hasattr(_sqrt, "ufunc") else _sqrt
    with caught_warnings("error", DeprecationWarning):   # NumPy 1.25-2.3: deprecated
        try:
            float(probe(np.ones(1), np.zeros(1)))
        except (TypeError, DeprecationWarning):
            return True
    return False


def _from_dict():
    """``(from_dict, major)``: ArviZ 1.x's converter from ``arviz_base`` alone, unless
    ``arviz`` is imported already; ArviZ 0.x's (or an unknown installation's) through
    :func:`import_arviz`."""
    az = sys.modules.get("arviz")
    if az is None and _installed_major() == 1:
        import arviz_base
        return arviz_base.from_dict, 1
    az = import_arviz()
    return az.from_dict, arviz_major(az)


def _installed_major():
    """The installed ArviZ's major version, read from its metadata (without importing it),
    or None if the metadata cannot say."""
    try:
        return int(metadata.version("arviz").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return None


def check_names(var_name, names):
    """Refuse a ``var_name`` that is not a non-empty string and ``names`` that are not a
    sequence (a string would be split into its characters), before any work."""
    if not isinstance(var_name, str):
        raise TypeError(f"var_name must be a string, got {type(var_name).__name__}")
    if not var_name.strip():
        raise ValueError(f"var_name must be a non-empty name, got {var_name!r}")
    if names is not None and (isinstance(names, (str, bytes)) or np.ndim(names) != 1):
        hint = (" (one string: pass [name] for one parameter)"
                if isinstance(names, (str, bytes)) else "")
        raise TypeError(f"names must be a sequence of strings, one per parameter, got "
                        f"{names!r}{hint}")


def to_inference_data(samples, stats: dict, *, var_name: str = "theta", names=None,
                      attrs: dict | None = None):
    """Posterior ``samples`` of shape (chains, draws, d) and ``stats`` (chains, draws) to ArviZ.

    ``names`` (d strings, default ``0 .. d-1``) label the coordinate ``<var_name>_dim``.
    Returns an InferenceData (ArviZ 0.x) or a DataTree (ArviZ 1.x); ``attrs`` go to the
    root and to each group.
    """
    check_names(var_name, names)
    from_dict, major = _from_dict()
    samples = np.asarray(samples)
    d = samples.shape[-1]
    dim = f"{var_name}_dim"
    if names is None:
        labels = np.arange(d)
    else:
        labels = [str(n) for n in names]
        if len(labels) != d:
            raise ValueError(f"names must have one entry per parameter ({d}), "
                             f"got {len(labels)}")
        if len(set(labels)) != d:
            raise ValueError(f"names must be distinct, got {labels}")
    stats = {k: np.asarray(v) for k, v in stats.items()}
    attrs = dict(attrs or {})
    dims, coords = {var_name: [dim]}, {dim: labels}
    if major == 0:
        return from_dict(posterior={var_name: samples}, sample_stats=stats, dims=dims,
                            coords=coords, attrs=attrs)
    tree = from_dict({"posterior": {var_name: samples}, "sample_stats": stats},
                        dims=dims, coords=coords)
    tree.attrs.update(attrs)
    for group in ("posterior", "sample_stats"):
        tree[group].attrs.update(attrs)
    return tree
