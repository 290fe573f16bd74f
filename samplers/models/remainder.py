"""Per-row bounds on the Taylor remainder of a row's log-likelihood ratio: a model capability.

The built-in models whose row log-likelihood depends on theta through one linear predictor,
``l_i(theta) = f_i(a_i)`` with ``a_i = x_i . theta`` (:mod:`samplers.models._glm`: logistic,
linear and Student-t regression, the Gaussian mean with ``x_i = 1``) have, at a centre
``theta_hat``, the order-k Taylor proxy of :class:`~samplers.ControlVariates` and the
residual change of row i between theta and theta'::

    delta_i = [f_i(a_i') - f_i(a_i)] - [proxy_i(theta') - proxy_i(theta)] = R_k(a_i') - R_k(a_i),

``R_k`` the scalar Taylor remainder, ``R_k'(t) = f^(k+1)(xi) (t - a_hat)^k / k!``. So::

    |delta_i| <= M_{k+1}/k! |int_{a}^{a'} |t - a_hat|^k dt|
              <= M_{k+1}/k! |a' - a| (|a - a_hat|^k + |a' - a_hat|^k) / 2          (1)
              <= c_i phi_k(theta, theta'),

where ``M_{k+1} = sup_t |f_i^(k+1)(t)|``, (1) is the Hermite-Hadamard inequality for the
convex ``|t - a_hat|^k``, and Cauchy-Schwarz on each ``|x_i . v| <= ||x_i|| ||v||`` gives::

    c_i = M_{k+1} ||x_i||^{k+1} / k!,
    phi_k(theta, theta') = ||theta' - theta|| (||theta - theta_hat||^k
                                              + ||theta' - theta_hat||^k) / 2.

Order 0 (no proxy) is the Lipschitz bound ``|l_i| <= M_1 ||x_i|| ||theta' - theta||`` of
TunaMH. This is the form of Cornish et al. (2019), section 3.2, eq. (13) (there with 1-norms
and each remainder bounded on its own, ``phi = (||theta - theta_hat||_1^{k+1} + ||theta' -
theta_hat||_1^{k+1}) / (k+1)!``); ours keeps the factor ``||theta' - theta||``, small for
local proposals. The constants (tempered by 1/K; ``M_2``, ``M_3`` from ``_glm``):

=================  =========================  ================  ======================
model              M_1                        M_2               M_3
=================  =========================  ================  ======================
logistic           1                          1/4               1/(6 sqrt 3) ~ 0.0962
Student-t          (df+1)/(2 s sqrt df)       (df+1)/(df s^2)   see ``_glm._robust_m3``
linear, Gaussian   unbounded (refused)        1/sigma^2         0 (the proxy is exact)
=================  =========================  ================  ======================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from design._lib.checks import check_int
from design._lib.distribute import as_cluster, map_ranges, recipe_of
from design._lib.jit import jit
from design._lib.prefetch import prefetch_ahead
from ._glm import glm_kernels
from .control_variates import ControlVariates, _cv_kernels
from .logistic import LogisticRegression
from .robust import RobustRegression

__all__ = ["TaylorRemainder", "has_remainder_bounds", "remainder_phi", "remainder_totals",
           "SampledSum", "sampled_remainder_sum", "price_sample_size", "PRICE_SAMPLE",
           "PRICE_SAMPLE_PER_SQRT", "PRICE_MAX_FRACTION"]

#: Rows per chunk of the one-off pass over the data (memmaps are read in chunks).
CHUNK = 1 << 16
#: :func:`sampled_remainder_sum`'s sample: at least this many rows, and at least
#: ``PRICE_SAMPLE_PER_SQRT`` sqrt(n_R) of the n_R rows not read exactly (as the trial pairs'
#: sample, :meth:`design.TrialChain.from_row_sample`); above a quarter of n_R, every row.
PRICE_SAMPLE, PRICE_SAMPLE_PER_SQRT, PRICE_MAX_FRACTION = 1 << 16, 8.0, 0.25

#: sup_t |f_i'(t)| of the models whose rows are Lipschitz in the linear predictor (order 0).
_M1 = {
    LogisticRegression: lambda m: m._inv_temp,
    RobustRegression: lambda m: (m.df + 1.0) / (2.0 * m.scale * math.sqrt(m.df)) * m._inv_temp,
}


def has_remainder_bounds(model) -> bool:
    """Whether ``model`` (or the model a :class:`ControlVariates` wraps) has per-row bounds."""
    inner = model.model if isinstance(model, ControlVariates) else model
    glm = glm_kernels(inner)
    return glm is not None and math.isfinite(glm.m2(inner)) and math.isfinite(glm.m3(inner))


def derivative_bound(model, j: int) -> float:
    """``M_j = sup |f_i^(j)|`` over rows and predictors (tempered); inf when unbounded."""
    glm = glm_kernels(model)
    if j == 1:
        m1 = _M1.get(type(model))
        return math.inf if m1 is None else float(m1(model))
    return float((glm.m2 if j == 2 else glm.m3)(model))


@cache
def _ratio_loop(row_ratio, row_prefetch):
    """``delta[t] = row_ratio(data, idx[t], theta, theta_new)`` and ``c[t] = c_all[idx[t]]``."""

    @jit
    def kernel(data, idx, theta, theta_new, c_all, delta, c):
        for t in range(idx.shape[0]):
            prefetch_ahead(row_prefetch, data, idx, t)
            delta[t] = row_ratio(data, idx[t], theta, theta_new)
            c[t] = c_all[idx[t]]

    return kernel


def remainder_phi(center, order, theta, theta_new) -> float:
    """``phi_k = ||theta' - theta|| (||theta - c||^k + ||theta' - c||^k) / 2`` (c = ``center``,
    k = ``order``): the pair's factor in ``|delta_i| <= c_i phi_k`` (:class:`TaylorRemainder`)."""
    step = math.sqrt(float(np.dot(theta_new - theta, theta_new - theta)))
    if order == 0:
        return step
    u, v = theta - center, theta_new - center
    r, r_new = math.sqrt(float(u @ u)), math.sqrt(float(v @ v))
    return step * 0.5 * (r**order + r_new**order)


