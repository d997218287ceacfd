"""Sparse solvers on generic smooth objectives; each returns a :class:`SolverResult`."""

from .result import History, SolverResult
from .iht import iht
from .maiht import maiht

__all__ = ["History", "SolverResult", "iht", "maiht"]
