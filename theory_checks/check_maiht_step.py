"""maiht-wen Sec. 3 (after Thm 3.4): "a larger step size can lead to a faster convergence rate".

Setting: the correlated LayerLoss of ``check_maiht_accel_rate`` (d_out x d_in = 4 x 16, rho =
0.5; 3 seeds, quick 2), L = 2 gamma_max(H), steps alpha in {0.1, 0.25, 0.5, 0.99} / L. The
threshold of eq. 3 is sqrt(2 alpha lam); lam = c / alpha with c = 0.3 mean(W*^2) / 2 keeps it
the same for every step, so the runs compare the step, not the threshold. IHT and mAIHT run
to tol 1e-13; for each run the per-iteration log-decay of the objective gap in its linear tail
after the support settles (``check_maiht_accel_rate.tail_decay``) and the iterations to tol.

Claim ``maiht-sec4-step`` (DEVIATES): Sec. 4's step alpha = 0.95 / ||X'X||_2 with mu = 0.1 is
above 1 / L for the mu-problem (L = ||X'X|| + mu by Remark 2.3); on the normalised problem X'X
= I IHT's L(W) = f + lam ||W||_0 rises with it (Lemma 3.2 fails) and does not with 0.95 / ||X'X
+ mu I||, the step ``sparseopt.layer`` takes (``sec4_step``).

Claim ``maiht-sec3-larger-step``: for IHT and mAIHT on every seed the tail log-decay
increases strictly with alpha and the iteration count does not increase. Figures: the decays
and counts; IHT's decay against its closed form (1 - 2 alpha lambda_min(H_SS))^2 on the
slowest row is printed. What would make it fail: a solver that ignores the step it is given
(tested: every run at 0.25 / L), or one whose rate does not depend on it.
"""

from __future__ import annotations

import numpy as np

from ._report import claim, figure, header, savefig, verdict
from .check_maiht_accel_rate import _k2, tail_decay

NAME = "maiht_step"
STEPS = (0.1, 0.25, 0.5, 0.99)


MU = 0.1


def sec4_step(d=400, iters=30, seed=0):
    """Sec. 4's step alpha = 0.95 / ||X'X||_2 with mu = 0.1 on the normalised problem X'X = I:
    by Remark 2.3 the objective is 0.5 (1 + mu) ||w - w_hat||^2, L = 1 + mu and alpha L =
    1.045 > 1. IHT (eq. 3, the library's ``iht`` on that ``Quadratic``) from 0 with lam = 1 and
    w_hat^2 in [1, 2.5]: the largest rise of F = f + lam ||w||_0 over ``iters`` steps with the
    paper's step (Lemma 3.2's descent fails: a coordinate with w_hat^2 just above 1.74 lam is
    kept at 1.045 w_hat for a cost lam above its 0.55 w_hat^2) and with 0.95 / ||X'X + mu I||
    (no rise beyond rounding). Returns (ok, figure text)."""
    import sparseopt.solvers as solvers
    from sparseopt.objectives import Quadratic

    rng = np.random.default_rng(seed)
    w_hat = np.sqrt(rng.uniform(1.0, 2.5, d)) * rng.choice([-1.0, 1.0], d)
    f = Quadratic((1 + MU) * np.eye(d), (1 + MU) * w_hat)
    rise = {}
    for label, alpha in (("paper", 0.95 / 1.0), ("corrected", 0.95 / (1.0 + MU))):
        w, worst = np.zeros(d), -np.inf
        F = lambda v: float(f.value(v)) + float(np.count_nonzero(v))  # noqa: E731
        for _ in range(iters):
            w1 = solvers.iht(f, lam=1.0, step=alpha, x0=w, max_iter=1, tol=0.0).x
            worst = max(worst, (F(w1) - F(w)) / max(1.0, abs(F(w))))
            w = w1
        rise[label] = worst
    ok = rise["paper"] > 1e-3 and rise["corrected"] <= 1e-12
    return ok, (f"alpha L = {0.95 * (1 + MU):.3f} > 1: largest relative rise of L(W) {rise['paper']:.2e} "
                f"(> 1e-3: Lemma 3.2's descent fails); alpha = 0.95 / ||X'X + mu I||, alpha L = 0.95: "
                f"{rise['corrected']:.1e} <= 1e-12")


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    import sparseopt.solvers as solvers
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "maiht-wen Sec. 3: a larger step size (alpha < 1/L) gives a faster convergence rate "
                 "(IHT and mAIHT, same threshold sqrt(2 alpha lam))")
    seeds = range(2 if quick else 3)
    ok = True
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for seed in seeds:
        f = correlated_layer(seed, d_out=4, d_in=16, rho=0.5)
        L = float(f.lipschitz())
        c = 0.3 * float(np.mean(f.W_star ** 2)) / 2
        for name, style in (("iht", "-o"), ("maiht", "--s")):
            decay, nits = [], []
            for s in STEPS:
                a = s / L
                r = getattr(solvers, name)(f, lam=c / a, step=a, max_iter=200_000, tol=1e-13)
                decay.append(tail_decay(np.asarray(r.history["objective"]), _k2(r.history)))
                nits.append(r.nit)
            decay = np.array(decay)
            good = bool(np.all(np.isfinite(decay)) and np.all(np.diff(decay) > 0)
                        and np.all(np.diff(nits) <= 0))
            ok &= good
            figure(f"seed {seed} {name}", f"tail log-decay {np.array2string(decay, precision=4)}, "
                                          f"iterations {nits} at alpha L = {list(STEPS)}: {good}")
            ax.plot(STEPS, decay, style, label=f"{name}, seed {seed}", ms=4)
    ax.set_xlabel("alpha L")
    ax.set_ylabel("tail log-decay of the gap per iteration")
    ax.set_title("maiht-wen Sec. 3: larger step, faster rate", fontsize=9)
    ax.legend(fontsize=7)
    savefig(fig, out_dir, f"{NAME}.png")
    # Sec. 4's step on the mu-problem (Remark 2.3: X'X + mu I), normalised diagonal X'X = I
    ok_s4, txt_s4 = sec4_step()
    figure("Sec. 4 step 0.95 / ||X'X|| with mu = 0.1 vs 0.95 / ||X'X + mu I||", txt_s4)
    ok &= ok_s4
    claim("maiht-sec4-step", txt_s4, ok_s4)
    claim("maiht-sec3-larger-step", f"IHT and mAIHT on {len(seeds)} seeds: tail log-decay strictly "
                                    f"increasing and iterations non-increasing in alpha L = "
                                    f"{list(STEPS)}: {ok}", ok)
    return verdict(NAME, ok, "larger step, faster rate" if ok else "the rate does not grow with the step")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
