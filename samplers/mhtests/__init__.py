"""The accept/reject tests, one module each, and what a new test is written against.

The tests (a user picks one; each records its own info per step):

* :mod:`~samplers.mhtests.exact` (:class:`ExactTest`), :mod:`~samplers.mhtests.austere`
  (:class:`AustereTest`), :mod:`~samplers.mhtests.fpc_normal` (:class:`FPCNormalTest`),
  :mod:`~samplers.mhtests.confidence` (:class:`ConfidenceTest`),
  :mod:`~samplers.mhtests.barker` (:class:`BarkerTest`);
* :mod:`~samplers.mhtests.poisson`: the exact minibatch tests (:class:`SMHTest`,
  :class:`TunaMHTest`, :class:`ScalableSubsamplingTest`), which share a Poisson-factor loop
  of their own (they are not sequential: see that module);
* :mod:`~samplers.mhtests.penalty`: the penalty method (``PenaltyTest``), added as one file.

The extension API (what a new test is written against):

* :mod:`~samplers.mhtests.base`: :class:`AcceptanceTest` (the protocol the chain loops
  call, including ``compiled_decision``), :class:`SequentialTest` (the template of
  ``decide``, and the compiled decision generated from the rule) and :class:`IntervalTest`
  (a sequential test given by a radius and stage sizes); :class:`EngineSpec` and
  :class:`PathSpec`, what the checks ask a test for;
* :mod:`~samplers.mhtests.engine`: the rule protocol, the compiled and Python drivers;
* :mod:`~samplers.mhtests.compiled`: the compiled decision protocol (``Decision``,
  ``sequential_decide``, the non-finite rule);
* :mod:`~samplers.mhtests.status`: every status code of the rules, decisions and blocks.

A new test is one new module here and its test file; it runs on both chain loops without
an edit elsewhere (see ``docs/architecture.md``, "Where new code goes").
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
    # the tests and their infos
    "ExactTest", "AustereTest", "FPCNormalTest", "ConfidenceTest", "BarkerTest",
    "SMHTest", "TunaMHTest", "ScalableSubsamplingTest",
    "ExactInfo", "AustereInfo", "FPCNormalInfo", "ConfidenceInfo", "BarkerInfo",
    "ExactMinibatchInfo", "BoundViolation", "confidence_radius",
    # the extension API
    "AcceptanceTest", "SequentialTest", "IntervalTest", "EngineSpec", "PathSpec",
]
