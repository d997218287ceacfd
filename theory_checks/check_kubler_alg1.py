"""prox24-kubler Lemma 3, Lemma 4, Theorem 7 / Algorithm 1 and the 2:3 remark of Sec. 3.3,
against the independent multi-start ``prox_bruteforce`` (no sorting, no candidates).

Instances: signed, unsorted y in R^4, iid N(0, 1) or nearly tied (+-(1.6 + 0.01 N(0, 1)),
random signs and order), a sixth of them with an exact zero; lam = 1 and y scaled so that
lam = s z3/(z1 z2) with s log-uniform in [0.2, 3]: dense, 3-sparse and 2-sparse optima all
occur.

Claims:

* ``kubler-lemma3``: solving eq. (7) reduces to eq. (9) on z = sort(|y|): the brute-force
  minimum for y equals the brute-force minimum for z (rel. 1e-9), and the brute-force
  optimum w of y has sign(w_i) = sign(y_i) where w_i != 0 and is ordered like |y|
  (|y_i| > |y_j| + 1e-9 implies |w_i| >= |w_j| - 1e-7).
* ``kubler-lemma4``: with z_4 > 0 the optimum (EnumIPM, ``enum_ipm_sorted``, whose value
  matches brute force) is in exactly one of the three cases: 2-sparse and equal to
  [z1, z2, 0, 0] (to 1e-12 z_1), 3-sparse with w_{1:3} > 0 solving the three equations of
  Lemma 4, or dense solving the four equations (residual <= 1e-9 z_1); every case occurs.
* ``kubler-thm7``: Algorithm 1 (EnumIPM: w^(2), the solution of (13), the solution of (14),
  the best of the three) is optimal: its objective is <= the brute-force objective + 1e-9
  (relative), with the library's sign/sort reduction (``prox_nm(method="ipm")``) on the
  signed y.
* ``kubler-sec33-r23``: "the proximal operator for r_{2:3} can be reduced to solving eq.
  (11)": ``prox_nm(y3, lam, 2, 3)`` with methods alm, pgd, ipm reaches the brute-force
  minimum of the 2:3 prox (rel. 1e-9), and its sorted absolute value minimizes g (eq. 12,
  transcribed) over R^3_+ to the same accuracy.

What would make it fail: a solver that misses a candidate or solves it badly (objective
above brute force), a wrong sign/sort reduction, an optimum outside Lemma 4's three cases.
"""

from __future__ import annotations

import numpy as np

from sparseopt import NM
from sparseopt.prox.thresholds import lemma10_thresholds
from sparseopt.regularizers import prox_objective

from ._report import claim, figure, header, savefig, verdict
from .check_kubler_lemma5 import gradient, objective

NAME = "kubler_alg1"
F_TOL = 1e-9


