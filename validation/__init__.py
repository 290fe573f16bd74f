"""Checks to run on a dataset before trusting a minibatch Metropolis-Hastings test.

* :func:`clt_check` -- does the minibatch t statistic of the l_i follow the Student-t law
  the tests assume? Skewness, kurtosis, Novak's bound, the KS distance of simulated
  without-replacement minibatches, normality tests, the smallest passing batch size
  (Bardenet et al. 2014, section 4.1; Seita et al. 2017, Lemma 3);
* :func:`acceptance_check` -- the error in the acceptance probability of the sequential
  t-test on real l_i, pair by pair: the real test simulated (u integrated out) beside the
  Gaussian and the Edgeworth-corrected predictions, against a design's tolerance (also
  the verdict of :func:`clt_check` and :func:`sequential_check` given a design);
* :func:`sequential_check` -- the real sequential t-test run on the real l_i against the
  error and data use :func:`design.sequential_error` predicts;
* :func:`stationary_bound`, :func:`subsampling_bound`, :func:`delta_max` -- the bounds on
  the distance between the posterior and an approximate chain's stationary law
  (Korattikara et al. 2014, Theorem 1; Bardenet et al. 2014, Proposition 3.2);
* :class:`GridChain`, :func:`stationary_check` -- those bounds checked exactly on a
  discretised one-parameter posterior, for the sequential, confidence and Barker tests;
* :func:`loglik_ratios`, :func:`proposal_pairs` -- the N l_i of a pair (an O(N) pass) and
  pairs as a trial chain proposes them;
* :func:`fit` -- the control-variate workflow in one call (mode, proxy, trial pairs, design,
  CLT check, designed chains, ArviZ output with the design's predictions beside the realised
  data use). It lives in :mod:`validation.workflow.fit`, the application layer, because it
  needs the CLT check: ``samplers`` sits below ``validation`` and cannot host it.

Names are imported from their modules on first use (PEP 562), so ``import validation`` (and
the command line in :mod:`validation.workflow`, which sits on top of it) starts quickly.
"""

from typing import TYPE_CHECKING

from design._lib.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "BiasMonitor": "._monitor",
        "bias_monitor": "._monitor",
        "delta_max": "._bounds",
        "stationary_bound": "._bounds",
        "subsampling_bound": "._bounds",
        "AcceptanceCheck": "._verdict",
        "acceptance_check": "._verdict",
        "CLTCheck": "._clt",
        "clt_check": "._clt",
        "FixedBatchBarker": "._grid",
        "GridChain": "._grid",
        "StationaryCheck": "._grid",
        "stationary_check": "._grid",
        "loglik_ratios": "._ratios",
        "proposal_pairs": "._ratios",
        "SimulatedAcceptance": "._simulate",
        "simulate_acceptance": "._simulate",
        "SequentialCheck": "._sequential",
        "sequential_check": "._sequential",
        # the workflow in one call; it lives in the application layer (validation.workflow)
        # because it needs the CLT check, so samplers cannot host it. Only this lazy entry
        # names it (no import here, not even for type checkers): the layer contract holds
        "fit": ".workflow.fit",
    },
)

if TYPE_CHECKING:  # what the lazy attributes are, for type checkers and IDEs
    from ._bounds import delta_max, stationary_bound, subsampling_bound
    from ._clt import CLTCheck, clt_check
    from ._monitor import BiasMonitor, bias_monitor
    from ._verdict import AcceptanceCheck, acceptance_check
    from ._grid import FixedBatchBarker, GridChain, StationaryCheck, stationary_check
    from ._ratios import loglik_ratios, proposal_pairs
    from ._sequential import SequentialCheck, sequential_check
    from ._simulate import SimulatedAcceptance, simulate_acceptance
