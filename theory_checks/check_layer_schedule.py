"""prox24-kubler Sec. 4.2 / Fig. 3: the lambda schedule lambda_k = lambda_tilde_0 / Mean|W*| beta^k
(eq. 15) trades prox iterations for loss.

Problem: the Fig. 2 generator at alpha = 0.5 (correlated inputs), pruned to 2:4 by
:func:`sparseopt.prune` with ``method="prox"``, ``lam_tilde`` = lambda_tilde_0 (eq. 15,
Mean|W*| taken on the Wanda-rescaled weights the prox sees), growth ``beta``, followed by
1000 masked gradient steps (eq. 5). Iterations are counted until W is exactly 2:4
(``info["nit"]``); ``max_iter`` is set high enough that no run is cut off (checked).

Claims checked:

1. Iterations: for every lambda_tilde_0, the mean number of prox iterations strictly
   decreases as beta grows, and for every beta it strictly decreases as lambda_tilde_0
   grows (the schedule reaches the 2:4-forcing lambda sooner).
2. Loss: for every lambda_tilde_0, the slowest schedule (smallest beta) ends with a mean
   relative loss (+GD) no worse than the fastest (largest beta), up to a relative slack
   of 1e-3; i.e. the extra iterations are not wasted.

The paper's own Fig. 3 is on LLM layers; here the claim is tested on synthetic layers only.

Claims ``kubler-fig3-schedule`` (claims 1-2) and ``kubler-sec36-finite`` (every run of the
prox pruner, Alg. 2, with an exponential schedule ends exactly 2:4 before ``max_iter``). The
iteration part of claim 1 follows from the schedule itself (a larger beta or lambda_tilde_0
reaches the 2:4-forcing lambda sooner); the loss part is the substantive one. What would make
it fail: a slower schedule ending at a worse loss (a prox or gradient step that is wrong, so
that more iterations do not help), a run that never becomes 2:4 (a prox that does not reach
exact sparsity at a finite lambda).
"""

from __future__ import annotations

import numpy as np

from sparseopt.problems import fig2_problem
from sparseopt.threads import one_thread
from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "layer_schedule"
SLACK = 1e-3
MAX_ITER = 100_000


