"""Sparsity regularizers: r_{N:M} (prox24-kubler eq. 6), l0, l1 and the App. C R0, R1, R2.

Two layers:

- functions of r_{N:M}(w) = sum over subsets S of [M] with |S| = N + 1 of prod_{j in S} |w_j|
  (prox24-kubler eq. 6): :func:`elementary_symmetric`, :func:`r_nm`, :func:`r_nm_groups`,
  :func:`r_nm_grad`, :func:`prox_objective`. r_{N:M} is the elementary symmetric polynomial
  e_{N+1}(|w|), zero exactly when the group has at most N nonzeros (Fact 2); r_{0:M} is the l1
  norm and r_{1:M}(w) = ((sum |w|)^2 - sum w^2) / 2 is quadratic.
- regularizer objects in the style of PyProximal, for proximal-gradient solvers:
  :class:`RNM`, :class:`L0`, :class:`L1`, :class:`R0`, :class:`R1`, :class:`R2`. ``P(lam)``
  holds the weight, ``P(x)`` is the value ``lam * R(x)`` (a float, summed over everything) and

      P.prox(x, tau) = argmin_w 0.5 ||w - x||^2 + tau * lam * R(w),     tau > 0,

  elementwise (L0, L1) or on every group of ``m`` consecutive entries along the last axis
  (RNM, R0, R1, R2). ``P.grad(x)`` is the gradient of ``lam * R`` where it exists (RNM, R2);
  ``P.exact_pattern`` is the N:M pattern the prox reaches exactly at a finite lam (RNM, R0,
  R1), else None; ``P.degree`` is p with R(c w) = |c|^p R(w) (RNM: N + 1; L0, R0: 0; L1,
  R1: 1; R2: 2), what makes a lambda schedule invariant to the scale of the weights.

Everything accepts NumPy arrays and torch tensors through the array API
(:mod:`sparseopt.backend`): tensors are computed on with torch on their device and come back
as tensors of the same dtype. Only :func:`prox_objective` is NumPy-only.
"""

from __future__ import annotations

import numpy as np

from numba import prange

from .backend import device, is_numpy, kernel, namespace, numpy_path, register_kernel, zero
from .patterns import NM, group_rank
from .threads import PASS_MIN_ENTRIES, parallel_kernel
from .validation import check_choice, check_float_array, check_nm, check_out, check_real

__all__ = ["elementary_symmetric", "r_nm", "r_nm_groups", "r_nm_grad", "prox_objective",
           "Regularizer", "RNM", "L0", "L1", "R0", "R1", "R2", "REGULARIZERS"]

#: The regularizers by name (``prune(..., method="prox", regularizer=NAME)``): every subclass
#: of :class:`Regularizer` that sets ``name`` enters itself here when it is defined.
REGULARIZERS: dict = {}


