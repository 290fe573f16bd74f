"""Proposals: Gaussian random walk, Langevin (MALA, with full or minibatch gradients) and the
independence proposals (Gaussian, multivariate t, and a defensive Gaussian mixture).

The random walk and Langevin can be preconditioned by a covariance; all three have a
``from_laplace`` constructor that takes the Laplace covariance at a
:class:`~samplers.ControlVariates` center (the posterior mode) and, for the walk and
Langevin, the dimension-dependent optimal scale, so that nothing needs tuning.

A proposal has ``init(view, theta) -> pstate`` and
``propose(rng, view, batches, theta, pstate) -> (theta_new, log_q_ratio, pstate_new, n_grad)``
where ``log_q_ratio = log q(theta | theta_new) - log q(theta_new | theta)`` enters the
data-free part of the MH ratio, ``pstate_new`` is the proposal's cached state if the move is
accepted (e.g. the gradient at ``theta_new``) and ``n_grad`` counts the rows whose gradient
was evaluated.

A proposal that can run in the compiled block loop says how in
:meth:`Proposal.compiled_move` (a :class:`Move`: a jitted ``propose`` and its parameters);
the default is None, and a chain with that proposal runs on the Python loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from design._lib.checks import check_finite_array, check_int, check_interval, check_positive
from design._lib.jit import jit
from design._lib.rows import draw_rows, restart_order

from .priors import pairwise_sum, prior_grad

__all__ = ["Proposal", "RandomWalk", "Langevin", "Independence", "StudentTIndependence",
           "MixtureIndependence", "Move", "minibatch_grad"]

#: Optimal random-walk scale 2.38 / sqrt(d) in units of the posterior covariance (Roberts,
#: Gelman & Gilks 1997; acceptance about 0.234 in high dimension).
RW_SCALE = 2.38
#: MALA's optimal step h = 1.65^2 / d^(1/3) in units of the posterior covariance (Roberts &
#: Rosenthal 1998; acceptance about 0.574).
MALA_SCALE = 1.65


def _laplace(source) -> np.ndarray:
    """The Laplace covariance of ``source``: a ``ControlVariates`` (its
    ``laplace_covariance()``), a ``LaplaceApproximation`` (its ``covariance``) or a covariance
    matrix, checked symmetric positive definite."""
    get = getattr(source, "laplace_covariance", None)
    cov = get() if callable(get) else getattr(source, "covariance", source)
    cov = check_finite_array("covariance", cov, ndim=(2,))
    if cov.shape[0] != cov.shape[1] or not np.allclose(cov, cov.T):
        raise ValueError(f"covariance must be square and symmetric, got shape {cov.shape}")
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError("covariance must be positive definite") from None
    return cov


@jit
def walk_move(theta, diag, chol, z, out):
    """The random walk's move into ``out``: ``theta + chol @ z`` (a covariance factor, BLAS
    ``dgemv`` as NumPy's ``@``) or, with ``chol`` of shape (0, 0), ``theta + diag * z``. The
    compiled loops' copy of :meth:`RandomWalk.propose` (same bits)."""
    if chol.shape[0] > 0:
        step = np.dot(chol, z)
        for j in range(theta.shape[0]):
            out[j] = theta[j] + step[j]
    else:
        for j in range(theta.shape[0]):
            out[j] = theta[j] + diag[j] * z[j]


@jit
def langevin_move(theta, grad, h, chol, z, out):
    """:meth:`Langevin._move` into ``out`` (``chol`` of shape (0, 0): no preconditioner):
    ``theta + (h/2) L L^T g + sqrt(h) L z``, with the same BLAS products (same bits)."""
    half = 0.5 * h
    root = math.sqrt(h)
    if chol.shape[0] > 0:
        drift = np.dot(chol, np.dot(chol.T, grad))
        noise = np.dot(chol, z)
        for j in range(theta.shape[0]):
            out[j] = theta[j] + half * drift[j] + root * noise[j]
    else:
        for j in range(theta.shape[0]):
            out[j] = theta[j] + half * grad[j] + root * z[j]


