"""Estimated error of each decision a chain made with the sequential t-test (issue 17, part 3).

A chain that runs :class:`samplers.AustereTest` records, per decision, the mean ``lbar`` and
sd ``s`` of the l_i it read and the data-free log ratio ``c``. :func:`decision_errors` turns
them into the estimated error ``Delta`` in the acceptance probability of that transition,
the quantity the design's tolerance bounds, by evaluating Korattikara et al.'s Eq. 6 with
the dynamic programme's error ``E(mu_std)`` (:func:`design.sequential_error`) at the
decision's estimates in place of the pair's true ``mu`` and ``sigma``.
"""

from __future__ import annotations

import math

import numpy as np

from ._lib.checks import check_int, check_interval
from ._lib.jit import jit
from ._sequential import sequential_error

__all__ = ["decision_errors"]

#: Grid points of the tabulated E(mu_std) on [0, edge].
_GRID = 1201


@jit
def _exp_linear(alpha, beta, kappa, y0, y1):
    """``int_{y0}^{y1} (alpha + beta y) kappa exp(-kappa y) dy`` in closed form."""
    e0 = math.exp(-kappa * y0)
    e1 = math.exp(-kappa * y1) if y1 < math.inf else 0.0
    return ((alpha + beta * y0) * e0 - ((alpha + beta * y1) * e1 if e1 > 0.0 else 0.0)
            + beta / kappa * (e0 - e1))


@jit
def _signed_error(mu_c, kappa, grid, err):
    """Eq. 6 for one pair: ``int E(|x|) w(x)`` over the side where exact MH rejects
    (``x < 0``) minus the side where it accepts, ``w(x) = kappa exp(kappa (mu_c - x))`` on
    ``[mu_c, inf)``, ``E`` linear between the grid points of ``|x|`` and 0 beyond them."""
    n = grid.shape[0]
    h = grid[1] - grid[0]
    reach = 46.0 / kappa            # exp(-46): the weight is negligible beyond mu_c + reach
    total = 0.0
    # accept side: x = |x| in cell [grid[j], grid[j+1]], x >= max(mu_c, 0)
    j = max(0, int(math.floor(mu_c / h))) if mu_c > 0.0 else 0
    while j < n - 1:
        a, b = grid[j], grid[j + 1]
        lo = max(a, mu_c)
        if lo - mu_c > reach:
            break
        if b > lo:
            slope = (err[j + 1] - err[j]) / h
            at0 = err[j] - slope * a                       # E = at0 + slope x
            total -= _exp_linear(at0 + slope * mu_c, slope, kappa, lo - mu_c, b - mu_c)
        j += 1
    if mu_c < 0.0:  # reject side: x = -|x| in [mu_c, 0]
        j = max(0, int(math.floor((-mu_c - reach) / h)))
        while j < n - 1:
            a, b = grid[j], grid[j + 1]
            lo, hi = max(-b, mu_c), -a
            if hi <= lo:
                break
            slope = (err[j + 1] - err[j]) / h
            at0 = err[j] - slope * a                       # E = at0 - slope x
            total += _exp_linear(at0 - slope * mu_c, -slope, kappa, lo - mu_c, hi - mu_c)
            j += 1
    return total


#: Gauss-Hermite rule for the average over the posterior of mu.
_GH_X, _GH_W = np.polynomial.hermite.hermgauss(24)


@jit
def _errors(mean, sd, n_used, log_const, N, absolute, prior_mean, prior_var, grid, err,
            gh_x, gh_w, out):
    scale = math.sqrt(N - 1.0)
    for k in range(mean.shape[0]):
        n = n_used[k]
        if n >= N or sd[k] == 0.0:
            out[k] = 0.0
            continue
        if not (sd[k] > 0.0 and math.isfinite(mean[k]) and math.isfinite(log_const[k])):
            out[k] = math.nan
            continue
        kappa = N * sd[k] / scale
        # standardized estimate of mu_c and its sampling variance (N - n) / n
        x = (mean[k] + log_const[k] / N) * scale / sd[k]
        v = (N - n) / n
        prec = 1.0 / v + 1.0 / prior_var
        post_mean = (x / v + prior_mean / prior_var) / prec
        post_sd = math.sqrt(1.0 / prec)
        total = 0.0
        for i in range(gh_x.shape[0]):
            d = _signed_error(post_mean + math.sqrt(2.0) * post_sd * gh_x[i], kappa, grid, err)
            total += gh_w[i] * (abs(d) if absolute else d)
        out[k] = total / math.sqrt(math.pi)
    return out


def _prior(first_mean, sd, n_used, log_const, N, m):
    """Gaussian prior of the standardized ``mu_c`` over the chain's pairs, by moments of the
    first-stage means (read by every decision, so unselected): their spread minus their
    sampling variance ``(N - m) / m``."""
    ok = (n_used < N) & (sd > 0) & np.isfinite(first_mean) & np.isfinite(log_const)
    if ok.sum() < 2:
        return 0.0, 1e12
    x = (first_mean[ok] + log_const[ok] / N) * math.sqrt(N - 1.0) / sd[ok]
    v = np.full(x.shape, (N - m) / m)
    spread = float(np.var(x)) - float(np.mean(v))
    return float(np.mean(x)), max(spread, 1e-2 * float(np.mean(v)), 1e-6)


