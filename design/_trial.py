"""Trial chain: the per-pair summaries that the average test design needs."""

from __future__ import annotations

import math
import operator
import os
from dataclasses import dataclass

import numpy as np

from ._lib.checks import (as_generator, check_finite_array, check_int, check_interval,
                          check_positive)
from ._lib.distribute import as_cluster, recipe_of
from ._lib.jit import PASS_THREADS, jit
from ._lib.passes import run_chunks
from ._lib.moments import merge_moments4
from ._lib.npz import read_npz
from ._lib.summary import short_array

from ._pair_scan import _chunk_columns, distinct_vectors, pair_statistics

__all__ = ["TrialChain", "SampledTrial", "SAMPLE_SE", "SAMPLE_START", "SAMPLE_MAX_FRACTION",
           "SAMPLE_START_PER_SQRT", "SHAPE_MIN_ROWS", "SHAPE_UNSEEN"]

_FORMAT = "austerity.TrialChain"
_VERSION = 2
_READS = (1, 2)   # version 1: mu, sigma, c0, N only
#: Optional per-pair fields: the shape of the l_i population (the Barker design) and the
#: range of the l_i (the confidence design). None when the source did not record them.
_SHAPE_FIELDS = ("skewness", "kurtosis", "abs_z1", "abs_z3", "max_abs", "range_bound")
#: Absolute slack of the check that a model's bound holds, in units of the l_i's scale
#: ``max(1, |centre|, C)``: an l_i is a difference of per-row log-likelihoods (of order one
#: and more), each rounded, so a residual whose proxy is exact (control variates on
#: GaussianMean, LinearRegression: half-width 0) is rounding noise of ~1e-15, not a breach.
#: 2^12 eps ~ 9e-13 per row cannot move any decision the bound enters.
_BOUND_ROUNDING = 4096 * np.finfo(float).eps


#: :meth:`TrialChain.from_row_sample`'s defaults. SAMPLE_SE (nats): the largest standard
#: error of an estimated log MH ratio. It moves a pair's exact acceptance probability
#: min(1, e^x) by at most as much, so 0.001 is a tenth of fit's default design tolerance
#: (0.01, a mean |error| in acceptance probability) and a third of the verdict's own Monte
#: Carlo error (0.0035); the importance weights move by 0.1%, nothing beside k-hat's noise
#: (sd 0.26 at 41 draws) or the predicted acceptance's. SAMPLE_START: the first sample
#: (2^16 rows); it doubles while the error is above SAMPLE_SE. SAMPLE_MAX_FRACTION: beyond
#: this fraction of the rows the exact pass runs instead (a sample of a quarter of the rows
#: costs about as much as the pass and is not exact), so below 2^18 rows every pass is exact.
SAMPLE_SE, SAMPLE_START, SAMPLE_MAX_FRACTION = 1e-3, 2 ** 16, 0.25
#: The first sample is at least this many times sqrt(n_R) rows (n_R: the rows not read
#: exactly), whatever ``start``: :func:`samplers.heavy_rows` leaves to the sample a group of
#: more than sqrt(N) alike heavy rows, so such a group has then about 8 or more rows in the
#: sample on average (a group of sqrt(n_R) rows is missed entirely with probability about
#: e^-8 = 3e-4), and its share of the sum enters the estimate and its standard error. It
#: raises the first sample above 2^16 rows beyond about 6.7 * 10^7 rows (2.5 * 10^5 rows at
#: 10^9).
SAMPLE_START_PER_SQRT = 8
#: The sample's variance of the l_i is raised by this many of its own standard errors
#: before it gives a standard error (a one-sided upper confidence bound, ~98%): the sample
#: variance of rows whose l_i are heavy-tailed is right-skewed, below the population's in
#: most samples, and the log ratios' z-scores then spread wider than their standard errors
#: say. Its relative standard error is sqrt((kurt - 1) (1 - n / n_R) / n), kurt the
#: sample's m4 / m2^2: 0.6% at a normal population's kurt = 3 and n = 2^16, 12% at kurt = 1000.
SAMPLE_VARIANCE_Z = 2.0
#: A sample's fourth moment is trusted where, in the median pair, at least ``SHAPE_MIN_ROWS``
#: of its rows carry it ((sum d^4)^2 / sum d^8: the rows that would hold it in equal shares,
#: 1 when one row holds it all). Below, the rows it has not read may well hold more (its
#: kurtosis, raised or not, is then low in most samples), so the sample grows
#: ``SHAPE_GROWTH`` times once (new rows added), and the exact pass runs where that would
#: pass ``max_fraction`` or still falls short. Median pair at 2^16 sampled rows of 2^19-2^20
#: (``benchmarks/kurtosis_gate.py``): 76-79 rows on normal covariates, 63-73 on t(3), 29-45
#: on the rare-covariate data, 40-43 on ``bench_fit``'s d10 workload at 10^6 rows (so those
#: stay sampled); 6-40 (median 12-13) on t(2), 4-5 on t(1.2).
SHAPE_MIN_ROWS, SHAPE_GROWTH = 16, 16
#: Given a scale a_i of each row's l_i (``scales``: a control-variate residual at the edge
#: of the pairs' reach, :func:`samplers.residual_scales`), the rows the sample did not draw
#: could carry about their share of the rest's sum of a_i^4 of the fourth moment. Where
#: their sum of a_i^4 exceeds ``SHAPE_UNSEEN`` times the sample's own estimate of the
#: rest's (its Horvitz-Thompson sum), the sample missed rows that could carry it (it drew
#: none of the few rows of large scale and looks like normal data: the ``SHAPE_MIN_ROWS``
#: rule cannot see that), and it grows as for ``SHAPE_MIN_ROWS``. A sample that
#: represents the rows has a ratio near 1 - n / n_R. Measured
#: (``benchmarks/kurtosis_gate.py``, fit's scales :func:`samplers.residual_scales`): at
#: most 1.35 on normal, t(3) and rare-covariate data, 5.8 on t(2) at 2^19-2^20 rows (where
#: no sample missed), 0.95 on ``bench_fit``'s d10 at 10^6; 8,800-250,000 on the t(1.2)
#: samples that drew none of the rows carrying the fourth moment (8,192 of 10^5 rows).
SHAPE_UNSEEN = 16.0
#: Rows x columns of one chunk of the sample's l_i (8 MB), and of all of them kept between
#: the sizing pass and the moments' pass (64 MB; a larger sample is read again).
_SAMPLE_ENTRIES, _KEEP_ENTRIES = 2 ** 20, 2 ** 23


def _readonly(a):
    a.setflags(write=False)
    return a


def _range_methods(model, theta, theta_new):
    """``(loglik_ratio_range, loglik_ratio_bound)`` of ``model``, each None when it has none.

    Only the confidence design reads the range, so a model without one still gets a trial
    chain (``range_bound`` None; the confidence design then says what it lacks). A model
    that has the methods but no bound for its rows (a control-variate wrapper of a user's
    model) says so by a TypeError on a first call, at ``(theta, theta_new)``.
    """
    ranged = getattr(model, "loglik_ratio_range", None)
    bound = getattr(model, "loglik_ratio_bound", None)
    probe = ranged if ranged is not None else bound
    if probe is not None:
        try:
            probe(theta, theta_new)
        except TypeError:
            return None, None
    return ranged, bound


