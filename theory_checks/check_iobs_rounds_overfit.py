"""iobs-wu App. A.2, Figs. 2-3: I-OBS rounds improve after the first, then overfit.

"The quality of sparse solution significantly improves after first finetuning iteration. Then
there is small improvement during the next few iterations, followed by gradual performance
deterioration afterward. We speculate that this behavior is due to the overfitting on the
calibration set." (Llama-2 7B / Llama-3 8B: SparseGPT, then one epoch of dense fine-tuning on
the calibration set, repeated.)

Setting: the library's layer I-OBS, ``sparseopt.layer.prune(method="iobs")`` (iobs-wu Alg. 2:
a SparseGPT 2:4 solve with the current weights as target, then ``round_steps`` dense gradient
steps on the local loss, repeated), on the synthetic layers of ``maiht_layer_tables`` (64 x 128,
AR(1) input correlation 0.9, log-uniform channel scales): calibration Hessian from n = 2 d_in
samples, held-out Hessian from 8192 fresh samples; T = 12 rounds of 50 gradient steps (the
stand-in for one epoch of fine-tuning). The library returns the round of least calibration
loss; the sparse iterate of every round is read back from its SparseGPT calls, and each one's
calibration loss is checked against the recorded ``history["loss"]``. q_t is the relative
held-out loss of round t (round 1 is one-shot SparseGPT), c_t the calibration loss.

Claim ``iobs-a2-rounds`` holds when in every run: (1) q_2 <= 0.9 q_1 (a large gain after the
first round); (2) the held-out best round t* is in 2..6 and the gain from round 2 to it is
smaller than the first gain; (3) q_T >= 1.02 q_{t*} and no single round raises q by more than
the first gain lowered it (a gradual deterioration); (4) c_{t*+1} < c_{t*}: the held-out loss
turns while the calibration loss still falls (overfitting to the calibration inputs).

Printed, not tested: with 5 steps per round (the library default) the held-out loss saturates
without deteriorating within T rounds, and after a few more rounds the calibration loss rises
too (the late deterioration is then not only overfitting). What would make it fail: rounds that
do not change the mask solve (no gain after round 1), gradient steps that go the wrong way
(no gain), a read-back that does not match the library's history.
"""

from __future__ import annotations

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "iobs_rounds_overfit"
ROUNDS = 12
STEPS = 50


