"""The small linear algebra every module shares: lambda_max and the top eigenpairs of a
symmetric matrix (one dispatch, `_largest_eigen`), Cholesky
factors (the damped inverse factor of SparseGPT / OBS, the numerically positive definite
factor of the Newton steps), the Woodbury solve of I-OBS, float64 inner products of float32
data.

Each function takes NumPy arrays or torch tensors (:mod:`sparseopt.backend`). NumPy arrays and
CPU tensors go through LAPACK (SciPy) on a NumPy view, so a CPU tensor gets exactly the NumPy
result; tensors on an accelerator use ``torch.linalg`` on their device.
"""

from __future__ import annotations

import contextlib

import numpy as np
import scipy.linalg
from numba import njit, prange

from .backend import as_numpy, kernel, namespace, numpy_dtype, numpy_path, register_kernel
from .threads import PASS_MIN_ENTRIES, one_blas_thread, parallel_kernel
from .validation import check_choice, check_int, check_real, check_square

__all__ = ["lambda_max", "top_eigenpairs", "spectral_norm", "gram_lambda_max", "frob_inner",
           "cholesky_pd", "damping_shift", "woodbury_factor", "woodbury_solve", "inverse_hessian_factor",
           "cholesky_ok", "sum_in_order", "is_symmetric", "symmetrize_in_place", "DENSE_EIG_MAX",
           "FULL_EIG_SHARE", "ONE_THREAD_LAPACK_MAX", "small_lapack"]

#: Above this size the eigenvalue functions run Lanczos (eigsh) instead of a dense LAPACK
#: solve, where a full tridiagonalisation would dominate the cost.
DENSE_EIG_MAX = 1024
#: :func:`top_eigenpairs` of a dense H computes all pairs (LAPACK ``evd``) and keeps the
#: largest ``k`` when ``FULL_EIG_SHARE * k >= d``: from about d / 6 pairs on that is faster
#: than the subset solve (``evr``) at d = 128-1024 (``docs/benchmarks.md``).
FULL_EIG_SHARE = 6
#: Dense LAPACK solves (eigenvalues, Cholesky factors) of matrices up to this size run on one
#: BLAS thread (:func:`small_lapack`): below it a second thread costs more in start-up and
#: synchronisation than it gains (measured with OpenBLAS on 2 cores: even at d = 768,
#: slower above; ``benchmarks/mechanisms.py``, ``docs/benchmarks.md``).
ONE_THREAD_LAPACK_MAX = 512

def small_lapack(d: int):
    """Context for a dense LAPACK solve of a d x d matrix: BLAS limited to one thread when
    ``d <= ONE_THREAD_LAPACK_MAX`` (:func:`sparseopt.threads.one_blas_thread`), nothing
    otherwise.

    Besides the speed, such a solve gives the same bits on any number of cores. The limit is
    process-wide while it lasts (milliseconds); calls from several threads may overlap."""

    if check_int(d, "d", minimum=0) > ONE_THREAD_LAPACK_MAX:
        return contextlib.nullcontext()
    return one_blas_thread()


def lambda_max(H) -> float:
    """Largest eigenvalue of the symmetric matrix ``H``, in float64 (0.0 for an empty H).

    Dense LAPACK (``eigh`` with ``subset_by_index``) up to d = :data:`DENSE_EIG_MAX`, Lanczos
    (``eigsh``, fixed start: deterministic) beyond; ``torch.linalg.eigvalsh`` in float64 for
    tensors on an accelerator (:func:`_largest_eigen`).
    """
    if H.shape[0] == 0:
        return 0.0
    return float(_largest_eigen(H, 1, vectors=False)[0][-1])


def top_eigenpairs(H, k: int, *, precision="float64"):
    """The ``k`` largest eigenvalues of the symmetric matrix ``H`` (ascending, float64) and
    their orthonormal eigenvectors (columns, float64), in H's array library and device.

    The same solvers as :func:`lambda_max` (:func:`_largest_eigen`): dense LAPACK (``eigh``
    with ``subset_by_index``, or all pairs by ``evd`` where k >= d / :data:`FULL_EIG_SHARE`)
    up to d = :data:`DENSE_EIG_MAX`, Lanczos (``eigsh``, fixed
    start: deterministic) beyond, and the full ``eigh`` of the tensor's library
    on an accelerator. ``precision`` ("float64" or "float32"): the precision the solver
    computes in, from H rounded to it; the pairs are returned in float64 either way
    ("float32": eigenvalues and orthonormality to ~d float32 epsilons, for the clipped steps
    of float32 weights, which round the clipped Hessian to float32 anyway, and for about
    two thirds of the time of a float64 solve). Raises
    ValueError for an ``H`` that is not a finite square matrix, a ``k`` outside [1, d] and
    another ``precision``.
    """

    H = check_square(H, "H")
    d = H.shape[0]
    k = check_int(k, "k")
    if not 1 <= k <= d:
        raise ValueError(f"k must be between 1 and {d} (the size of H), got {k!r}")
    check_choice(precision, "precision", ("float64", "float32"))
    w, V = _largest_eigen(H, k, vectors=True, precision=precision)
    if isinstance(H, np.ndarray) or not numpy_path(H):
        return w, V
    xp = namespace(H)  # a CPU tensor: back to its library
    return xp.asarray(w), xp.asarray(V)


