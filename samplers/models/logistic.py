"""Bayesian logistic regression."""

from __future__ import annotations

import math

import numpy as np

from design._lib.jit import jit, row_jit
from design._lib.vecmath import exp_nonpositive, log1p_unit, log_sigmoid
from ..priors import Prior
from ._kernels import dots, prefetch_data01, rows_dot, rows_dots, step_range
from ._base import BaseModel, data_checks_skipped, regression_data, scan_rows

__all__ = ["LogisticRegression", "log_sigmoid"]


# data = (X, y, plus_minus, 1/K); y in {-1, 1} when plus_minus else in {0, 1}.
# log_sigmoid is the branch-free one of design._lib.vecmath: the full passes map it over a
# chunk's linear predictors in SIMD, and every kernel uses the same function, so a row's
# value is the same bits whichever loop computes it.


@row_jit
def _logistic_row_eta(data, i, theta):
    """``eta_i = s_i x_i . theta`` with ``s_i = +-1`` the label's sign."""
    X, y, plus_minus, inv_temp = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    return s * a


@row_jit
def _logistic_eta_rows(data, start, k, theta, eta):
    """``eta[t] = s_i x_i . theta`` for rows ``i = start + t``, ``t < k`` (the bits of
    :func:`_logistic_row_eta`)."""
    X, y, plus_minus, inv_temp = data
    rows_dot(X, start, k, theta, eta)
    for t in range(k):
        s = y[start + t] if plus_minus else 2.0 * y[start + t] - 1.0
        eta[t] = s * eta[t]


@row_jit
def _logistic_eta_rows2(data, start, k, theta, theta_new, eta, eta_new):
    """:func:`_logistic_eta_rows` at two parameter vectors, each row read once (the
    predictors :func:`_logistic_row_ratio` computes)."""
    X, y, plus_minus, inv_temp = data
    rows_dots(X, start, k, theta, theta_new, eta, eta_new)
    for t in range(k):
        s = y[start + t] if plus_minus else 2.0 * y[start + t] - 1.0
        eta[t] = s * eta[t]
        eta_new[t] = s * eta_new[t]


@row_jit
def _logistic_eta_loglik(data, eta):
    return log_sigmoid(eta) * data[3]


@row_jit
def _logistic_eta_ratio(data, eta, eta_new):
    return (log_sigmoid(eta_new) - log_sigmoid(eta)) * data[3]


@row_jit
def _logistic_row_loglik(data, i, theta):
    return _logistic_eta_loglik(data, _logistic_row_eta(data, i, theta))


@row_jit
def _logistic_row_ratio(data, i, theta, theta_new):
    X, y, plus_minus, inv_temp = data
    a, a_new = dots(X, i, theta, theta_new)
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    return _logistic_eta_ratio(data, s * a, s * a_new)


@jit
def _logistic_loglik_many(data, idx, thetas_t, out):
    """``out[r, k] = log p(y_i | x_i, theta_k)`` (tempered) for rows ``i = idx[r]``.

    ``thetas_t`` is the (d, k) transpose of the parameter vectors, so the inner loops run
    over the k vectors (contiguous, vectorised). Each entry is computed with the arithmetic
    of :func:`_logistic_row_loglik` in the same order (the products summed over j from 0,
    then the label's sign, then ``log_sigmoid`` times 1/K), so it equals ``loglik`` bit for
    bit.
    """
    X, y, plus_minus, inv_temp = data
    d, K = thetas_t.shape
    e = np.empty(K)
    for r in range(idx.shape[0]):
        i = idx[r]
        o = out[r]
        for k in range(K):
            o[k] = 0.0
        for j in range(d):
            x = X[i, j]
            t = thetas_t[j]
            for k in range(K):
                o[k] += x * t[k]
        s = y[i] if plus_minus else 2.0 * y[i] - 1.0
        # log_sigmoid(z) = min(z, 0) - log1p(exp(-|z|)) as two SIMD loops (a quarter faster
        # than one loop over the composed function; the same operations, the same bits)
        for k in range(K):
            o[k] *= s
            e[k] = exp_nonpositive(-abs(o[k]))
        for k in range(K):
            z = o[k]
            low = 0.0 if z >= 0.0 else z
            o[k] = (low - log1p_unit(e[k])) * inv_temp


@row_jit
def _logistic_row_grad(data, i, theta, out):
    X, y, plus_minus, inv_temp = data
    a = 0.0
    for j in range(X.shape[1]):
        a += X[i, j] * theta[j]
    s = y[i] if plus_minus else 2.0 * y[i] - 1.0
    w = s * math.exp(log_sigmoid(-s * a)) * inv_temp  # d/da log sigmoid(s a) = s sigmoid(-s a)
    for j in range(X.shape[1]):
        out[j] = w * X[i, j]


@row_jit
def _logistic_grad_rows(data, start, k, theta, eta, acc):
    """Add the gradients of rows ``start .. start + k - 1`` to ``acc`` in row order, each
    ``w_i x_i`` with the arithmetic of :func:`_logistic_row_grad` (the same bits); the
    predictors four rows side by side into ``eta``."""
    X, y, plus_minus, inv_temp = data
    rows_dot(X, start, k, theta, eta)
    for t in range(k):
        i = start + t
        a = eta[t]
        s = y[i] if plus_minus else 2.0 * y[i] - 1.0
        w = s * math.exp(log_sigmoid(-s * a)) * inv_temp
        for j in range(X.shape[1]):
            acc[j] += w * X[i, j]


