"""Proposals: Gaussian random walk and Langevin (MALA, with full or minibatch gradients).

A proposal has ``init(view, theta) -> pstate`` and
``propose(rng, view, batches, theta, pstate) -> (theta_new, log_q_ratio, pstate_new, n_grad)``
where ``log_q_ratio = log q(theta | theta_new) - log q(theta_new | theta)`` enters the
data-free part of the MH ratio, ``pstate_new`` is the proposal's cached state if the move is
accepted (e.g. the gradient at ``theta_new``) and ``n_grad`` counts the rows whose gradient
was evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from design._lib.checks import check_finite_array, check_int, check_positive

__all__ = ["Proposal", "RandomWalk", "Langevin", "minibatch_grad"]


def minibatch_grad(view, theta, idx) -> np.ndarray:
    """Unbiased estimate ``grad log p0(theta) + (N/n) sum_{i in idx} grad log p(x_i|theta)``
    of the gradient of the log posterior from the rows ``idx`` (the SGLD drift)."""
    w = view.N / idx.shape[0]
    return view.grad_logprior(theta) + w * view.grad(theta, idx).sum(axis=0)


def check_gradient_model(proposal, view) -> None:
    """Refuse a model without gradients, or a ``proposal.batch_size`` larger than N."""
    missing = [name for name, f in (("grad_loglik", view.grad),
                                    ("grad_logprior", view.grad_logprior)) if f is None]
    if missing:
        raise TypeError(f"{type(proposal).__name__} needs model.{' and model.'.join(missing)}; "
                        f"{type(view.model).__name__} does not provide it")
    if proposal.batch_size is not None and proposal.batch_size > view.N:
        raise ValueError(f"batch_size must be <= N = {view.N}, got {proposal.batch_size}")


class Proposal:
    """Base class of proposals (see the module docstring for the interface)."""

    needs_gradients = False
    #: Whether ``propose`` takes the keyword ``iteration`` (the number of transitions made so
    #: far), e.g. for a step-size schedule.
    uses_iteration = False
    #: Whether ``log_q_ratio`` is the true log ratio of proposal densities. False for a move
    #: that is never corrected (plain SGLD): only :class:`~samplers.AcceptAll` may follow it.
    has_q_ratio = True

    def check(self, view) -> None:
        """Refuse a model this proposal cannot serve (e.g. one without gradients)."""

    def init(self, view, theta):
        return None

    def propose(self, rng, view, batches, theta, pstate):
        raise NotImplementedError


@dataclass(frozen=True)
class RandomWalk(Proposal):
    """Gaussian random walk ``theta' = theta + L z``, ``z ~ N(0, I)``; symmetric, so q cancels.

    Parameters
    ----------
    scale : float, array of shape (d,), or array of shape (d, d)
        A standard deviation (all coordinates), per-coordinate standard deviations, or a
        covariance matrix (symmetric positive definite; ``L`` is its Cholesky factor).

    Examples
    --------
    >>> import numpy as np
    >>> RandomWalk([[1.0, 0.5], [0.5, 1.0]]).propose(np.random.default_rng(0), None, None,
    ...                                               np.zeros(2), None)[1]
    0.0
    """

    scale: object = 1.0
    _factor: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        scale = check_finite_array("scale", self.scale, ndim=(0, 1, 2))
        if scale.ndim == 2:
            if scale.shape[0] != scale.shape[1] or not np.allclose(scale, scale.T):
                raise ValueError(f"scale as a covariance must be square and symmetric, "
                                 f"got shape {scale.shape}")
            try:
                factor = np.linalg.cholesky(scale)
            except np.linalg.LinAlgError:
                raise ValueError("scale as a covariance must be positive definite") from None
        else:
            if np.any(scale <= 0):
                raise ValueError(f"scale must be > 0, got {self.scale!r}")
            factor = scale
        factor.setflags(write=False)
        object.__setattr__(self, "_factor", factor)

    def check(self, view):
        f = self._factor
        if f.ndim >= 1 and f.shape[0] != view.dim:
            raise ValueError(f"scale has {f.shape[0]} coordinate(s) but theta has {view.dim}")

    def propose(self, rng, view, batches, theta, pstate):
        z = rng.standard_normal(theta.shape[0])
        step = self._factor @ z if self._factor.ndim == 2 else self._factor * z
        return theta + step, 0.0, None, 0


@dataclass(frozen=True)
class Langevin(Proposal):
    """Langevin proposal ``theta' = theta + (h/2) g(theta) + sqrt(h) z`` (MALA).

    ``g`` is the gradient of the log posterior: over all N rows (``batch_size=None``, an O(N)
    pass per step, cached across rejections), or estimated from a fresh minibatch of
    ``batch_size`` rows, ``g = grad log p0 + (N/n) sum_batch grad log p(x_i|theta)``, the SGLD
    drift. In the minibatch case the reverse density ``q(theta | theta', X_n)`` uses the
    gradient at ``theta'`` on the *same* minibatch, which keeps detailed balance for each
    minibatch kernel (Korattikara et al. 2014, section 6.4).

    Parameters
    ----------
    step_size : float
        h > 0.
    batch_size : int or None
        Rows per gradient estimate, or None for the full gradient.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import ExactTest, GaussianMean, Langevin, sample
    >>> model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 1000))
    >>> chain = sample(model, ExactTest(), Langevin(1e-3), [1.0], 50, rng=0)
    >>> int(chain.stats["n_grad"][0])  # one full gradient per step, at the proposal
    1000
    """

    step_size: float = 1e-3
    batch_size: int | None = None

    needs_gradients = True

    def __post_init__(self):
        object.__setattr__(self, "step_size", check_positive("step_size", self.step_size))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, low=1))

    def check(self, view):
        check_gradient_model(self, view)

    def init(self, view, theta):
        return view.full_grad(theta) if self.batch_size is None else None

    def _log_q(self, x_to, x_from, g_from):
        h = self.step_size
        r = x_to - x_from - 0.5 * h * g_from
        return -0.5 / h * float(r @ r)  # log N(x_to; x_from + h g/2, h I) up to a constant

    def propose(self, rng, view, batches, theta, pstate):
        h = self.step_size
        if self.batch_size is None:
            grad = pstate
            theta_new = theta + 0.5 * h * grad + np.sqrt(h) * rng.standard_normal(theta.shape[0])
            grad_new = view.full_grad(theta_new)
            n_grad = view.N
        else:
            batches.restart()
            idx = batches.take(self.batch_size)
            grad = minibatch_grad(view, theta, idx)
            theta_new = theta + 0.5 * h * grad + np.sqrt(h) * rng.standard_normal(theta.shape[0])
            grad_new = minibatch_grad(view, theta_new, idx)
            n_grad = 2 * idx.shape[0]
        log_q_ratio = self._log_q(theta, theta_new, grad_new) - self._log_q(theta_new, theta, grad)
        return theta_new, log_q_ratio, (grad_new if self.batch_size is None else None), n_grad
