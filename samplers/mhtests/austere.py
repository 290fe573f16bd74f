"""The sequential t-test of Korattikara, Chen & Welling (2014), Algorithm 1."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import special

from design._lib.checks import check_int, check_interval
from design._lib.jit import jit
from design._lib.rules import austere_se

from ..priors import pairwise_sum
from .base import IntervalTest, design_for
from .status import NEED_MORE, NONFINITE

__all__ = ["AustereInfo", "AustereSettings", "AustereTest"]


class AustereSettings(NamedTuple):
    """The settings of one decision: rows per stage and the critical values of ``|t|`` by
    stage (grown by doubling when a decision outlasts them)."""

    m: int
    crit: np.ndarray


class AustereInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Mean of the l_i the decision read (at the stage where it stopped).
    mean: float
    #: Their standard deviation (divisor n) (a decision with ``n_used = N`` is exact). With
    #: ``mean`` and the chain's ``log_const`` this gives the
    #: decision's estimated error (:attr:`samplers.Chain.acceptance_errors`).
    sd: float
    #: Mean of the first ``m`` rows: read by every decision, so not selected by the
    #: stopping rule (``mean`` is); a diagnostic of the selection (the error estimate uses
    #: the likelihood of all rows read, which the stopping rule does not bias).
    first_mean: float


#: Stages of critical values computed at first (the table grows by doubling as needed).
_T_TABLE_STAGES = 4096


@jit
def austere_radius(n, N, stage, mean, m2, settings):
    """``crit[stage - 1] * se`` with ``se`` :func:`~design._lib.rules.austere_se`; infinite
    before any data; :data:`NEED_MORE` past the table of critical values."""
    crit = settings.crit
    if n == 0:
        return math.inf
    if stage > crit.shape[0]:
        return NEED_MORE
    return crit[stage - 1] * austere_se(m2, n, N)


@jit
def stages_of_m(n, N, stage, settings):
    """Every stage reads ``settings.m`` rows."""
    return settings.m


@jit
def austere_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """The info row of a decision (:class:`AustereInfo`; ``_info`` builds it by this very
    function): ``(n_used, n_stages, mean, sd, first_mean)``, the last three NaN after a
    non-finite batch; ``first_mean`` summed as ``np.mean`` sums (pairwise)."""
    info[0], info[1] = n_used, stage
    if status == NONFINITE:
        info[2] = info[3] = info[4] = math.nan
        return
    first = min(settings.m, n_used)
    info[2] = mean
    info[3] = math.sqrt(max(m2, 0.0) / n_used)
    info[4] = pairwise_sum(values[:first]) / first


@dataclass(frozen=True)
class AustereTest(IntervalTest):
    """The approximate MH test of Korattikara, Chen & Welling (2014), Algorithm 1.

    Draws minibatches of ``m`` rows without replacement; after ``n`` rows computes the mean
    ``l_bar`` and sample sd ``s_l`` of the l_i, the standard error with finite-population
    correction ``s = s_l / sqrt(n) * sqrt(1 - (n - 1)/(N - 1))`` and ``t = (l_bar - mu0)/s``.
    It decides (accept iff ``l_bar > mu0``) as soon as ``|t|`` exceeds the critical value
    of a test of level ``epsilon``; when all N rows are used the decision is exact.

    Parameters
    ----------
    m : int
        Minibatch size, ``2 <= m <= N``.
    epsilon : float
        Per-stage error level in (0, 1): the stage decides iff ``1 - F(|t|) < epsilon``.
    threshold : {"t", "normal"}
        ``"t"``: F is the Student-t cdf with ``n - 1`` degrees of freedom (the paper's
        algorithm); ``"normal"``: the standard normal cdf (the paper's error analysis).

    Notes
    -----
    ``mu0 = (log u - c)/N`` with ``c`` the data-free log ratio (prior and proposal terms).
    Critical values are tabulated once per N (``scipy.special.stdtrit``) and extended by
    doubling when a decision outlasts the table. The rule is an interval rule
    (:func:`samplers.mhtests.engine.interval_rule`) with radius ``crit_j s``.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import AustereTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 100_000))
    >>> test = AustereTest(m=500, epsilon=0.05)
    >>> chain = sample(model, test, RandomWalk(0.005), [1.0], 300, rng=2)
    >>> bool(chain.stats["n_used"].mean() < 100_000)
    True
    """

    m: int = 500
    epsilon: float = 0.01
    threshold: str = "t"
    #: The design tolerance (mean |Delta| over pairs) the settings were chosen for, recorded
    #: by :meth:`from_design`; a chain whose estimated mean error exceeds it warns.
    tolerance: float | None = field(default=None, compare=False, repr=False)
    _q_cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    radius = staticmethod(austere_radius)
    grow = staticmethod(stages_of_m)
    info_kernel = staticmethod(austere_info)

    def __post_init__(self):
        object.__setattr__(self, "m", check_int("m", self.m, low=2))
        object.__setattr__(self, "epsilon", check_interval("epsilon", self.epsilon, 0.0, 1.0))
        if self.threshold not in ("t", "normal"):
            raise ValueError(f"threshold must be 't' or 'normal', got {self.threshold!r}")
        if self.tolerance is not None:
            object.__setattr__(self, "tolerance",
                               check_interval("tolerance", self.tolerance, 0.0, 1.0))

    @classmethod
    def from_design(cls, design, *, threshold: str | None = None,
                    allow_mismatch: bool = False) -> "AustereTest":
        """The test a :func:`design.optimize` result prescribes: its ``m``, ``epsilon`` and
        ``threshold``.

        ``design.optimize`` and ``AustereTest`` both default to ``threshold="t"`` (the
        paper's Algorithm 1: Student-t critical values, sample sd), so
        ``AustereTest.from_design(plan)`` and ``AustereTest(m=plan.m, epsilon=plan.epsilon)``
        run the same test, the one the design's error and data use were computed for. The
        design predicts that test with its dynamic programme's Gaussian model and normal
        critical values (``plan.prediction_threshold``), which simulation of the real test
        (``tests/design/reference``) shows predicts Algorithm 1 best. ``threshold``
        overrides the design's; a threshold different from the one the design was made for
        raises ``ValueError`` unless ``allow_mismatch=True``.
        """
        design_for(design, "austere", cls.__name__)
        if threshold is not None and threshold != design.threshold and not allow_mismatch:
            raise ValueError(
                f"threshold={threshold!r} differs from the design's threshold "
                f"{design.threshold!r}: the design's error and data use are for the "
                f"{design.threshold!r} test. Make the design with "
                f"design.optimize(..., threshold={threshold!r}), or pass allow_mismatch=True")
        tolerance = design.tolerance if design.method == "average" else None
        return cls(m=design.m, epsilon=design.epsilon,
                   threshold=design.threshold if threshold is None else threshold,
                   tolerance=tolerance)

    def check(self, view):
        if self.m > view.N:
            raise ValueError(f"m must be <= N = {view.N} (the number of rows), got {self.m}")

    def critical_values(self, N: int, n_stages: int) -> np.ndarray:
        """Critical values of ``|t|`` for the first ``n_stages`` stages (``n_j = min(j m, N)``)."""
        n = np.minimum(np.arange(1, n_stages + 1) * self.m, N)
        if self.threshold == "normal":
            return np.full(n.shape, special.ndtri(1.0 - self.epsilon))
        return special.stdtrit(n - 1, 1.0 - self.epsilon)

    def _table(self, N, stages):
        """Critical values for at least ``stages`` stages (cached per N, grown by doubling)."""
        table = self._q_cache.get(N)
        if table is None or table.shape[0] < stages:
            total = -(-N // self.m)
            size = min(total, max(stages, _T_TABLE_STAGES,
                                  2 * (0 if table is None else table.shape[0])))
            table = self.critical_values(N, size)
            self._q_cache[N] = table
        return table

    # -- the engine's hooks ----------------------------------------------------------------

    def _settings(self, view, theta, theta_new, log_const):
        return AustereSettings(self.m, self._table(view.N, 1))

    def _more_settings(self, N, stage, settings):
        return AustereSettings(self.m, self._table(N, stage))

    def _vector_settings(self, N, C, log_const):
        return AustereSettings(self.m, self.critical_values(N, -(-N // self.m)))

    def design_parameters(self):
        return self.m, self.epsilon

    def a_priori_error(self, N):
        """``E(0, m, epsilon)`` of the dynamic programme with normal thresholds (the closer
        model of Algorithm 1, a design's ``prediction_threshold``, see :meth:`from_design`)."""
        from design import sequential_error

        return float(sequential_error(0.0, m=self.m, epsilon=self.epsilon, N=N,
                                      threshold="normal").error)

    def null_info(self):
        return AustereInfo(0, 0, math.nan, math.nan, math.nan)

    def decision_errors(self, stats, N):
        """Estimated ``|Delta|`` of each decision: Korattikara et al.'s Eq. 6 with the design's
        dynamic programme at the decision's ``sd`` of the l_i, averaged over the posterior
        of ``mu`` given the rows it read (:func:`design.decision_errors`; a decision that
        read all N rows gives its pair's error at the exact ``mu``); 0 for steps the prior
        rejected."""
        from design import decision_errors

        sd = np.asarray(stats["sd"], dtype=float)
        prior_rejected = ~np.isfinite(stats["log_const"])
        c = np.where(prior_rejected, 0.0, stats["log_const"])
        out = decision_errors(np.nan_to_num(stats["mean"]), np.where(prior_rejected, 0.0, sd),
                              stats["n_used"], c,
                              N=N, m=min(self.m, N), epsilon=min(self.epsilon, 0.5 - 1e-12),
                              threshold="normal")
        out[prior_rejected] = 0.0
        return out
