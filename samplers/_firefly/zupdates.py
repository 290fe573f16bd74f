"""Updates of the brightness variables z given theta (Maclaurin & Adams 2014, section 3.2).

Both leave ``p(z | theta) = prod_n Bernoulli(z_n; 1 - B_n/L_n)`` invariant and touch only
the points they update: their cost is O(bright + touched), never O(N).

* :class:`ExplicitZ` (Algorithm 1): Gibbs-resample ``z_n`` for a random fraction of the
  rows, drawn without replacement.
* :class:`ImplicitZ` (Algorithm 2): every point proposes to flip, dark ones with
  probability ``q_db``, bright ones with ``q_bd``, and the flip is accepted by
  Metropolis-Hastings with the true conditional. Bright points' log-odds are cached from
  the theta-update, so only the proposed dark points are queried; those are found by
  geometric skips over the dark part of the brightness set, so dark points are never
  visited one by one.

Both work with the log-odds of brightness, ``log((L_n - B_n)/B_n)`` (see
:mod:`samplers._firefly.target`). An update returns :class:`ZInfo`; the brightness set and
the log-odds cache (valid for the bright rows) are updated in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from design._lib.checks import check_interval
from design._lib.jit import jit
from .brightness import brighten, darken

__all__ = ["ZInfo", "ExplicitZ", "ImplicitZ", "bernoulli_positions"]


class ZInfo(NamedTuple):
    """What one z-update measured."""

    #: Rows whose likelihood the update evaluated (its likelihood queries).
    n_queried: int
    n_brightened: int
    n_darkened: int


# The compiled loops take uniforms drawn by the caller rather than the Generator itself:
# handing a Generator to a compiled function costs about 17 us per call, an array 0.6 us.


@jit
def _skips(arr, pos, stop, log1m_q, u):
    """Walk from ``pos`` by Geometric(q) skips, one per uniform, collecting ``arr[pos]``.

    ``P(skip > j) = (1 - q)^j`` with ``skip = 1 + floor(log(1 - u) / log(1 - q))``. Returns
    ``(found, pos, done)``; ``done`` once a skip passes ``stop``, else the uniforms ran out.
    """
    out = np.empty(u.shape[0], dtype=np.int64)
    k = 0
    for t in range(u.shape[0]):
        skip = math.floor(math.log1p(-u[t]) / log1m_q)
        if skip >= stop - pos - 1:
            return out[:k], stop, True
        pos += 1 + int(skip)
        out[k] = arr[pos]
        k += 1
    return out[:k], pos, False


def bernoulli_positions(rng, arr, start, stop, q) -> np.ndarray:
    """``arr[p]`` for the positions p in [start, stop) chosen independently with probability q.

    Chosen by geometric skips, so the work is proportional to the number chosen, not to
    ``stop - start``; in increasing order of position.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> arr = np.arange(100_000, dtype=np.int64)
    >>> chosen = bernoulli_positions(rng, arr, 0, arr.shape[0], 0.01)
    >>> 800 < chosen.shape[0] < 1200, bool(np.all(np.diff(chosen) > 0))
    (True, True)
    """
    if q == 1.0:
        return arr[start:stop].copy()
    log1m_q = math.log1p(-q)
    expected = (stop - start) * q
    chunk = int(expected + 4.0 * math.sqrt(expected)) + 8
    found, pos, done = _skips(arr, start - 1, stop, log1m_q, rng.random(chunk))
    if done:
        return found
    parts = [found]
    while not done:
        found, pos, done = _skips(arr, pos, stop, log1m_q, rng.random(chunk))
        parts.append(found)
    return np.concatenate(parts)


@jit
def _implicit_flips(arr, tab, count, log_odds, log_q_ratio, bright, dark, dark_log_odds, u):
    """Algorithm 2's accept/reject steps for the proposed flips. Returns (n_darkened, n_brightened).

    ``bright`` and ``dark`` are the rows proposed to flip (drawn before any change), ``u``
    one uniform per proposal, bright ones first. The MH ratio of 0 -> 1 is the odds times
    ``q_bd/q_db``, that of 1 -> 0 its inverse.
    """
    n_off = 0
    for t in range(bright.shape[0]):
        n = bright[t]
        if math.log(u[t]) < log_q_ratio - log_odds[n]:
            darken(arr, tab, count, n)
            n_off += 1
    n_on = 0
    offset = bright.shape[0]
    for t in range(dark.shape[0]):
        if math.log(u[offset + t]) < dark_log_odds[t] - log_q_ratio:
            brighten(arr, tab, count, dark[t])
            log_odds[dark[t]] = dark_log_odds[t]
            n_on += 1
    return n_off, n_on


@jit
def _dark_among(tab, count, idx):
    """The entries of ``idx`` that are dark, in order."""
    out = np.empty(idx.shape[0], dtype=np.int64)
    k = 0
    for n in idx:
        if tab[n] >= count[0]:
            out[k] = n
            k += 1
    return out[:k]


@jit
def _gibbs_flips(arr, tab, count, log_odds, idx, dark_log_odds, u):
    """Resample ``z_n ~ Bernoulli(expit(log_odds_n))`` for the distinct rows idx (one uniform each).

    Returns (n_darkened, n_brightened).
    """
    n_off = 0
    n_on = 0
    j = 0
    for t in range(idx.shape[0]):
        n = idx[t]
        if tab[n] < count[0]:
            lo = log_odds[n]
        else:
            lo = dark_log_odds[j]
            j += 1
        if u[t] < 1.0 / (1.0 + math.exp(-lo)):
            if brighten(arr, tab, count, n):
                log_odds[n] = lo
                n_on += 1
        elif darken(arr, tab, count, n):
            n_off += 1
    return n_off, n_on


@dataclass(frozen=True)
class ImplicitZ:
    """Implicit Metropolis-Hastings resampling of the brightness variables (Algorithm 2).

    Parameters
    ----------
    q_db : float in (0, 1]
        Probability that a dark point proposes to become bright. About the typical bright
        fraction works well (the paper used 0.1 untuned, 0.01 MAP-tuned); it sets the
        likelihood queries of the update, ``q_db (N - B)`` on average.
    q_bd : float in (0, 1]
        Probability that a bright point proposes to become dark (the paper's 1: their gaps
        are cached, so proposing costs no query).

    Notes
    -----
    With the odds ``w = (L - B)/B`` of brightness, a dark point brightens with probability
    ``min(q_db, q_bd w)``, close to its conditional ``w / (1 + w)`` when ``q_db`` exceeds it;
    a bright one darkens with probability ``min(q_bd, q_db / w)``.

    Examples
    --------
    >>> ImplicitZ(q_db=0.05)
    ImplicitZ(q_db=0.05, q_bd=1.0)
    >>> ImplicitZ(q_db=0.0)
    Traceback (most recent call last):
    ...
    ValueError: q_db must be in (0, 1], got 0.0
    """

    q_db: float = 0.01
    q_bd: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "q_db", check_interval("q_db", self.q_db, 0.0, 1.0, closed="right"))
        object.__setattr__(self, "q_bd", check_interval("q_bd", self.q_bd, 0.0, 1.0, closed="right"))

    def update(self, rng, theta, target, z, log_odds, rows) -> ZInfo:
        """One sweep: propose, query the proposed dark rows, accept or reject every flip."""
        B = z.count
        dark = bernoulli_positions(rng, z.arr, B, z.N, self.q_db)
        bright = bernoulli_positions(rng, z.arr, 0, B, self.q_bd)
        dark_log_odds = target.log_odds(theta, dark)
        u = rng.random(bright.shape[0] + dark.shape[0])
        n_off, n_on = _implicit_flips(z.arr, z.tab, z.counter, log_odds,
                                      math.log(self.q_db / self.q_bd), bright, dark,
                                      dark_log_odds, u)
        return ZInfo(dark.shape[0], n_on, n_off)


@dataclass(frozen=True)
class ExplicitZ:
    """Explicit resampling: Gibbs-update ``z_n`` for a random fraction of the rows (Algorithm 1).

    The rows are drawn without replacement (in O(fraction N) with the persistent partial
    Fisher-Yates of :class:`~samplers.IndexSampler`); bright rows reuse their cached
    log-odds, dark ones are queried.

    Parameters
    ----------
    fraction : float in (0, 1]
        Fraction of the N rows resampled per iteration. A point waits about 1/fraction
        iterations between updates, which bounds how fast z can mix.

    Examples
    --------
    >>> ExplicitZ(0.1)
    ExplicitZ(fraction=0.1)
    """

    fraction: float = 0.1

    def __post_init__(self):
        object.__setattr__(self, "fraction",
                           check_interval("fraction", self.fraction, 0.0, 1.0, closed="right"))

    def update(self, rng, theta, target, z, log_odds, rows) -> ZInfo:
        """One sweep: Gibbs-resample a random fraction of the rows, querying the dark ones."""
        rows.restart()
        idx = rows.take(max(1, round(self.fraction * z.N)))
        dark = _dark_among(z.tab, z.counter, idx)
        dark_log_odds = target.log_odds(theta, dark)
        n_off, n_on = _gibbs_flips(z.arr, z.tab, z.counter, log_odds, idx, dark_log_odds,
                                   rng.random(idx.shape[0]))
        return ZInfo(dark.shape[0], n_on, n_off)
