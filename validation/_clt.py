"""Does the central limit theorem hold for the minibatch statistics of a dataset?"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from design._lib.checks import as_generator, check_finite_array, check_int, check_interval
from design._lib.distribute import as_cluster
from design._lib.progress import progress_bar
from design._lib.rows import new_order

from samplers.models import loglik_ratio

from ._kernels import minibatch_rows, minibatch_values_statistics
from ._ratios import CHUNK, Population, loglik_ratios
from ._verdict import design_settings, run_acceptance_check

__all__ = ["CLTCheck", "clt_check"]

#: Bins of the stored histogram of each pair's standardized l_i.
HIST_BINS = 120
#: Level of the Kolmogorov quantile reported as the Monte Carlo noise of the KS distance.
NOISE_LEVEL = 0.05
#: The batch-size search drops a pair early once its distance exceeds the tolerance by more
#: than the Kolmogorov quantile at this level (a false early failure is that unlikely).
EARLY_STOP_LEVEL = 1e-3
#: The batch-size search steps by this factor.
SEARCH_RATIO = math.sqrt(2.0)
SEARCH_FLOOR = 8
_SEARCH_FIRST = 1000
#: The simulations read the l_i of at most this many rows at once (8 MB).
_BLOCK_VALUES = 1 << 20
#: Up to this many rows (32 MB a pair), a pair whose simulations ask for more than N / 4
#: l_i gets all N computed once and kept (cheaper than reading most rows many times).
_FULL_ROWS = 1 << 22
#: ... and at most this many l_i kept over all pairs (256 MB); the batch-size search keeps
#: them above ``_FULL_ROWS`` too, within this bound.
_KEPT_VALUES = 1 << 25


def _jarque_bera_pvalue(x):
    """Jarque-Bera test's p-value of the values ``x``, as ``statsmodels``' ``jarque_bera``
    computes it (same operations): n/6 (S^2 + K^2/4) against chi-squared(2)."""
    from scipy import stats

    skew = stats.skew(x)
    kurtosis = 3 + stats.kurtosis(x)
    jb = (x.shape[0] / 6.) * (skew ** 2 + (1 / 4.) * (kurtosis - 3) ** 2)
    return stats.chi2.sf(jb, 2)


def _lilliefors():
    """``statsmodels``' Lilliefors test, from its own module where this statsmodels has it:
    ``statsmodels.stats.diagnostic`` (the public name of the same function) also imports
    the regression diagnostics and their formula packages, a few tenths of a second of a
    first ``fit`` that the check does not use."""
    try:
        from statsmodels.stats._lilliefors import lilliefors
    except ImportError:   # pragma: no cover - a statsmodels that moved it
        from statsmodels.stats.diagnostic import lilliefors
    return lilliefors


@functools.lru_cache(maxsize=64)
def _ks_noise(n_sim: int, level: float = NOISE_LEVEL) -> float:
    """Upper ``level`` quantile of the KS distance of ``n_sim`` draws from their own law,
    bounded from above by the one-sided (Smirnov) quantile at ``level / 2``: the two-sided
    distance exceeds x when one of the one-sided distances does, so P(D > x) <= 2 P(D+ > x),
    short by the chance that both do. From n = 100 to 10^6 that is within 2.2e-6
    (relative) of the exact quantile (``scipy.stats.kstwo.isf``) at level 0.05 and within
    1e-6 at 1e-3, never below it (tested); ``scipy.special.smirnovi`` spares a first check
    the import of ``scipy.stats`` (a third of a second)."""
    return float(special.smirnovi(n_sim, level / 2))


def _ks_noise_bound(n_sim: int, level: float = NOISE_LEVEL) -> float:
    """An upper bound on :func:`_ks_noise` in closed form: the one-sided distance has
    P(D+ > x) <= exp(-2 n x^2) for every x (Massart 1990), so its upper ``level / 2``
    quantile is at most sqrt(log(2 / level) / (2 n)) (tested)."""
    return math.sqrt(math.log(2.0 / level) / (2.0 * n_sim))


def ks_distance(t, df) -> float:
    """Kolmogorov-Smirnov distance between the sample ``t`` and Student-t with ``df`` dof."""
    F = special.stdtr(df, np.sort(t))
    n = F.size
    return float(max(np.max(np.arange(1, n + 1) / n - F), np.max(F - np.arange(n) / n)))


class _WithFlatPrior:
    """A model without ``logprior`` seen with a flat one: ``clt_check`` reads only its l_i,
    and the one-pass statistics (``design.TrialChain.from_model``) ask for a prior."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def logprior(self, theta):
        return 0.0


