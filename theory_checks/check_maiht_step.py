"""maiht-wen Sec. 3 (after Thm 3.4): "a larger step size can lead to a faster convergence rate".

Setting: the correlated LayerLoss of ``check_maiht_accel_rate`` (d_out x d_in = 4 x 16, rho =
0.5; 3 seeds, quick 2), L = 2 gamma_max(H), steps alpha in {0.1, 0.25, 0.5, 0.99} / L. The
threshold of eq. 3 is sqrt(2 alpha lam); lam = c / alpha with c = 0.3 mean(W*^2) / 2 keeps it
the same for every step, so the runs compare the step, not the threshold. IHT and mAIHT run
to tol 1e-13; for each run the per-iteration log-decay of the objective gap in its linear tail
after the support settles (``check_maiht_accel_rate.tail_decay``) and the iterations to tol.

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
    claim("maiht-sec3-larger-step", f"IHT and mAIHT on {len(seeds)} seeds: tail log-decay strictly "
                                    f"increasing and iterations non-increasing in alpha L = "
                                    f"{list(STEPS)}: {ok}", ok)
    return verdict(NAME, ok, "larger step, faster rate" if ok else "the rate does not grow with the step")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
