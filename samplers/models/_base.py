"""The model protocol, the base class of the built-in models, and data handling.

A model is any object with

* ``N`` -- the number of data rows (int);
* ``loglik(theta, idx)`` -- per-datum log-likelihoods of rows ``idx`` (an integer array),
  returned as a float array of the same length;
* ``logprior(theta)`` -- the log prior density (a float, ``-inf`` outside the support).

and optionally ``grad_loglik(theta, idx)`` (per-datum gradients, shape ``(len(idx), d)``),
``grad_logprior(theta)``, a fused ``loglik_ratio(theta, theta_new, idx)`` that returns
``l_i = log p(x_i | theta_new) - log p(x_i | theta)`` reading each row once, and
``loglik_ratio_bound(theta, theta_new)``, an upper bound on ``max_i |l_i|`` over all N rows
(used by the concentration-bound test), or the tighter ``loglik_ratio_range(theta,
theta_new) -> (center, half_width)`` with every ``l_i`` within ``half_width`` of ``center``.

Data are read in place and never copied, so they may be a :class:`numpy.memmap` larger than
memory; nothing in a sampler step touches more rows than the test asks for.

Construction of a built-in model reads its data once, in chunks of ``SCAN_CHUNK`` rows with
a progress bar on a terminal: the finiteness check (and, for the logistic regression, the
label check). At 10^8 rows of a memmap that is a pass over the whole file (1.2 GB for
``GaussianMean`` in float64). Inside ``with skip_data_checks():`` the finiteness checks are
skipped (the caller vouches for the data) and the label check stops at the first chunk that
decides the label convention. The data summaries the concentration-bound test needs
(``loglik_ratio_bound``: data range, largest row norm) are computed on first use, by one
chunked pass, never at construction.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import numpy as np

from design._lib.checks import check_finite_array, check_positive
from design._lib.distribute import as_cluster, map_ranges
from design._lib.progress import progress_bar
from .. import sources as _sources
from ..priors import FlatPrior, Prior
from ..sources import memmap_spec as _memmap_spec, open_memmap_spec as _open_memmap_spec
from ._kernels import batch_grad, batch_loglik, batch_ratio
from .compiled import BlockModel, RowKernels, same_data

__all__ = ["Model", "BaseModel", "loglik_ratio", "as_data_array", "check_data_files",
           "data_rows", "regression_data", "scan_rows", "skip_data_checks"]

#: Rows per chunk when a model scans its data once at construction.
SCAN_CHUNK = 1 << 16


@runtime_checkable
class Model(Protocol):
    """What the samplers need from a model (see the module docstring for optional methods).

    Examples
    --------
    A user-written model: the mean of Gaussian data with unit variance and a flat prior.

    >>> import numpy as np
    >>> class UnitGaussianMean:
    ...     def __init__(self, x):
    ...         self.x = x
    ...         self.N = len(x)
    ...     def loglik(self, theta, idx):
    ...         return -0.5 * (self.x[idx] - theta[0]) ** 2
    ...     def logprior(self, theta):
    ...         return 0.0
    >>> model = UnitGaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 10_000))
    >>> isinstance(model, Model)
    True
    >>> loglik_ratio(model, np.array([0.9]), np.array([1.0]), np.arange(3)).shape
    (3,)
    """

    N: int

    def loglik(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray: ...

    def logprior(self, theta: np.ndarray) -> float: ...


def loglik_ratio(model, theta, theta_new, idx) -> np.ndarray:
    """Per-datum log-likelihood ratios ``l_i`` of rows ``idx`` between ``theta`` and ``theta_new``.

    Uses the model's fused ``loglik_ratio`` when it has one, otherwise the difference of two
    ``loglik`` calls.
    """
    fused = getattr(model, "loglik_ratio", None)
    if fused is not None:
        return np.asarray(fused(theta, theta_new, idx), dtype=float)
    return np.asarray(model.loglik(theta_new, idx), dtype=float) - np.asarray(
        model.loglik(theta, idx), dtype=float
    )


def as_data_array(name: str, arr, *, ndim: int) -> np.ndarray:
    """Return ``arr`` as a float array without copying when it already is one.

    Float32/float64 arrays (including memmaps) are kept as they are, so a memmap stays on
    disk. Anything else is converted to a new float64 array.
    """
    if isinstance(arr, np.ndarray) and arr.dtype in (np.float32, np.float64):
        out = arr
    elif _is_store(arr):
        raise TypeError(f"{name} is a store ({type(arr).__name__}), which this model reads in "
                        "place only as a numpy array or memmap: it is not loaded into memory "
                        "here; write it to a .npy file and pass np.load(path, mmap_mode='r')")
    else:
        if isinstance(arr, np.memmap):
            raise TypeError(
                f"{name} is a memmap of dtype {arr.dtype}; use float32 or float64 so it can be "
                "read in place"
            )
        if np.iscomplexobj(arr):
            raise TypeError(f"{name} must be real, got complex values (dtype "
                            f"{np.asarray(arr).dtype}); pass the real part explicitly if meant")
        try:
            out = np.array(arr, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an array of real numbers") from exc
    if out.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {out.shape}")
    if out.shape[0] < 1:
        raise ValueError(f"{name} must have at least one row, got shape {out.shape}")
    return out


def _is_store(arr) -> bool:
    """Whether ``arr`` is read through a row source (a Zarr array, an h5py dataset, a dask
    array or a user's :class:`~samplers.sources.RowSource`) rather than in place."""
    if isinstance(arr, np.ndarray) or isinstance(arr, (list, tuple)):
        return False
    mod = type(arr).__module__ or ""
    return (mod.startswith(("zarr", "h5py", "dask"))
            or all(hasattr(arr, a) for a in ("shape", "dtype", "read_range", "read_rows")))


def _is_source(value) -> bool:
    """A row source held by a model (not an array read in place, nor a constant)."""
    return (value is not None and not isinstance(value, np.ndarray)
            and hasattr(value, "read_range") and hasattr(value, "read_rows"))


def data_rows(name: str, arr, *, ndim: int):
    """A model's per-row data: a float array read in place (:func:`as_data_array`: numpy
    arrays and memmaps, as before), or a :class:`~samplers.sources.RowSource` for a store
    (Zarr, h5py, dask, a user's source), checked for ``ndim``, at least one row and a float
    dtype without reading any row.
    """
    if not _is_store(arr):
        return as_data_array(name, arr, ndim=ndim)
    src = _sources.as_source(arr, name)
    if len(src.shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(src.shape)} "
                         f"({src!r})")
    if src.shape[0] < 1:
        raise ValueError(f"{name} must have at least one row, got shape {tuple(src.shape)}")
    if np.dtype(src.dtype) not in (np.float32, np.float64):
        raise TypeError(f"{name} must hold float32 or float64 rows, got dtype {src.dtype} "
                        f"({src!r})")
    return src


