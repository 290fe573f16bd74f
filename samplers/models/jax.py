"""Your own model by automatic differentiation: one row's log-likelihood in ``jax.numpy``.

See :class:`JaxModel`. JAX is an optional dependency (``pip install "austerity[jax]"``),
imported when a model is built, never when :mod:`samplers` is.
"""

from __future__ import annotations

import math

import numpy as np

from design._lib.checks import check_int
from ..priors import Prior

__all__ = ["JaxModel", "import_jax"]

#: Rows per chunk of a full pass (mode, control-variate sums); the last chunk is padded.
FULL_CHUNK = 4096
#: Smallest padded minibatch: batches are padded to a power of two from here, so a chain
#: compiles at most ``log2(FULL_CHUNK / MIN_BUCKET) + 1`` shapes per function.
MIN_BUCKET = 16


def import_jax():
    """Import ``jax``, or raise an ImportError that says how to install it."""
    try:
        import jax
    except ImportError:  # pragma: no cover - exercised only without jax
        raise ImportError('JaxModel needs jax: pip install "austerity[jax]" (jax >= 0.4.30)'
                          ) from None
    return jax


def _bucket(n: int) -> int:
    """The padded length of a batch of ``n`` rows: a power of two >= MIN_BUCKET."""
    return max(MIN_BUCKET, 1 << max(n - 1, 0).bit_length())


