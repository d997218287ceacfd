"""Sparsity patterns: N:M groups and top-k.

A pattern is a small immutable object that knows how to project onto itself
(keep the largest magnitudes), which entries it would keep (``mask``) and
whether an array already satisfies it (``satisfied``). Both patterns act along
the last axis, so the same object works on a vector, a weight matrix (rows are
independent) or any batch of them.

Ties are broken deterministically by position: among equal magnitudes the
entry with the smaller index is kept. This matches a stable descending sort.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .backend import (as_numpy, device, from_numpy, is_numpy, namespace, numpy_path,
                      row_blocks, zero)
from .threads import PASS_MIN_ENTRIES, parallel_kernel
from .validation import check_finite, check_int

__all__ = ["NM", "TopK", "check_finite"]


def _asarray(x):
    """NumPy array_like -> ndarray; tensors and arrays pass unchanged."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)


def _blocked_mask(x, block_mask):
    """``block_mask`` applied to blocks of rows (first axis) of ``x``: masks are computed
    row by row, and a block keeps the float64 / argsort temporaries of a large layer small
    (:func:`~sparseopt.backend.row_blocks`). ``block_mask`` maps rows of ``x`` to their mask."""
    if x.ndim < 2:
        return block_mask(x)
    blocks = row_blocks(x.shape[0], math.prod(x.shape[1:]))
    if len(blocks) <= 1:
        return block_mask(x)
    xp = namespace(x)
    mask = xp.empty(x.shape, dtype=xp.bool, device=device(x))
    for rows in blocks:
        mask[rows, ...] = block_mask(x[rows, ...])
    return mask


def _keep_largest(a, n: int):
    """Boolean mask keeping the ``n`` largest entries of ``a`` along the last axis.

    A stable argsort of ``-a`` puts equal values in index order, so ties go to
    the smaller index. For NumPy the kept positions are scattered with
    ``put_along_axis``; the array API has no scatter, so there an entry is kept when its
    rank (the argsort of the stable order) is below ``n``: the same mask.
    """
    xp = namespace(a)
    size = a.shape[-1]
    if n <= 0 or size == 0 or n >= size:
        return xp.full(a.shape, n > 0 and size > 0, dtype=xp.bool, device=device(a))
    if is_numpy(xp):
        mask = np.zeros(a.shape, dtype=bool)
        order = np.argsort(-a, axis=-1, kind="stable")[..., :n]
        np.put_along_axis(mask, order, True, axis=-1)
        return mask
    order = xp.argsort(-a, axis=-1, stable=True)
    rank = xp.argsort(order, axis=-1, stable=True)
    return rank < n


@njit(cache=True)
def group_rank(g, i, t):
    """The place of entry ``t`` of row ``i`` of ``g`` in the stable descending order of
    magnitudes: how many entries of the row have a larger magnitude, or an equal one at a
    smaller index. The ``n`` largest of a group are the entries of rank < n (the ties rule of
    this module); used by every Numba kernel that keeps the largest entries of a group."""
    at = abs(g[i, t])
    rank = 0
    for u in range(g.shape[1]):
        au = abs(g[i, u])
        if au > at or (au == at and u < t):
            rank += 1
    return rank


@parallel_kernel(PASS_MIN_ENTRIES)
def _nm_mask_groups(g, n, out):
    """``out[i, t] = rank of g[i, t] < n`` for every group (row) of ``g`` (G, m). O(m^2) per
    group, no sort, no temporaries; NumPy twin: ``_keep_largest(abs(g), n)``."""
    for i in prange(g.shape[0]):  # groups are independent
        for t in range(g.shape[1]):
            out[i, t] = group_rank(g, i, t) < n


@parallel_kernel(PASS_MIN_ENTRIES)
def _nm_project_groups(g, n, out):
    """``out = g`` where the rank is < n, else +0.0: the projection in the same pass (cheaper
    than the mask and ``np.where``); twin: ``where(_keep_largest(abs(g), n), g, 0)``."""
    for i in prange(g.shape[0]):
        for t in range(g.shape[1]):
            out[i, t] = g[i, t] if group_rank(g, i, t) < n else 0.0


@parallel_kernel(PASS_MIN_ENTRIES)
def _nm_count_satisfied(g, n):
    """How many groups (rows) of ``g`` have at most ``n`` nonzeros."""
    total = 0
    for i in prange(g.shape[0]):
        nonzeros = 0
        for t in range(g.shape[1]):
            nonzeros += g[i, t] != 0
        total += nonzeros <= n
    return total


