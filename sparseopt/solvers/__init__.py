"""Sparse solvers on generic smooth objectives; each returns a :class:`SolverResult`."""

from .result import History, SolverResult
from .iht import iht
from .maiht import maiht
from .proxgrad import Schedule, proximal_gradient
from .iobs import SampledGradient, iobs, iobs_step, sampled_gradient, stochastic_iobs, topk_iobs

__all__ = ["History", "Schedule", "SolverResult", "iht", "maiht", "proximal_gradient"]
__all__ += ["topk_iobs", "iobs", "iobs_step", "stochastic_iobs", "SampledGradient", "sampled_gradient"]
