"""prox24-kubler Sec. 4.2 / Fig. 3: the lambda schedule lambda_k = lambda_tilde_0 / Mean|W*| beta^k
(eq. 15) trades prox iterations for loss.

Problem: the Fig. 2 generator at alpha = 0.5 (correlated inputs), pruned to 2:4 by
:func:`sparseopt.prune` with ``method="prox"``, ``lam_tilde`` = lambda_tilde_0 (eq. 15,
Mean|W*| taken on the Wanda-rescaled weights the prox sees), growth ``beta``, followed by
1000 masked gradient steps (eq. 5). Iterations are counted until W is exactly 2:4
(``info["nit"]``); ``max_iter`` is set high enough that no run is cut off (checked).

Claims checked:

1. Scale (eq. 15 and the remark before it): if w* solves the prox problem (z, lambda), then
   c w* solves (c z, lambda / c) (r_{2:4} is homogeneous of degree 3), and H may be scaled
   freely (the step is 1 / (2 gamma_max(H)) and the Wanda rescaling normalises H). So with
   lambda_k of eq. 15 the whole pruner (Alg. 2 + 1000 masked GD steps) must be
   scale-equivariant: prune(c W*, s H) = c prune(W*, H) with the same mask and the same
   number of iterations. We test c = 2^-7 and 2^7 with s = 2^4 and 2^-4 (powers of two, so
   the arithmetic scales exactly): weights equal to 1e-9 relative, masks and iteration
   counts identical.
2. Loss: for every lambda_tilde_0, the slowest schedule (smallest beta) ends with a mean
   relative loss (+GD) no worse than the fastest (largest beta), up to a relative slack
   of 1e-3 (the measured difference is about 1e-3 in the quick run, a few percent in the
   full one); i.e. the extra iterations are not wasted.
3. Finite runtime (Sec. 3.6): every run ends exactly 2:4 before ``max_iter``.

The iteration counts (strictly fewer for larger beta and larger lambda_tilde_0) are printed
only: they follow from the schedule itself (a larger beta or lambda_tilde_0 reaches the
2:4-forcing lambda sooner). The paper's own Fig. 3 is on LLM layers; here the claim is
tested on synthetic layers only.

Claims ``kubler-eq15-scale`` (1.), ``kubler-fig3-schedule`` (2.) and ``kubler-sec36-finite``
(3.). What would make it fail: a schedule without the Mean|W*| of eq. 15 or with the wrong
power of it (1. fails: pruning c W* gives another mask or iteration count), a step that is
not 1 / (2 gamma_max(H)) of the rescaled H, a slower schedule ending at a worse loss (a
prox or gradient step that is wrong, so that more iterations do not help), a run that never
becomes 2:4 (a prox that does not reach exact sparsity at a finite lambda).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sparseopt.layer.prox import SCHEDULES
from sparseopt.problems import fig2_problem
from sparseopt.threads import one_thread
from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "layer_schedule"
SLACK = 1e-3
MAX_ITER = 100_000
#: (c, s): prune(c W*, s H) must be c prune(W*, H) (powers of two: exact arithmetic)
SCALES = ((2.0**-7, 2.0**4), (2.0**7, 2.0**-4))
SCALE_TOL = 1e-9


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
                 "Claim 1: prune(c W*, s H) = c prune(W*, H) (eq. 15 makes the schedule scale-free); "
                 f"claim 2: smallest beta's loss+GD <= largest beta's (slack {SLACK:g}); "
                 "claim 3: every run ends 2:4.")
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
                                lam_tilde=lt, max_iter=MAX_ITER,
                                schedule=replace(SCHEDULES["paper"], beta=beta))
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
    figure("iterations strictly decrease in beta (follows from the schedule; printed only)", ok_iter_beta)
    figure("iterations strictly decrease in lambda_tilde_0 (printed only)", ok_iter_lam)
    figure("smallest beta no worse than largest beta", ok_loss)

    # Claim 1: scale-equivariance of the eq. 15 schedule.
    W, H = fig2_problem(d, alpha, seed=seeds[0])
    kw = dict(method="prox", pattern=NM(2, 4), refine_steps=1000, lam_tilde=lam_tildes[-1],
              max_iter=MAX_ITER, schedule=replace(SCHEDULES["paper"], beta=betas[1]))
    with one_thread():
        ref = prune(W, H, **kw)
    scale_err, scale_ok = 0.0, True
    for c, sH in SCALES:
        with one_thread():
            res = prune(c * W, sH * H, **kw)
        err = float(np.max(np.abs(res.W / c - ref.W))) / float(np.max(np.abs(ref.W)))
        same_mask = bool(np.array_equal(res.mask, ref.mask))
        same_nit = res.info["nit"] == ref.info["nit"]
        scale_err = max(scale_err, err)
        scale_ok &= err <= SCALE_TOL and same_mask and same_nit
        figure(f"prune({c:g} W*, {sH:g} H) vs {c:g} prune(W*, H)", f"max rel. weight difference "
               f"{err:.1e}, same mask {same_mask}, iterations {res.info['nit']} vs {ref.info['nit']}")

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

    ok = scale_ok and ok_loss and cut == 0
    claim("kubler-sec36-finite", f"{cut} of {mean_nit.size * len(seeds)} runs of Alg. 2 cut off by max_iter = "
                                 f"{MAX_ITER}; largest mean iteration count {mean_nit.max():.0f}", cut == 0)
    claim("kubler-eq15-scale", f"prune(c W*, s H) = c prune(W*, H) for (c, s) = (2^-7, 2^4), (2^7, 2^-4): "
                               f"max rel. difference {scale_err:.1e} <= {SCALE_TOL:g}, same masks and "
                               f"iteration counts: {scale_ok}", scale_ok)
    claim("kubler-fig3-schedule", f"loss(beta={betas[0]}) / loss(beta={betas[-1]}) max {ratios.max():.4f} "
                                  f"<= 1 + {SLACK:g}; cut off {cut}", ok_loss and cut == 0)
    return verdict(NAME, ok, f"scale-equivariant (eq. 15): {scale_ok} (max rel. difference "
                             f"{scale_err:.1e}); loss ratio slow/fast schedule max {ratios.max():.4f} "
                             f"<= 1 + {SLACK:g}; cut off: {cut}; iterations monotone in beta: "
                             f"{ok_iter_beta}, in lambda_tilde_0: {ok_iter_lam} (printed only)")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
