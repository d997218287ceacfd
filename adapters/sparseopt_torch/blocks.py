"""The blocks of a model and their cached inputs: what the block-streaming engine runs on.

A transformer is an embedding, a list of repeated blocks and a head. The pruning engine
(:func:`~sparseopt_torch.prune.prune_model`) runs the embedding once per calibration batch,
caches the inputs of the first block (:func:`capture_inputs`), and from then on runs one
block at a time on the cached inputs, writing its outputs as the next block's inputs
(:class:`Activations`). Forward work and peak memory are then those of one block, whatever
the depth (the way SparseGPT and llm-compressor prune 70B models on one GPU).

Blocks may take different inputs: in Gemma 2 and Gemma 3 (``config.layer_types``) sliding-
window layers get a banded attention mask and full-attention layers a causal one, and Gemma 3
also gives the two kinds different rotary embeddings. :func:`capture_inputs` therefore records
the call of EVERY block (the model's own forward pass, with each block replaced by the identity
for the duration, so that nothing but the embedding runs) and keeps, besides the first block's
inputs, the inputs of each block whose call differs from the first's; identical tensors are
stored once, so a model of one kind costs what it did before and a mixed one one set of inputs
per kind. Assumed, as in the Hugging Face decoders: a block's inputs other than the hidden
states (masks, positions, rotary embeddings) do not depend on earlier blocks' outputs, the
blocks are called once each in list order, with the hidden states as first positional argument.
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
        is not a list of modules, or a hybrid model whose list holds blocks of different
        classes (e.g. Jamba's attention and Mamba layers; the message names the model class).
        Blocks of one class that differ in attention type (``config.layer_types``: Gemma 2,
        Gemma 3) are accepted: :func:`capture_inputs` records each kind's inputs.
    """
    if blocks == "model":
        return "", [model]
    if blocks is not None and not isinstance(blocks, str):
        raise ValueError(f"blocks must be None, 'model' or the dotted name of a ModuleList, "
                         f"got {type(blocks).__name__}")
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
        count = _count_prunable(mod)
        if count and (best is None or count > best[0]):
            best = (count, name, list(mod))
    if best is None:
        raise ValueError(f"found no list of repeated blocks in {type(model).__name__} (an "
                         "nn.ModuleList of one module class holding linear layers); pass "
                         "blocks='dotted.name.of.the.list', or blocks='model' to treat the "
                         "whole model as one block")
    classes = sorted({type(child).__name__ for child in best[2]})
    if len(classes) > 1:
        raise ValueError(f"{type(model).__name__} is not supported: its blocks {best[1]}.* are "
                         f"of {len(classes)} classes ({', '.join(classes)}), a hybrid "
                         "architecture that block-wise pruning does not handle; pass "
                         "blocks='model' to prune it as one block")
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
    """Raised once every block has been called: nothing after the blocks needs to run."""


def _block_list(model, first_block):
    """The ModuleList / Sequential of ``model`` that starts with ``first_block``, as a list
    (``[first_block]`` if none does)."""
    for mod in model.modules():
        if isinstance(mod, (nn.ModuleList, nn.Sequential)) and len(mod) and mod[0] is first_block:
            return list(mod)
    return [first_block]


def _same(a, b) -> bool:
    """Whether two captured inputs are equal: tensors of one dtype, shape and values, the
    same structure of tuples, lists and dicts, other objects equal."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b))
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(_same(a[k], b[k]) for k in a))
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b)))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 -- objects without a plain equality are not equal
        return False


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


def _record_calls(model, blocks, batch, forward):
    """``forward(model, batch)`` with every block replaced by the identity: the
    ``(args, kwargs)`` of each block's call, in list order."""
    calls = {}
    saved = [blk.__dict__.get("forward") for blk in blocks]
    name = type(model).__name__

    def recorder(i):
        def record(*args, **kwargs):
            if not args or not isinstance(args[0], torch.Tensor):
                raise ValueError(f"{name} is not supported: its block {i} "
                                 f"({type(blocks[i]).__name__}) was called without the hidden "
                                 "states as first positional argument; pass blocks='model' to "
                                 "prune it as one block")
            if i in calls or len(calls) != i:
                raise ValueError(f"{name} is not supported: its blocks were not called once "
                                 f"each in order (block {i} after blocks {sorted(calls)}); "
                                 "pass blocks='model' to prune it as one block")
            calls[i] = (args, kwargs)
            if len(calls) == len(blocks):
                raise _Stop
            return args[0]
        return record

    # the blocks' own hooks must not see the recorder's calls (they are not block runs)
    hooks = [{h: getattr(blk, h) for h in _HOOK_DICTS} for blk in blocks]
    for i, blk in enumerate(blocks):
        blk.forward = recorder(i)
        for h in _HOOK_DICTS:
            setattr(blk, h, type(hooks[i][h])())
    try:
        forward(model, batch)
    except _Stop:
        pass
    finally:
        for blk, old, dicts in zip(blocks, saved, hooks):
            if old is None:
                del blk.forward
            else:
                blk.forward = old
            for h, d in dicts.items():
                setattr(blk, h, d)
    if not calls:
        raise ValueError(f"the forward pass of {name} did not reach the first block "
                         f"{type(blocks[0]).__name__}; check blocks= and forward=")
    if len(calls) != len(blocks):
        raise ValueError(f"{name} is not supported: its forward pass called blocks 0 ... "
                         f"{len(calls) - 1} of {len(blocks)}; pass blocks='model' to prune it "
                         "as one block")
    return [calls[i] for i in range(len(blocks))]