def run(out_dir, quick=False):
    """Sweep (beta, lambda_tilde_0), print the table, check claims 1-2, save
    ``layer_schedule.png``."""
    import matplotlib.pyplot as plt

    from sparseopt.layer import prune
    from sparseopt.patterns import NM

    if quick:
        d, seeds, betas, lam_tildes = 128, (0,), (1.01, 1.05, 1.1), (1e-3, 1e-1)
    else:
        d, seeds = 1024, (0, 1, 2)
        betas, lam_tildes = (1.005, 1.01, 1.02, 1.05, 1.1), (1e-4, 1e-3, 1e-2, 1e-1)
    alpha = 0.5
    header(NAME, f"prox24-kubler Fig. 3 / eq. 15 on the Fig. 2 problem (d={d}, alpha={alpha}, "
                 f"seeds={list(seeds)}): betas={list(betas)}, lambda_tilde_0={list(lam_tildes)}. "
                 "Claim 1: iterations strictly decrease in beta and in lambda_tilde_0; claim 2: "
                 f"smallest beta's loss+GD <= largest beta's (slack {SLACK:g}).")
    shape = (len(lam_tildes), len(betas), len(seeds))
    nit = np.zeros(shape)
    rel = np.zeros(shape)
    rel_nogd = np.zeros(shape)
    cut = 0
    for js, seed in enumerate(seeds):
        W, H = fig2_problem(d, alpha, seed=seed)
        base = float(W[0] @ H @ W[0])  # Tr(W* H W*'), the loss of pruning everything
        for il, lt in enumerate(lam_tildes):
            for ib, beta in enumerate(betas):
                with one_thread():  # one-row problem: threads only oversubscribe
                    res = prune(W, H, method="prox", pattern=NM(2, 4), refine_steps=1000,
                                lam_tilde=lt, beta=beta, max_iter=MAX_ITER)
                nit[il, ib, js] = res.info["nit"]
                rel[il, ib, js] = res.rel_loss
                rel_nogd[il, ib, js] = res.history["refine_loss"][0] / base
                cut += bool(res.info["projected"])
            print(f"  [schedule] seed={seed} lambda_tilde_0={lt:g}: iterations "
                  f"{nit[il, :, js].astype(int).tolist()}", flush=True)

    mean_nit, mean_rel, mean_nogd = nit.mean(axis=2), rel.mean(axis=2), rel_nogd.mean(axis=2)
    print("  mean over seeds: prox iterations | relative loss before GD -> after 1000 GD steps")
    print("  lam_tilde0  " + "".join(f"{'beta=' + str(b):>30s}" for b in betas))
    for il, lt in enumerate(lam_tildes):
        print(f"  {lt:10.0e}  " + "".join(
            f"{int(round(mean_nit[il, ib])):>8d} | {mean_nogd[il, ib]:.5f} -> "
            f"{mean_rel[il, ib]:.5f}"
            for ib in range(len(betas))))
    figure("runs cut off by max_iter", cut)

    ok_iter_beta = all(np.all(np.diff(mean_nit[il]) < 0) for il in range(len(lam_tildes)))
    ok_iter_lam = all(np.all(np.diff(mean_nit[:, ib]) < 0) for ib in range(len(betas)))
    ratios = mean_rel[:, 0] / mean_rel[:, -1]
    for il, lt in enumerate(lam_tildes):
        figure(f"lambda_tilde_0={lt:g}: loss(beta={betas[0]}) / loss(beta={betas[-1]})",
               f"{ratios[il]:.5f}")
    ok_loss = bool(np.all(ratios <= 1.0 + SLACK))
    figure("iterations strictly decrease in beta", ok_iter_beta)
    figure("iterations strictly decrease in lambda_tilde_0", ok_iter_lam)
    figure("smallest beta no worse than largest beta", ok_loss)

    from matplotlib.ticker import NullFormatter

    x = np.asarray(betas) - 1.0
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    for il, lt in enumerate(lam_tildes):
        ax0.plot(x, mean_rel[il], marker="o", label=fr"$\tilde\lambda_0$={lt:g}")
        ax1.plot(x, mean_nit[il], marker="o", label=fr"$\tilde\lambda_0$={lt:g}")
    for ax in (ax0, ax1):
        ax.set_xscale("log")  # beta - 1 on a log axis, labelled with beta
        ax.set_xticks(x, [str(b) for b in betas])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(r"$\beta$ (log scale in $\beta - 1$)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax0.set_ylabel("relative loss after prox + 1000 GD steps")
    ax1.set_ylabel("prox iterations until 2:4")
    ax1.set_yscale("log")
    fig.suptitle(fr"$\lambda_k=\tilde\lambda_0\beta^k/\mathrm{{Mean}}|W^*|$ (eq. 15), "
                 fr"Fig. 2 problem d={d}, $\alpha$={alpha}, {len(seeds)} seed(s)")
    savefig(fig, out_dir, "layer_schedule.png")

    ok = ok_iter_beta and ok_iter_lam and ok_loss and cut == 0
    claim("kubler-sec36-finite", f"{cut} of {mean_nit.size * len(seeds)} runs of Alg. 2 cut off by max_iter = "
                                 f"{MAX_ITER}; largest mean iteration count {mean_nit.max():.0f}", cut == 0)
    claim("kubler-fig3-schedule", f"loss(beta={betas[0]}) / loss(beta={betas[-1]}) max {ratios.max():.4f} "
                                  f"<= 1 + {SLACK:g}; iterations decrease in beta and lambda_tilde_0: "
                                  f"{ok_iter_beta and ok_iter_lam}; cut off {cut}", ok)
    return verdict(NAME, ok, f"iterations monotone in beta: {ok_iter_beta}, in lambda_tilde_0: "
                             f"{ok_iter_lam}; loss ratio slow/fast schedule max "
                             f"{ratios.max():.4f}; cut off: {cut}")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
