"""The stationary-distribution bounds checked exactly, on a one-parameter model discretised.

On a grid ``theta_1 < ... < theta_K`` a random-walk Metropolis-Hastings chain is a K x K
transition matrix; so is the chain of an approximate test once its acceptance probability
is known at every pair of grid points. Both stationary distributions then follow by linear
algebra, and so do their total variation distance and the exact kernel's contraction
coefficient: the bounds of Korattikara et al. (Theorem 1) and Bardenet et al.
(Proposition 3.2) can be put beside the distance they bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from design._lib.checks import as_generator, check_finite_array, check_int, check_positive
from design._lib.rows import new_order
from samplers import check_model

from ._bounds import stationary_bound, subsampling_bound
from ._kernels import dobrushin, doeblin, path_thresholds
from ._ratios import CHUNK, Population, loglik_ratios

__all__ = ["FixedBatchBarker", "GridChain", "StationaryCheck", "stationary_check"]

#: Stop raising the kernel to higher powers once its contraction coefficient is this small.
_ETA_FLOOR = 1e-3
_MAX_POWER = 1 << 20


@dataclass(frozen=True)
class FixedBatchBarker:
    """The minibatch Barker test of Seita et al. (2017) at one fixed batch size.

    What :func:`design.acceptance.barker_acceptance` simulates: one minibatch of
    ``batch_size`` rows, ``Delta* = N mean(l) + c``, the normal top-up ``X_nc`` and the
    correction ``X_corr`` from ``table``; accept iff the sum is positive. Its exact
    counterpart accepts with the logistic probability ``S(Delta)``.

    Parameters
    ----------
    batch_size : int
        Rows per test, >= 3.
    table : design.correction.CorrectionTable, optional
        Defaults to :func:`design.correction.default`. (Skew-corrected tables are not
        accepted: Novak's bound, the a priori error reported, is for the Gaussian limit.)
    fpc : bool
        Finite-population factor in the variance estimate.
    """

    batch_size: int
    table: object = None
    fpc: bool = True

    def __post_init__(self):
        from design.correction import CorrectionTable

        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, low=3))
        if not (self.table is None or isinstance(self.table, CorrectionTable)):
            raise TypeError(f"table must be a design.correction.CorrectionTable or None, got "
                            f"{type(self.table).__name__}")

    def correction(self):
        from design import correction

        return correction.default() if self.table is None else self.table


class GridChain:
    """A one-parameter model on a uniform grid, with a discretised random-walk proposal.

    From grid point i the proposal moves to ``i + k`` with probability proportional to
    ``exp(-(k h)^2 / (2 s^2))`` for ``1 <= |k| <= R`` (h the grid spacing, s the proposal
    sd, R = ceil(reach s / h)); a move off the grid is rejected. The proposal is symmetric,
    so exact MH (and the exact Barker test) leave the posterior restricted to the grid,
    ``pi_k`` proportional to ``p0(theta_k) prod_i p(x_i | theta_k)``, invariant.

    Building the grid costs one pass over the data per node and per pair (i, j) in reach,
    to summarise each pair's l_i (mean, sd, E|X|, E|X|^3).

    Parameters
    ----------
    model : Model
        A model with a one-element theta.
    grid : array_like
        Increasing, equally spaced values of theta, at least 3.
    proposal_sd : float
        Standard deviation s of the random walk.
    reach : float
        Proposal cut-off in proposal sds.
    chunk : int
        Rows per model call in the passes over the data.

    Attributes
    ----------
    grid, target : numpy.ndarray
        The nodes and the posterior restricted to them (sums to 1).
    N : int
    pair_from, pair_to, proposal : numpy.ndarray
        The pairs (i, j), 1 <= |i - j| <= R, and q(i -> j).
    log_ratio : numpy.ndarray
        Log MH ratio of each pair, ``N mu + c``.
    log_const : numpy.ndarray
        Its data-free part c (the prior ratio; the proposal is symmetric).
    populations : tuple of Population
        Mean, sd and shape of each pair's l_i.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean
    >>> from validation import GridChain
    >>> model = GaussianMean(np.random.default_rng(0).normal(0.0, 1.0, 500))
    >>> g = GridChain(model, np.linspace(-0.3, 0.3, 13), proposal_sd=0.05)
    >>> P = g.exact_kernel()
    >>> bool(np.allclose(g.target @ P, g.target))
    True
    """

    def __init__(self, model, grid, proposal_sd, *, reach=4.0, chunk=CHUNK):
        grid = check_finite_array("grid", grid, ndim=1)
        K = grid.shape[0]
        if K < 3:
            raise ValueError(f"grid must have at least 3 points, got {K}")
        h = (grid[-1] - grid[0]) / (K - 1)
        if not (h > 0 and np.allclose(np.diff(grid), h, rtol=1e-9, atol=0.0)):
            raise ValueError("grid must be increasing and equally spaced")
        s = check_positive("proposal_sd", proposal_sd)
        reach = check_positive("reach", reach)
        check_model(model, grid[:1])
        self.model = model
        self.N = int(model.N)
        self.chunk = check_int("chunk", chunk, low=1)
        self.grid = grid
        self.proposal_sd = s
        R = max(1, min(K - 1, int(math.ceil(reach * s / h - 1e-9))))
        steps = np.concatenate([np.arange(-R, 0), np.arange(1, R + 1)])
        w = np.exp(-0.5 * (steps * h / s) ** 2)
        w /= w.sum()

        log_prior = np.array([float(model.logprior(grid[k:k + 1])) for k in range(K)])
        log_lik = np.array([self._loglik_sum(grid[k:k + 1]) for k in range(K)])
        log_post = log_prior + log_lik
        if not np.all(np.isfinite(log_post)):
            raise ValueError("the log posterior must be finite at every grid point")
        self.target = np.exp(log_post - special.logsumexp(log_post))

        i, k = np.meshgrid(np.arange(K), np.arange(steps.size), indexing="ij")
        j = i + steps[k]
        inside = (j >= 0) & (j < K)
        self.pair_from, self.pair_to = i[inside], j[inside]
        self.proposal = w[k[inside]]
        self.log_const = log_prior[self.pair_to] - log_prior[self.pair_from]
        self.log_ratio = log_post[self.pair_to] - log_post[self.pair_from]
        self.populations = tuple(Population.of(self.ratios(p)) for p in range(self.n_pairs))
        for a in (self.grid, self.target, self.pair_from, self.pair_to, self.proposal,
                  self.log_const, self.log_ratio):
            a.setflags(write=False)

    def _loglik_sum(self, theta):
        total = 0.0
        for start in range(0, self.N, self.chunk):
            idx = np.arange(start, min(start + self.chunk, self.N), dtype=np.intp)
            total += float(np.sum(self.model.loglik(theta, idx)))
        return total

    @property
    def n_pairs(self) -> int:
        return int(self.pair_from.size)

    def theta_pair(self, p):
        """``(theta, theta')`` of pair ``p`` as 1-element arrays."""
        i, j = self.pair_from[p], self.pair_to[p]
        return self.grid[i:i + 1], self.grid[j:j + 1]

    def ratios(self, p) -> np.ndarray:
        """The N log-likelihood ratios of pair ``p`` (an O(N) pass)."""
        return loglik_ratios(self.model, *self.theta_pair(p), chunk=self.chunk)

    def kernel(self, accept) -> np.ndarray:
        """Transition matrix with acceptance probability ``accept[p]`` at pair ``p``."""
        K = self.grid.size
        P = np.zeros((K, K))
        P[self.pair_from, self.pair_to] = self.proposal * np.asarray(accept, dtype=float)
        P[np.arange(K), np.arange(K)] = 1.0 - P.sum(axis=1)
        return P

    def exact_accept(self, rule="metropolis") -> np.ndarray:
        """Full-data acceptance probabilities: ``min(1, e^r)`` or Barker's ``S(r)``."""
        if rule == "metropolis":
            return np.exp(np.minimum(self.log_ratio, 0.0))
        if rule == "barker":
            return special.expit(self.log_ratio)
        raise ValueError(f"rule must be 'metropolis' or 'barker', got {rule!r}")

    def exact_kernel(self, rule="metropolis") -> np.ndarray:
        """The full-data kernel (Metropolis-Hastings, or Barker's)."""
        return self.kernel(self.exact_accept(rule))


def stationary_distribution(P) -> np.ndarray:
    """The stationary distribution of an irreducible stochastic matrix (a linear solve)."""
    K = P.shape[0]
    A = P.T - np.eye(K)
    A[-1] = 1.0
    rhs = np.zeros(K)
    rhs[-1] = 1.0
    pi = np.linalg.solve(A, rhs)
    return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()


def _powers(P):
    """Yield ``(k, P^k)`` for k = 1, 2, 3, 4, 6, 8, 12, ... (ratio about sqrt 2)."""
    half, full, k = None, P, 1
    while k <= _MAX_POWER:
        yield k, full
        if half is not None:
            yield k + k // 2, full @ half
        half, full, k = full, full @ full, 2 * k


@dataclass(frozen=True, eq=False)
class _Contraction:
    """Dobrushin coefficients and Doeblin masses ``sum_j min_i P^k_ij`` of powers of P."""

    powers: np.ndarray
    dobrushin: np.ndarray
    doeblin: np.ndarray

    @classmethod
    def of(cls, P):
        rows = []
        for k, Pk in _powers(P):
            rows.append((k, dobrushin(Pk), doeblin(Pk)))
            if rows[-1][1] < _ETA_FLOOR:
                break
        return cls(*(np.array(col) for col in zip(*rows)))

    def _best(self, values):
        best = int(np.argmin(values))
        return float(values[best]), int(self.powers[best]), float(self.dobrushin[best])

    def theorem1(self, per_step):
        """min over k of Theorem 1 for k steps, ``min(1, k per_step) / (1 - eta_k)``, where
        ``per_step`` bounds the one-step kernel distance. Returns (bound, k, eta_k)."""
        return self._best([stationary_bound(min(1.0, k * per_step), eta) if eta < 1.0
                           else math.inf for k, eta in zip(self.powers, self.dobrushin)])

    def proposition32(self, delta):
        """min over m of ``m delta / (1 - rho_m)`` with A = 1, rho_m = 1 - Doeblin mass."""
        if delta == 0.0:
            return 0.0
        delta = min(delta, 1.0 - 1e-16)
        return self._best([subsampling_bound(delta, 1.0, int(k), 1.0 - mass) if mass > 0.0
                           else math.inf for k, mass in zip(self.powers, self.doeblin)])[0]


@dataclass(frozen=True, eq=False)
class StationaryCheck:
    """An approximate kernel's stationary distribution against the exact one, and the bounds.

    All total variation distances carry the factor 1/2 (largest difference of
    probabilities). Bounds of 1 or more say nothing.

    Attributes
    ----------
    test : str
        The approximate test, and how its acceptance probabilities were obtained.
    grid, exact, approx : numpy.ndarray
        Grid, stationary distribution of the exact kernel (the posterior on the grid) and
        of the approximate kernel.
    tv : float
        Measured ``d_TV(exact, approx)``.
    delta_max : float
        Largest ``|alpha_tilde - alpha|`` over the pairs (measured).
    kernel_distance : float
        ``max_i ||P(i, .) - P_tilde(i, .)||_TV``, the quantity Theorem 1 needs (at most
        ``delta_max``).
    delta_prior : float
        What the theory promises for ``Delta_max`` before looking at the data:
        ``E(0, m, eps)`` for the sequential test (under its Gaussian model), ``delta`` for
        the confidence test (Lemma 3.1), Novak's bound plus the table's error for the
        Barker test (Seita et al., Corollaries 1-2).
    eta : float
        Dobrushin coefficient of the exact kernel (one step).
    steps, eta_steps : int, float
        The power k of the exact kernel at which :attr:`bound` is attained, and its
        Dobrushin coefficient.
    bound : float
        Theorem 1 (Korattikara et al.; Seita et al., Lemma 5) on k steps with the measured
        kernel distance: ``k kernel_distance / (1 - eta_k)``, minimised over k.
    bound_delta_max : float
        The same with ``Delta_max`` in place of the kernel distance (the theorem as
        stated).
    bound_prior : float
        The same with ``delta_prior``.
    bound_subsampling : float
        Proposition 3.2 (Bardenet et al.), ``A m delta / (1 - rho)`` with ``delta`` the
        measured kernel distance, A = 1 and the Doeblin constant of ``P^m``, minimised
        over m.
    n_tests : int or None
        Simulated tests (paths) per pair, None for the dynamic programme.
    """

    test: str
    grid: np.ndarray
    exact: np.ndarray
    approx: np.ndarray
    tv: float
    delta_max: float
    kernel_distance: float
    delta_prior: float
    eta: float
    steps: int
    eta_steps: float
    bound: float
    bound_delta_max: float
    bound_prior: float
    bound_subsampling: float
    n_tests: int | None

    @property
    def holds(self) -> bool:
        """Whether the measured distance is within Theorem 1's bound."""
        return self.tv <= self.bound

    def __str__(self):
        def fmt(x):
            return "inf" if math.isinf(x) else f"{x:.3g}"

        return "\n".join([
            f"Stationary distribution of {self.test} on a {self.grid.size}-point grid",
            f"  measured d_TV(exact, approximate)  {self.tv:.3g}",
            f"  Theorem 1 on k = {self.steps} steps         {fmt(self.bound)}  "
            f"({'holds' if self.holds else 'VIOLATED'}; eta_k = {self.eta_steps:.3g}, "
            f"one step {self.eta:.3g})",
            f"    with k Delta_max                  {fmt(self.bound_delta_max)}  "
            f"(Delta_max = {self.delta_max:.3g}, kernel distance {self.kernel_distance:.3g})",
            f"    with the a priori Delta_max       {fmt(self.bound_prior)}  "
            f"(Delta_max <= {self.delta_prior:.3g})",
            f"  Proposition 3.2 (A = 1)             {fmt(self.bound_subsampling)}",
        ])

    def plot(self):
        """Both stationary distributions on the grid (top) and their difference (bottom).

        Returns the matplotlib Figure.
        """
        import matplotlib.pyplot as plt

        fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 5), sharex=True,
                                          gridspec_kw={"height_ratios": [2, 1]})
        top.plot(self.grid, self.exact, "k-", lw=1.5, label="exact kernel (posterior)")
        top.plot(self.grid, self.approx, "C1--", lw=1.5, label="approximate kernel")
        top.set_ylabel("probability")
        top.set_title(f"{self.test}\nd_TV = {self.tv:.2g}, Theorem 1 bound {self.bound:.2g}",
                      fontsize="small")
        top.legend(fontsize="small")
        bottom.plot(self.grid, self.approx - self.exact, "C1-")
        bottom.axhline(0.0, color="0.5", lw=0.8)
        bottom.set_xlabel("theta")
        bottom.set_ylabel("approx - exact")
        fig.tight_layout()
        return fig


