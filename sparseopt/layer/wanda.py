"""Wanda: prune by the score S_ij = |W_ij| H_jj^{1/2} (prox24-kubler eq. 3, Thm 1)."""

from __future__ import annotations

import numpy as np

__all__ = ["wanda_scores", "wanda_prune"]


def wanda_scores(W, H) -> np.ndarray:
    """Wanda scores S_ij = |W_ij| sqrt(H_jj) in float64 (prox24-kubler eq. 3).

    H_jj is the mean squared activation of input j; the pruning loss of dropping W_ij alone
    under a diagonal H is S_ij^2.
    """
    d = np.sqrt(np.maximum(np.diag(np.asarray(H, dtype=np.float64)), 0.0))
    return np.abs(np.asarray(W, dtype=np.float64)) * d[None, :]


def wanda_prune(W, H, pattern):
    """Keep, in every group of ``pattern`` along each row, the weights with the largest
    Wanda score and leave them unchanged.

    Parameters
    ----------
    W : ndarray, shape (d_out, d_in)
        Dense weights (validated by the caller).
    H : ndarray, shape (d_in, d_in)
        Symmetric PSD Hessian; only its diagonal is used.
    pattern : NM or TopK

    Returns
    -------
    W_pruned, mask, history, info

    Notes
    -----
    For diagonal H, L(M o W*) = sum_{ij: M_ij = 0} S_ij^2 (eq. 3), and keeping the top
    scores per group is a global minimizer of eq. 1 (Thm 1, proof in App. B.1): with a
    diagonal H no weight update can do better than keeping the kept weights unchanged.
    Sun et al. (2024) use it as a heuristic for any H. Ties go to the smaller index.
    """
    mask = pattern.mask(wanda_scores(W, H))
    return np.where(mask, W, np.zeros((), W.dtype)), mask, {}, {}
