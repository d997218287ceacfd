"""maiht-wen Lemma 3.2: L(W^k) is non-increasing for IHT (eq. 3) and mAIHT (eq. 4).

L(W) = f(W) + lam ||W||_0 with f the layer loss Tr((W - W*) H (W - W*)') on a correlated
Hessian, fixed lam, step alpha = 0.99 / L < 1/L, started at W^0 = W* (Alg. 1 line 2). The same
is checked for the constrained 2:4 form of App. D.3 (L = f on the pattern), from the first
projected iterate on. The figure is the largest increase L(W^{k+1}) - L(W^k) over all
iterations, relative to |L(W^k)|; PASS if it is <= 1e-12 (rounding) for every run.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import figure, header, savefig, verdict

NAME = "maiht_descent"


def correlated_layer(seed, d_out=16, d_in=64, n=256, rho=0.9):
    """LayerLoss(W*, H) with H = A A' / n, A = C^{1/2} G, C_ij = rho^|i-j| (correlated inputs)."""
    from sparseopt.objectives import LayerLoss

    rng = np.random.default_rng(seed)
    C = rho ** np.abs(np.subtract.outer(np.arange(d_in), np.arange(d_in)))
    A = np.linalg.cholesky(C) @ rng.standard_normal((d_in, n))
    return LayerLoss(rng.standard_normal((d_out, d_in)), A @ A.T / n)


def max_relative_increase(F):
    F = np.asarray(F, dtype=np.float64)
    inc = np.diff(F) / np.maximum(np.abs(F[:-1]), 1e-300)
    return float(np.max(inc)) if inc.size else -np.inf


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.solvers import iht, maiht

    header(NAME, "Lemma 3.2: L(W^k) = f(W^k) + lam ||W^k||_0 never increases, for IHT and mAIHT "
                 "(step 0.99/L, fixed lam), and for the 2:4-constrained form")
    seeds = range(2 if quick else 5)
    iters = 150 if quick else 600
    worst = -np.inf
    curves = {}
    for seed in seeds:
        f = correlated_layer(seed, d_out=8 if quick else 16, d_in=32 if quick else 64)
        step = 0.99 / f.lipschitz()
        lam = 0.02 * float(np.mean(f.W_star**2)) / step  # prunes a sizeable share
        for name, solver in (("IHT", iht), ("mAIHT", maiht)):
            for form, kw, start in (("l0", dict(lam=lam), 0), ("2:4", dict(pattern=NM(2, 4)), 1)):
                r = solver(f, step=step, max_iter=iters, tol=0.0, **kw)
                F = r.history["objective"][start:]
                inc = max_relative_increase(F)
                worst = max(worst, inc)
                figure(f"seed {seed} {name:5s} {form:3s}: {len(F) - 1} steps, max relative increase",
                       f"{inc:.2e} (final L = {F[-1]:.6g}, support {int(r.history['support'][-1])})")
                if seed == 0:
                    curves[(name, form)] = F
    figure("worst relative increase over all runs", f"{worst:.3e}")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, form in zip(axes, ("l0", "2:4")):
        lo = min(np.min(curves[(n, form)]) for n in ("IHT", "mAIHT"))
        for name in ("IHT", "mAIHT"):
            F = curves[(name, form)]
            ax.semilogy(np.arange(len(F)), F - lo + 1e-12 * abs(lo), label=name)
        ax.set_title(f"{form} form, seed 0")
        ax.set_xlabel("iteration k")
        ax.set_ylabel("L(W^k) - min L")
        ax.legend()
    savefig(fig, out_dir, f"{NAME}.png")
    return verdict(NAME, worst <= 1e-12, f"max relative increase {worst:.2e} <= 1e-12")
