"""Layer-level N:M pruning of a linear layer: one entry point, :func:`prune`.

The problem (prox24-kubler eq. 1-2): given dense weights W* (d_out x d_in) and the input
Hessian H = X X' / n (d_in x d_in), find N:M sparse W minimizing
L(W) = Tr((W - W*) H (W - W*)'). Methods: ``"magnitude"``, ``"wanda"`` (eq. 3, Thm 1),
``"sparsegpt"`` (Frantar & Alistarh 2023), ``"prox"`` (prox24-kubler Alg. 2),
``"maiht"`` (maiht-wen Alg. 1) and ``"iobs"`` (iobs-wu Alg. 2); any of them can be
followed by masked gradient steps (eq. 5, "+GD"). See docs/layer.md.
"""

from __future__ import annotations

import inspect
import time as _time

import numpy as np

from ..backend import namespace, synchronize, zero
from ..patterns import NM
from ..validation import check_bool, check_int
from .loss import base_loss, check_layer, gamma_max, layer_loss, masked_gd, _masked_gd
from .refine import _masked_optimum, masked_optimum
from .registry import LayerMethod, get_method, methods, register
from .result import PruneResult

__all__ = ["prune", "PruneResult", "layer_loss", "masked_gd", "masked_optimum", "gamma_max",
           "methods", "register", "get_method", "LayerMethod", "PAPER_REFINE_STEPS",
           "COMMON_HISTORY_KEYS", "ONE_SHOT", "EXACT", "EXACT_TOL", "check_refine_steps"]

#: History keys of every :class:`PruneResult` (float64 arrays, empty where they do not
#: apply): ``objective`` (local loss of each iterate) and ``time`` of the method's own
#: iterations, ``refine_loss`` (loss before each masked gradient step of "+GD").
COMMON_HISTORY_KEYS = ("objective", "time", "refine_loss")

#: ``stop_reason`` of a method that does not iterate (magnitude, wanda, sparsegpt).
ONE_SHOT = "one-shot (no iterations)"

#: Masked gradient steps after freezing the mask in prox24-kubler's "+GD" runs (Sec. 4).
PAPER_REFINE_STEPS = 1000

#: ``refine_steps=EXACT``: "+GD" solved to the masked least-squares optimum
#: (:func:`masked_optimum`) instead of a fixed number of eq.-5 steps.
EXACT = "exact"

#: Relative masked gradient norm at which ``refine_steps="exact"`` stops
#: (:func:`masked_optimum`'s ``tol``).
EXACT_TOL = 1e-6


def check_refine_steps(refine_steps):
    """``refine_steps`` checked: a non-negative int (eq.-5 steps) or ``"exact"``, returned
    (the int as a Python int); ValueError naming it otherwise. Whether any refinement runs
    is ``refine_steps != 0``."""
    if isinstance(refine_steps, str):
        if refine_steps == EXACT:
            return EXACT
    else:
        try:
            return check_int(refine_steps, "refine_steps", minimum=0)
        except ValueError:
            pass
    raise ValueError(f"refine_steps must be a non-negative integer or {EXACT!r}, got "
                     f"{refine_steps!r}")


