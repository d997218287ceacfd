"""EnumIPM: the 2:M prox by enumeration of candidates and barrier interior-point solves.

This is the reference solver of prox24-kubler Sec. 3.3 (Algorithm 1, Theorem 7): on the
sorted, non-negative domain z_1 >= ... >= z_m >= 0 (Lemma 3) the optimum of

    f(w) = 0.5 ||w - z||^2 + lam e_3(w),   w in R^m_+            (eq. 9, 10)

is one of the candidates

    w^(2) = [z_1, z_2, 0, ..., 0]                                 (2-sparse)
    w^(k) = [solution of  min { f_k(u) : u in R^k, u >= 0, Hess f_k(u) >= 0 }, 0, ..., 0]
                                                                    (k-sparse, k = 3..m)

where f_k is f restricted to the first k coordinates (eq. 13 is k = 3, eq. 14 is k = m = 4).
Each candidate problem is convex because Hess f_k(u) = I + lam A(u) is affine in u
(eq. 23, 24; Lemma 5), so it is solved by the barrier method of Boyd & Vandenberghe
(Sec. 11.3) with the self-concordant barrier -log det(I + lam A(u)) - sum_i log u_i.

Public function: ``enum_ipm_sorted``. It is slow (pure NumPy, batched k x k linear algebra)
but carries the certificate of Theorem 7; use EnumALM for speed.
"""

from __future__ import annotations


import numpy as np

from ..validation import check_int, check_real

__all__ = ["enum_ipm_sorted"]

# Barrier-method constants (Boyd & Vandenberghe Alg. 11.1 and 9.2).
_T0 = 1.0  # initial t; the problems are normalized to z_1 = 1, so f is O(1)
_MU = 50.0  # t <- mu t (Boyd & Vandenberghe: 10..100 all work; fewer centerings)
_ARMIJO = 0.25
_BACKTRACK = 0.5
_NEWTON_EPS = 1e-11  # centering stops when (Newton decrement)^2 / 2 <= this
_DEC2_FLOOR = 1e-2  # ... or when (decrement)^2 <= this and no longer decreasing
_MAX_NEWTON = 60
_CHUNK = 1 << 14  # groups per batch: bounds the (G, k, k, k) temporary


def _validate_sorted(z, lam, n, tol, name="z"):
    """Shared checks for the sorted-domain kernels; returns (z as float64, lam, tol)."""
    z = np.asarray(z)
    if z.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (groups, m), got shape {z.shape}")
    if not np.issubdtype(z.dtype, np.floating):
        raise ValueError(f"{name} must have a floating dtype (float32 or float64), got {z.dtype}")
    if not np.all(np.isfinite(z)):
        raise ValueError(f"{name} contains NaN or Inf")
    if np.any(z < 0):
        raise ValueError(f"{name} must be non-negative (pass |y|)")
    if z.shape[1] > 1 and np.any(np.diff(z, axis=1) > 0):
        raise ValueError(f"every row of {name} must be sorted in descending order")
    lam = check_real(lam, "lam")
    check_int(n, "n")
    tol = check_real(tol, "tol", positive=True, allow_none=True)
    return z, lam, tol


def _pair_tensor(k: int) -> np.ndarray:
    """The constant matrices A_l of Hess e_3(u) = sum_l u_l A_l (eq. 23, 24).

    (A_l)_{ij} = 1 if i != j and l not in {i, j}, else 0: the (i, j) entry of Hess e_3 is
    e_1 of the coordinates other than i and j.
    """
    a = np.zeros((k, k, k))
    for l in range(k):
        for i in range(k):
            for j in range(k):
                if i != j and l != i and l != j:
                    a[l, i, j] = 1.0
    return a


def _hess_f(u, lam):
    """Hess f_k(u) = I + lam A(u), A(u)_{ij} = sum(u) - u_i - u_j off the diagonal."""
    k = u.shape[1]
    s = u.sum(axis=1)
    m = lam[:, None, None] * (s[:, None, None] - u[:, :, None] - u[:, None, :])
    idx = np.arange(k)
    m[:, idx, idx] = 1.0
    return m


