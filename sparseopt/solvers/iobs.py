"""The Iterative Optimal Brain Surgeon family (iobs-wu): Top-k I-OBS, exact I-OBS, stochastic I-OBS.

All three minimize a smooth f subject to a sparsity constraint by sparse Newton-type steps:

* :func:`topk_iobs` - Alg. 1 option 1, eq. 12: theta <- T_k(theta - H^{-1} grad f(theta)).
* :func:`iobs` / :func:`iobs_step` - Alg. 1 option 2 (Lemma 2): the exact minimizer of the
  second-order model (eq. 8) over all k-sparse points, through the optimal mask of eq. 24
  (:func:`sparseopt.solvers.mask_search.best_mask`).
* :func:`stochastic_iobs` - App. B.1 / Lemma 4: mini-batch gradients g, the Hessian replaced
  by lam I + g g' / ||g||^2 (eq. 14).

They use only the objective protocol of :mod:`sparseopt.objectives` (``shape``, ``value``,
``grad``, ``hessian``, ``lipschitz``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.linalg

from ..linalg import cholesky_pd, damping_shift, woodbury_factor, woodbury_solve
from ..patterns import NM, TopK
from ..validation import check_choice, check_finite, check_int, check_real
from .mask_search import best_mask
from ..result import MAX_ITER, SUCCESS
from .result import HISTORY_KEYS, History, SolverResult

__all__ = ["topk_iobs", "iobs", "iobs_step", "stochastic_iobs", "SampledGradient",
           "sampled_gradient"]


# ----------------------------------------------------------------------------- validation


def _check_objective(objective, *, vector: bool) -> tuple:
    for attr in ("shape", "value", "grad", "hessian"):
        if not hasattr(objective, attr):
            raise ValueError(f"objective must provide .{attr} (see sparseopt.objectives)")
    shape = tuple(objective.shape)
    if vector and len(shape) != 1:
        raise ValueError(f"objective must have a vector variable (p,), got shape {shape}")
    return shape


def _check_k(k, p: int, name: str = "k") -> int:
    return check_int(k, name, minimum=0, maximum=p)


def _check_iters(max_iter, tol):
    check_int(max_iter, "max_iter", minimum=0)
    check_real(tol, "tol")


def _dtype_of(objective, x0):
    dt = np.dtype(getattr(objective, "dtype", np.float64))
    if x0 is not None:
        dt = np.asarray(x0).dtype
    return dt if dt in (np.float32, np.float64) else np.dtype(np.float64)


def _start(objective, shape, x0) -> np.ndarray:
    if x0 is None:
        ref = getattr(objective, "reference", None)
        dt = _dtype_of(objective, None)
        return np.zeros(shape, dtype=dt) if ref is None else np.array(ref, dtype=dt)
    x0 = np.asarray(x0)
    if x0.shape != shape:
        raise ValueError(f"x0 must have shape {shape} (objective.shape), got {x0.shape}")
    if x0.dtype.kind not in "fiub":
        raise ValueError(f"x0 must be real, got dtype {x0.dtype}")
    check_finite(x0, "x0")
    return np.array(x0, dtype=_dtype_of(objective, x0))  # a copy: the input is never modified


def _gradient(objective, x, shape) -> np.ndarray:
    g = np.asarray(objective.grad(x))
    if g.shape != shape:
        raise ValueError(f"objective.grad returned shape {g.shape}, expected {shape}")
    check_finite(g, "objective.grad(x)")
    return g


def _hessian(objective, x, shape) -> np.ndarray:
    """Dense Hessian in float64: (p, p) for a vector, or for a matrix variable either the shared
    per-row Hessian (d_in, d_in) or the full (d_out*d_in)^2 one."""
    H = np.asarray(objective.hessian(x), dtype=np.float64)
    sizes = {shape[-1], int(np.prod(shape))}
    if H.ndim != 2 or H.shape[0] != H.shape[1] or H.shape[0] not in sizes:
        raise ValueError(f"objective.hessian returned shape {H.shape}; expected a square matrix "
                         f"of side {' or '.join(map(str, sorted(sizes)))} for a variable of "
                         f"shape {shape}")
    check_finite(H, "objective.hessian(x)")
    return H


def _factor(H: np.ndarray, damping, where: str):
    """Cholesky factor of H (or H + delta I, delta = damping * mean diag H). ValueError when
    the (damped) matrix is not positive definite."""
    delta = 0.0 if damping is None else damping_shift(float(np.mean(np.diag(H))), damping, where)
    Hd = H + delta * np.eye(H.shape[0]) if delta else H
    cf = cholesky_pd(Hd)
    if cf is None:
        hint = ("; pass damping=delta to use H + delta*mean(diag H)*I" if damping is None
                else f" even after damping by {delta:g}")
        raise ValueError(f"objective.hessian(x) is not positive definite {where} (singular or "
                         f"indefinite), a Newton step is undefined{hint}")
    return cf, delta


def _newton_direction(cf, g: np.ndarray, n_side: int) -> np.ndarray:
    """H^{-1} g, row by row when H is the shared per-row Hessian of a matrix variable."""
    g64 = g.astype(np.float64)
    if g.ndim == 1 or n_side == g.size:
        return scipy.linalg.cho_solve(cf, g64.reshape(-1), check_finite=False).reshape(g.shape)
    # rows independent, same Hessian: solve H D' = G'
    return scipy.linalg.cho_solve(cf, g64.T, check_finite=False).T


def _residual(x_new, x_old) -> float:
    diff = np.linalg.norm((x_new.astype(np.float64) - x_old).ravel())
    return float(diff / max(1.0, np.linalg.norm(x_old.astype(np.float64).ravel())))


# ----------------------------------------------------------------------------- Top-k I-OBS

_NEWTON = ("full", "restricted")


def _design_matrix(objective):
    """X (float64) when the objective is least squares with Hessian X'X, else None."""
    from ..objectives import LeastSquares

    if isinstance(objective, LeastSquares):
        return np.asarray(objective.X, dtype=np.float64)
    return None


