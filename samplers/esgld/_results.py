"""Results of variable selection: inclusion probabilities, estimates and their scores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["VariableSelection", "SelectionScores", "selection_scores"]


@dataclass(frozen=True)
class SelectionScores:
    """How a selection compares with the truth (Song et al. 2020, Table 1).

    Attributes
    ----------
    fsr : float
        False selection rate ``|S_hat \\ S| / |S_hat|`` (0 when nothing is selected).
    nsr : float
        Negative selection rate ``|S \\ S_hat| / |S|``.
    mse1 : float
        Mean squared error of the estimates over the true predictors S.
    mse0 : float
        Mean squared error (mean of squared estimates) over the false predictors.
    """

    fsr: float
    nsr: float
    mse1: float
    mse0: float


def selection_scores(selected, beta_hat, beta_true) -> SelectionScores:
    """FSR, NSR, MSE1 and MSE0 of a selected set and coefficient estimates.

    Examples
    --------
    >>> s = selection_scores([0, 2], np.array([1.1, 0.0, 0.1]), np.array([1.0, 0.0, 0.0]))
    >>> s.fsr, s.nsr, round(s.mse1, 6), round(s.mse0, 6)
    (0.5, 0.0, 0.01, 0.005)
    """
    beta_true = np.asarray(beta_true, dtype=float)
    beta_hat = np.asarray(beta_hat, dtype=float)
    truth = beta_true != 0
    chosen = np.zeros(truth.shape, dtype=bool)
    chosen[np.asarray(selected, dtype=np.intp)] = True
    n_chosen = int(chosen.sum())
    fsr = float((chosen & ~truth).sum() / n_chosen) if n_chosen else 0.0
    nsr = float((truth & ~chosen).sum() / truth.sum()) if truth.any() else 0.0
    err = (beta_hat - beta_true) ** 2
    mse1 = float(err[truth].mean()) if truth.any() else 0.0
    mse0 = float(err[~truth].mean()) if (~truth).any() else 0.0
    return SelectionScores(fsr, nsr, mse1, mse0)


@dataclass(frozen=True)
class VariableSelection:
    """The output of a variable-selection sampler (eSGLD or reversible-jump MH).

    Attributes
    ----------
    inclusion : ndarray of shape (p,)
        Posterior inclusion probabilities, averaged over the models drawn after burn-in.
    beta : ndarray of shape (p,)
        Posterior mean of ``beta = theta * gamma`` over the same draws.
    samples : ndarray of shape (n_kept, p)
        Thinned draws after burn-in: ``theta`` for eSGLD, ``beta`` for reversible jump.
    model_size : ndarray of shape (n_iter,)
        Mean size of the models drawn at each iteration.
    rows_read : int
        Data rows read over the whole run (gradients and acceptance tests).
    wall_time : float
        Seconds spent sampling.
    method : str
        What produced the result.
    """

    inclusion: np.ndarray
    beta: np.ndarray
    samples: np.ndarray
    model_size: np.ndarray
    rows_read: int
    wall_time: float
    method: str

    @property
    def selected(self) -> np.ndarray:
        """The median probability model (Barbieri & Berger 2004): variables with inclusion
        probability above 1/2."""
        return np.flatnonzero(self.inclusion > 0.5)

    def scores(self, beta_true) -> SelectionScores:
        """FSR, NSR, MSE1, MSE0 of the median probability model and ``beta`` against the truth."""
        return selection_scores(self.selected, self.beta, beta_true)
