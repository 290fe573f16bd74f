"""Your own compiled model: numba row kernels of the user's, run by the compiled chain loop.

See :class:`RowModel`.
"""

from __future__ import annotations

import hashlib
import marshal
import math
import os
import uuid
from functools import cache

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher

from design._lib.checks import check_int
from design._lib.jit import intrinsic, jit
from design._lib.passes import n_chunks, run_chunks
from design._lib.prefetch import prefetch_row
from ..priors import Prior
from ._base import BaseModel, check_finite_rows
from ._kernels import batch_grad

__all__ = ["RowModel", "row_scratch"]

#: float64s of stack memory a row kernel's :func:`row_scratch` takes (larger requests go to
#: the heap).
SCRATCH_ITEMS = 768


@intrinsic
def _stack_floats(typingctx):
    """A pointer to :data:`SCRATCH_ITEMS` float64s on the stack, allocated once in the entry
    block of the compiled function the call ends up in (after inlining: the loop over rows,
    so the memory is reused by every row; each thread has its own stack)."""
    def codegen(context, builder, signature, args):
        return cgutils.alloca_once(builder, context.get_value_type(types.float64),
                                   size=context.get_constant(types.intp, SCRATCH_ITEMS))
    return types.CPointer(types.float64)(), codegen


@jit(inline="always")
def row_scratch(n):
    """``n`` float64s of scratch for one row's kernel, uninitialised: stack memory when
    ``n <= SCRATCH_ITEMS`` (no allocation per row, and private to the thread: full passes
    run the row kernels on several threads), else a new heap array. The array must not
    outlive the kernel."""
    if n <= SCRATCH_ITEMS:
        return numba.carray(_stack_floats(), n)
    return np.empty(n)

_NAMESPACE = uuid.UUID("0f6b8f8e-6a0e-4f55-8d3e-3c1d7d2b9a41")

#: Rows per chunk of :meth:`RowModel.loglik_sums` (one result per chunk, added in order).
SUMS_CHUNK = 1 << 14
#: Relative step of the central differences that stand in for a missing gradient kernel
#: (of ``loglik_row``) or Hessian kernel (of the gradient kernel).
FD_STEP = 1e-5
#: The step when the Hessian is a difference of differences (no kernel for either).
FD_STEP2 = 1e-4
#: Agreement a given derivative kernel must show with central differences at row 0
#: (relative to ``1 + max |value|``), checked when the model is built.
DERIVATIVE_CHECK = 1e-3



def _user_kernel(kernel):
    """The user's kernel compiled again from its Python function, inlined, with a uuid from
    everything it is made of: its module and name, its code object (constants and names
    included), and the size and time of its file. Loops that inline it are cached on disk
    under keys that pickle this uuid, so an edited kernel (even a changed constant, which
    leaves the bytecode alone) is compiled afresh, while an unchanged one is found again by
    the next process."""
    func = kernel.py_func
    digest = hashlib.sha256(f"{func.__module__}.{func.__qualname__}".encode())
    digest.update(marshal.dumps(func.__code__))
    try:
        stat = os.stat(func.__code__.co_filename)
        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    except OSError:   # typed at a prompt: the code object is all there is
        pass
    compiled = numba.njit(func, inline="always", error_model="numpy", nogil=True)
    try:
        compiled._set_uuid(str(uuid.uuid5(_NAMESPACE, digest.hexdigest())))
    except Exception:   # numba's private hook changed: a random uuid (no reuse, still right)
        pass
    return compiled


def _inline(func):
    """A row kernel, inlined into the loops that call it. Its uuid is pinned from its code
    and closure (:func:`design._lib.jit.jit`), so the cached loops that inline it are found
    again by the next process; it is never compiled alone, so it needs no cache of its own
    (a kernel typed at a prompt has no file to cache in)."""
    return jit(func, inline="always", cache=False)


@cache
def _prefetch_kernel(ndims: tuple):
    """``prefetch(data, i)`` for ``data = (arrays, 1/K)``: a cache hint for row i of each
    1-D or 2-D array (rows of higher-dimensional arrays are read unhinted)."""
    lines = ["def prefetch(data, i):", "    arrays = data[0]"]
    lines += [f"    prefetch_row(arrays[{k}], i)" for k, nd in enumerate(ndims) if nd <= 2]
    lines.append("    return None")
    scope = {"prefetch_row": prefetch_row}
    exec(compile("\n".join(lines), __file__, "exec"), scope)   # one line per array
    return _inline(scope["prefetch"])


