"""Short text for results whose fields are large arrays (their reprs stay one line)."""

from __future__ import annotations

import numpy as np

__all__ = ["short_array", "short_repr"]


def short_array(a, *, max_items: int = 4) -> str:
    """A one-line description of an array: its values if few, else shape, dtype and range.

    Examples
    --------
    >>> short_array([1.0, 2.5])
    '[1, 2.5]'
    >>> short_array(np.arange(10.0))
    'array(shape=(10,), float64, min 0, max 9)'
    """
    arr = np.asarray(a)
    if arr.ndim <= 1 and arr.size <= max_items:
        return "[" + ", ".join(f"{v:.4g}" if np.issubdtype(arr.dtype, np.floating) else str(v)
                               for v in arr.reshape(-1).tolist()) + "]"
    text = f"array(shape={arr.shape}, {arr.dtype}"
    if arr.size and np.issubdtype(arr.dtype, np.number) and not np.iscomplexobj(arr):
        text += f", min {np.nanmin(arr):.4g}, max {np.nanmax(arr):.4g}"
    return text + ")"


def short_repr(obj, *, limit: int = 100) -> str:
    """``repr(obj)`` if it is one line of at most ``limit`` characters, else ``Type(...)``.

    Examples
    --------
    >>> short_repr(np.eye(3))
    'ndarray(...)'
    >>> short_repr(1.5)
    '1.5'
    """
    text = repr(obj)
    if "\n" in text or len(text) > limit:
        return f"{type(obj).__name__}(...)"
    return text
