"""Monotone accelerated iterative hard thresholding (mAIHT, maiht-wen eq. 4, Alg. 1).

Written against the array API as :mod:`sparseopt.solvers.iht`: an objective on torch tensors
is solved with torch on their device; the history is NumPy float64.
"""

from __future__ import annotations

import math
import time

from ..result import MAX_ITER, SUCCESS
from ..validation import check_int
from .iht import _KEYS, _Problem, count_nonzero, finish, frobenius_norm
from .result import History

__all__ = ["maiht"]


def maiht(objective, *, pattern=None, lam=None, target_nnz=None, x0=None, step=None, mu=0.0,
          max_iter=1000, refine_steps=0, tol=1e-8):
    """Monotone accelerated IHT with adaptive lam, mu stabiliser and refinement (maiht-wen Alg. 1).

    Parameters
    ----------
    objective : sparseopt.objectives.Objective
        Smooth f with ``shape``, ``value``, ``grad`` (and ``lipschitz`` for the default step).
        A matrix variable (e.g. LayerLoss, d_out x d_in) works as is; patterns act on its rows.
        An objective on torch tensors is solved with torch on their device (``x`` a tensor).
    pattern : TopK or NM, optional, keyword-only
        Constrained form (App. D.3): the indicator of the pattern replaces lam ||W||_0, so every
        hard thresholding becomes the projection onto the pattern.
    lam : float, optional, keyword-only
        Penalised form f + lam ||W||_0 (eq. 2). With ``target_nnz``: the initial lam.
    target_nnz : int, optional, keyword-only
        Adaptive lam (Sec. 2.4) targeting this many nonzeros in the whole of W; after the main
        stage W is projected onto its ``target_nnz`` largest entries (Alg. 1 line 7).
    x0 : array, optional, keyword-only
        W^0 = W^1 = Z^1 (Alg. 1 line 2). Default: ``objective.reference`` (W_hat = W* for
        LayerLoss) when present, else zeros. A tensor for an objective on tensors (same device).
    step : float, optional, keyword-only
        alpha = alpha_1 = alpha_2 of eq. 4; default 1/L of the minimised objective (1/(L + mu)
        with the stabiliser). Lemma 3.2 and Thm 3.3 assume step < 1/L.
    mu : float, default 0.0, keyword-only
        Stabiliser of eq. 5 / Remark 2.3. With mu > 0 the minimised smooth part is
        f(W) + mu/2 ||W - W_hat||_F^2 with W_hat = x0 (the starting point, as in the paper where
        both are the dense weights). For a least-squares f = 0.5 ||X W_hat - X W||^2 this is the
        same problem with X replaced by (X'X + mu I)^{1/2}; for LayerLoss(W*, H) (f = Tr(D H D'),
        i.e. X'X = 2H) it equals LayerLoss(W*, H + mu/2 I).
    max_iter : int, default 1000, keyword-only
        Iterations of the accelerated stage (k_max^1 of Alg. 1).
    refine_steps : int, default 0, keyword-only
        Projected gradient steps on the fixed final support (k_max^2, Alg. 1 lines 8-10; for
        LayerLoss these are the masked gradient steps of prox24-kubler eq. 5).
    tol : float, default 1e-8, keyword-only
        Stop the accelerated stage when ||W^{k+1} - W^k||_F / step <= tol (and, in the adaptive
        form, ||W^{k+1}||_0 = target_nnz).

    Returns
    -------
    SolverResult
        ``history`` rows (index 0 is x0): ``objective`` = the minimised L (f [+ mu term]
        + lam ||W||_0 with the lam in force; without the lam term for the constrained form and
        during refinement), ``loss`` = f alone (no mu term), ``support``, ``lam``, ``step``,
        ``residual``, ``time`` and ``accepted`` (1 where the accelerated Z^{k+1} was taken,
        0 where the monitor V^{k+1} was). ``info``: ``mode``, ``step``, ``lam_final``,
        ``refine_start``, ``n_accepted``.

    Notes
    -----
    maiht-wen eq. 4, with prox the hard thresholding H_{sqrt(2 alpha lam)} or the projection:

        Y^k     = W^k + t^{k-1}/t^k (Z^k - W^k) + (t^{k-1} - 1)/t^k (W^k - W^{k-1})
        Z^{k+1} = prox(Y^k - alpha_1 grad f(Y^k))
        V^{k+1} = prox(W^k - alpha_2 grad f(W^k))
        t^{k+1} = (sqrt(4 (t^k)^2 + 1) + 1) / 2
        W^{k+1} = Z^{k+1} if L(Z^{k+1}) <= L(V^{k+1}) else V^{k+1}

    started from W^0 = W^1 = Z^1 = x0, t^0 = 0, t^1 = 1 (Alg. 1 line 2). Since
    L(W^{k+1}) <= L(V^{k+1}) and V^{k+1} is one IHT step from W^k, the sequence L(W^k) is
    non-increasing for step <= 1/L (Lemma 3.2) at fixed lam.

    References
    ----------
    Wen, Zuo, Pan (ICML 2025), maiht-wen.md; Li & Lin (2015), accelerated proximal gradient
    for nonconvex programming.

    Examples
    --------
    >>> import numpy as np
    >>> from sparseopt import NM
    >>> from sparseopt.objectives import LayerLoss
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((8, 32))
    >>> f = LayerLoss(rng.standard_normal((2, 8)), A @ A.T / 32)
    >>> res = maiht(f, pattern=NM(2, 4), mu=0.1, max_iter=50, refine_steps=30)
    >>> NM(2, 4).satisfied(res.x)
    True
    """
    refine_steps = check_int(refine_steps, "refine_steps", minimum=0)
    pb = _Problem(objective, pattern, lam, target_nnz, x0, step, max_iter, tol, mu=mu)
    alpha = pb.step
    xp = pb.xp
    hist = History(_KEYS + ("accepted",))
    t0 = time.perf_counter()

    W = pb.x0
    W_prev = W
    Z = W
    t_prev, t = 0.0, 1.0
    lam_k = pb.lam
    fW, gW, lW = pb.value_grad_loss(W)
    # For an affine gradient (quadratic f) grad f(Y^k) is the same affine combination of the
    # gradients at W^k, Z^k, W^{k-1} as Y^k of the points: one gradient evaluation saved.
    affine = bool(getattr(pb.objective, "affine_gradient", False))
    gZ, gW_prev = gW, gW
    hist.append(objective=pb.penalized(fW, W, lam_k), loss=lW,
                support=count_nonzero(W), lam=pb.lam_record(lam_k), step=alpha,
                residual=math.nan, time=0.0, accepted=math.nan)
    stop_reason, status, nit, n_acc = "max_iter", MAX_ITER, 0, 0
    for k in range(pb.max_iter):
        if pb.mode == "adaptive":
            lam_k = pb.update_lambda(lam_k, W)
        a, b = t_prev / t, (t_prev - 1.0) / t
        Y = W + a * (Z - W) + b * (W - W_prev)
        if affine:
            gY = gW + a * (gZ - gW) + b * (gW - gW_prev)
        else:
            gY = pb.objective.grad(Y)
        Z = xp.astype(pb.prox(Y - alpha * gY, lam_k), W.dtype, copy=False)
        V = xp.astype(pb.prox(W - alpha * gW, lam_k), W.dtype, copy=False)
        t_prev, t = t, (math.sqrt(4.0 * t * t + 1.0) + 1.0) / 2.0
        # both values from the same product and summation, so that the comparison is like
        # with like; the gradient of the one taken is the next iteration's
        fZ, gZ, lZ = pb.value_grad_loss(Z)
        fV, gV, lV = pb.value_grad_loss(V)
        accept = pb.penalized(fZ, Z, lam_k) <= pb.penalized(fV, V, lam_k)
        W_prev, gW_prev = W, gW
        if accept:
            W, fW, gW, lW = Z, fZ, gZ, lZ
            n_acc += 1
        else:
            W, fW, gW, lW = V, fV, gV, lV
        res = frobenius_norm(W - W_prev) / alpha
        nit = k + 1
        hist.append(objective=pb.penalized(fW, W, lam_k), loss=lW,
                    support=count_nonzero(W), lam=pb.lam_record(lam_k), step=alpha,
                    residual=res, time=time.perf_counter() - t0, accepted=float(accept))
        if res <= pb.tol and (pb.mode != "adaptive" or count_nonzero(W) == pb.target_nnz):
            stop_reason, status = "residual <= tol", SUCCESS
            break
    return finish(pb, W, hist, t0, nit, stop_reason, status, refine_steps,
                  {"lam_final": lam_k, "n_accepted": n_acc})
