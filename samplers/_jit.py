"""The one place that sets numba's compilation options.

Every compiled kernel in the toolkit is decorated with :data:`jit`. Kernels are small,
private and take arrays that were validated and coerced in Python before the call.
``error_model="numpy"`` lets floating-point division follow IEEE rules (inf/nan) instead
of raising, and no ``fastmath`` is used because log-densities can legitimately be -inf.
"""

from functools import partial

import numba

jit = partial(numba.njit, cache=True, error_model="numpy", nogil=True)

#: For the per-row kernels of the models: inlined into the loops that call them (numba IR
#: inlining), which lets the compiler keep the model's data tuple out of the row loop.
row_jit = partial(jit, inline="always")
