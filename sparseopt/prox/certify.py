"""Global optimality certificates for the N:M prox by a moment (Lasserre) SDP relaxation.

For every group, the prox problem min_w 0.5 ||w - y||^2 + lam r_{N:M}(w) is a polynomial
optimization problem. Its order-d moment relaxation is a small convex SDP whose optimum is a
lower bound on the global minimum; if a candidate w attains that bound (up to a tolerance)
it is certified globally optimal, independently of how w was computed.
"""

from __future__ import annotations

import itertools
import numbers
import warnings
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..patterns import NM, check_finite
from ..regularizers import prox_objective

__all__ = ["Certificate", "certify"]


@dataclass
class Certificate:
    """Per-group outcome of ``certify``; arrays of shape y.shape[:-1] + (groups,).

    Attributes
    ----------
    bound : ndarray of float64
        SDP lower bound on the prox objective of the group (up to solver tolerance).
    value : ndarray of float64
        Prox objective 0.5 ||w - y||^2 + lam r_{N:M}(w) of the candidate.
    gap : ndarray of float64
        value - bound (absolute, objective units).
    certified : ndarray of bool
        gap <= tol * max_i y_i^2 over the group (see ``certify``).
    status : ndarray of str
        Solver status per group ("optimal", "optimal_inaccurate", ...).
    solver : str
        The CVXPY solver used.
    order : int
        Relaxation order d (moment matrix over monomials of degree <= d).
    """

    bound: np.ndarray
    value: np.ndarray
    gap: np.ndarray
    certified: np.ndarray
    status: np.ndarray
    solver: str = ""
    order: int = 2
    info: dict = field(default_factory=dict)


def _monomials(m: int, degree: int):
    """Exponent tuples of total degree <= ``degree`` in m variables, graded order."""
    out = []
    for d in range(degree + 1):
        for combo in itertools.combinations_with_replacement(range(m), d):
            e = [0] * m
            for i in combo:
                e[i] += 1
            out.append(tuple(e))
    return out


def _add(*exps):
    return tuple(int(sum(t)) for t in zip(*exps))


def _unit(m, i):
    e = [0] * m
    e[i] = 1
    return tuple(e)


@lru_cache(maxsize=16)
def _relaxation(n: int, m: int, order: int):
    """Build the parametrized CVXPY problem once per (n, m, order).

    Variables: the moments y_alpha, |alpha| <= 2 order, with y_0 = 1. Parameters: z (m,)
    and lam. Constraints (all valid for the moments of any point u with 0 <= u <= z):
    M_d(y) >= 0; localizing M_{d-1}(u_i y) >= 0, M_{d-1}((z_i - u_i) y) >= 0 and
    M_{d-1}(u_i u_j y) >= 0 (i < j).
    """
    import cvxpy as cp
    import scipy.sparse as sp

    mons = _monomials(m, 2 * order)
    index = {e: k for k, e in enumerate(mons)}
    nmom = len(mons)
    yv = cp.Variable(nmom - 1)
    yy = cp.hstack([np.ones(1), yv])  # y_0 = 1: moments of a probability measure
    zp = cp.Parameter(m, nonneg=True)
    zz = cp.Parameter((m, m), nonneg=True)  # outer(z, z), a separate parameter keeps DPP
    lp = cp.Parameter(nonneg=True)

    def moment_matrix(basis, shift):
        """Affine map y -> [y_{a + b + shift}]_{a, b in basis} as an expression."""
        size = len(basis)
        rows, cols = [], []
        for a in range(size):
            for b in range(size):
                rows.append(a * size + b)
                cols.append(index[_add(basis[a], basis[b], shift)])
        sel = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(size * size, nmom))
        return cp.reshape(sel @ yy, (size, size), order="C")

    zero = (0,) * m
    basis_d = _monomials(m, order)
    basis_l = _monomials(m, order - 1)
    cons = [moment_matrix(basis_d, zero) >> 0]
    for i in range(m):
        ui = _unit(m, i)
        loc_u = moment_matrix(basis_l, ui)
        cons.append(loc_u >> 0)
        cons.append(zp[i] * moment_matrix(basis_l, zero) - loc_u >> 0)
        for j in range(i + 1, m):
            uj = _unit(m, j)
            # products of the box constraints: u_i u_j, u_i (z_j - u_j), u_j (z_i - u_i),
            # (z_i - u_i)(z_j - u_j) are all >= 0 on the box
            uiuj = moment_matrix(basis_l, _add(ui, uj))
            loc_uj = moment_matrix(basis_l, uj)
            cons.append(uiuj >> 0)
            cons.append(zp[j] * loc_u - uiuj >> 0)
            cons.append(zp[i] * loc_uj - uiuj >> 0)
            cons.append(zz[i, j] * moment_matrix(basis_l, zero) - zp[i] * loc_uj - zp[j] * loc_u + uiuj >> 0)
        # u_i (z_i - u_i) >= 0
        cons.append(zp[i] * loc_u - moment_matrix(basis_l, _add(ui, ui)) >> 0)
    # objective 0.5 sum (u_i^2 - 2 z_i u_i) + lam e_{N+1}(u); the constant 0.5||z||^2 is
    # added outside so the problem stays DPP (parameters enter affinely)
    sq = np.array([index[_add(_unit(m, i), _unit(m, i))] for i in range(m)])
    lin = np.array([index[_unit(m, i)] for i in range(m)])
    prods = np.array(
        [index[tuple(1 if i in s else 0 for i in range(m))] for s in itertools.combinations(range(m), n + 1)]
    )
    objective = 0.5 * cp.sum(yy[sq]) - zp @ yy[lin] + lp * cp.sum(yy[prods])
    problem = cp.Problem(cp.Minimize(objective), cons)
    return problem, zp, zz, lp


