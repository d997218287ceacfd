"""prox24-kubler Sec. 4.1, toy problem: Wanda and SparseGPT miss the 2:4 optimum, prox finds it.

One row ``w* = (0, 5, 3, 2, 0, 5, 5, 2)`` and a Hessian that is the identity except
that inputs 4 and 8 are perfectly correlated (``H[3, 7] = H[7, 3] = 1``). The paper
states that Wanda and SparseGPT end at ``(0, 5, 3, 0, 0, 5, 5, 0)`` while the
optimum, found by prox, is ``(0, 5, 0, 4, 0, 5, 5, 0)``: the two '2's merge into
one '4' and the '3' is pruned instead.

The reference is brute force over all ``C(4, 2)^2 = 36`` masks; for each mask the
best weights solve ``H_SS w_S = (H w*)_S`` (the zero-gradient condition of eq. 2 on
the kept set S). H is singular here (its 4/8 block is ``[[1, 1], [1, 1]]``), so
H_SS can be singular too: we use ``numpy.linalg.lstsq``, which returns a minimizer
because the system is always consistent for a PSD H.
"""

from __future__ import annotations

import itertools

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "layer_toy"
W_STAR = np.array([[0.0, 5.0, 3.0, 2.0, 0.0, 5.0, 5.0, 2.0]])
PAPER_GREEDY = np.array([[0.0, 5.0, 3.0, 0.0, 0.0, 5.0, 5.0, 0.0]])
PAPER_OPTIMUM = np.array([[0.0, 5.0, 0.0, 4.0, 0.0, 5.0, 5.0, 0.0]])
ATOL = 1e-6


def toy_problem():
    """``(W_star, H)`` of prox24-kubler Sec. 4.1 (float64, W_star of shape (1, 8))."""
    H = np.eye(8)
    H[3, 7] = H[7, 3] = 1.0
    return W_STAR.copy(), H


def layer_loss_ref(W, W_star, H):
    """``Tr((W - W*) H (W - W*)')`` (prox24-kubler eq. 2), in float64."""
    D = np.asarray(W, dtype=np.float64) - np.asarray(W_star, dtype=np.float64)
    return float(np.einsum("ij,jk,ik->", D, np.asarray(H, dtype=np.float64), D))


def best_weights_on_mask(w_star, H, keep):
    """Minimizer of ``(w - w*)' H (w - w*)`` over ``w`` supported on ``keep`` (one row).

    Solves ``H_SS w_S = (H w*)_S`` with ``lstsq`` (H_SS may be singular; the system is
    consistent because H is PSD, so any least-squares solution is a minimizer).
    """
    w_star = np.asarray(w_star, dtype=np.float64)
    keep = np.flatnonzero(keep)
    w = np.zeros_like(w_star)
    if keep.size:
        rhs = (H @ w_star)[keep]
        w[keep] = np.linalg.lstsq(H[np.ix_(keep, keep)], rhs, rcond=None)[0]
    return w


def bruteforce_nm(W_star, H, n=2, m=4, *, max_masks=200_000):
    """Exact N:M pruning of every row by enumerating all masks (exponential; small d only).

    Parameters
    ----------
    W_star : ndarray, shape (d_out, d)
    H : ndarray, shape (d, d), symmetric PSD
    n, m : int
        Keep exactly ``n`` entries in every group of ``m`` (keeping fewer is never better,
        since a kept weight may be zero).
    max_masks : int
        Refuse problems with more than this many masks per row.

    Returns
    -------
    W : ndarray, shape (d_out, d)
        Optimal N:M weights.
    mask : ndarray of bool
    loss : float
        ``Tr((W - W*) H (W - W*)')``.
    row_losses : ndarray, shape (d_out, n_masks)
        Loss of every mask (with its optimal weights) for every row, masks in
        ``itertools.product`` order of the per-group ``combinations``.
    """
    W_star = np.atleast_2d(np.asarray(W_star, dtype=np.float64))
    H = np.asarray(H, dtype=np.float64)
    d = W_star.shape[1]
    if d % m:
        raise ValueError(f"W_star has {d} columns, not divisible by m={m}")
    if H.shape != (d, d):
        raise ValueError(f"H must have shape ({d}, {d}), got {H.shape}")
    groups = d // m
    combos = list(itertools.combinations(range(m), n))
    n_masks = len(combos) ** groups
    if n_masks > max_masks:
        raise ValueError(f"{n_masks} masks per row exceed max_masks={max_masks}")
    masks = []
    for choice in itertools.product(combos, repeat=groups):
        keep = np.zeros(d, dtype=bool)
        for g, c in enumerate(choice):
            keep[[g * m + j for j in c]] = True
        masks.append(keep)
    W = np.zeros_like(W_star)
    mask = np.zeros(W_star.shape, dtype=bool)
    row_losses = np.empty((W_star.shape[0], n_masks))
    for r, w_star in enumerate(W_star):
        best = None
        for k, keep in enumerate(masks):
            w = best_weights_on_mask(w_star, H, keep)
            loss = layer_loss_ref(w[None], w_star[None], H)
            row_losses[r, k] = loss
            if best is None or loss < best[0]:
                best = (loss, w, keep)
        W[r], mask[r] = best[1], best[2]
    return W, mask, layer_loss_ref(W, W_star, H), row_losses


