"""Heavy rows read exactly: a model wrapper whose minibatches come from the other rows.

See :class:`ExactRows` and :func:`heavy_rows`.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from design._lib.checks import check_positive
from design._lib.distribute import as_cluster, map_ranges, recipe_of
from design._lib.jit import jit, row_jit
from design._lib.passes import n_chunks, run_chunks
from ._base import SCAN_CHUNK, BaseModel, loglik_ratio
from ._glm import glm_kernels

__all__ = ["ExactRows", "heavy_rows", "row_scales", "residual_scales",
           "row_and_residual_scales"]

#: Default of ``threshold`` in :func:`heavy_rows`: a row is heavy while its residual scale
#: exceeds this many times the root mean square scale of the rows left.
HEAVY_THRESHOLD = 20.0


# --- the index map and the compiled row kernels ----------------------------------------------


@row_jit
def rest_row(adj, j):
    """Row of the wrapped model behind row ``j`` of the rest: ``j + #{m : adj[m] <= j}`` with
    ``adj[m] = rows[m] - m`` (``rows`` sorted), a binary search over the k heavy rows."""
    lo = 0
    hi = adj.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if adj[mid] <= j:
            lo = mid + 1
        else:
            hi = mid
    return j + lo


@cache
def _rest_kernels(ratio, prefetch):
    """Row kernels of the wrapper over ``data = (inner, adj, shift)``: the wrapped model's
    ratio kernel at the rest's row ``j``, plus the per-pair constant ``shift``."""

    @row_jit
    def row_ratio(data, j, theta, theta_new):
        inner, adj, shift = data
        return ratio(inner, rest_row(adj, j), theta, theta_new) + shift

    @row_jit
    def row_prefetch(data, j):
        prefetch(data[0], rest_row(data[1], j))

    return row_ratio, row_prefetch


@jit
def ordered_sum(values):
    """``sum(values)`` added in order (the compiled block adds the heavy rows so)."""
    total = 0.0
    for t in range(values.shape[0]):
        total += values[t]
    return total


@cache
def _block_parts(inner_decision, inner_ratio, inner_grads):
    """The compiled chain loop's ``decision_data`` and ``grads`` of the wrapper over its block
    data ``(inner, adj, rows, n)``, ``inner`` the wrapped model's block data: the same
    arithmetic, in the same order, as :meth:`ExactRows._decision_data` and
    :meth:`ExactRows._grad_loglik` (memoised per wrapped kernel)."""
    from ..proposals import row_sums

    @jit
    def decision_data(data, theta, theta_new):
        inner, adj, rows, n = data
        dd = inner_decision(inner, theta, theta_new)
        total = 0.0
        for t in range(rows.shape[0]):
            total += inner_ratio(dd, rows[t], theta, theta_new)
        return (dd, adj, total / n)

    @jit
    def grads(data, idx, theta, out):
        inner, adj, rows, n = data
        mapped = np.empty(idx.shape[0], dtype=np.intp)
        for t in range(idx.shape[0]):
            mapped[t] = rest_row(adj, idx[t])
        inner_grads(inner, mapped, theta, out)
        if rows.shape[0] > 0:
            heavy = np.empty((rows.shape[0], out.shape[1]))
            inner_grads(inner, rows, theta, heavy)
            shift = np.empty(out.shape[1])
            row_sums(heavy, shift)
            for j in range(out.shape[1]):
                shift[j] = shift[j] / n
            for t in range(out.shape[0]):
                for j in range(out.shape[1]):
                    out[t, j] += shift[j]

    return decision_data, grads


# --- which rows are heavy ----------------------------------------------------------------------


@jit
def quadratic_forms(x, sigma, power, out):
    """``out[i] = (x_i' sigma x_i)^power`` for the rows of ``x`` (``sigma`` symmetric), in a
    compiled loop: NumPy's threaded BLAS products slow down by orders of magnitude when other
    processes hold the cores."""
    d = x.shape[1]
    for i in range(x.shape[0]):
        v = 0.0
        for j in range(d):
            xj = x[i, j]
            w = 0.5 * sigma[j, j] * xj
            for k in range(j + 1, d):
                w += sigma[j, k] * x[i, k]
            v += xj * w
        out[i] = max(2.0 * v, 0.0) ** power


def row_scales(cv, *, executor=None) -> np.ndarray:
    r"""The residual scale of every row of a control-variate model, ``v_i^((order + 1) / 2)``.

    ``v_i = x_i' Sigma x_i`` is the Laplace variance of row i's linear predictor
    (``Sigma = cv.laplace_covariance()``); a row's Taylor residual at order ``q`` is
    ``f^(q+1)(eta) s^(q+1) / (q+1)!`` to leading order, ``s = x_i . (theta - theta*)``, and
    under the Laplace approximation ``s ~ N(0, v_i)``, so its size is proportional to
    ``v_i^((q + 1) / 2)`` (the per-row form of the residual bound of
    :class:`~samplers.ControlVariates`, with the posterior's metric in place of
    ``||x_i||``). One chunked pass over the rows, O(N d^2).

    Parameters
    ----------
    cv : ControlVariates
        Around a built-in GLM model (logistic, linear, Student-t, Gaussian mean).
    executor : optional
        Compute the scales on a cluster (a ``dask.distributed.Client``, its
        ``get_executor()`` or any ``concurrent.futures.Executor``), about 10^6 rows a task;
        the same values, gathered here (8 N bytes).

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianMean
    >>> cv = ControlVariates(GaussianMean(np.random.default_rng(0).normal(size=1000)))
    >>> a = row_scales(cv)                  # every row alike: v_i = 1 / N
    >>> a.shape, bool(np.allclose(a, a[0]))
    ((1000,), True)
    """
    glm = getattr(cv, "_glm", None)
    if glm is None or not callable(getattr(cv, "laplace_covariance", None)):
        raise TypeError(f"row_scales needs a ControlVariates around a built-in GLM model, got "
                        f"{type(cv).__name__}{'' if glm is not None else ' without GLM rows'}")
    sigma = cv.laplace_covariance()
    power = 0.5 * (cv.order + 1)
    out = np.empty(cv.N)
    cluster = as_cluster(executor)
    if cluster is not None:
        def merge(start, stop, values):
            out[start:stop] = values

        map_ranges(cluster, recipe_of(cv.model), _block_scales, (sigma, power), merge,
                   N=cv.N, chunk=SCAN_CHUNK, progress=False, desc="row scales")
        return out
    def scan(c0, c1):
        for c in range(c0, c1):
            start, stop = c * SCAN_CHUNK, min((c + 1) * SCAN_CHUNK, cv.N)
            quadratic_forms(glm.design(cv.model, start, stop), sigma, power, out[start:stop])

    # rows in memory (an array or a memmap): chunks on every core (each row's value is the
    # same on any thread); a store's rows are read in order on this thread
    threads = None if isinstance(getattr(cv.model, "X", None), np.ndarray) else 1
    run_chunks(scan, n_chunks(cv.N, SCAN_CHUNK), threads=threads)
    return out