def certify(y, lam, w, n=2, m=4, *, tol=1e-6, solver=None, order=2):
    """Certify global optimality of a prox candidate ``w`` by a moment SDP lower bound.

    Parameters
    ----------
    y : array_like, float
        Prox input; groups of ``m`` consecutive entries along the last axis.
    lam : float
        Regularization strength, lam >= 0.
    w : array_like, same shape as y
        Candidate prox output (any point; it need not be sparse or sorted).
    n, m : int
        The N:M pattern, 0 <= n < m, with n + 1 <= 2 * order (the relaxation must contain
        the degree-(n+1) objective). 2:4 is the main case; small N:M work the same way.
    tol : float, keyword-only
        Certification threshold on the gap, relative to the group's scale (the objective
        scales like y^2): certified iff value - bound <= tol * max_i y_i^2 (for y = 0: iff
        value <= bound = 0). Default 1e-6 (the SDP is solved to about 1e-9 relative
        accuracy, so much smaller values are not meaningful).
    solver : str or None, keyword-only
        CVXPY solver name; default "CLARABEL" (an interior-point conic solver), "SCS" works
        with lower accuracy.
    order : int, keyword-only
        Relaxation order d >= 1; the moment matrix is indexed by monomials of degree <= d
        (15 x 15 for m = 4, d = 2). Default 2.

    Returns
    -------
    Certificate
        ``bound``, ``value``, ``gap``, ``certified``, ``status`` per group.

    Raises
    ------
    ValueError
        On NaN/Inf or non-floating ``y``/``w``, mismatched shapes, a last axis not divisible
        by ``m``, ``lam`` < 0, invalid ``n``/``m``, ``tol`` <= 0, ``order`` < 1 or too small
        for the objective degree n + 1, or an unknown ``solver``.

    Notes
    -----
    Sign reduction: r_{N:M}(w) = e_{N+1}(|w|) depends on |w| only and
    (|w_i| - |y_i|)^2 <= (w_i - y_i)^2, so min_w f(w) = min_{u >= 0} 0.5||u - z||^2 +
    lam e_{N+1}(u) with z = |y| (prox24-kubler Lemma 3, first half; no sorting needed).
    Any minimizer satisfies u <= z (if u_i > z_i, d f / d u_i = u_i - z_i +
    lam e_N(u without i) > 0, proof of Cor. 6), so the box 0 <= u <= z can be added
    without changing the minimum.

    Relaxation (Lasserre): replace each monomial u^alpha, |alpha| <= 2d, by a variable
    y_alpha with y_0 = 1. The objective becomes linear,
    0.5 sum_i (y_{2 e_i} - 2 z_i y_{e_i} + z_i^2) + lam sum_{|S| = N+1} y_{e_S}, and every
    point u of the box gives moments (y_alpha = u^alpha) that satisfy: the moment matrix
    M_d(y) = [y_{a+b}] >= 0 and the localizing matrices M_{d-1}(g y) >= 0 for
    g = u_i, z_i - u_i and u_i u_j. Hence the SDP optimum is <= the global minimum: a valid
    lower bound (up to the solver's accuracy; it is the primal SDP value, not a rounded
    dual certificate). Each group is normalized to max |y| = 1 before solving: with
    w = s u, y = s v the objective is s^2 (0.5 ||u - v||^2 + lam s^(N-1) e_{N+1}(u)).

    Examples
    --------
    >>> import numpy as np
    >>> from sparseopt.prox.reference import prox_bruteforce
    >>> y = np.array([2.0, -1.5, 1.0, 0.3]); w = prox_bruteforce(y, 0.3)
    >>> certify(y, 0.3, w).certified
    array([ True])
    """
    y = np.asarray(y)
    w = np.asarray(w)
    for name, a in (("y", y), ("w", w)):
        if not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"{name} must have a floating dtype, got {a.dtype}")
        check_finite(a, name)
    if y.shape != w.shape:
        raise ValueError(f"w has shape {w.shape}, y has shape {y.shape}; they must match")
    if not isinstance(lam, numbers.Real) or isinstance(lam, bool) or not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite non-negative scalar, got {lam!r}")
    pattern = NM(n, m)
    if n >= m:
        raise ValueError(f"n must satisfy n < m for r_{{N:M}}, got n={n}, m={m}")
    if not isinstance(tol, numbers.Real) or not np.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be a positive finite number, got {tol!r}")
    if not isinstance(order, numbers.Integral) or order < 1:
        raise ValueError(f"order must be a positive integer, got {order!r}")
    if n + 1 > 2 * order:
        raise ValueError(f"order={order} is too small for the degree-{n + 1} objective; need 2*order >= n+1")
    import cvxpy as cp

    solver = "CLARABEL" if solver is None else solver
    if solver not in cp.installed_solvers():
        raise ValueError(f"solver {solver!r} is not an installed CVXPY solver {cp.installed_solvers()}")
    groups = pattern._groups(y, "y")
    lead = groups.shape[:-1]
    z_all = np.abs(groups.reshape(-1, m).astype(np.float64))
    value = prox_objective(w, y, lam, n, m).reshape(-1)
    problem, zp, zz, lp = _relaxation(int(n), int(m), int(order))
    bound = np.empty(z_all.shape[0])
    status = np.empty(z_all.shape[0], dtype=object)
    opts = {}
    for gi, z in enumerate(z_all):
        sigma = z.max()
        if sigma == 0.0:  # f(u) = 0.5||u||^2 + lam e(u) >= 0 = f(0) on u >= 0
            bound[gi], status[gi] = 0.0, "trivial"
            continue
        zp.value = z / sigma
        zz.value = np.outer(z / sigma, z / sigma)
        lp.value = float(lam) * sigma ** (n - 1)  # e_{N+1} is homogeneous of degree N+1
        try:
            with warnings.catch_warnings():
                # "optimal_inaccurate" is reported per group in ``status`` instead
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                problem.solve(solver=solver, **opts)
        except cp.error.SolverError as exc:
            bound[gi], status[gi] = -np.inf, f"solver_error: {exc}"
            continue
        status[gi] = problem.status
        if problem.status in ("optimal", "optimal_inaccurate") and problem.value is not None:
            bound[gi] = sigma**2 * (problem.value + 0.5 * float(np.sum((z / sigma) ** 2)))
        else:  # no bound: never certify
            bound[gi] = -np.inf
    scale = z_all.max(axis=1) ** 2 if z_all.size else np.zeros(0)
    gap = value - bound
    certified = (gap <= tol * scale) & np.isfinite(bound)
    return Certificate(
        bound=bound.reshape(lead),
        value=value.reshape(lead),
        gap=gap.reshape(lead),
        certified=certified.reshape(lead),
        status=status.astype(str).reshape(lead),
        solver=solver,
        order=int(order),
    )
