"""The local squared loss of a linear layer, its masked gradient updates, and input checks.

L(W) = Tr((W - W*) H (W - W*)')  (prox24-kubler eq. 1-2), with H = X X' / n the
(d_in x d_in) Hessian of the layer inputs. Its gradient is 2 (W H - W* H) (eq. 18) and
the per-row Hessian is 2H, so the gradient is Lipschitz with constant 2 gamma_max(H).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..backend import namespace, row_blocks, zero
from ..linalg import frob_inner, is_symmetric, lambda_max, sum_in_order, symmetrize_in_place
from ..patterns import NM, TopK
from ..threads import PASS_MIN_ENTRIES, parallel_kernel
from ..validation import check_finite, check_float_array, check_int, check_psd, check_real, \
    check_square, check_bool

__all__ = ["layer_loss", "masked_gd", "gamma_max", "check_layer", "check_hessian", "base_loss"]


def check_hessian(H, d_in: int | None = None, *, name: str = "H"):
    """Validate a layer Hessian and return its symmetric part (H + H') / 2 in float64, in
    H's array library and on its device (``H`` itself when it is float64 and symmetric).

    Raises ValueError (naming ``name``) if ``H`` is not a finite square real matrix, or its
    size differs from ``d_in``. Positive semidefiniteness is checked by
    :func:`sparseopt.validation.check_psd`.
    """
    H = check_square(H, name, d_in)
    xp = namespace(H)
    H64 = xp.astype(H, xp.float64, copy=False)
    if is_symmetric(H64):
        # Already float64 and symmetric (e.g. the adapter's X'X sums): no copy, since an LLM
        # Hessian is up to d_in^2 * 8 bytes. The layer methods never write into H (tested).
        return H64
    # symmetrised in place in an array of our own: the float64 conversion where there was
    # one, else a copy (the caller's H is never touched)
    return symmetrize_in_place(H64 if H64 is not H else xp.asarray(H64, copy=True))


def check_layer(W, H, pattern, *, name: str = "W", psd: bool = True):
    """Validate a layer (W, H, pattern) and return (W, H_sym).

    ``W`` is returned as it came (float32 or float64, NumPy or torch, never converted);
    ``H_sym`` is the float64 symmetric part of ``H`` in the same array library. The PSD test
    uses the precision ``H`` was given in (:func:`sparseopt.validation.psd_tolerance`).
    """
    if not (hasattr(W, "shape") and hasattr(W, "dtype")):
        W = check_float_array(W, name)
    if W.ndim != 2:
        raise ValueError(f"{name} must be a 2-D weight matrix (d_out, d_in), got shape "
                         f"{tuple(W.shape)}")
    check_float_array(W, name)
    if isinstance(pattern, NM):
        if W.shape[1] % pattern.m != 0:
            raise ValueError(f"pattern {pattern} needs d_in divisible by m={pattern.m}, but {name} "
                             f"has d_in = {W.shape[1]}")
    elif not isinstance(pattern, TopK):
        raise ValueError(f"pattern must be an NM or TopK instance, got {pattern!r}")
    if not (hasattr(H, "shape") and hasattr(H, "dtype")):
        H = check_square(H, "H", W.shape[1])
    namespace(W, H)  # one array library for both
    given = H.dtype
    Hs = check_hessian(H, W.shape[1])
    if psd:
        check_psd(Hs, dtype=given)
    return W, Hs


def gamma_max(H) -> float:
    """Largest eigenvalue gamma_max of the symmetric PSD layer Hessian ``H`` (float64):
    :func:`sparseopt.linalg.lambda_max`. The local loss has a 2 gamma_max(H)-Lipschitz
    gradient."""
    return lambda_max(H)


def layer_loss(W, W_star, H) -> float:
    """Local squared loss L(W) = Tr((W - W*) H (W - W*)') in float64 (prox24-kubler eq. 2).

    Parameters
    ----------
    W, W_star : array_like, shape (d_out, d_in)
        Candidate and dense reference weights (any float dtype; promoted to float64).
    H : array_like, shape (d_in, d_in)
        Layer Hessian X X' / n. Only its symmetric part matters.

    Returns
    -------
    float

    Notes
    -----
    Computed as sum((D H) * D) with D = W - W*, one O(d_out d_in^2) product in float64,
    in blocks of rows (no whole-layer float64 temporary).

    Examples
    --------
    >>> import numpy as np
    >>> layer_loss(np.zeros((1, 2)), np.ones((1, 2)), np.eye(2))
    2.0
    """
    if not (hasattr(W, "shape") and hasattr(W, "dtype")):
        W = check_float_array(W, "W")
    if not (hasattr(W_star, "shape") and hasattr(W_star, "dtype")):
        W_star = check_float_array(W_star, "W_star")
    if W.ndim != 2:
        raise ValueError(f"W must be 2-D, got shape {tuple(W.shape)}")
    if W_star.shape != W.shape:
        raise ValueError(f"W_star has shape {tuple(W_star.shape)}, expected {tuple(W.shape)} "
                         "(shape of W)")
    if not (hasattr(H, "shape") and hasattr(H, "dtype")):
        H = check_square(H, "H")
    if tuple(H.shape) != (W.shape[1], W.shape[1]):
        raise ValueError(f"H has shape {tuple(H.shape)}, expected {(W.shape[1], W.shape[1])}")
    namespace(W, W_star, H)  # one array library for all three
    return _trace_quadratic(W, H, W_star)


def _trace_quadratic(A, H, B=None) -> float:
    """Tr(D H D') = sum((D H) * D) in float64 with D = A - B (D = A without B), one block
    of rows at a time (:func:`~sparseopt.backend.row_blocks`): on a 6912-wide LLM layer a
    whole-layer float64 D and D H would be ~140 MB each. Nothing is modified."""
    xp = namespace(A, H)
    H64 = xp.astype(H, xp.float64, copy=False)
    total = 0.0
    for rows in row_blocks(A.shape[0], A.shape[1]):
        D = xp.astype(A[rows, :], xp.float64, copy=True)
        if B is not None:
            D -= xp.astype(B[rows, :], xp.float64, copy=False)
        P = D @ H64
        P *= D
        total += float(xp.sum(P))
    return total


def base_loss(W_star, H) -> float:
    """Tr(W* H W*'): the local loss of pruning everything (rel_loss = loss / base_loss)."""
    return _trace_quadratic(W_star, H)


@parallel_kernel(PASS_MIN_ENTRIES, fastmath={"reassoc"})
def _masked_step_rows(R, GS, W, W_star, mask, c, record):
    """One step of eq. 5 after the product R = W H, in one pass over the rows: r = R - W* H,
    the loss sum float64(r) (W - W*) when ``record`` (else 0), then W <- W - (r m) c with
    m = 1 on the mask, 0 off it, ``c`` = 2 eta in W's dtype. Every difference and product is
    rounded to the dtype as the NumPy expressions of :func:`_masked_step_xp` (its twin)
    round them, so W is the same bits; only the sum is float64, each row in an order the
    compiler may vectorise (``reassoc``), then the rows in order (rows split over the Numba
    threads; the total does not depend on their number). Overwrites nothing but W."""
    zero = W.dtype.type(0)
    one = W.dtype.type(1)
    rows = np.zeros(W.shape[0])
    for i in prange(W.shape[0]):
        row = 0.0
        if record:
            for j in range(W.shape[1]):
                r = R[i, j] - GS[i, j]
                row += np.float64(r) * np.float64(W[i, j] - W_star[i, j])
                W[i, j] = W[i, j] - (r * (one if mask[i, j] else zero)) * c
        else:
            for j in range(W.shape[1]):
                r = R[i, j] - GS[i, j]
                W[i, j] = W[i, j] - (r * (one if mask[i, j] else zero)) * c
        rows[i] = row
    return sum_in_order(rows)


def _masked_step_xp(R, GS, W, W_star, maskd, two_eta, record):
    """:func:`_masked_step_rows` as array expressions (tensors, and its twin): returns the
    loss of W (float64 sum; 0.0 without ``record``) and updates W in place."""
    R -= GS  # = (W - W*) H
    loss = frob_inner(R, W - W_star) if record else 0.0
    R *= maskd  # in place, no temporaries: the same rounding as two_eta * (maskd * R)
    R *= two_eta
    W -= R
    return loss


def _masked_gd(W, W_star, H, mask, steps, step, record=False):
    """Kernel of :func:`masked_gd` on validated input; returns (W, losses).

    Works in the dtype of ``W``. ``losses[k]`` is L at the k-th iterate (k = 0..steps-1),
    read off the gradient product for free: L(W) = sum((W H - W* H) * (W - W*)). For NumPy
    arrays a step is the product and one fused pass (:func:`_masked_step_rows`).
    """
    xp = namespace(W, H)
    dt = W.dtype
    Hd = xp.astype(H, dt, copy=False)
    maskd = xp.astype(mask, dt)
    Wk = W * maskd
    Ws = xp.astype(W_star, dt, copy=False)
    GS = Ws @ Hd  # W* H, fixed (eq. 18)
    two_eta = 2.0 * float(step)  # a Python float: W's dtype rounds R * two_eta (NEP 50)
    losses = np.empty(steps if record else 0)
    fused = (isinstance(Wk, np.ndarray) and isinstance(mask, np.ndarray) and Wk.size > 0
             and steps > 0)
    if fused:
        # rows in memory order for the pass; the product goes to one array reused by every
        # step (a fresh array above glibc's mmap threshold, 32 MiB, is page-faulted in again
        # at every step)
        Wk, Ws, GS, mask = (np.ascontiguousarray(a) for a in (Wk, Ws, GS, mask))
        R = np.empty_like(Wk)
        c = dt.type(two_eta)
    for k in range(steps):
        if fused:
            np.matmul(Wk, Hd, out=R)
            loss = _masked_step_rows(R, GS, Wk, Ws, mask, c, record)
        else:
            loss = _masked_step_xp(Wk @ Hd, GS, Wk, Ws, maskd, two_eta, record)
        if record:
            losses[k] = loss
    return Wk, losses


def masked_gd(W, W_star, H, mask, steps, step=None, *, assume_psd=False):
    """Masked gradient descent on the local loss (prox24-kubler eq. 5).

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Starting weights; entries outside ``mask`` are zeroed first. NumPy array or torch
        tensor (then computed with torch on its device).
    W_star : array, shape (d_out, d_in)
        Dense reference weights (same array library as ``W``).
    H : array, shape (d_in, d_in)
        Layer Hessian (symmetrised, checked PSD).
    mask : bool array, shape (d_out, d_in)
        Frozen support M.
    steps : int
        Number of updates, ``>= 0``.
    step : float, optional
        Step size eta; default 1 / (2 gamma_max(H)), the inverse Lipschitz constant of the
        gradient, which makes L decrease monotonically.
    assume_psd : bool, default False
        Skip the positive-semidefiniteness test of ``H``, as ``sparseopt.prune`` does: only
        for an H that is PSD by construction (the torch adapter's X X' / n sums, for which
        the test cost 3.6 s of the 5-minute demo's +GD steps).

    Returns
    -------
    array
        The updated weights, same dtype, library and device as ``W``, zero outside ``mask``.

    Notes
    -----
    W_M <- W_M - eta 2 M o (W_M H - W* H) (eq. 5). Runs in the dtype of ``W`` (float32 input
    uses float32 products); converges to the masked least-squares optimum, row-wise
    w_S = H_SS^+ H_{S,:} w*. Inputs are not modified. If H = 0 the loss is identically zero
    and W is returned masked, unchanged.
    """
    if not (hasattr(W, "shape") and hasattr(W, "dtype")):
        W = check_float_array(W, "W")
    if W.ndim != 2:
        raise ValueError(f"W must be a 2-D float32 or float64 array, got {tuple(W.shape)} "
                         f"{W.dtype}")
    check_float_array(W, "W")
    if not (hasattr(W_star, "shape") and hasattr(W_star, "dtype")):
        W_star = check_float_array(W_star, "W_star")
    if W_star.shape != W.shape:
        raise ValueError(f"W_star has shape {tuple(W_star.shape)}, expected {tuple(W.shape)} "
                         "(shape of W)")
    check_finite(W_star, "W_star")
    check_bool(assume_psd, "assume_psd")
    _, Hs = check_layer(W, H, TopK(W.shape[1]), psd=not assume_psd)
    if not (hasattr(mask, "shape") and hasattr(mask, "dtype")):
        mask = np.asarray(mask)
    xp = namespace(W, W_star, mask)
    if mask.shape != W.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(W.shape)}")
    if mask.dtype != xp.bool:
        raise ValueError(f"mask must be a boolean array, got dtype {mask.dtype}")
    steps = check_int(steps, "steps", minimum=0)
    if step is None:
        g = gamma_max(Hs)
        if g <= 0:
            return xp.where(mask, W, zero(W))
        step = 1.0 / (2.0 * g)
    else:
        step = check_real(step, "step", positive=True)
    out, _ = _masked_gd(W, W_star, Hs, mask, steps, step)
    return out
