"""Trial chain: the per-pair summaries that the average test design needs."""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from ._lib.checks import check_finite_array, check_int

from ._pair_scan import pair_moments

__all__ = ["TrialChain"]

_FORMAT = "austerity.TrialChain"
_VERSION = 1


def _readonly(a):
    a.setflags(write=False)
    return a


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

    Notes
    -----
    Exact MH accepts theta' with probability Pa = min(1, exp(N (mu - c0))); the
    approximate test accepts iff it decides mu > mu0(u), u ~ U(0, 1). The standardized mean
    is mu_std(u) = (mu - mu0(u)) sqrt(N - 1) / sigma (Korattikara et al. 2014, section 5.1).

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
    def from_model(cls, model, thetas, theta_news, log_q_ratios=None, *, chunk=65_536,
                   workers=None, progress=None):
        """Summarise pairs by scanning the data of ``model`` in chunks.

        Parameters
        ----------
        model : object
            ``model.N`` (int), ``model.loglik(theta, idx)`` (per-datum log-likelihoods,
            temperature applied, for an integer index array ``idx``) and
            ``model.logprior(theta)``; a fused ``model.loglik_ratio(theta, theta_new, idx)``
            is used when present, and ``model.loglik_many(thetas, idx)`` (log-likelihoods of
            rows ``idx`` at k parameter vectors, shape (len(idx), k): for a linear predictor
            one BLAS product ``X[idx] @ thetas.T``) is preferred when present.
        thetas, theta_news : array_like, shape (n_pairs, ...)
            Current and proposed parameters of each pair.
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

        Returns
        -------
        TrialChain

        Notes
        -----
        All pairs are summarised in one pass over the data: each chunk of rows is read once
        for every pair (``design._pair_scan``). The mean and variance of l_i are
        accumulated chunk by chunk with the pairwise update of Chan, Golub & LeVeque (1979),
        in chunk order, which does not lose precision when |mu| << sigma.

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
        >>> tc.n_pairs, tc.N, tc.sigma.round(4)
        (2, 1000, array([0.0098, 0.0195]))
        """
        N = check_int("model.N", getattr(model, "N", None), low=2)
        chunk = check_int("chunk", chunk, low=1)
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
        if workers is None:
            workers = os.cpu_count() or 1
        workers = check_int("workers", workers, low=1)
        mu, sigma = pair_moments(model, thetas, theta_news, N=N, chunk=chunk,
                                 workers=workers, progress=progress)
        c0 = np.empty(n_pairs)
        for p in range(n_pairs):
            dprior = float(model.logprior(theta_news[p])) - float(model.logprior(thetas[p]))
            if not np.isfinite(dprior):
                raise ValueError(f"model.logprior is not finite for pair {p}")
            c0[p] = -(dprior + lqr[p]) / N
        return cls(mu=mu, sigma=sigma, c0=c0, N=N)

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
        with open(path, "wb") as fh:
            np.savez(fh, format=np.array(_FORMAT), version=np.array(_VERSION),
                     mu=self.mu, sigma=self.sigma, c0=self.c0, N=np.array(self.N))

    @classmethod
    def load(cls, path) -> "TrialChain":
        """Read a file written by :meth:`save`; reject other files and other versions."""
        path = os.fspath(path)
        try:
            obj = np.load(path, allow_pickle=False)
            if not isinstance(obj, np.lib.npyio.NpzFile):
                raise ValueError("not an .npz archive")
            with obj as z:
                contents = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise ValueError(f"{path} is not a readable TrialChain file ({exc})") from exc
        if str(contents.get("format", "")) != _FORMAT:
            raise ValueError(f"{path} is not a TrialChain file (no format tag {_FORMAT!r})")
        version = int(contents["version"]) if "version" in contents else None
        if version != _VERSION:
            raise ValueError(
                f"{path} has TrialChain file version {version}; this version of austerity "
                f"reads version {_VERSION}")
        missing = [k for k in ("mu", "sigma", "c0", "N") if k not in contents]
        if missing:
            raise ValueError(f"{path} is a corrupt TrialChain file: missing {missing}")
        return cls(mu=contents["mu"], sigma=contents["sigma"], c0=contents["c0"],
                   N=int(contents["N"]))
