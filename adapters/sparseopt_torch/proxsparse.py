"""ProxSparse: end-to-end 2:4 mask learning (proxsparse-liu Alg. 1).

The targeted weights W of a model are trained on an end-to-end loss L (supplied by the
caller) plus lambda_2 Reg_W0(W), the frozen-weight regularizer, with AdamW; after every
optimizer step every targeted W (a (d_out, d_in) matrix, groups of 4 along d_in) goes through
the prox of lambda_1 r_{2:4} (prox24-kubler eq. 6 / proxsparse-liu eq. 4). At the end the 2:4
mask is read off the learned weights and applied to the ORIGINAL weights: the kept weights are
never updated (proxsparse-liu Alg. 1, line 7, "Output: W0 * Mask_{Proj_2:4(W_k)}").

The end-to-end losses: :func:`next_token_loss` for a causal LM (the paper's: its language-model
loss on the calibration text) and :func:`embedding_distance_loss` for a sentence encoder.

Public API: :func:`proxsparse` -> :class:`ProxSparseResult`, :func:`apply_masks`,
:func:`mask_24`, :func:`reg_w0`, :func:`next_token_loss`, :func:`embedding_distance_loss`.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import torch

from sparseopt import NM
from sparseopt.result import Result
from sparseopt.validation import check_bool, check_choice, check_int, check_real

from .layers import find_layers, get_weight, training_only

__all__ = ["ProxSparseResult", "ProxSparseSettings", "proxsparse", "apply_masks", "mask_24", "reg_w0",
           "next_token_loss", "embedding_distance_loss"]

#: Learning-rate schedules after the linear warm-up.
SCHEDULES = ("linear", "constant")
#: Layers are passed to the prox kernel together, up to about this many groups per call.
PROX_CHUNK = 1 << 20


@dataclass(repr=False)
class ProxSparseResult(Result):
    """What :func:`proxsparse` learned: a :class:`sparseopt.result.Result` whose ``x`` is the
    dict of masks, ``nit`` the optimizer steps, ``fun`` the last recorded objective.

    Attributes
    ----------
    x, masks : dict of str -> torch.Tensor
        ``{layer name: bool (d_out, d_in) tensor}`` on the layer's device, exactly 2 True
        per group of 4 along d_in: the top-2 magnitudes of the learned weights (:func:`mask_24`).
    history : dict of str -> ndarray
        One float64 entry per optimizer step k = 0..steps-1 (see :func:`proxsparse`).
    info : dict
        Settings and summary figures of the run (see :func:`proxsparse`).
    weights : dict of str -> torch.Tensor or None
        The learned (d_out, d_in) weights W_K (after the last prox), only with
        ``keep_weights=True``; the model itself is left with its original weights.
    """

    weights: dict | None = None

    @property
    def masks(self) -> dict:
        return self.x


def _groups(W: torch.Tensor) -> torch.Tensor:
    """(d_out, d_in) -> (d_out * d_in / 4, 4): the groups of 4 consecutive inputs."""
    return W.reshape(-1, 4)


@torch.no_grad()
def mask_24(W: torch.Tensor) -> torch.Tensor:
    """The 2:4 magnitude mask of ``W``: the two largest |w| of every group of 4 along the
    last dimension, ties to the lower index (the rule of ``sparseopt.NM(2, 4).mask``).

    Parameters
    ----------
    W : torch.Tensor
        Floating tensor whose last dimension is a multiple of 4, finite.

    Returns
    -------
    torch.Tensor
        bool, same shape and device as ``W``.

    Notes
    -----
    ``sparseopt.NM(2, 4).mask`` on the tensor (one mask rule in the whole project).
    """
    if not torch.is_tensor(W) or not W.is_floating_point():
        raise ValueError("W must be a floating-point tensor")
    if W.ndim == 0 or W.shape[-1] % 4 != 0:
        raise ValueError(f"W has shape {tuple(W.shape)}: its last dimension must be a "
                         "multiple of 4")
    if not torch.isfinite(W).all():
        raise ValueError("W contains NaN or Inf")
    return NM(2, 4).mask(W)


def reg_w0(W: torch.Tensor, W0: torch.Tensor, eps: float) -> torch.Tensor:
    """The frozen-weight regularizer Reg_W0(W) = || W / (W0 + eps sign(W0)) * (W - W0) ||_F^2.

    Parameters
    ----------
    W, W0 : torch.Tensor
        Current and original weights (same shape); differentiable in ``W``.
    eps : float
        The guard, > 0.

    Returns
    -------
    torch.Tensor
        Scalar in the dtype of ``W``.

    Notes
    -----
    proxsparse-liu Sec. 3.1 (the display after eq. 4; Prop. 2). It vanishes iff every nonzero
    entry of W equals its original value; near-zero entries of W cost almost nothing, large
    ones that moved cost a lot. The guard ``eps sign(W0)`` keeps the denominator away from 0:
    here sign(W0) is +1 for W0 >= 0 and -1 for W0 < 0, so |W0 + eps sign(W0)| = |W0| + eps >= eps
    (the authors' code; the text's "1 when >= 0 and 0 otherwise" would leave negative W0 near 0
    unguarded, which contradicts its stated purpose).
    """
    check_real(eps, "eps", positive=True)
    if W.shape != W0.shape:
        raise ValueError(f"W has shape {tuple(W.shape)} but W0 has {tuple(W0.shape)}")
    denom = torch.where(W0 >= 0, W0 + eps, W0 - eps)
    return ((W / denom) * (W - W0)).square().sum()


@torch.no_grad()
def apply_masks(model, masks: Mapping) -> None:
    """Zero the masked-out weights of ``model`` in place: W <- W * mask for every layer in
    ``masks`` (the original weights are kept, proxsparse-liu Alg. 1, line 7).

    Parameters
    ----------
    model : torch.nn.Module
        The model holding the weights to prune (normally the original, dense ones).
    masks : mapping
        ``{layer name: bool (d_out, d_in) tensor}``, e.g. ``ProxSparseResult.masks``.

    Raises
    ------
    ValueError
        If ``masks`` is empty, names a module the model lacks or that is not
        nn.Linear / Conv1D, or holds a mask that is not bool or has the wrong shape.
    """
    if not isinstance(masks, Mapping) or not masks:
        raise ValueError("masks must be a non-empty mapping {layer name: bool tensor}")
    layers = find_layers(model, list(masks))
    # check everything before touching a weight: nothing half-applied
    checked = []
    for name, module in layers.items():
        M = masks[name]
        W = get_weight(module)
        if not torch.is_tensor(M) or M.dtype != torch.bool:
            raise ValueError(f"masks[{name!r}] must be a bool tensor")
        if tuple(M.shape) != tuple(W.shape):
            raise ValueError(f"masks[{name!r}] has shape {tuple(M.shape)}, expected "
                             f"{tuple(W.shape)} (d_out, d_in)")
        checked.append((W, M))
    for W, M in checked:
        W.mul_(M.to(device=W.device, dtype=W.dtype))


def _lr_factor(k: int, steps: int, n_warm: int, schedule: str) -> float:
    """Multiplier of ``lr`` in step k (0-based): linear warm-up (k+1)/(n_warm+1) for
    k < n_warm, then 1 ("constant") or a linear decay (steps-k)/(steps-n_warm) ("linear")."""
    if k < n_warm:
        return (k + 1) / (n_warm + 1)
    if schedule == "constant":
        return 1.0
    return (steps - k) / (steps - n_warm)


def _r24_sum(W: torch.Tensor) -> float:
    """Sum over groups of r_{2:4}(w) = e_3(|w|) (prox24-kubler eq. 6), summed in float64."""
    return _r24_of(_groups(W).abs())


def _r24_of(a: torch.Tensor) -> float:
    return float((a[:, 0] * a[:, 1] * (a[:, 2] + a[:, 3])
                  + a[:, 2] * a[:, 3] * (a[:, 0] + a[:, 1])).sum(dtype=torch.float64))


def _group_stats(W: torch.Tensor, mask0: torch.Tensor):
    """(groups with <= 2 nonzeros, groups whose top-2 mask differs from ``mask0``, r_{2:4}
    summed over groups) of the (d_out, d_in) weight ``W``: one pass over |W|."""
    a = _groups(W).abs()
    n_24 = int(((a != 0).sum(dim=1) <= 2).sum())
    changed = int((NM(2, 4).mask(a) != mask0.reshape(-1, 4)).any(dim=1).sum())
    return n_24, changed, _r24_of(a)


@dataclass(frozen=True)
class ProxSparseSettings:
    """The hyper-parameters of proxsparse-liu Alg. 1 with AdamW (:func:`proxsparse`).

    Attributes
    ----------
    lam1 : float
        lambda_1 >= 0, the weight of r_{2:4} (the prox; see ``prox_lr_scaled``).
    lam2 : float
        lambda_2 >= 0, the weight of Reg_W0 in the loss (:func:`reg_w0`).
    lr : float
        Peak learning rate of AdamW, > 0.
    steps : int
        Number of optimizer steps, >= 1.
    warmup : float, default 0.1
        Warm-up ratio in [0, 1]: the first ceil(warmup * steps) steps ramp the learning rate
        up linearly (the authors' ``warmup_ratio = 0.1``).
    schedule : {"linear", "constant"}, default "linear"
        After the warm-up: linear decay towards 0 (the transformers Trainer's default, which
        the authors use) or constant.
    weight_decay : float, default 0.0
        AdamW's decoupled weight decay (0: the Trainer's default, as in the authors' runs).
    betas : tuple of float, default (0.9, 0.999)
        AdamW's betas.
    eps : float, default 0.1
        The guard of Reg_W0 (the authors' default ``--epsilon 0.1``), > 0; an absolute value,
        to be compared with the magnitude of the weights.
    prox_lr_scaled : bool, default False
        False: the prox uses lambda_1 as is, as in proxsparse-liu Alg. 1 line 5 and the authors'
        code. True: lambda_1 times the current learning rate eta_k, the textbook
        proximal-gradient step prox_{eta_k h} of eq. 5b with h = lambda_1 Reg_2:4.
    shuffle : bool, default True
        Visit the batches in a new seeded random order in every pass (else in order).
    seed : int, default 0
        Seeds the batch order and torch's RNG (dropout) inside the run; the caller's global
        RNG state is restored afterwards.
    record_every : int, default 1
        Record the history every ``record_every`` steps (and at the last step); its
        statistics take several passes over all targeted weights per recorded step.
    """

    lam1: float
    lam2: float
    lr: float
    steps: int
    warmup: float = 0.1
    schedule: str = "linear"
    weight_decay: float = 0.0
    betas: tuple = (0.9, 0.999)
    eps: float = 0.1
    prox_lr_scaled: bool = False
    shuffle: bool = True
    seed: int = 0
    record_every: int = 1

    def __post_init__(self):
        for name in ("lam1", "lam2", "weight_decay"):
            check_real(getattr(self, name), name)
        check_real(self.lr, "lr", positive=True)
        check_real(self.eps, "eps", positive=True)
        check_int(self.steps, "steps", minimum=1)
        check_int(self.record_every, "record_every", minimum=1)
        check_int(self.seed, "seed")
        if not 0 <= check_real(self.warmup, "warmup") <= 1:
            raise ValueError(f"warmup must be a ratio in [0, 1], got {self.warmup!r}")
        check_choice(self.schedule, "schedule", SCHEDULES)
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        check_bool(self.prox_lr_scaled, "prox_lr_scaled")
        check_bool(self.shuffle, "shuffle")


def proxsparse(model, batches, loss_fn, settings, *, modules=None, keep_weights=False,
               backend="auto", progress=None, checkpoint=None,
               checkpoint_every=600.0) -> ProxSparseResult:
    """Learn 2:4 masks end to end: proxsparse-liu Alg. 1 with AdamW.

    Parameters
    ----------
    model : torch.nn.Module
        The model, on its device (nothing is moved). Its mode (train/eval) is left as it is:
        call ``model.eval()`` to run without dropout.
    batches : iterable
        Calibration batches, used in turn (a new pass when exhausted); materialized as a list.
    loss_fn : callable
        ``loss_fn(model, batch) -> scalar tensor``: the end-to-end loss L (it moves the batch
        to the model's device if needed), e.g. :func:`embedding_distance_loss`.
    modules : optional
        Which layers are pruned, as in :func:`sparseopt_torch.find_layers`; d_in of each must
        be a multiple of 4.
    settings : ProxSparseSettings
        lambda_1, lambda_2, learning rate and its schedule, steps, AdamW's betas, the seed.
    keep_weights : bool, default False
        Return the learned weights W_K in ``result.weights`` (costs one copy of them).
    backend : {"auto", "torch", "numpy"}, default "auto"
        Who computes the prox: "torch" the adapter's :func:`~sparseopt_torch.kernels.prox24`
        for the weights' device (the core's EnumALM compiled for the GPU by numba-cuda, or
        on a host copy), "numpy" the core's Numba EnumALM (:func:`sparseopt.prox.prox_nm`,
        CPU weights only), "auto" the core for CPU weights and prox24 elsewhere. All run
        the core's algorithm (on a GPU up to rounding).
    progress : bool, optional
        tqdm progress bar (loss, fraction of 2:4 groups, learning rate); None: only when
        stderr is a terminal (tqdm's ``disable=None``).
    checkpoint : str, optional
        A file for the run's state between steps (step, learned weights W_k, AdamW's
        moments and learning-rate schedule, batch order, RNG states, history so far),
        written atomically (:func:`~sparseopt_torch.rundir.atomic_write`). If it exists the
        run continues from it, and ends bit for bit where an uninterrupted run ends (the
        history's ``time`` aside); a file of another run (other settings, layers,
        calibration batches or original weights) is refused with a ValueError naming what
        differs. The caller removes it once the result is safe. None: no checkpoint.
    checkpoint_every : float, default 600.0
        Seconds between two checkpoints (0: after every step); the state is saved at a
        step's end once this much time has passed since the start or the last save. A
        checkpoint holds 3x the targeted weights (W_k and AdamW's two moments).

    Returns
    -------
    ProxSparseResult
        ``masks`` (the top-2 |w| of the learned weights per group, :func:`mask_24`),
        ``history`` with one row per recorded step k (``step``; every step by default):
        ``loss`` (L at W_k, before the step),
        ``reg_w0`` (sum over layers of Reg_W0(W_k), without lambda_2), ``objective``
        (loss + lam2 reg_w0 + lam1 r24 of W_k), ``lr`` (eta_k), ``lam`` (the lambda handed
        to the prox), ``r24`` (sum of r_{2:4} over all groups of W_{k+1}, after the prox),
        ``frac_24`` (fraction of groups of W_{k+1} with at most 2 nonzeros),
        ``mask_change`` (fraction of groups whose top-2 mask of W_{k+1} differs from the
        magnitude mask of the original weights), ``time`` (seconds since the start);
        ``info`` with the settings, ``layers`` (names), ``n_groups``, ``warmup_steps``,
        ``frac_24`` (final), ``mask_vs_magnitude`` (final fraction of groups whose mask
        differs from magnitude pruning of the original weights), ``time``.

    Notes
    -----
    proxsparse-liu eq. 3 and Alg. 1, with f = L + lambda_2 Reg_W0 and h = lambda_1 Reg_2:4:

        g_k = grad L(W_k) + lambda_2 grad Reg_W0(W_k)       (autograd; Alg. 1, lines 3-4)
        V = AdamW step of W_k with g_k and eta_k             (Alg. 1, line 4 with Adam)
        W_{k+1} = prox_{lam r_{2:4}}(V) per group of 4       (Alg. 1, line 5; prox24)

    with lam = lambda_1 (default, as printed in Alg. 1 and in the authors' code) or
    eta_k lambda_1 (``prox_lr_scaled=True``). With Adam the update is not eta_k g_k, so
    neither choice is an exact proximal-gradient step; the unscaled one keeps the paper's
    lambda_1 values (Table 8: 0.2 - 25 with lr 5e-5 - 1e-4) meaningful, the scaled one makes
    the shrinkage follow the warm-up/decay and is what eq. 5b prescribes for SGD. Note that
    because r_{2:4} is homogeneous of degree 3, the prox acts on weights of magnitude c like
    lambda / c on unit weights (prox24-kubler Sec. 4.2): the same lambda_1 shrinks
    differently on models with different weight scales.

    Only the targeted weights are trained (their biases and every other parameter are frozen,
    ``requires_grad`` restored afterwards); the authors fine-tune the whole model but also
    only read the masks of the targeted weights. The end result follows Alg. 1, line 7: the
    mask is the top-2 |w| of the last iterate per group (exactly the support of W_K where W_K
    is 2:4 sparse; "Proj_2:4" by magnitude where it is not, Sec. 3.2), and the original
    weights are kept: :func:`apply_masks` on the original model gives W0 * mask.

    The model is trained in place and restored: the original targeted weights (W0, needed by
    Reg_W0 anyway) are copied back in a ``finally`` block, also when the run is interrupted,
    so ``model`` leaves with exactly its original weights. Extra memory: W0 plus AdamW's two
    moments, 3x the targeted weights; no copy of the whole model.

    The learning-rate factor of step k (0-based) is (k + 1) / (n_w + 1) during the
    n_w = ceil(warmup * steps) warm-up steps (the Trainer's k / n_w would waste step 0 at
    lr 0), then 1 or (steps - k) / (steps - n_w).

    References
    ----------
    Liu et al., "ProxSparse", ICML 2025: eq. 3, 4, Reg_W0 (Sec. 3.1), Alg. 1, App. B.
    Kübler et al., "A Proximal Operator for Inducing 2:4-Sparsity": r_{2:4} (eq. 6).

    Examples
    --------
    >>> import torch
    >>> from sparseopt_torch.proxsparse import ProxSparseSettings, proxsparse, apply_masks
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 4))
    >>> X, Y = torch.randn(16, 8), torch.randn(16, 4)
    >>> loss = lambda m, b: ((m(b[0]) - b[1]) ** 2).mean()
    >>> settings = ProxSparseSettings(lam1=1.0, lam2=0.0, lr=1e-2, steps=20)
    >>> res = proxsparse(net, [(X, Y)], loss, settings, progress=False)
    >>> res.masks["0"].sum(dim=1).tolist()  # 2 of every 4 inputs kept per output
    [4, 4, 4, 4]
    >>> apply_masks(net, res.masks)
    """
    from tqdm.auto import tqdm

    if backend not in ("auto", "torch", "numpy"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'numpy', got {backend!r}")
    prox24 = _prox_function(backend)
    if not callable(loss_fn):
        raise ValueError("loss_fn must be callable as loss_fn(model, batch) -> scalar tensor")
    if not isinstance(settings, ProxSparseSettings):
        raise ValueError(f"settings must be a ProxSparseSettings, got {settings!r}")
    lam1, lam2, lr, steps = float(settings.lam1), float(settings.lam2), settings.lr, settings.steps
    warmup, schedule, weight_decay = settings.warmup, settings.schedule, settings.weight_decay
    betas, eps, prox_lr_scaled = settings.betas, settings.eps, settings.prox_lr_scaled
    shuffle, seed, record_every = settings.shuffle, settings.seed, settings.record_every
    weight_decay, steps = float(weight_decay), int(steps)
    batches = list(batches)
    if not batches:
        raise ValueError("batches is empty: ProxSparse needs calibration batches")
    layers = find_layers(model, modules)
    for name, module in layers.items():
        W = get_weight(module)
        if W.shape[1] % 4 != 0:
            raise ValueError(f"layer {name!r} has d_in = {W.shape[1]}, not a multiple of 4 "
                             "(2:4 groups run along d_in)")
        if not W.is_floating_point() or not torch.isfinite(W).all():
            raise ValueError(f"layer {name!r} has a non-floating or non-finite weight")
    names = list(layers)
    params = {name: layers[name].weight for name in names}
    if len({id(p) for p in params.values()}) != len(params):
        raise ValueError("modules selects layers that share one weight tensor")

    check_real(checkpoint_every, "checkpoint_every")
    n_warm = math.ceil(warmup * steps)
    state = None
    if checkpoint is not None:
        from .rundir import check_same, fingerprint, fingerprint_weights

        # what a checkpoint must share with this run to be continued by it
        run_id = {**asdict(settings), "backend": backend,
                  "layers": {n: list(get_weight(layers[n]).shape) for n in names},
                  "calibration_sha256": fingerprint(batches),
                  "dense_weights_sha256": fingerprint_weights(layers)}
        state = _read_state(checkpoint)
        if state is not None:
            check_same(state["run"], run_id, f"cannot continue the ProxSparse checkpoint "
                       f"{checkpoint!r} (remove it to start again)")
    W0 = {name: get_weight(layers[name]).clone() for name in names}
    mask0 = {name: mask_24(W0[name]) for name in names}
    n_groups = sum(W.numel() // 4 for W in W0.values())
    device = next(iter(params.values())).device

    hist = {k: [] for k in ("step", "loss", "reg_w0", "objective", "lr", "lam", "r24", "frac_24",
                            "mask_change", "time")}
    rng_devices = [device] if device.type == "cuda" else []
    t0 = time.perf_counter() - (state["elapsed"] if state is not None else 0.0)
    k0 = 0
    try:
        with torch.random.fork_rng(devices=rng_devices), training_only(model, params.values()):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            opt = torch.optim.AdamW(list(params.values()), lr=float(lr), betas=tuple(betas),
                                    weight_decay=weight_decay)
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda k: _lr_factor(k, steps, n_warm, schedule))
            order = []
            if state is not None:
                k0, order = state["k"], list(state["order"])
                _restore(state, layers, names, opt, sched, gen, device)
                hist = {k: list(v) for k, v in state["hist"].items()}
                state = None  # its tensors are now the model's and the optimizer's
            last_save = time.perf_counter()
            bar = tqdm(range(k0, steps), initial=k0, total=steps, desc="proxsparse",
                       unit="step", disable=None if progress is None else not progress)
            for k in bar:
                if not order:
                    order = (torch.randperm(len(batches), generator=gen).tolist() if shuffle
                             else list(range(len(batches))))
                batch = batches[order.pop(0)]
                # statistics cost several passes over all weights: only on recorded steps
                record = k % record_every == 0 or k == steps - 1
                if record:
                    with torch.no_grad():
                        r24_prev = sum(_r24_sum(get_weight(layers[n])) for n in names)
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model, batch)
                if not torch.is_tensor(loss) or loss.numel() != 1:
                    raise ValueError(f"loss_fn must return a scalar tensor, got "
                                     f"{type(loss).__name__} at step {k}")
                if not torch.isfinite(loss.detach()).all():
                    raise ValueError(f"loss_fn returned a non-finite loss at step {k}")
                total = loss.reshape(())
                if lam2 > 0:
                    reg = sum(reg_w0(params[n], _param_view(layers[n], W0[n]), eps)
                              for n in names)
                    total = total + lam2 * reg
                elif record:
                    with torch.no_grad():
                        reg = sum(reg_w0(params[n].detach(), _param_view(layers[n], W0[n]),
                                         eps) for n in names)
                total.backward()
                eta = sched.get_last_lr()[0]
                opt.step()
                lam = lam1 * eta if prox_lr_scaled else lam1
                frac, changed, r24 = 0, 0, 0.0
                with torch.no_grad():
                    if lam > 0:
                        _prox_layers([get_weight(layers[n]) for n in names], lam, prox24)
                    for n in (names if record else ()):
                        W = get_weight(layers[n])
                        n_24, n_changed, r24_n = _group_stats(W, mask0[n])
                        frac += n_24
                        changed += n_changed
                        r24 += r24_n
                sched.step()
                if record:
                    _record(hist, k, loss, reg, lam1, lam2, r24_prev, eta, lam, r24,
                            frac / n_groups, changed / n_groups, time.perf_counter() - t0)
                    bar.set_postfix(loss=f"{hist['loss'][-1]:.3g}",
                                    frac24=f"{frac / n_groups:.3f}", lr=f"{eta:.2g}")
                if checkpoint is not None and k + 1 < steps \
                        and time.perf_counter() - last_save >= checkpoint_every:
                    _save_state(checkpoint, run_id, k + 1, order, layers, names, opt, sched,
                                gen, device, hist, time.perf_counter() - t0)
                    last_save = time.perf_counter()
            bar.close()
            with torch.no_grad():
                learned = {n: get_weight(layers[n]) for n in names}
                masks = {n: mask_24(W) for n, W in learned.items()}
                weights = ({n: W.clone() for n, W in learned.items()} if keep_weights
                           else None)
    finally:
        with torch.no_grad():
            for n in names:
                get_weight(layers[n]).copy_(W0[n])

    differ = sum(int((masks[n] != mask0[n]).reshape(-1, 4).any(dim=1).sum()) for n in names)
    info = {"layers": names, "n_groups": n_groups, "steps": steps, "warmup_steps": n_warm,
            "schedule": schedule, "lam1": lam1, "lam2": lam2, "lr": float(lr),
            "weight_decay": weight_decay, "eps": float(eps), "prox_lr_scaled": prox_lr_scaled,
            "seed": seed, "frac_24": hist["frac_24"][-1], "mask_vs_magnitude": differ / n_groups,
            "time": time.perf_counter() - t0}
    history = {k: np.asarray(v, dtype=np.float64) for k, v in hist.items()}
    return ProxSparseResult(x=masks, fun=float(history["objective"][-1]), nit=steps,
                            stop_reason=f"{steps} steps", history=history, info=info,
                            weights=weights)


def _record(hist, k, loss, reg, lam1, lam2, r24_prev, eta, lam, r24, frac, changed, elapsed):
    """Append step k's row to the history (see :func:`proxsparse`, Returns)."""
    loss_v, reg_v = float(loss.detach()), float(reg.detach())
    for key, value in (("step", k), ("loss", loss_v), ("reg_w0", reg_v),
                       ("objective", loss_v + lam2 * reg_v + lam1 * r24_prev), ("lr", eta),
                       ("lam", lam), ("r24", r24), ("frac_24", frac), ("mask_change", changed),
                       ("time", elapsed)):
        hist[key].append(value)


def _read_state(path):
    """The checkpoint dict at ``path`` (None if there is none); ValueError if unreadable.
    Also read by :mod:`~sparseopt_torch.finetune`, whose checkpoints have the same form."""
    import os

    if not os.path.exists(path):
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("format") != 1:
            raise KeyError("format")
    except Exception as exc:  # a foreign or damaged file: say which, never a traceback
        why = (str(exc).strip().splitlines() or [""])[0]  # torch.load's messages run on
        raise ValueError(f"{path!r} is not a training checkpoint of this version "
                         f"({type(exc).__name__}: {why}); remove it to start again") from None
    return state


def _save_state(path, run_id, k, order, layers, names, opt, sched, gen, device, hist,
                elapsed):
    """Everything the steps k, k+1, ... depend on, atomically at ``path`` (CPU tensors)."""
    import os

    from .rundir import atomic_write

    state = {"format": 1, "run": run_id, "k": k, "order": list(order), "elapsed": elapsed,
             "weights": {n: get_weight(layers[n]).detach().to("cpu", copy=True)
                         for n in names},
             "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "generator": gen.get_state(), "rng": torch.get_rng_state(),
             "cuda_rng": (torch.cuda.get_rng_state(device) if device.type == "cuda"
                          else torch.empty(0, dtype=torch.uint8)),
             "hist": {key: list(v) for key, v in hist.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, lambda p: torch.save(state, p))


@torch.no_grad()
def _restore(state, layers, names, opt, sched, gen, device):
    """Put a checkpoint's weights, optimizer, schedule and RNG states in place."""
    for n in names:
        get_weight(layers[n]).copy_(state["weights"][n])
    opt.load_state_dict(state["optimizer"])  # moves the moments to the weights' device
    sched.load_state_dict(state["scheduler"])
    gen.set_state(state["generator"])
    torch.set_rng_state(state["rng"])
    if device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"], device)


def _prox_function(backend):
    """The 2:4 prox on a weight tensor: ``"torch"`` :func:`~sparseopt_torch.kernels.prox24`;
    ``"numpy"`` / ``"auto"`` the core's kernel for the tensor (``sparseopt.backend.kernel``:
    Numba EnumALM on a NumPy view of a CPU tensor, prox24 on a GPU)."""
    from sparseopt.backend import kernel

    from .kernels import prox24

    if backend == "torch":
        return prox24

    def core(Y, lam):
        if backend == "numpy" and Y.device.type != "cpu":
            raise ValueError(f"backend='numpy' needs CPU weights, got a tensor on {Y.device}")
        return kernel("prox_nm", Y)(Y.detach(), float(lam), 2, 4)
    return core


def _prox_layers(Ws, lam, prox24, chunk=PROX_CHUNK):
    """W <- prox24(W, lam) for every (d_out, d_in) weight in ``Ws``, in place.

    Small layers are concatenated into calls of at least ``chunk`` groups: a call costs a
    launch and a wait for the device (or two copies to the host) whatever its size.
    bfloat16/float16 weights are proxed in float32 and rounded back to their dtype.
    """
    pending, size = [], 0
    for i, W in enumerate(Ws):
        pending.append(W)
        size += W.numel() // 4
        nxt = Ws[i + 1] if i + 1 < len(Ws) else None
        # a model spread over devices (or dtypes) is proxed one device/dtype run at a time
        if nxt is None or size >= chunk or (nxt.device, nxt.dtype) != (W.device, W.dtype):
            flat = torch.cat([P.reshape(-1, 4) for P in pending]) if len(pending) > 1 \
                else pending[0].reshape(-1, 4)
            # the kernel computes in float64 and takes float32/64: half types go via float32
            out = prox24(flat if flat.dtype in (torch.float32, torch.float64) else flat.float(),
                         lam)
            start = 0
            for P in pending:
                n = P.numel() // 4
                P.copy_(out[start:start + n].reshape(P.shape))
                start += n
            pending, size = [], 0


def _param_view(module, W0: torch.Tensor) -> torch.Tensor:
    """W0 (d_out, d_in) in the layout of ``module.weight`` (Conv1D stores (d_in, d_out))."""
    return W0 if isinstance(module, torch.nn.Linear) else W0.T


def next_token_loss(model, batch) -> torch.Tensor:
    """The end-to-end loss of a causal LM: its mean next-token cross-entropy on a batch.

    Parameters
    ----------
    model : torch.nn.Module
        A causal LM called as ``model(input_ids=..., attention_mask=...)`` that returns
        ``.logits`` of shape (B, T, vocab) (transformers' ``AutoModelForCausalLM``); run as
        it is (mode, gradients), on its own device.
    batch : mapping
        ``input_ids`` (B, T) integer tensor, T >= 2, and optionally ``attention_mask``
        (B, T), as :func:`sparseopt_torch.data.sequence_batches` (the calibration windows of
        ``sparseopt prune``) or a tokenizer makes them; moved to the model's device.

    Returns
    -------
    torch.Tensor
        Scalar, differentiable: the mean over the scored positions t of
        ``-log p(x_{t+1} | x_{<=t})``, in the logits' dtype, at least float32. A position is
        scored when both it and its target are real tokens (``attention_mask`` 1 at t and
        t+1; every position of a batch without a mask).

    Raises
    ------
    ValueError
        A batch that is not such a mapping, has no position to score, or logits that are
        not finite.

    Notes
    -----
    proxsparse-liu eq. 1-3: L is the language-modelling loss on the calibration data (the
    authors fine-tune with the transformers Trainer, whose causal-LM loss is this mean over
    the shifted tokens). The per-token negative log-likelihood is the one
    :func:`sparseopt_torch.evaluate.perplexity` uses (``exp`` of its mean over held-out
    windows is the perplexity).
    """
    from .evaluate import _check_module, _logits, _token_nll

    device = _check_module(model, "model")
    if not isinstance(batch, Mapping) or not torch.is_tensor(batch.get("input_ids")):
        raise ValueError(f"batch must be a dict with an 'input_ids' tensor, got "
                         f"{type(batch).__name__}")
    ids = batch["input_ids"].to(device)
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"input_ids must have shape (B, T) with T >= 2, got {tuple(ids.shape)}")
    inputs = {"input_ids": ids}
    mask = batch.get("attention_mask")
    if mask is not None:
        inputs["attention_mask"] = mask = mask.to(device)
    logits = _logits(model, "model", inputs)
    nll = _token_nll(logits[:, :-1], ids[:, 1:])
    if mask is None:
        return nll.mean()
    scored = (mask[:, 1:] != 0) & (mask[:, :-1] != 0)
    if not bool(scored.any()):
        raise ValueError("batch has no position to score (attention_mask leaves no two "
                         "consecutive tokens)")
    return nll[scored].mean()


def embedding_distance_loss(dense_model, *, key="sentence_embedding"):
    """The end-to-end loss of issue 5 for a SentenceTransformer: mean squared distance between
    the pruned model's sentence embeddings and the dense model's.

    Parameters
    ----------
    dense_model : torch.nn.Module
        The dense SentenceTransformer. A frozen copy is taken now (``copy.deepcopy``, eval
        mode, no gradients), so later changes to ``dense_model`` do not move the target.
    key : str, default "sentence_embedding"
        The output of the model's forward that holds the embeddings.

    Returns
    -------
    callable
        ``loss_fn(model, batch) -> scalar tensor``: mean over the sentences of the batch of
        ||e(x) - e_dense(x)||^2, for ``batch`` a tokenized dict as produced by
        ``minilm.tokenize(sentences)`` / ``minilm.preprocess(sentences)`` or
        :func:`sparseopt_torch.data.token_batches`. The tensors of the batch are moved to the model's
        device; the dense embeddings of a batch are computed once (no_grad) and cached by
        the identity of the batch object, so a batch must not be modified between calls.

    Notes
    -----
    all-MiniLM-L6-v2 ends with a Normalize module, so embeddings are unit vectors and
    ||e - e_dense||^2 = 2 (1 - cos(e, e_dense)): this loss is 2 (1 - mean cosine similarity),
    the first fidelity measure of the issue, made a smooth objective. The sum over embedding
    coordinates (not the mean) keeps its gradient independent of the embedding width.
    """
    if not isinstance(dense_model, torch.nn.Module):
        raise ValueError(f"dense_model must be a torch.nn.Module, got "
                         f"{type(dense_model).__name__}")
    frozen = copy.deepcopy(dense_model).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    target_device = next(frozen.parameters()).device
    cache = {}

    def _features(batch, device):
        return {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in batch.items()}

    def loss_fn(model, batch):
        if not isinstance(batch, Mapping):
            raise ValueError(f"batch must be a tokenized dict, got {type(batch).__name__}")
        device = next(model.parameters()).device
        hit = cache.get(id(batch))
        if hit is None or hit[0] is not batch:
            with torch.no_grad():
                # the forward adds its outputs to the dict it gets: always a fresh one
                target = frozen(_features(batch, target_device))[key].detach()
            cache[id(batch)] = (batch, target)
        else:
            target = hit[1]
        emb = model(_features(batch, device))[key]
        return (emb - target.to(device=emb.device, dtype=emb.dtype)).square().sum(dim=-1).mean()

    return loss_fn
