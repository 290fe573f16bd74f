"""A model's callables resolved once, so the hot loop does no attribute lookups or checks."""

from __future__ import annotations

import numbers

import numpy as np

from .models.compiled import compiled_view, is_compiled

__all__ = ["ModelView", "check_model"]

#: Rows probed at theta0 to check that the log-likelihood is finite there.
PROBE_ROWS = 1024
#: Rows per chunk in full-data passes (exact test, full gradients, full-data range).
FULL_CHUNK = 1 << 16


class ModelView:
    """Fast access to a (checked) model: ``N``, ``dim``, ``ratio``, ``grad``, ``bound``, priors.

    A compiled model (:mod:`samplers.models.compiled`: ``row_kernels``, ``kernel_data()``,
    e.g. every built-in model) gives its row kernels, from which the compiled loops and the
    batch functions are built; a user's model is wrapped so that its results come back as
    float arrays, and the tests take their Python paths.
    """

    def __init__(self, model, dim: int):
        self.model = model
        self.N = int(model.N)
        self.dim = dim
        self.logprior = model.logprior
        #: Per-row l_i and prefetch kernels and their data tuple, for compiled test loops
        #: (compiled models; None for a user's model, which takes the Python path).
        self.row_ratio = self.row_prefetch = self.kernel_data = None
        #: The sequential-test engine's buffer of l_i, reused between decisions.
        self.engine_values = None
        if is_compiled(model):
            batches = compiled_view(model)
            self.row_ratio = batches.kernels.ratio
            self.row_prefetch = batches.kernels.prefetch
            self.kernel_data = batches.kernel_data
            self.ratio = batches.ratio
            self.grad = batches.grad
            self.bound = batches.bound
            self.grad_logprior = getattr(model, "grad_logprior", None)
            return
        if hasattr(model, "loglik_ratio"):
            fused = model.loglik_ratio
            self.ratio = lambda th, th_new, idx: np.asarray(fused(th, th_new, idx), dtype=float)
        else:
            loglik = model.loglik
            self.ratio = lambda th, th_new, idx: (
                np.asarray(loglik(th_new, idx), dtype=float) - np.asarray(loglik(th, idx), dtype=float)
            )
        grad = getattr(model, "grad_loglik", None)
        self.grad = None if grad is None else (
            lambda th, idx: np.asarray(grad(th, idx), dtype=float).reshape(len(idx), dim)
        )
        bound = getattr(model, "loglik_ratio_bound", None)
        self.bound = None if bound is None else (lambda th, th_new: float(bound(th, th_new)))
        self.grad_logprior = getattr(model, "grad_logprior", None)

    def chunks(self):
        """Consecutive index blocks covering all N rows (for full-data passes)."""
        for start in range(0, self.N, FULL_CHUNK):
            yield np.arange(start, min(start + FULL_CHUNK, self.N), dtype=np.intp)

    def full_grad(self, theta) -> np.ndarray:
        """Gradient of the log posterior over all N rows (an O(N) pass)."""
        total = np.asarray(self.grad_logprior(theta), dtype=float).copy()
        for idx in self.chunks():
            total += self.grad(theta, idx).sum(axis=0)
        return total


def check_model(model, theta0) -> tuple[ModelView, np.ndarray]:
    """Check the model protocol and the starting point; return the view and a copy of theta0.

    Refuses (TypeError/ValueError, naming what is wrong) a model without ``N``, ``loglik``
    or ``logprior``, a non-finite or ill-shaped ``theta0``, a non-finite log prior at
    ``theta0``, and log-likelihoods at ``theta0`` that are not finite or not one per row
    (probed on up to 1024 rows spread over the data).
    """
    for attr in ("loglik", "logprior"):
        if not callable(getattr(model, attr, None)):
            raise TypeError(f"model must have a callable {attr}(theta, ...); "
                            f"{type(model).__name__} has none")
    N = getattr(model, "N", None)
    if isinstance(N, bool) or not isinstance(N, numbers.Integral):
        raise TypeError(f"model.N must be an integer number of rows, got {N!r}")
    if N < 1:
        raise ValueError(f"model.N must be >= 1, got {N}")
    try:
        theta = np.array(theta0, dtype=float, copy=True).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"theta0 must be a real vector, got {theta0!r}") from None
    if np.ndim(theta0) > 1:
        raise ValueError(f"theta0 must be a vector, got shape {np.shape(theta0)}")
    if theta.size == 0 or not np.all(np.isfinite(theta)):
        raise ValueError(f"theta0 must be a non-empty finite vector, got {theta0!r}")
    dim = getattr(model, "dim", theta.shape[0])
    if theta.shape[0] != dim:
        raise ValueError(f"theta0 must have {dim} element(s) for {type(model).__name__}, "
                         f"got {theta.shape[0]}")
    lp = model.logprior(theta)
    if not np.isfinite(lp):
        raise ValueError(f"the log prior at theta0 must be finite, got {lp} at theta0={theta}")
    view = ModelView(model, dim)
    probe = np.unique(np.linspace(0, N - 1, min(N, PROBE_ROWS)).astype(np.intp))
    ll = np.asarray(model.loglik(theta, probe), dtype=float)
    if ll.shape != probe.shape:
        raise ValueError(f"model.loglik(theta, idx) must return one value per index: "
                         f"asked for {probe.shape[0]}, got shape {ll.shape}")
    if not np.all(np.isfinite(ll)):
        row = int(probe[np.flatnonzero(~np.isfinite(ll))[0]])
        raise ValueError(f"the log-likelihood at theta0 must be finite; row {row} gives "
                         f"{ll[probe == row][0]} at theta0={theta}")
    return view, theta
