"""Masked distillation (``sparseopt finetune RUN``): train the kept weights of a pruned causal
LM to match the dense model's next-token distribution, masks fixed (issue 45, item 2).

A finished run folder ``OUT/<run>/`` (any method; its final weights: after +GD and +BR where
the run has them) is loaded into the dense model, and the kept weights of its pruned layers
W_l = W_l o M_l are trained with AdamW on the calibration sequences the run recorded in
``OUT/experiment.json`` (:func:`~sparseopt_torch.hf.calibration_batches`)::

    min over {W_l : W_l = W_l o M_l}   tau^2 * mean over tokens t of
                                      KL( softmax(z_dense(t) / tau) || softmax(z(t; W) / tau) )

with z the logits and tau the temperature. The mask M_l of a layer is its support when the
training starts (``W_l != 0``: a subset of the method's N:M mask, so the pattern holds).
Every step masks the gradients (AdamW's moments of pruned weights stay zero), takes the
AdamW step, masks the weights again and checks that no pruned weight is non-zero
(:func:`~sparseopt_torch.reconstruct._check_masks`, RuntimeError otherwise): every pruned
layer stays exactly on its mask, N:M after every step.

The dense teacher's logits on the calibration sequences are computed first, into
memory-mapped files (:func:`~sparseopt_torch.evaluate.dense_logits`, float32), then the same
model object becomes the student (the pruned weights loaded into it): teacher and student are
never in memory together; the files take n_calib x seq_len x vocab x 4 bytes on disk (a
temporary folder inside the new run, removed at the end).

The result is a new run folder beside the source, ``OUT/<label>+FT/`` with ``<label>`` the
source's row in ``sparseopt eval`` (``prox``, ``prox+GD``, ``prox+GD+BR``): ``run.json``,
``layers/<name>.safetensors`` (``W``: the finetuned weights) and ``.json``, ``report.json``
(written last: it marks the run finished), ``finetune.json`` (settings, the loss curve, the
KL to the dense model on the calibration sequences before and after) and ``loss.png``. So
``sparseopt eval OUT`` shows it as the row ``<label>+FT`` and ``sparseopt export
OUT/<label>+FT`` exports it.

Public API: :class:`FinetuneSettings`, :func:`finetune`, :func:`distillation_loss`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import torch

from sparseopt.validation import check_int, check_real

from .rundir import refinements

__all__ = ["FinetuneSettings", "finetune", "distillation_loss", "FINETUNE_STATE",
           "FINETUNE_RECORD", "LOSS_PLOT"]

#: Files of a finetuned run besides prune_model's: the training state while it trains, the
#: training record, the loss curve.
FINETUNE_STATE, FINETUNE_RECORD, LOSS_PLOT = "finetune_state.pt", "finetune.json", "loss.png"
#: The suffix of a finetuned run's folder (and of its row in ``sparseopt eval``).
SUFFIX = "+FT"
#: Seconds between two checkpoints by default: a killed run loses at most this much training;
#: each checkpoint writes 3x the pruned weights (the weights and AdamW's two moments).
CHECKPOINT_SECONDS = 300.0


@dataclass(frozen=True)
class FinetuneSettings:
    """The knobs of masked distillation (:func:`finetune`).

    Attributes
    ----------
    lr : float, default 1e-5
        AdamW's learning rate, constant (a time budget does not know its number of steps, so
        no decay schedule can be fixed in advance). 1e-5 moves a weight by at most about
        1e-5 per step (Adam's normalized update): after 1000 steps still well below the
        typical |w| of 1e-2 of a pretrained LM's linear layers, so a few dozen calibration
        sequences do not pull the kept weights far from the dense model's.
    steps : int, optional
        AdamW steps, one calibration batch each (a seeded random order, a new one per pass).
    minutes : float, optional
        Instead of ``steps``: train until this many minutes of training have passed
        (measured over the steps, across interruptions; loading and the teacher's logits not
        counted). Neither given: one pass over the calibration batches.
    temperature : float, default 1.0
        tau of the softmax of both models' logits; the loss is scaled by tau^2 (Hinton et
        al. 2015) so that the gradients keep their size across temperatures. 1 is the
        quantity ``sparseopt eval`` reports (KL to the dense model) and whose minimum is the
        dense next-token distribution itself; tau > 1 weighs the tail of the vocabulary more.
    seed : int, default 0
        Seeds the batch order.
    """

    lr: float = 1e-5
    steps: int | None = None
    minutes: float | None = None
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):
        check_real(self.lr, "lr", positive=True)
        check_real(self.temperature, "temperature", positive=True)
        check_int(self.seed, "seed")
        if self.steps is not None and self.minutes is not None:
            raise ValueError("give steps or minutes, not both")
        if self.steps is not None:
            check_int(self.steps, "steps", minimum=1)
        if self.minutes is not None:
            check_real(self.minutes, "minutes", positive=True)


def distillation_loss(logits, teacher, temperature=1.0, keep=None) -> torch.Tensor:
    """tau^2 times the mean over tokens of KL(softmax(teacher / tau) || softmax(logits / tau)).

    Parameters
    ----------
    logits : torch.Tensor
        The student's logits (B, T, vocab), differentiable.
    teacher : torch.Tensor
        The dense model's logits, same shape (any device; moved to ``logits``').
    temperature : float
        tau > 0.
    keep : torch.Tensor, optional
        (B, T) tokens to score (the batch's ``attention_mask != 0``); default every token.

    Returns
    -------
    torch.Tensor
        Scalar in nats, computed in the logits' dtype (at least float32). At tau = 1 it is
        the mean KL that :func:`~sparseopt_torch.evaluate.kl_to_dense` reports for the batch.
    """
    if logits.shape != teacher.shape:
        raise ValueError(f"logits have shape {tuple(logits.shape)} but the teacher's "
                         f"{tuple(teacher.shape)}")
    dtype = torch.promote_types(logits.dtype, torch.float32)
    if keep is not None:
        keep = keep.to(logits.device) != 0
        logits, teacher = logits[keep], teacher.to(logits.device)[keep]
    logits = logits.reshape(-1, logits.shape[-1])
    teacher = teacher.to(device=logits.device).reshape(-1, logits.shape[-1])
    if logits.shape[0] == 0:
        raise ValueError("no token to score (attention_mask is 0 everywhere)")
    s = torch.log_softmax(logits.to(dtype) / temperature, dim=-1)
    t = torch.log_softmax(teacher.to(dtype) / temperature, dim=-1)
    kl = torch.nn.functional.kl_div(s, t, log_target=True, reduction="sum") / s.shape[0]
    return kl * (temperature * temperature)


def _source(run):
    """(row label in ``sparseopt eval``, variant of :func:`load_pruned`) of a finished run:
    its final weights, ``<run>+GD`` / ``+BR`` where it has them (hf.evaluate_folder's
    labels)."""
    path = os.path.join(run, "report.json")
    if not os.path.isfile(path):
        raise ValueError(f"run={run!r} is not finished (no report.json): finish it with "
                         "`sparseopt prune` first")
    with open(path) as fh:
        settings = json.load(fh)["settings"]
    suffix = refinements(settings)
    return os.path.basename(os.path.normpath(run)) + suffix, "gd" if suffix else "nogd"


def _run_name(out, name):
    """``name`` if it can name a finetuned run in ``out``: a plain folder name that is free or
    holds a finetuned run (finished or not); ValueError otherwise."""
    if not isinstance(name, str) or not name or name in (".", "..") \
            or any(sep and sep in name for sep in (os.sep, os.altsep)):
        raise ValueError(f"name must be a folder name (no path), got {name!r}")
    path = os.path.join(out, name)
    if os.path.exists(os.path.join(path, "run.json")) \
            and not os.path.exists(os.path.join(path, FINETUNE_RECORD)):
        raise ValueError(f"{path!r} holds a run of `sparseopt prune`: choose another name")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{path!r} exists and is not a folder: choose another name")
    return name


def finetune(run, settings=None, *, name=None, device=None, progress=None,
             checkpoint_every=None) -> str:
    """Masked distillation of a pruned run into the new run ``OUT/<label>+FT``.

    Parameters
    ----------
    run : str
        A finished run folder of a causal LM, ``OUT/<method>`` (``sparseopt prune --out
        OUT``); its final weights are the start.
    settings : FinetuneSettings, optional
        Learning rate, steps or minutes, temperature, seed (default ``FinetuneSettings()``).
    name : str, optional
        The new run's folder name in ``OUT`` (and its row in ``sparseopt eval``), default
        ``<label>+FT``; e.g. ``prox+GD+FT30m`` to keep runs of two budgets side by side. Not
        the name of a run of ``sparseopt prune``.
    device : str, optional
        Where the model trains (``cpu``, ``cuda``, ``cuda:1``; default cpu).
    progress : bool, optional
        tqdm progress bars; None: only when stderr is a terminal.
    checkpoint_every : float, optional
        Seconds between two checkpoints (default :data:`CHECKPOINT_SECONDS`) (``OUT/<label>+FT/finetune_state.pt``: the step, the
        weights, AdamW's moments, the batch order; 0: after every step). A rerun with the
        same settings continues from it and ends bit for bit where an uninterrupted run
        ends (with ``steps``; a ``minutes`` budget ends where the time runs out); a rerun of
        a finished run trains nothing; other settings are refused (ValueError naming them).

    Returns
    -------
    str
        The new run folder.

    Raises
    ------
    ValueError
        Bad settings, a run that is not finished or not of a causal LM, calibration data
        that no longer match the run's, a start that is not N:M.
    RuntimeError
        A step left a pruned weight non-zero (the masking failed; never in a correct build).

    Notes
    -----
    Only the weights of the pruned layers train. Biases, norms, embeddings and every other
    parameter stay the dense model's: a run folder (and its export) holds only the pruned
    layers' weights, the rest is the dense checkpoint; it also keeps the memory to AdamW's
    two moments of the pruned weights, and the few calibration sequences fit fewer free
    parameters. The model runs in eval mode (no dropout): a step depends only on the
    weights and the batch.

    Cost per step: one forward and backward pass of the student on one calibration batch
    (the teacher's logits are read from disk); before the steps one forward pass of the dense
    model over every calibration batch, and the KL over them before and after. Memory: one
    model, its gradients of the pruned weights and AdamW's two moments (3x the pruned
    weights), and the logits of one batch (B x T x vocab, a few copies for the softmax).
    """
    from .evaluate import dense_logits, kl_to_dense
    from .hf import Experiment, calibration_batches, parse_pattern
    from .layers import find_layers, get_weight, parse_device
    from .models import is_causal_lm, load_model
    from .proxsparse import _read_state
    from .rundir import (check_same, fingerprint, load_layer, load_pruned, read_experiment,
                         read_run, write_json)

    settings = FinetuneSettings() if settings is None else settings
    if not isinstance(settings, FinetuneSettings):
        raise ValueError(f"settings must be a FinetuneSettings, got {settings!r}")
    checkpoint_every = CHECKPOINT_SECONDS if checkpoint_every is None else checkpoint_every
    check_real(checkpoint_every, "checkpoint_every")
    run = os.path.abspath(os.fspath(run))
    saved = read_run(run)
    label, variant = _source(run)
    out = os.path.dirname(run)
    experiment = Experiment.from_json(read_experiment(out))
    target = os.path.join(out, _run_name(out, label + SUFFIX if name is None else name))
    # the source's saved weights: a finished or interrupted finetuning of a run that was
    # pruned again since is refused, not silently kept
    source = fingerprint(load_layer(run, n)[1] for n in saved["layers"])
    record = {**asdict(settings), "source": label, "source_variant": variant,
              "source_sha256": source}
    done = os.path.join(target, FINETUNE_RECORD)
    if os.path.isfile(os.path.join(target, "report.json")) and os.path.isfile(done):
        with open(done) as fh:
            check_same(json.load(fh)["settings"], record,
                       f"{target!r} holds a finetuned run with other settings (remove it, or "
                       "give the new one another name)")
        return target

    model, tokenizer, _ = load_model(experiment.model)
    if not is_causal_lm(model.config):
        raise ValueError(f"finetune needs a causal LM (next-token logits); {experiment.model!r} "
                         "is not one")
    batches = calibration_batches(experiment, tokenizer)
    if saved.get("calibration_sha256") not in (None, fingerprint(batches)):
        raise ValueError(f"the calibration batches of {out!r} are no longer those the run "
                         "pruned with (calibration_sha256 differs): was the text changed?")
    device = torch.device("cpu") if device is None else parse_device(device)
    model.to(device)
    names = list(saved["layers"])
    layers = find_layers(model, names)
    pattern = parse_pattern(saved.get("pattern", experiment.pattern))
    # what a checkpoint must share with this run to be continued by it
    run_id = {**record, "layers": {n: list(get_weight(layers[n]).shape) for n in names},
              "calibration_sha256": fingerprint(batches)}
    state_path = os.path.join(target, FINETUNE_STATE)
    state = _read_state(state_path)
    if state is not None:
        check_same(state["run"], run_id, f"cannot continue the checkpoint {state_path!r} "
                   "(remove it to start again)")
    created = not os.path.isdir(target)
    os.makedirs(target, exist_ok=True)
    cache = tempfile.mkdtemp(prefix=".dense-logits-", dir=target)
    try:
        # the teacher's pass and the two KL passes take as long as a few dozen steps: bars too
        bars = sys.stderr.isatty() if progress is None else bool(progress)
        teacher = dense_logits(model, batches, cache, progress=bars)
        load_pruned(model, run, variant=variant)
        weights = {n: get_weight(layers[n]) for n in names}
        masks = {n: W.detach() != 0 for n, W in weights.items()}
        bad = [n for n, W in weights.items() if not pattern.satisfied(W.detach())]
        if bad:
            raise ValueError(f"the weights of {bad[:3]} in {run!r} are not {pattern}: not a "
                             "pruned run")
        kl_start = kl_to_dense(model, teacher, batches, progress=bars)
        hist, elapsed = _train(model, layers, names, batches, teacher, masks, settings,
                               state, (state_path, run_id, checkpoint_every), progress)
        kl_end = kl_to_dense(model, teacher, batches, progress=bars)
        bad = [n for n in names if not pattern.satisfied(get_weight(layers[n]).detach())]
        if bad:  # _check_masks guarantees this; a second, independent look before saving
            raise RuntimeError(f"finetune: the layers {bad[:3]} are not {pattern}")
        _save(target, run, saved, names, layers, record, run_id, hist, elapsed,
              kl_start, kl_end, load_layer, write_json)
    finally:
        teacher = None  # release the memory maps before the files go
        shutil.rmtree(cache, ignore_errors=True)
        if created and not os.listdir(target):  # refused or failed before a checkpoint
            os.rmdir(target)
    if os.path.exists(state_path):
        os.remove(state_path)
    return target


def _train(model, layers, names, batches, teacher, masks, settings, state, checkpoint,
           progress):
    """The AdamW steps of :func:`finetune` from ``state`` (a checkpoint dict or None);
    ``checkpoint`` is (path, run id, seconds between saves). Returns (history, training
    seconds)."""
    from tqdm.auto import tqdm

    from .evaluate import _logits
    from .layers import training_only
    from .proxsparse import _restore, _save_state
    from .reconstruct import _check_masks, _mask_

    state_path, run_id, checkpoint_every = checkpoint
    device = next(model.parameters()).device
    params = [layers[n].weight for n in names]
    pmasks = [masks[n] if isinstance(layers[n], torch.nn.Linear) else masks[n].T
              for n in names]
    steps = settings.steps if settings.steps is not None or settings.minutes is not None \
        else len(batches)
    budget = None if settings.minutes is None else 60.0 * settings.minutes
    hist = {"step": [], "loss": [], "time": []}
    k = 0
    t0 = time.perf_counter() - (state["elapsed"] if state is not None else 0.0)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            training_only(model, params):
        gen = torch.Generator().manual_seed(settings.seed)
        opt = torch.optim.AdamW(params, lr=float(settings.lr), weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)  # constant lr
        order = []
        if state is not None:
            k, order = state["k"], list(state["order"])
            _restore(state, layers, names, opt, sched, gen, device)
            hist = {key: list(v) for key, v in state["hist"].items()}
            state = None
        last_save = time.perf_counter()
        bar = tqdm(initial=k, total=steps, desc="finetune", unit="step",
                   disable=None if progress is None else not progress)
        while (k < steps) if steps is not None else (time.perf_counter() - t0 < budget):
            if not order:
                order = torch.randperm(len(batches), generator=gen).tolist()
            i = order.pop(0)
            batch = {key: v.to(device) for key, v in batches[i].items()}
            opt.zero_grad(set_to_none=False)
            loss = distillation_loss(_logits(model, "model", batch), teacher[i],
                                     settings.temperature, batch.get("attention_mask"))
            if not torch.isfinite(loss.detach()):
                raise ValueError(f"non-finite loss at step {k} (try a lower lr)")
            loss.backward()
            with torch.no_grad():
                _mask_([p.grad for p in params], pmasks)
                opt.step()
                _mask_(params, pmasks)
            _check_masks(names, params, pmasks, k, what="finetune")
            sched.step()
            for key, value in (("step", k), ("loss", float(loss.detach())),
                               ("time", time.perf_counter() - t0)):
                hist[key].append(value)
            k += 1
            bar.update(1)
            bar.set_postfix(loss=f"{hist['loss'][-1]:.4g}")
            more = (k < steps) if steps is not None else True
            if more and time.perf_counter() - last_save >= checkpoint_every:
                _save_state(state_path, run_id, k, order, layers, names, opt, sched, gen,
                            device, hist, time.perf_counter() - t0)
                last_save = time.perf_counter()
        bar.close()
    return hist, time.perf_counter() - t0


def _save(target, run, saved, names, layers, record, run_id, hist, elapsed, kl_start, kl_end,
          load_layer, write_json):
    """The finetuned run: its layers, run.json, finetune.json, loss.png, then report.json."""
    from .layers import get_weight
    from .rundir import save_layer

    os.makedirs(os.path.join(target, "layers"), exist_ok=True)
    for n in names:
        rec, _ = load_layer(run, n)
        rec = {**rec, "shape": list(rec["shape"]), "finetuned_from": record["source"]}
        save_layer(target, rec, get_weight(layers[n]).detach().to("cpu"))
    settings = {**saved, "finetune": record}
    write_json(os.path.join(target, "run.json"), settings)
    summary = {"steps": len(hist["step"]), "time": elapsed, "kl_start": kl_start,
               "kl_end": kl_end}
    write_json(os.path.join(target, FINETUNE_RECORD),
               {"settings": record, "run": run_id, "info": summary, **hist})
    _plot(os.path.join(target, LOSS_PLOT), hist, record, kl_start, kl_end)
    with open(os.path.join(run, "report.json")) as fh:
        report = json.load(fh)
    totals = report["totals"]
    source_time = totals["time"] + (totals["time_gd"] + totals.get("time_br", 0.0)
                                    if record["source_variant"] == "gd" else 0.0)
    # one variant, "nogd" (= W: no W_nogd saved) in sparseopt eval: its row is <label>+FT
    report = {"settings": {**report["settings"], "refine_steps": 0, "block_steps": 0,
                           "finetune": record},
              "layers": report["layers"],
              "totals": {"loss": None, "rel_loss": None, "loss_gd": None,
                         "rel_loss_gd": None, "time": source_time + elapsed, "time_gd": 0.0},
              "finetune": summary}
    write_json(os.path.join(target, "report.json"), report)


def _plot(path, hist, record, kl_start, kl_end):
    """The loss of every step (and its running mean over a pass) as a PNG, atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .rundir import atomic_write

    fig = Figure(figsize=(6, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(hist["step"], hist["loss"], lw=0.8, label="loss of the step's batch")
    ax.set_xlabel("step")
    ax.set_ylabel(f"tau^2 KL(dense || pruned), tau = {record['temperature']:g}")
    ax.set_yscale("log" if all(v > 0 for v in hist["loss"]) else "linear")
    ax.set_title(f"{record['source']}+FT: lr {record['lr']:g}; calibration KL "
                 f"{kl_start:.4g} -> {kl_end:.4g}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=100))