def _instances(rng, count):
    y = rng.standard_normal((count, 4))
    tied = np.arange(count) % 3 == 1
    y[tied] = rng.choice([-1.0, 1.0], (int(tied.sum()), 4)) * (1.6 + 0.01 * rng.standard_normal((int(tied.sum()), 4)))
    zero = np.arange(count) % 6 == 2
    y[zero, rng.integers(0, 4, int(zero.sum()))] = 0.0
    z = np.sort(np.abs(y), axis=1)[:, ::-1]
    s = np.exp(rng.uniform(np.log(0.2), np.log(3.0), count))
    # lam = 1 and y scaled by c = s z3/(z1 z2): lam / (z3/(z1 z2))(c y) = s (the threshold
    # has degree -1), so every solver runs once on the whole batch
    return y * (s * lemma10_thresholds(z)[1])[:, None], 1.0


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm
    from sparseopt.prox.ipm import enum_ipm_sorted
    from sparseopt.prox.reference import prox_bruteforce

    header(NAME, "prox24-kubler Lemma 3 (sign/sort reduction), Lemma 4 (three cases), Theorem 7 "
                 "(Alg. 1 is optimal), Sec. 3.3 (2:3 prox = eq. 11), vs brute force")
    rng = np.random.default_rng(7)
    count = 9 if quick else 300
    starts = 6 if quick else 20
    y, lam = _instances(rng, count)
    z = np.sort(np.abs(y), axis=1)[:, ::-1].copy()
    y3 = y[:, :3].copy()
    z3 = np.sort(np.abs(y3), axis=1)[:, ::-1]

    wb_y = prox_bruteforce(y, lam, starts=starts, seed=1)
    wb_z = prox_bruteforce(z, lam, starts=starts, seed=2)
    fb_y = prox_objective(wb_y, y, lam)[:, 0]
    fb_z = prox_objective(wb_z, z, lam)[:, 0]
    fb = np.minimum(fb_y, fb_z)
    w_alg = prox_nm(y, lam, method="ipm")  # Alg. 1 behind the library's sign/sort reduction
    thm7_excess = (prox_objective(w_alg, y, lam)[:, 0] - fb) / np.maximum(1.0, np.abs(fb))
    w_sorted = enum_ipm_sorted(z, lam)
    wb3 = prox_bruteforce(y3, lam, NM(2, 3), starts=starts, seed=3)
    fb3 = prox_objective(wb3, y3, lam, NM(2, 3))[:, 0]
    r23_excess = 0.0
    for meth in ("alm", "pgd", "ipm"):
        w3 = prox_nm(y3, lam, 2, 3, method=meth)
        f3 = prox_objective(w3, y3, lam, NM(2, 3))[:, 0]
        g3 = objective(np.sort(np.abs(w3), axis=1)[:, ::-1], z3, lam)  # eq. (12) at the sorted |w|
        r23_excess = max(r23_excess, float(np.max((np.maximum(f3, g3) - fb3) / np.maximum(1.0, np.abs(fb3)))))

    l3_bad = []
    cases = {"2-sparse": 0, "3-sparse": 0, "dense": 0}
    l4_bad = []
    for i in range(count):
        # Lemma 3
        same = abs(fb_y[i] - fb_z[i]) <= F_TOL * max(1.0, abs(fb_z[i]))
        nz = wb_y[i] != 0
        signs = bool(np.all(np.sign(wb_y[i][nz]) == np.sign(y[i][nz])))
        a, b = np.abs(y[i]), np.abs(wb_y[i])
        ordered = all(b[p] >= b[q] - 1e-7 for p in range(4) for q in range(4) if a[p] > a[q] + 1e-9)
        if not (same and signs and ordered):
            l3_bad.append(f"y={y[i].tolist()} lam={lam!r}: values {fb_y[i]!r} / {fb_z[i]!r}, "
                          f"signs {signs}, ordered {ordered}")
        # Lemma 4 (z_4 > 0 only)
        if z[i, 3] > 0:
            w = w_sorted[i]
            nnz = int(np.count_nonzero(w))
            z1 = z[i, 0]
            if nnz == 2 and np.all(w[:2] > 0):
                cases["2-sparse"] += 1
                good = np.max(np.abs(w - np.r_[z[i, :2], 0.0, 0.0])) <= 1e-12 * z1
            elif nnz == 3 and np.all(w[:3] > 0):
                cases["3-sparse"] += 1
                good = np.max(np.abs(gradient(w[:3], z[i, :3], lam))) <= 1e-9 * z1
            elif nnz == 4:
                cases["dense"] += 1
                good = np.max(np.abs(gradient(w, z[i], lam))) <= 1e-9 * z1
            else:
                good = False
            if not good:
                l4_bad.append(f"z={z[i].tolist()} lam={lam!r} w={w.tolist()}")

    figure("Lemma 3", f"{count} signed unsorted inputs: violations {len(l3_bad)}")
    for s in l3_bad[:5]:
        figure("  violation", s)
    figure("Lemma 4 cases (z_4 > 0)", f"{cases}; outside the three cases / wrong equations: {len(l4_bad)}")
    for s in l4_bad[:5]:
        figure("  violation", s)
    figure("Theorem 7: EnumIPM objective - brute force (rel.)", f"max {thm7_excess.max():.1e}, "
                                                                f"min {thm7_excess.min():.1e}")
    figure("Sec. 3.3 2:3 prox (alm, pgd, ipm) vs brute force, and g at it", f"max rel. excess {r23_excess:.1e}")

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.semilogy(np.sort(np.maximum(np.abs(thm7_excess), 1e-18)), "o", ms=3)
    ax.axhline(F_TOL, color="k", ls="--", lw=1)
    ax.set_xlabel("instance (sorted)")
    ax.set_ylabel("|f(Alg. 1) - f(brute force)| (rel.)")
    ax.set_title(f"Theorem 7 on {count} instances; Lemma 4 cases {cases}", fontsize=8)
    savefig(fig, out_dir, "kubler_alg1.png")

    ok3 = claim("kubler-lemma3", f"{len(l3_bad)} of {count} inputs violate value / sign / order",
                not l3_bad)
    ok4 = claim("kubler-lemma4", f"cases {cases}, {len(l4_bad)} outside them",
                not l4_bad and min(cases.values()) > 0)
    ok7 = claim("kubler-thm7", f"max rel. excess over brute force {thm7_excess.max():.1e} <= {F_TOL:g}",
                thm7_excess.max() <= F_TOL)
    ok23 = claim("kubler-sec33-r23", f"max rel. excess {r23_excess:.1e} <= {F_TOL:g}", r23_excess <= F_TOL)
    return verdict(NAME, ok3 and ok4 and ok7 and ok23, f"Lemma 3 {len(l3_bad)}, Lemma 4 {len(l4_bad)} "
                                                       f"violations; Thm 7 excess {thm7_excess.max():.1e}")
