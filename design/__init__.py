"""Theory engine: error and data use of minibatch MH tests, and their optimal design.

* :func:`sequential_error` -- E, pi-bar and expected stages of the sequential t-test at a
  standardized mean, by dynamic programming (Korattikara, Chen & Welling 2014, sec. 5.1);
* :func:`acceptance_error` -- the error Delta in the acceptance probability of each pair of
  a :class:`TrialChain` (Eq. 6);
* :func:`optimize` -- the settings that use the least data within a tolerance: (m, epsilon)
  of the sequential t-test by the average (Eq. 7) or worst-case (Eq. 8) design
  (:data:`METHODS`), returned as a :class:`Design` (:data:`THRESHOLDS` names the sequential
  test's threshold laws); with ``test="barker"`` m and the Novak threshold of the minibatch
  Barker test (:class:`BarkerDesign`); with ``test="confidence"`` the first batch and
  growth factor of the confidence sampler (:class:`ConfidenceDesign`).
* :func:`evaluate` -- a design's predicted error and data use at the pairs of any trial
  chain (fresh pairs, to check a design out of sample).
* :mod:`design.correction`: the Barker correction distribution (Seita et al. 2017),
  correction tables built offline, and the skew-corrected family.
* :mod:`design.acceptance`: a simulator of the minibatch Barker test's acceptance
  probability at a fixed pair;
* :mod:`design.reference_tables`: the seed papers' published tables, which the notebooks,
  benchmarks and tests compare with.
"""

from . import acceptance, correction
from ._acceptance_error import AcceptanceError, acceptance_error
from ._barker_design import BarkerDesign
from ._confidence_design import ConfidenceDesign
from ._dispatch import evaluate, optimize
from ._optimize import METHODS, Design, InfeasibleDesignError
from ._sequential import THRESHOLDS, SequentialError, sequential_error
from ._trial import TrialChain

__all__ = [
    "AcceptanceError",
    "BarkerDesign",
    "ConfidenceDesign",
    "Design",
    "InfeasibleDesignError",
    "METHODS",
    "SequentialError",
    "THRESHOLDS",
    "TrialChain",
    "acceptance",
    "acceptance_error",
    "correction",
    "evaluate",
    "optimize",
    "sequential_error",
]
