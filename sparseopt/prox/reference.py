"""An independent brute-force reference for the N:M prox.

``prox_bruteforce`` minimizes 0.5 ||w - y||^2 + lam r_{N:M}(w) group by group with plain
multi-start local search (SciPy L-BFGS-B). It deliberately does not use the structure the
fast solvers rely on (no sorting, no Lemma 3 ordering, no candidate enumeration, no Lemma 4
optimality system), so agreement with it is evidence, not a tautology. Small inputs only.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import minimize

# L-BFGS-B calls BLAS on tiny vectors; threaded BLAS only adds contention there
from threadpoolctl import threadpool_limits

from ..patterns import NM
from ..validation import check_finite, check_int, check_nm, check_real

__all__ = ["prox_bruteforce"]


def _esym_and_grad(u: np.ndarray, k: int):
    """e_k(u) and its gradient d e_k / d u_i = e_{k-1}(u without i).

    Both come from the recursion e_j <- e_j + u_i e_{j-1}, run on u and, at once, on the m
    leave-one-out copies of u (zeroing u_i removes it from every product)."""
    m = u.shape[0]
    rows = np.vstack([u[None, :], np.where(np.eye(m, dtype=bool), 0.0, u[None, :])])
    e = np.zeros((k + 1, m + 1))
    e[0] = 1.0
    for i in range(m):
        ui = rows[:, i]
        for j in range(k, 0, -1):
            e[j] += ui * e[j - 1]
    return e[k, 0], e[k - 1, 1:]


def _local_search(z, lam, k, x0, free):
    """L-BFGS-B on 0.5||u - z||^2 + lam e_k(u) over u >= 0 with u fixed at 0 off ``free``."""
    idx = np.flatnonzero(free)

    def fun(v):
        u = np.zeros_like(z)
        u[idx] = v
        val, grad = _esym_and_grad(u, k)
        d = u - z
        return 0.5 * d @ d + lam * val, (d + lam * grad)[idx]

    res = minimize(fun, x0[idx], jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * idx.size,
                   options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 5000, "maxcor": 20})
    u = np.zeros_like(z)
    u[idx] = np.maximum(res.x, 0.0)
    d = u - z
    return u, 0.5 * d @ d + lam * _esym_and_grad(u, k)[0]


def prox_bruteforce(y, lam, pattern=NM(2, 4), *, starts=20, seed=0):
    """Reference N:M prox by multi-start local search, independent of Lemma 3 / Algorithm 1.

    Parameters
    ----------
    y : array_like, float32 or float64
        Input; groups of ``m`` consecutive entries along the last axis are independent.
    lam : float
        Regularization strength, lam >= 0.
    pattern : NM, default NM(2, 4)
        The N:M pattern, 0 <= n < m.
    starts : int, keyword-only
        Number of random starting points per group (uniform in the box [0, |y|]), in addition
        to the structured starts listed in Notes. Default 20.
    seed : int, keyword-only
        Seed for the random starts.

    Returns
    -------
    w : ndarray, same shape and dtype as y
        The best point found for every group.

    Raises
    ------
    ValueError
        If ``y`` holds NaN/Inf or has a non-floating dtype, its last axis is not a multiple of
        ``m``, ``lam`` is negative or not finite, ``n``/``m`` are not a valid N:M pair with
        n < m, or ``starts`` is negative.

    Notes
    -----
    The only reduction used is the sign argument: for any w, flipping w_i to
    sign(y_i) |w_i| keeps r_{N:M}(w) (it depends on |w| only, eq. 6) and does not increase
    (w_i - y_i)^2. So the minimum over R^m equals the minimum of
    f(u) = 0.5 ||u - |y|||^2 + lam e_{N+1}(u) over u >= 0, and w = sign(y) u. No ordering of
    the optimum is assumed.

    For each group, L-BFGS-B (bounds u >= 0, ftol 1e-16, gtol 1e-13) is run from: the
    ``starts`` random points; u = 0 and u = |y|; and, for every nonempty support set S of
    [m], from |y| restricted to S with the coordinates outside S held at 0 (a local search
    on that face), followed by a free search from the face's result. The best objective is
    returned. Cost: about 2^(m+1) + starts local searches per group, so keep m <= 8 and the
    number of groups small (tests use up to a few hundred).

    Examples
    --------
    >>> import numpy as np
    >>> prox_bruteforce(np.array([3.0, -2.0, 0.5, 0.1]), 0.05).round(6)
    array([ 2.979656, -1.969217,  0.206621,  0.      ])
    """
    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.floating):
        raise ValueError(f"y must have a floating dtype, got {y.dtype}")
    check_finite(y, "y")
    check_real(lam, "lam")
    pattern = check_nm(pattern, below_m=True)
    n, m = pattern.n, pattern.m
    check_int(starts, "starts", minimum=0)
    groups = pattern._groups(y, "y").reshape(-1, m).astype(np.float64)
    rng = np.random.default_rng(seed)
    lam = float(lam)
    k = n + 1
    supports = [
        np.isin(np.arange(m), s) for r in range(1, m + 1) for s in itertools.combinations(range(m), r)
    ]
    out = np.empty_like(groups)
    with threadpool_limits(limits=1):
        _search_groups(groups, lam, k, starts, rng, supports, out)
    return out.reshape(y.shape).astype(y.dtype)


def _search_groups(groups, lam, k, starts, rng, supports, out):
    """Fill ``out`` with the best local-search result for every row of ``groups``."""
    m = groups.shape[1]
    every = np.ones(m, dtype=bool)
    for gi, yg in enumerate(groups):
        z = np.abs(yg)
        best_u, best_f = np.zeros(m), 0.5 * z @ z
        inits = [z.copy(), np.zeros(m)] + [rng.uniform(0.0, 1.0, m) * z for _ in range(starts)]
        for x0 in inits:
            u, f = _local_search(z, lam, k, x0, every)
            if f < best_f:
                best_u, best_f = u, f
        for free in supports:
            x0 = np.where(free, z, 0.0)
            u, f = _local_search(z, lam, k, x0, free)
            if f < best_f:
                best_u, best_f = u, f
            u, f = _local_search(z, lam, k, u, every)
            if f < best_f:
                best_u, best_f = u, f
        out[gi] = np.sign(yg) * best_u
