"""Sparse solvers on generic smooth objectives; each returns a :class:`SolverResult`."""

from .result import History, SolverResult

__all__ = ["History", "SolverResult"]
