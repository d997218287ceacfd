"""SparseGPT for N:M patterns: the OBS column sweep of Frantar & Alistarh (2023).

Columns (inputs) are processed left to right. Each pruned weight is removed with the
optimal-brain-surgeon update of the not-yet-processed weights of its row, using the
inverse Hessian of the remaining columns; all rows share one sequence of inverse Hessians,
which is read off a single upper Cholesky factor U of H^{-1}.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..backend import ascontiguous, device, namespace, register_kernel, kernel, zero
from ..linalg import inverse_hessian_factor
from ..patterns import NM
from ..validation import check_int
from .registry import register
from .result import PruneResult

__all__ = ["sparsegpt_prune", "inverse_hessian_factor"]


#: Lazy-update block width of the reference implementation.
DEFAULT_BLOCKSIZE = 128


@register_kernel("sparsegpt_sweep", "numpy")
@njit(cache=True)
def _sweep_block(W1, U1, n, m, keep1, Err1):
    """OBS sweep inside one block (in place). W1: (B, d_out) columns of W as rows, U1: the
    (B, B) diagonal block of U. Fills keep1 (B, d_out) and Err1 (B, d_out).

    Saliency w^2 / U_jj^2 per group of m; the n largest are kept, ties to the smaller index
    (the rank of entry t counts entries with a larger score, or an equal one before t).
    Every column then propagates its error to the later columns of the block by a rank-1
    update. Plain loops: no BLAS calls, so no thread start-up per column.
    """
    B, d_out = W1.shape
    s = np.empty(m, dtype=W1.dtype)
    for g in range(0, B, m):
        for r in range(d_out):
            for t in range(m):
                u = U1[g + t, g + t]
                s[t] = W1[g + t, r] ** 2 / u ** 2
            for t in range(m):
                rank = 0
                for v in range(m):
                    if s[v] > s[t] or (s[v] == s[t] and v < t):
                        rank += 1
                keep1[g + t, r] = rank < n
        for t in range(m):
            i = g + t
            d = U1[i, i]
            for r in range(d_out):
                if keep1[i, r]:
                    Err1[i, r] = 0.0
                else:
                    Err1[i, r] = W1[i, r] / d
                    W1[i, r] = 0.0
            for k in range(i + 1, B):
                c = U1[i, k]
                if c != 0.0:
                    for r in range(d_out):
                        W1[k, r] -= c * Err1[i, r]


def _sweep_block_numpy(W1, U1, n, m, keep1, Err1):
    """Plain NumPy twin of :func:`_sweep_block` (same arguments, same in-place effect); the
    rest of the block gets one rank-m update per group instead of m rank-1 updates."""
    B, d_out = W1.shape
    diagU = np.diag(U1)
    for g in range(0, B, m):
        score = W1[g:g + m] ** 2 / (diagU[g:g + m, None] ** 2)
        order = np.argsort(-score, axis=0, kind="stable")[:n]
        kg = np.zeros((m, d_out), dtype=bool)
        np.put_along_axis(kg, order, True, axis=0)
        keep1[g:g + m] = kg
        for t in range(m):
            i = g + t
            Err1[i] = np.where(kg[t], 0, W1[i]) / U1[i, i]
            W1[i] = np.where(kg[t], W1[i], 0)
            if t < m - 1:
                W1[i + 1:g + m] -= U1[i, i + 1:g + m, None] * Err1[i][None, :]
        if g + m < B:
            W1[g + m:] -= U1[g:g + m, g + m:].T @ Err1[g:g + m]


@register("sparsegpt", psd=False, order=30)
def sparsegpt_prune(W, H, pattern, *, damping=0.01, blocksize=None):
    """SparseGPT: the OBS column sweep with lazy block updates (Frantar & Alistarh 2023).

    With the N:M mask selection of its reference code.

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Dense weights W* (validated by the caller). Not modified.
    H : array, shape (d_in, d_in)
        Symmetric Hessian in float64. Only H + damping needs to be positive definite.
    pattern : NM
        N:M pattern along the rows.
    damping : float, default 0.01
        Damping as a fraction of mean(diag(H)) (dead inputs counted as 1).
    blocksize : int, optional
        Columns per lazy batch update; must be a positive multiple of ``pattern.m``.
        Default: 128 (the reference value) rounded down to a multiple of m.

    Returns
    -------
    PruneResult
        ``x``, ``mask`` and ``info`` (``damping``, ``damp``, ``blocksize``, ``n_dead``).

    Notes
    -----
    Algorithm (reference implementation of SparseGPT, N:M mode):

    1. Dead inputs (H_jj = 0): H_jj <- 1 and W[:, j] <- 0. Damping H <- H + delta I with
       delta = damping * mean(diag H).
    2. U <- upper Cholesky factor of H^{-1} (see :func:`inverse_hessian_factor`).
    3. For each group of m columns, when the sweep reaches its first column: keep in every
       row the n entries with the largest w_j^2 / U_jj^2 (the OBS saliency, evaluated on
       the already updated weights); the others are pruned.
    4. For each column j in order: err = (w_j - q_j) / U_jj with q_j the pruned column,
       and W[:, k] -= err U_jk for all k > j (the OBS compensation of the pruned weights).
    5. Lazy batching: step 4 is applied eagerly only inside the current block of
       ``blocksize`` columns; the later columns receive Err_block @ U[block, later] once
       per block (a GEMM).

    Ties in the saliency go to the smaller index. Runs in the dtype of ``W`` (like the
    reference code, which runs in float32). Cost: O(d_in^3) for U, O(d_out d_in^2) for the
    between-block updates (BLAS-3) and O(d_out d_in blocksize) inside the blocks (a Numba
    kernel, ``_sweep_block``; its NumPy twin is ``_sweep_block_numpy``; tensors on an
    accelerator use the torch kernel registered as ``"sparsegpt_sweep"``). Small BLAS calls
    per column are avoided on purpose: on a loaded 2-core machine, thread start-up of many
    tiny threaded GEMMs made the sweep 40x slower.
    """
    if not isinstance(pattern, NM):
        raise ValueError(f"sparsegpt supports NM patterns only, got pattern={pattern!r}")
    n, m = pattern.n, pattern.m
    if blocksize is None:
        blocksize = max(m, DEFAULT_BLOCKSIZE - DEFAULT_BLOCKSIZE % m)
    if check_int(blocksize, "blocksize", minimum=1) % m:
        raise ValueError(f"blocksize must be a positive multiple of m={m}, got {blocksize!r}")
    xp = namespace(W)
    dt = W.dtype
    d_out, d_in = W.shape
    U, dead, damp = inverse_hessian_factor(H, damping=damping, dtype=dt)
    Wt = ascontiguous(xp.asarray(W.T, copy=True))  # row j of Wt = column j of W, contiguous
    Wt[dead, :] = 0
    keep = xp.zeros((d_in, d_out), dtype=xp.bool, device=device(W))
    sweep = kernel("sparsegpt_sweep", W)
    for i1 in range(0, d_in, blocksize):
        i2 = min(i1 + blocksize, d_in)
        U1 = ascontiguous(U[i1:i2, i1:i2])
        Err1 = xp.zeros((i2 - i1, d_out), dtype=dt, device=device(W))
        # Wt[i1:i2] is a C-contiguous view: the kernel updates it in place
        sweep(Wt[i1:i2, :], U1, n, m, keep[i1:i2, :], Err1)
        if i2 < d_in:
            Wt[i2:, :] -= U[i1:i2, i2:].T @ Err1  # lazy batch update (BLAS-3)
    mask = ascontiguous(keep.T)
    W_out = xp.where(mask, Wt.T, zero(W))
    info = {"damping": float(damping), "damp": damp, "blocksize": int(blocksize),
            "n_dead": int(xp.sum(xp.astype(dead, xp.int64)))}
    return PruneResult(x=W_out, mask=mask, info=info)
