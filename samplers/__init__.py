"""Minibatch Metropolis-Hastings samplers: one chain loop, pluggable accept/reject tests.

The pieces:

* models (:mod:`samplers.models`): the protocol a user's model follows and built-in models
  with numba kernels; priors (:mod:`samplers.priors`); synthetic data
  (:mod:`samplers.datasets`);
* accept/reject tests (:mod:`samplers.mhtests`, one module each; the sequential ones run by
  one engine): :class:`ExactTest`, :class:`AustereTest` (Korattikara et al. 2014),
  :class:`ConfidenceTest` (Bardenet et al. 2014), :class:`BarkerTest` (Seita et al. 2017),
  :class:`FPCNormalTest`, and the exact minibatch tests :class:`SMHTest`,
  :class:`TunaMHTest`, :class:`ScalableSubsamplingTest`;
* proposals: :class:`RandomWalk`, :class:`Langevin` (both preconditioned by a Laplace
  covariance through ``from_laplace``), :class:`Independence` (draws from the Laplace
  approximation itself) and its heavier-tailed forms :class:`StudentTIndependence` and
  :class:`MixtureIndependence`;
* control variates: :class:`ControlVariates`, a model wrapper whose rows are Taylor
  residuals at the mode plus the proxy's mean, so every test above reads about one minibatch
  per step (Bardenet et al. 2017, section 7);
* SGLD (:mod:`samplers.sgld`): :class:`SGLD` with :class:`AcceptAll`, step-size schedules;
  extended SGLD for variable selection and missing data (:mod:`samplers.esgld`);
* the chain loop: :func:`sample`, :func:`sample_chains`, returning :class:`Chain` /
  :class:`Chains` (``to_arviz()`` for ArviZ 0.x and 1.x, with ``lp`` from
  :func:`log_posterior` when given the model; :func:`import_arviz` imports ArviZ with the
  toolkit's fixes);
* ``IndexSampler``, the O(batch) without-replacement row sampler every test reads from;
* Firefly Monte Carlo (Maclaurin & Adams 2014): :func:`firefly` with collapsible bounds
  (:class:`JaakkolaJordanBound`, :class:`StudentTBound`), z-updates :class:`ImplicitZ` /
  :class:`ExplicitZ` and theta-updates by any proposal or :class:`Slice`;
* :func:`laplace_approximation`, the Gaussian approximation of a logistic-regression
  posterior: a chain's starting point and the random walk's shape.

``__all__`` holds what a user needs to run chains. Writing a new test, proposal or model
uses the extension API, which lives in the subpackages: :mod:`samplers.mhtests` (the base
classes, the engine, the compiled decision protocol and its status codes),
:mod:`samplers.proposals` (``Proposal``, ``Move``), :mod:`samplers.models` and
:mod:`samplers.models.compiled` (``BaseModel``, ``RowKernels``, ``BlockModel``), and the
checked model view ``ModelView``/``check_model``, the row samplers ``IndexSampler``,
``AliasTable``, ``PoissonBatches`` and ``TaylorRemainder`` (still importable from here).
"""

from . import datasets, mhtests, models, priors, proposals
from ._arviz import import_arviz
from ._chain import (BiasWarning, Chain, ChainInterrupted, Chains, State, StepInfo, mh_step,
                     sample, sample_chains)
from ._firefly import (BrightSet, ExplicitZ, FireflyInfo, FireflyKernel, ImplicitZ, Slice,
                       firefly)
from ._lp import log_posterior
from .mhtests import (AustereInfo, AustereTest, BarkerInfo, BarkerTest, BoundViolation,
                      ConfidenceInfo, ConfidenceTest, ExactInfo, ExactMinibatchInfo, ExactTest,
                      FPCNormalInfo, FPCNormalTest, ScalableSubsamplingTest, SMHTest, TunaMHTest)
from .models import (GLM, Bound, ControlVariates, ExactRows, Gaussian, GaussianMean,
                     GaussianMixture, JaakkolaJordanBound, LaplaceApproximation, LinearRegression,
                     LogisticRegression, Model, QuadraticBound, RobustRegression, StudentTBound,
                     TaylorCenter, TaylorSums, heavy_rows, laplace_approximation,
                     map_estimate, residual_scales, row_and_residual_scales,
                     row_scales)
from .priors import FlatPrior, GaussianPrior, LaplacePrior
from .proposals import Independence, Langevin, MixtureIndependence, RandomWalk, StudentTIndependence
from .sgld import SGLD, AcceptAll, AcceptAllInfo, ConstantStep, PolynomialDecay, StepSchedule

# The extension API, documented in the subpackage that owns it and importable from here too
# (existing code imports it so): the base classes and specs of the tests
# (samplers.mhtests), of proposals (samplers.proposals) and models (samplers.models), the
# checked model view, the row samplers and the remainder bounds of the exact minibatch tests.
from design._lib.rows import IndexSampler
from ._poisson import AliasTable, PoissonBatches
from ._view import ModelView, check_model
from .mhtests import (AcceptanceTest, EngineSpec, IntervalTest, PathSpec, SequentialTest,
                      confidence_radius)
from .models import BaseModel, loglik_ratio
from .models.remainder import TaylorRemainder
from .proposals import Proposal

#: What a user needs, by task. The extension API above is in ``samplers.mhtests``,
#: ``samplers.proposals``, ``samplers.models`` and ``samplers.models.compiled``.
__all__ = [
    # run a chain
    "sample", "sample_chains", "Chain", "Chains", "ChainInterrupted", "BiasWarning",
    "log_posterior", "import_arviz",
    # accept/reject tests and what each records per step
    "ExactTest", "AustereTest", "FPCNormalTest", "ConfidenceTest", "BarkerTest", "SMHTest",
    "TunaMHTest", "ScalableSubsamplingTest", "AcceptAll",
    "ExactInfo", "AustereInfo", "FPCNormalInfo", "ConfidenceInfo", "BarkerInfo",
    "ExactMinibatchInfo", "AcceptAllInfo", "BoundViolation",
    # proposals and step sizes
    "RandomWalk", "Langevin", "Independence", "StudentTIndependence", "MixtureIndependence",
    "SGLD", "StepSchedule", "ConstantStep",
    "PolynomialDecay",
    # models, priors, control variates, the Laplace approximation
    "Model", "GLM", "GaussianMean", "Gaussian", "LogisticRegression", "LinearRegression",
    "RobustRegression", "GaussianMixture", "FlatPrior", "GaussianPrior", "LaplacePrior",
    "ControlVariates", "TaylorCenter", "TaylorSums", "LaplaceApproximation", "laplace_approximation",
    "map_estimate", "ExactRows", "heavy_rows", "row_scales", "residual_scales",
    "row_and_residual_scales",
    # Firefly Monte Carlo
    "firefly", "FireflyInfo", "FireflyKernel", "ImplicitZ", "ExplicitZ", "Slice", "BrightSet",
    "Bound", "QuadraticBound", "JaakkolaJordanBound", "StudentTBound",
    # subpackages
    "datasets", "priors", "models", "mhtests", "proposals",
]
