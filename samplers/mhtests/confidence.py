"""The confidence sampler (MHSubLhd) of Bardenet, Doucet & Holmes (2014)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

import numpy as np

from design._lib.checks import check_int, check_interval
from design._lib.jit import jit
from design._lib.rules import BOUNDS, confidence_radius_code, look_delta, next_size

from ..models._kernels import batch_ratio
from .base import IntervalTest, design_for, nonfinite_decision
from .status import BAD_RANGE, KNOWN, KNOWN_INFO, NAN_MEAN, RUN

__all__ = ["ConfidenceInfo", "ConfidenceSettings", "ConfidenceTest", "confidence_radius"]


class ConfidenceSettings(NamedTuple):
    """The settings of one decision."""

    #: Half-width of the range of the l_i (every l_i within C of ``center``).
    C: float
    #: Total error probability, the exponent of its schedule, the geometric growth factor.
    delta: float
    p: float
    gamma: float
    #: Index of the bound in ``design._lib.rules.BOUNDS``.
    bound: int
    #: Size of the first subsample.
    b0: int
    #: Rows read to find the range (N for ``range="full-data"``).
    n_scanned: int
    center: float


class ConfidenceBase(NamedTuple):
    """What the compiled ``prepare`` turns into :class:`ConfidenceSettings` for a pair: the
    model's range constants (``()`` for a scan) and the test's constants."""

    consts: tuple
    delta: float
    p: float
    gamma: float
    bound: int
    b0: int


class ConfidenceInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Rows read to find the range of the l_i (N with ``range="full-data"``, else 0).
    n_scanned: int
    #: Mean and standard deviation (divisor n) of the l_i read (NaN, 0 without data).
    mean: float
    sd: float
    #: The range half-width ``C`` the radius used.
    C: float


def confidence_radius(bound: str, t: int, N: int, C: float, sd: float, delta_t: float) -> float:
    """Half-width ``c_t`` with ``P(|mean_t - mu| > c_t) <= delta_t`` for l_i in [-C, C].

    ``t`` rows drawn without replacement from N, ``sd`` their empirical sd (1/t
    normalisation). Bounds: Hoeffding-Serfling (Bardenet et al. 2014, eq. 7), empirical
    Bernstein (eq. 9, Audibert et al. 2009), and the empirical Bernstein-Serfling bound of
    Bardenet & Maillard (2015, Theorem 3),
    ``sd sqrt(2 rho_t L / t) + kappa (2C) L / t`` with ``kappa = 7/3 + 3/sqrt(2)`` and
    ``rho_t = 1 - (t-1)/N`` (t <= N/2) or ``(1 - t/N)(1 + 1/t)``. Theorem 3 is one-sided with
    failure probability 5 delta'; two-sided we take ``L = log(10/delta_t)`` (the authors'
    code uses log(5/delta_t)).

    Examples
    --------
    >>> bounds = ("hoeffding", "bernstein", "bernstein-serfling")
    >>> r = [confidence_radius(b, 1000, 10**6, 1.0, 0.1, 1e-3) for b in bounds]
    >>> r[1] < r[0]  # a small sd makes Bernstein tighter than Hoeffding
    True
    """
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {BOUNDS}, got {bound!r}")
    return confidence_radius_code(BOUNDS.index(bound), t, N, C, sd, delta_t)


@jit
def confidence_look_radius(n, N, stage, mean, m2, settings):
    """The bound's half-width at look ``stage`` with ``delta_k = (p-1)/(p k^p) delta``;
    infinite before any data (a range ``C = 0`` is decided before the engine runs, see
    :meth:`ConfidenceTest._decide_without_data`).
    ``settings``: :class:`ConfidenceSettings`."""
    if n == 0:
        return math.inf
    return confidence_radius_code(settings.bound, n, N, settings.C, math.sqrt(m2 / n),
                                  look_delta(stage, settings.p, settings.delta))


@jit
def geometric_stages(n, N, stage, settings):
    """First ``b0`` rows, then grow the subsample to ``ceil(gamma n)`` (at least n + 1)."""
    if n == 0:
        return settings.b0
    return next_size(n, N, settings.gamma) - n


# -- the compiled decision's parts (see samplers.mhtests.compiled.sequential_decide) -----------


@jit
def confidence_checked(center, C, base, scanned):
    """:meth:`ConfidenceTest._settings` and ``_decide_without_data`` from a range
    ``(center, C)`` and a :class:`ConfidenceBase`; NAN_MEAN or BAD_RANGE for a NaN or
    infinite C (``_check_range``), KNOWN for C = 0."""
    settings = ConfidenceSettings(C, base.delta, base.p, base.gamma, base.bound, base.b0,
                                  scanned, center)
    if not math.isfinite(C):
        return (NAN_MEAN if C != C else BAD_RANGE), settings, C
    if C == 0.0:
        return KNOWN, settings, center
    return RUN, settings, 0.0


@cache
def confidence_model_settings(ratio_range):
    """``prepare`` of ``range="model"`` on a model whose range is the jitted
    ``ratio_range(consts, theta, theta_new)`` (``base.consts``; the model's
    ``block_range()``), the function its ``loglik_ratio_range`` calls."""

    @jit
    def prepare(data, theta, theta_new, N, base, c):
        center, C = ratio_range(base.consts, theta, theta_new)
        return confidence_checked(center, C, base, 0)

    return prepare


@cache
def confidence_scan_settings(row_ratio, row_prefetch):
    """``prepare`` of ``range="full-data"``: ``C = max_i |l_i|`` over all N rows in chunks of
    ``FULL_CHUNK`` (as :meth:`ConfidenceTest._range`: NaN as soon as a chunk holds one)."""
    from .._view import FULL_CHUNK

    ratios = batch_ratio(row_ratio, row_prefetch)

    @jit
    def prepare(data, theta, theta_new, N, base, c):
        size = min(FULL_CHUNK, N)
        rows = np.empty(size, dtype=np.intp)
        out = np.empty(size)
        C = 0.0
        for start in range(0, N, FULL_CHUNK):
            k = min(FULL_CHUNK, N - start)
            for t in range(k):
                rows[t] = start + t
            ratios(data, rows[:k], theta, theta_new, out[:k])
            chunk_max = 0.0
            for t in range(k):
                a = abs(out[t])
                if a != a:
                    chunk_max = a
                    break
                if t == 0 or a > chunk_max:
                    chunk_max = a
            if not chunk_max <= C:
                C = chunk_max
                if C != C:
                    break
        return confidence_checked(0.0, C, base, N)

    return prepare


@jit
def confidence_info(status, n_used, stage, mean, m2, values, settings, carry, info):
    """The info row (:class:`ConfidenceInfo`; also ``_decide_without_data``'s, with ``mean``
    the centre): ``(n_used, n_stages, n_scanned, mean, sd, C)``, sd 0 without data."""
    info[0], info[1], info[2] = n_used, stage, settings.n_scanned
    info[3] = mean
    info[4] = math.sqrt(max(m2, 0.0) / n_used) if n_used > 0 else 0.0
    info[5] = settings.C if status != KNOWN_INFO else 0.0


@dataclass(frozen=True)
class ConfidenceTest(IntervalTest):
    """The confidence sampler (MHSubLhd) of Bardenet, Doucet & Holmes (2014), Figure 3.

    Grows a without-replacement subsample geometrically (factor ``gamma``) until the
    concentration bound ``c_t`` separates the subsample mean of the l_i from ``mu0``; the
    k-th look uses ``delta_k = (p - 1)/(p k^p) delta`` so that all looks together err with
    probability at most ``delta``. Then ``|P_accept - P_accept exact| <= delta``
    (their Lemma 3.1).

    Parameters
    ----------
    delta : float
        Total error probability of one test, in (0, 1).
    gamma : float
        Geometric growth factor of the subsample, > 1.
    p : float
        Exponent of the error schedule, > 1.
    bound : {"bernstein-serfling", "bernstein", "hoeffding"}
        Concentration inequality (see :func:`confidence_radius`).
    batch_size : int
        Size of the first subsample (Seita et al. used 50; Bardenet et al. 1).
    range : {"model", "full-data"}
        Where the range comes from: the model's ``loglik_ratio_range`` (``(center, C)``, every
        l_i within C of center) or ``loglik_ratio_bound`` (``C`` about 0), in time independent
        of N; or a scan of all N rows every step (``C = max_i |l_i|``), which costs O(N) and is
        reported in ``info.n_scanned``. ``C == 0`` decides ``center > mu0`` without data.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ConfidenceTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 20_000))
    >>> chain = sample(model, ConfidenceTest(delta=0.05), RandomWalk(0.01), [1.0], 100, rng=3)
    >>> int(chain.stats["n_scanned"].max())  # the range came from the model, no scan
    0
    """

    delta: float = 0.01
    gamma: float = 2.0
    p: float = 2.0
    bound: str = "bernstein-serfling"
    batch_size: int = 100
    range: str = "model"
    #: The design tolerance the settings were chosen for (recorded by :meth:`from_design`);
    #: a chain whose estimated mean error exceeds it warns.
    tolerance: float | None = field(default=None, compare=False, repr=False)

    radius = staticmethod(confidence_look_radius)
    grow = staticmethod(geometric_stages)
    info_kernel = staticmethod(confidence_info)

    def __post_init__(self):
        object.__setattr__(self, "delta", check_interval("delta", self.delta, 0.0, 1.0))
        object.__setattr__(self, "gamma", check_interval("gamma", self.gamma, 1.0, math.inf))
        object.__setattr__(self, "p", check_interval("p", self.p, 1.0, math.inf))
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, low=1))
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {BOUNDS}, got {self.bound!r}")
        if self.range not in ("model", "full-data"):
            raise ValueError(f"range must be 'model' or 'full-data', got {self.range!r}")
        if self.tolerance is not None:
            object.__setattr__(self, "tolerance",
                               check_interval("tolerance", self.tolerance, 0.0, 1.0))

    @classmethod
    def from_design(cls, design) -> "ConfidenceTest":
        """The test a ``design.optimize(trial, tolerance, test="confidence")`` result
        prescribes: its ``batch_size``, ``gamma``, ``delta``, ``p`` and ``bound``, with the
        range from the model (the range the design's trial chain recorded)."""
        design_for(design, "confidence", cls.__name__)
        tolerance = design.tolerance if design.method == "average" else None
        return cls(delta=design.delta, gamma=design.gamma, p=design.p, bound=design.bound,
                   batch_size=design.batch_size, range="model", tolerance=tolerance)

    def check(self, view):
        if self.range == "model" and view.range is None:
            raise TypeError(
                f"ConfidenceTest(range='model') needs model.loglik_ratio_bound(theta, theta_new); "
                f"{type(view.model).__name__} has none. Add one, or pass range='full-data' "
                "(an O(N) scan per step)"
            )

    def rows_from_order(self, view) -> bool:
        """Only with the model's range: ``range="full-data"`` reads every row each step."""
        return self.range == "model" and super().rows_from_order(view)

    def _range(self, view, theta, theta_new):
        """``(center, C, rows scanned)``: every l_i lies in ``[center - C, center + C]``.

        The radius of every bound depends on the width ``2 C`` of that interval only, so a
        model whose l_i share a known shift (control variates: ``r_i + P/N``) reports it as
        the center (``loglik_ratio_range``) instead of widening ``C`` by ``|P/N|``.
        """
        if self.range == "model":
            center, C = view.range(theta, theta_new)
            return float(center), float(C), 0
        C = 0.0
        for idx in view.chunks():
            chunk_max = float(np.max(np.abs(view.ratio(theta, theta_new, idx))))
            if not chunk_max <= C:  # larger, or NaN (which max() would silently drop)
                C = chunk_max
                if math.isnan(C):
                    break
        return 0.0, C, view.N

    def _with_range(self, C, scanned, center=0.0):
        return ConfidenceSettings(float(C), self.delta, self.p, self.gamma,
                                  BOUNDS.index(self.bound), self.batch_size, scanned,
                                  float(center))

    # -- the engine's hooks ----------------------------------------------------------------

    @staticmethod
    def _check_range(C, theta_new):
        """Refuse a range ``C`` that is NaN (the NaN error of the l_i) or infinite."""
        if not math.isfinite(C):
            if math.isnan(C):
                nonfinite_decision(C, theta_new)  # raises the NaN error
            raise ValueError(f"ConfidenceTest needs bounded l_i, but a log-likelihood ratio is "
                             f"infinite at theta_new={theta_new}")

    def _settings(self, view, theta, theta_new, log_const):
        center, C, scanned = self._range(view, theta, theta_new)
        self._check_range(C, theta_new)
        return self._with_range(C, scanned, center)

    def _compiled_settings(self, view):
        """The range from the model's jitted ``block_range()`` (``range="model"``; None, the
        Python loop, for a model without one) or a compiled scan of all N rows."""
        tail = (self.delta, self.p, self.gamma, BOUNDS.index(self.bound), self.batch_size)
        if self.range == "full-data":
            prepare = confidence_scan_settings(view.row_ratio, view.row_prefetch)
            base = ConfidenceBase((), *tail)
        else:
            block_range = getattr(view.model, "block_range", None)
            parts = None if block_range is None else block_range()
            if parts is None:
                return None
            ratio_range, consts = parts
            prepare, base = confidence_model_settings(ratio_range), ConfidenceBase(consts, *tail)

        def refuse(state, theta, theta_new):
            self._check_range(state[0], theta_new)

        return prepare, base, refuse

    def _decide_without_data(self, mu0, settings):
        """C == 0: every l_i equals the center, so the mean is known without reading data."""
        if settings.C == 0.0:
            return settings.center > mu0, ConfidenceInfo(0, 0, settings.n_scanned,
                                                         settings.center, 0.0, 0.0)
        return None

    def _info(self, run, settings):
        sd = math.sqrt(max(run.m2, 0.0) / run.n_used) if run.n_used > 0 else 0.0
        return ConfidenceInfo(run.n_used, run.stage, settings.n_scanned, run.mean, sd,
                              settings.C)

    def _vector_settings(self, N, C, log_const):
        if C is None:
            raise TypeError("ConfidenceTest needs the range C = max |l_i| of the values")
        return self._with_range(C, 0)

    def a_priori_error(self, N):
        """``delta`` (Lemma 3.1 of Bardenet et al.)."""
        return self.delta

    def null_info(self):
        return ConfidenceInfo(0, 0, 0, math.nan, 0.0, 0.0)

    def decision_errors(self, stats, N):
        """Estimated ``|P(accept) - P_MH(accept)|`` of each decision: the design's Gaussian
        model of the test at the decision's sd and log MH ratio
        (:func:`design.confidence_decision_errors`); far below the a-priori bound
        ``delta``. 0 for decisions without data and steps the prior rejected."""
        from design import confidence_decision_errors

        c = np.asarray(stats["log_const"], dtype=float)
        rejected = ~np.isfinite(c)
        out = confidence_decision_errors(
            np.nan_to_num(stats["mean"]), np.where(rejected, 0.0, stats["sd"]), stats["C"],
            np.where(rejected, 0, stats["n_used"]), np.where(rejected, 0.0, c), N=N,
            delta=self.delta, gamma=self.gamma, p=self.p, bound=self.bound,
            batch_size=self.batch_size)
        out[rejected] = 0.0
        return out
