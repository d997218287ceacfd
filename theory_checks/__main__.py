"""``python -m theory_checks [NAME ...] [--out DIR] [--quick] [--jobs N]``: run theory checks.

With ``--jobs N`` the checks run in N worker processes of one thread each (BLAS, OpenMP,
Numba, torch), longest first by the times of the last ``--claims`` run (``SECONDS``, which
such a run updates); each check's output is printed whole when it ends. The timed checks (a claim about wall-clock time) run
after them, alone, in this process with its threads, so no other check shares their
machine. The figures do not depend on ``--jobs`` except those of timed claims' ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import pkgutil
import sys
import time

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does
import theory_checks
from theory_checks._report import take_claims
from theory_checks.claims import OUTCOMES, all_claims, claims_table, summary_table

#: What a worker of ``--jobs`` sets before it loads NumPy: one thread for every pool.
ONE_THREAD_ENV = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                   "NUMBA_NUM_THREADS")}


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
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run the checks in N single-threaded processes (the timed checks "
                             "after them, alone); default 1: one after another in this process")
    parser.add_argument("--claims", metavar="FILE",
                        help="write the table of every paper claim (docs/claims.md) from this run")
    parser.add_argument("--update", action="store_true",
                        help="with --claims and check names: rerun only those checks and keep "
                             "the other checks' figures of the last full run (FILE's .json)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"unknown check(s) {unknown}; available: {names}")

    if args.claims and args.quick:
        parser.error("--claims needs the full sizes: no --quick")
    if args.claims and bool(args.names) != args.update:
        parser.error("--claims runs every check, or the named checks with --update")
    if args.update and not args.claims:
        parser.error("--update needs --claims FILE")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")

    results, records = run_checks(args.names or names, args.out, args.quick, args.jobs)
    if args.claims:
        save_seconds(_SECONDS)
    failed = [n for n, ok in results.items() if not ok]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
    if args.claims:
        write_claims(args.claims, records, update=args.update, rerun=set(results))
    return 1 if failed else 0


def run_checks(todo, out, quick, jobs=1):
    """Run the checks ``todo``: ({name: passed}, {claim id: (check, figure, passed)}). With
    ``jobs > 1`` the untimed checks run in :func:`run_parallel`, then the timed ones here."""
    by_check = {}
    for c in all_claims():
        if c.check:
            by_check.setdefault(c.check, set()).add(c.id)
    results, records = {}, {}

    def collect(name, ok, got, seconds):
        print(f"  ({name}: {seconds:.1f} s)", flush=True)
        stray = sorted(set(got) - by_check.get(name, set()))
        if stray:  # a claim recorded by a check the registry does not name: fix the registry
            print(f"FAIL: {name} recorded claims not registered to it: {stray}")
            ok = False
        results[name] = ok
        records.update({cid: (name, fig, passed) for cid, (fig, passed) in got.items()})

    timed = {c.check for c in all_claims() if c.timed}
    if jobs > 1:
        parallel = [n for n in longest_first(todo) if n not in timed]
        for name, ok, got, seconds, output in run_parallel(parallel, out, quick, jobs):
            print(output, end="", flush=True)
            collect(name, ok, got, seconds)
        todo = [n for n in todo if n in timed]
    for name in todo:
        collect(*run_one(name, out, quick))
    return results, records


#: Seconds of each check run by this process (or its workers), for :data:`SECONDS`.
_SECONDS: dict = {}


def run_one(name, out, quick):
    """Run check ``name``: (name, passed, {claim id: (figure, passed)}, seconds)."""
    take_claims()
    module = importlib.import_module(f"theory_checks.check_{name}")
    t0 = time.perf_counter()
    ok = module.run(out, quick=quick)
    seconds = time.perf_counter() - t0
    _SECONDS[name] = seconds
    return name, ok, take_claims(), seconds


def _run_captured(name, out, quick):
    """:func:`run_one` in a worker, with the check's output (stdout and stderr) returned."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        result = run_one(name, out, quick)
    return (*result, buffer.getvalue())


def run_parallel(todo, out, quick, jobs):
    """Yield :func:`_run_captured`'s results for the checks ``todo`` as they end, from
    ``jobs`` fresh single-threaded processes (spawned: no thread pool is inherited)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm import tqdm

    saved = {k: os.environ.get(k) for k in ONE_THREAD_ENV}
    os.environ.update(ONE_THREAD_ENV)  # the workers inherit it when they start
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_run_captured, name, out, quick) for name in todo]
            bar = tqdm(as_completed(futures), total=len(futures), desc="checks", unit="check",
                       file=sys.stderr)
            for future in bar:
                result = future.result()
                _SECONDS[result[0]] = result[3]
                bar.clear()
                yield result
                bar.refresh()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: Seconds per check of the last ``--claims`` run (full sizes), for ``--jobs``'s order.
SECONDS = os.path.join(os.path.dirname(__file__), "seconds.json")


def load_seconds():
    if not os.path.exists(SECONDS):
        return {}
    with open(SECONDS) as fh:
        return json.load(fh)


def longest_first(todo):
    """``todo`` ordered by :data:`SECONDS`, longest first; checks without a time first (they
    may be long), in their order."""
    seconds = load_seconds()
    return sorted(todo, key=lambda n: -seconds.get(n, float("inf")))


def save_seconds(seconds):
    """Merge ``seconds`` (per check, of this run) into :data:`SECONDS`."""
    merged = {**load_seconds(), **{n: round(s, 1) for n, s in seconds.items()}}
    with open(SECONDS, "w") as fh:
        json.dump(dict(sorted(merged.items())), fh, indent=1)
        fh.write("\n")


def write_claims(path, records, *, update=False, rerun=()):
    """Write the claims table to ``path`` and the recorded figures to ``path``'s .json (the
    figures of one run, by claim id); with ``update``, the claims of checks not in ``rerun``
    keep the figures of that file."""
    store = os.path.splitext(path)[0] + ".json"
    if update:
        if not os.path.exists(store):
            raise SystemExit(f"--update needs the figures of a full run in {store}; run "
                             f"`python -m theory_checks --claims {path}` first")
        with open(store) as fh:
            kept = {cid: tuple(rec) for cid, rec in json.load(fh).items() if rec[0] not in rerun}
        records = {**kept, **records}
    with open(store, "w") as fh:
        json.dump({cid: list(rec) for cid, rec in sorted(records.items())}, fh, indent=1)
    with open(path, "w") as fh:
        fh.write(CLAIMS_HEADER + STATUS_LEGEND + "\n## Claims per paper and status\n\n"
                 + summary_table(records) + "\n## The claims\n\n" + claims_table(records))
    print(f"claims table: {path} (figures: {store})")


CLAIMS_HEADER = """# The papers' claims and how each is checked

Generated by `python -m theory_checks --claims docs/claims.md` from the checks' own output
(do not edit by hand; `python -m theory_checks NAME ... --claims docs/claims.md --update`
reruns some checks and keeps the others' figures, which `docs/claims.json` holds).
"measured" is the figure the check printed for the claim in that run; claims covered by
unit tests name them; a claim that cannot be checked numerically says why. A "(timed)"
check's figure is a wall-clock ratio of that run: the test suite never asserts it.

"""

#: The status column's words, from ``theory_checks.claims.OUTCOMES``.
STATUS_LEGEND = "Status:\n\n" + "".join(f"- **{k}**: {v}.\n" for k, v in OUTCOMES.items()) + (
    "- **FAILED**: the check ran and did not show what the row says.\n"
    "- **MISSING**: the check did not record the claim.\n")


if __name__ == "__main__":
    sys.exit(main())
