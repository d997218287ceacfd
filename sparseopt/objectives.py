"""Smooth objectives f for the sparse solvers.

Every objective knows the shape of its variable and gives its value, gradient, a dense
Hessian and the Lipschitz constant L of its gradient (computed by a symmetric eigen-solver,
cached). The sparse solvers (``sparseopt.solvers``) minimise f over a sparsity pattern, or
f + lam ||w||_0, and only use this interface.

Objectives
----------
- :class:`Quadratic`: 0.5 w'Hw - b'w + c.
- :class:`LeastSquares`: 0.5 ||Xw - y||^2 (no 1/n).
- :class:`LayerLoss`: Tr((W - W*) H (W - W*)') (prox24-kubler eq. 2), a matrix variable.
- :class:`Logistic`: mean logistic loss + l2/2 ||w||^2.
- :class:`Smooth`: any user function with its gradient.

Conventions: value(w) returns a Python float accumulated in float64; grad(w) returns an array
of ``shape`` in the dtype of the objective's data (float32 data stays float32). Inputs are
never modified; the objective keeps references to the arrays it was given (no copies).

:class:`LayerLoss` also takes torch tensors (through the array API, :mod:`sparseopt.backend`):
it then computes with torch on the tensors' device and its gradients are tensors. The other
objectives are NumPy-only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import array_api_compat
import numpy as np
from numba import prange

from .backend import device, is_numpy, namespace, numpy_dtype, row_blocks, zero
from .linalg import (_symmetry_pass, gram_lambda_max, spectral_norm, sum_in_order,
                     symmetrize_in_place)
from .threads import PASS_MIN_ENTRIES, parallel_kernel
from .validation import FLOAT_DTYPES, check_finite, check_out, check_real
from .validation import check_psd as _check_psd

__all__ = ["Objective", "Quadratic", "LeastSquares", "LayerLoss", "Logistic", "Smooth"]



def _as_float_array(a, name: str) -> np.ndarray:
    """float32/float64 arrays pass unchanged; integer/bool data become float64."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        raise ValueError(f"{name} must be real, got dtype {a.dtype}")
    if a.dtype not in (np.float32, np.float64):
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric, got dtype {a.dtype}")
        a = a.astype(np.float64)
    check_finite(a, name)
    return a


def _is_tensor(a) -> bool:
    """True for an array of another array-API library than NumPy (a torch tensor)."""
    return not isinstance(a, np.ndarray) and array_api_compat.is_array_api_obj(a)


def _as_float_tensor(a, name: str):
    """float32/float64 tensors pass unchanged; integer/bool tensors become float64 (as
    :func:`_as_float_array` does for NumPy data)."""
    xp = namespace(a)
    if xp.isdtype(a.dtype, "complex floating"):
        raise ValueError(f"{name} must be real, got dtype {a.dtype}")
    if numpy_dtype(a.dtype).name not in FLOAT_DTYPES:
        if not xp.isdtype(a.dtype, ("bool", "integral", "real floating")):
            raise ValueError(f"{name} must be numeric, got dtype {a.dtype}")
        a = xp.astype(a, xp.float64)
    check_finite(a, name)
    return a


def _check_symmetric(H, name: str) -> None:
    """H must be square and equal to H' up to the rounding of forming it: |H - H'| <=
    max(10 d eps, 1e-10) max|H|, the relative level of
    :func:`sparseopt.validation.psd_tolerance` (eps of H's dtype). H is finite (checked
    before). For NumPy arrays both maxima come from one tiled Numba pass
    (:func:`sparseopt.linalg._symmetry_pass`, which reads H by tiles instead of H' by
    columns); its twin, used for tensors, reads them by blocks of rows."""
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {tuple(H.shape)}")
    d = H.shape[0]
    if d == 0:
        return
    eps = float(np.finfo(np.float32 if numpy_dtype(H.dtype) == np.float32 else np.float64).eps)
    if isinstance(H, np.ndarray) and H.dtype in (np.float32, np.float64):
        _, largest, asym = _symmetry_pass(H, True)
    else:
        largest, asym = _symmetry_maxima_xp(H)
    if asym > max(10.0 * d * eps, 1e-10) * max(largest, 1e-300):
        raise ValueError(f"{name} must be symmetric")


