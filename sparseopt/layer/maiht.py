"""mAIHT layer pruning (maiht-wen Alg. 1, Sec. 4 pre-processing, App. D.3 for N:M)."""

from __future__ import annotations


from ..backend import namespace, zero
from ..patterns import NM, TopK
from .loss import gamma_max
from ..validation import check_int, check_real
from .registry import register
from .result import PruneResult

__all__ = ["maiht_prune"]


@register("maiht", patterns=(NM, TopK), order=50)
def maiht_prune(W, H, pattern, *, mu=0.1, step_scale=0.95, iters=50, support_steps=30,
                normalize=True, tol=1e-8):
    """Monotone accelerated IHT with refinement on the normalised layer (maiht-wen Alg. 1).

    Calls :func:`sparseopt.solvers.maiht` on :class:`sparseopt.objectives.LayerLoss`.

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Dense weights W* (validated by the caller). Not modified.
    H : array, shape (d_in, d_in)
        Symmetric PSD Hessian (float64).
    pattern : NM or TopK
        Constraint set S of App. D.3 (the prox of its indicator is the projection).
    mu : float, default 0.1
        l2 stabiliser of eq. 5, in the paper's scaling (normalised X'X with unit diagonal).
    step_scale : float, default 0.95
        alpha = step_scale / ||X'X + mu I||_2 (Sec. 4: 0.95; see Notes).
    iters : int, default 50
        mAIHT iterations t_1 (Sec. 4: 50).
    support_steps : int, default 30
        Refinement steps t_2 on the final support (Alg. 1 lines 8-10; Sec. 4: 30).
    normalize : bool, default True
        The pre-processing of Sec. 4: E = Diag(X'X)^{-1/2}, W_hat <- E^{-1} W_hat,
        X <- X E; undone at the end.
    tol : float, default 1e-8
        Early stop of the accelerated stage (passed to the solver).

    Returns
    -------
    PruneResult
        ``history`` is the solver's (``objective``, ``loss``, ``support``, ``step``,
        ``residual``, ``time``, ``accepted``; index 0 is W*). ``loss`` equals L of the
        un-normalised iterate (the normalisation leaves L invariant). ``mask`` keeps n
        entries per group: the final support, filled up with zeros (ties to the smaller
        index) for later masked gradient steps.

    Notes
    -----
    maiht-wen writes f = 0.5 ||X W_hat - X W||_F^2 with W of shape d_in x d_out; our
    L(W) = Tr((W - W*) H (W - W*)') is the same with the variable transposed and
    X'X = 2H (see ``LayerLoss``). Hence E = Diag(2H)^{-1/2}: the solver runs on
    LayerLoss(W* E^{-1}, E H E), whose X'X = 2 E H E has unit diagonal, so the paper's
    mu = 0.1 keeps its meaning; alpha = step_scale / (2 gamma_max(E H E) + mu). Sec. 4 writes
    0.95 / ||X'X||_2; by Remark 2.3 the mu-problem is problem (2) with X'X + mu I, and we take
    the norm of that matrix so that alpha < 1/L holds for the objective being minimised
    (with ||X'X|| alone, alpha = 0.95 > 1/1.1 on a diagonal normalised H). The solver
    minimises f + mu/2 ||W - W*_E||^2 (eq. 5), starts from W^0 = W^1 = Z^1 = W*_E
    (Alg. 1 line 2) and projects onto the pattern instead of hard thresholding (App. D.3).
    Dead inputs (H_jj = 0) are left unscaled. Cost per iteration: four gradient products
    of size d_out x d_in x d_in (the monotone test evaluates Z and V).
    """
    from ..objectives import LayerLoss
    from ..solvers import maiht

    check_real(mu, "mu")
    check_real(step_scale, "step_scale", positive=True)
    check_int(iters, "iters", minimum=0)
    check_int(support_steps, "support_steps", minimum=0)
    xp = namespace(W, H)
    dt = W.dtype
    if normalize:
        diag = 2.0 * xp.linalg.diagonal(H)
        e_inv = xp.sqrt(xp.where(diag > 0, diag, xp.ones_like(diag)))  # E^{-1}
    else:
        e_inv = xp.ones(W.shape[1], dtype=xp.float64, device=H.device)
    W_e = W * xp.astype(e_inv[None, :], dt)
    H_e = xp.astype(H / (e_inv[:, None] * e_inv[None, :]), dt)
    g = gamma_max(xp.astype(H_e, xp.float64))
    if g <= 0:  # H = 0: every W has loss 0; the projection is as good as anything
        return PruneResult(x=pattern.project(W), mask=pattern.mask(W), stop_reason="H = 0",
                           info={"nit": 0, "stop_reason": "H = 0"})
    # Remark 2.3: eq. 5 is problem (2) with X'X <- X'X + mu I, so Sec. 4's ||X'X||_2 is read
    # for the problem actually solved; this keeps alpha < 1/L (Lemma 3.2). With ||2H|| alone
    # the step overshoots when 2 E H E is close to I (e.g. diagonal H) and flips masks.
    step = step_scale / (2.0 * g + float(mu))
    f = LayerLoss(W_e, H_e, check_psd=False)
    res = maiht(f, pattern=pattern, step=step, mu=float(mu), max_iter=int(iters),
                refine_steps=int(support_steps), tol=tol)
    X = xp.astype(res.x, dt, copy=False)
    W_out = xp.astype(X / xp.astype(e_inv[None, :], dt), dt, copy=False)
    mask = pattern.mask(W_out)
    W_out = xp.where(mask, W_out, zero(W_out))
    info = {"nit": res.nit, "stop_reason": res.stop_reason, "step": step, "mu": float(mu),
            "normalize": bool(normalize), "solver_info": dict(res.info)}
    return PruneResult(x=W_out, mask=mask, nit=res.nit, stop_reason=res.stop_reason,
                       status=res.status, history=dict(res.history), info=info)
