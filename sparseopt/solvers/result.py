"""The result of the sparse solvers: :class:`sparseopt.result.Result` with ``fun`` read off
the history (its last ``objective``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..result import HISTORY_KEYS, History, Result

__all__ = ["SolverResult", "History", "HISTORY_KEYS"]


@dataclass(repr=False)
class SolverResult(Result):
    """Solution and whole trajectory of a sparse solver (fields of
    :class:`~sparseopt.result.Result`). ``fun`` defaults to the last recorded ``objective``
    (the smooth loss f, or the penalized F where the solver minimizes that; each solver's
    docstring says which)."""

    def __post_init__(self):
        obj = self.history.get("objective")
        if math.isnan(self.fun) and obj is not None and len(obj):
            self.fun = float(obj[-1])
