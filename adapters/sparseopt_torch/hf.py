"""A user's Hugging Face model folder through the CLI: calibrate, prune per method, evaluate.

``sparseopt prune --model DIR --out RUN --method M ...`` lands here (``--model minilm`` is the
MiniLM comparison of :mod:`~sparseopt_torch.experiment`). The folder is loaded with the
transformers Auto classes (:func:`~sparseopt_torch.models.load_model`); calibration text is the
user's file or, offline by default, the numpy/scipy docstrings, split into calibration and
held-out documents by seed and sampled into sequences of ``seq_len`` tokens as SparseGPT and
Wanda sample C4 (:func:`~sparseopt_torch.data.sample_sequences`). Each method is one resumable
run of :func:`~sparseopt_torch.prune.prune_model` in ``RUN/<method>/``; ``RUN/experiment.json``
records the model and data, and a rerun with another model or data is refused.

``sparseopt eval RUN`` then measures each run on the held-out documents: perplexity and the
KL divergence of the next-token distribution to the dense model's for causal LMs, embedding
fidelity for encoders.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import torch

from sparseopt.patterns import NM

from .data import (docstring_sentences, read_documents, sample_sequences, sequence_batches,
                   split_documents, token_stream)
from .evaluate import dense_logits, fidelity, kl_to_dense, perplexity
from .experiment import VARIANTS
from .models import is_causal_lm, load_model
from .prune import prune_model
from .rundir import EXPERIMENT_FILE, check_experiment, load_pruned

__all__ = ["prune_folder", "evaluate_folder", "parse_pattern", "EXPERIMENT_FILE"]

def parse_pattern(text) -> NM:
    """``"2:4"`` -> ``NM(2, 4)``; a clear error otherwise."""
    try:
        n, m = (int(v) for v in str(text).split(":"))
        return NM(n, m)
    except (TypeError, ValueError):
        raise ValueError(f"pattern must look like N:M with 0 < N < M (e.g. 2:4), "
                         f"got {text!r}") from None


def _documents(calibration):
    if calibration is None:
        return docstring_sentences()
    return read_documents(calibration)


def _experiment(model_dir, calibration, n_calib, seq_len, seed, eval_fraction, pattern,
                batch_size):
    return {"model": os.path.abspath(model_dir),
            "calibration": None if calibration is None else os.path.abspath(calibration),
            "n_calib": int(n_calib), "seq_len": int(seq_len), "seed": int(seed),
            "eval_fraction": float(eval_fraction), "pattern": str(pattern),
            "batch_size": int(batch_size)}


def prune_folder(model_dir, out, methods, *, pattern=NM(2, 4), calibration=None, n_calib=128,
                 seq_len=2048, seed=0, eval_fraction=0.1, batch_size=1, refine_steps=0,
                 sequential=False, device=None, offload=False, executor=None, options=None,
                 blocks=None, layers=None, progress=True) -> dict:
    """Prune the model in ``model_dir`` once per method (or variant of
    :data:`~sparseopt_torch.experiment.VARIANTS`) into ``out/<method>/``.

    Returns ``{method: ModelPruneResult}``. Every argument is recorded in
    ``out/experiment.json`` (model, data, pattern) or in each run's ``run.json`` (method
    settings): a rerun continues finished work and refuses different inputs. With
    ``offload`` the blocks are read from disk one at a time (a model larger than RAM).
    """
    options = options or {}
    model, tokenizer, weights = load_model(model_dir, offload=offload, blocks=blocks)
    calib_docs, _ = split_documents(_documents(calibration), eval_fraction=eval_fraction,
                                    seed=seed)
    ids = sample_sequences(tokenizer, calib_docs, n_calib, seq_len, seed=seed)
    batches = sequence_batches(ids, batch_size)
    experiment = _experiment(model_dir, calibration, n_calib, seq_len, seed, eval_fraction,
                             f"{pattern.n}:{pattern.m}", batch_size)
    check_experiment(out, experiment)
    results = {}
    for i, method in enumerate(methods):
        if i > 0:  # the previous run pruned the model in memory or dropped its embeddings
            model, _, weights = load_model(model_dir, offload=offload, blocks=blocks)
        if progress:
            print(f"[prune] {method}", flush=True)
        base, extra = VARIANTS.get(method, (method, {}))
        results[method] = prune_model(
            model, batches, method=base, pattern=pattern, refine_steps=refine_steps,
            sequential=sequential, modules=layers, blocks=blocks,
            options={**options.get(base, {}), **extra}, out=os.path.join(out, method),
            device=device, weights=weights, executor=executor, progress=progress)
        check_experiment(out, experiment, write=True)
    return results


def _held_out_ids(tokenizer, experiment, max_tokens):
    docs = _documents(experiment["calibration"])
    _, eval_docs = split_documents(docs, eval_fraction=experiment["eval_fraction"],
                                   seed=experiment["seed"])
    return token_stream(tokenizer, eval_docs)[:max_tokens]


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


def evaluate_folder(out, *, max_tokens=20000, n_kl=8, k=10, progress=True) -> list:
    """Evaluate every finished run of ``out`` on the held-out documents and write
    ``comparison.json`` and ``comparison.md``. Causal LMs: perplexity (sliding windows of
    the calibration's ``seq_len``) on at most ``max_tokens`` held-out tokens and the KL
    divergence to the dense model on ``n_kl`` held-out sequences; encoders: embedding
    fidelity (mean cosine, Spearman, kNN agreement) of mean-pooled hidden states. Returns the
    rows (the dense model first). One model is in memory at a time: the dense references
    (perplexity, logits on the KL windows in memory-mapped files of a temporary folder under
    ``out``, or embeddings) are taken first, then each pruned copy is loaded and freed."""
    with open(os.path.join(out, EXPERIMENT_FILE)) as fh:
        experiment = json.load(fh)
    dense, tokenizer, _ = load_model(experiment["model"])
    causal = is_causal_lm(dense.config)
    ids = _held_out_ids(tokenizer, experiment, max_tokens)
    n_tokens = int(ids.numel())
    # Causal LMs: KL on n_kl windows of the calibration length; encoders: fidelity needs
    # many embeddings, so up to 64 windows of at most 128 tokens.
    seq_len = min(experiment["seq_len"], n_tokens) if causal else min(experiment["seq_len"], 128)
    n_seq = max(1, min(n_kl, n_tokens // seq_len)) if causal else min(64, n_tokens // seq_len)
    if not causal and n_seq < 3:
        raise ValueError(f"the held-out text has {n_tokens} tokens: too few for 3 windows of "
                         f"{seq_len} (embedding fidelity); use a longer calibration file")
    windows = sequence_batches(ids[:n_seq * seq_len].reshape(n_seq, seq_len), 1)
    runs = sorted(d for d in os.listdir(out)
                  if os.path.exists(os.path.join(out, d, "report.json")))
    if not runs:
        raise ValueError(f"no finished run in {out!r}: run `sparseopt prune` first")
    rows = []
    # One model in memory at a time: the dense model's references (its logits on the KL
    # windows, in files under out/, or its embeddings) are taken first and the dense model is
    # freed before each pruned copy is loaded.
    cache = tempfile.mkdtemp(prefix=".dense-logits-", dir=out) if causal else None
    try:
        if causal:
            rows.append({"run": "dense", "perplexity": perplexity(dense, ids, seq_len=seq_len),
                         "kl": 0.0})
            reference = dense_logits(dense, windows, cache)
        else:
            reference = _mean_embeddings(dense, windows)
        del dense
        for run in runs:
            with open(os.path.join(out, run, "report.json")) as fh:
                report = json.load(fh)
            variants = ["nogd", "gd"] if report["settings"]["refine_steps"] > 0 else ["nogd"]
            for variant in variants:
                model, _, _ = load_model(experiment["model"])
                load_pruned(model, os.path.join(out, run), variant=variant)
                label = run + ("+GD" if variant == "gd" else "")
                key = "rel_loss_gd" if variant == "gd" else "rel_loss"
                row = {"run": label, "rel_loss_sum": report["totals"][key],
                       "time": report["totals"]["time"]
                       + (report["totals"]["time_gd"] if variant == "gd" else 0.0)}
                if causal:
                    row["perplexity"] = perplexity(model, ids, seq_len=seq_len)
                    row["kl"] = kl_to_dense(model, reference, windows)
                else:
                    row.update(fidelity(_mean_embeddings(model, windows), reference,
                                        k=min(k, len(reference) - 1)))
                del model
                rows.append(row)
                if progress:
                    print(f"[eval] {label}: " + ", ".join(
                        f"{k_}={v:.4g}" for k_, v in row.items() if isinstance(v, float)),
                        flush=True)
    finally:
        if cache is not None:
            reference = None  # release the memory maps before the files go
            shutil.rmtree(cache, ignore_errors=True)
    with open(os.path.join(out, "comparison.json"), "w") as fh:
        json.dump({"experiment": experiment, "rows": rows}, fh, indent=1)
    with open(os.path.join(out, "comparison.md"), "w") as fh:
        fh.write(_markdown(rows, experiment, causal, int(ids.numel())))
    return rows


def _markdown(rows, experiment, causal, n_tokens):
    head = (f"{experiment['model']}, pattern {experiment['pattern']}; calibration "
            f"{experiment['n_calib']} x {experiment['seq_len']} tokens from "
            f"{experiment['calibration'] or 'numpy/scipy docstrings'} (seed "
            f"{experiment['seed']}); evaluation on {n_tokens} held-out tokens.")
    keys = ["perplexity", "kl"] if causal else ["mean_cosine", "spearman", "knn_agreement"]
    cols = ["rel_loss_sum"] + keys + ["time"]
    lines = [head, "", "| run | " + " | ".join(cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.4f}" if isinstance(r.get(c), float) else "" for c in cols]
        lines.append(f"| {r['run']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