@jit
def langevin_log_q(x_to, x_from, g_from, h, chol):
    """:meth:`Langevin._log_q`: ``log N(x_to; x_from + (h/2) A g, h A)`` up to a constant."""
    half = 0.5 * h
    if chol.shape[0] > 0:
        w = np.linalg.solve(chol, x_to - x_from) - half * np.dot(chol.T, g_from)
    else:
        w = x_to - x_from - half * g_from
    return -0.5 / h * np.dot(w, w)


@jit
def gaussian_log_density(x, mean, inverse):
    """:meth:`Independence.log_density`: ``-|L^-1 (x - mean)|^2 / 2`` (``inverse`` = L^-1),
    with the same BLAS products (same bits)."""
    r = np.empty(x.shape[0])
    for j in range(x.shape[0]):
        r[j] = x[j] - mean[j]
    w = np.dot(inverse, r)
    return -0.5 * np.dot(w, w)


@jit
def student_t_log_density(x, mean, inverse, df):
    """:meth:`StudentTIndependence.log_density`: ``-(df + d)/2 log1p(|L^-1 (x - mean)|^2 / df)``
    with the same BLAS products (same bits)."""
    r = np.empty(x.shape[0])
    for j in range(x.shape[0]):
        r[j] = x[j] - mean[j]
    w = np.dot(inverse, r)
    return -0.5 * (df + x.shape[0]) * math.log1p(np.dot(w, w) / df)


@jit
def mixture_log_density(x, mean, inverse, weight, inflation):
    """:meth:`MixtureIndependence.log_density`: ``log((1 - a) N(x; m, S) + a N(x; m, s^2 S))``
    up to a constant, in the same order of operations (same bits)."""
    r = np.empty(x.shape[0])
    for j in range(x.shape[0]):
        r[j] = x[j] - mean[j]
    w = np.dot(inverse, r)
    return _mixture_log(np.dot(w, w), x.shape[0], weight, inflation)


@jit
def _mixture_log(r2, d, weight, inflation):
    narrow = math.log1p(-weight) - 0.5 * r2
    wide = math.log(weight) - d * math.log(inflation) - 0.5 * r2 / (inflation * inflation)
    hi, lo = (narrow, wide) if narrow >= wide else (wide, narrow)
    return hi + math.log1p(math.exp(lo - hi))


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


class Move(NamedTuple):
    """A proposal's compiled move for the block loop (:meth:`Proposal.compiled_move`).

    ``propose(data, rng, order, theta, theta_new, params, i) -> (log_q_ratio, n_grad)``
    writes theta_new for step ``i`` of the chain with the draws and arithmetic of the
    proposal's ``propose``; ``data`` is the model's block data (its
    :class:`~samplers.models.BlockModel`), ``order`` the sampler's row order.
    """

    #: The jitted ``propose``.
    propose: Any
    #: Its parameters (a tuple numba can type).
    params: tuple
    #: ``before_block(start, stop)``, called before the block runs steps start..stop - 1
    #: (e.g. to evaluate a step-size schedule into ``params``), or None.
    before_block: Any = None


@jit
def row_sums(g, acc):
    """``g.sum(axis=0)`` bit for bit: rows added in order for d > 1, and NumPy's pairwise
    sum when d = 1 (then the reduced axis is contiguous and NumPy sums it pairwise)."""
    d = g.shape[1]
    if d == 1:
        acc[0] = pairwise_sum(g[:, 0])
        return
    for j in range(d):
        acc[j] = g[0, j]
    for t in range(1, g.shape[0]):
        for j in range(d):
            acc[j] += g[t, j]


@jit
def walk_propose(data, rng, order, theta, theta_new, params, i):
    """:meth:`RandomWalk.propose`: d standard normals, then :func:`walk_move`."""
    diag, chol = params
    z = np.empty(theta.shape[0])
    for j in range(theta.shape[0]):
        z[j] = rng.standard_normal()
    walk_move(theta, diag, chol, z, theta_new)
    return 0.0, 0


@jit
def independence_propose(data, rng, order, theta, theta_new, params, i):
    """:meth:`Independence.propose`: ``mean + L z`` (:func:`walk_move` from the mean) and
    ``log phi(theta) - log phi(theta_new)`` (:func:`gaussian_log_density`)."""
    mean, factor, inverse = params
    d = theta.shape[0]
    z = np.empty(d)
    for j in range(d):
        z[j] = rng.standard_normal()
    walk_move(mean, np.empty(0), factor, z, theta_new)
    lq = (gaussian_log_density(theta, mean, inverse)
          - gaussian_log_density(theta_new, mean, inverse))
    return lq, 0


