"""Iterative hard thresholding (IHT) on a generic smooth objective (maiht-wen eq. 3, Alg. 1).

Three forms share one iteration x <- prox(x - step * grad f(x)):

- constrained (``pattern``): prox is the projection onto a sparsity pattern, TopK (keep the k
  largest |x| per row) or NM (keep the n largest per group of m), maiht-wen App. D.3;
- l0-penalised (``lam``): prox is hard thresholding H_{sqrt(2 step lam)} (Prop. 2.1, eq. 3);
- adaptive (``target_nnz``): the penalised form with lam updated every iteration so that the
  support size approaches ``target_nnz`` (Sec. 2.4, Alg. 1), then projection onto the
  ``target_nnz`` largest entries and refinement on that fixed support.

The private helpers here are shared with :mod:`sparseopt.solvers.maiht`.

The iterations are written against the array API (:mod:`sparseopt.backend`): an objective
built on torch tensors (:class:`~sparseopt.objectives.LayerLoss`) is solved with torch on the
tensors' device and ``x`` comes back as a tensor. The history is always NumPy float64.
"""

from __future__ import annotations

import math
import time

import array_api_compat
import numpy as np

from ..backend import device, is_numpy, namespace, numpy_dtype, zero
from ..patterns import NM, TopK
from ..validation import check_finite, check_int, check_real
from ..result import MAX_ITER, SUCCESS
from .result import HISTORY_KEYS, History, SolverResult

__all__ = ["iht"]

_KEYS = HISTORY_KEYS + ("loss",)
_NUMPY = namespace(np.empty(0))


# ----------------------------------------------------------------------------- shared helpers


def hard_threshold(v, threshold: float):
    """H_t(v): keep entries with |v| > t, zero the rest (maiht-wen Prop. 2.1). New array."""
    xp = namespace(v)
    return xp.where(xp.abs(v) > threshold, v, zero(v))


def keep_largest_global(x, s: int):
    """Boolean mask of the ``s`` largest |x| over the whole array (P_s of maiht-wen Alg. 1 line 7);
    ties go to the smaller flat index."""
    xp = namespace(x)
    flat = TopK(int(s)).mask(xp.reshape(xp.abs(x), (1, -1)))
    return xp.reshape(flat, tuple(x.shape))


def count_nonzero(x) -> int:
    """||x||_0 as a Python int (NumPy's count_nonzero for arrays: it is the faster one)."""
    if isinstance(x, np.ndarray):
        return int(np.count_nonzero(x))
    xp = namespace(x)
    return int(xp.sum(xp.astype(x != 0, xp.int64)))


def frobenius_norm(x) -> float:
    """||x||_F as a Python float, in x's dtype (``np.linalg.norm`` for arrays, whose dot-product
    rounding the NumPy results keep)."""
    if isinstance(x, np.ndarray):
        return float(np.linalg.norm(x))
    return float(namespace(x).linalg.vector_norm(x))


def _quantile_abs(v, q: float) -> float:
    """The q-quantile of |v| (NumPy's default 'linear' rule) as a float."""
    if isinstance(v, np.ndarray):
        return float(np.quantile(np.abs(v), q))
    xp = namespace(v)
    a = xp.sort(xp.reshape(xp.abs(v), (-1,)))
    pos = q * (a.shape[0] - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, a.shape[0] - 1)
    t = pos - lo
    a_lo, a_hi = float(a[lo]), float(a[hi])
    # NumPy's lerp: from the nearer end
    return a_lo + (a_hi - a_lo) * t if t < 0.5 else a_hi - (a_hi - a_lo) * (1.0 - t)


def _solver_dtype(xp, dtype):
    """The objective's dtype as a dtype of ``xp`` (np.dtype for NumPy, as before)."""
    if is_numpy(xp):
        return np.dtype(dtype if dtype is not None else np.float64)
    if dtype is None:
        return xp.float64
    if isinstance(dtype, (np.dtype, type, str)):
        raise ValueError(f"x0 is a {xp.__name__.split('.')[-1]} array but the objective "
                         f"computes with NumPy (dtype {np.dtype(dtype)}): pass x0 as a NumPy "
                         "array, or build the objective on tensors (LayerLoss)")
    return dtype


