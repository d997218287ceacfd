"""prox24-kubler App. C: the simpler regularizers R0, R1, R2 commit early; Table 2's quality order.

App. C: "those regularizers commit very early to the sparsity pattern" (R0, R1, R2 of eq.
25-27: hard thresholding, soft thresholding, shrinkage of the two smallest magnitudes of each
group), and Table 2 (Llama-3.1 8B, C4 / wiki perplexity after pruning and 1000 masked
gradient steps): r_{2:4} 26.44 / 20.15, R0 ("L0") 27.25 / 20.21, R2 ("L2") 27.84 / 20.43, R1
("L1") 28.46 / 20.70, i.e. the order r_{2:4} < R0 < R2 < R1 on both test sets.

Runs. The prox pruner (``sparseopt.prune(method="prox")``, Alg. 2 as published:
``schedule="paper"`` with beta = 1.05 as in ``appc_regularizers``, Wanda rescaling) with each
regularizer on each layer: the real all-MiniLM-L6-v2's block-0 query, value and attention
output layers (384 x 384, dense-model Hessians from 128 calibration sentences, as
``kubler_minilm_fig4``); quick: one synthetic 64 x 256 layer with a correlated Hessian
(``sparseopt.problems.correlated_hessian``). A run of K iterations is repeated with
max_iter = 1 and max_iter = ceil(K / 10) (the same iterates up to there: the schedule does not
depend on max_iter), whose projection onto 2:4 (the two largest magnitudes of that iterate,
``pattern.project``) is the mask the run had committed to at that point. Agreement = fraction
of groups whose mask equals the final one (the measure of proxsparse-liu Fig. 1 (d)).
Quality = the relative local loss of each final mask after the exact refit of the kept
weights (``appc_regularizers.mask_refit_loss``: what masked gradient steps, +GD, converge to).

Claims:
  ``kubler-appc-commit`` (CONFIRMED): on every layer the masks of R0, R1 and R2 after 10% of
    their runs agree with their final masks on more groups than r_{2:4}'s does (figures: the
    agreements at 10% and after the first iteration, and each run's K);
  ``kubler-table2-order`` (DEVIATES): Table 2's order among the App. C regularizers
    (R0 < R2 < R1) fails on at least one layer at this scale, while r_{2:4}'s mask is better
    than each of R0, R1, R2 on every layer (what holds).

What would make it fail: r_{2:4} committing as early as an App. C regularizer (its mask fixed
after its first iterations), a run whose prefix is not the run (a schedule that depends on
max_iter), the paper's order among R0-R2 holding on every layer, an App. C mask as good as
r_{2:4}'s.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ._report import claim, figure, header, savefig, verdict

NAME = "kubler_appc_commit"
REGS = ("rnm", "R0", "R1", "R2")
PAPER_ORDER = ("R0", "R2", "R1")  # Table 2, best to worst, both test sets
MINILM_LAYERS = r"^encoder\.layer\.0\.attention\.(self\.(query|value)|output\.dense)$"
EARLY = 0.1  # the fraction of the run after which the committed mask is compared


def layer_problems(pattern, quick):
    """{name: (W* float64, H)}: the MiniLM layers whose names match ``pattern`` (128
    calibration sentences), or (quick) one synthetic 64 x 256 layer."""
    if quick:
        from sparseopt.problems import correlated_hessian

        rng = np.random.default_rng(2)
        return {"synthetic 64x256": (rng.standard_normal((64, 256)), correlated_hessian(256, seed=2))}
    from .check_kubler_minilm_fig4 import minilm_calibration, minilm_layer_problems, short

    st, batches, _ = minilm_calibration(128)
    probs = minilm_layer_problems(st, batches, pattern)
    return {short(n): (W.astype(np.float64), H) for n, (_, W, H) in probs.items()}


def _agreement(a, b, m=4):
    """Fraction of groups of ``m`` (along rows) where masks a and b are equal."""
    return float(np.mean(np.all((a == b).reshape(a.shape[0], -1, m), axis=-1)))


def commit_run(W, H, reg, schedule):
    """(K, agreement after 1 iteration, agreement after ceil(EARLY K), final mask, prefix) of
    the prox pruner with regularizer ``reg``; ``prefix``: the shorter runs' losses per
    iteration equal the first ones of the whole run (they are its prefix)."""
    from sparseopt import prune

    res = prune(W, H, method="prox", regularizer=reg, schedule=schedule)
    final = res.W != 0
    K = res.nit
    agree, prefix = [], True
    for k in (1, max(1, math.ceil(EARLY * K))):
        early = prune(W, H, method="prox", regularizer=reg, schedule=schedule, max_iter=k)
        agree.append(_agreement(early.W != 0, final))
        prefix &= bool(np.array_equal(early.history["loss"], res.history["loss"][:k]))
    return K, agree[0], agree[1], final, prefix


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import prune
    from sparseopt.layer.prox import SCHEDULES

    from .check_appc_regularizers import mask_refit_loss

    header(NAME, "prox24-kubler App. C: R0, R1, R2 'commit very early to the sparsity pattern'; "
                 "Table 2's order r_2:4 < R0 < R2 < R1")
    schedule = replace(SCHEDULES["paper"], beta=1.05)
    layers = layer_problems(MINILM_LAYERS, quick)
    rows = {}
    for lname, (W, H) in layers.items():
        r = {}
        for reg in REGS:
            K, a1, a10, final, prefix = commit_run(W, H, reg, schedule)
            r[reg] = dict(K=K, a1=a1, a10=a10, loss=mask_refit_loss(W, H, final), prefix=prefix)
        wanda = mask_refit_loss(W, H, prune(W, H, method="wanda").W != 0)
        rows[lname] = r
        figure(lname, "; ".join(f"{reg}: K {v['K']}, agreement after 1 it {v['a1']:.3f}, after 10% "
                                f"{v['a10']:.3f}, refit loss {v['loss']:.4f}" for reg, v in r.items())
               + f"; wanda refit loss {wanda:.4f}")

    commit = {ln: all(r[reg]["a10"] > r["rnm"]["a10"] for reg in ("R0", "R1", "R2"))
              for ln, r in rows.items()}
    prefix = all(v["prefix"] for r in rows.values() for v in r.values())
    mean = {reg: float(np.mean([r[reg]["a10"] for r in rows.values()])) for reg in REGS}
    ok_c = claim("kubler-appc-commit",
                 f"mask after 10% of the run = final mask on (mean over {len(rows)} layers) "
                 + ", ".join(f"{reg} {mean[reg]:.3f}" for reg in REGS)
                 + "; iterations K " + ", ".join(
                     f"{reg} {min(r[reg]['K'] for r in rows.values())}-{max(r[reg]['K'] for r in rows.values())}"
                     for reg in REGS)
                 + f"; R0, R1, R2 above r_2:4 on {sum(commit.values())} of {len(rows)} layers; "
                 f"shorter runs are the runs' prefixes: {prefix}",
                 all(commit.values()) and prefix)
    order = {ln: sorted(("R0", "R1", "R2"), key=lambda k: r[k]["loss"]) for ln, r in rows.items()}
    paper = {ln: tuple(o) == PAPER_ORDER for ln, o in order.items()}
    best = {ln: all(r["rnm"]["loss"] < r[k]["loss"] for k in ("R0", "R1", "R2")) for ln, r in rows.items()}
    ok_o = claim("kubler-table2-order",
                 "order of R0-R2 by refit loss: " + "; ".join(f"{ln} {' < '.join(o)}" for ln, o in order.items())
                 + f"; the paper's R0 < R2 < R1 on {sum(paper.values())} of {len(rows)} layers; r_2:4 "
                 f"best on {sum(best.values())} of {len(rows)}",
                 not all(paper.values()) and all(best.values()))

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    x = np.arange(len(rows))
    for i, reg in enumerate(REGS):
        axes[0].bar(x + 0.2 * i - 0.3, [r[reg]["a10"] for r in rows.values()], 0.2, label=reg)
        axes[1].bar(x + 0.2 * i - 0.3, [r[reg]["loss"] for r in rows.values()], 0.2, label=reg)
    for ax, lab in ((axes[0], "mask after 10% = final mask (fraction of groups)"),
                    (axes[1], "relative local loss of the mask after refit")):
        ax.set_xticks(x, list(rows), fontsize=8)
        ax.set_ylabel(lab, fontsize=8)
        ax.legend(fontsize=7)
    axes[0].set_ylim(min(0.5, min(mean.values()) - 0.05), 1.0)
    axes[0].set_title("App. C: early commitment", fontsize=9)
    axes[1].set_title("Table 2 order (paper: r24 < R0 < R2 < R1)", fontsize=9)
    savefig(fig, out_dir, f"{NAME}.png")
    return verdict(NAME, ok_c and ok_o, f"commit {ok_c}, Table 2 order deviates as recorded {ok_o}")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
