"""One chunked pass over the data for the statistics of every trial pair (private).

``TrialChain.from_model`` needs, for each pair (theta_p, theta'_p), the mean and population
sd of l_i = log p(x_i | theta'_p) - log p(x_i | theta_p) over all N rows. Scanning the data
once per pair reads it n_pairs times. Here every chunk of rows is read once for all pairs:

* a model with ``loglik_many(thetas, idx)`` (per-datum log-likelihoods of rows ``idx`` at
  k parameter vectors, shape (len(idx), k); for the built-in logistic regression one
  compiled loop over the rows, SIMD over the k vectors) gets all distinct vectors among the 2 n_pairs in one call per
  chunk (the cost is then the log-likelihood's transcendental functions, not memory);
* any other model gets, per chunk, one ``loglik_ratio`` (or two ``loglik``) call per pair:
  still one pass over memory-mapped data, but one call per pair.

Chunks are spread over threads (compiled loops, NumPy's products and ufuncs release the GIL), at most
2 x workers chunks in flight, and a ``loglik_many`` chunk holds at most ``MAX_ENTRIES``
rows x vectors, so memory stays bounded (tens of MB with 2 workers) at any N. Per-chunk
(count, mean, sum of squared deviations) are merged in chunk order with the pairwise update
of Chan, Golub & LeVeque (1979), so the result does not depend on the thread timing and
equals the per-pair scan up to rounding. The main thread waits with a timeout, so Ctrl-C
stops the pass at once (queued chunks are cancelled).
"""

from __future__ import annotations

import math

from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from ._lib.jit import jit
from ._lib.progress import progress_callback

__all__ = ["pair_moments", "pair_shape_sums"]

#: Largest rows x parameter-vectors block one ``loglik_many`` call computes.
MAX_ENTRIES = 1 << 20


def distinct_vectors(thetas, theta_news):
    """(distinct parameter vectors, index of theta_p, index of theta'_p) among all 2 P.

    Consecutive pairs of an MH chain share a state (theta_{p+1} is theta_p or theta'_p), so
    a trial chain has about P to 1.5 P distinct vectors: the log-likelihoods are computed
    once per distinct vector.
    """
    P = thetas.shape[0]
    both = np.concatenate([thetas.reshape(P, -1), theta_news.reshape(P, -1)])
    uniq, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    return np.ascontiguousarray(uniq), inverse[:P], inverse[P:]


@jit
def _pair_columns_moments(ll, old, new):
    """Mean and sum of squared deviations of ll[:, new[p]] - ll[:, old[p]] for every p.

    Two passes over the rows (the mean, then the deviations), without forming the
    differences; ``finite`` is False if any difference is not finite.
    """
    n, P = ll.shape[0], old.shape[0]
    mean = np.zeros(P)
    m2 = np.zeros(P)
    for r in range(n):
        row = ll[r]
        for p in range(P):
            mean[p] += row[new[p]] - row[old[p]]
    finite = True
    for p in range(P):
        mean[p] /= n
        finite = finite and math.isfinite(mean[p])
    for r in range(n):
        row = ll[r]
        for p in range(P):
            d = row[new[p]] - row[old[p]] - mean[p]
            m2[p] += d * d
    return mean, m2, finite


def _chunk_moments_many(model, vectors, old, new, start, stop):
    """(rows, mean, M2) of every pair's l_i over rows start..stop-1 from one
    ``loglik_many`` call (the differences are never formed)."""
    idx = np.arange(start, stop)
    ll = np.ascontiguousarray(model.loglik_many(vectors, idx), dtype=np.float64)
    if ll.shape != (idx.size, vectors.shape[0]):
        raise ValueError(f"model.loglik_many must return shape {(idx.size, vectors.shape[0])} "
                         f"for {idx.size} rows and {vectors.shape[0]} parameter vectors, "
                         f"got {ll.shape}")
    mean, m2, finite = _pair_columns_moments(ll, old, new)
    if not (finite and np.all(np.isfinite(m2))):
        raise ValueError(
            f"model log-likelihood differences must be {idx.size} finite values for an index "
            f"chunk of size {idx.size}, got non-finite values")
    return idx.size, mean, m2