def _symmetry_maxima_xp(H):
    """(max|H|, max|H - H'|) by blocks of rows against the matching columns, with the array
    library's operators: the twin of :func:`sparseopt.linalg._symmetry_pass` (no d x d
    temporaries: two 64 MiB arrays for d = 4096 in float32 took 0.46 s, about a product of
    W and H)."""
    xp = namespace(H)
    largest = asym = 0.0
    for rows in row_blocks(H.shape[0], H.shape[0]):
        largest = max(largest, float(xp.max(xp.abs(H[rows, :]))))
        asym = max(asym, float(xp.max(xp.abs(H[rows, :] - H[:, rows].T))))
    return largest, asym


def _loss_and_gradient(DX, D, G):
    """The value and gradient of :class:`LayerLoss` in one pass over D = W - W* and
    DX = D H (NumPy; twin :func:`_loss_and_gradient_xp`): G <- 2 DX and
    sum_ij float64(DX_ij) D_ij. G may be DX itself (the doubling in place).
    (:func:`_fused_loss_pass` without the step.)"""
    return _fused_loss_pass(DX, D, G, DX, DX.dtype.type(0), False)


def _loss_and_step(DX, D, Y, step, G):
    """:func:`_loss_and_gradient` with the gradient step of proximal gradient in the same
    pass: G <- Y - step 2 DX (``step`` a Python float, rounded to the dtype first), rounded
    as NumPy rounds ``Y - step * (2 DX)``, i.e. the bits of ``_loss_and_gradient`` followed
    by ``proxgrad._gradient_step``. G may be DX (not Y)."""
    return _fused_loss_pass(DX, D, G, Y, DX.dtype.type(step), True)


@parallel_kernel(PASS_MIN_ENTRIES, fastmath={"reassoc"})
def _fused_loss_pass(DX, D, G, Y, step, descend):
    """The pass of :func:`_loss_and_gradient` (``descend`` False: G <- 2 DX) and
    :func:`_loss_and_step` (True: G <- Y - step 2 DX, ``step`` of the arrays' dtype).

    DX may have k more columns than D, DX = D [H | B]: their squares are added to the
    value and G gets the first d_in columns only. That is the clipped loss of prox
    pruning, B = V diag(c)^{1/2} (``sparseopt.layer.prox._ClippedLayerLoss``); k = 0 is
    LayerLoss. The products are exact in float64; each row is summed in float64 in an
    order the compiler may vectorise (``reassoc`` is what lets it), then the row sums one
    after the other, so the value matches NumPy's pairwise sum to rounding (~1e-15
    relative), not bitwise, and does not depend on the number of threads the rows are
    split over. Doubling is exact: the gradient is bitwise 2 DX, and step (2 DX) rounds like
    (2 step) DX, which is all that ``reassoc`` may make of it (no ``contract``: no FMA)."""
    d = D.shape[1]
    rows = np.empty(D.shape[0])
    for i in prange(D.shape[0]):
        row = 0.0
        for j in range(d):
            row += np.float64(DX[i, j]) * np.float64(D[i, j])
            g = DX[i, j] + DX[i, j]
            G[i, j] = Y[i, j] - step * g if descend else g
        for j in range(d, DX.shape[1]):
            row += np.float64(DX[i, j]) * np.float64(DX[i, j])
        rows[i] = row
    return sum_in_order(rows)


@parallel_kernel(PASS_MIN_ENTRIES)
def _difference_rows(W, W_star, out):
    """out = W - W* on 2-D arrays of one dtype, rows split over the Numba threads; twin:
    ``np.subtract(W, W_star, out=out)``, the same bits (one IEEE subtraction per entry).
    NumPy's ufunc runs on one core, which does not saturate the memory bus
    (``docs/benchmarks.md``)."""
    for i in prange(W.shape[0]):
        for j in range(W.shape[1]):
            out[i, j] = W[i, j] - W_star[i, j]


def _loss_and_gradient_xp(DH, D, xp):
    """(sum float64(DH) D, 2 DH) with array-API operations: the tensor path of
    :meth:`LayerLoss.value_and_grad` and the twin of :func:`_loss_and_gradient`."""
    return float(xp.sum(xp.astype(DH, xp.float64, copy=False) * D)), 2 * DH


