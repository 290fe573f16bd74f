"""Where a cold numba cache spends its time: compile CPU-seconds per compiled function.

Runs pytest in this process on the given tests (one process, no xdist) with an empty numba
cache (a fresh temporary ``NUMBA_CACHE_DIR``, unless ``--cache-dir`` names one: run twice
with the same directory to see the warm figure), and records numba's ``numba:compile``
events: for every function numba compiled, the CPU seconds inside its compilation,
*exclusive* (less the functions compiled from inside it) and *inclusive*, and how many
times it was compiled (one per type signature). Functions inlined with ``inline="always"``
are typed and lowered inside their callers, so their cost is in their callers' rows.
Also printed: CPU seconds with LLVM's lock held (``numba:llvm_lock``: LLVM code generation
and optimisation), the rest of the compile time being numba's own front end (bytecode
analysis, type inference, lowering), and the process's total CPU seconds.

Run::

    python benchmarks/compile_profile.py tests/design/test_design_tests.py -k control_variates
    python benchmarks/compile_profile.py tests/samplers/test_glm_ratio.py --top 20
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=30, help="functions listed (most CPU first)")
    ap.add_argument("--cache-dir", default=None,
                    help="numba cache directory (default: a fresh empty one, a cold cache)")
    args, pytest_args = ap.parse_known_args(argv)
    tmp = None
    if args.cache_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="numba-cold-")
        args.cache_dir = tmp.name
    os.environ["NUMBA_CACHE_DIR"] = args.cache_dir   # before numba is imported
    if "numba" in sys.modules:
        raise RuntimeError("numba was imported before NUMBA_CACHE_DIR could be set")

    import pytest
    from numba.core import event

    stack: list[list] = []
    exclusive: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    llvm = {"cpu": 0.0, "open": []}

    class Compiles(event.Listener):
        def on_start(self, ev):
            func = ev.data["dispatcher"].py_func
            stack.append([f"{func.__module__}.{func.__qualname__}", time.process_time(), 0.0])

        def on_end(self, ev):
            name, start, inner = stack.pop()
            spent = time.process_time() - start
            inclusive[name] += spent
            exclusive[name] += spent - inner
            count[name] += 1
            if stack:
                stack[-1][2] += spent

    class LlvmLock(event.Listener):
        def on_start(self, ev):
            llvm["open"].append(time.process_time())

        def on_end(self, ev):
            llvm["cpu"] += time.process_time() - llvm["open"].pop()

    event.register("numba:compile", Compiles())
    event.register("numba:llvm_lock", LlvmLock())
    start = time.process_time()
    code = pytest.main(["-q", "-p", "no:xdist", "-p", "no:cacheprovider", *pytest_args])
    total = time.process_time() - start
    compiled = sum(exclusive.values())
    print(f"\nprocess CPU {total:.1f} s; numba compiling {compiled:.1f} s "
          f"({sum(count.values())} compilations of {len(count)} functions), of which LLVM "
          f"{llvm['cpu']:.1f} s; numba cache {'cold' if tmp else args.cache_dir}")
    print(f"{'exclusive s':>12} {'inclusive s':>12} {'times':>6}  function")
    for name, spent in exclusive.most_common(args.top):
        print(f"{spent:12.2f} {inclusive[name]:12.2f} {count[name]:6d}  {name}")
    if tmp is not None:
        tmp.cleanup()
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
