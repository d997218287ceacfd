"""Hugging Face models from a local folder, in memory or with their weights left on disk.

:func:`load_model` reads a folder the way a user has it (``config.json``, safetensors
weights, tokenizer files) through the transformers Auto classes: decoder LMs (Llama, Qwen,
Mistral, OPT, GPT-2, Phi, ...) as ``AutoModelForCausalLM``, everything else (BERT / MiniLM
encoders) as ``AutoModel``.

With ``offload=True`` the model is built on the meta device (accelerate's
``init_empty_weights``): only the modules outside the repeated blocks (embeddings, final
norm) are read, and the pruning engine reads one block at a time from the memory-mapped
safetensors files (:class:`CheckpointWeights`) and drops it after pruning. A model larger
than RAM can then be pruned; the pruned weights live in the run folder and
``sparseopt export`` writes the pruned checkpoint.
"""

from __future__ import annotations

import json
import os

import torch

from .blocks import find_blocks

__all__ = ["load_model", "CheckpointWeights", "is_causal_lm", "materialize_gguf"]


def _config(folder):
    if not os.path.isdir(folder):
        raise ValueError(f"model folder {folder!r} does not exist")
    if not os.path.exists(os.path.join(folder, "config.json")):
        raise ValueError(f"model folder {folder!r} has no config.json: not a Hugging Face "
                         "model folder (save one with model.save_pretrained(folder))")
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder)


#: The index of a sharded safetensors checkpoint (tensor key -> shard file).
SAFE_INDEX = "model.safetensors.index.json"


