"""Regularization paths of the 2:4 prox: prox24-kubler Fig. 1 and proxsparse-liu Fig. 3.

The four inputs of the Fig. 1 caption, (a) easy [1.6, 1.1, 0.8, 0.5], (b) nearly tied z_{2:4}
[1.6, 1.11, 1.1, 1.09], (c) nearly tied z_{1:3} [1.6, 1.59, 1.58, 1.09], (d) all nearly tied
[1.6, 1.59, 1.58, 1.57], and proxsparse-liu's y = [1.4, 1.1, 1.0, 0.7], on one lam grid from
0 to 1.3 x the largest lam at which one of them becomes 2-sparse. EnumALM and EnumPGD
(``prox_nm``) solve every grid point (all five inputs in one batched call per lam), EnumIPM
every k-th (40 points quick, 1000 full; all of them in one batched call, at lam = 1 on
lam y, since prox_lam(y) = prox_1(lam y) / lam). The transitions are located on the fine grid (600
points quick, 6000 full; spacing h) and the one to 2-sparse is also bracketed by bisection
(EnumALM, rel. 1e-6) and confirmed by EnumIPM at (1 -+ 1e-3) of it.

Claims:

* ``liu-fig3-paths`` (proxsparse-liu Fig. 3: "all three algorithms return the same solution
  path"): largest objective disagreement between any two solvers <= 1e-10 and largest
  weight disagreement <= 1e-5 = sqrt(1e-10) (near a continuous transition f is flat in w).
* ``kubler-fig1-thresholds`` (caption, Lemma 10): lam >= lambda_1* = z4/(z1z2+z2z3+z1z3) is
  necessary for a 3-sparse and lam >= lambda_2* = z3/(z1z2) for a 2-sparse solution: on every
  input the first <= 3-sparse lam is >= lambda_1* and the first 2-sparse lam is >= lambda_2*.
  (The caption calls the dashed lines the lams where the 3-sparse / 2-sparse solutions
  "become a critical point"; that holds for lambda_2*, but lambda_1* is only the weak bound:
  the 3-sparse candidate becomes critical at the sharp lam e_2(w_{1:3}(lam)) = z4, printed,
  which is strictly larger on all four inputs.)
* ``kubler-fig1-gradual`` ("in the easy input case ... the sparsification is gradual, rather
  than abrupt"): on (a) the path is continuous (largest change between neighbouring grid
  points <= 0.05, against >= 0.25 jumps on the hard inputs), the support shrinks one entry at
  a time 4 -> 3 -> 2, w_4 leaves at the sharp critical lam and w_3 at lambda_2*, both within
  2h (a continuous path leaves the support exactly where the KKT multiplier vanishes).
* ``kubler-fig1-delayed`` ("in the hard input cases ... decisions about those that are nearly
  tied are not made prematurely at smaller lam, the transition to exact structured sparsity
  happened at a much larger lam"): on (b), (c), (d) the transition to 2-sparse is a jump
  (>= 0.25 in some coordinate), it happens after lambda_2* (>= 1.03 lambda_2*, while the easy
  input's is at lambda_2*), at >= 1.3x the easy input's lam, and the first 3-sparse lam
  relative to lambda_1* is later than the easy input's.

What would make it fail: solvers that disagree; a prox that sparsifies before the Lemma 10
thresholds (e.g. a lam off by a factor 2) or at the wrong entries; a path with jumps on the
easy input or without them on the hard ones.
"""

from __future__ import annotations

import numpy as np

from sparseopt.demo.prox_paths import critical_lam_3sparse, path_grid, plot_path
from sparseopt.problems import LIU_Y
from sparseopt.prox.thresholds import lemma10_thresholds
from sparseopt.regularizers import r_nm_groups

from ._report import claim, figure, header, savefig, verdict

NAME = "paths"

#: prox24-kubler Fig. 1 caption (a)-(d), then proxsparse-liu Fig. 3.
INPUTS = {
    "kubler (a) easy": np.array([1.6, 1.1, 0.8, 0.5]),
    "kubler (b) tied z2:4": np.array([1.6, 1.11, 1.1, 1.09]),
    "kubler (c) tied z1:3": np.array([1.6, 1.59, 1.58, 1.09]),
    "kubler (d) all tied": np.array([1.6, 1.59, 1.58, 1.57]),
    "liu Fig. 3": LIU_Y,
}
EASY = "kubler (a) easy"
HARD = ("kubler (b) tied z2:4", "kubler (c) tied z1:3", "kubler (d) all tied")

