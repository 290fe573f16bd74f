"""The ``austerity design`` subcommand (wired into ``validation.workflow.cli`` by the console script).

Usage::

    austerity design --trial trial.npz --tolerance 0.01 [--method worst-case]
    austerity design --N 1000000 --tolerance 0.05           # worst case, no trial chain
"""

from __future__ import annotations

import argparse
import sys

from design import METHODS, THRESHOLDS, InfeasibleDesignError, TrialChain, optimize

__all__ = ["add_design_parser", "run_design"]


def add_design_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``design`` subcommand to an ``argparse`` subparsers object; return it.

    The parser sets ``run=run_design``, so ``validation.workflow.cli`` dispatches with ``args.run(args)``.
    """
    p = subparsers.add_parser(
        "design",
        help="choose the minibatch size m and per-stage error epsilon of the sequential test",
        description="Choose (m, epsilon) that use the least data while keeping the error in "
                    "the acceptance probability within a tolerance (Korattikara et al. 2014, "
                    "section 5.2). The average design needs a trial chain (--trial); the "
                    "worst-case design needs only the number of data points.")
    p.add_argument("--trial", metavar="FILE", help="trial chain saved by TrialChain.save")
    p.add_argument("--N", type=int, metavar="N",
                   help="number of data points, for a worst-case design without --trial")
    p.add_argument("--tolerance", type=float, default=0.01,
                   help="bound on the expected error, in (0, 0.5) (default 0.01)")
    p.add_argument("--method", choices=METHODS, default=None,
                   help="default: average with --trial, worst-case with --N")
    p.add_argument("--threshold", choices=THRESHOLDS, default="normal",
                   help="threshold of the sequential test (default normal)")
    p.add_argument("--m-grid", type=int, nargs="+", metavar="M", help="minibatch sizes")
    p.add_argument("--epsilon-grid", type=float, nargs="+", metavar="EPS",
                   help="per-stage errors")
    p.set_defaults(run=run_design)
    return p


def run_design(args) -> int:
    """Run the ``design`` subcommand: print the Design; return the exit status.

    0 on success, 1 if no grid point meets the tolerance, 2 for bad arguments or files.
    """
    try:
        if (args.trial is None) == (args.N is None):
            raise ValueError("give exactly one of --trial FILE and --N N")
        method = args.method or ("average" if args.trial is not None else "worst-case")
        if args.trial is not None:
            source = TrialChain.load(args.trial)
        elif method == "average":
            raise ValueError("the average design needs --trial FILE; with --N use "
                             "--method worst-case")
        else:
            source = args.N
        design = optimize(source, args.tolerance, method=method, m_grid=args.m_grid,
                          epsilon_grid=args.epsilon_grid, threshold=args.threshold)
    except InfeasibleDesignError as exc:
        print(f"austerity design: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError) as exc:
        print(f"austerity design: error: {exc}", file=sys.stderr)
        return 2
    print(design)
    return 0