@cache
def _row_kernels(loglik_row, grad_row, hess_row, hvp_row=None):
    """``(loglik, ratio, grad, hess, hvp)`` row kernels over ``data = (arrays, 1/K)`` from the
    user's kernels (a missing gradient or Hessian kernel by central differences). Each
    user kernel is compiled again from its Python source with the toolkit's options and
    inlined (a call between compiled functions costs a reference count per array)."""
    loglik_row = _user_kernel(loglik_row)
    grad_row = None if grad_row is None else _user_kernel(grad_row)
    hess_row = None if hess_row is None else _user_kernel(hess_row)
    hvp_row = None if hvp_row is None else _user_kernel(hvp_row)

    @_inline
    def row_loglik(data, i, theta):
        return loglik_row(data[0], i, theta) * data[1]

    @_inline
    def row_ratio(data, i, theta, theta_new):
        arrays = data[0]
        return (loglik_row(arrays, i, theta_new) - loglik_row(arrays, i, theta)) * data[1]

    if grad_row is None:
        @_inline
        def user_grad(arrays, i, theta, out):
            t = theta.copy()
            for j in range(theta.shape[0]):
                h = FD_STEP * (1.0 + abs(theta[j]))
                t[j] = theta[j] + h
                up = loglik_row(arrays, i, t)
                t[j] = theta[j] - h
                down = loglik_row(arrays, i, t)
                t[j] = theta[j]
                out[j] = (up - down) / (2.0 * h)
    else:
        user_grad = grad_row

    if hess_row is None and hvp_row is not None:
        @_inline
        def user_hess(arrays, i, theta, out):
            d = theta.shape[0]
            e = np.zeros(d)
            column = np.empty(d)
            for j in range(d):
                e[j] = 1.0
                hvp_row(arrays, i, theta, e, column)
                e[j] = 0.0
                for k in range(d):
                    out[k, j] = column[k]
    elif hess_row is None:
        step = FD_STEP if grad_row is not None else FD_STEP2

        @_inline
        def user_hess(arrays, i, theta, out):
            d = theta.shape[0]
            t = theta.copy()
            up = np.empty(d)
            down = np.empty(d)
            for j in range(d):
                h = step * (1.0 + abs(theta[j]))
                t[j] = theta[j] + h
                user_grad(arrays, i, t, up)
                t[j] = theta[j] - h
                user_grad(arrays, i, t, down)
                t[j] = theta[j]
                for k in range(d):
                    out[k, j] = (up[k] - down[k]) / (2.0 * h)
            for j in range(d):
                for k in range(j):
                    s = 0.5 * (out[j, k] + out[k, j])
                    out[j, k] = s
                    out[k, j] = s
    else:
        user_hess = hess_row

    @_inline
    def row_grad(data, i, theta, out):
        user_grad(data[0], i, theta, out)
        inv_temp = data[1]
        if inv_temp != 1.0:
            for j in range(out.shape[0]):
                out[j] *= inv_temp

    @_inline
    def row_hess(data, i, theta, out):
        user_hess(data[0], i, theta, out)
        inv_temp = data[1]
        if inv_temp != 1.0:
            for j in range(out.shape[0]):
                for k in range(out.shape[1]):
                    out[j, k] *= inv_temp

    row_hvp = None
    if hvp_row is not None:
        @_inline
        def row_hvp(data, i, theta, v, out):
            hvp_row(data[0], i, theta, v, out)
            inv_temp = data[1]
            if inv_temp != 1.0:
                for j in range(out.shape[0]):
                    out[j] *= inv_temp

    return row_loglik, row_ratio, row_grad, row_hess, row_hvp


@cache
def _chunk_sums(row_loglik, row_grad, row_hess):
    """Kernel writing, for chunks ``c0 <= c < c1``, the chunk's sums of the row
    log-likelihoods, gradients and (``hessian``) Hessians into ``Ls[c]``, ``gs[c]``,
    ``Hs[c]``, rows added in order; stops a chunk at its first non-finite log-likelihood."""

    @jit
    def kernel(data, theta, N, chunk, hessian, Ls, gs, Hs, c0, c1):
        d = theta.shape[0]
        g = np.empty(d)
        H = np.empty((d, d))
        for c in range(c0, c1):
            acc_g = gs[c]
            acc_H = Hs[c]
            acc_g[:] = 0.0
            acc_H[:, :] = 0.0
            total = 0.0
            for i in range(c * chunk, min((c + 1) * chunk, N)):
                total += row_loglik(data, i, theta)
                if not math.isfinite(total):
                    break
                row_grad(data, i, theta, g)
                for j in range(d):
                    acc_g[j] += g[j]
                if hessian:
                    row_hess(data, i, theta, H)
                    for j in range(d):
                        for k in range(d):
                            acc_H[j, k] += H[j, k]
            Ls[c] = total

    return kernel