class _Problem:
    """Validated inputs common to IHT and mAIHT."""

    def __init__(self, objective, pattern, lam, target_nnz, x0, step, max_iter, tol, mu=0.0):
        for attr in ("shape", "value", "grad"):
            if not hasattr(objective, attr):
                raise ValueError(f"objective must have .{attr} (see sparseopt.objectives)")
        shape = tuple(objective.shape)
        size = int(np.prod(shape))
        if pattern is not None and lam is not None:
            raise ValueError("give either pattern (constrained form) or lam (l0-penalised form), not both")
        if pattern is not None and target_nnz is not None:
            raise ValueError("target_nnz adapts lam of the penalised form; it cannot be combined with pattern")
        if pattern is None and lam is None and target_nnz is None:
            raise ValueError("one of pattern, lam or target_nnz is required")
        if pattern is not None:
            if not isinstance(pattern, (TopK, NM)):
                raise ValueError(f"pattern must be a sparseopt TopK or NM, got {type(pattern).__name__}")
            if len(shape) == 0:
                raise ValueError("pattern needs a variable with at least one axis")
            if isinstance(pattern, TopK) and pattern.k > shape[-1]:
                raise ValueError(f"pattern TopK(k={pattern.k}) has k larger than the last axis "
                                 f"length {shape[-1]}")
            if isinstance(pattern, NM) and shape[-1] % pattern.m != 0:
                raise ValueError(f"pattern {pattern.n}:{pattern.m} needs the last axis "
                                 f"({shape[-1]}) divisible by m")
        lam = check_real(lam, "lam", allow_none=True)
        if target_nnz is not None:
            target_nnz = check_int(target_nnz, "target_nnz", minimum=0, maximum=size)
        check_int(max_iter, "max_iter", minimum=0)
        check_real(tol, "tol")
        check_real(mu, "mu")

        # the array library of the problem: that of the objective's reference point and x0
        # (ValueError when they differ), NumPy for array_like input
        ref = getattr(objective, "reference", None)
        arrays = [a for a in (ref, x0) if a is not None and array_api_compat.is_array_api_obj(a)]
        xp = namespace(*arrays) if arrays else _NUMPY
        dtype = _solver_dtype(xp, getattr(objective, "dtype", None))
        if x0 is None:
            if ref is None:
                x0 = np.zeros(shape, dtype=dtype)
            else:
                x0 = xp.asarray(ref, dtype=dtype, copy=True)
        elif is_numpy(xp):
            x0 = np.asarray(x0)
            if x0.shape != shape:
                raise ValueError(f"x0 must have shape {shape}, got {x0.shape}")
            if x0.dtype.kind != "f":
                x0 = x0.astype(dtype)
            check_finite(x0, "x0")
            x0 = x0.copy()  # never alias the caller's array
        else:
            if tuple(x0.shape) != shape:
                raise ValueError(f"x0 must have shape {shape}, got {tuple(x0.shape)}")
            if ref is not None and device(x0) != device(ref):
                raise ValueError(f"x0 is on {device(x0)}, the objective's data on {device(ref)}")
            if numpy_dtype(x0.dtype).kind != "f":
                x0 = xp.astype(x0, dtype)
            check_finite(x0, "x0")
            x0 = xp.asarray(x0, copy=True)  # never alias the caller's array

        if mu > 0:
            # maiht-wen eq. 5: f(w) + mu/2 ||w - w_hat||^2 with w_hat the starting point
            objective = _Stabilized(objective, float(mu), xp.asarray(x0, copy=True))

        if step is None:
            if not hasattr(objective, "lipschitz"):
                raise ValueError("objective has no lipschitz(); pass step explicitly")
            L = float(objective.lipschitz())
            if not np.isfinite(L) or L <= 0:
                raise ValueError(f"cannot take the default step 1/L: objective.lipschitz() = {L}")
            step = 1.0 / L
        else:
            check_real(step, "step", positive=True)

        self.objective = objective
        self.xp = xp
        self.pattern, self.lam, self.target_nnz = pattern, lam, target_nnz
        self.x0, self.step = x0, float(step)
        self.max_iter, self.tol, self.mu = int(max_iter), float(tol), float(mu)
        self.size = size
        self.mode = "constrained" if pattern is not None else ("adaptive" if target_nnz is not None else "penalized")
        if self.mode == "adaptive" and lam is None:
            self.lam = self.lambda_init()

    def value_and_grad(self, x):
        f = self.objective
        if hasattr(f, "value_and_grad"):
            return f.value_and_grad(x)
        return f.value(x), f.grad(x)

    def value_grad_loss(self, x):
        """(the minimised f at x, its gradient, the caller's loss at x): the loss is f without
        the mu term of eq. 5, from the same pass as the value (for the history)."""
        if isinstance(self.objective, _Stabilized):
            return self.objective.value_grad_loss(x)
        fval, g = self.value_and_grad(x)
        return fval, g, fval

    def lambda_init(self) -> float:
        """Quantile rule of maiht-wen Sec. 2.4: lam = Q_0.01(|W_hat|)^2 / (2 step), which keeps 99%
        of the entries in the first thresholding. The quantile is taken of the first gradient-step
        point x0 - step grad f(x0); for the layer loss started at W_hat this is W_hat itself
        (grad f(W_hat) = 0), and for x0 = 0 it is -step grad f(0), which is not degenerate."""
        v = self.x0 - self.step * self.objective.grad(self.x0)
        q = _quantile_abs(v, 0.01)
        return q * q / (2 * self.step)

    def prox(self, v, lam):
        """Projection onto the pattern, or hard thresholding at sqrt(2 step lam)."""
        if self.pattern is not None:
            return self.pattern.project(v)
        return hard_threshold(v, math.sqrt(2.0 * self.step * lam))

    def penalized(self, fval, x, lam):
        """F = f + lam ||x||_0 (penalised forms) or f (constrained form)."""
        if self.pattern is not None:
            return fval
        return fval + lam * count_nonzero(x)

    def update_lambda(self, lam, x):
        """lam <- lam (1 + (||x||_0 - s) / (d1 d2)) (maiht-wen Sec. 2.4, Alg. 1 line 4)."""
        return lam * (1.0 + (count_nonzero(x) - self.target_nnz) / self.size)

    def lam_record(self, lam):
        return np.nan if self.pattern is not None else lam


