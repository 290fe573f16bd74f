"""Reference posteriors by quadrature, for checking samplers on one-parameter models.

The log posterior ``sum_i log p(x_i | t) + log p0(t)`` is summed over all N rows at each
node (an O(N) pass, fine for a reference) and normalised with :func:`scipy.integrate.quad`,
with the kinks of a non-smooth prior (e.g. 0 for a Laplace prior) passed as break points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import integrate

from design._lib.checks import check_int, check_interval

__all__ = ["Posterior1D", "posterior_1d"]

_CHUNK = 1 << 16
#: Density at the ends of the interval, relative to the maximum, above which the interval is
#: refused as too narrow.
_EDGE_TOLERANCE = 1e-12


def _quad(f, a, b, kinks) -> float:
    inner = [k for k in kinks if a < k < b]
    return integrate.quad(f, a, b, points=inner or None, limit=200, epsabs=0.0, epsrel=1e-10)[0]


def _log_posterior(model, t: float) -> float:
    theta = np.array([t])
    total = float(model.logprior(theta))
    for start in range(0, model.N, _CHUNK):
        idx = np.arange(start, min(start + _CHUNK, model.N), dtype=np.intp)
        total += float(np.sum(model.loglik(theta, idx)))
    return total


@dataclass(frozen=True)
class Posterior1D:
    """A normalised one-dimensional posterior density on ``[lo, hi]``.

    Attributes
    ----------
    lo, hi : float
        The interval, outside which the density is negligible (checked).
    kinks : tuple of float
        Break points handed to the quadrature.
    mean, sd : float
        Posterior mean and standard deviation.
    """

    lo: float
    hi: float
    kinks: tuple
    mean: float = field(init=False)
    sd: float = field(init=False)
    _model: object = field(repr=False, compare=False, default=None)
    _shift: float = field(repr=False, default=0.0)

    def __post_init__(self):
        m1 = _quad(lambda t: t * self.pdf(t), self.lo, self.hi, self.kinks)
        m2 = _quad(lambda t: (t - m1) ** 2 * self.pdf(t), self.lo, self.hi, self.kinks)
        object.__setattr__(self, "mean", m1)
        object.__setattr__(self, "sd", math.sqrt(m2))

    def logpdf(self, t) -> np.ndarray:
        """Log density at ``t`` (scalar or array)."""
        t = np.asarray(t, dtype=float)
        out = np.array([_log_posterior(self._model, v) for v in t.ravel()]) - self._shift
        out[(t.ravel() < self.lo) | (t.ravel() > self.hi)] = -np.inf
        return out.reshape(t.shape)

    def pdf(self, t) -> np.ndarray:
        """Density at ``t`` (scalar or array)."""
        return np.exp(self.logpdf(t))

    def prob(self, a: float, b: float) -> float:
        """Posterior probability of ``[a, b]``."""
        a, b = max(a, self.lo), min(b, self.hi)
        return _quad(self.pdf, a, b, self.kinks) if b > a else 0.0


def posterior_1d(model, lo: float, hi: float, *, kinks=(), n_grid: int = 513) -> Posterior1D:
    """Normalise the posterior of a one-parameter model on ``[lo, hi]`` by quadrature.

    Parameters
    ----------
    model : Model
        Any model following the protocol, with a scalar parameter.
    lo, hi : float
        An interval holding all but a negligible part of the posterior mass; refused if the
        density at either end exceeds 1e-12 times its maximum.
    kinks : sequence of float
        Points where the log density is not smooth (break points for the quadrature).
    n_grid : int
        Grid points used to find the maximum (the shift that keeps exponentials finite).

    Returns
    -------
    Posterior1D

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean, GaussianPrior
    >>> model = GaussianMean(np.random.default_rng(0).normal(0.5, 1.0, 1000),
    ...                      prior=GaussianPrior(0.0, 10.0))
    >>> post = posterior_1d(model, 0.0, 1.0)
    >>> mean, sd = model.posterior()
    >>> bool(abs(post.mean - mean) < 1e-9 and abs(post.sd - sd) < 1e-9)
    True
    """
    lo = check_interval("lo", lo, -math.inf, math.inf)
    hi = check_interval("hi", hi, lo, math.inf)
    n_grid = check_int("n_grid", n_grid, low=3)
    kinks = tuple(sorted(float(k) for k in kinks))
    grid = np.union1d(np.linspace(lo, hi, n_grid), [k for k in kinks if lo <= k <= hi])
    logp = np.array([_log_posterior(model, t) for t in grid])
    shift = float(np.max(logp))
    if not math.isfinite(shift):
        raise ValueError(f"the log posterior is not finite on [{lo:g}, {hi:g}]")
    if max(logp[0], logp[-1]) - shift > math.log(_EDGE_TOLERANCE):
        raise ValueError(f"the posterior has non-negligible mass at the ends of [{lo:g}, {hi:g}]; "
                         "widen the interval")
    log_z = math.log(_quad(lambda t: math.exp(_log_posterior(model, t) - shift), lo, hi, kinks))
    return Posterior1D(lo, hi, kinks, _model=model, _shift=shift + log_z)
