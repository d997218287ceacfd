"""The N:M proximal family: ``prox_nm`` (EnumALM, EnumPGD, EnumIPM) and ``certify``.

``prox_nm(y, lam, n, m)`` solves, for every group w of ``m`` consecutive entries along the
last axis,

    argmin_w 0.5 ||w - y||^2 + lam r_{N:M}(w)        (prox24-kubler eq. 6, 7)

See ``docs/prox.md`` for the math, the design of the Numba kernel and how correctness is
tested. The sorted-domain kernels live in ``alm`` (this package's default), ``pgd`` and
``ipm``; ``reference.prox_bruteforce`` is an independent multi-start solver and
``certify`` an SDP lower bound.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..backend import register_kernel
from ..validation import check_choice, check_finite, check_int, check_out, check_real
from .alm import DEFAULT_MAX_ITER, default_tol, enum_alm_rows
from .certify import Certificate, certify  # imports CVXPY only when called
from .closed_form import prox_r0m, prox_r1m

__all__ = ["prox_nm", "certify", "Certificate", "METHODS"]

#: Methods of ``prox_nm`` and the (n, m) they accept for n >= 2 (None: any).
METHODS = {"alm": None, "pgd": ((2, 4), (2, 3)), "ipm": ((2, 4), (2, 3))}


def _validate(y, lam, n, m, method, tol, max_iter):
    y = np.asarray(y)
    if y.dtype not in (np.float32, np.float64):
        raise ValueError(f"y must have dtype float32 or float64, got {y.dtype}")
    if y.ndim == 0:
        raise ValueError("y must have at least one axis")
    m = check_int(m, "m", minimum=1)
    n = check_int(n, "n")
    if not 0 <= n < m:
        raise ValueError(f"n must satisfy 0 <= n < m={m}, got n={n}")
    if y.shape[-1] % m != 0:
        raise ValueError(f"last axis of y has length {y.shape[-1]}, not divisible by m={m}")
    lam = check_real(lam, "lam")
    check_choice(method, "method", METHODS)
    tol = check_real(tol, "tol", positive=True, allow_none=True)
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", minimum=1)
    return y, lam, n, m, tol, max_iter


def prox_nm(y, lam, n=2, m=4, *, method="alm", tol=None, max_iter=None, out=None):
    """Prox of ``lam * r_{N:M}`` on every group of ``m`` entries along the last axis.

    Parameters
    ----------
    y : ndarray, float32 or float64
        Input of any shape whose last axis is a multiple of ``m``. Not modified.
    lam : float
        Regularization weight, finite and >= 0.
    n, m : int
        The pattern N:M, ``0 <= n < m``.
    method : {"alm", "pgd", "ipm"}, keyword-only
        ``"alm"``: EnumALM (proxsparse-liu Alg. 3, generalized to any N:M), a Numba kernel.
        ``"pgd"``: EnumPGD (prox24-kubler Sec. 3.5), 2:4 and 2:3 only.
        ``"ipm"``: EnumIPM (prox24-kubler Alg. 1 with barrier solves), 2:4 and 2:3 only.
        For n = 0 and n = 1 every method uses the exact closed form.
    tol : float, optional, keyword-only
        Stopping tolerance of the candidate solver. For ``"alm"`` it is relative: a
        candidate's ALM stops when a full sweep moves no coordinate by more than
        ``tol * max|y_group|``. Default 1e-12 for float64 input, 1e-8 for float32 (the
        kernel computes in float64 either way). ``"pgd"``/``"ipm"``: passed on to their
        kernels (their own defaults when None).
    max_iter : int, optional, keyword-only
        Sweeps per candidate for ``"alm"`` (default 10000), passed on for ``"pgd"``.
        A ``RuntimeWarning`` reports groups that reached it.
    out : ndarray, optional, keyword-only
        Writeable C-contiguous array of ``y``'s shape and dtype that receives the result and
        is returned; may be ``y`` itself (the kernels read a group before they write it).
        Loops over large arrays pass it to reuse their memory (``proximal_gradient``).

    Returns
    -------
    ndarray
        Same shape and dtype as ``y`` (``out`` when given).

    Raises
    ------
    ValueError
        NaN/Inf in ``y``, non-float ``y``, ``lam`` negative or not finite, last axis not
        divisible by ``m``, ``n`` outside ``[0, m)``, ``tol <= 0``, unknown ``method``, a
        pattern the method does not support, or an ``out`` of another shape, dtype or
        layout.

    Notes
    -----
    Lemma 3 of prox24-kubler (Theorem 4 of proxsparse-liu) reduces every group to
    z = sort(|y|) descending; some optimal w is sorted like z, so its support is the top-s
    entries. For n = 0, r_{0:M} is the l1 norm and the prox is soft-thresholding. For n = 1,
    r_{1:M} is quadratic and the prox has a closed form (``closed_form.prox_r1m``). For
    n >= 2 the candidate of every support size s = n..m is computed (s = n: w = z_{1:n}
    exactly; s > n: ALM, PGD or IPM on the top-s coordinates) and the one with the least
    objective 0.5 ||w - z||^2 + lam r_{N:M}(w) is returned with order and signs restored.

    Examples
    --------
    >>> import numpy as np
    >>> from sparseopt.prox import prox_nm
    >>> prox_nm(np.array([3.0, -0.1, 2.0, 0.2]), 5.0)
    array([3., 0., 2., 0.])
    """
    y, lam, n, m, tol, max_iter = _validate(y, lam, n, m, method, tol, max_iter)
    if out is not None:
        out = check_out(out, y)
    return _prox_nm_valid(y, lam, n, m, method, tol, max_iter, out, name="y")


def _prox_nm_valid(y, lam, n, m, method, tol, max_iter, out, *, name):
    """:func:`prox_nm` on arguments already validated (``_validate``, ``check_out``).

    ``name``: y's name in the ValueError for NaN or Inf; None when the caller has tested y
    itself (``RNM.prox``, whose ``check_float_array`` did: the prox-gradient loop then
    tests its prox input once per iteration, not twice).
    """
    if name is not None and (method != "alm" or n < 2 or lam == 0.0):
        # EnumALM tests y itself (into a fresh result, in the kernel's own pass)
        check_finite(y, name)
    if y.size == 0 or lam == 0.0:
        # lam = 0: the prox of the zero function is the identity
        return y.copy() if out is None else _into(out, y)
    if n == 0:
        return _into(out, prox_r0m(y, lam))
    if n == 1:
        return _into(out, prox_r1m(y, lam, m))
    if method == "alm":
        tol = default_tol(y.dtype) if tol is None else tol
        max_iter = DEFAULT_MAX_ITER if max_iter is None else max_iter
        g = np.ascontiguousarray(y.reshape(-1, m))
        w, _, maxed = enum_alm_rows(g, lam, n, tol, max_iter,
                                  out=None if out is None else out.reshape(-1, m), name=name)
        if np.any(maxed):
            warnings.warn(f"prox_nm: ALM reached max_iter={max_iter} in {int(maxed.sum())} of "
                          f"{maxed.size} groups; their candidates are not converged to "
                          f"tol={tol:g}", RuntimeWarning, stacklevel=3)
        return w.reshape(y.shape) if out is None else out
    if (n, m) not in METHODS[method]:
        raise ValueError(f"method={method!r} supports (n, m) in {METHODS[method]} (n >= 2), got "
                         f"({n}, {m}); use method='alm' for general N:M")
    return _into(out, _sorted_domain(y, lam, n, m, method, tol, max_iter))


def _into(out, result):
    """``result``, or ``out`` holding it when an ``out`` array is given."""
    if out is None:
        return result
    np.copyto(out, result)
    return out


register_kernel("prox_nm", "numpy")(prox_nm)


def _sorted_domain(y, lam, n, m, method, tol, max_iter):
    """Lemma 3 in NumPy around a sorted-domain kernel (EnumPGD / EnumIPM)."""
    g = y.reshape(-1, m)
    a = np.abs(g)
    order = np.argsort(-a, axis=1, kind="stable")
    z = np.take_along_axis(a, order, axis=1)
    kwargs = {}
    if method == "pgd":
        from .pgd import enum_pgd_sorted

        if tol is not None:
            kwargs["tol"] = tol
        if max_iter is not None:
            kwargs["max_iter"] = max_iter
        ws = enum_pgd_sorted(z, lam, n, **kwargs)
    else:
        from .ipm import enum_ipm_sorted

        if max_iter is not None:
            raise ValueError("max_iter is not used by method='ipm'; leave it None")
        if tol is not None:
            kwargs["tol"] = tol
        ws = enum_ipm_sorted(z, lam, n, **kwargs)
    ws = np.asarray(ws, dtype=np.float64)
    w = np.empty_like(ws)
    np.put_along_axis(w, order, ws, axis=1)
    w = np.where(g < 0, 0.0 - w, w)  # 0.0 - 0.0 is +0.0: no negative zeros
    return w.reshape(y.shape).astype(y.dtype)
