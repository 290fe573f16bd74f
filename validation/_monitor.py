"""The bias monitor of an approximate chain."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from samplers import BiasWarning

from ._bounds import stationary_bound

__all__ = ["BiasMonitor", "bias_monitor"]


@dataclass(frozen=True)
class BiasMonitor:
    """What a chain's own decisions say about its error.

    Attributes
    ----------
    running_error : numpy.ndarray
        Running mean of the estimated ``|Delta|`` of the decisions (one entry per step).
    mean_error : float
        Its final value: the estimated mean error in the acceptance probability, the
        quantity an average-error design bounds by its tolerance.
    mean_error_se : float
        Monte Carlo standard error of ``mean_error`` (batch means along the chain).
    max_error : float
        The largest estimated ``|Delta|`` of a decision.
    autocorrelation_time : float
        Integrated autocorrelation time ``tau`` of the chain (largest over coordinates).
    lag : int
        ``k = ceil(tau)``: the bound compares ``k``-step kernels.
    contraction : float
        Estimated contraction ``eta_k = rho^k`` of the ``k``-step exact kernel, ``rho =
        (tau - 1) / (tau + 1)`` the lag-one autocorrelation of the AR(1) process with the
        same ``tau``.
    stationary_bound : float
        ``min(1, k mean_error) / (1 - eta_k)`` (:func:`validation.stationary_bound`).
    tolerance : float or None
        The design tolerance the test was made for.
    exceeded : bool
        Whether ``mean_error`` exceeds ``tolerance`` by more than 2 ``mean_error_se``
        (the rule of the chain's :class:`samplers.BiasWarning`).
    """

    running_error: np.ndarray
    mean_error: float
    mean_error_se: float
    max_error: float
    autocorrelation_time: float
    lag: int
    contraction: float
    stationary_bound: float
    tolerance: float | None
    exceeded: bool

    def __repr__(self):
        tol = "" if self.tolerance is None else f", tolerance={self.tolerance:g}"
        return (f"BiasMonitor(mean_error={self.mean_error:.3g} +- {self.mean_error_se:.2g}, "
                f"max_error={self.max_error:.3g}, "
                f"lag={self.lag}, contraction={self.contraction:.3g}, "
                f"stationary_bound={self.stationary_bound:.3g}{tol}, exceeded={self.exceeded})")


def _autocorrelation_time(x):
    """Integrated autocorrelation time of a 1-d series (Sokal's window, c = 5)."""
    n = x.shape[0]
    x = x - x.mean()
    if n < 4 or not np.any(x):
        return 1.0
    f = np.fft.rfft(x, n=2 * n)
    acf = np.fft.irfft(f * np.conj(f))[:n]
    acf /= acf[0]
    taus = 2.0 * np.cumsum(acf) - 1.0
    window = np.arange(n) >= 5.0 * taus
    m = int(np.argmax(window)) if window.any() else n - 1
    return max(float(taus[m]), 1.0)


def bias_monitor(chain, *, warn=False) -> BiasMonitor:
    """Estimated error of an approximate chain's decisions and a bound on its stationary error.

    Parameters
    ----------
    chain : samplers.Chain
        A chain whose test gives per-decision error estimates
        (:attr:`samplers.Chain.acceptance_errors`: :class:`samplers.AustereTest`,
        :class:`samplers.BarkerTest`, :class:`samplers.ConfidenceTest`).
    warn : bool
        Warn (:class:`samplers.BiasWarning`) when the mean error exceeds the tolerance the
        test was designed for (:func:`samplers.sample` already warns once per chain).

    Returns
    -------
    BiasMonitor

    Notes
    -----
    Each decision's ``|Delta|`` is estimated from what it computed (see
    :meth:`samplers.AustereTest.decision_errors`); their mean is the estimated average
    error that an average-error design (Korattikara et al. 2014, Eq. 7) keeps below its
    tolerance. Theorem 1 of Korattikara et al. bounds the stationary total-variation error
    by ``Delta_max / (1 - eta)`` for a kernel contracting by ``eta``; a random walk's
    one-step coefficient is 1, so the bound is applied to ``k``-step kernels (distance at
    most ``k Delta``), with ``eta_k`` estimated from the chain's autocorrelation time as
    for an AR(1) process. Both substitutions (the mean error for the supremum, the
    autocorrelation for the total-variation contraction) make this an estimate, not a
    guarantee: it is meant to flag a chain whose decisions err more than designed.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import AustereTest, GaussianMean, RandomWalk, sample
    >>> from validation import bias_monitor
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 20_000))
    >>> chain = sample(model, AustereTest(m=200, epsilon=0.05), RandomWalk(0.01), [1.0], 300,
    ...                rng=1)
    >>> mon = bias_monitor(chain)
    >>> bool(0.0 <= mon.mean_error <= mon.max_error <= 1.0)
    True
    """
    errors = getattr(chain, "acceptance_errors", None)
    if errors is None:
        raise TypeError(f"bias_monitor needs a chain whose test estimates its decisions' errors "
                        f"(AustereTest, BarkerTest, ConfidenceTest), got a chain of "
                        f"{type(chain.test).__name__}"
                        if hasattr(chain, "test") else
                        f"chain must be a samplers.Chain, got {type(chain).__name__}")
    running = chain.running_error
    mean_error = float(running[-1])
    tau = max(_autocorrelation_time(np.asarray(col, dtype=float)) for col in chain.samples.T)
    lag = int(math.ceil(tau))
    rho = (tau - 1.0) / (tau + 1.0)
    eta = rho ** lag
    bound = stationary_bound(min(1.0, lag * mean_error), eta)
    tolerance = getattr(chain.test, "tolerance", None)
    se = chain.acceptance_error_se
    exceeded = chain.bias_exceeded
    if warn and exceeded:
        warnings.warn(f"estimated mean error {mean_error:.3g} (standard error {se:.2g}) exceeds "
                      f"the design tolerance {tolerance:g}", BiasWarning, stacklevel=2)
    return BiasMonitor(running, mean_error, se, float(np.max(np.abs(errors))), tau, lag, eta,
                       bound, tolerance, bool(exceeded))