def _chunk_diffs_generic(model, thetas, theta_news, idx):
    fused = getattr(model, "loglik_ratio", None)
    out = np.empty((idx.size, thetas.shape[0]))
    for p in range(thetas.shape[0]):
        if fused is not None:
            col = fused(thetas[p], theta_news[p], idx)
        else:
            col = (np.asarray(model.loglik(theta_news[p], idx), dtype=float)
                   - np.asarray(model.loglik(thetas[p], idx), dtype=float))
        col = np.asarray(col, dtype=float)
        if col.shape != idx.shape:
            raise ValueError(
                f"model log-likelihood differences must be {idx.size} finite values for an "
                f"index chunk of size {idx.size}, got shape {col.shape}")
        out[:, p] = col
    return out


def _chunk_moments_generic(model, thetas, theta_news, start, stop):
    idx = np.arange(start, stop)
    L = _chunk_diffs_generic(model, thetas, theta_news, idx)
    if not np.all(np.isfinite(L)):
        raise ValueError(
            f"model log-likelihood differences must be {idx.size} finite values for an index "
            f"chunk of size {idx.size}, got shape {L.shape} with non-finite values")
    mean = L.mean(axis=0)
    return idx.size, mean, np.sum((L - mean) ** 2, axis=0)


@jit
def _pair_columns_shape(ll, old, new, mean):
    """Per pair p, over the rows of ``ll``, with l = ll[:, new[p]] - ll[:, old[p]] and
    d = l - mean[p]: rows (min l, max l, sum d^3, sum d^4, sum |d|, sum |d|^3), shape (P, 6)."""
    n, P = ll.shape[0], old.shape[0]
    out = np.zeros((P, 6))
    for p in range(P):
        out[p, 0] = math.inf
        out[p, 1] = -math.inf
    for r in range(n):
        row = ll[r]
        for p in range(P):
            l = row[new[p]] - row[old[p]]
            d = l - mean[p]
            o = out[p]
            o[0] = min(o[0], l)
            o[1] = max(o[1], l)
            a = abs(d)
            d2 = d * d
            o[2] += d2 * d
            o[3] += d2 * d2
            o[4] += a
            o[5] += a * d2
    return out


def _chunk_shape_many(model, vectors, old, new, mean, start, stop):
    idx = np.arange(start, stop)
    ll = np.ascontiguousarray(model.loglik_many(vectors, idx), dtype=np.float64)
    if ll.shape != (idx.size, vectors.shape[0]):
        raise ValueError(f"model.loglik_many must return shape {(idx.size, vectors.shape[0])} "
                         f"for {idx.size} rows and {vectors.shape[0]} parameter vectors, "
                         f"got {ll.shape}")
    return _pair_columns_shape(ll, old, new, mean)


def _chunk_shape_generic(model, thetas, theta_news, mean, start, stop):
    idx = np.arange(start, stop)
    L = _chunk_diffs_generic(model, thetas, theta_news, idx)
    if not np.all(np.isfinite(L)):
        raise ValueError(
            f"model log-likelihood differences must be {idx.size} finite values for an index "
            f"chunk of size {idx.size}, got shape {L.shape} with non-finite values")
    d = L - mean
    a = np.abs(d)
    d2 = d * d
    return np.stack([L.min(axis=0), L.max(axis=0), np.sum(d2 * d, axis=0),
                     np.sum(d2 * d2, axis=0), np.sum(a, axis=0), np.sum(a * d2, axis=0)],
                    axis=1)


