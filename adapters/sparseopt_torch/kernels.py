"""The torch kernels of sparseopt: the hot loops of the core for tensors on an accelerator.

The core's layer pruners are written once against the array API (``sparseopt.backend``):
given torch tensors they compute with torch on the tensors' device. Only their hot kernels
differ per backend; this module registers the torch ones, and the core finds it through the
``sparseopt.kernels`` entry point (``pyproject.toml``; the core never imports the adapter):

* ``"prox_nm"``: :func:`prox24`, the exact 2:4 prox of ``lam * r_{2:4}`` over all groups of
  4 by the core's own EnumALM kernel: compiled for the GPU by numba-cuda for CUDA tensors
  (``sparseopt.prox.cuda24``), else on a host copy (``sparseopt.prox.alm``).
* ``"sparsegpt_sweep"``: :func:`sparsegpt_sweep`, the OBS sweep inside one block of
  SparseGPT (twins ``sparseopt.layer.sparsegpt._sweep_block`` and ``_sweep_block_numpy``).
* ``"inverse_hessian_factor"``, ``"cholesky_ok"``: the damped Cholesky of SparseGPT and the
  PSD test with ``torch.linalg`` on the device (``sparseopt.linalg``).
* ``"masked_row_cholesky"``: :func:`masked_row_cholesky`, the per-row Cholesky solves of
  ``sparseopt.layer.masked_optimum`` ("+GD" to the optimum), batched over rows.
* ``"synchronize"``: waits for queued CUDA work (timings).

CPU tensors use the Numba kernels on NumPy views; inside
``sparseopt.backend.device_kernels()`` they take these torch kernels instead, which is how
the tests check them against the core without a GPU (tests/adapter/test_kernels.py).

The 2:4 prox is not written again in torch: a batched torch version of EnumALM (one tensor
per coordinate, a convergence mask over the groups) is launch-bound on a GPU (every ALM
sweep dozens of kernels, as many sweeps as the slowest group needs), far slower than the
core's kernel compiled for the GPU (docs/benchmarks.md).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from sparseopt.backend import register_kernel
from sparseopt.linalg import damping_shift
from sparseopt.prox.alm import DEFAULT_MAX_ITER, default_tol, enum_alm_rows
from sparseopt.validation import check_choice, check_float_array, check_int, check_real

__all__ = ["prox24", "sparsegpt_sweep", "masked_row_cholesky"]


# --------------------------------------------------------------------------------------
# 2:4 EnumALM: the core's kernel on the GPU (numba-cuda) or on a host copy
# --------------------------------------------------------------------------------------


def _host_kernel(rows, lam, tol, max_iter):
    """The core's 2:4 EnumALM kernel (``sparseopt.prox.alm.enum_alm_rows``) on a host copy of
    the groups ``rows`` (G, 4) (a view for a contiguous CPU tensor); (w, sweeps, maxed) come
    back on the rows' device, w in their dtype (the kernel computes in float64 and rounds a
    float32 result once)."""
    w, sweeps, maxed = enum_alm_rows(np.ascontiguousarray(rows.cpu().numpy()), lam, 2, tol,
                                   max_iter)
    dev = rows.device
    return (torch.from_numpy(w).to(dev), torch.from_numpy(sweeps).to(dev),
            torch.from_numpy(maxed).to(dev))


def _cuda_kernel(rows, lam, tol, max_iter):
    """The core's 2:4 kernel compiled for the GPU (``sparseopt.prox.cuda24``: one thread per
    group running the CPU kernel's per-group code) on the CUDA rows (G, 4); (w in their
    dtype, sweeps, maxed) on their device."""
    from numba import cuda

    from sparseopt.prox import cuda24

    rows = rows.contiguous()
    G = rows.shape[0]
    out = torch.empty_like(rows)
    sweeps = torch.empty(G, dtype=torch.int64, device=rows.device)
    maxed = torch.empty(G, dtype=torch.bool, device=rows.device)
    with cuda.gpus[rows.device.index or 0]:
        bad = cuda24.prox24_cuda(rows, lam, tol, max_iter, out, sweeps, maxed,
                                 stream=torch.cuda.current_stream(rows.device).cuda_stream)
    if bad:  # prox24 has refused NaN and Inf already: this is a kernel fault
        raise RuntimeError(f"prox24: the CUDA kernel saw {bad} non-finite groups in a finite Y")
    return out, sweeps, maxed


#: ``prox24``'s kernels: "cuda", the core's kernel compiled by numba-cuda (CUDA tensors);
#: "host", the core's kernel on a host copy (any device); "auto" chooses.
KERNELS = ("auto", "cuda", "host")


def prox24(Y, lam, *, tol=None, max_iter=None, kernel="auto", return_info=False):
    """Prox of ``lam * r_{2:4}`` on every group of 4 consecutive entries along the last dim.

    Parameters
    ----------
    Y : torch.Tensor, float32 or float64
        Input of any shape whose last dim is a multiple of 4, on any device. Not modified
        (gradients are not tracked through the prox).
    lam : float
        Regularization weight, finite and >= 0 (a Python number or a one-element tensor).
    tol : float, optional, keyword-only
        Relative sweep tolerance: a candidate's ALM stops when a sweep moves no coordinate
        by more than ``tol * max|y_group|``. Default as the core: 1e-12 for float64 input,
        1e-8 for float32.
    max_iter : int, optional, keyword-only
        Sweeps per candidate (default 10000); a ``RuntimeWarning`` reports groups that
        reached it.
    kernel : {"auto", "cuda", "host"}, keyword-only
        ``"cuda"``: the core's 2:4 kernel compiled for the GPU by numba-cuda
        (``sparseopt.prox.cuda24``: one thread per group, one launch), for CUDA tensors;
        it needs the ``numba-cuda`` package. ``"host"``: the core's Numba kernel on a host
        copy of Y (none for a CPU tensor), the result copied back to Y's device.
        ``"auto"`` (default): ``"cuda"`` for a CUDA tensor where
        ``sparseopt.prox.cuda24.available()``, else ``"host"``.
    return_info : bool, keyword-only
        Also return ``{"n_iter": sweeps per group, "max_iter_reached": bool per group}``
        (tensors on Y's device, shape ``Y.shape[:-1] + (Y.shape[-1] // 4,)``).

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``Y``.

    Raises
    ------
    ValueError
        ``Y`` not a float32/float64 tensor, NaN/Inf in ``Y``, last dim not divisible by 4,
        ``lam`` negative or not finite, ``tol <= 0``, ``max_iter < 1``, ``kernel`` not one
        of :data:`KERNELS`, ``kernel="cuda"`` for a tensor not on a CUDA device or without
        a usable numba-cuda.

    Notes
    -----
    Both kernels run the core's 2:4 EnumALM (``sparseopt.prox.alm``): Lemma 3 of
    prox24-kubler (sort |y| descending; signs and order restored at the end), then the
    candidates of Alg. 1 / eq. 11-14 by support size -- the 2-sparse candidate
    (z_1, z_2, 0, 0) exactly, the 3-sparse and the dense candidate by ALM (proxsparse-liu
    Alg. 2, coordinate updates by soft-thresholding, Fact 5) with the core's exact pruning
    and safeguarded face-Newton steps -- and the candidate with the least objective
    0.5 ||w - y||^2 + lam r_{2:4}(w) (eq. 7) wins, ties going to the sparser one. The
    arithmetic is float64 whatever the input dtype; a float32 result is rounded once. On
    the GPU the results equal the CPU kernel's up to rounding (fused multiply-adds); the
    host kernel's are the core's bit for bit.

    Examples
    --------
    >>> import torch
    >>> prox24(torch.tensor([3.0, -0.1, 2.0, 0.2], dtype=torch.float64), 5.0)
    tensor([3., 0., 2., 0.], dtype=torch.float64)
    """
    if not isinstance(Y, torch.Tensor):
        raise ValueError(f"Y must be a torch.Tensor, got {type(Y).__name__}")
    check_float_array(Y, "Y")
    if Y.ndim == 0:
        raise ValueError("Y must have at least one dim")
    if Y.shape[-1] % 4 != 0:
        raise ValueError(f"last dim of Y has length {Y.shape[-1]}, not divisible by 4")
    lam = check_real(lam, "lam")
    if tol is None:
        tol = default_tol({torch.float32: "float32", torch.float64: "float64"}[Y.dtype])
    else:
        tol = check_real(tol, "tol", positive=True)
    max_iter = DEFAULT_MAX_ITER if max_iter is None else check_int(max_iter, "max_iter",
                                                                   minimum=1)
    check_choice(kernel, "kernel", KERNELS)
    if kernel == "cuda" and Y.device.type != "cuda":
        raise ValueError(f"kernel='cuda' needs a CUDA tensor, Y is on {Y.device}")
    if kernel != "host" and Y.device.type == "cuda":
        from sparseopt.prox import cuda24

        if cuda24.available():
            kernel = "cuda"
        elif kernel == "cuda":
            raise ValueError("kernel='cuda' needs the numba-cuda package and a CUDA driver "
                             "that numba sees (pip install numba-cuda)")
    kernel = "cuda" if kernel == "cuda" else "host"
    Y = Y.detach()
    gshape = Y.shape[:-1] + (Y.shape[-1] // 4,)
    if Y.numel() == 0 or lam == 0.0:
        out = Y.clone()  # lam = 0: the prox of the zero function is the identity
        sweeps = torch.zeros(gshape, dtype=torch.int64, device=Y.device)
        maxed = torch.zeros(gshape, dtype=torch.bool, device=Y.device)
    else:
        with torch.no_grad():
            kernel_fn = _cuda_kernel if kernel == "cuda" else _host_kernel
            w, sweeps, maxed = kernel_fn(Y.reshape(-1, 4), lam, tol, max_iter)
        out = w.to(Y.dtype).reshape(Y.shape)
        n_max = int(maxed.sum())
        if n_max:
            warnings.warn(f"prox24: ALM reached max_iter={max_iter} in {n_max} of {maxed.numel()} "
                          f"groups; their candidates are not converged to tol={tol:g}",
                          RuntimeWarning, stacklevel=2)
        sweeps, maxed = sweeps.reshape(gshape), maxed.reshape(gshape)
    if return_info:
        return out, {"n_iter": sweeps, "max_iter_reached": maxed}
    return out


@register_kernel("prox_nm", "torch")
def prox_nm_torch(Y, lam, n=2, m=4, *, method="alm", tol=None, max_iter=None):
    """The ``"prox_nm"`` kernel for tensors: :func:`prox24` (2:4, EnumALM only)."""
    if (n, m) != (2, 4) or method != "alm":
        raise ValueError(f"the torch prox kernel computes the 2:4 prox by EnumALM only; got "
                         f"pattern {n}:{m}, prox_method={method!r} (for other patterns, run "
                         "the pruner on CPU tensors or NumPy arrays)")
    return prox24(Y, lam, tol=tol, max_iter=max_iter)


# --------------------------------------------------------------------------------------
# SparseGPT: the OBS sweep inside one block
# --------------------------------------------------------------------------------------


@register_kernel("sparsegpt_sweep", "torch")
def sparsegpt_sweep(W1, U1, n, m, keep1, Err1):
    """OBS sweep inside one block of SparseGPT, in place (the torch twin of
    ``sparseopt.layer.sparsegpt._sweep_block``).

    ``W1`` (B, d_out): columns of W as rows (a view, updated in place), ``U1`` (B, B): the
    diagonal block of the upper Cholesky factor of H^{-1}; fills ``keep1`` (B, d_out, bool)
    and ``Err1`` (B, d_out).

    At the first column of each group of m, every row keeps the n entries of largest saliency
    w_j^2 / U_jj^2 (ties to the smaller index: the rank of entry t counts entries with a
    larger score, or an equal one before t); column j then propagates err = (w_j - q_j) /
    U_jj to the later columns of its group, and the group one rank-m product to the rest of
    the block. The summation order differs from the Numba kernel (rank-m instead of rank-1
    updates), so the results agree up to rounding.
    """
    B = W1.shape[0]
    dt, dev = W1.dtype, W1.device
    zero = torch.zeros((), dtype=dt, device=dev)
    diagU = torch.diagonal(U1)
    earlier = torch.tril(torch.ones((m, m), dtype=torch.bool, device=dev), -1)[:, :, None]
    for g in range(0, B, m):
        score = W1[g:g + m] ** 2 / (diagU[g:g + m, None] ** 2)
        beats = (score[None, :, :] > score[:, None, :]) \
            | ((score[None, :, :] == score[:, None, :]) & earlier)
        kg = beats.sum(dim=1) < n
        keep1[g:g + m] = kg
        for t in range(m):
            i = g + t
            Err1[i] = torch.where(kg[t], zero, W1[i] / U1[i, i])
            W1[i] = torch.where(kg[t], W1[i], zero)
            if t < m - 1:
                W1[i + 1:g + m] -= U1[i, i + 1:g + m, None] * Err1[i][None, :]
        if g + m < B:
            W1[g + m:] -= U1[g:g + m, g + m:].T @ Err1[g:g + m]


# --------------------------------------------------------------------------------------
# linear algebra on the device (sparseopt.linalg)
# --------------------------------------------------------------------------------------


@register_kernel("inverse_hessian_factor", "torch")
def inverse_hessian_factor_torch(H, damping, dtype):
    """``sparseopt.linalg.inverse_hessian_factor`` with ``torch.linalg`` on H's device: with
    P the reversal, P H P = L L' gives the upper Cholesky factor U = P L^{-1} P of H^{-1}."""
    H = H.clone()
    d = H.shape[0]
    diag = torch.diagonal(H).clone()
    dead = diag == 0
    diag[dead] = 1.0
    damp = damping_shift(float(diag.mean()), damping) if d else 0.0
    H.diagonal().copy_(diag + damp)
    L, info = torch.linalg.cholesky_ex(H.flip(0, 1).to(dtype))
    if int(info) != 0:
        raise ValueError(f"H + {damp:.3g} I is not positive definite (Cholesky failed at pivot "
                         f"{int(info)}); H is not positive semidefinite, or increase damping "
                         f"(now {damping})")
    eye = torch.eye(d, dtype=dtype, device=H.device)
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)
    return Linv.flip(0, 1).contiguous(), dead, damp