class _Source:
    """The l_i of each pair, given as rows or from a model, read where they are needed.

    A model's l_i are never held over all N rows: the statistics of every pair (mean, sd,
    skewness, excess kurtosis, mean |z| and |z|^3) come from one pass over the data for all
    pairs (:meth:`design.TrialChain.from_model`, on ``executor``'s workers if given), or from
    a ``trial`` chain of the same pairs that already made that pass; the simulations read the
    l_i only at the rows they draw (:meth:`values`, the model's ``loglik_ratio`` at those
    rows).
    """

    def __init__(self, source, pairs, chunk, executor=None, trial=None, progress=None):
        self.executor, self.chunk, self.progress = executor, chunk, progress
        self._pops, self._full, self._asked = {}, {}, {}
        #: set by the batch-size search (:func:`_search`): above ``_FULL_ROWS`` rows too, a
        #: pair asked for more than N / 4 l_i gets all N computed once and kept, the pairs
        #: used longest ago dropped to stay within ``_KEPT_VALUES``
        self.searching = False
        if pairs is None:
            if trial is not None:
                raise TypeError("trial= goes with a model and its pairs, not with l_i given "
                                "as arrays")
            l = check_finite_array("l", source, ndim=(1, 2))
            self.rows = l.reshape(1, -1) if l.ndim == 1 else l
            self.model = None
            self.N = self.rows.shape[1]
            self.n_pairs = self.rows.shape[0]
            return
        if not callable(getattr(source, "loglik", None)):
            raise TypeError("with pairs, the first argument must be a model with "
                            f"loglik(theta, idx) and N, got {type(source).__name__}")
        if hasattr(pairs, "samples") and hasattr(pairs, "proposal"):
            raise TypeError("pass pairs drawn from a chain with validation.proposal_pairs("
                            "chain, model), not the chain itself")
        try:
            thetas, theta_news = pairs
        except (TypeError, ValueError):
            raise TypeError("pairs must be (thetas, theta_news), two arrays of shape "
                            "(n_pairs, d)") from None
        thetas = check_finite_array("thetas", thetas, ndim=(1, 2))
        theta_news = check_finite_array("theta_news", theta_news, ndim=(1, 2))
        thetas = thetas.reshape(thetas.shape[0], -1)
        theta_news = theta_news.reshape(theta_news.shape[0], -1)
        if thetas.shape != theta_news.shape or thetas.shape[0] == 0:
            raise ValueError(f"thetas and theta_news must have the same non-empty shape "
                             f"(n_pairs, d), got {thetas.shape} and {theta_news.shape}")
        self.model, self.thetas, self.theta_news = source, thetas, theta_news
        # a model whose rows are in memory computes the l_i at the rows as drawn (a row
        # drawn twice is computed twice, which costs less than finding the repeats); any
        # other model is asked once per distinct row, in sorted order (a store's reads)
        sources = getattr(source, "data_sources", None)
        self._in_memory = callable(sources) and not sources()
        self.N = check_int("model.N", getattr(source, "N", None), low=4)
        self.n_pairs = thetas.shape[0]
        self.trial = None if trial is None else _check_trial(trial, self.n_pairs, self.N)

    def population(self, p) -> Population:
        """The :class:`Population` of pair p (for a model: every pair's from one pass)."""
        if p not in self._pops:
            if self.model is None:
                try:
                    self._pops[p] = Population.of(self.rows[p])
                except ValueError as exc:
                    raise ValueError(f"row {p} of the l_i array: {exc}") from None
            else:
                self._pops.update(enumerate(self._model_populations()))
        return self._pops[p]

    def _model_populations(self):
        from design import TrialChain

        trial = self.trial
        if trial is None:
            # the l_i's statistics only: a model need not have a prior for them
            model = (self.model if callable(getattr(self.model, "logprior", None))
                     else _WithFlatPrior(self.model))
            try:
                trial = TrialChain.from_model(model, self.thetas, self.theta_news,
                                              chunk=self.chunk, progress=self.progress,
                                              executor=self.executor)
            except ValueError as exc:
                if "sigma must be > 0" in str(exc):
                    exc = ValueError("the l_i of a pair are all equal (theta_new == "
                                     f"theta?): there is no sampling error to check ({exc})")
                exc.names_its_pair = True      # the pass's message names the pair, if any
                raise exc from None
        return [Population(float(trial.mu[p]), float(trial.sigma[p]),
                           float(trial.skewness[p]), float(trial.kurtosis[p]),
                           float(trial.abs_z1[p]), float(trial.abs_z3[p]))
                for p in range(self.n_pairs)]

    def full(self, p):
        """All N l_i of pair p if they are at hand (given, or kept at small N), else None."""
        return self.rows[p] if self.model is None else self._full.get(p)

    def values(self, p, rows) -> np.ndarray:
        """The l_i of pair p at ``rows`` (an integer array of any shape), in its shape.

        For a model, computed at those rows; once the rows asked for a pair pass N / 4 and
        N is at most ``_FULL_ROWS``, all N l_i of the pair are computed in one pass and
        kept (a simulation that reads most rows many times, at small N).
        """
        if self.model is None:
            return self.rows[p][rows]
        if p in self._full:
            if self.searching:                     # most recently used last (the eviction)
                self._full[p] = self._full.pop(p)
            return self._full[p][rows]
        asked = self._asked.get(p, 0) + np.size(rows)
        kept = sum(v.size for v in self._full.values())
        large = self.N > _FULL_ROWS
        if large and self.searching and asked > self.N / 4 and self.N <= _KEPT_VALUES:
            while kept + self.N > _KEPT_VALUES:     # the pair used longest ago makes room
                kept -= self._full.pop(next(iter(self._full))).size
        if ((not large or self.searching) and asked > self.N / 4
                and kept + self.N <= _KEPT_VALUES):
            self._full[p] = loglik_ratios(self.model, self.thetas[p], self.theta_news[p],
                                          chunk=self.chunk)
            return self._full[p][rows]
        self._asked[p] = asked
        flat = np.asarray(rows).ravel()
        if self._in_memory:
            uniq, inverse = flat, None
        else:
            uniq, inverse = np.unique(flat, return_inverse=True)
        theta, theta_new = self.thetas[p], self.theta_news[p]
        got = loglik_ratio(self.model, theta, theta_new, uniq)
        if got.shape != uniq.shape:
            raise ValueError(f"the model returned {got.shape} log-likelihood ratios for "
                             f"{uniq.size} rows")
        if not np.all(np.isfinite(got)):
            k = int(np.flatnonzero(~np.isfinite(got))[0])
            raise ValueError(f"log-likelihood ratio of row {int(uniq[k])} is {got[k]} "
                             f"between theta={theta} and theta_new={theta_new}")
        got = got if inverse is None else got[inverse.ravel()]
        return got.reshape(np.shape(rows))

    def histogram(self, p, sample):
        """Counts and edges of ``HIST_BINS`` bins of pair p's standardized l_i: over all N
        rows for l_i given as arrays; for a model, of the l_i ``sample`` read by the
        simulation, the counts scaled to N."""
        pop = self.population(p)
        if self.model is None:
            return np.histogram((self.rows[p] - pop.mean) / pop.sd, bins=HIST_BINS)
        counts, edges = np.histogram((sample - pop.mean) / pop.sd, bins=HIST_BINS)
        return counts * (self.N / sample.size), edges