def remainder_totals(cv, executor) -> tuple[float, float]:
    """``(sum_i c_i, max_i c_i)`` of :class:`TaylorRemainder` ``(cv, cv.order)`` by one pass on
    a cluster (``executor``, see :func:`design._lib.distribute.map_ranges`).

    Each range returns its chunks' sums and maxima of ``c_i``, so no per-row vector reaches
    this process: what pricing a Poisson-factor test needs (its rate ``C phi``) without the
    ``8 N`` bytes of ``c`` and the alias table that running it needs. The sum is merged
    chunk by chunk, so it equals ``TaylorRemainder(cv).c_sum`` to rounding (about 1e-15
    relative); the maximum exactly.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import numpy as np
    >>> from samplers import ControlVariates, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(3000, 2)); y = (X[:, 0] + rng.logistic(size=3000) > 0) * 1.0
    >>> cv = ControlVariates(LogisticRegression(X, y))
    >>> with ThreadPoolExecutor(2) as pool:
    ...     c_sum, c_max = remainder_totals(cv, pool)
    >>> rem = TaylorRemainder(cv, 2)
    >>> bool(np.isclose(c_sum, rem.c_sum, rtol=1e-12)), c_max == rem.c_max
    (True, True)
    """
    if not isinstance(cv, ControlVariates) or glm_kernels(cv.model) is None:
        raise TypeError(f"remainder_totals needs a ControlVariates around a built-in GLM "
                        f"model, got {type(cv).__name__}")
    m_over_fact = derivative_bound(cv.model, cv.order + 1) / math.factorial(cv.order)
    sums, maxes = [], []

    def merge(start, stop, got):
        sums.extend(got[0])
        maxes.extend(got[1])

    map_ranges(as_cluster(executor), recipe_of(cv.model), _block_c_totals,
               (cv.order, m_over_fact), merge, N=cv.N, chunk=CHUNK, progress=False,
               desc="remainder bounds")
    return float(np.sum(sums)), float(np.max(maxes))


