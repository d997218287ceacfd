"""Pruning a whole model layer by layer with the core methods (prox24-kubler Sec. 4, App. D.1).

For every selected linear layer, the input Hessian H = X X' / n is collected from calibration
data (:func:`~sparseopt_torch.hessians.collect_hessians`), the layer problem
min_W Tr((W - W*) H (W - W*)') over N:M sparse W is solved by a core method
(:func:`sparseopt.prune`, called with the layer's tensors on an accelerator, where it computes
with torch, and with NumPy views of them on the CPU), optionally followed by masked gradient
steps ("+GD", eq. 5, the core's :func:`sparseopt.layer.masked_gd`), and the pruned weights are
written back into the model.

The model is streamed block by block (:mod:`~sparseopt_torch.blocks`): the inputs of the first
block are captured once, then each block collects its layers' Hessians from its cached inputs,
is pruned and computes the next block's inputs. Two ways to get those inputs:

- independent (default, prox24-kubler App. D.1): from the dense block, so every Hessian is the
  dense model's and the layers are independent problems (one pass per block and batch);
- sequential (as maiht-wen and SparseGPT do): from the pruned block, so a block's Hessians see
  the already pruned earlier blocks (two passes per block and batch).

Runs with ``out=DIR`` are resumable: every finished layer is saved (atomically) to
``DIR/layers/`` and a rerun with the same settings reloads the finished layers and continues.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as fields_of

import numpy as np
import torch
from torch.utils.weak import WeakTensorKeyDictionary

from sparseopt import prune as core_prune
from sparseopt.backend import as_numpy, namespace, numpy_path, synchronize, zero
from sparseopt.layer import check_refine_steps, layer_loss, masked_gd, masked_optimum, methods
from sparseopt.layer.loss import base_loss, check_hessian, gamma_max
from sparseopt.patterns import NM, TopK
from sparseopt.result import Result
from sparseopt.validation import check_choice, check_int, check_real

from .blocks import Activations, capture_inputs, find_blocks, return_freed_memory, run_block
from .distributed import LayerJob
from .hessians import Hessians, _default_forward, collect_hessians
from .layers import evaluating, find_layers, get_weight, parse_device, set_weight
from .reconstruct import BLOCK_LR, BlockRecord, reconstruct_block
from .rundir import (create_run, fingerprint, fingerprint_weights, load_block, load_pruned,
                     open_run, save_block, save_layer, write_json, write_text)

__all__ = ["prune_model", "PruneSettings", "ModelPruneResult", "LayerRecord", "load_pruned"]

@dataclass(frozen=True)
class PruneSettings:
    """How :func:`prune_model` makes a run (what a method computes is its ``options``).

    Attributes
    ----------
    pattern : NM or TopK, default NM(2, 4)
        Pattern along each weight row (the input dimension).
    refine_steps : int or "exact", default 0
        Masked gradient steps after the method ("+GD", prox24-kubler eq. 5); ``"exact"``:
        the masked least-squares optimum instead (:func:`sparseopt.layer.masked_optimum`,
        its solver, iterations and final relative gradient in each record's ``info``). The
        records hold the loss before and after; with ``out`` both weights are saved.
    sequential : bool, default False
        False: every Hessian comes from the dense model (prox24-kubler App. D.1): a block's
        outputs are computed by the dense block. True: a block's outputs are computed by the
        pruned block, so later blocks see the pruned earlier ones (SparseGPT, maiht-wen).
    modules : optional
        Which layers (see :func:`~sparseopt_torch.layers.find_layers`); default every
        ``nn.Linear`` / ``Conv1D`` inside the blocks (never embeddings or heads).
    blocks : None, str
        The block list: None finds it (:func:`~sparseopt_torch.blocks.find_blocks`), a
        dotted name overrides it, ``"model"`` treats the whole model as one block.
    device : str or torch.device, optional
        Where blocks run and layers are pruned (default: where the model's parameters are;
        :func:`~sparseopt_torch.layers.parse_device`).
    on_indivisible : {"error", "skip"}
        A layer whose d_in is not divisible by m: raise, or leave it dense with a warning.
    hessian_dtype : torch.dtype, default torch.float64
        Accumulation dtype of the Hessians (float32 is for GPUs short of memory).
    hessian_product_dtype : torch.dtype, optional
        Dtype of each batch's X'X (default ``hessian_dtype``); ``torch.float32`` with the
        default float64 sums computes the products in single precision
        (:func:`~sparseopt_torch.collect_hessians`, ``product_dtype``).
    cache_limit : int or None, default 1 GiB
        Above this many bytes per generation of cached block inputs, they are memory-mapped
        from files in ``cache_dir`` (default the system's temporary folder); None: never.
    cache_dir : str, optional
    resume : bool, default True
        Continue a run found in ``out`` (its settings must equal these: ValueError naming
        the differences otherwise). False with an existing run raises ValueError.
    progress : bool, optional
        A progress bar over layers (default on).
    block_steps : int, default 0
        Block reconstruction ("+BR", :mod:`~sparseopt_torch.reconstruct`): Adam steps that
        fit the kept weights of all pruned layers of a block jointly to the dense block's
        outputs on its cached inputs, masks fixed, after the layers are pruned (and +GD).
        0: none. Needs a list of blocks (not ``blocks="model"``) and collected Hessians
        (not ``hessians=``).
    block_lr : float, default 1e-3
        Adam's learning rate of block reconstruction (``reconstruct.BLOCK_LR``).
    """

    pattern: object = field(default_factory=lambda: NM(2, 4))
    refine_steps: int | str = 0
    sequential: bool = False
    modules: object = None
    blocks: str | None = None
    device: object = None
    on_indivisible: str = "error"
    hessian_dtype: torch.dtype = torch.float64
    hessian_product_dtype: torch.dtype | None = None
    cache_limit: int | None = 2**30
    cache_dir: str | None = None
    resume: bool = True
    progress: bool | None = None
    block_steps: int = 0
    block_lr: float = BLOCK_LR

    @classmethod
    def of(cls, settings=None, fields=None):
        """``settings`` (default ``PruneSettings()``) with the ``fields`` (a dict) replaced;
        ValueError naming an unknown field."""
        if settings is not None and not isinstance(settings, cls):
            raise ValueError(f"settings must be a PruneSettings, got {type(settings).__name__}")
        fields = dict(fields or {})
        unknown = sorted(set(fields) - {f.name for f in fields_of(cls)})
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown}; PruneSettings has "
                             f"{[f.name for f in fields_of(cls)]}")
        return replace(settings or cls(), **fields)


@dataclass
class LayerRecord:
    """What happened to one layer. Losses are Tr((W - W*) H (W - W*)') in float64 with the
    Hessian the layer was pruned with; ``rel_*`` divide by Tr(W* H W*') (pruning everything
    gives 1). ``*_gd`` are after the masked gradient steps (equal to the plain ones when
    ``refine_steps = 0``)."""

    name: str
    block: str
    shape: tuple
    method: str
    device: str
    n_tokens: int
    base_loss: float
    loss: float
    rel_loss: float
    loss_gd: float
    rel_loss_gd: float
    time: float
    time_gd: float
    refine_steps: int | str
    info: dict = field(default_factory=dict)


@dataclass(repr=False)
class ModelPruneResult(Result):
    """Per-layer records of :func:`prune_model`, in layer order, and the run's settings.

    A :class:`sparseopt.result.Result` whose iterations are the layers: ``fun`` is the sum
    over layers of the relative local loss after +GD, ``nit`` the number of layers,
    ``history["objective"]`` / ``history["time"]`` the per-layer relative loss and the
    cumulative method time, ``info`` the settings. ``x`` is None: the pruned weights are in
    the model (and in ``out``).
    """

    records: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    out: str | None = None
    #: The dense Hessians of the run's layers (on the CPU) with ``keep_hessians=True``: pass
    #: them as ``prune_model(..., hessians=)`` to prune the same model again without
    #: collecting them. None otherwise.
    hessians: Hessians | None = None
    #: Block reconstruction's records (:class:`~sparseopt_torch.reconstruct.BlockRecord`),
    #: in block order; empty without it (``block_steps = 0``).
    blocks: list = field(default_factory=list)

    @classmethod
    def of(cls, records, settings, out=None):
        rel = np.array([r.rel_loss_gd for r in records], dtype=np.float64)
        t = np.cumsum([r.time + r.time_gd for r in records], dtype=np.float64)
        return cls(x=None, fun=float(rel.sum()), nit=len(records),
                   stop_reason="every selected layer pruned",
                   history={"objective": rel, "time": t}, info=dict(settings),
                   records=records, settings=settings, out=out)

    def total(self, key="rel_loss_gd") -> float:
        """Sum over layers of a record field, e.g. ``"rel_loss"`` or ``"rel_loss_gd"``."""
        return float(sum(getattr(r, key) for r in self.records))

    def to_json(self) -> dict:
        out = {"settings": self.settings, "layers": [asdict(r) for r in self.records],
               "totals": {k: self.total(k) for k in ("loss", "rel_loss", "loss_gd",
                                                     "rel_loss_gd", "time", "time_gd")}}
        if self.blocks:  # only with +BR: the reports of other runs stay as they were
            out["blocks"] = [asdict(b) for b in self.blocks]
            out["totals"]["time_br"] = float(sum(b.time for b in self.blocks))
        return out

    def to_markdown(self) -> str:
        s = self.settings
        gd = s["refine_steps"] != 0
        lines = [f"method `{s['method']}`, pattern {s['pattern']}, "
                 f"{'sequential' if s['sequential'] else 'independent'} Hessians, "
                 f"refine_steps {s['refine_steps']}", ""]
        head = "| layer | shape | tokens | rel loss | time [s] |"
        sep = "|---|---|---:|---:|---:|"
        if gd:
            head += " rel loss +GD | time +GD [s] |"
            sep += "---:|---:|"
        lines += [head, sep]
        for r in self.records:
            row = (f"| {r.name} | {r.shape[0]}x{r.shape[1]} | {r.n_tokens} | "
                   f"{r.rel_loss:.5f} | {r.time:.2f} |")
            if gd:
                row += f" {r.rel_loss_gd:.5f} | {r.time_gd:.2f} |"
            lines.append(row)
        row = f"| **sum** | | | {self.total('rel_loss'):.4f} | {self.total('time'):.1f} |"
        if gd:
            row += f" {self.total('rel_loss_gd'):.4f} | {self.total('time_gd'):.1f} |"
        lines.append(row)
        if self.blocks:
            lines += ["", f"+BR: {s['block_steps']} Adam steps per block, lr {s['block_lr']:g}; "
                      "error = mean over tokens of ||pruned block - dense block||^2, relative "
                      "to the dense outputs' mean squared norm", "",
                      "| block | rel error before | rel error after | kept | time [s] |",
                      "|---|---:|---:|---|---:|"]
            for b in self.blocks:
                rel = (lambda e: e / b.dense_norm if b.dense_norm > 0 else e)  # noqa: E731
                lines.append(f"| {b.name} | {rel(b.error_start):.5f} | {rel(b.error_end):.5f} "
                             f"| {b.kept} | {b.time:.2f} |")
        return "\n".join(lines) + "\n"


def _pattern_str(pattern) -> str:
    return f"{pattern.n}:{pattern.m}" if isinstance(pattern, NM) else f"top{pattern.k}"


#: The +GD step 1 / (2 gamma_max(H)) of each Hessian tensor: layers that read the same input
#: (query, key, value) share one H, and so do the runs of a comparison on kept Hessians; a
#: tensor changed in place (its version counter moved) gets a fresh one.
_GD_STEPS = WeakTensorKeyDictionary()  # by identity: a tensor's == is elementwise


def _gd_step(H_t, H):
    """masked_gd's default step for the Hessian tensor ``H_t`` (``H``: its array on the
    device the layer is pruned on), computed once per tensor: the same number masked_gd
    computes itself (None where gamma_max is 0: masked_gd then returns W masked)."""
    known = _GD_STEPS.get(H_t)
    if known is not None and known[0] == H_t._version:
        return known[1]
    g = gamma_max(check_hessian(H))
    step = 1.0 / (2.0 * g) if g > 0 else None
    _GD_STEPS[H_t] = (H_t._version, step)
    return step


def _prune_layer(W_t, H_t, method, pattern, refine_steps, options, mask=None):
    """One layer on its device: the core method (or W* o M for given masks), then the
    masked gradient steps, timed separately. Returns the record fields and both weights.

    CPU tensors are handed to the core as NumPy views (:func:`sparseopt.backend.numpy_path`):
    there its loops reuse work arrays and fuse their passes (the prox pruning of a MiniLM
    layer took 1.25-1.35x as long on the tensors), and a layer gets exactly the result of
    ``sparseopt.prune`` on NumPy arrays. Other devices, and CPU tensors inside
    :func:`sparseopt.backend.device_kernels`, compute with torch on the tensors."""
    W_star = W_t.detach().clone()
    if W_star.dtype not in (torch.float32, torch.float64):
        W_star = W_star.float()  # bfloat16 / float16 weights are pruned in float32
    H = H_t.detach().to(device=W_star.device)
    if mask is not None:
        mask = torch.as_tensor(mask).to(device=W_star.device, dtype=torch.bool)
        if mask.shape != W_star.shape:
            raise ValueError(f"masks: shape {tuple(mask.shape)} does not match the weight "
                             f"{tuple(W_star.shape)}")
    if not numpy_path(W_star):
        step = _gd_step(H_t, H) if refine_steps not in (0, "exact") else None
        return _prune_arrays(W_star, H, method, pattern, refine_steps, options, mask, step)
    H = as_numpy(H)
    step = _gd_step(H_t, H) if refine_steps not in (0, "exact") else None
    out = _prune_arrays(as_numpy(W_star), H, method, pattern, refine_steps, options,
                        None if mask is None else as_numpy(mask), step)
    return {key: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
            for key, v in out.items()}


def _prune_arrays(W_star, H, method, pattern, refine_steps, options, mask, gd_step=None):
    """:func:`_prune_layer` on arrays of one library (NumPy or torch), ``mask`` boolean;
    ``gd_step``: the +GD step (:func:`_gd_step`; None: masked_gd's default)."""
    if method == "masks":
        W = namespace(W_star).where(mask, W_star, zero(W_star))  # W* o M
        loss, t_method, info = layer_loss(W, W_star, H), 0.0, {}
        base = base_loss(W_star, H)  # pruning everything: rel_loss 1
        M = mask
    else:
        # H is a Gram matrix X X' / n accumulated by collect_hessians: PSD by construction
        res = core_prune(W_star, H, method=method, pattern=pattern, assume_psd=True,
                         **options)
        W, M, loss, t_method = res.W, res.mask, res.loss, res.time
        info = {k: v for k, v in res.info.items() if isinstance(v, (int, float, str, bool))}
        base = info.pop("base_loss")
    out = {"W_nogd": W, "loss": loss, "time": t_method, "info": info, "base_loss": base,
           "W": W, "loss_gd": loss, "time_gd": 0.0}
    if refine_steps != 0:
        t0 = time.perf_counter()
        if refine_steps == "exact":
            W_gd, rinfo = masked_optimum(W, W_star, H, M, assume_psd=True)
            info.update({f"refine_{k}": rinfo[k] for k in ("solver", "iterations", "rel_grad",
                                                           "converged")})
        else:
            W_gd = masked_gd(W, W_star, H, M, int(refine_steps), gd_step, assume_psd=True)
        synchronize(W_gd)
        out.update(W=W_gd, time_gd=time.perf_counter() - t0,
                   loss_gd=layer_loss(W_gd, W_star, H))
    return out


def _check_args(method, pattern, refine_steps, on_indivisible, calibration):
    if method not in methods() and method != "masks":
        raise ValueError(f"method must be one of {sorted(methods())} or 'masks', got "
                         f"{method!r}")
    if not isinstance(pattern, (NM, TopK)):
        raise ValueError(f"pattern must be an NM or TopK instance, got {pattern!r}")
    check_refine_steps(refine_steps)
    check_choice(on_indivisible, "on_indivisible", ("error", "skip"))
    if len(calibration) == 0:
        raise ValueError("calibration is empty: give at least one batch of inputs")


def _select_layers(model, modules, pattern, on_indivisible, prefix=""):
    layers = find_layers(model, modules)
    if prefix and (modules is None or isinstance(modules, str)):
        # The default selection: linear layers inside the blocks (never embeddings or heads).
        layers = {n: m for n, m in layers.items() if n.startswith(prefix + ".")}
        if not layers:
            raise ValueError(f"no nn.Linear / Conv1D layer inside the blocks {prefix!r} "
                             f"matched modules={modules!r}")
    if isinstance(pattern, TopK):
        return layers
    bad = [n for n, mod in layers.items() if get_weight(mod).shape[1] % pattern.m]
    if bad and on_indivisible == "error":
        raise ValueError(f"d_in of layer(s) {bad} is not divisible by m = {pattern.m}; "
                         "pass on_indivisible='skip' to leave them dense")
    for n in bad:
        warnings.warn(f"layer {n!r}: d_in = {get_weight(layers[n]).shape[1]} is not divisible "
                      f"by m = {pattern.m}; left dense", stacklevel=3)
        del layers[n]
    if not layers:
        raise ValueError("no layer left to prune: every selected layer was skipped")
    return layers


def prune_model(model, calibration, method="prox", settings=None, *, options=None, masks=None,
                out=None, weights=None, executor=None, hessians=None, keep_hessians=False,
                forward=None, **fields) -> ModelPruneResult:
    """Prune every selected linear layer of ``model``, one block at a time.

    The engine streams blocks (the way SparseGPT prunes 70B models on one GPU): the part of
    the model before the first block runs once per calibration batch and the first block's
    inputs are cached (:mod:`~sparseopt_torch.blocks`); then, for each block in order, the
    block is moved (or read from disk) to the device, its layers' Hessians are collected
    from the cached inputs, its layers are pruned, its outputs become the next block's
    inputs, and it is moved back (or dropped). Each block runs at most twice per batch,
    whatever the depth; peak memory is one block, its Hessians and the activation cache.

    Parameters
    ----------
    model : torch.nn.Module
        Modified in place: the pruned weights replace the dense ones (with ``weights``, the
        blocks stay on the meta device and the pruned weights are only in ``out``).
    calibration : sequence of batches
        Model inputs (dicts of tensors such as tokenizer output, or tensors), fed by
        ``forward(model, batch)`` (default ``model(**batch)`` for dicts). Padding tokens
        (``attention_mask == 0``) are not data.
    method : str
        A layer method of :func:`sparseopt.prune` (:func:`sparseopt.layer.methods`: "prox",
        "magnitude", "wanda", "sparsegpt", "maiht", "iobs", ...), or ``"masks"``: keep W* on
        given ``masks`` (e.g. learned end to end by
        :func:`~sparseopt_torch.proxsparse.proxsparse`).
    settings : PruneSettings, optional
        How the run is made: pattern, +GD steps, independent or sequential Hessians, which
        layers and blocks, device, Hessian dtypes, activation cache, resume, progress bar
        (:class:`PruneSettings`; default ``PruneSettings()``).
    options : dict, optional
        Options of the method (e.g. ``{"max_iter": 300}`` for prox), validated by it.
    masks : dict, optional
        ``{layer name: bool (d_out, d_in) tensor}`` for ``method="masks"`` (required there,
        refused otherwise); ``modules`` defaults to its keys.
    out : str, optional
        Run folder (:mod:`~sparseopt_torch.rundir`). Settings go to ``run.json``, each
        finished layer to ``layers/<name>.*``, the report to ``report.json`` and
        ``report.md``. Every file is written atomically, and the folder is created only with
        the first finished layer, so a run that fails before (bad data, NaN activations)
        leaves nothing behind.
    weights : CheckpointWeights, optional
        The on-disk weights of a model loaded with
        ``load_model(folder, offload=True)``: blocks are read one at a time (requires
        ``out``), and the modules before them (embeddings) are dropped once the first
        block's inputs are captured (load the model again to run it).
    executor : LayerExecutor, optional
        Runs the layer problems of a block as tasks (e.g. on a Dask cluster,
        :mod:`~sparseopt_torch.distributed`); default in this process, in order.
    hessians : Hessians, optional
        Independent mode only: the dense Hessians kept by an earlier run with
        ``keep_hessians=True`` (``result.hessians``), to prune the same dense model again
        (another method, other options) without running it: no forward pass is made. They
        are used only if that run selected the same layers and had the same calibration
        batches, dense weights and Hessian dtypes (ValueError naming what differs); the
        ``forward`` and ``blocks`` arguments must also be the same (not checked). The pruned
        layers are then bit for bit those of a run that collects them.
    keep_hessians : bool, default False
        Independent mode only: keep every collected Hessian (on the CPU) in
        ``result.hessians``, with what they were collected from. Holds all of them at once:
        for models whose Hessians fit in memory (a layer resumed from ``out`` has none).
    forward : callable, optional
        ``forward(model, batch)``: how a calibration batch runs the model (default
        ``model(**batch)`` for dicts).
    **fields
        Fields of :class:`PruneSettings` given directly (``refine_steps=100``); they replace
        those of ``settings``.

    Returns
    -------
    ModelPruneResult
    """
    settings = PruneSettings.of(settings, fields)
    (pattern, refine_steps, sequential, modules, blocks, device, on_indivisible, hessian_dtype,
     hessian_product_dtype, cache_limit, cache_dir, resume, progress, block_steps, block_lr) = (
        getattr(settings, f.name) for f in fields_of(PruneSettings))
    options = dict(options or {})
    calibration = list(calibration)
    _check_args(method, pattern, refine_steps, on_indivisible, calibration)
    if (method == "masks") != (masks is not None):
        raise ValueError("masks must be given exactly when method='masks'")
    if weights is not None and out is None:
        raise ValueError("weights (blocks read from disk) needs out=: the pruned weights are "
                         "kept only in the run folder")
    if cache_limit is not None and (isinstance(cache_limit, bool) or cache_limit < 0):
        raise ValueError(f"cache_limit must be a number of bytes >= 0 or None, "
                         f"got {cache_limit!r}")
    if (hessians is not None or keep_hessians) and sequential:
        raise ValueError("hessians / keep_hessians: only with sequential=False (sequential "
                         "Hessians depend on the pruned earlier blocks)")
    if hessians is not None and not isinstance(hessians, Hessians):
        raise ValueError(f"hessians must be the Hessians of prune_model(..., "
                         f"keep_hessians=True), got {type(hessians).__name__}")
    if masks is not None and modules is None:
        modules = list(masks)
    prefix, block_list = find_blocks(model, blocks)
    _check_block_args(block_steps, block_lr, prefix, hessians)
    layers = _select_layers(model, modules, pattern, on_indivisible, prefix)
    members = _layers_by_block(layers, prefix, len(block_list))
    if masks is not None:
        missing = [n for n in layers if n not in masks]
        if missing:
            raise ValueError(f"masks has no mask for layer(s) {missing}")
    compute = _compute_device(model, device)
    run_json = {
        "method": method, "pattern": _pattern_str(pattern),
        "refine_steps": check_refine_steps(refine_steps),
        "sequential": bool(sequential), "options": options,
        "hessian_dtype": str(hessian_dtype), "layers": list(layers),
        "calibration_sha256": fingerprint(calibration),
        "dense_weights_sha256": fingerprint_weights(layers, weights),
        # Conv1D (GPT-2) stores its weight as (d_in, d_out): export transposes these back.
        "conv1d_layers": [n for n, mod in layers.items() if not isinstance(mod, torch.nn.Linear)],
    }
    if hessian_product_dtype is not None:  # recorded only when given: older runs resume
        run_json["hessian_product_dtype"] = str(hessian_product_dtype)
    if masks is not None:
        run_json["masks_sha256"] = fingerprint([{n: masks[n] for n in layers}])
    if block_steps > 0:  # recorded only with +BR: older runs resume
        run_json.update(block_steps=int(block_steps), block_lr=float(block_lr))
    source = {k: run_json.get(k) for k in _HESSIAN_SOURCE}
    if hessians is not None:
        _check_reused(hessians, source, layers)
    done = {}
    if out is not None:
        done = {name: (LayerRecord(**rec), tensors)
                for name, (rec, tensors) in open_run(out, run_json, layers, resume).items()}
    finished = {}  # +BR: the blocks finished (their layers count as done only then)
    if block_steps > 0:
        done, finished = _finished_blocks(out, done, members, prefix)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(layers), desc=f"prune {method}", unit="layer",
               disable=progress is False)
    records, block_records = [], []
    runner = _Stream(model, calibration, prefix, block_list, forward, compute, weights,
                     cache_limit, cache_dir, capture=hessians is None)
    kept = Hessians(source=source) if keep_hessians else None
    try:
        for i in range(len(block_list)):
            names = members[i]
            todo = [n for n in names if n not in done]
            later = any(n not in done for j in range(i + 1, len(block_list)) for n in members[j])
            # +BR fits the pruned block to the dense block's outputs on the same inputs
            reconstruct = block_steps > 0 and bool(todo)
            # Independent: the dense block's outputs are the next inputs (one pass does both);
            # sequential: the pruned block's (a second pass after pruning).
            block = runner.enter(i)
            if block in finished:
                block_records.append(finished[block])
            if hessians is None:
                hess = runner.first_pass(i, {n: layers[n] for n in todo},
                                         (hessian_dtype, hessian_product_dtype),
                                         outputs=(later and not sequential) or reconstruct)
            else:
                hess = _reused(hessians, todo, compute)
            if kept is not None:
                _keep(kept, hess)
            for name in names:
                if name in done:
                    rec, tensors = done[name]
                    set_weight(layers[name], tensors["W"])
                    records.append(rec)
                    bar.update(1)

            pending = []  # +BR: layers saved once the block is reconstructed

            def finish(name, res):
                mod = layers[name]
                rec = _record(name, block, mod, method, n_tokens[name], res, refine_steps)
                set_weight(mod, res["W"])
                if out is not None:
                    create_run(out, run_json)  # first finished layer: the run exists now
                    W_saved = get_weight(mod).to("cpu").clone()
                    # with +BR, W_nogd is the method's weights before every refinement
                    W_nogd = res["W_nogd"].to(device="cpu", dtype=W_saved.dtype) \
                        if refine_steps != 0 or reconstruct else None
                    if reconstruct:
                        pending.append((rec, mod, W_nogd))
                    else:
                        save_layer(out, asdict(rec), W_saved, W_nogd)
                records.append(rec)
                return_freed_memory()  # the layer's temporaries (see blocks.return_freed_memory)
                bar.update(1)
                bar.set_postfix(layer=".".join(name.split(".")[-4:]),
                                rel=f"{rec.rel_loss_gd:.4f}")

            jobs = [_job(name, layers[name], hess.H[name], method, pattern, refine_steps,
                         options, None if masks is None else masks[name]) for name in todo]
            n_tokens = hess.n_tokens
            del hess  # the jobs hold the Hessians they need; freed as they finish
            _run_jobs(jobs, finish, executor)
            if reconstruct:
                block_records.append(_reconstruct(runner, i, {n: layers[n] for n in names},
                                                  pattern, block_steps, block_lr, progress,
                                                  out, pending))
                if sequential:  # the dense outputs were only the targets
                    runner.drop_next()
            if later and sequential:
                runner.second_pass(i)
            runner.leave(i)
    finally:
        runner.close()
        bar.close()
    order = {n: i for i, n in enumerate(layers)}
    records.sort(key=lambda r: order[r.name])
    result = ModelPruneResult.of(records, run_json, out)
    result.hessians = kept
    result.blocks = block_records
    if out is not None:
        create_run(out, run_json)  # every layer was reloaded or nothing to save yet
        write_json(os.path.join(out, "report.json"), result.to_json())
        write_text(os.path.join(out, "report.md"), result.to_markdown())
    return result


#: What reused Hessians must have been collected from (keys of the run's settings).
_HESSIAN_SOURCE = ("calibration_sha256", "dense_weights_sha256", "hessian_dtype",
                   "hessian_product_dtype")


def _check_reused(hessians, source, layers):
    """ValueError unless ``hessians`` were kept by a run with this ``source`` and hold every
    layer in ``layers``."""
    if not hessians.source:
        raise ValueError("hessians: no record of what they were collected from; pass the "
                         "Hessians of prune_model(..., keep_hessians=True)")
    missing = [n for n in layers if n not in hessians.H]
    if missing:
        raise ValueError(f"hessians has no Hessian for layer(s) {missing}")
    extra = [n for n in hessians.H if n not in layers]
    if extra:  # the weights' fingerprint covers the selected layers: select the same ones
        raise ValueError(f"hessians were kept for more layers than selected here ({extra}); "
                         "select the same layers")
    diff = [k for k in _HESSIAN_SOURCE if hessians.source.get(k) != source.get(k)]
    if diff:
        raise ValueError(f"hessians were collected with other {diff} "
                         f"({[hessians.source.get(k) for k in diff]}, this run: "
                         f"{[source.get(k) for k in diff]})")


def _moved(H, names, device):
    """``{name: H[name] on device}`` for ``names``; layers that share one tensor (q/k/v)
    still share one after the move."""
    moved, out = {}, {}
    for n in names:
        t = H[n]
        if id(t) not in moved:
            moved[id(t)] = t.to(device)
        out[n] = moved[id(t)]
    return out


def _reused(hessians, names, device):
    """The Hessians of ``names`` from kept ones, on ``device``."""
    return Hessians(H=_moved(hessians.H, names, device),
                    n_tokens={n: hessians.n_tokens[n] for n in names})


def _keep(kept, hess):
    """Add a block's Hessians to the kept ones, on the CPU."""
    kept.H.update(_moved(hess.H, list(hess.H), "cpu"))
    kept.n_tokens.update(hess.n_tokens)
    kept.groups.extend(hess.groups)


def _compute_device(model, device):
    if device is None:
        for p in model.parameters():
            if p.device.type != "meta":
                return p.device
        return torch.device("cpu")
    return parse_device(device)


def _layers_by_block(layers, prefix, n_blocks):
    """{block index: [layer names]}; a layer outside every block is refused."""
    members = {i: [] for i in range(n_blocks)}
    for name in layers:
        if not prefix:
            members[0].append(name)
            continue
        head, _, rest = name[len(prefix) + 1:].partition(".")
        if not name.startswith(prefix + ".") or not head.isdigit() or int(head) >= n_blocks:
            raise ValueError(f"layer {name!r} is outside the blocks {prefix}.0 ... "
                             f"{prefix}.{n_blocks - 1}: select layers inside them (modules=) "
                             "or pass blocks='model'")
        members[int(head)].append(name)
    return members


class _Stream:
    """The cached block inputs and the moves of one block at a time (see prune_model)."""

    def __init__(self, model, calibration, prefix, block_list, forward, compute, weights,
                 cache_limit, cache_dir, capture=True):
        self.model, self.calibration, self.prefix = model, calibration, prefix
        self.blocks, self.compute, self.weights = block_list, compute, weights
        self.forward = forward or _default_forward
        self.limit, self.cache_dir = cache_limit, cache_dir
        self.inputs = self.next = None
        self.context = None
        self.home = None
        self.capture = capture  # False: no forward pass at all (reused Hessians)

    def name(self, i):
        return f"{self.prefix}.{i}" if self.prefix else ""

    def enter(self, i):
        block = self.blocks[i]
        if self.weights is not None:
            self.weights.load(block, self.name(i), self.compute)
        else:
            params = [p for p in block.parameters()]
            self.home = params[0].device if params else self.compute
            if self.home != self.compute:
                block.to(self.compute)
        if self.capture and self.prefix and i == 0:  # what precedes block 0: once a batch
            self.inputs = Activations(len(self.calibration), self.limit, self.cache_dir)
            self.context = capture_inputs(self.model, block, self.calibration, self.forward,
                                          self.inputs)
            if self.weights is not None:
                # Weights on disk: what runs before the blocks (embeddings) is not needed
                # again; dropping it keeps peak memory at one block.
                for name, child in self.model.named_modules():
                    if child is not self.model and not list(child.children()) \
                            and not name.startswith(self.prefix + "."):
                        self.weights.release(child)
        return self.name(i)

    def _items(self):
        if not self.prefix:
            return self.calibration
        return [{"attention_mask": c["attention_mask"], "index": b}
                for b, c in enumerate(self.context)]

    def _run(self, block, item, record):
        if not self.prefix:
            return self.forward(block, item)
        b = item["index"]
        y = run_block(block, self.inputs[b], self.context[b], self.compute)
        if record:
            self.next.append(y)
        return y

    def first_pass(self, i, todo, dtypes, outputs):
        """Hessians of the layers ``todo`` (and the next inputs when ``outputs``);
        ``dtypes``: the sums' and the products' dtype."""
        block = self.blocks[i]
        if outputs:
            self.next = Activations(len(self.calibration), self.limit, self.cache_dir)
        if todo:
            return collect_hessians(block, self._items(), modules=todo,
                                    forward=lambda blk, item: self._run(blk, item, outputs),
                                    dtype=dtypes[0], product_dtype=dtypes[1],
                                    device=self.compute, progress=False)
        if outputs:
            self.second_pass(i, fresh=False)
        return Hessians()

    def second_pass(self, i, fresh=True):
        """The next inputs from the block as it is now."""
        if fresh:
            self.next = Activations(len(self.calibration), self.limit, self.cache_dir)
        block = self.blocks[i]
        with evaluating(block), torch.no_grad():
            for item in self._items():
                self._run(block, item, True)

    def reconstruct(self, i, weights, steps, lr, progress):
        """+BR of block ``i`` (:func:`~sparseopt_torch.reconstruct.reconstruct_block`): its
        ``weights`` fitted on the cached inputs to the dense outputs that
        :meth:`first_pass` recorded (seeded by the block's index)."""
        block = self.blocks[i]
        return reconstruct_block(
            block, lambda b: run_block(block, self.inputs[b], self.context[b], self.compute),
            self.next, weights, steps=steps, lr=lr, seed=i,
            padding=[c["attention_mask"] for c in self.context], name=self.name(i),
            progress=progress)

    def drop_next(self):
        """Forget the outputs recorded so far (sequential +BR's targets)."""
        if self.next is not None:
            self.next.close()
            self.next = None

    def leave(self, i):
        block = self.blocks[i]
        if self.weights is not None:
            self.weights.release(block)
        elif self.home != self.compute:
            block.to(self.home)
        if self.next is not None:
            self.inputs.close()
            self.inputs, self.next = self.next, None
        return_freed_memory()

    def close(self):
        for acts in (self.inputs, self.next):
            if acts is not None:
                acts.close()


def check_block_settings(block_steps, block_lr, names=("block_steps", "block_lr")):
    """(block_steps, block_lr) as (int >= 0, finite float > 0); ValueError naming the bad
    one (``names``: how the caller calls them, e.g. the CLI's options)."""
    return (check_int(block_steps, names[0], minimum=0),
            check_real(block_lr, names[1], positive=True))


def _check_block_args(block_steps, block_lr, prefix, hessians):
    """ValueError for block reconstruction settings that are bad or cannot apply."""
    check_block_settings(block_steps, block_lr)
    if block_steps > 0 and not prefix:
        raise ValueError("block_steps (block reconstruction) needs a list of blocks, not "
                         "blocks='model'")
    if block_steps > 0 and hessians is not None:
        raise ValueError("block_steps (block reconstruction) runs the blocks on the "
                         "calibration data: not with reused hessians=")


def _finished_blocks(out, done, members, prefix):
    """+BR resume: (the done layers of finished blocks, {block name: BlockRecord}); a block
    counts as finished once its record is written (after its layers), so a block stopped
    during its reconstruction or its saving is pruned and reconstructed again."""
    finished = {}
    for i, names in members.items():
        name = f"{prefix}.{i}"
        rec = load_block(out, name) if out is not None else None
        if rec is not None:
            finished[name] = BlockRecord(**rec)
        else:
            for n in names:
                done.pop(n, None)
    return done, finished


def _reconstruct(runner, i, block_layers, pattern, steps, lr, progress, out, pending):
    """+BR of block ``i``: fit its layers, check their pattern, save them and the block's
    record (last: it marks the block finished)."""
    rec = runner.reconstruct(i, {n: mod.weight for n, mod in block_layers.items()}, steps,
                             lr, progress is not False)
    for name, mod in block_layers.items():
        if not pattern.satisfied(get_weight(mod).detach()):
            raise RuntimeError(f"block reconstruction left layer {name!r} off the pattern "
                               f"{_pattern_str(pattern)}")
    if out is not None:
        for layer_rec, mod, W_nogd in pending:
            save_layer(out, asdict(layer_rec), get_weight(mod).to("cpu").clone(), W_nogd)
        save_block(out, asdict(rec))
    return_freed_memory()
    return rec


def _job(name, module, H, method, pattern, refine_steps, options, mask):
    W = get_weight(module)
    return LayerJob(name=name, fn=_prune_layer,
                    kwargs={"W_t": W, "H_t": H, "method": method, "pattern": pattern,
                            "refine_steps": refine_steps, "options": options, "mask": mask},
                    cost=float(W.shape[0]) * W.shape[1] * W.shape[1])


def _run_jobs(jobs, on_done, executor):
    if executor is None:
        while jobs:  # pop: a finished layer's Hessian is freed before the next one runs
            job = jobs.pop(0)
            on_done(job.name, job.fn(**job.kwargs))
    else:
        executor.run(jobs, on_done)


def _record(name, block, mod, method, n_tokens, res, refine_steps):
    base = res["base_loss"]
    rel = (lambda x: x / base if base > 0 else (0.0 if x == 0 else float("inf")))
    W = get_weight(mod)
    return LayerRecord(
        name=name, block=block, shape=tuple(W.shape), method=method, device=str(W.device),
        n_tokens=int(n_tokens), base_loss=base, loss=float(res["loss"]),
        rel_loss=rel(float(res["loss"])), loss_gd=float(res["loss_gd"]),
        rel_loss_gd=rel(float(res["loss_gd"])), time=float(res["time"]),
        time_gd=float(res["time_gd"]), refine_steps=check_refine_steps(refine_steps),
        info=res["info"])
