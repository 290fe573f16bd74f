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
  covariance through ``from_laplace``) and :class:`Independence` (draws from the Laplace
  approximation itself);
* control variates: :class:`ControlVariates`, a model wrapper whose rows are Taylor
  residuals at the mode plus the proxy's mean, so every test above reads about one minibatch
  per step (Bardenet et al. 2017, section 7);
* SGLD (:mod:`samplers.sgld`): :class:`SGLD` with :class:`AcceptAll`, step-size schedules;
  extended SGLD for variable selection and missing data (:mod:`samplers.esgld`);
* the chain loop: :func:`sample`, :func:`sample_chains`, returning :class:`Chain` /
  :class:`Chains` (``to_arviz()`` for ArviZ 0.x and 1.x, with ``lp`` from
  :func:`log_posterior` when given the model; :func:`import_arviz` imports ArviZ with the
  toolkit's fixes);
* :class:`IndexSampler`, the O(batch) without-replacement row sampler every test reads from;
* Firefly Monte Carlo (Maclaurin & Adams 2014): :func:`firefly` with collapsible bounds
  (:class:`JaakkolaJordanBound`, :class:`StudentTBound`), z-updates :class:`ImplicitZ` /
  :class:`ExplicitZ` and theta-updates by any proposal or :class:`Slice`;
* :func:`laplace_approximation`, the Gaussian approximation of a logistic-regression
  posterior: a chain's starting point and the random walk's shape.
"""

from . import datasets, priors
from . import mhtests
from .mhtests import *  # noqa: F403  (every test and its info: see mhtests.__all__)
from ._arviz import import_arviz
from ._chain import BiasWarning, Chain, ChainInterrupted, Chains, State, StepInfo, mh_step, sample, sample_chains
from ._lp import log_posterior
from ._view import ModelView, check_model
from design._lib.rows import IndexSampler
from .models import (
    BaseModel,
    Gaussian,
    GaussianMean,
    GaussianMixture,
    GLM,
    LinearRegression,
    LogisticRegression,
    Model,
    loglik_ratio,
)
from .priors import FlatPrior, GaussianPrior, LaplacePrior
from .proposals import Independence, Langevin, Proposal, RandomWalk

# --- SGLD and extended SGLD (issue 7) ---
from .sgld import SGLD, AcceptAll, AcceptAllInfo, ConstantStep, PolynomialDecay, StepSchedule

# --- Firefly Monte Carlo (issue 6) ---
from ._firefly import BrightSet, ExplicitZ, FireflyInfo, ImplicitZ, Slice, firefly
from .models import (
    Bound,
    JaakkolaJordanBound,
    QuadraticBound,
    RobustRegression,
    StudentTBound,
    map_estimate,
)
from .models import LaplaceApproximation, laplace_approximation

# --- control variates (issue 12) ---
from .models import ControlVariates, TaylorCenter

# --- exact minibatch MH (issue 13) ---
from ._poisson import AliasTable, PoissonBatches
from .models.remainder import TaylorRemainder

__all__ = [
    *mhtests.__all__,
    "Chain", "Chains", "State", "StepInfo", "mh_step", "sample", "sample_chains", "log_posterior",
    "import_arviz", "ChainInterrupted", "BiasWarning",
    "ModelView", "check_model",
    "IndexSampler",
    "Model", "BaseModel", "loglik_ratio",
    "GaussianMean", "Gaussian", "LogisticRegression", "GaussianMixture", "LinearRegression", "GLM",
    "FlatPrior", "GaussianPrior", "LaplacePrior",
    "Proposal", "RandomWalk", "Langevin", "Independence",
    "datasets", "priors",
    # SGLD and extended SGLD (issue 7)
    "SGLD", "AcceptAll", "AcceptAllInfo", "StepSchedule", "ConstantStep", "PolynomialDecay",
    # Firefly Monte Carlo (issue 6)
    "firefly", "FireflyInfo", "ImplicitZ", "ExplicitZ", "Slice", "BrightSet",
    "Bound", "QuadraticBound", "JaakkolaJordanBound", "StudentTBound", "RobustRegression",
    "map_estimate",
    "LaplaceApproximation", "laplace_approximation",
    # control variates (issue 12)
    "ControlVariates", "TaylorCenter",
    # exact minibatch MH (issue 13)
    # (SMHTest, TunaMHTest, ScalableSubsamplingTest, ExactMinibatchInfo, BoundViolation are in
    # mhtests.__all__)
    "TaylorRemainder", "PoissonBatches", "AliasTable",
]
