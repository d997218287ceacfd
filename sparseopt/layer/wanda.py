"""Wanda: prune by the score S_ij = |W_ij| H_jj^{1/2} (prox24-kubler eq. 3, Thm 1)."""

from __future__ import annotations

from ..backend import namespace, zero
from ..patterns import NM, TopK, _blocked_mask
from .registry import register
from .result import PruneResult

__all__ = ["wanda_scores", "wanda_prune"]


def wanda_scores(W, H):
    """Wanda scores S_ij = |W_ij| sqrt(H_jj) in float64 (prox24-kubler eq. 3).

    H_jj is the mean squared activation of input j; the pruning loss of dropping W_ij alone
    under a diagonal H is S_ij^2.
    """
    if not hasattr(W, "dtype"):
        import numpy as np

        W, H = np.asarray(W), np.asarray(H)
    namespace(W, H)  # one array library for both
    return _scores(W, _input_scale(H))


def _input_scale(H):
    """sqrt(max(H_jj, 0)) in float64 (the diagonal only: no copy of an LLM-size H)."""
    xp = namespace(H)
    diag = xp.astype(xp.linalg.diagonal(H), xp.float64)
    return xp.sqrt(xp.clip(diag, min=0.0))


def _scores(W, scale):
    xp = namespace(W)
    return xp.abs(xp.astype(W, xp.float64)) * scale[None, :]


@register("wanda", patterns=(NM, TopK), order=20)
def wanda_prune(W, H, pattern):
    """Keep the largest |W_ij| H_jj^{1/2} of every group (Wanda, prox24-kubler eq. 3).

    Parameters
    ----------
    W : array, shape (d_out, d_in)
        Dense weights (validated by the caller).
    H : array, shape (d_in, d_in)
        Symmetric PSD Hessian; only its diagonal is used.
    pattern : NM or TopK

    Returns
    -------
    PruneResult
        ``x`` and ``mask``; the kept weights are unchanged.

    Notes
    -----
    For diagonal H, L(M o W*) = sum_{ij: M_ij = 0} S_ij^2 (eq. 3), and keeping the top
    scores per group is a global minimizer of eq. 1 (Thm 1, proof in App. B.1): with a
    diagonal H no weight update can do better than keeping the kept weights unchanged.
    Sun et al. (2024) use it as a heuristic for any H. Ties go to the smaller index.
    """
    scale = _input_scale(H)
    # row by row (the pattern's rows are independent): no whole-layer float64 scores
    mask = _blocked_mask(W, lambda rows: pattern.mask(_scores(rows, scale)))
    return PruneResult(x=namespace(W).where(mask, W, zero(W)), mask=mask)
