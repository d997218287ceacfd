"""The blocks of a model and their cached inputs: what the block-streaming engine runs on.

A transformer is an embedding, a list of repeated blocks and a head. The pruning engine
(:func:`~sparseopt_torch.prune.prune_model`) runs the embedding once per calibration batch,
caches the inputs of the first block (:func:`capture_inputs`), and from then on runs one
block at a time on the cached inputs, writing its outputs as the next block's inputs
(:class:`Activations`). Forward work and peak memory are then those of one block, whatever
the depth (the way SparseGPT and llm-compressor prune 70B models on one GPU).

Assumption: every block is called with the same arguments apart from the hidden states
(attention mask, position ids, rotary embeddings), as in the supported Hugging Face
architectures. Models whose layers take different masks (``config.layer_types`` with
several kinds, e.g. alternating sliding-window layers) are refused by :func:`find_blocks`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import tempfile
from collections.abc import Mapping

import torch
from torch import nn

from .layers import is_prunable

__all__ = ["find_blocks", "capture_inputs", "Activations", "run_block", "map_tensors",
           "return_freed_memory"]


def _find_malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _find_malloc_trim()


def return_freed_memory() -> None:
    """Hand memory freed by the last layer or block back to the operating system.

    glibc's malloc keeps freed heap chunks mapped, and the fragments of each block's
    temporaries add up over the blocks of a deep model, so that resident memory grows with
    every block; a ``malloc_trim`` after each layer and block keeps the peak down
    (``benchmarks/mechanisms.py``, row ``malloc_trim``; ``benchmarks/adapter_offload.py``).
    Tensors are freed by reference counting, so no ``gc.collect`` is needed (with
    transformers loaded it costs far more than the trim). A no-op without glibc.
    """
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _count_prunable(module) -> int:
    return sum(1 for m in module.modules() if is_prunable(m))


def find_blocks(model, blocks=None) -> tuple[str, list]:
    """The repeated blocks of ``model``: ``(prefix, [modules])``.

    Parameters
    ----------
    model : nn.Module
    blocks : None, str
        None: the ``nn.ModuleList`` whose children are all of one class and hold the most
        ``nn.Linear`` / ``Conv1D`` layers (``model.layers`` of Llama, ``encoder.layer`` of
        BERT, ``transformer.h`` of GPT-2, ...). A dotted name: that ``ModuleList`` or
        ``Sequential``. ``"model"``: the whole model is one block (its inputs are the
        calibration batches themselves).

    Returns
    -------
    prefix : str
        The dotted name of the list ("" for ``"model"``); block i is ``f"{prefix}.{i}"``.
    modules : list of nn.Module

    Raises
    ------
    ValueError
        No list of repeated blocks (the message names the ``blocks`` override), a name that
        is not a list of modules, or layers of different kinds (``config.layer_types``).
    """
    if blocks == "model":
        return "", [model]
    if blocks is not None and not isinstance(blocks, str):
        raise ValueError(f"blocks must be None, 'model' or the dotted name of a ModuleList, "
                         f"got {type(blocks).__name__}")
    config = getattr(model, "config", None)
    kinds = set(getattr(config, "layer_types", None) or ())
    if len(kinds) > 1:
        raise ValueError(f"the model's layers are of {len(kinds)} kinds ({sorted(kinds)}, "
                         "config.layer_types): block-wise pruning reuses the first block's "
                         "attention mask for every block, which would be wrong here")
    table = dict(model.named_modules())
    if blocks is not None:
        found = table.get(blocks)
        if not isinstance(found, (nn.ModuleList, nn.Sequential)) or len(found) == 0:
            lists = [n for n, m in table.items() if isinstance(m, nn.ModuleList)]
            raise ValueError(f"blocks={blocks!r} is not a non-empty ModuleList/Sequential of "
                             f"the model (its ModuleLists: {lists or 'none'})")
        return blocks, list(found)
    best = None
    for name, mod in table.items():
        if not isinstance(mod, nn.ModuleList) or len(mod) == 0:
            continue
        if len({type(child) for child in mod}) != 1:
            continue
        count = _count_prunable(mod)
        if count and (best is None or count > best[0]):
            best = (count, name, list(mod))
    if best is None:
        raise ValueError(f"found no list of repeated blocks in {type(model).__name__} (an "
                         "nn.ModuleList of one module class holding linear layers); pass "
                         "blocks='dotted.name.of.the.list', or blocks='model' to treat the "
                         "whole model as one block")
    return best[1], best[2]


def map_tensors(obj, fn):
    """``obj`` with every torch tensor inside tuples, lists and dicts replaced by
    ``fn(tensor)``; everything else as is."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    return obj