@cache
def _edge_kernel(link, derivs):
    """Kernel of :func:`residual_scales` over the rows ``start + t`` of a model's kernel data,
    ``x`` their block of the design (memoised per link)."""

    @jit
    def edges(data, start, x, centre, reach, order2, out):
        for t in range(x.shape[0]):
            i = start + t
            e = 0.0
            for j in range(x.shape[1]):
                e += x[t, j] * centre[j]
            h = reach[t]
            f0 = link(data, i, e)
            f1, f2 = derivs(data, i, e)
            quad = 0.5 * order2 * f2 * h * h
            up = link(data, i, e + h) - f0 - f1 * h - quad
            down = link(data, i, e - h) - f0 + f1 * h - quad
            out[t] = max(abs(up), abs(down))

    return edges


def residual_scales(cv, *, radius=None) -> np.ndarray:
    r"""Each row's Taylor residual at the edges of its reach: a scale of the l_i that sees
    where the row's likelihood is saturated.

    Row i's residual at ``theta`` is ``f_i(eta* + s) - (f_i(eta*) + f_i'(eta*) s [+ f_i''(eta*)
    s^2 / 2])``, ``eta* = x_i . theta*`` at the centre and ``s = x_i . (theta - theta*)``,
    ``|s| <= radius sqrt(v_i)`` for every ``theta`` within ``radius`` of the centre in the
    Laplace metric (``v_i = x_i' Sigma x_i``). This is the larger |residual| at ``s = +-
    radius sqrt(v_i)``. Unlike :func:`row_scales` (``v_i^((q+1)/2)``, the same for every
    ``eta*``) it is small where the row is saturated at the centre (a logistic row with
    ``|eta*|`` large: its residuals are ~e^-|eta*| times its scale): on covariates from
    t(1.2) the rows of largest :func:`row_scales` are such rows, and the l_i's fourth moment
    sits on a few rows with both covariates large and ``eta*`` moderate, which this ranks
    first. A weight, not a bound (a pair beyond ``radius``, or a residual larger inside
    the reach than at its edges). Zeros where the proxy is exact (the Taylor constant of
    its order is 0: linear regression, a Gaussian mean; the residuals are rounding). One
    chunked pass over the rows, O(N d^2).

    Parameters
    ----------
    cv : ControlVariates
        Around a built-in GLM model without an estimated family parameter.
    radius : float, optional
        The reach in the Laplace metric; default ``sqrt(d) + 3``, beyond nearly all of a
        Laplace approximation's draws.

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianPrior, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(2000), rng.normal(size=2000)])
    >>> X[0, 1] = 40.0                      # a row saturated at the mode (eta* ~ 42)
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-X @ [0.5, 1.0]))).astype(float)
    >>> cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    >>> w, a = residual_scales(cv), row_scales(cv)
    >>> bool(a[0] == a.max()), bool(w[0] < 1e-6 * np.median(w))
    (True, True)
    """
    glm = getattr(cv, "_glm", None)
    if (glm is None or glm.nuisance
            or not callable(getattr(cv, "laplace_covariance", None))):
        raise TypeError(f"residual_scales needs a ControlVariates around a built-in GLM model "
                        f"without a family parameter, got {type(cv).__name__}")
    radius = math.sqrt(cv.dim) + 3.0 if radius is None else check_positive("radius", radius)
    if (glm.m3(cv.model) if cv.order == 2 else glm.m2(cv.model)) == 0.0:
        return np.zeros(cv.N)       # the proxy is exact (a Gaussian likelihood): rounding
    sigma = cv.laplace_covariance()
    centre = np.ascontiguousarray(cv.center.theta, dtype=np.float64)
    edges = _edge_kernel(glm.link, glm.derivs)
    data = cv.model._kernel_data()
    order2 = 1.0 if cv.order == 2 else 0.0
    out = np.empty(cv.N)

    def scan(c0, c1):
        for c in range(c0, c1):
            start, stop = c * SCAN_CHUNK, min((c + 1) * SCAN_CHUNK, cv.N)
            x = glm.design(cv.model, start, stop)
            reach = np.empty(stop - start)
            quadratic_forms(x, sigma, 0.5, reach)
            edges(data, start, x, centre, radius * reach, order2, out[start:stop])

    threads = None if isinstance(getattr(cv.model, "X", None), np.ndarray) else 1
    run_chunks(scan, n_chunks(cv.N, SCAN_CHUNK), threads=threads)
    return out


