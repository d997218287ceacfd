"""Scale covariance of the N:M prox: prox_{(lam/c) r}(c y) = c prox_{lam r}(y) for c > 0.

With w = u / c and y = v / c, 0.5||w - y||^2 + lam r_{N:M}(w) = c^-2 (0.5||u - v||^2 +
(lam / c) r_{N:M}(u)) because r_{N:M} (prox24-kubler eq. 6) is homogeneous of degree N + 1 = 3
for 2:4 and 2:3 (and of degree N + 1 in general, so the rule reads lam / c^(N-1)). Checked
for the three 2:4 solvers (ALM, PGD, IPM), the 2:3 ones, and ALM on 1:4, 2:8 and 3:8 (where
the exponent is N - 1), on random ``y ~ N(0, 1)`` groups and random ``c`` (log-uniform in
[1e-2, 1e2]) and ``lam`` (log-uniform in [1e-2, 1e1]); one batched ``prox_nm`` call per
(c, lam) pair (2000 groups; IPM, a slow batched NumPy reference: 200). Criterion: relative
objective mismatch ``|f_{cy}(w_c) - c^2 f_y(w)| / (c^2 (1 +
f_y(w)))`` <= 1e-10 and ``max |w_c - c w| / (c max|y|)`` <= 1e-6.

EnumALM and EnumIPM solve every group as z / z_1 with lam z_1^(N-1), so for them the
covariance only tests that this normalisation has the right exponent: a wrong normalised
solver would give the same wrong answer on both sides. Hence the second part: both sides,
prox(y, lam) and prox(c y, lam / c^(N-1)), are compared with the independent multi-start
``prox_bruteforce`` (L-BFGS-B on the unscaled problem, no normalisation, no sorting) for
2:4 and 2:3 (all three methods) and 1:4 (ALM), c log-uniform in [1e-2, 1e2], lam in
[1e-2, 1e1]: relative objective excess over brute force <= 1e-9 on every group. And
r_{N:M}(c w) = |c|^(N+1) r_{N:M}(w) itself (the library's ``r_nm_groups``, every pattern,
negative c too) to 1e-13 relative.

Claims ``kubler-eq6-homogeneous`` (the degree) and ``kubler-prox-scale`` (the covariance
with optimal sides). What would make it fail: a normalisation with the wrong exponent, a
solver that is wrong at some scale (caught by brute force), a regularizer of another degree.
"""

from __future__ import annotations

import numpy as np

from sparseopt import NM
from sparseopt.regularizers import prox_objective, r_nm_groups

from ._report import claim, figure, header, savefig, verdict, wanted

NAME = "scale_covariance"