def _largest_eigen(H, k: int, *, vectors: bool, precision="float64"):
    """(the k largest eigenvalues of the symmetric H, ascending, float64; their eigenvectors
    or None): the one dispatch of :func:`lambda_max` and :func:`top_eigenpairs`. NumPy
    arrays and CPU tensors: LAPACK's subset ``eigh`` up to d = :data:`DENSE_EIG_MAX` (or
    k >= d - 1; eigenpairs from d / :data:`FULL_EIG_SHARE` on: the full ``evd`` solve, the
    top k kept; on one BLAS thread up to :data:`ONE_THREAD_LAPACK_MAX`), Lanczos (``eigsh``,
    tol 1e-10 in float64, its float32 machine precision in float32, start ones / sqrt(d))
    beyond, as NumPy arrays; tensors on an accelerator: the library's ``eigvalsh`` / ``eigh``.
    Every solver computes in ``precision`` (see :func:`top_eigenpairs`); the results are
    float64."""
    d = H.shape[0]
    if not numpy_path(H):
        xp = namespace(H)
        Hp = xp.astype(H, getattr(xp, precision))
        if not vectors:
            return xp.astype(xp.linalg.eigvalsh(Hp)[d - k:], xp.float64, copy=False), None
        w, V = xp.linalg.eigh(Hp)
        return (xp.astype(w[d - k:], xp.float64, copy=False),
                xp.astype(V[:, d - k:], xp.float64, copy=False))
    Hp = np.asarray(as_numpy(H), dtype=precision)
    if vectors and FULL_EIG_SHARE * k >= d and d <= DENSE_EIG_MAX:
        # many pairs: the divide-and-conquer solve of all of them is the faster LAPACK
        # route (FULL_EIG_SHARE)
        with small_lapack(d):
            w, V = scipy.linalg.eigh(Hp, driver="evd")
        return (w[d - k:].astype(np.float64, copy=False),
                V[:, d - k:].astype(np.float64, copy=False))
    if d <= DENSE_EIG_MAX or k >= d - 1:
        with small_lapack(d):
            out = scipy.linalg.eigh(Hp, eigvals_only=not vectors,
                                    subset_by_index=[d - k, d - 1])
        w, V = out if vectors else (out, None)
    else:
        from scipy.sparse.linalg import eigsh  # only for large matrices

        out = eigsh(Hp, k=k, which="LA", tol=1e-10 if precision == "float64" else 0.0,
                    v0=np.full(d, 1.0 / np.sqrt(d), dtype=precision),
                    return_eigenvectors=vectors)
        w, V = out if vectors else (out, None)
        order = np.argsort(w)
        w, V = w[order], (V[:, order] if vectors else None)
    return (w.astype(np.float64, copy=False),
            V.astype(np.float64, copy=False) if vectors else None)


def spectral_norm(A) -> float:
    """||A||_2 = max |eigenvalue| of a symmetric, possibly indefinite matrix, in float64: the
    Lipschitz constant of the objectives' gradients (for a PSD matrix the same number as
    :func:`lambda_max`, up to rounding). Dense ``eigvalsh`` up to :data:`DENSE_EIG_MAX`,
    Lanczos (fixed start: deterministic) beyond; ``eigvalsh`` of the tensor's library on an
    accelerator."""
    d = A.shape[0]
    if d == 0:
        return 0.0
    if not numpy_path(A):
        xp = namespace(A)
        ev = xp.linalg.eigvalsh(xp.astype(A, xp.float64))
        return float(max(abs(float(ev[0])), abs(float(ev[-1]))))
    A64 = np.asarray(as_numpy(A)).astype(np.float64, copy=False)
    if d <= DENSE_EIG_MAX:
        with small_lapack(d):
            ev = scipy.linalg.eigvalsh(A64)
        return float(max(abs(ev[0]), abs(ev[-1])))
    from scipy.sparse.linalg import eigsh  # only for large matrices

    v0 = np.ones(d) / np.sqrt(d)
    ev = eigsh(A64, k=1, which="LM", return_eigenvectors=False, tol=1e-10, v0=v0)
    return float(abs(ev[0]))


