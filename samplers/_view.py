"""A model's callables resolved once, so the hot loop does no attribute lookups or checks."""

from __future__ import annotations

import math
import numbers

import numpy as np

from design._lib.jit import jit
from design._lib.moments import RunningMoments, merge_moments
from design._lib.passes import n_chunks, run_chunks

from .models._base import BaseModel, check_data_files, pass_blocks
from .models._kernels import (
    chunk_grad_sums,
    chunk_grad_sums_rows,
    chunk_loglik_sums,
    chunk_loglik_sums_eta,
    chunk_ratio_moments,
    chunk_ratio_moments_eta,
)
from .models.compiled import compiled_view, is_compiled

__all__ = ["ModelView", "check_model"]

#: Rows probed at theta0 to check that the log-likelihood is finite there.
PROBE_ROWS = 1024
#: Rows per chunk in full-data passes (exact test, full gradients, full-data range).
FULL_CHUNK = 1 << 16


@jit
def _merge_chunks(N, chunk, means, m2s):
    """Merge per-chunk (mean, M2) in chunk order, as ``RunningMoments.add`` chunk by chunk.

    Returns ``(ok, n, mean, m2)``; at the first chunk whose mean or M2 is not finite,
    ``ok`` is False, ``n`` the rows merged before it and ``mean`` that chunk's mean.
    """
    n, mean, m2 = 0, 0.0, 0.0
    for c in range(means.shape[0]):
        if not (math.isfinite(means[c]) and math.isfinite(m2s[c])):
            return False, n, means[c], m2
        n, mean, m2 = merge_moments(n, mean, m2, min(chunk, N - c * chunk), means[c], m2s[c])
    return True, n, mean, m2


