"""A CompiledPrior made without a key, run through a loop compiled with ``cache=True``: a
second process with other functions must run its own functions, not the ones an earlier
process's cached machine code links in (numba types the loop by the prior's name)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOOP = textwrap.dedent("""
    import numba
    from samplers.priors import prior_logpdf

    @numba.njit(cache=True)
    def logprior(kernel, theta):
        return prior_logpdf(*kernel, theta)
""")

RUN = textwrap.dedent("""
    import sys
    import numba, numpy as np
    sys.path.insert(0, sys.argv[2])
    from samplers.priors import CompiledPrior
    from loop import logprior
    c = float(sys.argv[1])

    @numba.njit
    def logpdf(theta):
        return c * theta[0]

    @numba.njit
    def grad(theta, out):
        out[0] = c

    prior = CompiledPrior(logpdf, grad, dim=1)
    print(logprior(prior._kernel(), np.array([1.0])))
""")


def test_an_unnamed_compiled_prior_is_not_taken_from_another_process_cache(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP)
    script = tmp_path / "run.py"
    script.write_text(RUN)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    got = [subprocess.run([sys.executable, str(script), c, str(tmp_path)], env=env,
                          capture_output=True, text=True, check=True).stdout.split()[-1]
           for c in ("1.0", "5.0")]
    assert [float(g) for g in got] == [1.0, 5.0]
