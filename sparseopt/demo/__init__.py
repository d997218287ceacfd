"""The ``sparseopt demo`` report: one section per module, written as Markdown + PNG.

Each section is a function ``section(out_dir, quick) -> str`` returning Markdown that
may reference PNG files it saved in ``out_dir``. Sections are listed in ``SECTIONS``
in the order ``sections()`` returns them.
"""

from __future__ import annotations

import datetime as _dt
import os
import time

def sections():
    """The report's sections, in order. Imported lazily so that ``import sparseopt``
    stays light (matplotlib, CVXPY)."""
    from . import layer, prox_paths, recovery

    return [prox_paths.section, layer.section, recovery.section]


def run_demo(out=None, quick: bool = False) -> str:
    """Run every demo section, write ``report.md`` into the run folder, return its path."""
    if out is None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = os.path.join("runs", f"demo-{stamp}")
    os.makedirs(out, exist_ok=True)
    parts = ["# sparseopt demo\n"]
    for section in sections():
        t0 = time.perf_counter()
        print(f"[demo] {section.__module__} ...", flush=True)
        parts.append(section(out, quick))
        print(f"[demo] {section.__module__} done in {time.perf_counter() - t0:.1f} s", flush=True)
    path = os.path.join(out, "report.md")
    with open(path, "w") as fh:
        fh.write("\n\n".join(parts) + "\n")
    return path
