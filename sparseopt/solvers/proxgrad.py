"""Proximal gradient with a growing lambda: an objective, a regularizer, a lambda schedule
(prox24-kubler Alg. 2, for any regularizer object of :mod:`sparseopt.regularizers`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import prange

from ..backend import namespace
from ..linalg import sum_in_order
from ..regularizers import Regularizer
from ..threads import PASS_MIN_ENTRIES, parallel_kernel
from ..validation import check_choice, check_int, check_real
from ..result import MAX_ITER, SUCCESS
from .result import SolverResult

__all__ = ["proximal_gradient", "Schedule"]

#: Variables with at least this many entries show progress by default (``progress=None``).
PROGRESS_MIN_SIZE = 2**20


#: Fractions of groups in the pattern below which ``beta_start`` and from which
#: ``beta_tail`` replace ``beta``.
START_FRACTION = 0.001
TAIL_FRACTION = 0.98

MOMENTA = (None, "fista")


@dataclass(frozen=True)
class Schedule:
    """The lambda schedule and stopping rules of :func:`proximal_gradient` (prox24-kubler
    Alg. 2: lambda_k = lambda_0 beta^k, stop once x lies in the pattern).

    Attributes
    ----------
    lam0 : float
        lambda_0 > 0. With ``beta = 1`` (the default) lambda is fixed: plain proximal
        gradient on f + (lam0 / step) R.
    beta : float, default 1.0
        Growth factor of lambda per iteration, ``>= 1``.
    beta_start, beta_tail : float, optional
        Growth factors while fewer than :data:`START_FRACTION` of the groups lie in the
        pattern (before the first groups decide, lambda only has to reach the range where
        they do) and once at least :data:`TAIL_FRACTION` do (the last groups decide late and
        need a large lambda). Default: ``beta``. They need a pattern.
    stop_fraction : float, default 1.0
        Stop also once at least this fraction of the groups lies in the pattern
        (0 < stop_fraction <= 1; below 1 it needs a pattern); the caller projects the rest.
    min_iter : int, default 0
        The pattern tests stop the run only after at least this many iterations: a warm
        start that already lies in the pattern still takes them.
    tail_tol : float, default 1e-4
        For a regularizer whose prox never reaches the pattern exactly (``exact_pattern`` is
        None, e.g. R2): stop once ||x - P(x)||_F <= tail_tol ||x||_F.
    """

    lam0: float
    beta: float = 1.0
    beta_start: float | None = None
    beta_tail: float | None = None
    stop_fraction: float = 1.0
    min_iter: int = 0
    tail_tol: float = 1e-4

    def __post_init__(self):
        check_real(self.lam0, "lam0", positive=True)
        for name in ("beta", "beta_start", "beta_tail"):
            value = check_real(getattr(self, name), name, allow_none=name != "beta")
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value!r}")
        if not 0 < check_real(self.stop_fraction, "stop_fraction") <= 1:
            raise ValueError(f"stop_fraction must be in (0, 1], got {self.stop_fraction!r}")
        check_int(self.min_iter, "min_iter", minimum=0)
        check_real(self.tail_tol, "tail_tol")

    @property
    def needs_pattern(self) -> bool:
        """Whether a rule of this schedule counts groups in a pattern."""
        return (self.stop_fraction < 1 or self.beta_start is not None
                or self.beta_tail is not None)


@parallel_kernel(PASS_MIN_ENTRIES)
def _gradient_step_rows(y, g, step, out):
    """out = y - step g on 2-D arrays, ``step`` a scalar of their dtype: NumPy's rounding of
    ``y - step * g`` (the product rounded to the dtype, then the difference), in one pass,
    rows split over the Numba threads (a memory-bound pass: one core does not saturate
    the memory bus)."""
    for i in prange(y.shape[0]):
        for j in range(y.shape[1]):
            out[i, j] = y[i, j] - step * g[i, j]


@parallel_kernel(PASS_MIN_ENTRIES, fastmath={"reassoc"})
def _extrapolate_rows(y, x_new, x, coef, out):
    """out = x_new + coef (x_new - x) and the restart test sum (y - x_new)(x_new - x) in one
    pass over 2-D arrays, ``coef`` a scalar of their dtype. Every difference, product and
    ``out`` is rounded to the dtype as NumPy rounds the expressions; only the sum is
    float64, each row in an order the compiler may vectorise (``reassoc``), then the rows
    in order (rows split over the Numba threads; the row sums are kept, so the total does
    not depend on the number of threads)."""
    rows = np.empty(y.shape[0])
    for i in prange(y.shape[0]):
        row = 0.0
        for j in range(y.shape[1]):
            d = x_new[i, j] - x[i, j]
            row += np.float64((y[i, j] - x_new[i, j]) * d)
            out[i, j] = x_new[i, j] + coef * d
        rows[i] = row
    return sum_in_order(rows)


def _fused(*arrays) -> bool:
    """True when the Numba kernels apply: NumPy arrays of one float dtype and shape, not
    empty (tensors and mixed dtypes take the array-API expressions, the kernels' twins)."""
    a = arrays[0]
    return (all(isinstance(b, np.ndarray) for b in arrays) and a.ndim > 0 and a.size > 0
            and a.dtype in (np.float32, np.float64)
            and all(b.dtype == a.dtype and b.shape == a.shape for b in arrays))


def _rows(a):
    """``a`` as a 2-D array of rows along its last axis (a view for C-ordered arrays)."""
    return a if a.ndim == 2 else a.reshape(-1, a.shape[-1])


def _gradient_step(y, g, step, out=None):
    """y - step g (``step`` a Python float): fused for NumPy (into ``out`` when given; it may
    be ``g``), the expression otherwise."""
    if not _fused(y, g):
        return y - step * g
    if out is None:
        out = np.empty(y.shape, dtype=y.dtype)
    _gradient_step_rows(_rows(y), _rows(g), y.dtype.type(step), _rows(out))
    return out


def _extrapolate_xp(y, x_new, x, coef, xp):
    """:func:`_extrapolate` with array-API expressions: tensors, mixed dtypes, and the twin
    of :func:`_extrapolate_rows`."""
    uphill = float(xp.sum((y - x_new) * (x_new - x), dtype=xp.float64))
    return x_new + coef * (x_new - x), uphill


def _extrapolate(y, x_new, x, coef, xp, out=None):
    """(x_new + coef (x_new - x), sum (y - x_new)(x_new - x) accumulated in float64), the
    FISTA point and the gradient restart test, ``coef`` a Python float; one pass for NumPy
    arrays (:func:`_extrapolate_rows`), into ``out`` when given (an array apart from the
    three inputs)."""
    if not _fused(y, x_new, x):
        return _extrapolate_xp(y, x_new, x, coef, xp)
    if out is None:
        out = np.empty(x_new.shape, dtype=x_new.dtype)
    uphill = _extrapolate_rows(_rows(y), _rows(x_new), _rows(x), x_new.dtype.type(coef),
                               _rows(out))
    return out, float(uphill)


def _next_t(t: float) -> float:
    """t_k = (1 + sqrt(1 + 4 t_{k-1}^2)) / 2."""
    return (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0


def _fista_step(y, x_new, x, t, xp, out=None):
    """(y_k, t_k, restarted) from y_{k-1}, x_k, x_{k-1} and t_{k-1}: restart (t = 1, no
    extrapolation) when (y_{k-1} - x_k) . (x_k - x_{k-1}) > 0. ``out``: see _extrapolate."""
    t_new = _next_t(t)
    y_new, uphill = _extrapolate(y, x_new, x, (t - 1.0) / t_new, xp, out)
    restart = uphill > 0
    if restart:
        t_new = _next_t(1.0)
        if t != 1.0:  # the extrapolation was not 0: redo it with coefficient 0 (rare)
            y_new, _ = _extrapolate(y, x_new, x, 0.0, xp, out)
    return y_new, t_new, restart


class _Buffers:
    """Free arrays of one shape and dtype for the loop's iterates and gradients (NumPy).

    A layer of 4096 x 4096 float32 weights is 64 MiB; glibc serves every allocation above
    32 MiB by a fresh mmap whose pages the kernel zeroes and faults in again (7-10 s of
    kernel time in a ~70 s prox-pruning run at that size before, ~3 s now; issue 12).
    ``take`` reuses a released array or allocates one; ``release`` hands back the arrays
    the loop no longer holds.
    """

    def __init__(self, like):
        self.shape, self.dtype = like.shape, like.dtype
        self.free = []

    def take(self):
        return self.free.pop() if self.free else np.empty(self.shape, dtype=self.dtype)

    def release(self, arrays, keep):
        for a in arrays:
            if (a is not None and all(a is not k for k in keep)
                    and all(a is not f for f in self.free)):
                self.free.append(a)


def proximal_gradient(objective, regularizer, schedule, *, step=None, x0=None, max_iter=1000,
                      pattern=None, momentum=None, progress=None, desc="prox"):
    """x_{k+1} = prox_{lambda_k R}(y_k - step grad f(y_k)) with lambda_k of ``schedule``
    (lam0 beta^k), y_k = x_k (plain proximal gradient) or the FISTA extrapolation of x_k.

    Parameters
    ----------
    objective : Objective
        Smooth f with ``value(x)`` and ``value_and_grad(x)`` on arrays of ``objective.shape``
        (e.g. :class:`sparseopt.objectives.LayerLoss`; NumPy arrays or torch tensors).
    regularizer : regularizer object
        R with ``prox(x, tau)`` = argmin_w 0.5 ||w - x||^2 + tau R(w) (its own ``lam`` is a
        constant factor of R) and ``exact_pattern`` (the N:M pattern its prox reaches
        exactly at finite lambda, or None), e.g. ``RNM``, ``R0``, ``R1``, ``R2``, ``L0``,
        ``L1`` of :mod:`sparseopt.regularizers`.
    schedule : Schedule
        lambda_0, its growth and the stopping rules (:class:`Schedule`).
    step : float, optional
        Gradient step; default 1 / objective.lipschitz(). 0 makes every iteration a pure prox.
    x0 : array, optional
        Start; default ``objective.reference`` (W* for LayerLoss). Not modified. From the
        default start of an objective whose reference is a minimiser
        (``objective.stationary_reference``, LayerLoss: grad f(W*) = 0) the first iteration
        is the prox of the start itself, without a gradient (one product fewer; the same
        iterate: the step of a zero gradient is the identity).
    max_iter : int, default 1000
        Iteration cap (``>= schedule.min_iter``).
    pattern : NM or TopK, optional
        Stop as soon as x lies in ``pattern`` (after ``schedule.min_iter`` iterations), or
        by the schedule's ``stop_fraction`` and ``tail_tol`` rules; the fraction of groups in
        it also picks the schedule's growth factor.
    momentum : {None, "fista"}, default None
        None: plain proximal gradient, y_k = x_k. ``"fista"``: Nesterov / FISTA
        extrapolation y_k = x_k + (t_{k-1} - 1) / t_k (x_k - x_{k-1}) with
        t_k = (1 + sqrt(1 + 4 t_{k-1}^2)) / 2, restarted (t = 1) whenever
        (y_{k-1} - x_k) . (x_k - x_{k-1}) > 0 (the products in x's dtype, summed in
        float64), the gradient restart test of O'Donoghue and Candès (2015) that costs no
        extra product. With a growing lambda the extrapolation lets the iterate keep up
        with the moving minimiser of f + (lambda_k / step) R in fewer iterations
        (``benchmarks/prox_schedule.py``).
    progress : bool, optional
        tqdm progress bar; default on for variables with at least 2^20 entries.
    desc : str
        Label of the progress bar.

    Returns
    -------
    SolverResult
        ``x`` (same library, dtype and device as x0), ``history`` with one row per iterate
        k = 1..K: ``objective`` and ``loss`` (both f(x_k), float64; computed with the
        gradient of the next step where that step is taken), ``lam`` (the lambda used to
        make x_k), ``nm_fraction`` (fraction of groups in ``pattern``, NaN without one),
        ``time``; ``nit``; ``stop_reason`` (``"x in pattern"``, ``"tail <= tail_tol"``,
        ``"nm_fraction >= stop_fraction"`` or ``"max_iter"``); ``info`` with ``lam0``,
        ``beta``, ``lam_final``, ``step``, ``momentum``, ``restarts``, ``stop_fraction``.
        With ``momentum="fista"`` the ``objective`` entries k < K are f(y_k), the value at
        the extrapolated point where the next gradient is taken (f(x_k) would cost another
        product); the last entry is f(x_K).

    Notes
    -----
    Lambda convention of prox24-kubler Alg. 2: lambda_k is handed to the prox as is, so it
    already contains the step size; in proximal-gradient notation step k is a PG step on
    f + (lambda_k / step) R. Cost per iteration: one ``value_and_grad`` and one prox, plus
    the gradient step, the pattern test and (FISTA) the extrapolation, each one pass over x.
    For NumPy arrays of one float dtype the gradient step and the extrapolation with its
    restart sum are Numba passes (``_gradient_step_rows``, ``_extrapolate_rows``) that round
    every entry as the NumPy expressions ``y - step * g`` and ``x + c * (x - x_prev)`` do,
    so the iterates are those of the expressions bit for bit; tensors and mixed dtypes take
    the expressions (``tests/test_proxgrad.py`` checks both against a plain NumPy loop).

    References
    ----------
    Kübler et al., "A Proximal Operator for Inducing 2:4-Sparsity", Alg. 2, App. C.
    """
    if not isinstance(schedule, Schedule):
        raise ValueError(f"schedule must be a sparseopt.solvers.Schedule, got {schedule!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=0)
    lam0, beta, min_iter = schedule.lam0, schedule.beta, schedule.min_iter
    stop_fraction, tail_tol = schedule.stop_fraction, schedule.tail_tol
    if min_iter > max_iter:
        raise ValueError(f"min_iter must be <= max_iter = {max_iter}, got {min_iter}")
    if schedule.needs_pattern and pattern is None:
        raise ValueError("a schedule with stop_fraction < 1, beta_start or beta_tail needs a "
                         "pattern (they count the groups in it)")
    check_choice(momentum, "momentum", MOMENTA)
    beta_start = beta if schedule.beta_start is None else schedule.beta_start
    beta_tail = beta if schedule.beta_tail is None else schedule.beta_tail
    if step is None:
        L = float(objective.lipschitz())
        step = 1.0 / L if L > 0 else 0.0
    step = check_real(step, "step")
    x = getattr(objective, "reference", None) if x0 is None else x0
    if x is None:
        raise ValueError("x0 is required for an objective without a reference point")
    xp = namespace(x)
    x = xp.asarray(x, copy=True)
    exact = getattr(regularizer, "exact_pattern", None) is not None

    def in_pattern(z):
        if pattern is None:
            return np.nan, False
        frac = pattern.satisfied_fraction(z) if hasattr(pattern, "satisfied_fraction") \
            else float(pattern.satisfied(z))
        if frac == 1.0:
            return frac, "x in pattern"
        if frac >= stop_fraction:
            return frac, "nm_fraction >= stop_fraction"
        if not exact:
            tail = float(xp.linalg.vector_norm(z - pattern.project(z)))
            if tail <= tail_tol * float(xp.linalg.vector_norm(z)):
                return frac, "tail <= tail_tol"
        return frac, False

    hist = {"objective": [], "lam": [], "nm_fraction": [], "time": []}
    t0 = time.perf_counter()
    lam = lam0
    k = 0
    bar = None
    if progress is None:
        progress = int(np.prod(x.shape)) >= PROGRESS_MIN_SIZE
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_iter, desc=desc, unit="it")
    stop = min_iter == 0 and in_pattern(x)[1]  # with min_iter the start is not tested
    y, t, restarts = x, 1.0, 0
    # NumPy: the gradient, the step and the prox write into one work array, the iterates
    # rotate through a few more (x is the loop's own copy, so it may be reused too)
    buffers = (_Buffers(x) if _fused(x) and getattr(objective, "grad_out", False)
               and x.dtype == objective.dtype and isinstance(regularizer, Regularizer)
               else None)
    # an objective that takes the gradient step in the pass of its value saves a pass
    stepper = buffers is not None and hasattr(objective, "value_and_step")
    # started at a minimiser of f (LayerLoss at W*): the first gradient is 0, its step the
    # identity, so the first iteration is a pure prox without the product (its f is not
    # recorded either: the history's first entry is f(x_1))
    at_rest = x0 is None and getattr(objective, "stationary_reference", False)
    while not stop and k < max_iter:
        if k == 0 and at_rest:  # (no f to record: the history starts at f(x_1))
            x_new = (regularizer.prox(y, lam) if buffers is None
                     else regularizer.prox(y, lam, out=buffers.take()))
        elif buffers is None:
            f_y, g = objective.value_and_grad(y)
            x_new = regularizer.prox(_gradient_step(y, g, step), lam)
        elif stepper:
            f_y, z = objective.value_and_step(y, step, out=buffers.take())
            x_new = regularizer.prox(z, lam, out=z)
        else:
            f_y, g = objective.value_and_grad(y, out=buffers.take())
            x_new = regularizer.prox(_gradient_step(y, g, step, out=g), lam, out=g)
        if k > 0:  # f of the previous iterate (or its extrapolation), free with the gradient
            hist["objective"].append(f_y)
        hist["lam"].append(lam)
        frac, stop = in_pattern(x_new)
        stop = stop if k + 1 >= min_iter else False
        hist["nm_fraction"].append(frac)
        hist["time"].append(time.perf_counter() - t0)
        k += 1
        lam *= (beta_start if frac < START_FRACTION else
                beta_tail if frac >= TAIL_FRACTION else beta)
        x_old, y_old = x, y
        if momentum == "fista":
            y, t, restarted = _fista_step(y, x_new, x, t, xp,
                                          None if buffers is None else buffers.take())
            restarts += restarted
        else:
            y = x_new
        x = x_new
        if buffers is not None:
            buffers.release((x_old, y_old), keep=(x, y))
        if bar is not None:
            bar.update(1)
            if hist["objective"]:
                bar.set_postfix(lam=f"{hist['lam'][-1]:.3g}",
                                loss=f"{hist['objective'][-1]:.4g}", nm=f"{frac:.3f}")
    if k > 0:  # as every other entry: value_and_grad's f (LayerLoss: one product in x's
        # dtype, summed in float64; its float64 ``value`` costs 2-4 such products), by the
        # loop's own path where it has buffers (the clipped loss: one product instead of two)
        last = (objective.value_and_grad(x) if buffers is None
                else objective.value_and_grad(x, out=buffers.take()))
        hist["objective"].append(last[0])
    if bar is not None:
        bar.close()
    history = {key: np.asarray(v, dtype=np.float64) for key, v in hist.items()}
    history["loss"] = history["objective"]
    info = {"lam0": lam0, "beta": beta, "beta_start": beta_start, "beta_tail": beta_tail,
            "lam_final": hist["lam"][-1] if k else lam0, "step": step, "momentum": momentum,
            "restarts": restarts, "stop_fraction": stop_fraction}
    return SolverResult(x=x, history=history, nit=k, stop_reason=stop or "max_iter",
                        status=SUCCESS if stop else MAX_ITER, info=info)
