"""Command line: ``sparseopt demo [--out DIR]``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sparseopt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo and write a Markdown + PNG report")
    demo.add_argument("--out", default=None, help="run folder (default: runs/demo-<timestamp>)")
    demo.add_argument("--quick", action="store_true", help="smaller problem sizes (used by tests)")
    args = parser.parse_args(argv)

    if args.command == "demo":
        from .demo import run_demo

        report = run_demo(args.out, quick=args.quick)
        print(f"report written to {report}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
