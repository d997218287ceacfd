"""Regularization paths of the 2:4 prox: prox24-kubler Fig. 1 and proxsparse-liu Fig. 3.

The four inputs of the Fig. 1 caption (easy, nearly tied z_{2:4}, nearly tied z_{1:3}, all
nearly tied) and proxsparse-liu's y = [1.4, 1.1, 1.0, 0.7], each on a lam grid from 0 to
1.3 x the lam at which the path becomes 2-sparse, solved by EnumALM, EnumPGD and EnumIPM.
Liu's Fig. 3 claim is that "all three algorithms return the same solution path"; here the
largest objective disagreement between any two solvers must be <= 1e-10 and the largest
weight disagreement <= 1e-5 = sqrt(1e-10) (near a continuous transition, e.g. w_3 -> 0 at
lambda_2* for the easy input, f is flat in w, so an objective tolerance of 1e-10 only fixes
w to about its square root). The Lemma 10 thresholds are drawn dashed (see
``sparseopt.prox.thresholds.lemma10_thresholds``): lambda_1* = z4/(z1 z2 + z2 z3 + z1 z3)
(3-sparse) and lambda_2* = z3/(z1 z2) (2-sparse), plus, dotted, the sharp 3-sparse KKT
condition lam e_2(w_{1:3}(lam)) = z4 along the path.
"""

from __future__ import annotations

import numpy as np

from sparseopt.demo.prox_paths import path_grid, plot_path, regularization_path
from sparseopt.problems import LIU_Y
from sparseopt.prox.thresholds import lemma10_thresholds
from sparseopt.regularizers import prox_objective

from ._report import figure, header, savefig, verdict

NAME = "paths"

#: prox24-kubler Fig. 1 caption (a)-(d), then proxsparse-liu Fig. 3.
INPUTS = {
    "kubler (a) easy": np.array([1.6, 1.1, 0.8, 0.5]),
    "kubler (b) tied z2:4": np.array([1.6, 1.11, 1.1, 1.09]),
    "kubler (c) tied z1:3": np.array([1.6, 1.59, 1.58, 1.09]),
    "kubler (d) all tied": np.array([1.6, 1.59, 1.58, 1.57]),
    "liu Fig. 3": LIU_Y,
}

OBJ_TOL = 1e-10
W_TOL = 1e-5  # sqrt(OBJ_TOL): f is flat (quadratic or flatter) in w near the optimum


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    header(NAME, "prox24-kubler Fig. 1 / proxsparse-liu Fig. 3: ALM, PGD and IPM give the same "
                 "2:4 prox regularization path")
    points = 30 if quick else 200
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    worst_obj = worst_w = 0.0
    for ax, (label, y) in zip(axes.ravel(), INPUTS.items()):
        lams = path_grid(y, points=points)
        paths = regularization_path(y, lams)
        f = {meth: np.array([prox_objective(W[k], y, lam)[0] for k, lam in enumerate(lams)])
             for meth, W in paths.items()}
        pairs = [(a, b) for a in f for b in f if a < b]
        obj_pair = {(a, b): float(np.max(np.abs(f[a] - f[b]))) for a, b in pairs}
        obj = max(obj_pair.values())
        wd = max(float(np.max(np.abs(paths[a] - paths[b]))) for a, b in pairs)
        worst_pair = max(obj_pair, key=obj_pair.get)
        if obj > OBJ_TOL:
            k = int(np.argmax(np.abs(f[worst_pair[0]] - f[worst_pair[1]])))
            figure(f"{label}: worst disagreement", f"lam={float(lams[k])!r}: " + ", ".join(
                f"{meth} w={np.round(paths[meth][k], 6).tolist()} f={f[meth][k]:.10f}" for meth in paths))
        worst_obj, worst_w = max(worst_obj, obj), max(worst_w, wd)
        lam3, lam2 = lemma10_thresholds(np.sort(np.abs(y))[::-1])
        nnz = np.count_nonzero(paths["alm"] > 0, axis=1)
        first2 = float(lams[np.argmax(nnz <= 2)])
        first3 = float(lams[np.argmax(nnz <= 3)])
        figure(label, f"{points} lams in [0, {lams[-1]:.4f}]; lambda_1*={lam3:.4f} "
                      f"lambda_2*={lam2:.4f}; ALM first <=3-sparse at {first3:.4f}, "
                      f"2-sparse at {first2:.4f}; max |f diff|={obj:.2e} ({'/'.join(worst_pair)}), "
                      f"max |w diff|={wd:.2e}")
        # the sharp 3-sparse line costs ~100 single-group IPM calls per input: full runs only
        plot_path(ax, y, lams, paths, title=f"{label}: y = {y.tolist()}", show_critical=not quick)
    axes[0, 0].legend(fontsize=7, ncol=2)
    axes[1, 2].axis("off")
    axes[1, 2].text(0.02, 0.6, "ALM solid, PGD dashed, IPM circles\n"
                               f"max objective disagreement {worst_obj:.1e}\n"
                               f"max weight disagreement {worst_w:.1e}", fontsize=11)
    savefig(fig, out_dir, "paths.png")
    figure("largest objective disagreement between solvers", f"{worst_obj:.3e}")
    figure("largest |w| disagreement between solvers", f"{worst_w:.3e}")
    ok = worst_obj <= OBJ_TOL and worst_w <= W_TOL
    return verdict(NAME, ok, f"objective {worst_obj:.1e} <= {OBJ_TOL:g}, weights {worst_w:.1e} <= {W_TOL:g}")
