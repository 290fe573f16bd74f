"""Per-datum log-likelihood ratios over all N rows, and pairs (theta, theta') to check."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from design._lib.checks import as_generator, check_finite_array, check_int
from design._lib.distribute import as_cluster, map_ranges, recipe_of
from design._lib.rows import IndexSampler
from samplers import check_model
from samplers.models import loglik_ratio

from ._kernels import central_moments

__all__ = ["loglik_ratios", "loglik_ratios_many", "proposal_pairs", "Population"]

#: Rows per model call in full-data passes.
CHUNK = 1 << 16


def loglik_ratios(model, theta, theta_new, *, chunk=CHUNK, out=None,
                  executor=None) -> np.ndarray:
    """All N log-likelihood ratios ``l_i = log p(x_i | theta_new) - log p(x_i | theta)``.

    One pass over the data in chunks of ``chunk`` rows (the model reads them in place, so a
    memmap is never loaded whole). This is an O(N) offline computation, meant for checks
    run before sampling, not inside a chain.

    Parameters
    ----------
    model : Model
        Any object of the :class:`samplers.Model` protocol (a fused ``loglik_ratio`` is used
        when present).
    theta, theta_new : array_like
        The pair.
    chunk : int
        Rows per model call.
    out : numpy.ndarray, optional
        Float64 array of length N to write into (e.g. a ``numpy.memmap``).
    executor : optional
        A ``dask.distributed.Client``, its ``get_executor()`` or any
        ``concurrent.futures.Executor``: the chunks run on its workers, each task rebuilding
        about 10^6 rows with ``model.block_recipe`` and returning their ratios (the same
        values as the local pass, written here in row order).

    Returns
    -------
    numpy.ndarray
        The N ratios (``out`` when given).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean
    >>> from validation import loglik_ratios
    >>> model = GaussianMean(np.array([0.0, 1.0, 2.0]))
    >>> loglik_ratios(model, [1.0], [1.5])
    array([-0.625, -0.125,  0.375])
    """
    N = check_int("model.N", getattr(model, "N", None), low=1)
    chunk = check_int("chunk", chunk, low=1)
    theta = check_finite_array("theta", theta, ndim=(0, 1)).reshape(-1)
    theta_new = check_finite_array("theta_new", theta_new, ndim=(0, 1)).reshape(-1)
    if out is None:
        out = np.empty(N)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float64):
        raise TypeError(f"out must be a float64 numpy array, got "
                        f"{getattr(out, 'dtype', type(out).__name__)}")
    elif out.shape != (N,):
        raise ValueError(f"out must have shape ({N},), got {out.shape}")
    cluster = as_cluster(executor)
    if cluster is not None:
        def merge(start, stop, values):
            _check_ratios(values, start, theta, theta_new)
            out[start:stop] = values

        map_ranges(cluster, recipe_of(model), _block_ratios, (theta, theta_new, chunk), merge,
                   N=N, chunk=chunk, progress=False, desc="log-likelihood ratios")
        return out
    for start in range(0, N, chunk):
        idx = np.arange(start, min(start + chunk, N), dtype=np.intp)
        values = loglik_ratio(model, theta, theta_new, idx)
        _check_ratios(values, start, theta, theta_new, idx.size)
        out[start:start + idx.size] = values
    return out


def _check_ratios(values, start, theta, theta_new, size=None):
    if size is not None and values.shape != (size,):
        raise ValueError(f"the model returned {values.shape} log-likelihood ratios for "
                         f"{size} rows")
    if not np.all(np.isfinite(values)):
        row = start + int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"log-likelihood ratio of row {row} is {values[row - start]} "
                         f"between theta={theta} and theta_new={theta_new}")


def _block_ratios(block, theta, theta_new, chunk):
    """On a worker: the ratios of a block's rows, computed chunk by chunk as
    :func:`loglik_ratios` does."""
    out = np.empty(block.N)
    for start in range(0, block.N, chunk):
        idx = np.arange(start, min(start + chunk, block.N), dtype=np.intp)
        values = loglik_ratio(block, theta, theta_new, idx)
        if values.shape != idx.shape:
            raise ValueError(f"the model returned {values.shape} log-likelihood ratios for "
                             f"{idx.size} rows")
        out[start:start + idx.size] = values
    return out


def loglik_ratios_many(model, thetas, theta_news, *, chunk=CHUNK, workers=2):
    """The N ratios of several pairs at once, shape (n_pairs, N), from one pass over the data.

    For a model with ``loglik_many(thetas, idx)`` (the built-in logistic regression, the
    control-variate wrapper of a built-in GLM): each chunk of rows is read once for the
    distinct parameter vectors of all pairs (chained pairs share them), and the l_i of pair
    p are the difference of two columns: the same values as :func:`loglik_ratios` to
    rounding (a difference of log-likelihoods instead of the fused ratio). Chunks run on
    ``workers`` threads (the compiled loops release the GIL), each writing its own columns.
    Unchecked: ``thetas`` and ``theta_news`` are float arrays of shape (n_pairs, d).
    """
    from concurrent.futures import ThreadPoolExecutor

    P, N = thetas.shape[0], model.N
    both = np.concatenate([thetas, theta_news])
    vectors, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    old, new = inverse[:P], inverse[P:]
    out = np.empty((P, N))

    def fill(start):
        idx = np.arange(start, min(start + chunk, N), dtype=np.intp)
        ll = np.asarray(model.loglik_many(vectors, idx), dtype=np.float64)
        if ll.shape != (idx.size, vectors.shape[0]):
            raise ValueError(f"model.loglik_many must return shape {(idx.size, len(vectors))}"
                             f", got {ll.shape}")
        values = ll[:, new].T - ll[:, old].T
        if not np.all(np.isfinite(values)):
            p, r = np.argwhere(~np.isfinite(values))[0]
            raise ValueError(f"log-likelihood ratio of row {start + r} is {values[p, r]} "
                             f"between theta={thetas[p]} and theta_new={theta_news[p]}")
        out[:, idx[0]:idx[-1] + 1] = values

    starts = range(0, N, chunk)
    if workers <= 1:
        for s in starts:
            fill(s)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(fill, starts))
    return out


@dataclass(frozen=True)
class Population:
    """Summary of one population of l_i: mean, population sd (ddof 0) and shape.

    ``abs1`` and ``abs3`` are ``E|X|`` and ``E|X|^3`` of the standardized
    ``X = (l - mean) / sd``.
    """

    mean: float
    sd: float
    skewness: float
    excess_kurtosis: float
    abs1: float
    abs3: float

    @classmethod
    def of(cls, l: np.ndarray) -> "Population":
        mean = float(np.mean(l))
        m2, m3, m4, a1, a3 = central_moments(l, mean)
        if not m2 > 0.0:
            raise ValueError("the l_i of a pair are all equal (theta_new == theta?): there is "
                             "no sampling error to check")
        sd = math.sqrt(m2)
        return cls(mean, sd, m3 / sd**3, m4 / m2**2 - 3.0, a1 / sd, a3 / sd**3)

    def novak(self, b: int) -> float:
        """Novak's bound ``(6.4 E|X|^3 + 2 E|X|) / sqrt(b)`` (Seita et al. 2017, Lemma 3)."""
        return (6.4 * self.abs3 + 2.0 * self.abs1) / math.sqrt(b)