def decision_errors(mean, sd, n_used, log_const, *, first_mean, N, m, epsilon,
                    threshold="normal", absolute=True):
    """Estimated error ``|Delta|``, ``Delta = P_test(accept) - P_exact(accept)``, of each
    decision a chain made with the sequential t-test.

    Parameters
    ----------
    mean, sd : array_like
        Mean and standard deviation (divisor n) of the l_i each decision read.
    n_used : array_like
        Rows each decision read; a decision that read all N is exact (error 0).
    log_const : array_like
        The data-free log ratio ``c`` of each decision (``mu0(u) = (log u - c) / N``).
    first_mean : array_like
        Mean of the first ``m`` rows of each decision (unselected by the stopping rule).
    N, m, epsilon, threshold
        The data size and the test's settings (see :func:`sequential_error`).
    absolute : bool
        Return the posterior mean of ``|Delta|`` (default) or of the signed ``Delta``.

    Returns
    -------
    numpy.ndarray
        Per decision (0 for exact ones, NaN where the inputs are not finite).

    Notes
    -----
    Korattikara et al. (2014), Eq. 6: with ``mu_std(u) = (mu - mu0(u)) sqrt(N - 1) / sigma``
    the test errs with probability ``E(mu_std(u))``, so

        Delta = int_{exact rejects} E du - int_{exact accepts} E du,

    integrated over ``u`` in ``x = mu_std``, where ``u ~ U(0, 1)`` gives the density
    ``kappa exp(kappa (mu_c - x))`` on ``[mu_c, inf)``, ``kappa = N sigma / sqrt(N - 1)``
    and ``mu_c = (mu + c / N) sqrt(N - 1) / sigma``. ``E`` is tabulated once by the dynamic
    programme on a grid of ``|x|`` and taken linear between grid points, so each evaluation
    costs O(grid cells under the weight) in closed form.

    ``sigma`` is replaced by the decision's ``sd``, but ``mu`` is not replaced by its
    ``mean``: the test stopped at the stage where ``|mean - mu0|`` was large, so the
    mean read at stopping is selected (plugging it in underestimated the simulated error
    2-3 fold on a logistic regression, and the spread of the stopping means over a chain
    is twice their nominal sampling variance). Instead ``Delta`` is averaged over the
    posterior of the standardized ``mu_c`` given the rows read: the sampling model
    ``x ~ N(mu_c, (N - n) / n)`` of the decision's standardized mean and a Gaussian prior
    for ``mu_c`` over the chain's pairs, fitted by moments to the first-stage means, which
    every decision reads and no stopping rule selects (empirical Bayes; 24-point
    Gauss-Hermite). A posterior does not depend on the stopping rule (the likelihood of the
    rows read is the same whatever rule stopped the reading), so with a correct prior the
    chain's average of these posterior means estimates the average of ``|Delta|`` over its
    pairs without the selection; the residual is the Gaussian prior's and the DP's
    Gaussian model's error (measured in ``benchmarks/bias_monitor.py``).

    Examples
    --------
    >>> import numpy as np
    >>> from design import decision_errors
    >>> d = decision_errors([0.0, 1e-4, 0.0], [1e-3, 1e-3, 1e-3], [500, 500, 100_000],
    ...                     [0.0, 0.0, 0.0], first_mean=[0.0, 1e-4, 0.0], N=100_000, m=500,
    ...                     epsilon=0.05)
    >>> bool(d[0] > d[1] > 0.0), float(d[2])
    (True, 0.0)
    """
    N = check_int("N", N, low=2)
    m = check_int("m", m, low=2)
    epsilon = check_interval("epsilon", epsilon, 0.0, 0.5)
    mean, sd, used, c, first = (np.ascontiguousarray(a, dtype=np.float64).ravel()
                                for a in (mean, sd, n_used, log_const, first_mean))
    if not (mean.shape == sd.shape == used.shape == c.shape == first.shape):
        raise ValueError(f"mean, sd, n_used and log_const must have one entry per decision, "
                         f"got shapes {mean.shape}, {sd.shape}, {used.shape}, {c.shape}")
    grid, err = error_table(N, m, epsilon, threshold)
    prior_mean, prior_var = _prior(first, sd, used, c, float(N), float(m))
    return _errors(mean, sd, used, c, float(N), bool(absolute), prior_mean, prior_var, grid,
                   err, _GH_X, _GH_W, np.empty_like(mean))


_TABLES: dict = {}


def error_table(N, m, epsilon, threshold):
    """``(grid, E)``: the DP's error on ``|mu_std|`` in [0, edge], cached per setting."""
    key = (N, m, epsilon, threshold)
    if key not in _TABLES:
        from ._acceptance_error import mu_table_edge

        edge = mu_table_edge(N, m, epsilon, threshold)
        grid = np.linspace(0.0, edge, _GRID)
        err = np.asarray(sequential_error(grid, m=m, epsilon=epsilon, N=N,
                                          threshold=threshold).error, dtype=np.float64)
        _TABLES[key] = (grid, err)
    return _TABLES[key]
