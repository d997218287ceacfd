"""Input checks shared by every public function: one finite check, one scalar check, one PSD
test with one tolerance. Errors are ValueError and name the bad argument.

Every check accepts NumPy arrays and torch tensors alike (:mod:`sparseopt.backend`).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numba import prange

from .backend import kernel, namespace, row_blocks
from .threads import PASS_MIN_ENTRIES, parallel_kernel

__all__ = ["check_finite", "check_real", "check_int", "check_float_array", "check_nm",
           "check_square", "psd_tolerance", "check_psd", "FLOAT_DTYPES"]

#: The dtypes the numerical code computes in (NumPy names; torch's are matched by name).
FLOAT_DTYPES = ("float32", "float64")


def _dtype_name(dtype) -> str:
    """``"float32"`` for np.float32, np.dtype("float32") and torch.float32 alike."""
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        return np.dtype(dtype).name
    return str(dtype).removeprefix("torch.")


# |v| <= _FINITE_MAX is False exactly for NaN and +-Inf (float32 is widened to float64 first)
_FINITE_MAX = float(np.finfo(np.float64).max)


@parallel_kernel(PASS_MIN_ENTRIES)
def _count_nonfinite(x):
    """How many entries of the 1-D float array ``x`` are NaN or +-Inf; twin:
    ``x.size - np.isfinite(x).sum()``. One pass on both threads, no temporary."""
    bad = 0
    for i in prange(x.shape[0]):
        bad += 0 if abs(x[i]) <= _FINITE_MAX else 1
    return bad


def check_finite(x, name: str) -> None:
    """Raise ValueError naming ``name`` if ``x`` holds NaN or Inf.

    A float32 / float64 NumPy array stored in one block (C or Fortran order) is tested by a
    Numba pass over its entries (:func:`_count_nonfinite`, on both cores from
    ``PASS_MIN_ENTRIES`` entries: 2-3x faster than NumPy's sum; the prox-gradient loop
    checks its prox input at every iteration).

    Other arrays and tensors: the sum of ``x`` is finite only if every entry is (NaN and Inf
    propagate through a sum), and a sum needs no temporary, where ``isfinite`` of an LLM
    Hessian allocates several times its size (torch: |x| and two masks). A non-finite sum
    can also be the overflow of finite entries: then the entries are tested, one block of
    rows at a time.
    """
    if (isinstance(x, np.ndarray) and x.dtype in (np.float32, np.float64)
            and (x.flags.c_contiguous or x.flags.f_contiguous)):
        if _count_nonfinite(x.ravel(order="K")):  # a view: the entries in memory order
            raise ValueError(f"{name} contains NaN or Inf")
        return
    xp = namespace(x)
    if hasattr(x, "detach"):  # a torch tensor that requires grad: its values only
        x = x.detach()
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow here is not an error
        total = float(xp.sum(x))
    if math.isfinite(total):
        return
    blocks = row_blocks(x.shape[0], math.prod(x.shape[1:])) if x.ndim >= 2 else [...]
    for rows in blocks:
        if not bool(xp.all(xp.isfinite(x[rows]))):
            raise ValueError(f"{name} contains NaN or Inf")


def check_real(value, name: str, *, positive: bool = False, allow_negative: bool = False,
               allow_none: bool = False):
    """A finite real scalar as a Python float (``None`` passes with ``allow_none``).

    Default: ``value >= 0``; ``positive=True``: ``value > 0``; ``allow_negative=True``: any
    finite value. bools are refused; 0-d arrays and one-element tensors are accepted.
    """
    if value is None and allow_none:
        return None
    if hasattr(value, "shape") and tuple(value.shape) in ((), (1,)) and not isinstance(value, bool):
        value = value.item() if hasattr(value, "item") else value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if positive and not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    if not (positive or allow_negative) and not (np.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def check_int(value, name: str, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """An integer (bools refused) as a Python int, optionally in ``[minimum, maximum]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value!r}")
    return int(value)


