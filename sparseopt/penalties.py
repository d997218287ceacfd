"""Simple sparsity penalties with closed-form proxes: l0, l1 and the App. C regularizers.

Each penalty is an object in the style of PyProximal: ``P(lam)`` holds the weight,
``P(x)`` is the value ``lam * R(x)`` and ``P.prox(x, tau)`` is

    prox_{tau P}(x) = argmin_w 0.5 ||w - x||^2 + tau * lam * R(w),     tau > 0.

``R0``, ``R1`` and ``R2`` are the regularizers of prox24-kubler Appendix C (eq. 25-27), which
are zero exactly on 2:4-sparse groups. They act on every group of ``m`` consecutive entries
along the last axis and generalize to N:M in the natural way: with a = |w| of a group sorted
descending,

    R0(w) = #{i > N : a_i > 0} = max(||w||_0 - N, 0)       (eq. 25: 0, 1 or 2 for 2:4)
    R1(w) = a_{N+1} + ... + a_M                               (eq. 26)
    R2(w) = (a_{N+1}^2 + ... + a_M^2) / 2                     (eq. 27)

i.e. a penalty on the M - N smallest magnitudes. Default N:M = 2:4.
"""

from __future__ import annotations

import numbers

import numpy as np

from .patterns import NM, check_finite

__all__ = ["L0", "L1", "R0", "R1", "R2"]


def _check_lam(lam):
    if isinstance(lam, bool) or not isinstance(lam, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"lam must be a real scalar, got {lam!r}")
    lam = float(lam)
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be finite and non-negative, got {lam!r}")
    return lam


def _check_tau(tau):
    if isinstance(tau, bool) or not isinstance(tau, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"tau must be a positive real scalar, got {tau!r}")
    tau = float(tau)
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be finite and > 0, got {tau!r}")
    return tau


def _check_x(x):
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise ValueError(f"x must have dtype float32 or float64, got {x.dtype}")
    check_finite(x, "x")
    return x


class _Penalty:
    def __init__(self, lam):
        self.lam = _check_lam(lam)

    def __repr__(self):
        return f"{type(self).__name__}(lam={self.lam!r})"


class L0(_Penalty):
    """lam * ||x||_0 (number of nonzeros).

    ``prox(x, tau)`` is hard thresholding at ``sqrt(2 * tau * lam)``: keep x_i where
    |x_i| > sqrt(2 tau lam), else 0.

    Notes
    -----
    Per coordinate, keeping x_i costs tau lam and zeroing it costs x_i^2 / 2, so x_i is kept
    iff x_i^2 / 2 > tau lam. (Not tau lam: that threshold is the l1 one.) At equality both
    choices are optimal; we return 0.

    Examples
    --------
    >>> import numpy as np
    >>> L0(0.5).prox(np.array([0.9, -1.1, 2.0]), 1.0)   # threshold sqrt(2 * 0.5) = 1
    array([ 0. , -1.1,  2. ])
    """

    def __call__(self, x):
        x = _check_x(x)
        return self.lam * float(np.count_nonzero(x))

    def prox(self, x, tau):
        x = _check_x(x)
        thr = np.sqrt(2.0 * _check_tau(tau) * self.lam)
        return np.where(np.abs(x) > thr, x, np.zeros((), dtype=x.dtype))


class L1(_Penalty):
    """lam * ||x||_1. ``prox(x, tau)`` is soft-thresholding at ``tau * lam``.

    Examples
    --------
    >>> import numpy as np
    >>> L1(0.5).prox(np.array([0.25, -1.5, 2.0]), 1.0)
    array([ 0. , -1. ,  1.5])
    """

    def __call__(self, x):
        x = _check_x(x)
        return self.lam * float(np.sum(np.abs(x.astype(np.float64))))

    def prox(self, x, tau):
        x = _check_x(x)
        t = np.maximum(np.abs(x.astype(np.float64)) - _check_tau(tau) * self.lam, 0.0)
        return np.where(x < 0, 0.0 - t, t).astype(x.dtype)


class _TailPenalty(_Penalty):
    """Penalty on the M - N smallest magnitudes of every N:M group (prox24-kubler App. C).

    Parameters
    ----------
    lam : float
        Weight, >= 0.
    n, m : int, keyword-only
        The pattern (default 2:4), ``0 <= n <= m``.

    Notes
    -----
    Prox (eq. 28, 29). Write R(w) = min over index sets T with |T| = M - N of
    sum_{i in T} h(|w_i|), where h is the per-entry penalty (1[a > 0], a or a^2 / 2): the
    minimum picks the M - N smallest magnitudes because h is non-decreasing. Then

        min_w 0.5||w - x||^2 + c R(w)
            = min_T sum_{i in T} min_{w_i} [0.5 (w_i - x_i)^2 + c h(|w_i|)]

    (entries outside T are free, so w_i = x_i there). The inner value
    phi(x_i) = min_w 0.5 (w - x_i)^2 + c h(|w|) is non-decreasing in |x_i| for all three h,
    so the best T is the M - N smallest |x_i| (ties: the later index, matching
    ``NM.mask``), which keep x_i unchanged for the top N and get the scalar prox on T:
    hard thresholding at sqrt(2c) (R0), soft-thresholding at c (R1), shrinkage by 1 / (1 + c)
    (R2), with c = tau * lam. For 2:4 these are the formulas below eq. 29.
    """

    def __init__(self, lam, *, n=2, m=4):
        super().__init__(lam)
        self.pattern = NM(n, m)  # validates n, m
        self.n, self.m = int(n), int(m)

    def __repr__(self):
        return f"{type(self).__name__}(lam={self.lam!r}, n={self.n}, m={self.m})"

    def _tail_mask(self, x):
        """True on the M - N smallest magnitudes of every group."""
        return ~self.pattern.mask(x)

    def __call__(self, x):
        x = _check_x(x)
        a = np.abs(x.astype(np.float64))
        tail = np.where(self._tail_mask(x), a, 0.0)
        return self.lam * float(np.sum(self._h(tail)))

    def prox(self, x, tau):
        x = _check_x(x)
        c = _check_tau(tau) * self.lam
        t = self._tail_mask(x)
        shrunk = self._scalar_prox(x.astype(np.float64), c).astype(x.dtype)
        return np.where(t, shrunk, x)


class R0(_TailPenalty):
    """App. C eq. 25: lam * (number of nonzeros beyond the N largest per group).

    Examples
    --------
    >>> import numpy as np
    >>> R0(1.0).prox(np.array([3.0, -0.5, 1.5, 2.0]), 1.0)   # keep 3, 2; 1.5 > sqrt(2)
    array([3. , 0. , 1.5, 2. ])
    """

    @staticmethod
    def _h(a):
        return (a > 0).astype(np.float64)

    @staticmethod
    def _scalar_prox(v, c):
        return np.where(np.abs(v) > np.sqrt(2.0 * c), v, 0.0)


class R1(_TailPenalty):
    """App. C eq. 26: lam * (sum of the M - N smallest magnitudes per group)."""

    @staticmethod
    def _h(a):
        return a

    @staticmethod
    def _scalar_prox(v, c):
        t = np.maximum(np.abs(v) - c, 0.0)
        return np.where(v < 0, 0.0 - t, t)


class R2(_TailPenalty):
    """App. C eq. 27: lam * (half the sum of squares of the M - N smallest magnitudes)."""

    @staticmethod
    def _h(a):
        return 0.5 * a * a

    @staticmethod
    def _scalar_prox(v, c):
        return v / (1.0 + c)
