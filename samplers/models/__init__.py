"""Models: the protocol a user's model follows, and the built-in models with numba kernels."""

from ._base import BaseModel, Model, loglik_ratio
from .gaussian import Gaussian, GaussianMean
from .linear import LinearRegression
from .logistic import LogisticRegression
from .mixture import GaussianMixture

__all__ = [
    "Model",
    "BaseModel",
    "loglik_ratio",
    "GaussianMean",
    "Gaussian",
    "LogisticRegression",
    "GaussianMixture",
    "LinearRegression",
]