def proposal_pairs(chain, model, n_pairs=20, *, burn_in=0.5, rng=None):
    """Pairs (theta, theta') as a chain proposes them, from states of a trial run.

    Takes ``n_pairs`` states evenly spaced after the burn-in of ``chain`` and draws one
    proposal from each with the chain's own proposal (so a Langevin proposal's drift and
    minibatch are what the chain would use).

    Parameters
    ----------
    chain : samplers.Chain
        A trial run (any test).
    model : Model
        The model the chain sampled.
    n_pairs : int
        Number of pairs, at most the number of states after the burn-in.
    burn_in : float
        Fraction of the chain left out at its start, in [0, 1).
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    thetas, theta_news : numpy.ndarray, shape (n_pairs, d)

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ExactTest, GaussianMean, RandomWalk, sample
    >>> from validation import proposal_pairs
    >>> model = GaussianMean(np.random.default_rng(0).normal(size=1000))
    >>> chain = sample(model, ExactTest(), RandomWalk(0.05), [0.0], 100, rng=1)
    >>> thetas, theta_news = proposal_pairs(chain, model, 5, rng=2)
    >>> thetas.shape, theta_news.shape
    ((5, 1), (5, 1))
    """
    samples = getattr(chain, "samples", None)
    proposal = getattr(chain, "proposal", None)
    if samples is None or proposal is None:
        raise TypeError(f"chain must be a samplers.Chain, got {type(chain).__name__}")
    if not 0.0 <= burn_in < 1.0:
        raise ValueError(f"burn_in must be in [0, 1), got {burn_in!r}")
    kept = samples[int(burn_in * samples.shape[0]):]
    n_pairs = check_int("n_pairs", n_pairs, low=1, high=kept.shape[0])
    rng = as_generator(rng)
    first = int(burn_in * samples.shape[0])
    picks = first + np.linspace(0, kept.shape[0] - 1, n_pairs).round().astype(int)
    thetas = samples[picks].copy()
    view, _ = check_model(model, thetas[0])
    proposal.check(view)
    batches = IndexSampler(view.N, rng)
    theta_news = np.empty_like(thetas)
    for k, (theta, step) in enumerate(zip(thetas, picks)):
        pstate = proposal.init(view, theta)
        extra = {"iteration": int(step) + 1} if proposal.uses_iteration else {}
        theta_news[k] = proposal.propose(rng, view, batches, theta, pstate, **extra)[0]
    return thetas, theta_news