def _check_pairs(model, thetas, theta_news, log_q_ratios):
    """(N, thetas, theta_news, log q ratios) checked, as :meth:`TrialChain.from_model` takes
    them."""
    N = check_int("model.N", getattr(model, "N", None), low=2)
    if theta_news is None:
        pairs = check_finite_array("pairs", thetas)
        if pairs.ndim < 2 or pairs.shape[1] != 2:
            raise ValueError("pairs (thetas without theta_news) must have shape "
                             f"(n_pairs, 2, ...), got {pairs.shape}")
        thetas, theta_news = pairs[:, 0], pairs[:, 1]
    thetas = check_finite_array("thetas", thetas)
    theta_news = check_finite_array("theta_news", theta_news)
    if thetas.ndim == 0 or thetas.shape != theta_news.shape:
        raise ValueError(
            "thetas and theta_news must be arrays of the same shape (n_pairs, ...), got "
            f"{thetas.shape} and {theta_news.shape}")
    n_pairs = thetas.shape[0]
    if log_q_ratios is None:
        lqr = np.zeros(n_pairs)
    else:
        lqr = check_finite_array("log_q_ratios", log_q_ratios, ndim=1)
        if lqr.size != n_pairs:
            raise ValueError(f"log_q_ratios must have length {n_pairs}, got {lqr.size}")
    return N, thetas, theta_news, lqr


def _fields(model, thetas, theta_news, lqr, N, mu, sigma, shape):
    """A TrialChain's fields from each pair's mean and sd of the l_i and ``shape`` rows
    (min l, max l, sum d^3, sum d^4, sum |d|, sum |d|^3) over N rows, d = l - mu; the
    range is checked against the model's bound and c0 is the data-free term."""
    n_pairs = thetas.shape[0]
    ranged, bound = _range_methods(model, thetas[0], theta_news[0])
    fields = {k: np.empty(n_pairs) for k in ("mu", "sigma", "c0") + _SHAPE_FIELDS}
    for p in range(n_pairs):
        theta, theta_new = thetas[p], theta_news[p]
        mean, sd = float(mu[p]), float(sigma[p])
        lo, hi = shape[p, 0], shape[p, 1]
        sums = shape[p, 2:]
        var = sd * sd
        fields["mu"][p] = mean
        fields["sigma"][p] = sd
        if sd > 0:
            fields["skewness"][p] = sums[0] / N / sd**3
            fields["kurtosis"][p] = max(sums[1] / N / var**2 - 3.0, -2.0)
            fields["abs_z1"][p] = sums[2] / N / sd
            fields["abs_z3"][p] = sums[3] / N / sd**3
        else:                                       # refused below by __post_init__
            for k in ("skewness", "kurtosis", "abs_z1", "abs_z3"):
                fields[k][p] = 0.0
        fields["max_abs"][p] = max(abs(lo), abs(hi))
        if ranged is not None or bound is not None:
            if ranged is not None:
                centre, C = (float(v) for v in ranged(theta, theta_new))
                name = "loglik_ratio_range"
            else:
                centre, C, name = 0.0, float(bound(theta, theta_new)), "loglik_ratio_bound"
            reach = max(hi - centre, centre - lo)
            rounding = _BOUND_ROUNDING * max(1.0, abs(centre), C)
            if not C + rounding >= reach * (1.0 - 1e-9):
                raise ValueError(
                    f"model.{name} is not a bound for pair {p}: it gives half-width {C!r} "
                    f"about {centre!r}, but an l_i lies {reach!r} away")
            fields["range_bound"][p] = C
        dprior = float(model.logprior(theta_new)) - float(model.logprior(theta))
        if not np.isfinite(dprior):
            raise ValueError(f"model.logprior is not finite for pair {p}")
        fields["c0"][p] = -(dprior + lqr[p]) / N
    if bound is None and ranged is None:
        fields["range_bound"] = None
    return fields