def _label(test, method):
    return f"{test!r} [{'dynamic programme' if method == 'dp' else 'simulation'}]"


def stationary_check(grid_chain, test, *, method=None, n_tests=2000, rng=None) -> StationaryCheck:
    """Stationary distribution of an approximate test's kernel against the exact one.

    Parameters
    ----------
    grid_chain : GridChain
        The discretised model and proposal.
    test : samplers.IntervalTest or FixedBatchBarker
        The approximate test: an interval test (:class:`~samplers.AustereTest`,
        :class:`~samplers.ConfidenceTest`, :class:`~samplers.FPCNormalTest`, ...), asked
        for its radius and stage sizes (``path_spec``), its a priori error
        (``a_priori_error``) and whether the dynamic programme models it
        (``design_parameters``); or a :class:`FixedBatchBarker`.
    method : {"dp", "simulation"}, optional
        How the test's acceptance probability at each pair is obtained. ``"dp"`` (the
        default for tests with ``design_parameters``, e.g. :class:`~samplers.AustereTest`):
        ``Pa + Delta`` with Delta from the dynamic programme (:func:`design.acceptance_error`
        with normal thresholds, the closer model of Algorithm 1), which assumes Gaussian
        minibatch statistics. ``"simulation"`` (the only choice for the others): the real
        test run on the real l_i of the pair, ``n_tests`` times.
    n_tests : int
        Simulated tests per pair.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    StationaryCheck

    Notes
    -----
    Simulation of the sequential tests integrates u out exactly: for one random order of
    the rows, the thresholds mu0 that the test accepts form a half-line (below a path
    threshold tau, ``validation._kernels``), so ``P(accept | path) = min(1, exp(N tau +
    c))``. The Barker test is simulated by :func:`design.acceptance.barker_acceptance`.
    The exact kernel is Metropolis-Hastings for the sequential tests and Barker's for the
    Barker test; both leave the grid posterior invariant.

    The bounds. One step of a random walk rarely contracts (Dobrushin's coefficient of a
    local kernel is 1), so Theorem 1 is applied to k steps: ``S_eps`` is also stationary
    for ``T_eps^k``, ``||T_0^k - T_eps^k|| <= k Delta_max`` and ``T_0^k`` contracts with
    ``eta_k``; the reported bound is the best over k on a sqrt(2)-spaced ladder.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import AustereTest, GaussianMean
    >>> from validation import GridChain, stationary_check
    >>> model = GaussianMean(np.random.default_rng(30).normal(size=1000))
    >>> mean, sd = model.posterior()
    >>> grid = GridChain(model, mean + np.linspace(-4, 4, 17) * sd, proposal_sd=sd)
    >>> res = stationary_check(grid, AustereTest(m=50, epsilon=0.005))
    >>> round(res.tv, 4), round(res.bound, 3), res.holds
    (0.0046, 0.052, True)
    """
    if not isinstance(grid_chain, GridChain):
        raise TypeError(f"grid_chain must be a GridChain, got {type(grid_chain).__name__}")
    n_tests = check_int("n_tests", n_tests, low=10)
    rng = as_generator(rng)
    g = grid_chain
    if isinstance(test, FixedBatchBarker):
        if method not in (None, "simulation"):
            raise ValueError(f"method must be 'simulation' for a FixedBatchBarker, got "
                             f"{method!r}")
        if test.batch_size > g.N:
            raise ValueError(f"batch_size must be <= N = {g.N}, got {test.batch_size}")
        method = "simulation"
        accept, prior = _barker(g, test, n_tests, rng)
        rule = "barker"
    elif callable(getattr(test, "path_spec", None)):
        # An interval test (samplers.IntervalTest): what it needs is asked from the test.
        dp = test.design_parameters()
        method = ("dp" if dp is not None else "simulation") if method is None else method
        allowed = "'dp' or 'simulation'" if dp is not None else "'simulation'"
        if method not in (("dp", "simulation") if dp is not None else ("simulation",)):
            raise ValueError(f"method must be {allowed} for a {type(test).__name__}, "
                             f"got {method!r}")
        m = getattr(test, "m", None)
        if m is not None and m > g.N:
            raise ValueError(f"test.m must be <= N = {g.N}, got {m}")
        prior = test.a_priori_error(g.N)
        accept = _dp(g, *dp) if method == "dp" else _paths(g, test, n_tests, rng)
        rule = "metropolis"
    else:
        raise TypeError(f"test must be an AustereTest, ConfidenceTest or FixedBatchBarker "
                        f"(or any interval test: one with a path_spec method), got "
                        f"{type(test).__name__}")

    exact_accept = g.exact_accept(rule)
    accept = np.clip(accept, 0.0, 1.0)
    P, P_tilde = g.kernel(exact_accept), g.kernel(accept)
    approx = stationary_distribution(P_tilde)
    approx.setflags(write=False)
    delta = float(np.abs(accept - exact_accept).max())
    distance = 0.5 * float(np.abs(P_tilde - P).sum(axis=1).max())
    contraction = _Contraction.of(P)
    bound, steps, eta_steps = contraction.theorem1(distance)
    return StationaryCheck(
        test=_label(test, method), grid=g.grid, exact=g.target, approx=approx,
        tv=0.5 * float(np.abs(approx - g.target).sum()), delta_max=delta,
        kernel_distance=distance, delta_prior=float(prior),
        eta=float(contraction.dobrushin[0]), steps=steps, eta_steps=eta_steps, bound=bound,
        bound_delta_max=contraction.theorem1(delta)[0],
        bound_prior=contraction.theorem1(min(prior, 1.0))[0],
        bound_subsampling=contraction.proposition32(distance),
        n_tests=None if method == "dp" else n_tests)


