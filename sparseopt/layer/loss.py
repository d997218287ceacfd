"""The local squared loss of a linear layer, its masked gradient updates, and input checks.

L(W) = Tr((W - W*) H (W - W*)')  (prox24-kubler eq. 1-2), with H = X X' / n the
(d_in x d_in) Hessian of the layer inputs. Its gradient is 2 (W H - W* H) (eq. 18) and
the per-row Hessian is 2H, so the gradient is Lipschitz with constant 2 gamma_max(H).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..patterns import NM, TopK, check_finite

__all__ = [
    "layer_loss",
    "masked_gd",
    "gamma_max",
    "check_layer",
    "check_hessian",
    "check_psd",
]

# Above this size gamma_max uses Lanczos (eigsh) instead of a dense LAPACK solve.
_DENSE_EIG_MAX = 1024


def check_hessian(H, d_in: int | None = None, *, name: str = "H") -> np.ndarray:
    """Validate a layer Hessian and return its symmetric part (H + H') / 2 in float64.

    Raises ValueError (naming ``name``) if ``H`` is not a finite square real matrix, or its
    size differs from ``d_in``. Positive semidefiniteness is checked by :func:`check_psd`.
    """
    H = np.asarray(H)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"{name} must be a square 2-D array, got shape {H.shape}")
    if d_in is not None and H.shape[0] != d_in:
        raise ValueError(f"{name} has shape {H.shape}, expected ({d_in}, {d_in}) to match W")
    if not (np.issubdtype(H.dtype, np.floating) or np.issubdtype(H.dtype, np.integer)):
        raise ValueError(f"{name} must be a real numeric array, got dtype {H.dtype}")
    check_finite(H, name)
    H = H.astype(np.float64)  # a new array: the caller's H is never touched
    return 0.5 * (H + H.T)


def psd_shift(H: np.ndarray) -> float:
    """Tolerance for the PSD test: rounding of a Cholesky factorisation is ~ d eps ||H||."""
    d = H.shape[0]
    scale = float(np.max(np.abs(np.diag(H)))) if d else 0.0
    return max(10.0 * d * np.finfo(np.float64).eps, 1e-10) * max(scale, np.finfo(np.float64).tiny)


def check_psd(H: np.ndarray, *, name: str = "H") -> None:
    """Raise ValueError unless the symmetric ``H`` is positive semidefinite up to rounding.

    Notes
    -----
    ``H`` is accepted when a Cholesky factorisation of H + s I succeeds, where
    s = max(10 d eps, 1e-10) max_j |H_jj|; i.e. gamma_min(H) >= -s up to rounding. This is
    one O(d^3 / 3) factorisation, cheaper than an eigen-decomposition.
    """
    d = H.shape[0]
    if d == 0:
        return
    diag = np.diag(H)
    if np.any(diag < 0):
        j = int(np.argmin(diag))
        raise ValueError(
            f"{name} is not positive semidefinite: diagonal entry "
            f"{name}[{j},{j}] = {diag[j]:.3g} < 0"
        )
    s = psd_shift(H)
    try:
        np.linalg.cholesky(H + s * np.eye(d))
    except np.linalg.LinAlgError:
        raise ValueError(
            f"{name} is not positive semidefinite (Cholesky of {name} + {s:.1e} I failed); "
            f"a layer Hessian is X X' / n"
        ) from None


def check_layer(W, H, pattern, *, name: str = "W", psd: bool = True):
    """Validate a layer (W, H, pattern) and return (W, H_sym).

    ``W`` is returned as an ndarray of its own dtype (float32 or float64, never converted);
    ``H_sym`` is the float64 symmetric part of ``H``.
    """
    W = np.asarray(W)
    if W.ndim != 2:
        raise ValueError(f"{name} must be a 2-D weight matrix (d_out, d_in), got shape {W.shape}")
    if W.dtype not in (np.float32, np.float64):
        raise ValueError(f"{name} must be float32 or float64, got dtype {W.dtype}")
    check_finite(W, name)
    if isinstance(pattern, NM):
        if W.shape[1] % pattern.m != 0:
            raise ValueError(
                f"pattern {pattern} needs d_in divisible by m={pattern.m}, but {name} has "
                f"d_in = {W.shape[1]}"
            )
    elif not isinstance(pattern, TopK):
        raise ValueError(f"pattern must be an NM or TopK instance, got {pattern!r}")
    Hs = check_hessian(H, W.shape[1])
    if psd:
        check_psd(Hs)
    return W, Hs


def gamma_max(H: np.ndarray) -> float:
    """Largest eigenvalue of the symmetric PSD matrix ``H`` (float64).

    Dense LAPACK (``eigh`` with ``subset_by_index``) up to d = 1024, Lanczos (``eigsh``)
    beyond, where a full tridiagonalisation would dominate the cost.
    """
    H = np.asarray(H, dtype=np.float64)
    d = H.shape[0]
    if d == 0:
        return 0.0
    if d <= _DENSE_EIG_MAX:
        return float(scipy.linalg.eigh(H, eigvals_only=True, subset_by_index=[d - 1, d - 1])[0])
    from scipy.sparse.linalg import eigsh  # only for large layers; keeps `import sparseopt` light

    v0 = np.ones(d) / np.sqrt(d)  # fixed start: deterministic
    val = eigsh(H, k=1, which="LA", tol=1e-10, v0=v0, return_eigenvectors=False)
    return float(val[0])


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
    Computed as sum((D H) * D) with D = W - W*, one O(d_out d_in^2) product in float64.

    Examples
    --------
    >>> import numpy as np
    >>> layer_loss(np.zeros((1, 2)), np.ones((1, 2)), np.eye(2))
    2.0
    """
    W = np.asarray(W)
    W_star = np.asarray(W_star)
    if W.ndim != 2:
        raise ValueError(f"W must be 2-D, got shape {W.shape}")
    if W_star.shape != W.shape:
        raise ValueError(f"W_star has shape {W_star.shape}, expected {W.shape} (shape of W)")
    H = np.asarray(H, dtype=np.float64)
    if H.shape != (W.shape[1], W.shape[1]):
        raise ValueError(f"H has shape {H.shape}, expected {(W.shape[1], W.shape[1])}")
    D = W.astype(np.float64) - W_star.astype(np.float64)
    return float(np.sum((D @ H) * D))


def _masked_gd(W, W_star, H, mask, steps, step, record=False):
    """Kernel of :func:`masked_gd` on validated input; returns (W, losses).

    Works in the dtype of ``W``. ``losses[k]`` is L at the k-th iterate (k = 0..steps-1),
    read off the gradient product for free: L(W) = sum((W H - W* H) * (W - W*)).
    """
    dt = W.dtype
    Hd = H.astype(dt, copy=False)
    maskd = mask.astype(dt)
    Wk = W * maskd
    Ws = W_star.astype(dt, copy=False)
    GS = Ws @ Hd  # W* H, fixed (eq. 18)
    two_eta = dt.type(2.0 * step)
    losses = np.empty(steps if record else 0)
    for k in range(steps):
        R = Wk @ Hd - GS  # = (W - W*) H
        if record:  # float64 accumulation without float64 temporaries
            losses[k] = float(np.einsum("ij,ij->i", R, Wk - Ws, dtype=np.float64).sum())
        Wk -= two_eta * (maskd * R)
    return Wk, losses


def masked_gd(W, W_star, H, mask, steps, step=None) -> np.ndarray:
    """Masked gradient descent on the local loss (prox24-kubler eq. 5).

    Parameters
    ----------
    W : ndarray, shape (d_out, d_in), float32 or float64
        Starting weights; entries outside ``mask`` are zeroed first.
    W_star : array_like, shape (d_out, d_in)
        Dense reference weights.
    H : array_like, shape (d_in, d_in)
        Layer Hessian (symmetrised, checked PSD).
    mask : array_like of bool, shape (d_out, d_in)
        Frozen support M.
    steps : int
        Number of updates, ``>= 0``.
    step : float, optional
        Step size eta; default 1 / (2 gamma_max(H)), the inverse Lipschitz constant of the
        gradient, which makes L decrease monotonically.

    Returns
    -------
    ndarray
        The updated weights, same dtype as ``W``, zero outside ``mask``.

    Notes
    -----
    W_M <- W_M - eta 2 M o (W_M H - W* H) (eq. 5). Runs in the dtype of ``W`` (float32 input
    uses float32 products); converges to the masked least-squares optimum, row-wise
    w_S = H_SS^+ H_{S,:} w*. Inputs are not modified. If H = 0 the loss is identically zero
    and W is returned masked, unchanged.
    """
    W = np.asarray(W)
    if W.ndim != 2 or W.dtype not in (np.float32, np.float64):
        raise ValueError(f"W must be a 2-D float32 or float64 array, got {W.shape} {W.dtype}")
    W_star = np.asarray(W_star)
    if W_star.shape != W.shape:
        raise ValueError(f"W_star has shape {W_star.shape}, expected {W.shape} (shape of W)")
    check_finite(W, "W")
    check_finite(W_star, "W_star")
    Hs = check_hessian(H, W.shape[1])
    check_psd(Hs)
    mask = np.asarray(mask)
    if mask.shape != W.shape:
        raise ValueError(f"mask has shape {mask.shape}, expected {W.shape}")
    if mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array, got dtype {mask.dtype}")
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    if step is None:
        g = gamma_max(Hs)
        if g <= 0:
            return np.where(mask, W, np.zeros((), W.dtype))
        step = 1.0 / (2.0 * g)
    elif not np.isfinite(step) or step <= 0:
        raise ValueError(f"step must be a positive finite number, got {step!r}")
    out, _ = _masked_gd(W, W_star, Hs, mask, int(steps), float(step))
    return out