@dataclass(frozen=True)
class SampledSum:
    """``sum_i c_i`` estimated from a sample of the rows (:func:`sampled_remainder_sum`).

    Attributes
    ----------
    estimate : float
        The Horvitz-Thompson sum: the rows read exactly, plus n_R / n times the sample's sum.
    se : float
        Its standard error, ``n_R s sqrt((1 - n / n_R) / n)`` (s the sample's sd of c_i,
        the finite-population correction of a sample without replacement); 0 when every row
        was read.
    rows_read : int
    sampled : bool
        False when the sample would have exceeded ``PRICE_MAX_FRACTION`` of the rows, so
        every row was read (``estimate`` is then the exact sum).
    """

    estimate: float
    se: float
    rows_read: int
    sampled: bool

    @property
    def relative_se(self) -> float:
        return self.se / self.estimate if self.estimate > 0 else 0.0


def sampled_remainder_sum(cv, rng=None, exact_rows=(), *, size=None, executor=None):
    r"""``sum_i c_i`` of :class:`TaylorRemainder` ``(cv, cv.order)`` from a row sample.

    Pricing a Poisson-factor test (its expected batch ``C phi`` with ``C = sum_i c_i``,
    :meth:`samplers.SMHTest.expected_batch`) needs only an estimate of the sum: this reads
    ``exact_rows`` exactly and a uniform sample without replacement of the other n_R rows,
    so no pass over the N rows is made. ``c_i = M_{k+1} ||x_i||^{k+1} / k!`` depends on the
    row alone; the heavy rows (large ``x_i' Sigma x_i``, :func:`samplers.heavy_rows`) are
    the rows with large ``||x_i||`` that would dominate the sample's variance.

    Parameters
    ----------
    cv : ControlVariates
        Around a built-in GLM model (as :func:`remainder_totals`).
    rng : None, int, SeedSequence or numpy.random.Generator
        Draws the sample (equal seeds, equal estimates). Not drawn from when every row is
        read.
    exact_rows : array_like of int
        Rows read exactly (distinct, in [0, N)).
    size : int, optional
        Sample size; default ``max(PRICE_SAMPLE, PRICE_SAMPLE_PER_SQRT sqrt(n_R))``. Above
        ``PRICE_MAX_FRACTION`` n_R every row is read instead (:func:`remainder_totals` on
        ``executor``, or :class:`TaylorRemainder`'s local pass: its ``c_sum``).
    executor : optional
        For that pass (see :func:`remainder_totals`).

    Returns
    -------
    SampledSum

    Notes
    -----
    With K the exact rows and S the sample (n of the n_R other rows), the estimate is
    :math:`\sum_{i \in K} c_i + (n_R / n) \sum_{i \in S} c_i`, unbiased, with the
    standard error above. An expected batch linear in C (SMH, MH-SS: ``chi = 0``) has the
    same relative error.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ControlVariates, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400_000, 2)); y = (X[:, 0] + rng.logistic(size=400_000) > 0) * 1.0
    >>> cv = ControlVariates(LogisticRegression(X, y))
    >>> got = sampled_remainder_sum(cv, rng=1)
    >>> got.sampled, got.rows_read
    (True, 65536)
    >>> exact = TaylorRemainder(cv, 2).c_sum
    >>> bool(abs(got.estimate - exact) < 4 * got.se), round(got.relative_se, 3)
    (True, 0.005)
    """
    if not isinstance(cv, ControlVariates) or glm_kernels(cv.model) is None:
        raise TypeError(f"sampled_remainder_sum needs a ControlVariates around a built-in GLM "
                        f"model, got {type(cv).__name__}")
    N = int(cv.N)
    exact = np.unique(np.asarray(exact_rows, dtype=np.intp).ravel())
    if exact.size and (exact[0] < 0 or exact[-1] >= N or N - exact.size < 2):
        raise ValueError(f"exact_rows must lie in [0, {N - 1}] and leave at least 2 rows, "
                         f"got {exact.size} rows in [{exact[0]}, {exact[-1]}]")
    if exact.size != np.asarray(exact_rows).size:
        raise ValueError(f"exact_rows must be distinct, got "
                         f"{np.asarray(exact_rows).size - exact.size} repeat(s)")
    rest = N - exact.size
    n = price_sample_size(N, exact.size) if size is None else check_int("size", size, low=2)
    m_over_fact = derivative_bound(cv.model, cv.order + 1) / math.factorial(cv.order)
    if n is None or n > PRICE_MAX_FRACTION * rest:
        c_sum = (remainder_totals(cv, executor)[0] if executor is not None else
                 float(_block_c(cv.model, cv.order, m_over_fact).sum()))
        return SampledSum(c_sum, 0.0, N, False)
    pos = np.sort(np.random.default_rng(rng).choice(rest, size=n, replace=False))
    if exact.size:                  # the rest's positions to rows, skipping the exact rows
        pos = pos + np.searchsorted(exact - np.arange(exact.size), pos, side="right")
    c_sample = _rows_c(cv.model, pos, cv.order, m_over_fact)
    c_exact = _rows_c(cv.model, exact, cv.order, m_over_fact)
    estimate = float(c_exact.sum()) + rest / n * float(c_sample.sum())
    se = rest * float(np.std(c_sample, ddof=1)) * math.sqrt((1.0 - n / rest) / n)
    return SampledSum(estimate, se, int(exact.size + n), True)


