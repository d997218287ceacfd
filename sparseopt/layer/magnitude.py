"""Magnitude pruning: keep the largest |W_ij| of every group (the baseline of all baselines)."""

from __future__ import annotations

import numpy as np

__all__ = ["magnitude_prune"]


def magnitude_prune(W, H, pattern):
    """Keep the entries of ``W`` with the largest magnitude in every group of ``pattern``.

    Parameters
    ----------
    W : ndarray, shape (d_out, d_in)
        Dense weights (validated by the caller).
    H : ndarray, shape (d_in, d_in)
        Unused: magnitude pruning ignores the inputs. Kept for a uniform signature.
    pattern : NM or TopK
        Applied along the rows (last axis).

    Returns
    -------
    W_pruned, mask, history, info
        ``history`` is empty (one-shot method).

    Notes
    -----
    Equivalent to Wanda (prox24-kubler Sec. 2.3, eq. 3) when H = c I. Ties are broken by
    position (the smaller index is kept), as in ``pattern.mask``.
    """
    mask = pattern.mask(np.abs(W))
    return np.where(mask, W, np.zeros((), W.dtype)), mask, {}, {}
