"""The compiled-model interface: what a model offers so that the samplers run it in numba.

A user's model (:class:`~samplers.models.Model`: ``N``, ``loglik``, ``logprior``) is called
from Python, one batch at a time. A *compiled* model also hands the samplers its per-row
kernels and the data they read, and a whole sequential decision then runs in one compiled
call (:mod:`samplers.mhtests.engine`) with the row kernel inlined. The interface:

``row_kernels`` : :class:`RowKernels`
    Small jitted functions of one row ``i`` (decorate them with
    ``design._lib.jit.row_jit``, which inlines them into the loops that call them):

    * ``ratio(data, i, theta, theta_new) -> float``: ``l_i = log p(x_i | theta_new) -
      log p(x_i | theta)``, tempered like the model's likelihood, reading row i once;
    * ``loglik(data, i, theta) -> float``: ``log p(x_i | theta)`` (tempered);
    * ``grad(data, i, theta, out)``: writes the gradient of ``loglik`` in theta into
      ``out`` (length ``dim``), or ``None`` for a model without gradients;
    * ``hess(data, i, theta, out)``, optional: writes the Hessian of ``loglik`` into ``out``
      (``dim x dim``); :class:`~samplers.ControlVariates` compiles its residuals from
      ``loglik``, ``grad`` and ``hess`` for a model that is not a GLM;
    * ``prefetch(data, i)``: a cache hint for the memory row i lives in
      (``design._lib.prefetch.prefetch_row`` on each array holding rows). Rows are read in
      random order; every compiled row loop calls it ``PREFETCH_DISTANCE`` rows ahead, which
      makes random rows about as cheap as sequential ones. It never changes results.

    Optionally, a split through a scalar linear predictor ``eta_i = x_i . theta`` that
    full-data passes map over blocks of consecutive rows in SIMD:
    ``eta_rows(data, start, k, theta, eta)`` and ``eta_rows2(data, start, k, theta,
    theta_new, eta, eta_new)`` (the predictors of rows ``start .. start + k - 1``, equal to
    the ones the row kernels compute), ``eta_loglik(data, eta) -> loglik`` and
    ``eta_ratio(data, eta, eta_new) -> l_i``; and ``grad_rows(data, start, k, theta, eta,
    acc)``, adding the gradients of such a block to ``acc`` (each as ``grad`` gives it, in
    row order).

    ``theta`` and ``theta_new`` are float64 vectors of length ``dim``.
``kernel_data()`` -> tuple
    The arrays and constants the row kernels read (the temperature included), as one
    tuple, read in place (float32/float64 arrays and memmaps are not copied). It is fetched
    once per decision, so it must be cheap (return stored objects). Its element types must
    not change between calls (numba compiles one loop per type).
``decision_data(theta, theta_new)`` -> tuple, optional
    The tuple ``ratio`` reads in one accept/reject decision between ``theta`` and
    ``theta_new`` (default ``kernel_data()``): a model whose rows carry a per-pair constant
    (control variates add the proxy's total ``P / N`` to every row) returns it here, once
    per decision.
``kernel_ratio_bound(theta, theta_new)`` -> float, optional
    An upper bound on ``max_i |l_i|`` over all N rows in time independent of N, called
    without argument checks (``theta`` arrays already validated); what
    :class:`~samplers.ConfidenceTest` needs. The checked public form is
    ``loglik_ratio_bound``.
``kernel_ratio_range(theta, theta_new)`` -> (center, half_width), optional
    The tighter form: every l_i within ``half_width`` of ``center`` (checked public form
    ``loglik_ratio_range``); the confidence test's radius needs only the width.

plus ``N``, ``dim`` and ``logprior`` (and optionally ``grad_logprior``) of the model
protocol. :func:`compiled_view` turns such a model into the batch functions a chain uses;
:class:`~samplers.models.BaseModel` implements the interface for the built-in models (its
subclasses may still define ``_row_loglik``, ``_row_ratio``, ``_row_grad``,
``_row_prefetch`` and ``_kernel_data``; the base class collects them).

Extending
---------
A model *wrapper* (e.g. :class:`~samplers.ControlVariates`, which subtracts a cheap proxy
from each l_i) is a new class with its own ``row_kernels`` (closing over the wrapped
model's), ``decision_data()`` (the wrapped tuple plus its own arrays and per-pair constant)
and ``kernel_ratio_range``: nothing in the samplers changes.
A new per-row capability (e.g. a per-row bound ``|l_i| <= B_i(theta, theta')`` for exact
minibatch tests) is a new optional field of :class:`RowKernels` with default ``None``;
models without it keep working, and the tests that need it check for it in ``check``.

Examples
--------
>>> import numpy as np
>>> from samplers import GaussianMean
>>> from samplers.models.compiled import compiled_view, is_compiled
>>> model = GaussianMean(np.random.default_rng(0).normal(size=1000))
>>> is_compiled(model)
True
>>> batch = compiled_view(model)
>>> idx = np.arange(3)
>>> bool(np.allclose(batch.ratio(np.array([0.0]), np.array([0.1]), idx),
...                  model.loglik_ratio([0.0], [0.1], idx)))
True
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np

from design._lib.jit import jit

from ._kernels import batch_grad, batch_loglik, batch_ratio

__all__ = ["RowKernels", "BlockModel", "CompiledModel", "CompiledBatches", "compiled_view",
           "is_compiled", "same_data"]


class RowKernels(NamedTuple):
    """A compiled model's per-row kernels (see the module docstring for signatures)."""

    #: ``ratio(data, i, theta, theta_new) -> l_i``.
    ratio: Callable
    #: ``prefetch(data, i)``: cache hint for row i.
    prefetch: Callable
    #: ``loglik(data, i, theta) -> log p(x_i | theta)``, or None.
    loglik: Callable | None = None
    #: ``grad(data, i, theta, out)``: gradient of row i's loglik into out, or None.
    grad: Callable | None = None
    #: ``eta_rows(data, start, k, theta, eta)``: the linear predictors of rows ``start ..
    #: start + k - 1`` into ``eta[:k]``, or None.
    eta_rows: Callable | None = None
    #: ``eta_rows2(data, start, k, theta, theta_new, eta, eta_new)``: the same at two
    #: parameter vectors, each row read once, or None.
    eta_rows2: Callable | None = None
    #: ``eta_loglik(data, eta) -> loglik`` of a row with linear predictor eta, or None.
    eta_loglik: Callable | None = None
    #: ``eta_ratio(data, eta, eta_new) -> l_i`` of a row, or None.
    eta_ratio: Callable | None = None
    #: ``grad_rows(data, start, k, theta, eta, acc)``: adds the gradients of rows ``start ..
    #: start + k - 1`` to ``acc`` in row order (``eta``: scratch of length k), or None.
    grad_rows: Callable | None = None
    #: ``hess(data, i, theta, out)``: the Hessian of row i's loglik into out (dim x dim), or
    #: None; with it :class:`~samplers.ControlVariates` runs its residuals compiled for a
    #: model that is not a GLM (:class:`~samplers.models.RowModel`).
    hess: Callable | None = None
    #: ``hvp(data, i, theta, v, out)``: the Hessian of row i's loglik times ``v`` into out
    #: (length dim), or None; control variates then read the rows' curvature in O(dim).
    hvp: Callable | None = None


