"""A first fit imports neither scipy.stats nor statsmodels before it builds its result.

In a new process those imports cost about half a second of a first ``fit`` (scipy.stats a
third of a second, statsmodels pandas and its own modules); the check's p-values that need
them are computed when first read (``validation.CLTCheck``). ArviZ, imported to build the
returned InferenceData, imports scipy.stats itself, so the modules are recorded when
``to_inference_data`` asks for ArviZ.
"""

import json
import os
import subprocess
import sys

CODE = """
import json, sys
import numpy as np
import samplers._arviz as arviz_adapter
import validation
from samplers import GaussianPrior, LogisticRegression

seen = {}
real_import_arviz = arviz_adapter.import_arviz

def recording_import_arviz():
    seen.setdefault("before_arviz", sorted(sys.modules))
    return real_import_arviz()

arviz_adapter.import_arviz = recording_import_arviz
rng = np.random.default_rng(0)
N = 4000
X = np.column_stack([np.ones(N), rng.normal(size=(N, 2))])
y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.2, 0.5, -0.5]))).astype(float)
idata = validation.fit(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)),
                       draws=200, rng=1, progress=False)
print(json.dumps({"route": idata.posterior.attrs["route"], "before_arviz": seen["before_arviz"],
                  "after": sorted(sys.modules)}))
"""


def test_first_fit_imports_neither_scipy_stats_nor_statsmodels():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
         os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["route"].startswith("austere")        # the common case: the built-in GLM
    before = result["before_arviz"]
    assert "scipy.stats" not in before
    assert not [m for m in before if m.startswith(("statsmodels", "pandas"))]
    assert not [m for m in result["after"] if m.startswith("statsmodels")]
