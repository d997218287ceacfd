"""EnumPGD: the 2:4 / 2:3 prox by enumeration with projected gradient descent.

prox24-kubler Sec. 3.5: on the sorted, non-negative domain (Lemma 3) the candidates of
Algorithm 1 are the 2-sparse w^(2) = [z_1, z_2, 0, 0] and the minimizers of the restricted
objectives f_3 (eq. 12, support {1,2,3}) and f_4 (eq. 10, dense). EnumPGD computes the last
two by projected gradient descent from w = 0 with step 1/4 (Fact 8: inside the convexity
region {Hess f >= 0} the gradient is 4-Lipschitz) and without enforcing Hess f >= 0
(Conjecture 9), and returns the candidate with the smallest objective.

The hot loop is ``_enum_pgd_kernel`` (Numba, parallel over groups); ``enum_pgd_numpy`` is a
plain NumPy twin that performs the same arithmetic in the same order, used by the tests.
"""

from __future__ import annotations


import numpy as np
from numba import njit, prange

from ..threads import GROUP_SOLVE_MIN_ENTRIES, parallel_kernel
from ..validation import check_int
from .ipm import _validate_sorted

__all__ = ["enum_pgd_sorted", "enum_pgd_numpy"]

STEP = 0.25  # 1 / gamma_max bound of Fact 8 b)

# stop codes per candidate run
STOP_TOL = 0  # ||G(w)|| <= tol * z_1
STOP_INCREASE = 1  # ||G(w)|| did not decrease: the run left the convexity region (Sec. 3.5)
#                    or cycles (at a large lam the iterates can alternate between two points)
STOP_MAX_ITER = 2


@njit(cache=True)
def _grad_f(w, z, lam, k, g):
    """Gradient of f_k(w) = 0.5||w - z||^2 + lam e_3(w) on the first k coordinates:
    g_i = w_i - z_i + lam e_2(w without i), with e_2(w without i) = e_2(w) - w_i (S - w_i)."""
    s = 0.0
    q = 0.0
    for i in range(k):
        s += w[i]
        q += w[i] * w[i]
    e2 = 0.5 * (s * s - q)
    for i in range(k):
        g[i] = w[i] - z[i] + lam * (e2 - w[i] * (s - w[i]))


@njit(cache=True)
def _hess_pd(w, lam, k, h):
    """True if Hess f_k(w) = I + lam A(w) (eq. 23, 24) is positive definite, by an LDL'
    factorization (no square roots): all pivots d_j > 0. ``h`` is a 4 x 4 scratch array
    that receives the unit lower factor L below the diagonal and D on it."""
    s = 0.0
    for i in range(k):
        s += w[i]
    for j in range(k):
        d = 1.0
        for p in range(j):
            d -= h[j, p] * h[j, p] * h[p, p]
        if not d > 0.0:
            return False
        h[j, j] = d
        for i in range(j + 1, k):
            v = lam * (s - w[i] - w[j])
            for p in range(j):
                v -= h[i, p] * h[j, p] * h[p, p]
            h[i, j] = v / d
    return True


@njit(cache=True)
def _objective(w, z, lam, m):
    """0.5 ||w - z||^2 + lam e_3(w) over all m coordinates (eq. 10)."""
    q = 0.0
    e1 = 0.0
    e2 = 0.0
    e3 = 0.0
    for i in range(m):
        d = w[i] - z[i]
        q += d * d
        e3 += w[i] * e2
        e2 += w[i] * e1
        e1 += w[i]
    return 0.5 * q + lam * e3


