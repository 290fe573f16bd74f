"""The ``austerity`` command line: ``austerity demo``, the design and table tools, and
``austerity convert`` (data to a sharded Zarr store)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


#: Fewest rows the demo runs on: the design's minibatches and the CLT check's batch must stay
#: well below N.
MIN_ROWS = 1_000
#: Fewest trial pairs: the design's CLT check reads 10 of them, as ``validation.fit``
#: (``n_trial >= 10``) does.
MIN_TRIAL = 10


def _add_demo(sub):
    p = sub.add_parser("demo", help="run the main job end to end on synthetic data")
    p.add_argument("--rows", type=int, default=1_000_000,
                   help=f"data rows, >= {MIN_ROWS} (default 1e6)")
    p.add_argument("--features", type=int, default=10, help="covariates (default 10)")
    p.add_argument("--samples", type=int, default=2000,
                   help="steps of each control-variate chain (default 2000)")
    p.add_argument("--exact-samples", type=int, default=800,
                   help="steps of the two chains on the plain model: exact MH and the plain "
                        "designed test, both reading most rows (default 800: ESS >= 400 for "
                        "both at 10^6 rows)")
    p.add_argument("--trial", type=int, default=100,
                   help=f"trial pairs for the design (default 100, at least {MIN_TRIAL})")
    p.add_argument("--tolerance", type=float, default=0.01,
                   help="design tolerance on the mean error in acceptance probability")
    p.add_argument("--seed", type=int, default=2014)
    p.add_argument("--out", type=Path, default=Path("austerity-demo"), help="report folder")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (they show only on a terminal anyway)")
    p.set_defaults(run=_run_demo)


def _run_demo(args) -> int:
    from .demo import DemoSettings, run_demo

    for name, low in (("rows", MIN_ROWS), ("features", 1), ("samples", 1), ("exact_samples", 1),
                      ("trial", MIN_TRIAL)):
        if getattr(args, name) < low:
            raise SystemExit(f"austerity demo: --{name.replace('_', '-')} must be >= {low}, "
                             f"got {getattr(args, name)}")
    t0 = time.perf_counter()
    if not 0 < args.tolerance < 0.5:
        raise SystemExit(f"austerity demo: --tolerance must be in (0, 0.5), got {args.tolerance}")
    if args.out.exists() and not args.out.is_dir():
        raise SystemExit(f"austerity demo: --out {str(args.out)!r} exists and is not a folder; "
                         "give a folder for the report")
    try:
        run_demo(DemoSettings(args.rows, args.features, args.samples, args.exact_samples,
                              args.trial, args.tolerance, args.seed, args.out),
                 progress=False if args.quiet else None)
    except OSError as exc:   # the report folder cannot be written
        raise SystemExit(f"austerity demo: cannot write the report to {str(args.out)!r}: "
                         f"{exc.strerror or exc}") from None
    print(f"\ndone in {time.perf_counter() - t0:.1f} s; report in {args.out}/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="austerity",
        description="Design, validate and run minibatch Metropolis-Hastings tests.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    from .convert import add_convert_parser
    from .correction_cli import add_correction_parser
    from .design_cli import add_design_parser

    add_design_parser(sub)
    add_correction_parser(sub)
    add_convert_parser(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
