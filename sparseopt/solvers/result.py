"""The one result object every solver returns (in the spirit of scipy's OptimizeResult)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

HISTORY_KEYS = ("objective", "support", "lam", "step", "residual", "time")


@dataclass
class SolverResult:
    """Solution and whole trajectory of a sparse solver.

    Attributes
    ----------
    x : ndarray
        Final iterate.
    history : dict of str -> ndarray
        One entry per iteration (index 0 is the starting point where the solver records it):
        ``objective`` (smooth loss f, or the penalized F where the solver minimizes that; the
        docstring of each solver says which), ``support`` (number of nonzeros), ``lam``
        (penalty in force, NaN for constrained forms), ``step``, ``residual`` (the solver's
        stopping quantity) and ``time`` (seconds since the start). Solvers may add keys.
    nit : int
        Iterations performed.
    stop_reason : str
        Why the solver stopped, e.g. ``"residual <= tol"`` or ``"max_iter"``.
    info : dict
        Anything else the solver reports (e.g. the refinement stage's start index).
    """

    x: np.ndarray
    history: dict = field(default_factory=dict)
    nit: int = 0
    stop_reason: str = ""
    info: dict = field(default_factory=dict)

    @property
    def converged(self) -> bool:
        """False when the solver stopped only because it ran out of iterations."""
        return self.stop_reason != "max_iter"


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