def price_sample_size(N, n_exact=0):
    """The default sample of :func:`sampled_remainder_sum` for N rows, ``n_exact`` of them
    read exactly: ``max(PRICE_SAMPLE, PRICE_SAMPLE_PER_SQRT sqrt(n_R))`` rows of the n_R
    others, or None where that exceeds ``PRICE_MAX_FRACTION`` n_R (every row is read: below
    2^18 rows).

    >>> price_sample_size(10**6), price_sample_size(200_000), price_sample_size(10**10)
    (65536, None, 800000)
    """
    rest = int(N) - int(n_exact)
    n = max(PRICE_SAMPLE, math.ceil(PRICE_SAMPLE_PER_SQRT * math.sqrt(max(rest, 0))))
    return None if n > PRICE_MAX_FRACTION * rest else n


def _rows_c(model, rows, order, m_over_fact):
    """``c_i`` of the rows ``rows`` (sorted), read ``CHUNK`` at a time."""
    design = glm_kernels(model).design
    out = np.empty(rows.size)
    for lo in range(0, rows.size, CHUNK):
        idx = rows[lo:lo + CHUNK]
        Xb = design(model._rows_model(idx), 0, idx.size)
        out[lo:lo + idx.size] = m_over_fact * np.sqrt(np.einsum("ij,ij->i", Xb, Xb)) ** (
            order + 1)
    return out


def _block_c(block, order, m_over_fact):
    """``c_i = M_{k+1} / k! ||x_i||^{k+1}`` of a block's rows, chunk by chunk (a memmap or a
    store is read ``CHUNK`` rows at a time)."""
    design = glm_kernels(block).design
    c = np.empty(block.N)
    for start in range(0, block.N, CHUNK):
        stop = min(start + CHUNK, block.N)
        Xb = design(block, start, stop)
        c[start:stop] = m_over_fact * np.sqrt(np.einsum("ij,ij->i", Xb, Xb)) ** (order + 1)
    return c


def _block_c_totals(block, order, m_over_fact):
    """On a worker: each chunk's sum and maximum of ``c_i`` (as :class:`TaylorRemainder`)."""
    design = glm_kernels(block).design
    sums, maxes = [], []
    for start in range(0, block.N, CHUNK):
        stop = min(start + CHUNK, block.N)
        Xb = design(block, start, stop)
        c = m_over_fact * np.sqrt(np.einsum("ij,ij->i", Xb, Xb)) ** (order + 1)
        sums.append(float(c.sum()))
        maxes.append(float(c.max()))
    return sums, maxes


