"""The result of :func:`sparseopt.prune` and of every layer method."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..result import Result

__all__ = ["PruneResult"]


@dataclass(repr=False)
class PruneResult(Result):
    """Pruned layer and how it was obtained (a :class:`~sparseopt.result.Result`).

    A layer method returns one with ``x`` (the pruned weights) and ``mask`` set, and
    ``nit``, ``stop_reason``, ``history``, ``info`` where it has them; :func:`sparseopt.prune`
    fills in the loss, the relative loss, the time and the method name.

    Attributes
    ----------
    x, W : array, shape (d_out, d_in)
        Pruned weights, in the dtype, array library and device of the input weights
        (``W`` is ``x``).
    mask : bool array, shape (d_out, d_in)
        Support of ``W`` as chosen by the method (``W`` is zero outside it; it may also hold
        zeros inside it).
    fun, loss : float
        Local squared loss Tr((W - W*) H (W - W*)') in float64 (prox24-kubler eq. 2);
        ``loss`` is ``fun``.
    rel_loss : float
        ``loss / Tr(W* H W*')``: 1.0 is the loss of pruning everything; 0.0 if both are 0,
        ``inf`` if only the denominator is 0.
    nit, stop_reason : int, str
        Iterations of the method and why it stopped (0 and
        ``sparseopt.layer.ONE_SHOT`` for one-shot methods).
    history : dict of str -> ndarray
        Per-iteration float64 records. :func:`sparseopt.prune` gives every result the keys
        ``sparseopt.layer.COMMON_HISTORY_KEYS``: ``objective`` (the local loss L of each
        iterate) and ``time`` (one entry per iteration of the method; empty for one-shot
        methods) and ``refine_loss`` (the loss before each masked gradient step of "+GD";
        empty when ``refine_steps == 0``), so that the same code plots any result
        (``res.curve("objective")``). Methods add their own keys, e.g. ``lam``,
        ``nm_fraction`` for prox.
    time : float
        Wall time in seconds of the method itself plus its refinement (input validation and
        the final loss evaluation are excluded).
    method_time : float
        The part of ``time`` before the refinement: the method alone, until its mask.
    method : str
        Name of the method (``"wanda"``, ``"prox"``, ..., or the callable's ``__name__``);
        whether masked gradient refinement ("+GD") ran is ``info["refine_steps"] != 0``.
    info : dict
        Method details (options in force, stop reason, ...).
    """

    mask: Any = None
    rel_loss: float = math.nan
    time: float = 0.0
    method_time: float = 0.0
    method: str = ""

    @property
    def W(self):
        return self.x

    @property
    def loss(self) -> float:
        return self.fun

    def __repr__(self):
        return (f"PruneResult(method={self.method!r}, shape={tuple(self.W.shape)}, "
                f"dtype={self.W.dtype}, loss={self.loss:.6g}, rel_loss={self.rel_loss:.6g}, "
                f"time={self.time:.3g}s)")
