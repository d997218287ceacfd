"""Layer-level N:M pruning of a linear layer: one entry point, :func:`prune`.

The problem (prox24-kubler eq. 1-2): given dense weights W* (d_out x d_in) and the input
Hessian H = X X' / n (d_in x d_in), find N:M sparse W minimizing
L(W) = Tr((W - W*) H (W - W*)'). Methods: ``"magnitude"``, ``"wanda"`` (eq. 3, Thm 1),
``"sparsegpt"`` (Frantar & Alistarh 2023), ``"prox"`` (prox24-kubler Alg. 2),
``"maiht"`` (maiht-wen Alg. 1) and ``"iobs"`` (iobs-wu Alg. 2); any of them can be
followed by masked gradient steps (eq. 5, "+GD"). See docs/layer.md.
"""

from __future__ import annotations

import importlib
import inspect
import time as _time

import numpy as np

from ..patterns import NM
from .loss import check_layer, gamma_max, layer_loss, masked_gd, _masked_gd
from .result import PruneResult

__all__ = ["prune", "PruneResult", "layer_loss", "masked_gd", "gamma_max", "METHODS",
           "PAPER_REFINE_STEPS"]

#: Masked gradient steps after freezing the mask in prox24-kubler's "+GD" runs (Sec. 4).
PAPER_REFINE_STEPS = 1000

# method name -> (module, function); imported lazily so `import sparseopt` stays light.
METHODS = {
    "magnitude": ("magnitude", "magnitude_prune"),
    "wanda": ("wanda", "wanda_prune"),
    "sparsegpt": ("sparsegpt", "sparsegpt_prune"),
    "prox": ("prox", "prox_prune"),
    "maiht": ("maiht", "maiht_prune"),
    "iobs": ("iobs", "iobs_prune"),
}

# Methods that handle a non-PSD H themselves (sparsegpt damps H and fails on Cholesky).
_OWN_PSD_HANDLING = {"sparsegpt"}


def _method_function(method):
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    mod, fn = METHODS[method]
    return getattr(importlib.import_module(f"{__name__}.{mod}"), fn)


def prune(W, H, method="prox", pattern=NM(2, 4), refine_steps=0, **options) -> PruneResult:
    """Prune a linear layer to a sparsity pattern by minimizing the local squared loss.

    Parameters
    ----------
    W : ndarray, shape (d_out, d_in), float32 or float64
        Dense weights W*. Not modified.
    H : array_like, shape (d_in, d_in)
        Input Hessian X X' / n. It is symmetrised, (H + H') / 2, and must be positive
        semidefinite (checked by a Cholesky factorisation; ``"sparsegpt"`` instead damps H
        and reports a failing damped Cholesky).
    method : {"prox", "magnitude", "wanda", "sparsegpt", "maiht", "iobs"}
        Pruning method; see the Notes.
    pattern : NM or TopK, default NM(2, 4)
        Sparsity pattern along the rows. ``d_in`` must be divisible by ``pattern.m``.
        ``"magnitude"``, ``"wanda"`` and ``"maiht"`` also accept ``TopK`` (per-row top-k).
    refine_steps : int, default 0
        Masked gradient steps (eq. 5, step 1/(2 gamma_max(H))) after the method ("+GD");
        the paper uses :data:`PAPER_REFINE_STEPS` = 1000.
    **options
        Method options (keyword-only arguments of the method's function, e.g.
        ``percdamp`` for sparsegpt, ``lam0``/``beta`` for prox). Unknown names raise
        TypeError naming them.

    Returns
    -------
    PruneResult
        ``W`` in the input dtype, ``mask``, ``loss`` (float64), ``rel_loss``, ``history``,
        ``time``, ``method``, ``info``.

    Notes
    -----
    - magnitude: keep the largest |W_ij| per group.
    - wanda: keep the largest |W_ij| H_jj^{1/2} per group (prox24-kubler eq. 3); optimal for
      diagonal H (Thm 1).
    - sparsegpt: OBS column sweep with lazy block updates (Frantar & Alistarh 2023).
    - prox: proximal gradient with r_{N:M} and a growing lambda (prox24-kubler Alg. 2).
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
    fn = _method_function(method)
    params = inspect.signature(fn).parameters
    allowed = {k for k, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(
            f"unknown option(s) {unknown} for method {method!r}; allowed: {sorted(allowed)}"
        )
    if not isinstance(refine_steps, (int, np.integer)) or refine_steps < 0:
        raise ValueError(f"refine_steps must be a non-negative integer, got {refine_steps!r}")
    psd = method not in _OWN_PSD_HANDLING or refine_steps > 0
    W_star, Hs = check_layer(W, H, pattern, name="W", psd=psd)

    t0 = _time.perf_counter()
    W_out, mask, history, info = fn(W_star, Hs, pattern, **options)
    history = dict(history)
    info = dict(info)
    if refine_steps > 0:
        g = gamma_max(Hs)
        if g > 0:
            W_out, losses = _masked_gd(W_out, W_star, Hs, mask, int(refine_steps),
                                       1.0 / (2.0 * g), record=True)
            history["refine_loss"] = losses
        info["refine_step_size"] = 1.0 / (2.0 * g) if g > 0 else 0.0
    info["refine_steps"] = int(refine_steps)
    elapsed = _time.perf_counter() - t0

    if W_out.dtype != W_star.dtype:
        raise AssertionError(f"method {method!r} returned dtype {W_out.dtype}")  # internal bug
    W_out = np.where(mask, W_out, np.zeros((), W_out.dtype))
    loss = layer_loss(W_out, W_star, Hs)
    base = layer_loss(np.zeros_like(W_star), W_star, Hs)
    if base > 0:
        rel = loss / base
    else:
        rel = 0.0 if loss == 0 else float("inf")
    return PruneResult(W=W_out, mask=mask, loss=loss, rel_loss=rel, history=history,
                       time=elapsed, method=method, info=info)