def gram_lambda_max(X) -> float:
    """Largest eigenvalue of X'X = sigma_max(X)^2, via the smaller Gram matrix.

    Small problems use a dense eigvalsh; large ones run Lanczos (eigsh) on the operator
    v -> X'(Xv) (or X(X'v)), which never forms the Gram matrix.
    """
    n, p = X.shape
    if min(n, p) == 0:
        return 0.0
    X64 = np.asarray(X).astype(np.float64, copy=False)
    if min(n, p) <= DENSE_EIG_MAX:
        G = X64 @ X64.T if n < p else X64.T @ X64
        with small_lapack(G.shape[0]):
            return float(scipy.linalg.eigvalsh(G, subset_by_index=[G.shape[0] - 1] * 2)[0])
    from scipy.sparse.linalg import LinearOperator, eigsh  # only for large matrices

    d = min(n, p)
    if n < p:
        op = LinearOperator((d, d), matvec=lambda v: X64 @ (X64.T @ v))
    else:
        op = LinearOperator((d, d), matvec=lambda v: X64.T @ (X64 @ v))
    ev = eigsh(op, k=1, which="LA", return_eigenvectors=False, tol=1e-10)
    return float(ev[0])


def cholesky_pd(H):
    """Cholesky factor (cho_factor form) of H, or None if H is not numerically positive definite:
    the factorization fails, or its pivots span more than 1/(p eps) in square (a singular PSD
    matrix can factor with round-off sized pivots and would give a meaningless Newton step)."""
    H = np.asarray(H, dtype=np.float64)
    try:
        with small_lapack(H.shape[0]):
            cf = scipy.linalg.cho_factor(H, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    piv = np.abs(np.diag(cf[0]))
    if piv.size and (piv.min() / piv.max()) ** 2 < H.shape[0] * np.finfo(np.float64).eps:
        return None
    return cf


def damping_shift(mean_diag: float, damping: float, where: str = "") -> float:
    """delta = damping * mean(diag H), the one damping rule of sparseopt: SparseGPT's (Frantar &
    Alistarh 2023; the OBS sweeps of sparsegpt and iobs) and the damped Newton steps of iobs-wu.
    Relative to the mean diagonal, so one ``damping`` fits Hessians of any scale."""
    if damping and not mean_diag > 0:
        raise ValueError(f"damping needs a Hessian with positive mean diagonal, got "
                         f"{mean_diag:g}{' ' + where if where else ''} (H is not positive "
                         "definite)")
    return damping * mean_diag


def woodbury_factor(X, delta: float):
    """Cholesky factor of the n x n matrix X X' + delta I (delta > 0), for the Woodbury identity
    (X'X + delta I)^{-1} = (I - X'(XX' + delta I)^{-1} X) / delta (:func:`woodbury_solve`);
    ValueError when XX' + delta I is not numerically positive definite."""
    K = X @ X.T
    K[np.diag_indices_from(K)] += delta
    cf = cholesky_pd(K)
    if cf is None:
        raise ValueError(f"X X' + delta I is not numerically positive definite for "
                         f"delta={delta:g}; increase damping")
    return cf


def woodbury_solve(X, cf, delta: float, g) -> np.ndarray:
    """(X'X + delta I)^{-1} g in float64 through the n x n factor ``cf`` of XX' + delta I."""
    g64 = np.asarray(g, dtype=np.float64)
    z = scipy.linalg.cho_solve(cf, X @ g64, check_finite=False)
    return (g64 - X.T @ z) / delta


#: Side of the square tiles of :func:`_symmetry_pass` (two 64 x 64 float64 tiles, 64 KiB,
#: stay in L2 while one is read by rows and its mirror by columns).
_SYM_TILE = 64


@parallel_kernel(PASS_MIN_ENTRIES)
def _symmetry_pass(H, maxima):
    """(the number of entries H[i, j] != H[j, i] with i >= j (NaN counts: it equals
    nothing), max |H_ij|, max |H_ij - H_ji| (the difference rounded to H's dtype; both 0
    unless ``maxima``: the exact test alone runs 2-3x faster without them)), one
    tile below the diagonal against its mirror at a time, rows of tiles over the Numba
    threads: both symmetry tests in one pass over H, the exact one of :func:`is_symmetric`
    and the tolerance of ``sparseopt.objectives._check_symmetric``. Twins:
    ``np.count_nonzero(np.tril(H != H.T))``, ``np.max(np.abs(H))`` and
    ``np.max(np.abs(H - H.T))``, which read H.T by columns across the whole matrix (an
    order of magnitude slower at d = 1536). The maxima are 0 for an empty H and meaningless
    where H holds NaN (the callers test finiteness first)."""
    d = H.shape[0]
    nt = (d + _SYM_TILE - 1) // _SYM_TILE
    counts = np.zeros(nt, dtype=np.int64)
    largest = np.zeros(nt)
    asym = np.zeros(nt)
    for bi in prange(nt):
        i0 = bi * _SYM_TILE
        i1 = min(d, i0 + _SYM_TILE)
        c = 0
        big = 0.0
        diff = 0.0
        for bj in range(bi + 1):
            j0 = bj * _SYM_TILE
            for i in range(i0, i1):
                for j in range(j0, min(j0 + _SYM_TILE, i + 1)):
                    a, b = H[i, j], H[j, i]
                    c += 0 if a == b else 1
                    if maxima:  # loop-invariant: LLVM unswitches it
                        big = max(big, abs(a), abs(b))
                        diff = max(diff, abs(a - b))
        counts[bi] = c
        largest[bi] = big
        asym[bi] = diff
    if nt == 0:
        return 0, 0.0, 0.0
    return counts.sum(), largest.max(), asym.max()


@parallel_kernel(PASS_MIN_ENTRIES)
def _symmetrize_tiles(A):
    """A <- (A + A') / 2 in place for a square float64 A: each mirrored pair once, as
    ``0.5 * (a_ij + a_ji)`` into both entries (the bits of its twin
    ``0.5 * (A + A.T)``), tile by tile below the diagonal, rows of tiles over the Numba
    threads (a row of tiles writes only its own pairs). No d x d temporary: the twin needs
    two (1.6 GB each at d = 14336)."""
    d = A.shape[0]
    nt = (d + _SYM_TILE - 1) // _SYM_TILE
    for bi in prange(nt):
        i0 = bi * _SYM_TILE
        i1 = min(d, i0 + _SYM_TILE)
        for bj in range(bi + 1):
            j0 = bj * _SYM_TILE
            for i in range(i0, i1):
                for j in range(j0, min(j0 + _SYM_TILE, i + 1)):
                    v = 0.5 * (A[i, j] + A[j, i])
                    A[i, j] = v
                    A[j, i] = v
    return A


def symmetrize_in_place(A):
    """``A`` replaced in place by its symmetric part (A + A') / 2 and returned: for a
    square float64 NumPy array by the tiled Numba pass :func:`_symmetrize_tiles` (no
    d x d temporary), else by the expression ``0.5 * (A + A.T)`` written back into A (its
    twin; the same bits). ValueError unless A is a square 2-D float32 / float64 array (an
    integer array would silently round the halves)."""
    from .validation import FLOAT_DTYPES, _dtype_name

    if not hasattr(A, "shape") or len(A.shape) != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square 2-D array, got shape {getattr(A, 'shape', None)}")
    if _dtype_name(A.dtype) not in FLOAT_DTYPES:
        raise ValueError(f"A must have dtype float32 or float64, got {A.dtype}")
    if isinstance(A, np.ndarray) and A.dtype == np.float64:
        return _symmetrize_tiles(A)
    A[...] = 0.5 * (A + A.T)
    return A


def is_symmetric(H) -> bool:
    """Whether the square matrix ``H`` equals its transpose exactly (NaN is never equal):
    ``all(H == H.T)``, for NumPy arrays by the tiled Numba pass :func:`_symmetry_pass`
    (no d x d temporaries), else with the array library's own operators. A non-square H is
    not symmetric; ValueError unless H is a 2-D array."""
    if not hasattr(H, "shape") or len(H.shape) != 2:
        raise ValueError(f"H must be a 2-D array, got {type(H).__name__} of shape "
                         f"{getattr(H, 'shape', None)}")
    if H.shape[0] != H.shape[1]:
        return False
    if isinstance(H, np.ndarray) and H.dtype in (np.float32, np.float64):
        return int(_symmetry_pass(H, False)[0]) == 0
    xp = namespace(H)
    return bool(xp.all(H == H.T))


@njit(cache=True, fastmath=False)  # set: callers with fast-math would pass theirs on
def sum_in_order(a):
    """sum of the 1-D float64 array ``a`` from the first entry to the last, one addition at a
    time (compiled without fast-math flags, so LLVM may not reorder it). The fused passes
    keep one float64 sum per row, computed on any number of threads, and add them with this:
    their totals are the same bits on one thread or many."""
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i]
    return total


