"""Proximal-gradient layer pruning with r_{N:M} (prox24-kubler Alg. 2, Sec. 3.6 and 4)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numba import prange

from ..backend import device, namespace, zero
from ..linalg import frob_inner, symmetrize_in_place, top_eigenpairs
from ..patterns import NM
from ..regularizers import REGULARIZERS, RNM
from ..solvers.proxgrad import Schedule, proximal_gradient
from ..threads import PASS_MIN_ENTRIES, parallel_kernel
from ..validation import _dtype_name, check_choice, check_int, check_real
from .loss import gamma_max
from .registry import register
from .result import PruneResult

__all__ = ["prox_prune", "ProxSchedule", "rescale_wanda", "clip_hessian", "auto_clip", "make_regularizer",
           "REGULARIZERS", "SCHEDULES", "STARTS", "DEFAULT_LAM0", "DEFAULT_MAX_ITER",
           "AUTO_CLIP", "AUTO_CLIP_OUTLIER"]

#: lambda_0 of the schedule lambda_k = lambda_0 beta^k (Sec. 4), for every schedule.
DEFAULT_LAM0 = 0.01
#: Iteration cap; with the paper's schedule lambda grows by 1e4 in ~926 iterations.
DEFAULT_MAX_ITER = 3000
@dataclass(frozen=True)
class ProxSchedule:
    """How the prox pruner grows lambda, steps and stops (``prune(..., method="prox",
    schedule=...)``): :data:`SCHEDULES` holds the named ones; ``dataclasses.replace`` on one of
    them changes single values, e.g. ``replace(SCHEDULES["fast"], clip=0)``.

    Attributes
    ----------
    momentum : {"plain", "fista"}
        ``"plain"``: the paper's Alg. 2. ``"fista"``: FISTA extrapolation with gradient restart
        (:func:`~sparseopt.solvers.proximal_gradient`).
    beta : float
        Growth factor of lambda while the groups decide, ``> 1`` (Alg. 2 stops only if lambda
        grows).
    beta_start, beta_tail : float or None
        Growth factors while fewer than 0.1% of the groups are N:M, and once 98% are
        (:class:`~sparseopt.solvers.Schedule`); None: ``beta``.
    clip : int or "auto"
        Gradient steps with the Hessian whose ``clip`` largest eigenvalues (of the rescaled H)
        are lowered to the next one (:func:`clip_hessian`), and the step
        eta = 1 / (2 gamma_{clip+1}) that allows; 0 is Alg. 2. lambda_k is scaled by
        eta / eta_0 in the prox, so that every step still weighs r_{N:M} by lambda_k / eta_0
        as Alg. 2 does (``history["lam"]`` keeps the schedule's lambda_k; the loss of
        ``history`` is the true L). ``"auto"``: ``min(96, d_in // 4)`` for r_{N:M} where the
        rescaled H has outlier eigenvalues (:func:`auto_clip`), 0 elsewhere and for the other
        regularizers (``info["clip"]`` says which).
    beta_clip : float or None
        Growth factor while the groups decide where the steps are clipped: the larger steps
        keep up with a faster-moving minimiser. None: ``beta``.
    stop_fraction : float
        Stop once at least this fraction of the groups is N:M (0 < stop_fraction <= 1) and
        project the rest onto the pattern (``info["projected"]`` is then True).
    tail_tol : float
        For regularizers that never reach N:M exactly (R2): stop once
        ||W - P(W)||_F <= tail_tol ||W||_F.
    """

    momentum: str = "plain"
    beta: float = 1.01
    beta_start: float | None = None
    beta_tail: float | None = None
    clip: int | str = 0
    beta_clip: float | None = None
    stop_fraction: float = 1.0
    tail_tol: float = 1e-4

    def __post_init__(self):
        check_choice(self.momentum, "momentum", ("plain", "fista"))
        for name in ("beta", "beta_clip"):  # the schedule must grow for Alg. 2 to stop
            value = check_real(getattr(self, name), name, allow_none=name == "beta_clip")
            if value is not None and not value > 1:
                raise ValueError(f"{name} must be a finite number > 1, got {value!r}")
        if not (isinstance(self.clip, str) and self.clip == "auto"):
            if isinstance(self.clip, str):
                raise ValueError(f"clip must be a non-negative integer or 'auto', "
                                 f"got {self.clip!r}")
            check_int(self.clip, "clip", minimum=0)
        # the solver's schedule checks beta_start, beta_tail, stop_fraction and tail_tol
        Schedule(1.0, self.beta, self.beta_start, self.beta_tail, self.stop_fraction,
                 tail_tol=self.tail_tol)


#: The named lambda schedules of ``prune(W, H, method="prox", schedule=NAME)``.
#:
#: ``"paper"``: prox24-kubler Alg. 2 as published, plain proximal gradient with
#: lambda_k = lambda_0 1.01^k, the reference for the paper's claims (the theory checks use it).
#: ``"fast"`` (the default): FISTA momentum with gradient restart, lambda grown by 1.2 until
#: 0.1% of the groups are N:M, by 1.055 while they decide and by 1.5 from 98% on, a stop at
#: 99% (the last 1% projected onto the pattern), and ``clip="auto"`` with lambda grown by
#: 1.25 while the groups decide on clipped layers. What each part saves is measured by
#: ``benchmarks/prox_schedule.py`` and ``benchmarks/prox_clip.py`` (``docs/benchmarks.md``).
SCHEDULES = {
    "paper": ProxSchedule(),
    "fast": ProxSchedule(momentum="fista", beta=1.055, beta_start=1.2, beta_tail=1.5,
                         clip="auto", beta_clip=1.25, stop_fraction=0.99),
}

#: ``clip="auto"``: the most eigenvalues clipped (at most d_in // 4), and the outlier test
#: gamma_max(H) >= AUTO_CLIP_OUTLIER tr(H) / d (the mean eigenvalue) that switches it on.
AUTO_CLIP = 96
AUTO_CLIP_OUTLIER = 8.0

#: Starting points of ``prune(W, H, method="prox", start=NAME)``: ``"dense"`` is W* itself
#: (Alg. 2); ``"wanda"`` and ``"sparsegpt"`` are those methods' pruned weights (warm starts,
#: issue 12). From a warm start the iteration leaves the pattern at its first gradient step
#: and lambda grows from lambda_0 as from W*; see ``docs/layer.md`` for what it changes.
STARTS = ("dense", "wanda", "sparsegpt")


def rescale_wanda(W_star, H):
    """Wanda-style rescaling of prox24-kubler Sec. 4.

    W*_ij -> W*_ij H_jj^{1/2}, H_ij -> H_ij H_ii^{-1/2} H_jj^{-1/2}. Returns
    (W_tilde, H_tilde, s) with s_j = H_jj^{1/2} (s_j = 1 for dead inputs H_jj = 0, whose
    row and column of a PSD H are zero). For any W, L(W) = L_tilde(W * s): the loss is
    invariant and the map back is W = W_tilde / s. For a NumPy H, H_tilde comes from one
    Numba pass (:func:`_divide_outer`, the bits of its twin ``H / (s[:, None] * s[None, :])``
    without the two d x d temporaries: 2 GB at d = 11008).
    """
    xp = namespace(W_star, H)
    diag = xp.linalg.diagonal(H)
    s = xp.sqrt(xp.where(diag > 0, diag, xp.ones_like(diag)))
    if isinstance(H, np.ndarray) and H.ndim == 2 and H.dtype == s.dtype == np.float64:
        H_tilde = _divide_outer(H, s, np.empty(H.shape))
    else:
        H_tilde = H / (s[:, None] * s[None, :])
    return W_star * xp.astype(s[None, :], W_star.dtype), H_tilde, s


@parallel_kernel(PASS_MIN_ENTRIES)
def _divide_outer(H, s, out):
    """out_ij = H_ij / (s_i s_j), rows over the Numba threads: the product rounded, then the
    quotient, as NumPy rounds ``H / (s[:, None] * s[None, :])`` (its twin)."""
    for i in prange(H.shape[0]):
        si = s[i]
        for j in range(H.shape[1]):
            out[i, j] = H[i, j] / (si * s[j])
    return out


def clip_hessian(H, k, *, low_rank="raise", precision="float64"):
    """H with its ``k`` largest eigenvalues lowered to the (k+1)-th: the Hessian of the
    gradient steps of ``prune(..., method="prox")`` with ``ProxSchedule.clip = k``.

    Returns ``(H_clip, V, c, top, level)``: H_clip = H - V diag(c) V' (symmetric, float64),
    V the (d, k) eigenvectors of the k largest eigenvalues, c >= 0 by how much each was
    lowered, ``top`` = gamma_max(H) and ``level`` = the (k+1)-th largest eigenvalue,
    gamma_max(H_clip). When ``level`` is zero up to rounding (d eps gamma_max(H)), that is
    rank(H) <= k, it raises ValueError (``low_rank="raise"``) or returns None
    (``low_rank="none"``, for ``clip="auto"``). ``precision``: that of the eigen solve
    (:func:`sparseopt.linalg.top_eigenpairs`); with "float32" the eigenpairs hold to float32
    rounding, and gamma_max(H_clip) may exceed ``level`` by as much: far inside the factor 2
    by which a step 1 / (2 level) may exceed the stable step.
    """
    k = check_int(k, "k", minimum=1)
    check_choice(low_rank, "low_rank", ("raise", "none"))
    xp = namespace(H)
    w, V = top_eigenpairs(H, k + 1, precision=precision)  # ascending: w[0] the (k+1)-th largest
    level, top = float(w[0]), float(w[-1])
    eps = float(np.finfo(precision).eps)
    if not level > H.shape[0] * eps * top:  # zero up to rounding: rank(H) <= k
        if low_rank == "none":
            return None
        raise ValueError(f"clip={k} leaves no curvature: the {k + 1}-th largest eigenvalue of "
                         f"the (rescaled) Hessian is {level:.3g}, so H has rank <= {k}")
    V, c = V[:, 1:], w[1:] - level
    # H - V diag(c) V', symmetrised (rounding leaves it slightly asymmetric), in one d x d
    # array: the product's, overwritten in place (at d_in = 14336 each float64 d x d array
    # is 1.6 GB; the expressions H - P, 0.5 (S + S') took three more)
    H_clip = (V * c[None, :]) @ V.T
    if isinstance(H_clip, np.ndarray):
        np.subtract(H, H_clip, out=H_clip)
    else:
        H_clip = H - H_clip
    return symmetrize_in_place(H_clip), V, xp.where(c > 0, c, xp.zeros_like(c)), top, level


def auto_clip(H, top=None):
    """The ``k`` of ``clip="auto"`` for the (rescaled) Hessian ``H``: min(:data:`AUTO_CLIP`,
    d // 4) when H has outlier eigenvalues, gamma_max(H) >= :data:`AUTO_CLIP_OUTLIER` times
    its mean eigenvalue tr(H) / d, else 0 (no clipping). ``top``: gamma_max(H) if known.
    (d // 4: on a small layer the clip keeps most of the spectrum.)

    After the Sec. 4 rescaling (mean eigenvalue 1) the layers of a trained transformer pass
    the test, the ``correlated_hessian`` layers of the benchmarks do not: there the clipped
    steps gain little and a faster lambda growth costs loss (``docs/layer.md``).
    """
    from ..validation import check_square

    return _auto_clip(check_square(H, "H"), top)[0]


#: Power iterations of the cheap certificate of the outlier test (:func:`_auto_clip`).
_POWER_ITERS = 16


def _auto_clip(H, top=None):
    """(k of :func:`auto_clip`, gamma_max(H) where it was computed, else None).

    gamma_max costs a d^3 eigenvalue solve (several of the layer's products), and a clipped
    run does not need it: its step comes from the eigenpairs. So
    the test first tries a certificate: the Rayleigh quotients of a few power iterations
    from a fixed start are lower bounds of gamma_max, and one of them at or above the
    threshold proves the test passed. Only where none is does gamma_max decide (and is
    returned for the step). The decision is that of the exact test (up to the rounding of
    gamma_max when it lies exactly at the threshold).
    """
    xp = namespace(H)
    d = H.shape[0]
    k = min(AUTO_CLIP, d // 4)
    mean = float(xp.sum(xp.linalg.diagonal(H))) / d if d else 0.0
    if k < 1 or not mean > 0:
        return 0, top
    bound = AUTO_CLIP_OUTLIER * mean
    if top is None:
        v = xp.asarray(np.random.default_rng(0).standard_normal(d), dtype=H.dtype,
                       device=device(H))
        for _ in range(_POWER_ITERS):
            norm = float(xp.linalg.vector_norm(v))
            if not norm > 0:  # v in the null space of H: no bound from here
                break
            v = v / norm
            Hv = H @ v
            if float(xp.vecdot(v, Hv)) >= bound:  # v'Hv / v'v <= gamma_max
                return k, None
            v = Hv
        top = gamma_max(H)
    return (k if top >= bound else 0), top


class _ClippedLayerLoss:
    """The local loss L(W) with the steps of the clipped Hessian (``clip_hessian``).

    ``value_and_grad`` returns L(W) itself and the direction 2 (W - W*) H_clip = grad L(W) P,
    P = I - V diag(c / lambda) V' (the gradient with its k stiffest directions damped), from
    one product with H_clip and a thin one with V: L(W) = Tr(D H_clip D') +
    sum_i c_i ||D v_i||^2, D = W - W*. Everything else is the LayerLoss of H_clip.

    For NumPy the two products are one, D [H_clip | V diag(c)^{1/2}] into a
    (d_out, d_in + k) work array, and LayerLoss's fused pass
    (``objectives._loss_and_gradient``) doubles its first d_in columns into the gradient
    while it sums the loss (at d_in = 384 the separate thin product took 0.6-0.7 of a
    product's time inside the loop, issue 12). H_clip is kept once, as the left block of
    that matrix (the LayerLoss sees a view of it).
    """

    stationary_reference = True  # L(W*) = 0 and both directions vanish at W*

    def __init__(self, W_star, H_clip, V, c, dtype):
        from ..objectives import LayerLoss, _loss_and_gradient, _loss_and_step

        self._fused_pass, self._fused_step = _loss_and_gradient, _loss_and_step
        xp = namespace(W_star, H_clip)
        Vs = V * xp.sqrt(c)[None, :]  # sum_i c_i ||D v_i||^2 = ||D V diag(c)^{1/2}||_F^2
        if isinstance(W_star, np.ndarray):
            d, k = H_clip.shape[0], Vs.shape[1]
            self._H_ext = np.empty((d, d + k), dtype=dtype)
            self._H_ext[:, :d] = H_clip  # rounded to the dtype of the steps
            self._H_ext[:, d:] = Vs
            H_steps, self._Vs = self._H_ext[:, :d], self._H_ext[:, d:]
        else:
            self._H_ext = None
            H_steps, self._Vs = xp.astype(H_clip, dtype), xp.astype(Vs, dtype)
        self._f = LayerLoss(W_star, H_steps, check_psd=False)
        self._wide = None  # D [H_clip | Vs] of value_and_grad(out=), allocated at its first call
        self.shape, self.dtype, self.reference = self._f.shape, self._f.dtype, W_star
        self.grad_out = self._f.grad_out

    def value_and_grad(self, W, *, out=None):
        f = self._f
        if out is None or self._H_ext is None:
            val, g = f.value_and_grad(W, out=out)
            D = f._work if out is not None else W - f.W_star
            DV = D @ self._Vs
            return val + frob_inner(DV, DV), g  # float64 sum of squares, no float64 copy
        W = f._check_w(W, "W")
        return self._fused_pass(self._wide_product(W, out), f._work, out), out

    def value_and_step(self, W, step, *, out):
        """(L(W), W - step 2 (W - W*) H_clip) from the one product of ``value_and_grad(out=)``
        and one pass (``LayerLoss.value_and_step``): NumPy and ``out`` only."""
        if self._H_ext is None:
            raise ValueError("value_and_step needs NumPy arrays (the tensor path has no "
                             "fused pass)")
        step = check_real(step, "step")
        W = self._f._check_w(W, "W")
        return self._fused_step(self._wide_product(W, out), self._f._work, W, step, out), out

    def _wide_product(self, W, out):
        """D [H_clip | V diag(c)^{1/2}] into the work array, for a checked W (D = W - W* into
        the LayerLoss's own, after its checks of ``out``)."""
        f = self._f
        D = f._difference_into_work(W, out)
        if self._wide is None:
            self._wide = np.empty((self.shape[0], self._H_ext.shape[1]), dtype=self.dtype)
        return np.matmul(D, self._H_ext, out=self._wide)


def make_regularizer(regularizer, pattern, *, prox_method="alm", prox_tol=None):
    """The regularizer object of a name in :data:`sparseopt.regularizers.REGULARIZERS`
    (``Regularizer.for_pattern``; objects pass unchanged).

    ``"rnm"``: r_{N:M} of ``pattern`` with the exact prox ``prox_nm`` (``prox_method``,
    ``prox_tol``); ``"R0"``, ``"R1"``, ``"R2"``: App. C eq. 25-27 on the groups of
    ``pattern``; ``"l0"``, ``"l1"``: the plain entrywise penalties.
    """
    if not isinstance(regularizer, str):
        if not hasattr(regularizer, "prox"):
            raise ValueError(f"regularizer must be one of {tuple(REGULARIZERS)} or an object "
                             f"with .prox(x, tau), got {regularizer!r}")
        return regularizer
    cls = REGULARIZERS[check_choice(regularizer, "regularizer", REGULARIZERS)]
    return cls.for_pattern(pattern, prox_method=prox_method, prox_tol=prox_tol)


@register("prox", order=40)
def prox_prune(W, H, pattern, *, regularizer="rnm", schedule="fast", start="dense", lam0=None,
               lam_tilde=None, rescale=True, max_iter=DEFAULT_MAX_ITER, prox_method="alm",
               prox_tol=None, progress=None):
    """Proximal gradient with r_{N:M} and a growing lambda (prox24-kubler Alg. 2; FISTA by default).

    The matrix prox pruner: gradient steps on L alternated with the prox of a sparsity
    regularizer (r_{N:M} by default; the App. C ones on request), with a growing lambda, until
    W is N:M sparse, then the projection onto the pattern where it is not yet. It is
    :func:`sparseopt.solvers.proximal_gradient` on :class:`sparseopt.objectives.LayerLoss`.

    Parameters
    ----------
    W : array, shape (d_out, d_in), float32 or float64
        Dense weights W* (validated by the caller). Not modified.
    H : array, shape (d_in, d_in)
        Symmetric PSD Hessian (float64).
    pattern : NM
        N:M pattern, ``n < m`` (``n == m`` returns W* unchanged).
    regularizer : {"rnm", "R0", "R1", "R2", "l0", "l1"} or regularizer object, default "rnm"
        r_{N:M} (prox24-kubler eq. 6, its exact prox eq. 7), or the simpler regularizers of
        App. C (eq. 25-27: hard thresholding, soft thresholding, shrinkage of the M - N
        smallest magnitudes of each group; the "L0 / L1 / L2 regularizer" rows of Table 2),
        or the plain l0 / l1 penalties (:func:`make_regularizer`). R2 never reaches exact
        N:M at finite lambda: its run stops by ``tail_tol`` and the final projection makes
        it N:M.
    schedule : {"fast", "paper"} or ProxSchedule, default "fast"
        The lambda schedule, momentum, Hessian clip and stopping rules (:class:`ProxSchedule`,
        named ones in :data:`SCHEDULES`): ``"paper"`` is Alg. 2 as published (plain proximal
        gradient, beta = 1.01); ``"fast"`` adds FISTA momentum and grows lambda by
        1.2 / 1.055 / 1.5 (before, while and after the groups decide), and on layers with
        outlier eigenvalues clips the Hessian in the steps and grows lambda by 1.25 while
        the groups decide; it stops at 99% of the groups N:M.
    start : {"dense", "wanda", "sparsegpt"}, default "dense"
        The first iterate (:data:`STARTS`): W* (Alg. 2), or the weights of
        ``prune(W, H, method=start)`` (SparseGPT with its default damping), rescaled as W*
        is. A warm start takes at least one iteration even though it is already N:M, so
        the run still follows the lambda path to a mask of its own. Its time is part of
        the method's time.
    lam0 : float, optional
        lambda_0 of the schedule lambda_k = lambda_0 beta^k; default 0.01 (Sec. 4).
    lam_tilde : float, optional
        Scale-free form (eq. 15): lambda_0 = lam_tilde / mean|W*|, with W* the weights the
        prox sees (after rescaling), for r_{2:4}; in general lam_tilde mean|W*|^(2 - p)
        for a regularizer homogeneous of degree p (r_{N:M}: p = N + 1; R0, l0: 0; R1, l1: 1;
        R2: 2), which makes the schedule invariant to the scale of W*. Give either ``lam0``
        or ``lam_tilde``, not both.
    rescale : bool, default True
        Wanda-style rescaling of Sec. 4 before pruning, undone at the end
        (:func:`rescale_wanda`).
    max_iter : int, default 3000
        Iteration cap. If W is still not N:M after it (or the schedule's ``stop_fraction``
        stopped it), W is projected onto the pattern (``pattern.project``: the n largest
        magnitudes of the last iterate) and ``info["projected"]`` is True.
    prox_method : {"alm", "pgd", "ipm"}, default "alm"
        Solver of :func:`sparseopt.prox.prox_nm` (tensors on an accelerator: "alm" for 2:4,
        the torch kernel).
    prox_tol : float, optional
        ``tol`` of ``prox_nm`` (its default when None).
    progress : bool, optional
        Show a tqdm progress bar (lambda, loss, fraction of N:M groups). Default: on for
        layers with at least 2^20 weights
        (:data:`sparseopt.solvers.proxgrad.PROGRESS_MIN_SIZE`), off below.

    Returns
    -------
    PruneResult
        ``history`` has one row per iteration k = 1..K: ``lam`` (the lambda_{k-1} used in
        step k), ``loss`` and ``objective`` (both L of the k-th iterate, float64; the
        rescaling leaves L invariant), ``nm_fraction`` (fraction of groups with <= n nonzeros) and ``time``
        (seconds since the start). ``mask`` keeps n entries in every group: the support of
        the final W, filled up with zero entries (ties to the smaller index), so that
        masked gradient steps ("+GD") may use all n slots.

    Notes
    -----
    One iteration (Alg. 2, with eta = 1 / (2 gamma_max(H)) the inverse Lipschitz constant;
    with ``clip`` the Hessian H_clip, eta = 1 / (2 gamma_max(H_clip)) and lambda_k eta / eta_0
    in the prox, see ``clip``):

        W <- W - eta 2 (W H - W* H)          (eq. 4)
        W <- prox_{lambda_k r_{N:M}}(W)      (per group, prox24-kubler eq. 7 / Alg. 1)

    Lambda convention: as in the paper's Alg. 2 the schedule value lambda_k is handed to
    the prox as is, i.e. lambda_k already contains the step size. In proximal-gradient
    notation, w <- prox_{t h}(w - t grad f) with t = eta and h = (lambda_k / eta) r_{N:M}:
    step k is a PG step on L(W) + (lambda_k / eta) sum_cells r_{N:M}(w). This is what makes
    the paper's lambda_0 = 0.01, beta = 1.01 usable unchanged (on the rescaled problem,
    where diag H = 1). Because r_{N:M} is homogeneous of degree n + 1, the prox is
    covariant under (z, lambda) -> (c z, lambda / c^{n-1}) -- for 2:4, lambda / c (Sec. 4.2)
    -- which motivates the scale-free lambda_0 of eq. 15.

    Cost per iteration: one d_out x d_in x d_in product (the gradient; the loss of the
    previous iterate is read off it) and d_out d_in / m group proxes, plus a few
    memory-bound passes over W: W - W*, the loss with 2 D H, the gradient step, the
    prox's input checks, the count of N:M groups and (FISTA) the extrapolation. For NumPy
    W the loss, the gradient step and the extrapolation with its restart test are fused
    Numba passes with the rounding of the NumPy expressions (``docs/layer.md``, issue 12).
    The first iteration from W* (``start="dense"``) is the prox alone: the gradient at W*
    is zero, so it takes no product.

    References
    ----------
    Kübler et al., "A Proximal Operator for Inducing 2:4-Sparsity", Alg. 2, eq. 4, 5, 15.
    """
    from ..objectives import LayerLoss

    if not isinstance(pattern, NM):
        raise ValueError(f"prox supports NM patterns only, got pattern={pattern!r}")
    n, m = pattern.n, pattern.m
    if lam0 is not None and lam_tilde is not None:
        raise ValueError("give either lam0 or lam_tilde (eq. 15), not both")
    lam0 = check_real(lam0, "lam0", positive=True, allow_none=True)
    lam_tilde = check_real(lam_tilde, "lam_tilde", positive=True, allow_none=True)
    sched = schedule if isinstance(schedule, ProxSchedule) else \
        SCHEDULES[check_choice(schedule, "schedule", SCHEDULES)]
    check_choice(start, "start", STARTS)
    max_iter = check_int(max_iter, "max_iter", minimum=0)
    auto = sched.clip == "auto"
    clip = 0 if auto else sched.clip
    if clip >= W.shape[1]:
        raise ValueError(f"clip must be below d_in = {W.shape[1]}, got {clip}")
    xp = namespace(W, H)
    dt = W.dtype
    if n >= m:
        mask = xp.ones(W.shape, dtype=xp.bool, device=device(W))
        return PruneResult(x=xp.asarray(W, copy=True), mask=mask,
                           stop_reason="n == m: nothing to prune", info={"nit": 0,
                           "stop_reason": "n == m: nothing to prune"})
    reg = make_regularizer(regularizer, pattern, prox_method=prox_method, prox_tol=prox_tol)

    if rescale:
        Wt_star, Ht, s = rescale_wanda(W, H)
    else:
        Wt_star, Ht, s = xp.asarray(W, copy=True), H, xp.ones(W.shape[1], dtype=xp.float64,
                                                               device=device(W))
    if lam_tilde is not None:
        mean_abs = float(xp.mean(xp.abs(Wt_star)))
        if mean_abs == 0:
            raise ValueError("lam_tilde needs mean|W*| > 0 (eq. 15); W* is all zeros")
        lam0 = lam_tilde * mean_abs ** (2 - reg.degree)
    elif lam0 is None:
        lam0 = DEFAULT_LAM0
    lam_scale = 1.0  # the prox's lambda over the schedule's (clip: eta / eta_0)
    g = None  # gamma_max(Ht): the clipped steps take it from the eigenpairs
    if auto:  # measured for r_{N:M} only: the clipped steps made R0 and R1 worse (docs/layer.md)
        clip, g = _auto_clip(Ht) if isinstance(reg, RNM) else (0, None)
    # the eigen solve in the precision of the steps: float32 weights round H_clip to float32
    precision = "float32" if _dtype_name(dt) == "float32" else "float64"
    clipped = (clip_hessian(Ht, clip, low_rank="none" if auto else "raise", precision=precision)
               if clip else None)
    # The iterations use f's copy of the Hessian (in W's dtype) only, so each float64 d x d
    # array is let go as soon as the next one exists (each is 1.6 GB at d_in = 14336)
    if clipped is not None:
        Ht = None  # H_clip replaces it
        H_clip, V, c, g, level = clipped
        clipped = None
        eta, lam_scale = 1.0 / (2.0 * level), g / level
        f = _ClippedLayerLoss(Wt_star, H_clip, V, c, dt)  # rounds H_clip to dt itself
        H_clip = None
    else:
        clip = 0  # also "auto" on an H of rank <= AUTO_CLIP: the plain steps
        g = gamma_max(Ht) if g is None else g
        eta = 1.0 / (2.0 * g) if g > 0 else 0.0  # H = 0: L is constant, only the prox acts
        f = LayerLoss(Wt_star, xp.astype(Ht, dt), check_psd=False)  # products in W's dtype
        Ht = None
    # lambda's growth while the groups decide: beta_clip with the clipped steps (they keep
    # up with a faster-moving minimiser)
    clip_growth = bool(clip) and sched.beta_clip is not None
    beta = sched.beta_clip if clip_growth else sched.beta
    x0, min_iter = None, 0  # None: f's reference W*, where the first step is a pure prox
    if start != "dense":  # a warm start is N:M already: at least one step off it
        x0 = _warm_start(start, W, H, pattern) * xp.astype(s[None, :], dt)
        min_iter = min(max_iter, 1)
    steps = Schedule(float(lam0) * lam_scale, float(beta), sched.beta_start, sched.beta_tail,
                     sched.stop_fraction, min_iter, sched.tail_tol)
    res = proximal_gradient(f, reg, steps, step=eta, x0=x0, max_iter=max_iter, pattern=pattern,
                            momentum=None if sched.momentum == "plain" else sched.momentum,
                            progress=progress, desc="prox")
    Wk, k = res.x, res.nit
    projected = res.stop_reason != "x in pattern"
    if projected:
        Wk = pattern.project(Wk)
    stop = f"{res.stop_reason} (projected onto the pattern)" if projected else "W is N:M"
    W_out = xp.astype(Wk / xp.astype(s[None, :], dt), dt, copy=False)
    mask = pattern.mask(W_out)
    W_out = xp.where(mask, W_out, zero(W_out))
    info = {
        "nit": k, "stop_reason": stop, "projected": projected,
        "schedule": schedule if isinstance(schedule, str) else asdict(sched),
        "lam0": float(lam0), "beta": float(beta), "beta_start": res.info["beta_start"],
        "beta_tail": res.info["beta_tail"], "momentum": sched.momentum,
        "restarts": res.info["restarts"], "lam_final": res.info["lam_final"] / lam_scale,
        "eta": eta, "clip": clip, "clip_auto": auto,
        "clip_precision": precision if clip else None,  # of the eigen solve
        "beta_clip": sched.beta_clip if clip_growth else None,  # None: not applied
        "stop_fraction": res.info["stop_fraction"], "rescale": bool(rescale),
        "prox_method": prox_method, "start": start,
        "regularizer": regularizer if isinstance(regularizer, str) else repr(regularizer),
    }
    history = {key: res.history[key] for key in ("lam", "loss", "nm_fraction", "time")}
    history["lam"] = history["lam"] / lam_scale
    if k:
        history["objective"] = history["loss"]
    return PruneResult(x=W_out, mask=mask, nit=k, stop_reason=stop, status=res.status,
                       history=history, info=info)


def _warm_start(start, W, H, pattern):
    """The pruned weights of the method ``start`` ("wanda" or "sparsegpt") with its
    defaults, in W's dtype: the first iterate of a warm-started prox run."""
    from .sparsegpt import sparsegpt_prune
    from .wanda import wanda_prune

    fn = {"wanda": wanda_prune, "sparsegpt": sparsegpt_prune}[start]
    return fn(W, H, pattern).x
