"""maiht-wen Remark 2.2 (and App. D.2): one IHT step from W^0 = W_hat is magnitude pruning.

At W_hat the layer loss has zero gradient, so W^1 = H_{sqrt(2 alpha lam)}(W_hat): exactly the
entries of W_hat with |w| > sqrt(2 alpha lam) survive (magnitude pruning). With the 2:4
projection of App. D.3 it is 2:4 magnitude pruning, and after the pre-pruning normalisation of
Sec. 4.1 (W <- W E^{-1}, H <- E H E with E = Diag(H)^{-1/2}, our row-major orientation) it is
Wanda (App. D.2).

All three parts are compared with references written here, independently of
``sparseopt.patterns`` and ``sparseopt.layer``:

- l0: the threshold test ``|W_hat_ij| > sqrt(2 alpha lam)`` on W_hat;
- 2:4 magnitude: brute force over the 6 supports of every 4-cell, keeping the support with
  the largest kept sum of squares ``sum w_j^2`` (the Euclidean projection onto 2:4);
- 2:4 Wanda: the same brute force with the scores ``w_j^2 H_jj`` (the loss of a diagonal H,
  eq. 3 of prox24-kubler), the kept weights unchanged.

PASS if every array agrees exactly (the Wanda weights to 1e-12 relative, after undoing the
normalisation). Claim ``maiht-rem22`` rests on all three. What would make it fail: a first IHT
step that thresholds at another level than sqrt(2 alpha lam) (e.g. sqrt(alpha lam)) or moves
W_hat (a nonzero gradient at W_hat), a 2:4 projection that keeps the wrong entries (smallest
instead of largest, 1 or 3 per cell, another grouping than consecutive 4-cells of a row), or a
normalisation that uses H_jj instead of H_jj^{1/2}.
"""

from __future__ import annotations

import itertools

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_magnitude"

#: the 6 supports of 2 out of 4, as boolean rows
_SUPPORTS_24 = np.array([[j in c for j in range(4)] for c in itertools.combinations(range(4), 2)])


def bruteforce_24(W, score):
    """Keep W where, in every consecutive 4-cell of a row, the 2-subset maximising the kept
    sum of ``score`` lies (enumerated over all 6 subsets); zero elsewhere."""
    W = np.asarray(W, dtype=np.float64)
    d_out, d_in = W.shape
    cells = np.asarray(score, dtype=np.float64).reshape(d_out, d_in // 4, 4)
    kept = cells @ _SUPPORTS_24.T.astype(np.float64)  # (d_out, cells, 6): kept score per subset
    best = _SUPPORTS_24[np.argmax(kept, axis=-1)]  # (d_out, cells, 4)
    return np.where(best.reshape(d_out, d_in), W, 0.0)


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.objectives import LayerLoss
    from sparseopt.solvers import iht
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "Remark 2.2: one IHT step from W_hat is magnitude pruning (l0 threshold, 2:4); "
                 "with the Sec. 4.1 normalisation it is Wanda (App. D.2); references: threshold "
                 "and brute force over the 6 supports of every 4-cell")
    ok = True
    mism = {"threshold": 0, "2:4 magnitude": 0, "2:4 Wanda": 0}
    n_seeds = 3 if quick else 10
    for seed in range(n_seeds):
        f = correlated_layer(seed, d_out=8, d_in=32)
        # heterogeneous input scales so that Wanda differs from magnitude
        scale = np.exp(np.random.default_rng(100 + seed).normal(0, 1, 32))
        H = f.H * np.outer(scale, scale)
        W_star = f.W_star
        g = LayerLoss(W_star, H)
        step = 1 / g.lipschitz()
        lam = np.quantile(np.abs(W_star), 0.5) ** 2 / (2 * step)  # threshold at the median
        r = iht(g, lam=lam, step=step, max_iter=1, tol=0.0)
        t = np.sqrt(2 * step * lam)
        mism["threshold"] += int(np.sum(r.x != np.where(np.abs(W_star) > t, W_star, 0.0)))
        r = iht(g, pattern=NM(2, 4), max_iter=1, tol=0.0)
        mag = bruteforce_24(W_star, W_star**2)
        mism["2:4 magnitude"] += int(np.sum(r.x != mag))
        h = np.diag(H).copy()
        d = np.sqrt(h)
        gn = LayerLoss(W_star * d, H / np.outer(d, d))
        r = iht(gn, pattern=NM(2, 4), max_iter=1, tol=0.0)
        wanda = bruteforce_24(W_star, W_star**2 * h[None, :])
        mism["2:4 Wanda"] += int(np.sum((r.x != 0) != (wanda != 0)))
        mism["2:4 Wanda"] += int(np.sum(~np.isclose(r.x / d, wanda, rtol=1e-12, atol=0)))
        differs = int(np.sum((mag != 0) != (wanda != 0)))
        if seed == 0:
            figure("seed 0: entries where the magnitude and Wanda 2:4 references differ", differs)
            example = (W_star, r.x / d)
    for k, v in mism.items():
        figure(f"mismatching entries, {k} ({n_seeds} seeds, 8 x 32)", v)
        ok &= v == 0
    W_star, W1 = example
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    axes[0].imshow(np.abs(W_star), aspect="auto")
    axes[0].set_title("|W_hat| (seed 0)")
    axes[1].imshow(W1 != 0, aspect="auto")
    axes[1].set_title("mask after one normalised IHT step = Wanda")
    savefig(fig, out_dir, f"{NAME}.png")
    claim("maiht-rem22", f"entries of W^1 differing from the references ({n_seeds} seeds): threshold "
                         f"{mism['threshold']}, 2:4 magnitude (brute force) {mism['2:4 magnitude']}, "
                         f"2:4 Wanda (brute force) {mism['2:4 Wanda']}", ok)
    return verdict(NAME, ok, "all three one-step identities hold exactly" if ok else "mismatch")
