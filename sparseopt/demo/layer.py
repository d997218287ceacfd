"""Demo section for layer pruning: prox24-kubler Fig. 2 in small.

The sweep, plot and table here are shared with ``theory_checks/check_layer_fig2.py``; the
synthetic problem itself is :func:`sparseopt.problems.fig2_problem` (re-exported here, like
:func:`sparseopt.problems.correlated_hessian` and :func:`sparseopt.threads.one_thread`).
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..problems import correlated_hessian, fig2_problem
from ..threads import one_thread

__all__ = ["fig2_methods", "fig2_problem", "correlated_hessian", "fig2_sweep", "fig2_plot",
           "fig2_table", "section", "one_thread"]


def fig2_methods() -> tuple:
    """Every registered layer method (:func:`sparseopt.layer.methods`), in plotting order:
    the registry's order with ``prox`` last, so that its (thicker) line is drawn on top."""
    from ..layer import methods

    names = methods()
    return tuple(m for m in names if m != "prox") + (("prox",) if "prox" in names else ())


def fig2_sweep(d, alphas, seeds, *, methods=None, refine_steps=1000, options=None,
               progress=True):
    """Prune every Fig. 2 problem with every method (+GD) and collect the losses.

    Parameters
    ----------
    d : int
    alphas : sequence of float
    seeds : sequence of int
    methods : sequence of str, optional
        Names understood by :func:`sparseopt.prune`; default :func:`fig2_methods` (all).
    refine_steps : int, optional
        Masked gradient steps after pruning (prox24-kubler eq. 5; 1000 in the paper).
    options : dict of str -> dict, optional
        Extra keyword options per method, passed to :func:`sparseopt.prune`.
    progress : bool, optional
        Print one line per (alpha, seed).

    Returns
    -------
    dict
        ``rel_loss`` and ``time``: arrays of shape (len(methods), len(alphas), len(seeds));
        ``masks``: dict ``(method, i_alpha, i_seed) -> bool mask``; ``methods``,
        ``alphas``, ``seeds``.
    """
    from sparseopt.layer import prune
    from sparseopt.patterns import NM

    options = {} if options is None else dict(options)
    methods = fig2_methods() if methods is None else tuple(methods)
    alphas = np.asarray(alphas, dtype=np.float64)
    seeds = tuple(seeds)
    rel = np.full((len(methods), len(alphas), len(seeds)), np.nan)
    sec = np.full_like(rel, np.nan)
    masks = {}
    for ia, alpha in enumerate(alphas):
        for js, seed in enumerate(seeds):
            t0 = time.perf_counter()
            W, H = fig2_problem(d, float(alpha), seed=seed)
            for im, method in enumerate(methods):
                res = prune(W, H, method=method, pattern=NM(2, 4), refine_steps=refine_steps,
                            **options.get(method, {}))
                rel[im, ia, js] = res.rel_loss
                sec[im, ia, js] = res.time
                masks[(method, ia, js)] = np.asarray(res.mask, dtype=bool)
            if progress:
                best = methods[int(np.argmin(rel[:, ia, js]))]
                print(f"  [fig2] d={d} alpha={alpha:.2f} seed={seed}: best {best} "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return {"rel_loss": rel, "time": sec, "masks": masks, "methods": methods,
            "alphas": alphas, "seeds": seeds}


def fig2_plot(sweep, *, title=None):
    """Relative loss (+GD) against alpha, one line per method (mean, min-max band over seeds).

    Returns the matplotlib figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for im, method in enumerate(sweep["methods"]):
        r = sweep["rel_loss"][im]
        ax.plot(sweep["alphas"], r.mean(axis=1), marker="o", ms=3,
                lw=2.2 if method == "prox" else 1.2, label=f"{method}+GD")
        if r.shape[1] > 1:
            ax.fill_between(sweep["alphas"], r.min(axis=1), r.max(axis=1), alpha=0.15)
    ax.set_xlabel(r"$\alpha$  (1 = uncorrelated inputs)")
    ax.set_ylabel(r"relative loss  $L(W)/\mathrm{Tr}(W^* H W^{*\top})$")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title(title or "2:4 pruning of synthetic layers (prox24-kubler Fig. 2)")
    return fig


def fig2_table(sweep, *, digits=4):
    """Markdown table: mean relative loss (+GD) per alpha (rows) and method (columns).

    The lowest entry of each row is bold.
    """
    methods = sweep["methods"]
    mean = sweep["rel_loss"].mean(axis=2)
    lines = ["| alpha | " + " | ".join(f"{m}+GD" for m in methods) + " |",
             "| ---: | " + " | ".join("---:" for _ in methods) + " |"]
    for ia, alpha in enumerate(sweep["alphas"]):
        best = np.min(mean[:, ia])
        cells = []
        for im in range(len(methods)):
            s = f"{mean[im, ia]:.{digits}f}"
            cells.append(f"**{s}**" if mean[im, ia] == best else s)
        lines.append(f"| {alpha:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(out_dir, quick=False):
    """Demo section: Fig. 2 of prox24-kubler on a small synthetic layer.

    ``d = 256``, 5 values of alpha, one seed (quick: ``d = 64``, 3 alphas).
    Saves ``layer_fig2.png`` in ``out_dir`` and returns Markdown.
    """
    d, alphas = (64, (0.0, 0.5, 1.0)) if quick else (256, (0.0, 0.25, 0.5, 0.75, 1.0))
    refine = 200 if quick else 1000
    print(f"[demo] layer: Fig. 2 sweep, d={d}, alphas={alphas}", flush=True)
    with one_thread():
        sweep = fig2_sweep(d, alphas, (0,), refine_steps=refine)
    fig = fig2_plot(sweep, title=f"2:4 pruning, d={d}, seed 0, +{refine} masked GD steps")
    os.makedirs(out_dir, exist_ok=True)
    fig.savefig(os.path.join(out_dir, "layer_fig2.png"), dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    total = float(np.nansum(sweep["time"]))
    return "\n".join([
        "## Layer pruning: prox24-kubler Fig. 2",
        "",
        f"One synthetic layer `W = randn(1, {d})` with Hessian "
        "`H = alpha diag(U) + (1 - alpha) Z Z'` (Sec. 4.1), pruned to 2:4 by every method of "
        f"`sparseopt.prune`, each followed by {refine} masked gradient steps (eq. 5). "
        "Relative loss `Tr((W-W*)H(W-W*)') / Tr(W* H W*')`, lower is better; the best per row "
        "is bold. At alpha = 1 the Hessian is diagonal and Wanda is optimal (Theorem 1); as the "
        "inputs get more correlated the Hessian-aware methods pull ahead.",
        "",
        fig2_table(sweep),
        "",
        f"Total pruning time {total:.1f} s.",
        "",
        "![Fig. 2](layer_fig2.png)",
    ])