OBJ_TOL = 1e-10
W_TOL = 1e-5  # sqrt(OBJ_TOL): f is flat (quadratic or flatter) in w near the optimum
SMOOTH = 0.05  # largest step of a continuous path between grid neighbours
JUMP = 0.25  # smallest jump that counts as abrupt


def _objective(W, y, lams):
    """0.5 ||w - y||^2 + lam r_{2:4}(w) for every row of W with its own lam."""
    return 0.5 * np.sum((W - y) ** 2, axis=1) + lams * np.asarray(r_nm_groups(W))[:, 0]


def ipm_batch(prox_nm, Y, L):
    """EnumIPM prox of every y = Y[..., :] at its own lam = L[...], in one batched call.

    r_{2:4} is homogeneous of degree 3, so prox_lam(y) = prox_1(lam y) / lam (scale
    covariance, ``check_scale_covariance``); lam = 0 is the identity."""
    L = np.asarray(L, dtype=np.float64)
    pos = L > 0
    out = np.array(Y, dtype=np.float64, copy=True)
    rows = (Y[pos] * L[pos][:, None]).reshape(-1, 4)
    out[pos] = prox_nm(rows, 1.0, method="ipm") / L[pos][:, None]
    return out


def _first(lams, nnz, s):
    """First grid index with at most s nonzeros."""
    return int(np.argmax(nnz <= s))


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt.prox import prox_nm

    header(NAME, "prox24-kubler Fig. 1 (gradual vs delayed sparsification, Lemma 10 thresholds) and "
                 "proxsparse-liu Fig. 3 (ALM, PGD and IPM give the same 2:4 prox path)")
    points, ipm_points = (600, 40) if quick else (6000, 1000)
    Y = np.stack(list(INPUTS.values()))
    first2_bis = {lab: float(path_grid(y, points=2, margin=1.0, method="alm")[-1]) for lab, y in INPUTS.items()}
    lams = np.linspace(0.0, 1.3 * max(first2_bis.values()), points)
    h = float(lams[1])
    paths = {meth: np.stack([prox_nm(Y, float(lam), method=meth) for lam in lams], axis=1)
             for meth in ("alm", "pgd")}  # (input, lam, 4)
    sub = np.unique(np.linspace(0, points - 1, ipm_points).round().astype(int))
    paths["ipm"] = ipm_batch(prox_nm, np.repeat(Y[:, None], len(sub), 1), np.broadcast_to(lams[sub], (len(Y), len(sub))))

    stats = {}
    worst_obj = worst_w = 0.0
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for row, (ax, (label, y)) in enumerate(zip(axes.ravel(), INPUTS.items())):
        f = {m: _objective(P[row], y, lams if m != "ipm" else lams[sub]) for m, P in paths.items()}
        w_sub = {m: (P[row] if m == "ipm" else P[row, sub]) for m, P in paths.items()}
        f_sub = {m: (v if m == "ipm" else v[sub]) for m, v in f.items()}
        obj = max(float(np.max(np.abs(f["alm"] - f["pgd"]))),
                  max(float(np.max(np.abs(f_sub[a] - f_sub["ipm"]))) for a in ("alm", "pgd")))
        wd = max(float(np.max(np.abs(paths["alm"][row] - paths["pgd"][row]))),
                 max(float(np.max(np.abs(w_sub[a] - w_sub["ipm"]))) for a in ("alm", "pgd")))
        worst_obj, worst_w = max(worst_obj, obj), max(worst_w, wd)

        z = np.sort(np.abs(y))[::-1]
        lam1, lam2 = (float(v) for v in lemma10_thresholds(z))
        W = paths["alm"][row]
        nnz = np.count_nonzero(W, axis=1)
        i3, i2 = _first(lams, nnz, 3), _first(lams, nnz, 2)
        steps = np.max(np.abs(np.diff(W, axis=0)), axis=1)
        seq = [int(nnz[0])] + [int(s) for a, s in zip(nnz[:-1], nnz[1:]) if s != a]
        crit3 = critical_lam_3sparse(z, lams, method="alm")
        l2 = first2_bis[label]
        ipm_lo, ipm_hi = (int(v) for v in np.count_nonzero(
            ipm_batch(prox_nm, np.stack([y, y]), [l2 * (1 - 1e-3), l2 * (1 + 1e-3)]), axis=1))
        stats[label] = dict(lam1=lam1, lam2=lam2, first3=float(lams[i3]), first2=l2, crit3=crit3,
                            jump2=float(steps[i2 - 1]), jump_max=float(steps.max()), seq=seq,
                            ipm=(ipm_lo, ipm_hi))
        figure(label, f"lambda_1*={lam1:.4f} (sharp {crit3:.4f}), lambda_2*={lam2:.4f}; first <=3-sparse "
                      f"{lams[i3]:.4f} ({lams[i3] / lam1:.2f} lambda_1*), 2-sparse {l2:.5f} "
                      f"({l2 / lam2:.3f} lambda_2*; IPM nonzeros at -/+1e-3: {ipm_lo}/{ipm_hi}); supports "
                      f"{seq}; jump there {steps[i2 - 1]:.3f}, largest step {steps.max():.3f}; solvers: "
                      f"|f diff| {obj:.1e}, |w diff| {wd:.1e}")
        thin = slice(None, None, max(1, points // 400))  # a lighter plot; the figures use every point
        plot_path(ax, y, lams[thin], {"alm": W[thin], "pgd": paths["pgd"][row][thin]},
                  title=f"{label}: y = {y.tolist()}", show_critical=False)
        ax.plot(lams[sub], paths["ipm"][row], ls="none", marker="o", ms=3.5, mfc="none", color="k")
        if np.isfinite(crit3):
            ax.axvline(crit3, color="0.5", ls=":", lw=1.2, label=r"$\lambda e_2(w^{(3)})=z_4$")
    axes[0, 0].legend(fontsize=7, ncol=2)
    axes[1, 2].axis("off")
    axes[1, 2].text(0.02, 0.6, "ALM solid, PGD dashed, IPM circles\n"
                               f"max objective disagreement {worst_obj:.1e}\n"
                               f"max weight disagreement {worst_w:.1e}", fontsize=11)
    savefig(fig, out_dir, "paths.png")
    figure("largest objective disagreement between solvers", f"{worst_obj:.3e}")
    figure("largest |w| disagreement between solvers", f"{worst_w:.3e}")

    ok_liu = claim("liu-fig3-paths", f"objective {worst_obj:.1e} <= {OBJ_TOL:g}, weights {worst_w:.1e} "
                                     f"<= {W_TOL:g} on 5 inputs", worst_obj <= OBJ_TOL and worst_w <= W_TOL)
    nec = {lab: (s["first3"] >= s["lam1"] and s["first2"] >= s["lam2"] and s["ipm"][1] <= 2
                 and s["ipm"][0] > 2) for lab, s in stats.items()}
    ok_thr = claim("kubler-fig1-thresholds",
                   "first 3-sparse / lambda_1*: " + ", ".join(f"{s['first3'] / s['lam1']:.2f}" for s in stats.values())
                   + "; first 2-sparse / lambda_2*: " + ", ".join(f"{s['first2'] / s['lam2']:.3f}" for s in stats.values())
                   + " (all >= 1; IPM confirms the 2-sparse transition)", all(nec.values()))
    e = stats[EASY]
    gradual = (e["jump_max"] <= SMOOTH and e["seq"] == [4, 3, 2] and abs(e["first3"] - e["crit3"]) <= 2 * h
               and abs(e["first2"] - e["lam2"]) <= 2 * h)
    ok_grad = claim("kubler-fig1-gradual", f"(a): largest step {e['jump_max']:.3f} <= {SMOOTH}, supports "
                                           f"{e['seq']}, w4 leaves at {e['first3']:.4f} vs sharp {e['crit3']:.4f}, "
                                           f"w3 at {e['first2']:.5f} vs lambda_2* {e['lam2']:.5f} (2h = {2 * h:.1e})",
                    gradual)
    delayed = {lab: (stats[lab]["jump2"] >= JUMP and stats[lab]["first2"] >= 1.03 * stats[lab]["lam2"]
                     and stats[lab]["first2"] >= 1.3 * e["first2"]
                     and stats[lab]["first3"] / stats[lab]["lam1"] > e["first3"] / e["lam1"]) for lab in HARD}
    ok_del = claim("kubler-fig1-delayed",
                   "; ".join(f"{lab[7:10]} jump {stats[lab]['jump2']:.2f} >= {JUMP}, 2-sparse at "
                             f"{stats[lab]['first2'] / stats[lab]['lam2']:.3f} lambda_2* and "
                             f"{stats[lab]['first2'] / e['first2']:.2f}x easy" for lab in HARD),
                   all(delayed.values()))
    ok = ok_liu and ok_thr and ok_grad and ok_del
    return verdict(NAME, ok, f"objective {worst_obj:.1e} <= {OBJ_TOL:g}, weights {worst_w:.1e} <= {W_TOL:g}; "
                             f"Fig. 1 thresholds {all(nec.values())}, gradual {gradual}, "
                             f"delayed {all(delayed.values())}")