@dataclass(frozen=True, eq=False)
class TrialChain:
    """Pairs (theta, theta') of a short trial run, summarised for the test design.

    For each pair the per-datum log-likelihood differences l_i = log p(x_i | theta') -
    log p(x_i | theta), i = 1..N, enter the design only through their mean ``mu``, their
    population standard deviation ``sigma`` (ddof = 0) and the data-free term ``c0`` of
    the threshold mu0(u) = log(u) / N + c0.

    Parameters
    ----------
    mu : array_like, shape (n_pairs,)
        Mean of l_i over all N data points, per pair.
    sigma : array_like, shape (n_pairs,)
        Population standard deviation of l_i (ddof = 0), per pair; must be finite and > 0.
    c0 : array_like, shape (n_pairs,)
        -(log prior(theta') - log prior(theta) + log q(theta | theta') - log q(theta' |
        theta)) / N, per pair; 0 for a flat prior and a symmetric proposal.
    N : int
        Number of data points, >= 2.
    skewness, kurtosis : array_like, shape (n_pairs,), optional
        Population skewness m3 / sigma^3 and excess kurtosis m4 / sigma^4 - 3 of the l_i,
        per pair: the Barker design's error term (``optimize(..., test="barker")``).
    abs_z1, abs_z3 : array_like, shape (n_pairs,), optional
        mean |z| and mean |z|^3 of the standardized l_i, z = (l - mu) / sigma, per pair:
        Corollary 1 of Seita et al. (2017), the Barker test's Novak bound.
    max_abs : array_like, shape (n_pairs,), optional
        max_i |l_i| over all N rows, per pair (what ``ConfidenceTest(range="full-data")``
        would use); from :meth:`from_row_sample`, over the rows read (the exact rows and the
        sample), which the full data's maximum can only exceed.
    range_bound : array_like, shape (n_pairs,), optional
        The model's range C, per pair: every l_i lies in [centre - C, centre + C]
        (``model.loglik_ratio_range`` gives (centre, C); ``model.loglik_ratio_bound`` C with
        centre 0). It is the range ``ConfidenceTest(range="model")`` uses, which the
        confidence design needs.

    Notes
    -----
    Exact MH accepts theta' with probability Pa = min(1, exp(N (mu - c0))); the
    approximate test accepts iff it decides mu > mu0(u), u ~ U(0, 1). The standardized mean
    is mu_std(u) = (mu - mu0(u)) sqrt(N - 1) / sigma (Korattikara et al. 2014, section 5.1).

    **Control variates.** A trial chain of a control-variate model
    (``samplers.ControlVariates``, whose per-row ratio is the Taylor residual
    r_i = l_i - proxy_i plus P / N, P the proxy's sum over all rows) records the residuals:
    ``mu`` is still the mean of the true l_i (the P / N term makes the means equal), but
    ``sigma``, the shape fields and the range are those of the r_i, which are orders of
    magnitude smaller near the centre. This is all the design needs: every test on the
    wrapper sees the residuals, so ``optimize`` on such a trial chain predicts the tests run
    on the wrapper (typically one minibatch per step).

    Examples
    --------
    >>> from design import TrialChain
    >>> tc = TrialChain(mu=[1e-5, -2e-5], sigma=[0.01, 0.02], c0=[0.0, 0.0], N=10_000)
    >>> tc.n_pairs, tc.accept_prob.round(3)
    (2, array([1.   , 0.819]))
    """

    mu: np.ndarray
    sigma: np.ndarray
    c0: np.ndarray
    N: int
    skewness: np.ndarray | None = None
    kurtosis: np.ndarray | None = None
    abs_z1: np.ndarray | None = None
    abs_z3: np.ndarray | None = None
    max_abs: np.ndarray | None = None
    range_bound: np.ndarray | None = None

    def __post_init__(self):
        N = check_int("N", self.N, low=2)
        mu = check_finite_array("mu", self.mu, ndim=1)
        sigma = check_finite_array("sigma", self.sigma, ndim=1)
        c0 = check_finite_array("c0", self.c0, ndim=1)
        if mu.size == 0:
            raise ValueError("a TrialChain needs at least one pair, got 0")
        if not (mu.shape == sigma.shape == c0.shape):
            raise ValueError(
                f"mu, sigma and c0 must have the same length, got {mu.size}, {sigma.size} "
                f"and {c0.size}")
        bad = np.flatnonzero(sigma <= 0)
        if bad.size:
            raise ValueError(
                f"sigma must be > 0 for every pair; {bad.size} pair(s) have sigma <= 0, first "
                f"pair {bad[0]} with sigma = {float(sigma[bad[0]])!r} (theta' == theta, or every "
                "l_i equal: the test is then exact; drop such pairs)")
        object.__setattr__(self, "N", N)
        object.__setattr__(self, "mu", _readonly(mu))
        object.__setattr__(self, "sigma", _readonly(sigma))
        object.__setattr__(self, "c0", _readonly(c0))
        for name in _SHAPE_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            arr = check_finite_array(name, value, ndim=1)
            if arr.shape != mu.shape:
                raise ValueError(f"{name} must have one value per pair ({mu.size}), got "
                                 f"{arr.size}")
            if name != "skewness" and np.any(arr < (-2.0 if name == "kurtosis" else 0.0)):
                low = "-2 (excess kurtosis)" if name == "kurtosis" else "0"
                raise ValueError(f"{name} must be >= {low} for every pair, got "
                                 f"{float(arr.min())!r}")
            object.__setattr__(self, name, _readonly(arr))

    def __repr__(self):
        return (f"TrialChain(n_pairs={self.n_pairs}, N={self.N}, mu={short_array(self.mu)}, "
                f"sigma={short_array(self.sigma)}, c0={short_array(self.c0)})")

    def __str__(self):
        pa = self.accept_prob
        mu_std = self.mu_std_at_one
        return "\n".join([
            f"TrialChain of {self.n_pairs} pair(s), N = {self.N:,}",
            f"  exact acceptance probability: mean {pa.mean():.3f}, "
            f"range [{pa.min():.3f}, {pa.max():.3f}]",
            f"  sigma of l_i: median {np.median(self.sigma):.4g}, "
            f"range [{self.sigma.min():.4g}, {self.sigma.max():.4g}]",
            f"  mu_std at u = 1: median {np.median(mu_std):.3g}, "
            f"range [{mu_std.min():.3g}, {mu_std.max():.3g}]",
        ])

    @property
    def n_pairs(self) -> int:
        """Number of pairs."""
        return int(self.mu.size)

    @property
    def log_accept_ratio(self) -> np.ndarray:
        """N (mu - c0): the log MH ratio of each pair."""
        return self.N * (self.mu - self.c0)

    @property
    def accept_prob(self) -> np.ndarray:
        """Exact MH acceptance probability Pa = min(1, exp(N (mu - c0)))."""
        return np.exp(np.minimum(self.log_accept_ratio, 0.0))

    @property
    def mu_std_scale(self) -> np.ndarray:
        """kappa = N sigma / sqrt(N - 1): mu_std(u) = mu_std(1) - log(u) / kappa."""
        return self.N * self.sigma / np.sqrt(self.N - 1.0)

    @property
    def mu_std_at_one(self) -> np.ndarray:
        """mu_std at u = 1: (mu - c0) sqrt(N - 1) / sigma, the smallest mu_std over u."""
        return (self.mu - self.c0) * np.sqrt(self.N - 1.0) / self.sigma

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_model(cls, model, thetas, theta_news=None, log_q_ratios=None, *, chunk=65_536,
                   workers=None, progress=None, two_pass=False, executor=None):
        """Summarise pairs by scanning the data of ``model`` in chunks.

        Parameters
        ----------
        model : object
            ``model.N`` (int), ``model.loglik(theta, idx)`` (per-datum log-likelihoods,
            temperature applied, for an integer index array ``idx``) and
            ``model.logprior(theta)``; a fused ``model.loglik_ratio(theta, theta_new, idx)``
            is used when present, and ``model.loglik_many(thetas, idx)`` (log-likelihoods of
            rows ``idx`` at k parameter vectors, shape (len(idx), k): for the built-in logistic
            regression one compiled loop over the rows, SIMD over the k vectors) is
            preferred when present.
        thetas, theta_news : array_like, shape (n_pairs, ...)
            Current and proposed parameters of each pair. With ``theta_news`` omitted,
            ``thetas`` holds the pairs, shape (n_pairs, 2, ...): ``from_model(model, pairs)``.
        log_q_ratios : array_like, shape (n_pairs,), optional
            log q(theta | theta') - log q(theta' | theta) per pair; zero (a symmetric
            proposal) when omitted.
        chunk : int
            Number of data points per call to the model.
        workers : int, optional
            Threads over chunks (NumPy releases the GIL); default: CPU count.
        progress : bool or callable, optional
            tqdm bar over the chunks (default: when stderr is a terminal), or
            ``callback(done, total)``; Ctrl-C or an exception from the callback stops the
            pass promptly.
        two_pass : bool
            Sum the shape of the l_i in a second pass about the mean (see Notes): the
            reference, with exact absolute moments, at twice the cost. mu and sigma are the
            same bits either way.
        executor : optional
            Run the pass on a cluster: a ``dask.distributed.Client``, its
            ``get_executor()``, or any ``concurrent.futures.Executor`` (the model needs
            ``block_recipe(start, stop)``, as the built-in models and control variates have:
            each task rebuilds about 10^6 rows on its worker). The chunks' results are
            merged here in chunk order, so the trial chain is the local one, bit for bit.

        Returns
        -------
        TrialChain

        Notes
        -----
        All pairs are summarised in one pass over the data: each chunk of rows is read once
        for every pair (``design._pair_scan``). The mean and variance of l_i are
        accumulated chunk by chunk with the pairwise update of Chan, Golub & LeVeque (1979),
        in chunk order, which does not lose precision when |mu| << sigma.

        The shape of the l_i (skewness, excess kurtosis, mean |z|, mean |z|^3) and max |l_i|
        come from the same pass (``design._pair_scan.pair_statistics``): the third and
        fourth central sums by Pebay's (2008) pairwise update, mean |z| and mean |z|^3 from
        sums about a pilot mean (a sample of the rows) split at a binned window, exact but
        for one bin's share, which is bounded and must stay below 1e-6 of the sum (else a
        second pass about the mean sums them exactly; from 2^18 rows, below which the two
        passes run). ``range_bound`` is the
        half-width of ``model.loglik_ratio_range(theta, theta')`` (a control-variate wrapper:
        the residual bound, about the centre P / N), else ``model.loglik_ratio_bound(theta,
        theta')``, checked to hold every l_i; None if the model has neither.

        For a control-variate wrapper the l_i are the wrapper's ratios, r_i + P / N: the
        trial chain then records the residuals' sd, shape and range (see the class Notes).

        Examples
        --------
        >>> import numpy as np
        >>> class UnitGaussianMean:              # x_i ~ N(theta, 1), flat prior
        ...     def __init__(self, x):
        ...         self.x, self.N = x, len(x)
        ...     def loglik(self, theta, idx):
        ...         return -0.5 * (self.x[idx] - theta[0]) ** 2
        ...     def logprior(self, theta):
        ...         return 0.0
        >>> model = UnitGaussianMean(np.random.default_rng(0).normal(size=1000))
        >>> tc = TrialChain.from_model(model, [[0.0], [0.0]], [[0.01], [-0.02]], chunk=300)
        >>> tc.n_pairs, tc.N, tc.sigma.round(4), tc.range_bound is None
        (2, 1000, array([0.0098, 0.0195]), True)
        """
        N, thetas, theta_news, lqr = _check_pairs(model, thetas, theta_news, log_q_ratios)
        chunk = check_int("chunk", chunk, low=1)
        if workers is None:
            workers = os.cpu_count() or 1
        workers = check_int("workers", workers, low=1)
        cluster = as_cluster(executor)
        if cluster is not None:
            recipe_of(model)                # refuse a model without one before any pass
        mu, sigma, shape = pair_statistics(model, thetas, theta_news, N=N, chunk=chunk,
                                           workers=workers, progress=progress,
                                           two_pass=bool(two_pass), executor=cluster)
        return cls(N=N, **_fields(model, thetas, theta_news, lqr, N, mu, sigma, shape))

    @staticmethod
    def prepare_scales(scales, N, exact_rows=()):
        """Row scales prepared once for many :meth:`from_row_sample` passes over the same
        rows (its ``scales``): checked (N finite values >= 0), the ``exact_rows`` set to 0,
        normalised, and the sum of their fourth powers taken, in one chunked pass, so that
        each pass then costs O(rows it reads), not O(N). The caller's array is not changed.

        >>> import numpy as np
        >>> prepared = TrialChain.prepare_scales(np.ones(1000), 1000, exact_rows=[3, 7])
        >>> float(prepared.total), float(prepared.a[3])
        (998.0, 0.0)
        """
        N = check_int("N", N, low=2)
        exact = _check_rows(exact_rows, N)
        return _PreparedScales(*_rest_scales(scales, N, exact), exact)

    @classmethod
    def from_row_sample(cls, model, thetas, theta_news=None, log_q_ratios=None, *, rng=None,
                        exact_rows=(), se_tolerance=SAMPLE_SE, start=SAMPLE_START,
                        max_fraction=SAMPLE_MAX_FRACTION, chunk=65_536, workers=None,
                        progress=None, cumulative=False, executor=None,
                        shape_rows=SHAPE_MIN_ROWS, scales=None,
                        shape_unseen=SHAPE_UNSEEN) -> "SampledTrial":
        r"""Summarise pairs from a stratified sample of the rows: all of ``exact_rows`` and
        a uniform sample of the rest, sized by the error it allows; the exact pass
        (:meth:`from_model`) where a sample would not be much smaller than the data.

        Parameters
        ----------
        model, thetas, theta_news, log_q_ratios :
            As :meth:`from_model`.
        rng : None, int, SeedSequence or numpy.random.Generator
            Draws the sample (equal seeds, equal results). Not drawn from when the exact
            pass runs at once (the first sample, see ``start``, above ``max_fraction``
            times the rest's rows).
        exact_rows : array_like of int
            Rows read exactly (weight 1): the rows whose l_i can dwarf the others' (the heavy
            rows of a control-variate model, :func:`samplers.heavy_rows`). The sample comes
            from the other rows.
        se_tolerance : float
            Largest standard error (nats) allowed for any pair's estimated log MH ratio
            N (mu - c0) (and, with ``cumulative``, for any cumulative sum of them).
        start : int
            First sample size, raised to ``SAMPLE_START_PER_SQRT * sqrt(n_R)`` rows where
            that is larger (n_R: the rows not in ``exact_rows``; so that a group of alike
            heavy rows that :func:`samplers.heavy_rows` leaves to the sample is not missed);
            it doubles (new rows added) while the tolerance is missed.
        max_fraction : float
            The exact pass runs instead once the sample would exceed this fraction of the
            rest's rows.
        chunk, workers, progress, executor :
            For the exact pass (:meth:`from_model`); the sample's rows are read here, sorted
            (a store-backed model reads them in one call per chunk).
        cumulative : bool
            Also bound the error of the cumulative sums of the pairs' log ratios (the log
            importance weights of a chain of independence-proposal draws).
        shape_rows : float
            Fewest rows of the sample that must carry the median pair's fourth moment
            (``SHAPE_MIN_ROWS``, see Notes); below, more rows are read. 0: never.
        scales : array_like of shape (N,), optional
            A scale of each row's l_i (:func:`samplers.residual_scales`: a control-variate
            model's residual at the edge of the pairs' reach), to check that the sample did
            not miss the rows that could carry the fourth moment (see Notes), or those
            scales prepared once for many passes (:meth:`prepare_scales`). None: not
            checked.
        shape_unseen : float
            With ``scales``: the most that the rows not drawn may hold of the rest's sum of
            scale^4, as a multiple of the sample's estimate of it (``SHAPE_UNSEEN``); above,
            more rows are read.

        Returns
        -------
        SampledTrial

        Notes
        -----
        With K the exact rows, R the rest (n_R rows) and S a simple random sample of n rows
        of R (uniform, without replacement), every sum over the N rows is estimated by the
        Horvitz-Thompson sum :math:`\sum_{i \in K} g(l_i) + (n_R / n) \sum_{i \in S} g(l_i)`:
        the mean, the central moments of orders 2-4 and the mean |z| and |z|^3 about the
        estimated mean. The log ratio's standard error is
        :math:`n_R s_+ \sqrt{(1 - n / n_R) / n}` (with the finite-population correction of a
        sample without replacement), :math:`s_+^2 = s_S^2 (1 + 2 r)` an upper confidence
        bound of the l_i's variance: s_S^2 the sample's, r its relative standard error
        :math:`\sqrt{(\kappa - 1)(1 - n / n_R) / n}`, kappa the sample's m4 / m2^2
        (``SAMPLE_VARIANCE_Z``; the sample variance of heavy-tailed l_i is below the truth in
        most samples). Everything the pairs
        share with the data but not with the rows (the prior, the proposal, the proxy's sum P
        of a control-variate model, in each l_i as P / N) stays exact. ``max_abs`` is the
        largest |l_i| over the rows read (the full data's maximum can only be larger);
        ``range_bound`` is the model's and is checked on the rows read.

        The fourth moment can sit on far fewer rows than the sum: where, in the median pair,
        fewer than ``shape_rows`` of the sample's rows carry it (:math:`(\sum_S d^4)^2 /
        \sum_S d^8`), the rows not read may well hold more, and the sample's kurtosis (and
        ``kurtosis_upper``, raised by 2 standard errors) is low in most samples. The sample then grows
        ``SHAPE_GROWTH`` = 16 times (new rows added) and, where that would pass
        ``max_fraction`` of the rest or still falls short, the exact pass runs: one more
        chunked pass, once, for the heavy-tailed data whose kurtosis decides something
        (fit's heavy-tails gate, the Edgeworth check).

        A sample that drew none of those rows looks like normal data to that rule (all of
        its rows carry its small fourth moment evenly). Given ``scales`` a_i, known for
        every row, the sample is also checked against them: the rows it did not draw hold
        :math:`\sum_{R \setminus S} a_i^4`, and the sample estimates the rest's total as
        :math:`(n_R / n) \sum_S a_i^4`; where the first exceeds ``shape_unseen`` times the
        second (about 1 - n / n_R where the sample represents the rows: 0.8-1.4 on normal
        covariates, up to 5.8 on t(2); 10^4-10^5 on the t(1.2) samples that missed) it grows
        in the same way. Preparing the scales (checked, normalised, their sum) is a
        chunked pass over all N of them; :meth:`prepare_scales` does it once for many
        passes, after which a pass costs O(rows it reads).

        The sample is drawn once and grown, so all pairs share its rows: the estimates of a
        chain of pairs telescope, and a cumulative sum of log ratios is the estimate of the
        log ratio between its ends, with an error of the same order as one pair's.

        This is sound where the l_i of the rest are spread evenly enough for their mean to
        be normal at n rows: a control-variate model's Taylor residuals once its heavy rows
        are read exactly. Where nothing says so (no split of heavy rows looked for) call
        :meth:`from_model`.

        Examples
        --------
        >>> import numpy as np
        >>> class UnitGaussianMean:              # x_i ~ N(theta, 1), flat prior
        ...     def __init__(self, x):
        ...         self.x, self.N = x, len(x)
        ...     def loglik(self, theta, idx):
        ...         return -0.5 * (self.x[idx] - theta[0]) ** 2
        ...     def logprior(self, theta):
        ...         return 0.0
        >>> model = UnitGaussianMean(np.random.default_rng(0).normal(size=100_000))
        >>> got = TrialChain.from_row_sample(model, [[0.0]], [[1e-4]], rng=1, start=4096,
        ...                                  se_tolerance=0.2)
        >>> got.sampled, got.rows_read
        (True, 4096)
        >>> exact = TrialChain.from_model(model, [[0.0]], [[1e-4]], progress=False)
        >>> bool(abs(got.trial.log_accept_ratio[0] - exact.log_accept_ratio[0])
        ...      < 4 * got.log_ratio_se[0])
        True
        """
        N, thetas, theta_news, lqr = _check_pairs(model, thetas, theta_news, log_q_ratios)
        check_positive("se_tolerance", se_tolerance)
        start = check_int("start", start, low=2)
        check_interval("max_fraction", max_fraction, 0.0, 1.0)
        shape_rows = check_positive("shape_rows", shape_rows, allow_zero=True)
        shape_unseen = check_positive("shape_unseen", shape_unseen)
        exact = _check_rows(exact_rows, N)
        rest = N - exact.size
        if isinstance(scales, _PreparedScales):
            if scales.a.shape != (N,) or not np.array_equal(scales.exact, exact):
                raise ValueError(f"scales were prepared (TrialChain.prepare_scales) for "
                                 f"{scales.a.size} rows and {scales.exact.size} exact rows, "
                                 f"not these {N} rows and {exact.size} exact rows")
            scales, scales_total = scales.a, scales.total
        elif scales is not None:
            scales, scales_total = _rest_scales(scales, N, exact)
        P = thetas.shape[0]
        start = max(start, math.ceil(SAMPLE_START_PER_SQRT * math.sqrt(rest)))

        def exact_pass():
            trial = cls.from_model(model, thetas, theta_news, lqr, chunk=chunk, workers=workers,
                                   progress=progress, executor=executor)
            return SampledTrial(trial, np.zeros(P), np.zeros(P), N, False)

        if start > max_fraction * rest:
            return exact_pass()
        rng = as_generator(rng)
        plan = (("many", distinct_vectors(thetas, theta_news))
                if callable(getattr(model, "loglik_many", None)) else
                ("generic", (thetas, theta_news)))
        step = max(1024, _SAMPLE_ENTRIES // (2 * P + 1))
        # the sample's count, mean and sums of powers 2-4 about the mean of each pair's l_i
        # (then of each cumulative sum's), merged chunk by chunk (Chan et al. 1979, Pébay
        # 2008)
        moments, sample, size = None, np.empty(0, dtype=np.intp), start
        kept, entries = [], 0           # the sample's l_i, kept while they are small

        def read(new, moments, kept, entries):
            """The sample's running moments (and kept l_i) with the rows ``new`` added."""
            for lo in range(0, new.size, step):
                idx = _rest_rows(np.sort(new[lo:lo + step]), exact)
                L = _differences(model, plan, idx, "sampled")
                got = _chan(L, cumulative)
                moments = got if moments is None else merge_moments4(*moments, *got)
                entries += L.size
                if kept is not None:
                    kept = kept + [L] if entries <= _KEEP_ENTRIES else None
            return moments, kept, entries

        while True:
            new = _more_rows(rng, rest, sample, size - sample.size)
            moments, kept, entries = read(new, moments, kept, entries)
            sample = np.concatenate([sample, new])
            n = sample.size
            se = _standard_error(moments, n, rest)
            if float(se.max()) <= se_tolerance:
                break
            if 2 * size > max_fraction * rest:
                return exact_pass()
            size *= 2

        def totals():
            """The trial from the Horvitz-Thompson totals (the mean, then the moments about
            it), the shape raised by its standard errors and the rows carrying each pair's
            fourth moment."""
            blocks = ([(1.0, _differences(model, plan, exact, "exactly read"))] if exact.size
                      else [])
            if kept is not None:
                blocks += [(rest / n, L) for L in kept]
            else:                       # read the sample's rows again, in chunks
                rows = _rest_rows(np.sort(sample), exact)
                blocks += [(rest / n, rows[lo:lo + step]) for lo in range(0, n, step)]
            total = rest * moments[1][:P]
            if exact.size:
                total = total + blocks[0][1].sum(axis=0)
            mu = total / N
            acc = (np.zeros(P), np.zeros((P, 4)), np.full(P, math.inf), np.full(P, -math.inf))
            powers = np.zeros((4, P))   # the sample's sums of d^3, d^4, d^6, d^8
            for weight, block in blocks:
                L = block if block.ndim == 2 else _differences(model, plan, block, "sampled")
                sampled = weight != 1.0         # a block of the sample (n < rest)
                acc, got = _accumulate(L, weight, mu, acc, sampled)
                if sampled:
                    powers += got
            m2, sums, low, high = acc
            shape = np.column_stack([low, high, sums])
            trial = cls(N=N, **_fields(model, thetas, theta_news, lqr, N, mu, np.sqrt(m2 / N),
                                       shape))
            return trial, _shape_upper(trial, sums, powers, n, rest), _fourth_rows(powers, n)

        def unseen():
            """The unsampled rows' sum of scale^4 over the sample's estimate (None
            without ``scales``)."""
            return (None if scales is None else
                    _unseen_fourth(scales, scales_total, _rest_rows(sample, exact), rest))

        def short(spread, unseen):
            """Whether the sample's fourth moment is not to be trusted: few of its rows
            carry it, or the rows it did not draw could carry far more."""
            return (float(np.median(spread)) < shape_rows
                    or (unseen is not None and unseen > shape_unseen))

        trial, (skew_hi, kurt_hi), spread = totals()
        missed = unseen()
        if short(spread, missed):
            # few of the sample's rows carry the fourth moment, or the rows not drawn could
            # carry more: read more (a sample SHAPE_GROWTH times larger, new rows added;
            # all rows where that is too large)
            size = SHAPE_GROWTH * n
            if size > max_fraction * rest:
                return exact_pass()
            new = _more_rows(rng, rest, sample, size - n)
            moments, kept, entries = read(new, moments, kept, entries)
            sample = np.concatenate([sample, new])
            n = sample.size
            se = _standard_error(moments, n, rest)
            trial, (skew_hi, kurt_hi), spread = totals()
            missed = unseen()
            if short(spread, missed):
                return exact_pass()
        return SampledTrial(trial, se[:P], se[P:] if cumulative else np.zeros(P),
                            exact.size + n, True, skew_hi, kurt_hi, spread, missed)

    @classmethod
    def from_chain(cls, chain):
        """Build from a chain recorded by exact MH (``samplers``).

        Reads ``chain.N`` and the per-iteration arrays ``chain.stats["l_mean"]`` (mean of
        l_i over all N), ``chain.stats["l_std"]`` (population sd of l_i, ddof = 0) and
        ``chain.stats["log_const"]`` (the data-free log term log prior ratio + log q ratio,
        so c0 = -log_const / N). Arrays of several chains stacked (n_chains, n_samples) are
        pooled. Steps where the test read no data (a proposal outside the prior's support:
        ``log_const = -inf`` and the statistics NaN) are left out: the sampler rejects them
        without error.

        Exact MH on a control-variate wrapper records the wrapper's ratios, so ``sigma`` is
        the sd of the residuals. A chain records no shape or range of the l_i: such a trial
        chain serves the Austere design; the Barker and confidence designs need
        :meth:`from_model`.
        """
        stats = getattr(chain, "stats", None)
        missing = [k for k in ("l_mean", "l_std", "log_const")
                   if stats is None or k not in stats]
        if missing:
            raise TypeError(
                "chain must carry stats['l_mean'], stats['l_std'] and stats['log_const'] "
                f"(record it with exact MH); missing {missing}")
        N = check_int("chain.N", getattr(chain, "N", None), low=2)
        mu, sigma, log_const = (np.ravel(np.asarray(stats[k], dtype=float))
                                for k in ("l_mean", "l_std", "log_const"))
        if not (mu.shape == sigma.shape == log_const.shape):
            raise ValueError("chain.stats['l_mean'], ['l_std'] and ['log_const'] must have "
                             f"the same length, got {mu.size}, {sigma.size}, {log_const.size}")
        ran = np.isfinite(mu) & np.isfinite(sigma) & np.isfinite(log_const)
        if not ran.any():
            raise ValueError(f"none of the {mu.size} steps of the chain ran the test on data")
        return cls(mu=mu[ran], sigma=sigma[ran], c0=-log_const[ran] / N, N=N)

    # ------------------------------------------------------------------ file format
    def save(self, path) -> None:
        """Write to ``path`` as an .npz file with a format name and version.

        Examples
        --------
        >>> import os, tempfile
        >>> tc = TrialChain(mu=[1e-5], sigma=[0.01], c0=[0.0], N=10_000)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     tc.save(os.path.join(tmp, "trial.npz"))
        ...     back = TrialChain.load(os.path.join(tmp, "trial.npz"))
        >>> back.N, back.sigma
        (10000, array([0.01]))
        """
        extra = {k: getattr(self, k) for k in _SHAPE_FIELDS if getattr(self, k) is not None}
        with open(path, "wb") as fh:
            np.savez(fh, format=np.array(_FORMAT), version=np.array(_VERSION),
                     mu=self.mu, sigma=self.sigma, c0=self.c0, N=np.array(self.N), **extra)

    @classmethod
    def load(cls, path) -> "TrialChain":
        """Read a file written by :meth:`save`; reject other files and other versions."""
        path = os.fspath(path)
        contents = read_npz(path, what=f"TrialChain file {path!r}")  # sizes checked first
        if str(contents.get("format", "")) != _FORMAT:
            raise ValueError(f"{path} is not a TrialChain file (no format tag {_FORMAT!r})")
        raw = contents.get("version")
        try:
            version = None if raw is None else operator.index(raw.item())
        except (TypeError, ValueError):
            raise ValueError(f"{path} has an unreadable TrialChain file version {raw!r}; this "
                             f"version of austerity reads version {_VERSION}") from None
        if version not in _READS:
            raise ValueError(
                f"{path} has TrialChain file version {version}; this version of austerity "
                f"reads versions {', '.join(map(str, _READS))}")
        missing = [k for k in ("mu", "sigma", "c0", "N") if k not in contents]
        if missing:
            raise ValueError(f"{path} is a corrupt TrialChain file: missing {missing}")
        try:
            return cls(mu=contents["mu"], sigma=contents["sigma"], c0=contents["c0"],
                       N=contents["N"].item(), **{k: contents[k] for k in _SHAPE_FIELDS
                                                  if k in contents})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path} holds an invalid TrialChain: {exc}") from exc