@njit(cache=True)
def _pgd_run(z, lam, k, tol_abs, max_iter, w, track_psd):
    """Projected gradient from w = 0 on f_k; w (length >= k) is overwritten with the last
    iterate. Returns (iterations taken, stop code, some iterate had a non-PD Hessian); the
    Hessian test is skipped (and reported False) unless ``track_psd``."""
    g = np.empty(4)
    wn = np.empty(4)
    h = np.empty((4, 4))
    for i in range(w.shape[0]):
        w[i] = 0.0
    r_prev = np.inf
    left = False
    for it in range(max_iter):
        _grad_f(w, z, lam, k, g)
        r2 = 0.0
        for i in range(k):
            v = w[i] - STEP * g[i]
            wn[i] = v if v > 0.0 else 0.0
            d = wn[i] - w[i]
            r2 += d * d
        r = np.sqrt(r2) / STEP  # norm of the gradient mapping G(w) = (w - w+) / step
        if r >= r_prev:  # not decreasing: left the convexity region, or a 2-cycle
            return it, STOP_INCREASE, left
        for i in range(k):
            w[i] = wn[i]
        if track_psd and not left and not _hess_pd(w, lam, k, h):
            left = True
        if r <= tol_abs:
            return it + 1, STOP_TOL, left
        r_prev = r
    return max_iter, STOP_MAX_ITER, left


@parallel_kernel(GROUP_SOLVE_MIN_ENTRIES)
def _enum_pgd_kernel(z, lam, tol, max_iter, track_psd, out, n_iter, stop, left, winner):
    """EnumPGD on every row of z (float64, sorted, >= 0). Candidate runs: column 0 is the
    3-sparse run (k = 3), column 1 the dense run (k = 4, only when m = 4)."""
    gcount, m = z.shape
    for gi in prange(gcount):
        zg = z[gi]
        tol_abs = tol * zg[0]
        best = np.zeros(m)
        best[0] = zg[0]
        best[1] = zg[1]
        fbest = _objective(best, zg, lam, m)
        win = 2
        w = np.zeros(m)
        for c in range(m - 2):
            k = 3 + c
            nit, code, lft = _pgd_run(zg, lam, k, tol_abs, max_iter, w, track_psd)
            n_iter[gi, c] = nit
            stop[gi, c] = code
            left[gi, c] = lft
            fw = _objective(w, zg, lam, m)
            if fw < fbest:  # strict: ties keep the sparser candidate
                fbest = fw
                win = k
                for i in range(m):
                    best[i] = w[i]
        for i in range(m):
            out[gi, i] = best[i]
        winner[gi] = win


def _check_pgd_args(z, lam, n, tol, max_iter):
    if tol is None:
        tol = 1e-12
    if max_iter is None:
        max_iter = 100_000
    z_in = np.asarray(z) if not isinstance(z, np.ndarray) else z
    z64, lam, tol = _validate_sorted(z_in, lam, n, tol)
    if n != 2:
        raise ValueError(f"n must be 2 for EnumPGD (2:4 and 2:3), got n={n}")
    if z64.shape[1] not in (3, 4):
        raise ValueError(f"m must be 3 or 4 for EnumPGD (2:3 and 2:4), got m={z64.shape[1]}")
    check_int(max_iter, "max_iter", minimum=1)
    return z_in.dtype, np.ascontiguousarray(z64, dtype=np.float64), lam, tol, int(max_iter)


def _info(n_iter, stop, left, winner):
    return {
        "left_psd": left.any(axis=1),
        "n_iter": n_iter.sum(axis=1),
        "left_psd_runs": left,
        "n_iter_runs": n_iter,
        "stop_runs": stop,
        "winner": winner,
    }


