"""The authors' worst-case table at N = 13,000 and where it differs from ours.

Their values come from a 100-equal-bin dynamic programme (reference/coarse_dp.py). The
re-implementation reproduces every published entry to its printed precision, and the same
scheme with finer bins converges to ``design.sequential_error``: the published differences
are the coarse scheme's discretisation error (about 1/bins^2).
"""

import numpy as np
import pytest

from design import sequential_error


def test_coarse_scheme_reproduces_the_published_table(coarse_dp):
    E = np.empty(coarse_dp.PAPER_ERROR.shape)
    S = np.empty_like(E)
    for a, eps in enumerate(coarse_dp.PAPER_EPS):
        for b, m in enumerate(coarse_dp.PAPER_M):
            E[a, b], S[a, b] = coarse_dp.coarse_sequential_error(0.0, m, eps, coarse_dp.PAPER_N)
    # printed to 5 significant digits
    np.testing.assert_allclose(E, coarse_dp.PAPER_ERROR, rtol=1e-4)
    np.testing.assert_allclose(S, coarse_dp.PAPER_STAGES, rtol=1e-4)


@pytest.mark.parametrize("m, eps", [(50, 0.001), (500, 0.05), (200, 0.01)])
def test_finer_bins_converge_to_the_accurate_value(coarse_dp, m, eps):
    ours = sequential_error(0.0, m=m, epsilon=eps, N=coarse_dp.PAPER_N)
    errs = [abs(coarse_dp.coarse_sequential_error(0.0, m, eps, coarse_dp.PAPER_N, bins=b)[0]
                - ours.error) for b in (100, 200, 400)]
    assert errs[0] > 1e-5                      # the published scheme is visibly off ...
    assert errs[1] < errs[0] / 3 and errs[2] < errs[1] / 3   # ... by O(1/bins^2)
    assert errs[2] < 2e-5