def prune(W, H, method="prox", pattern=NM(2, 4), refine_steps=0, *, assume_psd=False,
          **options) -> PruneResult:
    """Prune a linear layer to a sparsity pattern by minimizing the local squared loss.

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Dense weights W*: a NumPy array, or a torch tensor on any device (then every step
        runs with torch on that device and the result holds tensors). Not modified.
    H : array, shape (d_in, d_in)
        Input Hessian X X' / n, in the array library of ``W``. It is symmetrised,
        (H + H') / 2, in float64, and must be positive semidefinite up to the rounding of
        its own precision (:func:`sparseopt.validation.psd_tolerance`; ``"sparsegpt"``
        instead damps H and reports a failing damped Cholesky).
    method : str or callable
        A registered method (:func:`methods`: ``"magnitude"``, ``"wanda"``, ``"sparsegpt"``,
        ``"prox"``, ``"maiht"``, ``"iobs"``, see the Notes) or a function with the contract
        of :mod:`sparseopt.layer.registry`.
    pattern : NM or TopK, default NM(2, 4)
        Sparsity pattern along the rows. ``d_in`` must be divisible by ``pattern.m``.
        ``"magnitude"``, ``"wanda"`` and ``"maiht"`` also accept ``TopK`` (per-row top-k).
    refine_steps : int or "exact", default 0
        Masked gradient steps (eq. 5, step 1/(2 gamma_max(H))) after the method ("+GD");
        the paper uses :data:`PAPER_REFINE_STEPS` = 1000. ``"exact"``: the minimizer of the
        loss on the method's mask instead (:func:`masked_optimum`, relative masked gradient
        norm :data:`EXACT_TOL`; ``info`` records ``refine_solver``, ``refine_iterations``,
        ``refine_rel_grad``, ``refine_converged``).
    assume_psd : bool, default False
        Skip the positive-semidefiniteness test of ``H`` (one Cholesky factorisation of a
        d_in x d_in float64 copy): only for an H that is PSD by construction, such as the
        Gram matrices X X' / n the torch adapter accumulates (the test is a d_in^3 / 3
        factorisation and a d_in^2 float64 copy). Finiteness, shape and symmetry are still
        checked.
    **options
        Method options (keyword-only arguments of the method's function, e.g.
        ``damping`` for sparsegpt, ``lam0``/``beta`` for prox). Unknown names raise
        TypeError naming them.

    Returns
    -------
    PruneResult
        ``W`` in the input dtype and array library, ``mask``, ``loss`` (float64),
        ``rel_loss``, ``nit``, ``stop_reason``, ``history``, ``time``, ``method``, ``info``
        (with ``base_loss`` = Tr(W* H W*'), the loss of pruning everything), and
        ``method_time``, the seconds of the method before "+GD" (``time`` includes "+GD").

    Notes
    -----
    - magnitude: keep the largest |W_ij| per group.
    - wanda: keep the largest |W_ij| H_jj^{1/2} per group (prox24-kubler eq. 3); optimal for
      diagonal H (Thm 1).
    - sparsegpt: OBS column sweep with lazy block updates (Frantar & Alistarh 2023).
    - prox: proximal gradient with r_{N:M} and a growing lambda (prox24-kubler Alg. 2); the
      default schedule "fast" adds FISTA momentum, schedule="paper" is Alg. 2 as published.
    - maiht: mAIHT with Hessian normalisation and refinement (maiht-wen Alg. 1, App. D.3).
    - iobs: rounds of OBS mask solves and masked gradient steps (iobs-wu Alg. 2).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((8, 64)); W = rng.standard_normal((4, 8))
    >>> res = prune(W, X @ X.T / 64, method="wanda", refine_steps=10)
    >>> int(res.mask.reshape(4, 2, 4).sum(-1).max())
    2
    """
    spec = get_method(method)
    fn = spec.fn
    params = inspect.signature(fn).parameters
    allowed = {k for k, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for method {spec.name!r}; allowed: "
                        f"{sorted(allowed)}")
    if not isinstance(pattern, spec.patterns):
        kinds = " and ".join(p.__name__ for p in spec.patterns)
        raise ValueError(f"{spec.name} supports {kinds} patterns only, got pattern={pattern!r}")
    refine_steps = check_refine_steps(refine_steps)
    check_bool(assume_psd, "assume_psd")
    psd = (spec.psd or refine_steps != 0) and not assume_psd
    W_star, Hs = check_layer(W, H, pattern, name="W", psd=psd)
    xp = namespace(W_star, Hs)

    t0 = _time.perf_counter()
    res = fn(W_star, Hs, pattern, **options)
    if not isinstance(res, PruneResult):
        raise TypeError(f"method {spec.name!r} must return a PruneResult, got "
                        f"{type(res).__name__}")
    W_out, mask = res.x, res.mask
    synchronize(W_out)
    method_time = _time.perf_counter() - t0
    history, info = dict(res.history), dict(res.info)
    # the same keys for every method, so one piece of code plots any result: a one-shot
    # method has no iterations (empty curves), a run without +GD an empty refine_loss
    for key in COMMON_HISTORY_KEYS:
        history.setdefault(key, np.empty(0))
    if refine_steps == EXACT:
        W_out, rinfo = _masked_optimum(W_out, W_star, Hs, mask, EXACT_TOL, None, "auto")
        history["refine_loss"] = rinfo["losses"]  # the start's, then after each iteration
        info.update(refine_solver=rinfo["solver"], refine_iterations=rinfo["iterations"],
                    refine_rel_grad=rinfo["rel_grad"], refine_converged=rinfo["converged"])
    elif refine_steps > 0:
        g = gamma_max(Hs)
        if g > 0:
            W_out, losses = _masked_gd(W_out, W_star, Hs, mask, refine_steps,
                                       1.0 / (2.0 * g), record=True)
            history["refine_loss"] = losses
        info["refine_step_size"] = 1.0 / (2.0 * g) if g > 0 else 0.0
    info["refine_steps"] = refine_steps
    synchronize(W_out)
    elapsed = _time.perf_counter() - t0

    if W_out.dtype != W_star.dtype or namespace(W_out) is not xp:
        raise TypeError(f"method {spec.name!r} returned {type(W_out).__name__} of dtype "
                        f"{W_out.dtype}; expected the dtype and library of W ({W_star.dtype})")
    W_out = xp.where(mask, W_out, zero(W_out))
    loss = layer_loss(W_out, W_star, Hs)
    base = base_loss(W_star, Hs)
    info["base_loss"] = base  # Tr(W* H W*'): callers need not pay for it again
    rel = loss / base if base > 0 else (0.0 if loss == 0 else float("inf"))
    return PruneResult(x=W_out, mask=mask, fun=loss, nit=res.nit,
                       stop_reason=res.stop_reason or ONE_SHOT, status=res.status,
                       history=history, info=info, rel_loss=rel, time=elapsed,
                       method_time=method_time, method=spec.name)