def enum_pgd_sorted(z, lam, n=2, tol=1e-12, max_iter=100_000, return_info=False):
    """EnumPGD: 2:4 / 2:3 prox on the sorted, non-negative domain (prox24-kubler Sec. 3.5).

    Parameters
    ----------
    z : ndarray, shape (G, m), float32 or float64, m in {3, 4}
        One group per row, sorted descending and non-negative (Lemma 3).
    lam : float
        Regularization strength, lam >= 0.
    n : int
        Must be 2 (patterns 2:4 and 2:3).
    tol : float
        Stop a candidate run when the gradient-mapping norm ||G(w)|| = ||w - w+|| / step is
        at most ``tol * z_1`` (scale-free: the prox is positively homogeneous in (z, 1/lam)).
        Default 1e-12; None means the default.
    max_iter : int
        Iteration cap per candidate run. Default 100000; None means the default.
    return_info : bool
        Also return a dict of diagnostics (see Returns).

    Returns
    -------
    w : ndarray, shape (G, m), same dtype as z
        Best of the candidates [z_1, z_2, 0, (0)], PGD on f_3, and (m = 4) PGD on f_4.
    info : dict, only if ``return_info``
        ``left_psd`` (G,) bool: some iterate of the 3-sparse or dense run had a Hessian
        (eq. 23 / 24) that is not positive definite (Cholesky pivot <= 0).
        ``n_iter`` (G,) int: iterations of both runs together.
        ``left_psd_runs``, ``n_iter_runs``, ``stop_runs`` (G, m - 2): per run (column 0 the
        3-sparse run, column 1 the dense run); stop codes 0 = tolerance reached,
        1 = gradient-mapping norm did not decrease, 2 = max_iter.
        ``winner`` (G,) int: which candidate was returned: 2 (the 2-sparse one), 3 (the
        3-sparse run) or 4 (the dense run). A run can end on a point with a smaller
        support (e.g. the dense run at w_4 = 0), so count nonzeros for the support.

    Raises
    ------
    ValueError
        If ``z`` is not a 2-D float array of sorted non-negative rows with m in {3, 4}, has
        NaN/Inf, ``lam`` < 0 or not finite, ``n != 2``, ``tol`` <= 0 or ``max_iter`` < 1.

    Notes
    -----
    Each run is w^0 = 0, w^{k+1} = (w^k - grad f_k(w^k) / 4)_+ (Conjecture 9), where
    grad_i f_k(w) = w_i - z_i + lam e_2(w without i) (Lemma 4). The stopping test uses the
    gradient mapping G(w) = 4 (w - (w - grad f(w)/4)_+), the projected-gradient residual,
    which is zero exactly at KKT points of min_{w >= 0} f_k. Inside the convexity region
    its norm is non-increasing for step 1/L, so an increase means the run left the region;
    the run then stops at the current iterate (Sec. 3.5: by Conjecture 9 and Cor. 6 that
    candidate cannot be optimal). Every candidate is feasible for eq. (9), so the result is
    always a point whose objective is honestly evaluated; optimality rests on Conjecture 9,
    which ``info['left_psd']`` lets one test (the Hessian is checked at every iterate).

    Ties in objective keep the sparser candidate. Groups with z = 0 return 0 immediately
    (G(0) = 0). Both dtypes are computed in float64 (the kernel is compiled once for
    float64) and the result is cast to z's dtype, so float32 inputs get float64-accurate
    solutions rounded once.

    References
    ----------
    prox24-kubler.md Sec. 3.5, Fact 8, Conjecture 9, Algorithm 1; eq. (10), (12), (23), (24).
    proxsparse-liu.txt Sec. 3.3 and Table 1 (EnumPGD).

    Examples
    --------
    >>> import numpy as np
    >>> enum_pgd_sorted(np.array([[3.0, 2.0, 0.5, 0.1]]), 0.05).round(6)
    array([[2.979656, 1.969217, 0.206621, 0.      ]])
    """
    dtype, z64, lam, tol, max_iter = _check_pgd_args(z, lam, n, tol, max_iter)
    g, m = z64.shape
    out = np.empty((g, m))
    n_iter = np.zeros((g, m - 2), dtype=np.int64)
    stop = np.zeros((g, m - 2), dtype=np.int8)
    left = np.zeros((g, m - 2), dtype=np.bool_)
    winner = np.zeros(g, dtype=np.int8)
    if g:
        _enum_pgd_kernel(z64, lam, tol, max_iter, bool(return_info), out, n_iter, stop, left, winner)
    w = out.astype(dtype)
    if return_info:
        return w, _info(n_iter, stop, left, winner)
    return w


def _grad_numpy(w, z, lam, k):
    """Twin of ``_grad_f`` for all rows at once, same operation order."""
    s = np.zeros(w.shape[0])
    q = np.zeros(w.shape[0])
    for i in range(k):
        s = s + w[:, i]
        q = q + w[:, i] * w[:, i]
    e2 = 0.5 * (s * s - q)
    g = np.empty((w.shape[0], k))
    for i in range(k):
        g[:, i] = w[:, i] - z[:, i] + lam * (e2 - w[:, i] * (s - w[:, i]))
    return g