class _Stabilized:
    """f(w) + mu/2 ||w - w_hat||^2 (maiht-wen eq. 5); Lipschitz constant L_f + mu."""

    def __init__(self, base, mu, center):
        self.base, self.mu, self.center = base, mu, center
        self._xp = namespace(center)
        self.shape = tuple(base.shape)
        self.dtype = getattr(base, "dtype", np.float64)
        self.reference = getattr(base, "reference", None)
        self.affine_gradient = bool(getattr(base, "affine_gradient", False))

    def _diff(self, w):
        """w - center (array_like w is accepted for a NumPy problem, as before)."""
        if isinstance(self.center, np.ndarray):
            return np.asarray(w) - self.center
        return w - self.center

    def _penalty_of(self, diff) -> float:
        """mu/2 ||diff||^2 with diff = w - w_hat, summed in float64."""
        xp = self._xp
        d = xp.astype(diff, xp.float64, copy=False)
        return 0.5 * self.mu * float(xp.sum(d * d))

    def penalty(self, w) -> float:
        """mu/2 ||w - w_hat||^2, summed in float64 (an elementwise pass, no product)."""
        return self._penalty_of(self._diff(w))

    def value(self, w):
        return float(self.base.value(w)) + self.penalty(w)

    def grad(self, w):
        return self.base.grad(w) + self.mu * self._diff(w)

    def value_and_grad(self, w):
        return self.value_grad_loss(w)[:2]

    def value_grad_loss(self, w):
        """(value, gradient, the base loss f(w)) from one difference w - w_hat; the loss is
        the value minus the penalty (what the history records as ``loss``)."""
        diff = self._diff(w)
        p = self._penalty_of(diff)
        if hasattr(self.base, "value_and_grad"):
            v, g = self.base.value_and_grad(w)
        else:
            v, g = self.base.value(w), self.base.grad(w)
        fval = float(v) + p
        return fval, g + self.mu * diff, fval - p

    def lipschitz(self):
        return float(self.base.lipschitz()) + self.mu


