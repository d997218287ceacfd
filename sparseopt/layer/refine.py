"""The masked least-squares optimum of the local loss: "+GD" solved to optimality.

prox24-kubler eq. 5 runs masked gradient steps on L(W) = Tr((W - W*) H (W - W*)') with the
support M frozen; they converge to the minimizer of L over {W : W[~M] = 0}. The rows are
independent problems: with S_i the support of row i, the optimum solves the normal equations

    H_{S_i S_i} w_{S_i} = (H w*_i)_{S_i}      (w*_i: row i of W*),

which :func:`masked_optimum` solves directly, to a tolerance on the masked gradient, by one
of two routes (docs/layer.md, "+GD to the optimum"):

- ``"pcg"``: conjugate gradients on all rows at once, preconditioned by diag(H) on the support
  (Jacobi); one masked product P H per iteration, the cost of one eq.-5 step. ALPS (Meng et
  al. 2024) refines its support the same way. The iterations run in W's dtype, in rounds of
  iterative refinement: each round's residual and loss are computed in float64 (float32
  conjugate gradients alone stall far above a 1e-6 gradient: the systems' condition numbers
  are those of H on the support), its correction with float32 products for float32 weights.
- ``"cholesky"``: one float64 Cholesky factorisation of H_{S_i S_i} per row (rows share
  nothing), then PCG from that point until the tolerance holds (usually no iteration).

The result is returned in W's dtype.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..backend import (as_numpy, from_numpy, kernel, namespace, numpy_dtype, numpy_path,
                       register_kernel, zero)
from ..linalg import frob_inner, small_lapack
from ..patterns import TopK
from ..threads import GROUP_SOLVE_MIN_ENTRIES, one_blas_thread, parallel_kernel
from ..validation import check_bool, check_choice, check_float_array, check_int, check_real
from .loss import check_layer

__all__ = ["masked_optimum", "choose_solver", "PLANNED_PCG_ITERS", "CHOLESKY_FLOP_WEIGHT",
           "SOLVERS"]

#: The solver routes of :func:`masked_optimum` (``solver=``); "auto" picks by
#: :func:`choose_solver`.
SOLVERS = ("auto", "pcg", "cholesky")

#: PCG iterations the cost rule of :func:`choose_solver` plans for: the median of what PCG
#: needed for a 1e-6 gradient on the seven layers of a SmolLM2-135M block from wanda's 2:4
#: masks (52-175, median 71; benchmarks/refine.py --pcg prints them).
PLANNED_PCG_ITERS = 70

#: What a flop of the per-row factorisations costs in flops of a layer-wide product: small
#: LAPACK solves on one BLAS thread run at a fraction of the products' rate. 2.5 was measured
#: with the rows solved one after another; with the rows spread over the cores it is
#: conservative (docs/benchmarks.md, benchmarks/refine.py).
CHOLESKY_FLOP_WEIGHT = 2.5


def choose_solver(d_out: int, d_in: int, support: int) -> str:
    """``"cholesky"`` or ``"pcg"``: the route with the lower estimated cost.

    Per-row Cholesky costs d_out (s^3 / 3 + 3 s^2) flops (the factorisation, two triangular
    solves, gathering H_SS), with s the largest support of a row, weighted by
    :data:`CHOLESKY_FLOP_WEIGHT`; PCG costs 2 d_out d_in^2 flops per iteration (the product
    P H) and plans :data:`PLANNED_PCG_ITERS` iterations. Cholesky is chosen when
    2.5 (s^3 / 3 + 3 s^2) <= 140 d_in^2: at 2:4 (s = d_in / 2) up to d_in = 1326 (every
    SmolLM2-135M layer but the 1536-wide down projection; PCG for LLM layers of 2048 inputs
    and more), and for sparser supports further.
    """
    s = float(support)
    chol = CHOLESKY_FLOP_WEIGHT * (s**3 / 3.0 + 3.0 * s**2)
    pcg = PLANNED_PCG_ITERS * 2.0 * float(d_in) ** 2
    return "cholesky" if chol <= pcg else "pcg"


def masked_optimum(W, W_star, H, mask, *, tol=1e-6, max_iter=None, solver="auto",
                   assume_psd=False):
    """The minimizer of the local loss over the weights on ``mask`` (eq. 5 solved exactly).

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Starting weights (entries outside ``mask`` are zeroed first); NumPy array or torch
        tensor (then computed with torch on its device).
    W_star : array, shape (d_out, d_in)
        Dense reference weights W*.
    H : array, shape (d_in, d_in)
        Layer Hessian (symmetrised; checked PSD unless ``assume_psd``).
    mask : bool array, shape (d_out, d_in)
        The frozen support M.
    tol : float, default 1e-6
        Stop when the masked gradient's Frobenius norm ||M o (W H - W* H)|| is at most
        ``tol`` times ||M o (W* H)||, the masked gradient at W = 0 (a scale of the problem
        that does not depend on the start).
    max_iter : int, optional
        Most PCG iterations (default 4 d_in: conjugate gradients are exact after s <= d_in
        iterations in exact arithmetic; in floating point an ill-conditioned H_SS loses
        conjugacy and needs more, e.g. 114 at d_in = 96 with cond(H) = 1e10).
    solver : {"auto", "pcg", "cholesky"}
        The route (module docstring); "auto": :func:`choose_solver`.
    assume_psd : bool, default False
        Skip the PSD test of ``H`` (as :func:`sparseopt.layer.masked_gd`).

    Returns
    -------
    W : array
        The optimum, in W's dtype, library and device, exactly zero outside ``mask``.
    info : dict
        ``solver`` (the route taken), ``iterations`` (PCG iterations, after the Cholesky
        solve on that route), ``rel_grad`` (the final relative gradient norm, of the float64
        iterate), ``converged`` (``rel_grad <= tol``), ``losses`` (float64 array: the loss
        of the start and after each PCG iteration, or after the Cholesky solve).

    Notes
    -----
    Dead inputs (H_jj = 0, hence a zero row and column of the PSD H) have no effect on the
    loss: their weights keep their starting values on both routes (PCG's preconditioner is
    0 there; Cholesky leaves them out of S). Other singular H_SS: PCG stays on the range of
    H_SS, where the system is consistent (H_SS w = (H w*)_S with H = X X' / n); Cholesky
    factors H_SS + s eps diag(H_SS) (a jitter at rounding level) and PCG then removes
    what the jitter left of the gradient. If the result, rounded to W's dtype, had a higher
    loss than the start, the start is returned (``info["kept_start"]``): the loss never
    increases.
    """
    W = _check_weights(W, W_star, mask)
    check_bool(assume_psd, "assume_psd")
    _, Hs = check_layer(W, H, TopK(W.shape[1]), psd=not assume_psd)
    tol, max_iter, solver = _check_options(tol, max_iter, solver)
    return _masked_optimum(W, W_star, Hs, mask, tol, max_iter, solver)


def _check_weights(W, W_star, mask):
    W = check_float_array(W, "W", ndim=2)
    if not (hasattr(W_star, "shape") and hasattr(W_star, "dtype")):
        raise ValueError(f"W_star must be an array, got {type(W_star).__name__}")
    if tuple(W_star.shape) != tuple(W.shape):
        raise ValueError(f"W_star has shape {tuple(W_star.shape)}, expected {tuple(W.shape)} "
                         "(shape of W)")
    check_float_array(W_star, "W_star")
    if not (hasattr(mask, "shape") and hasattr(mask, "dtype")):
        raise ValueError(f"mask must be a boolean array, got {type(mask).__name__}")
    xp = namespace(W, W_star, mask)
    if tuple(mask.shape) != tuple(W.shape):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(W.shape)}")
    if mask.dtype != xp.bool:
        raise ValueError(f"mask must be a boolean array, got dtype {mask.dtype}")
    return W


def _check_options(tol, max_iter, solver):
    tol = check_real(tol, "tol", positive=True)
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", minimum=0)
    return tol, max_iter, check_choice(solver, "solver", SOLVERS)


def _masked_optimum(W, W_star, H, mask, tol, max_iter, solver):
    """Kernel of :func:`masked_optimum` on validated input (``H``: float64, symmetric).
    CPU tensors are solved as NumPy views (:func:`sparseopt.backend.numpy_path`): they get
    NumPy's result bit for bit, and the result comes back as a tensor."""
    if not isinstance(W, np.ndarray) and numpy_path(W):
        out, info = _masked_optimum(*(as_numpy(a) for a in (W, W_star, H, mask)), tol,
                                    max_iter, solver)
        return from_numpy(out, W), info
    xp = namespace(W, H)
    d_out, d_in = W.shape
    W0 = xp.where(mask, W, zero(W))
    X = xp.astype(W0, xp.float64, copy=True)
    Ws = xp.astype(W_star, xp.float64, copy=False)
    Mf = xp.astype(mask, xp.float64)
    GS = Ws @ H  # W* H, fixed (eq. 18)
    B = GS * Mf  # its masked part: the right-hand sides (H w*_i)_S
    ref = float(xp.linalg.vector_norm(B))
    if solver == "auto":
        support = int(xp.max(xp.sum(xp.astype(mask, xp.int64), axis=1))) if d_out else 0
        solver = choose_solver(d_out, d_in, support)
    if max_iter is None:
        max_iter = 4 * d_in
    Q = X @ H
    start_loss = frob_inner(Q - GS, X - Ws)
    losses = [start_loss]
    if solver == "cholesky" and d_out and d_in:
        X = kernel("masked_row_cholesky", X)(X, B, H, mask)
        Q = X @ H
        losses.append(frob_inner(Q - GS, X - Ws))
    X, Q, its, rel, pcg_losses = _pcg(X, Q, Ws, GS, B, H, Mf, ref, tol, max_iter, xp,
                                      W.dtype)
    losses += pcg_losses
    out = xp.astype(X, W.dtype)
    if out.dtype == xp.float64:
        end_loss = frob_inner(Q - GS, X - Ws)
    else:  # rounded to float32: its own loss
        D = xp.astype(out, xp.float64) - Ws
        end_loss = frob_inner(D @ H, D)
    kept = end_loss > start_loss
    if kept:
        out = W0
    info = {"solver": solver, "iterations": its, "rel_grad": rel, "converged": rel <= tol,
            "kept_start": kept, "losses": np.asarray(losses, dtype=np.float64)}
    return out, info


def _rel(R, ref, xp):
    norm = float(xp.linalg.vector_norm(R))
    if ref > 0:
        return norm / ref
    return 0.0 if norm == 0 else math.inf


#: Each refinement round of :func:`_pcg` asks its inner PCG for this reduction of the
#: residual, in units of the inner dtype's epsilon (float32: 1.2e-3; float64: 2.2e-12,
#: below any useful ``tol``, so float64 runs one round unless rounding leaves the true
#: residual above ``tol``).
INNER_REDUCTION_EPS = 1e4


def _pcg(X, Q, Ws, GS, B, H, Mf, ref, tol, max_iter, xp, inner):
    """Jacobi-preconditioned conjugate gradients on every row of X at once, in rounds of
    iterative refinement: each round takes the true residual R = M o (W* H - X H) (minus
    half the masked gradient) in float64 and solves M o (E H) = R for a correction E by PCG
    in the dtype ``inner`` (W's: float32 products cost half of float64's) until its
    residual falls by :data:`INNER_REDUCTION_EPS` epsilons of ``inner`` or to ``tol``; then
    X += E (float64). Per row alpha = r'z / p'Hp, beta = r_new'z_new / r'z: one product
    P H per iteration. The loss follows the iterates, L(X + E + a P) = L(X + E)
    - 2 a <R, P> + a^2 <P H, P> (rows summed), and is recomputed exactly after each round.
    Starts from X with Q = X H (float64, X updated in place). Returns (X, X H, iterations,
    rel_grad, losses after each iteration)."""
    diag = xp.linalg.diagonal(H)
    live = diag > 0
    dinv = xp.where(live, 1.0 / xp.where(live, diag, xp.ones_like(diag)), xp.zeros_like(diag))
    Hi, Mi, dinv = (xp.astype(a, inner) for a in (H, Mf, dinv))
    eta = INNER_REDUCTION_EPS * float(np.finfo(numpy_dtype(inner)).eps)
    loss = frob_inner(Q - GS, X - Ws)
    R64 = B - Q * Mf
    losses = []
    its = 0
    rel = _rel(R64, ref, xp)
    while rel > tol and its < max_iter:
        R = xp.astype(R64, inner)
        target = max(tol * ref, eta * float(xp.linalg.vector_norm(R64)))
        E = xp.zeros_like(R)
        Z = R * dinv
        P = Z
        rz = xp.sum(R * Z, axis=1)
        while its < max_iter:
            S = P @ Hi
            S *= Mi
            pSp = xp.sum(P * S, axis=1)
            ok = (pSp > 0) & (rz > 0)
            alpha = xp.where(ok, rz / xp.where(ok, pSp, xp.ones_like(pSp)),
                             xp.zeros_like(pSp))
            rp = xp.sum(R * P, axis=1)
            loss = loss + float(xp.sum(xp.astype(alpha * (alpha * pSp - 2.0 * rp),
                                                 xp.float64)))
            E += alpha[:, None] * P
            R -= alpha[:, None] * S
            its += 1
            losses.append(loss)
            if float(xp.linalg.vector_norm(R)) <= target:
                break
            Z = R * dinv
            rz_new = xp.sum(R * Z, axis=1)
            beta = xp.where(rz > 0, rz_new / xp.where(rz > 0, rz, xp.ones_like(rz)),
                            xp.zeros_like(rz))
            P = Z + beta[:, None] * P
            rz = rz_new
        X += xp.astype(E, xp.float64)
        # the true residual, in float64: rounding (and float32) leave it above the inner one
        Q = X @ H
        R64 = B - Q * Mf
        rel = _rel(R64, ref, xp)
        loss = frob_inner(Q - GS, X - Ws)
    return X, Q, its, rel, losses


def row_cholesky_jitter(diag, s):
    """The jitter s eps H_jj added to each diagonal entry of H_SS before its Cholesky
    factorisation (float64 eps): a rounding-level shift, relative to each input's own scale
    (a jitter scaled by max H_jj would swamp the inputs of small scale), that lets a
    singular PSD H_SS factor. ``diag``: the diagonal of H_SS (an array, or a batch of them
    with ``s`` of shape (batch, 1))."""
    return s * float(np.finfo(np.float64).eps) * diag


@njit(cache=True)
def _support_block(H, S, out):
    """out = H[S][:, S] (twin: ``H[np.ix_(S, S)]``, 6x slower at s = 288)."""
    for a in range(S.shape[0]):
        row = S[a]
        for b in range(S.shape[0]):
            out[a, b] = H[row, S[b]]
    return out


@register_kernel("masked_row_cholesky", "numpy")
def _masked_row_cholesky_numpy(X, B, H, mask):
    """Per row i: X[i, S] = solve(H_SS + jitter I, B[i, S]) with S = mask[i] minus the dead
    inputs (H_jj = 0), by :func:`_row_cholesky_solves`: the rows spread over Numba's threads,
    each factored by LAPACK potrf with BLAS on one thread (small systems run faster so, and
    the bits depend on neither thread count). X (float64) is updated in place and returned;
    X outside S is untouched. ValueError naming the first row whose H_SS + jitter I has no
    Cholesky factor (H not PSD)."""
    support = mask & (np.diag(H) > 0)[None, :]
    failed = np.zeros(X.shape[0], dtype=np.bool_)
    with one_blas_thread():
        _row_cholesky_solves(X, B, np.ascontiguousarray(H), support, failed)
    if failed.any():
        raise ValueError(f"H restricted to the support of row {int(np.argmax(failed))} has no "
                         "Cholesky factor: H is not positive semidefinite")
    return X


@parallel_kernel(GROUP_SOLVE_MIN_ENTRIES)
def _row_cholesky_solves(X, B, H, support, failed):
    """The rows of :func:`_masked_row_cholesky_numpy`: per row, H_SS gathered and the jitter
    of :func:`row_cholesky_jitter` added, then :func:`_cholesky_solve`; ``failed[i]`` set
    (and row i of X left as it was) where H_SS has no factor. Rows share nothing: the bits
    do not depend on the threads. NumPy twin: :func:`_masked_row_cholesky_lapack` (potrf /
    potrs through SciPy), equal to rounding."""
    eps = np.finfo(np.float64).eps
    for i in prange(X.shape[0]):
        S = np.flatnonzero(support[i])
        s = S.size
        if s == 0:
            continue
        G = _support_block(H, S, np.empty((s, s)))
        b = np.empty(s)
        for a in range(s):
            G[a, a] += s * eps * G[a, a]  # row_cholesky_jitter
            b[a] = B[i, S[a]]
        failed[i] = not _cholesky_solve(G, b)
        if not failed[i]:
            for a in range(s):
                X[i, S[a]] = b[a]
    return X


@njit(cache=True)
def _cholesky_solve(G, b):
    """b <- G^{-1} b for a symmetric G (C order): L = cholesky(G) (LAPACK potrf), then L y = b
    and L' x = y by substitution along the rows of L (contiguous). False, b untouched, when
    G has no Cholesky factor. (Its own function: a prange loop whose body can raise does not
    run in parallel, and an exception raised in a parallel loop can be lost.)"""
    try:
        L = np.linalg.cholesky(G)
    except Exception:  # np.linalg.LinAlgError: not positive definite
        return False
    s = b.size
    y = np.empty(s)
    for a in range(s):  # L y = b
        acc = b[a]
        for c in range(a):
            acc -= L[a, c] * y[c]
        y[a] = acc / L[a, a]
    for a in range(s - 1, -1, -1):  # L' x = y: column a of L' is row a of L
        y[a] /= L[a, a]
        for c in range(a):
            y[c] -= L[a, c] * y[a]
    b[:] = y
    return True


def _masked_row_cholesky_lapack(X, B, H, mask):
    """NumPy twin of :func:`_masked_row_cholesky_numpy`: one row after another, LAPACK potrf /
    potrs through SciPy on one BLAS thread; ValueError naming the first row whose
    H_SS + jitter I has no Cholesky factor."""
    from scipy.linalg import lapack

    alive = np.diag(H) > 0
    support = mask & alive[None, :]
    H = np.ascontiguousarray(H)
    with small_lapack(0):
        for i in range(X.shape[0]):
            S = np.flatnonzero(support[i])
            if S.size == 0:
                continue
            G = _support_block(H, S, np.empty((S.size, S.size)))
            G[np.diag_indices(S.size)] += row_cholesky_jitter(np.diag(G), S.size)
            # symmetric: its C order is the Fortran order LAPACK wants (factored in place)
            c, info = lapack.dpotrf(G.T, lower=1, clean=0, overwrite_a=1)
            if info != 0:
                raise ValueError(f"H restricted to the support of row {i} has no Cholesky "
                                 f"factor (pivot {info}): H is not positive semidefinite")
            x, info = lapack.dpotrs(c, B[i, S], lower=1)
            X[i, S] = x
    return X
