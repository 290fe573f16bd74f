"""Published numbers of the seed papers, the one place notebooks, benchmarks and tests read them.

Each constant quotes a table of a paper as printed (no computation here; read-only arrays and
mappings); the code that reproduces it is named beside it. Keeping the numbers in the package, not in ``tests/`` or a
benchmark script, lets a notebook compare with them through public API.

* :data:`KORATTIKARA_WORST_CASE`: the worst-case error E(0) and expected number of stages of
  the sequential t-test at N = 13,000 (Korattikara, Chen & Welling 2014, as computed by the
  authors' 100-bin dynamic programme and quoted by Seita et al. 2017, appendix C.2.1);
  reproduced by ``benchmarks/worst_case_table.py`` and ``tests/design/test_paper_table.py``.
* :data:`SEITA_TABLE3`: L-infinity error of the ridge-regression correction (Seita, Pan,
  Chen & Canny 2017, Table 3); ``benchmarks/correction_table3.py``.
* :data:`SEITA_GMM`: rows per iteration (Table 1) and the eq. 39 and chi-squared
  discrepancies (Table 4) on the Gaussian-mixture posterior (Seita et al. 2017);
  ``benchmarks/bench_gmm_seita.py``.
* :data:`MACLAURIN_TABLE1`: Firefly Monte Carlo on MNIST logistic regression (Maclaurin &
  Adams 2014, Table 1); ``benchmarks/bench_firefly.py``.
* :data:`SONG_TABLE1`: variable selection by eSGLD and its competitors (Song, Liang & Liang
  2020, Table 1); ``benchmarks/bench_esgld.py``.

Examples
--------
>>> from design.reference_tables import KORATTIKARA_WORST_CASE as table
>>> table.N, table.error.shape == (len(table.epsilon), len(table.m))
(13000, True)
>>> float(table.error[table.epsilon.index(0.01), table.m.index(500)])
0.09458
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

__all__ = ["KORATTIKARA_WORST_CASE", "MACLAURIN_TABLE1", "SEITA_GMM", "SEITA_TABLE3",
           "SEITA_TABLE3_LAMBDAS", "SONG_TABLE1", "WorstCaseTable"]


@dataclass(frozen=True)
class WorstCaseTable:
    """A worst-case table of the sequential t-test (normal thresholds, mu_std = 0).

    Attributes
    ----------
    N : int
        Number of data points.
    epsilon : tuple of float
        Per-stage errors, the rows of the table.
    m : tuple of int
        Minibatch sizes, the columns.
    error : ndarray, shape (len(epsilon), len(m))
        E(0), the error in the acceptance probability at mu_std = 0 (read-only).
    stages : ndarray, shape (len(epsilon), len(m))
        Expected number of stages at mu_std = 0 (read-only).
    source : str
        Where the numbers were printed.
    """

    N: int
    epsilon: tuple
    m: tuple
    error: np.ndarray
    stages: np.ndarray
    source: str


def _read_only(rows) -> np.ndarray:
    array = np.array(rows, dtype=float)
    array.flags.writeable = False
    return array


#: Printed to 5 significant digits (source below).
KORATTIKARA_WORST_CASE = WorstCaseTable(
    N=13_000,
    epsilon=(0.001, 0.005, 0.01, 0.05, 0.1, 0.2),
    m=(50, 100, 150, 200, 250, 300, 350, 400, 450, 500),
    error=_read_only([
        [0.031258, 0.025380, 0.022334, 0.019729, 0.017977, 0.017198, 0.016237, 0.014892, 0.013680, 0.012836],
        [0.11400, 0.095591, 0.085945, 0.077058, 0.071121, 0.068988, 0.065894, 0.060773, 0.056170, 0.053069],
        [0.18735, 0.16060, 0.14633, 0.13258, 0.12337, 0.12047, 0.11581, 0.10731, 0.099666, 0.094580],
        [0.43297, 0.40626, 0.38950, 0.37013, 0.35615, 0.35311, 0.34632, 0.33020, 0.31495, 0.30469],
        [0.49243, 0.48470, 0.47841, 0.46970, 0.46248, 0.46089, 0.45705, 0.44705, 0.43657, 0.42902],
        [0.49999, 0.49994, 0.49984, 0.49960, 0.49928, 0.49916, 0.49889, 0.49813, 0.49704, 0.49604],
    ]),
    stages=_read_only([
        [251.35, 126.49, 84.954, 63.638, 51.008, 43.215, 37.366, 32.489, 28.582, 25.648],
        [226.83, 116.18, 78.812, 59.474, 47.931, 40.754, 35.354, 30.850, 27.231, 24.498],
        [203.06, 105.92, 72.586, 55.196, 44.736, 38.178, 33.234, 29.110, 25.784, 23.260],
        [94.586, 55.730, 40.903, 32.717, 27.534, 24.097, 21.465, 19.273, 17.466, 16.045],
        [37.260, 25.563, 20.425, 17.358, 15.287, 13.815, 12.660, 11.693, 10.876, 10.205],
        [6.1591, 5.6047, 5.2510, 4.9892, 4.7812, 4.6096, 4.4629, 4.3340, 4.2188, 4.1158],
    ]),
    source="README of yutian_chen/MATLAB_files in github.com/DanielTakeshi/New_MH_Test "
           "(the authors' 100-equal-bin dynamic programme, N = 13,000)",
)

#: Seita et al. (2017), Table 3: (N, sigma) -> L_inf error of the clipped ridge correction
#: for lambda = 100, 10, 1, 0.1, 0.01 (``SEITA_TABLE3_LAMBDAS``).
SEITA_TABLE3 = MappingProxyType({
    (2000, 0.8): (2.6e-3, 4.0e-4, 6.7e-5, 1.4e-5, 5.0e-6),
    (2000, 0.9): (3.3e-3, 6.4e-4, 1.6e-4, 1.3e-4, 2.7e-4),
    (2000, 1.0): (4.4e-3, 1.3e-3, 1.1e-3, 2.0e-3, 3.6e-3),
    (2000, 1.1): (6.8e-3, 4.6e-3, 7.5e-3, 1.3e-2, 2.4e-2),
    (4000, 0.8): (8.3e-4, 1.3e-4, 2.5e-5, 6.7e-6, 7.4e-6),
    (4000, 0.9): (1.2e-3, 2.6e-4, 1.0e-4, 2.0e-4, 3.9e-4),
    (4000, 1.0): (1.9e-3, 8.9e-4, 1.6e-3, 2.8e-3, 5.2e-3),
    (4000, 1.1): (4.3e-3, 6.0e-3, 1.0e-2, 1.2e-2, 3.5e-2),
})
SEITA_TABLE3_LAMBDAS = (100.0, 10.0, 1.0, 0.1, 0.01)

#: Seita et al. (2017), Table 1 (rows per iteration) and Table 4 (eq. 39, chi-squared) on the
#: Gaussian-mixture posterior: (mean, sd) over runs.
SEITA_GMM = MappingProxyType({
    "MHminibatch": {"rows": (182.3, 11.4), "eq39": (-1307.0, 229.5), "chi2": (4502.3, 1821.8)},
    "AustereMH(c)": {"rows": (13540.5, 1521.4), "eq39": (-1386.9, 322.4),
                     "chi2": (5216.9, 3315.8)},
    "MHSubLhd": {"rows": (65758.9, 3222.6), "eq39": (-1295.1, 278.0), "chi2": (3462.3, 1519.5)},
})

#: Maclaurin & Adams (2014), Table 1, MNIST: (queries per iteration, ESS per 1000 iterations,
#: speedup over regular MH).
MACLAURIN_TABLE1 = MappingProxyType({
    "regular MH": (12_214, 3.7, 1.0),
    "untuned FlyMC": (6_252, 1.3, 0.7),
    "MAP-tuned FlyMC": (207, 1.4, 22.0),
})

#: Song et al. (2020), Table 1: mean (sd) over 10 data sets; CPU in minutes for one data set.
SONG_TABLE1 = MappingProxyType({
    "eSGLD": {"fsr": (0, 0), "nsr": (0, 0), "mse1": (2.91e-3, 1.90e-3), "mse0": (1.26e-7, 1.18e-8), "cpu_min": 3.3},
    "RJMH": {"fsr": (0.50, 0.10), "nsr": (0.16, 0.042), "mse1": (1.60e-1, 3.89e-2), "mse0": (2.64e-5, 8.75e-6), "cpu_min": 180.1},
    "SaM": {"fsr": (0.05, 0.05), "nsr": (0.013, 0.013), "mse1": (1.29e-2, 1.27e-2), "mse0": (1.01e-6, 1.00e-6), "cpu_min": 150.4},
    "B-Lasso": {"fsr": (0, 0), "nsr": (0, 0), "mse1": (2.32e-4, 3.58e-5), "mse0": (1.40e-7, 5.08e-9), "cpu_min": 32.8},
})