def regression_data(X, y, *, entry: str = "value", executor=None):
    """``X`` (2-D, finite) and ``y`` (one ``entry`` per row of ``X``) of a regression model;
    ``y`` is left for the model to check (finite values, or labels). Each is a float array
    or, for a store, a row source (:func:`data_rows`); a store's X is checked on
    ``executor`` if given (:func:`check_finite_rows`)."""
    X = data_rows("X", X, ndim=2)
    y = data_rows("y", y, ndim=1)
    if y.shape[0] != X.shape[0]:
        store = "" if isinstance(X, np.ndarray) and isinstance(y, np.ndarray) else (
            " (a store whose rows differ between X and y)")
        raise ValueError(f"y must have one {entry} per row of X ({X.shape[0]}), got "
                         f"{y.shape[0]}{store}")
    check_finite_rows("X", X, executor=executor)
    return X, y


_SKIP_CHECKS = contextvars.ContextVar("austerity_skip_data_checks", default=False)


@contextmanager
def skip_data_checks():
    """Build built-in models without their O(N) data checks (the caller vouches for the data).

    Inside the block, constructing ``GaussianMean``, ``LogisticRegression``, ... does not
    read the whole dataset to refuse NaN or inf (which would otherwise be a full pass over a
    memmap at construction); a NaN in the data then surfaces as a NaN log-likelihood ratio
    (a ValueError naming the point) when a test reads that row.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers.models import GaussianMean, skip_data_checks
    >>> x = np.random.default_rng(0).normal(size=1000)
    >>> with skip_data_checks():
    ...     model = GaussianMean(x)       # no pass over x
    >>> model.N
    1000
    """
    token = _SKIP_CHECKS.set(True)
    try:
        yield
    finally:
        _SKIP_CHECKS.reset(token)


def data_checks_skipped() -> bool:
    """Whether the caller is inside :func:`skip_data_checks`."""
    return _SKIP_CHECKS.get()


