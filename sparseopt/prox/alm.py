"""EnumALM: the N:M prox by enumeration of supports and alternating minimization.

For one group y in R^M the prox of lam * r_{N:M} (prox24-kubler eq. 6-7) is computed as

1. Lemma 3 (prox24-kubler; Theorem 4 of proxsparse-liu): drop the signs and sort,
   z = sort(|y|) descending. Some optimal w is non-negative and sorted like z, so its
   support is the top-s entries of z for some s.
2. Candidates by support size (Lemma 4 / Alg. 1 of prox24-kubler, Alg. 3 of
   proxsparse-liu, generalized from 2:4 to N:M): for s = N the regularizer vanishes and
   w = (z_1..z_N, 0, ...) exactly; for every s = N+1..M the candidate is the limit of ALM
   (proxsparse-liu Alg. 2) on the top-s coordinates, i.e. cyclic exact coordinate
   minimization, whose one-dimensional solution is soft-thresholding (Fact 5)
   ``w_i <- max(z_i - lam * e_N(w_{S minus i}), 0)``, started at the balanced point of
   ``_balanced_start`` (Alg. 2's start w = z can stall on nearly tied inputs).
3. The candidate of smallest objective wins (ties go to the sparser candidate); order and
   signs are restored.

Shortcuts make it fast; all are exact (they never change which point is returned except
through rounding); docs/prox.md has the proofs:

* **Pruning.** A candidate of support S = top-s can only be the optimum if the restricted
  problem has an interior stationary point u > 0 on S with a PSD Hessian. Since
  u_i = z_i - lam e_N(u_{S minus i}) <= z_i and this map is antitone, Jacobi passes give a
  bracket lo <= u <= up; the candidate is skipped if the bracket is empty or non-positive
  (generalizing the necessary conditions of prox24-kubler Lemma 10), if the PSD condition
  lam e_{N-1}(u_{S minus i, j}) <= 1 (proof of Fact 8) fails at lo, or if the lower bound
  0.5||z - up||^2 + up.(z - up)/(N+1) + tail on its value (Euler's identity) exceeds the best
  candidate so far. The 2:4 kernel also skips a candidate whose lower bound exceeds f at any
  point w >= 0 it has at hand (its starts, clipped to w >= 0): the optimum is no worse than
  such a point, so that candidate cannot win (the upper-bound cut).
* **KKT-point shortcut (2:4).** The dense candidate is not solved when the best point so far
  (2-sparse, or a converged 3-sparse one) is a KKT point of eq. 10 over w >= 0 with a
  positive definite Hessian: by Lemma 5 no interior local minimum lies below it
  (``_dense_cannot_win``).
* **2-sparse certificate (2:4).** Before the kernel, every group is screened by a cheap
  sufficient condition for its 2-sparse candidate to be optimal (``_easy24``; it implies
  Lemma 10's necessary one, rho^2 = z3 / (lam z1 z2) < 1); certified groups get that
  candidate at once and the kernel runs on the others, packed (``_solve_block24``).
* **Newton acceleration.** Once a sweep moves no coordinate by more than 0.01 max z (0.1 in
  the 2:4 kernel), Newton steps are tried on the stationarity system of the current face
  (the positive coordinates), accepted only if the Hessian there is positive definite
  (Cholesky; in the 2:4 kernel the square-root-free adjugate / LDL^T equivalents), the step
  stays strictly positive and the objective does not increase. The
  stopping rule is always the sweep rule of Alg. 2, so Newton only changes how fast the
  same stationary point is reached.

2:4 has its own kernel (``_solve_chunk24``, behind the screen): per chunk of 256 groups, a
branch-free pass that LLVM vectorizes (load, sort, brackets, bounds, starts: ``_bound24``),
the ALM of each candidate (s = 3, 4) in lock-step for the groups on its common path
(``_fast24``, vectorized, bit for bit the scalar result; the dense candidate for the groups
whose route is the lock-step), the remaining candidate solves on local scalars, and a
vectorized store pass (``_store24``).
Every other N:M uses the generic array kernel (``_solve_chunk``). The footnote-3 shortcut of
prox24-kubler (stop when the dense candidate is a local minimum) is not used: Corollary 6
states the converse (if the optimum is dense then every local minimum is global), and we
found no proof of the footnote's direction.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..simd import inline_in_llvm
from ..threads import GROUP_SOLVE_MIN_ENTRIES, parallel_kernel
from ..validation import _FINITE_MAX, check_finite, check_real  # |v| <= _FINITE_MAX: finite

__all__ = ["enum_alm_rows", "enum_alm_sorted", "enum_alm_numpy", "alm_trace", "default_tol",
           "DEFAULT_MAX_ITER"]

#: Sweeps per candidate before ALM gives up (a warning is raised by ``prox_nm``).
DEFAULT_MAX_ITER = 10_000

# Newton is tried once a sweep moves no coordinate by more than this times max z
# (generic kernel; the 2:4 kernel's closed-form steps pay off from a looser start).
_NEWTON_START = 0.01
_NEWTON_START24 = 0.1

# Jacobi passes that refine the bracket of interior stationary points before pruning
# (the 2:4 kernel; the generic kernel uses one pass).
_BRACKET = 3

# 2:4 kernel: ALM starts in the middle of the bracket of interior stationary points when
# the bracket is narrower than this times max z, else at the balanced start of
# _balanced_start (never at z, Alg. 2's start, which can stall on nearly tied inputs).
_WARM = 0.3

# 2:4 kernel: a candidate is not solved when its lower bound exceeds f at a point w >= 0
# by this relative and absolute margin (on z / z1, so every number is O(1)).
_UB_MARGIN = 1e-9
_UB_MARGIN_ABS = 1e-14

# Newton steps in a row between two sweeps (quadratic convergence needs ~5).
_MAX_NEWTON = 12

# Newton is accepted when the objective does not increase by more than rounding.
_OBJ_SLACK = 8.0 * np.finfo(np.float64).eps


def default_tol(dtype) -> float:
    """Default relative sweep tolerance: 1e-12 for float64 input, 1e-8 for float32.

    The kernel computes in float64 either way; 1e-8 is already below the resolution of
    float32 (eps = 1.2e-7), so a tighter tolerance cannot change a float32 result.
    """
    return 1e-8 if np.dtype(dtype) == np.float32 else 1e-12


# --------------------------------------------------------------------------------------
# Numba kernels (float64 arithmetic inside; inputs float32 or float64)
#
# The small helpers are inlined at the Numba IR level: a non-inlined call that passes arrays
# costs more than the arithmetic here. The parallel driver calls one non-inlined function per
# chunk of groups, so the big body is compiled once per input dtype.
# --------------------------------------------------------------------------------------


@njit(cache=True)
def _esym_general(w, s, skip_a, skip_b, k, e):
    """e_k (k > 3) of w[0:s] without indices skip_a, skip_b; recursion into scratch e."""
    for j in range(k + 1):
        e[j] = 0.0
    e[0] = 1.0
    cnt = 0
    for i in range(s):
        if i == skip_a or i == skip_b:
            continue
        wi = w[i]
        cnt += 1
        top = k if cnt > k else cnt
        for j in range(top, 0, -1):
            e[j] += wi * e[j - 1]
    return e[k]


@njit(cache=True)
def _esym_skip(w, s, skip_a, skip_b, k, e):
    """e_k of w[0:s] leaving out indices skip_a and skip_b (-1: none); e is scratch.

    Same recursion as ``regularizers.elementary_symmetric``; k <= 3 (every 2:M and 3:M
    call) runs on scalars, larger k in ``_esym_general``.
    """
    inline_in_llvm()
    if k < 0:
        return 0.0
    if k == 0:
        return 1.0
    if k > 3:
        return _esym_general(w, s, skip_a, skip_b, k, e)
    e1 = 0.0
    e2 = 0.0
    e3 = 0.0
    for i in range(s):
        if i == skip_a or i == skip_b:
            continue
        x = w[i]
        e3 += x * e2
        e2 += x * e1
        e1 += x
    if k == 1:
        return e1
    if k == 2:
        return e2
    return e3


@njit(cache=True)
def _restricted_value(w, z, s, lam, n, e):
    """0.5 ||w_S - z_S||^2 + lam e_{N+1}(w_S) on S = [0, s) (the tail is added by callers)."""
    inline_in_llvm()
    q = 0.0
    for i in range(s):
        d = w[i] - z[i]
        q += d * d
    return 0.5 * q + lam * _esym_skip(w, s, -1, -1, n + 1, e)


@njit(cache=True)
def _newton_try(z, w, s, lam, n, wn, J, F, e, act):
    """One safeguarded Newton step on the stationarity system of the current face.

    The face is P = {i < s : w_i > 0}; the system is w_i - z_i + lam e_N(w_{S minus i}) = 0
    for i in P (the other coordinates stay 0). Updates w and returns the step's max-norm
    only if the Hessian on P is positive definite, the step keeps w_P > 0 and the
    objective does not increase; otherwise returns -1 and leaves w unchanged.
    """
    inline_in_llvm()
    p = 0
    for i in range(s):
        if w[i] > 0.0:
            act[p] = i
            p += 1
    if p == 0:
        return -1.0
    for a in range(p):
        i = act[a]
        F[a] = w[i] - z[i] + lam * _esym_skip(w, s, i, -1, n, e)
        J[a, a] = 1.0
        for b in range(a):
            J[a, b] = lam * _esym_skip(w, s, i, act[b], n - 1, e)
    # Cholesky J = L L^T in the lower triangle; failure means not positive definite.
    for j in range(p):
        d = J[j, j]
        for k in range(j):
            d -= J[j, k] * J[j, k]
        if d <= 0.0:
            return -1.0
        d = np.sqrt(d)
        J[j, j] = d
        for i in range(j + 1, p):
            v = J[i, j]
            for k in range(j):
                v -= J[i, k] * J[j, k]
            J[i, j] = v / d
    # Solve L L^T x = -F; x is built in F.
    for i in range(p):
        v = -F[i]
        for k in range(i):
            v -= J[i, k] * F[k]
        F[i] = v / J[i, i]
    for i in range(p - 1, -1, -1):
        v = F[i]
        for k in range(i + 1, p):
            v -= J[k, i] * F[k]
        F[i] = v / J[i, i]
    for i in range(s):
        wn[i] = w[i]
    step = 0.0
    for a in range(p):
        v = w[act[a]] + F[a]
        if not v > 0.0:
            return -1.0
        wn[act[a]] = v
        if abs(F[a]) > step:
            step = abs(F[a])
    f_old = _restricted_value(w, z, s, lam, n, e)
    f_new = _restricted_value(wn, z, s, lam, n, e)
    if f_new > f_old + _OBJ_SLACK * abs(f_old):
        return -1.0
    for i in range(s):
        w[i] = wn[i]
    return step


@njit(cache=True)
def _balanced_root(zbar, a, n):
    """The root t >= 0 of t + a t^N = zbar (a >= 0, zbar >= 0), increasing in t."""
    inline_in_llvm()
    if a <= 0.0 or zbar <= 0.0:
        return zbar
    if n == 1:
        return zbar / (1.0 + a)
    if n == 2:
        return 2.0 * zbar / (1.0 + np.sqrt(1.0 + 4.0 * a * zbar))
    lo = 0.0
    hi = zbar
    for _ in range(200):  # bisection to the last bit
        t = 0.5 * (lo + hi)
        if t <= lo or t >= hi:
            break
        if t + a * t**n > zbar:
            hi = t
        else:
            lo = t
    return 0.5 * (lo + hi)


@njit(cache=True)
def _balanced_start(z, s, lam, n, w):
    """Start of ALM for support [0, s): w_i = max(t + z_i - mean(z_S), 0).

    t is the common value of the stationary point of the averaged problem (all z_i equal
    to their mean): t + lam C(s-1, N) t^N = mean(z_S). The paper's start w = z (Alg. 2)
    can stall at a boundary critical point when z is nearly tied: with z = (1.6, 1.59,
    1.58), lam = 0.65 the first update sets w_1 = 0 for good, and the 3-sparse candidate is
    missed (prox24-kubler Fig. 1d). The balanced start is inside the region where the
    coordinates shrink together and avoids that; see docs/prox.md.
    """
    inline_in_llvm()
    zbar = 0.0
    for i in range(s):
        zbar += z[i]
    zbar /= s
    c = 1.0
    for j in range(n):  # C(s-1, n)
        c = c * (s - 1 - j) / (j + 1)
    t = _balanced_root(zbar, lam * c, n)
    for i in range(s):
        v = t + z[i] - zbar
        w[i] = v if v > 0.0 else 0.0


@njit(cache=True)
def _alm_support(z, s, lam, n, tol_rel, tol_abs, max_iter, w, wn, J, F, e, act):
    """ALM (proxsparse-liu Alg. 2) on the top-s coordinates from the balanced start, with Newton.

    Returns the number of sweeps; ``max_iter + 1`` flags that the sweep tolerance was
    not reached.
    """
    inline_in_llvm()
    _balanced_start(z, s, lam, n, w)
    for it in range(1, max_iter + 1):
        delta = 0.0
        for i in range(s):
            v = z[i] - lam * _esym_skip(w, s, i, -1, n, e)
            if v < 0.0:
                v = 0.0
            d = abs(v - w[i])
            if d > delta:
                delta = d
            w[i] = v
        if delta <= tol_abs:
            return it
        if delta > _NEWTON_START * tol_abs / tol_rel:
            continue  # far away sweeps are cheaper than Newton steps
        # Newton until its step is below tol or it is refused; the next sweep then
        # either confirms convergence (the Alg. 2 rule) or continues ALM.
        for _ in range(_MAX_NEWTON):
            step = _newton_try(z, w, s, lam, n, wn, J, F, e, act)
            if step < 0.0 or step <= tol_abs:
                break
    return max_iter + 1


@njit(cache=True, inline="always")
def _enum_alm_one(z, m, lam, n, tol, max_iter, wbest, w, wn, J, F, e, low, act, zo):
    """EnumALM on one sorted non-negative group z (length m); result in wbest.

    Returns (total sweeps, True if some candidate hit max_iter).
    """
    for i in range(m):
        wbest[i] = 0.0
    if z[0] <= 0.0:
        return 0, False
    # work on z / z_1 with lam z_1^(N-1) (r_{N:M} is homogeneous of degree N + 1): no
    # overflow of the products for any finite input, and tolerances become scale-free
    scale = z[0]
    for i in range(m):
        zo[i] = z[i]
        z[i] = z[i] / scale
    lam = lam * scale ** (n - 1)
    tol_abs = tol
    # s = N: r_{N:M} vanishes, w = z_{1:N}; objective is half the squared tail.
    tail = 0.0
    for i in range(n, m):
        tail += z[i] * z[i]
    best = 0.5 * tail
    for i in range(n):
        wbest[i] = z[i]
    sweeps = 0
    maxed = False
    best_s = n
    # tail_s = 0.5 * sum_{i >= s} z_i^2 for the current s
    tail_s = 0.5 * tail
    for s in range(n + 1, m + 1):
        tail_s -= 0.5 * z[s - 1] * z[s - 1]
        if z[s - 1] <= 0.0:
            break  # sorted: no larger support can be interior either
        # Exact pruning. Every interior stationary point u of support [0, s) satisfies
        # low <= u <= up (u_i = z_i - lam e_N(u_{S-i}) and u <= z), its Hessian is PSD if it
        # is the optimum, and its value is 0.5||z - u||^2 + u.(z - u)/(N+1) + tail (Euler),
        # a sum of terms decreasing in u_i on [0, z_i]: at least that sum at u = up.
        for j in range(s):
            v = z[j] - lam * _esym_skip(z, s, j, -1, n, e)
            low[j] = v if v > 0.0 else 0.0
        lb = tail_s
        interior = True
        for j in range(s):
            u = z[j] - lam * _esym_skip(low, s, j, -1, n, e)
            if u <= 0.0:
                interior = False
                break
            gap = z[j] - u
            lb += 0.5 * gap * gap + u * gap / (n + 1)
        if not interior:
            continue
        # PSD Hessian needs every off-diagonal entry lam e_{N-1}(u_{S-i-j}) <= 1 (B.8).
        if s >= 2 and lam * _esym_skip(low, s, s - 2, s - 1, n - 1, e) > 1.0:
            continue
        if lb > best + _OBJ_SLACK * best:
            continue
        it = _alm_support(z, s, lam, n, tol, tol_abs, max_iter, w, wn, J, F, e, act)
        if it > max_iter:
            maxed = True
            it = max_iter
        sweeps += it
        val = _restricted_value(w, z, s, lam, n, e) + tail_s
        if val < best - _OBJ_SLACK * best:  # rounding ties: sparser wins
            best = val
            best_s = s
            for i in range(s):
                wbest[i] = w[i]
            for i in range(s, m):
                wbest[i] = 0.0
    if best_s == n:
        for i in range(n):
            wbest[i] = zo[i]  # the N-sparse candidate: exactly the input entries
    else:
        for i in range(m):
            wbest[i] = wbest[i] * scale
    return sweeps, maxed


@njit(cache=True)
def _solve_chunk(y, start, stop, presorted, lam, n, tol, max_iter, out, sweeps, maxed):
    """EnumALM on rows [start, stop) of y (G, m), in one call (one call per chunk keeps the
    call overhead out of the per-group cost).

    presorted=False: abs, stable descending insertion sort, solve, unsort, signs, all per
    group. presorted=True: rows are already sorted and non-negative; solve only.
    y may be float32 or float64; arithmetic is float64; out has the dtype of y.
    """
    m = y.shape[1]
    z = np.empty(m, np.float64)
    perm = np.empty(m, np.int64)
    wbest = np.empty(m, np.float64)
    w = np.empty(m, np.float64)
    wn = np.empty(m, np.float64)
    F = np.empty(m, np.float64)
    low = np.empty(m, np.float64)
    act = np.empty(m, np.int64)
    zo = np.empty(m, np.float64)
    e = np.empty(m + 2, np.float64)
    J = np.empty((m, m), np.float64)
    for g in range(start, stop):
        if presorted:
            for k in range(m):
                z[k] = y[g, k]
                perm[k] = k
        else:
            # insertion sort of |y| descending; strict '<' keeps ties in index order
            for k in range(m):
                v = abs(np.float64(y[g, k]))
                j = k
                while j > 0 and z[j - 1] < v:
                    z[j] = z[j - 1]
                    perm[j] = perm[j - 1]
                    j -= 1
                z[j] = v
                perm[j] = k
        it, mx = _enum_alm_one(z, m, lam, n, tol, max_iter, wbest, w, wn, J, F, e, low, act,
                               zo)
        sweeps[g] = it
        maxed[g] = mx
        for k in range(m):
            p = perm[k]
            v = wbest[k]
            out[g, p] = (0.0 - v) if y[g, p] < 0 else v  # 0.0 - 0.0 is +0.0: no negative zeros
    return 0


_CHUNK = 256


@parallel_kernel(GROUP_SOLVE_MIN_ENTRIES)
def _enum_alm_groups(y, presorted, lam, n, tol, max_iter, out, sweeps, maxed):
    """Parallel driver: chunks of groups over threads (prange), each solved by _solve_chunk."""
    G = y.shape[0]
    n_chunks = (G + _CHUNK - 1) // _CHUNK
    for c in prange(n_chunks):
        stop = min(G, (c + 1) * _CHUNK)
        _solve_chunk(y, c * _CHUNK, stop, presorted, lam, n, tol, max_iter, out, sweeps, maxed)
    return out


# --------------------------------------------------------------------------------------
# 2:4 kernel on scalars
#
# The same algorithm as _enum_alm_one for (n, m) = (2, 4), written on local scalars: no
# array is touched between loading a group and storing its result, so no reference
# counting happens in the hot loop (which dominates the generic kernel's cost).
# --------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _max(a, b):
    inline_in_llvm()
    return a if a > b else b  # a select: the builtin max does not vectorize here


@njit(cache=True, error_model="numpy")
def _min(a, b):
    inline_in_llvm()
    return a if a < b else b


@njit(cache=True, error_model="numpy")
def _f24(w1, w2, w3, w4, z1, z2, z3, z4, lam):
    """0.5 ||w - z||^2 + lam e_3(w) for four coordinates (prox24-kubler eq. 10)."""
    inline_in_llvm()
    d1 = w1 - z1
    d2 = w2 - z2
    d3 = w3 - z3
    d4 = w4 - z4
    e3 = w1 * w2 * (w3 + w4) + w3 * w4 * (w1 + w2)
    return 0.5 * (d1 * d1 + d2 * d2 + d3 * d3 + d4 * d4) + lam * e3


@njit(cache=True, error_model="numpy")
def _newton3(a1, a2, a3, y1, y2, y3, lam):
    """Newton step for 0.5 ||a - y||^2 + lam a1 a2 a3 at a > 0 (eq. 12; Hessian eq. 23).

    The Hessian [[1, p, q], [p, 1, r], [q, r, 1]] (p = lam a3, q = lam a2, r = lam a1) is
    positive definite iff its leading minors 1 - p^2 and det are positive (Sylvester); the
    step is solved by the adjugate (Cramer's rule): one division, no square root.
    Returns (b1, b2, b3, step); step = -1 when the Hessian is not positive definite or the
    step leaves the open orthant (b is then meaningless). Written without branches, so that
    the lock-step ALM of ``_fast24`` vectorizes; the scalar ALM uses the same function.
    """
    inline_in_llvm()
    f1 = a1 - y1 + lam * a2 * a3
    f2 = a2 - y2 + lam * a1 * a3
    f3 = a3 - y3 + lam * a1 * a2
    p = lam * a3
    q = lam * a2
    r = lam * a1
    c11 = 1.0 - r * r
    c22 = 1.0 - q * q
    c33 = 1.0 - p * p
    c12 = q * r - p
    c13 = p * r - q
    c23 = p * q - r
    det = c11 + p * c12 + q * c13
    s = -1.0 / det if det != 0.0 else 0.0  # det <= 0 is refused below
    x1 = s * (c11 * f1 + c12 * f2 + c13 * f3)
    x2 = s * (c12 * f1 + c22 * f2 + c23 * f3)
    x3 = s * (c13 * f1 + c23 * f2 + c33 * f3)
    b1 = a1 + x1
    b2 = a2 + x2
    b3 = a3 + x3
    ok = (c33 > 0.0) & (det > 0.0) & (b1 > 0.0) & (b2 > 0.0) & (b3 > 0.0)
    step = _max(abs(x1), _max(abs(x2), abs(x3)))
    return b1, b2, b3, step if ok else -1.0


@njit(cache=True, error_model="numpy")
def _ldl24(w1, w2, w3, w4, lam):
    """Square-root-free LDL^T of the Hessian of eq. 10 at w (eq. 24: unit diagonal, entry
    (k, l) = lam times the sum of the other two coordinates). Returns the off-diagonal
    entries h12, h13, h14, the scaled factors m32, m42, m43 (d_k L_lk), the reciprocals
    r2, r3 of the pivots (0 for a non-positive pivot) and the pivots d2, d3, d4 (d1 = 1):
    the Hessian is positive definite iff d2, d3, d4 > 0."""
    inline_in_llvm()
    h12 = lam * (w3 + w4)
    h13 = lam * (w2 + w4)
    h14 = lam * (w2 + w3)
    d2 = 1.0 - h12 * h12
    r2 = 1.0 / d2 if d2 > 0.0 else 0.0
    m32 = lam * (w1 + w4) - h13 * h12  # d2 * L32
    m42 = lam * (w1 + w3) - h14 * h12  # d2 * L42
    d3 = 1.0 - h13 * h13 - m32 * m32 * r2
    r3 = 1.0 / d3 if d3 > 0.0 else 0.0
    m43 = lam * (w1 + w2) - h14 * h13 - m42 * m32 * r2  # d3 * L43
    d4 = 1.0 - h14 * h14 - m42 * m42 * r2 - m43 * m43 * r3
    return h12, h13, h14, m32, m42, m43, r2, r3, d2, d3, d4


@njit(cache=True, error_model="numpy")
def _dense_cannot_win(p1, p2, p3, z2, z3, z4, lam):
    """True when no interior local minimum of eq. 10 has a lower value than the point
    p = (p1, p2, p3, 0), a minimizer on its face (z1 = 1; p3 = 0: the 2-sparse candidate).

    If the Hessian at p is positive definite and p is a KKT point of eq. 10 over w >= 0
    (zero gradient on its positive coordinates, which the caller guarantees, and a
    non-negative one on its zero coordinates), then f(w*) >= f(p) for every interior local
    minimum w*: both lie in the set C_4 where the Hessian is PSD, which is convex (Lemma 5),
    so f is convex on the segment between them and f(w*) >= f(p) + grad f(p).(w* - p) >= f(p).
    """
    inline_in_llvm()
    nu3 = lam * p1 * p2 - z3  # d f / d w3 at p3 = 0 (not used when p3 > 0)
    nu4 = lam * (p1 * p2 + p1 * p3 + p2 * p3) - z4
    d2, d3, d4 = _ldl24(p1, p2, p3, 0.0, lam)[8:]
    return ((nu4 >= 0.0) & ((p3 > 0.0) | (nu3 >= 0.0))
            & (d2 > 0.0) & (d3 > 0.0) & (d4 > 0.0))


@njit(cache=True, error_model="numpy")
def _newton4(w1, w2, w3, w4, z1, z2, z3, z4, lam):
    """Newton step for eq. 10 at w > 0 (Hessian eq. 24); step = -1 on refusal (b is then
    meaningless).

    Solved by a square-root-free LDL^T factorization (unit diagonal, so d1 = 1); the
    Hessian is positive definite iff d2, d3, d4 > 0 (the squares of Cholesky's pivots).
    Written without branches, like :func:`_newton3`: a refused factorization runs on with
    meaningless numbers (a non-positive pivot is replaced by 1) and is refused at the end.
    """
    inline_in_llvm()
    f1 = w1 - z1 + lam * (w2 * w3 + w2 * w4 + w3 * w4)
    f2 = w2 - z2 + lam * (w1 * w3 + w1 * w4 + w3 * w4)
    f3 = w3 - z3 + lam * (w1 * w2 + w1 * w4 + w2 * w4)
    f4 = w4 - z4 + lam * (w1 * w2 + w1 * w3 + w2 * w3)
    h12, h13, h14, m32, m42, m43, r2, r3, d2, d3, d4 = _ldl24(w1, w2, w3, w4, lam)
    # forward L t = -f, then D, then backward L^T x
    t1 = -f1
    t2 = -f2 - h12 * t1
    t3 = -f3 - h13 * t1 - m32 * r2 * t2
    t4 = -f4 - h14 * t1 - m42 * r2 * t2 - m43 * r3 * t3
    x4 = t4 / (d4 if d4 > 0.0 else 1.0)
    x3 = t3 * r3 - m43 * r3 * x4
    x2 = t2 * r2 - m32 * r2 * x3 - m42 * r2 * x4
    x1 = t1 - h12 * x2 - h13 * x3 - h14 * x4
    b1 = w1 + x1
    b2 = w2 + x2
    b3 = w3 + x3
    b4 = w4 + x4
    ok = ((d2 > 0.0) & (d3 > 0.0) & (d4 > 0.0)
          & (b1 > 0.0) & (b2 > 0.0) & (b3 > 0.0) & (b4 > 0.0))
    step = _max(_max(abs(x1), abs(x2)), _max(abs(x3), abs(x4)))
    return b1, b2, b3, b4, step if ok else -1.0


@njit(cache=True, error_model="numpy")
def _face_newton24(w1, w2, w3, w4, z1, z2, z3, z4, lam):
    """Newton step on the face {i : w_i > 0} (w4 = 0 is the 3-sparse candidate's face).

    Four positives: eq. 24. Three: eq. 23 on those three (e_3 restricted to a face with one
    zero is the product of the other three). Two or fewer: e_3 vanishes on the face, whose
    minimizer is w_i = z_i there (exact Newton step of a quadratic).
    """
    inline_in_llvm()
    p1 = w1 > 0.0
    p2 = w2 > 0.0
    p3 = w3 > 0.0
    p4 = w4 > 0.0
    npos = int(p1) + int(p2) + int(p3) + int(p4)
    if npos == 4:
        return _newton4(w1, w2, w3, w4, z1, z2, z3, z4, lam)
    if npos == 3:
        if not p4:
            b1, b2, b3, st = _newton3(w1, w2, w3, z1, z2, z3, lam)
            return b1, b2, b3, w4, st
        if not p3:
            b1, b2, b4, st = _newton3(w1, w2, w4, z1, z2, z4, lam)
            return b1, b2, w3, b4, st
        if not p2:
            b1, b3, b4, st = _newton3(w1, w3, w4, z1, z3, z4, lam)
            return b1, w2, b3, b4, st
        b2, b3, b4, st = _newton3(w2, w3, w4, z2, z3, z4, lam)
        return w1, b2, b3, b4, st
    b1 = z1 if p1 else 0.0
    b2 = z2 if p2 else 0.0
    b3 = z3 if p3 else 0.0
    b4 = z4 if p4 else 0.0
    if (p1 and b1 <= 0.0) or (p2 and b2 <= 0.0) or (p3 and b3 <= 0.0) or (p4 and b4 <= 0.0):
        return w1, w2, w3, w4, -1.0
    step = max(max(abs(b1 - w1), abs(b2 - w2)), max(abs(b3 - w3), abs(b4 - w4)))
    return b1, b2, b3, b4, step


@njit(cache=True, error_model="numpy")
def _sweep24(w1, w2, w3, w4, z1, z2, z3, z4, lam, s):
    """One ALM sweep (Alg. 2: exact coordinate minimization in order) on the top-s
    coordinates, s = 3 (w4 stays 0, z4 unused) or 4; returns (w, largest change)."""
    inline_in_llvm()
    v = z1 - lam * (w2 * w3 + w2 * w4 + w3 * w4)
    v = v if v > 0.0 else 0.0
    delta = abs(v - w1)
    w1 = v
    v = z2 - lam * (w1 * w3 + w1 * w4 + w3 * w4)
    v = v if v > 0.0 else 0.0
    delta = _max(delta, abs(v - w2))
    w2 = v
    v = z3 - lam * (w1 * w2 + w1 * w4 + w2 * w4)
    v = v if v > 0.0 else 0.0
    delta = _max(delta, abs(v - w3))
    w3 = v
    if s == 4:
        v = z4 - lam * (w1 * w2 + w1 * w3 + w2 * w3)
        v = v if v > 0.0 else 0.0
        delta = _max(delta, abs(v - w4))
        w4 = v
    return w1, w2, w3, w4, delta


@njit(cache=True, error_model="numpy")
def _alm24(z1, z2, z3, z4, s, lam, tol_abs, newton_start, max_iter, x1, x2, x3, x4):
    """ALM (Alg. 2) with face-Newton steps for the 2:4 candidate of support size s (3, 4),
    started at x: the caller passes the middle of a tight bracket of the interior stationary
    points or the balanced start (see ``_balanced_start``), not Alg. 2's start z_{1:s}.

    For s = 3 the fourth coordinate is fixed at 0 and z4 is not used. Returns
    (w1, w2, w3, w4, sweeps) with sweeps = max_iter + 1 if the tolerance was not reached.
    """
    inline_in_llvm()
    newton_stop = 0.01 * tol_abs * z1
    w1 = x1
    w2 = x2
    w3 = x3
    w4 = x4 if s == 4 else 0.0
    y4 = z4 if s == 4 else 0.0
    for it in range(1, max_iter + 1):
        w1, w2, w3, w4, delta = _sweep24(w1, w2, w3, w4, z1, z2, z3, z4, lam, s)
        if delta <= tol_abs:
            return w1, w2, w3, w4, it
        if delta > newton_start:
            continue
        f_old = _f24(w1, w2, w3, w4, z1, z2, z3, y4, lam)
        for _ in range(_MAX_NEWTON):
            b1, b2, b3, b4, st = _face_newton24(w1, w2, w3, w4, z1, z2, z3, y4, lam)
            if st < 0.0:
                break
            f_new = _f24(b1, b2, b3, b4, z1, z2, z3, y4, lam)
            if f_new > f_old + _OBJ_SLACK * abs(f_old):
                break
            w1, w2, w3, w4, f_old = b1, b2, b3, b4, f_new
            # quadratic convergence: the next step would be ~ st^2 / z1 <= tol, so the
            # confirming sweep can follow now (if it does not confirm, iterations go on)
            if st * st <= newton_stop:
                break
    return w1, w2, w3, w4, max_iter + 1


@njit(cache=True)
def _alm24_dense(z2, z3, z4, lam, tol_abs, newton_start, max_iter, x1, x2, x3, x4):
    """``_alm24`` for the dense candidate (z1 = 1), compiled once and called, not inlined:
    ``_solve_chunk24`` runs it from two places, and inlining it twice lengthened the kernel's
    compilation. It takes and returns scalars only, so a call costs little."""
    return _alm24(1.0, z2, z3, z4, 4, lam, tol_abs, newton_start, max_iter, x1, x2, x3, x4)


@njit(cache=True, error_model="numpy")
def _cswap(a, b, ia, ib):
    """Compare-exchange for a descending sort by (value desc, index asc): a total order, so
    any sorting network gives the stable order. Written with selects (no branch), so that
    the loop of ``_bound24`` vectorizes."""
    inline_in_llvm()
    swap = (a < b) | ((a == b) & (ia > ib))
    return (b if swap else a), (a if swap else b), (ib if swap else ia), (ia if swap else ib)


@njit(cache=True, error_model="numpy")
def _sort24(v1, v2, v3, v4):
    """|v| sorted descending with the indices (as floats), ties to the smaller index: the
    5-comparator sorting network of the 2:4 kernel (``_bound24``, ``_easy24``)."""
    inline_in_llvm()
    a1, a2, a3, a4 = abs(v1), abs(v2), abs(v3), abs(v4)
    i1, i2, i3, i4 = 0.0, 1.0, 2.0, 3.0
    a1, a2, i1, i2 = _cswap(a1, a2, i1, i2)
    a3, a4, i3, i4 = _cswap(a3, a4, i3, i4)
    a1, a3, i1, i3 = _cswap(a1, a3, i1, i3)
    a2, a4, i2, i4 = _cswap(a2, a4, i2, i4)
    a2, a3, i2, i3 = _cswap(a2, a3, i2, i3)
    return a1, a2, a3, a4, i1, i2, i3, i4


# Rows of the per-chunk scratch S of the 2:4 kernel, each _CHUNK long (structure of arrays:
# the row offsets are compile-time multiples of _CHUNK, so LLVM proves that the rows do not
# overlap and vectorizes the loops of _bound24 and _store24 over the groups).
_Y = 0        # rows 0-3: the input group (float64, signed)
_A1 = 4       # a1, a2: the two largest magnitudes (the 2-sparse candidate, exactly)
_A2 = 5
_SCALE = 6    # z1 = max |y| (1 for an all-zero group)
_Z2 = 7       # z2..z4: sorted magnitudes divided by z1 (z1 = 1 after scaling)
_Z3 = 8
_Z4 = 9
_PERM = 10    # the sorting permutation i1 + 4 i2 + 16 i3 + 64 i4 (exact in float64)
_BEST = 11    # f of the 2-sparse candidate, 0.5 (z3^2 + z4^2)
_SOLVE3 = 12  # 1.0: solve candidate s = 3, started at rows 13-15
_X3 = 13
_SOLVE4 = 16  # 1.0: solve candidate s = 4 if its lower bound (row 17) allows, start 18-21
_LB4 = 17
_X4 = 18
_B = 22       # rows 22-25: the scaled result where a candidate won; row 26: 1.0 if 2-sparse
_TWO = 26
_OUT = 27     # rows 27-30: the result in input order with signs
_W3 = 31      # rows 31-33: candidate s = 3 when _fast24 finished its ALM, row 34: its sweeps
_IT3 = 34     # (0: not finished, the scalar _alm24 runs it from the start)
_W4 = 35      # rows 35-38, 39: the same for candidate s = 4
_IT4 = 39
_NZ = 40      # rows 40-49: the lanes _fast24 follows past its first sweep, packed: z2..z4
_NLG = 43     # (40-42), lam z1, the point (44-47; after pass 2 the confirming sweep's),
_NW = 44      # the lane index, the sweep count pass 2 gives (2.0 or 0.0)
_NIDX = 48
_NIT = 49
_RT = 50      # after the 3-sparse candidate (_decide_pass24): the dense candidate's route
_SW = 51      # (0, 1, 2: _dense_route24), the sweeps so far, 1.0 if an ALM reached max_iter
_MX = 52
_ROWS = 53

# _fast24_s3 runs on a chunk when at least this share of its groups may need the 3-sparse
# candidate (the dense one runs in lock-step wherever a group's route is 1).
_FAST_SHARE = 0.4
# _fast24_s4 runs on a chunk when at least this share of its groups take route 1 (its first
# sweep runs on every lane of the chunk).
_DENSE_SHARE = 0.125


@njit(cache=True, error_model="numpy")
def _bound24_one(v1, v2, v3, v4, lam, cuts):
    """One group of ``_bound24``, without branches: abs, sorting network, scaling, the
    brackets and lower bounds of both candidates and their starts. Returns (a1, a2, scale,
    z2, z3, z4, perm, best, solve3, x3 (3 entries), solve4, lb4, x4 (4 entries)), the rows
    of S that ``_bound24`` stores (solve3 and solve4 as 1.0 / 0.0); ``_solve24_one`` (one
    group per GPU thread) uses it directly."""
    inline_in_llvm()
    slack = 1.0 + _OBJ_SLACK
    a1, a2, a3, a4, i1, i2, i3, i4 = _sort24(v1, v2, v3, v4)
    pos = a1 > 0.0
    # work on z / z1 with lam z1 (r_{2:4} is cubic): no overflow or underflow of the
    # cubic terms for any finite input, and tolerances become scale-free
    scale = a1 if pos else 1.0
    z1 = 1.0
    z2 = a2 / scale
    z3 = a3 / scale
    z4 = a4 / scale
    lg = lam * scale
    cap = 1.0 / lg if lg > 0.0 else np.inf
    best = 0.5 * (z3 * z3 + z4 * z4)
    # candidate s = 3 (eq. 11-13): bracket lo <= u <= up of every interior stationary
    # point, refined by _BRACKET Jacobi passes of u_i = z_i - lg e_2(u_{S-i}) (an
    # antitone map); the PSD Hessian (eq. 23) needs lg u_i <= 1: cap up at 1 / lg
    u1, u2, u3 = _min(z1, cap), _min(z2, cap), _min(z3, cap)
    ok = pos & (z3 > 0.0)
    l1 = l2 = l3 = 0.0
    for _ in range(_BRACKET):
        l1 = _max(z1 - lg * u2 * u3, 0.0)
        l2 = _max(z2 - lg * u1 * u3, 0.0)
        l3 = _max(z3 - lg * u1 * u2, 0.0)
        u1 = _min(u1, z1 - lg * l2 * l3)
        u2 = _min(u2, z2 - lg * l1 * l3)
        u3 = _min(u3, z3 - lg * l1 * l2)
        # a failed pass only makes later bounds meaningless: test all at the end
        ok = (ok & (u1 > 0.0) & (u2 > 0.0) & (u3 > 0.0) & (lg * l1 <= 1.0)
              & (l1 <= u1) & (l2 <= u2) & (l3 <= u3))
    g1, g2, g3 = z1 - u1, z2 - u2, z3 - u3
    lb3 = 0.5 * (z4 * z4 + g1 * g1 + g2 * g2 + g3 * g3)
    lb3 += (u1 * g1 + u2 * g2 + u3 * g3) / 3.0
    ok3 = ok & (lb3 <= best * slack)
    # start: the middle of a small bracket (every interior stationary point is in it),
    # else the balanced start t + lg t^2 = mean z (see _balanced_start)
    warm = _max(u1 - l1, _max(u2 - l2, u3 - l3)) <= _WARM * z1
    zb = (z1 + z2 + z3) / 3.0
    t = 2.0 * zb / (1.0 + math.sqrt(1.0 + 4.0 * lg * zb))
    x1 = 0.5 * (l1 + u1) if warm else t + z1 - zb
    x2 = 0.5 * (l2 + u2) if warm else t + z2 - zb
    x3 = 0.5 * (l3 + u3) if warm else _max(t + z3 - zb, 0.0)
    x31, x32, x33 = x1, x2, x3
    # f at any w >= 0 bounds the optimum from above (the start, clipped to w >= 0)
    ub = _min(best, _f24(_max(x1, 0.0), _max(x2, 0.0), _max(x3, 0.0), 0.0,
                         z1, z2, z3, z4, lg))
    # candidate s = 4 (eq. 14); the PSD Hessian (eq. 24) needs lg (u_k + u_l) <= 1
    u1, u2, u3, u4 = _min(z1, cap), _min(z2, cap), _min(z3, cap), _min(z4, cap)
    ok = pos & (z4 > 0.0)
    l4 = 0.0
    for _ in range(_BRACKET):
        l1 = _max(z1 - lg * (u2 * u3 + u2 * u4 + u3 * u4), 0.0)
        l2 = _max(z2 - lg * (u1 * u3 + u1 * u4 + u3 * u4), 0.0)
        l3 = _max(z3 - lg * (u1 * u2 + u1 * u4 + u2 * u4), 0.0)
        l4 = _max(z4 - lg * (u1 * u2 + u1 * u3 + u2 * u3), 0.0)
        # and u_i <= 1/lg - u_j <= cap - l_j for any j != i
        u1 = _min(u1, _min(z1 - lg * (l2 * l3 + l2 * l4 + l3 * l4), cap - l2))
        u2 = _min(u2, _min(z2 - lg * (l1 * l3 + l1 * l4 + l3 * l4), cap - l1))
        u3 = _min(u3, _min(z3 - lg * (l1 * l2 + l1 * l4 + l2 * l4), cap - l1))
        u4 = _min(u4, _min(z4 - lg * (l1 * l2 + l1 * l3 + l2 * l3), cap - l1))
        ok = (ok & (u1 > 0.0) & (u2 > 0.0) & (u3 > 0.0) & (u4 > 0.0)
              & (lg * (l1 + l2) <= 1.0) & (l1 <= u1) & (l2 <= u2) & (l3 <= u3)
              & (l4 <= u4))
    g1, g2, g3, g4 = z1 - u1, z2 - u2, z3 - u3, z4 - u4
    lb4 = 0.5 * (g1 * g1 + g2 * g2 + g3 * g3 + g4 * g4)
    lb4 += (u1 * g1 + u2 * g2 + u3 * g3 + u4 * g4) / 3.0
    warm = _max(_max(u1 - l1, u2 - l2), _max(u3 - l3, u4 - l4)) <= _WARM * z1
    zb = 0.25 * (z1 + z2 + z3 + z4)
    t = 2.0 * zb / (1.0 + math.sqrt(1.0 + 12.0 * lg * zb))  # t + 3 lg t^2 = mean z
    x1 = 0.5 * (l1 + u1) if warm else t + z1 - zb
    x2 = 0.5 * (l2 + u2) if warm else _max(t + z2 - zb, 0.0)
    x3 = 0.5 * (l3 + u3) if warm else _max(t + z3 - zb, 0.0)
    x4 = 0.5 * (l4 + u4) if warm else _max(t + z4 - zb, 0.0)
    ub = _min(ub, _f24(_max(x1, 0.0), _max(x2, 0.0), _max(x3, 0.0), _max(x4, 0.0),
                       z1, z2, z3, z4, lg))
    # a candidate whose lower bound exceeds f at a feasible point cannot be the optimum
    # (the margin is far above the rounding of both bounds on these O(1) numbers)
    cut = ub + _UB_MARGIN * ub + _UB_MARGIN_ABS if cuts else np.inf
    solve3 = 1.0 if ok3 & (lb3 <= cut) else 0.0
    solve4 = 1.0 if ok & (lb4 <= cut) else 0.0
    perm = i1 + 4.0 * (i2 + 4.0 * (i3 + 4.0 * i4))
    return (a1, a2, scale, z2, z3, z4, perm, best, solve3, x31, x32, x33, solve4, lb4,
            x1, x2, x3, x4)


@njit(cache=True, error_model="numpy")
def _bound24(S, lam, cuts):
    """Per group of a chunk, without branches: ``_bound24_one`` on rows _Y of S, its results
    stored in the rows they name (``_solve_chunk24``'s first pass). ``cuts``: also skip
    candidates whose lower bound exceeds f at a point w >= 0 (False only in tests, which
    check that the cut changes nothing)."""
    for j in range(_CHUNK):
        (a1, a2, scale, z2, z3, z4, perm, best, solve3, x31, x32, x33, solve4, lb4,
         x41, x42, x43, x44) = _bound24_one(
            S[_Y * _CHUNK + j], S[(_Y + 1) * _CHUNK + j], S[(_Y + 2) * _CHUNK + j],
            S[(_Y + 3) * _CHUNK + j], lam, cuts)
        S[_X3 * _CHUNK + j] = x31
        S[(_X3 + 1) * _CHUNK + j] = x32
        S[(_X3 + 2) * _CHUNK + j] = x33
        S[_X4 * _CHUNK + j] = x41
        S[(_X4 + 1) * _CHUNK + j] = x42
        S[(_X4 + 2) * _CHUNK + j] = x43
        S[(_X4 + 3) * _CHUNK + j] = x44
        S[_SOLVE3 * _CHUNK + j] = solve3
        S[_SOLVE4 * _CHUNK + j] = solve4
        S[_LB4 * _CHUNK + j] = lb4
        S[_BEST * _CHUNK + j] = best
        S[_A1 * _CHUNK + j] = a1
        S[_A2 * _CHUNK + j] = a2
        S[_SCALE * _CHUNK + j] = scale
        S[_Z2 * _CHUNK + j] = z2
        S[_Z3 * _CHUNK + j] = z3
        S[_Z4 * _CHUNK + j] = z4
        S[_PERM * _CHUNK + j] = perm
        S[_TWO * _CHUNK + j] = 1.0


@njit(cache=True, error_model="numpy")
def _newton_take24(w1, w2, w3, w4, f_old, active, z2, z3, z4, lg, newton_stop, s):
    """One pass of ``_alm24``'s Newton loop for candidate s (3: w4 = 0; 4) as selects: a step
    is taken if the group is still stepping, the Hessian is positive definite, the step
    stays positive and f does not increase; the group stops stepping at a refusal or a step
    below newton_stop."""
    inline_in_llvm()
    if s == 4:  # a constant in the compiled loop (see _fast24)
        b1, b2, b3, b4, st = _newton4(w1, w2, w3, w4, 1.0, z2, z3, z4, lg)
    else:
        b1, b2, b3, st = _newton3(w1, w2, w3, 1.0, z2, z3, lg)
        b4 = 0.0
    f_new = _f24(b1, b2, b3, b4, 1.0, z2, z3, z4, lg)
    take = active & (st >= 0.0) & ~(f_new > f_old + _OBJ_SLACK * abs(f_old))
    return ((b1 if take else w1), (b2 if take else w2), (b3 if take else w3),
            (b4 if take else w4), (f_new if take else f_old),
            take & ~(st * st <= newton_stop))


@njit(cache=True, error_model="numpy")
def _newton_confirm24(w1, w2, w3, w4, z2, z3, z4, lg, active, tol_abs, newton_stop, max_iter,
                      s):
    """The rest of ``_alm24``'s common path after its first sweep, as selects, for one lane
    of ``_fast24``: up to 3 Newton steps on the open face while ``active``, then the
    confirming sweep. Returns (u1, u2, u3, u4, done): the point after that sweep and whether
    it finished the ALM in 2 sweeps (only for a lane that was ``active``)."""
    inline_in_llvm()
    follow = active
    f_old = _f24(w1, w2, w3, w4, 1.0, z2, z3, z4, lg)
    # 3 Newton steps, written out: LLVM vectorizes only a loop without an inner one
    w1, w2, w3, w4, f_old, active = _newton_take24(w1, w2, w3, w4, f_old, active, z2, z3,
                                                   z4, lg, newton_stop, s)
    w1, w2, w3, w4, f_old, active = _newton_take24(w1, w2, w3, w4, f_old, active, z2, z3,
                                                   z4, lg, newton_stop, s)
    w1, w2, w3, w4, f_old, active = _newton_take24(w1, w2, w3, w4, f_old, active, z2, z3,
                                                   z4, lg, newton_stop, s)
    # still stepping: more Newton steps than followed (off the path)
    u1, u2, u3, u4, delta2 = _sweep24(w1, w2, w3, w4, 1.0, z2, z3, z4, lg, s)
    return u1, u2, u3, u4, follow & ~active & (delta2 <= tol_abs) & (max_iter >= 2)


@njit(cache=True, inline="always")
def _fast24(S, lam, tol, max_iter, s):
    """``_alm24`` for candidate s (3 or 4) in lock-step over the lanes of S that need it (s = 3:
    row _SOLVE3, s = 4: route 1 in row _RT; the others get the first sweep only),
    branch-free, for the groups on its common path: a sweep that lands within the Newton start,
    at most 3 Newton steps on the open face (all s coordinates positive), a sweep that
    confirms. Every operation is ``_alm24``'s, so a group that stays on that path gets its
    result bit for bit; the others are marked unfinished (row _IT3 or _IT4 = 0) and solved by
    ``_alm24`` from the start. Compiled only inlined with a constant s (``_fast24_s3``,
    ``_fast24_s4``): a branch on a run-time s keeps LLVM from vectorizing the loop.

    Two vectorized passes: the first sweep on every lane, then the Newton steps and the
    confirming sweep (``_newton_confirm24``) on the lanes that need them: packed into rows
    _NZ.._NIT where they are at most half of the chunk (the first sweep finishes most lanes
    at small lam with float32's tolerance: its start is the middle of a tight bracket),
    else on every lane in place (packing would cost more than the steps it saves)."""
    tol_abs = tol  # z1 = 1
    newton_start = _NEWTON_START24
    newton_stop = 0.01 * tol_abs
    x, w_out, it_out = (_X3, _W3, _IT3) if s == 3 else (_X4, _W4, _IT4)
    # pass 1: the first sweep; row it_out gets 1.0 (finished), -1.0 (Newton follows) or 0.0
    na = 0
    for j in range(_CHUNK):
        z2 = S[_Z2 * _CHUNK + j]
        z3 = S[_Z3 * _CHUNK + j]
        z4 = S[_Z4 * _CHUNK + j] if s == 4 else 0.0  # s = 3: f has z4 = 0 (_alm24's y4)
        lg = lam * S[_SCALE * _CHUNK + j]
        w1 = S[x * _CHUNK + j]
        w2 = S[(x + 1) * _CHUNK + j]
        w3 = S[(x + 2) * _CHUNK + j]
        w4 = S[(x + 3) * _CHUNK + j] if s == 4 else 0.0
        w1, w2, w3, w4, delta = _sweep24(w1, w2, w3, w4, 1.0, z2, z3, z4, lg, s)
        done1 = delta <= tol_abs
        need = (S[_SOLVE3 * _CHUNK + j] != 0.0) if s == 3 else (S[_RT * _CHUNK + j] == 1.0)
        # Newton on the open face (a zero coordinate: another face, not followed)
        active = (need & (~done1) & (delta <= newton_start) & (w1 > 0.0) & (w2 > 0.0)
                  & (w3 > 0.0) & ((w4 > 0.0) | (s == 3)))
        S[w_out * _CHUNK + j] = w1
        S[(w_out + 1) * _CHUNK + j] = w2
        S[(w_out + 2) * _CHUNK + j] = w3
        if s == 4:
            S[(w_out + 3) * _CHUNK + j] = w4
        S[it_out * _CHUNK + j] = 1.0 if done1 else (-1.0 if active else 0.0)
        na += 1 if active else 0
    if na == 0:
        return
    if 2 * na > _CHUNK:  # pass 2 in place: the selects leave the other lanes as they are
        for j in range(_CHUNK):
            w1 = S[w_out * _CHUNK + j]
            w2 = S[(w_out + 1) * _CHUNK + j]
            w3 = S[(w_out + 2) * _CHUNK + j]
            w4 = S[(w_out + 3) * _CHUNK + j] if s == 4 else 0.0
            it = S[it_out * _CHUNK + j]
            active = it < 0.0
            u1, u2, u3, u4, done2 = _newton_confirm24(
                w1, w2, w3, w4, S[_Z2 * _CHUNK + j], S[_Z3 * _CHUNK + j],
                S[_Z4 * _CHUNK + j] if s == 4 else 0.0, lam * S[_SCALE * _CHUNK + j], active,
                tol_abs, newton_stop, max_iter, s)
            S[w_out * _CHUNK + j] = u1 if active else w1
            S[(w_out + 1) * _CHUNK + j] = u2 if active else w2
            S[(w_out + 2) * _CHUNK + j] = u3 if active else w3
            if s == 4:
                S[(w_out + 3) * _CHUNK + j] = u4 if active else w4
            S[it_out * _CHUNK + j] = 2.0 if done2 else (0.0 if active else it)
        return
    # pass 2 on the packed lanes (every lane writes its index, only the followed ones count)
    k = 0
    for j in range(_CHUNK):
        S[_NIDX * _CHUNK + k] = j
        k += 1 if S[it_out * _CHUNK + j] < 0.0 else 0
    for k in range(na):
        j = int(S[_NIDX * _CHUNK + k])
        S[_NZ * _CHUNK + k] = S[_Z2 * _CHUNK + j]
        S[(_NZ + 1) * _CHUNK + k] = S[_Z3 * _CHUNK + j]
        S[(_NZ + 2) * _CHUNK + k] = S[_Z4 * _CHUNK + j] if s == 4 else 0.0
        S[_NLG * _CHUNK + k] = lam * S[_SCALE * _CHUNK + j]
        for i in range(4):
            S[(_NW + i) * _CHUNK + k] = S[(w_out + i) * _CHUNK + j] if i < s else 0.0
    for k in range(na):
        u1, u2, u3, u4, done2 = _newton_confirm24(
            S[_NW * _CHUNK + k], S[(_NW + 1) * _CHUNK + k], S[(_NW + 2) * _CHUNK + k],
            S[(_NW + 3) * _CHUNK + k], S[_NZ * _CHUNK + k], S[(_NZ + 1) * _CHUNK + k],
            S[(_NZ + 2) * _CHUNK + k], S[_NLG * _CHUNK + k], True, tol_abs, newton_stop,
            max_iter, s)
        S[_NW * _CHUNK + k] = u1
        S[(_NW + 1) * _CHUNK + k] = u2
        S[(_NW + 2) * _CHUNK + k] = u3
        S[(_NW + 3) * _CHUNK + k] = u4
        S[_NIT * _CHUNK + k] = 2.0 if done2 else 0.0
    for k in range(na):
        j = int(S[_NIDX * _CHUNK + k])
        for i in range(s):
            S[(w_out + i) * _CHUNK + j] = S[(_NW + i) * _CHUNK + k]
        S[it_out * _CHUNK + j] = S[_NIT * _CHUNK + k]


@njit(cache=True, error_model="numpy")
def _fast24_s3(S, lam, tol, max_iter):
    """:func:`_fast24` for candidate 3 on a chunk (vectorized)."""
    _fast24(S, lam, tol, max_iter, 3)


@njit(cache=True, error_model="numpy")
def _fast24_s4(S, lam, tol, max_iter):
    """:func:`_fast24` for the dense candidate on a chunk (vectorized), for the groups of
    route 1 (``_dense_route24``)."""
    _fast24(S, lam, tol, max_iter, 4)


@njit(cache=True, error_model="numpy")
def _judge_pass24(S, lam, max_iter):
    """Per group of a chunk, without branches: the dense candidate of a group of route 1
    (rows _W4, _IT4: by ``_fast24_s4`` or the scalar ALM) against the best point so far
    (``_judge24``): its sweeps and flag added, the result where it wins."""
    for j in range(_CHUNK):
        take = (S[_RT * _CHUNK + j] == 1.0) & (S[_IT4 * _CHUNK + j] > 0.0)
        scale = S[_SCALE * _CHUNK + j]
        w1 = S[_W4 * _CHUNK + j]
        w2 = S[(_W4 + 1) * _CHUNK + j]
        w3 = S[(_W4 + 2) * _CHUNK + j]
        w4 = S[(_W4 + 3) * _CHUNK + j]
        it, mx4, wins, _ = _judge24(w1, w2, w3, w4, S[_IT4 * _CHUNK + j], max_iter,
                                    S[_Z2 * _CHUNK + j], S[_Z3 * _CHUNK + j],
                                    S[_Z4 * _CHUNK + j], lam * scale, 4, S[_BEST * _CHUNK + j])
        wins = take & wins
        S[_TWO * _CHUNK + j] = 0.0 if wins else S[_TWO * _CHUNK + j]
        S[_B * _CHUNK + j] = w1 * scale if wins else S[_B * _CHUNK + j]
        S[(_B + 1) * _CHUNK + j] = w2 * scale if wins else S[(_B + 1) * _CHUNK + j]
        S[(_B + 2) * _CHUNK + j] = w3 * scale if wins else S[(_B + 2) * _CHUNK + j]
        S[(_B + 3) * _CHUNK + j] = w4 * scale if wins else S[(_B + 3) * _CHUNK + j]
        S[_SW * _CHUNK + j] += it if take else 0.0
        S[_MX * _CHUNK + j] = 1.0 if take & mx4 else S[_MX * _CHUNK + j]


@njit(cache=True, error_model="numpy")
def _pick24(k, i1, i2, i3, c1, c2, c3, c4, y):
    """Entry k of the unsorted winner: the c_i whose sorted position i came from input
    index k (``_store24_one``; c4's when none of i1, i2, i3 is k), with the sign of y = y_k."""
    inline_in_llvm()
    v = c1 if i1 == k else (c2 if i2 == k else (c3 if i3 == k else c4))
    return (0.0 - v) if y < 0 else v  # 0.0 - 0.0 is +0.0: no negative zeros


@njit(cache=True, error_model="numpy")
def _store24_one(two, a1, a2, b1, b2, b3, b4, perm, y1, y2, y3, y4):
    """One group of ``_store24``, without branches: the winner, the 2-sparse candidate
    (a1, a2, 0, 0) if ``two`` (exactly the input entries) else b (sorted order), put back
    in input order with the input's signs; ``perm`` is ``_bound24_one``'s code."""
    inline_in_llvm()
    c1 = a1 if two else b1
    c2 = a2 if two else b2
    c3 = 0.0 if two else b3
    c4 = 0.0 if two else b4
    code = np.int64(perm)  # i1 + 4 i2 + 16 i3 + 64 i4, exact
    i1 = code & 3
    i2 = (code >> 2) & 3
    i3 = (code >> 4) & 3
    return (_pick24(0, i1, i2, i3, c1, c2, c3, c4, y1),
            _pick24(1, i1, i2, i3, c1, c2, c3, c4, y2),
            _pick24(2, i1, i2, i3, c1, c2, c3, c4, y3),
            _pick24(3, i1, i2, i3, c1, c2, c3, c4, y4))


@njit(cache=True, error_model="numpy")
def _store24(S):
    """Per group of a chunk, without branches: ``_store24_one`` from the rows of S."""
    for j in range(_CHUNK):
        o1, o2, o3, o4 = _store24_one(
            S[_TWO * _CHUNK + j] != 0.0, S[_A1 * _CHUNK + j], S[_A2 * _CHUNK + j],
            S[_B * _CHUNK + j], S[(_B + 1) * _CHUNK + j], S[(_B + 2) * _CHUNK + j],
            S[(_B + 3) * _CHUNK + j], S[_PERM * _CHUNK + j], S[_Y * _CHUNK + j],
            S[(_Y + 1) * _CHUNK + j], S[(_Y + 2) * _CHUNK + j], S[(_Y + 3) * _CHUNK + j])
        S[_OUT * _CHUNK + j] = o1
        S[(_OUT + 1) * _CHUNK + j] = o2
        S[(_OUT + 2) * _CHUNK + j] = o3
        S[(_OUT + 3) * _CHUNK + j] = o4


@njit(cache=True, error_model="numpy")
def _judge24(w1, w2, w3, w4, it, max_iter, z2, z3, z4, lg, s, best):
    """A solved candidate (s = 3: w4 = 0, f adds the dropped 0.5 z4^2; s = 4: dense)
    against the best value so far: (its sweeps clipped to max_iter, whether its ALM reached
    max_iter, whether it wins, its value f). Rounding ties go to the sparser candidate
    found before it."""
    inline_in_llvm()
    maxed = it > max_iter
    if s == 3:
        val = _f24(w1, w2, w3, 0.0, 1.0, z2, z3, 0.0, lg) + 0.5 * z4 * z4
    else:
        val = _f24(w1, w2, w3, w4, 1.0, z2, z3, z4, lg)
    return (max_iter if maxed else it), maxed, val < best - _OBJ_SLACK * best, val


@njit(cache=True, error_model="numpy")
def _dense_route24(solve4, lb4, best, two_sparse, mx, b1, b2, b3, z2, z3, z4, lg, cuts):
    """Whether and how the dense candidate of a group is solved, after the 3-sparse one:
    0, not (``_bound24_one`` ruled it out, its lower bound exceeds the best value so far,
    or the best point so far is a KKT point with a positive definite Hessian, which it
    cannot beat: ``_dense_cannot_win``); 1, it mostly ends inside the orthant (the best
    point so far has a negative gradient on a zero coordinate: ``_fast24_s4`` runs it in
    lock-step); 2, it mostly ends on a face (scalar ALM at once). ``b``: the
    3-sparse point when it is the best so far (``two_sparse`` False), ``mx``: its ALM
    reached max_iter. Written with selects (both KKT tests are computed), so that
    ``_decide_pass24`` vectorizes."""
    inline_in_llvm()
    dense = (solve4 != 0.0) & (lb4 <= best * (1.0 + _OBJ_SLACK))
    # the 3-sparse point qualifies only if its ALM converged with three positives
    kkt2 = _dense_cannot_win(1.0, z2, 0.0, z2, z3, z4, lg)
    kkt3 = ((~mx) & (b3 > 0.0) & (b2 > 0.0) & (b1 > 0.0)
            & _dense_cannot_win(b1, b2, b3, z2, z3, z4, lg))
    dense = dense & ~(cuts & (kkt2 if two_sparse else kkt3))
    # (1, z2, 0, 0): nu3 <= nu4 as z3 >= z4
    inside = (lg * z2 < z3) if two_sparse else (lg * (b1 * b2 + b1 * b3 + b2 * b3) < z4)
    return 0 if ~dense else (1 if inside else 2)


@njit(cache=True, error_model="numpy")
def _decide24(solve3, w1, w2, w3, it3, solve4, lb4, best, z2, z3, z4, lg, max_iter, cuts):
    """A group after its 3-sparse candidate w (``it3`` sweeps; only if ``solve3``), as
    selects: (best, two_sparse, b1, b2, b3, mx, sweeps, route): the best value so far, whether
    the 2-sparse candidate still holds it, else the 3-sparse point b, whether that ALM
    reached max_iter, its sweeps, and the dense candidate's route (``_dense_route24``)."""
    inline_in_llvm()
    it, mx, wins, val = _judge24(w1, w2, w3, 0.0, it3, max_iter, z2, z3, z4, lg, 3, best)
    wins = solve3 & wins
    mx = solve3 & mx
    best = val if wins else best
    b1 = w1 if wins else 0.0
    b2 = w2 if wins else 0.0
    b3 = w3 if wins else 0.0
    route = _dense_route24(solve4, lb4, best, ~wins, mx, b1, b2, b3, z2, z3, z4, lg, cuts)
    return best, ~wins, b1, b2, b3, mx, (it if solve3 else 0.0), route


@njit(cache=True, error_model="numpy")
def _decide_pass24(S, lam, max_iter, cuts):
    """Per group of a chunk, without branches: ``_decide24`` on its 3-sparse candidate (rows
    _W3, _IT3, filled for every group that solves it), its results stored in rows _BEST,
    _TWO, _B, _SW, _MX and _RT."""
    for j in range(_CHUNK):
        scale = S[_SCALE * _CHUNK + j]
        best, two, b1, b2, b3, mx, sw, route = _decide24(
            S[_SOLVE3 * _CHUNK + j] != 0.0, S[_W3 * _CHUNK + j], S[(_W3 + 1) * _CHUNK + j],
            S[(_W3 + 2) * _CHUNK + j], S[_IT3 * _CHUNK + j], S[_SOLVE4 * _CHUNK + j],
            S[_LB4 * _CHUNK + j], S[_BEST * _CHUNK + j], S[_Z2 * _CHUNK + j],
            S[_Z3 * _CHUNK + j], S[_Z4 * _CHUNK + j], lam * scale, max_iter, cuts)
        S[_BEST * _CHUNK + j] = best
        S[_TWO * _CHUNK + j] = 1.0 if two else 0.0
        S[_B * _CHUNK + j] = b1 * scale
        S[(_B + 1) * _CHUNK + j] = b2 * scale
        S[(_B + 2) * _CHUNK + j] = b3 * scale
        S[(_B + 3) * _CHUNK + j] = 0.0
        S[_SW * _CHUNK + j] = sw
        S[_MX * _CHUNK + j] = 1.0 if mx else 0.0
        S[_RT * _CHUNK + j] = route


@njit(cache=True, error_model="numpy")
def _solve_chunk24(y, start, stop, lam, tol, max_iter, out, sweeps, maxed, cuts):
    """2:4 EnumALM on rows [start, stop) of y (G, 4); same contract as _solve_chunk (rows that
    are already sorted and non-negative need no flag: the network leaves them in place).

    Passes over the chunk: ``_bound24`` (vectorized); the 3-sparse candidate (lock-step
    ``_fast24_s3`` when enough groups may need it, scalar ALM for the rest); the decision
    whether and how the dense candidate is solved (``_decide_pass24``, vectorized); the
    dense candidate in lock-step for the groups of route 1 (``_fast24_s4``, which takes its
    Newton steps only on those), the scalar ALM for the groups it leaves and for route 2
    (mostly ending on a face), their comparison with the best point (``_judge_pass24``,
    vectorized); ``_store24`` (vectorized).
    """
    n = stop - start
    S = np.empty(_ROWS * _CHUNK)  # the chunk, one row per quantity (see _Y.._MX)
    nonfinite = 0  # groups with NaN or Inf: they run no candidate solve (every test of
    # _bound24 on NaN is False), and the caller raises on the count
    for j in range(_CHUNK):
        g = start + j if j < n else start  # a short last chunk repeats a real group
        v1, v2, v3, v4 = y[g, 0], y[g, 1], y[g, 2], y[g, 3]
        S[_Y * _CHUNK + j] = v1
        S[(_Y + 1) * _CHUNK + j] = v2
        S[(_Y + 2) * _CHUNK + j] = v3
        S[(_Y + 3) * _CHUNK + j] = v4
        finite = ((abs(v1) <= _FINITE_MAX) & (abs(v2) <= _FINITE_MAX)
                  & (abs(v3) <= _FINITE_MAX) & (abs(v4) <= _FINITE_MAX))
        nonfinite += 0 if finite | (j >= n) else 1
    _bound24(S, lam, cuts)
    # the lock-step ALM of candidate 3 pays when enough groups of the chunk may need it
    need3 = 0.0
    for j in range(_CHUNK):
        need3 += S[_SOLVE3 * _CHUNK + j]
    if need3 >= _FAST_SHARE * _CHUNK:
        _fast24_s3(S, lam, tol, max_iter)
    else:
        for j in range(_CHUNK):
            S[_IT3 * _CHUNK + j] = 0.0
    tol_abs = tol  # z1 = 1 after scaling
    newton_start = _NEWTON_START24
    # the 3-sparse candidates the lock-step left (or all, where it did not run): scalar ALM
    for j in range(n):
        if S[_SOLVE3 * _CHUNK + j] != 0.0 and S[_IT3 * _CHUNK + j] == 0.0:
            w1, w2, w3, _, it = _alm24(1.0, S[_Z2 * _CHUNK + j], S[_Z3 * _CHUNK + j], 0.0, 3,
                                       lam * S[_SCALE * _CHUNK + j], tol_abs, newton_start,
                                       max_iter, S[_X3 * _CHUNK + j], S[(_X3 + 1) * _CHUNK + j],
                                       S[(_X3 + 2) * _CHUNK + j], 0.0)
            S[_W3 * _CHUNK + j] = w1
            S[(_W3 + 1) * _CHUNK + j] = w2
            S[(_W3 + 2) * _CHUNK + j] = w3
            S[_IT3 * _CHUNK + j] = it
    _decide_pass24(S, lam, max_iter, cuts)
    # the dense candidate: lock-step for the groups of route 1 where enough take it, the
    # scalar ALM for the groups it leaves and for route 2, then one comparison pass
    n1 = 0
    for j in range(_CHUNK):
        n1 += 1 if S[_RT * _CHUNK + j] == 1.0 else 0
    if n1 >= _DENSE_SHARE * _CHUNK:  # else the scalar ALM for all (the same bits)
        _fast24_s4(S, lam, tol, max_iter)
    else:
        for j in range(_CHUNK):
            S[_IT4 * _CHUNK + j] = 0.0
    for j in range(n):
        route = S[_RT * _CHUNK + j]
        if route == 2.0 or (route == 1.0 and S[_IT4 * _CHUNK + j] == 0.0):
            w1, w2, w3, w4, it = _alm24_dense(
                S[_Z2 * _CHUNK + j], S[_Z3 * _CHUNK + j], S[_Z4 * _CHUNK + j],
                lam * S[_SCALE * _CHUNK + j], tol_abs, newton_start, max_iter,
                S[_X4 * _CHUNK + j], S[(_X4 + 1) * _CHUNK + j], S[(_X4 + 2) * _CHUNK + j],
                S[(_X4 + 3) * _CHUNK + j])
            S[_W4 * _CHUNK + j] = w1
            S[(_W4 + 1) * _CHUNK + j] = w2
            S[(_W4 + 2) * _CHUNK + j] = w3
            S[(_W4 + 3) * _CHUNK + j] = w4
            S[_IT4 * _CHUNK + j] = it
            S[_RT * _CHUNK + j] = 1.0
    _judge_pass24(S, lam, max_iter)
    for j in range(n):
        sweeps[start + j] = int(S[_SW * _CHUNK + j])
        maxed[start + j] = S[_MX * _CHUNK + j] != 0.0
    _store24(S)
    for j in range(n):
        out[start + j, 0] = S[_OUT * _CHUNK + j]
        out[start + j, 1] = S[(_OUT + 1) * _CHUNK + j]
        out[start + j, 2] = S[(_OUT + 2) * _CHUNK + j]
        out[start + j, 3] = S[(_OUT + 3) * _CHUNK + j]
    return nonfinite


# --------------------------------------------------------------------------------------
# 2:4 screen: groups whose prox is certainly the 2-sparse candidate
#
# A cheap sufficient condition (docs/prox.md, "The 2-sparse certificate"): with z sorted
# descending, scaled to z1 = 1 and lg = lam z1, p = (z1, z2, 0, 0) minimizes
# f(w) = 0.5 ||w - z||^2 + lg e_3(w) over w >= 0 if
#     rho^2 = z3 / (lg z2) < 1  and  g(t) = z2 (1 - t) - R (1 - t^2 / rho^2) >= 0 on [0, rho],
# where R = sqrt(z3^2 + z4^2). g is convex with its vertex at t* = z2 rho^2 / (2 R): when
# t* >= rho its minimum on [0, rho] is g(rho) = z2 (1 - rho) > 0, else it is
# g(t*) = z2 - R - z2^2 rho^2 / (4 R). (The kernel multiplies these tests out by lg z2 > 0
# and R > 0: divisions cost more than the rest.) Lemma 10's rho <= 1 is necessary; along a
# prox-gradient path this certifies nearly every group whose optimum is 2-sparse, which then
# skips the kernel's brackets and bounds (the screen is a few comparisons per group).
# --------------------------------------------------------------------------------------

# The certificate must hold by this relative margin (its numbers are O(1) and computed to a
# few ulps, so rounding cannot certify a group whose optimum is not 2-sparse).
_SCREEN_MARGIN = 1e-9
# Rows of the screen's per-chunk scratch (structure of arrays, as S of the 2:4 kernel).
_SY = 0       # rows 0-3: the input group
_SOUT = 4     # rows 4-7: its 2-sparse candidate in input order (+0.0 off the top two)
_SEASY = 8    # 1.0: certified
_SROWS = 9
# The 2:4 driver works on blocks of _BLOCK chunks. It screens a block's first chunk; when at
# least _SCREEN_SHARE of it is certified it screens the rest and runs the kernel on the
# groups left, packed into full chunks, else the kernel on the whole block. (Screening costs
# less than the kernel on a certified group; early on a prox-gradient path, when hardly a
# group is 2-sparse, the screen costs 1/_BLOCK of itself.)
_BLOCK = 8
_SCREEN_SHARE = 0.3


@njit(cache=True, error_model="numpy")
def _easy24(v1, v2, v3, v4, lam):
    """(certified, i1, i2): whether the 2:4 prox of lam r_{2:4} at the group (v1, v2, v3, v4)
    is its 2-sparse candidate by the certificate above (never for NaN or Inf), and the
    indices of the two entries that candidate keeps (``_sort24``'s order, as the kernel's)."""
    inline_in_llvm()
    a1, a2, a3, a4, i1, i2, _, _ = _sort24(v1, v2, v3, v4)
    finite = ((a1 <= _FINITE_MAX) & (a2 <= _FINITE_MAX) & (a3 <= _FINITE_MAX)
              & (a4 <= _FINITE_MAX))
    scale = a1 if a1 > 0.0 else 1.0
    inv = 1.0 / scale  # one division: the tests below are multiplied out (lg z2 > 0, R > 0)
    z2, z3, z4 = a2 * inv, a3 * inv, a4 * inv
    lg = lam * scale
    margin = _SCREEN_MARGIN
    r2 = z3 * z3 + z4 * z4
    r = math.sqrt(r2)
    rho_ok = z3 < (1.0 - margin) * (lg * z2)  # rho^2 = z3 / (lg z2) < 1
    vertex = z2 * z3 >= 4.0 * r2 * (1.0 + margin) * lg  # t* >= rho: (z2 rho)^2 >= 4 R^2
    g_min = 4.0 * r * lg * (z2 * (1.0 - margin) - r) >= z2 * z3  # g(t*) >= 0
    certified = (z3 == 0.0) | (rho_ok & (vertex | g_min))  # z3 = 0: 2-sparse already
    return finite & certified, i1, i2


@njit(cache=True, error_model="numpy")
def _screen_pass24(T, lam):
    """Per group of a chunk, without branches: the certificate and the 2-sparse result."""
    for j in range(_CHUNK):
        v1 = T[_SY * _CHUNK + j]
        v2 = T[(_SY + 1) * _CHUNK + j]
        v3 = T[(_SY + 2) * _CHUNK + j]
        v4 = T[(_SY + 3) * _CHUNK + j]
        easy, i1, i2 = _easy24(v1, v2, v3, v4, lam)
        # the kept entries exactly, with -0.0 turned into +0.0 as _store24 does
        T[_SOUT * _CHUNK + j] = (v1 + 0.0) if (i1 == 0.0) | (i2 == 0.0) else 0.0
        T[(_SOUT + 1) * _CHUNK + j] = (v2 + 0.0) if (i1 == 1.0) | (i2 == 1.0) else 0.0
        T[(_SOUT + 2) * _CHUNK + j] = (v3 + 0.0) if (i1 == 2.0) | (i2 == 2.0) else 0.0
        T[(_SOUT + 3) * _CHUNK + j] = (v4 + 0.0) if (i1 == 3.0) | (i2 == 3.0) else 0.0
        T[_SEASY * _CHUNK + j] = 1.0 if easy else 0.0


@njit(cache=True, error_model="numpy")
def _screen_chunk24(y, start, stop, lam, out, sweeps, maxed, hard):
    """The screen on rows [start, stop) of y (G, 4): stores the result of every certified
    group in ``out`` (0 sweeps, not maxed) and flags the others in ``hard[g - start]``;
    returns how many it flagged. ``out`` may be ``y``: a chunk is loaded before any store."""
    n = stop - start
    T = np.empty(_SROWS * _CHUNK)
    for j in range(_CHUNK):
        g = start + j if j < n else start  # a short last chunk repeats a real group
        T[_SY * _CHUNK + j] = y[g, 0]
        T[(_SY + 1) * _CHUNK + j] = y[g, 1]
        T[(_SY + 2) * _CHUNK + j] = y[g, 2]
        T[(_SY + 3) * _CHUNK + j] = y[g, 3]
    _screen_pass24(T, lam)
    count = 0
    for j in range(n):  # without branches: an uncertified group gets y's own entries back
        # (the kernel's result replaces them, and its sweeps and flag)
        easy = T[_SEASY * _CHUNK + j] != 0.0
        hard[j] = not easy
        count += 0 if easy else 1
        out[start + j, 0] = T[_SOUT * _CHUNK + j] if easy else T[_SY * _CHUNK + j]
        out[start + j, 1] = T[(_SOUT + 1) * _CHUNK + j] if easy else T[(_SY + 1) * _CHUNK + j]
        out[start + j, 2] = T[(_SOUT + 2) * _CHUNK + j] if easy else T[(_SY + 2) * _CHUNK + j]
        out[start + j, 3] = T[(_SOUT + 3) * _CHUNK + j] if easy else T[(_SY + 3) * _CHUNK + j]
        sweeps[start + j] = 0
        maxed[start + j] = False
    return count


@njit(cache=True)
def _solve_block24(y, start, stop, lam, tol, max_iter, out, sweeps, maxed, cuts, screen):
    """2:4 EnumALM on rows [start, stop) of y, at most _BLOCK chunks from a chunk boundary:
    the screen, then ``_solve_chunk24`` on the groups it leaves, packed (a copy, so ``out``
    may be ``y``), or on the whole block; returns the number of groups with NaN or Inf."""
    n = stop - start
    hard = np.empty(n, dtype=np.bool_)
    n_hard = 0
    first = min(stop, start + _CHUNK)
    if screen:
        n_hard = _screen_chunk24(y, start, first, lam, out, sweeps, maxed, hard)
    if not screen or first - start - n_hard < _SCREEN_SHARE * (first - start):
        # too few certified (or no screen): the kernel on every group; a certified group
        # overwritten in place is 2-sparse, and the kernel returns it unchanged
        nonfinite = 0
        for c in range(start, stop, _CHUNK):
            nonfinite += _solve_chunk24(y, c, min(stop, c + _CHUNK), lam, tol, max_iter, out,
                                        sweeps, maxed, cuts)
        return nonfinite
    for c in range(first, stop, _CHUNK):
        n_hard += _screen_chunk24(y, c, min(stop, c + _CHUNK), lam, out, sweeps, maxed,
                                  hard[c - start:])
    if n_hard == 0:
        return 0
    idx = np.empty(n_hard, dtype=np.int64)
    y_hard = np.empty((n_hard, 4), dtype=y.dtype)
    k = 0
    for j in range(n):
        if hard[j]:
            idx[k] = start + j
            for i in range(4):
                y_hard[k, i] = y[start + j, i]
            k += 1
    w_hard = np.empty((n_hard, 4), dtype=out.dtype)
    sweeps_hard = np.zeros(n_hard, dtype=np.int64)
    maxed_hard = np.zeros(n_hard, dtype=np.bool_)
    nonfinite = 0
    for c in range(0, n_hard, _CHUNK):
        nonfinite += _solve_chunk24(y_hard, c, min(n_hard, c + _CHUNK), lam, tol, max_iter,
                                    w_hard, sweeps_hard, maxed_hard, cuts)
    for k in range(n_hard):
        g = idx[k]
        for i in range(4):
            out[g, i] = w_hard[k, i]
        sweeps[g] = sweeps_hard[k]
        maxed[g] = maxed_hard[k]
    return nonfinite


@njit(cache=True, error_model="numpy")
def _solve24_one(y1, y2, y3, y4, lam, tol, max_iter, cuts):
    """``_solve_chunk24`` on one group, scalar: the same passes (``_bound24_one``, the
    3-sparse candidate, ``_decide24``, the dense candidate, ``_store24_one``), with
    every ALM run by the scalar ``_alm24`` (the lock-step ``_fast24`` gives its results bit
    for bit). The code of one GPU thread (``sparseopt.prox.cuda24``). Returns (w1, w2, w3,
    w4, sweeps, maxed, finite): the prox in input order with signs, float64; a group with
    NaN or Inf has finite False and a meaningless w."""
    finite = ((abs(y1) <= _FINITE_MAX) & (abs(y2) <= _FINITE_MAX)
              & (abs(y3) <= _FINITE_MAX) & (abs(y4) <= _FINITE_MAX))
    (a1, a2, scale, z2, z3, z4, perm, best, solve3, x31, x32, x33, solve4, lb4,
     x41, x42, x43, x44) = _bound24_one(y1, y2, y3, y4, lam, cuts)
    lg = lam * scale
    newton_start = _NEWTON_START24
    w1 = w2 = w3 = 0.0
    it3 = 0
    if solve3 != 0.0:
        w1, w2, w3, _, it3 = _alm24(1.0, z2, z3, 0.0, 3, lg, tol, newton_start, max_iter,
                                    x31, x32, x33, 0.0)
    best, two_sparse, b1, b2, b3, mx, sweeps, route = _decide24(
        solve3 != 0.0, w1, w2, w3, float(it3), solve4, lb4, best, z2, z3, z4, lg, max_iter,
        cuts)
    b4 = 0.0
    if route != 0:
        w1, w2, w3, w4, it = _alm24_dense(z2, z3, z4, lg, tol, newton_start, max_iter,
                                          x41, x42, x43, x44)
        it, mx4, wins, _ = _judge24(w1, w2, w3, w4, it, max_iter, z2, z3, z4, lg, 4, best)
        mx = mx | mx4
        sweeps += it
        if wins:
            two_sparse = False
            b1, b2, b3, b4 = w1, w2, w3, w4
    o1, o2, o3, o4 = _store24_one(two_sparse, a1, a2, b1 * scale, b2 * scale, b3 * scale,
                                  b4 * scale, perm, y1, y2, y3, y4)
    return o1, o2, o3, o4, int(sweeps), mx, finite


@njit(cache=True, error_model="numpy")
def _prox24_one(y1, y2, y3, y4, lam, tol, max_iter, cuts, screen):
    """One group by the 2:4 kernel: the 2-sparse certificate if ``screen`` (certified: the
    input's two largest entries, 0 sweeps), else ``_solve24_one``; the same returns. The
    body of the CUDA kernel (``sparseopt.prox._cuda24_kernel``) and of its CPU twin
    ``_run_groups_one_by_one``; scalars in and out (the CUDA simulator runs it on Python
    floats)."""
    y1, y2, y3, y4 = np.float64(y1), np.float64(y2), np.float64(y3), np.float64(y4)
    if screen:
        easy, i1, i2 = _easy24(y1, y2, y3, y4, lam)
        if easy:
            # the kept entries exactly, with -0.0 turned into +0.0 (as _screen_pass24)
            return ((y1 + 0.0) if (i1 == 0.0) | (i2 == 0.0) else 0.0,
                    (y2 + 0.0) if (i1 == 1.0) | (i2 == 1.0) else 0.0,
                    (y3 + 0.0) if (i1 == 2.0) | (i2 == 2.0) else 0.0,
                    (y4 + 0.0) if (i1 == 3.0) | (i2 == 3.0) else 0.0, 0, False, True)
    return _solve24_one(y1, y2, y3, y4, lam, tol, max_iter, cuts)


@njit(cache=True)
def _run_groups_one_by_one(y, lam, tol, max_iter, out, sweeps, maxed, cuts, screen):
    """CPU twin of the CUDA kernel: ``_prox24_one`` on every row of y (G, 4) in turn, into
    out, sweeps, maxed; returns the number of groups with NaN or Inf (tests compare it with
    the chunked kernel, bit for bit)."""
    nonfinite = 0
    for g in range(y.shape[0]):
        o1, o2, o3, o4, sw, mx, finite = _prox24_one(y[g, 0], y[g, 1], y[g, 2], y[g, 3], lam,
                                                     tol, max_iter, cuts, screen)
        out[g, 0] = o1
        out[g, 1] = o2
        out[g, 2] = o3
        out[g, 3] = o4
        sweeps[g] = sw
        maxed[g] = mx
        nonfinite += 0 if finite else 1
    return nonfinite


@parallel_kernel(GROUP_SOLVE_MIN_ENTRIES)
def _enum_alm_groups24(y, lam, tol, max_iter, out, sweeps, maxed, cuts, screen):
    """Parallel driver of the 2:4 kernel (prange over blocks of _BLOCK chunks of groups);
    returns the number of groups with NaN or Inf (their rows of ``out`` are meaningless).
    ``screen=False``: no 2-sparse certificate (tests: it changes nothing but the sweep
    counts of certified groups, which are 0)."""
    G = y.shape[0]
    size = _BLOCK * _CHUNK
    n_blocks = (G + size - 1) // size
    nonfinite = 0
    for b in prange(n_blocks):
        nonfinite += _solve_block24(y, b * size, min(G, (b + 1) * size), lam, tol, max_iter,
                                    out, sweeps, maxed, cuts, screen)
    return nonfinite


# --------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------


def enum_alm_rows(y2d, lam, n, tol, max_iter, *, generic=False, presorted=False, cuts=True,
                screen=True, out=None, name=None):
    """EnumALM on every row of a C-contiguous (G, m) float array (one group per row):
the kernel behind :func:`sparseopt.prox.prox_nm` and the torch adapter's host kernel,
without ``prox_nm``'s argument checks. Returns (w, sweeps, maxed): w like ``y2d``, the ALM
sweeps of each group (int64) and whether a candidate of the group reached ``max_iter``.

``lam``, ``n``, ``tol``, ``max_iter`` as in ``prox_nm`` (``tol`` required: see
:func:`default_tol`; ``max_iter``: :data:`DEFAULT_MAX_ITER`).

    ``name``: raise ValueError naming it if ``y2d`` holds NaN or Inf. Into a fresh result
    the 2:4 kernel counts such groups in its own pass over the input (no pass of its own
    for the check; the result is dropped when it raises); before anything is written into
    a given ``out``, and before the generic kernel, :func:`check_finite` tests the input.

    ``out``: a C-contiguous array like ``y2d`` (possibly ``y2d`` itself) that receives w;
    the kernels load a group (the 2:4 kernel: a chunk of groups) before they store it.
    2:4 goes to the scalar kernel unless ``generic`` (used by tests to compare the two).
    ``presorted``: rows are already sorted descending and >= 0 (``enum_alm_sorted``; the
    2:4 kernel's sorting network leaves such rows as they are, so it needs no flag).
    ``cuts=False`` switches the 2:4 kernel's exact cuts off, the upper-bound cut and the
    KKT-point shortcut of ``_dense_cannot_win`` (tests: they change nothing);
    ``screen=False`` its 2-sparse certificate (``_enum_alm_groups24``; tests: it changes
    nothing but the sweep counts).
    """
    fused = (n, y2d.shape[1]) == (2, 4) and not generic
    if name is not None and not (fused and out is None):
        check_finite(y2d, name)
    out = np.empty_like(y2d) if out is None else out
    lam, tol, max_iter = float(lam), float(tol), int(max_iter)
    if fused:
        # the 2:4 kernel writes every group's sweeps and flag (the screen's and the chunks')
        sweeps = np.empty(y2d.shape[0], dtype=np.int64)
        maxed = np.empty(y2d.shape[0], dtype=np.bool_)
        if _enum_alm_groups24(y2d, lam, tol, max_iter, out, sweeps, maxed, cuts, screen) \
                and name is not None:
            raise ValueError(f"{name} contains NaN or Inf")
        return out, sweeps, maxed
    sweeps = np.zeros(y2d.shape[0], dtype=np.int64)
    maxed = np.zeros(y2d.shape[0], dtype=np.bool_)
    if y2d.dtype == np.float64:
        _enum_alm_groups(y2d, presorted, lam, int(n), tol, max_iter, out, sweeps, maxed)
    else:
        # the generic kernel is compiled for float64 only (it computes in float64 anyway);
        # rounding the float64 result once gives the same float32 result
        out64 = np.empty(y2d.shape, dtype=np.float64)
        _enum_alm_groups(y2d.astype(np.float64), presorted, lam, int(n), tol, max_iter, out64,
                         sweeps, maxed)
        out[...] = out64
    return out, sweeps, maxed


def enum_alm_sorted(z, lam, n, tol, max_iter, *, return_info=False):
    """EnumALM on groups that are already sorted descending and non-negative.

    Parameters
    ----------
    z : ndarray, shape (G, m), float32 or float64
        Each row sorted descending, entries >= 0 (not checked beyond a cheap test).
    lam : float
        Regularization weight, >= 0.
    n : int
        N of N:M, ``0 <= n < m``.
    tol : float
        Relative sweep tolerance: ALM stops when no coordinate moved by more than
        ``tol * z[g, 0]`` in a sweep.
    max_iter : int
        Maximal number of sweeps per candidate.
    return_info : bool, keyword-only
        Also return ``{"n_iter": sweeps per group, "max_iter_reached": bool per group}``.

    Returns
    -------
    w : ndarray, shape (G, m), dtype of z
        The prox of every row, sorted like z.

    Notes
    -----
    This is Alg. 3 of proxsparse-liu without lines 2, 3 and 8 (signs and sort), generalized
    to N:M as described in the module docstring.
    """
    z = np.asarray(z)
    if z.ndim != 2:
        raise ValueError(f"z must be a 2-d array (G, m), got shape {z.shape}")
    if z.dtype not in (np.float32, np.float64):
        raise ValueError(f"z must be float32 or float64, got {z.dtype}")
    m = z.shape[1]
    if not 0 <= n < m:
        raise ValueError(f"n must satisfy 0 <= n < m={m}, got {n}")
    if z.size and (np.any(z < 0) or np.any(np.diff(z, axis=1) > 0)):
        raise ValueError("z must be non-negative and sorted descending along axis 1")
    out, sweeps, maxed = enum_alm_rows(np.ascontiguousarray(z), lam, n, tol, max_iter,
                                     presorted=True)
    if return_info:
        return out, {"n_iter": sweeps, "max_iter_reached": maxed}
    return out


# --------------------------------------------------------------------------------------
# Plain NumPy twin and the ALM trace (references for tests and theory checks)
# --------------------------------------------------------------------------------------


def _esym_np(a, k):
    """e_k of a 1-d array by the textbook recursion."""
    if k < 0:
        return 0.0
    e = np.zeros(k + 1)
    e[0] = 1.0
    for x in a:
        e[1:] = e[1:] + x * e[:-1]
    return float(e[k])


def _balanced_start_np(zs, lam, n):
    """NumPy twin of ``_balanced_start``: max(t + z_i - mean z, 0), t + lam C(s-1,N) t^N = mean z."""
    from math import comb

    from scipy.optimize import brentq

    zbar = float(np.mean(zs))
    a = lam * comb(len(zs) - 1, n)
    if a <= 0.0 or zbar <= 0.0:
        t = zbar
    else:
        t = brentq(lambda t: t + a * t**n - zbar, 0.0, zbar, xtol=1e-300, rtol=1e-15)
    return np.maximum(t + zs - zbar, 0.0)


def _alm_sweep_np(w, z, lam, n, s):
    """One Gauss-Seidel sweep of proxsparse-liu Alg. 2 on coordinates [0, s), in place."""
    for i in range(s):
        others = np.concatenate([w[:i], w[i + 1 : s]])
        w[i] = max(z[i] - lam * _esym_np(others, n), 0.0)


def alm_trace(z, lam, n, s, n_sweeps):
    """ALM iterates of one sorted group, sweep by sweep (plain NumPy, no Newton).

    Parameters
    ----------
    z : array_like, shape (m,)
        Sorted descending, non-negative.
    lam : float
        Regularization weight.
    n : int
        N of N:M.
    s : int
        Support size: ALM runs on the top-s coordinates, the others stay 0.
    n_sweeps : int
        Number of full sweeps.

    Returns
    -------
    ndarray, shape (n_sweeps + 1, m)
        Row k is w^k; row 0 is the start w^0 = (z_1..z_s, 0, ..).

    Notes
    -----
    Prop. 8 of proxsparse-liu: f(w^k) >= f(w^{k+1}) + 0.5 ||w^{k+1} - w^k||^2 for the
    objective f(w) = 0.5 ||w - z||^2 + lam r_{N:M}(w).
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 1:
        raise ValueError(f"z must be 1-d, got shape {z.shape}")
    m = z.size
    if not 0 <= n < m or not n <= s <= m:
        raise ValueError(f"need 0 <= n < m and n <= s <= m, got n={n}, s={s}, m={m}")
    w = np.zeros(m)
    w[:s] = z[:s]
    rows = [w.copy()]
    for _ in range(int(n_sweeps)):
        _alm_sweep_np(w, z, lam, n, s)
        rows.append(w.copy())
    return np.array(rows)


def enum_alm_numpy(y, lam, n, m, tol, max_iter):
    """Plain NumPy twin of the EnumALM kernel: straightforward loops, no shortcuts.

    Every group: stable argsort of -|y|, candidates s = n..m with plain ALM sweeps (no
    Newton step, no KKT pruning) until the sweep moves no coordinate by more than
    ``tol * max|y|`` of the group, smallest objective wins (ties: the sparser), unsort,
    signs. Arithmetic in float64, result in the dtype of ``y``.

    Parameters
    ----------
    y : ndarray, last axis divisible by m
    lam : float
    n, m : int
    tol : float
    max_iter : int

    Returns
    -------
    ndarray, shape and dtype of y
    """
    y = np.asarray(y)
    groups = y.reshape(-1, m).astype(np.float64)
    out = np.zeros_like(groups)
    for g, row in enumerate(groups):
        order = np.argsort(-np.abs(row), kind="stable")
        z = np.abs(row)[order]
        best_w = np.zeros(m)
        best_w[:n] = z[:n]
        best = 0.5 * np.sum(z[n:] ** 2)
        if z[0] > 0:
            for s in range(n + 1, m + 1):
                w = np.zeros(m)
                w[:s] = _balanced_start_np(z[:s], lam, n)
                for _ in range(max_iter):
                    old = w.copy()
                    _alm_sweep_np(w, z, lam, n, s)
                    if np.max(np.abs(w - old)) <= tol * z[0]:
                        break
                val = 0.5 * np.sum((w - z) ** 2) + lam * _esym_np(w, n + 1)
                if val < best - _OBJ_SLACK * best:  # rounding ties: sparser wins
                    best, best_w = val, w
        res = np.zeros(m)
        res[order] = best_w
        out[g] = np.where(row < 0, 0.0 - res, res)
    return out.reshape(y.shape).astype(y.dtype)


def certified_two_sparse_numpy(y, lam):
    """Plain NumPy twin of the 2:4 kernel's 2-sparse certificate (``_easy24``): for each
    group of 4, whether the prox of ``lam * r_{2:4}`` is provably its 2-sparse candidate
    (the two largest ``|y|`` kept, ties to the smaller index, the rest 0). The condition is
    sufficient, not necessary (docs/prox.md, "The 2-sparse certificate"); groups with NaN or
    Inf are never certified. Arithmetic in float64.

    Parameters
    ----------
    y : ndarray, last axis divisible by 4
    lam : float

    Returns
    -------
    ndarray of bool, one entry per group (shape ``y.shape[:-1] + (y.shape[-1] // 4,)``)

    Raises
    ------
    ValueError
        If ``y`` is 0-d or its last axis is not divisible by 4, or ``lam`` is not a finite
        number >= 0. (NaN and Inf in ``y`` are allowed: such groups are not certified.)
    """
    y = np.asarray(y)
    if y.ndim == 0 or y.shape[-1] % 4:
        raise ValueError(f"y must have a last axis divisible by 4, got shape {y.shape}")
    lam = check_real(lam, "lam")
    groups = y.reshape(-1, 4).astype(np.float64)
    z = -np.sort(-np.abs(groups), axis=1)
    finite = np.all(np.isfinite(groups), axis=1)
    scale = np.where(z[:, 0] > 0.0, z[:, 0], 1.0)
    inv = 1.0 / scale
    z2, z3, z4 = z[:, 1] * inv, z[:, 2] * inv, z[:, 3] * inv
    lg = lam * scale
    margin = _SCREEN_MARGIN
    with np.errstate(over="ignore", invalid="ignore"):
        r2 = z3 * z3 + z4 * z4
        r = np.sqrt(r2)
        rho_ok = z3 < (1.0 - margin) * (lg * z2)
        vertex = z2 * z3 >= 4.0 * r2 * (1.0 + margin) * lg
        g_min = 4.0 * r * lg * (z2 * (1.0 - margin) - r) >= z2 * z3
        certified = (z3 == 0.0) | (rho_ok & (vertex | g_min))
    return (finite & certified).reshape(y.shape[:-1] + (y.shape[-1] // 4,))
