"""Models: the protocol a user's model follows and the built-in models with numba kernels."""

from ._base import BaseModel, Model, loglik_ratio, skip_data_checks
from .compiled import CompiledModel, RowKernels
from .gaussian import Gaussian, GaussianMean
from .glm import GLM
from .linear import LinearRegression
from .logistic import LogisticRegression
from .mixture import GaussianMixture

# Firefly Monte Carlo: a Student-t model, collapsible bounds, a MAP finder.
from ._map import map_estimate

# The Laplace approximation of a logistic regression (a chain's start and proposal shape).
from ._laplace import LaplaceApproximation, laplace_approximation
from .bounds import Bound, JaakkolaJordanBound, QuadraticBound, StudentTBound
from .robust import RobustRegression

# Control variates.
from .control_variates import ControlVariates, TaylorCenter, TaylorSums

# Heavy rows read exactly.
from .exact_rows import (ExactRows, heavy_rows, residual_scales, row_and_residual_scales,
                         row_scales)
# Your own compiled model: numba row kernels on the compiled loop.
from .row_model import RowModel
# Your own model by autodiff, and the NumPyro bridge (JAX imported on first use).
from .jax import JaxModel
from .numpyro_bridge import NumPyroModel, from_numpyro
# A JaxModel's row function translated to numba (a RowModel on the compiled loop).
from .jaxpr_numba import compile_jax_model

__all__ = [
    "Model",
    "BaseModel",
    "loglik_ratio",
    "skip_data_checks",
    "CompiledModel",
    "RowKernels",
    "GaussianMean",
    "Gaussian",
    "LogisticRegression",
    "GaussianMixture",
    "LinearRegression",
    "GLM",
    # Firefly Monte Carlo
    "RobustRegression",
    "Bound",
    "QuadraticBound",
    "JaakkolaJordanBound",
    "StudentTBound",
    "map_estimate",
    "LaplaceApproximation",
    "laplace_approximation",
    # control variates
    "ControlVariates",
    "TaylorCenter",
    "TaylorSums",
    # heavy rows read exactly
    "ExactRows",
    "heavy_rows", "residual_scales",
    "row_scales", "row_and_residual_scales",
    # your own compiled model
    "RowModel",
    # your own model by autodiff
    "JaxModel",
    "from_numpyro",
    "NumPyroModel",
    "compile_jax_model",
]
