"""I-OBS at layer level: rounds of an OBS N:M mask solve and gradient steps on the local loss
(iobs-wu Alg. 2, with SparseGPT as the quadratic sparsity solver of line 7)."""

from __future__ import annotations

import time

import numpy as np

from ..backend import namespace
from ..linalg import frob_inner
from ..patterns import NM
from .loss import gamma_max
from ..solvers.proxgrad import PROGRESS_MIN_SIZE
from ..validation import check_int
from .registry import register
from .result import PruneResult
from .sparsegpt import sparsegpt_prune

__all__ = ["iobs_prune"]


@register("iobs", order=60)
def iobs_prune(W, H, pattern, *, rounds=3, round_steps=5, damping=0.01, blocksize=None,
               progress=None):
    """Iterative OBS: rounds of SparseGPT mask solves and gradient steps (iobs-wu Alg. 2).

    Iterative OBS pruning of one layer, iobs-wu Alg. 2 specialised to a fixed Hessian.

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Dense weights W* (validated by the caller). Not modified.
    H : array, shape (d_in, d_in)
        Symmetric PSD Hessian (float64).
    pattern : NM
        N:M pattern along the rows.
    rounds : int, default 3
        Rounds T of Alg. 2 (``>= 1``); ``rounds=1`` is SparseGPT.
    round_steps : int, default 5
        Plain (dense) gradient steps on L after each mask solve (Alg. 2 line 9), step
        eta = 1 / (2 gamma_max(H)).
    damping, blocksize
        Passed to the SparseGPT solve (:func:`sparsegpt_prune`).
    progress : bool, optional
        Print one line per round. Default: on for layers with at least 2^20 weights.

    Returns
    -------
    PruneResult
        The sparse solution of the round with the least loss (``info["best_round"]``,
        1-based; history ``loss`` = ``objective`` per round, and ``time``).

    Notes
    -----
    What is implemented, line by line against iobs-wu Alg. 2 for a single layer whose
    inputs X (hence H = X X' / n) do not change between rounds:

    - W_0 = W* (the pretrained layer).
    - Line 7-8, round t: W_hat_t = argmin ||W_{t-1} X - W_hat X||^2 over N:M matrices,
      solved approximately by the SparseGPT OBS sweep with the *current* weights W_{t-1}
      as the dense target (``sparsegpt_prune(W_{t-1}, H)``). For t = 1 this is SparseGPT.
    - Line 9: W_t = W_hat_t - eta grad L(W_hat_t), repeated ``round_steps`` times, on the
      local loss L(W) = Tr((W - W*) H (W - W*)') (prox24-kubler eq. 2), which stands in
      for the task loss of Alg. 2: it pulls the sparse iterate back towards W* and off its
      mask, so that the next mask solve can choose a different mask.
    - Output: the sparse W_hat_t with the least L over t = 1..T (Alg. 2 ends with a
      gradient step, which is dense; the last mask solve is what makes it sparse). The
      chosen round is reported, never silently replaced.

    With ``round_steps = 0`` the rounds after the first change nothing (the sweep of an N:M
    matrix keeps it). With a quadratic loss the I-OBS step of Alg. 1 (Option 2) would
    land on the best mask in one step (Sec. 3.4, "Connection to OBC"); the OBS sweep is
    the greedy, tractable stand-in. Masked refinement of the final weights (eq. 5) is
    ``prune(..., refine_steps=K)``. Cost: ``rounds`` SparseGPT sweeps (the U factor is
    recomputed each round) plus ``rounds * round_steps`` products d_out x d_in x d_in.
    """
    if not isinstance(pattern, NM):
        raise ValueError(f"iobs supports NM patterns only, got pattern={pattern!r}")
    check_int(rounds, "rounds", minimum=1)
    check_int(round_steps, "round_steps", minimum=0)
    if progress is None:
        progress = W.shape[0] * W.shape[1] >= PROGRESS_MIN_SIZE
    xp = namespace(W, H)
    dt = W.dtype
    g = gamma_max(H)
    two_eta = 1.0 / g if g > 0 else 0.0  # 2 eta with eta = 1 / (2 gamma_max)
    Hd = xp.astype(H, dt)
    GS = W @ Hd  # W* H
    t0 = time.perf_counter()
    hist = {"loss": [], "time": []}
    best = None
    Wc = W
    sg_info = {}
    for t in range(1, rounds + 1):
        sg = sparsegpt_prune(Wc, H, pattern, damping=damping, blocksize=blocksize)
        W_hat, mask, sg_info = sg.x, sg.mask, sg.info
        R = W_hat @ Hd - GS  # (W_hat - W*) H: gives the loss and the first gradient
        loss = frob_inner(R, W_hat - W)
        hist["loss"].append(loss)
        hist["time"].append(time.perf_counter() - t0)
        if progress:
            print(f"iobs round {t}/{rounds}: loss {loss:.6g} ({hist['time'][-1]:.1f} s)",
                  flush=True)
        if best is None or loss < best[0]:
            best = (loss, W_hat, mask, t)
        if t == rounds:
            break
        Wc = W_hat - two_eta * R
        for _ in range(round_steps - 1):
            Wc = Wc - two_eta * (Wc @ Hd - GS)
        if round_steps == 0:
            Wc = W_hat
    _, W_out, mask, best_round = best
    info = {"rounds": int(rounds), "round_steps": int(round_steps), "best_round": best_round,
            "damping": sg_info.get("damping"), "blocksize": sg_info.get("blocksize")}
    history = {k: np.asarray(v, dtype=np.float64) for k, v in hist.items()}
    history["objective"] = history["loss"]
    return PruneResult(x=W_out, mask=mask, nit=int(rounds),
                       stop_reason=f"{rounds} rounds", history=history, info=info)
