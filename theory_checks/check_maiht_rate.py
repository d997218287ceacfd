"""maiht-wen Thm 3.4 (1): the O(1/k) rate of IHT.

With W* = lim W^k and L* = lim L(W^k), there is a k_1 such that for all k > k_1
    L(W^k) - L* <= ||W^{k_1} - W*||_F^2 / (2 alpha (k - k_1)).
We run IHT (fixed lam, alpha = 0.99/L) on correlated layer problems to convergence (tol 1e-12),
take L* and W* from the last iterate, k_1 = the last iteration at which the support changed
(after it IHT is gradient descent on a fixed support, the situation of the proof), and check the
bound at every k > k_1 up to the point where the gap reaches rounding level (1e-12 relative).
The figure is max_k of gap / bound (PASS if <= 1). The plot shows gap and bound against k - k_1
on log-log axes.

Claim ``maiht-thm34-1``. The measured slack is large (gap / bound about 0.14), so this checks
the bound, not its constant. What would make it fail: an IHT that converges slower than
O(1/k) after the support settles (e.g. a step much smaller than the alpha in the bound), no
convergence.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_rate"


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt.solvers import iht
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "Thm 3.4 (1): L(W^k) - L* <= ||W^{k1} - W*||^2 / (2 alpha (k - k1)) for IHT")
    seeds = range(2 if quick else 5)
    worst = 0.0
    fig, ax = plt.subplots(figsize=(6, 4))
    for seed in seeds:
        f = correlated_layer(seed, d_out=4 if quick else 8, d_in=16 if quick else 32, rho=0.95)
        a = 0.99 / f.lipschitz()
        lam = 0.05 * float(np.mean(f.W_star**2)) / a
        r = iht(f, lam=lam, step=a, max_iter=300000, tol=1e-12)
        if not r.converged:
            figure(f"seed {seed}", f"IHT did not converge in {r.nit} iterations")
            claim("maiht-thm34-1", f"seed {seed}: IHT did not converge", False)
            return verdict(NAME, False, "no convergence")
        supp = r.history["support"]
        k1 = int(np.flatnonzero(np.diff(supp) != 0)[-1] + 1) if np.any(np.diff(supp)) else 0
        F = r.history["objective"]
        L_star, W_star_lim = F[-1], r.x
        # W^{k1}: rerun the same deterministic iteration for k1 steps
        W_k1 = iht(f, lam=lam, step=a, max_iter=k1, tol=0.0).x if k1 > 0 else f.W_star
        R2 = float(np.sum((W_k1 - W_star_lim) ** 2))
        ks = np.arange(k1 + 1, len(F))
        gap = F[k1 + 1 :] - L_star
        bound = R2 / (2 * a * (ks - k1))
        keep = gap > 1e-12 * abs(L_star)
        ratio = float(np.max(gap[keep] / bound[keep])) if keep.any() else 0.0
        worst = max(worst, ratio)
        figure(f"seed {seed}", f"{r.nit} iterations, k1 = {k1}, ||W^k1 - W*||^2 = {R2:.3e}, "
               f"max gap/bound = {ratio:.3f} over {int(keep.sum())} iterations")
        line, = ax.loglog(ks[keep] - k1, gap[keep], label=f"gap, seed {seed}")
        ax.loglog(ks[keep] - k1, bound[keep], "--", color=line.get_color())
    ax.set_xlabel("k - k1")
    ax.set_ylabel("L(W^k) - L*   (dashed: Thm 3.4 bound)")
    ax.legend(fontsize=7)
    savefig(fig, out_dir, f"{NAME}.png")
    figure("max gap / bound over all seeds", f"{worst:.3f}")
    claim("maiht-thm34-1", f"max gap/bound {worst:.3f} <= 1 over {len(seeds)} seeds", worst <= 1.0)
    return verdict(NAME, worst <= 1.0, f"max gap/bound {worst:.3f} <= 1")
