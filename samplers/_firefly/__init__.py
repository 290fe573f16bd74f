"""Firefly Monte Carlo (Maclaurin & Adams 2014): exact MCMC on a bright subset of the rows.

* :mod:`.brightness` -- the bright/dark set with O(1) updates (section 3.3);
* :mod:`.target` -- the pseudo-posterior given the bright set, with bound checks (eq. 2);
* :mod:`.zupdates` -- explicit and implicit resampling of the brightness variables (3.2);
* :mod:`.thetaupdates` -- MH with any proposal, and slice sampling, on the pseudo-posterior;
* :mod:`.sampler` -- one iteration as a pure step, and :func:`firefly`, the chain.

The bounds themselves belong to the models: :mod:`samplers.models.bounds`.
"""

from .brightness import BrightSet
from .sampler import FireflyInfo, FireflyKernel, FireflyState, firefly, firefly_step
from .thetaupdates import Slice
from .zupdates import ExplicitZ, ImplicitZ, ZInfo

__all__ = ["BrightSet", "ExplicitZ", "FireflyInfo", "FireflyKernel", "FireflyState", "ImplicitZ",
           "Slice", "ZInfo", "firefly", "firefly_step"]