class TaylorRemainder:
    """Per-row bounds ``|delta_i| <= c_i phi_k(theta, theta')`` on the residual changes of the
    order-k Taylor proxy at a centre, and the row kernel of the residuals.

    Built on :class:`~samplers.ControlVariates` (the centre, the sums ``g``, ``H`` and the
    compiled residual row kernel) plus one chunked pass for ``c_i`` (memmaps work). See the
    module docstring for the maths.

    Parameters
    ----------
    model : LogisticRegression, LinearRegression, RobustRegression, GaussianMean or ControlVariates
        A wrapped :class:`ControlVariates` gives its centre and order (``order`` must match).
    order : {0, 1, 2}
        Taylor order; 0 is no proxy (TunaMH's Lipschitz bound; logistic and Student-t only).
    center : array of shape (d,), optional
        Expansion point; default the posterior mode (ignored at order 0).
    executor : optional
        Run the pass for ``c_i`` (and the control variates' passes when ``model`` is not
        already wrapped) on a cluster: a ``dask.distributed.Client``, its
        ``get_executor()`` or any ``concurrent.futures.Executor`` (see
        :func:`design._lib.distribute.map_ranges`). Each range's ``c_i`` come back and are
        written here in row order: the same values as the local pass.
    c : ndarray of shape (N,), optional
        The ``c_i`` already computed for this model (by another process: a test's prepared
        bounds sent with a chain), used instead of the pass.

    Attributes
    ----------
    model : the plain model; ``cv`` the :class:`ControlVariates` (None at order 0).
    c : ndarray of shape (N,)
        Per-row constants ``c_i`` (kept for alias sampling and the checks).
    c_sum, c_max : float
    center : ndarray of shape (d,)
    row_ratio, row_prefetch : compiled row kernels of ``delta_i``; read with
        :meth:`decision_data`.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 3)); y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=1000) > 0)
    >>> rem = TaylorRemainder(LogisticRegression(X, y.astype(float)), 2)
    >>> theta = rem.center + 0.05; theta_new = theta - [0.0, 0.04, 0.02]
    >>> delta, c = rem.residuals(theta, theta_new, np.arange(1000))
    >>> bool(np.all(np.abs(delta) <= c * rem.phi(theta, theta_new)))
    True
    """

    def __init__(self, model, order: int = 2, center=None, *, executor=None, c=None):
        if isinstance(order, bool):
            raise TypeError(f"order must be an integer, got {order!r}")
        self.order = check_int("order", order, low=0, high=2)
        if isinstance(model, ControlVariates):
            if self.order != model.order:
                raise ValueError(f"order must match the ControlVariates model's order "
                                 f"{model.order}, got {self.order}")
            if center is not None and not np.array_equal(np.asarray(center, float),
                                                         model.center.theta):
                raise ValueError("center must be None for a ControlVariates model (its own "
                                 f"centre {model.center.theta} is used), got {center!r}")
            cv, model = model, model.model
        else:
            cv = None
        if glm_kernels(model) is None:
            raise TypeError(
                f"{type(model).__name__} has no per-row Taylor remainder bounds; built-in: "
                "LogisticRegression, LinearRegression, RobustRegression, GaussianMean")
        M = derivative_bound(model, self.order + 1)
        if not math.isfinite(M):
            raise ValueError(
                f"order={self.order} needs a bounded derivative {self.order + 1} of the row "
                f"log-likelihood in the linear predictor; {type(model).__name__} has none "
                f"(use order={self.order + 1})")
        if self.order >= 1 and cv is None:
            cv = ControlVariates(model, center=center, order=self.order, executor=executor)
        self.model, self.cv, self.N = model, cv, model.N
        self.center = np.zeros(model.dim) if cv is None else cv.center.theta
        self.m_over_fact = M / math.factorial(self.order)
        glm = glm_kernels(model)
        cluster = as_cluster(executor)
        if c is not None:
            self.c = np.asarray(c, dtype=np.float64)
            if self.c.shape != (self.N,):
                raise ValueError(f"c must have shape ({self.N},), got {self.c.shape}")
        elif cluster is None:
            self.c = _block_c(model, self.order, self.m_over_fact)
        else:                           # each range's c_i on its worker, written here in order
            self.c = np.empty(self.N)

            def merge(start, stop, got):
                self.c[start:stop] = got

            map_ranges(cluster, recipe_of(model), _block_c, (self.order, self.m_over_fact),
                       merge, N=self.N, chunk=CHUNK, progress=False, desc="remainder bounds")
        self.c_sum = float(self.c.sum())
        self.c_max = float(self.c.max())
        if cv is None:
            self.row_ratio, self.row_prefetch = model._row_ratio, model._row_prefetch
        else:
            kernels = _cv_kernels(glm.dots3, glm.link, glm.derivs, glm.scatter,
                                  type(model)._row_prefetch, glm.ratio)
            self.row_ratio, self.row_prefetch = kernels[0], kernels[3]

    def decision_data(self):
        """The data tuple :attr:`row_ratio` reads (the residual without the shift P/N)."""
        if self.cv is None:
            return self.model._kernel_data()
        return self.cv._data(0.0)

    @property
    def store_backed(self) -> bool:
        """Whether the model's rows are in a store (read per decision: :meth:`rows_data`)."""
        return bool(getattr(self.model, "_store_backed", False))

    def rows_data(self, idx) -> tuple:
        """``(data, local rows, c)`` for a decision on rows ``idx``: :meth:`decision_data`,
        ``idx`` and :attr:`c` when the kernels read the rows in place; for a model whose rows
        are in a store, the rows ``idx`` read into memory (``read_rows``), ``0 .. len(idx) -
        1`` and ``c[idx]``: the same values, O(len(idx)) read."""
        if not self.store_backed:
            return self.decision_data(), idx, self.c
        rows = (self.model if self.cv is None else self.cv)._rows_model(idx)
        data = rows._kernel_data() if self.cv is None else rows._data(0.0)
        return data, np.arange(idx.shape[0], dtype=np.intp), self.c[idx]

    def phi(self, theta, theta_new) -> float:
        """``phi_k = ||theta' - theta|| (||theta - c||^k + ||theta' - c||^k) / 2``, c the centre."""
        return remainder_phi(self.center, self.order, theta, theta_new)

    def proxy(self, theta, theta_new) -> float:
        """``P = sum_i proxy_i(theta') - proxy_i(theta)`` over all N rows, in O(d^2)."""
        return 0.0 if self.cv is None else self.cv.proxy_total(theta, theta_new)

    def tightness(self, pairs, idx) -> float:
        """SMH's acceptance loss per expected row, ``kappa``, over the pairs ``(theta,
        theta_new)`` with the rows ``idx`` standing for all N (scaled by N / len(idx)):

            kappa = sum_pairs [sum_i max(0, -delta_i) - max(0, -sum_i delta_i)] / sum_pairs C phi.

        SMH's Poisson factor ``prod_i min(1, e^{delta_i})`` loses ``sum_i max(0, -delta_i)``
        in log acceptance, of which ``max(0, -sum_i delta_i)`` is MH's own rejection of the
        residual part of the ratio; the excess per unit of ``E[B] = C phi`` is what
        :func:`design.exact_design` takes as ``kappa``."""
        scale = self.N / len(idx)
        lost = bound = 0.0
        for theta, theta_new in pairs:
            delta, c = self.residuals(theta, theta_new, idx)
            lost += scale * float(np.maximum(-delta, 0.0).sum())
            lost -= max(0.0, -scale * float(delta.sum()))
            bound += self.c_sum * self.phi(np.asarray(theta, float), np.asarray(theta_new, float))
        return max(lost, 0.0) / bound if bound > 0 else 0.0

    def residuals(self, theta, theta_new, idx) -> tuple[np.ndarray, np.ndarray]:
        """``(delta_i, c_i)`` for rows ``idx`` (compiled; an O(len(idx)) read)."""
        idx = np.asarray(idx, dtype=np.intp)
        delta, c = np.empty(idx.shape[0]), np.empty(idx.shape[0])
        data, rows, c_all = self.rows_data(idx)
        _ratio_loop(self.row_ratio, self.row_prefetch)(
            data, rows, np.asarray(theta, float), np.asarray(theta_new, float),
            c_all, delta, c)
        return delta, c
