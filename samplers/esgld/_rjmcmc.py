"""Reversible-jump Metropolis-Hastings baselines for variable selection, on the shared chain loop.

The model state is the coefficient vector ``beta`` itself, with exact zeros for excluded
variables (``gamma_j = 1{beta_j != 0}``): a fixed-length vector, so reversible jump between
models of different sizes (Green 1995) is an ordinary proposal of :func:`samplers.sample`
and any :class:`~samplers.AcceptanceTest` decides it. With :class:`~samplers.ExactTest` this
is full-data reversible-jump MH; with :class:`~samplers.AustereTest` it is the approximate
reversible-jump sampler of Korattikara et al. (2014, section 6.3), whose ``mu0`` carries the
prior ratio and the proposal ratio of the jump.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..mhtests import AcceptanceTest
from .._chain import sample
from design._lib.checks import as_generator, check_finite_array, check_int, check_positive
from design._lib.jit import jit
from ..models._base import as_data_array, check_finite_rows, scan_rows
from ..proposals import Proposal
from ._prior import SpikeSlabPrior
from ._results import VariableSelection

__all__ = ["SparseLinearRegression", "ReversibleJump", "rjmcmc_select"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@jit
def _sparse_fit(X, i, support, coef):
    a = 0.0
    for t in range(support.shape[0]):
        a += X[i, support[t]] * coef[t]
    return a


@jit
def _sparse_loglik(X, y, idx, support, coef, inv_sd, out):
    for t in range(idx.shape[0]):
        i = idx[t]
        r = (y[i] - _sparse_fit(X, i, support, coef)) * inv_sd
        out[t] = -0.5 * r * r


@jit
def _sparse_ratio(X, y, idx, support, coef, diff_support, diff, inv_var, out):
    """``l_i`` between beta (``support``, ``coef``) and beta + diff, O(|support| + |diff|)."""
    for t in range(idx.shape[0]):
        i = idx[t]
        r = y[i] - _sparse_fit(X, i, support, coef)
        r_new = r - _sparse_fit(X, i, diff_support, diff)
        out[t] = 0.5 * (r * r - r_new * r_new) * inv_var


class SparseLinearRegression:
    """Linear regression with known noise sd and a spike-and-slab prior, for reversible jump.

    ``theta`` is the coefficient vector ``beta``; its zeros are the excluded variables. The
    log prior is :meth:`SpikeSlabPrior.logpdf` (model-size prior times slab densities); the
    log-likelihood of a row reads only the included columns, O(|gamma|).

    Parameters
    ----------
    X : array of shape (N, p)
    y : array of shape (N,)
    noise_sd : float
    prior : SpikeSlabPrior, optional

    Examples
    --------
    >>> from samplers.datasets import correlated_regression
    >>> X, y, beta = correlated_regression(100, 4, [1.0], rng=0)
    >>> model = SparseLinearRegression(X, y, 1.0)
    >>> model.loglik_ratio(np.zeros(4), beta, np.arange(3)).shape
    (3,)
    """

    def __init__(self, X, y, noise_sd=1.0, *, prior: SpikeSlabPrior | None = None):
        self.X = as_data_array("X", X, ndim=2)
        self.y = as_data_array("y", y, ndim=1)
        self.N, self.dim = self.X.shape
        if self.y.shape[0] != self.N:
            raise ValueError(f"y must have one value per row of X ({self.N}), got {self.y.shape[0]}")
        check_finite_rows("X", self.X)
        check_finite_rows("y", self.y)
        self.noise_sd = check_positive("noise_sd", noise_sd)
        self.prior = SpikeSlabPrior() if prior is None else prior
        if not isinstance(self.prior, SpikeSlabPrior):
            raise TypeError(f"prior must be a SpikeSlabPrior, got {type(self.prior).__name__}")
        self._max_row_norm = math.sqrt(
            max(scan_rows(self.X, lambda b: float(np.max(np.einsum("ij,ij->i", b, b)))))
        )
        self._max_abs_y = max(scan_rows(self.y, lambda b: float(np.max(np.abs(b)))))

    def loglik(self, theta, idx):
        """Per-row log-likelihoods at ``beta = theta``."""
        theta = np.asarray(theta, dtype=float)
        idx = np.asarray(idx, dtype=np.intp)
        support = np.flatnonzero(theta)
        out = np.empty(idx.shape[0])
        _sparse_loglik(self.X, self.y, idx, support, theta[support], 1.0 / self.noise_sd, out)
        return out - math.log(self.noise_sd) - _HALF_LOG_2PI

    def loglik_ratio(self, theta, theta_new, idx):
        """``l_i = log p(y_i | beta_new) - log p(y_i | beta)``, reading the changed columns once."""
        theta = np.asarray(theta, dtype=float)
        diff = np.asarray(theta_new, dtype=float) - theta
        idx = np.asarray(idx, dtype=np.intp)
        support, diff_support = np.flatnonzero(theta), np.flatnonzero(diff)
        out = np.empty(idx.shape[0])
        _sparse_ratio(self.X, self.y, idx, support, theta[support], diff_support,
                      diff[diff_support], 1.0 / self.noise_sd**2, out)
        return out

    def loglik_ratio_bound(self, theta, theta_new) -> float:
        """Bound on ``max_i |l_i|`` (as :class:`~samplers.LinearRegression`), for ConfidenceTest."""
        theta, theta_new = np.asarray(theta, float), np.asarray(theta_new, float)
        r = self._max_row_norm
        step = float(np.linalg.norm(theta_new - theta)) * r
        reach = 2.0 * self._max_abs_y + float(np.linalg.norm(theta_new + theta)) * r
        return step * reach / (2.0 * self.noise_sd**2)

    def logprior(self, theta) -> float:
        return self.prior.logpdf(np.asarray(theta, dtype=float))

    def __repr__(self):
        return f"SparseLinearRegression(N={self.N}, p={self.dim}, noise_sd={self.noise_sd:g})"


def _move_probs(k: int, p: int) -> tuple[float, float, float]:
    """Probabilities of (birth, death, update) in a model of size k out of p variables."""
    if k == 0:
        return 1.0, 0.0, 0.0
    if k == p:
        return 0.0, 0.5, 0.5
    return 1 / 3, 1 / 3, 1 / 3


@dataclass(frozen=True)
class ReversibleJump(Proposal):
    """Birth, death and update moves on a sparse coefficient vector (Green 1995).

    * *birth*: a variable drawn uniformly from those excluded enters with coefficient
      ``N(0, birth_sd^2)``;
    * *death*: a variable drawn uniformly from those included leaves (its coefficient is 0);
    * *update*: one included coefficient takes a Gaussian random-walk step of sd
      ``update_sd``.

    Each is chosen with probability 1/3 (birth only from the empty model; death or update
    when all variables are in). The log proposal ratio carries the move probabilities, the
    uniform choices and the birth density (the Jacobian of the jump is 1), so the chain
    targets the model's posterior with any acceptance test.

    Parameters
    ----------
    birth_sd : float
        Sd of a new coefficient, > 0.
    update_sd : float
        Sd of an update step, > 0.

    Examples
    --------
    >>> from samplers import ExactTest, sample
    >>> from samplers.datasets import correlated_regression
    >>> X, y, beta = correlated_regression(500, 5, [1.0], rng=0)
    >>> model = SparseLinearRegression(X, y, 1.0)
    >>> chain = sample(model, ExactTest(), ReversibleJump(1.0, 0.05), np.zeros(5), 50, rng=0)
    >>> chain.samples.shape
    (50, 5)
    """

    birth_sd: float = 1.0
    update_sd: float = 0.05

    def __post_init__(self):
        object.__setattr__(self, "birth_sd", check_positive("birth_sd", self.birth_sd))
        object.__setattr__(self, "update_sd", check_positive("update_sd", self.update_sd))

    def _log_birth_density(self, b: float) -> float:
        s = self.birth_sd
        return -0.5 * (b / s) ** 2 - math.log(s) - _HALF_LOG_2PI

    def propose(self, rng, view, batches, theta, pstate):
        p = theta.shape[0]
        included = np.flatnonzero(theta)
        k = included.shape[0]
        birth, death, _ = _move_probs(k, p)
        u = rng.random()
        theta_new = theta.copy()
        if u < birth:
            excluded = np.flatnonzero(theta == 0.0)
            j = excluded[min(int(rng.random() * (p - k)), p - k - 1)]
            b = self.birth_sd * rng.standard_normal()
            theta_new[j] = b
            log_q = (math.log(_move_probs(k + 1, p)[1] / (k + 1)) - math.log(birth / (p - k))
                     - self._log_birth_density(b))
        elif u < birth + death:
            j = included[min(int(rng.random() * k), k - 1)]
            theta_new[j] = 0.0
            log_q = (math.log(_move_probs(k - 1, p)[0] / (p - k + 1)) + self._log_birth_density(theta[j])
                     - math.log(death / k))
        else:
            j = included[min(int(rng.random() * k), k - 1)]
            theta_new[j] += self.update_sd * rng.standard_normal()
            log_q = 0.0
        return theta_new, log_q, None, 0


def rjmcmc_select(model, test, proposal, *, n_iter, burn_in=0, thin=10, theta0=None, rng=None,
                  segment=1000) -> VariableSelection:
    """Variable selection by reversible-jump MH with any acceptance test, on :func:`sample`.

    The chain runs in segments of ``segment`` transitions (each a call of :func:`sample`
    continuing from the last state with the same random stream), so memory holds one
    segment of draws, not ``n_iter``.

    Parameters
    ----------
    model : SparseLinearRegression
    test : AcceptanceTest
        ``ExactTest()`` for full-data reversible jump; ``AustereTest(m, epsilon)`` for the
        approximate version of Korattikara et al. (2014), section 6.3.
    proposal : ReversibleJump
    n_iter, burn_in, thin : int
        Transitions, transitions discarded, thinning of the stored draws of ``beta``.
    theta0 : array of shape (p,), optional
        Starting coefficients (default zeros: the empty model).
    rng : None, int or numpy.random.Generator
    segment : int
        Transitions per call of :func:`sample`.

    Returns
    -------
    VariableSelection
        Inclusion probabilities and posterior mean of beta over the draws after burn-in.

    Examples
    --------
    >>> from samplers import AustereTest
    >>> from samplers.datasets import correlated_regression
    >>> X, y, beta = correlated_regression(5000, 10, [1.0, -1.0], rng=0)
    >>> model = SparseLinearRegression(X, y, 1.0)
    >>> fit = rjmcmc_select(model, AustereTest(m=500, epsilon=0.05),
    ...                     ReversibleJump(birth_sd=1.0, update_sd=0.02), n_iter=3000,
    ...                     burn_in=1000, rng=0)
    >>> fit.selected
    array([0, 1])
    """
    if not isinstance(model, SparseLinearRegression):
        raise TypeError(f"model must be a SparseLinearRegression, got {type(model).__name__}")
    if not isinstance(test, AcceptanceTest):
        raise TypeError(f"test must be an AcceptanceTest, got {type(test).__name__}")
    if not isinstance(proposal, ReversibleJump):
        raise TypeError(f"proposal must be a ReversibleJump, got {type(proposal).__name__}")
    n_iter = check_int("n_iter", n_iter, low=1)
    burn_in = check_int("burn_in", burn_in, low=0, high=n_iter - 1)
    thin = check_int("thin", thin, low=1)
    segment = check_int("segment", segment, low=1)
    p = model.dim
    theta = np.zeros(p) if theta0 is None else check_finite_array("theta0", theta0, ndim=1)
    rng = as_generator(rng)

    inclusion = np.zeros(p)
    beta = np.zeros(p)
    kept = []
    sizes = np.empty(n_iter)
    rows = 0
    wall = 0.0
    done = 0
    while done < n_iter:
        steps = min(segment, n_iter - done)
        chain = sample(model, test, proposal, theta, steps, rng)
        draws = chain.samples
        t = np.arange(done, done + steps)
        sizes[done:done + steps] = np.count_nonzero(draws, axis=1)
        after = t >= burn_in
        inclusion += np.count_nonzero(draws[after], axis=0)
        beta += draws[after].sum(axis=0)
        kept.extend(draws[after & ((t - burn_in) % thin == 0)])
        rows += int(chain.stats["n_used"].sum())
        wall += chain.wall_time
        theta = draws[-1]
        done += steps
    kept_n = n_iter - burn_in
    return VariableSelection(inclusion / kept_n, beta / kept_n, np.array(kept), sizes, rows, wall,
                             f"RJMCMC({test!r}, {proposal!r})")
