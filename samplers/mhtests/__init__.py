"""The accept/reject tests, one module each, and the engine that runs the sequential ones.

* :mod:`~samplers.mhtests.base`: :class:`AcceptanceTest` (the protocol the chain loop
  calls), :class:`SequentialTest` (the template of ``decide``) and :class:`IntervalTest`
  (a sequential test given by a radius and stage sizes);
* :mod:`~samplers.mhtests.engine`: the rule protocol, the compiled and Python drivers;
* one module per test: :mod:`~samplers.mhtests.exact`, :mod:`~samplers.mhtests.austere`,
  :mod:`~samplers.mhtests.confidence`, :mod:`~samplers.mhtests.barker`,
  :mod:`~samplers.mhtests.fpc_normal`;
* :mod:`~samplers.mhtests.poisson`: the exact minibatch tests (SMH, TunaMH, MH-SS), which
  share a Poisson-factor loop of their own (they are not sequential: see that module).

A new sequential test is one new module here (its rule, settings and info) plus its export;
see ``docs/architecture.md``.
"""

from .austere import AustereInfo, AustereTest
from .barker import BarkerInfo, BarkerTest
from .base import AcceptanceTest, EngineSpec, IntervalTest, PathSpec, SequentialTest
from .confidence import ConfidenceInfo, ConfidenceTest, confidence_radius
from .exact import ExactInfo, ExactTest
from .fpc_normal import FPCNormalInfo, FPCNormalTest
from .poisson import (BoundViolation, ExactMinibatchInfo, ScalableSubsamplingTest, SMHTest,
                      TunaMHTest)

__all__ = [
    "AcceptanceTest", "SequentialTest", "IntervalTest", "EngineSpec", "PathSpec",
    "ExactTest", "AustereTest", "ConfidenceTest", "BarkerTest", "FPCNormalTest",
    "ExactInfo", "AustereInfo", "ConfidenceInfo", "BarkerInfo", "FPCNormalInfo",
    "confidence_radius",
    "SMHTest", "TunaMHTest", "ScalableSubsamplingTest", "ExactMinibatchInfo", "BoundViolation",
]