def round_iterates(W, H, pattern, **options):
    """(the library's PruneResult, [the sparse W_hat of every round]) of
    ``prune(W, H, "iobs", ...)``, read back from its SparseGPT calls."""
    import sparseopt.layer.iobs as iobs_mod
    from sparseopt.layer import prune

    orig = iobs_mod.sparsegpt_prune
    seen = []

    def recording(*args, **kw):
        r = orig(*args, **kw)
        seen.append(np.array(r.x, copy=True))
        return r

    iobs_mod.sparsegpt_prune = recording
    try:
        res = prune(W, H, "iobs", pattern=pattern, **options)
    finally:
        iobs_mod.sparsegpt_prune = orig
    return res, seen


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.layer import layer_loss
    from theory_checks.check_maiht_layer_tables import layer_with_inputs, rel_losses

    header(NAME, "App. A.2, Figs. 2-3: a large gain after the first I-OBS round, small gains, then a "
                 "gradual deterioration while the calibration loss still falls")
    seeds = range(2 if quick else 5)
    d_out, d_in = (32, 64) if quick else (64, 128)
    n_test = 4096 if quick else 8192
    pattern = NM(2, 4)
    ok, fails, curves = True, [], []
    for seed in seeds:
        W, Hc, Ht = layer_with_inputs(seed, d_out, d_in, 2 * d_in, n_test)
        res, iters = round_iterates(W, Hc, pattern, rounds=ROUNDS, round_steps=STEPS)
        hist = np.asarray(res.history["loss"])
        readback = len(iters) == ROUNDS and float(np.max(np.abs(
            [layer_loss(w, W, Hc) / h - 1.0 for w, h in zip(iters, hist)]))) <= 1e-9
        qc = np.array([rel_losses(w, W, Hc, Ht) for w in iters]) if iters else np.zeros((0, 2))
        if not readback:
            fails.append(f"seed {seed}: read-back of the rounds does not match the history")
            ok = False
            continue
        c, q = qc[:, 0], qc[:, 1]
        first_gain = q[0] - q[1]
        t_best = int(np.argmin(q)) + 1
        jumps = np.diff(q[t_best - 1:])
        c1 = q[1] <= 0.9 * q[0]
        c2 = 2 <= t_best <= 6 and (q[1] - q[t_best - 1]) < first_gain
        c3 = q[-1] >= 1.02 * q[t_best - 1] and (jumps.size == 0 or float(jumps.max()) < first_gain)
        c4 = t_best < ROUNDS and c[t_best] < c[t_best - 1]
        if not (c1 and c2 and c3 and c4):
            fails.append(f"seed {seed}: gain after round 1 {c1}, small gains to t* {c2}, "
                         f"gradual deterioration {c3}, calibration still falling at t* {c4}")
            ok = False
        _, few = round_iterates(W, Hc, pattern, rounds=ROUNDS, round_steps=5)
        q5 = np.array([rel_losses(w, W, Hc, Ht)[1] for w in few])
        curves.append((q, c, q5))
        figure(f"seed {seed} held-out q_t / calibration c_t, t = 1..{ROUNDS}",
               " ".join(f"{a:.4f}/{b:.4f}" for a, b in zip(q, c)))
        figure(f"seed {seed}", f"q_2 / q_1 = {q[1] / q[0]:.3f}; held-out best round {t_best} "
               f"(q {q[t_best - 1] / q[0]:.3f} q_1), q_T / q_best = {q[-1] / q[t_best - 1]:.3f}; "
               f"calibration best round {int(np.argmin(c)) + 1}; library's best round "
               f"{res.info['best_round']}; 5 steps per round: q_T / min q = {q5[-1] / q5.min():.3f} "
               f"(best round {int(np.argmin(q5)) + 1})")
    for line in fails:
        figure("not shown", line)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    t = np.arange(1, ROUNDS + 1)
    for q, c, q5 in curves:
        line, = ax1.plot(t, q / q[0], "o-")
        ax1.plot(t, q5 / q5[0], ":", color=line.get_color())
        ax2.plot(t, c / c[0], "o-", color=line.get_color())
    ax1.set_title(f"held-out loss ({STEPS} steps per round; dotted: 5)", fontsize=9)
    ax2.set_title("calibration loss", fontsize=9)
    for ax in (ax1, ax2):
        ax.set_xlabel("I-OBS round (1 = SparseGPT)")
        ax.set_ylabel("loss / round 1")
    fig.suptitle("I-OBS rounds on a synthetic 2:4 layer (cf. iobs-wu Figs. 2-3)")
    savefig(fig, out_dir, f"{NAME}.png")

    txt = (f"{len(seeds)} layers, {ROUNDS} rounds of {STEPS} steps: held-out loss -10% or more "
           f"after round 1, best in rounds 2-6, then up >= 2% gradually while the calibration loss "
           f"still falls at the turn: {ok}" + ("" if not fails else f" ({len(fails)} runs not shown)"))
    if curves:
        txt += (f"; q_2/q_1 {min(x[0][1] / x[0][0] for x in curves):.3f}.."
                f"{max(x[0][1] / x[0][0] for x in curves):.3f}, q_T/q_best "
                f"{min(x[0][-1] / x[0].min() for x in curves):.3f}.."
                f"{max(x[0][-1] / x[0].min() for x in curves):.3f}")
    claim("iobs-a2-rounds", txt, ok)
    return verdict(NAME, ok, txt)