def frob_inner(A, B) -> float:
    """sum(A * B) accumulated in float64 (row sums first), without float64 copies of NumPy
    inputs; the same value for CPU tensors (they are viewed as NumPy arrays)."""
    if numpy_path(A) and numpy_path(B):
        return float(np.einsum("ij,ij->i", as_numpy(A), as_numpy(B), dtype=np.float64).sum())
    xp = namespace(A, B)
    return float(xp.sum(xp.sum(xp.astype(A, xp.float64) * xp.astype(B, xp.float64), axis=1)))


def inverse_hessian_factor(H, *, damping=0.01, dtype=None):
    """Upper Cholesky factor U of (H_damped)^{-1} = U' U, the dead inputs and the damping.

    Parameters
    ----------
    H : array, shape (d, d)
        Symmetric Hessian (float64). Not modified.
    damping : float
        Damping: ``damping * mean(diag(H))`` (dead inputs counted as 1) is added to the
        diagonal.
    dtype : dtype, optional
        Precision of the factorisation (SparseGPT works in the dtype of the weights); default
        H's.

    Returns
    -------
    U : array, shape (d, d), upper triangular, dtype ``dtype``
    dead : bool array, shape (d,)
        Inputs with H_jj = 0 (never active); their diagonal entry is set to 1.
    damp : float
        The value added to the diagonal.

    Notes
    -----
    Row j of U, divided by U_jj, is the first row of (H_{F,F})^{-1} / [(H_{F,F})^{-1}]_{00}
    with F = {j, ..., d-1}: the OBS update direction after columns 0..j-1 are fixed, and
    U_jj^2 = [(H_{F,F})^{-1}]_{00} (Frantar & Alistarh 2023, Sec. 3.2). The reference code
    computes cholesky(H), cholesky_inverse, cholesky(upper). We take the equivalent shorter
    route: with P the reversal permutation and P H P = L L' (lower),
    H^{-1} = (P L^{-T} P)(P L^{-1} P), and P L^{-1} P is upper triangular with a positive
    diagonal, hence the unique upper Cholesky factor of H^{-1}. One Cholesky and one
    triangular inverse instead of two Cholesky factorisations and an inverse.
    """
    damping = check_real(damping, "damping")
    return kernel("inverse_hessian_factor", H)(H, damping,
                                                H.dtype if dtype is None else dtype)