class ModelView:
    """Fast access to a (checked) model: ``N``, ``dim``, ``ratio``, ``grad``, ``bound``, priors.

    A compiled model (:mod:`samplers.models.compiled`: ``row_kernels``, ``kernel_data()``,
    e.g. every built-in model) gives its row kernels, from which the compiled loops and the
    batch functions are built; a user's model is wrapped so that its results come back as
    float arrays, and the tests take their Python paths.
    """

    #: Rows per chunk of a full-data pass (:meth:`chunks`, :meth:`full_ratio_moments`, ...).
    FULL_CHUNK = FULL_CHUNK

    def __init__(self, model, dim: int):
        self.model = model
        self.N = int(model.N)
        self.dim = dim
        self.logprior = model.logprior
        #: Per-row l_i and prefetch kernels and their data tuple, for compiled test loops
        #: (compiled models; None for a user's model, which takes the Python path).
        self.row_ratio = self.row_prefetch = self.kernel_data = self.decision_data = None
        #: Per-row log-likelihood and gradient kernels of a compiled model (full passes).
        self.row_loglik = self.row_grad = self.grad_rows = None
        #: The sequential-test engine's buffer of l_i, reused between decisions.
        self.engine_values = None
        #: Compiled chunk kernels of the full passes (None: the passes call ``ratio`` /
        #: ``grad`` chunk by chunk), and whether the model's rows are in a store (the passes
        #: then run them on blocks of rows, :func:`~samplers.models._base.pass_blocks`).
        self._ratio_chunks = self._loglik_chunks = self._grad_chunks = None
        self._store = False
        if isinstance(model, BaseModel):
            # A built-in model or a wrapper (control variates): its own unchecked batch
            # methods, which know about per-pair shifts and user models they wrap.
            self.ratio = model._loglik_ratio
            self.grad = model._grad_loglik
            self.bound = model._loglik_ratio_bound
            self.range = model._loglik_ratio_range
            self.grad_logprior = model.grad_logprior
            if is_compiled(model):
                self._attach_kernels(model)
            elif model._store_backed and model.pass_kernels() is not None:
                # rows in a store: the chain reads them through read_rows (the Python
                # path above); full passes run the kernels on blocks of rows
                self._attach_pass_kernels(model.pass_kernels())
                self._store = True
            return
        if is_compiled(model):
            batches = compiled_view(model)
            self.ratio = batches.ratio
            self.grad = batches.grad
            self.bound = batches.bound
            self.range = batches.range
            self.grad_logprior = getattr(model, "grad_logprior", None)
            self._attach_kernels(model)
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
        rng_fn = getattr(model, "loglik_ratio_range", None)
        if rng_fn is not None:
            self.range = lambda th, th_new: tuple(map(float, rng_fn(th, th_new)))
        else:
            self.range = None if bound is None else (lambda th, th_new: (0.0, self.bound(th, th_new)))
        self.grad_logprior = getattr(model, "grad_logprior", None)

    def _attach_kernels(self, model) -> None:
        """Read the compiled-model interface (:mod:`samplers.models.compiled`)."""
        k = model.row_kernels
        self.row_ratio, self.row_prefetch = k.ratio, k.prefetch
        self.row_loglik, self.row_grad = k.loglik, k.grad
        self.grad_rows = k.grad_rows
        self.kernel_data = model.kernel_data
        #: ``(theta, theta_new) -> data`` for one decision: what the compiled test loops
        #: pass to ``row_ratio`` (``kernel_data()`` unless the rows depend on the pair,
        #: as with control variates, whose rows carry the proxy's total P / N).
        decision_data = getattr(model, "decision_data", None)
        self.decision_data = (decision_data if decision_data is not None
                              else (lambda th, th_new: model.kernel_data()))
        self._attach_pass_kernels(k)

    def _attach_pass_kernels(self, k) -> None:
        """The compiled chunk kernels of the full passes, from the row kernels ``k``."""
        self._ratio_chunks = (
            chunk_ratio_moments(k.ratio) if k.eta_rows2 is None
            else chunk_ratio_moments_eta(k.eta_rows2, k.eta_ratio))
        self._loglik_chunks = None
        if k.loglik is not None:
            self._loglik_chunks = (
                chunk_loglik_sums(k.loglik) if k.eta_rows is None
                else chunk_loglik_sums_eta(k.eta_rows, k.eta_loglik))
        self._grad_chunks = None
        if k.grad is not None:
            self._grad_chunks = (chunk_grad_sums(k.grad) if k.grad_rows is None
                                 else chunk_grad_sums_rows(k.grad_rows))

    def _blocks(self):
        """``(first chunk, rows, block model or None)`` covering all N rows: one block
        (None: the view's own data) for data read in place; blocks of whole chunks read
        from the store (the next one read while this one is computed) otherwise."""
        if not self._store:
            yield 0, self.N, None
            return
        for start, block in pass_blocks(self.model, FULL_CHUNK):
            yield start // FULL_CHUNK, block.N, block

    def chunks(self):
        """Consecutive index blocks covering all N rows (for full-data passes)."""
        for start in range(0, self.N, FULL_CHUNK):
            yield np.arange(start, min(start + FULL_CHUNK, self.N), dtype=np.intp)

    def full_ratio_moments(self, theta, theta_new, *, threads=None) -> tuple[bool, RunningMoments]:
        """Count, mean and M2 of the l_i over all N rows (an O(N) pass on every core).

        Chunk by chunk as :meth:`RunningMoments.add` would merge them, so the result does not
        depend on ``threads``; ``(False, moments)`` at the first chunk that is not finite,
        with ``moments.mean`` that chunk's mean.
        """
        mom = RunningMoments()
        if self._ratio_chunks is None:
            for idx in self.chunks():
                if not mom.add(self.ratio(theta, theta_new, idx)):
                    return False, mom
            return True, mom
        count = n_chunks(self.N, FULL_CHUNK)
        means, m2s = np.empty(count), np.empty(count)
        for c0, n, block in self._blocks():
            data = (self.decision_data if block is None else block.decision_data)(theta, theta_new)
            k = n_chunks(n, FULL_CHUNK)
            run_chunks(self._ratio_chunks, k, data, theta, theta_new, n, FULL_CHUNK,
                       means[c0:c0 + k], m2s[c0:c0 + k], threads=threads)
        ok, mom.n, mom.mean, mom.m2 = _merge_chunks(self.N, FULL_CHUNK, means, m2s)
        return bool(ok), mom

    def full_loglik(self, theta, *, threads=None) -> float:
        """Log-likelihood (tempered) of all N rows at ``theta`` (an O(N) pass on every core);
        built-in models only. Chunk sums are added in chunk order, whatever ``threads``."""
        if self._loglik_chunks is None:
            raise TypeError(f"full_loglik needs a built-in model, got {type(self.model).__name__}")
        count = n_chunks(self.N, FULL_CHUNK)
        sums = np.empty(count)
        for c0, n, block in self._blocks():
            data = self.kernel_data() if block is None else block.kernel_data()
            k = n_chunks(n, FULL_CHUNK)
            run_chunks(self._loglik_chunks, k, data, theta, n, FULL_CHUNK, sums[c0:c0 + k],
                       threads=threads)
        total = 0.0
        for value in sums:
            total += value
        return total

    def full_grad(self, theta, *, threads=None) -> np.ndarray:
        """Gradient of the log posterior over all N rows (an O(N) pass, on every core for a
        built-in model; chunk sums added in chunk order, so independent of ``threads``)."""
        total = np.asarray(self.grad_logprior(theta), dtype=float).copy()
        if self._grad_chunks is None:
            for idx in self.chunks():
                total += self.grad(theta, idx).sum(axis=0)
            return total
        count = n_chunks(self.N, FULL_CHUNK)
        sums = np.empty((count, self.dim))
        for c0, n, block in self._blocks():
            data = self.kernel_data() if block is None else block.kernel_data()
            k = n_chunks(n, FULL_CHUNK)
            run_chunks(self._grad_chunks, k, data, theta, n, FULL_CHUNK, sums[c0:c0 + k],
                       threads=threads)
        for row in sums:
            total += row
        return total