def _as_array(x):
    """NumPy array_like -> ndarray; NumPy arrays and tensors pass unchanged."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)


# --------------------------------------------------------------------------------------
# r_{N:M} as functions (prox24-kubler eq. 6, 8)
# --------------------------------------------------------------------------------------


def elementary_symmetric(a, k: int):
    """e_k of the entries of ``a`` along the last axis, by the O(m k) recursion
    e_j(a_1..a_i) = e_j(a_1..a_{i-1}) + a_i e_{j-1}(a_1..a_{i-1}).

    In float64 (or wider), shape ``a.shape[:-1]``; NumPy arrays or tensors like ``a``.
    """
    a = _as_array(a)
    xp = namespace(a)
    dt = xp.result_type(a.dtype, xp.float64)
    shape = tuple(a.shape[:-1])
    e = [xp.ones(shape, dtype=dt, device=device(a))]
    e += [xp.zeros(shape, dtype=dt, device=device(a)) for _ in range(k)]
    for i in range(a.shape[-1]):
        ai = a[..., i]
        for j in range(min(k, i + 1), 0, -1):
            e[j] = e[j] + ai * e[j - 1]
    return e[k][()] if is_numpy(xp) else e[k]  # NumPy: a scalar for 1-D input, as before


def r_nm_groups(w, pattern=NM(2, 4)):
    """r_{N:M} of every group of ``pattern.m`` consecutive entries along the last axis.

    Returns an array of shape ``w.shape[:-1] + (w.shape[-1] // m,)`` in float64 (a tensor
    on ``w``'s device for tensor input).
    """
    pattern = check_nm(pattern, below_m=True)
    g = pattern._groups(_as_array(w), "w")
    return elementary_symmetric(namespace(g).abs(g), pattern.n + 1)


def r_nm(w, pattern=NM(2, 4)) -> float:
    """Total r_{N:M}(w): the sum of ``r_nm_groups`` over all groups (prox24-kubler eq. 8)."""
    e = r_nm_groups(w, pattern)
    return float(namespace(e).sum(e))


def r_nm_grad(w, pattern=NM(2, 4)):
    """Gradient of r_{N:M} on the active set {w_i != 0}.

    d r / d w_i = sign(w_i) e_N(|w_j| : j != i in the group of i). Off the active set
    r is not differentiable; there the returned entry is 0 (the minimum-norm element
    of the Clarke subdifferential when e_N of the others is finite). Float dtype of ``w``
    (float64 for integer NumPy input); tensors stay tensors.
    """
    w = _as_array(w)
    pattern = check_nm(pattern, below_m=True)
    n, m = pattern.n, pattern.m
    g = pattern._groups(w, "w")
    xp = namespace(g)
    g = xp.astype(xp.abs(g), xp.float64)
    if n > 0:
        cols = [g[..., j] for j in range(m)]
        out = xp.stack([elementary_symmetric(xp.stack(cols[:i] + cols[i + 1:], axis=-1), n)
                        for i in range(m)], axis=-1)
    else:
        out = xp.ones(g.shape, dtype=xp.float64, device=device(g))
    grad = xp.astype(xp.sign(w), xp.float64) * xp.reshape(out, w.shape)
    return xp.astype(grad, xp.result_type(w.dtype, xp.float32), copy=False)


def prox_objective(w, y, lam, pattern=NM(2, 4)) -> np.ndarray:
    """Per-group prox objective 0.5 ||w - y||^2 + lam r_{N:M}(w), in float64 (NumPy).

    Returns shape ``y.shape[:-1] + (y.shape[-1] // pattern.m,)``.
    """
    pattern = check_nm(pattern, below_m=True)
    w = np.asarray(w, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if w.shape != y.shape:
        raise ValueError(f"w has shape {w.shape}, y has shape {y.shape}; they must match")
    d = pattern._groups(w - y, "w - y")
    return 0.5 * np.sum(d * d, axis=-1) + lam * r_nm_groups(w, pattern)


# --------------------------------------------------------------------------------------
# Regularizer objects
# --------------------------------------------------------------------------------------


def _check_groups(x, pattern):
    if x.ndim == 0:
        raise ValueError("x must have at least one axis")
    if x.shape[-1] % pattern.m != 0:
        raise ValueError(f"last axis of x has length {x.shape[-1]}, not divisible by "
                         f"m={pattern.m}")


def _soft(v, c, xp):
    """sign(v) max(|v| - c, 0), with +0.0 (never -0.0) where it is zero."""
    d = xp.abs(v) - c
    t = xp.where(d > 0, d, zero(d))
    return xp.where(v < 0, 0.0 - t, t)


def _hard(v, c, xp):
    """v where |v| > sqrt(2 c), else 0: the l0 prox (0 at the tie |v| = sqrt(2 c))."""
    return xp.where(xp.abs(v) > float(np.sqrt(2.0 * c)), v, zero(v))


@parallel_kernel(PASS_MIN_ENTRIES)
def _tail_prox_groups(g, n, kind, c, out):
    """The prox of ``c R`` on every row of ``g`` (G, m) into ``out``: entries of rank >= n
    (rank = larger magnitudes, or equal ones at a smaller index, before it) get the scalar
    prox of R0 (kind 0: hard threshold sqrt(2c), 0 at equality), R1 (kind 1: soft
    threshold c) or R2 (kind 2: v / (1 + c)), in float64, rounded once on store."""
    G, m = g.shape
    thr = np.sqrt(2.0 * c)
    for i in prange(G):  # groups are independent: threads as EnumALM's kernel
        for t in range(m):
            v = np.float64(g[i, t])
            if group_rank(g, i, t) < n:
                out[i, t] = g[i, t]
            elif kind == 0:
                out[i, t] = v if abs(v) > thr else 0.0
            elif kind == 1:
                d = abs(v) - c
                d = d if d > 0.0 else 0.0
                out[i, t] = 0.0 - d if v < 0.0 else d
            else:
                out[i, t] = v / (1.0 + c)


@register_kernel("tail_prox", "numpy")
def tail_prox(x, n, m, kind, c):
    """The NumPy/Numba kernel of the R0 / R1 / R2 prox (``kind`` 0, 1, 2) of ``c R`` on the
    groups of ``m`` along the last axis; twin: ``_TailRegularizer._prox_array_api``."""
    g = np.ascontiguousarray(x).reshape(-1, m)
    out = np.empty_like(g)
    _tail_prox_groups(g, int(n), int(kind), float(c), out)
    return out.reshape(x.shape)


class Regularizer:
    """Base of the regularizer objects: the weight ``lam``, the value, the prox, the gradient.

    Subclasses define ``_value(x)`` (R(x) summed, a float) and ``_prox(x, c)`` (the prox of
    ``c * R`` with ``c = tau * lam``); ``x`` is already checked (float32 / float64, finite).
    """

    #: The N:M pattern whose exact membership the prox produces at a finite lam (None: never).
    exact_pattern = None
    #: p with R(c w) = |c|^p R(w) for every real c (R is positively homogeneous of degree p).
    degree: int
    #: The name in :data:`REGULARIZERS` (None: not registered).
    name = None
    #: Also a run of its own of the torch adapter, ``sparseopt prune --method prox-NAME``
    #: (the App. C rows of prox24-kubler Table 2).
    variant = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            REGULARIZERS[cls.name] = cls

    @classmethod
    def for_pattern(cls, pattern, *, prox_method="alm", prox_tol=None):
        """The regularizer of a pruning run to ``pattern`` (``prox_method`` and ``prox_tol``
        reach the solver of an exact prox; an entrywise penalty ignores all three)."""
        return cls()

    def __init__(self, lam=1.0):
        self.lam = lam

    @property
    def lam(self) -> float:
        """The weight, finite and >= 0 (checked on every assignment)."""
        return self._lam

    @lam.setter
    def lam(self, value):
        if isinstance(value, NM):
            raise ValueError(f"lam must be a real number, got the pattern {value!r}: pass it "
                             "as pattern=...")
        self._lam = check_real(value, "lam")

    def __call__(self, x) -> float:
        """The value ``lam * R(x)``, summed over all entries / groups, as a Python float."""
        x = check_float_array(x, "x")
        return self.lam * self._value(x)

    def prox(self, x, tau, *, out=None):
        """argmin_w 0.5 ||w - x||^2 + tau * lam * R(w); same shape, dtype, library and device.

        ``x`` is not modified unless it is ``out``. ``out`` (NumPy ``x`` only): a writeable
        C-contiguous array of x's shape and dtype that receives the result and is returned;
        may be ``x`` itself. Raises ValueError unless ``tau`` is finite and > 0.
        """
        x = check_float_array(x, "x")
        tau = check_real(tau, "tau", positive=True)
        if out is None:
            return self._prox(x, tau * self.lam)
        if not isinstance(x, np.ndarray):
            raise ValueError(f"out is supported for NumPy x only, got x of type "
                             f"{type(x).__name__}")
        return self._prox_into(x, tau * self.lam, check_out(out, x))

    def _prox_into(self, x, c, out):
        """``_prox(x, c)`` written into ``out``; subclasses whose kernel writes in place
        override it."""
        np.copyto(out, self._prox(x, c))
        return out

    def grad(self, x):
        """Gradient of ``lam * R`` at ``x``; only where R is differentiable."""
        raise NotImplementedError(
            f"{type(self).__name__}: R is not differentiable ({self._nondifferentiable}); use "
            "prox(x, tau)")

    def _params(self) -> str:
        return f"lam={self.lam!r}"

    def __repr__(self):
        return f"{type(self).__name__}({self._params()})"


class L0(Regularizer):
    """``lam * ||x||_0`` (number of nonzeros), elementwise.

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.

    Notes
    -----
    ``prox(x, tau)`` is hard thresholding at ``sqrt(2 * tau * lam)``: keep x_i where
    |x_i| > sqrt(2 tau lam), else 0. Per coordinate, keeping x_i costs tau lam and zeroing it
    costs x_i^2 / 2, so x_i is kept iff x_i^2 / 2 > tau lam. (Not tau lam: that threshold is
    the l1 one.) At equality both choices are optimal; we return 0. Not differentiable;
    ``exact_pattern`` is None (no group structure).

    Examples
    --------
    >>> import numpy as np
    >>> L0(0.5).prox(np.array([0.9, -1.1, 2.0]), 1.0)   # threshold sqrt(2 * 0.5) = 1
    array([ 0. , -1.1,  2. ])
    """

    name = "l0"

    _nondifferentiable = "piecewise constant, jumps at 0"
    degree = 0

    def _value(self, x):
        xp = namespace(x)
        return float(xp.sum(xp.astype(x != 0, xp.int64)))

    def _prox(self, x, c):
        xp = namespace(x)
        keep = xp.abs(xp.astype(x, xp.float64, copy=False)) > float(np.sqrt(2.0 * c))
        return xp.where(keep, x, zero(x))


class L1(Regularizer):
    """``lam * ||x||_1``, elementwise.

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.

    Notes
    -----
    ``prox(x, tau)`` is soft-thresholding at ``tau * lam``: sign(x) max(|x| - tau lam, 0),
    computed in float64 and rounded once to the dtype of x. ``grad`` raises (|.| at 0);
    ``exact_pattern`` is None.

    Examples
    --------
    >>> import numpy as np
    >>> L1(0.5).prox(np.array([0.25, -1.5, 2.0]), 1.0)
    array([ 0. , -1. ,  1.5])
    """

    name = "l1"

    _nondifferentiable = "|x_i| at 0"
    degree = 1

    def _value(self, x):
        xp = namespace(x)
        return float(xp.sum(xp.abs(xp.astype(x, xp.float64))))

    def _prox(self, x, c):
        xp = namespace(x)
        return xp.astype(_soft(xp.astype(x, xp.float64), c, xp), x.dtype)


class RNM(Regularizer):
    """``lam * r_{N:M}`` on every group of M consecutive entries along the last axis.

    r_{N:M}(w) = sum over |S| = N + 1 of prod_{j in S} |w_j| = e_{N+1}(|w|)
    (prox24-kubler eq. 6), zero iff the group has at most N nonzeros (Fact 2).

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.
    pattern : NM, keyword-only, default NM(2, 4)
        N:M with ``0 <= n < m``.
    method : {"alm", "pgd", "ipm"}, keyword-only, default "alm"
        The solver of :func:`sparseopt.prox.prox_nm` (pgd / ipm: 2:4 and 2:3 only when
        n >= 2). Tensors on an accelerator use the torch adapter's kernel (2:4, "alm").
    tol : float, optional, keyword-only
        Passed on to ``prox_nm`` (default: its own).

    Notes
    -----
    ``prox(x, tau)`` is the exact prox of prox24-kubler eq. 7 (for N:M) with weight
    ``tau * lam``: ``kernel("prox_nm", x)(x, tau * lam, n, m, method=..., tol=...)``, i.e.
    :func:`sparseopt.prox.prox_nm` for NumPy arrays and CPU tensors. For lam large enough
    (depending on x) every group of the prox is exactly N-sparse, so ``exact_pattern`` is
    the pattern. ``grad`` is ``lam * r_nm_grad``: sign(w_i) lam e_N(|w_j| : j != i) on the
    active set, 0 off it (r is not differentiable there).

    References
    ----------
    prox24-kubler Sec. 3.2-3.3 (eq. 6, 7); proxsparse-liu Alg. 3 (EnumALM).

    Examples
    --------
    >>> import numpy as np
    >>> P = RNM(5.0)
    >>> P.prox(np.array([3.0, -0.1, 2.0, 0.2]), 1.0)
    array([3., 0., 2., 0.])
    >>> P(np.array([1.0, 1.0, 1.0, 0.0]))     # 5 * |w1 w2 w3|
    5.0
    """

    name = "rnm"

    @classmethod
    def for_pattern(cls, pattern, *, prox_method="alm", prox_tol=None):
        return cls(pattern=pattern, method=prox_method, tol=prox_tol)

    def __init__(self, lam=1.0, *, pattern=NM(2, 4), method="alm", tol=None):
        super().__init__(lam)
        pattern = check_nm(pattern, below_m=True)  # r_{N:M} is defined for N < M
        from .prox import METHODS  # here: sparseopt.prox imports this module

        check_choice(method, "method", METHODS)
        if (METHODS[method] is not None and pattern.n >= 2
                and (pattern.n, pattern.m) not in METHODS[method]):
            raise ValueError(f"method={method!r} supports (n, m) in {METHODS[method]} "
                             f"(n >= 2), got {pattern}; use method='alm' for general N:M")
        self.pattern = pattern
        self.method = method
        self.tol = check_real(tol, "tol", positive=True, allow_none=True)

    @property
    def exact_pattern(self):
        return self.pattern

    @property
    def degree(self):
        return self.pattern.n + 1  # e_{N+1} is homogeneous of degree N + 1

    def _value(self, x):
        _check_groups(x, self.pattern)
        return r_nm(x, self.pattern)

    def _prox(self, x, c):
        return self._prox_nm(x, c)

    def _prox_into(self, x, c, out):
        return self._prox_nm(x, c, out=out)

    def _prox_nm(self, x, c, **out):
        """The prox_nm kernel for x's array type; ``out=`` only where it is given (the
        accelerator kernels take none). A NumPy x goes to ``prox_nm``'s solver without its
        argument checks: ``prox`` has checked x (finite, float) and c, ``__init__`` the
        method and tol, ``_check_groups`` the shape."""
        _check_groups(x, self.pattern)
        n, m = self.pattern.n, self.pattern.m
        if isinstance(x, np.ndarray):
            from .prox import _prox_nm_valid  # here: sparseopt.prox imports this module

            return _prox_nm_valid(x, float(c), n, m, self.method, self.tol, None,
                                  out.get("out"), name=None)
        return kernel("prox_nm", x)(x, c, n, m, method=self.method, tol=self.tol, **out)

    def grad(self, x):
        """Gradient of ``lam * r_{N:M}`` on the active set (0 off it); dtype of x."""
        x = check_float_array(x, "x")
        _check_groups(x, self.pattern)
        return self.lam * r_nm_grad(x, self.pattern)

    def _params(self):
        return (f"lam={self.lam!r}, pattern={self.pattern!r}, method={self.method!r}, "
                f"tol={self.tol!r}")


class _TailRegularizer(Regularizer):
    """``lam * R`` with R a penalty on the M - N smallest magnitudes of every group.

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.
    pattern : NM, keyword-only, default NM(2, 4)
        The groups (m consecutive entries along the last axis) and N, ``0 <= n <= m``.

    Notes
    -----
    With a = |w| of a group sorted descending, R(w) = sum_{i > N} h(a_i) for a per-entry
    penalty h: 1[a > 0] (R0), a (R1), a^2 / 2 (R2) (prox24-kubler App. C eq. 25-27 for 2:4,
    generalized to N:M; zero exactly on N-sparse groups for R0 and R1, and for R2).

    Prox (eq. 28, 29). R(w) = min over index sets T with |T| = M - N of sum_{i in T}
    h(|w_i|): the minimum picks the M - N smallest magnitudes because h is non-decreasing.
    Then

        min_w 0.5||w - x||^2 + c R(w)
            = min_T sum_{i in T} min_{w_i} [0.5 (w_i - x_i)^2 + c h(|w_i|)]

    (entries outside T are free, so w_i = x_i there). The inner value
    phi(x_i) = min_w 0.5 (w - x_i)^2 + c h(|w|) is non-decreasing in |x_i| for all three h,
    so the best T is the M - N smallest |x_i| (ties: the later index, as ``NM.mask`` keeps
    the smaller one), which get the scalar prox: hard thresholding at sqrt(2c) (R0),
    soft-thresholding at c (R1), shrinkage by 1 / (1 + c) (R2), with c = tau * lam; the top
    N keep x_i. For 2:4 these are the formulas below eq. 29. The tail is found by a stable
    argsort of |x| per group and its inverse (ranks), as in ``NM.mask``: no scatter, so it
    runs on tensors too. Computed in float64, rounded once to the dtype of x.
    """

    def __init__(self, lam=1.0, *, pattern=NM(2, 4)):
        super().__init__(lam)
        self.pattern = check_nm(pattern)

    @classmethod
    def for_pattern(cls, pattern, *, prox_method="alm", prox_tol=None):
        return cls(pattern=pattern)

    @property
    def exact_pattern(self):
        return self.pattern

    def _tail(self, x):
        """True on the M - N smallest magnitudes of every group (ties: the later index)."""
        return ~self.pattern.mask(x)

    def _value(self, x):
        xp = namespace(x)
        a = xp.abs(xp.astype(x, xp.float64))
        tail = xp.where(self._tail(x), a, zero(a))
        return float(xp.sum(self._h(tail, xp)))

    def _prox(self, x, c):
        if numpy_path(x):  # the Numba kernel; the array-API code below is its twin
            _check_groups(x, self.pattern)
            return kernel("tail_prox", x)(x, self.pattern.n, self.pattern.m, self._kind, c)
        return self._prox_array_api(x, c)

    def _prox_array_api(self, x, c):
        """The prox by ranks from a stable argsort (any array library, any device)."""
        xp = namespace(x)
        tail = self._tail(x)
        shrunk = xp.astype(self._scalar_prox(xp.astype(x, xp.float64), c, xp), x.dtype)
        return xp.where(tail, shrunk, x)

    def _params(self):
        return f"lam={self.lam!r}, pattern={self.pattern!r}"


class R0(_TailRegularizer):
    """``lam * R0``: the number of nonzeros beyond the N largest magnitudes, per group.

    R0(w) = #{i > N : a_i > 0} = max(||w||_0 - N, 0) with a = sort(|w|) descending
    (prox24-kubler App. C eq. 25: 0, 1 or 2 for 2:4). Summed over the groups of
    ``pattern.m`` entries along the last axis.

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.
    pattern : NM, keyword-only, default NM(2, 4)
        The groups and N, ``0 <= n <= m``.

    Notes
    -----
    ``prox(x, tau)``: the N largest |x| of each group are kept, the others are hard
    thresholded at sqrt(2 tau lam) (0 at equality); the proof (eq. 28, 29) is in the
    docstring of ``_TailRegularizer``. For tau lam > max x^2 / 2 every group is N-sparse, so
    ``exact_pattern`` is the pattern. Not differentiable (``grad`` raises).

    Examples
    --------
    >>> import numpy as np
    >>> R0(1.0).prox(np.array([3.0, -0.5, 1.5, 2.0]), 1.0)   # keep 3, 2; 1.5 > sqrt(2)
    array([3. , 0. , 1.5, 2. ])
    >>> R0(1.0, pattern=NM(2, 4))(np.array([3.0, -0.5, 1.5, 2.0]))
    2.0
    """

    name = "R0"
    variant = True

    _nondifferentiable = "piecewise constant"
    degree = 0
    _kind = 0

    @staticmethod
    def _h(a, xp):
        return xp.astype(a > 0, xp.float64)

    @staticmethod
    def _scalar_prox(v, c, xp):
        return _hard(v, c, xp)


class R1(_TailRegularizer):
    """``lam * R1``: the sum of the M - N smallest magnitudes, per group.

    R1(w) = a_{N+1} + ... + a_M with a = sort(|w|) descending (prox24-kubler App. C eq. 26).

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.
    pattern : NM, keyword-only, default NM(2, 4)
        The groups and N, ``0 <= n <= m``.

    Notes
    -----
    ``prox(x, tau)``: the N largest |x| of each group are kept, the others are soft
    thresholded at tau lam (eq. 28, 29). For tau lam >= max |x| every group is N-sparse, so
    ``exact_pattern`` is the pattern. Not differentiable (``grad`` raises).

    Examples
    --------
    >>> import numpy as np
    >>> R1(0.5).prox(np.array([2.0, 1.5, 1.2, -0.4]), 1.0)
    array([2. , 1.5, 0.7, 0. ])
    """

    name = "R1"
    variant = True

    _nondifferentiable = "|w_i| at 0, and where the sorted order of |w| changes"
    degree = 1
    _kind = 1

    @staticmethod
    def _h(a, xp):
        return a

    @staticmethod
    def _scalar_prox(v, c, xp):
        return _soft(v, c, xp)


class R2(_TailRegularizer):
    """``lam * R2``: half the sum of squares of the M - N smallest magnitudes, per group.

    R2(w) = (a_{N+1}^2 + ... + a_M^2) / 2 with a = sort(|w|) descending (prox24-kubler
    App. C eq. 27).

    Parameters
    ----------
    lam : float, default 1.0
        Weight, finite and >= 0.
    pattern : NM, keyword-only, default NM(2, 4)
        The groups and N, ``0 <= n <= m``.

    Notes
    -----
    ``prox(x, tau)``: the N largest |x| of each group are kept, the others are shrunk to
    x_i / (1 + tau lam) (eq. 28, 29). A nonzero entry stays nonzero at every finite lam, so
    R2's prox never reaches exact N:M sparsity ("R2 does not lead to exact 2:4 sparsity for
    finite lambda", App. C): ``exact_pattern`` is None.

    ``grad(x)`` = lam * x on the M - N smallest |x| of each group, 0 on the N largest. This
    is the gradient wherever the N-th and (N+1)-th largest |x| of every group differ (or are
    both 0); at such a tie R2 is not differentiable and the value returned is the gradient
    of the branch that the tie rule of ``NM.mask`` selects (the smaller index is kept).

    Examples
    --------
    >>> import numpy as np
    >>> R2(0.5).prox(np.array([2.0, 1.5, 1.2, 0.3]), 1.0)
    array([2. , 1.5, 0.8, 0.2])
    """

    name = "R2"
    variant = True

    degree = 2
    _kind = 2

    @staticmethod
    def _h(a, xp):
        return 0.5 * a * a

    @staticmethod
    def _scalar_prox(v, c, xp):
        return v / (1.0 + c)

    @property
    def exact_pattern(self):
        return None

    def grad(self, x):
        """Gradient of ``lam * R2``: ``lam * x`` on the tail of every group, 0 elsewhere."""
        x = check_float_array(x, "x")
        xp = namespace(x)
        return xp.where(self._tail(x), self.lam * x, zero(x))
