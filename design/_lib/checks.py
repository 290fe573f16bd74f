"""Argument validation shared by the public entry points of all three packages.

Every check raises ``ValueError`` for a bad value and ``TypeError`` for a bad type, with a
message that names the argument, the value received and what is accepted.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

__all__ = [
    "as_generator",
    "check_int",
    "check_interval",
    "check_finite_array",
    "check_positive",
]


def as_generator(rng=None) -> np.random.Generator:
    """Normalise ``rng`` (None, a seed, a SeedSequence or a Generator) to a Generator."""
    if isinstance(rng, np.random.RandomState):
        raise TypeError(
            "rng must be None, an int seed, a SeedSequence or a numpy.random.Generator; "
            "got a legacy RandomState (use numpy.random.default_rng instead)"
        )
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "rng must be None, an int seed, a SeedSequence or a numpy.random.Generator, "
            f"got {rng!r}"
        ) from exc


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int, checking ``low <= value <= high`` (bounds inclusive)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        try:
            as_int = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an integer, got {value!r}") from None
        value = as_int
    value = int(value)
    if low is not None and value < low:
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    if high is not None and value > high:
        bound = f"<= {high}" if low is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def _as_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0 and np.isrealobj(value):
            return float(value)
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def check_interval(
    name: str,
    value,
    low: float,
    high: float,
    *,
    closed: str = "neither",
) -> float:
    """Return ``value`` as a float, checking it lies in the interval from low to high.

    ``closed`` is one of ``"neither"`` (open interval), ``"left"``, ``"right"``, ``"both"``.
    """
    value = _as_real(name, value)
    left_ok = value >= low if closed in ("left", "both") else value > low
    right_ok = value <= high if closed in ("right", "both") else value < high
    if not (np.isfinite(value) and left_ok and right_ok):
        lb = "[" if closed in ("left", "both") else "("
        rb = "]" if closed in ("right", "both") else ")"
        raise ValueError(f"{name} must be in {lb}{low:g}, {high:g}{rb}, got {value!r}")
    return value


def check_positive(name: str, value, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a finite float, checking it is > 0 (or >= 0)."""
    return check_interval(name, value, 0.0, np.inf, closed="left" if allow_zero else "neither")


def check_finite_array(name: str, arr, *, ndim: int | tuple[int, ...] | None = None,
                       dtype=np.float64) -> np.ndarray:
    """Return a new float array copy of ``arr`` after checking shape and finiteness.

    The caller's array is never returned (and so never mutated downstream).
    """
    try:
        out = np.array(arr, dtype=dtype, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like of real numbers, got {type(arr).__name__}") from exc
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if out.ndim not in allowed:
            raise ValueError(
                f"{name} must have {' or '.join(map(str, allowed))} dimension(s), "
                f"got shape {out.shape}"
            )
    if not np.all(np.isfinite(out)):
        bad = np.flatnonzero(~np.isfinite(out.ravel()))
        raise ValueError(
            f"{name} must be finite; {bad.size} non-finite value(s), first at flat index {bad[0]}"
        )
    return out