@jit
def student_t_propose(data, rng, order, theta, theta_new, params, i):
    """:meth:`StudentTIndependence.propose`: d standard normals, one gamma(df/2), ``mean +
    L z sqrt(df / chi2)`` and the log density ratio (:func:`student_t_log_density`)."""
    mean, factor, inverse, df = params
    d = theta.shape[0]
    z = np.empty(d)
    for j in range(d):
        z[j] = rng.standard_normal()
    s = math.sqrt(df / (2.0 * rng.standard_gamma(0.5 * df)))
    for j in range(d):
        z[j] = z[j] * s
    walk_move(mean, np.empty(0), factor, z, theta_new)
    lq = (student_t_log_density(theta, mean, inverse, df)
          - student_t_log_density(theta_new, mean, inverse, df))
    return lq, 0


@jit
def mixture_propose(data, rng, order, theta, theta_new, params, i):
    """:meth:`MixtureIndependence.propose`: one uniform (which component), d standard normals,
    ``mean + s L z`` (s = 1 or the inflation) and the log density ratio."""
    mean, factor, inverse, weight, inflation = params
    d = theta.shape[0]
    s = inflation if rng.random() < weight else 1.0
    z = np.empty(d)
    for j in range(d):
        z[j] = rng.standard_normal() * s
    walk_move(mean, np.empty(0), factor, z, theta_new)
    lq = (mixture_log_density(theta, mean, inverse, weight, inflation)
          - mixture_log_density(theta_new, mean, inverse, weight, inflation))
    return lq, 0


@cache
def langevin_propose(grads):
    """:meth:`Langevin.propose` with a minibatch (``batch_size`` rows, the same rows for the
    forward and the reverse gradient) for one model kind (memoised; ``grads`` its
    ``BlockModel.grads``)."""

    @jit
    def propose(data, rng, order, theta, theta_new, params, i):
        h, chol, batch, prior, N = params
        code, pa, pb, pconst = prior
        d = theta.shape[0]
        restart_order(order)
        rows = np.empty(batch, dtype=np.intp)
        draw_rows(rng, order, np.empty(batch), rows)
        g = np.empty((batch, d))
        w = N / batch
        grad = np.empty(d)
        grad_new = np.empty(d)
        gp = np.empty(d)
        acc = np.empty(d)
        grads(data, rows, theta, g)
        row_sums(g, acc)
        prior_grad(code, pa, pb, pconst, theta, gp)
        for j in range(d):
            grad[j] = gp[j] + w * acc[j]
        z = np.empty(d)
        for j in range(d):
            z[j] = rng.standard_normal()
        langevin_move(theta, grad, h, chol, z, theta_new)
        grads(data, rows, theta_new, g)
        row_sums(g, acc)
        prior_grad(code, pa, pb, pconst, theta_new, gp)
        for j in range(d):
            grad_new[j] = gp[j] + w * acc[j]
        lq = (langevin_log_q(theta, theta_new, grad_new, h, chol)
              - langevin_log_q(theta_new, theta, grad, h, chol))
        return lq, 2 * batch

    return propose