def _e2_others(u):
    """d e_3 / d u_l = e_2(u without l) = e_2(u) - u_l (e_1(u) - u_l)."""
    s = u.sum(axis=1, keepdims=True)
    e2 = 0.5 * (s[:, 0] ** 2 - np.sum(u * u, axis=1))
    return e2[:, None] - u * (s - u)


def _e3(u):
    """e_3 along the last axis by the recursion e_j <- e_j + u_i e_{j-1}."""
    e1 = np.zeros(u.shape[0])
    e2 = np.zeros(u.shape[0])
    e3 = np.zeros(u.shape[0])
    for i in range(u.shape[1]):
        ui = u[:, i]
        e3 = e3 + ui * e2
        e2 = e2 + ui * e1
        e1 = e1 + ui
    return e3


def _objective(u, z, lam):
    """f_k(u) = 0.5 ||u - z||^2 + lam e_3(u), per row."""
    d = u - z
    return 0.5 * np.sum(d * d, axis=1) + lam * _e3(u)


def _barrier_solve(z, lam, tol, a_tensor):
    """Barrier method for min { f_k(u) : u >= 0, I + lam A(u) >= 0 } on every row of z.

    z: (G, k) normalized (z_1 <= 1), lam: (G,) > 0. Returns u (G, k) strictly feasible with
    f_k(u) - p* <= (nu + 1) / t < tol, nu = 2k (barrier parameter of the log det of a
    k x k LMI plus k logs; the + 1 covers approximate centering with Newton decrement
    <= 0.1, Nesterov's bound (nu + (b + sqrt(nu)) b / (1 - b)) / t at b = 0.1), and a
    bool (G,) marking rows where some centering hit the Newton iteration cap.
    """
    g, k = z.shape
    nu = 2.0 * k
    # Strictly feasible start: with u = s 1 the Hessian is I + c (J - I), c = lam (k-2) s < 1/2.
    s0 = 0.5 / (lam * (k - 2) + 1.0)
    u = np.repeat(s0[:, None], k, axis=1)
    t = _T0
    idx = np.arange(k)
    uncentered = np.zeros(g, dtype=bool)
    while True:
        active = np.ones(g, dtype=bool)
        prev_dec2 = np.full(g, np.inf)
        last_dec2 = np.zeros(g)
        for _ in range(_MAX_NEWTON):
            if not np.any(active):
                break
            ia = np.nonzero(active)[0]
            ua, za, la = u[ia], z[ia], lam[ia]
            hf = _hess_f(ua, la)  # also the matrix inside the log det
            evals, evecs = np.linalg.eigh(hf)
            minv = (evecs / evals[:, None, :]) @ evecs.transpose(0, 2, 1)
            # gradient of -log det(I + lam A(u)): -lam tr(M^{-1} A_l) = -lam (S - 2 r_l),
            # with r_l the off-diagonal row sums of M^{-1} and S their total
            off = minv.copy()
            off[:, idx, idx] = 0.0
            r = off.sum(axis=2)
            grad_ld = -la[:, None] * (r.sum(axis=1, keepdims=True) - 2.0 * r)
            grad_f = ua - za + la[:, None] * _e2_others(ua)
            grad = t * grad_f + grad_ld - 1.0 / ua
            # Hessian of -log det: lam^2 tr(M^{-1} A_k M^{-1} A_l)
            b = (minv[:, None, :, :] @ a_tensor).reshape(len(ia), k, k * k)
            bt = b.reshape(len(ia), k, k, k).transpose(0, 1, 3, 2).reshape(len(ia), k, k * k)
            h_ld = (la * la)[:, None, None] * (b @ bt.transpose(0, 2, 1))
            hess = t * hf + h_ld
            hess[:, idx, idx] += 1.0 / (ua * ua)
            # Jacobi scaling: the 1/u^2 terms make the system badly scaled near the boundary
            dscale = 1.0 / np.sqrt(hess[:, idx, idx])
            hs = hess * dscale[:, :, None] * dscale[:, None, :]
            # near the LMI boundary the log det Hessian is nearly rank one; a 1e-13 ridge on
            # the unit diagonal keeps the solve defined and du a descent direction
            hs[:, idx, idx] += 1e-13
            du = -dscale * np.linalg.solve(hs, (dscale * grad)[:, :, None])[:, :, 0]
            dec2 = -np.sum(grad * du, axis=1)  # squared Newton decrement
            # Centered: the decrement is tiny, or it is below 0.1 (inside the region of
            # quadratic convergence) and stopped shrinking, i.e. it sits at the rounding
            # floor of t * grad f (~1e-6 at t ~ 1e13, worth 1e-19 in f).
            done = (dec2 <= 2.0 * _NEWTON_EPS) | ((dec2 <= _DEC2_FLOOR) & (dec2 >= 0.25 * prev_dec2[ia]))
            prev_dec2[ia] = dec2
            last_dec2[ia] = dec2
            # largest step keeping u > 0 and M(u + s du) > 0: with M = V diag(e) V',
            # M(u + s du) = M^{1/2} (I + s C) M^{1/2}, C = M^{-1/2} lam A(du) M^{-1/2}
            ad = _hess_f(du, la)
            ad[:, idx, idx] = 0.0
            msqrt_inv = evecs / np.sqrt(evals)[:, None, :]
            c = msqrt_inv.transpose(0, 2, 1) @ ad @ msqrt_inv
            gam = np.linalg.eigvalsh(c)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio_u = np.where(du < 0, -ua / du, np.inf)
                smax = np.minimum(ratio_u.min(axis=1), np.where(gam[:, 0] < 0, -1.0 / gam[:, 0], np.inf))
            step = np.minimum(1.0, 0.99 * smax)
            # Exact change of the barrier objective along the line (f is cubic, the barrier
            # is a sum of logs), so the Armijo test stays accurate even when t ~ 1e13.
            g1 = np.sum(grad_f * du, axis=1)
            g2 = 0.5 * np.sum(du * (hf @ du[:, :, None])[:, :, 0], axis=1)
            g3 = la * _e3(du)
            slope = np.sum(grad * du, axis=1)
            pending = ~done
            for _ls in range(80):
                if not np.any(pending):
                    break
                st = step[pending]
                df = st * g1[pending] + st**2 * g2[pending] + st**3 * g3[pending]
                dbar = -np.sum(np.log1p(st[:, None] * gam[pending]), axis=1) - np.sum(
                    np.log1p(st[:, None] * du[pending] / ua[pending]), axis=1
                )
                ok = t * df + dbar <= _ARMIJO * st * slope[pending]
                pidx = np.nonzero(pending)[0]
                pending[pidx[ok]] = False
                step[pidx[~ok]] *= _BACKTRACK
            # The fraction-to-boundary rule is exact arithmetic; verify the new point is
            # numerically inside the domain (u > 0, M PD with a resolvable smallest
            # eigenvalue) and backtrack further where it is not.
            move = np.nonzero(~done)[0]
            for _guard in range(60):
                if move.size == 0:
                    break
                un = ua[move] + step[move, None] * du[move]
                ev = np.linalg.eigvalsh(_hess_f(un, la[move]))
                inside = np.all(un > 0, axis=1) & (ev[:, 0] > 1e-15 * ev[:, -1])
                u[ia[move[inside]]] = un[inside]
                move = move[~inside]
                step[move] *= _BACKTRACK
            # a group whose line search stalls has no further progress to make at this t
            active[ia[done | (step * np.sqrt(np.maximum(dec2, 0.0)) < 1e-14)]] = False
        uncentered |= active & (last_dec2 > _DEC2_FLOOR)  # not even approximately centered
        if (nu + 1.0) / t < tol:
            return u, uncentered
        t *= _MU