class _CallablePrior(Prior):
    """A log prior given as a Python function (no compiled kernel: chains of a model with it
    run on the Python loop)."""

    def __init__(self, logprior, grad_logprior):
        self._logprior, self._grad_logprior = logprior, grad_logprior

    def logpdf(self, theta):
        return float(self._logprior(np.asarray(theta, dtype=float)))

    def grad(self, theta):
        theta = np.asarray(theta, dtype=float)
        if self._grad_logprior is not None:
            return np.asarray(self._grad_logprior(theta), dtype=float).reshape(theta.shape)
        out = np.empty(theta.shape[0])
        for j in range(theta.shape[0]):
            h = 1e-6 * (1.0 + abs(theta[j]))
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            out[j] = (self.logpdf(up) - self.logpdf(down)) / (2.0 * h)
        return out


def _check_kernel(name, fn, required=False):
    if (fn is not None or required) and not isinstance(fn, Dispatcher):
        raise TypeError(f"{name} must be a numba-compiled function (decorate it with "
                        f"@numba.njit), got {type(fn).__name__} {getattr(fn, '__name__', fn)!r}")


def _row_data(data):
    """The user's data as a tuple of arrays with the same number of rows (not copied)."""
    if isinstance(data, np.ndarray):
        raise TypeError("data must be a tuple of arrays, got one array: pass (x,) and read "
                        "it as data[0] in the kernels")
    if not isinstance(data, (tuple, list)) or not data:
        raise TypeError(f"data must be a non-empty tuple of arrays (rows along axis 0), got "
                        f"{type(data).__name__}")
    arrays = tuple(data)
    for k, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"data[{k}] must be a NumPy array (or memmap), got "
                            f"{type(a).__name__}")
        if a.dtype.kind not in "biuf":
            raise TypeError(f"data[{k}] must be numeric, got dtype {a.dtype}")
        if a.ndim == 0:
            raise ValueError(f"data[{k}] must have a leading axis of rows, got a scalar")
    lengths = [a.shape[0] for a in arrays]
    if any(n != lengths[0] for n in lengths):
        raise ValueError(f"data arrays must all have the same number of rows, got {lengths}")
    if lengths[0] < 1:
        raise ValueError("data must hold at least one row, got 0")
    return arrays


