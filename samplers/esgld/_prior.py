"""The hierarchical spike-and-slab prior of the variable-selection model."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from design._lib.checks import check_int, check_positive

__all__ = ["SpikeSlabPrior"]


@dataclass(frozen=True)
class SpikeSlabPrior:
    """Hierarchical prior of linear-regression variable selection, ``beta = theta * gamma``.

    * Inclusion: ``gamma_j | lambda ~ Bernoulli(lambda)`` independently, with
      ``lambda ~ Beta(a, b)`` integrated out, truncated to models of at most ``max_size``
      variables: ``pi(gamma) ∝ B(a + |gamma|, b + p - |gamma|) 1{|gamma| <= max_size}``.
      The default ``a = 1, b = p`` is the sparsity prior ``Beta(1, p^u)``, u = 1, of Castillo
      & van der Vaart (2012): adding a variable to a model of size k has prior odds
      ``(k + 1)/(2p - k - 1)``.
    * Coefficients of included variables: ``beta_j = theta_j ~ N(0, slab_sd^2)`` (the slab).
      Excluded variables have ``beta_j = 0`` (a point mass, the spike).

    Parameters
    ----------
    slab_sd : float
        Prior sd of an included coefficient, > 0.
    a, b : float
        Beta hyperparameters of the inclusion probability, > 0; ``b=None`` means ``b = p``.
    max_size : int or None
        Largest model allowed (None: no truncation).

    Notes
    -----
    eSGLD also needs ``theta_j`` of excluded variables, which the likelihood never sees;
    it gives them the *pseudo-prior* ``N(0, spike_sd^2)`` (Carlin & Chib 1995), i.e.
    ``pi(theta | gamma) = prod_j N(theta_j; 0, sd_{gamma_j}^2)``, which factorises as Song
    et al. (2020, section 3.1) require. Integrating ``theta[-S]`` out gives back the prior
    above, so the posterior of ``(gamma, beta)`` does not depend on ``spike_sd``; it only
    sets how tightly eSGLD holds excluded coefficients near zero (see
    :func:`~samplers.esgld.esgld_select`). Song et al. state their prior in a supplement
    that is not part of the text this toolkit was built from; this is the standard
    hierarchical choice for the same model.

    Examples
    --------
    >>> prior = SpikeSlabPrior(slab_sd=1.0, max_size=3)
    >>> table = prior.log_size_table(10)
    >>> table.shape, bool(np.isclose(table[1] - table[0], np.log(1 / 19)))
    ((4,), True)
    """

    slab_sd: float = 1.0
    a: float = 1.0
    b: float | None = None
    max_size: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "slab_sd", check_positive("slab_sd", self.slab_sd))
        object.__setattr__(self, "a", check_positive("a", self.a))
        if self.b is not None:
            object.__setattr__(self, "b", check_positive("b", self.b))
        if self.max_size is not None:
            object.__setattr__(self, "max_size", check_int("max_size", self.max_size, low=0))

    def size_limit(self, p: int) -> int:
        """Largest model size for ``p`` candidate variables."""
        return p if self.max_size is None else min(self.max_size, p)

    def log_size_table(self, p: int) -> np.ndarray:
        """``log pi(gamma)`` of one model of each size ``k = 0, ..., size_limit(p)`` (up to a
        constant)."""
        k = np.arange(self.size_limit(p) + 1)
        b = p if self.b is None else self.b
        return special.betaln(self.a + k, b + p - k) - special.betaln(self.a, b)

    def logpdf(self, beta: np.ndarray) -> float:
        """Log prior density of a coefficient vector whose zeros are the excluded variables
        (with respect to counting measure on gamma times Lebesgue measure on beta_S)."""
        coef = beta[beta != 0.0]
        p, k = beta.shape[0], coef.shape[0]
        if k > self.size_limit(p):
            return -math.inf
        s = self.slab_sd
        slab = -0.5 * float(np.dot(coef, coef)) / (s * s) - k * (math.log(s) + 0.5 * math.log(2 * math.pi))
        return float(self.log_size_table(p)[k]) + slab
