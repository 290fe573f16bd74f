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

``TrialChain.from_model`` calls :func:`pair_statistics`: the moments and the shape of the
l_i (min, max, third and fourth central sums, sum |d|, sum |d|^3) in one such pass, the
log-likelihoods (the pass's cost) computed once per row and vector instead of twice.
:func:`pair_moments` and :func:`pair_shape_sums` are the two exact passes it replaces (kept:
the reference, small N, and the fallback of a pair whose absolute moments the one pass
cannot certify).
"""

from __future__ import annotations

import math

from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from ._lib.distribute import as_cluster, map_ranges, per_chunk, recipe_of
from ._lib.jit import jit
from ._lib.progress import progress_callback

__all__ = ["pair_moments", "pair_shape_sums", "pair_statistics"]

#: Largest rows x parameter-vectors block one ``loglik_many`` call computes.
MAX_ENTRIES = 1 << 20
#: The one-pass statistics (:func:`pair_statistics`) take their pilot from this many rows
#: (``PILOT_BLOCKS`` evenly spaced blocks of consecutive rows, so a memmap is read in a few
#: pages per block, and ordered data are still sampled throughout) and run from
#: ``ONE_PASS_FROM`` rows on; below it the two exact passes are cheap.
PILOT_BLOCKS = 4096
PILOT_BLOCK_ROWS = 8
ONE_PASS_FROM = 1 << 18
#: Half-width of the window about the pilot mean, in pilot standard errors, and its bins
#: (an even number: a bin edge at the pilot). The error bound of the one bin that holds the
#: mean grows as (bin width)^2 times the density of the l_i there: control-variate residuals
#: near the mode are peaked (excess kurtosis ~50), and at 128 bins 15 of 40 Laplace pairs of
#: a logistic regression (N = 10^6, d = 11) missed ``ABS_TOL`` and cost a second pass; at
#: 2048 none did (the sums of the bins are a few MB per chunk).
WINDOW_SE = 8.0
WINDOW_BINS = 2048
#: Largest certified relative error of sum |d| and sum |d|^3 the one pass accepts; beyond
#: it (or with the mean outside the window) the shape pass runs again about the mean.
ABS_TOL = 1e-6
#: Rows per block of the one-pass chunk kernel (a block of a chunk's matrix stays in cache).
_ROW_BLOCK = 64


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
def _pair_columns_mean(ll, old, new):
    """Mean of ll[:, new[p]] - ll[:, old[p]] over the rows for every p (summed row by row,
    in order), and whether every mean is finite."""
    n, P = ll.shape[0], old.shape[0]
    mean = np.zeros(P)
    for r in range(n):
        row = ll[r]
        for p in range(P):
            mean[p] += row[new[p]] - row[old[p]]
    finite = True
    for p in range(P):
        mean[p] /= n
        finite = finite and math.isfinite(mean[p])
    return mean, finite


@jit
def _pair_columns_moments(ll, old, new):
    """Mean and sum of squared deviations of ll[:, new[p]] - ll[:, old[p]] for every p.

    Two passes over the rows (the mean, then the deviations), without forming the
    differences; ``finite`` is False if any difference is not finite.
    """
    n, P = ll.shape[0], old.shape[0]
    mean, finite = _pair_columns_mean(ll, old, new)
    m2 = np.zeros(P)
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


def _scan(model, chunk_fn, args, merge, *, N, chunk, workers, progress, desc, executor=None):
    """``merge(chunk_fn(model, *args, start, stop))`` for every chunk, in chunk order.

    Chunks run on ``workers`` threads, at most 2 x workers in flight; results are merged in
    chunk order, so nothing depends on the thread timing. The main thread waits with a
    timeout, so Ctrl-C (or an exception from the progress callback) stops the pass at once
    (queued chunks are cancelled). With ``executor`` (resolved by
    :func:`~design._lib.distribute.as_cluster`) ranges of chunks run on its workers, each
    rebuilding its rows with ``model.block_recipe``, and their chunks' results are merged
    here in the same order: the same bits.
    """
    starts = list(range(0, N, chunk))
    total = len(starts)
    cluster = as_cluster(executor)
    if cluster is not None:
        done = [0]
        callback = progress if callable(progress) else None

        def merge_range(start, stop, results):
            for res in results:
                merge(res)
            done[0] += len(results)
            if callback is not None:
                callback(done[0], total)

        map_ranges(cluster, recipe_of(model), per_chunk, (chunk_fn, args, chunk), merge_range,
                   N=N, chunk=chunk, progress=False if callback is not None else progress,
                   desc=desc)
        return
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


def pair_moments(model, thetas, theta_news, *, N, chunk, workers=2, progress=None,
                 executor=None):
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
          desc="trial-pair statistics", executor=executor)
    return mean, np.sqrt(m2 / N)


def pair_shape_sums(model, thetas, theta_news, mean, *, N, chunk, workers=2, progress=None,
                    executor=None):
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
          progress=progress, desc="trial-pair shapes", executor=executor)
    return acc


@jit
def _pair_columns_stats(ll, old, new, pilot, width, nbins):
    """One chunk's statistics of l_p = ll[:, new[p]] - ll[:, old[p]] for every pair p.

    Returns ``moments`` (P, 4): chunk mean and the sums of squared, cubed and fourth powers
    of the deviations from it (the mean and the squares with the arithmetic of
    ``_pair_columns_moments``, so they are the same bits); ``ends`` (P, 2): min and max of l;
    ``sums`` (P, nbins + 1, 4): count and sums of e, e^2, e^3 of e = l - pilot[p] over the
    rows in each of ``nbins`` equal bins of the window |e| < width[p] (bin nbins / 2 starts
    at e = 0), then (index nbins) the count of e >= 0 and the sums of |e|, e |e|, |e|^3 over
    all rows; ``finite``.
    """
    n, P = ll.shape[0], old.shape[0]
    moments = np.zeros((P, 4))
    ends = np.empty((P, 2))
    sums = np.zeros((P, nbins + 1, 4))
    mean, finite = _pair_columns_mean(ll, old, new)
    inv_bw = np.empty(P)
    for p in range(P):
        inv_bw[p] = nbins / (2.0 * width[p])
    # row by row, the pairs in an inner loop over contiguous arrays (vectorised); each sum
    # still runs over the rows in order. Rows inside the window (a few per cent) are binned
    # in a third loop.
    half = nbins // 2
    lbuf = np.empty(P)
    m2 = np.zeros(P)
    m3 = np.zeros(P)
    m4 = np.zeros(P)
    lo = np.full(P, math.inf)
    hi = np.full(P, -math.inf)
    c0 = np.zeros(P)
    a1 = np.zeros(P)
    a2 = np.zeros(P)
    a3 = np.zeros(P)
    for r in range(n):
        row = ll[r]
        for p in range(P):
            lbuf[p] = row[new[p]] - row[old[p]]
        inside = 0
        for p in range(P):
            l = lbuf[p]
            d = l - mean[p]
            d2 = d * d
            m2[p] += d2
            m3[p] += d2 * d
            m4[p] += d2 * d2
            lo[p] = l if l < lo[p] else lo[p]
            hi[p] = l if l > hi[p] else hi[p]
            e = l - pilot[p]
            a = abs(e)
            c0[p] += 1.0 if e >= 0.0 else 0.0
            a1[p] += a
            a2[p] += e * a
            a3[p] += a * e * e
            inside += 1 if a < width[p] else 0
        if inside > 0:
            for p in range(P):
                e = lbuf[p] - pilot[p]
                if abs(e) < width[p]:
                    if e >= 0.0:
                        k = min(half + int(e * inv_bw[p]), nbins - 1)
                    else:
                        k = max(half - 1 - int(-e * inv_bw[p]), 0)
                    e2 = e * e
                    sums[p, k, 0] += 1.0
                    sums[p, k, 1] += e
                    sums[p, k, 2] += e2
                    sums[p, k, 3] += e2 * e
    for p in range(P):
        ends[p, 0] = lo[p]
        ends[p, 1] = hi[p]
        sums[p, nbins, 0] = c0[p]
        sums[p, nbins, 1] = a1[p]
        sums[p, nbins, 2] = a2[p]
        sums[p, nbins, 3] = a3[p]
        moments[p, 0] = mean[p]
        moments[p, 1] = m2[p]
        moments[p, 2] = m3[p]
        moments[p, 3] = m4[p]
    return moments, ends, sums, finite


def _chunk_stats(model, plan, pilot, width, nbins, start, stop):
    """(rows, moments, ends, sums) of ``_pair_columns_stats`` over rows start..stop-1."""
    ll, old, new = _chunk_columns(model, plan, np.arange(start, stop))
    moments, ends, sums, finite = _pair_columns_stats(ll, old, new, pilot, width, nbins)
    if not (finite and np.all(np.isfinite(moments)) and np.all(np.isfinite(ends))):
        raise ValueError(
            f"model log-likelihood differences must be {stop - start} finite values for an "
            f"index chunk of size {stop - start}, got non-finite values")
    return stop - start, moments, ends, sums


def _chunk_columns(model, plan, idx):
    """(ll, old, new) with the l_i of pair p = ll[:, new[p]] - ll[:, old[p]] at rows idx:
    one ``loglik_many`` call for the distinct vectors, or the per-pair differences behind a
    zero column (l - 0 is l, bit for bit)."""
    kind, args = plan
    if kind == "many":
        vectors, old, new = args
        ll = np.ascontiguousarray(model.loglik_many(vectors, idx), dtype=np.float64)
        if ll.shape != (idx.size, vectors.shape[0]):
            raise ValueError(
                f"model.loglik_many must return shape {(idx.size, vectors.shape[0])} for "
                f"{idx.size} rows and {vectors.shape[0]} parameter vectors, got {ll.shape}")
        return ll, old, new
    thetas, theta_news = args
    L = _chunk_diffs_generic(model, thetas, theta_news, idx)
    P = thetas.shape[0]
    ll = np.zeros((idx.size, P + 1))
    ll[:, 1:] = L
    return ll, np.zeros(P, dtype=np.int64), np.arange(1, P + 1, dtype=np.int64)


def _pilot(model, plan, N, P, chunk):
    """Mean and sd of each pair's l_i over ``PILOT_BLOCKS`` evenly spaced blocks of rows,
    read ``chunk`` rows at a time (Chan et al.'s merge), and the number of rows."""
    starts = np.linspace(0, N - PILOT_BLOCK_ROWS, PILOT_BLOCKS).astype(np.int64)
    idx = np.unique((starts[:, None] + np.arange(PILOT_BLOCK_ROWS)).ravel())
    n_acc, mean, m2 = 0, np.zeros(P), np.zeros(P)
    for s in range(0, idx.size, chunk):
        ll, old, new = _chunk_columns(model, plan, idx[s:s + chunk])
        L = ll[:, new] - ll[:, old]
        if not np.all(np.isfinite(L)):
            raise ValueError(
                f"model log-likelihood differences must be {L.shape[0]} finite values for an "
                f"index chunk of size {L.shape[0]}, got non-finite values")
        n_b, mean_b = L.shape[0], L.mean(axis=0)
        n = n_acc + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / n)
        m2 = m2 + ((L - mean_b) ** 2).sum(axis=0) + delta * delta * (n_acc * n_b / n)
        n_acc = n
    return mean, np.sqrt(m2 / n_acc), n_acc


def _abs_sums(sums, delta, width, n, m2, m3):
    """(sum |e - delta|, sum |e - delta|^3, certified bound on the error of each) for one
    pair from the sums of ``_pair_columns_stats`` over e = l - pilot, ``delta`` = mu - pilot,
    n rows and the central sums m2, m3 of the l_i.

    The power sums of e over e >= 0 are (count, (T_k + sum |e|^k sign)/2) with T_k the totals
    (n, n delta, m2 + n delta^2, m3 + 3 delta m2 + n delta^3), those over e < 0 the rest;
    less the window's bins, they are the rows beyond the window, on a known side of delta.
    Rows above ``delta`` contribute sum (e - delta)^k, rows below sum (delta - e)^k, both
    expanded in the power sums of e. The rows of the one bin that holds ``delta`` are split
    as if spread evenly over it, which is off by at most count x bin width (x bin width^3).
    """
    def powers(t):          # sum (e - delta), sum (e - delta)^3 over the rows of t
        c, s1, s2, s3 = t
        return (s1 - c * delta,
                s3 - 3.0 * delta * s2 + 3.0 * delta * delta * s1 - delta ** 3 * c)

    nbins = sums.shape[0] - 1
    half = nbins // 2
    bw = 2.0 * width / nbins
    total = np.array([n, n * delta, m2 + n * delta * delta,
                      m3 + 3.0 * delta * m2 + n * delta ** 3])
    c0, s_abs1, s_abs2, s_abs3 = sums[nbins]
    positive = np.array([c0, 0.5 * (total[1] + s_abs1), 0.5 * (total[2] + s_abs2),
                         0.5 * (total[3] + s_abs3)])
    above = positive - sums[half:nbins].sum(axis=0)
    below = (total - positive) - sums[:half].sum(axis=0)
    up, down = powers(above), powers(below)
    a1, a3 = up[0] - down[0], up[1] - down[1]
    b_delta = min(max(int((delta + width) / bw), 0), nbins - 1)
    s1, s3 = powers(sums[:nbins].T)            # every bin at once
    sign = np.where(np.arange(nbins) > b_delta, 1.0, -1.0)
    sign[b_delta] = 0.0
    a1 += float(sign @ s1)
    a3 += float(sign @ s3)
    n_s = sums[b_delta, 0]
    f = (-width + (b_delta + 1) * bw - delta) / bw        # share of the bin above delta
    a1 += n_s * bw * (f * f + (1 - f) * (1 - f)) / 2.0
    a3 += n_s * bw ** 3 * (f ** 4 + (1 - f) ** 4) / 4.0
    return a1, a3, n_s * bw, n_s * bw ** 3


def pair_statistics(model, thetas, theta_news, *, N, chunk, workers=2, progress=None,
                    two_pass=False, executor=None):
    """(mu, sigma, shape) of every pair's l_i in one chunked pass over the data.

    ``shape`` is :func:`pair_shape_sums`'s (n_pairs, 6) array (min l, max l, sum d^3,
    sum d^4, sum |d|, sum |d|^3 with d = l - mu), ``mu`` and ``sigma`` are
    :func:`pair_moments`' (the same chunks and arithmetic: the same bits).

    The moments need the mean only chunk by chunk: each chunk's sums of squared, cubed and
    fourth powers of deviations from its own mean are merged in chunk order by the pairwise
    updates of Chan, Golub & LeVeque (1979) and Pebay (2008, eqs. 2.1-2.2), which lose no
    precision when |mu| << sigma. The absolute moments sum |d| and sum |d|^3 have no such
    update; they are summed about a pilot mean c from a sample of the rows (``_pilot``):
    with e = l - c, the count of e >= 0 and the sums of |e|, e |e| and |e|^3 (which with the
    totals give the power sums on each side of c), and the power sums of the rows inside a
    window |e| < ``WINDOW_SE`` pilot standard errors in ``WINDOW_BINS`` bins. Once mu is
    known, every row's side of mu is known except in the one bin that holds mu, whose share
    is bounded (``_abs_sums``). If
    mu falls outside the window or that bound exceeds ``ABS_TOL`` of the sum, the shape is
    summed again about mu in a second pass (:func:`pair_shape_sums`); below
    ``ONE_PASS_FROM`` rows, or with ``two_pass``, the two exact passes run. With
    ``executor`` every pass but the pilot's (a few thousand rows) runs on its workers.
    """
    if two_pass or N < ONE_PASS_FROM:
        mu, sigma = pair_moments(model, thetas, theta_news, N=N, chunk=chunk,
                                 workers=workers, progress=progress, executor=executor)
        return mu, sigma, pair_shape_sums(model, thetas, theta_news, mu, N=N, chunk=chunk,
                                          workers=workers, progress=progress,
                                          executor=executor)
    if callable(getattr(model, "loglik_many", None)):
        args = distinct_vectors(thetas, theta_news)
        plan = ("many", args)
        chunk = min(chunk, max(1024, MAX_ENTRIES // args[0].shape[0]))
    else:
        plan = ("generic", (thetas, theta_news))
    P = thetas.shape[0]
    pilot, pilot_sd, n_pilot = _pilot(model, plan, N, P, chunk)
    if not np.all(pilot_sd > 0):          # every sampled l_i equal: no scale for a window
        mu, sigma = pair_moments(model, thetas, theta_news, N=N, chunk=chunk,
                                 workers=workers, progress=progress, executor=executor)
        return mu, sigma, pair_shape_sums(model, thetas, theta_news, mu, N=N, chunk=chunk,
                                          workers=workers, progress=progress,
                                          executor=executor)
    width = WINDOW_SE * pilot_sd / math.sqrt(n_pilot)
    n_acc, mean = 0, np.zeros(P)
    m2, m3, m4 = np.zeros(P), np.zeros(P), np.zeros(P)
    ends = np.empty((P, 2))
    ends[:, 0], ends[:, 1] = np.inf, -np.inf
    sums = np.zeros((P, WINDOW_BINS + 1, 4))

    def merge(res):
        nonlocal n_acc, mean, m2, m3, m4
        n_b, mom, e, t = res
        mean_b, m2_b, m3_b, m4_b = mom[:, 0], mom[:, 1], mom[:, 2], mom[:, 3]
        n = n_acc + n_b
        delta = mean_b - mean
        # Pebay (2008): the higher sums first, from the old m2, m3
        m4 = (m4 + m4_b + delta ** 4 * (n_acc * n_b * (n_acc * n_acc - n_acc * n_b
                                                         + n_b * n_b) / n ** 3)
              + 6.0 * delta * delta * (n_acc * n_acc * m2_b + n_b * n_b * m2) / (n * n)
              + 4.0 * delta * (n_acc * m3_b - n_b * m3) / n)
        m3 = (m3 + m3_b + delta ** 3 * (n_acc * n_b * (n_acc - n_b) / (n * n))
              + 3.0 * delta * (n_acc * m2_b - n_b * m2) / n)
        # pair_moments' update, in its order
        mean = mean + delta * (n_b / n)
        m2 = m2 + m2_b + delta * delta * (n_acc * n_b / n)
        n_acc = n
        np.minimum(ends[:, 0], e[:, 0], out=ends[:, 0])
        np.maximum(ends[:, 1], e[:, 1], out=ends[:, 1])
        sums[...] += t

    _scan(model, _chunk_stats, (plan, pilot, width, WINDOW_BINS), merge, N=N, chunk=chunk,
          workers=workers, progress=progress, desc="trial-pair statistics", executor=executor)
    shape = np.empty((P, 6))
    shape[:, 0], shape[:, 1], shape[:, 2], shape[:, 3] = ends[:, 0], ends[:, 1], m3, m4
    redo = []
    for p in range(P):
        delta = mean[p] - pilot[p]
        if not abs(delta) < width[p] * (1.0 - 2.0 / WINDOW_BINS):
            redo.append(p)
            continue
        a1, a3, e1, e3 = _abs_sums(sums[p], delta, width[p], N, m2[p], m3[p])
        if not (e1 <= ABS_TOL * a1 and e3 <= ABS_TOL * a3):
            redo.append(p)
            continue
        shape[p, 4], shape[p, 5] = a1, a3
    if redo:                               # the exact shape pass, for those pairs only
        redo = np.array(redo)
        again = pair_shape_sums(model, thetas[redo], theta_news[redo], mean[redo], N=N,
                                chunk=chunk, workers=workers, progress=progress,
                                executor=executor)
        shape[redo, 4:] = again[:, 4:]
    return mean, np.sqrt(m2 / N), shape