def check_choice(value, name: str, choices):
    """``value`` if it is one of ``choices`` (compared with ==), else ValueError listing them."""
    if isinstance(value, str) or not hasattr(value, "__len__"):
        for choice in choices:
            if type(choice) is type(value) and choice == value:
                return value
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def check_bool(value, name: str) -> bool:
    """``True`` or ``False`` (no truthy stand-ins such as 1 or "yes")."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_float_array(x, name: str, *, ndim: int | None = None):
    """A float32 / float64 array of ``ndim`` axes without NaN or Inf, returned unchanged.

    NumPy input may be array_like; tensors stay tensors. No dtype is ever converted.
    """
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        x = np.asarray(x)
    if _dtype_name(x.dtype) not in FLOAT_DTYPES:
        raise ValueError(f"{name} must have dtype float32 or float64, got {x.dtype}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}")
    check_finite(x, name)
    return x


def check_out(out, like, name: str = "out"):
    """``out`` for a result shaped like the NumPy array ``like``: a writeable, C-contiguous
    NumPy array of the same shape and dtype (``out=`` of the kernels that write in place),
    returned; ValueError naming ``name`` otherwise. ``out`` may be ``like`` itself."""
    if not isinstance(out, np.ndarray):
        raise ValueError(f"{name} must be a NumPy array, got {type(out).__name__}")
    if out.shape != like.shape or out.dtype != like.dtype:
        raise ValueError(f"{name} must have shape {like.shape} and dtype {like.dtype}, got "
                         f"shape {out.shape} and dtype {out.dtype}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"{name} must be a writeable C-contiguous array")
    return out


def check_nm(pattern, name: str = "pattern", *, below_m: bool = False):
    """An ``NM`` pattern object (``below_m``: with n < m, as r_{N:M} needs), returned."""
    from .patterns import NM  # patterns imports this module

    if not isinstance(pattern, NM):
        raise ValueError(f"{name} must be an NM pattern such as NM(2, 4), got {pattern!r}")
    if below_m and pattern.n >= pattern.m:
        raise ValueError(f"n must satisfy 0 <= n < m for r_{{N:M}}, got n={pattern.n}, "
                         f"m={pattern.m}")
    return pattern


def check_square(H, name: str = "H", d: int | None = None):
    """A finite, real, square 2-D array, returned unchanged (NumPy input may be array_like)."""
    if not hasattr(H, "dtype") or not hasattr(H, "shape"):
        H = np.asarray(H)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"{name} must be a square 2-D array, got shape {tuple(H.shape)}")
    if d is not None and H.shape[0] != d:
        raise ValueError(f"{name} has shape {tuple(H.shape)}, expected ({d}, {d}) to match W")
    kind = _dtype_name(H.dtype)
    if not (kind.startswith("float") or kind.startswith("int") or kind.startswith("uint")):
        raise ValueError(f"{name} must be a real numeric array, got dtype {H.dtype}")
    check_finite(H, name)
    return H


def psd_tolerance(H, dtype=None) -> float:
    """Shift s of the PSD test: H is accepted when H + s I has a Cholesky factor.

    s = max(10 d eps, 1e-10) max_j |H_jj|, with eps the machine epsilon of ``dtype`` (default:
    H's own; integer data count as float64). Rounding in forming H = X X' / n and in the
    factorisation perturbs the eigenvalues by about d eps ||H||, so a float32 Hessian gets a
    float32 tolerance: a 4096 x 4096 float32 Gram matrix of a rank-deficient X passes.
    """
    d = H.shape[0]
    if d == 0:
        return 0.0
    name = _dtype_name(dtype if dtype is not None else H.dtype)
    eps = float(np.finfo(np.float32 if name == "float32" else np.float64).eps)
    xp = namespace(H)
    diag = xp.abs(_diagonal(H, xp))
    scale = float(xp.max(diag))
    return max(10.0 * d * eps, 1e-10) * max(scale, float(np.finfo(np.float64).tiny))


def _diagonal(H, xp):
    return xp.linalg.diagonal(H) if hasattr(xp, "linalg") else np.diag(H)


def check_psd(H, name: str = "H", *, dtype=None) -> None:
    """Raise ValueError unless the symmetric ``H`` is positive semidefinite up to rounding.

    ``H`` passes when its diagonal is non-negative and H + s I has a Cholesky factor, with
    s = :func:`psd_tolerance` (``dtype``: the precision H was formed in, default H's own);
    i.e. gamma_min(H) >= -s up to rounding. One O(d^3 / 3) factorisation, in float64 (on the
    tensors' device for accelerator tensors).
    """
    d = H.shape[0]
    if d == 0:
        return
    xp = namespace(H)
    diag = _diagonal(H, xp)
    if bool(xp.any(diag < 0)):
        j = int(xp.argmin(diag))
        raise ValueError(f"{name} is not positive semidefinite: diagonal entry "
                         f"{name}[{j},{j}] = {float(diag[j]):.3g} < 0")
    s = psd_tolerance(H, dtype)
    if not kernel("cholesky_ok", H)(H, s):
        raise ValueError(f"{name} is not positive semidefinite (Cholesky of {name} + {s:.1e} I "
                         f"failed); a layer Hessian is X X' / n")
