"""Branch-free ``exp``, ``log1p`` and ``log sigmoid`` that the compiler can vectorise.

numba calls the C library's scalar ``exp`` and ``log1p`` (the pip builds of llvmlite have no
SVML), so a loop over rows that evaluates ``log sigmoid`` runs one element at a time, and a
full logistic pass costs several times what JAX's vectorised approximations cost. These
versions are straight-line arithmetic (selects instead of branches, no calls), which LLVM
turns into SIMD code when a loop maps them over an array; they are accurate to 3 ulp (tested
against SciPy). Compile them with ``error_model="numpy"`` (the toolkit's default): Python's
error model adds a zero-division branch that stops the vectoriser.

* ``exp(x)`` for ``x <= 0``: ``x = k ln 2 + r`` with ``k = round(x / ln 2)``, ``|r| <= ln 2 / 2``
  (Cody & Waite's two-part ln 2), ``exp(r)`` by its Taylor polynomial of degree 13
  (truncation below ``1e-17`` relative), times ``2**k`` built from its exponent bits.
  ``x`` is clamped at -708 (``exp(-708) ~ 3e-308``, the last normal range).
* ``log1p(t)`` for ``0 <= t <= 1``: ``log1p(t) = 2 atanh(s)``, ``s = t / (2 + t) <= 1/3``,
  ``atanh(s) = s (1 + s^2/3 + s^4/5 + ...)`` to ``s^34`` (truncation below ``1e-18``).
* ``log sigmoid(z) = min(z, 0) - log1p(exp(-|z|))``; NaN gives NaN.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types

from .jit import intrinsic, row_jit

__all__ = ["exp_nonpositive", "log1p_unit", "log_sigmoid"]

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01   # ln 2 to 32 bits: k * _LN2_HI is exact for |k| < 2**21
_LN2_LO = 1.90821492927058770002e-10
_EXP_FLOOR = -708.0


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float64 whose IEEE-754 bit pattern is the int64 ``bits``."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.bitcast(value, ir.DoubleType())

    return types.float64(bits), codegen


@row_jit
def exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` (3 ulp; ``exp(-708)`` for ``x < -708``), branch-free.

    >>> import math
    >>> abs(exp_nonpositive(-1.5) - math.exp(-1.5)) < 1e-15
    True
    """
    x = x if x > _EXP_FLOOR else _EXP_FLOOR
    kf = math.floor(x * _LOG2E + 0.5)
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * _float_from_bits((np.int64(kf) + 1023) << 52)


@row_jit
def log1p_unit(t):
    """``log(1 + t)`` for ``0 <= t <= 1`` (3 ulp), branch-free.

    >>> import math
    >>> abs(log1p_unit(0.25) - math.log1p(0.25)) < 1e-16
    True
    """
    s = t / (2.0 + t)
    z = s * s
    p = 1.0 / 35.0
    p = p * z + 1.0 / 33.0
    p = p * z + 1.0 / 31.0
    p = p * z + 1.0 / 29.0
    p = p * z + 1.0 / 27.0
    p = p * z + 1.0 / 25.0
    p = p * z + 1.0 / 23.0
    p = p * z + 1.0 / 21.0
    p = p * z + 1.0 / 19.0
    p = p * z + 1.0 / 17.0
    p = p * z + 1.0 / 15.0
    p = p * z + 1.0 / 13.0
    p = p * z + 1.0 / 11.0
    p = p * z + 1.0 / 9.0
    p = p * z + 1.0 / 7.0
    p = p * z + 1.0 / 5.0
    p = p * z + 1.0 / 3.0
    return 2.0 * s + 2.0 * s * (z * p)


@row_jit
def log_sigmoid(z):
    """``log(1 / (1 + exp(-z)))`` without overflow (3 ulp for ``|z| < 708``), branch-free.

    >>> from scipy.special import log_expit
    >>> bool(abs(log_sigmoid(-3.0) - log_expit(-3.0)) < 1e-15)
    True
    """
    low = 0.0 if z >= 0.0 else z           # NaN stays NaN
    return low - log1p_unit(exp_nonpositive(-abs(z)))