def refine(problem, x, support, steps, hist, t0, lam_rec):
    """Projected gradient on a fixed support T: x <- P_T(x - step grad f(x)) (maiht-wen Alg. 1
    lines 8-10; for LayerLoss this is the masked gradient step of prox24-kubler eq. 5).
    Appends to ``hist``; returns the last iterate."""
    xp = problem.xp
    z = zero(x)
    _, g = problem.value_and_grad(x)
    for _ in range(steps):
        x_new = xp.astype(xp.where(support, x - problem.step * g, z), x.dtype, copy=False)
        res = frobenius_norm(x_new - x) / problem.step
        x = x_new
        # one product per step: the value recorded and the next step's gradient
        fval, g, loss = problem.value_grad_loss(x)
        hist.append(objective=fval, loss=loss, support=count_nonzero(x),
                    lam=lam_rec, step=problem.step, residual=res, time=time.perf_counter() - t0)
    return x


def finish(problem, x, hist, t0, nit, stop_reason, status, refine_steps, extra_info):
    """Alg. 1 lines 7-11: fix the support (P_s for the adaptive form) and refine."""
    info = dict(extra_info)
    info["mode"] = problem.mode
    info["step"] = problem.step
    if problem.mode == "adaptive":
        support = keep_largest_global(x, problem.target_nnz) & (x != 0)
        if problem.target_nnz > 0 and count_nonzero(x) > problem.target_nnz:
            info["projected_to_target"] = True
        x = problem.xp.where(support, x, zero(x))
    else:
        if problem.pattern is not None and not problem.pattern.satisfied(x):
            # only when no thresholding step ran (max_iter = 0): never return an infeasible x
            x = problem.pattern.project(x)
            info["projected_to_pattern"] = True
        support = x != 0
    info["refine_start"] = nit
    if refine_steps:
        # the support is fixed: the history records f, lam is not in force
        x = refine(problem, x, support, refine_steps, hist, t0, np.nan)
    return SolverResult(x=x, history=hist.as_dict(), nit=nit + refine_steps,
                        stop_reason=stop_reason, status=status, info=info)


# ----------------------------------------------------------------------------- IHT