def run(out_dir, quick=False):
    """Run the toy check (``quick`` changes nothing: the problem is tiny)."""
    import matplotlib.pyplot as plt

    from sparseopt.layer import prune
    from sparseopt.patterns import NM

    header(NAME, "prox24-kubler Sec. 4.1 toy: Wanda/SparseGPT -> (0,5,3,0,0,5,5,0) "
                 "(loss 16), prox+GD -> optimum (0,5,0,4,0,5,5,0) (loss 9), "
                 "optimum verified by brute force over all 36 2:4 masks")
    W_star, H = toy_problem()
    figure("w*", W_star[0].tolist())
    figure("H", "identity with H[3,7] = H[7,3] = 1 (singular: brute force uses lstsq)")

    W_bf, mask_bf, loss_bf, row_losses = bruteforce_nm(W_star, H)
    n_opt = int(np.sum(row_losses[0] <= loss_bf + 1e-9))
    figure("brute force: masks searched", row_losses.shape[1])
    figure("brute force optimum", np.round(W_bf[0], 6).tolist())
    figure("brute force optimal loss", f"{loss_bf:.6g} (attained by {n_opt} mask(s))")

    runs = {}
    for method in ("wanda", "sparsegpt", "prox"):
        for steps in (0, 1000):
            opts = {"schedule": "paper"} if method == "prox" else {}  # Alg. 2 as published
            res = prune(W_star, H, method=method, pattern=NM(2, 4), refine_steps=steps, **opts)
            key = method + ("+GD" if steps else "")
            runs[key] = res
            figure(f"{key:13s} W", np.round(np.asarray(res.W, dtype=np.float64)[0], 4).tolist())
            figure(f"{key:13s} loss", f"{float(res.loss):.6g}  (eq. 2 recomputed: "
                   f"{layer_loss_ref(res.W, W_star, H):.6g})")

    checks = {
        "brute-force optimum == paper's optimum": np.allclose(W_bf, PAPER_OPTIMUM, atol=ATOL)
        and abs(loss_bf - 9.0) < ATOL and n_opt == 1,
        "wanda == (0,5,3,0,0,5,5,0)": np.allclose(runs["wanda"].W, PAPER_GREEDY, atol=ATOL),
        "sparsegpt == (0,5,3,0,0,5,5,0)": np.allclose(runs["sparsegpt"].W, PAPER_GREEDY,
                                                      atol=ATOL),
        "prox+GD == optimum": np.allclose(runs["prox+GD"].W, PAPER_OPTIMUM, atol=ATOL),
        "prox mask == optimal mask": np.array_equal(np.asarray(runs["prox"].mask, bool),
                                                    mask_bf),
        "reported losses == eq. 2": all(
            abs(float(r.loss) - layer_loss_ref(r.W, W_star, H)) <= 1e-9 * max(1.0, float(r.loss))
            for r in runs.values()),
    }
    for label, ok in checks.items():
        figure(label, bool(ok))
    greedy = checks["wanda == (0,5,3,0,0,5,5,0)"] and checks["sparsegpt == (0,5,3,0,0,5,5,0)"]
    claim("kubler-toy-greedy", f"wanda loss {float(runs['wanda'].loss):.4g}, sparsegpt loss "
          f"{float(runs['sparsegpt'].loss):.4g}, both at (0,5,3,0,0,5,5,0)" if greedy
          else "wanda or sparsegpt elsewhere", greedy)
    found = (checks["brute-force optimum == paper's optimum"] and checks["prox+GD == optimum"]
             and checks["prox mask == optimal mask"])
    claim("kubler-toy-prox", f"brute-force optimum loss {loss_bf:.4g} (unique); prox+GD loss "
          f"{float(runs['prox+GD'].loss):.4g}", found)

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8),
                                   gridspec_kw={"width_ratios": [1, 1.6]})
    names = list(runs) + ["optimum (brute force)"]
    losses = [float(r.loss) for r in runs.values()] + [loss_bf]
    colors = ["C0", "C0", "C1", "C1", "C2", "C2", "k"]
    bars = ax0.bar(range(len(names)), losses, color=colors)
    for b, h in zip(bars, losses):
        ax0.text(b.get_x() + b.get_width() / 2, h, f"{h:.3g}", ha="center", va="bottom",
                 fontsize=8)
    ax0.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
    ax0.set_ylabel("loss Tr((W-W*)H(W-W*)')")
    ax0.set_title("toy problem: final losses")
    width = 0.2
    x = np.arange(8)
    for i, (lab, w, c) in enumerate([("w*", W_star[0], "0.6"),
                                     ("wanda", runs["wanda"].W[0], "C0"),
                                     ("sparsegpt", runs["sparsegpt"].W[0], "C1"),
                                     ("prox+GD", runs["prox+GD"].W[0], "C2")]):
        ax1.bar(x + (i - 1.5) * width, np.asarray(w, dtype=np.float64), width, label=lab, color=c)
    ax1.axvline(3.5, color="k", lw=0.8, ls=":")
    ax1.set_xticks(x, [f"w{j + 1}" for j in range(8)])
    ax1.set_title("weights (dotted line: 2:4 cell boundary)")
    ax1.legend(fontsize=8, loc="upper left")
    savefig(fig, out_dir, "layer_toy.png")

    failed = [k for k, ok in checks.items() if not ok]
    return verdict(NAME, not failed, "all toy claims hold" if not failed
                   else "failed: " + "; ".join(failed))


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
