"""Accept/reject tests (moved to :mod:`samplers.mhtests`, one module per test).

Kept as re-exports for code that imported them from here.
"""

from .mhtests import (  # noqa: F401
    AcceptanceTest,
    AustereInfo,
    AustereTest,
    BarkerInfo,
    BarkerTest,
    ConfidenceInfo,
    ConfidenceTest,
    ExactInfo,
    ExactTest,
    confidence_radius,
)
from .mhtests.base import design_for as _design_for  # noqa: F401
from .mhtests.base import nonfinite_decision as _nonfinite_decision  # noqa: F401
from .mhtests.confidence import _BOUNDS  # noqa: F401

__all__ = [
    "AcceptanceTest", "ExactTest", "AustereTest", "ConfidenceTest", "BarkerTest",
    "ExactInfo", "AustereInfo", "ConfidenceInfo", "BarkerInfo",
]