@register_kernel("inverse_hessian_factor", "numpy")
def _inverse_hessian_factor_numpy(H, damping, dtype):
    """LAPACK potrf + trtri of the reversed damped H (:func:`inverse_hessian_factor`)."""
    H = np.array(H, dtype=np.float64)  # copy
    d = H.shape[0]
    diag = np.diag(H).copy()
    dead = diag == 0
    diag[dead] = 1.0
    damp = damping_shift(float(np.mean(diag)), damping) if d else 0.0
    H[np.diag_indices(d)] = diag + damp
    Hr = np.ascontiguousarray(H[::-1, ::-1], dtype=numpy_dtype(dtype))
    potrf, trtri = scipy.linalg.get_lapack_funcs(("potrf", "trtri"), (Hr,))
    with small_lapack(d):
        L, info = potrf(Hr, lower=1, clean=1, overwrite_a=1)
    if info != 0:
        raise ValueError(f"H + {damp:.3g} I is not positive definite (Cholesky failed at pivot "
                         f"{info}); H is not positive semidefinite, or increase damping (now "
                         f"{damping})")
    with small_lapack(d):
        Linv, info = trtri(L, lower=1, overwrite_c=1)
    if info != 0:
        raise ValueError(f"inverting the Cholesky factor of H failed (LAPACK info {info})")
    return np.ascontiguousarray(Linv[::-1, ::-1]), dead, damp


@register_kernel("cholesky_ok", "numpy")
def cholesky_ok(H, shift: float) -> bool:
    """True when H + shift I (in float64) has a Cholesky factor: the PSD test of
    :func:`sparseopt.validation.check_psd`."""
    from scipy.linalg import lapack

    # One float64 copy, shifted on its diagonal and factorised in place: the test of a
    # 6912 x 6912 LLM Hessian must not hold four d x d arrays at once.
    A = np.array(H, dtype=np.float64, order="F", copy=True)
    A[np.diag_indices_from(A)] += shift
    with small_lapack(A.shape[0]):
        _, info = lapack.dpotrf(A, lower=True, overwrite_a=True, clean=False)
    return info == 0
