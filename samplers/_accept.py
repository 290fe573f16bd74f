"""Accept/reject tests: the pluggable part of the Metropolis-Hastings chain.

Every test decides between the current point ``theta`` and a proposal ``theta_new`` given
the data-free part of the log acceptance ratio,

    c = log p0(theta_new) - log p0(theta) + log q(theta | theta_new) - log q(theta_new | theta),

so that exact MH accepts iff ``log u < sum_i l_i + c`` with ``u ~ U(0, 1)`` and
``l_i = log p(x_i | theta_new) - log p(x_i | theta)``; equivalently iff the mean ``mu`` of
the l_i exceeds ``mu0 = (log u - c) / N`` (Korattikara et al. 2014, eq. 2-3; the
``psi`` of Bardenet et al. 2014, eq. 3). A test returns ``(accepted, info)``, where
``info`` is a NamedTuple of what it measured, at least ``n_used`` (rows whose l_i the
decision used) and ``n_stages``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import special

from . import _barker_presized, _seq
from design._lib.checks import check_int, check_interval
from design._lib.moments import RunningMoments, batch_moments3, merge_moments3
from ._seq import austere_se, confidence_radius_code, look_delta, next_size

__all__ = [
    "AcceptanceTest",
    "ExactTest",
    "AustereTest",
    "ConfidenceTest",
    "BarkerTest",
    "ExactInfo",
    "AustereInfo",
    "ConfidenceInfo",
    "BarkerInfo",
]


class AcceptanceTest:
    """Base class of the accept/reject tests.

    Subclasses implement :meth:`decide` and :meth:`null_info` (the info of a proposal
    rejected by the prior before any data are read) and may override :meth:`check`, called
    once per chain with the model view to refuse settings that do not fit the data.
    """

    #: Whether the test needs per-datum gradients from the model.
    needs_gradients = False
    #: Whether every proposal is accepted without reading data (no correction at all).
    accepts_all = False

    #: The design tolerance the test was made for (None: not made from a design).
    tolerance = None

    def check(self, view) -> None:
        """Refuse settings that do not fit this model (e.g. a batch larger than N)."""

    def decision_errors(self, stats, N):
        """Estimated error ``Delta`` in the acceptance probability of each decision a chain
        made, from its per-step ``stats``; None if the test has no estimate."""
        return None

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        """Return ``(accepted, info)`` for one proposal."""
        raise NotImplementedError

    def null_info(self):
        """Info recorded for a proposal that the prior rejects without reading data."""
        raise NotImplementedError


def _design_for(design, kind: str, cls: str):
    """Refuse a design made for another test kind (``design.test`` names it)."""
    made_for = getattr(design, "test", None)
    if made_for != kind:
        hint = (f"; build it with design.optimize(trial, tolerance, test={kind!r})"
                if made_for is not None else "")
        raise ValueError(f"{cls}.from_design needs a design made with test={kind!r}, got a "
                         f"{type(design).__name__} made for test={made_for!r}{hint}")
    return design


def _nonfinite_decision(mean: float, theta_new) -> bool:
    """A batch mean of -inf rejects (theta_new has zero likelihood); NaN and +inf are errors.

    +inf means a log-likelihood of +inf at ``theta_new`` (or -inf at the current point, which
    an exact chain never reaches): no density is infinite, so the model is refused there
    rather than the chain moved onto that point.
    """
    if math.isnan(mean):
        raise ValueError(
            f"log-likelihood ratios are NaN between the current point and theta_new={theta_new}; "
            "the model's log-likelihood is not defined there"
        )
    if mean == math.inf:
        raise ValueError(
            f"a log-likelihood ratio is +inf at theta_new={theta_new}: the model's "
            "log-likelihood is +inf there (or -inf at the current point); a log-likelihood "
            "must be finite or -inf, so the move is refused"
        )
    return False


# --- exact MH ------------------------------------------------------------------------------


class ExactInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Mean of the l_i over all N rows.
    l_mean: float
    #: Population standard deviation of the l_i over all N rows.
    l_std: float


@dataclass(frozen=True)
class ExactTest(AcceptanceTest):
    """Full-data Metropolis-Hastings: the baseline every approximate test is compared with.

    Reads all N rows in chunks each step (O(N), on every core for a built-in model);
    records the mean and population sd of the l_i, which is what a trial chain for
    :func:`design.optimize` needs.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ExactTest, GaussianMean, RandomWalk, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 2000))
    >>> chain = sample(model, ExactTest(), RandomWalk(0.05), [1.0], 200, rng=1)
    >>> int(chain.stats["n_used"][0])
    2000
    """

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        log_u = -rng.standard_exponential()
        finite, mom = view.full_ratio_moments(theta, theta_new)
        if not finite:
            accepted = _nonfinite_decision(mom.mean, theta_new)
            return accepted, ExactInfo(view.N, 1, mom.mean, math.nan)
        accepted = log_u < mom.mean * view.N + log_const
        return accepted, ExactInfo(view.N, 1, mom.mean, mom.population_sd())

    def null_info(self):
        return ExactInfo(0, 0, math.nan, math.nan)


# --- the sequential t-test of Korattikara et al. -------------------------------------------


class AustereInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Mean of the l_i the decision read (at the stage where it stopped).
    mean: float
    #: Their standard deviation (divisor n); 0 when all N rows were read (an exact
    #: decision). With ``mean``, ``first_mean`` and the chain's ``log_const`` this gives the
    #: decision's estimated error (:attr:`samplers.Chain.acceptance_errors`).
    sd: float
    #: Mean of the first ``m`` rows: read by every decision, so not selected by the
    #: stopping rule (``mean`` is).
    first_mean: float


def _austere_sd(n, N, m2):
    """The sd (divisor n) of the l_i a decision read; 0 for an exact decision (n = N)."""
    return 0.0 if n >= N else math.sqrt(max(m2, 0.0) / n)


#: Stages of critical values computed at first (the table grows by doubling as needed).
_T_TABLE_STAGES = 4096


@dataclass(frozen=True)
class AustereTest(AcceptanceTest):
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
    Critical values are tabulated once per N (``scipy.special.stdtrit``). For built-in
    models the whole decision runs in one compiled call (:mod:`samplers._seq`).

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
        _design_for(design, "austere", cls.__name__)
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

    def decision_errors(self, stats, N):
        """Estimated ``|Delta|`` of each decision: Korattikara et al.'s Eq. 6 with the design's
        dynamic programme at the decision's ``sd`` of the l_i, averaged over the posterior
        of ``mu`` given the rows it read (:func:`design.decision_errors`); 0 for steps the
        prior rejected and for exact decisions."""
        from design import decision_errors

        sd = np.asarray(stats["sd"], dtype=float)
        prior_rejected = ~np.isfinite(stats["log_const"])
        c = np.where(prior_rejected, 0.0, stats["log_const"])
        out = decision_errors(np.nan_to_num(stats["mean"]), np.where(prior_rejected, 0.0, sd),
                              stats["n_used"], c, first_mean=np.nan_to_num(stats["first_mean"]),
                              N=N, m=min(self.m, N), epsilon=min(self.epsilon, 0.5 - 1e-12),
                              threshold="normal")
        out[prior_rejected] = 0.0
        return out

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

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        N = view.N
        mu0 = (-rng.standard_exponential() - log_const) / N
        batches.restart()
        if view.row_ratio is None:
            return self._decide_python(view, batches, theta, theta_new, mu0)
        loop = _seq.austere_loop(view.row_ratio, view.row_prefetch)
        data = view.decision_data(theta, theta_new)
        order = batches.kernel_state()
        cursor, n, mean, m2, stage = 0, 0, 0.0, 0.0, 0
        first = math.nan
        while True:
            # the first call runs stage 1 alone, to record its (unselected) mean
            table = self._table(N, stage + 1)
            status, accepted, cursor, n, mean, m2, stage = loop(
                data, theta, theta_new, rng, order, cursor, self.m, mu0,
                table[:1] if stage == 0 else table, n, mean, m2, stage,
            )
            if stage == 1:
                first = mean
            if status != _seq.MORE_THRESHOLDS:
                break
        if status == _seq.NONFINITE:
            return _nonfinite_decision(mean, theta_new), AustereInfo(cursor, stage, math.nan,
                                                                      math.nan, math.nan)
        return bool(accepted), AustereInfo(n, stage, mean, _austere_sd(n, N, m2), first)

    def _decide_python(self, view, batches, theta, theta_new, mu0):
        """Reference implementation (and the path for models without row kernels)."""
        N = view.N
        mom = RunningMoments()
        stage = 0
        first = math.nan
        while True:
            stage += 1
            if not mom.add(view.ratio(theta, theta_new, batches.take(self.m))):
                return _nonfinite_decision(mom.mean, theta_new), AustereInfo(
                    batches.taken, stage, math.nan, math.nan, math.nan)
            n = mom.n
            if stage == 1:
                first = mom.mean
            diff = mom.mean - mu0
            if n == N or abs(diff) > self._table(N, stage)[stage - 1] * austere_se(mom.m2, n, N):
                return diff > 0, AustereInfo(n, stage, mom.mean, _austere_sd(n, N, mom.m2),
                                             first)

    def null_info(self):
        return AustereInfo(0, 0, math.nan, math.nan, math.nan)


# --- the confidence sampler of Bardenet et al. ----------------------------------------------


class ConfidenceInfo(NamedTuple):
    n_used: int
    n_stages: int
    #: Rows read to find the range of the l_i (N with ``range="full-data"``, else 0).
    n_scanned: int


_BOUNDS = ("hoeffding", "bernstein", "bernstein-serfling")  # in the order of the _seq codes


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
    >>> r = [confidence_radius(b, 1000, 10**6, 1.0, 0.1, 1e-3) for b in _BOUNDS]
    >>> r[1] < r[0]  # a small sd makes Bernstein tighter than Hoeffding
    True
    """
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    return confidence_radius_code(_BOUNDS.index(bound), t, N, C, sd, delta_t)