def _dp(g, m, epsilon):
    """``Pa + Delta`` with Delta from the dynamic programme (normal thresholds)."""
    from design import TrialChain, acceptance_error

    tc = TrialChain(mu=[p.mean for p in g.populations], sigma=[p.sd for p in g.populations],
                    c0=-g.log_const / g.N, N=g.N)
    err = acceptance_error(tc, m=m, epsilon=epsilon, threshold="normal")
    return g.exact_accept() + err.delta


def _paths(g, test, n_tests, rng):
    """The real test on each pair's l_i with u integrated out (path thresholds)."""
    order = new_order(g.N)
    tau = np.empty(n_tests)
    accept = np.empty(g.n_pairs)
    bound = getattr(g.model, "loglik_ratio_bound", None)
    span = getattr(g.model, "loglik_ratio_range", None)  # (center, half-width), as the test
    for p in range(g.n_pairs):
        l = g.ratios(p)
        model_range = getattr(test, "range", None) == "model"
        if model_range and span is not None:
            C = float(span(*g.theta_pair(p))[1])
        elif model_range and bound is not None:
            C = float(bound(*g.theta_pair(p)))
        else:
            C = float(np.abs(l).max())
        spec = test.path_spec(g.N, C=C)
        path_thresholds(spec.radius, spec.grow)(l, order, spec.settings, rng, tau)
        accept[p] = np.mean(np.exp(np.minimum(g.N * tau + g.log_const[p], 0.0)))
    return accept


def _barker(g, test, n_tests, rng):
    from design.acceptance import barker_acceptance

    table = test.correction()
    accept = np.array([
        barker_acceptance(g.ratios(p), test.batch_size, log_const=float(g.log_const[p]),
                          table=table, fpc=test.fpc, n_tests=n_tests, rng=rng).probability
        for p in range(g.n_pairs)])
    prior = max(pop.novak(test.batch_size) for pop in g.populations) + table.linf_error
    return accept, prior
