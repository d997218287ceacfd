"""Regularisation paths with warm starts, in the style of scikit-learn's ``lasso_path``.

Each path solves one problem per grid point, from the largest penalty (or the smallest
sparsity level) to the smallest penalty (the largest level), and starts every solve at the
solution of the previous point (warm start). The solvers are the library's own:

- :func:`prox_path`: proximal gradient (:func:`sparseopt.solvers.proximal_gradient`) on
  F = f + lam R for a regulariser R (default ``L1()``: the lasso when f is least squares);
- :func:`iht_path`: :func:`sparseopt.solvers.iht`, constrained (``ks``: ||x||_0 <= k per row,
  ``TopK(k)``) or l0-penalised (``lams``: F = f + lam ||x||_0), maiht-wen eq. 2-3;
- :func:`maiht_path`: the same two forms with :func:`sparseopt.solvers.maiht` (maiht-wen eq. 4);
- :func:`iobs_path`: constrained form with :func:`sparseopt.solvers.topk_iobs` (iobs-wu eq. 12).

Every path returns a :class:`Path`: ``grid`` (the lams or ks, in solve order), ``coefs`` of
shape ``objective.shape + (n_grid,)`` -- ``(n_features, n_grid)`` for a vector variable,
``(n_targets, n_features, n_grid)`` for a matrix variable with one row per target (the
layout of scikit-learn's ``lasso_path`` for multi-output) -- ``fun`` (the minimised objective
at each point: F with the penalty, or f for the constrained forms), ``nit`` and ``results``
(the solver's :class:`~sparseopt.solvers.SolverResult` of each point, with its history).
``grid, coefs, results = path`` unpacks like ``lasso_path``'s ``alphas, coefs, _``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .patterns import TopK
from .regularizers import L0, L1
from .solvers import Schedule, iht, maiht, proximal_gradient, topk_iobs
from .validation import check_int

__all__ = ["Path", "prox_path", "iht_path", "maiht_path", "iobs_path", "lambda_max"]


@dataclass(repr=False)
class Path:
    """One solve per grid point (see the module docstring for the shapes)."""

    grid: np.ndarray
    coefs: np.ndarray
    results: list
    kind: str  # "lam" (penalised forms) or "k" (constrained forms)
    fun: np.ndarray = field(default=None)
    nit: np.ndarray = field(default=None)

    def __iter__(self):
        return iter((self.grid, self.coefs, self.results))

    def __len__(self):
        return len(self.grid)

    def __repr__(self):
        return (f"Path(kind={self.kind!r}, n_grid={len(self.grid)}, "
                f"coefs.shape={self.coefs.shape}, total nit={int(np.sum(self.nit))})")


def lambda_max(objective, regularizer=None, *, step=None, x0=None):
    """Smallest lam at which ``x0`` (default 0) is a fixed point of the prox-gradient step, so
    that the path starts at the sparse end.

    - ``L1``: lam_max = ||grad f(0)||_inf / R.lam (0 is then the minimiser of f + lam R, the
      KKT condition of the lasso);
    - ``L0`` (or ``regularizer=None`` with ``step``): H_{sqrt(2 step lam)}(-step grad f(0)) = 0
      iff step^2 g_i^2 <= 2 step lam for all i, i.e. lam_max = step ||grad f(0)||_inf^2 / 2
      (maiht-wen Prop. 2.1); default step 1/L.
    """
    regularizer = L1() if regularizer is None else regularizer
    x = np.zeros(objective.shape) if x0 is None else np.asarray(x0)
    g = np.max(np.abs(np.asarray(objective.grad(x), dtype=np.float64)))
    if isinstance(regularizer, L1):
        return float(g / regularizer.lam)
    if isinstance(regularizer, L0):
        step = 1.0 / float(objective.lipschitz()) if step is None else float(step)
        return float(step * g * g / 2.0 / regularizer.lam)
    raise ValueError(f"no lambda_max rule for {type(regularizer).__name__}; pass lams")


def _lam_grid(lams, n_lams, eps, lam_max):
    if lams is None:
        n_lams = check_int(n_lams, "n_lams", minimum=1)
        return np.geomspace(lam_max, lam_max * eps, n_lams) if lam_max > 0 \
            else np.zeros(1)
    lams = np.sort(np.asarray(lams, dtype=np.float64).ravel())[::-1]  # large -> small
    if lams.size == 0 or not np.all(np.isfinite(lams)) or lams[-1] < 0:
        raise ValueError("lams must be a non-empty list of finite numbers >= 0")
    return lams


def _k_grid(ks, objective):
    ks = np.asarray(ks).ravel()
    if ks.size == 0 or ks.dtype.kind not in "iu" or ks.min() < 0:
        raise ValueError(f"ks must be a non-empty list of integers >= 0, got {ks!r}")
    ks = np.unique(ks)  # small -> large: each start is feasible-ish for the next level
    if ks[-1] > objective.shape[-1]:
        raise ValueError(f"k = {ks[-1]} exceeds the last axis length {objective.shape[-1]}")
    return ks


def _stack(objective, results, grid, kind, fun):
    coefs = np.stack([np.asarray(r.x, dtype=np.float64) for r in results], axis=-1)
    nit = np.asarray([r.nit for r in results], dtype=np.int64)
    return Path(grid=grid, coefs=coefs, results=results, kind=kind,
                fun=np.asarray(fun, dtype=np.float64), nit=nit)


def _solver_path(solver, objective, ks, lams, n_lams, eps, x0, kwargs):
    if ks is not None and lams is not None:
        raise ValueError("give either ks (constrained form) or lams (penalised form), not both")
    results, fun = [], []
    x = x0
    if ks is not None:
        grid = _k_grid(ks, objective)
        for k in grid:
            r = solver(objective, pattern=TopK(int(k)), x0=x, **kwargs)
            results.append(r)
            fun.append(objective.value(r.x))
            x = r.x
        return _stack(objective, results, grid, "k", fun)
    grid = _lam_grid(lams, n_lams, eps,
                     lambda_max(objective, L0(), step=kwargs.get("step"), x0=None))
    for lam in grid:
        r = solver(objective, lam=float(lam), x0=x, **kwargs)
        results.append(r)
        # F = f + lam ||x||_0 at the returned point (after any refinement)
        fun.append(objective.value(r.x) + lam * np.count_nonzero(np.asarray(r.x)))
        x = r.x
    return _stack(objective, results, grid, "lam", fun)


def iht_path(objective, *, ks=None, lams=None, n_lams=30, eps=1e-3, x0=None, **iht_kwargs):
    """IHT (:func:`sparseopt.solvers.iht`) over a grid, warm-started.

    Parameters
    ----------
    objective : Objective
        Smooth f (e.g. ``LeastSquares(X, y)``).
    ks : sequence of int, optional
        Constrained form min f s.t. ||x||_0 <= k per row (``TopK(k)``), solved for k in
        increasing order, each from the previous solution.
    lams : sequence of float, optional
        l0-penalised form min f + lam ||x||_0, solved for lam in decreasing order. Default
        (neither ks nor lams): ``n_lams`` values from :func:`lambda_max` (the L0 rule with the
        solver's step) down to ``eps`` times it, geometrically.
    x0 : array, optional
        Start of the first solve (default: the solver's default, 0 or ``objective.reference``).
    **iht_kwargs
        Passed to :func:`~sparseopt.solvers.iht` (``step``, ``max_iter``, ``tol``,
        ``refit``, ``refine_steps``).

    Returns
    -------
    Path
        ``fun[i]`` is f(x_i) (constrained) or f(x_i) + lam_i ||x_i||_0 (penalised).
    """
    return _solver_path(iht, objective, ks, lams, n_lams, eps, x0, iht_kwargs)


def maiht_path(objective, *, ks=None, lams=None, n_lams=30, eps=1e-3, x0=None, **maiht_kwargs):
    """mAIHT (:func:`sparseopt.solvers.maiht`, maiht-wen eq. 4) over a grid, warm-started;
    parameters as :func:`iht_path` (``**maiht_kwargs``: ``step``, ``mu``, ``max_iter``,
    ``tol``, ``refine_steps``). With ``mu > 0`` the stabiliser of eq. 5 is centred at each
    point's start, i.e. at the previous solution."""
    return _solver_path(maiht, objective, ks, lams, n_lams, eps, x0, maiht_kwargs)


def iobs_path(objective, *, ks, x0=None, **iobs_kwargs):
    """Top-k I-OBS (:func:`sparseopt.solvers.topk_iobs`, iobs-wu eq. 12) over a grid of
    sparsity levels ``ks`` (constrained form only), warm-started; ``**iobs_kwargs``:
    ``damping``, ``newton``, ``max_iter``, ``tol``, ``step``."""
    if ks is None:
        raise ValueError("iobs_path needs ks (top-k I-OBS has no penalised form)")
    return _solver_path(topk_iobs, objective, ks, None, 0, 0.0, x0, iobs_kwargs)


def prox_path(objective, *, lams=None, regularizer=None, n_lams=30, eps=1e-3, x0=None,
              step=None, max_iter=500, momentum="fista"):
    """Proximal gradient on F = f + lam R over a decreasing grid of lam, warm-started.

    Parameters
    ----------
    objective : Objective
        Smooth f with ``lipschitz`` (default step 1/L).
    lams : sequence of float, optional
        Penalties; default ``n_lams`` values from :func:`lambda_max` down to ``eps`` times
        it (geometric), as ``lasso_path`` does.
    regularizer : Regularizer, default ``L1()``
        R, with its own ``lam`` as a constant factor (F = f + lam * regularizer(x)); any
        regulariser object of :mod:`sparseopt.regularizers`.
    x0 : array, optional
        Start of the first solve; default zeros.
    step, max_iter, momentum
        Passed to :func:`~sparseopt.solvers.proximal_gradient`, which runs ``max_iter``
        iterations at each lam (it has no tolerance at a fixed lam: the warm start buys
        accuracy, not fewer iterations).

    Returns
    -------
    Path
        ``fun[i]`` = f(x_i) + lam_i R(x_i); each result's ``info["F"]`` holds it too.

    Notes
    -----
    A step of :func:`proximal_gradient` is x <- prox_{c R}(x - step grad f(x)) with c the
    lambda it is handed (prox24-kubler Alg. 2 convention, c already contains the step), so
    the point lam of this path is run with the fixed c = step * lam (``beta = 1``), a
    proximal-gradient iteration on f + lam R.
    """
    regularizer = L1() if regularizer is None else regularizer
    if step is None:
        L = float(objective.lipschitz())
        if not L > 0:
            raise ValueError(f"cannot take the default step 1/L with L = {L}; pass step")
        step = 1.0 / L
    grid = _lam_grid(lams, n_lams, eps, lambda_max(objective, regularizer, step=step)
                     if lams is None else 0.0)
    if not grid[-1] > 0:
        raise ValueError("prox_path needs lams > 0 (proximal_gradient takes lam0 > 0)")
    x = np.zeros(objective.shape) if x0 is None else np.asarray(x0, dtype=np.float64)
    results, fun = [], []
    for lam in grid:
        r = proximal_gradient(objective, regularizer, Schedule(step * float(lam)), step=step,
                              x0=x, max_iter=max_iter, momentum=momentum, progress=False)
        F = objective.value(r.x) + float(lam) * regularizer(r.x)
        r.info["F"] = F
        r.info["lam_path"] = float(lam)
        results.append(r)
        fun.append(F)
        x = r.x
    return _stack(objective, results, grid, "lam", fun)
