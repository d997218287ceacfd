"""Running the checks: one after another in this process, or in worker processes
(``python -m theory_checks --jobs N``, :func:`run_checks`). A module of its own, so that the
spawned workers can import what they run (they cannot import ``__main__`` of ``-m``)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import sys
import time

from theory_checks._report import take_claims
from theory_checks.claims import all_claims

#: What a worker of ``--jobs`` sets before it loads NumPy: one thread for every pool.
ONE_THREAD_ENV = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                   "NUMBA_NUM_THREADS")}


def run_checks(todo, out, quick, jobs=1):
    """Run the checks ``todo``: ({name: passed}, {claim id: (check, figure, passed)}). With
    ``jobs > 1`` the untimed checks run in :func:`run_parallel`, then the timed ones here."""
    by_check, timed = {}, set()
    for c in all_claims():
        if c.check:
            by_check.setdefault(c.check, set()).add(c.id)
        if c.timed:
            timed.add(c.check)
    results, records = {}, {}

    def collect(name, ok, got, seconds):
        print(f"  ({name}: {seconds:.1f} s)", flush=True)
        stray = sorted(set(got) - by_check.get(name, set()))
        if stray:  # a claim recorded by a check the registry does not name: fix the registry
            print(f"FAIL: {name} recorded claims not registered to it: {stray}")
            ok = False
        results[name] = ok
        records.update({cid: (name, fig, passed) for cid, (fig, passed) in got.items()})

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
    ``jobs`` single-threaded processes, each running checks one after another (spawned, not
    forked: no thread pool or loaded library is inherited)."""
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
    """{check: seconds} from :data:`SECONDS` (empty when the file is missing)."""
    if not os.path.exists(SECONDS):
        return {}
    with open(SECONDS) as fh:
        return json.load(fh)


def longest_first(todo):
    """``todo`` ordered by :data:`SECONDS`, longest first; checks without a time first (they
    may be long), in their order."""
    seconds = load_seconds()
    return sorted(todo, key=lambda n: -seconds.get(n, float("inf")))


def save_seconds():
    """Merge the seconds of the checks run by this process (or its workers) into
    :data:`SECONDS`."""
    merged = {**load_seconds(), **{n: round(s, 1) for n, s in _SECONDS.items()}}
    with open(SECONDS, "w") as fh:
        json.dump(dict(sorted(merged.items())), fh, indent=1)
        fh.write("\n")
