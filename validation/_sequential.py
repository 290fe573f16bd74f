"""The real sequential t-test on the real l_i, against the dynamic programme's prediction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from samplers import AustereTest
from design._lib.checks import as_generator, check_finite_array, check_int, check_interval
from design._lib.rows import new_order

from ._kernels import repeated_decisions
from ._ratios import CHUNK, Population, loglik_ratios

__all__ = ["SequentialCheck", "sequential_check"]

DEFAULT_MU_STD = (-5.0, -2.0, -1.0, 0.0, 1.0, 2.0, 5.0)


@dataclass(frozen=True, eq=False)
class SequentialCheck:
    """Error and data use of the real sequential t-test beside the dynamic programme's.

    Array fields have one entry per standardized mean.

    Attributes
    ----------
    mu_std : numpy.ndarray
        Standardized means ``(mu - mu0) sqrt(N - 1) / sigma`` at which the test was run.
    error, error_se : numpy.ndarray
        Simulated probability that the test stops early on the wrong side of mu0 (at
        ``mu_std = 0``: stops early below, the convention of
        :func:`design.sequential_error`), and its standard error.
    predicted_error : numpy.ndarray
        ``E(|mu_std|, m, eps)`` from :func:`design.sequential_error`.
    data_fraction, data_fraction_se, predicted_data_fraction : numpy.ndarray
        Mean fraction of the N rows read: simulated, its standard error, predicted.
    gap : numpy.ndarray
        ``error - predicted_error``.
    agrees : bool
        Every ``|gap|`` is at most ``tolerance``.
    m, epsilon, threshold, prediction_threshold, N, n_tests, tolerance
        The test (minibatch size, per-stage error, critical values of the real test), the
        threshold model of the prediction, the population size, the tests simulated per
        standardized mean, and the tolerance on the gap.
    skewness, excess_kurtosis : float
        Of the l_i.
    """

    mu_std: np.ndarray
    error: np.ndarray
    error_se: np.ndarray
    predicted_error: np.ndarray
    data_fraction: np.ndarray
    data_fraction_se: np.ndarray
    predicted_data_fraction: np.ndarray
    gap: np.ndarray
    agrees: bool
    m: int
    epsilon: float
    threshold: str
    prediction_threshold: str
    N: int
    n_tests: int
    tolerance: float
    skewness: float
    excess_kurtosis: float

    @property
    def max_gap(self) -> float:
        """The gap of largest magnitude (signed)."""
        return float(self.gap[np.argmax(np.abs(self.gap))])

    def __str__(self):
        lines = [
            f"Real sequential t-test vs the dynamic programme: "
            f"{'AGREE' if self.agrees else 'DISAGREE'} at tolerance {self.tolerance:g}",
            f"  m = {self.m}, epsilon = {self.epsilon:g}, {self.threshold} thresholds "
            f"(predicted with {self.prediction_threshold}), N = {self.N:,}, "
            f"{self.n_tests:,} tests per mu_std",
            f"  l_i: skewness {self.skewness:.3g}, excess kurtosis {self.excess_kurtosis:.3g}",
            "",
            "  mu_std   error (real)         predicted   gap       "
            "data (real)          predicted",
        ]
        for k in range(self.mu_std.size):
            flag = "" if abs(self.gap[k]) <= self.tolerance else "  <-"
            lines.append(
                f"  {self.mu_std[k]:>6.3g}   {self.error[k]:.4f} ± {self.error_se[k]:.4f}"
                f"      {self.predicted_error[k]:.4f}   {self.gap[k]:+.4f}   "
                f"{self.data_fraction[k]:.4f} ± {self.data_fraction_se[k]:.4f}      "
                f"{self.predicted_data_fraction[k]:.4f}{flag}")
        return "\n".join(lines)

    def plot(self):
        """Error and data use against mu_std: simulation (points, 2 SE bars) and the DP
        prediction (line). Returns the matplotlib Figure."""
        import matplotlib.pyplot as plt

        from design import sequential_error

        dense = np.linspace(self.mu_std.min(), self.mu_std.max(), 201)
        pred = sequential_error(dense, m=self.m, epsilon=self.epsilon, N=self.N,
                                threshold=self.prediction_threshold)
        fig, (ax_e, ax_d) = plt.subplots(1, 2, figsize=(10, 4))
        for ax, sim, se, curve, label in (
                (ax_e, self.error, self.error_se, pred.error, "error E"),
                (ax_d, self.data_fraction, self.data_fraction_se, pred.data_fraction,
                 "fraction of data used")):
            ax.plot(dense, curve, "k-", lw=1.2, label="dynamic programme")
            ax.errorbar(self.mu_std, sim, yerr=2 * se, fmt="o", color="C3", ms=4,
                        capsize=2, label="real test, real l_i")
            ax.set_xlabel("standardized mean mu_std")
            ax.set_ylabel(label)
            ax.legend(fontsize="small")
        fig.suptitle(f"sequential t-test, m = {self.m}, epsilon = {self.epsilon:g}, "
                     f"skewness of l_i {self.skewness:.3g}", fontsize="small")
        fig.tight_layout()
        return fig


def sequential_check(source, pair=None, *, m, epsilon, mu_std=DEFAULT_MU_STD,
                     n_tests=10_000, threshold="t", prediction_threshold="normal",
                     tolerance=0.05, chunk=CHUNK, rng=None) -> SequentialCheck:
    """Run the real sequential t-test on real l_i and compare with its predicted error.

    :func:`design.sequential_error` predicts the error and data use of the test of
    Korattikara et al. (2014, Algorithm 1) from a Gaussian model of its statistic, which
    depends on the l_i only through the standardized mean. This runs the very compiled test
    loop a chain runs (:class:`samplers.AustereTest`), ``n_tests`` times per standardized
    mean, on the actual population of l_i with the threshold ``mu0`` set to give each
    ``mu_std``, and reports the gap.

    Parameters
    ----------
    source : Model or array_like
        A model (then ``pair`` is required) or the vector of N l_i.
    pair : (theta, theta_new), optional
        The pair whose l_i to use (one O(N) pass over the data).
    m : int
        Minibatch size, ``2 <= m <= N``.
    epsilon : float
        Per-stage error, in (0, 0.5).
    mu_std : array_like
        Standardized means ``(mu - mu0) sqrt(N - 1) / sigma``; both signs, since on skewed
        data the error is not even in mu_std.
    n_tests : int
        Tests simulated per standardized mean.
    threshold : {"t", "normal"}
        Critical values of the real test (``"t"``: Algorithm 1).
    prediction_threshold : {"normal", "t"}
        Threshold model of the prediction; ``"normal"`` is the closer model of Algorithm 1
        (see :meth:`samplers.AustereTest.from_design`).
    tolerance : float
        Largest acceptable ``|gap|`` in the error probability, in (0, 1); the default is
        :func:`clt_check`'s on the same probability scale. The skewness of 2.8 that the
        (mean, log sd) model gives Gaussian data moves E by up to 0.03 at m = 500; the
        lognormal data of Bardenet et al. by 0.2-0.7.
    chunk : int
        Rows per model call when computing the l_i.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    SequentialCheck

    Examples
    --------
    >>> import numpy as np
    >>> from validation import sequential_check
    >>> l = np.random.default_rng(0).normal(size=10_000)
    >>> res = sequential_check(l, m=500, epsilon=0.05, mu_std=[0.0, 2.0], n_tests=4000,
    ...                        rng=1)
    >>> res.agrees, res.predicted_error.round(3)
    (True, array([0.282, 0.031]))
    """
    from design import sequential_error

    if pair is None:
        l = check_finite_array("l", source, ndim=1)
    else:
        try:
            theta, theta_new = pair
        except (TypeError, ValueError):
            raise TypeError("pair must be (theta, theta_new)") from None
        l = loglik_ratios(source, theta, theta_new, chunk=chunk)
    N = l.shape[0]
    if N < 4:
        raise ValueError(f"the population must have at least 4 values, got N = {N}")
    m = check_int("m", m, low=2, high=N)
    epsilon = check_interval("epsilon", epsilon, 0.0, 0.5)
    for name, value in (("threshold", threshold), ("prediction_threshold",
                                                    prediction_threshold)):
        if value not in ("t", "normal"):
            raise ValueError(f"{name} must be 't' or 'normal', got {value!r}")
    mus = check_finite_array("mu_std", mu_std, ndim=(0, 1)).reshape(-1)
    if mus.size == 0:
        raise ValueError("mu_std must hold at least one value")
    n_tests = check_int("n_tests", n_tests, low=10)
    tolerance = check_interval("tolerance", tolerance, 0.0, 1.0)
    rng = as_generator(rng)

    pop = Population.of(l)
    run = repeated_decisions(AustereTest(m=m, epsilon=epsilon, threshold=threshold)
                             .engine_spec(N))
    order = new_order(N)
    accepted = np.empty(n_tests, dtype=np.bool_)
    exact = np.empty(n_tests, dtype=np.bool_)
    used = np.empty(n_tests, dtype=np.int64)
    error, error_se, frac, frac_se = (np.empty(mus.size) for _ in range(4))
    for k, x in enumerate(mus):
        mu0 = pop.mean - x * pop.sd / math.sqrt(N - 1.0)
        run(l, order, pop.mean, mu0, 0.0, rng, accepted, exact, used)
        wrong = (used < N) & (~accepted if x >= 0 else accepted)
        error[k] = wrong.mean()
        error_se[k] = math.sqrt(max(error[k] * (1 - error[k]), 1.0 / n_tests) / n_tests)
        frac[k] = used.mean() / N
        frac_se[k] = used.std() / N / math.sqrt(n_tests)
    pred = sequential_error(mus, m=m, epsilon=epsilon, N=N, threshold=prediction_threshold)
    predicted_error = np.array(pred.error, dtype=float).reshape(-1)
    predicted_frac = np.array(pred.data_fraction, dtype=float).reshape(-1)
    gap = error - predicted_error
    arrays = (mus, error, error_se, predicted_error, frac, frac_se, predicted_frac, gap)
    for a in arrays:
        a.setflags(write=False)
    return SequentialCheck(
        *arrays, agrees=bool(np.all(np.abs(gap) <= tolerance)), m=m, epsilon=epsilon,
        threshold=threshold, prediction_threshold=prediction_threshold, N=N,
        n_tests=n_tests, tolerance=tolerance, skewness=pop.skewness,
        excess_kurtosis=pop.excess_kurtosis)