def _to(device):
    return lambda t: t.to(device)


def _without_cache(x):
    """None for a transformers KV cache object: a cache passed on to later blocks would be
    appended to on every call and make the second run of a block attend to stale keys."""
    try:
        from transformers.cache_utils import Cache
    except ImportError:
        return x
    return None if isinstance(x, Cache) else x


class _Stop(Exception):
    """Raised by the capture hook: nothing after the first block needs to run."""


def capture_inputs(model, first_block, calibration, forward, activations) -> list:
    """Run ``forward(model, batch)`` up to ``first_block`` for every batch; store the
    block's first positional input (the hidden states) in ``activations`` and return, per
    batch, the rest of its call: ``{"args", "kwargs", "attention_mask"}`` (on the CPU).

    KV-cache objects are replaced by None and ``use_cache`` by False, so that a block can be
    run again on the same inputs.
    """
    calls = []

    def hook(_module, args, kwargs):
        if not args or not isinstance(args[0], torch.Tensor):
            raise ValueError("the first block was called without a tensor as its first "
                             "positional argument (the hidden states); pass "
                             "blocks='model' to prune this model as one block")
        rest = tuple(_without_cache(a) for a in args[1:])
        kw = {k: _without_cache(v) for k, v in kwargs.items()}
        if "use_cache" in kw:
            kw["use_cache"] = False
        calls.append((args[0].detach(), map_tensors(rest, _to("cpu")), map_tensors(kw, _to("cpu"))))
        raise _Stop

    handle = first_block.register_forward_pre_hook(hook, with_kwargs=True)
    context = []
    try:
        with torch.no_grad():
            for batch in calibration:
                n = len(calls)
                try:
                    forward(model, batch)
                except _Stop:
                    pass
                if len(calls) != n + 1:
                    raise ValueError("the forward pass did not reach the first block "
                                     f"{type(first_block).__name__}; check blocks= and forward=")
                hidden, rest, kw = calls.pop()
                activations.append(hidden)
                mask = batch.get("attention_mask") if isinstance(batch, Mapping) else None
                context.append({"args": rest, "kwargs": kw,
                                "attention_mask": mask if isinstance(mask, torch.Tensor)
                                and mask.ndim == 2 else None})
    finally:
        handle.remove()
    return context


def run_block(block, hidden, context, device):
    """One block on one batch: its output hidden states (the first output if a tuple)."""
    out = block(hidden.to(device), *map_tensors(context["args"], _to(device)),
                **map_tensors(context["kwargs"], _to(device)))
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"block {type(block).__name__} returned {type(out).__name__}, "
                         "not a tensor or a tuple starting with one")
    return out


class Activations:
    """Hidden states of every calibration batch, in memory or, above ``limit`` bytes,
    memory-mapped from files in a temporary folder (removed by :meth:`close`).

    The spill decision is taken once per generation from the first batch's size times the
    number of batches announced (``expected``), so a generation lives in one place.
    """

    def __init__(self, expected, limit, directory=None):
        self.expected = int(expected)
        self.limit = limit
        self.directory = directory
        self.tensors = []
        self.folder = None
        self.nbytes = 0

    def append(self, x):
        x = x.detach()
        if not self.tensors and self.limit is not None \
                and x.numel() * x.element_size() * self.expected > self.limit:
            self.folder = tempfile.mkdtemp(prefix="sparseopt-activations-", dir=self.directory)
        if self.folder is not None:
            path = os.path.join(self.folder, f"{len(self.tensors)}.bin")
            mapped = torch.from_file(path, shared=True, size=x.numel(), dtype=x.dtype)
            mapped = mapped.view(x.shape)
            mapped.copy_(x)
            x = mapped
        else:
            x = x.to("cpu", copy=True) if x.device.type != "cpu" else x.clone()
        self.nbytes += x.numel() * x.element_size()
        self.tensors.append(x)

    @property
    def on_disk(self) -> bool:
        return self.folder is not None

    def __len__(self):
        return len(self.tensors)

    def __getitem__(self, i):
        return self.tensors[i]

    def close(self):
        self.tensors = []
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