@jit
def same_data(data, theta, theta_new):
    """The decision data of a model whose rows carry no per-pair constant: its data."""
    return data


class BlockModel(NamedTuple):
    """What the compiled chain loop (the block loop) reads of a model: its
    ``block_parts(view)`` (:meth:`~samplers.models.BaseModel.block_parts`).

    A model whose log prior, gradients and decision data the loop can evaluate exactly as
    its methods do returns one; None (the default) runs its chains on the Python loop.
    """

    #: The tuple ``grads`` and ``decision_data`` read.
    data: tuple
    #: The prior's kernel tuple ``(code, a, b, const)`` (``Prior._kernel``).
    prior: tuple
    #: ``decision_data(data, theta, theta_new) -> tuple``: what the row-ratio kernel reads
    #: in one decision (the model's ``_decision_data``), jitted; :func:`same_data` for a
    #: model whose rows carry no per-pair constant.
    decision_data: Any
    #: ``grads(data, idx, theta, out)``: the per-row gradients of rows ``idx``, jitted.
    grads: Any


@runtime_checkable
class CompiledModel(Protocol):
    """A model with per-row kernels the samplers compile into their loops."""

    N: int
    dim: int
    row_kernels: RowKernels

    def kernel_data(self) -> tuple: ...

    def logprior(self, theta: np.ndarray) -> float: ...


def is_compiled(model) -> bool:
    """Whether ``model`` offers the compiled-model interface (row kernels and data)."""
    kernels = getattr(model, "row_kernels", None)
    return (getattr(kernels, "ratio", None) is not None
            and callable(getattr(model, "kernel_data", None)))


class CompiledBatches(NamedTuple):
    """Batch functions of a compiled model, built from its row kernels (no checks)."""

    #: ``ratio(theta, theta_new, idx) -> l`` (float64 array).
    ratio: Callable
    #: ``loglik(theta, idx)``, or None.
    loglik: Callable | None
    #: ``grad(theta, idx) -> (len(idx), dim)`` array, or None.
    grad: Callable | None
    #: ``bound(theta, theta_new) -> float`` (``kernel_ratio_bound``), or None.
    bound: Callable | None
    #: ``range(theta, theta_new) -> (center, half_width)`` (``kernel_ratio_range``, else
    #: ``(0, bound)``), or None.
    range: Callable | None
    kernels: RowKernels
    kernel_data: Callable[[], tuple]
    #: ``decision_data(theta, theta_new) -> tuple`` (default: ``kernel_data()``).
    decision_data: Callable


def compiled_view(model) -> CompiledBatches:
    """The batch functions the samplers call on a compiled model (memoised loops)."""
    if not is_compiled(model):
        raise TypeError(f"{type(model).__name__} does not offer the compiled-model interface "
                        "(row_kernels: RowKernels with a ratio kernel, and kernel_data())")
    k = model.row_kernels
    data = model.kernel_data
    decision_data = getattr(model, "decision_data", None)
    if decision_data is None:
        def decision_data(theta, theta_new):
            return data()
    ratio_loop = batch_ratio(k.ratio, k.prefetch)

    def ratio(theta, theta_new, idx):
        out = np.empty(idx.shape[0])
        ratio_loop(decision_data(theta, theta_new), idx, theta, theta_new, out)
        return out

    loglik = grad = None
    if k.loglik is not None:
        loglik_loop = batch_loglik(k.loglik, k.prefetch)

        def loglik(theta, idx):
            out = np.empty(idx.shape[0])
            loglik_loop(data(), idx, theta, out)
            return out

    if k.grad is not None:
        grad_loop = batch_grad(k.grad, k.prefetch)
        dim = model.dim

        def grad(theta, idx):
            out = np.empty((idx.shape[0], dim))
            grad_loop(data(), idx, theta, out)
            return out

    bound: Any = getattr(model, "kernel_ratio_bound", None)
    span: Any = getattr(model, "kernel_ratio_range", None)
    if span is None and bound is not None:
        def span(theta, theta_new):
            return 0.0, bound(theta, theta_new)
    return CompiledBatches(ratio, loglik, grad, bound, span, k, data, decision_data)