def checkpoint_files(folder, name="model folder") -> tuple:
    """(safetensors file names, {tensor key: file name}) of a Hugging Face model folder: the
    index's map when the checkpoint is sharded (:data:`SAFE_INDEX`), else the files' headers.
    ValueError, naming the folder as ``name`` does, without safetensors weights or with an
    unreadable index or file."""
    from safetensors import SafetensorError, safe_open

    where = f"{name} {folder!r}"
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors")
                   and os.path.isfile(os.path.join(folder, f)))
    if not files:
        raise ValueError(f"{where} holds no .safetensors weights (found "
                         f"{sorted(os.listdir(folder))[:8]}); re-save the model with "
                         "model.save_pretrained(folder), which writes safetensors")
    index = os.path.join(folder, SAFE_INDEX)
    if os.path.isfile(index):
        try:
            with open(index) as fh:
                weight_map = dict(json.load(fh)["weight_map"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{where}: unreadable {SAFE_INDEX} ({exc})") from None
        absent = sorted(set(weight_map.values()) - set(files))
        if absent:
            raise ValueError(f"{where}: {SAFE_INDEX} names missing shards {absent[:3]}")
        return files, weight_map
    file_of = {}
    for fname in files:
        try:
            with safe_open(os.path.join(folder, fname), "pt") as fh:
                for key in fh.keys():
                    file_of.setdefault(key, fname)
        except SafetensorError as exc:
            raise ValueError(f"{where}: {fname} is not a readable safetensors file "
                             f"({exc})") from None
    return files, file_of


def is_causal_lm(config) -> bool:
    """True for decoder language models (``*ForCausalLM`` in ``config.architectures``)."""
    names = getattr(config, "architectures", None) or ()
    return any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in names)


class CheckpointWeights:
    """The tensors of a folder's safetensors files, read on demand (memory-mapped).

    Parameters
    ----------
    folder : str
        Holds ``model.safetensors`` or shards listed in ``model.safetensors.index.json``.
    """

    def __init__(self, folder):
        _, file_of = checkpoint_files(folder)
        self.file_of = {k: os.path.join(folder, f) for k, f in file_of.items()}
        self.folder = folder

    def __contains__(self, key):
        return key in self.file_of

    def _read(self, keys):
        """{key: tensor} read file by file. Each file is opened (memory-mapped) only for the
        read and closed after it, so its pages do not stay mapped into this process: the
        resident memory stays that of the tensors read, not of the whole checkpoint."""
        from safetensors import safe_open

        missing = [k for k in keys if k not in self.file_of]
        if missing:
            raise ValueError(f"the checkpoint in {self.folder!r} has no tensor(s) {missing}")
        by_file = {}
        for key in keys:
            by_file.setdefault(self.file_of[key], []).append(key)
        out = {}
        for path, names in by_file.items():
            with safe_open(path, "pt") as fh:
                for key in names:
                    out[key] = fh.get_tensor(key)
        return out

    def get(self, key) -> torch.Tensor:
        """The tensor ``key`` as stored (a copy in memory, not a view of the file)."""
        return self._read([key])[key]

    def load(self, module, prefix, device="cpu") -> None:
        """Read every parameter and persistent buffer of ``module`` (named ``prefix`` in
        the model) from the checkpoint onto ``device``."""
        from accelerate.utils import set_module_tensor_to_device

        names = [n for n, _ in module.named_parameters()] + \
            [n for n, _ in module.named_buffers() if _is_persistent(module, n)]
        key = {name: f"{prefix}.{name}" if prefix else name for name in names}
        tensors = self._read(list(key.values()))
        for name in names:
            set_module_tensor_to_device(module, name, device, value=tensors.pop(key[name]))

    @staticmethod
    def release(module) -> None:
        """Drop ``module``'s parameters (back to the meta device): memory is freed."""
        module.to("meta")


def _is_persistent(module, name) -> bool:
    owner_name, _, leaf = name.rpartition(".")
    owner = module.get_submodule(owner_name) if owner_name else module
    return leaf not in owner._non_persistent_buffers_set


def materialize_gguf(path, folder, *, dtype=torch.float32) -> str:
    """Write the model of a GGUF file as a Hugging Face folder; returns ``folder``.

    transformers reads the file (``from_pretrained(..., gguf_file=)``, which needs the
    ``gguf`` package) and dequantizes its weights to ``dtype``; such a model keeps a
    ``quantization_config`` and refuses ``save_pretrained``, so it is rebuilt from its config
    without one, given the dequantized weights (tied weights tied again) and saved with its
    tokenizer. A folder that already holds the model of the same file (its size and time are
    recorded in ``folder/gguf_source.json``) is kept as it is. The pruning engine then reads
    the folder like any other (offload included).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path) or not path.lower().endswith(".gguf"):
        raise ValueError(f"{path!r} is not a .gguf file")
    stat = os.stat(path)
    source = {"file": path, "size": stat.st_size, "mtime": stat.st_mtime, "dtype": str(dtype)}
    record = os.path.join(folder, "gguf_source.json")
    if os.path.exists(record):
        with open(record) as fh:
            if json.load(fh) == source:
                return folder
    directory, name = os.path.split(path)
    try:
        quantized = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    except ImportError as exc:
        raise ImportError(f"reading {path} needs the package 'gguf': "
                          'pip install -e ".[torch]"') from exc
    config = quantized.config.to_dict()
    config.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(type(quantized.config).from_dict(config),
                                             dtype=dtype)
    model.load_state_dict(quantized.state_dict(), strict=True)
    model.tie_weights()
    tmp = folder.rstrip(os.sep) + ".tmp"
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    with open(os.path.join(tmp, "gguf_source.json"), "w") as fh:
        json.dump(source, fh)
    if os.path.exists(folder):
        import shutil

        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return folder


def load_model(folder, *, offload=False, dtype=None, blocks=None):
    """A model and its tokenizer from a local Hugging Face folder.

    Parameters
    ----------
    folder : str
        ``config.json``, safetensors weights and tokenizer files (as ``save_pretrained``
        writes them).
    offload : bool, default False
        False: the whole model in memory (CPU). True: the repeated blocks stay on the meta
        device and are read from disk one at a time by the pruning engine (pass the returned
        ``weights`` to :func:`~sparseopt_torch.prune.prune_model`).
    dtype : torch.dtype, optional
        Load in this dtype; default the checkpoint's.
    blocks : str, optional
        Override of the block list (see :func:`~sparseopt_torch.blocks.find_blocks`), used
        with ``offload`` to know what to leave on disk.

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode.
    tokenizer : transformers tokenizer
    weights : CheckpointWeights or None
        The on-disk weights (``offload=True``), else None.

    Raises
    ------
    ValueError
        A folder without config.json, weights or a tokenizer.
    """
    config = _config(folder)
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"model folder {folder!r} has no usable tokenizer ({err}); save one "
                         "with tokenizer.save_pretrained(folder)") from None
    cls = AutoModelForCausalLM if is_causal_lm(config) else AutoModel
    weights = CheckpointWeights(folder)  # also refuses a folder without weights
    if dtype is None:
        dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype)
    if not offload:
        model = cls.from_pretrained(folder, dtype=dtype)
        return model.eval(), tokenizer, None
    from accelerate import init_empty_weights

    with init_empty_weights():
        model = cls.from_config(config, dtype=dtype)
    prefix, _ = find_blocks(model, blocks)
    inside = prefix + "."
    tied = getattr(config, "tie_word_embeddings", False)
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if name.startswith(inside) or tensor.device.type != "meta":
            continue
        if name not in weights:
            if tied and name.endswith("lm_head.weight"):
                continue  # tied to the input embedding; the engine never runs the head
            raise ValueError(f"the checkpoint in {folder!r} has no tensor {name!r}")
        from accelerate.utils import set_module_tensor_to_device

        set_module_tensor_to_device(model, name, "cpu", value=weights.get(name))
    return model.eval(), tokenizer, weights
