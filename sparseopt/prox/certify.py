"""Global optimality certificates for the N:M prox by a moment (Lasserre) SDP relaxation.

For every group, the prox problem min_w 0.5 ||w - y||^2 + lam r_{N:M}(w) is a polynomial
optimization problem. Its order-d moment relaxation is a small convex SDP; its dual is a
sum-of-squares (SOS) certificate. The dual solution the SDP solver returns is turned into a
rigorous lower bound on the global minimum (PSD projection of the Gram matrices, residual
polynomial computed in exact integer arithmetic, bounded on the box 0 <= u <= |y|); if a
candidate w attains that bound (up to a tolerance) it is certified globally optimal,
independently of how w was computed and of the solver's accuracy. Where the relaxation of
the whole box is not tight enough, a spatial branch-and-bound splits the box and bounds
every sub-box the same rigorous way (``certify`` Notes).
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..patterns import NM
from ..validation import check_finite, check_int, check_nm, check_real
from ..regularizers import prox_objective
from ..result import Result

__all__ = ["Certificate", "certify"]


@dataclass(repr=False)
class Certificate(Result):
    """Per-group outcome of ``certify``, a :class:`~sparseopt.result.Result`: ``x`` is the
    candidate ``w`` (float64), ``fun`` the total prox objective (the sum of ``value``),
    ``nit`` the SDP solves (root and branch-and-bound), ``stop_reason`` says how many groups
    are certified; there is no
    iteration, so ``history`` is empty. The per-group arrays have shape
    y.shape[:-1] + (groups,).

    Attributes
    ----------
    bound : ndarray of float64
        Rigorous lower bound on the global minimum of the prox objective of the group: the
        root relaxation's, or where that does not certify the candidate, the
        branch-and-bound's (-inf where the root solver returned no dual solution and there
        was no branching).
    value : ndarray of float64
        Prox objective 0.5 ||w - y||^2 + lam r_{N:M}(w) of the candidate.
    gap : ndarray of float64
        value - bound (absolute, objective units).
    certified : ndarray of bool
        gap <= tol * max_i y_i^2 over the group (see ``certify``).
    solver_status : ndarray of str
        The SDP solver's status per group ("optimal", "optimal_inaccurate", ...).
    solver : str
        The CVXPY solver used.
    order : int
        Relaxation order d (moment matrix over monomials of degree <= d).
    info : dict
        Per-group arrays. Of the root relaxation (the whole box): ``gamma`` (constant of
        p - q, the SOS lower bound before the residual correction),
        ``residual_correction`` (>= 0; root bound = gamma - correction, up to the final
        rounding down; equal to ``bound`` where ``nodes`` == 1), ``residual_max`` (max
        |r_alpha| of the residual polynomial, alpha != 0, normalized units), ``sdp_value``
        (the solver's primal optimum, not a valid bound: for comparison),
        ``refine_rounds``. Of the whole run: ``solves`` (SDP solves, root and sub-boxes),
        ``nodes`` (boxes bounded: 1 = root only), ``depth`` (deepest split),
        ``open_leaves`` (leaves still below the target where the search stopped early; 0
        where it finished or did not run), ``order`` (relaxation order used, root and
        sub-boxes), ``seconds`` (wall time per group), ``upper`` (the smallest objective
        found at a feasible point: min f <= upper <= value) and ``stop`` ("trivial",
        "root", "branch_and_bound", "better_point" or "max_nodes"; see Notes).
    """

    bound: Any = None
    value: Any = None
    gap: Any = None
    certified: Any = None
    solver_status: Any = None
    solver: str = ""
    order: int = 2


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


def _blocks(m: int, order: int):
    """The PSD blocks of the relaxation as (basis, g) with g a polynomial >= 0 on the box.

    ``g`` is a list of (exponent, kind, i, j, sign): the coefficient of u^exponent is
    sign * 1 (kind "1"), sign * z_i ("z") or sign * z_i z_j ("zz"). The blocks are the
    moment matrix (g = 1, basis of degree <= d) and the localizing matrices (basis of
    degree <= d - 1) for u_i, z_i - u_i, u_i (z_i - u_i) and the pairwise products u_i u_j,
    u_i (z_j - u_j), u_j (z_i - u_i), (z_i - u_i)(z_j - u_j).
    """
    zero = (0,) * m
    basis_d = _monomials(m, order)
    basis_l = _monomials(m, order - 1)
    out = [(basis_d, [(zero, "1", 0, 0, 1.0)])]
    for i in range(m):
        ui = _unit(m, i)
        out.append((basis_l, [(ui, "1", 0, 0, 1.0)]))
        out.append((basis_l, [(zero, "z", i, 0, 1.0), (ui, "1", 0, 0, -1.0)]))
        for j in range(i + 1, m):
            uj = _unit(m, j)
            uiuj = _add(ui, uj)
            out.append((basis_l, [(uiuj, "1", 0, 0, 1.0)]))
            out.append((basis_l, [(ui, "z", j, 0, 1.0), (uiuj, "1", 0, 0, -1.0)]))
            out.append((basis_l, [(uj, "z", i, 0, 1.0), (uiuj, "1", 0, 0, -1.0)]))
            out.append((basis_l, [(zero, "zz", i, j, 1.0), (uj, "z", i, 0, -1.0),
                                  (ui, "z", j, 0, -1.0), (uiuj, "1", 0, 0, 1.0)]))
        out.append((basis_l, [(ui, "z", i, 0, 1.0), (_add(ui, ui), "1", 0, 0, -1.0)]))
    return out


def _moment_matrix(basis, shift, index, yy):
    """Affine map y -> [y_{a + b + shift}]_{a, b in basis} as a CVXPY expression."""
    import cvxpy as cp
    import scipy.sparse as sp

    size = len(basis)
    rows, cols = [], []
    for a in range(size):
        for b in range(size):
            rows.append(a * size + b)
            cols.append(index[_add(basis[a], basis[b], shift)])
    sel = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(size * size, len(index)))
    return cp.reshape(sel @ yy, (size, size), order="C")


@lru_cache(maxsize=16)
def _relaxation(n: int, m: int, order: int):
    """Build the parametrized CVXPY problem once per (n, m, order).

    Variables: the moments y_alpha, |alpha| <= 2 order, with y_0 = 1. Parameters: z (m,),
    outer(z, z) and lam. Constraints: one PSD block per entry of ``_blocks`` (all valid for
    the moments of any point u with 0 <= u <= z). Returns (problem, zp, zz, lp, blocks,
    constraints) with constraints[k] the PSD constraint of blocks[k].
    """
    import cvxpy as cp

    mons = _monomials(m, 2 * order)
    index = {e: k for k, e in enumerate(mons)}
    nmom = len(mons)
    yv = cp.Variable(nmom - 1)
    yy = cp.hstack([np.ones(1), yv])  # y_0 = 1: moments of a probability measure
    zp = cp.Parameter(m, nonneg=True)
    zz = cp.Parameter((m, m), nonneg=True)  # outer(z, z), a separate parameter keeps DPP
    lp = cp.Parameter(nonneg=True)

    blocks = _blocks(m, order)
    cons = []
    for basis, g in blocks:
        expr = 0
        for beta, kind, i, j, sign in g:
            coef = {"1": 1.0, "z": zp[i], "zz": zz[i, j]}[kind]
            expr = expr + sign * coef * _moment_matrix(basis, beta, index, yy)
        cons.append(expr >> 0)
    # objective 0.5 sum (u_i^2 - 2 z_i u_i) + lam e_{N+1}(u); the constant 0.5||z||^2 is
    # added outside so the problem stays DPP (parameters enter affinely)
    sq = np.array([index[_add(_unit(m, i), _unit(m, i))] for i in range(m)])
    lin = np.array([index[_unit(m, i)] for i in range(m)])
    prods = np.array(
        [index[tuple(1 if i in s else 0 for i in range(m))] for s in itertools.combinations(range(m), n + 1)]
    )
    objective = 0.5 * cp.sum(yy[sq]) - zp @ yy[lin] + lp * cp.sum(yy[prods])
    problem = cp.Problem(cp.Minimize(objective), cons)
    return problem, zp, zz, lp, blocks, cons


def _to_int(a, e):
    """Exact integers k with a = k * 2**e elementwise (e <= every exponent of a's entries)."""
    mant, ex = np.frexp(np.asarray(a, dtype=np.float64).ravel())
    k = (mant * 2.0**53).astype(np.int64)  # exact: 53-bit significands
    return [int(ki) << int(s) if ki else 0 for ki, s in zip(k, ex.astype(np.int64) - 53 - e)]


def _min_exponent(arrays):
    """Smallest e such that every entry of every array is an integer multiple of 2**e."""
    e = -1  # e <= -1 keeps the shifts by -e, -2e, ... below non-negative
    for a in arrays:
        a = np.asarray(a, dtype=np.float64).ravel()
        a = a[a != 0]
        if a.size:
            e = min(e, int(np.frexp(a)[1].min()) - 53)
    return e


def _sos_bound(n, m, order, v, lamp, blocks, Ls):
    """Rigorous lower bound on min_{0 <= u <= v} 0.5||u - v||^2 + lamp e_{N+1}(u).

    ``Ls[k]`` is a factor of the Gram matrix of block k (from ``_psd_factor``), so
    q(u) = sum_k g_k(u) b_k(u)^T L_k L_k^T b_k(u) is
    then >= 0 on the box by construction, and r = p - q is computed exactly in integer
    arithmetic (every float64 is k 2^e). On the box p >= q + r >= r_0 + sum_{alpha != 0}
    min(r_alpha, 0) v^alpha. Returns (bound, gamma = r_0, correction) as Fractions, then
    max_{alpha != 0} |r_alpha| and r (float64, for ``_refine``).
    """
    e = _min_exponent(Ls + [v, np.array([lamp])])
    vi = _to_int(v, e)
    mons = _monomials(m, 2 * order)
    index = {ex: k for k, ex in enumerate(mons)}
    two_d = 2 * order
    # q and p as integer coefficients at scale 2**(4e): Gram entries (L L^T) carry 2e,
    # the g coefficients (1, z_i, z_i z_j) are brought to 2e
    q = [0] * len(mons)
    for (basis, g), L in zip(blocks, Ls):
        if L.shape[1] == 0:
            continue
        H = _gram_coefficients(basis, L, e)
        for beta, kind, i, j, sign in g:
            if kind == "1":
                c = 1 << (-2 * e)
            elif kind == "z":
                c = vi[i] << (-e)
            else:
                c = vi[i] * vi[j]
            c = -c if sign < 0 else c
            for key, h in H.items():
                q[index[_add(key, beta)]] += c * h
    p = [0] * len(mons)
    zero = (0,) * m
    p[index[zero]] = sum(x * x for x in vi) << (-2 * e - 1)
    lam_i = _to_int(np.array([lamp]), e)[0]
    for i in range(m):
        p[index[_add(_unit(m, i), _unit(m, i))]] += 1 << (-4 * e - 1)
        p[index[_unit(m, i)]] -= vi[i] << (-3 * e)
    for S in itertools.combinations(range(m), n + 1):
        p[index[tuple(1 if i in S else 0 for i in range(m))]] += lam_i << (-3 * e)
    r = [pa - qa for pa, qa in zip(p, q)]
    # sum_{alpha != 0} min(r_alpha, 0) v^alpha, v^alpha brought to scale 2**(2d e)
    corr = 0
    for k, alpha in enumerate(mons):
        if k == index[zero] or r[k] >= 0:
            continue
        va = 1 << (-(two_d - sum(alpha)) * e)
        for i, ai in enumerate(alpha):
            for _ in range(ai):
                va *= vi[i]
        corr += r[k] * va
    den4 = 1 << (-4 * e)
    gamma = Fraction(r[index[zero]], den4)
    correction = Fraction(-corr, den4 << (-two_d * e))
    rmax = max((abs(x) for k, x in enumerate(r) if k != index[zero]), default=0)
    r_float = np.array([float(Fraction(x, den4)) for x in r])
    return gamma - correction, gamma, correction, float(Fraction(rmax, den4)), r_float


def _refine(m, order, blocks, Ls, r):
    """One correction step of the moment block's Gram matrix towards p - q = gamma.

    Adds to Z_0 = L_0 L_0^T the least-norm symmetric E with sum_{a + b = alpha} E_ab =
    r_alpha for alpha != 0 (E_ab = r_{a+b} / #{(a', b'): a' + b' = a + b}), then projects
    onto the PSD cone again. The exact bound is recomputed from the result by the caller,
    so this step only has to be a good heuristic (the residual shrinks geometrically).
    """
    mons = _monomials(m, 2 * order)
    index = {ex: k for k, ex in enumerate(mons)}
    basis = blocks[0][0]
    A = np.array([[index[_add(a, b)] for b in basis] for a in basis])
    count = np.bincount(A.ravel(), minlength=len(mons))
    rr = np.array(r, dtype=np.float64)
    rr[index[(0,) * m]] = 0.0  # the constant is gamma, not a residual
    Z0 = Ls[0] @ Ls[0].T + (rr / np.maximum(count, 1))[A]
    return [_psd_factor(Z0)] + list(Ls[1:])


def _psd_factor(D):
    """L with L L^T the projection of sym(D) onto the PSD cone (negative eigenvalues -> 0)."""
    D = 0.5 * (D + D.T)
    lam_, V = np.linalg.eigh(D)
    keep = lam_ > 0
    return V[:, keep] * np.sqrt(lam_[keep])


def _gram_coefficients(basis, L, e):
    """Exact integer coefficients {monomial: c} of the SOS block m' (L L') m, m the monomials
    of ``basis``, with L rounded to integers at scale 2**e (``_to_int``)."""
    Li = np.array(_to_int(L, e), dtype=object).reshape(L.shape)
    Z = Li @ Li.T
    H = {}
    for a in range(len(basis)):
        for b in range(len(basis)):
            key = _add(basis[a], basis[b])
            H[key] = H.get(key, 0) + Z[a, b]
    return H


def _round_down(x: Fraction) -> float:
    """The largest float64 <= x (float(Fraction) rounds to nearest)."""
    f = float(x)
    if Fraction(f) > x:
        f = float(np.nextafter(f, -np.inf))
    return f


# ----------------------------------------------------------------------------------------
# Spatial branch-and-bound on sub-boxes a <= u <= b (used where the root relaxation is
# not tight). Every sub-box is mapped to the unit box, u = a + (b - a) t, t in [0, 1]^m,
# so the SDP is well scaled however small the box; the objective's coefficients in t are
# exact rationals (a, b, v, lam' are dyadic), and the SOS residual is handled exactly.
# ----------------------------------------------------------------------------------------


def _poly_degree(n: int) -> int:
    return max(2, n + 1)


def _box_poly(n, m, v, lamp, a, b):
    """Exact coefficients (Fractions, graded monomial order of ``_monomials(m, max(2, n+1))``)
    of P(t) = p(a + (b - a) t), p(u) = 0.5 ||u - v||^2 + lamp e_{n+1}(u); a, b Fractions."""
    mons = _monomials(m, _poly_degree(n))
    index = {e: k for k, e in enumerate(mons)}
    c = [Fraction(0)] * len(mons)
    d = [bi - ai for ai, bi in zip(a, b)]
    lam_f = Fraction(lamp)
    for i in range(m):
        s = a[i] - Fraction(float(v[i]))
        ui = _unit(m, i)
        c[0] += s * s / 2
        c[index[ui]] += s * d[i]
        c[index[_add(ui, ui)]] += d[i] * d[i] / 2
    if lam_f:
        # e_{n+1}(a + d t) = sum_S prod_{i in S} (a_i + d_i t_i), expanded over T subset S
        for S in itertools.combinations(range(m), n + 1):
            for mask in itertools.product((0, 1), repeat=n + 1):
                coef = lam_f
                for i, bit in zip(S, mask):
                    coef *= d[i] if bit else a[i]
                if coef:
                    e = [0] * m
                    for i, bit in zip(S, mask):
                        e[i] = bit
                    c[index[tuple(e)]] += coef
    return c


def _interval_bound(m, c):
    """Exact lower bound of P(t) = sum_alpha c_alpha t^alpha on [0, 1]^m: the separable part
    c_{2e_i} t_i^2 + c_{e_i} t_i minimized exactly per coordinate, every other monomial
    bounded below by min(c_alpha, 0) (0 <= t^alpha <= 1)."""
    total = c[0]
    mons = _monomials(m, 2)  # the graded order starts with 1, t_i, then degree 2
    index = {e: k for k, e in enumerate(mons)}
    sep = set()
    for i in range(m):
        ui = _unit(m, i)
        k1, k2 = index[ui], index[_add(ui, ui)]
        sep.update((k1, k2))
        q1, q2 = c[k1], c[k2]
        best = min(Fraction(0), q1 + q2)
        if q2 > 0 and 0 < -q1 < 2 * q2:  # interior vertex t = -q1 / (2 q2)
            best = min(best, -q1 * q1 / (4 * q2))
        total += best
    for k in range(1, len(c)):
        if k not in sep and c[k] < 0:
            total += c[k]
    return total


@lru_cache(maxsize=16)
def _unit_relaxation(m: int, order: int, deg: int):
    """The order-``order`` moment relaxation of min_{t in [0, 1]^m} sum_alpha c_alpha t^alpha,
    |alpha| <= deg, with the coefficients (alpha != 0) a parameter; the constraints are
    fixed (the blocks of ``_blocks`` with z = 1). Returns (problem, cpar, blocks, cons)."""
    import cvxpy as cp

    mons = _monomials(m, 2 * order)
    index = {e: k for k, e in enumerate(mons)}
    yv = cp.Variable(len(mons) - 1)
    yy = cp.hstack([np.ones(1), yv])
    blocks = _blocks(m, order)
    cons = []
    for basis, g in blocks:
        expr = 0
        for beta, kind, i, j, sign in g:  # z_i = 1 on the unit box, whatever the kind
            expr = expr + sign * _moment_matrix(basis, beta, index, yy)
        cons.append(expr >> 0)
    obj_mons = _monomials(m, deg)[1:]
    cpar = cp.Parameter(len(obj_mons))
    objective = cpar @ yy[np.array([index[e] for e in obj_mons])]
    return cp.Problem(cp.Minimize(objective), cons), cpar, blocks, cons


def _sos_bound_unit(m, order, blocks, Ls, c):
    """Rigorous lower bound on min_{[0, 1]^m} P for P with exact coefficients ``c`` (the
    monomials of degree <= 2 order, graded order, Fractions), from Gram factors ``Ls``.

    As ``_sos_bound``: q = sum_k g_k ||L_k^T b_k||^2 >= 0 on the unit box (the g_k are
    products of t_i and 1 - t_i), r = P - q exactly, and on the unit box 0 <= t^alpha <= 1,
    so P >= r_0 + sum_{alpha != 0} min(r_alpha, 0). Returns (bound, gamma, correction,
    max |r_alpha|, r as float64).
    """
    e = _min_exponent(Ls)
    mons = _monomials(m, 2 * order)
    index = {ex: k for k, ex in enumerate(mons)}
    q = [0] * len(mons)
    for (basis, g), L in zip(blocks, Ls):
        if L.shape[1] == 0:
            continue
        H = _gram_coefficients(basis, L, e)
        for beta, kind, i, j, sign in g:
            for key, h in H.items():
                q[index[_add(key, beta)]] += h if sign > 0 else -h
    den = 1 << (-2 * e)
    r = [ck - Fraction(qk, den) for ck, qk in zip(c, q)]
    gamma = r[0]
    correction = -sum((x for x in r[1:] if x < 0), Fraction(0))
    rmax = max((abs(x) for x in r[1:]), default=Fraction(0))
    return gamma - correction, gamma, correction, float(rmax), np.array([float(x) for x in r])


def _tighten(a, b, perm):
    """Shrink the box [a, b] to a box containing its intersection with the cone
    u_{perm[0]} >= u_{perm[1]} >= ... (see ``certify`` Notes); None if that is empty."""
    a, b = list(a), list(b)
    for k in range(1, len(perm)):
        b[perm[k]] = min(b[perm[k]], b[perm[k - 1]])
    for k in range(len(perm) - 2, -1, -1):
        a[perm[k]] = max(a[perm[k]], a[perm[k + 1]])
    if any(ai > bi for ai, bi in zip(a, b)):
        return None
    return a, b


def _objective(n, m, v, lamp, U):
    """p(u) = 0.5 ||u - v||^2 + lamp e_{n+1}(u) at the rows of U (float64, scaled units)."""
    e = sum(U[:, list(S)].prod(axis=1) for S in itertools.combinations(range(m), n + 1))
    return 0.5 * np.sum((U - v) ** 2, axis=1) + lamp * e


def _descend(n, m, v, lamp, U, sweeps=50):
    """Smallest p found by exact coordinate minimization over the box 0 <= u <= v from every
    row of U (clipped to the box first). p is quadratic in each u_i with coefficient 1/2 of
    u_i^2, so u_i = clip(v_i - lamp e_n(u without i), 0, v_i) minimizes it exactly and p
    never increases. Any point of the box is feasible, so the result is an upper bound on
    min p (float64 evaluation): used only to stop early, never to certify."""
    U = np.clip(np.asarray(U, dtype=np.float64), 0.0, v)
    others = [[list(S) for S in itertools.combinations([k for k in range(m) if k != i], n)]
              for i in range(m)]
    for _ in range(sweeps):
        before = U.copy()
        for i in range(m):
            en = sum(U[:, S].prod(axis=1) for S in others[i])  # e_n(u without i); e_0 = 1
            U[:, i] = np.clip(v[i] - lamp * en, 0.0, v[i])
        if np.array_equal(U, before):
            break
    return float(np.min(_objective(n, m, v, lamp, U)))


def _node_bound(n, m, order, v, lamp, a, b, target, solver, retries, refine, abs_tol):
    """Rigorous lower bound (a Fraction, scaled units) of p on the box [a, b], the SDP
    solves used, and a point of the box for the upper bound (the SDP's first moments, or
    None without a solve): the exact interval bound, and where that is below ``target`` the
    larger of it and the unit-box SOS bound of P(t) = p(a + (b - a) t) (constant removed and
    scaled by a power of two, so the solver sees O(1) data; both are undone exactly)."""
    import cvxpy as cp

    c = _box_poly(n, m, v, lamp, a, b)
    best = _interval_bound(m, c)
    if best >= target:
        return best, 0, None
    big = max(abs(x) for x in c[1:])
    if big == 0:
        return c[0], 0, None  # constant on the box
    s = Fraction(2) ** (math.frexp(float(big))[1])  # power of two >= ~max |c_alpha|
    cn = [Fraction(0)] + [x / s for x in c[1:]]
    cn += [Fraction(0)] * (len(_monomials(m, 2 * order)) - len(cn))
    problem, cpar, blocks, cons = _unit_relaxation(int(m), int(order), _poly_degree(n))
    cpar.value = np.array([float(x) for x in cn[1:len(c)]])
    solves, point = 0, None
    af = np.array([float(x) for x in a])
    bf = np.array([float(x) for x in b])
    for opts in retries:
        solves += 1
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                problem.solve(solver=solver, **opts)
        except cp.error.SolverError:
            continue
        duals = [cc.dual_value for cc in cons]
        if problem.status not in ("optimal", "optimal_inaccurate") or any(dd is None for dd in duals):
            continue
        # the first moments y_{e_i} (graded order: right after y_0) are an average of the
        # relaxation's minimizers: a good point to start the upper bound's descent from
        t = np.clip(problem.variables()[0].value[:m], 0.0, 1.0)
        point = af + (bf - af) * t
        Ls = [_psd_factor(np.asarray(dd, dtype=np.float64)) for dd in duals]
        cand = _sos_bound_unit(m, order, blocks, Ls, cn)
        rounds = 0
        while rounds < refine and cand[2] * s > 0.1 * abs_tol:
            Ls = _refine(int(m), int(order), blocks, Ls, cand[4])
            nxt = _sos_bound_unit(m, order, blocks, Ls, cn)
            rounds += 1
            if nxt[0] <= cand[0]:
                break
            cand = nxt
        best = max(best, c[0] + s * cand[0])
        if best >= target or cand[2] * s <= 0.1 * abs_tol:
            break  # done, or the gap is the relaxation's, not the residual's
    return best, solves, point


def _branch_and_bound(n, m, order, v, lamp, root, target, value_s, upper, max_nodes, solver,
                      retries, refine, abs_tol):
    """Best-first spatial branch-and-bound over the box 0 <= u <= v (scaled units).

    ``root`` is a rigorous bound on the whole box (the root counts as one node), ``target``
    the level at which a leaf is fathomed, ``value_s`` the candidate's value and ``upper``
    the smallest value of p found so far. Returns (bound, upper, nodes, solves, depth, open
    leaves, stop): ``bound`` is the minimum over the leaves of the partition of their
    bounds, a rigorous lower bound on min p however the search stopped (see ``certify``
    Notes); ``stop`` is "branch_and_bound" (every leaf fathomed), "better_point" (a point
    better than the candidate by more than ``abs_tol``: branching cannot certify it) or
    "max_nodes"."""
    import heapq

    perm = sorted(range(m), key=lambda i: -float(v[i]))  # the cone order: v sorted down
    vf = [Fraction(float(x)) for x in v]
    heap = [(root, 0, 0, [Fraction(0)] * m, vf)]
    closed = []  # bounds of fathomed leaves (>= target)
    nodes, solves, depth, tick = 1, 0, 0, 1
    stop = "branch_and_bound"
    while heap and heap[0][0] < target:
        if value_s - upper > abs_tol:
            stop = "better_point"
            break
        if nodes >= max_nodes:
            stop = "max_nodes"
            break
        bnd, _, dep, a, b = heapq.heappop(heap)
        i = max(range(m), key=lambda k: (b[k] - a[k], -k))  # widest side, lowest index
        mid = (a[i] + b[i]) / 2
        for lo, hi in ((a[i], mid), (mid, b[i])):
            ca, cb = list(a), list(b)
            ca[i], cb[i] = lo, hi
            box = _tighten(ca, cb, perm)
            if box is None:
                continue  # disjoint from the cone: holds no point that matters
            child = bnd  # the parent's bound holds on every sub-box
            if nodes < max_nodes:
                lb, k, point = _node_bound(n, m, order, v, lamp, box[0], box[1], target,
                                           solver, retries, refine, abs_tol)
                nodes += 1
                solves += k
                depth = max(depth, dep + 1)
                child = max(child, lb)
                starts = [[float(x + y) / 2 for x, y in zip(*box)]]  # the box centre
                if point is not None:
                    starts.append(point)
                upper = min(upper, _descend(n, m, v, lamp, np.array(starts)))
            # else: the cap is reached, the half stays a leaf with its parent's bound so
            # that the leaves still cover the box
            if child >= target:
                closed.append(child)
            else:
                heapq.heappush(heap, (child, tick, dep + 1, box[0], box[1]))
                tick += 1
    leaves = closed + [h[0] for h in heap]
    n_open = sum(1 for h in heap if h[0] < target)
    return min(leaves, default=root), upper, nodes, solves, depth, n_open, stop


def certify(y, lam, w, pattern=NM(2, 4), *, tol=1e-6, solver=None, order=2, refine=10,
            max_nodes=200):
    """Certify global optimality of a prox candidate ``w`` by a moment SDP lower bound.

    Parameters
    ----------
    y : array_like, float
        Prox input; groups of ``m`` consecutive entries along the last axis.
    lam : float
        Regularization strength, lam >= 0.
    w : array_like, same shape as y
        Candidate prox output (any point; it need not be sparse or sorted).
    pattern : NM, default NM(2, 4)
        The N:M pattern, 0 <= n < m, with n + 1 <= 2 * order (the relaxation must contain
        the degree-(n+1) objective). 2:4 is the main case; small N:M work the same way.
    tol : float, keyword-only
        Certification threshold on the gap, relative to the group's scale (the objective
        scales like y^2): certified iff value - bound <= tol * max_i y_i^2 (for y = 0: iff
        value <= bound = 0). Default 1e-6 (the bound is typically 1e-8..1e-7 relative
        below the optimum when the relaxation is tight, so much smaller values are not
        meaningful).
    solver : str or None, keyword-only
        CVXPY solver name; default "CLARABEL" (an interior-point conic solver), "SCS" works
        with lower accuracy.
    order : int, keyword-only
        Relaxation order d >= 1; the moment matrix is indexed by monomials of degree <= d
        (15 x 15 for m = 4, d = 2). Default 2.

    refine : int, keyword-only
        At most this many correction steps of the moment block's Gram matrix (only while
        the residual correction exceeds 0.1 tol and the bound improves), at the root and
        on every sub-box. Default 10.
    max_nodes : int, keyword-only
        Where the root relaxation does not certify ``w`` (and no feasible point better than
        ``w`` by more than tol is found), a best-first spatial branch-and-bound over the box
        0 <= u <= z bounds at most this many boxes per group (the root included; see Notes).
        1 turns it off (root relaxation only). Default 200 (the sampled optima of
        ``theory_checks table1``, random and nearly tied, need at most 3).

    Returns
    -------
    Certificate
        A :class:`~sparseopt.result.Result` (``x`` = w, ``fun`` = total objective, ``nit`` =
        SDP solves) with ``bound``, ``value``, ``gap``, ``certified``, ``solver_status``, ``info``
        per group.

    Raises
    ------
    ValueError
        On NaN/Inf or non-floating ``y``/``w``, mismatched shapes, a last axis not divisible
        by ``m``, ``lam`` < 0, invalid ``n``/``m``, ``tol`` <= 0, ``order`` < 1 or too small
        for the objective degree n + 1, ``refine`` < 0, ``max_nodes`` < 1, or an unknown
        ``solver``.

    Notes
    -----
    Sign reduction: r_{N:M}(w) = e_{N+1}(|w|) depends on |w| only and
    (|w_i| - |y_i|)^2 <= (w_i - y_i)^2, so min_w f(w) = min_{u >= 0} 0.5||u - z||^2 +
    lam e_{N+1}(u) with z = |y| (prox24-kubler Lemma 3, first half; no sorting needed).
    Box: replacing u_i by min(u_i, z_i) does not increase (u_i - z_i)^2, and e_{N+1} is
    nondecreasing in each coordinate on u >= 0; so min_{u >= 0} = min_{0 <= u <= z}
    (attained: f is coercive), i.e. the box 0 <= u <= z changes nothing (for a minimizer
    with u_i > z_i, d f / d u_i = u_i - z_i + lam e_N(u without i) > 0, proof of Cor. 6).

    Scaling: sigma = 2^k >= max z (a power of two), v = z / sigma, lam' = lam sigma^(N-1);
    then f(sigma u) = sigma^2 p(u) with p(u) = 0.5 ||u - v||^2 + lam' e_{N+1}(u), and all
    of v, lam', sigma^2 are exact in float64 (barring under/overflow).

    Relaxation (Lasserre): replace each monomial u^alpha, |alpha| <= 2d, by a variable
    y_alpha with y_0 = 1; the objective becomes linear and every point u of the box gives
    moments (y_alpha = u^alpha) with M_d(y) = [y_{a+b}] >= 0 and localizing matrices
    M_{d-1}(g y) >= 0 for g = u_i, v_i - u_i, u_i (v_i - u_i) and the pairwise products of
    the box constraints. The primal SDP optimum (``info["sdp_value"]``) would be a lower
    bound only if solved exactly; Clarabel often stops "optimal_inaccurate" with it up to
    ~1e-6 relative above the true minimum, so it is NOT used as the bound.

    Rigorous bound (a-posteriori SOS argument): the dual of the SDP gives for every block
    k (polynomial g_k >= 0 on the box, monomial vector b_k) a Gram matrix Z_k. Each Z_k is
    projected onto the PSD cone in factored form Z_k = L_k L_k^T (L_k = V sqrt(max(Lambda,
    0)) of the float eigendecomposition; L_k L_k^T is then PSD exactly, whatever the
    rounding in L_k). With q(u) = sum_k g_k(u) ||L_k^T b_k(u)||^2, which is >= 0 on the
    box, the residual r = p - q is computed coefficient by coefficient EXACTLY (every
    float64 is an integer times 2^e; Python integers). On the box 0 <= u^alpha <= v^alpha,
    so for every u in the box

        p(u) = q(u) + r(u) >= r(u) >= r_0 + sum_{alpha != 0} min(r_alpha, 0) v^alpha,

    and min_{u >= 0} p = min_{box} p (the minimizer lies in the box, see above). The right
    side is evaluated exactly and rounded down to float64: bound <= global minimum holds
    without any rounding allowance. r_0 is ``info["gamma"]`` (the dual objective for an
    exact dual) and -sum min(r_alpha, 0) v^alpha >= 0 is ``info["residual_correction"]``.
    To shrink the residual, up to ``refine`` steps add to Z_0 the least-norm matrix that
    cancels r (E_ab = r_{a+b} / #pairs) and project again; with Clarabel, a group left
    uncertified by a large residual is solved once more without equilibration. Every
    candidate is a rigorous bound; the largest is kept.

    Branch-and-bound (where the root bound leaves value - bound > tol max z^2; the order-2
    relaxation is not tight on some nearly tied groups at large lam, and Clarabel's dual
    is too inaccurate on some groups with lam' ~ 100). Scaled units as above.

    * Cone: let pi sort v downwards. For u in the box, its rearrangement u' sorted like v
      (u'_{pi_k} = k-th largest u_i) has the same ||u|| and e_{N+1}, u'.v >= u.v
      (rearrangement inequality), so p(u') <= p(u); and u' is in the box (the k-th
      largest u_i is <= the k-th largest v_i, as u <= v). So min_box p = min over the box
      intersected with the cone C = {u_{pi_1} >= ... >= u_{pi_m}}.
    * Partition: a leaf is a box [a, b] (a, b exact dyadic Fractions); a split halves the
      widest side, the two halves cover it. Each half is shrunk to the smallest box
      containing its intersection with C (b_{pi_k} <= b_{pi_(k-1)}, a_{pi_k} >=
      a_{pi_(k+1)}) and dropped if that is empty. By induction the leaves' boxes cover
      box intersected with C, hence min p over the box >= min over leaves of min_leaf p.
    * Leaf bound: with u = a + (b - a) t, P(t) = p(a + (b - a) t) on t in [0, 1]^m has
      coefficients computed exactly in rationals. Two rigorous bounds, the larger is
      kept: (i) interval: c_0 + per coordinate the exact minimum of c_{2e_i} t_i^2 +
      c_{e_i} t_i on [0, 1] + sum of the other min(c_alpha, 0); (ii) SOS: the order-d
      relaxation on the unit box (constant removed, coefficients divided by a power of
      two; both undone exactly), its dual Gram factors give q >= 0 on [0, 1]^m (products of
      t_i and 1 - t_i), r = P - q exactly, P >= r_0 + sum_{alpha != 0} min(r_alpha, 0).
      A child also inherits its parent's bound (a bound on a box holds on a sub-box).
    * Upper bound: exact coordinate descent on p over the box (p is quadratic in each u_i,
      u_i = clip(v_i - lam' e_N(u without i), 0, v_i)) from |w| / sigma, the N-sparse
      points (u = v on N coordinates) and the SDP's first moments (root and every solved
      box); ``info["upper"]`` is the smallest value found, the objective of a feasible
      point (float64), so min f <= upper <= value.
    * Stop rules, per group: (1) no branching where the root certifies; (2) none where
      value - upper > tol max z^2: ``w`` is then provably not optimal (up to float64
      rounding of upper), so no bound could certify it (wrong masks, w = y, perturbed
      optima stop here, at the root's cost); (3) best-first (lowest bound first), a leaf
      is fathomed as soon as its bound is >= value - 0.9 tol max z^2 (its SDP is not even
      solved where the interval bound suffices), and the search ends when no open leaf is
      left ("branch_and_bound"), when a box's point gives (2) ("better_point"), or when
      ``max_nodes`` boxes are bounded ("max_nodes"; the halves not bounded then keep
      their parent's bound, so the leaves still cover the box). ``info["stop"]`` says
      which. The returned bound is the minimum over ALL leaves (fathomed and open)
      rounded down: a rigorous lower bound however the search stopped (and >= the root
      bound, as every leaf inherits it). The target and the upper bound only decide where
      to split and when to stop; they play no part in the bound's validity, so a wrong
      candidate is never certified.

    ``python -m theory_checks table1`` runs it on sampled optima of the paper's random
    problems and on nearly tied groups (its figures: ``docs/benchmarks.md``).

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
    check_real(lam, "lam")
    pattern = check_nm(pattern, below_m=True)
    n, m = pattern.n, pattern.m
    check_real(tol, "tol", positive=True)
    check_int(refine, "refine", minimum=0)
    check_int(max_nodes, "max_nodes", minimum=1)
    check_int(order, "order", minimum=1)
    if n + 1 > 2 * order:
        raise ValueError(f"order={order} is too small for the degree-{n + 1} objective; need 2*order >= n+1")
    import cvxpy as cp

    solver = "CLARABEL" if solver is None else solver
    if solver not in cp.installed_solvers():
        raise ValueError(f"solver {solver!r} is not an installed CVXPY solver {cp.installed_solvers()}")
    groups = pattern._groups(y, "y")
    lead = groups.shape[:-1]
    z_all = np.abs(groups.reshape(-1, m).astype(np.float64))
    u_all = np.abs(pattern._groups(w, "w").reshape(-1, m).astype(np.float64))  # |w| per group
    value = prox_objective(w, y, lam, pattern).reshape(-1)
    problem, zp, zz, lp, blocks, cons = _relaxation(int(n), int(m), int(order))
    G = z_all.shape[0]
    bound = np.empty(G)
    status = np.empty(G, dtype=object)
    sdp_value = np.full(G, np.nan)
    gamma = np.full(G, np.nan)
    correction = np.full(G, np.nan)
    residual = np.full(G, np.nan)
    n_refine = np.zeros(G, dtype=np.int64)
    n_solves = np.zeros(G, dtype=np.int64)
    n_nodes = np.ones(G, dtype=np.int64)
    n_depth = np.zeros(G, dtype=np.int64)
    n_open = np.zeros(G, dtype=np.int64)
    seconds = np.zeros(G)
    upper = value.copy()  # smallest objective found at a feasible point
    stop = np.full(G, "trivial", dtype=object)
    # Clarabel sometimes stalls (optimal_inaccurate) with a poor dual; without
    # equilibration it often gets further. Only tried when the residual blocks certification.
    retries = [{}, {"equilibrate_enable": False}] if solver == "CLARABEL" else [{}]
    for gi, z in enumerate(z_all):
        t_start = time.perf_counter()
        if z.max() == 0.0:  # f(u) = 0.5||u||^2 + lam e(u) >= 0 = f(0) on u >= 0
            bound[gi], status[gi] = 0.0, "trivial"
            gamma[gi] = correction[gi] = residual[gi] = sdp_value[gi] = 0.0
            continue
        # sigma = 2^k >= max z: the scaling w = sigma u is exact in float64
        sigma = math.ldexp(1.0, math.frexp(float(z.max()))[1])
        v = z / sigma
        lamp = float(lam) * sigma ** (n - 1)  # e_{N+1} is homogeneous of degree N+1
        zp.value = v
        zz.value = np.outer(v, v)
        lp.value = lamp
        s2 = Fraction(sigma) ** 2
        bound[gi] = -np.inf  # until a dual solution gives one: never certified
        root, root_point = None, None  # the root bound (exact, scaled units), its SDP point
        for attempt, opts in enumerate(retries):
            if attempt > 0 and not (value[gi] - bound[gi] > tol * z.max() ** 2
                                    and not correction[gi] <= 0.1 * tol * z.max() ** 2):
                break  # certified, or the gap is the relaxation's, not the residual's
            try:
                with warnings.catch_warnings():
                    # "optimal_inaccurate" is reported per group in ``status`` instead
                    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                    problem.solve(solver=solver, **opts)
            except cp.error.SolverError as exc:
                if attempt == 0:
                    status[gi] = f"solver_error: {exc}"
                continue
            duals = [c.dual_value for c in cons]
            if problem.status not in ("optimal", "optimal_inaccurate") or any(d is None for d in duals):
                if attempt == 0:
                    status[gi] = problem.status
                continue  # no dual solution, no bound from this attempt
            Ls = [_psd_factor(np.asarray(d, dtype=np.float64)) for d in duals]
            best = _sos_bound(int(n), int(m), int(order), v, lamp, blocks, Ls)
            rounds = 0
            # every candidate bound is rigorous: refine while the residual costs more than
            # a tenth of tol (normalized scale max v^2 in [1/4, 1)) and the bound improves
            while rounds < refine and best[2] > 0.1 * tol:
                Ls = _refine(int(m), int(order), blocks, Ls, best[4])
                cand = _sos_bound(int(n), int(m), int(order), v, lamp, blocks, Ls)
                rounds += 1
                if cand[0] <= best[0]:
                    break
                best = cand
            b = _round_down(best[0] * s2)
            if b > bound[gi]:  # the larger of two rigorous lower bounds
                bound[gi] = b
                root = best[0]
                status[gi] = problem.status
                sdp_value[gi] = sigma**2 * (problem.value + 0.5 * float(np.sum(v**2)))
                gamma[gi] = float(best[1] * s2)
                correction[gi] = float(best[2] * s2)
                residual[gi] = best[3]
                n_refine[gi] = rounds
                n_solves[gi] = attempt + 1
                root_point = problem.variables()[0].value[:m].copy()  # first moments y_{e_i}
        # An upper bound on min p: exact coordinate descent from the candidate, the N-sparse
        # points (u = v on N coordinates: e_{N+1} = 0 there) and the root's SDP point. A
        # point better than the candidate by more than tol proves it is not optimal: then no
        # branching (it could never certify it).
        abs_tol = tol * float(np.max(v)) ** 2  # tol * max z^2 in scaled units
        value_s = float(value[gi]) / sigma**2  # exact: sigma is a power of two
        starts = [u_all[gi] / sigma]  # the candidate itself
        for S in itertools.combinations(range(m), n):
            starts.append(np.where(np.isin(np.arange(m), S), v, 0.0))
        if root_point is not None:
            starts.append(root_point)
        upper_s = _descend(int(n), int(m), v, lamp, np.array(starts, dtype=np.float64))
        if value[gi] - bound[gi] <= tol * z.max() ** 2:
            stop[gi] = "root"
        elif value_s - upper_s > abs_tol:
            stop[gi] = "better_point"
        elif max_nodes == 1:
            stop[gi] = "max_nodes"
        else:
            # spatial branch-and-bound on sub-boxes (Notes); leaves are fathomed once their
            # bound is within 0.9 tol of the candidate's value
            target = Fraction(float(value[gi])) / s2 - Fraction(0.9 * abs_tol)
            root_lb = root if root is not None else _interval_bound(
                m, _box_poly(int(n), int(m), v, lamp, [Fraction(0)] * m, [Fraction(float(x)) for x in v]))
            lb, upper_s, nodes, k, dep, n_left, stop[gi] = _branch_and_bound(
                int(n), int(m), int(order), v, lamp, root_lb, target, value_s, upper_s,
                int(max_nodes), solver, retries, int(refine), abs_tol)
            bound[gi] = max(bound[gi], _round_down(lb * s2))
            n_nodes[gi], n_depth[gi], n_open[gi] = nodes, dep, n_left
            n_solves[gi] += k
        upper[gi] = min(float(value[gi]), upper_s * sigma**2)
        seconds[gi] = time.perf_counter() - t_start
    scale = z_all.max(axis=1) ** 2 if z_all.size else np.zeros(0)
    gap = value - bound
    certified = (gap <= tol * scale) & np.isfinite(bound)
    n_cert = int(certified.sum())
    return Certificate(
        x=np.asarray(w, dtype=np.float64),
        fun=float(value.sum()),
        nit=int(n_solves.sum()),
        stop_reason=("all groups certified" if n_cert == G
                     else f"{G - n_cert} of {G} groups not certified"),
        bound=bound.reshape(lead),
        value=value.reshape(lead),
        gap=gap.reshape(lead),
        certified=certified.reshape(lead),
        solver_status=status.astype(str).reshape(lead),
        solver=solver,
        order=int(order),
        info={
            "gamma": gamma.reshape(lead),
            "residual_correction": correction.reshape(lead),
            "residual_max": residual.reshape(lead),
            "sdp_value": sdp_value.reshape(lead),
            "refine_rounds": n_refine.reshape(lead),
            "solves": n_solves.reshape(lead),
            "nodes": n_nodes.reshape(lead),
            "depth": n_depth.reshape(lead),
            "open_leaves": n_open.reshape(lead),
            "seconds": seconds.reshape(lead),
            "upper": upper.reshape(lead),
            "stop": stop.astype(str).reshape(lead),
            "order": np.full(lead, int(order), dtype=np.int64),
        },
    )
