"""The reliability audit of issue 27: every case of ``tests/reliability/audit_cases.py`` in
its own process under a time limit, counted per class.

Classes: **ok** (the expected error, of the expected type, whose message has the expected
words; or a result passing its check), **unclear** (an error of another type or without the
words), **silent-wrong** (a result where an error was expected, or one failing its check),
**hang** (over the time limit), **crash** (the process died without a Python exception:
a signal such as SIGSEGV or SIGBUS, or no verdict). Cases whose fix is on another branch
(``pending``) are counted apart until it is merged.

Run:  python benchmarks/audit.py [--timeout 300] [--case ID ...]
Writes benchmarks/results/audit.json; exits 1 if any case outside the pending ones is not ok.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT),                                   # this checkout's packages,
                str(Path(__file__).resolve().parent)]        # not an installed copy; _common
from _common import write  # noqa: E402

#: The case table, kept beside the test that runs it in-process (test_audit.py).
CASES_FILE = ROOT / "tests" / "reliability" / "audit_cases.py"


def load_cases():
    """Import the case table from its file (the test suite is no package to import)."""
    spec = importlib.util.spec_from_file_location("audit_cases", CASES_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["audit_cases"] = module
    spec.loader.exec_module(module)
    return module


_cases = load_cases()
BY_ID, CASES = _cases.BY_ID, _cases.CASES

CLASSES = ("ok", "silent-wrong", "unclear", "hang", "crash")
_CHILD = """
import importlib.util, json, sys
sys.path.insert(0, {root!r})
spec = importlib.util.spec_from_file_location("audit_cases", {cases!r})
cases = sys.modules["audit_cases"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cases)
verdict, detail = cases.classify(cases.BY_ID[{case!r}])
print("AUDIT " + json.dumps([verdict, detail]), flush=True)
"""


def run_case(case_id: str, timeout: float) -> tuple[str, str, float]:
    """``(class, detail, seconds)`` of one case run in a fresh interpreter."""
    t0 = time.perf_counter()
    try:
        child = _CHILD.format(root=str(ROOT), cases=str(CASES_FILE), case=case_id)
        proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "hang", f"no verdict within {timeout:g} s", time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith("AUDIT "):
            verdict, detail = json.loads(line[6:])
            return verdict, detail, seconds
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    if proc.returncode > 0 and "Traceback" in proc.stderr:   # a Python error outside the case
        return "unclear", f"the case could not be run: {tail}", seconds
    return "crash", f"exit code {proc.returncode}: {tail}", seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds per case before it counts as a hang (default 300)")
    parser.add_argument("--case", action="append", choices=sorted(BY_ID),
                        help="run only these cases (repeatable)")
    args = parser.parse_args(argv)
    cases = [BY_ID[c] for c in args.case] if args.case else list(CASES)
    rows, counts, pending = [], Counter(), Counter()
    for case in cases:
        verdict, detail, seconds = run_case(case.id, args.timeout)
        (pending if case.pending else counts)[verdict] += 1
        tag = " [pending: " + case.pending.split(":")[0] + "]" if case.pending else ""
        print(f"{verdict:>12}  {seconds:6.1f} s  item {case.item:<10} {case.id}{tag}\n"
              f"{'':>14}{detail[:150]}", flush=True)
        rows.append(dict(id=case.id, item=case.item, verdict=verdict, detail=detail,
                         seconds=round(seconds, 2), pending=case.pending))
    print("\ncounts: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES))
    if pending:
        print("pending on other branches: " + ", ".join(f"{pending[c]} {c}" for c in CLASSES
                                                        if pending[c]))
    write("audit", dict(timeout=args.timeout, counts={c: counts[c] for c in CLASSES},
                             pending={c: pending[c] for c in CLASSES}, cases=rows))
    return 0 if counts["ok"] == sum(counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
