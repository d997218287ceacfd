"""maiht-wen Sec. 4.2 / Fig. 1: mAIHT reaches IHT's final loss in fewer iterations.

Fig. 1 runs adaptive IHT and mAIHT (Alg. 1, lam adapted towards a target sparsity) on one layer
and plots the reconstruction error ||X W_hat - X W^k||^2 / ||X W_hat||^2 and the sparsity per
iteration. We do the same on layer problems with a strongly correlated Hessian (inputs with
AR(1) correlation 0.9): target 50% sparsity, the same step 0.95/L and start W*, K iterations
each. For IHT's returned point (projected onto the target support) with loss f_IHT we count
the first iteration at which each method has ||W^k||_0 <= target and f(W^k) <= f_IHT
(1 + 1e-6).
PASS if mAIHT needs fewer iterations than IHT in at least 80% of the adaptive runs (the
setting of Fig. 1). The same count is printed for the 2:4-constrained form (App. D.3), for which
the paper makes no such claim: there mAIHT is usually much faster but sometimes settles on a
slightly worse 2:4 fixed point and never reaches IHT's loss; that figure is informative only.

Claim ``maiht-fig1-faster`` (the adaptive form). Weakness (issue 11): when IHT reaches its own
final loss only at its last iteration the count favours mAIHT. "Better final solution" is
checked separately as ``maiht-fig1-final`` (mAIHT's final loss <= IHT's in >= 80% of the
adaptive runs). What would make it fail: an mAIHT without the momentum (it is then IHT and
ties), or one slower than IHT on most seeds.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_acceleration"


def first_reach(loss, support, target_loss, s):
    idx = np.flatnonzero((loss <= target_loss * (1 + 1e-6)) & (support <= s))
    return int(idx[0]) if idx.size else None


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.solvers import iht, maiht
    from theory_checks.check_maiht_descent import correlated_layer

    header(NAME, "Fig. 1: on a correlated Hessian mAIHT reaches IHT's final loss in fewer "
                 "iterations (adaptive lam to 50% sparsity, and the 2:4 form)")
    seeds = range(3 if quick else 8)
    K = 1500
    wins = {"adaptive": 0, "2:4": 0}
    better = []  # adaptive form: final loss of mAIHT / final loss of IHT
    curves = None
    for seed in seeds:
        f = correlated_layer(seed, d_out=16, d_in=64, rho=0.9)
        step = 0.95 / f.lipschitz()
        s = f.W_star.size // 2
        scale = f.value(np.zeros_like(f.W_star))  # ||X W_hat||^2 in the paper's notation
        for form, kw in (("adaptive", dict(target_nnz=s)), ("2:4", dict(pattern=NM(2, 4)))):
            a = iht(f, step=step, max_iter=K, tol=0.0, **kw)
            b = maiht(f, step=step, max_iter=K, tol=0.0, **kw)
            f_iht = f.value(a.x)
            s_form = s if form == "adaptive" else f.W_star.size // 2
            ka = first_reach(a.history["loss"], a.history["support"], f_iht, s_form)
            kb = first_reach(b.history["loss"], b.history["support"], f_iht, s_form)
            ka = K if ka is None else ka  # IHT's own returned point may be a projection
            win = kb is not None and kb < ka
            if form == "adaptive":
                better.append(f.value(b.x) / f_iht)
            wins[form] += win
            figure(f"seed {seed} {form:8s}", f"IHT {ka} iterations, mAIHT {kb} iterations to reach "
                   f"f_IHT = {f_iht / scale:.4f} (rel.); final rel. loss IHT {f_iht / scale:.4f}, "
                   f"mAIHT {f.value(b.x) / scale:.4f}")
            if seed == 0 and form == "adaptive":
                curves = (a.history, b.history, scale, s)
    n = len(seeds)
    for form in wins:
        figure(f"{form}: mAIHT faster", f"{wins[form]} of {n} runs")
    ha, hb, scale, s = curves
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for h, name in ((ha, "IHT"), (hb, "mAIHT")):
        ax1.semilogy(h["loss"][1:] / scale, label=name)
        ax2.plot(1 - h["support"] / h["support"][0], label=name)
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("relative reconstruction error")
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("sparsity")
    ax2.axhline(1 - s / ha["support"][0], color="k", ls=":")
    ax1.legend()
    fig.suptitle("adaptive IHT vs mAIHT, correlated Hessian (cf. maiht-wen Fig. 1)")
    savefig(fig, out_dir, f"{NAME}.png")
    ok = wins["adaptive"] >= 0.8 * n
    better = np.array(better)
    n_better = int(np.sum(better <= 1.0 + 1e-9))
    figure("adaptive: final loss mAIHT / IHT (per seed)", np.array2string(better, precision=4))
    ok_final = n_better >= 0.8 * n
    claim("maiht-fig1-final", f"mAIHT's final loss <= IHT's in {n_better} of {n} adaptive runs (>= 80%); "
                              f"ratios {better.min():.3f}..{better.max():.3f}", ok_final)
    ok = ok and ok_final
    claim("maiht-fig1-faster", f"mAIHT reaches IHT's final loss first in {wins['adaptive']} of {n} "
                               f"adaptive runs (>= 80%)", ok)
    return verdict(NAME, ok, f"adaptive: mAIHT faster in {wins['adaptive']}/{n} runs (>= 80%); "
                   f"2:4 (informative): {wins['2:4']}/{n}")