def _check_rows(rows, N):
    """``exact_rows`` checked: a sorted copy of distinct row indices in [0, N) leaving at
    least 2 rows."""
    arr = np.asarray(rows)
    if arr.size == 0:
        return np.empty(0, dtype=np.intp)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(f"exact_rows must be a 1-D array of integer row indices, got "
                        f"{arr.dtype} of shape {arr.shape}")
    out = np.unique(arr.astype(np.intp))
    if out.size != arr.size:
        raise ValueError(f"exact_rows must be distinct, got {arr.size - out.size} repeat(s)")
    if out[0] < 0 or out[-1] >= N or N - out.size < 2:
        raise ValueError(f"exact_rows must lie in [0, {N - 1}] and leave at least 2 of the "
                         f"model's {N} rows, got {out.size} rows in [{out[0]}, {out[-1]}]")
    return out


def _rest_rows(pos, exact):
    """The rows at positions ``pos`` of the rows not in ``exact`` (both sorted)."""
    if exact.size == 0:
        return pos
    adj = exact - np.arange(exact.size, dtype=np.intp)
    return pos + np.searchsorted(adj, pos, side="right")


def _more_rows(rng, rest, have, need):
    """``need`` positions in [0, rest) drawn uniformly without replacement, none in ``have``:
    successive draws, a repeat redrawn (so ``have`` and the result are one simple random
    sample)."""
    out = np.empty(0, dtype=np.intp)
    while out.size < need:
        m = need - out.size
        cand = rng.integers(0, rest, size=m + m // 2 + 16)
        _, first = np.unique(cand, return_index=True)
        cand = cand[np.sort(first)]                     # first occurrences, in draw order
        cand = cand[~np.isin(cand, np.concatenate([have, out]))]
        out = np.concatenate([out, cand[:m]])
    return out


def _differences(model, plan, idx, which):
    """The l_i of every pair at rows ``idx`` (``which`` rows, for the error: "sampled" or
    "exactly read"), shape (len(idx), P)."""
    ll, old, new = _chunk_columns(model, plan, idx)
    L = ll[:, new] - ll[:, old]
    if not np.all(np.isfinite(L)):
        raise ValueError(f"model log-likelihood differences must be finite; non-finite at "
                         f"{int(np.sum(~np.isfinite(L).all(axis=1)))} of {idx.size} {which} rows")
    return L


def _chan(L, cumulative):
    """(count, mean, sums of the 2nd, 3rd and 4th powers about the mean) of each column of
    ``L`` (then of its cumulative sums across columns), the batches that
    :func:`~design._lib.moments.merge_moments4` merges (Pébay 2008). One compiled kernel
    (:func:`_chan_sums`), the bits of NumPy's ``X.mean(axis=0)``, ``(d * d).sum(axis=0)``,
    ..., which add the rows of a C-ordered ``X`` of several columns in order (of one
    column, pairwise: NumPy's sums then)."""
    L = np.ascontiguousarray(L, dtype=np.float64)
    if L.shape[1] == 1 and not cumulative:
        mean = L.mean(axis=0)
        d = L - mean
        d2 = d * d
        return L.shape[0], mean, d2.sum(axis=0), (d2 * d).sum(axis=0), (d2 * d2).sum(axis=0)
    out = np.empty((4, 2 * L.shape[1] if cumulative else L.shape[1]))
    _chan_sums(L, bool(cumulative), out)
    return L.shape[0], out[0], out[1], out[2], out[3]


@jit
def _chan_sums(L, cumulative, out):
    """``out[0]``: the mean of each column of ``X``; ``out[1:4]``: the sums of d^2, d^2 d
    and d^2 d^2 about it, d = X - mean; ``X`` is ``L`` (then, with ``cumulative``, its
    cumulative sums along each row). Each column's rows are added in order, as NumPy's
    reductions over axis 0 of a C-ordered array do (the same bits)."""
    n, P = L.shape
    cols = out.shape[1]
    x = np.empty(cols)
    mean = out[0]
    s2, s3, s4 = out[1], out[2], out[3]
    mean[:] = 0.0
    s2[:] = 0.0
    s3[:] = 0.0
    s4[:] = 0.0
    for i in range(n):
        _row(L, i, cumulative, x)
        for j in range(cols):
            mean[j] += x[j]
    for j in range(cols):
        mean[j] = mean[j] / n
    for i in range(n):
        _row(L, i, cumulative, x)
        for j in range(cols):
            d = x[j] - mean[j]
            d2 = d * d
            s2[j] += d2
            s3[j] += d2 * d
            s4[j] += d2 * d2


@jit
def _row(L, i, cumulative, x):
    """``x``: row ``i`` of ``L``, then (``cumulative``) its running sums (np.cumsum's order)."""
    P = L.shape[1]
    c = 0.0
    for j in range(P):
        v = L[i, j]
        x[j] = v
        if cumulative:
            c += v
            x[P + j] = c


def _total_se(ss, n, rest, inflate=1.0):
    """The standard error of a Horvitz-Thompson total over ``rest`` rows of a value whose
    sum of squares about its mean is ``ss`` in a simple random sample of n rows (without
    replacement: the finite-population correction), the sample variance raised by the
    factor ``inflate``."""
    fpc = 1.0 - n / rest
    return rest * np.sqrt(ss / (n - 1) * inflate * fpc / n)


def _standard_error(moments, n, rest):
    """The standard error of the Horvitz-Thompson total of each column over ``rest`` rows
    from a simple random sample of n with these ``moments`` (:func:`_chan`), its variance
    raised by ``SAMPLE_VARIANCE_Z`` of its standard errors (its kurtosis from the sample)."""
    _, _, m2, _, m4 = moments
    kurt = m4 * n / np.maximum(m2 * m2, np.finfo(float).tiny)
    rse = np.sqrt(np.maximum(kurt - 1.0, 0.0) * (1.0 - n / rest) / n)
    return _total_se(m2, n, rest, 1.0 + SAMPLE_VARIANCE_Z * rse)


def _shape_upper(trial, sums, powers, n, rest):
    """Each pair's |skewness| and excess kurtosis raised by ``SAMPLE_VARIANCE_Z`` standard
    errors: the Horvitz-Thompson sums of d^3 and d^4 (``sums``' first two columns) plus that
    many standard errors from the sample's ``powers`` (sums of d^3, d^4, d^6, d^8 over its n
    rows of ``rest``), over the trial's variance. Not a ~98% bound: a sample of
    heavy-tailed l_i misses most of the rows that carry the fourth moment, so its d^8 sum
    (the standard error's) falls short too (see :class:`SampledTrial`)."""
    s3, s4, s6, s8 = powers
    se3 = _total_se(np.maximum(s6 - s3 * s3 / n, 0.0), n, rest)
    se4 = _total_se(np.maximum(s8 - s4 * s4 / n, 0.0), n, rest)
    N, var = trial.N, trial.sigma ** 2
    skew = (np.abs(sums[:, 0]) + SAMPLE_VARIANCE_Z * se3) / N / trial.sigma ** 3
    kurt = np.maximum((sums[:, 1] + SAMPLE_VARIANCE_Z * se4) / N / var ** 2 - 3.0, -2.0)
    return skew, kurt


def _fourth_rows(powers, n):
    """How many of the sample's n rows carry each pair's sum of d^4: (sum d^4)^2 / sum d^8,
    n when every row holds an equal share, 1 when one row holds it all."""
    _, s4, _, s8 = powers
    return np.where(s8 > 0, s4 * s4 / np.maximum(s8, np.finfo(float).tiny), float(n))


@dataclass(frozen=True, eq=False)
class _PreparedScales:
    """:meth:`TrialChain.prepare_scales`' result: the normalised scales ``a`` (the exact rows
    0), the sum of their fourth powers ``total`` and the exact rows they were prepared for."""

    a: np.ndarray
    total: float
    exact: np.ndarray


def _rest_scales(scales, N, exact):
    """``scales`` checked (N finite values >= 0, a copy) with the exact rows' set to 0, over
    their largest value (so that their fourth powers neither overflow nor vanish), and
    the sum of those fourth powers: one chunked pass."""
    a = check_finite_array("scales", scales, ndim=1)
    if a.shape != (N,) or np.any(a < 0):
        raise ValueError(f"scales must be {N} finite values >= 0 (one per row of the model, "
                         f"samplers.residual_scales), got shape {a.shape}"
                         f"{'' if a.shape != (N,) else f' with minimum {float(a.min())!r}'}")
    a[exact] = 0.0
    top = float(a.max())
    if top > 0:
        a /= top
    total = 0.0
    for lo in range(0, N, _SAMPLE_ENTRIES):
        c = a[lo:lo + _SAMPLE_ENTRIES] ** 2
        total += float(np.dot(c, c))
    return a, total


def _unseen_fourth(a, total, rows, rest):
    """The rest's sum of a^4 (``total``) over the rows not in the sample ``rows`` (row
    indices of the model), over the sample's Horvitz-Thompson estimate of ``total``: about
    1 - n / n_R where the sample represents the rows that carry it, large where it missed
    them (inf where no sampled row has a scale)."""
    c = a[rows] ** 2
    got = float(np.dot(c, c))
    unseen = max(total - got, 0.0)
    if got == 0.0:
        return math.inf if unseen > 0 else 0.0
    return unseen / (got * rest / rows.size)


def _accumulate(L, weight, mu, acc, powers=False):
    """(``acc``, ``got``): ``acc`` = (sum d^2, (sum d^3, d^4, |d|, |d|^3), min l, max l) per
    pair with the rows of ``L`` added at ``weight``, d = l - mu; ``got`` the unweighted sums
    of d^3, d^4, d^6 and d^8 (:func:`_shape_upper`'s ``powers``; d^3 as ``d ** 3``) with
    ``powers``, else None. One compiled pass (:func:`_about_sums`), the bits of the NumPy
    expressions it replaced (rows added in order, as NumPy's sums over axis 0 of several
    columns do; of one column, NumPy's pairwise sums), but for d^3: libm's pow, which is
    NumPy's ``d ** 3`` where NumPy has no SIMD pow of its own (its AVX-512 loop may differ
    in the last bit)."""
    m2, sums, low, high = acc
    L = np.ascontiguousarray(L, dtype=np.float64)
    if L.shape[1] == 1:
        d = L - mu
        d2, d3 = d * d, d ** 3
        d4 = d3 * d
        a = np.abs(d)
        out = np.stack([x.sum(axis=0) for x in (d2, d2 * d, d2 * d2, a, a * d2,
                                                d3, d4, d3 * d3, d4 * d4)])
    else:
        out = np.empty((9 if powers else 5, L.shape[1]))
        # a block of columns per core (each column's rows still added in order: the same
        # bits); libm's pow, d ** 3, is most of the time
        P = L.shape[1]
        blocks = max(1, min(P, PASS_THREADS))
        run_chunks(_about_sums, blocks, L, np.ascontiguousarray(mu, dtype=np.float64),
                   bool(powers), out, -(-P // blocks))
    m2 = m2 + weight * out[0]
    sums = sums + weight * out[1:5].T
    acc = m2, sums, np.minimum(low, L.min(axis=0)), np.maximum(high, L.max(axis=0))
    return acc, (out[5:] if powers else None)


@jit
def _about_sums(L, mu, powers, out, width, b0, b1):
    """Sums over the rows of ``L`` (in order) of d^2, d^2 d, d^2 d^2, |d| and |d| d^2,
    d = L - mu, in ``out[0:5]``; with ``powers`` also of d3 = d ** 3, d4 = d3 d, d3 d3 and
    d4 d4 in ``out[5:9]``: the columns of blocks ``b0 <= b < b1`` of ``width`` columns."""
    n = L.shape[0]
    c0, c1 = b0 * width, min(b1 * width, L.shape[1])
    out[:, c0:c1] = 0.0
    for i in range(n):
        for j in range(c0, c1):
            d = L[i, j] - mu[j]
            d2 = d * d
            a = abs(d)
            out[0, j] += d2
            out[1, j] += d2 * d
            out[2, j] += d2 * d2
            out[3, j] += a
            out[4, j] += a * d2
            if powers:
                d3 = math.pow(d, 3.0)         # libm's pow (NumPy's d ** 3 without AVX-512)
                d4 = d3 * d
                out[5, j] += d3
                out[6, j] += d4
                out[7, j] += d3 * d3
                out[8, j] += d4 * d4


@dataclass(frozen=True, eq=False)
class SampledTrial:
    """A :class:`TrialChain` from :meth:`TrialChain.from_row_sample`, with the errors of its
    estimates.

    Attributes
    ----------
    trial : TrialChain
    log_ratio_se : ndarray of shape (n_pairs,)
        Standard error (nats) of each pair's log MH ratio ``trial.log_accept_ratio``; zeros
        after the exact pass.
    cumulative_se : ndarray of shape (n_pairs,)
        Standard error of the cumulative sums of the log ratios (pairs 0..p); zeros after
        the exact pass or when not asked for (``cumulative=False``).
    rows_read : int
        Rows whose l_i were computed (the exact rows and the sample; N for the exact pass).
    sampled : bool
        False when the exact pass ran (the sample would have been too large).
    abs_skewness_upper, kurtosis_upper : ndarray of shape (n_pairs,)
        Each pair's sampled |skewness| and excess kurtosis raised by ``SAMPLE_VARIANCE_Z``
        = 2 of their standard errors, for decisions that a too-small shape would make less
        safe (fit's heavy-tails gate); ``|trial.skewness|`` and ``trial.kurtosis``
        themselves after the exact pass (the default), or where the trial records no shape.
        Not a ~98% bound: the standard error comes from the sample's d^8, which falls short
        with its d^4. Measured share of pairs whose full-data kurtosis it covers
        (``benchmarks/kurtosis_gate.py``, 30 samples of 2^16 of 2^19-2^20 rows, 40 pairs):
        0.94-0.95 on normal and t(3) covariates, 0.85-0.88 on the rare-covariate data,
        0.84-0.99 on t(2) (0.58-0.87 where the sample is not grown for its fourth moment,
        ``shape_rows=0``; the estimate alone 0.37-0.54); from 8,192 of 10^5 rows, 0.92-0.94
        on normal covariates and 0.90-1.0 on t(1.2) (0.86-0.92 and 0.20-0.69 not grown).
        ``benchmarks/results/kurtosis_gate.md`` has the table. These count the samples
        that grew into the exact pass, covered by construction; among those still sampled
        (``sampled``) the share is lower: 0.72-0.90 on t(2), 0.77-0.90 from 8,192 of 10^5
        rows on normal covariates. Without ``scales`` the one t(1.2) sample of 10 left
        sampled drew none of the rows carrying the fourth moment and covered none; with
        them (fit's passes) it grows into the exact pass (``unseen_fourth``).
    fourth_moment_rows : ndarray of shape (n_pairs,) or None
        How many of the sample's rows carry each pair's fourth moment, (sum d^4)^2 /
        sum d^8 (``SHAPE_MIN_ROWS``); None after the exact pass.
    unseen_fourth : float or None
        With ``scales``: the sum of scale^4 over the rest's rows the sample did not draw,
        over the sample's estimate of it over the whole rest (``SHAPE_UNSEEN``); None after
        the exact pass or without ``scales``.
    """

    trial: TrialChain
    log_ratio_se: np.ndarray
    cumulative_se: np.ndarray
    rows_read: int
    sampled: bool
    abs_skewness_upper: np.ndarray | None = None
    kurtosis_upper: np.ndarray | None = None
    fourth_moment_rows: np.ndarray | None = None
    unseen_fourth: float | None = None

    def __post_init__(self):
        if self.abs_skewness_upper is None and self.trial.skewness is not None:
            object.__setattr__(self, "abs_skewness_upper", np.abs(self.trial.skewness))
        if self.kurtosis_upper is None:
            object.__setattr__(self, "kurtosis_upper", self.trial.kurtosis)
