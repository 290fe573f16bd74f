"""The ``austerity`` command line: ``austerity demo`` and the design and table tools."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _add_demo(sub):
    p = sub.add_parser("demo", help="run the main job end to end on synthetic data")
    p.add_argument("--rows", type=int, default=1_000_000, help="data rows (default 1e6)")
    p.add_argument("--features", type=int, default=10, help="covariates (default 10)")
    p.add_argument("--samples", type=int, default=1000, help="samples per approximate chain")
    p.add_argument("--exact-samples", type=int, default=300, help="samples of the exact chain")
    p.add_argument("--trial", type=int, default=100, help="trial pairs for the design")
    p.add_argument("--tolerance", type=float, default=0.01,
                   help="design tolerance on the mean error in acceptance probability")
    p.add_argument("--seed", type=int, default=2014)
    p.add_argument("--out", type=Path, default=Path("austerity-demo"), help="report folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    from .demo import DemoSettings, run_demo

    for name in ("rows", "features", "samples", "exact_samples", "trial"):
        if getattr(args, name) < 1:
            raise SystemExit(f"austerity demo: --{name.replace('_', '-')} must be >= 1, "
                             f"got {getattr(args, name)}")
    t0 = time.perf_counter()
    if not 0 < args.tolerance < 0.5:
        raise SystemExit(f"austerity demo: --tolerance must be in (0, 0.5), got {args.tolerance}")
    run_demo(DemoSettings(args.rows, args.features, args.samples, args.exact_samples, args.trial,
                          args.tolerance, args.seed, args.out), progress=not args.quiet)
    print(f"\ndone in {time.perf_counter() - t0:.1f} s; report in {args.out}/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="austerity",
        description="Design, validate and run minibatch Metropolis-Hastings tests.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    from .correction_cli import add_correction_parser
    from .design_cli import add_design_parser

    add_design_parser(sub)
    add_correction_parser(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
