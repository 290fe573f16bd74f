"""The names of the design's choices, importable without the numerical modules (the command
line builds its ``--help`` from them)."""

#: Designs :func:`design.optimize` makes: Korattikara et al. (2014) Eq. 7 and Eq. 8.
METHODS = ("average", "worst-case")
#: Threshold laws of the sequential test: normal quantiles or Student-t ones.
THRESHOLDS = ("normal", "t")
