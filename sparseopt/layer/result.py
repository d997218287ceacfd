"""The result object of :func:`sparseopt.prune`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["PruneResult"]


@dataclass
class PruneResult:
    """Pruned layer and how it was obtained.

    Attributes
    ----------
    W : ndarray, shape (d_out, d_in)
        Pruned weights, in the dtype of the input weights.
    mask : ndarray of bool, shape (d_out, d_in)
        Support of ``W`` as chosen by the method (``W`` is zero outside it; it may also hold
        zeros inside it).
    loss : float
        Local squared loss Tr((W - W*) H (W - W*)') in float64 (prox24-kubler eq. 2).
    rel_loss : float
        ``loss / Tr(W* H W*')``: 1.0 is the loss of pruning everything; 0.0 if both are 0,
        ``inf`` if only the denominator is 0.
    history : dict of str -> ndarray
        Per-iteration records of iterative methods (empty for one-shot methods), e.g.
        ``lam``, ``loss``, ``nm_fraction``, ``time`` for prox; ``refine_loss`` holds the
        loss before each masked gradient step when ``refine_steps > 0``.
    time : float
        Wall time in seconds of the method itself plus its refinement (input validation and
        the final loss evaluation are excluded).
    method : str
        Name of the method as passed to ``prune`` (``"wanda"``, ``"prox"``, ...); whether
        masked gradient refinement ("+GD") ran is ``info["refine_steps"] > 0``.
    info : dict
        Method details (options in force, iteration counts, stop reason, ...).
    """

    W: np.ndarray
    mask: np.ndarray
    loss: float
    rel_loss: float
    history: dict = field(default_factory=dict)
    time: float = 0.0
    method: str = ""
    info: dict = field(default_factory=dict)

    def __repr__(self):
        return (
            f"PruneResult(method={self.method!r}, shape={self.W.shape}, dtype={self.W.dtype}, "
            f"loss={self.loss:.6g}, rel_loss={self.rel_loss:.6g}, time={self.time:.3g}s)"
        )
