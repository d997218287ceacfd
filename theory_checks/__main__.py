"""``python -m theory_checks [NAME ...] [--out DIR] [--quick]``: run theory checks."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

import theory_checks


def available() -> list[str]:
    """Names of all checks: the modules ``check_<name>`` in this package."""
    return sorted(
        m.name[len("check_") :]
        for m in pkgutil.iter_modules(theory_checks.__path__)
        if m.name.startswith("check_")
    )


def main(argv=None) -> int:
    names = available()
    parser = argparse.ArgumentParser(prog="python -m theory_checks", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"checks to run (default: all): {', '.join(names)}")
    parser.add_argument("--out", default="theory_checks/out", help="folder for the plots")
    parser.add_argument("--quick", action="store_true", help="small problem sizes")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"unknown check(s) {unknown}; available: {names}")

    results = {}
    for name in args.names or names:
        module = importlib.import_module(f"theory_checks.check_{name}")
        t0 = time.perf_counter()
        results[name] = module.run(args.out, quick=args.quick)
        print(f"  ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    failed = [n for n, ok in results.items() if not ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
