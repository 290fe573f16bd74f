"""Checks to run on a dataset before trusting a minibatch MH test."""

from ._bounds import delta_max, stationary_bound, subsampling_bound
from ._clt import CLTCheck, clt_check
from ._grid import FixedBatchBarker, GridChain, StationaryCheck, stationary_check
from ._ratios import loglik_ratios, proposal_pairs
from ._sequential import SequentialCheck, sequential_check