def unchanged_below(obj, owner: type, *names: str) -> bool:
    """Whether ``type(obj)`` inherits each attribute in ``names`` from ``owner`` unchanged:
    the condition for ``obj`` to use the compiled move ``owner`` wrote for them."""
    cls = type(obj)
    return all(getattr(cls, name) is getattr(owner, name) for name in names)


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

    def rows_from_order(self, view) -> bool:
        """Whether every row this proposal reads comes from the chain's row order
        (``batches.take``, or ``draw_rows`` in compiled code), so that a chain on a
        store-backed model can fetch the rows as the order hands them out
        (:mod:`samplers._rowfeed`). False (the default) for a proposal that reads other
        rows (a full-data gradient): its chains on a store read rows through the model's
        batch methods."""
        return False

    def compiled_move(self, view, model, state, n_samples) -> Move | None:
        """The move in compiled form for the block loop (:class:`Move`), or None (the
        default: the chain runs on the Python loop).

        Asked once per chain, after the model gave its compiled parts ``model`` (a
        :class:`~samplers.models.BlockModel`: its ``grads`` and ``prior`` kernels);
        ``state`` is the chain's starting state, ``n_samples`` its length.
        """
        return None


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

    @classmethod
    def from_laplace(cls, source, scale: float = RW_SCALE) -> "RandomWalk":
        """The walk with covariance ``(scale^2 / d) Sigma``, ``Sigma`` the Laplace covariance.

        Parameters
        ----------
        source : ControlVariates, LaplaceApproximation or array of shape (d, d)
            Where ``Sigma`` comes from: ``source.laplace_covariance()`` (the inverse of minus
            the log posterior's Hessian at the center, prior included), ``source.covariance``,
            or the matrix itself.
        scale : float
            Step in units of ``Sigma / d``; 2.38 is optimal for Gaussian targets in high
            dimension (Roberts, Gelman & Gilks 1997).

        Examples
        --------
        >>> import numpy as np
        >>> walk = RandomWalk.from_laplace(np.diag([4.0, 1.0]))
        >>> np.round(walk.scale, 3)
        array([[11.329,  0.   ],
               [ 0.   ,  2.832]])
        """
        cov = _laplace(source)
        return cls(check_positive("scale", scale) ** 2 / cov.shape[0] * cov)

    def check(self, view):
        f = self._factor
        if f.ndim >= 1 and f.shape[0] != view.dim:
            raise ValueError(f"scale has {f.shape[0]} coordinate(s) but theta has {view.dim}")

    def propose(self, rng, view, batches, theta, pstate):
        z = rng.standard_normal(theta.shape[0])
        step = self._factor @ z if self._factor.ndim == 2 else self._factor * z
        return theta + step, 0.0, None, 0

    def rows_from_order(self, view) -> bool:
        """True: a random walk reads no rows."""
        return unchanged_below(self, RandomWalk, "propose")

    def compiled_move(self, view, model, state, n_samples):
        if not unchanged_below(self, RandomWalk, "propose", "_kernel"):
            return None
        return Move(walk_propose, self._kernel(view.dim))

    def _kernel(self, d):
        """``(diag, chol)`` for :func:`walk_move` in dimension d (compiled loops)."""
        f = self._factor
        if f.ndim == 2:
            return np.zeros(0), np.array(f, dtype=float, order="C")
        return np.array(np.broadcast_to(f, (d,)), dtype=float), np.zeros((0, 0))


