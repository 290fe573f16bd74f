"""Priors for the built-in models: log-density and gradient of a parameter vector.

Each prior is a small frozen object with ``logpdf(theta)`` and ``grad(theta)``; parameters
broadcast against the dimension of ``theta``. Models call :meth:`Prior.bind` once with their
dimension, which checks and broadcasts the parameters.

The built-in priors also give their parameters as a kernel tuple (``Prior._kernel()``:
``(code, a, b, const)``) for the compiled chain loops, which evaluate them with
:func:`prior_logpdf` and :func:`prior_grad`: the same arithmetic as ``logpdf`` and ``grad``
(the Gaussian's ``z @ z`` through the same BLAS ``ddot``, the Laplace's sum in NumPy's
pairwise order), so both give the same bits (``tests/samplers/test_blocks.py``).

A prior the codes do not cover can still run compiled: :class:`CompiledPrior` wraps two
numba functions of theta (a log density and its gradient, e.g. a NumPyro model's prior
translated from JAX by :mod:`samplers.models.jaxpr_numba`) and hands the loops a handle in the
code's place; :func:`prior_logpdf` and :func:`prior_grad` call the functions when they are
given such a handle (resolved when the loop is compiled, by the handle's numba type).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
from numba.core import types
from numba.extending import (NativeValue, models, overload, register_model, typeof_impl,
                             unbox)

from design._lib.checks import check_finite_array
from design._lib.jit import jit

__all__ = ["Prior", "FlatPrior", "GaussianPrior", "LaplacePrior", "CompiledPrior"]

_LOG_2PI = float(np.log(2 * np.pi))

#: Codes of the built-in priors in their kernel tuples.
FLAT, GAUSSIAN, LAPLACE = 0, 1, 2
_NONE = np.zeros(0)


@jit
def pairwise_sum(a):
    """``np.sum(a)`` of a contiguous float64 vector, bit for bit: NumPy's pairwise summation
    (blocks of at most 128 summed with eight accumulators, halves added recursively)."""
    n = a.shape[0]
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        r = a[:8].copy()
        top = n - n % 8
        for i in range(8, top, 8):
            for j in range(8):
                r[j] += a[i + j]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(top, n):
            res += a[i]
        return res
    half = n // 2
    half -= half % 8
    return pairwise_sum(a[:half]) + pairwise_sum(a[half:])


@jit
def _code_logpdf(code, a, b, const, theta):
    """Log density of a built-in prior from its code and parameters."""
    if code == GAUSSIAN:
        z = (theta - a) / b
        return const - 0.5 * np.dot(z, z)
    if code == LAPLACE:
        return -pairwise_sum(np.abs(theta - a) / b) - const
    return 0.0


@jit
def _code_grad(code, a, b, const, theta, out):
    """Gradient of a built-in prior's log density into ``out``."""
    for j in range(theta.shape[0]):
        if code == GAUSSIAN:
            out[j] = -(theta[j] - a[j]) / (b[j] * b[j])
        elif code == LAPLACE:
            out[j] = -np.sign(theta[j] - a[j]) / b[j]
        else:
            out[j] = 0.0


class PriorFunctions:
    """The handle a :class:`CompiledPrior` puts in its kernel tuple in place of the code: its
    numba functions ``logpdf(theta) -> float`` and ``grad(theta, out)``, and ``key``, which
    names them in the compiled loops' types (equal keys must mean equal functions)."""

    __slots__ = ("logpdf", "grad", "key")

    def __init__(self, logpdf, grad, key):
        self.logpdf, self.grad, self.key = logpdf, grad, str(key)


class PriorFunctionsType(types.Type):
    """numba's type of a :class:`PriorFunctions`: the functions live in the type (a loop is
    compiled for them, as for any numba function it calls); the value carries nothing."""

    def __init__(self, logpdf, grad, key):
        self.logpdf, self.grad = logpdf, grad
        super().__init__(name=f"PriorFunctions({key})")


@typeof_impl.register(PriorFunctions)
def _typeof_prior_functions(val, c):
    return PriorFunctionsType(val.logpdf, val.grad, val.key)


register_model(PriorFunctionsType)(models.OpaqueModel)


