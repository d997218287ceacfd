"""Magnitude pruning: keep the largest |W_ij| of every group (the baseline of all baselines)."""

from __future__ import annotations

from ..backend import namespace, zero
from ..patterns import NM, TopK
from .registry import register
from .result import PruneResult

__all__ = ["magnitude_prune"]


@register("magnitude", patterns=(NM, TopK), order=10)
def magnitude_prune(W, H, pattern):
    """Keep the largest |W_ij| of every group (ignores the inputs).

    Parameters
    ----------
    W : array, shape (d_out, d_in)
        Dense weights (validated by the caller).
    H : array, shape (d_in, d_in)
        Unused: magnitude pruning ignores the inputs. Kept for a uniform signature.
    pattern : NM or TopK
        Applied along the rows (last axis).

    Returns
    -------
    PruneResult
        ``x`` and ``mask``; one-shot, so no history.

    Notes
    -----
    Equivalent to Wanda (prox24-kubler Sec. 2.3, eq. 3) when H = c I. Ties are broken by
    position (the smaller index is kept), as in ``pattern.mask``.
    """
    mask = pattern.mask(namespace(W).abs(W))
    return PruneResult(x=namespace(W).where(mask, W, zero(W)), mask=mask)