@register_kernel("cholesky_ok", "torch")
def cholesky_ok_torch(H, shift):
    """True when H + shift I (float64) has a Cholesky factor (``sparseopt.linalg.cholesky_ok``)."""
    A = H.to(torch.float64)
    eye = torch.eye(A.shape[0], dtype=torch.float64, device=A.device)
    return int(torch.linalg.cholesky_ex(A + shift * eye).info) == 0


#: Entries of the stacked H_SS blocks of one batch of rows in :func:`masked_row_cholesky`
#: (32 MiB of float64).
ROW_CHOLESKY_ENTRIES = 2**22


@register_kernel("masked_row_cholesky", "torch")
def masked_row_cholesky(X, B, H, mask):
    """``sparseopt.layer.refine``'s per-row Cholesky solve, batched with ``torch.linalg`` on
    the device: per row i, X[i, S] = (H_SS + jitter I)^{-1} B[i, S] with S = mask[i] minus
    the dead inputs (H_jj = 0) and the jitter of ``row_cholesky_jitter``. Rows of unequal
    support are padded to the largest (identity rows and columns, zero right-hand sides,
    never written back). X (float64) is updated in place and returned; ValueError naming
    the row when a factorisation fails (H not PSD). Twin: ``_masked_row_cholesky_numpy``."""
    from sparseopt.layer.refine import row_cholesky_jitter

    support = mask & (torch.diagonal(H) > 0)[None, :]
    counts = support.sum(dim=1)
    s = int(counts.max()) if X.shape[0] else 0
    if s == 0:
        return X
    # each row's support first, in column order (a stable sort of the complement)
    order = torch.argsort((~support).to(torch.int8), dim=1, stable=True)[:, :s]
    valid = torch.arange(s, device=X.device)[None, :] < counts[:, None]
    step = max(1, ROW_CHOLESKY_ENTRIES // (s * s))
    for lo in range(0, X.shape[0], step):
        rows = slice(lo, min(lo + step, X.shape[0]))
        idx, v = order[rows], valid[rows]
        G = H[idx[:, :, None], idx[:, None, :]]
        G = torch.where(v[:, :, None] & v[:, None, :], G, torch.zeros((), dtype=G.dtype,
                                                                     device=G.device))
        gdiag = torch.diagonal(G, dim1=1, dim2=2)
        jitter = row_cholesky_jitter(gdiag, counts[rows, None].to(G.dtype))
        gdiag += torch.where(v, jitter, torch.ones_like(gdiag))
        L, info = torch.linalg.cholesky_ex(G)
        bad = torch.nonzero(info).flatten()
        if bad.numel():
            i = lo + int(bad[0])
            raise ValueError(f"H restricted to the support of row {i} has no Cholesky factor "
                             f"(pivot {int(info[bad[0]])}): H is not positive semidefinite")
        rhs = torch.where(v, B[rows].gather(1, idx), torch.zeros((), dtype=B.dtype,
                                                                 device=B.device))
        x = torch.cholesky_solve(rhs[:, :, None], L)[:, :, 0]
        block = X[rows]  # a view: scatter_ writes into X
        block.scatter_(1, idx, torch.where(v, x, block.gather(1, idx)))
    return X


@register_kernel("synchronize", "torch")
def synchronize_torch(x):
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
