"""Synthetic datasets of the papers' experiments, in memory or written to a memmap.

Every generator takes ``rng`` and returns new arrays; :func:`write_memmap` (a ``.npy``
memmap) and :func:`generate_store` (a sharded Zarr store) stream any of them to disk block by
block, so that datasets larger than memory can be built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from design._lib.checks import as_generator, check_int, check_positive

__all__ = ["gaussian_mixture", "logistic_regression", "linear_regression", "write_memmap",
           "generate_store",
           # SGLD and extended SGLD
           "l1_regression_toy", "correlated_regression", "MissingData",
           "missing_covariates_regression",
           # rows that differ: a rare binary covariate
           "rare_covariate_logistic"]


def gaussian_mixture(N, theta=(0.0, 1.0), sigma_x2=2.0, rng=None) -> np.ndarray:
    """Draw ``x_i ~ 0.5 N(theta_1, sigma_x2) + 0.5 N(theta_1 + theta_2, sigma_x2)``.

    The defaults are Seita et al. (2017), section 6.1 (after Welling & Teh, 2011).

    Examples
    --------
    >>> x = gaussian_mixture(1000, rng=0)
    >>> x.shape
    (1000,)
    """
    N = check_int("N", N, low=1)
    sigma_x2 = check_positive("sigma_x2", sigma_x2)
    rng = as_generator(rng)
    second = rng.random(N) < 0.5
    return rng.normal(theta[0] + second * theta[1], np.sqrt(sigma_x2))


def logistic_regression(N, d, rng=None, *, intercept=True, scale=1.0, theta=None):
    """Synthetic logistic-regression data that are not linearly separable.

    Covariates are standard normal (plus a column of ones when ``intercept``); the true
    coefficients are drawn N(0, scale^2 / d) unless given, so that the linear predictor has
    sd about ``scale`` and classes overlap. Returns ``(X, y, theta)`` with y in {0, 1}.

    Examples
    --------
    >>> X, y, theta = logistic_regression(100, 3, rng=0)
    >>> X.shape, y.shape, theta.shape
    ((100, 4), (100,), (4,))
    """
    N = check_int("N", N, low=1)
    d = check_int("d", d, low=1)
    rng = as_generator(rng)
    k = d + int(intercept)
    if theta is None:
        theta = rng.normal(0.0, scale / np.sqrt(d), k)
    theta = np.asarray(theta, dtype=float)
    X = rng.normal(size=(N, k))
    if intercept:
        X[:, -1] = 1.0
    p = 1.0 / (1.0 + np.exp(-(X @ theta)))
    y = (rng.random(N) < p).astype(float)
    return X, y, theta


def linear_regression(N, theta, noise_sd=1.0, rng=None):
    """``y = X theta + noise`` with standard-normal covariates. Returns ``(X, y)``.

    Examples
    --------
    >>> X, y = linear_regression(50, [0.5], noise_sd=0.1, rng=0)
    >>> X.shape, y.shape
    ((50, 1), (50,))
    """
    N = check_int("N", N, low=1)
    rng = as_generator(rng)
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    X = rng.normal(size=(N, theta.shape[0]))
    return X, X @ theta + rng.normal(0.0, check_positive("noise_sd", noise_sd), N)


def write_memmap(path, N, make_rows, *, chunk=1 << 18, rng=None, dtype=np.float64):
    """Write ``N`` rows produced chunk by chunk to a new ``.npy`` file and open it as a memmap.

    ``make_rows(n, rng)`` must return an array of ``n`` rows (the same trailing shape for
    every call). Memory use is one chunk. Returns the read-only memmap.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> x = write_memmap(path, 1000, lambda n, rng: rng.normal(size=n), chunk=300, rng=0)
    >>> type(x).__name__, x.shape
    ('memmap', (1000,))
    """
    N = check_int("N", N, low=1)
    rng = as_generator(rng)
    first = np.asarray(make_rows(min(chunk, N), rng), dtype=dtype)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(N,) + first.shape[1:])
    out[: first.shape[0]] = first
    start = first.shape[0]
    while start < N:
        n = min(chunk, N - start)
        out[start : start + n] = make_rows(n, rng)
        start += n
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


class _Generated:
    """Rows made block by block by ``make_rows(n, default_rng([key, k]))``: a row source
    (:class:`samplers.sources.RowSource`) of column ``column`` (0 for X, 1 for y) that keeps
    the last block it made, so reading the ranges in order makes each block once."""

    def __init__(self, N, make_rows, key, block, column, first):
        self.N, self.make_rows, self.key, self.block, self.column = N, make_rows, key, block, column
        self._cache = (0, first)
        part = first[column]
        self.shape = (N,) + part.shape[1:]
        self.dtype = part.dtype
        self.name = "X" if column == 0 else "y"

    def _block(self, k):
        if self._cache[0] != k:
            n = min(self.block, self.N - k * self.block)
            self._cache = (k, _make_block(self.make_rows, n, self.key, k, self._cache[1]))
        return self._cache[1][self.column]

    def read_range(self, start, stop):
        parts = []
        while start < stop:
            k = start // self.block
            end = min(stop, (k + 1) * self.block)
            parts.append(self._block(k)[start - k * self.block:end - k * self.block])
            start = end
        return np.concatenate(parts) if len(parts) > 1 else np.array(parts[0])

    def read_rows(self, idx):
        idx = np.asarray(idx, dtype=np.intp)
        return (np.stack([self.read_range(i, i + 1)[0] for i in idx]) if idx.size
                else np.empty((0,) + self.shape[1:], self.dtype))

    def reopen(self):
        return self


def _make_block(make_rows, n, key, k, like=None):
    """Block ``k`` (``n`` rows): ``make_rows(n, default_rng([key, k]))`` as an (X, y) pair
    (y None when it makes X alone), checked against the first block ``like``."""
    out = make_rows(n, np.random.default_rng([key, k]))
    X, y = out if isinstance(out, tuple) else (out, None)
    X = np.asarray(X)
    y = None if y is None else np.asarray(y)
    if X.shape[:1] != (n,) or (y is not None and y.shape != (n,)):
        raise ValueError(f"make_rows({n}, rng) must return X of {n} rows (or (X, y) with y "
                         f"of shape ({n},)), got X of shape {X.shape}"
                         + ("" if y is None else f" and y of shape {y.shape}"))
    for arr, what in ((X, "X"), (y, "y")):
        if arr is not None and arr.dtype not in (np.float32, np.float64):
            raise TypeError(f"make_rows must return float32 or float64 arrays, got {what} "
                            f"of dtype {arr.dtype}")
    if like is not None and (X.shape[1:] != like[0].shape[1:] or (y is None) != (like[1] is None)
                             or X.dtype != like[0].dtype
                             or (y is not None and y.dtype != like[1].dtype)):
        raise ValueError(f"make_rows must return the same kind of rows for every block: block "
                         f"{k} gave X of shape {X.shape}, dtype {X.dtype}, "
                         f"{'no y' if y is None else f'y of dtype {y.dtype}'}; the one before "
                         f"X of shape {like[0].shape}, dtype {like[0].dtype}, "
                         f"{'no y' if like[1] is None else f'y of dtype {like[1].dtype}'}")
    return X, y


def generate_store(path, N, make_rows, *, rng=None, block=1 << 20, dtype=None,
                   rows_per_chunk=None, rows_per_shard=None, progress=True):
    """Write ``N`` rows made block by block to a Zarr store, never holding more than a block.

    The store is what ``austerity convert`` writes (:func:`samplers.sources.write_store`:
    arrays ``"X"`` and ``"y"``, sharded, uncompressed, a checksum per shard), so any model
    reads it through :func:`samplers.sources.open_store`; a dataset of any size can be built
    on a disk larger than the memory.

    Parameters
    ----------
    path : str or os.PathLike
        The store's directory (replaced if it exists).
    N : int
        Rows.
    make_rows : callable
        ``make_rows(n, rng)`` returns ``X`` of ``n`` rows, or a pair ``(X, y)`` with ``y`` of
        shape ``(n,)``; float32 or float64 arrays with the same trailing shape every call.
    rng : None, int, SeedSequence or numpy.random.Generator
        Block ``k`` (rows ``[k * block, (k + 1) * block)``) is
        ``make_rows(n, numpy.random.default_rng([key, k]))``: ``key`` is ``rng`` itself for
        an int (so any block can be made again alone, and the first rows of a larger store
        are a smaller one's), otherwise one integer drawn from ``default_rng(rng)``. Equal
        seeds give identical stores.
    block : int
        Rows per call of ``make_rows`` (the memory held: one block, and one shard).
    dtype : float32 or float64, optional
        Written type (default: what ``make_rows`` returns).
    rows_per_chunk, rows_per_shard : int, optional
        As :func:`samplers.sources.to_zarr`.
    progress : bool or None
        A progress bar (tqdm).

    Returns
    -------
    (RowSource, RowSource or None)
        The written ``X`` and ``y`` (None without y), opened by
        :func:`samplers.sources.open_store`.

    Notes
    -----
    X is written first, then y: when ``make_rows`` returns y, each block is made twice
    (once for each array), which keeps one block in memory whatever ``N`` is.

    Examples
    --------
    >>> import os, tempfile
    >>> def rows(n, rng):
    ...     X = rng.standard_normal((n, 2))
    ...     return X, (X[:, 0] > 0).astype(float)
    >>> path = os.path.join(tempfile.mkdtemp(), "d.zarr")
    >>> X, y = generate_store(path, 1000, rows, rng=7, block=300, progress=False)
    >>> X.shape, y.shape
    ((1000, 2), (1000,))
    >>> again = rows(300, np.random.default_rng([7, 3]))    # block 3, made alone
    >>> bool(np.array_equal(X.read_range(900, 1000), again[0][:100]))
    True
    """
    from .sources import open_store, write_store

    N = check_int("N", N, low=1)
    block = check_int("block", block, low=1)
    if not callable(make_rows):
        raise TypeError(f"make_rows must be a callable make_rows(n, rng), got "
                        f"{type(make_rows).__name__}")
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"rng must be a non-negative seed, got {rng}")
        key = int(rng)
    else:
        key = int(as_generator(rng).integers(1 << 63))
    first = _make_block(make_rows, min(block, N), key, 0)
    X = _Generated(N, make_rows, key, block, 0, first)
    y = None if first[1] is None else _Generated(N, make_rows, key, block, 1, first)
    write_store(path, X, y, rows_per_chunk=rows_per_chunk, rows_per_shard=rows_per_shard,
                dtype=dtype, progress=progress)
    return open_store(path)


# --- SGLD and extended SGLD -----------------------------------------------------------

#: Korattikara et al. (2014), section 6.4: noise precision and Laplace rate of the toy.
L1_TOY_PRECISION = 3.0
L1_TOY_LAPLACE_RATE = 4950.0


def l1_regression_toy(N=10_000, rng=None):
    """The L1-regularised 1-D regression of Korattikara et al. (2014), section 6.4, Figure 5.

    ``y_i = 0.5 x_i + e_i`` with ``e_i ~ N(0, 1/3)``; the model has noise precision 3
    (:data:`L1_TOY_PRECISION`) and a Laplace prior of rate 4950 (:data:`L1_TOY_LAPLACE_RATE`).
    The paper does not say how ``x`` is drawn; ``x ~ U(-1, 1)`` (so ``E x^2 = 1/3``) puts the
    mode near 0.005 with posterior sd near 0.01, just right of the kink at zero, which is the
    regime the paper describes (prior not washed out by the likelihood; a steep valley left
    of the mode). Returns ``(X, y)`` with ``X`` of shape ``(N, 1)``.

    Examples
    --------
    >>> from samplers import LaplacePrior, LinearRegression
    >>> X, y = l1_regression_toy(rng=0)
    >>> model = LinearRegression(X, y, noise_sd=(1 / L1_TOY_PRECISION) ** 0.5,
    ...                          prior=LaplacePrior(0.0, 1 / L1_TOY_LAPLACE_RATE))
    >>> X.shape, model.N
    ((10000, 1), 10000)
    """
    N = check_int("N", N, low=1)
    rng = as_generator(rng)
    x = rng.uniform(-1.0, 1.0, N)
    y = 0.5 * x + rng.normal(0.0, np.sqrt(1.0 / L1_TOY_PRECISION), N)
    return x[:, None], y


def correlated_regression(N, p, coef, rho=0.5, noise_sd=1.0, rng=None, *, dtype=np.float64,
                          chunk=1 << 14):
    """Sparse linear regression with equicorrelated covariates (Song et al. 2020, section 4).

    ``x_ij = sqrt(rho) c_i + sqrt(1 - rho) e_ij`` with ``c_i, e_ij ~ N(0, 1)``: unit variances
    and mutual correlation ``rho`` from a shared factor, without any p x p covariance. The
    first ``len(coef)`` coefficients are ``coef``, the others zero; ``y = X beta + N(0,
    noise_sd^2)``. Rows are generated in chunks, so memory is the output only. Song et al.'s
    setting is ``N = 50_000, p = 2001, coef = [1] * 5 + [-1] * 3``.

    Returns
    -------
    X : ndarray of shape (N, p) and the given dtype
    y : ndarray of shape (N,)
    beta : ndarray of shape (p,)

    Examples
    --------
    >>> X, y, beta = correlated_regression(20_000, 3, [1.0], rho=0.5, rng=0)
    >>> round(float(np.corrcoef(X[:, 1], X[:, 2])[0, 1]), 1), beta.tolist()
    (0.5, [1.0, 0.0, 0.0])
    """
    N = check_int("N", N, low=1)
    p = check_int("p", p, low=1)
    coef = np.atleast_1d(np.asarray(coef, dtype=float))
    if coef.ndim != 1 or coef.shape[0] > p:
        raise ValueError(f"coef must be a vector of at most p = {p} values, got shape {coef.shape}")
    rho = float(rho)
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1), got {rho}")
    noise_sd = check_positive("noise_sd", noise_sd)
    rng = as_generator(rng)
    beta = np.zeros(p)
    beta[: coef.shape[0]] = coef
    X = np.empty((N, p), dtype=dtype)
    y = np.empty(N)
    a, b = np.sqrt(rho), np.sqrt(1.0 - rho)
    for start in range(0, N, chunk):
        stop = min(start + chunk, N)
        block = rng.standard_normal((stop - start, p))
        block *= b
        block += a * rng.standard_normal((stop - start, 1))
        X[start:stop] = block
        y[start:stop] = block @ beta + rng.normal(0.0, noise_sd, stop - start)
    return X, y, beta


@dataclass(frozen=True)
class MissingData:
    """A regression data set with covariates missing at random.

    Attributes
    ----------
    X : ndarray of shape (N, d)
        Covariates with ``NaN`` where missing.
    X_complete : ndarray of shape (N, d)
        The same covariates before deletion.
    y : ndarray of shape (N,)
    beta, mu : ndarray of shape (d,)
        True coefficients and covariate means.
    cov : ndarray of shape (d, d)
        Covariance of the covariates.
    """

    X: np.ndarray
    X_complete: np.ndarray
    y: np.ndarray
    beta: np.ndarray
    mu: np.ndarray
    cov: np.ndarray


def missing_covariates_regression(N, beta=(1.0, -0.5, 0.25), mu=(0.5, -0.3, 0.0), rho=0.5,
                                  noise_sd=1.0, missing=0.2, rng=None) -> MissingData:
    """Linear regression with Gaussian covariates, a fraction of them missing at random.

    ``x_i ~ N(mu, Sigma)`` with unit variances and correlation ``rho``; ``y_i = x_i . beta +
    N(0, noise_sd^2)``. Each covariate entry is deleted with probability ``expit(c + y_i)``,
    ``c`` set so that a fraction ``missing`` is deleted: missingness depends on the observed
    ``y`` only (missing at random, not completely at random).

    Examples
    --------
    >>> data = missing_covariates_regression(10_000, rng=0)
    >>> round(float(np.isnan(data.X).mean()), 2)
    0.2
    """
    N = check_int("N", N, low=1)
    beta = np.asarray(beta, dtype=float)
    mu = np.asarray(mu, dtype=float)
    d = beta.shape[0]
    if mu.shape != (d,):
        raise ValueError(f"mu must have {d} values like beta, got shape {mu.shape}")
    if not 0.0 < missing < 1.0:
        raise ValueError(f"missing must be in (0, 1), got {missing}")
    rng = as_generator(rng)
    cov = np.full((d, d), float(rho)) + (1.0 - rho) * np.eye(d)
    X_complete = mu + rng.standard_normal((N, d)) @ np.linalg.cholesky(cov).T
    y = X_complete @ beta + rng.normal(0.0, check_positive("noise_sd", noise_sd), N)
    from scipy import optimize   # here: importing it costs a first `import samplers` 0.2 s

    c = optimize.brentq(lambda c: special.expit(c + y).mean() - missing, -50.0, 50.0)
    gone = rng.random((N, d)) < special.expit(c + y)[:, None]
    X = np.where(gone, np.nan, X_complete)
    return MissingData(X, X_complete, y, beta, mu, cov)


# --- rows that differ ----------------------------------------------------------------------


def rare_covariate_logistic(N=200_000, rng=None, *, d=5, rare_rows=40, base_rate=0.06,
                            effect=1.0, scale=0.5):
    """Logistic regression with a rare binary covariate: a few rows unlike all the others.

    Columns: ``d - 2`` standard-normal covariates (coefficients ``scale / sqrt(d - 2)`` times
    a fixed sign pattern, so the predictor has sd ``scale``), a binary covariate equal to 1 in
    exactly ``rare_rows`` rows drawn at random (coefficient ``effect``), and an intercept column
    of ones last (coefficient ``logit(base_rate)``). The rare coefficient is identified by
    those rows alone, so its posterior variance is O(1 / rare_rows) while the others' are
    O(1 / N): the Taylor residuals of control variates centred at the mode are dominated by
    the rare rows (a rare category). Returns ``(X, y, theta)``
    with y in {0, 1} and ``theta`` the coefficients used.

    Examples
    --------
    >>> X, y, theta = rare_covariate_logistic(10_000, rng=0)
    >>> X.shape, int(X[:, 3].sum()), theta.shape
    ((10000, 5), 40, (5,))
    """
    N = check_int("N", N, low=2)
    d = check_int("d", d, low=2)
    rare_rows = check_int("rare_rows", rare_rows, low=1)
    if rare_rows > N:
        raise ValueError(f"rare_rows must be at most N = {N}, got {rare_rows}")
    base_rate = float(base_rate)
    if not 0.0 < base_rate < 1.0:
        raise ValueError(f"base_rate must be in (0, 1), got {base_rate}")
    effect = float(effect)
    if not np.isfinite(effect):
        raise ValueError(f"effect must be finite, got {effect}")
    scale = float(scale)
    if not (np.isfinite(scale) and scale >= 0.0):
        raise ValueError(f"scale must be finite and >= 0, got {scale}")
    rng = as_generator(rng)
    k = d - 2
    theta = np.empty(d)
    theta[:k] = scale / np.sqrt(max(k, 1)) * np.where(np.arange(k) % 2 == 0, 1.0, -1.0)
    theta[k] = effect
    theta[k + 1] = np.log(base_rate / (1.0 - base_rate))
    X = np.empty((N, d))
    X[:, :k] = rng.standard_normal((N, k))
    X[:, k] = 0.0
    X[rng.choice(N, size=rare_rows, replace=False), k] = 1.0
    X[:, k + 1] = 1.0
    y = (rng.random(N) < special.expit(X @ theta)).astype(float)
    return X, y, theta
