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

from dataclasses import dataclass

import numpy as np

__all__ = ["NM", "TopK", "check_finite"]


def check_finite(x: np.ndarray, name: str) -> None:
    """Raise ValueError naming ``name`` if ``x`` holds NaN or Inf."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or Inf")


def _keep_largest(a: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask keeping the ``n`` largest entries of ``a`` along the last axis.

    A stable argsort of ``-a`` puts equal values in index order, so ties go to
    the smaller index.
    """
    size = a.shape[-1]
    mask = np.zeros(a.shape, dtype=bool)
    if n <= 0 or size == 0:
        return mask
    if n >= size:
        mask[...] = True
        return mask
    order = np.argsort(-a, axis=-1, kind="stable")[..., :n]
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


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
        if not isinstance(self.m, (int, np.integer)) or self.m < 1:
            raise ValueError(f"m must be a positive integer, got {self.m!r}")
        if not isinstance(self.n, (int, np.integer)) or not 0 <= self.n <= self.m:
            raise ValueError(f"n must be an integer with 0 <= n <= m={self.m}, got {self.n!r}")

    def _groups(self, x, name="x") -> np.ndarray:
        x = np.asarray(x)
        if x.ndim == 0:
            raise ValueError(f"{name} must have at least one axis")
        if x.shape[-1] % self.m != 0:
            raise ValueError(
                f"last axis of {name} has length {x.shape[-1]}, not divisible by m={self.m}"
            )
        return x.reshape(x.shape[:-1] + (x.shape[-1] // self.m, self.m))

    def mask(self, x) -> np.ndarray:
        """Boolean array, True where ``project`` keeps the entry."""
        x = np.asarray(x)
        check_finite(x, "x")
        g = self._groups(x)
        return _keep_largest(np.abs(g), self.n).reshape(x.shape)

    def project(self, x) -> np.ndarray:
        """Euclidean projection onto the pattern: keep the n largest |x| per group.

        Returns a new array of the same dtype; ``x`` is not modified.
        """
        x = np.asarray(x)
        return np.where(self.mask(x), x, np.zeros((), dtype=x.dtype))

    def satisfied(self, x) -> bool:
        """True if every group has at most ``n`` nonzeros."""
        g = self._groups(x)
        return bool(np.all(np.count_nonzero(g, axis=-1) <= self.n))

    def max_nonzeros(self, shape) -> int:
        """Largest number of nonzeros an array of ``shape`` may hold."""
        size = int(np.prod(shape))
        if shape[-1] % self.m != 0:
            raise ValueError(f"last axis {shape[-1]} not divisible by m={self.m}")
        return size // self.m * self.n

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
        if not isinstance(self.k, (int, np.integer)) or self.k < 0:
            raise ValueError(f"k must be a non-negative integer, got {self.k!r}")

    def mask(self, x) -> np.ndarray:
        """Boolean array, True where ``project`` keeps the entry."""
        x = np.asarray(x)
        if x.ndim == 0:
            raise ValueError("x must have at least one axis")
        check_finite(x, "x")
        return _keep_largest(np.abs(x), self.k)

    def project(self, x) -> np.ndarray:
        """Hard thresholding T_k: keep the k largest |x| per row. Returns a new array."""
        x = np.asarray(x)
        return np.where(self.mask(x), x, np.zeros((), dtype=x.dtype))

    def satisfied(self, x) -> bool:
        """True if every row has at most ``k`` nonzeros."""
        x = np.asarray(x)
        return bool(np.all(np.count_nonzero(x, axis=-1) <= self.k))

    def max_nonzeros(self, shape) -> int:
        """Largest number of nonzeros an array of ``shape`` may hold."""
        rows = int(np.prod(shape[:-1]))
        return rows * min(self.k, shape[-1])

    def __str__(self):
        return f"top-{self.k}"
