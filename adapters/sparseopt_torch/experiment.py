"""The MiniLM comparison's per-layer figure and the runs it names.

The comparison itself runs through the one folder path (``sparseopt prune --model minilm``,
:func:`~sparseopt_torch.hf.prune_folder` with the ``minilm`` preset); this module reads
the runs' ``report.json`` files and draws prox24-kubler Fig. 4: each method's per-layer local
loss relative to wanda+GD.
"""

from __future__ import annotations

import json
import os

import numpy as np

from sparseopt.layer import methods as layer_methods

from .hf import DEMO_OPTIONS, MINILM_PROXSPARSE, VARIANTS

__all__ = ["all_methods", "all_runs", "per_layer_rows", "plot_per_layer", "VARIANTS",
           "DEMO_OPTIONS", "DEMO_PROXSPARSE"]

#: ProxSparse's settings of the demo (proxsparse-liu Alg. 1).
DEMO_PROXSPARSE = MINILM_PROXSPARSE


def all_methods() -> tuple:
    """Every layer method of the comparison: the registry's, :func:`sparseopt.layer.methods`
    (read at each call, so a method registered later takes part)."""
    return layer_methods()


def all_runs() -> tuple:
    """Every layer-wise run of the comparison: :func:`all_methods`, then :data:`VARIANTS`."""
    return all_methods() + tuple(VARIANTS)


def _runs() -> tuple:
    """Run folders in table order ("proxsparse": end-to-end masks; the variants last)."""
    return all_methods() + ("proxsparse",) + tuple(VARIANTS)


def per_layer_rows(out) -> list:
    """``[{"method": label, "per_layer": {layer: relative local loss}}]`` of every finished
    run of ``out``, from its ``report.json``: ``<run>`` (before +GD) and, with +GD steps,
    ``<run>+GD``."""
    rows = []
    for run in _runs():
        path = os.path.join(out, run, "report.json")
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            rep = json.load(fh)
        variants = [("rel_loss", run)]
        if rep["settings"]["refine_steps"] != 0:
            variants.append(("rel_loss_gd", f"{run}+GD"))
        for key, label in variants:
            rows.append({"method": label, "per_layer": {r["name"]: r[key] for r in rep["layers"]}})
    if not rows:
        raise ValueError(f"no finished run in {out!r}")
    return rows


def plot_per_layer(rows, path):
    """prox24-kubler Fig. 4: per-layer local loss of each method relative to wanda+GD."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the reference of Fig. 4 is wanda+GD; without a wanda run, the first row
    ref = next((r for r in rows if r["method"] == "wanda+GD"),
               next((r for r in rows if r["method"] == "wanda"), rows[0]))
    names = list(ref["per_layer"])
    base = np.array([ref["per_layer"][n] for n in names])
    runs = _runs()
    fig, ax = plt.subplots(figsize=(9, 4))
    for r in rows:
        if r is ref:
            continue
        vals = np.array([r["per_layer"][n] for n in names])
        family = r["method"].removesuffix("+GD")  # one colour per method, solid with +GD
        color = plt.cm.tab10(runs.index(family) % 10) if family in runs else None
        ax.plot(np.arange(len(names)), vals / base, marker="o", ms=3, lw=1, label=r["method"],
                color=color, ls="-" if r["method"].endswith("+GD") else ":")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("layer (forward order)")
    ax.set_ylabel(f"local loss / {ref['method']}")
    ax.set_title("per-layer local loss relative to " + ref["method"] + " (cf. prox24-kubler Fig. 4)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