class JaxModel:
    r"""A model from one row's log-likelihood written in ``jax.numpy``.

    The user writes ``loglik_row(theta, row) -> scalar``; the model vmaps it over the rows
    of a minibatch and takes per-row gradients and Hessians by ``jax.grad`` and
    ``jax.hessian``, so everything :class:`~samplers.ControlVariates`, the minibatch tests,
    Langevin proposals and :func:`validation.fit` ask of a model is there without a
    derivative written by hand.

    Parameters
    ----------
    loglik_row : callable
        ``loglik_row(theta, row)``: the log-likelihood of one row, a scalar; ``theta`` is a
        float64 vector of length ``dim`` and ``row`` has the structure of ``data`` with the
        leading (row) axis removed. Written in ``jax.numpy`` (traced, never called with NumPy
        arrays).
    data : array or tuple / list / dict of arrays
        The rows: every array has the same leading length N. Float arrays are copied to
        float64, integer and boolean ones keep their type. The model keeps one copy in JAX's
        memory (padded to whole chunks); the caller's arrays are never modified.
    logprior : callable, samplers.priors.Prior or None
        The log prior density of theta: a ``jax.numpy`` function (its gradient by
        ``jax.grad``), a :class:`~samplers.priors.Prior` (``GaussianPrior(0, 10)``), or None
        (flat).
    dim : int
        The length of theta.
    names : sequence of str, optional
        Parameter names (the ArviZ coordinates: ``chain.to_arviz(names=model.names)``).
    chunk : int
        Rows per chunk of a full pass (a power of two >= 16).

    Attributes
    ----------
    N, dim : int
    names : list of str or None
    prior : Prior or None
        The prior when given as a :class:`~samplers.priors.Prior`.

    Notes
    -----
    **Compilation.** Each function is jitted once per instance with the data as an argument
    (never baked into the program). Minibatches are padded to a power of two (at least 16
    rows, padding with row 0 and dropping its values), so a chain whose sequential test reads
    growing batches compiles about ``log2(chunk / 16)`` shapes per function once, then none.
    Batches longer than ``chunk`` are read in chunks. Full passes (:meth:`loglik_sums`: the
    mode search and the control-variate sums) run over fixed chunks of ``chunk`` rows, the
    last one padded and masked: one shape, compiled once for every pass.

    **Precision.** Every call runs inside ``jax.enable_x64(True)``, a thread-local scope: the
    model computes in float64 and leaves the global ``jax_enable_x64`` flag as it found it
    (JAX code elsewhere in the process keeps its float32 default).

    **Cores.** A full pass keeps two chunks in flight (JAX dispatches asynchronously and its
    CPU client runs them on its own threads), so both cores of a two-core machine work.

    **Per step.** :func:`~samplers.models.compile_jax_model` translates the row function to
    numba (a :class:`~samplers.models.RowModel` whose chains run on the compiled loop, tens
    of microseconds per step), and :func:`validation.fit` does so by itself
    (:meth:`numba_translation`); the JaxModel itself runs on the Python loop (a compiled
    numba loop cannot call JAX);
    each decision stage is one jitted call (:meth:`loglik_ratio`, or the control-variate
    residuals of :meth:`residual_ratio`); a ``logprior`` written in JAX is one more call per
    step (a :class:`~samplers.priors.Prior` is not). JAX's asynchronous CPU dispatch hands
    each call to another thread; for chains, ``jax.config.update(
    "jax_cpu_enable_async_dispatch", False)`` before JAX's first computation runs them on
    the calling thread, about half the time per call (75 against 150 us at a load of 13 on
    two cores, one measurement). It is a process-wide setting, so the model leaves it to
    the user (full passes then run one chunk at a time).

    **Control variates.** :meth:`residual_ratio` gives the rows' Taylor residuals in one call
    (the proxy's derivatives at the center by forward-over-reverse differentiation, O(d) per
    row, no d x d Hessian per row), and :meth:`loglik_sums` the sums at a point; the wrapper
    finds the mode by Newton's method on those sums. A JaxModel has no bound on the
    residuals, so :class:`~samplers.ConfidenceTest` needs ``range="full-data"`` on it.

    Examples
    --------
    A Poisson regression written as one row's log-likelihood, its mode, then the whole
    workflow (``fit``, not run here: tests/test_readme.py runs this call on the same model):

    >>> import numpy as np
    >>> import jax.numpy as jnp
    >>> from jax.scipy.special import gammaln
    >>> from samplers import GaussianPrior
    >>> from samplers.models import JaxModel
    >>> from validation import fit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(20_000), rng.normal(size=(20_000, 2))])
    >>> y = rng.poisson(np.exp(X @ [0.5, 0.3, -0.2])).astype(float)
    >>> def poisson_row(theta, row):
    ...     x, y = row
    ...     eta = x @ theta
    ...     return y * eta - jnp.exp(eta) - gammaln(y + 1.0)
    >>> model = JaxModel(poisson_row, (X, y), GaussianPrior(0.0, 10.0), dim=3,
    ...                  names=["intercept", "x1", "x2"])
    >>> model.loglik(np.zeros(3), np.arange(3)).shape
    (3,)
    >>> from samplers import ControlVariates
    >>> cv = ControlVariates(model)      # Newton's method on the model's full-pass sums
    >>> bool(np.allclose(cv.center.theta, [0.5, 0.3, -0.2], atol=0.05))
    True
    >>> idata = fit(model, draws=500, rng=1)  # doctest: +SKIP
    >>> idata.posterior.theta.shape      # doctest: +SKIP
    (2, 500, 3)
    """

    def __init__(self, loglik_row, data, logprior=None, *, dim, names=None, chunk=FULL_CHUNK):
        jax = import_jax()
        import jax.numpy as jnp

        if not callable(loglik_row):
            raise TypeError(f"loglik_row must be a function loglik_row(theta, row), got "
                            f"{type(loglik_row).__name__}")
        self.dim = check_int("dim", dim, low=1)
        chunk = check_int("chunk", chunk, low=MIN_BUCKET)
        if chunk & (chunk - 1):
            raise ValueError(f"chunk must be a power of two >= {MIN_BUCKET}, got {chunk}")
        self.names = None if names is None else [str(n) for n in names]
        if self.names is not None and len(self.names) != self.dim:
            raise ValueError(f"names must have one entry per parameter ({self.dim}), got "
                             f"{len(self.names)}")
        if not (logprior is None or callable(logprior) or isinstance(logprior, Prior)):
            raise TypeError("logprior must be a jax.numpy function of theta, a "
                            f"samplers.priors.Prior or None, got {type(logprior).__name__}")

        leaves, treedef = jax.tree_util.tree_flatten(data)
        if not leaves:
            raise ValueError("data must hold at least one array of rows, got an empty "
                             f"{type(data).__name__}")
        arrays = []
        for k, leaf in enumerate(leaves):
            if np.iscomplexobj(leaf):
                raise TypeError(f"data array {k} must be real, got dtype {np.asarray(leaf).dtype}")
            arr = np.asarray(leaf)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"data array {k} must be numeric, got dtype {arr.dtype}")
            if arr.ndim == 0:
                raise ValueError(f"data array {k} must have a leading axis of rows, got a scalar")
            arrays.append(arr)
        N = arrays[0].shape[0]
        lengths = [a.shape[0] for a in arrays]
        if any(n != N for n in lengths):
            raise ValueError(f"data arrays must all have the same number of rows, got "
                             f"{lengths}")
        self.N = check_int("number of rows of data", N, low=2)
        self._treedef = treedef
        self._row_fn = loglik_row
        self._jax = jax

        # cheap checks first: what the row function returns for row 0 (no O(N) work yet)
        row0 = treedef.unflatten([a[0] for a in arrays])
        theta0 = np.zeros(self.dim)
        with jax.enable_x64(True):
            try:
                out = jax.eval_shape(loglik_row, theta0, row0)
            except Exception as exc:
                raise TypeError(f"loglik_row(theta, row) fails on row 0 with theta of shape "
                                f"({self.dim},): {type(exc).__name__}: {exc}") from exc
            if not hasattr(out, "shape") or out.shape != ():
                shape = getattr(out, "shape", type(out).__name__)
                raise ValueError(f"loglik_row must return one scalar per row, got shape {shape} "
                                 "for row 0 (sum a vector of terms per row, or give each term "
                                 "its own row)")
        self.prior = logprior if isinstance(logprior, Prior) else None
        if self.prior is not None:
            self.prior = self.prior.bind(self.dim)
        self._logprior_fn = None if isinstance(logprior, Prior) else logprior
        if self._logprior_fn is not None:
            with jax.enable_x64(True):
                try:
                    lp = jax.eval_shape(self._logprior_fn, theta0)
                except Exception as exc:
                    raise TypeError(f"logprior(theta) fails with theta of shape ({self.dim},): "
                                    f"{type(exc).__name__}: {exc}") from exc
                if getattr(lp, "shape", None) != ():
                    raise ValueError(f"logprior must return a scalar, got shape "
                                     f"{getattr(lp, 'shape', None)}")

        # the data, padded to whole chunks with copies of row 0 (masked in full passes)
        self._chunk = min(chunk, _bucket(self.N))
        n_pad = -(-self.N // self._chunk) * self._chunk
        padded = []
        for k, a in enumerate(arrays):
            if a.dtype.kind == "f":
                if not np.all(np.isfinite(a)):
                    bad = int(np.flatnonzero(~np.isfinite(a.reshape(N, -1)).all(axis=1))[0])
                    raise ValueError(f"data array {k} must be finite; row {bad} holds {a[bad]!r}")
                a = a.astype(np.float64)
            p = np.empty((n_pad,) + a.shape[1:], dtype=a.dtype)
            p[:N] = a
            p[N:] = a[0]
            padded.append(p)
        weights = np.zeros(n_pad)
        weights[:N] = 1.0
        with jax.enable_x64(True):
            self._data = treedef.unflatten([jnp.asarray(p) for p in padded])
            self._weights = jnp.asarray(weights)
        self._n_chunks = n_pad // self._chunk
        self._build(jax, jnp)

    # -- the jitted functions ------------------------------------------------------------

    def _build(self, jax, jnp):
        row = self._row_fn
        chunk = self._chunk
        take = jax.tree_util.tree_map

        def rows(data, idx):
            return take(lambda a: a[idx], data)

        per_row = jax.vmap(row, in_axes=(None, 0))
        grad_row = jax.vmap(jax.grad(row), in_axes=(None, 0))
        hess_row = jax.vmap(jax.hessian(row), in_axes=(None, 0))

        def ratio(theta, theta_new, idx, data):
            r = rows(data, idx)
            return per_row(theta_new, r) - per_row(theta, r)

        def residual(theta, theta_new, center, order2, idx, data):
            # l_i(theta') - l_i(theta) - (hat l_i(theta') - hat l_i(theta)), the proxy's
            # difference Delta . (g_i + H_i (u + u') / 2) from one jvp of the row gradient
            delta = theta_new - theta
            w = theta + theta_new - 2.0 * center

            def one(r):
                g, hd = jax.jvp(lambda t: jax.grad(row)(t, r), (center,), (delta,))
                proxy = g @ delta + 0.5 * order2 * (hd @ w)
                return row(theta_new, r) - row(theta, r) - proxy

            return jax.vmap(one)(rows(data, idx))

        def sums(theta, start, data, weights, hessian):
            r = take(lambda a: jax.lax.dynamic_slice_in_dim(a, start, chunk), data)
            w = jax.lax.dynamic_slice_in_dim(weights, start, chunk)
            ll = per_row(theta, r)
            L = jnp.sum(jnp.where(w > 0, ll, 0.0))
            g = w @ grad_row(theta, r)
            H = jnp.einsum("n,nij->ij", w, hess_row(theta, r)) if hessian else None
            return L, g, H

        jit = jax.jit
        self._f_loglik = jit(lambda theta, idx, data: per_row(theta, rows(data, idx)))
        self._f_ratio = jit(ratio)
        self._f_grad = jit(lambda theta, idx, data: grad_row(theta, rows(data, idx)))
        self._f_hess = jit(lambda theta, idx, data: hess_row(theta, rows(data, idx)))
        self._f_residual = jit(residual)
        self._f_sums = jit(sums, static_argnums=4)
        if self._logprior_fn is not None:
            self._f_logprior = jit(self._logprior_fn)
            self._f_grad_logprior = jit(jax.grad(self._logprior_fn))

    # -- batching ------------------------------------------------------------------------

    def _batched(self, fn, idx, *args):
        """``fn(*args, idx_padded, data)`` over ``idx`` in padded pieces of at most ``chunk``
        rows; the values of the padding rows are dropped."""
        n = idx.shape[0]
        out = []
        with self._jax.enable_x64(True):
            for start in range(0, max(n, 1), self._chunk):
                part = idx[start:start + self._chunk]
                k = part.shape[0]
                padded = np.zeros(_bucket(k), dtype=np.int64)
                padded[:k] = part
                out.append(np.asarray(fn(*args, padded, self._data))[:k])
        return out[0] if len(out) == 1 else np.concatenate(out)

    def _theta(self, name, theta) -> np.ndarray:
        arr = np.asarray(theta, dtype=np.float64).reshape(-1)
        if arr.shape[0] != self.dim:
            raise ValueError(f"{name} must have {self.dim} element(s) for JaxModel, got shape "
                             f"{np.shape(theta)}")
        return arr

    def _idx(self, idx) -> np.ndarray:
        arr = np.asarray(idx)
        if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
            raise TypeError(f"idx must be a 1-D integer array, got {arr.dtype} of shape "
                            f"{arr.shape}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.N):
            raise ValueError(f"idx must lie in [0, {self.N - 1}], got values in "
                             f"[{arr.min()}, {arr.max()}]")
        return arr.astype(np.int64, copy=False)

    # -- the model protocol ----------------------------------------------------------------

    def loglik(self, theta, idx) -> np.ndarray:
        """Per-row log-likelihoods of rows ``idx`` at ``theta``, shape ``(len(idx),)``."""
        return self._batched(self._f_loglik, self._idx(idx), self._theta("theta", theta))

    def loglik_ratio(self, theta, theta_new, idx) -> np.ndarray:
        """``l_i = log p(x_i | theta_new) - log p(x_i | theta)`` of rows ``idx``, one call."""
        return self._batched(self._f_ratio, self._idx(idx), self._theta("theta", theta),
                             self._theta("theta_new", theta_new))

    def grad_loglik(self, theta, idx) -> np.ndarray:
        """Per-row gradients (``jax.grad``), shape ``(len(idx), dim)``."""
        return self._batched(self._f_grad, self._idx(idx), self._theta("theta", theta))

    def hess_loglik(self, theta, idx) -> np.ndarray:
        """Per-row Hessians (``jax.hessian``), shape ``(len(idx), dim, dim)``."""
        return self._batched(self._f_hess, self._idx(idx), self._theta("theta", theta))

    def residual_ratio(self, theta, theta_new, idx, center, order=2) -> np.ndarray:
        """The rows' Taylor residuals ``l_i - (hat l_i(theta_new) - hat l_i(theta))``, the
        proxy ``hat l_i`` of order ``order`` at ``center`` (:class:`~samplers.ControlVariates`
        adds the proxy's mean P / N), in one jitted call."""
        if order not in (1, 2):
            raise ValueError(f"order must be 1 or 2, got {order!r}")
        return self._batched(self._f_residual, self._idx(idx), self._theta("theta", theta),
                             self._theta("theta_new", theta_new),
                             self._theta("center", center), 1.0 if order == 2 else 0.0)

    def loglik_sums(self, theta, hessian=True):
        """``(sum_i l_i, sum_i grad l_i, sum_i hess l_i)`` over all N rows at ``theta``: one
        pass in chunks of fixed shape, two in flight (the Hessian sum is None with
        ``hessian=False``)."""
        theta = self._theta("theta", theta)
        hessian = bool(hessian)
        with self._jax.enable_x64(True):
            pending = [self._f_sums(theta, c * self._chunk, self._data, self._weights, hessian)
                       for c in range(self._n_chunks)]
            parts = [tuple(None if v is None else np.asarray(v) for v in p) for p in pending]
        L = math.fsum(float(p[0]) for p in parts)
        g = np.sum([p[1] for p in parts], axis=0)
        H = np.sum([p[2] for p in parts], axis=0) if hessian else None
        return L, g, H

    def logprior(self, theta) -> float:
        """The log prior density at ``theta``."""
        theta = self._theta("theta", theta)
        if self.prior is not None:
            return float(self.prior.logpdf(theta))
        if self._logprior_fn is None:
            return 0.0
        with self._jax.enable_x64(True):
            return float(self._f_logprior(theta))

    def grad_logprior(self, theta) -> np.ndarray:
        """The gradient of the log prior density at ``theta`` (``jax.grad``)."""
        theta = self._theta("theta", theta)
        if self.prior is not None:
            return np.asarray(self.prior.grad(theta), dtype=float)
        if self._logprior_fn is None:
            return np.zeros(self.dim)
        with self._jax.enable_x64(True):
            return np.asarray(self._f_grad_logprior(theta), dtype=float)

    def numba_translation(self):
        """This model translated to numba (:func:`~samplers.models.jaxpr_numba.translate_model`):
        a :class:`~samplers.models.jaxpr_numba.Translation` whose ``model`` is a
        :class:`~samplers.models.RowModel` on the compiled loop, or this model with the reason
        a primitive did not translate. :func:`validation.fit` asks for it before any pass
        over the data."""
        from .jaxpr_numba import translate_model

        return translate_model(self)

    @property
    def _leaves(self) -> list:
        """The data arrays (float64 or the caller's integer type), N rows each, as NumPy
        views of the model's JAX copy (no copy on the CPU)."""
        leaves = self._jax.tree_util.tree_leaves(self._data)
        return [np.asarray(leaf)[:self.N] for leaf in leaves]

    def __repr__(self):
        return f"{type(self).__name__}(N={self.N}, dim={self.dim})"
