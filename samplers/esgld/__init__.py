"""Extended stochastic-gradient Langevin dynamics (Song, Sun, Ye & Liang 2020) and baselines.

* :func:`esgld_select` -- Bayesian variable selection in linear regression (Algorithm 1):
  SGLD on a dense ``theta`` with ``beta = theta * gamma`` and a short reversible-jump chain
  over models ``gamma`` on each subsample;
* :class:`SpikeSlabPrior` -- the hierarchical prior of that model;
* :class:`VariableSelection` -- inclusion probabilities, median probability model, estimates,
  and :class:`SelectionScores` (FSR, NSR, MSE1, MSE0 of Song et al.'s Table 1).
"""

from ._prior import SpikeSlabPrior
from ._results import SelectionScores, VariableSelection, selection_scores
from ._selection import ESGLDInfo, ESGLDState, esgld_select

__all__ = [
    "esgld_select", "ESGLDState", "ESGLDInfo",
    "SpikeSlabPrior", "VariableSelection", "SelectionScores", "selection_scores",
]
