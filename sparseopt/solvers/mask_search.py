"""The optimal-mask problem of exact I-OBS (iobs-wu Alg. 1, option 2, eq. 24).

Given the dense Newton point v = theta - H^{-1} grad f(theta) and a positive definite H, the
exact I-OBS step keeps the support Q (|Q| = k) whose pruned complement S minimizes

    v' H^S v,     H^S = I_S' (I_S H^{-1} I_S')^{-1} I_S,                (iobs-wu eq. 24)

and moves to theta_next = (I - H^{-1} H^S) v (eq. 23). By the Schur-complement identity this
is the best-subset problem of a quadratic:

    v_S' [(H^{-1})_SS]^{-1} v_S = min_{w : w_S = 0} (w - v)' H (w - v)
                                = v'Hv - b_Q' H_QQ^{-1} b_Q,   b = H v,

whose minimizer w (w_Q = H_QQ^{-1} b_Q) is exactly theta_next. The problem is NP-hard in
general; this module solves it exactly, either by enumerating all C(d, k) supports (batched
linear solves) or by a branch-and-bound over supports. No MIQP solver is used: CVXPY's
installed open-source solvers here (Clarabel, SCS, OSQP, HiGHS, SciPy) do not handle
mixed-integer quadratic programs.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any
from itertools import combinations

import numpy as np

from ..linalg import cholesky_pd, symmetrize_in_place
from ..result import Result
from ..validation import check_choice, check_finite, check_int, check_real

__all__ = ["MaskSearchResult", "best_mask", "support_value"]

# Supports enumerated per batched solve (memory ~ chunk * k^2 * 8 bytes).
_ENUM_CHUNK = 4096


@dataclass(repr=False)
class MaskSearchResult(Result):
    """Solution of the optimal-mask problem (iobs-wu eq. 24), a
    :class:`~sparseopt.result.Result`: ``x`` is ``theta``, ``fun`` is ``value``, ``nit`` is
    ``nodes``, ``stop_reason`` is ``"optimal"`` (both searches are exact).

    Attributes
    ----------
    mask : ndarray of bool, shape (d,)
        Kept support Q (``k`` True entries); the pruned set S is its complement.
    theta : ndarray of float64, shape (d,)
        theta_next = (I - H^{-1} H^S) v, the minimizer of (w - v)' H (w - v) over w_S = 0
        (iobs-wu eq. 23).
    value : float
        v' H^S v = (theta - v)' H (theta - v) >= 0, the minimal model increase of eq. 24.
    solver : str
        ``"enumerate"`` or ``"bnb"``.
    nodes : int
        Supports evaluated (enumeration) or branch-and-bound nodes processed.
    time : float
        Seconds spent.
    info : dict
        Solver details (branch-and-bound: initial greedy value, nodes pruned, ...).
    """

    mask: Any = None
    solver: str = ""
    time: float = 0.0

    @property
    def theta(self):
        return self.x

    @property
    def value(self) -> float:
        return self.fun

    @property
    def nodes(self) -> int:
        return self.nit


def _cholesky_lower(H: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of a (principal block of the) numerically positive definite H."""
    cf = cholesky_pd(H)
    if cf is None:
        raise ValueError("H must be positive definite (its Cholesky factorization failed or "
                         "its pivots are round-off sized: numerically singular)")
    return np.tril(cf[0])


def _check_problem(v, H, k):
    v = np.asarray(v)
    H = np.asarray(H)
    if v.ndim != 1:
        raise ValueError(f"v must be a vector, got shape {v.shape}")
    d = v.shape[0]
    if H.shape != (d, d):
        raise ValueError(f"H must have shape ({d}, {d}) to match v, got {H.shape}")
    k = check_int(k, "k", minimum=0, maximum=d)
    check_finite(v, "v")
    check_finite(H, "H")
    v64 = v.astype(np.float64)
    H64 = H.astype(np.float64)
    if not np.allclose(H64, H64.T, rtol=0.0, atol=1e-10 * max(np.max(np.abs(H64), initial=0.0), 1e-300)):
        raise ValueError("H must be symmetric")
    return v64, symmetrize_in_place(H64), int(k)  # H64 is our own copy


