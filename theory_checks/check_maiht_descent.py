"""maiht-wen Lemma 3.2: L(W^k) is non-increasing for IHT (eq. 3) and mAIHT (eq. 4).

L(W) = f(W) + lam ||W||_0 with f the layer loss Tr((W - W*) H (W - W*)') on a correlated
Hessian, fixed lam, step alpha = 0.99 / L < 1/L, started at W^0 = W* (Alg. 1 line 2). The same
is checked for the constrained 2:4 form of App. D.3 (L = f on the pattern), from the first
projected iterate on. The figure is the largest increase L(W^{k+1}) - L(W^k) over all
iterations, relative to |L(W^k)|; PASS if it is <= 1e-12 (rounding) for every run.

Lemma B.4 / Prop. B.5 (1) sharpen this for IHT (penalised form): L(W^{k-1}) - L(W^k) >=
(1/alpha - L)/2 ||W^k - W^{k-1}||^2, checked at every step with ||W^k - W^{k-1}|| from the
history (``residual`` x step); the figure is the worst slack relative to |L(W^k)| (>= -1e-12).
Prop. B.5 (4): the support changes only finitely often, because (eq. 8) every change after
the first step moves W by ||W^k - W^{k-1}||^2 >= 2 alpha lam; with the iterates of the
production ``iht`` (one call per step, chained) every support change must satisfy eq. 8 and
their number must obey the bound of the proof, #changes <= (L(W^1) - L(W^K)) /
((1/alpha - L) alpha lam).

Prop. B.6 (1) for mAIHT: L(W^{k+1}) <= L(V^{k+1}) <= L(W^k) - (1/alpha_2 - L)/2 ||V^{k+1} - W^k||^2,
V^{k+1} the monitor step (one IHT step from W^k, computed here with the production ``iht``);
W^k is the result of ``maiht(max_iter=k)`` (deterministic; checked against the history of one
long run), for every k of a shorter run.

Claims ``maiht-lemma32``, ``maiht-lemmaB4`` (with Prop. B.5 (1), (4)) and ``maiht-propB6``. What
makes it fail (tested): mAIHT without its monitor step (the extrapolated Z^{k+1} always taken:
L rises on some step and W^{k+1} is worse than V^{k+1}), a threshold sqrt(alpha lam) (not the
l0 prox: support changes move W by less than eq. 8's 2 alpha lam, Prop. B.5 (4) fails; L
itself still falls on these problems); also a history whose objective is not f + lam ||W||_0.
A step in (1/L, 2/L) voids the lemmas' premise but not, on these problems, their conclusion
(measured at 1.6, 1.95 and 2.0 x 0.99/L: L still falls), so it does not make the check fail.
Prop. B.5 (3) / B.6 (3) (``maiht-propB5-B6-3``) is the telescoped Lemma B.4 / Prop. B.6 (1)
with about 300x slack; none of these breaks makes it fail.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

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

    # Lemma B.4 / Prop. B.5: sufficient decrease and finitely many support changes (IHT, l0)
    worst_b4 = -np.inf
    worst_b53 = -np.inf
    b5_bad = []
    for seed in seeds:
        f = correlated_layer(seed, d_out=8 if quick else 16, d_in=32 if quick else 64)
        L = f.lipschitz()
        step = 0.99 / L
        lam = 0.02 * float(np.mean(f.W_star**2)) / step
        r = iht(f, lam=lam, step=step, max_iter=iters, tol=0.0)
        F = r.history["objective"]
        dW2 = (r.history["residual"][1:] * step) ** 2
        slack = (F[:-1] - F[1:] - 0.5 * (1 / step - L) * dW2) / np.maximum(np.abs(F[1:]), 1e-300)
        worst_b4 = max(worst_b4, -float(np.min(slack)))
        # Prop. B.5 (3): min_{k <= M} ||W^k - W^{k-1}||^2 <= 2 (L(W^0) - L*) / (M (1/alpha - L)),
        # with L* <= L(W^K) (the bound with L(W^K) is the stricter one)
        M = np.arange(1, len(dW2) + 1)
        rhs = 2 * (F[0] - F[-1]) / (M * (1 / step - L))
        worst_b53 = max(worst_b53, float(np.max((np.minimum.accumulate(dW2) - rhs) / np.maximum(rhs, 1e-300))))
        W, changes, eq8 = f.W_star, 0, True
        for k in range(1, iters + 1):  # the production step, one call each
            Wn = iht(f, lam=lam, step=step, max_iter=1, tol=0.0, x0=W).x
            if k >= 2 and np.any((Wn != 0) != (W != 0)):
                changes += 1
                eq8 &= float(np.sum((Wn - W) ** 2)) >= 2 * step * lam * (1 - 1e-12)
            W = Wn
        same = np.array_equal(W, r.x)
        bound = (F[1] - F[-1]) / ((1 / step - L) * step * lam)
        figure(f"seed {seed} IHT l0: Lemma B.4 worst slack (rel.)",
               f"{-float(np.min(slack)):.1e}; support changes after step 1: {changes} <= bound "
               f"{bound:.1f}, each with ||dW||^2 >= 2 alpha lam: {eq8}; chained = one run: {same}")
        if not (changes <= bound and eq8 and same):
            b5_bad.append(seed)
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
    # Prop. B.6 (1): mAIHT against its monitor step V^{k+1}
    worst_b6 = -np.inf
    worst_b63 = -np.inf
    b6_consistent = True
    kb6 = 40 if quick else 150
    for seed in seeds:
        f = correlated_layer(seed, d_out=8, d_in=32)
        L = f.lipschitz()
        step = 0.99 / L
        lam = 0.02 * float(np.mean(f.W_star**2)) / step
        F_long = maiht(f, lam=lam, step=step, max_iter=kb6, tol=0.0).history["objective"]
        W = f.W_star
        dV2 = []
        for k in range(kb6):
            W_next = maiht(f, lam=lam, step=step, max_iter=k + 1, tol=0.0).x
            V = iht(f, lam=lam, step=step, max_iter=1, tol=0.0, x0=W).x
            LW = f.value(W) + lam * np.count_nonzero(W)
            LV = f.value(V) + lam * np.count_nonzero(V)
            LW1 = f.value(W_next) + lam * np.count_nonzero(W_next)
            b6_consistent &= abs(LW1 - F_long[k + 1]) <= 1e-12 * abs(F_long[k + 1])
            scale = max(abs(LW), 1e-300)
            worst_b6 = max(worst_b6, (LW1 - LV) / scale,
                           (LV - LW + 0.5 * (1 / step - L) * float(np.sum((V - W) ** 2))) / scale)
            dV2.append(float(np.sum((V - W) ** 2)))
            W = W_next
        # Prop. B.6 (3): min_{k <= M} ||V^k - W^{k-1}||^2 <= 2 (L(W^0) - L*) / (M (1/alpha_2 - L))
        M = np.arange(1, kb6 + 1)
        rhs = 2 * (F_long[0] - F_long[-1]) / (M * (1 / step - L))
        worst_b63 = max(worst_b63, float(np.max((np.minimum.accumulate(dV2) - rhs) / np.maximum(rhs, 1e-300))))
    figure("Prop. B.5 (3) IHT / B.6 (3) mAIHT: worst (min step^2 - bound) / bound over M",
           f"{worst_b53:.2e} / {worst_b63:.2e}")
    figure("Prop. B.6 (1) mAIHT: worst violation relative to L(W^k)",
           f"{worst_b6:.1e} over {len(seeds)} x {kb6} steps; iterates consistent with one run: {b6_consistent}")
    ok1 = claim("maiht-lemma32", f"max relative increase {worst:.2e} <= 1e-12 (IHT, mAIHT; l0 and 2:4)",
                worst <= 1e-12)
    ok2 = claim("maiht-lemmaB4", f"worst sufficient-decrease violation {worst_b4:.1e} <= 1e-12 (rel.); "
                                 f"Prop. B.5 (4) support-change bound broken on seeds {b5_bad or 'none'}",
                worst_b4 <= 1e-12 and not b5_bad)
    ok3 = claim("maiht-propB6", f"worst violation {worst_b6:.1e} <= 1e-12 (rel.) over {len(seeds)} x {kb6} "
                                f"mAIHT steps; iterates consistent: {b6_consistent}",
                worst_b6 <= 1e-12 and b6_consistent)
    ok4 = claim("maiht-propB5-B6-3", f"min_k<=M step^2 / bound: worst relative excess IHT {worst_b53:.1e}, "
                                     f"mAIHT {worst_b63:.1e} <= 1e-9 for every M",
                worst_b53 <= 1e-9 and worst_b63 <= 1e-9)
    return verdict(NAME, ok1 and ok2 and ok3 and ok4, f"max relative increase {worst:.2e} <= 1e-12; Lemma B.4 "
                                      f"{worst_b4:.1e} <= 1e-12")
