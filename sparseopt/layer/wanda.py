"""Wanda: prune by the score S_ij = |W_ij| H_jj^{1/2} (prox24-kubler eq. 3, Thm 1)."""

from __future__ import annotations

from ..backend import namespace, zero
from ..patterns import NM, TopK
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
    xp = namespace(W, H)
    diag = xp.linalg.diagonal(xp.astype(H, xp.float64))
    d = xp.sqrt(xp.clip(diag, min=0.0))
    return xp.abs(xp.astype(W, xp.float64)) * d[None, :]


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
    mask = pattern.mask(wanda_scores(W, H))
    return PruneResult(x=namespace(W).where(mask, W, zero(W)), mask=mask)