def _check_trial(trial, n_pairs, N):
    """``trial``, a :class:`design.TrialChain` of ``n_pairs`` pairs over N rows with the shape
    of their l_i (:meth:`~design.TrialChain.from_model`)."""
    missing = [k for k in ("mu", "sigma", "skewness", "kurtosis", "abs_z1", "abs_z3")
               if getattr(trial, k, None) is None]
    if missing:
        raise TypeError("trial must be a design.TrialChain from TrialChain.from_model on the "
                        f"same model and pairs (with the shape of the l_i), missing {missing}")
    if trial.n_pairs != n_pairs or trial.N != N:
        raise ValueError(f"trial must summarise the same {n_pairs} pairs over N = {N} rows, "
                         f"got {trial.n_pairs} pairs over N = {trial.N}")
    return trial


@dataclass(frozen=True, eq=False)
class CLTCheck:
    """Whether a minibatch's t statistic follows the Student-t law it is assumed to follow.

    Per-pair fields are arrays of length ``n_pairs``.

    Attributes
    ----------
    passed : bool
        The verdict. Given a design: the verdict of :attr:`acceptance`, i.e. the mean over
        the pairs of |Delta|, the error of the real sequential test in the acceptance
        probability, meets the design's tolerance. Without a design: every pair's KS
        distance is at most ``tolerance`` (the same as ``ks_passed``).
    batch_size, tolerance, n_sim, N, n_pairs
        The settings: minibatch size b, threshold on the KS distance, simulated minibatches
        per pair, population size, number of pairs.
    mean, sd : numpy.ndarray
        Mean and population sd (ddof 0) of each pair's l_i.
    skewness, excess_kurtosis : numpy.ndarray
        Population skewness and excess kurtosis of each pair's l_i.
    novak : numpy.ndarray
        Novak's bound ``(6.4 E|X|^3 + 2 E|X|) / sqrt(b)`` on the sup distance between the
        cdf of the t statistic and the normal cdf, X the standardized l_i (Seita et al.
        2017, Lemma 3). It is at least ``8.4 / sqrt(b)`` for any data.
    novak_batch_size : numpy.ndarray of int
        Batch size at which Novak's bound reaches ``tolerance`` (may exceed N).
    ks_distance, ks_pvalue : numpy.ndarray
        Kolmogorov-Smirnov distance between the simulated t statistics and Student-t with
        b - 1 degrees of freedom, and its p-value (``scipy.stats.kstest``).
    jarque_bera_pvalue, omnibus_pvalue, lilliefors_pvalue : numpy.ndarray
        statsmodels normality tests of the simulated minibatch means (Jarque-Bera and
        the omnibus test computed with scipy as statsmodels computes them).
    noise : float
        95% quantile of the KS distance of ``n_sim`` draws from the right law: the
        simulation's resolution.
    min_batch_size : int or None
        Smallest batch size on the ladder ``b sqrt(2)^k`` (k integer, at least 8, at most
        N / 2) at which the check passes, None if none up to N / 2 does.
    t_statistics, minibatch_means : numpy.ndarray, shape (n_pairs, n_sim)
        The simulated t statistics and the means of their minibatches.
    histogram, bin_edges : numpy.ndarray, shape (n_pairs, bins) and (n_pairs, bins + 1)
        Histogram of each pair's standardized l_i: of all N when they are at hand (given
        as an array, or kept at small N), else of the l_i at the rows the first block of
        simulations read (at most 2^20), counts scaled to N (the extreme tails may then be
        missing from the plot).
    acceptance : AcceptanceCheck or None
        Given a design: the error in the acceptance probability per pair and averaged as
        the design averages it, simulated with the real test and predicted by the Gaussian
        and the Edgeworth-corrected programmes (:func:`acceptance_check`); else None.
    ks_passed : bool or None
        Every pair's KS distance is at most ``tolerance`` (supporting detail: at large N
        and n_sim the KS distance is significant for any skewed l_i, whether or not the
        design's error is affected).
    searched : bool
        Whether the smallest passing batch size was searched for (``search=True``).

    Notes
    -----
    The p-values are supporting detail that no verdict reads: each is computed when it is
    first read, from ``t_statistics`` and ``minibatch_means``, so that a check (and every
    ``fit``) does not import ``scipy.stats`` and ``statsmodels`` (half a second in a new
    process) for values nobody looks at.
    """

    passed: bool
    batch_size: int
    tolerance: float
    n_sim: int
    N: int
    n_pairs: int
    mean: np.ndarray
    sd: np.ndarray
    skewness: np.ndarray
    excess_kurtosis: np.ndarray
    novak: np.ndarray
    novak_batch_size: np.ndarray
    ks_distance: np.ndarray
    noise: float
    min_batch_size: int | None
    t_statistics: np.ndarray
    minibatch_means: np.ndarray
    histogram: np.ndarray
    bin_edges: np.ndarray
    acceptance: object = None
    ks_passed: bool | None = None
    searched: bool = True

    @functools.cached_property
    def ks_pvalue(self) -> np.ndarray:
        """p-value of each pair's KS distance (``scipy.stats.kstest``), computed when first
        read."""
        from scipy import stats

        law = stats.t(self.batch_size - 1).cdf
        return _read_only([stats.kstest(t, law).pvalue for t in self.t_statistics])

    @functools.cached_property
    def jarque_bera_pvalue(self) -> np.ndarray:
        """Jarque-Bera p-value of each pair's minibatch means, computed when first read."""
        return _read_only([_jarque_bera_pvalue(m) for m in self.minibatch_means])

    @functools.cached_property
    def omnibus_pvalue(self) -> np.ndarray:
        """D'Agostino-Pearson omnibus p-value of each pair's minibatch means
        (``scipy.stats.normaltest``), computed when first read."""
        from scipy import stats

        return _read_only([stats.normaltest(m).pvalue for m in self.minibatch_means])

    @functools.cached_property
    def lilliefors_pvalue(self) -> np.ndarray:
        """Lilliefors p-value (statsmodels, ``pvalmethod="approx"``) of each pair's
        minibatch means, computed when first read."""
        lilliefors = _lilliefors()
        return _read_only([lilliefors(m, pvalmethod="approx")[1]
                           for m in self.minibatch_means])

    @property
    def worst_pair(self) -> int:
        """Index of the pair with the largest KS distance."""
        return int(np.argmax(self.ks_distance))

    def __repr__(self):
        return (f"CLTCheck(passed={bool(self.passed)}, batch_size={self.batch_size}, "
                f"tolerance={self.tolerance:g}, N={self.N}, n_pairs={self.n_pairs}, "
                f"n_sim={self.n_sim}, max_ks_distance={float(np.max(self.ks_distance)):.3g}, "
                f"worst_pair={self.worst_pair}, min_batch_size={self.min_batch_size})")

    def __str__(self):
        verdict = "PASSES" if self.passed else "FAILS"
        w = self.worst_pair
        if not self.searched:
            smallest = "not searched (search=False)"
        elif self.min_batch_size is None:
            smallest = f"none up to N/2 = {self.N // 2:,}"
        else:
            smallest = f"{self.min_batch_size:,}"
        lines = []
        if self.acceptance is not None:
            lines += [f"CLT check: {verdict} (verdict in the currency of the design)",
                      str(self.acceptance), "",
                      "Supporting detail: the law of the minibatch t statistic ("
                      f"KS {'passes' if self.ks_passed else 'fails'})"]
            verdict = "PASSES" if self.ks_passed else "FAILS"
        lines += [
            f"CLT check of the minibatch t statistic: {verdict} at tolerance "
            f"{self.tolerance:g} (b = {self.batch_size:,}, N = {self.N:,}, "
            f"{self.n_pairs} pair(s), {self.n_sim:,} minibatches each)",
            f"  KS distance to Student-t({self.batch_size - 1}): max {self.ks_distance[w]:.3g} "
            f"(pair {w}), median {np.median(self.ks_distance):.3g}; simulation noise "
            f"{self.noise:.2g}",
            f"  |skewness| of l_i: max {np.abs(self.skewness).max():.3g}; excess kurtosis: "
            f"max {self.excess_kurtosis.max():.3g}",
            f"  Novak bound: min {self.novak.min():.3g}, passes tolerance from b = "
            f"{int(self.novak_batch_size.max()):,}",
            f"  smallest passing batch size (simulated): {smallest}",
            "",
            "  pair   skewness  ex.kurt   Novak    KS dist   KS p     JB p     omni p   "
            "Lillie p",
        ]
        shown = range(self.n_pairs) if self.n_pairs <= 12 else np.argsort(
            -self.ks_distance)[:12]
        for p in shown:
            flag = "" if self.ks_distance[p] <= self.tolerance else "  <-"
            lines.append(
                f"  {p:>4}  {self.skewness[p]:>9.3g} {self.excess_kurtosis[p]:>8.3g} "
                f"{self.novak[p]:>7.3g}  {self.ks_distance[p]:>8.3g} {self.ks_pvalue[p]:>8.2g} "
                f"{self.jarque_bera_pvalue[p]:>8.2g} {self.omnibus_pvalue[p]:>8.2g} "
                f"{self.lilliefors_pvalue[p]:>8.2g}{flag}")
        if self.n_pairs > 12:
            lines.append(f"  ... the 12 worst of {self.n_pairs} pairs")
        return "\n".join(lines)

    def plot(self, pair=None):
        """QQ plot of the simulated t statistics against Student-t, and the histogram of
        the standardized l_i (log counts, with the normal curve), for ``pair`` (default:
        the worst). Returns the matplotlib Figure."""
        import matplotlib.pyplot as plt
        from scipy import stats

        p = self.worst_pair if pair is None else check_int("pair", pair, low=0,
                                                            high=self.n_pairs - 1)
        t = np.sort(self.t_statistics[p])
        probs = (np.arange(1, t.size + 1) - 0.5) / t.size
        theory = stats.t.ppf(probs, self.batch_size - 1)
        fig, (qq, hist) = plt.subplots(1, 2, figsize=(10, 4))
        qq.plot(theory, t, ".", ms=2, color="C0", rasterized=True)
        lim = [min(theory[0], t[0]), max(theory[-1], t[-1])]
        qq.plot(lim, lim, "k--", lw=1)
        qq.set_xlabel(f"Student-t({self.batch_size - 1}) quantiles")
        qq.set_ylabel("simulated t statistics")
        qq.set_title(f"pair {p}, b = {self.batch_size}: KS distance "
                     f"{self.ks_distance[p]:.3g}", fontsize="small")
        edges, counts = self.bin_edges[p], self.histogram[p]
        hist.stairs(counts, edges, fill=True, color="C1", alpha=0.6, label="l_i")
        centres = 0.5 * (edges[1:] + edges[:-1])
        normal = self.N * np.diff(edges) * stats.norm.pdf(centres)
        hist.plot(centres, normal, "k-", lw=1, label="normal")
        hist.set_yscale("log")
        hist.set_ylim(0.5, max(counts.max(), normal.max()) * 2)
        hist.set_xlabel("standardized l_i")
        hist.set_ylabel("count")
        hist.set_title(f"skewness {self.skewness[p]:.3g}, excess kurtosis "
                       f"{self.excess_kurtosis[p]:.3g}", fontsize="small")
        hist.legend(fontsize="small")
        if self.acceptance is None:
            fig.suptitle(f"CLT check: {'passes' if self.passed else 'fails'} at tolerance "
                         f"{self.tolerance:g}")
        else:
            a = self.acceptance
            fig.suptitle(f"CLT check: {'PASSES' if self.passed else 'FAILS'} in the currency "
                         f"of the design (real test's mean |Delta| {a.mean_abs_simulated:.3g} "
                         f"± {a.mean_abs_simulated_se:.2g}, tolerance {a.tolerance:g}); KS "
                         f"{'passes' if self.ks_passed else 'fails'} at {self.tolerance:g}",
                         fontsize="medium")
        fig.tight_layout()
        return fig


