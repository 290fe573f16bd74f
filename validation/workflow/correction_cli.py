"""The ``austerity correction`` subcommands, wired into the ``austerity`` console script.

``austerity correction build --sigma 0.9 --out table.npz [--method lp|ridge] [--spacing H]
[--half-width V] [--lam LAMBDA]`` builds a table with :func:`design.correction.build` and
saves it; ``austerity correction info FILE`` prints what a table file holds.
"""

from __future__ import annotations

import argparse
import sys
import time

from design import correction


def add_correction_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``correction`` command (with ``build`` and ``info``) to ``subparsers``.

    ``subparsers`` is what ``ArgumentParser.add_subparsers()`` returned; the command sets
    ``run=run_correction`` as its default, so a caller runs ``args.run(args)`` (the
    convention of ``validation/workflow/cli.py``).
    """
    parser = subparsers.add_parser(
        "correction", help="build and inspect Barker correction tables",
        description="Correction tables for the minibatch Barker test (Seita et al. 2017).")
    commands = parser.add_subparsers(dest="correction_command", required=True)

    build = commands.add_parser(
        "build", help="build a correction table and save it",
        description="Build a correction table C_sigma with N(0, sigma^2) * C_sigma ~ logistic.")
    build.add_argument("--sigma", type=float, default=1.0,
                       help="sd of the Gaussian part, in (0, pi/sqrt(3)) (default 1.0)")
    build.add_argument("--out", required=True, help="output file (.npz)")
    build.add_argument("--method", choices=("lp", "ridge"), default="lp",
                       help="lp: minimax fit (default); ridge: the paper's eq. 15")
    build.add_argument("--spacing", type=float, default=None,
                       help="grid spacing (default 0.05 for lp, 0.005 for ridge)")
    build.add_argument("--half-width", type=float, default=None,
                       help="support [-V, V] of the correction (default 30 lp, 20 ridge)")
    build.add_argument("--lam", type=float, default=None,
                       help="ridge penalty lambda (ridge only, default 10)")

    info = commands.add_parser("info", help="describe a correction table file")
    info.add_argument("path", help="a file written by `correction build`")
    parser.set_defaults(run=run_correction)
    return parser


def run_correction(args, *, stdout=None, stderr=None) -> int:
    """Run a parsed ``correction`` command; return the exit status (0 ok, 1 error)."""
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    try:
        if args.correction_command == "build":
            start = time.perf_counter()
            table = correction.build(args.sigma, method=args.method, spacing=args.spacing,
                                     half_width=args.half_width, lam=args.lam)
            table.save(args.out)
            print(f"wrote {args.out}: {table} in {time.perf_counter() - start:.1f} s",
                  file=stdout)
            return 0
        if args.correction_command == "info":
            table = correction.CorrectionTable.load(args.path)
            print(f"{args.path}: {table}", file=stdout)
            for name, values in (("settings", table.settings),
                                 ("diagnostics", table.diagnostics)):
                for key, value in values.items():
                    print(f"  {name}.{key} = {value}", file=stdout)
            return 0
        raise ValueError(f"unknown correction command {args.correction_command!r}")
    except (ValueError, TypeError, OSError) as exc:
        print(f"austerity correction: error: {exc}", file=stderr)
        return 1
