"""Which modules are pruned, and their weights as (d_out, d_in) matrices.

``nn.Linear`` stores its weight as (out, in) and computes x W' + b; transformers' ``Conv1D``
(GPT-2 style) stores (in, out) and computes x W + b. Everything in sparseopt sees the
(d_out, d_in) matrix W of prox24-kubler eq. 1, so N:M groups run along the input dimension
and the layer Hessian is H = X X' / n over the layer's inputs (d_in x d_in).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

__all__ = ["DEFAULT_EXCLUDE", "is_prunable", "find_layers", "get_weight", "set_weight",
           "to_numpy", "parse_device", "evaluating", "training_only"]

#: Heads that are not part of the pruned body by default (name components).
DEFAULT_EXCLUDE = ("lm_head", "pooler", "classifier", "score", "qa_outputs")


def parse_device(device, name="device", *, here=True) -> torch.device:
    """``device`` ("cpu", "cuda", "cuda:1", a torch.device) as a torch.device; ValueError
    naming ``name`` if it is not one or, with ``here``, if it is a CUDA device and torch sees
    no CUDA GPU on this machine (``here=False``: a device of another machine, a Dask
    worker's)."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"{name} {device!r} is not a torch device (e.g. 'cpu', 'cuda', "
                         f"'cuda:1'): {err}") from None
    if here and device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={str(device)!r} but torch sees no CUDA GPU on this machine")
    return device


@contextlib.contextmanager
def evaluating(*models):
    """Run the ``with`` block with ``models`` in eval mode (no dropout); every submodule's
    train/eval flag is restored on exit, also after an error."""
    modes = {m: m.training for model in models for m in model.modules()}
    try:
        for model in models:
            model.eval()
        yield
    finally:
        for m, training in modes.items():
            m.train(training)


@contextlib.contextmanager
def training_only(model, params):
    """Run the ``with`` block with gradients for ``params`` only: every other parameter of
    ``model`` frozen, ``params`` trainable with no gradient yet. On exit, also after an
    error, every flag is restored and the gradients of ``params`` are dropped."""
    params = list(params)
    flags = {p: p.requires_grad for p in model.parameters()}
    try:
        for p in flags:
            p.requires_grad_(False)
        for p in params:
            p.requires_grad_(True)
            p.grad = None
        yield
    finally:
        for p, flag in flags.items():
            p.requires_grad_(flag)
        for p in params:
            p.grad = None


def _conv1d_type():
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # transformers is optional for plain torch models
        return None
    return Conv1D


def is_prunable(module) -> bool:
    """True for ``nn.Linear`` and transformers' ``Conv1D``."""
    conv1d = _conv1d_type()
    return isinstance(module, nn.Linear) or (conv1d is not None and isinstance(module, conv1d))


def find_layers(model, modules=None, *, exclude=DEFAULT_EXCLUDE) -> dict:
    """The prunable layers of ``model``, ``{dotted name: module}`` in registration order.

    Parameters
    ----------
    model : nn.Module
    modules : None, str, sequence of str, or mapping, optional
        None: every ``nn.Linear`` / ``Conv1D`` whose name has no component in ``exclude``.
        str: a regular expression searched in the dotted names (``exclude`` still applies).
        sequence: exact dotted names. mapping: ``{name: module}``, returned as given after
        checking that every module is prunable.
    exclude : sequence of str
        Name components that exclude a layer (default: heads such as ``lm_head``,
        ``pooler``), used with ``modules=None`` or a regular expression.

    Raises
    ------
    ValueError
        If no layer matches, an exact name is missing or not prunable.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(modules, Mapping):
        for name, mod in modules.items():
            if not is_prunable(mod):
                raise ValueError(f"modules[{name!r}] is {type(mod).__name__}, not nn.Linear/Conv1D")
        found = dict(modules)
    elif modules is None or isinstance(modules, str):
        pattern = re.compile(modules) if isinstance(modules, str) else None
        found = {}
        for name, mod in model.named_modules():
            if not is_prunable(mod) or set(name.split(".")) & set(exclude):
                continue
            if pattern is None or pattern.search(name):
                found[name] = mod
    elif isinstance(modules, Sequence):
        table = dict(model.named_modules())
        found = {}
        for name in modules:
            if name not in table:
                raise ValueError(f"modules names {name!r}, which is not a module of the model")
            if not is_prunable(table[name]):
                raise ValueError(f"modules names {name!r}, a {type(table[name]).__name__}, "
                                 "not nn.Linear/Conv1D")
            found[name] = table[name]
    else:
        raise ValueError(f"modules must be None, a regex, a list of names or a dict, "
                         f"got {type(modules).__name__}")
    if not found:
        raise ValueError(f"no nn.Linear / Conv1D layer of the model matched modules={modules!r} "
                         f"(exclude={tuple(exclude)!r})")
    return found


def get_weight(module) -> torch.Tensor:
    """The weight as a (d_out, d_in) tensor: a view (transposed for ``Conv1D``), no copy."""
    if isinstance(module, nn.Linear):
        return module.weight.detach()
    if is_prunable(module):
        return module.weight.detach().T
    raise ValueError(f"module is {type(module).__name__}, not nn.Linear/Conv1D")


@torch.no_grad()
def set_weight(module, W) -> None:
    """Copy the (d_out, d_in) matrix ``W`` (tensor or ndarray) into ``module``'s weight.

    The module keeps its dtype and device; ``W`` must have the weight's shape and be finite.
    """
    target = get_weight(module)
    W = torch.as_tensor(W)
    if tuple(W.shape) != tuple(target.shape):
        raise ValueError(f"W has shape {tuple(W.shape)}, expected {tuple(target.shape)} "
                         "(d_out, d_in)")
    if not torch.isfinite(W).all():
        raise ValueError("W has non-finite entries")
    target.copy_(W.to(device=target.device, dtype=target.dtype))


def to_numpy(W: torch.Tensor, dtype=None) -> np.ndarray:
    """A detached CPU NumPy copy of ``W`` (bfloat16/float16 go to float32: NumPy and the
    Numba kernels have no bfloat16); ``dtype`` converts explicitly."""
    W = W.detach().to("cpu")
    if W.dtype in (torch.bfloat16, torch.float16):
        W = W.float()
    out = W.numpy().copy()
    return out if dtype is None else out.astype(dtype, copy=False)
