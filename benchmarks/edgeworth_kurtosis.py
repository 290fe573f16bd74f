"""The Edgeworth-corrected DP against the real sequential t-test on heavy-tailed l_i
(standardized lognormal(0, s): s = 0.9 gives skewness ~4.4, excess kurtosis ~40; s = 1.0
skewness ~5.8, kurtosis ~77), N = 3e5, at fixed standardized means: z of the Gaussian and
of the corrected prediction against the simulation (validation.sequential_check).

Run:  PYTHONPATH=$PWD python benchmarks/edgeworth_kurtosis.py 300000
"""
import numpy as np, sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common

from validation import sequential_check
N=int(sys.argv[1])
rng = np.random.default_rng(4)
for s in (0.9, 1.0):
    l = rng.lognormal(0.0, s, N); l = (l - l.mean()) / l.std()
    for m, eps in ((100, 0.05), (100, 0.01), (50, 0.05)):
        res = sequential_check(l, m=m, epsilon=eps, mu_std=[-3,-1.0, 0.0, 1.0,3], n_tests=3000, rng=5)
        print(f"s={s} m={m} eps={eps} skew {res.skewness:.2f} kurt {res.excess_kurtosis:.1f} sim {np.round(res.error,3)} zg {np.round(res.z,1)} ze {np.round(res.z_edgeworth,1)}", flush=True)