@dataclass(frozen=True)
class ConfidenceTest(AcceptanceTest):
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
        Where the range ``C = max_i |l_i|`` comes from: the model's
        ``loglik_ratio_bound`` (time independent of N), or a scan of all N rows every step,
        which costs O(N) and is reported in ``info.n_scanned``.

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

    def __post_init__(self):
        object.__setattr__(self, "delta", check_interval("delta", self.delta, 0.0, 1.0))
        object.__setattr__(self, "gamma", check_interval("gamma", self.gamma, 1.0, math.inf))
        object.__setattr__(self, "p", check_interval("p", self.p, 1.0, math.inf))
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, low=1))
        if self.bound not in _BOUNDS:
            raise ValueError(f"bound must be one of {_BOUNDS}, got {self.bound!r}")
        if self.range not in ("model", "full-data"):
            raise ValueError(f"range must be 'model' or 'full-data', got {self.range!r}")

    @classmethod
    def from_design(cls, design) -> "ConfidenceTest":
        """The test a ``design.optimize(trial, tolerance, test="confidence")`` result
        prescribes: its ``batch_size``, ``gamma``, ``delta``, ``p`` and ``bound``, with the
        range from the model (the range the design's trial chain recorded)."""
        _design_for(design, "confidence", cls.__name__)
        return cls(delta=design.delta, gamma=design.gamma, p=design.p, bound=design.bound,
                   batch_size=design.batch_size, range="model")

    def check(self, view):
        if self.range == "model" and view.range is None:
            raise TypeError(
                f"ConfidenceTest(range='model') needs model.loglik_ratio_bound(theta, theta_new); "
                f"{type(view.model).__name__} has none. Add one, or pass range='full-data' "
                "(an O(N) scan per step)"
            )

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

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        N = view.N
        psi = (-rng.standard_exponential() - log_const) / N
        center, C, scanned = self._range(view, theta, theta_new)
        if not math.isfinite(C):
            if math.isnan(C):
                _nonfinite_decision(C, theta_new)  # raises the NaN error
            raise ValueError(f"ConfidenceTest needs bounded l_i, but a log-likelihood ratio is "
                             f"infinite at theta_new={theta_new}")
        if C == 0.0:  # every l_i equals the center: the mean is known without reading data
            return center > psi, ConfidenceInfo(0, 0, scanned)
        batches.restart()
        if view.row_ratio is None:
            return self._decide_python(view, batches, theta, theta_new, psi, C, scanned)
        status, accepted, cursor, mean, look = _seq.confidence_loop(view.row_ratio, view.row_prefetch)(
            view.decision_data(theta, theta_new), theta, theta_new, rng, batches.kernel_state(),
            psi, C, self.delta, self.p, self.gamma, _BOUNDS.index(self.bound), self.batch_size,
        )
        if status == _seq.NONFINITE:
            accepted = _nonfinite_decision(mean, theta_new)
        return bool(accepted), ConfidenceInfo(cursor, look, scanned)

    def _decide_python(self, view, batches, theta, theta_new, psi, C, scanned):
        """Reference implementation (and the path for models without row kernels)."""
        N = view.N
        code = _BOUNDS.index(self.bound)
        mom = RunningMoments()
        b = min(self.batch_size, N)
        look = 0
        while True:
            look += 1
            if not mom.add(view.ratio(theta, theta_new, batches.take(b - mom.n))):
                accepted = _nonfinite_decision(mom.mean, theta_new)
                return accepted, ConfidenceInfo(batches.taken, look, scanned)
            t = mom.n
            diff = mom.mean - psi
            if t == N:
                return diff > 0, ConfidenceInfo(t, look, scanned)
            delta_t = look_delta(look, self.p, self.delta)
            if abs(diff) > confidence_radius_code(code, t, N, C, mom.population_sd(), delta_t):
                return diff > 0, ConfidenceInfo(t, look, scanned)
            b = next_size(t, N, self.gamma)

    def null_info(self):
        return ConfidenceInfo(0, 0, 0)


