"""The one result family (in the spirit of scipy's ``OptimizeResult``).

Every solver and every layer pruner returns a :class:`Result`: the solution ``x``, its
objective ``fun``, the iteration count ``nit``, the ``stop_reason``, a per-iteration
``history`` of arrays and an ``info`` dict. Every history holds ``objective`` and ``time``,
so one function plots a convergence curve from any of them (:meth:`Result.curve`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Result", "History", "HISTORY_KEYS", "SUCCESS", "MAX_ITER"]

#: ``Result.status`` codes (as scipy's ``OptimizeResult.status``): the run's own stopping rule
#: held (or it is one-shot), or it used up its iteration budget first.
SUCCESS, MAX_ITER = 0, 1

#: Keys of a solver's history: ``objective`` (what the solver minimises, its docstring says
#: which), ``support`` (nonzeros), ``lam`` (penalty in force, NaN for constrained forms),
#: ``step``, ``residual`` (the stopping quantity) and ``time`` (seconds since the start).
HISTORY_KEYS = ("objective", "support", "lam", "step", "residual", "time")


@dataclass(repr=False)
class Result:
    """Solution and trajectory of a solver or a layer pruner.

    Attributes
    ----------
    x : array
        Final iterate (for a layer pruner: the pruned weights, also named ``W``).
    fun : float
        Objective at ``x``; NaN when not recorded. For a layer pruner: the local loss.
    nit : int
        Iterations performed (0 for one-shot methods).
    stop_reason : str
        Why the run stopped, e.g. ``"residual <= tol"``, ``"W is N:M"`` or ``"max_iter"``.
    history : dict of str -> ndarray
        One entry per iteration, always with ``objective`` and ``time`` when the run
        iterated (empty for one-shot methods). Solvers and methods may add keys (documented
        in their docstrings).
    info : dict
        Anything else the run reports (options in force, iteration counts, ...).
    status : int
        :data:`SUCCESS` (0) or :data:`MAX_ITER` (1), set by the solver where it stops.
    """

    x: Any = None
    fun: float = math.nan
    nit: int = 0
    stop_reason: str = ""
    history: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    status: int = SUCCESS

    @property
    def converged(self) -> bool:
        """False when the run stopped only because it ran out of iterations."""
        return self.status == SUCCESS

    def curve(self, key: str = "objective"):
        """(iteration index, values) of ``history[key]``, ready to plot."""
        if key not in self.history:
            raise KeyError(f"history has no {key!r}; it has {sorted(self.history)}")
        vals = np.asarray(self.history[key], dtype=np.float64)
        return np.arange(vals.shape[0]), vals

    def __repr__(self):
        shape = getattr(self.x, "shape", None)
        return (f"{type(self).__name__}(shape={tuple(shape) if shape is not None else None}, "
                f"fun={self.fun:.6g}, nit={self.nit}, stop_reason={self.stop_reason!r})")


class History:
    """Append-only recorder that becomes the ``history`` dict of arrays."""

    def __init__(self, keys=HISTORY_KEYS):
        self._rows = {k: [] for k in keys}

    def append(self, **values) -> None:
        unknown = set(values) - set(self._rows)
        if unknown:
            raise KeyError(f"unknown history key(s) {sorted(unknown)}")
        for k in self._rows:
            self._rows[k].append(values.get(k, np.nan))

    def as_dict(self) -> dict:
        return {k: np.asarray(v, dtype=np.float64) for k, v in self._rows.items()}
