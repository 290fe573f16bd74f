"""How long the packages and the command line take to start, and what they load.

Each command runs in a fresh interpreter (after one warm-up run, so numba's on-disk cache and
the bytecode are warm); the median wall-clock time of ``--repeats`` runs is reported beside
``python -c pass`` (the interpreter's own start), with what ``python -X importtime`` gives
the command's own imports and whether SciPy's numerics, numba or the samplers were loaded. ``import design`` should load none of them (issue 14); the shared machine's load
average is recorded, as it moves these figures by a factor of several.

Run:  python benchmarks/import_time.py [--repeats 5]
Writes benchmarks/results/import_time.json.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import ROOT, write  # noqa: E402

COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import design": ["-c", "import design"],
    "import design.correction": ["-c", "import design.correction"],
    "from design import optimize": ["-c", "from design import optimize"],
    "import samplers": ["-c", "import samplers"],
    "import validation": ["-c", "import validation"],
    "austerity --help": ["-m", "validation.workflow.cli", "--help"],
}
WATCH = {"scipy numerics": ("scipy.stats", "scipy.optimize", "scipy.interpolate"),
         "numba": ("numba",), "samplers": ("samplers",), "firefly": ("samplers._firefly",)}


def wall_ms(args, repeats):
    subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, check=True)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, check=True)
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def importtime(args, baseline=frozenset()):
    """Milliseconds ``python -X importtime`` gives the command's own imports (the top-level
    imports that ``python -c pass`` does not make, summed), and every module loaded."""
    run = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    rows = [line.split("|") for line in run.stderr.splitlines() if line.startswith("import time:")]
    rows = [(int(r[1]), r[2].rstrip()) for r in rows if r[1].strip().isdigit()]
    own = sum(us for us, name in rows if not name.startswith("  ") and name.strip() not in baseline)
    return own / 1e3, {name.strip() for _, name in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = {}
    _, baseline = importtime(COMMANDS["python -c pass"])
    for label, argv in COMMANDS.items():
        ms = wall_ms(argv, args.repeats)
        own_ms, loaded = importtime(argv, frozenset(baseline))
        found = {what: any(m.startswith(p) for m in loaded for p in prefixes)
                 for what, prefixes in WATCH.items()}
        rows[label] = {"wall_ms_median": round(ms, 1), "importtime_ms": round(own_ms, 1),
                       "loads": found}
        print(f"{label:<30} {ms:8.0f} ms wall  {own_ms:8.1f} ms importtime  "
              + " ".join(f"{k}={'yes' if v else 'no'}" for k, v in found.items()))
    write("import_time", {"repeats": args.repeats, "commands": rows})


if __name__ == "__main__":
    main()