def capture_inputs(model, first_block, calibration, forward, activations, blocks=None) -> list:
    """Run ``forward(model, batch)`` with the blocks skipped, for every batch; store the
    first block's first positional input (the hidden states) in ``activations`` and return,
    per batch, the rest of the blocks' calls (on the CPU)::

        {"args", "kwargs",        # the first block's other inputs
         "attention_mask",        # the batch's 2-D padding mask, or None
         "blocks": {block: {"args", "kwargs"}}}  # blocks whose inputs differ from the first's

    ``"blocks"`` is empty when every block takes the first block's inputs (one attention
    kind); with sliding-window and full-attention layers (Gemma 2, Gemma 3) it holds the other
    kind's mask (and rotary embeddings), one stored copy shared by all blocks of that kind.
    :func:`run_block` picks a block's own inputs.

    Parameters
    ----------
    model : nn.Module
    first_block : nn.Module
        The first block of ``blocks``.
    calibration : list
        The batches ``forward`` takes.
    forward : callable
        ``forward(model, batch)``, the model's forward pass.
    activations : Activations
        Receives the first block's hidden states, one tensor per batch.
    blocks : list of nn.Module, optional
        Every block, in the order the model calls them; by default the ``ModuleList`` or
        ``Sequential`` of ``model`` that starts with ``first_block``.

    Raises
    ------
    ValueError
        The forward pass does not reach the first block, calls a block without the hidden
        states as first positional argument, or does not call every block once in order
        (the message names the model class).

    Notes
    -----
    KV-cache objects are replaced by None and ``use_cache`` by False, so that a block can be
    run again on the same inputs.
    """
    blocks = _block_list(model, first_block) if blocks is None else list(blocks)
    if not blocks or blocks[0] is not first_block:
        raise ValueError("blocks must start with first_block")
    context = []
    with torch.no_grad():
        for batch in calibration:
            calls = _record_calls(model, blocks, batch, forward)
            on_cpu = {}  # id of a tensor -> (tensor, its CPU copy): shared inputs stored once

            def cpu(t):
                if id(t) not in on_cpu:
                    on_cpu[id(t)] = (t, t.detach().to("cpu"))
                return on_cpu[id(t)][1]

            stored = []
            for args, kwargs in calls:
                rest = tuple(_without_cache(a) for a in args[1:])
                kw = {k: _without_cache(v) for k, v in kwargs.items()}
                if "use_cache" in kw:
                    kw["use_cache"] = False
                call = {"args": map_tensors(rest, cpu), "kwargs": map_tensors(kw, cpu)}
                stored.append(next((c for c in stored if _same(c, call)), call))
            activations.append(calls[0][0][0].detach())
            mask = batch.get("attention_mask") if isinstance(batch, Mapping) else None
            context.append({**stored[0],
                            "attention_mask": mask if isinstance(mask, torch.Tensor)
                            and mask.ndim == 2 else None,
                            "blocks": {blk: c for blk, c in zip(blocks, stored)
                                       if c is not stored[0]}})
    return context


def run_block(block, hidden, context, device):
    """One block on one batch: its output hidden states (the first output if a tuple).

    ``context`` is one batch's entry of :func:`capture_inputs`; the block gets its own
    inputs (``context["blocks"][block]``) where they differ from the first block's.
    """
    call = context.get("blocks", {}).get(block, context)
    out = block(hidden.to(device), *map_tensors(call["args"], _to(device)),
                **map_tensors(call["kwargs"], _to(device)))
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