def _restricted_set(x: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """Q = supp(x) plus the k largest |g_j| off supp(x) (ties to the smaller index), sorted."""
    supp = x != 0
    off = np.flatnonzero(~supp)
    order = np.argsort(-np.abs(g[off]), kind="stable")[:k]
    Q = supp.copy()
    Q[off[order]] = True
    return np.flatnonzero(Q)


def topk_iobs(objective, *, pattern, x0=None, max_iter: int = 100, tol: float = 1e-10,
              damping=None, step: float = 1.0, newton: str = "full") -> SolverResult:
    """Top-k I-OBS: a Newton step followed by hard thresholding (iobs-wu eq. 12).

    Parameters
    ----------
    objective : Objective
        Smooth f with ``shape``, ``value``, ``grad`` and a dense ``hessian``
        (see :mod:`sparseopt.objectives`). For :class:`~sparseopt.objectives.LeastSquares`
        the Hessian X'X is never formed when p > n (see Notes).
    pattern : TopK or NM, keyword-only
        Sparsity pattern; T_k is ``pattern.project`` (along the last axis, rows independent).
    x0 : array_like, optional, keyword-only
        Start; default ``objective.reference`` if set, else zeros.
    max_iter : int, default 100, keyword-only
    tol : float, default 1e-10, keyword-only
        Stop when ||x_{t+1} - x_t|| / max(1, ||x_t||) <= tol.
    damping : float, optional, keyword-only
        None (default): the Hessian (or, for ``newton="restricted"``, its block H_QQ) must be
        positive definite, otherwise ValueError (a singular H arises e.g. for least squares
        with p > n; there the error is raised before any step). A number delta_rel >= 0: use
        H + delta * I with delta = delta_rel * mean(diag H) (Levenberg-Marquardt damping; the
        mean is over the full diagonal in both variants); still ValueError if that matrix is
        not positive definite.
    step : float, default 1.0, keyword-only
        Newton step length eta in theta - eta H^{-1} grad f(theta); 1 is the paper's eq. 12.
    newton : {"full", "restricted"}, default "full", keyword-only
        "full": the Newton step of eq. 12 in all coordinates. "restricted": the Newton step
        of the model (eq. 8) restricted to Q_t = supp(theta_t) plus the k coordinates off
        supp(theta_t) with the largest |grad f(theta_t)| (``TopK`` patterns and vector
        variables only), see Notes.

    Returns
    -------
    SolverResult
        ``history["objective"]`` is f (index 0 = start), ``step`` is eta, ``residual`` the
        stopping quantity, ``support`` the nonzeros. ``info``: ``damping`` (absolute delta
        of the last step), ``pattern``, ``newton``, ``linear_solver`` ("cholesky": dense
        factor of H or H_QQ; "woodbury": n x n factor of XX' + delta I) and ``factorizations``
        (factorizations done; a factor is reused while the Hessian is unchanged, e.g. on a
        quadratic or least squares). ``x`` has the objective's dtype (float32 stays float32;
        the Newton system is solved in float64).

    Notes
    -----
    iobs-wu Alg. 1 option 1: theta_{t+1} = T_k(theta_t - H_t^{-1} grad f(theta_t)) (eq. 12).
    Lemma 3: under Assumptions 1-4, ||theta_{t+1} - theta*|| <= (1 + sqrt(k*/k)) M/(2 mu)
    ||theta_t - theta*||^2 (eq. 13), local quadratic convergence. On a quadratic whose
    minimizer theta* is k-sparse, one step from any start lands on theta*.

    Least squares with a design X (n x p), H = X'X: with damping and p > n the damped
    direction (X'X + delta I)^{-1} g is computed exactly by the Woodbury identity,
    (g - X'(XX' + delta I)^{-1} X g) / delta, with XX' + delta I (n x n) factored once:
    O(np) per step instead of a p x p factorization. Without damping and p > n, X'X has rank
    <= n < p and a ValueError says so. Since g = X'(X theta - y) lies in the row space of
    X, the damped full step moves theta only there; for p >> n it behaves like an alternating
    projection and contracts slowly (see docs/iobs.md).

    Restricted Newton (``newton="restricted"``): with g = grad f(theta_t) and Q = Q_t as
    above (|Q| <= ||theta_t||_0 + k), the step minimizes the second-order model of eq. 8,
    <g, theta - theta_t> + 1/2 ||theta - theta_t||^2_{H_t}, over theta supported on Q
    (theta_t is, so this is well defined):

        theta+_Q = theta_{t,Q} - eta (H_t)_QQ^{-1} g_Q,  theta+ = 0 off Q,
        theta_{t+1} = T_k(theta+).

    With Q = all coordinates this is eq. 12. It needs only the |Q| x |Q| block (for least
    squares X_Q'X_Q, positive definite whenever the columns X_Q are independent, which
    needs |Q| <= n), so it is defined for p > n without damping. For least squares it is the
    exact least-squares fit on Q followed by T_k, as in CoSaMP / subspace pursuit (Needell &
    Tropp 2009), whose candidate set is the support plus 2k gradient coordinates.

    For a matrix variable (e.g. ``LayerLoss``), ``hessian`` is the per-row Hessian shared by
    all rows and the full Newton step is applied row by row; an N:M pattern then gives the
    N:M analogue of eq. 12.

    Examples
    --------
    >>> import numpy as np
    >>> from sparseopt import TopK
    >>> from sparseopt.objectives import Quadratic
    >>> f = Quadratic(np.diag([1.0, 2.0, 4.0]), np.array([1.0, 0.0, 8.0]))
    >>> topk_iobs(f, pattern=TopK(2)).x
    array([1., 0., 2.])
    """
    shape = _check_objective(objective, vector=False)
    if not isinstance(pattern, (TopK, NM)):
        raise ValueError(f"pattern must be a TopK or NM instance, got {pattern!r}")
    if isinstance(pattern, TopK):
        _check_k(pattern.k, shape[-1], "pattern.k")
    elif shape[-1] % pattern.m:
        raise ValueError(f"pattern {pattern} needs the last axis {shape[-1]} divisible by m")
    _check_iters(max_iter, tol)
    check_real(damping, "damping", allow_none=True)
    check_real(step, "step", positive=True)
    check_choice(newton, "newton", _NEWTON)
    if newton == "restricted" and (not isinstance(pattern, TopK) or len(shape) != 1):
        raise ValueError("newton='restricted' needs a TopK pattern and a vector variable, got "
                         f"pattern {pattern} and variable shape {shape}")
    x = _start(objective, shape, x0)
    X = _design_matrix(objective)

    if newton == "restricted":
        return _topk_iobs_restricted(objective, pattern, x, X, max_iter, tol, damping, step)

    # direction(g) = H^{-1} g (or damped); built once when H is constant (least squares)
    n_factor, solver, delta = 0, "cholesky", 0.0
    if X is not None:
        n, p = X.shape
        if damping is not None:
            delta = damping_shift(float(np.einsum("ij,ij->", X, X)) / p, damping)
        if n < p and delta == 0.0:
            raise ValueError(f"the least-squares Hessian X'X is singular (rank <= n={n} < p={p}), "
                             "a Newton step is undefined; pass damping > 0 (damped step, exact "
                             "via Woodbury) or newton='restricted'")
        if n < p:
            cfw, solver, n_factor = woodbury_factor(X, delta), "woodbury", 1

            def direction(g, x, it):
                return woodbury_solve(X, cfw, delta, g)

        else:
            H = X.T @ X
            cf, delta = _factor(H, damping, "(least squares, H = X'X)")
            n_factor = 1

            def direction(g, x, it):
                return _newton_direction(cf, g, H.shape[0])

    else:
        state = {"H": None, "cf": None}

        def direction(g, x, it):
            nonlocal n_factor, delta
            H = _hessian(objective, x, shape)
            # a quadratic's Hessian never changes: reuse its factor (O(p^2) check vs O(p^3))
            if state["H"] is None or not np.array_equal(H, state["H"]):
                state["cf"], delta = _factor(H, damping, f"at iteration {it}")
                state["H"], n_factor = H, n_factor + 1
            return _newton_direction(state["cf"], g, H.shape[0])

    def newton_point(x, g, it):
        return x.astype(np.float64) - step * direction(g, x, it)

    result = _top_k_newton_loop(objective, pattern, x, newton_point, max_iter, tol, step)
    result.info.update({"damping": delta, "pattern": str(pattern), "newton": "full",
                        "linear_solver": solver, "factorizations": n_factor})
    return result


def _top_k_newton_loop(objective, pattern, x, newton_point, max_iter, tol, step):
    """theta <- T_k(newton_point(theta, grad f(theta), t)) until the residual is <= tol.

    The loop shared by both Top-k I-OBS variants (eq. 12); ``newton_point`` returns the
    float64 Newton point (full or restricted). Records the history and returns a
    :class:`SolverResult` with an empty ``info`` for the caller to fill.
    """
    shape, dtype = x.shape, x.dtype
    hist = History()
    t0 = time.perf_counter()
    hist.append(objective=objective.value(x), support=np.count_nonzero(x), step=0.0, time=0.0)
    stop, status, it = "max_iter", MAX_ITER, 0
    for it in range(1, max_iter + 1):
        g = _gradient(objective, x, shape)
        x_new = pattern.project(newton_point(x, g, it)).astype(dtype, copy=False)
        res = _residual(x_new, x)
        x = x_new
        hist.append(objective=objective.value(x), support=np.count_nonzero(x), step=step,
                    residual=res, time=time.perf_counter() - t0)
        if res <= tol:
            stop, status = "residual <= tol", SUCCESS
            break
    return SolverResult(x=x, history=hist.as_dict(), nit=it, stop_reason=stop, status=status,
                        info={})


def _topk_iobs_restricted(objective, pattern, x, X, max_iter, tol, damping, step):
    """Restricted-Newton Top-k I-OBS loop (see :func:`topk_iobs`, ``newton="restricted"``)."""
    shape, k = x.shape, pattern.k
    p = shape[0]
    state = {"delta": 0.0, "mean_diag": None, "factorizations": 0}
    if X is not None:
        state["mean_diag"] = float(np.einsum("ij,ij->", X, X)) / p

    def newton_point(x, g, it):
        Q = _restricted_set(x, g, k)
        if X is not None:
            XQ = X[:, Q]
            HQQ = XQ.T @ XQ
        else:
            H = _hessian(objective, x, shape)
            if H.shape != (p, p):
                raise ValueError(f"objective.hessian returned shape {H.shape}, expected ({p}, {p})")
            HQQ = H[np.ix_(Q, Q)]
            state["mean_diag"] = float(np.mean(np.diag(H)))
        if damping is not None:
            delta = damping_shift(state["mean_diag"], damping, f"at iteration {it}")
            state["delta"] = delta
            HQQ = HQQ + delta * np.eye(Q.size)
        cf = cholesky_pd(HQQ)
        state["factorizations"] += 1
        if cf is None:
            hint = "; pass damping=delta" if damping is None else f" even after damping by {delta:g}"
            raise ValueError(f"the Hessian block H_QQ on the {Q.size} coordinates Q (support plus "
                             f"k gradient coordinates) is not positive definite at iteration "
                             f"{it}, the restricted Newton step is undefined{hint}")
        point = np.zeros(p)
        point[Q] = x[Q].astype(np.float64) - step * scipy.linalg.cho_solve(
            cf, g[Q].astype(np.float64), check_finite=False)
        return point

    result = _top_k_newton_loop(objective, pattern, x, newton_point, max_iter, tol, step)
    result.info.update({"damping": state["delta"], "pattern": str(pattern), "newton": "restricted",
                        "linear_solver": "cholesky", "factorizations": state["factorizations"]})
    return result


# ----------------------------------------------------------------------------- exact I-OBS


def iobs_step(theta, grad, H, k: int, *, mask_solver: str = "auto", max_nodes: int = 200_000,
              return_info: bool = False):
    """One exact I-OBS step (iobs-wu Alg. 1 option 2, Lemma 2).

    Parameters
    ----------
    theta : array_like, shape (d,)
        Current iterate theta_t.
    grad : array_like, shape (d,)
        grad f(theta_t).
    H : array_like, shape (d, d)
        Positive definite Hessian H_t (ValueError otherwise: Lemma 2 needs H_t > 0).
    k : int
        Support size of the next iterate, 0 <= k <= d.
    mask_solver : {"auto", "enumerate", "bnb"}, keyword-only
        Exact solver of the mask problem (eq. 24), see
        :func:`sparseopt.solvers.mask_search.best_mask`.
    max_nodes : int, keyword-only
        Branch-and-bound node budget (RuntimeError when exceeded).
    return_info : bool, keyword-only
        Also return a dict: ``mask`` (kept support Q_{t+1}), ``newton`` (theta+), ``value``
        (the model increase v'H^S v of eq. 24), ``solver``, ``nodes``, ``time``.

    Returns
    -------
    theta_next : ndarray, dtype of ``theta`` (float64 for integer input)
        (I - H^{-1} H^S) theta+ (eq. 23) with S = complement of the optimal mask.
    info : dict
        Only with ``return_info=True``.

    Notes
    -----
    theta+ = theta_t - H_t^{-1} g_t (Alg. 1 line 4). With H^S = I_S' (I_S H^{-1} I_S')^{-1} I_S
    the pruned set is S_{t+1} = argmin_{|S| = d-k} (theta+)' H^S theta+ (line 7, eq. 24) and
    theta_{t+1} = (I - H^{-1} H^{S_{t+1}}) theta+ (line 10, eq. 23), which by Lemma 2 is the
    minimizer of the model <g_t, theta - theta_t> + 1/2 ||theta - theta_t||^2_{H_t} over
    ||theta||_0 <= k (eq. 8). With g_t = 0 and k = d - 1 this is WoodFisher (Sec. 3.4):
    prune q = argmin theta_q^2 / [H^{-1}]_qq, update -theta_q H^{-1} e_q / [H^{-1}]_qq.

    Examples
    --------
    >>> import numpy as np
    >>> iobs_step(np.array([3.0, 0.1, -2.0]), np.zeros(3), np.eye(3), 2)
    array([ 3.,  0., -2.])
    """
    theta = np.asarray(theta)
    if theta.ndim != 1:
        raise ValueError(f"theta must be a vector, got shape {theta.shape}")
    d = theta.shape[0]
    grad = np.asarray(grad)
    if grad.shape != (d,):
        raise ValueError(f"grad must have shape ({d},) to match theta, got {grad.shape}")
    H = np.asarray(H)
    if H.shape != (d, d):
        raise ValueError(f"H must have shape ({d}, {d}) to match theta, got {H.shape}")
    k = _check_k(k, d)
    check_finite(theta, "theta")
    check_finite(grad, "grad")
    check_finite(H, "H")
    out_dtype = theta.dtype if theta.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    H64 = H.astype(np.float64)
    cf = cholesky_pd(H64)
    if cf is None:
        raise ValueError("H must be positive definite (Lemma 2 of iobs-wu needs H_t > 0)")
    newton = theta.astype(np.float64) - scipy.linalg.cho_solve(cf, grad.astype(np.float64))
    res = best_mask(newton, H64, k, method=mask_solver, max_nodes=max_nodes)
    theta_next = res.theta.astype(out_dtype)
    if not return_info:
        return theta_next
    return theta_next, {"mask": res.mask, "newton": newton, "value": res.value,
                        "solver": res.solver, "nodes": res.nodes, "time": res.time}


def iobs(objective, k: int, *, x0=None, max_iter: int = 100, tol: float = 1e-10,
         mask_solver: str = "auto", max_nodes: int = 200_000) -> SolverResult:
    """Exact I-OBS (iobs-wu Alg. 1 option 2): every step solves the k-sparse Newton model exactly.

    Parameters
    ----------
    objective : Objective
        Smooth f of a vector variable (p,) with a positive definite dense ``hessian``.
    k : int
        Sparsity, 0 <= k <= p.
    x0 : array_like, optional, keyword-only
        Start; default ``objective.reference`` if set, else zeros.
    max_iter : int, default 100, keyword-only
    tol : float, default 1e-10, keyword-only
        Stop when ||x_{t+1} - x_t|| / max(1, ||x_t||) <= tol.
    mask_solver : {"auto", "enumerate", "bnb"}, keyword-only
        Exact solver of the optimal-mask problem (eq. 24); "auto" enumerates all C(p, k)
        supports when there are at most 50 000 of them and runs branch-and-bound otherwise.
    max_nodes : int, keyword-only
        Branch-and-bound node budget per step; exceeding it raises RuntimeError.

    Returns
    -------
    SolverResult
        ``history`` has the standard keys (``objective`` = f) plus ``nodes`` (supports or
        nodes the mask solver evaluated), ``mask_time`` (seconds) and ``model_increase``
        (v'H^S v of eq. 24). ``info``: ``mask_solver`` (solver used at each step),
        ``nodes_total``, ``mask_time_total``.

    Notes
    -----
    Each step is :func:`iobs_step` with g_t = grad f(theta_t), H_t = hessian(theta_t)
    (Alg. 1 lines 3-10, eq. 23-24). Theorem 1: under Assumptions 1-4 and k* <= k,
    ||theta_{t+1} - theta*|| <= (1 + sqrt(L/mu (d-k*)/(d-k))) M/(2 mu) ||theta_t - theta*||^2
    (eq. 9). On a quadratic the model is exact, so one step gives the best k-sparse point.
    """
    shape = _check_objective(objective, vector=True)
    k = _check_k(k, shape[0])
    _check_iters(max_iter, tol)
    check_choice(mask_solver, "mask_solver", ("auto", "enumerate", "bnb"))
    x = _start(objective, shape, x0)
    hist = History(HISTORY_KEYS + ("nodes", "mask_time", "model_increase"))
    t0 = time.perf_counter()
    hist.append(objective=objective.value(x), support=np.count_nonzero(x), step=0.0, time=0.0)
    solvers, nodes_total, mask_time = [], 0, 0.0
    stop, status, it = "max_iter", MAX_ITER, 0
    for it in range(1, max_iter + 1):
        g = _gradient(objective, x, shape)
        H = _hessian(objective, x, shape)
        try:
            x_new, info = iobs_step(x, g, H, k, mask_solver=mask_solver, max_nodes=max_nodes,
                                    return_info=True)
        except ValueError as err:
            if "positive definite" in str(err):
                raise ValueError(f"objective.hessian(x) is not positive definite at iteration "
                                 f"{it}; exact I-OBS needs H_t > 0 (iobs-wu Lemma 2)") from None
            raise
        res = _residual(x_new, x)
        x = x_new
        solvers.append(info["solver"])
        nodes_total += info["nodes"]
        mask_time += info["time"]
        hist.append(objective=objective.value(x), support=np.count_nonzero(x), step=1.0,
                    residual=res, time=time.perf_counter() - t0, nodes=info["nodes"],
                    mask_time=info["time"], model_increase=info["value"])
        if res <= tol:
            stop, status = "residual <= tol", SUCCESS
            break
    return SolverResult(x=x, history=hist.as_dict(), nit=it, stop_reason=stop, status=status,
                        info={"mask_solver": solvers, "nodes_total": nodes_total,
                              "mask_time_total": mask_time})


# ----------------------------------------------------------------------------- stochastic I-OBS


@dataclass(frozen=True)
class SampledGradient:
    """Mini-batch gradients of an objective f = (1/n) sum_i f_i or sum_i f_i.

    Attributes
    ----------
    n_samples : int
        Number of samples n.
    grad : callable
        ``grad(w, idx) -> ndarray`` of the objective's shape: an unbiased estimate of
        grad f(w) from the samples ``idx`` (int array, distinct indices in range(n)).
        ``grad(w, np.arange(n))`` must equal the full gradient.
    """

    n_samples: int
    grad: Callable


def sampled_gradient(objective) -> SampledGradient:
    """Mini-batch gradients of :class:`~sparseopt.objectives.LeastSquares` or
    :class:`~sparseopt.objectives.Logistic` by subsampling rows of X.

    Notes
    -----
    LeastSquares f = 0.5 ||Xw - y||^2 is a sum over rows, so the unbiased estimate from a batch
    B is (n/|B|) X_B'(X_B w - y_B). Logistic f is a mean plus l2/2 ||w||^2, so the estimate is
    the batch mean of the per-row gradients plus l2 w. Other objectives: build a
    :class:`SampledGradient` yourself.
    """
    from ..objectives import LeastSquares, Logistic

    if isinstance(objective, LeastSquares):
        X, y = objective.X, objective.y
        n = X.shape[0]

        def grad(w, idx):
            XB = X[idx]
            return (n / len(idx)) * (XB.T @ (XB @ w - y[idx]))

        return SampledGradient(n, grad)
    if isinstance(objective, Logistic):
        X, y, l2 = objective.X, objective.y, objective.l2
        s = 2.0 * y - 1.0 if set(np.unique(y).tolist()) <= {0.0, 1.0} else y
        s = s.astype(X.dtype)

        def grad(w, idx):
            XB, sB = X[idx], s[idx]
            m = (sB * (XB @ w)).astype(np.float64)
            coef = -sB * np.exp(-np.logaddexp(0.0, m)) / len(idx)  # sigma(-m), stably
            return XB.T @ coef.astype(X.dtype) + l2 * w

        return SampledGradient(X.shape[0], grad)
    raise ValueError(f"objective of type {type(objective).__name__} has no built-in mini-batch "
                     "gradient; pass sampler=SampledGradient(n_samples, grad)")


def _lemma4_step(theta, g, mask, lam) -> float:
    """The step eta of iobs-wu Lemma 4: E_Q(theta - eta g) (E_Q keeps the entries in ``mask``,
    zeroes the rest) is the exact minimizer of <g, d> + <g, d>^2 / (2||g||^2) + lam/2 ||d||^2,
    d = theta' - theta, over theta' vanishing off ``mask`` (without assuming supp theta in mask).

    With c = -<g_S, theta_S> (S the complement of the mask: the fixed part of <g, d>),
    stationarity on Q gives d_Q = -eta g_Q, eta = (1 + c/||g||^2) / (lam + ||g_Q||^2/||g||^2);
    for theta_S = 0 (the solver: Q = supp theta) this is Lemma 4's
    eta = 1 / (lam + ||E_Q g||^2 / ||g||^2). For g = 0 every eta gives d = 0; 1/lam is returned.
    """
    g2 = float(g @ g)
    if g2 == 0.0:
        return 1.0 / lam
    c = -float(g[~mask] @ theta[~mask])
    return (1.0 + c / g2) / (lam + float(g[mask] @ g[mask]) / g2)


def stochastic_iobs(objective, k: int, *, batch_size: int,
                    sampler: SampledGradient | None = None, lam: float | None = None, x0=None,
                    max_iter: int = 1000, tol: float = 0.0, seed=0) -> SolverResult:
    """Stochastic I-OBS (iobs-wu App. B.1, Lemma 4): mini-batch gradients, Fisher-type curvature.

    Parameters
    ----------
    objective : Objective
        Smooth f of a vector variable (p,); used for the recorded objective values, the
        default ``lam`` and the default ``sampler``.
    k : int
        Sparsity, 0 <= k <= p.
    batch_size : int, keyword-only
        Samples per mini-batch, drawn without replacement, 1 <= batch_size <= n_samples.
    sampler : SampledGradient, optional, keyword-only
        Mini-batch gradients; default :func:`sampled_gradient` (LeastSquares, Logistic).
    lam : float, optional, keyword-only
        lam > 0 of eq. 14, grad^2 f <= lam I + E[g g'/||g||^2]; default ``objective.lipschitz()``
        (the paper: eq. 14 then holds automatically).
    x0 : array_like, optional, keyword-only
        Start; default ``objective.reference`` if set, else zeros.
    max_iter : int, default 1000, keyword-only
    tol : float, default 0.0, keyword-only
        Stop when ||x_{t+1} - x_t|| / max(1, ||x_t||) <= tol (0 = run all iterations).
    seed : int or numpy Generator, keyword-only
        Seeds the mini-batch draws.

    Returns
    -------
    SolverResult
        ``history["objective"]`` is the full f, ``step`` the step size eta_t, ``lam`` the
        constant lam. ``info``: ``lam``, ``batch_size``.

    Notes
    -----
    With a stochastic gradient g = g(theta_t) and Q_t = supp theta_t (App. B.1):

        theta_{t+1} = T_k(theta_t - eta_t g),  eta_t = 1 / (lam + ||E_{Q_t} g||^2 / ||g||^2).

    eta_t is the step of Lemma 4, the exact minimizer over the mask Q of the model
    <g, d> + <g, d>^2 / (2||g||^2) + lam/2 ||d||^2 when theta_t vanishes off Q (eq. 14 replaces
    the Hessian by lam I + g g'/||g||^2). The paper's proof of Lemma 4 uses theta - theta_t =
    E_Q(theta - theta_t), which needs supp theta_t in Q; with Q = Q_t that holds. A zero
    gradient leaves theta_t unchanged.
    """
    shape = _check_objective(objective, vector=True)
    k = _check_k(k, shape[0])
    _check_iters(max_iter, tol)
    if sampler is None:
        sampler = sampled_gradient(objective)
    elif not isinstance(sampler, SampledGradient):
        raise ValueError(f"sampler must be a SampledGradient, got {type(sampler).__name__}")
    n = int(sampler.n_samples)
    check_int(batch_size, "batch_size", minimum=1, maximum=n)
    lam = check_real(float(objective.lipschitz()) if lam is None else lam, "lam", positive=True)
    rng = np.random.default_rng(seed)
    x = _start(objective, shape, x0)
    dtype = x.dtype
    topk = TopK(k)

    hist = History()
    t0 = time.perf_counter()
    hist.append(objective=objective.value(x), support=np.count_nonzero(x), lam=lam, step=0.0,
                time=0.0)
    stop, status, it = "max_iter", MAX_ITER, 0
    for it in range(1, max_iter + 1):
        idx = rng.choice(n, size=batch_size, replace=False)
        g = np.asarray(sampler.grad(x, idx), dtype=np.float64)
        if g.shape != shape:
            raise ValueError(f"sampler.grad returned shape {g.shape}, expected {shape}")
        check_finite(g, "sampler.grad(x, idx)")
        eta = _lemma4_step(x, g, x != 0, lam)
        x_new = topk.project(x.astype(np.float64) - eta * g).astype(dtype, copy=False)
        res = _residual(x_new, x)
        x = x_new
        hist.append(objective=objective.value(x), support=np.count_nonzero(x), lam=lam, step=eta,
                    residual=res, time=time.perf_counter() - t0)
        if res <= tol:
            stop, status = "residual <= tol", SUCCESS
            break
    return SolverResult(x=x, history=hist.as_dict(), nit=it, stop_reason=stop, status=status,
                        info={"lam": lam, "batch_size": int(batch_size)})