def _differences(fn, theta, step):
    """Central differences of the vector function ``fn`` at ``theta``: ``J[k, j] = d fn_k /
    d theta_j`` (steps ``step (1 + |theta_j|)``)."""
    columns = []
    for j in range(theta.shape[0]):
        h = step * (1.0 + abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        columns.append((fn(up) - fn(down)) / (2.0 * h))
    return np.column_stack(columns)


def _fd_check(name, value, reference):
    scale = 1.0 + float(np.max(np.abs(reference)))
    err = float(np.max(np.abs(value - reference)))
    if not err <= DERIVATIVE_CHECK * scale:
        raise ValueError(f"{name} disagrees with central differences at row 0 "
                         f"(largest difference {err:.3g}, values up to {scale - 1.0:.3g}): "
                         f"got {np.round(value, 6).tolist()}, differences give "
                         f"{np.round(reference, 6).tolist()}")


class RowModel(BaseModel):
    r"""A model from numba-compiled row kernels: the user's own model on the compiled loop.

    The user writes one row's log-likelihood as a ``numba.njit`` function of the data tuple,
    the row index and theta (and, optionally, its gradient and Hessian); the model inlines
    them into the samplers' compiled loops, so a chain (``sample(..., compiled=True)``), a
    full-data pass and :class:`~samplers.ControlVariates` around it run without Python per
    row or per step.

    Parameters
    ----------
    loglik_row : numba dispatcher
        ``loglik_row(data, i, theta) -> float``: the log-likelihood of row ``i``; ``data``
        is the tuple below (read ``data[k][i]``), ``theta`` a float64 vector of length
        ``dim``. Decorated with ``@numba.njit``.
    data : tuple of arrays
        The rows: every array has the same leading length N (rows along axis 0). Read in
        place, never copied nor modified (memmaps stay on disk); float arrays are checked
        for NaN and inf once (skipped inside :func:`~samplers.models.skip_data_checks`).
    dim : int
        The length of theta.
    logprior : samplers.priors.Prior, callable or None
        A :class:`~samplers.priors.Prior` (compiled: the chain stays on the compiled loop),
        a Python function of theta (then chains run on the Python loop) or None (flat).
    grad_row : numba dispatcher, optional
        ``grad_row(data, i, theta, out)`` writes the gradient of row i's log-likelihood into
        ``out`` (length ``dim``). Without it, central differences of ``loglik_row`` (steps
        ``1e-5 (1 + |theta_j|)``, 2 dim evaluations per row).
    hess_row : numba dispatcher, optional
        ``hess_row(data, i, theta, out)`` writes the Hessian of row i's log-likelihood into
        ``out`` (``dim x dim``); what second-order control variates read at the center.
        Without it, central differences of the gradient kernel (symmetrised).
    grad_logprior : callable, optional
        The gradient of a ``logprior`` given as a function (else central differences).
    names : sequence of str, optional
        Parameter names (the ArviZ coordinates).
    temperature : float
        K > 0; the likelihood is raised to 1/K.

    Attributes
    ----------
    N, dim : int
    data : tuple of arrays
    names : list of str or None

    Notes
    -----
    **Checks, before any pass over the data.** Each kernel must be a numba dispatcher; the
    data a tuple of numeric arrays with equal numbers of rows; ``loglik_row`` must compile
    for this tuple and return a float at row 0 and ``theta = 0`` (not NaN); a given
    ``grad_row`` / ``hess_row`` / ``hvp_row`` must agree with central differences (of
    ``loglik_row`` / of the gradient) at row 0 and a point near 0 (``0.01 cos(j)``: not 0,
    where kinks such as ``max(eta, 0)`` sit) to ``1e-3 (1 + max |value|)``. Only then are the
    float arrays scanned for NaN and inf.

    **What the samplers get.** The row kernels ``loglik``, ``ratio`` (``loglik_row`` at
    theta' minus at theta: each row read twice), ``grad``, ``hess`` and a prefetch of each
    1-D or 2-D array's row (:mod:`samplers.models.compiled`); :meth:`loglik_sums`, the sums
    of the row values, gradients and Hessians over all N rows in one compiled pass on every
    core (:class:`~samplers.ControlVariates` finds the mode by Newton's method on it, and
    reads its proxy's sums there); :class:`~samplers.ControlVariates` around a RowModel runs
    its residuals on the compiled loop too, from the gradient and Hessian kernels at the
    center (O(dim^2) per row). A RowModel has no bound on the l_i, so
    :class:`~samplers.ConfidenceTest` needs ``range="full-data"`` on it.

    The kernels are compiled for the types of this model's data (a new tuple of other
    dtypes compiles them again) and cached on disk under a uuid of the kernel's code (and
    file, if it has one; :func:`_user_kernel`): the first process pays their compilation
    (tens of seconds), the next ones load them, even for a kernel typed at a prompt.

    Examples
    --------
    A Poisson regression, ``y_i ~ Poisson(exp(x_i . theta))``:

    >>> import math
    >>> import numba
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianPrior, AustereTest, RandomWalk, sample
    >>> from samplers.models import RowModel
    >>> @numba.njit
    ... def poisson_row(data, i, theta):
    ...     X, y, log_y_factorial = data
    ...     eta = 0.0
    ...     for j in range(X.shape[1]):
    ...         eta += X[i, j] * theta[j]
    ...     return y[i] * eta - math.exp(eta) - log_y_factorial[i]
    >>> @numba.njit
    ... def poisson_grad(data, i, theta, out):
    ...     X, y, _ = data
    ...     eta = 0.0
    ...     for j in range(X.shape[1]):
    ...         eta += X[i, j] * theta[j]
    ...     w = y[i] - math.exp(eta)
    ...     for j in range(X.shape[1]):
    ...         out[j] = w * X[i, j]
    >>> @numba.njit
    ... def poisson_hess(data, i, theta, out):
    ...     X, _, _ = data
    ...     eta = 0.0
    ...     for j in range(X.shape[1]):
    ...         eta += X[i, j] * theta[j]
    ...     w = -math.exp(eta)
    ...     for j in range(X.shape[1]):
    ...         for k in range(X.shape[1]):
    ...             out[j, k] = w * X[i, j] * X[i, k]
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(20_000), rng.normal(size=(20_000, 2))])
    >>> y = rng.poisson(np.exp(X @ [0.5, 0.3, -0.2])).astype(float)
    >>> from scipy.special import gammaln
    >>> model = RowModel(poisson_row, (X, y, gammaln(y + 1.0)), dim=3,
    ...                  logprior=GaussianPrior(0.0, 10.0), grad_row=poisson_grad,
    ...                  hess_row=poisson_hess)
    >>> cv = ControlVariates(model)
    >>> chain = sample(cv, AustereTest(m=100, epsilon=0.05), RandomWalk.from_laplace(cv),
    ...                cv.center.theta, 2_000, rng=1, compiled=True)
    >>> bool(np.allclose(chain.samples.mean(axis=0), [0.5, 0.3, -0.2], atol=0.05))
    True
    """

    def __init__(self, loglik_row, data, *, dim, logprior=None, grad_row=None, hess_row=None,
                 hvp_row=None, grad_logprior=None, names=None, temperature=1.0):
        _check_kernel("loglik_row", loglik_row, required=True)
        _check_kernel("grad_row", grad_row)
        _check_kernel("hess_row", hess_row)
        _check_kernel("hvp_row", hvp_row)
        self.data = _row_data(data)
        self.N = self.data[0].shape[0]
        dim = check_int("dim", dim, low=1)
        self.names = None if names is None else [str(n) for n in names]
        if self.names is not None and len(self.names) != dim:
            raise ValueError(f"names must have one entry per parameter ({dim}), got "
                             f"{len(self.names)}")
        if isinstance(logprior, Prior) or logprior is None:
            prior = logprior
            if grad_logprior is not None:
                raise TypeError("grad_logprior goes with a logprior given as a function; a "
                                "samplers.priors.Prior has its own gradient")
        elif callable(logprior):
            if not (grad_logprior is None or callable(grad_logprior)):
                raise TypeError(f"grad_logprior must be a function of theta, got "
                                f"{type(grad_logprior).__name__}")
            prior = _CallablePrior(logprior, grad_logprior)
        else:
            raise TypeError(f"logprior must be a samplers.priors.Prior, a function of theta "
                            f"or None, got {type(logprior).__name__}")
        super().__init__(prior=prior, temperature=temperature, dim=dim)
        self._user = (loglik_row, grad_row, hess_row, hvp_row)
        self._check_kernels()
        # no range of the l_i: ConfidenceTest(range="model") refuses the model, naming
        # range="full-data"
        self._loglik_ratio_range = self._loglik_ratio_bound = None
        for k, a in enumerate(self.data):
            if a.dtype.kind == "f":
                check_finite_rows(f"data[{k}]", a)

    # -- the checks before any pass -------------------------------------------------------

    def _check_kernels(self):
        loglik_row, grad_row, hess_row, hvp_row = self._user
        theta0 = np.zeros(self.dim)
        try:
            value = loglik_row(self.data, 0, theta0)
        except Exception as exc:
            raise TypeError(f"loglik_row(data, i, theta) fails on row 0 with theta of shape "
                            f"({self.dim},) for this data tuple: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
        if not isinstance(value, float):
            raise TypeError(f"loglik_row must return a float (one row's log-likelihood), got "
                            f"{type(value).__name__} {value!r} for row 0")
        if math.isnan(value):
            raise ValueError("loglik_row returns NaN at row 0 and theta = 0 (the first point "
                             "it is checked at): fix the kernel or the data of row 0")
        v = np.linspace(1.0, 2.0, self.dim)   # the direction hvp_row is checked along
        for name, fn, shape in (("grad_row", grad_row, (self.dim,)),
                                ("hess_row", hess_row, (self.dim, self.dim)),
                                ("hvp_row", hvp_row, (self.dim,))):
            if fn is None:
                continue
            out = np.full(shape, np.nan)
            extra = (v,) if name == "hvp_row" else ()
            try:
                returned = fn(self.data, 0, theta0, *extra, out)
            except Exception as exc:
                raise TypeError(f"{name}(data, i, theta, out) fails on row 0 with out of shape "
                                f"{shape}: {type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
            if returned is not None:
                raise TypeError(f"{name} must write into out and return nothing, got "
                                f"{type(returned).__name__}")
            if not np.all(np.isfinite(out)):
                raise ValueError(f"{name} leaves non-finite values in out at row 0 and theta = "
                                 f"0 (every entry of out, shape {shape}, must be written): "
                                 f"{out.tolist()}")
        # the derivatives given against central differences at row 0, by calls from Python
        # (no loop compiled for the check), at a point near 0 that is not 0 (where kinks
        # such as max(eta, 0) sit)
        theta0 = 0.01 * np.cos(np.arange(1.0, self.dim + 1.0))
        if not math.isfinite(loglik_row(self.data, 0, theta0)):
            return
        if grad_row is not None:
            out = np.empty(self.dim)
            grad_row(self.data, 0, theta0, out)
            _fd_check("grad_row", out, _differences(
                lambda t: np.array([loglik_row(self.data, 0, t)]), theta0, FD_STEP)[0])
        else:
            def grad_row(data, i, theta, out):
                out[:] = _differences(lambda t: np.array([loglik_row(data, i, t)]), theta,
                                      FD_STEP)[0]

        def gradient(t):
            g = np.empty(self.dim)
            grad_row(self.data, 0, t, g)
            return g

        if hess_row is not None or hvp_row is not None:
            step = FD_STEP if self._user[1] is not None else FD_STEP2
            H = _differences(gradient, theta0, step)
            H = 0.5 * (H + H.T)
        if hess_row is not None:
            out = np.empty((self.dim, self.dim))
            hess_row(self.data, 0, theta0, out)
            _fd_check("hess_row", out, H)
            H = out
        if hvp_row is not None:
            out = np.empty(self.dim)
            hvp_row(self.data, 0, theta0, v, out)
            _fd_check("hvp_row", out, H @ v)

    # -- the compiled-model interface -----------------------------------------------------

    @property
    def _kernels(self):
        return _row_kernels(*self._user)

    @property
    def _row_loglik(self):
        return self._kernels[0]

    @property
    def _row_ratio(self):
        return self._kernels[1]

    @property
    def _row_grad(self):
        return self._kernels[2]

    @property
    def _row_hess(self):
        return self._kernels[3]

    @property
    def _row_hvp(self):
        return self._kernels[4]

    @property
    def _row_prefetch(self):
        return _prefetch_kernel(tuple(a.ndim for a in self.data))

    def _kernel_data(self):
        return (self.data, self._inv_temp)

    # -- derivatives and full passes ------------------------------------------------------

    def hess_loglik(self, theta, idx) -> np.ndarray:
        """Per-row Hessians of the tempered log-likelihood, shape ``(len(idx), dim, dim)``."""
        theta = self._check_theta("theta", theta)
        idx = self._check_idx(idx)
        out = np.empty((idx.shape[0], self.dim, self.dim))
        # batch_grad's loop writes each row's array into out[t]: a Hessian as well
        batch_grad(self._row_hess, self._row_prefetch)(self._kernel_data(), idx, theta, out)
        return out

    def loglik_sums(self, theta, hessian=True):
        """``(sum_i l_i, sum_i grad l_i, sum_i hess l_i)`` over all N rows at ``theta`` in one
        compiled pass on every core (chunks added in order: the result does not depend on the
        threads); the Hessian sum is None with ``hessian=False``; ``(L, None, None)`` when a
        row's log-likelihood is not finite."""
        theta = self._check_theta("theta", theta)
        hessian = bool(hessian)
        d = self.dim
        count = n_chunks(self.N, SUMS_CHUNK)
        Ls = np.empty(count)
        gs = np.empty((count, d))
        Hs = np.empty((count, d, d) if hessian else (count, 0, 0))
        kernel = _chunk_sums(self._row_loglik, self._row_grad, self._row_hess)
        run_chunks(kernel, count, self._kernel_data(), theta, self.N, SUMS_CHUNK, hessian,
                   Ls, gs, Hs)
        L = 0.0
        for c in range(count):
            L += Ls[c]
            if not math.isfinite(L):
                return float(L), None, None
        return L, gs.sum(axis=0), (Hs.sum(axis=0) if hessian else None)

    def __repr__(self):
        return (f"RowModel({self._user[0].__name__}, N={self.N}, dim={self.dim}, "
                f"temperature={self.temperature:g})")