@cache
def _both_kernel(link, derivs):
    """Kernel of :func:`row_and_residual_scales` over the rows ``start + t`` of a model's
    kernel data, ``x`` their block of the design: each row's quadratic form once, then
    :func:`quadratic_forms`' scale (``power``) and :func:`residual_scales`' edge (its
    reach at ``half`` = 0.5, passed as a value so that both powers are the same call as in
    those kernels), in the same arithmetic (memoised per link)."""

    @jit
    def both(data, start, x, sigma, power, half, centre, radius, order2, scale, edge):
        # first each row's form v_i and predictor e_i, four rows at a time: each row's sums
        # in the same order as quadratic_forms' and the edge kernel's (the same bits), the
        # four rows' add chains side by side (one row's chain waits on each add);
        # edge and scale hold them until the second loop
        n, d = x.shape
        t = 0
        while t + 4 <= n:
            v0 = v1 = v2 = v3 = 0.0
            e0 = e1 = e2 = e3 = 0.0
            for j in range(d):
                a0, a1, a2, a3 = x[t, j], x[t + 1, j], x[t + 2, j], x[t + 3, j]
                c = centre[j]
                e0 += a0 * c
                e1 += a1 * c
                e2 += a2 * c
                e3 += a3 * c
                s = 0.5 * sigma[j, j]
                w0, w1, w2, w3 = s * a0, s * a1, s * a2, s * a3
                for k in range(j + 1, d):
                    s = sigma[j, k]
                    w0 += s * x[t, k]
                    w1 += s * x[t + 1, k]
                    w2 += s * x[t + 2, k]
                    w3 += s * x[t + 3, k]
                v0 += a0 * w0
                v1 += a1 * w1
                v2 += a2 * w2
                v3 += a3 * w3
            edge[t], edge[t + 1] = max(2.0 * v0, 0.0), max(2.0 * v1, 0.0)
            edge[t + 2], edge[t + 3] = max(2.0 * v2, 0.0), max(2.0 * v3, 0.0)
            scale[t], scale[t + 1], scale[t + 2], scale[t + 3] = e0, e1, e2, e3
            t += 4
        for t in range(t, n):
            v = 0.0
            e = 0.0
            for j in range(d):
                xj = x[t, j]
                e += xj * centre[j]
                w = 0.5 * sigma[j, j] * xj
                for k in range(j + 1, d):
                    w += sigma[j, k] * x[t, k]
                v += xj * w
            edge[t] = max(2.0 * v, 0.0)
            scale[t] = e
        # then the library calls (powers, the derivatives' exp), and last the link's values
        # (the logistic's are branch-free, without calls): so split, the pass took 0.13 CPU s
        # at 10^6 x 11 against 0.24 s in one loop, the same bits
        reach, d1, d2 = np.empty(n), np.empty(n), np.empty(n)
        for t in range(n):
            v = edge[t]
            e = scale[t]
            scale[t] = v ** power
            reach[t] = radius * v ** half
            d1[t], d2[t] = derivs(data, start + t, e)
            edge[t] = e
        for t in range(n):
            i = start + t
            e = edge[t]
            h = reach[t]
            f0 = link(data, i, e)
            f1 = d1[t]
            quad = 0.5 * order2 * d2[t] * h * h
            up = link(data, i, e + h) - f0 - f1 * h - quad
            down = link(data, i, e - h) - f0 + f1 * h - quad
            edge[t] = max(abs(up), abs(down))

    return both


def row_and_residual_scales(cv, *, radius=None):
    r""":func:`row_scales` and :func:`residual_scales` of ``cv`` from one chunked pass over
    the rows (each row's ``v_i = x_i' Sigma x_i`` once, O(N d^2); the residual costs d
    more flops and a few link evaluations a row): the same values, bit for bit.

    Parameters
    ----------
    cv : ControlVariates
        Around a built-in GLM model.
    radius : float, optional
        As in :func:`residual_scales`.

    Returns
    -------
    ndarray of shape (N,)
        :func:`row_scales`.
    ndarray of shape (N,) or None
        :func:`residual_scales`; None for a GLM with a family parameter (where that raises).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianPrior, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(2000), rng.normal(size=2000)])
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-X @ [0.5, 1.0]))).astype(float)
    >>> cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    >>> a, w = row_and_residual_scales(cv)
    >>> bool(np.array_equal(a, row_scales(cv))), bool(np.array_equal(w, residual_scales(cv)))
    (True, True)
    """
    glm = getattr(cv, "_glm", None)
    if glm is None or not callable(getattr(cv, "laplace_covariance", None)):
        row_scales(cv)                      # the TypeError naming what is missing
    if glm.nuisance:
        return row_scales(cv), None
    radius = math.sqrt(cv.dim) + 3.0 if radius is None else check_positive("radius", radius)
    if (glm.m3(cv.model) if cv.order == 2 else glm.m2(cv.model)) == 0.0:
        return row_scales(cv), np.zeros(cv.N)     # the proxy is exact: no residual
    sigma = cv.laplace_covariance()
    power = 0.5 * (cv.order + 1)
    centre = np.ascontiguousarray(cv.center.theta, dtype=np.float64)
    both = _both_kernel(glm.link, glm.derivs)
    data = cv.model._kernel_data()
    order2 = 1.0 if cv.order == 2 else 0.0
    scale, edge = np.empty(cv.N), np.empty(cv.N)

    def scan(c0, c1):
        for c in range(c0, c1):
            start, stop = c * SCAN_CHUNK, min((c + 1) * SCAN_CHUNK, cv.N)
            both(data, start, glm.design(cv.model, start, stop), sigma, power, 0.5, centre,
                 radius, order2, scale[start:stop], edge[start:stop])

    threads = None if isinstance(getattr(cv.model, "X", None), np.ndarray) else 1
    run_chunks(scan, n_chunks(cv.N, SCAN_CHUNK), threads=threads)
    return scale, edge