def iht(objective, *, pattern=None, lam=None, target_nnz=None, x0=None, step=None,
        max_iter=1000, tol=1e-8, refine_steps=0, refit=False):
    """Iterative hard thresholding: x_{k+1} = prox(x_k - step grad f(x_k)).

    Parameters
    ----------
    objective : sparseopt.objectives.Objective
        Smooth f with ``shape``, ``value``, ``grad`` (and ``lipschitz`` for the default step).
        An objective on torch tensors (``LayerLoss``) is solved with torch on their device and
        ``x`` is a tensor.
    pattern : TopK or NM, optional, keyword-only
        Constrained form min f(x) s.t. x in pattern (along the last axis of x).
    lam : float, optional, keyword-only
        Penalised form min F(x) = f(x) + lam ||x||_0. With ``target_nnz``: the initial lam.
    target_nnz : int, optional, keyword-only
        Adaptive form: number of nonzeros wanted in the whole of x (maiht-wen Alg. 1).
    x0 : array, optional, keyword-only
        Start. Default: ``objective.reference`` when it has one (W* for LayerLoss, as in
        Alg. 1 line 2), else zeros. A tensor for an objective on tensors (same device).
    step : float, optional, keyword-only
        Step alpha; default 1/L with L = ``objective.lipschitz()``. The descent guarantee
        (Lemma 3.2) needs step < 1/L; 1/L itself keeps monotone descent (non-strict).
    max_iter : int, default 1000, keyword-only
        Iterations of the main (thresholding) stage.
    tol : float, default 1e-8, keyword-only
        Stop when the fixed-point residual ||x_{k+1} - x_k||_F / step <= tol (the norm of the
        prox-gradient map; it is 0 exactly at a step-fixed point, Def. 3.1). In the adaptive
        form it also requires ||x||_0 = target_nnz so that lam has stopped moving.
    refine_steps : int, default 0, keyword-only
        Projected gradient steps on the final support (Alg. 1 lines 7-10).
    refit : bool, default False, keyword-only
        After every thresholding step, replace x by the exact minimiser of f on the new support
        (``objective.minimize_on_support``: Quadratic, LeastSquares, LayerLoss). This is hard
        thresholding pursuit (Foucart, 2011), a debiased IHT variant; it keeps monotone descent
        because the refit never increases f on a fixed support.

    Returns
    -------
    SolverResult
        ``x``; ``history`` with one row for x0 and one per iteration: ``objective`` (F = f +
        lam ||x||_0 with the lam in force for the penalised/adaptive forms, f for the constrained
        form and the refinement), ``loss`` (f alone), ``support``, ``lam`` (NaN when
        constrained), ``step``, ``residual``, ``time``; ``info`` with ``mode``, ``step``,
        ``lam_final``, ``refine_start`` (history index where refinement begins, minus one).

    Notes
    -----
    maiht-wen eq. 3: W^{k+1} = H_{sqrt(2 alpha lam)}(W^k - alpha grad f(W^k)); App. D.3: with an
    N:M (or top-k) pattern the hard thresholding is replaced by the projection. Adaptive lam
    (Sec. 2.4): lam^{k+1} = lam^k (1 + (||W^k||_0 - s) / (d1 d2)) with lam_init from the 1%
    quantile rule (see ``lambda_init``). After the main stage the adaptive form keeps the
    ``target_nnz`` largest entries (P_s, Alg. 1 line 7) even when ``refine_steps`` = 0, so the
    output always meets the target. Remark 2.2: one step from x0 = W_hat of LayerLoss is
    magnitude pruning (grad f(W_hat) = 0).

    References
    ----------
    Wen, Zuo, Pan (ICML 2025), maiht-wen.md; Blumensath & Davies (2009); Foucart (2011).

    Examples
    --------
    >>> import numpy as np
    >>> from sparseopt import TopK
    >>> from sparseopt.objectives import LeastSquares
    >>> X = np.eye(4)
    >>> res = iht(LeastSquares(X, np.array([3.0, -1.0, 0.5, 2.0])), pattern=TopK(2))
    >>> res.x
    array([3., 0., 0., 2.])
    """
    refine_steps = check_int(refine_steps, "refine_steps", minimum=0)
    pb = _Problem(objective, pattern, lam, target_nnz, x0, step, max_iter, tol)
    if refit and not hasattr(pb.objective, "minimize_on_support"):
        raise ValueError("refit=True needs an objective with minimize_on_support "
                         "(Quadratic, LeastSquares, LayerLoss)")
    f = pb.objective
    xp = pb.xp
    hist = History(_KEYS)
    t0 = time.perf_counter()
    x = pb.x0
    lam_k = pb.lam
    fval, g = pb.value_and_grad(x)
    hist.append(objective=pb.penalized(fval, x, lam_k), loss=fval, support=count_nonzero(x),
                lam=pb.lam_record(lam_k), step=pb.step, residual=np.nan, time=0.0)
    stop_reason, status, nit = "max_iter", MAX_ITER, 0
    for k in range(pb.max_iter):
        if pb.mode == "adaptive":
            lam_k = pb.update_lambda(lam_k, x)
        x_new = xp.astype(pb.prox(x - pb.step * g, lam_k), x.dtype, copy=False)
        if refit:
            x_new = xp.astype(f.minimize_on_support(x_new != 0), x.dtype, copy=False)
        res = frobenius_norm(x_new - x) / pb.step
        x = x_new
        nit = k + 1
        fval, g = pb.value_and_grad(x)
        hist.append(objective=pb.penalized(fval, x, lam_k), loss=fval,
                    support=count_nonzero(x), lam=pb.lam_record(lam_k), step=pb.step,
                    residual=res, time=time.perf_counter() - t0)
        if res <= pb.tol and (pb.mode != "adaptive" or count_nonzero(x) == pb.target_nnz):
            stop_reason, status = "residual <= tol", SUCCESS
            break
    return finish(pb, x, hist, t0, nit, stop_reason, status, refine_steps, {"lam_final": lam_k})
