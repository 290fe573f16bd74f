"""The status codes of the compiled loops, defined once.

Three small protocols return integer codes, and they share this module so that no two
codes collide by accident and a new test or proposal finds them in one place:

* a sequential test's **rule** (:mod:`samplers.mhtests.engine`) returns GROW, MORE or a
  stopping status > 0 (DONE for interval rules); the driver adds NONFINITE;
* a test's **compiled decision** (:class:`samplers.mhtests.compiled.Decision`) returns
  DECIDED, MORE (its settings ran out) or an error status the block hands back to Python:
  NAN_MEAN, INF_MEAN, BAD_RANGE, VIOLATION, or PYTHON_STEP (decide this step in Python);
* a compiled **block** of steps returns OK, PRIOR_NAN, PRIOR_INF or a decision's status.

A sequential test's jitted ``prepare`` (its settings for one decision) answers RUN, KNOWN
(the settings alone decide), NAN_MEAN or BAD_RANGE, and its ``write_info`` is told
KNOWN_INFO after a decision without data.
"""

from __future__ import annotations

import math

__all__ = ["GROW", "MORE", "NONFINITE", "DONE", "NEED_MORE", "OK", "PRIOR_NAN", "PRIOR_INF",
           "DECIDED", "NAN_MEAN", "INF_MEAN", "BAD_RANGE", "VIOLATION", "PYTHON_STEP", "RUN",
           "KNOWN", "KNOWN_INFO", "STATUS_NAMES"]

# -- a rule's statuses ----------------------------------------------------------------------
#: Read ``grow`` more rows; the settings ran out (also a decision's and a block's MORE); the
#: driver's status for a batch with a non-finite mean or variance.
GROW, MORE, NONFINITE = 0, -1, -2
#: The stopping status of interval rules (any status > 0 stops).
DONE = 1
#: What a radius returns when its settings ran out. NaN, because every real number is a
#: legal radius: a negative one (``AustereTest(epsilon > 0.5)``: a negative critical value)
#: decides at once. Test it with ``r != r``.
NEED_MORE = math.nan

# -- a block's and a decision's statuses ------------------------------------------------------
#: All steps done (a block), or the step decided (a decision).
OK = DECIDED = 0
#: The log prior at theta_new is NaN, or it (or the log proposal ratio) is +inf.
PRIOR_NAN, PRIOR_INF = 1, 2
#: The batch mean of the l_i is NaN, or +inf (the test's non-finite error; -inf rejects).
NAN_MEAN, INF_MEAN = 4, 5
#: A range the test needs is infinite (the confidence test's C).
BAD_RANGE = 6
#: A row broke the model's per-row bound (a Poisson-factor test's BoundViolation).
VIOLATION = 7
#: Decide this step in Python (e.g. a Poisson-factor test's full-data step; nothing drawn).
PYTHON_STEP = 8

# -- what a sequential test's prepare answers --------------------------------------------------
#: Run the engine; every l_i equals ``value``, decided without reading a row.
RUN, KNOWN = 0, 1
#: The status ``write_info`` gets for a decision made without data (GROW never ends a
#: decision, so the value is free).
KNOWN_INFO = GROW

#: Names of the block and decision statuses (for messages).
STATUS_NAMES = {OK: "OK", MORE: "MORE", PRIOR_NAN: "PRIOR_NAN", PRIOR_INF: "PRIOR_INF",
                NAN_MEAN: "NAN_MEAN", INF_MEAN: "INF_MEAN", BAD_RANGE: "BAD_RANGE",
                VIOLATION: "VIOLATION", PYTHON_STEP: "PYTHON_STEP"}