def _block_scales(block, sigma, power) -> np.ndarray:
    """On a worker: :func:`row_scales` of a block's rows, chunk by chunk."""
    design = glm_kernels(block).design
    out = np.empty(block.N)
    for start in range(0, block.N, SCAN_CHUNK):
        stop = min(start + SCAN_CHUNK, block.N)
        quadratic_forms(design(block, start, stop), sigma, power, out[start:stop])
    return out


def _top(a, k) -> np.ndarray:
    """Indices of the ``k`` largest of ``a`` (all of them if it has no more), in no order."""
    return np.argpartition(-a, k - 1)[:k] if k < a.size else np.arange(a.size)


def _block_top_scales(block, sigma, power, k):
    """On a worker: a block's ``k`` largest :func:`row_scales` (indices within the block, and
    values) and the sum of its other squared scales, so that no per-row vector leaves it."""
    a = _block_scales(block, sigma, power)
    top = _top(a, k)
    return top, a[top], _sum_of_others(a, top)


def _sum_of_others(a, top):
    """The sum of the squares of ``a`` but at ``top``, summed as such: the total less the
    top's squares would cancel (on scales as unequal as |x|^3 of t(1.2) covariates the top
    rows' squares are 10^20 times the others' sum, which the difference loses entirely)."""
    sq = a * a
    sq[top] = 0.0
    return float(np.sum(sq))


def _top_scales_on(cluster, cv, k):
    """:func:`heavy_rows`' candidates on a cluster: the ``k`` largest residual scales over all
    rows (row indices and values) and the sum of the other rows' squared scales, merged
    from each range's own top ``k`` and sum of the rest (plus the squares of the range's
    top rows that the merge drops), so the client holds O(k) numbers, never N."""
    if getattr(cv, "_glm", None) is None or not callable(getattr(cv, "laplace_covariance",
                                                                  None)):
        row_scales(cv)                      # the TypeError naming what is missing
    sigma = cv.laplace_covariance()
    power = 0.5 * (cv.order + 1)
    idx, val, total = np.empty(0, dtype=np.intp), np.empty(0), [0.0]

    def merge(start, stop, got):
        nonlocal idx, val
        top, a, sq = got
        idx, val = np.concatenate((idx, top + start)), np.concatenate((val, a))
        keep = _top(val, k)
        total[0] += sq + _sum_of_others(val, keep)
        idx, val = idx[keep], val[keep]

    map_ranges(cluster, recipe_of(cv.model), _block_top_scales, (sigma, power, k), merge,
               N=cv.N, chunk=SCAN_CHUNK, progress=False, desc="heavy rows")
    return idx, val, total[0]


