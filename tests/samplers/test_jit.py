"""The compiled loops are cached on disk across processes.

The loops are closures over other compiled functions; numba keys a closure's cache entry
by a pickle of its cells, which would carry a random per-process dispatcher uuid unless
``design._lib.jit`` pins it. Then every process recompiled (seconds for the Barker test) and
appended to the cache files. Here a second process must load every compiled loop from the
cache the first one wrote, and save nothing.
"""

import os
import subprocess
import sys

import numpy as np

from design._lib.jit import jit, stable_uuid

SCRIPT = """
import numpy as np
from samplers import AustereTest, BarkerTest, GaussianMean, RandomWalk, sample
model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 2_000))
for test in (AustereTest(m=100, epsilon=0.05), BarkerTest(m=100)):
    sample(model, test, RandomWalk(0.01), [1.0], 3, rng=0)
"""


def run(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), NUMBA_DEBUG_CACHE="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    return [line for line in done.stdout.splitlines() if "data saved" in line]


def test_a_second_process_compiles_nothing(tmp_path):
    first = run(tmp_path)
    assert any("barker_loop" in line for line in first)  # the first one did compile
    second = run(tmp_path)
    assert second == [], "recompiled in a fresh process:\n" + "\n".join(second)


def test_uuid_follows_the_code_and_the_closure():
    def make(scale):
        @jit
        def f(x):
            return scale * x
        return f

    assert make(2.0)._uuid == make(2.0)._uuid
    assert make(2.0)._uuid != make(3.0)._uuid
    assert make(2.0)(np.float64(1.5)) == 3.0
    assert stable_uuid(make(2.0).py_func) == make(2.0)._uuid
