"""maiht-wen Remark 2.2 (and App. D.2): one IHT step from W^0 = W_hat is magnitude pruning.

At W_hat the layer loss has zero gradient, so W^1 = H_{sqrt(2 alpha lam)}(W_hat): exactly the
entries of W_hat with |w| > sqrt(2 alpha lam) survive (magnitude pruning). With the 2:4
projection of App. D.3 it is 2:4 magnitude pruning, and after the pre-pruning normalisation of
Sec. 4.1 (W <- W E^{-1}, H <- E H E with E = Diag(H)^{-1/2}, our row-major orientation) it is
Wanda (App. D.2). References: an independent threshold on W_hat, and the "magnitude" and
"wanda" methods of sparseopt.layer.prune. PASS if all arrays agree exactly.

Claim ``maiht-rem22`` rests on the l0 part only (against an independent threshold of W_hat);
the 2:4 and Wanda parts compare with library code that uses the same pattern projection and
are printed as consistency checks. What would make it fail: a first IHT step that thresholds
at another level than sqrt(2 alpha lam) or moves W_hat (a nonzero gradient at W_hat).
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_magnitude"


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.layer import prune
    from sparseopt.objectives import LayerLoss
    from sparseopt.solvers import iht
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "Remark 2.2: one IHT step from W_hat is magnitude pruning (l0 threshold, 2:4); "
                 "with the Sec. 4.1 normalisation it is Wanda (App. D.2)")
    ok = True
    mism = {"threshold": 0, "2:4 magnitude": 0, "2:4 Wanda": 0}
    for seed in range(3 if quick else 10):
        f = correlated_layer(seed, d_out=8, d_in=32)
        # heterogeneous input scales so that Wanda differs from magnitude
        scale = np.exp(np.random.default_rng(100 + seed).normal(0, 1, 32))
        H = f.H * np.outer(scale, scale)
        W_star = f.W_star
        g = LayerLoss(W_star, H)
        step = 1 / g.lipschitz()
        lam = np.quantile(np.abs(W_star), 0.5) ** 2 / (2 * step)  # threshold at the median
        r = iht(g, lam=lam, max_iter=1, tol=0.0)
        t = np.sqrt(2 * step * lam)
        mism["threshold"] += int(np.sum(r.x != np.where(np.abs(W_star) > t, W_star, 0.0)))
        r = iht(g, pattern=NM(2, 4), max_iter=1, tol=0.0)
        mag = prune(W_star, H, method="magnitude", pattern=NM(2, 4)).W
        mism["2:4 magnitude"] += int(np.sum(r.x != mag))
        d = np.sqrt(np.diag(H))
        gn = LayerLoss(W_star * d, H / np.outer(d, d))
        r = iht(gn, pattern=NM(2, 4), max_iter=1, tol=0.0)
        wanda = prune(W_star, H, method="wanda", pattern=NM(2, 4)).W
        mism["2:4 Wanda"] += int(np.sum((r.x / d != 0) != (wanda != 0)))
        mism["2:4 Wanda"] += int(np.sum(~np.isclose(r.x / d, wanda, rtol=1e-12, atol=0)))
        differs = int(np.sum((mag != 0) != (wanda != 0)))
        if seed == 0:
            figure("seed 0: entries where magnitude and Wanda 2:4 masks differ", differs)
            example = (W_star, r.x / d)
    for k, v in mism.items():
        figure(f"mismatching entries, {k}", v)
        ok &= v == 0
    W_star, W1 = example
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    axes[0].imshow(np.abs(W_star), aspect="auto")
    axes[0].set_title("|W_hat| (seed 0)")
    axes[1].imshow(W1 != 0, aspect="auto")
    axes[1].set_title("mask after one normalised IHT step = Wanda")
    savefig(fig, out_dir, f"{NAME}.png")
    claim("maiht-rem22", f"{mism['threshold']} entries of W^1 differ from H_sqrt(2 alpha lam)(W_hat) "
                         f"({3 if quick else 10} seeds)", mism["threshold"] == 0)
    return verdict(NAME, ok, "all three one-step identities hold exactly" if ok else "mismatch")