def heavy_rows(cv, *, threshold=HEAVY_THRESHOLD, max_rows=None, scales=None,
               executor=None, sample_rows=None):
    r"""The rows whose Taylor residuals can dominate the others': read them exactly.

    Rows are ranked by their residual scale ``a_i`` (:func:`row_scales`). The heavy set is
    ``k`` largest, ``k`` the smallest count (at most ``max_rows``) such that every row ranked
    after it (among the ``max_rows + 1`` largest) is within ``threshold`` times the root mean
    square scale of the rows ranked after that row:

    .. math::

        a_{(j)} \le \tau \sqrt{\tfrac{1}{N - j} \sum_{i > j} a_{(i)}^2}
        \qquad \text{for } k < j \le \text{max\_rows} + 1.

    (Comparing each row with the rows below it, not with all rows, keeps a group of heavy
    rows from hiding itself by inflating the common scale; a group of more than
    ``max_rows`` alike rows is not told apart from the bulk, and none is returned.)

    Parameters
    ----------
    cv : ControlVariates
        Around a built-in GLM model.
    threshold : float
        tau, > 1 (default 20).
    max_rows : int, optional
        At most this many heavy rows (default ``ceil(sqrt(N))``: the exact part of a
        decision then never reads more than sqrt(N) rows).
    scales : ndarray of shape (N,), optional
        Precomputed :func:`row_scales` (one pass saved).
    executor : optional
        Run the pass on a cluster (see :func:`row_scales`): each range returns its own
        ``max_rows + 1`` largest scales (``max(max_rows, sample_rows) + 1``) and the sum of
        the squared scales of its other rows (the merge adds those of the candidates it
        drops), so the client holds O(max_rows) numbers rather than N (the sum
        of squares is added range by range: it equals the local one to rounding, about
        1e-15 relative).
    sample_rows : int, optional
        Also return the rows a uniform row sample of the data must read exactly
        (:meth:`design.TrialChain.from_row_sample`): the same rule with at most
        ``sample_rows`` rows instead of ``max_rows``, from the same pass.

    Returns
    -------
    ndarray of int
        The heavy rows, sorted (possibly empty).
    ndarray of int or None
        With ``sample_rows`` only: the rows a row sample reads exactly, sorted (the heavy
        rows and possibly more), or None when the rule does not stop within
        ``sample_rows`` rows (the other rows are then too unequal for a sample's standard
        error, see the notes).

    Notes
    -----
    **Why this rule.** Each decision of a minibatch test sums m rows of the rest and the
    design's CLT treats that sum as Gaussian. A row of scale ``a = tau * rms`` adds
    ``tau^4 / (n m)`` to the standardized fourth moment of a batch mean of m rows out of n and
    ``tau^3 / (n sqrt(m))`` to its skewness (Lindeberg: no row may hold a fixed share of the
    variance), so one row at tau = 20 is harmless from n = 10^4 rows on, while rows
    beyond it, when the rest are alike, are rare outliers of a different population: on
    Gaussian covariates with an intercept (4 columns or more) no row exceeds tau = 20 at
    N = 10^6 (with 2 columns, 5 rows do), and
    with a rare binary covariate (:func:`~samplers.datasets.rare_covariate_logistic`) the
    rows carrying it are 10^3 to 2 x 10^4 times the others' scale and are exactly the set found
    (at N = 2 x 10^5, the 40 rows; the smallest of them 840 times the largest other row).
    The split is then checked like any model: the trial pairs, the design and the CLT
    verdict run on the :class:`ExactRows` wrapper and see the rest's residuals.

    **A row sample's exact rows** (``sample_rows``). When the rule stops (row k + 1 is within
    tau times the rms of the rows below it) every row left is, and so is any row's share of
    the rest's sum of squared scales: at most tau^2 / (N - k). A uniform sample of n of
    those rows then has a sample variance within about tau / sqrt(n) (relative) of the
    population's, so its standard error is honest (0.08 at tau = 20, n = 2^16). When the
    rule is stopped by ``max_rows`` instead, nothing bounds the rows left: on covariates
    from t(1.2) the sqrt(N) rows read leave a rest whose largest scale is 42 times its rms,
    and a sample's variance is then below the population's in most samples (the z-scores of
    its estimates had sd 1.16, 2% beyond 3). Such rows need a larger cut (about N / 100 rows
    there: the rule is met at 1,000-1,800 of 200,000) or the exact pass.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianPrior, LogisticRegression
    >>> from samplers.datasets import rare_covariate_logistic
    >>> X, y, _ = rare_covariate_logistic(20_000, rng=1)
    >>> cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    >>> rows = heavy_rows(cv)
    >>> rows.size, bool(np.all(X[rows, 3] == 1.0))
    (40, True)
    """
    tau = check_positive("threshold", threshold)
    if not tau > 1.0:
        raise ValueError(f"threshold must be > 1, got {threshold!r}")
    N = int(cv.N)
    if max_rows is None:
        max_rows = math.ceil(math.sqrt(N))
    if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)):
        raise TypeError(f"max_rows must be an integer, got {max_rows!r}")
    if not 0 <= max_rows <= N - 2:
        raise ValueError(f"max_rows must be in [0, N - 2] = [0, {N - 2}], got {max_rows}")
    k_max = int(max_rows)
    if sample_rows is not None:
        if isinstance(sample_rows, bool) or not isinstance(sample_rows, (int, np.integer)):
            raise TypeError(f"sample_rows must be an integer or None, got {sample_rows!r}")
        if not 0 <= sample_rows <= N - 2:
            raise ValueError(f"sample_rows must be in [0, N - 2] = [0, {N - 2}], got "
                             f"{sample_rows}")
        k_all = max(k_max, int(sample_rows))
    else:
        k_all = k_max
    none = np.empty(0, dtype=np.intp)
    if k_all == 0:
        return none if sample_rows is None else (none, none)
    cluster = as_cluster(executor) if scales is None else None
    if scales is None and cluster is not None:
        top, a_top, total = _top_scales_on(cluster, cv, k_all + 1)
    else:
        if scales is None:
            a = row_scales(cv)
        else:
            a = np.asarray(scales, dtype=float)
            if a.shape != (N,) or not np.all(np.isfinite(a)) or np.any(a < 0):
                raise ValueError(f"scales must be {N} finite values >= 0 (row_scales(cv)), "
                                 f"got shape {a.shape}")
        top = _top(a, k_all + 1)
        a_top, total = a[top], _sum_of_others(a, top)
    order = np.argsort(-a_top, kind="stable")
    top, a_top = top[order], a_top[order]
    below = float(np.sum(a_top[k_max + 1:] ** 2))     # candidates past max_rows + 1
    k = min(_cut(a_top[: k_max + 1], total + below, N, tau), k_max)
    rows = np.sort(top[:k]).astype(np.intp) if k_max else none
    if sample_rows is None:
        return rows
    k_sample = max(_cut(a_top, total, N, tau), k)    # the heavy rows, whatever the rounding
    return rows, (np.sort(top[:k_sample]).astype(np.intp) if k_sample <= sample_rows
                  else None)


def _cut(a_top, others, N, tau):
    """:func:`heavy_rows`' rule on the largest scales ``a_top`` (decreasing) and the sum
    ``others`` of the other rows' squared scales: the count k of rows up to the last one
    above tau times the rms of the rows below it (``len(a_top)`` when that is the last one
    given)."""
    sq = a_top ** 2
    outside = others if a_top.size < N else 0.0
    # after[t]: sum of squares of the rows ranked below candidate t (suffix sums: no
    # cancellation however much the heavy rows dominate the total)
    after = outside + np.concatenate((np.cumsum(sq[::-1])[::-1][1:], [0.0]))
    rms = np.sqrt(after / (N - 1 - np.arange(sq.size)))
    heavy = np.flatnonzero(a_top > tau * rms)
    return int(heavy[-1]) + 1 if heavy.size else 0


# --- the wrapper -------------------------------------------------------------------------------


