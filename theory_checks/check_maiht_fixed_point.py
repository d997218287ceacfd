"""maiht-wen Def. 3.1 and Thm 3.3: the limits of IHT and mAIHT are alpha-fixed points, and
F(alpha_1) contains F(alpha_2) for alpha_1 <= alpha_2, strictly on these problems.

Def. 3.1: W is an alpha-fixed point of L = f + lam ||.||_0 iff
    W in Prox_{alpha lam ||.||_0}(W - alpha grad f(W)),
the prox being the set-valued hard thresholding at sqrt(2 alpha lam) (both 0 and v at
|v| = sqrt(2 alpha lam)). We transcribe this map here, independently of sparseopt (gradient
2 (W - W_hat) H of f(W) = Tr((W - W_hat) H (W - W_hat)') from the problem's data, our own
thresholding), and measure the residual
    r_alpha(W) = max_ij dist(W_ij, Prox(W - alpha grad f(W))_ij) / max |W_hat|
(0 iff W in F(alpha)). The entrywise form below Def. 3.1 is printed as a second measure.

1. Thm 3.3 (claim ``maiht-thm33``): IHT and mAIHT with alpha_2 = 0.99/L, run to convergence
   on correlated layer problems: r_{alpha_2}(limit) <= 1e-8.
2. Nesting (claim ``maiht-def31-nesting``): every alpha_2-limit W is left in place by the
   map of Def. 3.1 at every alpha_1 = q alpha_2, q in {0.75, ..., 0.01}, both the
   transcription (r_{alpha_1}(W) <= 1e-8) and the production IHT step (sparseopt's ``iht``,
   one step from x0 = W with step alpha_1: ||W^1 - W|| / max|W_hat| <= 1e-8); and the
   inclusion is strict: the limits of IHT run with alpha_1 = alpha_2 / 8 lie in F(alpha_2 / 8)
   (r <= 1e-8) but, on most seeds (>= 1 required), not in F(alpha_2) (r_{alpha_2} > 1e-3, and
   the production step with alpha_2 moves them by more than 1e-3).

What would make it fail: a solver whose limit is not a fixed point of its own step (a wrong
threshold, e.g. sqrt(alpha lam), a gradient off by a factor, no convergence); a production
step whose threshold does not scale as sqrt(2 alpha lam) with the step (then the nesting via
the production step or the strictness fails); a wrong transcription of Def. 3.1 (then the
converged limits would fail 1.).
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_fixed_point"
TOL = 1e-8
STRICT = 1e-3


def fixed_point_violation(f, W, lam, alpha):
    """Largest relative violation of the entrywise alpha-fixed-point conditions (0 if none)."""
    g = f.grad(W)
    on = W != 0
    gscale = max(float(np.max(np.abs(g))), np.sqrt(2 * lam / alpha), 1e-300)
    v_grad = float(np.max(np.abs(g[on]), initial=0.0)) / gscale
    thr_on = np.sqrt(2 * alpha * lam)
    v_mag = float(np.max(thr_on - np.abs(W[on]), initial=0.0)) / max(thr_on, 1e-300)
    thr_off = np.sqrt(2 * lam / alpha)
    v_off = float(np.max(np.abs(g[~on]) - thr_off, initial=0.0)) / max(thr_off, 1e-300)
    return max(v_grad, v_mag, v_off, 0.0)


def def31_residual(W_hat, H, W, lam, alpha):
    """r_alpha(W): distance of W from Prox_{alpha lam ||.||_0}(W - alpha grad f(W)) (Def. 3.1),
    entrywise max, relative to max |W_hat|; the prox is the set-valued hard thresholding."""
    W_hat, H, W = (np.asarray(a, dtype=np.float64) for a in (W_hat, H, W))
    V = W - alpha * 2.0 * (W - W_hat) @ H
    t = np.sqrt(2.0 * alpha * lam)
    keep = np.abs(W - V)  # distance to the branch "v" of the prox
    zero = np.abs(W)  # distance to the branch "0"
    dist = np.where(np.abs(V) > t, keep, np.where(np.abs(V) < t, zero, np.minimum(keep, zero)))
    return float(np.max(dist)) / float(np.max(np.abs(W_hat)))


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt.solvers import iht, maiht
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "Def. 3.1 / Thm 3.3: IHT and mAIHT limits are alpha_2-fixed points (Def. 3.1's "
                 "map, transcribed independently), and F(alpha_2) is a subset of F(alpha_1) for "
                 "alpha_1 <= alpha_2 (transcription and production step), strictly")
    seeds = range(3 if quick else 8)
    ratios = np.array([1.0, 0.75, 0.5, 0.25, 0.1, 0.01])
    worst_a2 = 0.0  # claim 1
    worst_nest = 0.0  # claim 2, transcription
    worst_step = 0.0  # claim 2, production step
    worst_small = 0.0  # small-step limits in F(alpha_2 / 8)
    worst_entry = 0.0  # the entrywise form, printed
    n_conv = 0
    strict = 0
    table = []
    for seed in seeds:
        f = correlated_layer(seed, d_out=4 if quick else 8, d_in=16 if quick else 32, rho=0.8)
        W_hat, H = f.W_star, f.H
        scale = float(np.max(np.abs(W_hat)))
        L = f.lipschitz()
        a2 = 0.99 / L
        lam = 0.05 * float(np.mean(W_hat**2)) / a2
        for name, solver in (("IHT", iht), ("mAIHT", maiht)):
            r = solver(f, lam=lam, step=a2, max_iter=200000, tol=1e-10)
            if not r.converged:
                figure(f"seed {seed} {name}", f"did not converge in {r.nit} iterations")
                worst_a2 = worst_nest = np.inf
                continue
            n_conv += 1
            v = [def31_residual(W_hat, H, r.x, lam, a2 * q) for q in ratios]
            steps = [float(np.max(np.abs(iht(f, lam=lam, step=a2 * q, x0=r.x, max_iter=1,
                                             tol=0.0).x - r.x))) / scale for q in ratios[1:]]
            worst_a2 = max(worst_a2, v[0])
            worst_nest = max(worst_nest, max(v[1:]))
            worst_step = max(worst_step, max(steps))
            worst_entry = max(worst_entry, fixed_point_violation(f, r.x, lam, a2))
            table.append(v)
            figure(f"seed {seed} {name:5s} ({r.nit:5d} it, support {np.count_nonzero(r.x)})",
                   "Def. 3.1 residual at alpha_1/alpha_2 = " + ", ".join(
                       f"{q:g}: {x:.1e}" for q, x in zip(ratios, v))
                   + f"; production step at alpha_1 < alpha_2 moves it by <= {max(steps):.1e}")
        # limits reached with a small step: fixed points for a2 / 8, not always for a2
        r1 = iht(f, lam=lam, step=a2 / 8, max_iter=400000, tol=1e-10)
        v1 = def31_residual(W_hat, H, r1.x, lam, a2 / 8)
        worst_small = max(worst_small, v1 if r1.converged else np.inf)
        v12 = def31_residual(W_hat, H, r1.x, lam, a2)
        moved = float(np.max(np.abs(iht(f, lam=lam, step=a2, x0=r1.x, max_iter=1, tol=0.0).x
                                    - r1.x))) / scale
        strict += v12 > STRICT and moved > STRICT
        figure(f"seed {seed} IHT with alpha_2/8", f"Def. 3.1 residual in F(alpha_2/8): {v1:.1e}; "
               f"in F(alpha_2): {v12:.1e}; the production step with alpha_2 moves it by {moved:.1e}")
    figure("worst entrywise violation at alpha_2 (form below Def. 3.1)", f"{worst_entry:.2e}")
    figure("worst Def. 3.1 residual of the limits at alpha_2", f"{worst_a2:.2e}")
    figure("worst Def. 3.1 residual at alpha_1 < alpha_2 (nesting)", f"{worst_nest:.2e}")
    figure("worst move of the production step at alpha_1 < alpha_2", f"{worst_step:.2e}")
    figure("small-step limits in F(alpha_2/8) but NOT in F(alpha_2)", f"{strict} of {len(seeds)} "
           f"(their worst residual in F(alpha_2/8): {worst_small:.1e})")
    fig, ax = plt.subplots(figsize=(6, 4))
    T = np.maximum(np.array(table), 1e-18) if table else np.ones((1, len(ratios)))
    for row in T:
        ax.semilogy(ratios, row, "o-", alpha=0.6)
    ax.axhline(TOL, color="k", ls="--", label="tolerance")
    ax.set_xlabel("alpha_1 / alpha_2")
    ax.set_ylabel("Def. 3.1 residual r_alpha_1 of the limit")
    ax.set_title("limits of IHT / mAIHT (alpha_2 = 0.99/L)")
    ax.legend()
    savefig(fig, out_dir, f"{NAME}.png")
    ok1 = worst_a2 <= TOL and n_conv > 0
    ok2 = worst_nest <= TOL and worst_step <= TOL and worst_small <= TOL and strict >= 1 and n_conv > 0
    claim("maiht-thm33", f"{n_conv} converged IHT / mAIHT limits: worst Def. 3.1 residual at alpha_2 "
                         f"{worst_a2:.1e} <= {TOL:g}", ok1)
    claim("maiht-def31-nesting", f"alpha_2-limits fixed at alpha_1 = (0.01..0.75) alpha_2: residual "
                                 f"{worst_nest:.1e}, production step {worst_step:.1e} (<= {TOL:g}); "
                                 f"strict: {strict} of {len(seeds)} alpha_2/8-limits not in F(alpha_2)",
          ok2)
    return verdict(NAME, ok1 and ok2, f"limits: residual {worst_a2:.1e}; nesting {worst_nest:.1e} / "
                                      f"step {worst_step:.1e} <= {TOL:g}; strict in {strict}/{len(seeds)}")
