"""Worst-case E(0) and expected stages at N = 13,000 beside the authors' published values.

Prints, for normal thresholds, m in {50, ..., 500} and eps in {0.001, ..., 0.2}:
``design.sequential_error`` at mu_std = 0 (accurate to ~1e-10), the published 100-bin
values, and their difference; then the same comparison at N = 10^6, where the 100-bin
scheme's bins (width 2 G / 100 ~ 0.06) are wider than the transition kernel
(~2 sqrt(m / N) ~ 0.014 at m = 50) and its error grows. Writes
``benchmarks/results/worst_case_table.json``.

Run: ``python benchmarks/worst_case_table.py``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import write  # noqa: E402
from _design_refs import reference  # noqa: E402

from design import sequential_error  # noqa: E402
from design.reference_tables import KORATTIKARA_WORST_CASE as PAPER  # noqa: E402

coarse = reference("coarse_dp")


def main():
    t0 = time.time()
    eps_list, m_list, N = PAPER.epsilon, PAPER.m, PAPER.N
    E = np.empty((len(eps_list), len(m_list)))
    S = np.empty_like(E)
    for a, eps in enumerate(eps_list):
        for b, m in enumerate(m_list):
            r = sequential_error(0.0, m=m, epsilon=eps, N=N)
            E[a, b], S[a, b] = r.error, r.expected_stages
    print(f"Worst case at N = {N:,}, normal thresholds: E(0) ours / published (100 bins)")
    print("eps \\ m " + "".join(f"{m:>17}" for m in m_list))
    for a, eps in enumerate(eps_list):
        print(f"{eps:<8}" + "".join(f"  {E[a, b]:.5f}/{PAPER.error[a, b]:.5f}"
                                    for b in range(len(m_list))))
    print("\nExpected number of stages, ours / published")
    for a, eps in enumerate(eps_list):
        print(f"{eps:<8}" + "".join(f"  {S[a, b]:7.3f}/{PAPER.stages[a, b]:7.3f}"
                                    for b in range(len(m_list))))
    dE = PAPER.error - E
    dS = PAPER.stages - S
    print(f"\npublished - ours: E(0) max |diff| {np.abs(dE).max():.2e} (mean "
          f"{dE.mean():+.2e}), stages max |diff| {np.abs(dS).max():.3f}")

    large = []
    print("\nAt N = 1,000,000 the 100-bin scheme is off by far more:")
    for m, eps in [(50, 0.001), (50, 0.01), (200, 0.001), (1000, 0.01)]:
        r = sequential_error(0.0, m=m, epsilon=eps, N=1_000_000)
        c100 = coarse.coarse_sequential_error(0.0, m, eps, 1_000_000, bins=100)
        c400 = coarse.coarse_sequential_error(0.0, m, eps, 1_000_000, bins=400)
        large.append(dict(m=m, epsilon=eps, ours=[r.error, r.expected_stages],
                          bins100=list(c100), bins400=list(c400)))
        print(f"  m = {m:>4}, eps = {eps:<6}: E(0) ours {r.error:.6f}, 100 bins {c100[0]:.6f}, "
              f"400 bins {c400[0]:.6f}; stages ours {r.expected_stages:.2f}, 100 bins "
              f"{c100[1]:.2f}")

    write("worst_case_table", dict(
        description="worst-case E(0) and expected stages, design.sequential_error vs the "
                    "authors' published 100-bin values (N = 13,000) and the 100-bin scheme "
                    "at N = 1e6",
        N=N, epsilon=list(eps_list), m=list(m_list),
        ours_error=E.tolist(), ours_stages=S.tolist(),
        published_error=PAPER.error.tolist(),
        published_stages=PAPER.stages.tolist(),
        max_abs_diff_error=float(np.abs(dE).max()),
        max_abs_diff_stages=float(np.abs(dS).max()),
        large_N=large, runtime_seconds=round(time.time() - t0, 2)))


if __name__ == "__main__":
    main()