def check_model(model, theta0) -> tuple[ModelView, np.ndarray]:
    """Check the model protocol and the starting point; return the view and a copy of theta0.

    Refuses (TypeError/ValueError, naming what is wrong) a model without ``N``, ``loglik``
    or ``logprior``, a non-finite or ill-shaped ``theta0``, a non-finite log prior at
    ``theta0``, a memmapped data file truncated since the model was built (before any row
    is read: reading past the end of the file would kill the process), and log-likelihoods at ``theta0`` that are not finite or not one per row
    (probed on up to 1024 rows spread over the data).

    Every chain starts with this check; the :class:`ModelView` it returns is what the
    proposals (``check``, ``init``, ``propose``) and the tests (``check``, ``decide``)
    receive, and what ``validation`` builds to draw proposals outside a chain.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean, check_model
    >>> view, theta = check_model(GaussianMean(np.zeros(100)), [0.5])
    >>> view.N, theta
    (100, array([0.5]))
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
    lp = _scalar_logprior(model, theta)
    if not np.isfinite(lp):
        raise ValueError(f"the log prior at theta0 must be finite, got {lp} at theta0={theta}")
    check_data_files(model)   # before any row is read: a truncated memmap is a SIGBUS
    view = ModelView(model, dim)
    probe = np.unique(np.linspace(0, N - 1, min(N, PROBE_ROWS)).astype(np.intp))
    try:
        ll = _real(np.asarray(model.loglik(theta, probe)), "model.loglik(theta, idx)")
    except IndexError as exc:
        raise ValueError(f"model.loglik(theta, idx) raised IndexError ({exc}) for rows up to "
                         f"N - 1 = {N - 1}: is model.N = {N} larger than the model's data?"
                         ) from exc
    if ll.shape != probe.shape:
        raise ValueError(f"model.loglik(theta, idx) must return one value per index: "
                         f"asked for {probe.shape[0]}, got shape {ll.shape}")
    if not np.all(np.isfinite(ll)):
        row = int(probe[np.flatnonzero(~np.isfinite(ll))[0]])
        raise ValueError(f"the log-likelihood at theta0 must be finite; row {row} gives "
                         f"{ll[probe == row][0]} at theta0={theta}")
    if not hasattr(model, "dim") and not isinstance(model, BaseModel):
        _check_every_coordinate_used(model, theta, probe, ll, lp)
    return view, theta


def _real(values: np.ndarray, what: str) -> np.ndarray:
    if np.iscomplexobj(values):
        raise TypeError(f"{what} must return real values, got dtype {values.dtype}")
    return values.astype(float, copy=False)


def _scalar_logprior(model, theta) -> float:
    lp = model.logprior(theta)
    if np.ndim(lp) != 0:
        raise TypeError(f"model.logprior(theta) must return a scalar, got an array of shape "
                        f"{np.shape(lp)} at theta0={theta}")
    return float(_real(np.asarray(lp), "model.logprior(theta)"))


def _check_every_coordinate_used(model, theta, probe, ll, lp) -> None:
    """A user's model without ``dim`` takes d = len(theta0); refuse coordinates of theta0
    that neither its log-likelihood (on the probe rows) nor its log prior reads, which the
    chain would otherwise sample as a random walk (one-off cost: 2 d probe evaluations).
    A model that reads no coordinate at all is left to the other checks."""
    unused = []
    for j in range(theta.shape[0]):
        moved = False
        for step in (1e-3 * max(1.0, abs(theta[j])), 1.0):
            other = theta.copy()
            other[j] += step
            ll_j = np.asarray(model.loglik(other, probe), dtype=float)
            if not np.array_equal(ll_j, ll) or _scalar_logprior(model, other) != lp:
                moved = True
                break
        if not moved:
            unused.append(j)
    if unused and len(unused) < theta.shape[0]:   # (a model reading none is another matter)
        raise ValueError(
            f"theta0 has {theta.shape[0]} element(s) but {type(model).__name__}'s loglik and "
            f"logprior do not depend on element(s) {unused}: is theta0 too long? Give the model "
            f"a `dim` attribute (its number of parameters) to have theta0 checked against it")