@unbox(PriorFunctionsType)
def _unbox_prior_functions(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


def prior_logpdf(code, a, b, const, theta):
    """Log density of a prior from its kernel tuple (see :meth:`Prior._kernel`): a built-in
    prior's code and parameters, or a :class:`CompiledPrior`'s functions."""
    if isinstance(code, PriorFunctions):
        return float(code.logpdf(theta))
    return _code_logpdf(code, a, b, const, theta)


def prior_grad(code, a, b, const, theta, out):
    """Gradient of a prior's log density into ``out`` (kernel tuple as :func:`prior_logpdf`)."""
    if isinstance(code, PriorFunctions):
        code.grad(theta, out)
    else:
        _code_grad(code, a, b, const, theta, out)


@overload(prior_logpdf, jit_options=dict(error_model="numpy"))
def _prior_logpdf_compiled(code, a, b, const, theta):
    if isinstance(code, PriorFunctionsType):
        logpdf = code.logpdf

        def call(code, a, b, const, theta):
            return logpdf(theta)
        return call

    def builtin(code, a, b, const, theta):
        return _code_logpdf(code, a, b, const, theta)
    return builtin


@overload(prior_grad, jit_options=dict(error_model="numpy"))
def _prior_grad_compiled(code, a, b, const, theta, out):
    if isinstance(code, PriorFunctionsType):
        grad = code.grad

        def call(code, a, b, const, theta, out):
            grad(theta, out)
        return call

    def builtin(code, a, b, const, theta, out):
        _code_grad(code, a, b, const, theta, out)
    return builtin


class Prior:
    """Base class: a log-density on R^d known up to a constant."""

    def bind(self, d: int) -> "Prior":
        """Return a copy whose parameters are broadcast to dimension ``d`` (checks them)."""
        return self

    def logpdf(self, theta: np.ndarray) -> float:
        raise NotImplementedError

    def grad(self, theta: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _kernel(self):
        """``(code, a, b, const)`` for :func:`prior_logpdf` and :func:`prior_grad`, or None
        (a prior the compiled loops do not know: the chain takes the Python loop)."""
        return None


@dataclass(frozen=True)
class FlatPrior(Prior):
    """The improper flat prior, log-density 0 everywhere.

    Examples
    --------
    >>> FlatPrior().logpdf(np.array([3.0, -1.0]))
    0.0
    """

    def logpdf(self, theta):
        return 0.0

    def grad(self, theta):
        return np.zeros_like(theta, dtype=float)

    def _kernel(self):
        return (FLAT, _NONE, _NONE, 0.0) if type(self) is FlatPrior else None


def _broadcast(name, value, d, allow_inf=False):
    if allow_inf:   # +inf allowed (a flat coordinate), NaN and -inf not
        try:
            arr = np.array(value, dtype=float)
        except (TypeError, ValueError):
            arr = check_finite_array(name, value, ndim=(0, 1))   # raises, naming the argument
        check_finite_array(name, np.where(arr == np.inf, 1.0, arr), ndim=(0, 1))
    else:
        arr = check_finite_array(name, value, ndim=(0, 1))
    if arr.ndim == 1 and arr.shape[0] not in (1, d):
        raise ValueError(f"{name} must be a scalar or have length {d}, got length {arr.shape[0]}")
    out = np.broadcast_to(arr, (d,)).copy()
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class GaussianPrior(Prior):
    """Independent Gaussian prior N(mean_j, sd_j^2) on each coordinate.

    Parameters
    ----------
    mean, sd : float or array of shape (d,)
        Prior means and standard deviations (sd > 0; ``sd = inf`` makes a coordinate's prior
        flat, e.g. the coefficients beside a proper prior on a dispersion).

    Examples
    --------
    >>> p = GaussianPrior(0.0, [1.0, 2.0]).bind(2)
    >>> round(p.logpdf(np.zeros(2)), 4)
    -2.531
    """

    mean: object = 0.0
    sd: object = 1.0
    _d: int | None = field(default=None, repr=False, compare=False)
    _log_norm: float = field(default=0.0, repr=False, compare=False)

    def bind(self, d):
        mean = _broadcast("mean", self.mean, d)
        sd = _broadcast("sd", self.sd, d, allow_inf=True)
        if np.any(sd <= 0):
            raise ValueError(f"sd must be > 0, got {self.sd!r}")
        finite = sd[np.isfinite(sd)]   # sd = inf: a flat coordinate, no normalising term
        if finite.shape[0] == d:
            log_norm = float(-np.sum(np.log(sd)) - 0.5 * d * _LOG_2PI)
        else:
            log_norm = float(-np.sum(np.log(finite)) - 0.5 * finite.shape[0] * _LOG_2PI)
        return GaussianPrior(mean, sd, d, log_norm)

    def logpdf(self, theta):
        z = (theta - self.mean) / self.sd
        return float(self._log_norm - 0.5 * (z @ z))

    def grad(self, theta):
        return -(theta - self.mean) / self.sd**2

    def _kernel(self):
        if type(self) is not GaussianPrior or self._d is None:
            return None
        return (GAUSSIAN, np.array(self.mean), np.array(self.sd), self._log_norm)


@dataclass(frozen=True)
class LaplacePrior(Prior):
    """Independent Laplace prior, density proportional to exp(-|theta_j - loc_j| / scale_j).

    Examples
    --------
    >>> p = LaplacePrior(0.0, 0.5).bind(1)
    >>> round(p.logpdf(np.array([1.0])), 4)
    -2.0
    """

    loc: object = 0.0
    scale: object = 1.0
    _d: int | None = field(default=None, repr=False, compare=False)

    def bind(self, d):
        loc = _broadcast("loc", self.loc, d)
        scale = _broadcast("scale", self.scale, d)
        if np.any(scale <= 0):
            raise ValueError(f"scale must be > 0, got {self.scale!r}")
        return LaplacePrior(loc, scale, d)

    def logpdf(self, theta):
        return float(-np.sum(np.abs(theta - self.loc) / self.scale) - np.sum(np.log(2 * self.scale)))

    def grad(self, theta):
        return -np.sign(theta - self.loc) / self.scale

    def _kernel(self):
        if type(self) is not LaplacePrior or self._d is None:
            return None
        return (LAPLACE, np.array(self.loc), np.array(self.scale), float(np.sum(np.log(2 * self.scale))))


class CompiledPrior(Prior):
    """A log prior given as two numba functions of theta: the compiled chain loops call them
    (a model with it keeps the compiled loop, where a prior given as a Python function takes
    the Python loop).

    Parameters
    ----------
    logpdf : numba function
        ``logpdf(theta) -> float``, theta a float64 vector of length ``dim``.
    grad : numba function
        ``grad(theta, out)``: writes the gradient of ``logpdf`` into ``out`` (length ``dim``).
    dim : int
        The length of theta.
    key : str, optional
        A name for the pair that equal functions share (a hash of their source, say): the
        compiled loops are typed by it, so two priors with one key must be the same
        functions. Default: a random name, unique to this prior (then every process compiles
        the loops for it anew: give a key to reuse the on-disk cache).

    Examples
    --------
    >>> import math
    >>> import numba
    >>> @numba.njit
    ... def logpdf(theta):            # a standard Cauchy on one coordinate
    ...     return -math.log(math.pi) - math.log1p(theta[0] ** 2)
    >>> @numba.njit
    ... def grad(theta, out):
    ...     out[0] = -2.0 * theta[0] / (1.0 + theta[0] ** 2)
    >>> prior = CompiledPrior(logpdf, grad, dim=1)
    >>> round(prior.logpdf(np.array([1.0])), 6), prior.grad(np.array([1.0])).tolist()
    (-1.837877, [-1.0])
    """

    def __init__(self, logpdf, grad, dim, key=None):
        for name, fn in (("logpdf", logpdf), ("grad", grad)):
            if not hasattr(fn, "py_func"):
                raise TypeError(f"{name} must be a numba function (numba.njit), got "
                                f"{type(fn).__name__}")
        self.dim = int(dim)
        # the compiled loops are cached on disk by their types, so an unnamed pair must never
        # share its name with another process's (a counter restarting at 0 in every process
        # loaded the loop compiled for an earlier process's functions): a random name
        key = f"unnamed-{uuid.uuid4().hex}" if key is None else str(key)
        self._handle = PriorFunctions(logpdf, grad, key)

    def bind(self, d):
        if int(d) != self.dim:
            raise ValueError(f"this CompiledPrior is for theta of length {self.dim}, got a "
                             f"model of dimension {d}")
        return self

    def logpdf(self, theta):
        return float(self._handle.logpdf(np.ascontiguousarray(theta, dtype=np.float64)))

    def grad(self, theta):
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        out = np.empty(theta.shape[0])
        self._handle.grad(theta, out)
        return out

    def _kernel(self):
        return (self._handle, _NONE, _NONE, 0.0)