def _chunk_plan(model, thetas, theta_news, chunk, many_fn, generic_fn):
    """(chunk function, its leading arguments, chunk size) for this model."""
    if callable(getattr(model, "loglik_many", None)):
        args = distinct_vectors(thetas, theta_news)
        # a chunk's (rows x vectors) matrix stays at MAX_ENTRIES (8 MB)
        return many_fn, args, min(chunk, max(1024, MAX_ENTRIES // args[0].shape[0]))
    return generic_fn, (thetas, theta_news), chunk


def _scan(model, chunk_fn, args, merge, *, N, chunk, workers, progress, desc):
    """``merge(chunk_fn(model, *args, start, stop))`` for every chunk, in chunk order.

    Chunks run on ``workers`` threads, at most 2 x workers in flight; results are merged in
    chunk order, so nothing depends on the thread timing. The main thread waits with a
    timeout, so Ctrl-C (or an exception from the progress callback) stops the pass at once
    (queued chunks are cancelled).
    """
    starts = list(range(0, N, chunk))
    total = len(starts)
    callback, close = progress_callback(progress, total, desc=desc, unit="chunk")
    try:
        if workers <= 1 or total == 1:
            for k, s in enumerate(starts):
                merge(chunk_fn(model, *args, s, min(s + chunk, N)))
                if callback is not None:
                    callback(k + 1, total)
            return
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            futures, done_res, nxt, merged = {}, {}, 0, 0
            while merged < total:
                while nxt < total and len(futures) < 2 * workers:
                    s = starts[nxt]
                    futures[pool.submit(chunk_fn, model, *args, s, min(s + chunk, N))] = nxt
                    nxt += 1
                finished, _ = wait(futures, timeout=0.1, return_when=FIRST_COMPLETED)
                for fut in finished:
                    done_res[futures.pop(fut)] = fut.result()
                while merged in done_res:              # merge in chunk order
                    merge(done_res.pop(merged))
                    merged += 1
                if finished and callback is not None:
                    callback(merged, total)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        close()


def pair_moments(model, thetas, theta_news, *, N, chunk, workers=2, progress=None):
    """(mu, sigma) of l_i over all N rows for every pair, in one chunked pass.

    ``thetas`` and ``theta_news`` are float arrays of shape (n_pairs, ...); ``progress`` is
    None (a tqdm bar when stderr is a terminal), a bool, or ``callback(done, total)`` called
    in the main thread after each chunk (an exception it raises stops the pass).
    """
    chunk_fn, args, chunk = _chunk_plan(model, thetas, theta_news, chunk,
                                        _chunk_moments_many, _chunk_moments_generic)
    P = thetas.shape[0]
    n_acc, mean, m2 = 0, np.zeros(P), np.zeros(P)

    def merge(res):
        nonlocal n_acc, mean, m2
        n_b, mean_b, m2_b = res
        n = n_acc + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / n)
        m2 = m2 + m2_b + delta * delta * (n_acc * n_b / n)
        n_acc = n

    _scan(model, chunk_fn, args, merge, N=N, chunk=chunk, workers=workers, progress=progress,
          desc="trial-pair statistics")
    return mean, np.sqrt(m2 / N)


def pair_shape_sums(model, thetas, theta_news, mean, *, N, chunk, workers=2, progress=None):
    """Per pair, with d_i = l_i - mean: min l, max l, sum d^3, sum d^4, sum |d|, sum |d|^3
    over all N rows (columns of a (n_pairs, 6) array), in one chunked pass for all pairs.

    The second pass of ``TrialChain.from_model`` (the shape of the l_i about the mean of
    :func:`pair_moments`); the same chunks, threads and interruption.
    """
    chunk_fn, args, chunk = _chunk_plan(model, thetas, theta_news, chunk,
                                        _chunk_shape_many, _chunk_shape_generic)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    acc = np.zeros((thetas.shape[0], 6))
    acc[:, 0], acc[:, 1] = np.inf, -np.inf

    def merge(res):
        acc[:, 0] = np.minimum(acc[:, 0], res[:, 0])
        acc[:, 1] = np.maximum(acc[:, 1], res[:, 1])
        acc[:, 2:] += res[:, 2:]

    _scan(model, chunk_fn, (*args, mean), merge, N=N, chunk=chunk, workers=workers,
          progress=progress, desc="trial-pair shapes")
    return acc