def support_value(v, H, mask) -> tuple[np.ndarray, float]:
    """Best point and model increase for one fixed support (iobs-wu eq. 19, 23).

    Parameters
    ----------
    v : array_like, shape (d,)
        Dense Newton point theta+ = theta - H^{-1} grad f(theta).
    H : array_like, shape (d, d)
        Positive definite Hessian.
    mask : array_like of bool, shape (d,)
        Kept support Q.

    Returns
    -------
    theta : ndarray of float64
        argmin_{w : w = 0 off Q} (w - v)' H (w - v), i.e. w_Q = H_QQ^{-1} (H v)_Q.
    value : float
        (theta - v)' H (theta - v), computed from the residual (no cancellation).
    """
    v = np.asarray(v, dtype=np.float64)
    H = np.asarray(H, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != v.shape:
        raise ValueError(f"mask must have shape {v.shape}, got {mask.shape}")
    theta = np.zeros_like(v)
    if mask.any():
        b = H @ v
        L = _cholesky_lower(H[np.ix_(mask, mask)])
        theta[mask] = _chol_solve(L, b[mask])
    e = theta - v
    return theta, float(max(e @ (H @ e), 0.0))


def _chol_solve(L: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    import scipy.linalg

    y = scipy.linalg.solve_triangular(L, rhs, lower=True, check_finite=False)
    return scipy.linalg.solve_triangular(L.T, y, lower=False, check_finite=False)


def best_mask(v, H, k: int, *, method: str = "auto", enumerate_limit: int = 50_000,
              max_nodes: int = 200_000, rtol: float = 1e-10) -> MaskSearchResult:
    """Exact solution of the I-OBS optimal-mask problem (iobs-wu Alg. 1 option 2, eq. 24).

    Parameters
    ----------
    v : array_like, shape (d,)
        Dense Newton point theta+ = theta - H^{-1} grad f(theta).
    H : array_like, shape (d, d)
        Symmetric positive definite Hessian H_t.
    k : int
        Support size to keep, 0 <= k <= d.
    method : {"auto", "enumerate", "bnb"}, keyword-only
        ``"enumerate"`` evaluates all C(d, k) supports; ``"bnb"`` runs branch-and-bound;
        ``"auto"`` enumerates when C(d, k) <= ``enumerate_limit`` and branches otherwise.
    enumerate_limit : int, keyword-only
        Largest number of supports ``"auto"`` enumerates.
    max_nodes : int, keyword-only
        Node budget of branch-and-bound. When it is exhausted before optimality is proved a
        RuntimeError is raised (never an unproven answer).
    rtol : float, keyword-only
        Optimality tolerance of branch-and-bound: a node is discarded when its lower bound is
        within ``rtol * v'Hv`` of the incumbent, so the returned value is optimal up to that
        absolute amount.

    Returns
    -------
    MaskSearchResult

    Notes
    -----
    Write b = H v and F(Q) = v'Hv - b_Q' H_QQ^{-1} b_Q = min_{w_S = 0} (w - v)' H (w - v)
    = v_S' [(H^{-1})_SS]^{-1} v_S (Schur complement), the objective of iobs-wu eq. 24. F is
    non-increasing in Q, which drives the branch-and-bound:

    * a node fixes some indices in, some out; A = all indices not fixed out. F(A) is a lower
      bound for every support of size k inside A;
    * removing one index j from A raises F by the OBS saliency theta_j^2 / [(H_AA)^{-1}]_jj
      (theta = minimizer over A), and any feasible support drops r = |A| - k free indices,
      each of whose single removals is dominated, so F(A) + (r-th smallest free saliency) is a
      valid, tighter bound;
    * branching on the free index of smallest saliency (out first: the OBS choice), with an
      incumbent from greedy backward elimination (OBC, iobs-wu Sec. 3.4) and from each node's
      largest saliencies, best bound first.

    Enumeration solves the smaller of the two equivalent systems: H_QQ (size k) or
    (H^{-1})_SS (size d - k).

    References
    ----------
    Wu et al., "The Iterative Optimal Brain Surgeon", NeurIPS 2024 (iobs-wu), Alg. 1, Lemma 2,
    eq. 23-24; Furnival & Wilson, "Regressions by leaps and bounds", 1974.

    Examples
    --------
    >>> import numpy as np
    >>> r = best_mask(np.array([3.0, 0.1, -2.0]), np.eye(3), 2)
    >>> r.mask, round(r.value, 6)
    (array([ True, False,  True]), 0.01)
    """
    v, H, k = _check_problem(v, H, k)
    check_choice(method, "method", ("auto", "enumerate", "bnb"))
    check_int(enumerate_limit, "enumerate_limit", minimum=1)
    check_int(max_nodes, "max_nodes", minimum=1)
    check_real(rtol, "rtol")
    d = v.shape[0]
    _cholesky_lower(H)  # principal blocks of a positive definite H are no worse conditioned
    if method == "auto":
        method = "enumerate" if math.comb(d, k) <= enumerate_limit else "bnb"
    t0 = time.perf_counter()
    if method == "enumerate":
        mask, nodes, info = _enumerate(v, H, k)
    else:
        mask, nodes, info = _branch_and_bound(v, H, k, max_nodes, rtol)
    theta, value = support_value(v, H, mask)
    return MaskSearchResult(x=theta, fun=value, nit=nodes, stop_reason="optimal", info=info,
                            mask=mask, solver=method, time=time.perf_counter() - t0)


def _enumerate(v, H, k):
    """All C(d, k) supports; value v'Hv - b_Q'H_QQ^{-1}b_Q or v_S'[(H^-1)_SS]^-1 v_S, whichever
    system is smaller. Ties go to the first support enumerated."""
    d = v.shape[0]
    if k == d or k == 0:
        return np.full(d, k == d), 1, {}
    use_kept = k <= d - k
    if use_kept:
        M, rhs, size = H, H @ v, k
    else:
        M, rhs, size = np.linalg.inv(H), v, d - k
        M = 0.5 * (M + M.T)
    best_val, best_set = np.inf, None
    total = 0
    it = combinations(range(d), size)
    while True:
        chunk = np.array(list(_take(it, _ENUM_CHUNK)), dtype=np.intp)
        if chunk.size == 0:
            break
        total += len(chunk)
        Msub = M[chunk[:, :, None], chunk[:, None, :]]
        r = rhs[chunk]
        sol = np.linalg.solve(Msub, r[..., None])[..., 0]
        quad = np.einsum("ij,ij->i", r, sol)
        # kept form: maximize b_Q' H_QQ^-1 b_Q; pruned form: minimize v_S' [(H^-1)_SS]^-1 v_S
        score = -quad if use_kept else quad
        i = int(np.argmin(score))
        if score[i] < best_val:
            best_val, best_set = score[i], chunk[i]
    mask = np.zeros(d, dtype=bool)
    mask[best_set] = True
    if not use_kept:
        mask = ~mask
    return mask, total, {"enumerated": "kept" if use_kept else "pruned"}


def _take(it, n):
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def _relax(H, b, A):
    """Minimizer over indices A of (w-v)'H(w-v) up to a constant: theta_A = H_AA^{-1} b_A, the
    quadratic gain b_A' theta_A and the OBS saliencies theta_j^2 / [(H_AA)^{-1}]_jj."""
    HA = H[np.ix_(A, A)]
    L = _cholesky_lower(HA)
    theta = _chol_solve(L, b[A])
    Linv = np.linalg.inv(L)
    diag_inv = np.einsum("ij,ij->j", Linv, Linv)  # diag of (L L')^{-1} = col norms^2 of L^{-1}
    # lambda_min(H_AA) = 1 / ||L^{-1}||_2^2
    lam_min = 1.0 / np.linalg.norm(Linv, 2) ** 2
    return theta, float(b[A] @ theta), theta**2 / diag_inv, lam_min


def _greedy_backward(H, b, k):
    """OBC-style greedy elimination (iobs-wu Sec. 3.4): drop the smallest-saliency index until k
    remain, with OBC's rank-one downdates of (H_AA)^{-1} (O(d^2) per removal). Returns the kept
    index array and its gain b_Q'H_QQ^{-1}b_Q (recomputed from scratch, not from the downdates)."""
    d = H.shape[0]
    Hinv = np.linalg.inv(H)
    theta = Hinv @ b
    alive = np.ones(d, dtype=bool)
    for _ in range(d - k):
        idx = np.flatnonzero(alive)
        q = idx[np.argmin(theta[idx] ** 2 / np.diag(Hinv)[idx])]
        col = Hinv[:, q].copy()
        theta = theta - theta[q] / col[q] * col
        Hinv = Hinv - np.outer(col, col) / col[q]
        alive[q] = False
        theta[q] = 0.0
    A = np.flatnonzero(alive)
    if len(A) == 0:
        return A, 0.0
    _, gain, _, _ = _relax(H, b, A)
    return A, gain


def _branch_and_bound(v, H, k, max_nodes, rtol):
    d = v.shape[0]
    b = H @ v
    c = float(v @ b)
    if k == 0 or k == d:
        return np.full(d, k == d), 1, {}
    atol = rtol * max(c, 1e-300)
    inc_set, inc_gain = _greedy_backward(H, b, k)
    greedy_value = c - inc_gain
    # F = c - gain; minimizing F <=> maximizing gain. Heap on the lower bound of F.
    counter = 0
    heap = [(-np.inf, counter, np.zeros(d, dtype=bool), np.zeros(d, dtype=bool))]
    nodes = pruned = 0
    while heap:
        bound, _, fixed_in, fixed_out = heapq.heappop(heap)
        if bound >= (c - inc_gain) - atol:
            pruned += 1 + len(heap)  # best-first: every remaining node is dominated too
            heap.clear()
            break
        nodes += 1
        if nodes > max_nodes:
            raise RuntimeError(f"branch-and-bound exceeded max_nodes={max_nodes} before proving "
                               f"optimality (d={d}, k={k}); raise max_nodes")
        A = np.flatnonzero(~fixed_out)
        theta, gain, sal, lam_min = _relax(H, b, A)
        n_in = int(fixed_in.sum())
        if len(A) == k:
            if gain > inc_gain:
                inc_set, inc_gain = A, gain
            continue
        free_pos = np.flatnonzero(~fixed_in[A])  # positions within A of free indices
        r = len(A) - k
        free_sal = sal[free_pos]
        order = np.argsort(free_sal, kind="stable")
        # two lower bounds on F(A \ R) - F(A) = theta_R' [(H_AA^{-1})_RR]^{-1} theta_R, |R| = r:
        # it dominates every single removal in R, and is >= lambda_min(H_AA) ||theta_R||^2
        theta_free_sq = np.sort(theta[free_pos] ** 2)
        node_bound = (c - gain) + max(float(free_sal[order[r - 1]]),
                                      lam_min * float(np.sum(theta_free_sq[:r])))
        if node_bound >= (c - inc_gain) - atol:
            pruned += 1
            continue
        # incumbent from this node: keep fixed-in plus the free indices of largest saliency
        keep = np.sort(np.concatenate([A[fixed_in[A]], A[free_pos[order[r:]]]]))
        _, g_keep, _, _ = _relax(H, b, keep)
        if g_keep > inc_gain:
            inc_set, inc_gain = keep, g_keep
        if n_in == k:  # every free index must go: `keep` was the only support left here
            continue
        # both children lie inside this node, so node_bound bounds them too
        j = A[free_pos[order[0]]]
        out_child = fixed_out.copy()
        out_child[j] = True
        in_child = fixed_in.copy()
        in_child[j] = True
        counter += 1
        heapq.heappush(heap, (node_bound, counter, fixed_in, out_child))
        if n_in + 1 <= k:
            counter += 1
            heapq.heappush(heap, (node_bound, counter, in_child, fixed_out))
    mask = np.zeros(d, dtype=bool)
    mask[inc_set] = True
    return mask, nodes, {"greedy_value": max(greedy_value, 0.0), "pruned": pruned}
