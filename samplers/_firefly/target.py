"""The pseudo-posterior that Firefly Monte Carlo's theta-updates sample, given the bright set.

With brightness variables ``z``, Maclaurin & Adams (2014, eq. 2) write the joint as

    p(theta, z | x) ∝ [p(theta) prod_n B_n(theta)] * prod_{n: z_n = 1} (L_n(theta) / B_n(theta) - 1),

a pseudo-prior whose product over all N bounds collapses to sufficient statistics, times a
pseudo-likelihood over the bright points only. A bright row's factor is the odds of its
brightness, ``(L_n - B_n)/B_n = p(z_n = 1 | theta) / p(z_n = 0 | theta)``; everything here
works with its log, ``log_odds_n = log expm1(r_n)`` with the gap ``r_n = log L_n - log B_n``.
The samplers cache it per row: the pseudo-posterior is then a plain sum over the bright rows,
an MH flip of ``z_n`` compares it with ``log u``, and a Gibbs flip draws with ``expit`` of it.

A bound that exceeds its likelihood would silently bias the chain, so every gap computed is
checked: a gap below ``-GAP_TOLERANCE * (1 + |log L_n|)`` is reported with the row and the
point; smaller negative gaps are rounding at a touching point and are set to zero (odds 0).
"""

from __future__ import annotations

import math

import numpy as np

from design._lib.jit import jit
from ..models.bounds import QuadraticBound

__all__ = ["PseudoPosterior", "log_expm1", "GAP_TOLERANCE"]

#: Relative tolerance for a bound above its likelihood (rounding at the touching point).
GAP_TOLERANCE = 1e-9
#: Rows probed at theta0 for B_n <= L_n before a chain starts.
PROBE_ROWS = 1024
#: Rows per chunk of the one-time check of a user's bound against its collapsed sum.
CHECK_CHUNK = 1 << 16


@jit
def log_expm1(r):
    """``log(exp(r) - 1)`` for ``r >= 0`` without overflow or cancellation (-inf at 0)."""
    return r + math.log(-math.expm1(-r))


@jit
def log_odds_checked(ll, lb, out):
    """Write ``out = log expm1(ll - lb)``; return the first bad position, or -1.

    A position is bad when ``ll`` or ``lb`` is not finite or the bound exceeds the
    likelihood by more than the tolerance; smaller negative gaps count as 0.
    """
    for t in range(ll.shape[0]):
        gap = ll[t] - lb[t]
        if not (math.isfinite(ll[t]) and math.isfinite(lb[t])):
            return t
        if gap < 0.0:
            if gap < -GAP_TOLERANCE * (1.0 + abs(ll[t])):
                return t
            gap = 0.0
        out[t] = log_expm1(gap)
    return -1


@jit
def total(values):
    """Sequential sum (the same order wherever a pseudo-posterior is summed)."""
    acc = 0.0
    for v in values:
        acc += v
    return acc


@jit
def total_at(values, idx):
    """``sum_t values[idx[t]]``: the bright rows' cached log-odds, O(len(idx))."""
    acc = 0.0
    for n in idx:
        acc += values[n]
    return acc


