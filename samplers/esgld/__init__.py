"""Extended stochastic-gradient Langevin dynamics (Song, Sun, Ye & Liang 2020) and baselines.

* :func:`esgld_select` -- Bayesian variable selection in linear regression (Algorithm 1):
  SGLD on a dense ``theta`` with ``beta = theta * gamma`` and a short reversible-jump chain
  over models ``gamma`` on each subsample;
* :class:`SpikeSlabPrior` -- the hierarchical prior of that model;
* :class:`VariableSelection` -- inclusion probabilities, median probability model, estimates,
  and :class:`SelectionScores` (FSR, NSR, MSE1, MSE0 of Song et al.'s Table 1);
* baselines on the shared chain loop: :class:`SparseLinearRegression` (the same model, with
  ``beta`` as the state) and the :class:`ReversibleJump` proposal, run by
  :func:`rjmcmc_select` with ``ExactTest`` (full-data reversible-jump MH) or ``AustereTest``
  (Korattikara et al. 2014, section 6.3);
* missing data (section 3.2, Algorithm S1): :class:`ImputationSGLD` on a
  :class:`MissingCovariateRegression`, and the full-data :func:`data_augmentation` baseline.
"""

from ._missing import ImputationSGLD, MissingCovariateRegression, data_augmentation
from ._prior import SpikeSlabPrior
from ._results import SelectionScores, VariableSelection, selection_scores
from ._rjmcmc import ReversibleJump, SparseLinearRegression, rjmcmc_select
from ._selection import ESGLDInfo, ESGLDState, esgld_select

__all__ = [
    "esgld_select", "ESGLDState", "ESGLDInfo",
    "SpikeSlabPrior", "VariableSelection", "SelectionScores", "selection_scores",
    "SparseLinearRegression", "ReversibleJump", "rjmcmc_select",
    "MissingCovariateRegression", "ImputationSGLD", "data_augmentation",
]
