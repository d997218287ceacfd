"""prox24-kubler Lemma 10 (App. B.4): necessary conditions on lam for a sparse 2:4 prox optimum.

For sorted ``z_1 >= z_2 >= z_3 >= z_4 > 0`` the optimum of eq. (9) is

* never 2-sparse when ``lam < z_3 / (z_1 z_2)``  (``nu_3 = lam z_1 z_2 - z_3 >= 0``),
* never 3-sparse when ``lam < z_4 / (z_1 z_2 + z_2 z_3 + z_1 z_3)`` (the weak form of
  ``nu_4 = lam e_2(w_{1:3}) - z_4 >= 0``, using ``w_i <= z_i``).

Instances: ``lam = 1`` and ``z = c z0`` with ``z0`` = sorted ``|N(0, 1)|^4`` (a fifth of them
nearly tied, ``z0 = 1 + 0.01 |N(0, 1)|``), the scale ``c`` chosen so that
``lam / threshold(z) = s`` with ``s`` log-uniform in ``[0.05, 20]``, the threshold alternating
between the two formulas, so that many instances fall on either side of each. Optimum from EnumALM (``prox_nm(method="alm")``, exact zeros);
on a random subsample it is confirmed by EnumIPM (objective within 1e-10, same support).
The sharp 3-sparse condition ``lam e_2(w*_{1:3}) >= z_4`` is also checked at every 3-sparse
optimum (to 1e-9: it is a KKT condition of the computed optimum).
"""

from __future__ import annotations

import numpy as np

from sparseopt.demo.prox_paths import lemma10_thresholds
from sparseopt.regularizers import prox_objective

from ._report import figure, header, savefig, verdict

NAME = "lemma10"


def _instances(count, rng):
    """Sorted z with lam = 1; z scaled so that lam / threshold = s, s log-uniform in [0.05, 20].

    Both thresholds are homogeneous of degree -1 in z, so z = c z0 has threshold
    threshold(z0) / c; c = s * threshold(z0) gives lam / threshold(z) = s at lam = 1.
    """
    z0 = np.sort(np.abs(rng.standard_normal((count, 4))), axis=1)[:, ::-1]
    tied = rng.random(count) < 0.2
    z0[tied] = 1.0 + 0.01 * np.abs(rng.standard_normal((int(tied.sum()), 4)))
    z0 = np.sort(np.maximum(z0, 1e-3), axis=1)[:, ::-1].copy()  # Lemma 10 assumes z_4 > 0
    lam3, lam2 = lemma10_thresholds(z0)
    s = np.exp(rng.uniform(np.log(0.05), np.log(20.0), count))
    c = np.where(np.arange(count) % 2 == 0, s * lam2, s * lam3)
    return z0 * c[:, None], 1.0


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm

    header(NAME, "prox24-kubler Lemma 10: no 2-sparse optimum for lam < z3/(z1 z2), "
                 "no 3-sparse optimum for lam < z4/(z1 z2 + z2 z3 + z1 z3)")
    rng = np.random.default_rng(10)
    count = 20000 if quick else 400000
    z, lam = _instances(count, rng)
    lam3, lam2 = lemma10_thresholds(z)
    w = prox_nm(z, lam, method="alm")
    nnz = np.count_nonzero(w > 0, axis=1)

    sub = rng.choice(count, size=min(count, 2000 if quick else 20000), replace=False)
    w_ipm = prox_nm(z[sub], lam, method="ipm")
    f_alm = prox_objective(w[sub], z[sub], lam)[:, 0]
    f_ipm = prox_objective(w_ipm, z[sub], lam)[:, 0]
    ipm_gap = float(np.max(np.abs(f_alm - f_ipm) / np.maximum(1.0, np.abs(f_alm))))
    ipm_nnz = np.count_nonzero(w_ipm > 1e-9, axis=1)
    support_mismatch = int(np.count_nonzero(ipm_nnz != nnz[sub]))

    below2 = lam < lam2
    below3 = lam < lam3
    viol2 = below2 & (nnz <= 2)
    viol3 = below3 & (nnz == 3)
    e2 = w[:, 0] * w[:, 1] + w[:, 1] * w[:, 2] + w[:, 0] * w[:, 2]
    three = nnz == 3
    sharp_slack = lam * e2[three] - z[three, 3]
    sharp_viol = int(np.count_nonzero(sharp_slack < -1e-9))

    figure("instances", count)
    figure("optimum support sizes (2/3/4)", [int(np.sum(nnz == k)) for k in (2, 3, 4)])
    figure("instances with lam < z3/(z1 z2)", int(below2.sum()))
    figure("  ... of which 2-sparse optimum (violations)", int(viol2.sum()))
    figure("instances with lam < z4/(z1z2+z2z3+z1z3)", int(below3.sum()))
    figure("  ... of which 3-sparse optimum (violations)", int(viol3.sum()))
    figure("smallest lam / (z3/(z1 z2)) among 2-sparse optima", float(np.min((lam / lam2)[nnz <= 2])))
    figure("smallest lam / (z4/e2(z_1:3)) among 3-sparse optima", float(np.min((lam / lam3)[three])))
    figure("3-sparse optima violating lam e2(w*_1:3) >= z4 (-1e-9)", sharp_viol)
    figure("IPM subsample", f"{len(sub)} instances, max |f_ALM - f_IPM| / max(1, |f|) = {ipm_gap:.2e}, "
                            f"support mismatches = {support_mismatch}")
    for i in np.flatnonzero(viol2 | viol3)[:5]:
        figure("counterexample", f"z={z[i].tolist()} lam={lam!r} w={w[i].tolist()}")

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, ratio, lab in (
        (axes[0], lam / lam2, r"$\lambda\, z_1 z_2 / z_3$"),
        (axes[1], lam / lam3, r"$\lambda\, e_2(z_{1:3}) / z_4$"),
    ):
        bins = np.logspace(np.log10(ratio.min()), np.log10(ratio.max()), 60)
        for k, c in ((2, "C3"), (3, "C1"), (4, "C0")):
            ax.hist(ratio[nnz == k], bins=bins, histtype="step", color=c, label=f"{k}-sparse optimum")
        ax.axvline(1.0, color="k", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(lab)
        ax.legend(fontsize=8)
    axes[0].set_title("Lemma 10.1: no 2-sparse optimum left of the line", fontsize=9)
    axes[1].set_title("Lemma 10.2: no 3-sparse optimum left of the line", fontsize=9)
    savefig(fig, out_dir, "lemma10.png")

    ok = (viol2.sum() == 0 and viol3.sum() == 0 and sharp_viol == 0 and ipm_gap <= 1e-10
          and support_mismatch == 0 and below2.sum() > 0 and below3.sum() > 0)
    return verdict(NAME, ok, f"{int(viol2.sum())} + {int(viol3.sum())} violations in {count} instances")