# --- the minibatch Barker test of Seita et al. -----------------------------------------------


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


def _correction_module():
    # On first use: only the Barker test needs a correction table.
    from design import correction

    return correction


@dataclass(frozen=True)
class BarkerTest(AcceptanceTest):
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
    delta : float or None
        Largest accepted ``eps``, in (0, 1); ``None`` leaves the bound out of the stopping
        rule (the authors' code did, see Notes) but still reports it.
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
        ``eps <= delta``). ``"presized"``: a pilot of ``m`` rows sizes the batch that
        decides, whose rows take no part in choosing its size, which removes the selection
        bias of the sequential rule on skewed ``l_i`` (see :mod:`samplers._barker_presized`;
        needs ``delta=None``: Corollary 1's bound is reported, not used).
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
    ``stopping="presized"`` removes the selection instead (a pilot of ``m`` rows sizes the
    batch that decides; :mod:`samplers._barker_presized` derives why it is unbiased): on
    the Gaussian mixture its posterior sds are within 1 MCSE of the exact posterior over
    10^6 pooled steps at 243 rows per step, against 169 rows and -8.4 to -9.1 MCSE for the
    sequential rule and 757 rows for ``delta = 0.5`` (``benchmarks/barker_presized.py``).
    It is an option, not the default, because it changes every chain of the default test
    and its margin was tuned on one workload. The bound's
    pass over the batch is skipped while a running lower bound already exceeds ``delta``,
    so a decision costs O(batch).

    Randomness, in order: the rows (one uniform each), then ``X_nc`` (one standard normal)
    and ``X_corr`` (one uniform, two with ``skew``), or one uniform for the exact test. For
    built-in models a decision is one compiled call (``samplers._seq.barker_loop``);
    other models take a Python path with the same arithmetic and the same draws.

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
    delta: float | None = 0.5
    correction: "CorrectionTable | SkewCorrectionTable | None" = None
    fpc: bool = True
    skew: bool = False
    stopping: str = "sequential"
    margin: float = 1.3
    _draw_args: tuple = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        set_ = object.__setattr__
        for name in ("fpc", "skew"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        set_(self, "m", check_int("m", self.m, low=3 if self.skew else 2))
        if self.delta is not None:
            set_(self, "delta", check_interval("delta", self.delta, 0.0, 1.0))
        if self.stopping not in ("sequential", "presized"):
            raise ValueError(f"stopping must be 'sequential' or 'presized', got {self.stopping!r}")
        if self.stopping == "presized" and self.delta is not None:
            raise ValueError(f"delta={self.delta} bounds the sequential rule's batch; the "
                             "presized rule sizes its batch from a pilot: pass delta=None")
        margin = float(self.margin) if isinstance(self.margin, (int, float, np.floating)) \
            and not isinstance(self.margin, bool) else None
        if margin is None:
            raise TypeError(f"margin must be a number >= 1, got {self.margin!r}")
        if not (math.isfinite(margin) and margin >= 1.0):
            raise ValueError(f"margin must be a finite number >= 1, got {self.margin!r}")
        set_(self, "margin", margin)
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
        set_(self, "_draw_args", (float(a.x0), float(a.spacing), float(step), density, cdf))

    @classmethod
    def from_design(cls, design) -> "BarkerTest":
        """The test a ``design.optimize(trial, tolerance, test="barker")`` result prescribes:
        its ``m`` and Novak threshold ``delta`` (None: the variance condition alone), with
        the default ``sigma = 1`` correction and the finite-population factor the design
        assumes."""
        _design_for(design, "barker", cls.__name__)
        return cls(m=design.m, delta=design.delta)

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
                             self.stopping, self.margin))

    @property
    def sigma(self) -> float:
        """Standard deviation of the Gaussian part of the logistic (the correction's sigma)."""
        return self.correction.sigma

    def check(self, view):
        if self.m > view.N:
            raise ValueError(f"m must be <= N = {view.N} (the number of rows), got {self.m}")

    def _settings(self):
        delta = -1.0 if self.delta is None else self.delta
        return (self.sigma, delta, self.delta is not None, bool(self.fpc), bool(self.skew))

    def decide(self, rng, view, batches, theta, theta_new, log_const):
        batches.restart()
        if self.stopping == "presized":
            return self._decide_presized(rng, view, batches, theta, theta_new, log_const)
        if view.row_ratio is None:
            return self._decide_python(rng, view, batches, theta, theta_new, log_const)
        loop = _seq.barker_loop(view.row_ratio, view.row_prefetch)
        status, accepted, n, stage, mean, s2, eps, eta = loop(
            view.decision_data(theta, theta_new), theta, theta_new, rng, batches.kernel_state(),
            self.m, log_const,
            *self._settings(), *self._draw_args,
        )
        if status == _seq.NONFINITE:
            return _nonfinite_decision(mean, theta_new), BarkerInfo(n, stage, *(math.nan,) * 3)
        return bool(accepted), BarkerInfo(n, stage, eps, s2, eta)

    def _decide_presized(self, rng, view, batches, theta, theta_new, log_const):
        sigma, _, _, fpc, skewed = self._settings()
        if view.row_ratio is None:
            out = _barker_presized.presized_python(
                rng, view, batches, theta, theta_new, log_const, self.m, self.margin, sigma,
                fpc, skewed, self._draw_args)
        else:
            loop = _barker_presized.presized_loop(view.row_ratio, view.row_prefetch)
            out = loop(view.decision_data(theta, theta_new), theta, theta_new, rng,
                       batches.kernel_state(), self.m, self.margin, log_const, sigma, fpc,
                       skewed, *self._draw_args)
        status, accepted, n, stage, mean, s2, eps, eta = out
        if status == _seq.NONFINITE:
            return _nonfinite_decision(mean, theta_new), BarkerInfo(n, stage, *(math.nan,) * 3)
        return bool(accepted), BarkerInfo(n, stage, eps, s2, eta)

    def _decide_python(self, rng, view, batches, theta, theta_new, log_const):
        """Reference implementation (and the path for models without row kernels)."""
        N = view.N
        sigma, delta, check_eps, fpc, skewed = self._settings()
        values = np.empty(self.m)
        n, mean, m2, m3 = 0, 0.0, 0.0, 0.0
        center, t1, t3 = math.nan, 0.0, 0.0
        stage = 0
        while True:
            stage += 1
            new = view.ratio(theta, theta_new, batches.take(self.m))
            k = new.shape[0]
            b_mean, b_m2, b_m3 = batch_moments3(new)
            if not (math.isfinite(b_mean) and math.isfinite(b_m2)):
                accepted = _nonfinite_decision(b_mean, theta_new)
                return accepted, BarkerInfo(batches.taken, stage, *(math.nan,) * 3)
            if n + k > values.shape[0]:  # grow as the compiled loop does
                values = np.concatenate([values[:n], np.empty(min(2 * values.shape[0], N) - n)])
            values[n:n + k] = new
            n, mean, m2, m3 = merge_moments3(n, mean, m2, m3, k, b_mean, b_m2, b_m3)
            status, s2, eps, center, t1, t3 = _seq.barker_stage(
                values[:n], k, N, mean, m2, sigma * sigma, delta, check_eps, fpc, center, t1, t3)
            if status != _seq.GROW:
                accepted, eta = _seq.barker_draw_kernel()(
                    rng, status, n, N, mean, m2, m3, log_const, s2, sigma, fpc, skewed,
                    *self._draw_args)
                return bool(accepted), BarkerInfo(n, stage, eps, s2, eta)

    def null_info(self):
        return BarkerInfo(0, 0, math.nan, math.nan, math.nan)