def _read_only(values) -> np.ndarray:
    a = np.array(values, dtype=float)
    a.setflags(write=False)
    return a


def _simulate(src, p, mu, b, n, rng, order, keep=None):
    """Means and t statistics of ``n`` minibatches of ``b`` rows of pair p: the rows are
    drawn first (by blocks of about ``_BLOCK_VALUES`` l_i), then the l_i read there; the
    same draws from ``rng`` as :func:`validation._kernels.minibatch_statistics`. ``keep``
    (a list) receives the first block's l_i."""
    means, tstats = np.empty(n), np.empty(n)
    per = max(1, _BLOCK_VALUES // b)
    for s in range(0, n, per):
        k = min(per, n - s)
        rows = np.empty((k, b), dtype=np.intp)
        minibatch_rows(order, rng, rows)
        values = src.values(p, rows)
        if keep is not None and not keep:
            keep.append(values.ravel())
        minibatch_values_statistics(values, mu, src.N, means[s:s + k], tstats[s:s + k])
    return means, tstats


def _passes(src, p, b, tolerance, n_sim, rng):
    """Whether pair p passes at batch size b; stops as soon as it clearly fails.

    Simulates in doubling rounds from 1,000 minibatches; once the KS distance exceeds
    ``tolerance`` by more than its noise quantile at level ``EARLY_STOP_LEVEL``, the pair
    fails without more rounds.
    """
    mu = src.population(p).mean
    order = new_order(src.N)
    tstats = np.empty(0)
    n = min(_SEARCH_FIRST, n_sim)
    while True:
        tstats = np.concatenate([tstats, _simulate(src, p, mu, b, n - tstats.size, rng,
                                                   order)[1]])
        dist = ks_distance(tstats, b - 1)
        if n == n_sim:
            return dist <= tolerance
        if dist - _ks_noise(n, EARLY_STOP_LEVEL) > tolerance:
            return False
        n = min(2 * n, n_sim)


def _search(source, order, b0, passed_at_b0, tolerance, n_sim, rng):
    """Smallest batch size on the ladder b0 sqrt(2)^k at which every pair passes."""
    N = source.N
    if passed_at_b0:
        ladder = sorted({int(round(b0 / SEARCH_RATIO**k)) for k in range(1, 64)
                         if b0 / SEARCH_RATIO**k >= SEARCH_FLOOR})
    else:
        ladder = sorted({int(round(b0 * SEARCH_RATIO**k)) for k in range(1, 64)
                         if b0 * SEARCH_RATIO**k <= N // 2})
    # the search reads ~1,000 minibatches of b rows per pair and rung, up to b = N/2: once
    # that passes N/4 rows a pair's N l_i are computed in one pass and looked up, at any N
    # whose l_i fit in memory (not only at N <= _FULL_ROWS: computing the l_i at each rung's
    # rows cost O(1000 b) model evaluations there, minutes a rung at 2^23 rows)
    source.searching = True
    try:
        for b in ladder:
            if all(_passes(source, p, b, tolerance, n_sim, rng) for p in order):
                return b
        return b0 if passed_at_b0 else None
    finally:
        source.searching = False


def clt_check(source, pairs=None, *, batch_size=None, tolerance=0.05, n_sim=20_000,
              search=True, chunk=CHUNK, rng=None, progress=None, design=None,
              log_const=None, n_paths=4000, false_alarm=0.01, sequential=False,
              edgeworth=True, executor=None, trial=None) -> CLTCheck:
    """Check the central-limit assumption of the minibatch tests on a dataset.

    Given the ``design`` the data are for, the verdict is whether that design keeps its
    promise on these l_i: the mean error in the acceptance probability against its
    tolerance (see ``design``). Without one, the verdict is the KS distance below.

    The sequential t-test (Korattikara et al. 2014) assumes that the t statistic of a
    minibatch of l_i drawn without replacement follows Student-t with b - 1 degrees of
    freedom; the Barker test (Seita et al. 2017) that the minibatch mean is normal. This
    function measures how far that is from true on the actual l_i, for each pair
    (theta, theta').

    Parameters
    ----------
    source : Model or array_like
        A model (then ``pairs`` is required), or the l_i themselves: a vector of length N
        (one pair) or an array of shape (n_pairs, N).
    pairs : (thetas, theta_news), optional
        Arrays of shape (n_pairs, d), e.g. from :func:`proposal_pairs` on a trial chain.
        The statistics of every pair's N l_i come from one chunked pass over the data for
        all pairs (O(N) time, no per-row storage); the simulations compute the l_i only at
        the rows they draw.
    batch_size : int, optional
        Minibatch size b, ``2 <= b < N``; default: the design's m, else 500.
    tolerance : float
        Largest acceptable KS distance between the simulated t statistics and Student-t,
        in (0, 1). A distance d shifts every tail probability the test relies on by up to
        d; the default 0.05 separates Gaussian-like l_i (about 0.02 for the (mean, log sd)
        model on Gaussian data at b = 500, whose l_i have skewness near 2.8) from data on
        which the test is unreliable (0.5 for lognormal(0, 2) data). Designs with a small
        per-stage error epsilon call for a smaller tolerance (and a larger ``n_sim``).
    n_sim : int
        Minibatches simulated per pair. The KS distance of ``n_sim`` draws carries noise of
        about ``1.36 / sqrt(n_sim)``; it must be at most half the tolerance.
    search : bool
        Also search for the smallest passing batch size (:attr:`CLTCheck.min_batch_size`).
    chunk : int
        Rows per model call when computing the l_i.
    rng : None, int, SeedSequence or Generator
    progress : bool or None
        A progress bar over the pairs; None (default): only if stderr is a terminal.
    design : Design, optional
        An Austere design (:func:`design.optimize`). Then the verdict is in the design's
        currency: the error in the acceptance probability of its test on these l_i, per
        pair and as the mean |Delta| the design bounds, against its tolerance
        (:func:`acceptance_check`: the real test simulated on the real l_i, beside the
        Gaussian and the Edgeworth-corrected predictions); the KS distance and the
        normality tests stay as supporting detail (``ks_passed``).
    log_const, n_paths, false_alarm, sequential, edgeworth
        With a design: see :func:`acceptance_check`. With ``sequential`` the KS distance
        (then supporting detail) is also simulated in rounds: 1,000 minibatches per pair
        first, the rest of ``n_sim`` only if no pair clearly fails it (its distance above
        the tolerance by more than the Kolmogorov quantile at level 1e-3, the search's
        rule); ``n_sim`` then records the minibatches simulated.
    executor : optional
        Run the pass over the data on a cluster: a ``dask.distributed.Client``, its
        ``get_executor()`` or any ``concurrent.futures.Executor``, as
        :meth:`design.TrialChain.from_model` does (the same statistics as the local pass,
        bit for bit). The l_i are never gathered: this process holds the statistics and
        the l_i of the rows simulated.
    trial : design.TrialChain, optional
        With a model: the :meth:`~design.TrialChain.from_model` summary of exactly these
        pairs on this model (e.g. the trial chain the pairs and the design came from);
        its statistics replace the pass, so the check reads only the rows it simulates.

    Returns
    -------
    CLTCheck

    Notes
    -----
    Minibatches are drawn without replacement from the real l_i, O(b) per minibatch (a
    sparse Fisher-Yates shuffle, :func:`design._lib.rows.draw_rows`): their rows are drawn
    first and the l_i computed there. Memory is O(pairs x rows simulated), never O(N) for
    a model. The mean, sd, skewness, excess kurtosis and Novak's bound of a model's pairs
    come from one pass (Chan/Pebay moments; the absolute moments about a pilot mean,
    certified to 1e-6 or summed again, :meth:`design.TrialChain.from_model`), and its
    ``histogram`` is that of the l_i at the simulated rows (counts scaled to N). Only at
    small N (at most 2^22 rows) does a pair whose simulations read more than N / 4 rows get
    all its l_i computed and kept. The t
    statistic
    is the sequential test's ``(mean - mu) / s`` with ``s`` the sample sd times the
    finite-population correction. The normality tests (``statsmodels``: Jarque-Bera,
    omnibus, Lilliefors) are of the minibatch means; with many simulated minibatches they
    detect departures far too small to matter, so the verdict rests on the KS distance, an
    effect size. Novak's bound is a guarantee for i.i.d. draws but is too loose to pass at
    practical batch sizes (it is at least 8.4 / sqrt(b)).

    Close to b = N the finite-population statistic is again far from Student-t (it then
    reflects the few rows left out), so the batch-size search stops at N / 2.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import clt_check
    >>> rng = np.random.default_rng(0)
    >>> normal = clt_check(rng.normal(size=100_000), batch_size=100, n_sim=5000,
    ...                    tolerance=0.05, search=False, rng=1)
    >>> skewed = clt_check(rng.lognormal(0, 2, 100_000), batch_size=100, n_sim=5000,
    ...                    tolerance=0.05, search=False, rng=1)
    >>> normal.passed, skewed.passed
    (True, False)
    """
    as_cluster(executor)                   # a closed executor is refused before any work
    src = _Source(source, pairs, check_int("chunk", chunk, low=1), executor, trial, progress)
    N = src.N
    if N < 4:
        raise ValueError(f"the population must have at least 4 values, got N = {N}")
    if design is not None:
        settings = design_settings(design, None, None, None, None)
    if batch_size is None:
        batch_size = 500 if design is None else min(design.m, N - 1)
    b = check_int("batch_size", batch_size, low=2, high=N - 1)
    tolerance = check_interval("tolerance", tolerance, 0.0, 1.0)
    n_sim = n_requested = check_int("n_sim", n_sim, low=100)
    # the cheap bound settles the usual case; the exact quantile (a few tenths of a second
    # at n_sim = 20,000) only where the bound cannot, and below for the n_sim simulated
    if _ks_noise_bound(n_sim) > tolerance / 2 and (noise := _ks_noise(n_sim)) > tolerance / 2:
        need = next(n for n in (2**k * 100 for k in range(40)) if _ks_noise(n) <= tolerance / 2)
        raise ValueError(f"n_sim = {n_sim} resolves KS distances of about {noise:.3g}, more "
                         f"than half the tolerance {tolerance:g}; use n_sim >= {need}")
    rng = as_generator(rng)
    pair_rngs = rng.spawn(src.n_pairs + 1)

    fields = {k: np.empty(src.n_pairs) for k in (
        "mean", "sd", "skewness", "excess_kurtosis", "novak", "ks_distance")}
    fields["novak_batch_size"] = np.empty(src.n_pairs, dtype=np.int64)
    P = src.n_pairs
    # with a design the KS distance is supporting detail: simulated in rounds (sequential),
    # it stops at the first round where some pair clearly fails it (as the search does)
    first = min(_SEARCH_FIRST, n_sim) if sequential and design is not None else n_sim
    t_all, means_all = np.empty((P, n_sim)), np.empty((P, n_sim))
    orders = [new_order(N) for _ in range(P)]
    samples = [[] for _ in range(P)]
    for p in range(P):
        mu = src.population(p).mean
        means_all[p, :first], t_all[p, :first] = _simulate(src, p, mu, b, first, pair_rngs[p],
                                                           orders[p], samples[p])
    n_done = first
    if first < n_sim and not any(
            ks_distance(t_all[p, :first], b - 1) - _ks_noise(first, EARLY_STOP_LEVEL)
            > tolerance for p in range(P)):
        for p in range(P):
            means_all[p, first:], t_all[p, first:] = _simulate(
                src, p, src.population(p).mean, b, n_sim - first, pair_rngs[p], orders[p])
        n_done = n_sim
    if n_done < n_sim:
        t_all, means_all = t_all[:, :n_done].copy(), means_all[:, :n_done].copy()
        n_sim = n_done
    noise = _ks_noise(n_sim)
    hist = np.empty((P, HIST_BINS))
    edges = np.empty((P, HIST_BINS + 1))
    bar = progress_bar(P, desc="CLT check", unit="pair", progress=progress)
    for p in range(P):
        pop = src.population(p)
        hist[p], edges[p] = src.histogram(p, samples[p][0])
        samples[p] = None
        novak_constant = pop.novak(1)
        values = dict(
            mean=pop.mean, sd=pop.sd, skewness=pop.skewness,
            excess_kurtosis=pop.excess_kurtosis, novak=pop.novak(b),
            novak_batch_size=math.ceil((novak_constant / tolerance) ** 2),
            ks_distance=ks_distance(t_all[p], b - 1))
        for key, v in values.items():
            fields[key][p] = v
        bar.update()
    bar.close()
    passed = bool(np.all(fields["ks_distance"] <= tolerance))
    smallest = None
    if search:
        order = list(np.argsort(-fields["ks_distance"]))
        smallest = _search(src, order, b, passed, tolerance, n_requested, pair_rngs[-1])
    for a in (*fields.values(), t_all, means_all, hist, edges):
        a.setflags(write=False)
    acceptance = None
    if design is not None:
        m, epsilon, design_tol, threshold = settings
        acceptance = run_acceptance_check(
            src, m=m, epsilon=epsilon, tolerance=design_tol, threshold=threshold,
            log_const=log_const, n_paths=n_paths, false_alarm=false_alarm,
            rng=rng.spawn(1)[0], progress=progress, sequential=sequential,
            edgeworth=edgeworth)
    return CLTCheck(passed=passed if acceptance is None else acceptance.passed, batch_size=b,
                    tolerance=tolerance, n_sim=n_sim, N=N,
                    n_pairs=src.n_pairs, noise=noise, min_batch_size=smallest,
                    t_statistics=t_all, minibatch_means=means_all, histogram=hist,
                    bin_edges=edges,
                    acceptance=acceptance, ks_passed=passed, searched=bool(search), **fields)