class Objective(ABC):
    """Interface of a smooth objective f used by the sparse solvers.

    Attributes
    ----------
    shape : tuple of int
        Shape of the variable w: ``(p,)`` for a vector, ``(d_out, d_in)`` for a weight matrix.
    dtype : numpy dtype (torch dtype for an objective built on tensors)
        dtype of the gradients (the dtype of the objective's data).
    reference : array or None
        A natural starting point (the dense weights W* for :class:`LayerLoss`, maiht-wen
        Alg. 1 line 2); ``None`` when the solvers should start from zero.
    affine_gradient : bool
        True for quadratic objectives (Quadratic, LeastSquares, LayerLoss): grad f of an affine
        combination of points is the same combination of their gradients.
    grad_out : bool
        True when ``value_and_grad(w, out=g)`` can write the gradient into a NumPy array
        ``g`` (:class:`LayerLoss` on NumPy data); solver loops then reuse their arrays.
    stationary_reference : bool
        True when ``reference`` is a minimiser with zero gradient (:class:`LayerLoss`:
        f(W*) = 0), so that a gradient step from it is the identity: a solver started there
        may skip the first gradient (:func:`sparseopt.solvers.proximal_gradient` does).
    """

    shape: tuple
    dtype: np.dtype = np.dtype(np.float64)
    reference = None
    #: True when grad f is affine (f quadratic); solvers may then combine gradients linearly
    affine_gradient = False
    #: True when value_and_grad takes ``out=`` (the gradient written into a NumPy array)
    grad_out = False
    #: True when grad f(reference) = 0 (the reference is a minimiser)
    stationary_reference = False

    @abstractmethod
    def value(self, w) -> float:
        """f(w) as a Python float (accumulated in float64)."""

    @abstractmethod
    def grad(self, w) -> np.ndarray:
        """Gradient of f at w, an array of ``shape``."""

    @abstractmethod
    def hessian(self, w) -> np.ndarray:
        """Dense Hessian of f at w (for a matrix variable with independent rows: the shared
        per-row Hessian)."""

    @abstractmethod
    def _compute_lipschitz(self) -> float:
        """Lipschitz constant of the gradient (computed once, cached by ``lipschitz``)."""

    def value_and_grad(self, w):
        """(f(w), grad f(w)); subclasses share work between the two where they can."""
        return self.value(w), self.grad(w)

    def lipschitz(self) -> float:
        """Lipschitz constant L of grad f in the Euclidean (Frobenius) norm, cached."""
        L = getattr(self, "_lipschitz_cache", None)
        if L is None:
            L = float(self._compute_lipschitz())
            self._lipschitz_cache = L
        return L

    def _check_w(self, w, name: str = "w") -> np.ndarray:
        w = np.asarray(w)
        if w.shape != tuple(self.shape):
            raise ValueError(f"{name} must have shape {tuple(self.shape)}, got {w.shape}")
        return w