class LogisticRegression(BaseModel):
    """Logistic regression, ``p(y_i = 1 | x_i, theta) = sigmoid(theta . x_i)``.

    Parameters
    ----------
    X : array of shape (N, d)
        Covariates; add a column of ones for an intercept. Read in place (memmaps welcome),
        or by blocks of rows from a store (a Zarr array, an h5py dataset, a dask array or
        any :class:`~samplers.sources.RowSource`).
    y : array of shape (N,)
        Labels in {0, 1} or in {-1, +1} (an array or a store, as ``X``).
    prior : Prior, optional
        Defaults to the flat prior.
    temperature : float
        K > 0; the likelihood is raised to 1/K.
    executor : optional
        Where the data checks of a store run (NaN scan and checksums of X, labels and
        checksums of y): a ``dask.distributed.Client``, its ``get_executor()`` or any
        ``concurrent.futures`` executor, the errors those of the local checks; None
        (default) here. Not kept.

    Notes
    -----
    ``log p(y_i | x_i, theta)`` is 1-Lipschitz in ``theta . x_i``, so
    ``|l_i| <= ||theta' - theta|| max_j ||x_j|| / K`` (Bardenet et al. 2014, section 4.2);
    ``max_j ||x_j||`` is computed once at construction.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = (X @ [1.0, -1.0, 0.5] > 0).astype(float)
    >>> model = LogisticRegression(X, y)
    >>> l = model.loglik_ratio(np.zeros(3), [0.1, 0.0, 0.0], np.arange(500))
    >>> bool(np.abs(l).max() <= model.loglik_ratio_bound(np.zeros(3), [0.1, 0.0, 0.0]))
    True
    """

    _row_loglik = staticmethod(_logistic_row_loglik)
    _row_ratio = staticmethod(_logistic_row_ratio)
    _row_grad = staticmethod(_logistic_row_grad)
    _eta_rows = staticmethod(_logistic_eta_rows)
    _grad_rows = staticmethod(_logistic_grad_rows)
    _eta_rows2 = staticmethod(_logistic_eta_rows2)
    _eta_loglik = staticmethod(_logistic_eta_loglik)
    _eta_ratio = staticmethod(_logistic_eta_ratio)
    _row_prefetch = staticmethod(prefetch_data01)
    _row_fields = ("X", "y")

    def __init__(self, X, y, *, prior: Prior | None = None, temperature=1.0, executor=None):
        self.X, self.y = regression_data(X, y, entry="label", executor=executor)
        self.N = self.X.shape[0]
        labels = set()
        quick = data_checks_skipped()   # then stop at the first chunk that decides
        for block in scan_rows(self.y, np.unique, desc="checking labels", verify=True,
                               executor=None if quick else executor):
            labels.update(block.tolist())
            if quick and labels & {0.0, -1.0}:
                break
        if labels <= {0.0, 1.0}:
            self._plus_minus = False
        elif labels <= {-1.0, 1.0}:
            self._plus_minus = True
        else:
            raise ValueError(f"y must hold labels in {{0, 1}} or {{-1, 1}}, got {sorted(labels)[:5]}")
        super().__init__(prior=prior, temperature=temperature, dim=self.X.shape[1])

    def _kernel_data(self):
        return (self.X, self.y, self._plus_minus, self._inv_temp)

    def loglik_many(self, thetas, idx):
        """Per-datum log-likelihoods of rows ``idx`` at k parameter vectors, shape (len(idx), k).

        One compiled loop over the rows for all k vectors (used by
        ``design.TrialChain.from_model`` to summarise every trial pair in one data pass):
        the k linear predictors of a row, then the branch-free ``log_sigmoid`` of
        ``design._lib.vecmath`` mapped over them in SIMD. Each column equals ``loglik`` bit
        for bit (the same arithmetic in the same order). The loop releases the GIL, so
        chunks of rows can run on several threads.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.array([[1.0, 0.5], [1.0, -2.0]]); y = np.array([1.0, 0.0])
        >>> model = LogisticRegression(X, y)
        >>> thetas = np.array([[0.0, 0.0], [0.3, 1.0]])
        >>> bool(np.array_equal(model.loglik_many(thetas, np.arange(2))[:, 1],
        ...                     model.loglik(thetas[1], np.arange(2))))
        True
        """
        thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
        if thetas.ndim != 2 or thetas.shape[1] != self.dim:
            raise ValueError(f"thetas must have shape (k, {self.dim}), got {thetas.shape}")
        idx = self._check_idx(idx)
        if self._store_backed:    # the rows read from the store (one call per chunk)
            return self._rows_model(idx).loglik_many(thetas, np.arange(idx.shape[0]))
        out = np.empty((idx.shape[0], thetas.shape[0]))
        _logistic_loglik_many(self._kernel_data(), idx, np.ascontiguousarray(thetas.T), out)
        return out

    _ratio_range = staticmethod(step_range)

    def _range_data(self):
        return (1.0, self._max_row_norm, self._inv_temp)