def scan_rows(arr, fn, *, chunk: int = SCAN_CHUNK, desc: str = "scanning data",
              verify: bool = False, executor=None):
    """Apply ``fn`` to consecutive row blocks of ``arr`` and yield the results (one pass,
    with a progress bar on a terminal). A row source is read by blocks
    (:func:`samplers.sources.read_blocks`: the next block read while ``fn`` runs), each
    compared with the store's checksum if ``verify`` (a data check).

    ``fn`` sees the same blocks of ``chunk`` rows (the last one shorter) whether ``arr`` is
    in memory or in a store, so a sum of its results rounds the same way: the store's reads
    (about :data:`samplers.sources.BLOCK_BYTES` each, aligned on its checksum blocks when
    ``verify``) are cut into ``chunk``-row blocks, a block that straddles two reads joined
    from both (at most ``chunk`` rows copied per read).

    With ``executor`` (a ``dask.distributed.Client``, its executor or any
    ``concurrent.futures`` executor) a row source is scanned there, ranges of whole reads
    in tasks (:func:`design._lib.distribute.map_ranges`; ``fn`` must pickle and its results
    should be small): the same chunks and results, yielded here in order once the ranges
    are back; a checksum error is the local one (the first in row order), raised after the
    results of the chunks before it. A store whose checksum blocks and ``chunk`` rows have
    no common multiple within four times the larger is scanned here (a chunk would
    straddle two tasks).

    Examples
    --------
    >>> import numpy as np
    >>> [b.tolist() for b in scan_rows(np.arange(5.0), lambda b: b, chunk=2)]
    [[0.0, 1.0], [2.0, 3.0], [4.0]]
    """
    chunk = int(chunk)
    if chunk < 1:
        raise ValueError(f"chunk must be a positive number of rows, got {chunk}")
    if not isinstance(arr, np.ndarray):
        src, read = arr, None
        if not (verify and getattr(src, "verify_rows", None)):
            row_bytes = max(1, int(np.prod(src.shape[1:], dtype=np.int64))
                            * np.dtype(src.dtype).itemsize)
            read = max(1, _sources.BLOCK_BYTES // (row_bytes * chunk)) * chunk
        cluster = as_cluster(executor)
        read = read or check_block_rows(src)
        if cluster is not None and math.lcm(read, chunk) <= 4 * max(read, chunk):
            # ranges of whole chunks and whole checksum blocks (else: here)
            yield from _scan_on(cluster, src, fn, chunk, math.lcm(read, chunk), verify, desc)
            return
        carry = None
        for _, block in _sources.read_blocks(src, read, desc=desc, progress=None,
                                             verify=verify):
            if carry is not None:                 # the rest of a chunk begun in the last read
                head = np.concatenate([carry, block[:chunk - carry.shape[0]]])
                block = block[chunk - carry.shape[0]:]
                carry = None
                if head.shape[0] < chunk:
                    carry = head
                    continue
                yield fn(head)
            whole = block.shape[0] - block.shape[0] % chunk
            for start in range(0, whole, chunk):
                yield fn(block[start:start + chunk])
            if whole < block.shape[0]:
                carry = block[whole:]
        if carry is not None:
            yield fn(carry)
        return
    with progress_bar(arr.shape[0], desc=desc, unit="row") as bar:
        for start in range(0, arr.shape[0], chunk):
            block = arr[start : start + chunk]
            yield fn(block)
            bar.update(block.shape[0])


def check_finite_rows(name: str, arr, *, executor=None) -> None:
    """Refuse data with NaN or inf, naming the first bad row (one chunked pass, with a
    progress bar on a terminal; skipped inside :func:`skip_data_checks`).

    A row source is read by blocks (:func:`check_block_rows` rows), each compared with the
    store's checksum when it has one (:func:`samplers.sources.read_blocks`), and the error
    names the block's row range. With ``executor`` (a ``dask.distributed.Client``, its
    executor or any ``concurrent.futures`` executor) a source's blocks are checked there,
    ranges of whole blocks in tasks that reopen the store by its path; the error raised is
    the local one (the first bad block in row order, whatever the order the tasks finish
    in). Arrays in memory are checked here.

    Examples
    --------
    >>> import numpy as np
    >>> check_finite_rows("x", np.array([1.0, np.nan]))
    Traceback (most recent call last):
    ...
    ValueError: x must be finite; row 1 holds np.float64(nan)
    """
    cluster = as_cluster(executor)
    if data_checks_skipped():
        return
    if not isinstance(arr, np.ndarray):
        rows = check_block_rows(arr)
        if cluster is not None:
            _check_on(cluster, name, arr, rows)
            return
        for start, block in _sources.read_blocks(arr, rows, verify=True,
                                                 desc=f"checking {name}"):
            error = _nonfinite_error(name, arr.name, start, block)
            if error is not None:
                raise error
        return
    with progress_bar(arr.shape[0], desc=f"checking {name}", unit="row") as bar:
        for start in range(0, arr.shape[0], SCAN_CHUNK):
            block = np.asarray(arr[start : start + SCAN_CHUNK])
            ok = np.isfinite(block)
            if not ok.all():
                bad = ok.reshape(block.shape[0], -1).all(axis=1)
                row = start + int(np.flatnonzero(~bad)[0])
                raise ValueError(f"{name} must be finite; row {row} holds "
                                 f"{block[row - start]!r}")
            bar.update(block.shape[0])


def _nonfinite_error(name, source_name, start, block):
    """The error :func:`check_finite_rows` raises for rows ``start ..`` of a source, or None
    if they are finite."""
    ok = np.isfinite(block)
    if ok.all():
        return None
    bad = ok.reshape(block.shape[0], -1).all(axis=1)
    row = start + int(np.flatnonzero(~bad)[0])
    return ValueError(
        f"{name} must be finite; rows [{start}, {start + block.shape[0]}) of "
        f"{source_name!r} hold non-finite values, the first at row {row}: "
        f"{np.asarray(block[row - start]).tolist()!r}")


def check_block_rows(source) -> int:
    """Rows per block of a data check over a source: about
    :data:`samplers.sources.BLOCK_BYTES` of rows, a whole number of its checksum blocks."""
    row_bytes = max(1, int(np.prod(source.shape[1:], dtype=np.int64))
                    * np.dtype(source.dtype).itemsize)
    rows = max(1, _sources.BLOCK_BYTES // row_bytes)
    per_checksum = getattr(source, "verify_rows", None)
    if per_checksum:
        rows = max(1, rows // per_checksum) * per_checksum
    return rows


class _SourceRange:
    """Rows ``start .. stop - 1`` of a source, for a task on another process: a store source
    pickles as its path, rows held here as those rows only
    (:func:`samplers.sources.task_part`). Calling it gives ``(source, start, stop)``."""

    def __init__(self, source, start, stop):
        self.part = _sources.task_part(source, start, stop)
        self.name, self.start, self.stop = source.name, start, stop

    def __call__(self):
        part = self.part
        if isinstance(part, np.ndarray):
            part = _sources._RowsFrom(_sources.ArraySource(part, self.name), self.start)
        return part, self.start, self.stop


def _check_range(rows, name, block_rows):
    """A task of :func:`check_finite_rows`: the first error of a range's blocks (a
    non-finite row or a checksum that differs), returned rather than raised so that the
    client raises the first in row order; None if the range is sound."""
    source, start, stop = rows
    try:
        for first, block in _sources.read_blocks(source, block_rows, start=start, stop=stop,
                                                 verify=True):
            error = _nonfinite_error(name, source.name, first, block)
            if error is not None:
                return error
    except _sources.ChecksumError as error:
        return error
    return None


def _check_on(cluster, name, source, block_rows):
    def merge(start, stop, error):
        if error is not None:
            raise error

    map_ranges(cluster, lambda a, b: _SourceRange(source, a, b), _check_range,
               (name, block_rows), merge, N=source.shape[0], chunk=block_rows,
               desc=f"checking {name}")


def _scan_range(rows, fn, chunk, read, verify):
    """A task of :func:`scan_rows`: ``(results, error)``, ``fn`` of each ``chunk``-row block
    of a range (read ``read`` rows at a time) up to the checksum error met, if any."""
    source, start, stop = rows
    out = []
    try:
        for _, block in _sources.read_blocks(source, read, start=start, stop=stop,
                                             verify=verify):
            out.extend(fn(block[k:k + chunk]) for k in range(0, block.shape[0], chunk))
    except _sources.ChecksumError as error:
        return out, error
    return out, None


class _StopPass(Exception):
    """A range came back with an error: the pass ends there (its other tasks cancelled)."""


def _scan_on(cluster, source, fn, chunk, read, verify, desc):
    results, failed = [], []

    def merge(start, stop, got):
        results.extend(got[0])
        if got[1] is not None:
            failed.append(got[1])
            raise _StopPass

    try:
        map_ranges(cluster, lambda a, b: _SourceRange(source, a, b), _scan_range,
                   (fn, chunk, read, verify), merge, N=source.shape[0], chunk=read,
                   desc=desc)
    except _StopPass:
        pass
    yield from results
    if failed:
        raise failed[0]


# --- full-data passes over a store: blocks of rows as in-memory models ----------------------


def block_rows(model, chunk: int) -> int:
    """Rows per block of a full-data pass over ``model``'s store: a multiple of ``chunk``
    (so the pass's chunks, and its results, are those of the in-memory pass) holding about
    :data:`samplers.sources.BLOCK_BYTES` of rows."""
    row_bytes = 0
    for src in model.data_sources().values():
        row_bytes += int(np.prod(src.shape[1:], dtype=np.int64)) * np.dtype(src.dtype).itemsize
    per_block = _sources.BLOCK_BYTES // max(1, row_bytes * chunk)
    return max(1, int(per_block)) * chunk


def pass_blocks(model, chunk: int):
    """Yield ``(first_row, block_model)`` covering all of ``model``'s rows in order.

    A model that reads its data in place (numpy arrays, memmaps) is one block: itself. A
    model whose rows are in a store is cut into :func:`block_rows` blocks
    (:meth:`BaseModel.row_block`), the next block read on a second thread while the caller
    computes on this one: at most two blocks are held.
    """
    if not (isinstance(model, BaseModel) and model._store_backed):
        yield 0, model
        return
    N = model.N
    step = block_rows(model, chunk)
    starts = list(range(0, N, step))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="austerity-read") as pool:
        ahead = pool.submit(model.row_block, 0, min(step, N))
        try:
            for k, start in enumerate(starts):
                block = ahead.result()
                ahead = None
                if k + 1 < len(starts):
                    nxt = starts[k + 1]
                    ahead = pool.submit(model.row_block, nxt, min(nxt + step, N))
                yield start, block
                del block
        finally:
            if ahead is not None:
                ahead.cancel()


# --- memmaps survive pickling (for process pools) without copying the data -----------------


def _file_end(spec) -> int:
    """Bytes of the file an array described by :func:`_memmap_spec` reaches into."""
    shape, strides = spec["shape"], spec["strides"]
    if not all(shape):
        return 0
    reach = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return spec["byte_offset"] + reach + np.dtype(spec["dtype"]).itemsize


def check_data_files(model) -> None:
    """Refuse a model whose memmapped data file is now shorter than its arrays.

    Reading a page of a memmap beyond the end of its file kills the process (SIGBUS), so a
    file truncated after the model was built must be caught before any row is read: every
    chain and full-data pass starts here (:func:`samplers.check_model`). One ``os.stat`` per
    memmapped array of the model, and of the models it wraps (control variates); a file
    that no longer exists under its name is not checked (the mapping keeps the deleted
    file's data readable).

    Raises
    ------
    ValueError
        Naming the attribute, the file, its size and the size the model's rows need.
    """
    for name, arr in _data_arrays(model):
        spec = _memmap_spec(arr)
        if spec is None:
            continue
        try:
            size = os.stat(spec["filename"]).st_size
        except OSError:
            continue
        need = _file_end(spec)
        if size < need:
            raise ValueError(
                f"the data file {spec['filename']!r} of {type(model).__name__}'s {name} "
                f"({arr.shape[0]} rows) is {size} bytes, shorter than the {need} bytes those "
                "rows need: it was truncated or rewritten after the model was built; rebuild "
                "the model from the complete file")


def _data_arrays(model, prefix="model", depth=0):
    """``(name, array)`` of the arrays a model holds as attributes, and of the models it wraps."""
    for key, value in getattr(model, "__dict__", {}).items():
        if isinstance(value, np.ndarray):
            yield f"{prefix}.{key}", value
        elif depth < 3 and isinstance(value, BaseModel):
            yield from _data_arrays(value, f"{prefix}.{key}", depth + 1)


class BaseModel:
    """Base class of the built-in models.

    Holds the number of rows ``N``, the dimension ``dim`` of theta, the ``temperature`` K
    (the likelihood is raised to 1/K, as in Seita et al.), and a :class:`~samplers.priors.Prior`.
    Public methods check their arguments and call private ``_method`` kernels; samplers call
    the private ones directly after checking once. Data arrays that are memmaps are pickled
    as a reference to their file, so process pools do not copy them.

    Implements the compiled-model interface (:mod:`samplers.models.compiled`:
    ``row_kernels``, ``kernel_data()``, ``decision_data()``, ``kernel_ratio_bound``,
    ``kernel_ratio_range``) that the samplers use. Subclasses set ``N`` and ``dim``, define
    the per-row kernels ``_row_loglik``, ``_row_ratio``, ``_row_grad`` and ``_row_prefetch``
    (jitted, wrapped in ``staticmethod``, or per-instance properties as in
    :class:`~samplers.ControlVariates`), which :attr:`row_kernels` collects; and they define
    ``_kernel_data()`` (the tuple of arrays and constants the row kernels read, temperature
    included) and ``_loglik_ratio_bound``.
    """

    N: int
    dim: int
    _row_loglik = _row_ratio = _row_grad = _row_prefetch = None
    #: Optional ``_row_hess(data, i, theta, out)``, the row's Hessian (``RowKernels.hess``),
    #: and ``_row_hvp(data, i, theta, v, out)``, the Hessian times v (``RowKernels.hvp``).
    _row_hess = _row_hvp = None
    #: Optional split of a row kernel through a scalar linear predictor (full passes take the
    #: predictors of a block of rows from ``_eta_rows`` / ``_eta_rows2`` and map
    #: ``_eta_loglik(data, eta)`` / ``_eta_ratio(data, eta, eta_new)`` over them in SIMD).
    _eta_rows = _eta_rows2 = _eta_loglik = _eta_ratio = None
    #: Optional ``_grad_rows(data, start, k, theta, eta, acc)``: the gradients of a block of
    #: consecutive rows added to ``acc`` in row order (full gradients).
    _grad_rows = None

    def __init__(self, *, prior: Prior | None, temperature: float, dim: int):
        self.dim = dim
        self.temperature = check_positive("temperature", temperature)
        self._inv_temp = 1.0 / self.temperature
        prior = FlatPrior() if prior is None else prior
        if not isinstance(prior, Prior):
            raise TypeError(f"prior must be a samplers.priors.Prior, got {type(prior).__name__}")
        self.prior = prior.bind(dim)

    # -- public, checked ---------------------------------------------------------------------

    def loglik(self, theta, idx) -> np.ndarray:
        """Per-datum log-likelihoods (tempered by 1/K) of rows ``idx`` at ``theta``."""
        return self._loglik(self._check_theta("theta", theta), self._check_idx(idx))

    def loglik_ratio(self, theta, theta_new, idx) -> np.ndarray:
        """``l_i = log p(x_i|theta_new) - log p(x_i|theta)`` (tempered), reading each row once."""
        return self._loglik_ratio(
            self._check_theta("theta", theta), self._check_theta("theta_new", theta_new),
            self._check_idx(idx),
        )

    def grad_loglik(self, theta, idx) -> np.ndarray:
        """Per-datum gradients of the tempered log-likelihood, shape ``(len(idx), dim)``."""
        return self._grad_loglik(self._check_theta("theta", theta), self._check_idx(idx))

    def loglik_ratio_bound(self, theta, theta_new) -> float:
        """An upper bound on ``max_i |l_i|`` over all N rows, in time independent of N."""
        return self._loglik_ratio_bound(
            self._check_theta("theta", theta), self._check_theta("theta_new", theta_new)
        )

    def logprior(self, theta) -> float:
        """Log prior density at ``theta``."""
        return self.prior.logpdf(np.asarray(theta, dtype=float))

    def grad_logprior(self, theta) -> np.ndarray:
        """Gradient of the log prior density at ``theta``."""
        return self.prior.grad(np.asarray(theta, dtype=float))

    # -- the compiled-model interface (samplers.models.compiled): no argument checks ---------

    @property
    def row_kernels(self) -> RowKernels | None:
        """The per-row kernels, collected from ``_row_*`` (None without a ratio kernel, e.g.
        control variates around a user's model). Read per instance, so a wrapper whose
        kernels depend on the wrapped model (:class:`~samplers.ControlVariates`) supplies
        them as properties.

        None for a model whose rows are in a store (:meth:`data_sources`): its chains run on
        the Python loop, reading their rows through ``read_rows``, and its full-data passes
        run these kernels on blocks of rows (:meth:`pass_kernels`, :meth:`row_block`)."""
        if self._store_backed:
            return None
        return self.pass_kernels()

    def pass_kernels(self) -> RowKernels | None:
        """The per-row kernels a full-data pass runs on this model's row blocks (those of
        :attr:`row_kernels`, also for a model whose rows are in a store)."""
        ratio = self._row_ratio
        if ratio is None:
            return None
        return RowKernels(ratio=ratio, prefetch=self._row_prefetch, loglik=self._row_loglik,
                          grad=self._row_grad, eta_rows=self._eta_rows,
                          eta_rows2=self._eta_rows2, eta_loglik=self._eta_loglik,
                          eta_ratio=self._eta_ratio, grad_rows=self._grad_rows,
                          hess=self._row_hess, hvp=self._row_hvp)

    def kernel_data(self) -> tuple:
        """The tuple of arrays and constants the row kernels read (temperature included)."""
        if self._store_backed:
            raise TypeError(self._store_message("kernel_data()"))
        return self._kernel_data()

    # -- rows in a store: blocks of rows as in-memory models -----------------------------------

    #: Attributes holding one entry per row: a float array read in place, or a
    #: :class:`~samplers.sources.RowSource` for a store. What :meth:`row_block` slices
    #: (an array of another length, e.g. one value for every row, is kept as it is).
    _row_fields: tuple = ()
    #: Attributes holding a wrapped model whose rows are this model's (control variates).
    _wrapped_fields: tuple = ()
    #: Attributes reset in a block model (cached sums over all rows), with their value.
    _block_reset: dict = {}

    def data_sources(self) -> dict:
        """``{attribute: RowSource}`` of the data this model reads from a store (empty for
        numpy arrays and memmaps, which the kernels read in place)."""
        out = {}
        for name in self._row_fields:
            value = self.__dict__.get(name)
            if _is_source(value):
                out[name] = value
        for name in self._wrapped_fields:
            inner = self.__dict__.get(name)
            if isinstance(inner, BaseModel):
                out.update({f"{name}.{k}": v for k, v in inner.data_sources().items()})
        return out

    @functools.cached_property
    def _store_backed(self) -> bool:
        return bool(self.data_sources())

    def _store_message(self, what) -> str:
        names = ", ".join(f"{k} ({v!r})" for k, v in self.data_sources().items())
        return (f"{type(self).__name__} reads {names} from a store, so it has no in-memory "
                f"{what}: its full-data passes read blocks of rows (row_block) and its "
                "chains read rows through read_rows")

    def _check_block(self, start, stop) -> tuple[int, int]:
        for name, value in (("start", start), ("stop", stop)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an integer row number, got {value!r}")
        start, stop = int(start), int(stop)
        if not 0 <= start < stop <= self.N:
            raise ValueError(f"rows [start, stop) must satisfy 0 <= start < stop <= N = "
                             f"{self.N}, got [{start}, {stop})")
        return start, stop

    def _with_rows(self, take, n: int):
        """A shallow copy whose per-row data are ``take(data)`` (``n`` rows, in memory).

        A class that names neither its per-row fields (``_row_fields``) nor a wrapped model
        (``_wrapped_fields``), or wraps a model that is not built in, is refused: copying it
        unchanged would give a "block" that reads the first rows of the whole data."""
        if not (self._row_fields or self._wrapped_fields):
            raise TypeError(f"{type(self).__name__} does not name its per-row data "
                            "(_row_fields): its passes cannot be split into row blocks")
        new = copy.copy(self)
        state = new.__dict__
        for name in self._wrapped_fields:
            inner = state.get(name)
            if inner is not None and not isinstance(inner, BaseModel):
                raise TypeError(f"{type(self).__name__} wraps {type(inner).__name__}, whose "
                                "rows cannot be split into blocks")
        for name in self._row_fields:
            value = state.get(name)
            if _is_source(value) or (isinstance(value, np.ndarray) and value.ndim
                                     and value.shape[0] == self.N):
                state[name] = take(value)
        for name in self._wrapped_fields:
            inner = state.get(name)
            if isinstance(inner, BaseModel):
                state[name] = inner._with_rows(take, n)
        state["N"] = n
        state.update(self._block_reset)
        state["_store_backed"] = bool(new.data_sources())
        return new

    def row_block(self, start, stop):
        """An in-memory model of the same class over rows ``start .. stop - 1``.

        The same prior, constants and temperature; its data are views of this model's
        arrays (memmaps stay on disk) or, for a store, the block's rows read with
        ``read_range``. Every full-data pass runs the compiled kernels on such blocks and
        merges their results (sums, moments) in row order, so a store-backed model's pass
        holds a few blocks, never N rows.

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import GaussianMean
        >>> model = GaussianMean(np.arange(10.0))
        >>> block = model.row_block(2, 5)
        >>> block.N, block.x.tolist()
        (3, [2.0, 3.0, 4.0])
        """
        start, stop = self._check_block(start, stop)
        return self._with_rows(
            lambda v: v[start:stop] if isinstance(v, np.ndarray) else v.read_range(start, stop),
            stop - start)

    def block_recipe(self, start, stop):
        """A small picklable zero-argument callable that returns :meth:`row_block(start,
        stop) <row_block>`, for another process (an executor's worker).

        For a model whose rows are in a store it pickles the sources' paths (the worker
        reopens them and reads the block); for numpy arrays it pickles the block's slices
        (memmaps as a reference to their file), and for rows held in this process by a
        source (an ``ArraySource``, a dask array without a backing store) the block's part
        of them (:func:`samplers.sources.task_part`): each row is sent once, to its task.

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import GaussianMean
        >>> recipe = GaussianMean(np.arange(10.0)).block_recipe(4, 6)
        >>> recipe().x.tolist()           # (on a worker: pickle.loads(pickle.dumps(recipe))())
        [4.0, 5.0]
        """
        start, stop = self._check_block(start, stop)
        if not self._store_backed:
            return _BlockRecipe(self.row_block(start, stop), 0, stop - start)
        # the in-memory arrays cut to the block; a store source kept (it pickles as its
        # path), data held here (an ArraySource, a dask array) cut to the block
        template = self._with_rows(
            lambda v: v[start:stop] if isinstance(v, np.ndarray)
            else _sources.task_part(v, start, stop), self.N)
        template.__dict__.pop("_store_backed", None)
        return _BlockRecipe(template, start, stop)

    def _rows_model(self, idx):
        """An in-memory model of rows ``idx`` (in that order), read with ``read_rows``."""
        return self._with_rows(
            lambda v: v[idx] if isinstance(v, np.ndarray) else v.read_rows(idx), idx.shape[0])

    def decision_data(self, theta, theta_new) -> tuple:
        """The tuple the ratio kernel reads in one decision between ``theta`` and
        ``theta_new`` (:meth:`kernel_data` unless the rows carry a per-pair constant)."""
        return self._decision_data(theta, theta_new)

    def kernel_ratio_bound(self, theta, theta_new) -> float:
        """:meth:`loglik_ratio_bound` without argument checks (validated float arrays)."""
        return self._loglik_ratio_bound(theta, theta_new)

    def kernel_ratio_range(self, theta, theta_new) -> tuple[float, float]:
        """``(center, half_width)`` of the l_i without argument checks (default ``(0,
        bound)``)."""
        return self._loglik_ratio_range(theta, theta_new)

    # -- unchecked batch methods -------------------------------------------------------------

    def _loglik(self, theta, idx):
        if self._store_backed:
            return self._rows_model(idx)._loglik(theta, np.arange(idx.shape[0]))
        out = np.empty(idx.shape[0])
        batch_loglik(self._row_loglik, self._row_prefetch)(self._kernel_data(), idx, theta, out)
        return out

    def _loglik_ratio(self, theta, theta_new, idx):
        if self._store_backed:
            return self._rows_model(idx)._loglik_ratio(theta, theta_new,
                                                       np.arange(idx.shape[0]))
        out = np.empty(idx.shape[0])
        batch_ratio(self._row_ratio, self._row_prefetch)(self._kernel_data(), idx, theta, theta_new, out)
        return out

    def _grad_loglik(self, theta, idx):
        if self._store_backed:
            return self._rows_model(idx)._grad_loglik(theta, np.arange(idx.shape[0]))
        out = np.empty((idx.shape[0], self.dim))
        batch_grad(self._row_grad, self._row_prefetch)(self._kernel_data(), idx, theta, out)
        return out

    def _kernel_data(self) -> tuple:
        raise NotImplementedError

    def _decision_data(self, theta, theta_new) -> tuple:
        """The data tuple ``_row_ratio`` reads in one decision between ``theta`` and
        ``theta_new``: ``_kernel_data()``, unless a model's rows carry a per-pair constant
        (:class:`~samplers.ControlVariates` adds the proxy's total ``P / N``)."""
        return self._kernel_data()

    #: Optional jitted ``_ratio_range(consts, theta, theta_new) -> (center, half_width)``,
    #: the range of the l_i from the constants :meth:`_range_data` (data summaries): what
    #: ``_loglik_ratio_bound`` returns by default, and what the compiled chain loop calls
    #: inside its steps (:meth:`block_range`), so both give the same bits.
    _ratio_range = None

    def _range_data(self) -> tuple:
        """The constants ``_ratio_range`` reads (computed on first use, then cached by the
        data summaries they come from)."""
        raise NotImplementedError

    # -- what the compiled chain loop reads ---------------------------------------------------

    def block_parts(self, view) -> BlockModel | None:
        """The model's parts for the compiled chain loop (:class:`~samplers.models.compiled.
        BlockModel`), or None (its chains run on the Python loop): a model whose
        ``logprior``, ``grad_logprior``, ``_grad_loglik`` and ``_decision_data`` are these of
        :class:`BaseModel` (which the kernels reproduce), with a built-in prior and kernel
        data. ``view`` is the chain's model view (its row kernels)."""
        cls = type(self)
        if self._store_backed:
            return None
        if any(getattr(cls, name) is not getattr(BaseModel, name)
               for name in ("logprior", "grad_logprior", "_grad_loglik", "_decision_data")):
            return None
        prior = self.prior._kernel()
        if prior is None:
            return None
        try:
            data = self._kernel_data()
        except (TypeError, NotImplementedError):
            return None
        return BlockModel(data, prior, same_data, batch_grad(view.row_grad, view.row_prefetch))

    def block_range(self):
        """``(ratio_range, consts)``: the jitted range of the l_i and its constants, which
        the compiled confidence test calls in its steps, as ``_loglik_ratio_range`` does;
        None for a model without one (or whose range methods are not :class:`BaseModel`'s)."""
        cls = type(self)
        if (self._ratio_range is None
                or cls._loglik_ratio_range is not BaseModel._loglik_ratio_range
                or cls._loglik_ratio_bound is not BaseModel._loglik_ratio_bound):
            return None
        return self._ratio_range, self._range_data()

    def _loglik_ratio_bound(self, theta, theta_new) -> float:
        if self._ratio_range is None:
            raise NotImplementedError
        return self._ratio_range(self._range_data(), theta, theta_new)[1]

    def _loglik_ratio_range(self, theta, theta_new) -> tuple[float, float]:
        """``(center, half_width)`` with every ``l_i`` in ``[center - half_width, center +
        half_width]``; concentration bounds need only the width. Default ``(0, bound)``."""
        return 0.0, self._loglik_ratio_bound(theta, theta_new)

    # -- checks --------------------------------------------------------------------------------

    def _check_theta(self, name, theta) -> np.ndarray:
        arr = check_finite_array(name, theta, ndim=(0, 1)).reshape(-1)
        if arr.shape[0] != self.dim:
            raise ValueError(
                f"{name} must have {self.dim} element(s) for {type(self).__name__}, "
                f"got shape {np.shape(theta)}"
            )
        return arr

    def _check_idx(self, idx) -> np.ndarray:
        arr = np.asarray(idx)
        if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
            raise TypeError(f"idx must be a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
        arr = arr.astype(np.intp, copy=False)
        if arr.size and (arr.min() < 0 or arr.max() >= self.N):
            raise ValueError(f"idx must lie in [0, {self.N - 1}], got values in "
                             f"[{arr.min()}, {arr.max()}]")
        return arr

    # -- data summaries for loglik_ratio_bound: one chunked pass on first use ------------------

    @functools.cached_property
    def _xrange(self) -> tuple[float, float]:
        lows, highs = zip(*scan_rows(self.x, lambda b: (float(np.min(b)), float(np.max(b))),
                                     desc="data range"))
        return min(lows), max(highs)

    @property
    def _xmin(self) -> float:
        return self._xrange[0]

    @property
    def _xmax(self) -> float:
        return self._xrange[1]

    @functools.cached_property
    def _max_row_norm(self) -> float:
        return math.sqrt(max(scan_rows(
            self.X, lambda b: float(np.max(np.einsum("ij,ij->i", b, b))), desc="row norms")))

    @functools.cached_property
    def _max_abs_y(self) -> float:
        return max(scan_rows(self.y, lambda b: float(np.max(np.abs(b))), desc="range of y"))

    # -- pickling ------------------------------------------------------------------------------

    def __getstate__(self):
        state = dict(self.__dict__)
        for key, value in state.items():
            if isinstance(value, np.ndarray):
                spec = _memmap_spec(value)
                if spec is not None:
                    state[key] = _MemmapRef(spec)
        return state

    def __setstate__(self, state):
        for key, value in state.items():
            if isinstance(value, _MemmapRef):
                state[key] = _open_memmap_spec(value.spec)
        self.__dict__.update(state)

    def __repr__(self):
        return f"{type(self).__name__}(N={self.N}, dim={self.dim}, temperature={self.temperature:g})"


class _BlockRecipe:
    """``model.row_block(start, stop)`` as a picklable zero-argument callable
    (:meth:`BaseModel.block_recipe`)."""

    def __init__(self, model, start, stop):
        self.model, self.start, self.stop = model, start, stop

    def __call__(self):
        start, stop = self.start, self.stop
        return self.model._with_rows(
            lambda v: v if isinstance(v, np.ndarray) else v.read_range(start, stop),
            stop - start)

    def __repr__(self):
        return f"block_recipe({type(self.model).__name__}, rows [{self.start}, {self.stop}))"


class _MemmapRef:
    """Placeholder for a memmapped array inside a pickled model."""

    def __init__(self, spec):
        self.spec = spec
