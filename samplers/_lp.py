"""The exact log posterior at a chain's draws, computed after sampling (ArviZ's ``lp``).

A minibatch chain never evaluates the full log posterior: that is the point. ArviZ users
still expect ``lp`` in the sample stats (energy-style plots, comparing chains), so it is
computed afterwards, once per *distinct* draw: a Metropolis-Hastings chain repeats its
state after every rejection, and those draws share the value of the draw before.
"""

from __future__ import annotations

import math

import numpy as np

from design._lib.progress import progress_bar
from ._view import check_model
from .models.control_variates import ControlVariates

__all__ = ["log_posterior"]


def log_posterior(model, samples, *, progress=None) -> np.ndarray:
    r"""Unnormalised log posterior :math:`\log p(\theta) + \sum_{i=1}^N \log p(x_i \mid \theta)`
    at every draw.

    Parameters
    ----------
    model : Model
        The model the draws came from (a built-in model, a :class:`ControlVariates`
        wrapper, or a user's model with ``loglik(theta, idx)`` and ``logprior(theta)``).
    samples : array_like of shape (..., d)
        Draws, e.g. ``chain.samples`` (n_samples, d) or ``chains.samples``
        (n_chains, n_samples, d). Not modified.
    progress : bool or None
        A progress bar over the distinct draws; None (default): only if stderr is a terminal.

    Returns
    -------
    ndarray of shape ``samples.shape[:-1]``
        The log prior plus the (tempered, as the chain targeted it) log-likelihood of all N
        rows at each draw.

    Notes
    -----
    Cost: one O(N) pass per distinct consecutive draw, chunked on every core for a built-in
    model (:meth:`ModelView.full_loglik`), chunk by chunk through ``model.loglik`` for a
    user's model; memory O(chunk). With acceptance rate ``a`` that is ``a * n_samples``
    passes per chain, so at N = 10^6 expect seconds per hundred accepted draws.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianMean, log_posterior
    >>> x = np.random.default_rng(0).normal(1.0, 1.0, 1000)
    >>> model = GaussianMean(x, sigma=1.0)
    >>> lp = log_posterior(model, np.array([[0.9], [0.9], [1.1]]), progress=False)
    >>> lp.shape, bool(lp[0] == lp[1]), bool(lp[0] != lp[2])
    ((3,), True, True)
    """
    if np.iscomplexobj(samples):
        raise TypeError("samples must be real numbers, got complex values")
    try:
        draws = np.asarray(samples, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"samples must be an array of real numbers of shape (..., d), got "
                        f"{type(samples).__name__} {_short(samples)}") from None
    _check_signature(model)
    if draws.ndim < 2 or draws.shape[-1] == 0:
        raise ValueError(f"samples must have shape (..., d) with d >= 1, got shape "
                         f"{np.shape(samples)}")
    if not np.all(np.isfinite(draws)):
        raise ValueError("samples must be finite; got non-finite values")
    flat = draws.reshape(-1, draws.shape[-1])
    per_chain = draws.shape[-2]
    if isinstance(model, ControlVariates):
        # its rows sum to the wrapped model's log-likelihood exactly: read that one
        model = model.model
    dim = getattr(model, "dim", None)
    if dim is not None and draws.shape[-1] != dim:
        raise ValueError(f"samples must have d = {dim} columns for {type(model).__name__}, "
                         f"got shape {draws.shape}")
    view, _ = check_model(model, flat[0])
    # A draw equal to the one before it in the same chain (a rejection) is not recomputed.
    same = np.zeros(len(flat), dtype=bool)
    same[1:] = np.all(flat[1:] == flat[:-1], axis=1)
    same[::per_chain] = False
    fresh = np.flatnonzero(~same)
    out = np.empty(len(flat))
    with progress_bar(len(fresh), desc="log posterior", unit="draw", progress=progress) as bar:
        for k in fresh:
            out[k] = _log_posterior_at(view, model, flat[k])
            bar.update(1)
    # forward-fill the repeated draws from the last fresh one
    last = np.maximum.accumulate(np.where(same, 0, np.arange(len(flat))))
    return out[last].reshape(draws.shape[:-1])


def _short(value, limit=60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _check_signature(model):
    """Refuse a model whose ``loglik`` / ``logprior`` cannot be called as
    ``loglik(theta, idx)`` / ``logprior(theta)``, naming the method and its signature."""
    import inspect

    for name, args in (("loglik", ("theta", "idx")), ("logprior", ("theta",))):
        method = getattr(model, name, None)
        if not callable(method):
            raise TypeError(f"model must have a callable {name}({', '.join(args)}); "
                            f"{type(model).__name__} has none")
        try:
            sig = inspect.signature(method)
        except (TypeError, ValueError):    # a builtin or compiled callable: cannot tell
            continue
        try:
            sig.bind(*args)
        except TypeError:
            raise TypeError(f"model.{name} must accept ({', '.join(args)}), got "
                            f"{type(model).__name__}.{name}{sig}") from None


def _log_posterior_at(view, model, theta) -> float:
    lp = float(view.logprior(theta))
    if not lp > -math.inf:
        return lp
    if view._loglik_chunks is not None:   # compiled chunks (on blocks for a store)
        return lp + view.full_loglik(theta)
    total = 0.0
    for idx in view.chunks():
        total += float(np.sum(np.asarray(model.loglik(theta, idx), dtype=float)))
    return lp + total