def _nm_numpy(pattern, x, values: bool):
    """The N:M mask (``values=False``) or projection of a float array by the Numba kernels
    above, or None where the argsort path runs: other dtypes, arrays off the CPU, CPU
    tensors inside ``device_kernels()`` or that require grad. A CPU tensor is read through a
    NumPy view and the result comes back as a tensor (the same mask: both paths keep the n
    largest magnitudes, ties to the lower index)."""
    if (not numpy_path(x) or getattr(x, "requires_grad", False)
            or str(x.dtype).removeprefix("torch.") not in ("float32", "float64")):
        return None
    a = as_numpy(x)
    pattern._groups(a)  # the shape checks
    g = np.ascontiguousarray(a).reshape(-1, pattern.m)
    out = np.empty(g.shape, dtype=a.dtype if values else bool)
    (_nm_project_groups if values else _nm_mask_groups)(g, int(pattern.n), out)
    return from_numpy(out.reshape(a.shape), x)


@dataclass(frozen=True)
class NM:
    """N:M structured sparsity: at most ``n`` nonzeros in every group of ``m``
    consecutive entries along the last axis.

    Parameters
    ----------
    n : int
        Entries kept per group, ``0 <= n <= m``.
    m : int
        Group length, ``m >= 1``. The last axis of every input must be a multiple of ``m``.

    Examples
    --------
    >>> import numpy as np
    >>> NM(2, 4).project(np.array([0.1, -3.0, 2.0, 0.5]))
    array([ 0., -3.,  2.,  0.])
    """

    n: int
    m: int

    def __post_init__(self):
        check_int(self.m, "m", minimum=1)
        check_int(self.n, "n", minimum=0, maximum=self.m)

    def _groups(self, x, name="x"):
        x = _asarray(x)
        if x.ndim == 0:
            raise ValueError(f"{name} must have at least one axis")
        if x.shape[-1] % self.m != 0:
            raise ValueError(f"last axis of {name} has length {x.shape[-1]}, not divisible by "
                             f"m={self.m}")
        return x.reshape(x.shape[:-1] + (x.shape[-1] // self.m, self.m))

    def mask(self, x):
        """Boolean array, True where ``project`` keeps the entry."""
        x = _asarray(x)
        check_finite(x, "x")
        return self._mask(x)

    def _mask(self, x):
        """``mask`` of a checked (finite) ``x``."""
        mask = _nm_numpy(self, x, values=False)
        if mask is not None:
            return mask
        xp = namespace(x)
        return _blocked_mask(x, lambda b: xp.reshape(
            _keep_largest(xp.abs(self._groups(b)), self.n), b.shape))

    def project(self, x) -> np.ndarray:
        """Euclidean projection onto the pattern: keep the n largest |x| per group.

        Returns a new array of the same dtype; ``x`` is not modified.
        """
        x = _asarray(x)
        check_finite(x, "x")
        out = _nm_numpy(self, x, values=True)
        if out is not None:
            return out
        return namespace(x).where(self._mask(x), x, zero(x))

    def satisfied(self, x) -> bool:
        """True if every group has at most ``n`` nonzeros."""
        return self.satisfied_fraction(x) == 1.0

    def satisfied_fraction(self, x) -> float:
        """Fraction of the groups with at most ``n`` nonzeros (1.0 for no groups).

        For float NumPy arrays one Numba pass (:func:`_nm_count_satisfied`; this runs once
        per prox-gradient iteration); its twin is the array-API code.
        """
        g = self._groups(x)
        xp = namespace(g)
        if 0 in g.shape:
            return 1.0
        if is_numpy(xp) and g.dtype in (np.float32, np.float64):
            g = np.ascontiguousarray(g).reshape(-1, self.m)
            return _nm_count_satisfied(g, int(self.n)) / g.shape[0]
        count = xp.sum(xp.astype(g != 0, xp.int32), axis=-1)
        return float(xp.mean(xp.astype(count <= self.n, xp.float64)))

    def __str__(self):
        return f"{self.n}:{self.m}"


@dataclass(frozen=True)
class TopK:
    """Unstructured k-sparsity along the last axis: at most ``k`` nonzeros per row.

    For a vector this is the usual k-sparse set {x : ||x||_0 <= k}.

    Parameters
    ----------
    k : int
        Entries kept per row, ``k >= 0``. ``k`` larger than the row length keeps everything
        for ``project`` but is rejected by solvers that need ``k <= p``.
    """

    k: int

    def __post_init__(self):
        check_int(self.k, "k", minimum=0)

    def mask(self, x):
        """Boolean array, True where ``project`` keeps the entry."""
        x = _asarray(x)
        if x.ndim == 0:
            raise ValueError("x must have at least one axis")
        check_finite(x, "x")
        return _blocked_mask(x, lambda b: _keep_largest(namespace(b).abs(b), self.k))

    def project(self, x) -> np.ndarray:
        """Hard thresholding T_k: keep the k largest |x| per row. Returns a new array."""
        x = _asarray(x)
        return namespace(x).where(self.mask(x), x, zero(x))

    def satisfied(self, x) -> bool:
        """True if every row has at most ``k`` nonzeros."""
        x = _asarray(x)
        xp = namespace(x)
        return bool(xp.all(xp.sum(xp.astype(x != 0, xp.int64), axis=-1) <= self.k))

    def __str__(self):
        return f"top-{self.k}"
