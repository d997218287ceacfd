"""The ``sparseopt demo`` report: one section per module, written as Markdown + PNG.

Each section is a function ``section(out_dir, quick) -> str`` returning Markdown that
may reference PNG files it saved in ``out_dir``. The core's sections come first, in the order
``sections()`` lists them; then the sections that installed packages contribute through the
``sparseopt.demo_sections`` entry point group (the torch adapter's ``minilm``: the 2:4
comparison on the real model MiniLM), ordered by entry point name. The core never imports
those packages; it loads the entry points.

The fixtures the demo shares with the theory checks, tests and benchmarks live in
:mod:`sparseopt.problems` and :mod:`sparseopt.threads`.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from importlib.metadata import entry_points

__all__ = ["sections", "run_demo", "SECTION_GROUP", "MINILM"]

#: Entry point group of demo sections contributed by other packages: each entry is a
#: function ``section(out_dir, quick) -> str`` (Markdown), named by the entry point.
SECTION_GROUP = "sparseopt.demo_sections"
#: Name of the torch adapter's section, the one ``sparseopt demo --no-minilm`` leaves out.
MINILM = "minilm"
_INSTALL = ("install the torch adapter: `pip install torch==2.13.0`, then "
            "`pip install -e .[torch,minilm]`, or run `sparseopt demo --no-minilm`")


def _contributed():
    """The entry points of :data:`SECTION_GROUP`, by name (one per name)."""
    found = {}
    for ep in entry_points(group=SECTION_GROUP):
        found.setdefault(ep.name, ep)
    return [found[name] for name in sorted(found)]


def sections(minilm: bool = False):
    """The report's sections, in order. Imported lazily so that ``import sparseopt``
    stays light (matplotlib, CVXPY).

    After the core's sections come the contributed ones (:data:`SECTION_GROUP`), ordered by
    name. ``minilm=False`` leaves out the MiniLM comparison (the entry named
    :data:`MINILM`, from the torch adapter); ``minilm=True`` requires it, and without the
    adapter (or torch) installed raises ImportError with the install hint.
    """
    from . import layer, prox_paths, recovery

    out = [prox_paths.section, layer.section, recovery.section]
    names = []
    for ep in _contributed():
        names.append(ep.name)
        if ep.name == MINILM and not minilm:
            continue
        try:
            out.append(ep.load())
        except ImportError as exc:
            hint = f": {_INSTALL}" if ep.name == MINILM else ""
            raise ImportError(f"the demo section {ep.name!r} ({ep.value}) cannot be imported "
                              f"({exc}){hint}") from exc
    if minilm and MINILM not in names:
        raise ImportError(f"the MiniLM demo section comes with the torch adapter, which is not "
                          f"installed (no {MINILM!r} entry point in {SECTION_GROUP}): {_INSTALL}")
    return out


def run_demo(out=None, quick: bool = False, minilm: bool = True) -> str:
    """Run every demo section, write ``report.md`` into the run folder, return its path."""
    if out is None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = os.path.join("runs", f"demo-{stamp}")
    os.makedirs(out, exist_ok=True)
    parts = ["# sparseopt demo\n"]
    for section in sections(minilm):
        t0 = time.perf_counter()
        print(f"[demo] {section.__module__} ...", flush=True)
        parts.append(section(out, quick))
        print(f"[demo] {section.__module__} done in {time.perf_counter() - t0:.1f} s", flush=True)
    path = os.path.join(out, "report.md")
    with open(path, "w") as fh:
        fh.write("\n\n".join(parts) + "\n")
    return path