class PseudoPosterior:
    """A model and its bound resolved once: checked log-odds, the pseudo-posterior and its gradient.

    Built-in bounds of the same model run their fused compiled row loops (one pass over a
    row gives log L, log B and, if asked, both gradients); any other model or bound goes
    through its Python methods. Both paths return the same arrays, and everything after
    them (checks, sums, decisions) is shared.
    """

    def __init__(self, model, bound, dim: int):
        self.model = model
        self.bound = bound
        self.N = int(model.N)
        self.dim = dim
        self.logprior = model.logprior
        self.grad_logprior = getattr(model, "grad_logprior", None)
        if isinstance(bound, QuadraticBound) and bound.model is model:
            self.compiled = True
            self.pairs = bound._pairs
            self.pair_grads = bound._pair_grads
            self.log_bound_sum = bound._log_bound_sum
            self.grad_log_bound_sum = bound._grad_log_bound_sum
            return
        self.compiled = False
        self.pairs = self._python_pairs
        self.log_bound_sum = lambda theta: float(bound.log_bound_sum(theta))
        has_grads = all(callable(f) for f in (
            getattr(model, "grad_loglik", None), getattr(bound, "grad_log_bound", None),
            getattr(bound, "grad_log_bound_sum", None), self.grad_logprior))
        self.pair_grads = self._python_pair_grads if has_grads else None
        self.grad_log_bound_sum = (
            (lambda theta: np.asarray(bound.grad_log_bound_sum(theta), dtype=float))
            if has_grads else None)

    # -- the two paths to (log L, log B) -------------------------------------------------------

    def _python_pairs(self, theta, idx):
        ll = np.asarray(self.model.loglik(theta, idx), dtype=float)
        lb = np.asarray(self.bound.log_bound(theta, idx), dtype=float)
        if ll.shape != idx.shape or lb.shape != idx.shape:
            raise ValueError(f"model.loglik and bound.log_bound must return one value per index: "
                             f"asked for {idx.shape[0]}, got shapes {ll.shape} and {lb.shape}")
        return ll, lb

    def _python_pair_grads(self, theta, idx):
        ll, lb = self._python_pairs(theta, idx)
        shape = (idx.shape[0], self.dim)
        g_ll = np.asarray(self.model.grad_loglik(theta, idx), dtype=float).reshape(shape)
        g_lb = np.asarray(self.bound.grad_log_bound(theta, idx), dtype=float).reshape(shape)
        return ll, lb, g_ll, g_lb

    # -- log-odds of brightness, checked -------------------------------------------------------

    def checked_log_odds(self, theta, idx, ll, lb) -> np.ndarray:
        out = np.empty(idx.shape[0])
        bad = log_odds_checked(ll, lb, out)
        if bad >= 0:
            self._report(theta, int(idx[bad]), ll[bad], lb[bad])
        return out

    def log_odds(self, theta, idx) -> np.ndarray:
        """``log((L_n - B_n)/B_n)`` at theta for rows ``idx`` (len(idx) likelihood queries)."""
        ll, lb = self.pairs(theta, idx)
        return self.checked_log_odds(theta, idx, ll, lb)

    def _report(self, theta, row, ll, lb):
        if not (math.isfinite(ll) and math.isfinite(lb)):
            raise ValueError(f"log-likelihood and log-bound must be finite; row {row} gives "
                             f"log L = {ll}, log B = {lb} at theta={theta}")
        raise ValueError(
            f"the bound exceeds the likelihood: log B_n = {lb!r} > log L_n = {ll!r} for row "
            f"n = {row} at theta={theta}. Firefly Monte Carlo needs 0 < B_n(theta) <= L_n(theta) "
            "for every row and theta; a bound above the likelihood would bias the chain"
        )

    # -- the pseudo-posterior -------------------------------------------------------------------

    def base(self, theta) -> float:
        """Log pseudo-prior ``log p(theta) + sum_n log B_n(theta)`` (O(d^2), no queries)."""
        lp = float(self.logprior(theta))
        if not lp > -math.inf:
            if math.isnan(lp):
                raise ValueError(f"the log prior is NaN at theta={theta}")
            return -math.inf
        return lp + self.log_bound_sum(theta)

    def density(self, theta, bright):
        """Log pseudo-posterior at theta for the bright rows: ``(value, base, log_odds)``.

        ``log_odds`` is None (and no likelihood is queried) when the prior rules theta out.
        """
        base = self.base(theta)
        if base == -math.inf:
            return -math.inf, base, None
        lo = self.log_odds(theta, bright)
        return base + total(lo), base, lo

    def density_grad(self, theta, bright):
        """Gradient of the log pseudo-posterior, and the log-odds, at theta (len(bright) queries)."""
        ll, lb, g_ll, g_lb = self.pair_grads(theta, bright)
        lo = self.checked_log_odds(theta, bright, ll, lb)
        grad = (np.asarray(self.grad_logprior(theta), dtype=float)
                + self.grad_log_bound_sum(theta))
        if lo.shape[0]:
            # d log expm1(r) = dr / (1 - exp(-r)) = (1 + exp(-log_odds)) dr,
            # dr = grad log L - grad log B
            with np.errstate(over="ignore"):  # log-odds -inf (a touching bound): weight inf
                weights = 1.0 + np.exp(-lo)
            grad = grad + weights @ (g_ll - g_lb)
        return grad, lo

    # -- one-time checks before a chain ---------------------------------------------------------

    def check_start(self, theta0) -> None:
        """Probe ``B_n <= L_n`` at theta0 on rows spread over the data; for a bound that is
        not built in, also check its collapsed sum against the sum of its rows (O(N), once).
        """
        probe = np.unique(np.linspace(0, self.N - 1, min(self.N, PROBE_ROWS)).astype(np.int64))
        self.log_odds(theta0, probe)
        if self.compiled:
            return
        other = theta0 + 0.01 * (1.0 + np.abs(theta0)) * np.where(np.arange(self.dim) % 2, 1.0, -1.0)
        sums = []
        for theta in (theta0, other):
            direct_sum = 0.0
            for start in range(0, self.N, CHECK_CHUNK):
                idx = np.arange(start, min(start + CHECK_CHUNK, self.N), dtype=np.int64)
                direct_sum += float(np.sum(self.bound.log_bound(theta, idx)))
            sums.append((direct_sum, self.log_bound_sum(theta)))
        direct = sums[1][0] - sums[0][0]
        collapsed = sums[1][1] - sums[0][1]
        scale = 1.0 + abs(sums[0][0]) + abs(sums[1][0])
        if not abs(direct - collapsed) <= 1e-8 * scale:
            raise ValueError(
                f"bound.log_bound_sum does not match the sum of bound.log_bound over all "
                f"{self.N} rows: between theta0 and a nearby point the collapsed sum changes by "
                f"{collapsed!r}, the direct sum by {direct!r}"
            )

