"""The minibatch Barker test (MHminibatch) of Seita, Pan, Chen & Canny (2017)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

import numpy as np

from design._lib.checks import check_int, check_interval
from design._lib.jit import jit
from design._lib.moments import abs_central_sums
from design._lib.rules import barker_skew, barker_variance, novak_error, novak_lower_bound

from .barker_presized import presized_epilogue, presized_info, presized_rule
from .base import SequentialTest, design_for
from .status import GROW, RUN

__all__ = ["BarkerInfo", "BarkerSettings", "BarkerTest", "barker_stage"]

#: Stopping statuses of the Barker rule: enough rows read, or all N (the exact test).
STOP, EXACT = 1, 2
#: A lower bound must exceed delta by this relative margin before it is trusted to skip the
#: exact pass (rounding of sums over up to 10^9 values stays far below it).
_SKIP_MARGIN = 1e-9


class BarkerInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Corollary 1's bound ``eps`` on the distance of ``Delta*`` from its Gaussian limit
    #: (hence on the test's error, Corollary 2), estimated from the final batch; 0 when all
    #: N rows were read and the decision is exact.
    epsilon: float
    #: Estimated variance ``s^2`` of ``Delta*`` that ``X_nc`` topped up to ``sigma^2``
    #: (0 for an exact decision).
    var_delta: float
    #: Estimated skew ``eta = k3(Delta*) / (3 sigma^3)`` of the final batch (what the
    #: skew-corrected test corrects; reported by both modes, 0 for an exact decision).
    skew: float
    #: Mean of all the l_i read (``N mean + c`` estimates ``Delta``; the bias monitor).
    mean: float
    #: Rows of the batch that decided: all rows read for the sequential rule, the rows after
    #: the pilot for the presized one (N for an exact decision).
    batch: int


class BarkerSettings(NamedTuple):
    """The settings of one decision (both stopping rules and both draws read them)."""

    #: Rows per stage (the pilot's stage for the presized rule).
    m: int
    #: The data-free log ratio c (``Delta* = N mean + c``).
    log_const: float
    #: The correction's sigma.
    sigma: float
    #: Novak threshold (-1 without one) and whether the rule checks it.
    delta: float
    check_eps: bool
    fpc: bool
    skewed: bool
    #: The correction table: grid start, spacing, skew step, density and cdf rows.
    x0: float
    h: float
    skew_step: float
    density: np.ndarray
    cdf: np.ndarray
    #: The presized rule's margin.
    margin: float


@jit
def barker_stage(values, k, N, mean, m2, sigma2, delta, check_eps, fpc, center, t1, t3):
    """Stopping rule of Algorithm 1 after the newest ``k`` rows of ``values`` were merged.

    ``values`` holds the whole batch (n rows), ``mean`` and ``m2`` its moments. Returns
    ``(status, s2, eps, center, t1, t3)``: ``EXACT`` at n = N, ``GROW`` while
    ``s2 >= sigma2`` or ``eps > delta``, else ``STOP``. Corollary 1's eps needs a pass over
    the batch about its current mean; to keep a decision O(batch) that pass is skipped
    whenever :func:`~design._lib.rules.novak_lower_bound`, computed from running sums
    ``t1``, ``t3`` about a ``center`` fixed at the last pass, already exceeds delta, so the
    stopping stage is the one a full pass at every stage would give. The reported eps is
    exact (from a pass).
    """
    n = values.shape[0]
    if center != center:                    # first stage: centre on the first batch
        center = mean
        t1, t3 = abs_central_sums(values, center)
    else:
        s1, s3 = abs_central_sums(values[n - k:], center)
        t1 += s1
        t3 += s3
    if n == N:
        return EXACT, 0.0, 0.0, center, t1, t3
    s2 = barker_variance(n, N, m2, fpc)
    if s2 >= sigma2:
        return GROW, s2, math.nan, center, t1, t3
    if check_eps and novak_lower_bound(n, mean, m2, center, t1, t3) > delta * (1.0 + _SKIP_MARGIN):
        return GROW, s2, math.nan, center, t1, t3
    center = mean
    t1, t3 = abs_central_sums(values, center)
    eps = novak_error(n, m2, t1, t3)
    if check_eps and eps > delta:
        return GROW, s2, eps, center, t1, t3
    return STOP, s2, eps, center, t1, t3


@jit
def barker_rule(values, k, N, stage, mean, m2, m3, mu0, settings, carry):
    """The engine's rule: stages of ``m`` rows until :func:`barker_stage` stops.

    ``settings``: :class:`BarkerSettings`; ``carry = (s2, eps, eta, center, t1, t3)``.
    """
    if values.shape[0] == 0:
        return GROW, False, carry, settings.m
    sigma = settings.sigma
    status, s2, eps, center, t1, t3 = barker_stage(
        values, k, N, mean, m2, sigma * sigma, settings.delta, settings.check_eps,
        settings.fpc, carry[3], carry[4], carry[5])
    return status, False, (s2, eps, carry[2], center, t1, t3), settings.m


@jit
def barker_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """The info row of a sequential decision (:class:`BarkerInfo`): ``(n, stage, eps, s2,
    eta, mean, batch)``, NaN (batch 0) after a non-finite batch; the batch is every row
    read."""
    info[0], info[1] = n_used, stage
    if status == STOP or status == EXACT:
        info[2], info[3], info[4] = carry[1], carry[0], carry[2]
        info[5], info[6] = mean, n_used
    else:
        info[2] = info[3] = info[4] = info[5] = math.nan
        info[6] = 0


@jit
def barker_settings(data, theta, theta_new, N, base, c):
    """The compiled decision's ``prepare``: :meth:`BarkerTest._settings`, the
    :class:`BarkerSettings` of ``base = _draw_args`` with ``log_const = c``."""
    return RUN, BarkerSettings(base.m, c, base.sigma, base.delta, base.check_eps, base.fpc,
                               base.skewed, base.x0, base.h, base.skew_step, base.density,
                               base.cdf, base.margin), 0.0


@cache
def barker_epilogue():
    """The accept/reject draw of Algorithm 1, as the engine's epilogue (built on first use:
    it needs the correction's sampling kernels from :mod:`design.correction`).

    ``EXACT`` (all N rows read): Barker's test with the exact ``Delta``, accept iff
    ``Delta + log(u / (1 - u)) > 0`` (one uniform). Otherwise accept iff
    ``Delta* + X_nc + X_corr > 0`` with ``X_nc = sqrt(sigma^2 - s2) Z`` (one standard normal)
    and ``X_corr`` by inverse cdf from the table (one uniform; a skew family, rows of
    ``density``/``cdf``, takes a second uniform first to pick the row at the batch's
    ``eta``). Stores ``eta`` in the carry.
    """
    from design.correction import ppf_kernel, skew_ppf_kernel

    @jit
    def draw(rng, status, accepted, n, N, mean, m2, m3, mu0, settings, carry):
        log_const, sigma, fpc, skewed = (settings.log_const, settings.sigma, settings.fpc,
                                         settings.skewed)
        x0, h, skew_step = settings.x0, settings.h, settings.skew_step
        density, cdf = settings.density, settings.cdf
        s2, eps, eta, center, t1, t3 = carry
        dstar = N * mean + log_const
        if status == EXACT:
            u = rng.random()
            if u == 0.0:
                return False, (s2, eps, 0.0, center, t1, t3)
            return dstar + (math.log(u) - math.log1p(-u)) > 0.0, (s2, eps, 0.0, center, t1, t3)
        x_nc = math.sqrt(sigma * sigma - s2) * rng.standard_normal()
        eta = barker_skew(n, N, m2, m3, sigma, fpc)
        if skewed:
            u_mix = rng.random()
            x_corr = skew_ppf_kernel(eta, u_mix, rng.random(), x0, h, skew_step, density, cdf)
        else:
            x_corr = ppf_kernel(rng.random(), x0, h, density[0], cdf[0])
        return dstar + x_nc + x_corr > 0.0, (s2, eps, eta, center, t1, t3)

    return draw


def _correction_module():
    # On first use: only the Barker test needs a correction table.
    from design import correction

    return correction


@dataclass(frozen=True)
class BarkerTest(SequentialTest):
    """The minibatch Barker test (MHminibatch) of Seita, Pan, Chen & Canny (2017), Alg. 1.

    Barker's acceptance function ``S(Delta) = 1 / (1 + e^-Delta)`` satisfies detailed balance,
    and accepting with it means accepting iff ``Delta + X_log > 0`` with ``X_log`` standard
    logistic. The test replaces ``Delta`` by its minibatch estimate ``Delta*``, whose noise is
    nearly ``N(0, s^2)``, tops the noise up to ``N(0, sigma^2)`` with ``X_nc`` and adds a
    *correction* ``X_corr`` such that ``N(0, sigma^2) + X_corr`` is logistic
    (:mod:`design.correction`). It reads ``m`` rows without replacement, then ``m`` more, as
    long as ``s^2 >= sigma^2`` or Corollary 1's error bound ``eps`` exceeds ``delta``.

    Parameters
    ----------
    m : int
        Rows added per stage, ``m >= 2`` (``>= 3`` with ``skew=True``) and ``m <= N``.
    delta : float, None or "auto"
        Largest accepted ``eps``, in (0, 1); ``None`` leaves the bound out of the stopping
        rule (the authors' code did, see Notes) but still reports it. ``"auto"`` (default):
        0.5 with the sequential rule, None with the presized one (which has no use for it).
    correction : CorrectionTable or SkewCorrectionTable, optional
        The correction distribution; ``sigma`` is its ``sigma``. Defaults to
        :func:`design.correction.default` (``sigma = 1``), or
        :func:`design.correction.default_skew` with ``skew=True``.
    fpc : bool
        Estimate ``Var(Delta*)`` with the finite-population factor ``1 - b/N`` (unbiased for
        sampling without replacement); ``False`` is the algorithm as printed.
    skew : bool
        Draw ``X_corr`` from the skew-corrected family at the batch's estimated skew
        (appendix A.5, ``docs/correction.md`` section 4), which turns the test's
        ``O(b^-1/2)`` error on skewed ``l_i`` into ``O(1/b)``.
    stopping : {"sequential", "presized"}
        ``"sequential"``: Algorithm 1, stages of ``m`` rows until ``s^2 < sigma^2`` (and
        ``eps <= delta``). ``"presized"``: a pilot of ``m`` rows (grown ``m`` at a time
        while its variance estimate is unreliable) sizes the batch that decides, whose rows
        take no part in choosing its size, which removes the selection
        bias of the sequential rule on skewed ``l_i`` (see
        :mod:`samplers.mhtests.barker_presized`; needs ``delta=None``: Corollary 1's bound is
        reported, not used).
    margin : float
        Presized rule only: the batch is sized for a predicted ``s^2 = sigma^2 / margin``
        (``margin >= 1``); a batch whose ``s^2`` still exceeds ``sigma^2`` is decided with
        ``X_nc = 0``.

    Notes
    -----
    With ``c = log p0(theta') - log p0(theta) + log q(theta | theta') - log q(theta' | theta)``
    the data-free log ratio (``-psi(1, theta, theta')`` in the paper, eq. 7), after b rows:

    * ``Delta* = N mean(l) + c`` (eq. 8) and ``s^2 = N^2 s_l^2 (1 - b/N) / b``, ``s_l^2`` the
      sample variance of the l_i;
    * ``eps = (6.4 mean|z|^3 + 2 mean|z|) / sqrt(b)`` (Corollary 1, Novak's bound), ``z`` the
      batch's l_i standardized by its mean and sd.

    When ``s^2 < sigma^2`` and ``eps <= delta`` the test draws
    ``X_nc ~ N(0, sigma^2 - s^2)`` and ``X_corr`` and accepts iff ``Delta* + X_nc + X_corr >
    0``; its acceptance probability is then within ``eps`` plus the table's error of
    ``S(Delta)`` (Corollary 2). If all N rows are read it accepts iff ``Delta + X_log > 0``
    exactly. Even for Gaussian l_i the estimated ``s^2`` leaves an error of about
    ``s^4 S''''(Delta) / (4 (b - 1))`` (``docs/correction.md``, section 5).

    Novak's constants make ``eps >= 8.4 / sqrt(b)`` for any data (about ``11.8 / sqrt(b)``
    for Gaussian l_i), so ``delta`` forces ``b >= (8.4 / delta)^2``: 283 rows at the default
    0.5, 7,056 at 0.1. The paper's batches (182 on average for the Gaussian mixture) are only
    reachable with the bound left out; the authors' code (``New_MH_Test/code/simulator.ssc``,
    BIDMach's ``MHTest.scala``) checks the variance alone. There, with ``delta=None``
    (about 170 rows), the chain's posterior sd comes out 5 % low, many Monte Carlo standard
    errors away, while ``delta = 0.5`` (about 750 rows) matches the exact chain
    (``docs/correction.md``, section 6): stopping as soon as ``s^2 < sigma^2`` selects
    batches, and with skewed l_i the selected batches have biased ``Delta*``.
    ``stopping="presized"`` removes the selection instead (a pilot, grown until its
    variance estimate is reliable, sizes the batch that decides;
    :mod:`samplers.mhtests.barker_presized` derives why it is unbiased): on the Gaussian
    mixture its posterior sds are within 1 MCSE of the exact posterior over 10^6 pooled
    steps (z -0.32, -0.57) at 266.5 rows per step, against 168.8 rows and -8.4 to -9.1 MCSE
    for the sequential rule and 757 rows for ``delta = 0.5``
    (``benchmarks/barker_presized.py``). It is an option, not the default: on a tempered
    logistic regression with a lognormal covariate (``benchmarks/barker_presized_logistic.py``,
    4 x 60,000 steps against importance sampling) its sds are still 0.5-1.6 % high (z up to
    2.9), as are the sequential rule's (0.5-2.4 %, z up to 4.4); with ``skew=True`` the
    presized chains' sds are within 0.3-0.4 % (z 0.79-1.11 over 4 x 150,000 steps; on the
    mixture 266 rows per step, z -0.38, -0.19): what the skew table removed is the
    fixed-batch skew term (``docs/correction.md``, section 6). The bound's
    pass over the batch is skipped while a running lower bound already exceeds ``delta``,
    so a decision costs O(batch).

    Randomness, in order: the rows (one uniform each), then ``X_nc`` (one standard normal)
    and ``X_corr`` (one uniform, two with ``skew``), or one uniform for the exact test. The
    rule (:func:`barker_rule`) and the draw (:func:`barker_epilogue`) run in the engine's
    compiled driver for built-in models and in its Python driver for others, with the same
    arithmetic and the same draws.

    References
    ----------
    Seita, Pan, Chen, Canny (2017), An Efficient Minibatch Acceptance Test for
    Metropolis-Hastings, UAI. Novak (2005), On self-normalized sums and Student's statistic,
    Theory Probab. Appl. 49(2).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import BarkerTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 100_000))
    >>> chain = sample(model, BarkerTest(m=200), RandomWalk(1e-4), [1.0], 300, rng=2)
    >>> bool(chain.stats["n_used"].mean() < 1000), bool(chain.stats["var_delta"].max() < 1)
    (True, True)
    """

    m: int = 100
    delta: float | None | str = "auto"
    correction: "CorrectionTable | SkewCorrectionTable | None" = None
    fpc: bool = True
    skew: bool = False
    stopping: str = "sequential"
    margin: float = 1.3
    #: The design tolerance (mean |P - S(Delta)| over pairs) the settings were chosen for,
    #: recorded by :meth:`from_design`; a chain whose estimated mean error exceeds it warns.
    tolerance: float | None = field(default=None, compare=False, repr=False)
    _draw_args: tuple = field(default=None, init=False, repr=False, compare=False)

    carry0 = (math.nan, math.nan, math.nan, math.nan, 0.0, 0.0)
    draws_threshold = False

    def __post_init__(self):
        set_ = object.__setattr__
        for name in ("fpc", "skew"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        set_(self, "m", check_int("m", self.m, low=3 if self.skew else 2))
        if isinstance(self.delta, str) and self.delta == "auto":
            set_(self, "delta", None if self.stopping == "presized" else 0.5)
        if self.delta is not None:
            set_(self, "delta", check_interval("delta", self.delta, 0.0, 1.0))
        if self.stopping not in ("sequential", "presized"):
            raise ValueError(f"stopping must be 'sequential' or 'presized', got {self.stopping!r}")
        if self.stopping == "presized" and self.delta is not None:
            raise ValueError(f"delta={self.delta} bounds the sequential rule's batch; the "
                             "presized rule sizes its batch from a pilot: pass delta=None")
        if isinstance(self.margin, bool) or not isinstance(self.margin,
                                                            (int, float, np.floating)):
            raise TypeError(f"margin must be a number >= 1, got {self.margin!r}")
        if not (math.isfinite(self.margin) and self.margin >= 1.0):
            raise ValueError(f"margin must be a finite number >= 1, got {self.margin!r}")
        set_(self, "margin", float(self.margin))
        if self.tolerance is not None:
            set_(self, "tolerance", check_interval("tolerance", self.tolerance, 0.0, 1.0))
        corr = _correction_module()
        kind = corr.SkewCorrectionTable if self.skew else corr.CorrectionTable
        table = self.correction
        if table is None:
            table = corr.default_skew() if self.skew else corr.default()
        elif not isinstance(table, kind):
            other = corr.CorrectionTable if self.skew else corr.SkewCorrectionTable
            hint = (f" (a {other.__name__} needs skew={not self.skew})"
                    if isinstance(table, other) else "")
            raise TypeError(f"correction must be a {kind.__name__} with skew={self.skew}{hint}, "
                            f"got {type(table).__name__}")
        set_(self, "correction", table)
        a = table.cdf_arrays()
        if self.skew:
            density, cdf, step = a.density, a.cdf, a.skew_step
        else:
            density, cdf, step = a.density[None, :], a.cdf[None, :], 1.0
        delta = -1.0 if self.delta is None else self.delta
        # the settings with log_const 0: each decision's replaces it by its c
        set_(self, "_draw_args", BarkerSettings(
            self.m, 0.0, self.sigma, delta, self.delta is not None, bool(self.fpc),
            bool(self.skew), float(a.x0), float(a.spacing), float(step), density, cdf,
            self.margin))

    @property
    def rule(self):
        return presized_rule if self.stopping == "presized" else barker_rule

    @property
    def epilogue(self):
        return presized_epilogue() if self.stopping == "presized" else barker_epilogue()

    @property
    def info_kernel(self):
        return presized_info if self.stopping == "presized" else barker_info

    @classmethod
    def from_design(cls, design) -> "BarkerTest":
        """The test a ``design.optimize(trial, tolerance, test="barker")`` result prescribes:
        its ``m`` and Novak threshold ``delta`` (None: the variance condition alone), with
        the default ``sigma = 1`` correction and the finite-population factor the design
        assumes."""
        design_for(design, "barker", cls.__name__)
        tolerance = design.tolerance if design.method == "average" else None
        return cls(m=design.m, delta=design.delta, tolerance=tolerance)

    def _custom_correction(self):
        """The correction table, or None if it is the shipped default."""
        corr = _correction_module()
        default = corr.default_skew() if self.skew else corr.default()
        return None if self.correction is default else self.correction

    def __repr__(self):
        custom = self._custom_correction()
        shown = "" if custom is None else f", correction={custom!r}"
        rule = (f", stopping='presized', margin={self.margin}"
                if self.stopping == "presized" else "")
        return (f"BarkerTest(m={self.m}, delta={self.delta}{shown}, fpc={self.fpc}, "
                f"skew={self.skew}{rule})")

    def __reduce__(self):  # a worker process reloads the default table from the package
        return (type(self), (self.m, self.delta, self._custom_correction(), self.fpc, self.skew,
                             self.stopping, self.margin, self.tolerance))

    @property
    def sigma(self) -> float:
        """Standard deviation of the Gaussian part of the logistic (the correction's sigma)."""
        return self.correction.sigma

    def check(self, view):
        if self.m > view.N:
            raise ValueError(f"m must be <= N = {view.N} (the number of rows), got {self.m}")

    # -- the engine's hooks ----------------------------------------------------------------

    def _settings(self, view, theta, theta_new, log_const):
        return self._draw_args._replace(log_const=float(log_const))

    def _compiled_settings(self, view):
        return barker_settings, self._draw_args, None

    def _vector_settings(self, N, C, log_const):
        return self._settings(None, None, None, log_const)

    def null_info(self):
        return BarkerInfo(0, 0, math.nan, math.nan, math.nan, math.nan, 0)

    def decision_errors(self, stats, N):
        """Estimated ``|P(accept) - S(Delta)|`` of each decision from its batch's estimates
        (:func:`design.barker_decision_errors`: the sequential rule's selection shift of
        ``Delta*``, ``-3 sigma eta``, and the fixed-batch skew and variance-noise terms, or
        the presized rule's clipping term); 0 for exact decisions and for steps the prior
        rejected."""
        from design import barker_decision_errors

        c = np.asarray(stats["log_const"], dtype=float)
        rejected = ~np.isfinite(c)
        out = barker_decision_errors(
            np.nan_to_num(stats["mean"]), stats["var_delta"], stats["skew"], stats["batch"],
            np.where(rejected, 0, stats["n_used"]), np.where(rejected, 0.0, c), N=N,
            sigma=self.sigma, fpc=self.fpc, stopping=self.stopping,
            m=self.m if self.stopping == "sequential" else None)
        out[rejected] = 0.0
        return out
