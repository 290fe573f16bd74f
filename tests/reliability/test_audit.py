"""Issue 27's audit matrix, one test per case (the table: ``audit_cases.CASES``); the whole
matrix with its counts per class: ``python benchmarks/audit.py``."""

import pytest

from .audit_cases import CASES, classify

# tested in test_remedies.py and test_mode_search.py (with their references); run by the audit
ELSEWHERE = {"fit-gaussian-mean", "fit-linear-regression", "mode-search-d100",
             "edgeworth-remedy-followed"}


def _param(case):
    marks = []
    if case.pending:
        # run=False: a pending case may hang (the very defect) until its fix is merged
        marks.append(pytest.mark.xfail(reason=f"fixed on another branch: {case.pending}",
                                       run=False))
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.id not in ELSEWHERE])
def test_case(case):
    verdict, detail = classify(case)
    assert verdict == "ok", detail