def _polish(u, z, lam, iters=3):
    """Newton on the stationarity system grad f_k(u) = 0 (Lemma 4), accepted per row only
    while it stays positive, keeps Hess f_k positive definite and does not raise f_k."""
    for _ in range(iters):
        grad = u - z + lam[:, None] * _e2_others(u)
        hf = _hess_f(u, lam)
        try:
            du = -np.linalg.solve(hf, grad[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            return u
        un = u + du
        pos = np.all(un > 0, axis=1)
        ev = np.linalg.eigvalsh(_hess_f(np.where(pos[:, None], un, u), lam))[:, 0]
        fo, fn = _objective(u, z, lam), _objective(un, z, lam)
        gn = un - z + lam[:, None] * _e2_others(un)
        ok = (
            pos
            & (ev > 0)
            & (fn <= fo + 4 * np.finfo(float).eps * np.abs(fo))
            & (np.linalg.norm(gn, axis=1) <= np.linalg.norm(grad, axis=1))
        )
        u = np.where(ok[:, None], un, u)
    return u


def enum_ipm_sorted(z, lam, n=2, tol=1e-12, *, polish=True, return_info=False):
    """EnumIPM: exact 2:M prox on the sorted, non-negative domain (prox24-kubler Alg. 1).

    Parameters
    ----------
    z : ndarray, shape (G, m), float32 or float64
        One group per row, each row sorted descending and non-negative (Lemma 3). m >= 3.
    lam : float
        Regularization strength lam >= 0.
    n : int
        Must be 2. Supported patterns are 2:M for every M >= 3 (2:3 and 2:4 in the paper).
    tol : float, optional
        Barrier-method accuracy: each candidate problem is solved until (nu + 1) / t < tol,
        where nu = 2k is the barrier parameter (k x k log det plus k logs). The problems are scaled
        to z_1 = 1 per group, so the guaranteed suboptimality of every candidate is
        ``tol * z_1**2`` in objective units. Default 1e-12; None means the default.
    polish : bool, keyword-only
        Refine the winning candidate by a few guarded Newton steps on its stationarity
        system (accepted only if they keep it positive, PD and do not raise f). Default True.
    return_info : bool, keyword-only
        Also return a dict: ``candidate`` (G,) int, the support size k of the returned
        candidate (2..m), and ``uncentered`` (G,) bool, True where some centering step of some
        candidate hit the Newton iteration cap (60), so the tol guarantee is not certain there.

    Returns
    -------
    w : ndarray, shape (G, m), same dtype as z
        The prox on the sorted domain (also sorted descending, Lemma 3).
    info : dict, only if ``return_info``

    Raises
    ------
    ValueError
        If ``z`` is not a 2-D floating array of non-negative rows sorted descending, holds NaN
        or Inf, if ``lam`` is negative or not finite, if ``n != 2`` or ``m < 3``, or if ``tol``
        is not positive.

    Notes
    -----
    Theorem 7 of prox24-kubler: the optimum of eq. (9) is 2-sparse, 3-sparse or dense and
    each case is the solution of a convex problem, (13) or (14), because the Hessians
    eq. (23), (24) are affine in w, so {w : Hess >= 0} is an LMI (Lemma 5). The proof uses
    only that Hess e_3 is linear, so it carries over to 2:M: the optimum is sorted, hence
    supported on a prefix {1..k}; for k >= 3 its restriction is an interior local minimum of
    f_k (zero gradient, PSD Hessian) and therefore optimal for the convex problem
    min {f_k(u) : u >= 0, Hess f_k(u) >= 0}, whose every solution has the same value and is
    feasible for (9). The candidates are k = 2 (closed form) and k = 3..m.

    Each convex problem is solved by the barrier method (Boyd & Vandenberghe Alg. 11.1):
    minimize t f_k(u) - log det(I + lam A(u)) - sum_i log u_i by damped Newton steps, with
    gradient -lam tr(M^{-1} A_l) and Hessian lam^2 tr(M^{-1} A_k M^{-1} A_l) of the log det
    term (M = I + lam A(u), A(u) = sum_l u_l A_l), t <- 50 t until (2k + 1) / t < tol. The step is
    capped at 0.99 of the distance to the boundary (computed from the eigenvalues of
    M^{-1/2} lam A(du) M^{-1/2}) and then backtracked (Armijo). Because f_k is a cubic and
    the barrier a sum of logs, the line-search decrease is evaluated in closed form along
    the line, which keeps the test meaningful when t is 1e13.

    Candidates whose objective is within ``tol * z_1**2`` of the best are treated as tied and
    the sparsest is returned, so exactly sparse optima come out exactly sparse. Groups with
    z_1 = 0 give w = 0, lam = 0 gives w = z (no regularization); zeros inside z (e.g.
    z_4 = 0) need no special case, the barrier path converges to the boundary.

    Computation is in float64 for both input dtypes; the result is cast back to z's dtype.

    References
    ----------
    prox24-kubler.md Sec. 3.3, Lemma 3-5, eq. (9)-(14), (23)-(24), Theorem 7, Algorithm 1.
    S. Boyd and L. Vandenberghe, Convex Optimization, Sec. 11.2-11.3.

    Examples
    --------
    >>> import numpy as np
    >>> enum_ipm_sorted(np.array([[3.0, 2.0, 0.5, 0.1]]), 0.05).round(6)
    array([[2.979656, 1.969217, 0.206621, 0.      ]])
    """
    if tol is None:
        tol = 1e-12
    z_in = z
    z, lam, tol = _validate_sorted(z, lam, n, tol)
    if n != 2:
        raise ValueError(f"n must be 2 for EnumIPM (2:M patterns), got n={n}")
    g, m = z.shape
    if m < 3:
        raise ValueError(f"m must be >= 3 for EnumIPM (2:M with M >= 3), got m={m}")
    out_dtype = np.asarray(z_in).dtype
    z = z.astype(np.float64)
    w = np.zeros((g, m))
    scale = z[:, 0] if g else np.zeros(0)
    live = scale > 0
    candidate = np.full(g, 2, dtype=np.int64)
    uncentered = np.zeros(g, dtype=bool)
    if lam == 0.0 or g == 0:
        candidate[:] = m
        w = z.astype(out_dtype)
        return (w, {"candidate": candidate, "uncentered": uncentered}) if return_info else w
    zn = z[live] / scale[live, None]  # normalized: z_1 = 1, lam' = lam z_1 (f scales by z_1^2)
    ln = lam * scale[live]
    gl = zn.shape[0]
    cands = np.zeros((m - 1, gl, m))  # candidate k = 2..m
    cands[0, :, :2] = zn[:, :2]
    unc = np.zeros(gl, dtype=bool)
    for k in range(3, m + 1):
        a_tensor = _pair_tensor(k)
        uk = np.empty((gl, k))
        for lo in range(0, gl, _CHUNK):
            hi = min(gl, lo + _CHUNK)
            uk[lo:hi], flag = _barrier_solve(zn[lo:hi, :k], ln[lo:hi], tol, a_tensor)
            unc[lo:hi] |= flag
        cands[k - 2, :, :k] = uk
    vals = np.stack([_objective(c, zn, ln) for c in cands])
    best = vals.min(axis=0)
    # sparsest candidate within the barrier accuracy of the best (ties -> sparser)
    choice = np.argmax(vals <= best + tol, axis=0)
    wn = cands[choice, np.arange(gl)]
    if polish:
        for k in range(3, m + 1):
            sel = choice == k - 2
            if np.any(sel):
                wn[sel, :k] = _polish(wn[sel, :k], zn[sel, :k], ln[sel])
    w[live] = wn * scale[live, None]
    w = w.astype(out_dtype)
    if return_info:
        candidate[live] = choice + 2
        uncentered[live] = unc
        return w, {"candidate": candidate, "uncentered": uncentered}
    return w
