"""Stage arithmetic of the sequential tests (moved; kept as re-exports for older imports).

The formulas live in :mod:`design._lib.rules`, the Barker stopping rule in
:mod:`samplers.mhtests.barker`, and the compiled loops are one engine,
:mod:`samplers.mhtests.engine`.
"""

from design._lib.rules import (  # noqa: F401
    BERNSTEIN,
    BERNSTEIN_SERFLING,
    HOEFFDING,
    austere_se,
    barker_skew,
    barker_variance,
    confidence_radius_code,
    look_delta,
    next_size,
    novak_error,
    novak_lower_bound,
)

from .mhtests.barker import EXACT, STOP, barker_stage  # noqa: F401
from .mhtests.engine import GROW  # noqa: F401
