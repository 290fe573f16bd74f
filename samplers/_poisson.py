"""Poisson minibatches: a Poisson number of rows drawn with replacement, in O(batch).

The exact minibatch tests (:mod:`samplers.mhtests.poisson`) read a Poisson process of rows: ``B ~
Poisson(rate)`` draws, each row ``i`` with probability ``w_i / sum_j w_j``. Uniform
probabilities need nothing; weighted ones use Walker's alias table (Vose's O(N)
construction, built once; Vose 1991, "A linear algorithm for generating random numbers with
a given distribution", IEEE TSE 17), after which a draw costs two uniforms and one table
look-up. The uniforms are drawn in Python from the chain's Generator (``rng.random``), then
mapped to rows by a compiled kernel, so equal seeds give equal rows and a compiled loop does
not need the Generator itself.
"""

from __future__ import annotations

import numpy as np

from design._lib.checks import as_generator, check_positive
from design._lib.jit import jit

__all__ = ["AliasTable", "PoissonBatches"]


@jit
def _vose(weights, prob, alias):
    """Vose's alias construction in O(N): ``prob[j]`` is the chance of keeping column j,
    ``alias[j]`` the row taken otherwise. ``weights`` are >= 0 with a positive sum."""
    n = weights.shape[0]
    total = 0.0
    for j in range(n):
        total += weights[j]
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    ns = 0
    nl = 0
    for j in range(n):
        prob[j] = weights[j] * n / total
        alias[j] = j
        if prob[j] < 1.0:
            small[ns] = j
            ns += 1
        else:
            large[nl] = j
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        g = large[nl - 1]
        alias[s] = g
        prob[g] = (prob[g] + prob[s]) - 1.0
        if prob[g] < 1.0:
            nl -= 1
            small[ns] = g
            ns += 1
    # What remains is 1 up to rounding: keep it whole.
    for t in range(nl):
        prob[large[t]] = 1.0
    for t in range(ns):
        prob[small[t]] = 1.0


@jit
def alias_rows(prob, alias, u, out):
    """Rows for ``out.shape[0]`` draws from uniforms ``u`` (two per draw): column
    ``j = floor(u[2t] N)``, kept if ``u[2t + 1] < prob[j]``, else ``alias[j]``."""
    n = prob.shape[0]
    for t in range(out.shape[0]):
        j = int(u[2 * t] * n)
        if j >= n:  # u < 1 always; guard against rounding in u * n
            j = n - 1
        out[t] = j if u[2 * t + 1] < prob[j] else alias[j]


@jit
def uniform_rows(n, u, out):
    """Rows ``floor(u[t] N)`` for uniform draws with replacement."""
    for t in range(out.shape[0]):
        j = int(u[t] * n)
        out[t] = j if j < n else n - 1


class AliasTable:
    """Walker's alias table over N rows: O(N) once, then O(1) per draw.

    Parameters
    ----------
    weights : array of shape (N,)
        Non-negative, finite, with a positive sum (not modified).

    Examples
    --------
    >>> import numpy as np
    >>> table = AliasTable(np.array([1.0, 0.0, 3.0]))
    >>> rows = table.draw(np.random.default_rng(0), 10_000)
    >>> np.bincount(rows, minlength=3)[1], round(float(np.mean(rows == 2)), 1)
    (np.int64(0), 0.8)
    """

    def __init__(self, weights):
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or w.shape[0] < 1:
            raise ValueError(f"weights must be a non-empty 1-D array, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be finite and >= 0")
        if not w.sum() > 0:
            raise ValueError("weights must have a positive sum")
        self.N = w.shape[0]
        self.prob = np.empty(self.N)
        self.alias = np.empty(self.N, dtype=np.int64)
        _vose(w, self.prob, self.alias)

    def draw(self, rng, k: int) -> np.ndarray:
        """``k`` rows drawn with replacement (2k uniforms from ``rng``)."""
        rng = as_generator(rng)
        out = np.empty(int(k), dtype=np.intp)
        alias_rows(self.prob, self.alias, rng.random(2 * out.shape[0]), out)
        return out


class PoissonBatches:
    """Poisson minibatches over N rows, uniform or proportional to weights.

    ``draw(rng, rate)`` returns ``B ~ Poisson(rate)`` rows drawn with replacement: uniformly
    (``weights=None``) or with probability ``w_i / sum_j w_j`` through an :class:`AliasTable`.
    Cost O(B) per draw; the Generator is consumed as ``rng.poisson(rate)`` then
    ``rng.random(B)`` (uniform) or ``rng.random(2 B)`` (weighted).

    Examples
    --------
    >>> import numpy as np
    >>> batches = PoissonBatches(1000)
    >>> sizes = [batches.draw(np.random.default_rng(s), 3.0).shape[0] for s in range(2000)]
    >>> round(float(np.mean(sizes)), 1)
    3.0
    """

    def __init__(self, N: int, weights=None):
        self.N = int(N)
        self.table = None if weights is None else AliasTable(weights)
        if self.table is not None and self.table.N != self.N:
            raise ValueError(f"weights must have N = {self.N} entries, got {self.table.N}")

    def draw(self, rng, rate: float) -> np.ndarray:
        rate = check_positive("rate", rate, allow_zero=True)
        B = int(rng.poisson(rate))
        return self.rows(rng, B)

    def rows(self, rng, B: int) -> np.ndarray:
        """``B`` rows with replacement from this batch's distribution."""
        out = np.empty(B, dtype=np.intp)
        if B:
            if self.table is None:
                uniform_rows(self.N, rng.random(B), out)
            else:
                alias_rows(self.table.prob, self.table.alias, rng.random(2 * B), out)
        return out