@dataclass(frozen=True)
class Langevin(Proposal):
    """Langevin proposal ``theta' = theta + (h/2) A g(theta) + sqrt(h) L z`` (MALA), ``A = L L^T``.

    ``g`` is the gradient of the log posterior: over all N rows (``batch_size=None``, an O(N)
    pass per step, cached across rejections), or estimated from a fresh minibatch of
    ``batch_size`` rows, ``g = grad log p0 + (N/n) sum_batch grad log p(x_i|theta)``, the SGLD
    drift. In the minibatch case the reverse density ``q(theta | theta', X_n)`` uses the
    gradient at ``theta'`` on the *same* minibatch, which keeps detailed balance for each
    minibatch kernel (Korattikara et al. 2014, section 6.4).

    On a :class:`~samplers.ControlVariates` model the minibatch gradient is the control-
    variate estimate ``grad log p0 + g + H (theta - theta*) + (N/n) sum_batch (grad l_i -
    grad hat l_i)``: the wrapper's per-row gradients are the residuals' plus ``(g + H u)/N``.
    :meth:`from_laplace` builds it preconditioned by the Laplace covariance with MALA's
    optimal step.

    Parameters
    ----------
    step_size : float
        h > 0 (in units of ``A``).
    batch_size : int or None
        Rows per gradient estimate, or None for the full gradient.
    covariance : array of shape (d, d), optional
        The preconditioner ``A`` (symmetric positive definite); None is the identity.

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
    covariance: object = None
    _factor: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    needs_gradients = True

    def __post_init__(self):
        object.__setattr__(self, "step_size", check_positive("step_size", self.step_size))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, low=1))
        if self.covariance is not None:
            cov = _laplace(self.covariance).copy()
            cov.setflags(write=False)
            factor = np.linalg.cholesky(cov)
            factor.setflags(write=False)
            object.__setattr__(self, "covariance", cov)
            object.__setattr__(self, "_factor", factor)

    @classmethod
    def from_laplace(cls, source, batch_size: int | None = None, *,
                     scale: float = MALA_SCALE) -> "Langevin":
        """MALA preconditioned by the Laplace covariance, step ``h = scale^2 / d^(1/3)``.

        ``source`` is a :class:`~samplers.ControlVariates` (its ``laplace_covariance()``) or
        the covariance itself; ``batch_size`` rows per gradient estimate (None: the full
        gradient). With the posterior's covariance as preconditioner the target is nearly
        standard normal, for which ``h = 1.65^2 / d^(1/3)`` is optimal (Roberts & Rosenthal
        1998, acceptance about 0.57).

        Examples
        --------
        >>> import numpy as np
        >>> mala = Langevin.from_laplace(np.eye(8), batch_size=100)
        >>> round(mala.step_size, 3)
        1.361
        """
        cov = _laplace(source)
        h = check_positive("scale", scale) ** 2 / cov.shape[0] ** (1.0 / 3.0)
        return cls(h, batch_size, cov)

    def check(self, view):
        check_gradient_model(self, view)
        if self._factor is not None and self._factor.shape[0] != view.dim:
            raise ValueError(f"covariance is {self._factor.shape[0]} x {self._factor.shape[0]} "
                             f"but theta has {view.dim} coordinate(s)")

    def init(self, view, theta):
        return view.full_grad(theta) if self.batch_size is None else None

    def rows_from_order(self, view) -> bool:
        """With a minibatch (``batch_size`` set), whose rows the order hands out; not with
        full-data gradients."""
        return self.batch_size is not None and unchanged_below(
            self, Langevin, "propose", "_propose_preconditioned", "init")

    def compiled_move(self, view, model, state, n_samples):
        """The minibatch move (``batch_size`` set); None for full-data gradients."""
        if self.batch_size is None or not unchanged_below(
                self, Langevin, "propose", "_kernel", "_move", "_log_q",
                "_propose_preconditioned", "init"):
            return None
        h, chol = self._kernel()
        return Move(langevin_propose(model.grads),
                    (h, chol, self.batch_size, model.prior, view.N))

    def _kernel(self):
        """``(h, chol)`` for :func:`langevin_move` and :func:`langevin_log_q`."""
        chol = np.zeros((0, 0)) if self._factor is None else np.array(self._factor, order="C")
        return float(self.step_size), chol

    def _log_q(self, x_to, x_from, g_from):
        h = self.step_size
        if self._factor is not None:  # log N(x_to; x_from + h A g/2, h A) up to a constant
            w = np.linalg.solve(self._factor, x_to - x_from) - 0.5 * h * (self._factor.T @ g_from)
            return -0.5 / h * float(w @ w)
        r = x_to - x_from - 0.5 * h * g_from
        return -0.5 / h * float(r @ r)  # log N(x_to; x_from + h g/2, h I) up to a constant

    def _move(self, rng, theta, grad):
        h = self.step_size
        z = rng.standard_normal(theta.shape[0])
        if self._factor is None:
            return theta + 0.5 * h * grad + np.sqrt(h) * z
        L = self._factor
        return theta + 0.5 * h * (L @ (L.T @ grad)) + np.sqrt(h) * (L @ z)

    def propose(self, rng, view, batches, theta, pstate):
        h = self.step_size
        if self._factor is not None:
            return self._propose_preconditioned(rng, view, batches, theta, pstate)
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

    def _propose_preconditioned(self, rng, view, batches, theta, pstate):
        if self.batch_size is None:
            grad = pstate
            theta_new = self._move(rng, theta, grad)
            grad_new = view.full_grad(theta_new)
            n_grad = view.N
        else:
            batches.restart()
            idx = batches.take(self.batch_size)
            grad = minibatch_grad(view, theta, idx)
            theta_new = self._move(rng, theta, grad)
            grad_new = minibatch_grad(view, theta_new, idx)
            n_grad = 2 * idx.shape[0]
        log_q_ratio = self._log_q(theta, theta_new, grad_new) - self._log_q(theta_new, theta, grad)
        return theta_new, log_q_ratio, (grad_new if self.batch_size is None else None), n_grad


@dataclass(frozen=True)
class Independence(Proposal):
    r"""Independence proposal ``theta' ~ N(mean, covariance)``, whatever the current theta.

    The proposal density does not cancel: the MH ratio carries

    .. math::

        \log q(\theta \mid \theta') - \log q(\theta' \mid \theta)
        = \log \varphi(\theta) - \log \varphi(\theta'),

    ``phi`` the density of N(mean, covariance) (Tierney 1994, Ann. Statist. 22, section 2.3.3,
    the independence chain). With the Laplace approximation of a posterior that is nearly
    Gaussian (large N), almost every proposal is accepted and successive draws are nearly
    independent: ESS per step close to one, against about 0.3 / d for the random walk. With
    :class:`~samplers.ControlVariates` such a long move costs a minibatch test no more rows
    than a short one, because the residuals stay small wherever both points lie within a few
    posterior sds of the center. Its weakness is the tails: when the target's tails are
    heavier than the proposal's the chain can stick far out (it is uniformly ergodic only when
    ``pi / phi`` is bounded); ``scale > 1`` widens the proposal to guard against that, at
    some cost in acceptance.

    Parameters
    ----------
    mean : array of shape (d,)
    covariance : array of shape (d, d)
        Symmetric positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> q = Independence(np.zeros(2), np.eye(2))
    >>> theta_new, log_q_ratio, _, _ = q.propose(np.random.default_rng(0), None, None,
    ...                                          np.array([1.0, 0.0]), None)
    >>> bool(np.isclose(log_q_ratio, 0.5 * (theta_new @ theta_new) - 0.5))
    True
    """

    mean: object
    covariance: object
    _factor: np.ndarray = field(init=False, repr=False, compare=False)
    _inverse: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        mean = check_finite_array("mean", self.mean, ndim=(1,)).astype(float).copy()
        cov = _laplace(self.covariance).astype(float).copy()
        if cov.shape[0] != mean.shape[0]:
            raise ValueError(f"covariance is {cov.shape[0]} x {cov.shape[0]} but mean has "
                             f"{mean.shape[0]} element(s)")
        factor = np.linalg.cholesky(cov)
        inverse = np.linalg.inv(factor)
        for a in (mean, cov, factor, inverse):
            a.setflags(write=False)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "covariance", cov)
        object.__setattr__(self, "_factor", factor)
        object.__setattr__(self, "_inverse", inverse)

    @classmethod
    def from_laplace(cls, source, scale: float = 1.0) -> "Independence":
        """N(center, scale^2 Sigma) from a Laplace approximation.

        ``source`` is a :class:`~samplers.ControlVariates` (its center and
        ``laplace_covariance()``) or a :class:`~samplers.LaplaceApproximation` (its ``mode``
        and ``covariance``).

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, GaussianMean
        >>> cv = ControlVariates(GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 400)))
        >>> q = Independence.from_laplace(cv)
        >>> bool(np.allclose(q.covariance, cv.laplace_covariance()))
        True
        """
        center = getattr(source, "center", None)
        mean = center.theta if center is not None else getattr(source, "mode", None)
        if mean is None:
            raise TypeError(f"source must be a ControlVariates or a LaplaceApproximation, got "
                            f"{type(source).__name__}")
        return cls(mean, check_positive("scale", scale) ** 2 * _laplace(source))

    def check(self, view):
        if self.mean.shape[0] != view.dim:
            raise ValueError(f"mean has {self.mean.shape[0]} element(s) but theta has "
                             f"{view.dim}")

    def rows_from_order(self, view) -> bool:
        """True: an independence proposal reads no rows."""
        return unchanged_below(self, Independence, "propose")

    def compiled_move(self, view, model, state, n_samples):
        if not unchanged_below(self, Independence, "propose", "_kernel", "log_density"):
            return None
        return Move(independence_propose, self._kernel())

    def _kernel(self):
        """``(mean, factor, inverse)`` for :func:`walk_move` (from ``mean``) and
        :func:`gaussian_log_density` (compiled loops)."""
        return (np.array(self.mean, order="C"), np.array(self._factor, order="C"),
                np.array(self._inverse, order="C"))

    def log_density(self, theta) -> float:
        """``log phi(theta)`` up to a constant."""
        w = self._inverse @ (np.asarray(theta, dtype=float) - self.mean)
        return -0.5 * float(w @ w)

    def propose(self, rng, view, batches, theta, pstate):
        new = self.mean + self._factor @ rng.standard_normal(self.mean.shape[0])
        return new, self.log_density(theta) - self.log_density(new), None, 0


def _laplace_mean(source) -> np.ndarray:
    """The center of a ``ControlVariates`` or the mode of a ``LaplaceApproximation``."""
    center = getattr(source, "center", None)
    mean = center.theta if center is not None else getattr(source, "mode", None)
    if mean is None:
        raise TypeError(f"source must be a ControlVariates or a LaplaceApproximation, got "
                        f"{type(source).__name__}")
    return mean


@dataclass(frozen=True)
class StudentTIndependence(Independence):
    r"""Independence proposal from a multivariate t: ``theta' = mean + L z sqrt(df / g)``,
    ``z ~ N(0, I)``, ``g ~ chi^2_df``, ``L L^T = covariance`` (the t's scale matrix).

    The MH ratio carries ``log t(theta) - log t(theta')``, with

    .. math::

        \log t(x) = -\frac{\nu + d}{2} \log\Bigl(1 + \frac{(x - m)^T \Sigma^{-1} (x - m)}
        {\nu}\Bigr) + \text{const}.

    Its tails fall polynomially, so the importance weights ``pi / t`` stay bounded wherever the
    posterior's tails fall faster than ``|x|^{-(nu + d)}`` (any posterior with a Gaussian or
    log-concave tail): the independence sampler is then uniformly ergodic (Mengersen &
    Tweedie 1996, Ann. Statist. 24, theorem 2.1), where the Gaussian N(mean, covariance)
    can stick in a tail it under-covers. The price is acceptance: at ``df = 5`` the
    proposal is about ``sqrt(5/3)`` wider than the Laplace fit. :func:`validation.fit` uses it
    when the Gaussian's Pareto-k is in PSIS's "ok" range (0.5, 0.7].

    Parameters
    ----------
    mean : array of shape (d,)
    covariance : array of shape (d, d)
        The scale matrix (symmetric positive definite); the t's covariance is
        ``df / (df - 2)`` times it.
    df : float
        Degrees of freedom, > 0 (4-10 is the useful range: lower is safer, higher accepts
        more).

    Examples
    --------
    >>> import numpy as np
    >>> q = StudentTIndependence(np.zeros(2), np.eye(2), df=5.0)
    >>> theta_new, log_q_ratio, _, _ = q.propose(np.random.default_rng(0), None, None,
    ...                                          np.zeros(2), None)
    >>> bool(np.isclose(log_q_ratio, 3.5 * np.log1p(theta_new @ theta_new / 5.0)))
    True
    """

    df: float = 5.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "df", check_positive("df", self.df))

    @classmethod
    def from_laplace(cls, source, df: float = 5.0, scale: float = 1.0) -> "StudentTIndependence":
        """The t with ``df`` degrees of freedom, location the Laplace center and scale matrix
        ``scale^2 Sigma`` (``source`` as in :meth:`Independence.from_laplace`).

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, GaussianMean
        >>> cv = ControlVariates(GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 400)))
        >>> StudentTIndependence.from_laplace(cv, df=4).df
        4.0
        """
        return cls(_laplace_mean(source), check_positive("scale", scale) ** 2 * _laplace(source),
                   df)

    def rows_from_order(self, view) -> bool:
        """True: an independence proposal reads no rows."""
        return unchanged_below(self, StudentTIndependence, "propose")

    def compiled_move(self, view, model, state, n_samples):
        if not unchanged_below(self, StudentTIndependence, "propose", "_kernel", "log_density"):
            return None
        return Move(student_t_propose, self._kernel())

    def _kernel(self):
        """``(mean, factor, inverse, df)`` for :func:`student_t_propose`."""
        return (*super()._kernel(), float(self.df))

    def log_density(self, theta) -> float:
        """``log t(theta)`` up to a constant."""
        w = self._inverse @ (np.asarray(theta, dtype=float) - self.mean)
        return -0.5 * (self.df + self.mean.shape[0]) * math.log1p(float(w @ w) / self.df)

    def propose(self, rng, view, batches, theta, pstate):
        z = rng.standard_normal(self.mean.shape[0])
        z = z * math.sqrt(self.df / (2.0 * rng.standard_gamma(0.5 * self.df)))
        new = self.mean + self._factor @ z
        return new, self.log_density(theta) - self.log_density(new), None, 0


@dataclass(frozen=True)
class MixtureIndependence(Independence):
    r"""Defensive mixture independence proposal ``(1 - a) N(mean, Sigma) + a N(mean, s^2 Sigma)``.

    With probability ``weight`` (a) a draw comes from the component ``inflation`` (s) times
    wider. The importance weights are then at most ``1 / a`` times those of the wide
    component alone, ``pi / q <= pi / (a q_s)`` (Hesterberg 1995, Technometrics 37, section
    2: defensive importance sampling), so a posterior that the Laplace Gaussian under-covers
    (skewed, or wider in some direction) but the wide one covers cannot hold the chain in a
    tail, while ``1 - a`` of the proposals keep the Laplace fit's acceptance. The MH ratio
    carries ``log q(theta) - log q(theta')``. :func:`validation.fit` uses it when the
    Gaussian's Pareto-k is above 0.7 and the mixture's own is not.

    Parameters
    ----------
    mean : array of shape (d,)
    covariance : array of shape (d, d)
        Sigma, symmetric positive definite.
    weight : float in (0, 1)
        The wide component's probability a (0.1-0.2 is the useful range).
    inflation : float > 1
        The wide component's sd in units of the narrow one's.

    Examples
    --------
    >>> import numpy as np
    >>> q = MixtureIndependence(np.zeros(1), np.eye(1), weight=0.2, inflation=3.0)
    >>> x = np.array([2.0])
    >>> dens = 0.8 * np.exp(-2.0) + 0.2 / 3.0 * np.exp(-2.0 / 9.0)
    >>> bool(np.isclose(q.log_density(x) - q.log_density(np.zeros(1)),
    ...                 np.log(dens / (0.8 + 0.2 / 3.0))))
    True
    """

    weight: float = 0.15
    inflation: float = 2.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "weight", check_interval("weight", self.weight, 0.0, 1.0))
        inflation = check_positive("inflation", self.inflation)
        if inflation <= 1.0:
            raise ValueError(f"inflation must be > 1, got {self.inflation!r}")
        object.__setattr__(self, "inflation", inflation)

    @classmethod
    def from_laplace(cls, source, weight: float = 0.15, inflation: float = 2.0,
                     scale: float = 1.0) -> "MixtureIndependence":
        """The mixture around the Laplace approximation, narrow component ``N(center,
        scale^2 Sigma)`` (``source`` as in :meth:`Independence.from_laplace`).

        Examples
        --------
        >>> import numpy as np
        >>> from samplers import ControlVariates, GaussianMean
        >>> cv = ControlVariates(GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 400)))
        >>> MixtureIndependence.from_laplace(cv, weight=0.1).weight
        0.1
        """
        return cls(_laplace_mean(source), check_positive("scale", scale) ** 2 * _laplace(source),
                   weight, inflation)

    def rows_from_order(self, view) -> bool:
        """True: an independence proposal reads no rows."""
        return unchanged_below(self, MixtureIndependence, "propose")

    def compiled_move(self, view, model, state, n_samples):
        if not unchanged_below(self, MixtureIndependence, "propose", "_kernel", "log_density"):
            return None
        return Move(mixture_propose, self._kernel())

    def _kernel(self):
        """``(mean, factor, inverse, weight, inflation)`` for :func:`mixture_propose`."""
        return (*super()._kernel(), float(self.weight), float(self.inflation))

    def log_density(self, theta) -> float:
        """``log q(theta)`` up to a constant."""
        w = self._inverse @ (np.asarray(theta, dtype=float) - self.mean)
        r2, d = float(w @ w), self.mean.shape[0]
        narrow = math.log1p(-self.weight) - 0.5 * r2
        wide = (math.log(self.weight) - d * math.log(self.inflation)
                - 0.5 * r2 / (self.inflation * self.inflation))
        hi, lo = (narrow, wide) if narrow >= wide else (wide, narrow)
        return hi + math.log1p(math.exp(lo - hi))

    def propose(self, rng, view, batches, theta, pstate):
        s = self.inflation if rng.random() < self.weight else 1.0
        new = self.mean + self._factor @ (rng.standard_normal(self.mean.shape[0]) * s)
        return new, self.log_density(theta) - self.log_density(new), None, 0
