"""Theory engine: error and data use of minibatch MH tests, and their optimal design.

* :func:`sequential_error` -- E, pi-bar and expected stages of the sequential t-test at a
  standardized mean, by dynamic programming (Korattikara, Chen & Welling 2014, sec. 5.1);
* :func:`acceptance_error` -- the error Delta in the acceptance probability of each pair of
  a :class:`TrialChain` (Eq. 6); with ``law="edgeworth"`` the per-stage law of the test
  statistic is corrected for the skewness and kurtosis of each pair's l_i (one-term
  Edgeworth expansion), as it is in ``sequential_error`` and ``optimize`` with the same
  option;
* :func:`optimize` -- the settings that use the least data within a tolerance: (m, epsilon)
  of the sequential t-test by the average (Eq. 7) or worst-case (Eq. 8) design
  (:data:`METHODS`), returned as a :class:`Design` (:data:`THRESHOLDS` names the sequential
  test's threshold laws); with ``test="barker"`` m and the Novak threshold of the minibatch
  Barker test (:class:`BarkerDesign`); with ``test="confidence"`` the first batch and
  growth factor of the confidence sampler (:class:`ConfidenceDesign`).
* :func:`decision_errors` -- the estimated error of each decision a chain made with the
  sequential t-test, from the decision's own mean and sd of the l_i (the bias monitor);
  :func:`barker_decision_errors` and :func:`confidence_decision_errors` for the minibatch
  Barker test and the confidence sampler;
* :func:`evaluate` -- a design's predicted error and data use at the pairs of any trial
  chain (fresh pairs, to check a design out of sample).
* :mod:`design.correction`: the Barker correction distribution (Seita et al. 2017),
  correction tables built offline, and the skew-corrected family.
* :mod:`design.exact_minibatch`: expected batch and proposal scale of the exact minibatch
  tests (SMH, TunaMH, MH-SS);
* :mod:`design.acceptance`: a simulator of the minibatch Barker test's acceptance
  probability at a fixed pair;
* :mod:`design.reference_tables`: the seed papers' published tables, which the notebooks,
  benchmarks and tests compare with.

``import design`` is light: each name is imported from its module on first use (PEP 562),
so a user of one part does not pay for SciPy, numba or the others.
"""

from typing import TYPE_CHECKING

from ._lib.lazy import attach
from ._names import METHODS, THRESHOLDS

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "AcceptanceError": "._acceptance_error",
        "acceptance_error": "._acceptance_error",
        "BarkerDesign": "._barker_design",
        "ConfidenceDesign": "._confidence_design",
        "Design": "._optimize",
        "InfeasibleDesignError": "._optimize",
        "decision_errors": "._monitor",
        "barker_decision_errors": "._monitor",
        "confidence_decision_errors": "._monitor",
        "edgeworth_reliable": "._edgeworth",
        "evaluate": "._dispatch",
        "optimize": "._dispatch",
        "SequentialError": "._sequential",
        "sequential_error": "._sequential",
        "TrialChain": "._trial",
        "SampledTrial": "._trial",
        "METHODS": "._names",
        "THRESHOLDS": "._names",
        # exact minibatch MH
        "ExactBatchDesign": ".exact_minibatch",
        "exact_design": ".exact_minibatch",
        "exact_expected_batch": ".exact_minibatch",
    },
    submodules=["acceptance", "correction", "exact_minibatch", "reference_tables"],
)

if TYPE_CHECKING:  # what the lazy attributes are, for type checkers and IDEs
    from . import acceptance, correction, reference_tables
    from ._acceptance_error import AcceptanceError, acceptance_error
    from ._barker_design import BarkerDesign
    from ._confidence_design import ConfidenceDesign
    from ._dispatch import evaluate, optimize
    from ._edgeworth import edgeworth_reliable
    from ._monitor import barker_decision_errors, confidence_decision_errors, decision_errors
    from ._optimize import Design, InfeasibleDesignError
    from ._sequential import SequentialError, sequential_error
    from ._trial import SampledTrial, TrialChain
    from .exact_minibatch import ExactBatchDesign, exact_design, exact_expected_batch