CASES = [
    (2, 4, "alm"), (2, 4, "pgd"), (2, 4, "ipm"),
    (2, 3, "alm"), (2, 3, "pgd"), (2, 3, "ipm"),
    (1, 4, "alm"), (2, 8, "alm"), (3, 8, "alm"),
]
OBJ_TOL = 1e-10
W_TOL = 1e-6


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm

    header(NAME, "prox(c y, lam / c^(N-1)) = c prox(y, lam) (r_{N:M} homogeneous of degree N+1)")
    rng = np.random.default_rng(5)
    pairs, groups = (3, 200) if quick else (40, 2000)
    results = {}
    for n, m, meth in CASES:
        # EnumIPM is a batched NumPy reference, ~100x slower per group: fewer groups
        Y = rng.standard_normal((groups // 10 if meth == "ipm" else groups, m))
        worst_f = worst_w = 0.0
        for _ in range(pairs):
            c = float(np.exp(rng.uniform(np.log(1e-2), np.log(1e2))))
            lam = float(np.exp(rng.uniform(np.log(1e-2), np.log(1e1))))
            lam_c = lam / c ** (n - 1)
            w = prox_nm(Y, lam, n, m, method=meth)
            w_c = prox_nm(c * Y, lam_c, n, m, method=meth)
            f = prox_objective(w, Y, lam, NM(n, m))[:, 0]
            f_c = prox_objective(w_c, c * Y, lam_c, NM(n, m))[:, 0]
            worst_f = max(worst_f, float(np.max(np.abs(f_c - c * c * f) / (c * c * (1.0 + f)))))
            worst_w = max(worst_w, float(np.max(np.abs(w_c - c * w)) / (c * np.max(np.abs(Y)))))
        results[(n, m, meth)] = (worst_f, worst_w)
        figure(f"{n}:{m} {meth}", f"{pairs} (c, lam) pairs x {Y.shape[0]} groups: rel. objective "
                                  f"mismatch {worst_f:.2e}, rel. w mismatch {worst_w:.2e}")

    if wanted():  # the plot: unrestricted runs only
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3.6))
        labels = [f"{n}:{m}\n{meth}" for n, m, meth in results]
        x = np.arange(len(labels))
        ax.bar(x - 0.2, [max(v[0], 1e-17) for v in results.values()], 0.4, label="objective")
        ax.bar(x + 0.2, [max(v[1], 1e-17) for v in results.values()], 0.4, label="weights")
        ax.axhline(OBJ_TOL, color="C0", ls="--", lw=1)
        ax.axhline(W_TOL, color="C1", ls="--", lw=1)
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("worst relative mismatch")
        ax.legend(fontsize=8)
        savefig(fig, out_dir, "scale_covariance.png")

    worst_f = max(v[0] for v in results.values())
    worst_w = max(v[1] for v in results.values())

    # r_{N:M}(c w) = |c|^(N+1) r_{N:M}(w)
    hom = 0.0
    for n, m in {(n, m) for n, m, _ in CASES} | {(0, 4), (1, 8)}:
        W = rng.standard_normal((200, m))
        for c in (-3.7, 0.01, 55.0):
            r = np.asarray(r_nm_groups(W, NM(n, m)))[:, 0]
            rc = np.asarray(r_nm_groups(c * W, NM(n, m)))[:, 0]
            hom = max(hom, float(np.max(np.abs(rc - abs(c) ** (n + 1) * r) / (abs(c) ** (n + 1) * r))))
    figure("r(c w) = |c|^(N+1) r(w)", f"max rel. error {hom:.1e}")

    # both sides optimal: independent brute force on the unscaled problems
    from sparseopt.prox.reference import prox_bruteforce

    n_pairs, n_groups = (2, 2) if quick else (12, 4)
    bf_excess = 0.0
    bf_count = 0
    for n, m, methods in ((2, 4, ("alm", "pgd", "ipm")), (2, 3, ("alm", "pgd", "ipm")), (1, 4, ("alm",))):
        for _ in range(n_pairs):
            c = float(np.exp(rng.uniform(np.log(1e-2), np.log(1e2))))
            lam = float(np.exp(rng.uniform(np.log(1e-2), np.log(1e1))))
            lam_c = lam / c ** (n - 1)
            Y = rng.standard_normal((n_groups, m))
            for yy, ll in ((Y, lam), (c * Y, lam_c)):
                wb = prox_bruteforce(yy, ll, NM(n, m), starts=4 if quick else 10)
                fb = prox_objective(wb, yy, ll, NM(n, m))[:, 0]
                for meth in methods:
                    f = prox_objective(prox_nm(yy, ll, n, m, method=meth), yy, ll, NM(n, m))[:, 0]
                    bf_excess = max(bf_excess, float(np.max((f - fb) / np.maximum(np.abs(fb), 1e-300))))
                    bf_count += n_groups
    figure("both sides vs prox_bruteforce", f"{bf_count} (group, method) pairs, largest rel. objective "
                                            f"excess {bf_excess:.1e}")

    ok_h = claim("kubler-eq6-homogeneous", f"max rel. error {hom:.1e} <= 1e-13", hom <= 1e-13)
    ok_s = claim("kubler-prox-scale", f"covariance: objective {worst_f:.1e} <= {OBJ_TOL:g}, weights "
                                      f"{worst_w:.1e} <= {W_TOL:g}; vs brute force {bf_excess:.1e} <= 1e-9",
                 worst_f <= OBJ_TOL and worst_w <= W_TOL and bf_excess <= 1e-9)
    ok = ok_h and ok_s
    return verdict(NAME, ok, f"objective {worst_f:.1e} <= {OBJ_TOL:g}, weights {worst_w:.1e} <= {W_TOL:g}, "
                             f"brute force excess {bf_excess:.1e}")