class ExactRows(BaseModel):
    r"""A model whose exact part is a fixed set of rows and whose minibatch rows are the rest.

    With K the heavy rows (``rows``) and ``n = N - |K|``, the wrapper is a model of n rows,
    row j standing for the j-th row of the rest ``R`` (in order), with per-row ratio

    .. math::

        l'_j = l_{R_j} + \frac{S}{n}, \qquad S = \sum_{h \in K} l_h,

    so that ``sum_j l'_j = sum_{i=1}^N l_i`` exactly (to rounding): every accept/reject test
    run on the wrapper decides the same exact MH comparison as on the wrapped model, while
    its minibatches (drawn without replacement from the n rows, n the N of the test) see only
    the rest's spread, and the exact sum S (|K| rows read once per decision) is a known shift
    of their mean. Log-likelihoods and gradients are wrapped the same way
    (``l'_j(theta) = l_{R_j}(theta) + sum_{h in K} l_h(theta) / n``), so the trial pairs of the
    design (:meth:`design.TrialChain.from_model`), the CLT verdict
    (:func:`validation.clt_check`, :func:`validation.acceptance_check`) and a chain's
    recorded statistics (the bias monitor) all see the split: their l_i are the rest's and N
    is n.

    Parameters
    ----------
    model : model
        Typically a :class:`~samplers.ControlVariates` (whose heavy rows are those with
        large Taylor residuals), or any model (a built-in one, or a user's with ``N``,
        ``loglik``, ``logprior``).
    rows : "auto" or array of int
        The rows read exactly: distinct indices in ``[0, N)``, leaving at least 2 rows; or
        ``"auto"``, :func:`heavy_rows` (for a ControlVariates around a built-in GLM).
    threshold, max_rows :
        Passed to :func:`heavy_rows` with ``rows="auto"``.

    Attributes
    ----------
    model : the wrapped model.
    rows : ndarray of int
        The heavy rows, sorted, read-only.
    N : int
        ``model.N - len(rows)``: the rows minibatches are drawn from.
    dim : int

    Notes
    -----
    A decision costs the test's rows of the rest plus the |K| heavy rows (their exact sum is
    computed once per decision, in :meth:`decision_data`). With the wrapped model's row
    kernels the wrapper's ratio kernel maps row j to ``R_j`` by a binary search over the
    heavy rows (O(log |K|), nothing of size N stored), so the sequential tests run their
    compiled decisions, and where the wrapped model runs on the compiled chain loop the
    wrapper does too (:meth:`block_parts`: the heavy rows are summed inside the step, in
    the order :meth:`decision_data` sums them, so both loops give the same chain). The range the confidence test
    needs is the wrapped model's, shifted by ``S / n`` (its width is the wrapped model's
    bound over all rows).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, GaussianPrior, LogisticRegression
    >>> from samplers.datasets import rare_covariate_logistic
    >>> X, y, _ = rare_covariate_logistic(20_000, rng=1)
    >>> cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    >>> split = ExactRows(cv, "auto")
    >>> split.N, len(split.rows)
    (19960, 40)
    >>> theta = cv.center.theta + 0.05; theta_new = theta + 0.02
    >>> full = cv.loglik_ratio(theta, theta_new, np.arange(cv.N)).sum()
    >>> rest = split.loglik_ratio(theta, theta_new, np.arange(split.N))
    >>> bool(np.isclose(rest.sum(), full, rtol=1e-10, atol=1e-12))
    True
    >>> bool(np.all(X[split.rows, 3] == 1.0))     # the rows of the rare covariate
    True
    """

    def __init__(self, model, rows="auto", *, threshold=HEAVY_THRESHOLD, max_rows=None):
        for attr in ("loglik", "logprior"):
            if not callable(getattr(model, attr, None)):
                raise TypeError(f"model must have a callable {attr}(...); "
                                f"{type(model).__name__} has none")
        total = getattr(model, "N", None)
        if isinstance(total, bool) or not isinstance(total, (int, np.integer)):
            raise TypeError(f"model.N must be an integer number of rows, got {total!r}")
        total = int(total)
        dim = getattr(model, "dim", None)
        if dim is None:
            raise TypeError(f"{type(model).__name__} has no dim: ExactRows needs model.dim")
        if isinstance(rows, str):
            if rows != "auto":
                raise ValueError(f"rows must be 'auto' or an array of row indices, got {rows!r}")
            rows = heavy_rows(model, threshold=threshold, max_rows=max_rows)
        else:
            arr = np.asarray(rows)
            if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
                raise TypeError(f"rows must be 'auto' or a 1-D integer array, got "
                                f"{arr.dtype} of shape {arr.shape}")
            rows = np.unique(arr.astype(np.intp))   # a sorted copy: the caller's is untouched
            if rows.size != arr.size:
                raise ValueError(f"rows must be distinct, got {arr.size - rows.size} repeat(s)")
            if rows.size and (rows[0] < 0 or rows[-1] >= total):
                raise ValueError(f"rows must lie in [0, {total - 1}], got values in "
                                 f"[{rows[0]}, {rows[-1]}]")
        if total - rows.size < 2:
            raise ValueError(f"rows must leave at least 2 of the model's {total} rows, got "
                             f"{rows.size} rows")
        self._attach(model, rows, int(dim), total)

    def _attach(self, model, rows, dim, total):
        """Set the wrapper's fields (``rows`` sorted, distinct, in range). The exact part is
        the wrapped model at ``rows`` divided by the rest's size; a block of the rest
        (:meth:`block_recipe`) replaces it by the whole data's (:meth:`_block`)."""
        self.model = model
        self.dim = dim
        self.N = total - int(rows.size)
        self.temperature = 1.0   # the wrapped model carries its own temperature
        self._inv_temp = 1.0
        self.prior = getattr(model, "prior", None)
        rows = rows.astype(np.intp, copy=False)
        rows.setflags(write=False)
        self.rows = rows
        adj = (rows - np.arange(rows.size, dtype=np.intp)).astype(np.int64)
        adj.setflags(write=False)
        self._adj = adj
        if isinstance(model, BaseModel):
            self._inner_ratio = model._loglik_ratio
            self._inner_loglik = model._loglik
            self._inner_grad = model._grad_loglik
            self._inner_range = model._loglik_ratio_range
        else:
            self._inner_ratio = lambda th, th_new, idx: loglik_ratio(model, th, th_new, idx)
            self._inner_loglik = lambda th, idx: np.asarray(model.loglik(th, idx), dtype=float)
            grad = getattr(model, "grad_loglik", None)
            self._inner_grad = None if grad is None else (
                lambda th, idx: np.asarray(grad(th, idx), dtype=float).reshape(len(idx), -1))
            ranged = getattr(model, "loglik_ratio_range", None)
            bound = getattr(model, "loglik_ratio_bound", None)
            if ranged is not None:
                self._inner_range = lambda th, th_new: tuple(map(float, ranged(th, th_new)))
            elif bound is not None:
                self._inner_range = lambda th, th_new: (0.0, float(bound(th, th_new)))
            else:
                self._inner_range = None
        if self._inner_range is None:
            # no range: the samplers' view sees none, and the confidence test says so
            self._loglik_ratio_range = self._loglik_ratio_bound = None
        # the exact part: the wrapped model's sum over the heavy rows, over n = self.N (a
        # block of the rest keeps the whole data's: _block)
        self._heavy, self._n_div, self._heavy_rows_model = None, self.N, None

    @classmethod
    def _block(cls, inner, skip, heavy, n_div, dim):
        """The wrapper over one block of the rest: ``inner`` the wrapped model's rows of the
        block (in memory), ``skip`` the heavy rows among them (block numbering), and the
        exact part that of the whole data: ``heavy`` the wrapped model of the heavy rows
        alone (in memory), divided by the whole rest's size ``n_div``. Each row gives the
        whole wrapper's values bit for bit (the same row kernels and sums)."""
        self = cls.__new__(cls)
        self._attach(inner, skip, dim, int(inner.N))
        self._heavy, self._n_div = heavy, n_div
        return self

    def _exact(self, kind, *args):
        """The heavy rows' values (``kind`` "ratio", "loglik", "grad" or "many"), or None
        when there are none."""
        if self._heavy is None:
            if self.rows.size == 0:
                return None
            model, idx = self.model, self.rows
            fn = {"ratio": self._inner_ratio, "loglik": self._inner_loglik,
                  "grad": self._inner_grad}.get(kind)
        else:
            if self._heavy.N == 0:
                return None
            model, idx = self._heavy, np.arange(self._heavy.N, dtype=np.intp)
            fn = {"ratio": model._loglik_ratio, "loglik": model._loglik,
                  "grad": model._grad_loglik}.get(kind)
        if kind == "many":
            fn = model.loglik_many
        return np.asarray(fn(*args, idx), dtype=float)

    # -- the index map and the exact part ---------------------------------------------------------

    @property
    def n_exact(self) -> int:
        """Rows read in every decision that reads data, beyond the test's own (``n_used`` of
        a chain on the wrapper counts the rest's rows only): ``len(rows)``. A decision's cost
        in rows is ``n_used + n_exact``; a design's predicted rows per step likewise."""
        return int(self.rows.size)

    def rest_rows(self, idx) -> np.ndarray:
        """The wrapped model's rows behind rows ``idx`` of the rest (O(log |K|) each)."""
        idx = self._check_idx(idx)
        return self._map(idx)

    def _map(self, idx):
        return idx + np.searchsorted(self._adj, idx, side="right")

    def _shift(self, theta, theta_new) -> float:
        """``S / n``: the heavy rows' exact sum of ratios over the rest's size."""
        values = self._exact("ratio", theta, theta_new)
        return 0.0 if values is None else ordered_sum(values) / self._n_div

    def exact_ratio(self, theta, theta_new) -> float:
        """``S = sum_{h in K} l_h(theta, theta')``, the exact part of a decision."""
        theta = self._check_theta("theta", theta)
        theta_new = self._check_theta("theta_new", theta_new)
        return self._shift(theta, theta_new) * self._n_div

    # -- row kernels (the wrapped model's, through the index map) ------------------------------

    @property
    def _kernels(self):
        inner = getattr(self.model, "row_kernels", None)
        if inner is None or not callable(getattr(self.model, "decision_data", None)):
            return None
        return _rest_kernels(inner.ratio, inner.prefetch)

    @property
    def _row_ratio(self):
        k = self._kernels
        return None if k is None else k[0]

    @property
    def _row_prefetch(self):
        k = self._kernels
        return None if k is None else k[1]

    def block_parts(self, view):
        """The compiled chain loop's parts (:class:`~samplers.models.compiled.BlockModel`),
        built on the wrapped model's, or None (then the Python loop runs): block data
        ``(inner, adj, rows, n)``, the heavy rows' exact sum computed inside the step."""
        if self._row_ratio is None or self._heavy is not None:      # a block: no chains
            return None
        from .._view import ModelView
        from .compiled import BlockModel

        inner_view = ModelView(self.model, self.dim)
        inner_parts = getattr(self.model, "block_parts", None)
        inner = None if inner_parts is None else inner_parts(inner_view)
        if inner is None or inner_view.row_ratio is None:
            return None
        decision, grads = _block_parts(inner.decision_data, inner_view.row_ratio, inner.grads)
        return BlockModel((inner.data, self._adj, self.rows, float(self.N)), inner.prior,
                          decision, grads)

    def block_range(self):
        """None: the confidence test's range of the wrapper is not compiled (its chains with
        ``range="model"`` run on the Python loop)."""
        return None

    def row_block(self, start, stop):
        """The wrapper over rows ``start .. stop - 1`` of the rest, in memory (see
        :meth:`block_recipe`)."""
        return self.block_recipe(start, stop)()

    def block_recipe(self, start, stop):
        """A picklable zero-argument callable that rebuilds the wrapper over rows ``start ..
        stop - 1`` of the rest on another process (an executor's worker), so the split's
        full-data passes (its trial pairs, the verdict, the after-run check) run on a
        cluster: the wrapped model's block of the rows those span
        (``model.block_recipe``), the heavy rows among them skipped, and the exact part
        from the heavy rows' own rows (|K| rows, sent with each task) over the whole rest's
        size. Every row's values equal the whole wrapper's bit for bit. A ``TypeError`` when
        the wrapped model has no ``block_recipe`` (a user's model): the passes then run
        here."""
        if self._heavy is not None:
            raise TypeError("a block of an ExactRows wrapper has no row blocks of its own: "
                            "take them from the whole wrapper")
        start, stop = self._check_block(start, stop)
        recipe = getattr(self.model, "block_recipe", None)
        if not callable(recipe) or not isinstance(self.model, BaseModel):
            raise TypeError(f"ExactRows around {type(self.model).__name__} has no row blocks: "
                            "the wrapped model has no block_recipe (the built-in models have "
                            "it); its full-data passes run in this process")
        lo, hi = (int(v) for v in self._map(np.array([start, stop - 1], dtype=np.intp)))
        hi += 1
        skip = self.rows[(self.rows >= lo) & (self.rows < hi)] - lo
        if self._heavy_rows_model is None and self.rows.size:
            self._heavy_rows_model = self.model._rows_model(self.rows)
        return _RestBlock(recipe(lo, hi), skip, self._heavy_rows_model, self.N, self.dim,
                          (start, stop))

    def _kernel_data(self):
        raise TypeError("ExactRows rows carry the per-pair constant S/n of the heavy rows: read "
                        "them through _decision_data(theta, theta_new), not _kernel_data()")

    def _decision_data(self, theta, theta_new):
        return (self.model.decision_data(theta, theta_new), self._adj,
                self._shift(theta, theta_new))

    # -- unchecked batch methods --------------------------------------------------------------

    def _loglik_ratio(self, theta, theta_new, idx):
        return self._inner_ratio(theta, theta_new, self._map(idx)) + self._shift(theta, theta_new)

    @property
    def loglik_many(self):
        """``loglik_many(thetas, idx)``: per-datum log-likelihoods of the rest's rows ``idx``
        at k parameter vectors, shape (len(idx), k), each column equal to :meth:`loglik` bit
        for bit, from the wrapped model's ``loglik_many`` (None when it has none): the trial
        pairs of the split are then summarised in one compiled call per chunk
        (``design.TrialChain.from_model``), as those of the wrapped model are."""
        inner = getattr(self.model, "loglik_many", None)
        if not callable(inner):
            return None

        def loglik_many(thetas, idx):
            thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
            if thetas.ndim != 2 or thetas.shape[1] != self.dim:
                raise ValueError(f"thetas must have shape (k, {self.dim}), got {thetas.shape}")
            out = np.asarray(inner(thetas, self._map(self._check_idx(idx))), dtype=float)
            heavy = self._exact("many", thetas)
            if heavy is not None:
                out = out + np.array([ordered_sum(np.ascontiguousarray(heavy[:, k]))
                                      for k in range(thetas.shape[0])]) / self._n_div
            return out

        return loglik_many

    def _loglik(self, theta, idx):
        out = self._inner_loglik(theta, self._map(idx))
        heavy = self._exact("loglik", theta)
        if heavy is not None:
            out = out + ordered_sum(heavy) / self._n_div
        return out

    def _grad_loglik(self, theta, idx):
        if self._inner_grad is None:
            raise TypeError(f"{type(self.model).__name__} has no grad_loglik, so ExactRows "
                            "around it has none")
        out = self._inner_grad(theta, self._map(idx))
        heavy = self._exact("grad", theta)
        if heavy is not None:
            out = out + heavy.sum(axis=0) / self._n_div
        return out

    def _loglik_ratio_range(self, theta, theta_new):
        centre, half = self._inner_range(theta, theta_new)
        return centre + self._shift(theta, theta_new), half

    def _loglik_ratio_bound(self, theta, theta_new):
        centre, half = self._loglik_ratio_range(theta, theta_new)
        return abs(centre) + half

    def loglik_ratio_range(self, theta, theta_new) -> tuple[float, float]:
        """``(centre, half_width)`` with every ``l'_j`` within ``half_width`` of ``centre``:
        the wrapped model's range shifted by ``S / n``."""
        if self._loglik_ratio_range is None:
            raise TypeError(f"{type(self.model).__name__} has no loglik_ratio_range or "
                            "loglik_ratio_bound, so ExactRows around it has none")
        return self._loglik_ratio_range(self._check_theta("theta", theta),
                                        self._check_theta("theta_new", theta_new))

    def loglik_ratio_bound(self, theta, theta_new) -> float:
        """``|centre| + half_width`` of :meth:`loglik_ratio_range`."""
        centre, half = self.loglik_ratio_range(theta, theta_new)
        return abs(centre) + half

    def logprior(self, theta) -> float:
        return float(self.model.logprior(np.asarray(theta, dtype=float)))

    def grad_logprior(self, theta) -> np.ndarray:
        glp = getattr(self.model, "grad_logprior", None)
        if glp is None:
            raise TypeError(f"{type(self.model).__name__} has no grad_logprior")
        return np.asarray(glp(np.asarray(theta, dtype=float)), dtype=float).reshape(self.dim)

    def __repr__(self):
        return (f"ExactRows({self.model!r}, rows={self.rows.size} exact, "
                f"N={self.N} minibatch rows)")


class _RestBlock:
    """:meth:`ExactRows.block_recipe`: a picklable callable building ``ExactRows._block``."""

    def __init__(self, inner_recipe, skip, heavy, n_div, dim, rows):
        self.inner_recipe, self.skip, self.heavy = inner_recipe, skip, heavy
        self.n_div, self.dim, self.rows = n_div, dim, rows

    def __call__(self):
        heavy = _NoRows() if self.heavy is None else self.heavy   # no heavy rows: none
        return ExactRows._block(self.inner_recipe(), self.skip, heavy, self.n_div, self.dim)

    def __repr__(self):
        return f"block_recipe(ExactRows, rest rows [{self.rows[0]}, {self.rows[1]}))"


class _NoRows:
    """The exact part of a split without heavy rows (never evaluated: it has no rows)."""

    N = 0
    loglik_many = None
