"""Theory engine: error and data use of minibatch MH tests, and their optimal design.

* :mod:`design.correction`: the Barker correction distribution (Seita et al. 2017),
  correction tables built offline, and the skew-corrected family.
* :mod:`design.acceptance`: a simulator of the minibatch Barker test's acceptance
  probability at a fixed pair.
"""

from . import acceptance, correction

__all__ = ["acceptance", "correction"]