def _lstsq_on_support(f, mask, system):
    """``minimize_on_support`` of a vector objective ``f`` whose minimiser on the support S =
    ``mask`` solves the linear system ``system(S)`` = (A, rhs) in the least-squares sense:
    w_S that solution (in float64, stored in f's dtype), w = 0 elsewhere."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != f.shape:
        raise ValueError(f"mask must have shape {f.shape}, got {mask.shape}")
    w = np.zeros(f.shape, dtype=f.dtype)
    if mask.any():
        A, rhs = system(mask)
        w[mask] = np.linalg.lstsq(A.astype(np.float64), rhs.astype(np.float64), rcond=None)[0]
    return w


class Quadratic(Objective):
    """f(w) = 0.5 w'Hw - b'w + c.

    Parameters
    ----------
    H : array_like, shape (p, p)
        Symmetric matrix (indefinite is allowed: f is then smooth but not convex).
    b : array_like, shape (p,)
    c : float, default 0.0

    Notes
    -----
    grad f(w) = Hw - b, Hessian H, L = max |eigenvalue of H| (dense ``eigvalsh``, Lanczos
    above 600 variables). Minimising over a support S solves H_SS w_S = b_S.

    Examples
    --------
    >>> import numpy as np
    >>> f = Quadratic(np.diag([2.0, 1.0]), np.array([2.0, 0.0]))
    >>> f.value(np.array([1.0, 0.0])), f.lipschitz()
    (-1.0, 2.0)
    """

    affine_gradient = True

    def __init__(self, H, b, c: float = 0.0):
        H = _as_float_array(H, "H")
        b = _as_float_array(b, "b")
        _check_symmetric(H, "H")
        if b.shape != (H.shape[0],):
            raise ValueError(f"b must have shape ({H.shape[0]},) to match H, got {b.shape}")
        if not np.isfinite(c):
            raise ValueError("c must be finite")
        self.H, self.b, self.c = H, b, float(c)
        self.shape = (H.shape[0],)
        self.dtype = np.result_type(H, b)

    def value(self, w) -> float:
        w = self._check_w(w).astype(np.float64, copy=False)
        H = self.H.astype(np.float64, copy=False)
        return float(0.5 * w @ (H @ w) - self.b.astype(np.float64) @ w + self.c)

    def grad(self, w) -> np.ndarray:
        w = self._check_w(w)
        return (self.H @ w - self.b).astype(self.dtype, copy=False)

    def hessian(self, w=None) -> np.ndarray:
        return self.H

    def _compute_lipschitz(self) -> float:
        return spectral_norm(self.H)

    def minimize_on_support(self, mask) -> np.ndarray:
        """argmin of f over {w : w = 0 outside mask} (least-squares solution of H_SS w_S = b_S)."""
        return _lstsq_on_support(self, mask, lambda S: (self.H[np.ix_(S, S)], self.b[S]))


class LeastSquares(Objective):
    """f(w) = 0.5 ||Xw - y||^2 (sum of squares, no 1/n factor).

    Parameters
    ----------
    X : array_like, shape (n, p)
        Design matrix.
    y : array_like, shape (n,)
        Responses.

    Notes
    -----
    grad f(w) = X'(Xw - y), Hessian X'X, L = sigma_max(X)^2 from the smaller Gram matrix
    (dense ``eigvalsh``, or Lanczos on v -> X'Xv without forming it when min(n, p) > 600).
    This is maiht-wen eq. 1 / 2 with one output column: f = 0.5 ||X w_hat - X w||^2 when
    y = X w_hat.

    Examples
    --------
    >>> import numpy as np
    >>> f = LeastSquares(np.eye(3), np.array([1.0, 2.0, 0.0]))
    >>> f.value(np.zeros(3)), f.grad(np.zeros(3))
    (2.5, array([-1., -2.,  0.]))
    """

    affine_gradient = True

    def __init__(self, X, y):
        X = _as_float_array(X, "X")
        y = _as_float_array(y, "y")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D matrix, got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        self.X, self.y = X, y
        self.shape = (X.shape[1],)
        self.dtype = np.result_type(X, y)

    def residual(self, w) -> np.ndarray:
        """Xw - y."""
        return self.X @ self._check_w(w) - self.y

    def value(self, w) -> float:
        r = self.residual(w).astype(np.float64, copy=False)
        return float(0.5 * r @ r)

    def grad(self, w) -> np.ndarray:
        return (self.X.T @ self.residual(w)).astype(self.dtype, copy=False)

    def value_and_grad(self, w):
        r = self.residual(w)
        r64 = r.astype(np.float64, copy=False)
        return float(0.5 * r64 @ r64), (self.X.T @ r).astype(self.dtype, copy=False)

    def hessian(self, w=None) -> np.ndarray:
        return self.X.T @ self.X

    def _compute_lipschitz(self) -> float:
        return gram_lambda_max(self.X)

    def minimize_on_support(self, mask) -> np.ndarray:
        """argmin of f over {w : w = 0 outside mask} (least squares on the columns in mask)."""
        return _lstsq_on_support(self, mask, lambda S: (self.X[:, S], self.y))


class LayerLoss(Objective):
    """Local squared loss of a linear layer, f(W) = Tr((W - W*) H (W - W*)').

    Parameters
    ----------
    W_star : array_like or tensor, shape (d_out, d_in)
        Dense weights W*.
    H : array_like or tensor, shape (d_in, d_in)
        Symmetric positive semidefinite Hessian, H = X X' / n for inputs X of shape (d_in, n).
        Of the same array library as ``W_star`` (ValueError otherwise; nothing is converted).
    check_psd : bool, default True, keyword-only
        Check H >= 0 with :func:`sparseopt.validation.check_psd` (the test ``prune`` applies:
        a Cholesky factorisation of the symmetric part of H plus a shift scaled to H's
        precision, O(d_in^3); switch off for large H already known to be a Gram matrix).

    Notes
    -----
    prox24-kubler eq. 2: f(W) = (1/n) ||WX - W*X||_F^2 = Tr((W - W*) H (W - W*)').
    The gradient is 2 (W - W*) H (eq. 4); rows are independent and share the per-row Hessian
    2H, which ``hessian`` returns (d_in x d_in). L = 2 ||H||_2 = 2 gamma_max(H)
    (:func:`sparseopt.linalg.spectral_norm`), so the step 1/L is the eta = 1 / (2 gamma_max(H))
    of eq. 4. ``masked_grad`` is the update direction of eq. 5.
    ``value_and_grad`` costs one product D H (D = W - W*) in the promoted dtype, and reads
    the value sum(D H * D), accumulated in float64, off it; for NumPy the value and the
    doubling 2 D H are one Numba pass (``_loss_and_gradient``), whose value differs from
    NumPy's pairwise sum by rounding only (~1e-15 relative).

    Compared with maiht-wen eq. 2 (f = 0.5 ||X W_hat - X W||_F^2 with W of shape d_in x d_out),
    this is the same loss with the variable transposed and X'X = 2H.

    Given torch tensors, every product is computed by torch on their device, ``grad`` returns
    a tensor and ``dtype`` is the tensors' (promoted) torch dtype; ``value`` is a Python float
    accumulated in float64 as for NumPy. W* and H of different float dtypes combine as in
    NumPy (the product is formed in the promoted dtype).

    Examples
    --------
    >>> import numpy as np
    >>> f = LayerLoss(np.ones((2, 4)), np.eye(4))
    >>> f.value(np.zeros((2, 4))), f.lipschitz()
    (8.0, 2.0)
    """

    affine_gradient = True
    stationary_reference = True  # f(W*) = 0 and grad f(W*) = 2 (W* - W*) H = 0

    def __init__(self, W_star, H, *, check_psd: bool = True):
        if _is_tensor(W_star) or _is_tensor(H):
            xp = namespace(W_star, H)  # ValueError for a NumPy / torch mix
            W_star = _as_float_tensor(W_star, "W_star")
            H = _as_float_tensor(H, "H")
        else:
            W_star = _as_float_array(W_star, "W_star")
            H = _as_float_array(H, "H")
            xp = namespace(W_star, H)
        if W_star.ndim != 2:
            raise ValueError(
                f"W_star must be a 2-D matrix (d_out, d_in), got shape {tuple(W_star.shape)}")
        _check_symmetric(H, "H")
        if H.shape[0] != W_star.shape[1]:
            raise ValueError(f"H must have shape ({W_star.shape[1]}, {W_star.shape[1]}) to match "
                             f"W_star's d_in, got {tuple(H.shape)}")
        if device(H) != device(W_star):
            raise ValueError(f"H is on {device(H)} and W_star on {device(W_star)}: put both on "
                             "one device")
        if check_psd:
            # exactly the test of prune (sparseopt.layer.loss.check_layer): the symmetric part
            # in float64, with the tolerance of H's own precision
            H64 = xp.astype(H, xp.float64, copy=True)
            _check_psd(symmetrize_in_place(H64), "H", dtype=H.dtype)  # in the copy: no temporaries
            del H64
        self._xp = xp
        self._numpy = is_numpy(xp)
        self.grad_out = self._numpy
        self._work = None  # W - W* of value_and_grad(out=), allocated at its first call
        self.W_star, self.H = W_star, H
        self.shape = tuple(W_star.shape)
        if self._numpy:
            self.dtype = np.result_type(W_star, H)
            self._H_mm = H
        else:
            self.dtype = xp.result_type(W_star.dtype, H.dtype)
            # torch's matmul does not promote: H in the product dtype, once
            self._H_mm = xp.astype(H, self.dtype, copy=False)
        self.reference = W_star

    def _check_w(self, w, name: str = "w"):
        if self._numpy:
            if _is_tensor(w):
                namespace(w, self.W_star)  # raises: no silent conversion of a tensor
            w = np.asarray(w)
        else:
            if array_api_compat.is_array_api_obj(w):
                namespace(w, self.W_star)  # ValueError for a NumPy array
            else:
                w = self._xp.asarray(w, dtype=self.dtype, device=device(self.W_star))
            if device(w) != device(self.W_star):
                raise ValueError(f"{name} is on {device(w)}, the objective's data on "
                                 f"{device(self.W_star)}")
        if tuple(w.shape) != self.shape:
            raise ValueError(f"{name} must have shape {self.shape}, got {tuple(w.shape)}")
        return w

    def _times_H(self, D):
        """D H in the promoted dtype (NumPy promotes by itself)."""
        if self._numpy:
            return D @ self.H
        return self._xp.astype(D, self.dtype, copy=False) @ self._H_mm

    def value(self, W) -> float:
        D = self._check_w(W, "W") - self.W_star
        if self._numpy:
            D = D.astype(np.float64, copy=False)
            return float(np.sum((D @ self.H.astype(np.float64, copy=False)) * D))
        xp = self._xp
        D = xp.astype(D, xp.float64, copy=False)
        return float(xp.sum((D @ xp.astype(self.H, xp.float64, copy=False)) * D))

    def grad(self, W):
        D = self._check_w(W, "W") - self.W_star
        return self._xp.astype(2 * self._times_H(D), self.dtype, copy=False)

    def value_and_grad(self, W, *, out=None):
        """(f(W), grad f(W)) from one product D H, D = W - W*: f = sum D H * D accumulated in
        float64, grad = 2 D H. For NumPy the value and the doubling are one fused pass over
        D H (:func:`_loss_and_gradient`; D H is a fresh product, doubled in place).

        ``out`` (NumPy objectives, W of the objective's dtype): a writeable C-contiguous array
        of ``shape`` and ``dtype`` that receives the gradient and is returned; then D goes to
        a work array the objective keeps, so a loop allocates nothing per call (every fresh
        array above glibc's mmap threshold, 32 MiB, is page-faulted in again). Not for
        concurrent calls on one objective from several threads.
        """
        W = self._check_w(W, "W")
        xp = self._xp
        if out is not None:
            D = self._product_into(W, out)
            return _loss_and_gradient(out, D, out), out
        D = W - self.W_star
        DH = self._times_H(D)
        if self._numpy:
            val = _loss_and_gradient(DH, D, DH)
            grad = DH
        else:
            val, grad = _loss_and_gradient_xp(DH, D, xp)
        return val, xp.astype(grad, self.dtype, copy=False)

    def value_and_step(self, W, step, *, out):
        """(f(W), W - step grad f(W)) from one product, the step in the pass of the value
        (:func:`_loss_and_step`): the bits of ``value_and_grad(W, out=out)`` followed by
        the gradient step of :func:`sparseopt.solvers.proximal_gradient`, one pass over W
        fewer. NumPy objectives and ``out`` only (as for ``value_and_grad(out=)``); ``step``
        a finite number >= 0."""
        step = check_real(step, "step")
        W = self._check_w(W, "W")
        D = self._product_into(W, out)
        return _loss_and_step(out, D, W, step, out), out

    def _product_into(self, W, out):
        """D H into ``out`` for a checked W; returns D = W - W* (the work array)."""
        D = self._difference_into_work(W, out)
        np.matmul(D, self.H, out=out)
        return D

    def _difference_into_work(self, W, out):
        """D = W - W* in the objective's work array (allocated at the first call), after the
        checks of ``value_and_grad(out=)``: a NumPy objective, W (checked) of its dtype, and
        ``out`` a writeable C-contiguous array shaped like W. Also the start of the clipped
        loss's fused path (``sparseopt.layer.prox._ClippedLayerLoss``)."""
        if not self._numpy or W.dtype != self.dtype:
            raise ValueError("out needs a NumPy objective and W of its dtype "
                             f"{self.dtype}, got W of dtype {W.dtype}")
        check_out(out, W)
        if self._work is None:
            self._work = np.empty(self.shape, dtype=self.dtype)
        _difference_rows(W, self.W_star, self._work)
        return self._work

    def masked_grad(self, W, mask):
        """M * 2 (W - W*) H: the masked gradient of prox24-kubler eq. 5 (zero off the mask)."""
        xp = self._xp
        mask = np.asarray(mask) if self._numpy else mask
        if tuple(mask.shape) != self.shape:
            raise ValueError(f"mask must have shape {self.shape}, got {tuple(mask.shape)}")
        if not self._numpy:
            namespace(mask, self.W_star)
        g = self.grad(W)
        return xp.where(xp.astype(mask, xp.bool, copy=False), g, zero(g))

    def hessian(self, W=None):
        """The shared per-row Hessian 2H (d_in x d_in)."""
        return 2 * self.H

    def _compute_lipschitz(self) -> float:
        return 2.0 * spectral_norm(self.H)  # L = 2 ||H||_2, as Quadratic's ||H||_2

    def minimize_on_support(self, mask):
        """argmin of f over {W : W = 0 outside mask}, row by row: W_S = W*_S + H_SS^+ H_S,. (W*)'
        restricted to the pruned entries (the optimal weight update of a fixed mask)."""
        if not self._numpy:
            return self._minimize_on_support_xp(mask)
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != self.shape:
            raise ValueError(f"mask must have shape {self.shape}, got {mask.shape}")
        W = np.zeros(self.shape, dtype=self.dtype)
        H = self.H.astype(np.float64)
        for r in range(self.shape[0]):
            S = mask[r]
            if S.any():
                # stationarity on S: (W_S - W*) H restricted to S = 0 -> H_SS w_S = (W* H)_S
                rhs = (self.W_star[r].astype(np.float64) @ H)[S]
                W[r, S] = np.linalg.lstsq(H[np.ix_(S, S)], rhs, rcond=None)[0]
        return W

    def _minimize_on_support_xp(self, mask):
        """:meth:`minimize_on_support` for tensors, on their device: the minimum-norm solution
        H_SS^+ (W* H)_S through ``linalg.pinv`` (what lstsq returns for a singular H_SS)."""
        xp = self._xp
        namespace(mask, self.W_star)
        if tuple(mask.shape) != self.shape:
            raise ValueError(f"mask must have shape {self.shape}, got {tuple(mask.shape)}")
        mask = xp.astype(mask, xp.bool, copy=False)
        W = xp.zeros(self.shape, dtype=self.dtype, device=device(self.W_star))
        H = xp.astype(self.H, xp.float64)
        rhs_all = xp.astype(self.W_star, xp.float64) @ H
        for r in range(self.shape[0]):
            idx = xp.nonzero(mask[r])[0]
            if idx.shape[0]:
                H_SS = xp.take(xp.take(H, idx, axis=0), idx, axis=1)
                w_S = xp.linalg.pinv(H_SS) @ xp.take(rhs_all[r], idx, axis=0)
                W[r, idx] = xp.astype(w_S, self.dtype)
        return W


class Logistic(Objective):
    """Mean logistic loss with a ridge term, f(w) = (1/n) sum_i log(1 + exp(-s_i x_i'w)) + l2/2 ||w||^2.

    Parameters
    ----------
    X : array_like, shape (n, p)
    y : array_like, shape (n,)
        Labels in {0, 1} or in {-1, 1}; s_i = 2 y_i - 1 for {0, 1} labels, s_i = y_i otherwise.
    l2 : float
        Ridge coefficient, l2 >= 0; f is strongly convex for l2 > 0.

    Notes
    -----
    grad f = -(1/n) X' (s * sigma(-s * Xw)) + l2 w, Hessian (1/n) X' diag(sigma(z)(1 - sigma(z))) X
    + l2 I with z = Xw. Since sigma(1 - sigma) <= 1/4, L = lambda_max(X'X) / (4n) + l2, a valid
    (and for z = 0 attained) Lipschitz constant. Smooth, not quadratic.
    """

    def __init__(self, X, y, l2: float):
        X = _as_float_array(X, "X")
        y = _as_float_array(y, "y")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D matrix, got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if X.shape[0] == 0:
            raise ValueError("X must have at least one row")
        labels = set(np.unique(y).tolist())
        if labels <= {0.0, 1.0}:
            s = 2.0 * y - 1.0
        elif labels <= {-1.0, 1.0}:
            s = y.copy()
        else:
            raise ValueError(f"y must hold labels in {{0, 1}} or {{-1, 1}}, got {sorted(labels)[:5]}")
        self.X, self.y, self.l2 = X, y, check_real(l2, "l2")
        self._s = s.astype(X.dtype)
        self.shape = (X.shape[1],)
        self.dtype = X.dtype

    def _margins(self, w):
        return self._s * (self.X @ self._check_w(w))

    def value(self, w) -> float:
        m = self._margins(w).astype(np.float64, copy=False)
        w64 = np.asarray(w, dtype=np.float64)
        return float(np.mean(np.logaddexp(0.0, -m)) + 0.5 * self.l2 * w64 @ w64)

    def grad(self, w) -> np.ndarray:
        return self.value_and_grad(w)[1]

    def value_and_grad(self, w):
        m = self._margins(w)
        m64 = m.astype(np.float64, copy=False)
        w64 = np.asarray(w, dtype=np.float64)
        val = float(np.mean(np.logaddexp(0.0, -m64)) + 0.5 * self.l2 * w64 @ w64)
        # sigma(-m) computed stably as exp(-logaddexp(0, m))
        coef = -self._s * np.exp(-np.logaddexp(0.0, m64)).astype(self.dtype) / self.X.shape[0]
        g = self.X.T @ coef + self.l2 * np.asarray(w)
        return val, g.astype(self.dtype, copy=False)

    def hessian(self, w) -> np.ndarray:
        z = (self.X @ self._check_w(w)).astype(np.float64)
        sig = np.exp(-np.logaddexp(0.0, -z))
        d = sig * (1.0 - sig) / self.X.shape[0]
        X64 = self.X.astype(np.float64, copy=False)
        return (X64.T * d) @ X64 + self.l2 * np.eye(self.shape[0])

    def _compute_lipschitz(self) -> float:
        return gram_lambda_max(self.X) / (4.0 * self.X.shape[0]) + self.l2


class Smooth(Objective):
    """Any smooth function given by callables.

    Parameters
    ----------
    fun : callable
        w -> f(w), a real number.
    grad : callable
        w -> grad f(w), an array of ``shape``.
    hess : callable, optional
        w -> dense Hessian. Without it ``hessian`` raises ValueError.
    shape : tuple of int, keyword-only
        Shape of the variable.
    lipschitz : float, optional, keyword-only
        Lipschitz constant of ``grad``. There is no safe way to compute it from function
        values (a Hessian at one point bounds nothing elsewhere), so without it ``lipschitz()``
        raises ValueError; pass ``step`` to the solver instead.
    dtype : numpy dtype, default float64, keyword-only
        dtype of the variable.
    """

    def __init__(self, fun, grad, hess=None, *, shape, lipschitz=None, dtype=np.float64):
        if not callable(fun):
            raise ValueError("fun must be callable")
        if not callable(grad):
            raise ValueError("grad must be callable")
        if hess is not None and not callable(hess):
            raise ValueError("hess must be callable or None")
        try:
            shape = tuple(int(s) for s in np.atleast_1d(shape))
        except (TypeError, ValueError):
            raise ValueError(f"shape must be a tuple of non-negative ints, got {shape!r}") from None
        if len(shape) == 0 or any(s < 0 for s in shape):
            raise ValueError(f"shape must be a tuple of non-negative ints, got {shape!r}")
        check_real(lipschitz, "lipschitz", positive=True, allow_none=True)
        self._fun, self._grad, self._hess = fun, grad, hess
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self._lipschitz_given = None if lipschitz is None else float(lipschitz)

    def value(self, w) -> float:
        return float(self._fun(self._check_w(w)))

    def grad(self, w) -> np.ndarray:
        g = np.asarray(self._grad(self._check_w(w)))
        if g.shape != self.shape:
            raise ValueError(f"grad returned shape {g.shape}, expected {self.shape}")
        return g

    def hessian(self, w) -> np.ndarray:
        if self._hess is None:
            raise ValueError("this Smooth objective was built without hess")
        return np.asarray(self._hess(self._check_w(w)))

    def _compute_lipschitz(self) -> float:
        if self._lipschitz_given is None:
            raise ValueError("lipschitz was not given to Smooth(...): pass lipschitz=L to Smooth "
                             "or an explicit step to the solver")
        return self._lipschitz_given