def _hess_pd_numpy(w, lam, k):
    """Twin of ``_hess_pd``: row-wise LDL' of I + lam A(w); True where all pivots > 0."""
    gcount = w.shape[0]
    s = np.zeros(gcount)
    for i in range(k):
        s = s + w[:, i]
    h = np.zeros((gcount, k, k))
    ok = np.ones(gcount, dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(k):
            d = np.ones(gcount)
            for p in range(j):
                d = d - h[:, j, p] * h[:, j, p] * h[:, p, p]
            ok &= d > 0.0
            h[:, j, j] = d
            for i in range(j + 1, k):
                v = lam * (s - w[:, i] - w[:, j])
                for p in range(j):
                    v = v - h[:, i, p] * h[:, j, p] * h[:, p, p]
                h[:, i, j] = v / d
    return ok


def _objective_numpy(w, z, lam):
    q = np.zeros(w.shape[0])
    e1 = np.zeros(w.shape[0])
    e2 = np.zeros(w.shape[0])
    e3 = np.zeros(w.shape[0])
    for i in range(w.shape[1]):
        d = w[:, i] - z[:, i]
        q = q + d * d
        e3 = e3 + w[:, i] * e2
        e2 = e2 + w[:, i] * e1
        e1 = e1 + w[:, i]
    return 0.5 * q + lam * e3


def enum_pgd_numpy(z, lam, n=2, tol=1e-12, max_iter=100_000, return_info=False):
    """Plain NumPy twin of ``enum_pgd_sorted`` (same algorithm, same operation order,
    vectorized over groups with masks instead of a compiled loop). Same parameters and
    returns; used to test the Numba kernel."""
    dtype, z64, lam, tol, max_iter = _check_pgd_args(z, lam, n, tol, max_iter)
    g, m = z64.shape
    best = np.zeros((g, m))
    best[:, :2] = z64[:, :2]
    fbest = _objective_numpy(best, z64, lam)
    winner = np.full(g, 2, dtype=np.int8)
    n_iter = np.zeros((g, m - 2), dtype=np.int64)
    stop = np.full((g, m - 2), STOP_MAX_ITER, dtype=np.int8)
    left = np.zeros((g, m - 2), dtype=np.bool_)
    tol_abs = tol * z64[:, 0]
    for c in range(m - 2):
        k = 3 + c
        w = np.zeros((g, m))
        r_prev = np.full(g, np.inf)
        active = np.ones(g, dtype=bool)
        nit = np.full(g, max_iter, dtype=np.int64)
        for it in range(max_iter):
            ia = np.nonzero(active)[0]
            if ia.size == 0:
                break
            wa = w[ia]
            grad = _grad_numpy(wa, z64[ia], lam, k)
            r2 = np.zeros(ia.size)
            wn = wa.copy()
            for i in range(k):
                v = wa[:, i] - STEP * grad[:, i]
                wn[:, i] = np.where(v > 0.0, v, 0.0)
                d = wn[:, i] - wa[:, i]
                r2 = r2 + d * d
            r = np.sqrt(r2) / STEP
            inc = r >= r_prev[ia]
            stop[ia[inc], c] = STOP_INCREASE
            nit[ia[inc]] = it
            keep = ~inc
            ik = ia[keep]
            w[ik] = wn[keep]
            left[ik, c] |= ~_hess_pd_numpy(wn[keep], lam, k)  # kernel skips once set: same flag
            conv = r[keep] <= tol_abs[ik]
            stop[ik[conv], c] = STOP_TOL
            nit[ik[conv]] = it + 1
            r_prev[ik] = r[keep]
            active[ia[inc]] = False
            active[ik[conv]] = False
        n_iter[:, c] = nit
        fw = _objective_numpy(w, z64, lam)
        better = fw < fbest
        fbest = np.where(better, fw, fbest)
        best[better] = w[better]
        winner[better] = k
    out = best.astype(dtype)
    if return_info:
        return out, _info(n_iter, stop, left, winner)
    return out
