"""Per-pair Delta (u integrated out) of the real sequential t-test on heavy-tailed l_i
(standardized lognormal(0, s), +- signs, 8 pairs) against the Gaussian and the
Edgeworth-corrected DP (validation.acceptance_check).

Run:  PYTHONPATH=$PWD python benchmarks/edgeworth_pairs.py N s m epsilon
      (e.g. 300000 0.9 100 0.01: Gaussian 8-14.5 SE off, corrected within 2.4 SE)
"""
import numpy as np, time, sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common

from validation import acceptance_check
N = int(sys.argv[1]); sig=float(sys.argv[2]); m=int(sys.argv[3]); eps=float(sys.argv[4])
rng = np.random.default_rng(4)
z = rng.lognormal(0.0, sig, N); z = (z - z.mean()) / z.std()
P = 8
s = np.array([1.0, 2.0, 3.0, 1.5, 2.5, 1.0, 2.0, 3.0])
mus = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 0.3, -0.3, 0.0])
L = np.empty((P, N))
for p in range(P):
    sgn = 1 if p % 2 == 0 else -1
    L[p] = sgn * z * s[p] / np.sqrt(N) + mus[p] * s[p] / N
t = time.time()
r = acceptance_check(L, m=m, epsilon=eps, tolerance=0.05, n_paths=4000, rng=1)
print(r); print(time.time() - t)
