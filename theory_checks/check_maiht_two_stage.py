"""maiht-wen Sec. 4.2, Fig. 1: the two stages of adaptive IHT / mAIHT (Alg. 1).

"The iterative process of our algorithm is divided into two stages. In the first stage, the
support gradually shrinks to the desired sparsity level [...]. In the second stage, proximal
gradient descent is used to optimize the reconstruction error."

Setting: the layer problems of ``maiht_acceleration`` (LayerLoss 16 x 64, inputs with AR(1)
correlation 0.9), adaptive lam of Alg. 1 towards 50% sparsity, step alpha = 0.95 / L, W^0 = W*,
K iterations (tol 0), with the library's ``iht`` and ``maiht``. Every iterate W^k is read back
from the points at which the solver evaluated the objective (IHT: one per iterate; mAIHT: Z^k
and V^k, W^k the one ``history["accepted"]`` names) and checked against the recorded history
(f(W^k) and ||W^k||_0), so a wrong read-back fails the check instead of measuring something else.

Measured per run: k_a, the first iteration with ||W^k||_0 <= s (stage 1 ends); the iterations
after k_a at which the support set changes; the longest window [k_s, k_e) after k_a on which it
is fixed (S), and on it the gap f(W^k) - f(W*_S) to the exact minimiser of f on S
(``check_maiht_rate.restricted_minimiser``) against the closed form of projected gradient
descent on S with step alpha from W^{k_s} (``check_maiht_rate.predicted_gap``).

Claim ``maiht-fig1-two-stage`` holds when in every run: (1) stage 1 is short, k_a <= K / 5, and
the loss f peaks in it (argmax_k f(W^k) <= k_a); (2) the longest fixed-support window covers at
least half of stage 2 and the final loss is below f(W^{k_a}); (3) on that window IHT is projected
gradient descent on S with step alpha: measured gap = closed form to 1e-8 relative (its linear
rate is that of P_S GD, max |1 - 2 alpha gamma_i(H_SS)|, printed), and mAIHT's gap at the end
of its window is at most half of what P_S GD reaches from the same point in as many steps.

The finding (PARTIAL): the support does not stop changing for good. The adaptive rule leaves
||W^k||_0 a little below s, so lam keeps falling by the factor 1 - (s - ||W^k||_0) / (d1 d2)
each iteration and, after a window of fixed support, lets entries back in (printed).
The "exponential shape" of the sparsity schedule is printed (the count per iteration), not
tested. What would make it fail: an IHT whose step is not alpha (the window's gap leaves the
closed form), an mAIHT without its momentum (no faster than P_S GD), an adaptive rule that never
reaches the target or keeps changing the support throughout stage 2, a loss that does not fall
in stage 2.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_two_stage"
MATCH_TOL = 1e-8  # IHT on a fixed support vs the closed form of P_S GD (relative)
ACCEL_FACTOR = 0.5  # mAIHT's window-end gap <= this x P_S GD's from the same start
STAGE1_SHARE = 0.2  # k_a <= this x K
WINDOW_SHARE = 0.5  # the longest fixed-support window covers >= this share of stage 2


def recording_layer(f):
    """A LayerLoss like ``f`` that keeps a copy of every point at which the solver asks for its
    value and gradient (``points``)."""
    from sparseopt.objectives import LayerLoss

    class Recording(LayerLoss):
        def __init__(self, W_star, H):
            super().__init__(W_star, H)
            self.points = []

        def value_and_grad(self, W):
            self.points.append(np.array(W, copy=True))
            return super().value_and_grad(W)

    return Recording(f.W_star, f.H)


def iterates(rec, result, accelerated):
    """W^0..W^K from the recorded points (IHT: every point; mAIHT: Z^k or V^k by ``accepted``);
    None when the result has no ``accepted`` history (not mAIHT's)."""
    P = rec.points
    if not accelerated:
        return P[: len(result.history["loss"])]
    if "accepted" not in result.history or len(P) < 2 * len(result.history["accepted"]) - 1:
        return None
    acc = result.history["accepted"]
    return [P[0]] + [P[2 * k - 1] if acc[k] == 1 else P[2 * k] for k in range(1, len(acc))]


def stages(W, loss, s):
    """(k_a, support-change iterations after k_a, longest fixed-support window (a, b) after k_a)."""
    count = np.array([np.count_nonzero(w) for w in W])
    reached = np.flatnonzero(count <= s)
    if reached.size == 0:
        return None, [], (len(W), len(W))
    ka = int(reached[0])
    changes = [k for k in range(ka + 1, len(W)) if not np.array_equal(W[k] != 0, W[k - 1] != 0)]
    bounds = [ka] + changes + [len(W)]
    a, b = max(zip(bounds[:-1], bounds[1:]), key=lambda w: w[1] - w[0])
    return ka, changes, (a, b)


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt.solvers import iht, maiht
    from theory_checks.check_maiht_descent import correlated_layer
    from theory_checks.check_maiht_rate import predicted_gap, predicted_rate, restricted_minimiser

    header(NAME, "Fig. 1: adaptive IHT / mAIHT run in two stages: the support shrinks to the "
                 "target, then (on a fixed support) projected gradient descent lowers the error")
    seeds = range(2 if quick else 5)
    K = 300
    ok = True
    all_st = np.ones(3, dtype=bool)  # stage 1, stage 2, rate: in every run
    worst_match, worst_accel, fails = 0.0, 0.0, []
    curves = {}
    for seed in seeds:
        base = correlated_layer(seed, d_out=16, d_in=64, rho=0.9)
        for name, solver, accel in (("IHT", iht, False), ("mAIHT", maiht, True)):
            f = recording_layer(base)
            step = 0.95 / f.lipschitz()
            s = f.W_star.size // 2
            r = solver(f, step=step, target_nnz=s, max_iter=K, tol=0.0)
            loss = np.asarray(r.history["loss"], dtype=np.float64)
            W = iterates(f, r, accel)
            if W is None:
                fails.append(f"seed {seed} {name}: the result has no accepted history (not mAIHT)")
                ok = False
                continue
            readback = max(abs(f.value(w) - l) / max(abs(l), 1e-300) for w, l in zip(W, loss))
            counts_ok = all(np.count_nonzero(w) == c for w, c in zip(W, r.history["support"]))
            ka, changes, (a, b) = stages(W, loss, s)
            if ka is None or readback > 1e-12 or not counts_ok:
                fails.append(f"seed {seed} {name}: target never reached or read-back wrong "
                             f"({readback:.1e}, counts {counts_ok})")
                ok = False
                continue
            peak = int(np.argmax(loss))
            S = W[a] != 0
            W_opt = restricted_minimiser(f.W_star, f.H, S)
            gap = loss[a:b] - f.value(W_opt)
            pred = predicted_gap(f.H, S, W[a] - W_opt, step, np.arange(b - a))
            rho = predicted_rate(f.H, S, step)
            share = (b - a) / (len(W) - ka)
            st1 = ka <= STAGE1_SHARE * K and peak <= ka
            st2 = share >= WINDOW_SHARE and loss[-1] < loss[ka]
            if accel:
                ratio = float(gap[-1] / pred[-1])
                worst_accel = max(worst_accel, ratio)
                st3 = ratio <= ACCEL_FACTOR
                rate_txt = f"gap at window end / P_S GD's {ratio:.3g} (<= {ACCEL_FACTOR})"
            else:
                match = float(np.max(np.abs(gap / pred - 1.0)))
                worst_match = max(worst_match, match)
                st3 = match <= MATCH_TOL
                rate_txt = f"gap = closed form of P_S GD to {match:.1e} (<= {MATCH_TOL:g})"
            rho_meas = (gap[-1] / gap[0]) ** (1.0 / (2 * max(b - a - 1, 1))) if gap[0] > 0 else np.nan
            all_st &= (st1, st2, st3)
            if not (st1 and st2 and st3):
                fails.append(f"seed {seed} {name}: stage 1 {st1}, stage 2 {st2}, rate {st3}")
                ok = False
            figure(f"seed {seed} {name:5s}",
                   f"k_a = {ka}, loss peak at {peak}; {len(changes)} support changes after k_a "
                   f"(last at {changes[-1] if changes else '-'}); fixed support on [{a}, {b}) = "
                   f"{share:.0%} of stage 2; {rate_txt}; mean rate {rho_meas:.5f}, P_S GD slowest "
                   f"{rho:.5f}; lam at the end {r.history['lam'][-1]:.3g}, ||W^K||_0 = "
                   f"{int(r.history['support'][-1])} (s = {s})")
            if seed == 0:
                curves[name] = (loss, np.asarray(r.history["support"]), ka, (a, b), s)
                figure(f"seed 0 {name} count every 5 iterations up to k_a + 5",
                       np.array2string(np.asarray(r.history["support"][: ka + 6 : 5]).astype(int)))
    for line in fails:
        figure("not shown", line)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, (loss, count, ka, (a, b), s) in curves.items():
        line, = ax1.plot(loss / loss.max(), label=name)
        ax1.axvspan(a, b, color=line.get_color(), alpha=0.08)
        ax1.axvline(ka, color=line.get_color(), ls=":")
        ax2.plot(1 - count / count[0], label=name, color=line.get_color())
    ax1.set_yscale("log")
    ax1.set_xlabel("iteration (dotted: target reached; shaded: fixed support)")
    ax1.set_ylabel("reconstruction error / its maximum")
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("sparsity")
    ax1.legend()
    fig.suptitle("two stages of adaptive IHT / mAIHT, seed 0 (cf. maiht-wen Fig. 1)")
    savefig(fig, out_dir, f"{NAME}.png")

    txt = (f"{len(seeds)} seeds x (IHT, mAIHT), K = {K}: target reached by K/5 with the loss peak "
           f"in stage 1: {all_st[0]}; a fixed support on >= {WINDOW_SHARE:.0%} of stage 2 and a "
           f"lower final loss: {all_st[1]}; on it IHT = P_S GD with step alpha to "
           f"{worst_match:.1e} (<= {MATCH_TOL:g}), mAIHT's gap <= {worst_accel:.3g} x P_S GD's "
           f"(<= {ACCEL_FACTOR})" + ("" if not fails else f"; {len(fails)} runs not shown"))
    claim("maiht-fig1-two-stage", txt, ok)
    return verdict(NAME, ok, txt)
