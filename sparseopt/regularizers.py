"""The N:M regularizer r_{N:M} and its prox objective.

r_{N:M}(w) = sum over subsets S of [M] with |S| = N + 1 of prod_{j in S} |w_j|
(prox24-kubler eq. 6). It is the elementary symmetric polynomial e_{N+1}(|w|), zero
exactly when the group has at most N nonzeros (Fact 2); r_{0:M} is the l1 norm and
r_{1:M}(w) = ((sum |w|)^2 - sum w^2) / 2 is quadratic.

The Appendix C regularizers (R0, R1, R2) and l0 / l1 live in ``sparseopt.penalties``.
"""

from __future__ import annotations

import numpy as np

from .patterns import NM

__all__ = ["elementary_symmetric", "r_nm", "r_nm_groups", "r_nm_grad", "prox_objective"]


def elementary_symmetric(a: np.ndarray, k: int) -> np.ndarray:
    """e_k of the entries of ``a`` along the last axis, by the O(m k) recursion
    e_j(a_1..a_i) = e_j(a_1..a_{i-1}) + a_i e_{j-1}(a_1..a_{i-1})."""
    a = np.asarray(a)
    e = np.zeros((k + 1,) + a.shape[:-1], dtype=np.result_type(a.dtype, np.float64))
    e[0] = 1.0
    for i in range(a.shape[-1]):
        ai = a[..., i]
        for j in range(min(k, i + 1), 0, -1):
            e[j] = e[j] + ai * e[j - 1]
    return e[k]


def r_nm_groups(w, n: int = 2, m: int = 4) -> np.ndarray:
    """r_{N:M} of every group of ``m`` consecutive entries along the last axis.

    Returns an array of shape ``w.shape[:-1] + (w.shape[-1] // m,)`` in float64.
    """
    pattern = NM(n, m)
    if n >= m:
        raise ValueError(f"n must satisfy 0 <= n < m for r_{{N:M}}, got n={n}, m={m}")
    g = pattern._groups(np.asarray(w), "w")
    return elementary_symmetric(np.abs(g), n + 1)


def r_nm(w, n: int = 2, m: int = 4) -> float:
    """Total r_{N:M}(w): the sum of ``r_nm_groups`` over all groups (prox24-kubler eq. 8)."""
    return float(np.sum(r_nm_groups(w, n, m)))


def r_nm_grad(w, n: int = 2, m: int = 4) -> np.ndarray:
    """Gradient of r_{N:M} on the active set {w_i != 0}.

    d r / d w_i = sign(w_i) e_N(|w_j| : j != i in the group of i). Off the active set
    r is not differentiable; there the returned entry is 0 (the minimum-norm element
    of the Clarke subdifferential when e_N of the others is finite).
    """
    w = np.asarray(w)
    pattern = NM(n, m)
    if n >= m:
        raise ValueError(f"n must satisfy 0 <= n < m for r_{{N:M}}, got n={n}, m={m}")
    g = np.abs(pattern._groups(w, "w")).astype(np.float64)
    out = np.empty(g.shape, dtype=np.float64)
    for i in range(m):
        others = np.delete(g, i, axis=-1)
        out[..., i] = elementary_symmetric(others, n) if n > 0 else 1.0
    grad = np.sign(w).astype(np.float64) * out.reshape(w.shape)
    return grad.astype(np.result_type(w.dtype, np.float32), copy=False)


def prox_objective(w, y, lam, n: int = 2, m: int = 4) -> np.ndarray:
    """Per-group prox objective 0.5 ||w - y||^2 + lam r_{N:M}(w), in float64.

    Returns shape ``y.shape[:-1] + (y.shape[-1] // m,)``.
    """
    w = np.asarray(w, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if w.shape != y.shape:
        raise ValueError(f"w has shape {w.shape}, y has shape {y.shape}; they must match")
    d = NM(n, m)._groups(w - y, "w - y")
    return 0.5 * np.sum(d * d, axis=-1) + lam * r_nm_groups(w, n, m)
