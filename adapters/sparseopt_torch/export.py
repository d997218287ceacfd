"""Export of 2:4 weights: a dense checkpoint, a packed 2:4 safetensors file, and PyTorch's
semi-structured sparse tensors on CUDA.

A weight is the (d_out, d_in) matrix W of prox24-kubler eq. 1 (see :mod:`.layers`); the 2:4
groups run along its last axis (the input dimension), four consecutive entries each, at most
two of them nonzero.

The packed format (one safetensors file, :func:`save_packed` / :func:`load_packed`) stores,
for every targeted weight with state-dict key ``<name>``,

* ``<name>.values``: (rows, cols/2) in the weight's dtype, the two kept entries of each
  group in position order;
* ``<name>.positions``: uint8 (rows, ceil(cols/8)), the two 2-bit in-group indices
  ``p0 < p1`` of each group as the nibble ``p0 | p1 << 2``, group ``2j`` in the low nibble and
  group ``2j + 1`` in the high nibble of byte ``j`` (a last, unpaired group leaves a zero high
  nibble);

and every other tensor of the state dict dense as it is. The JSON metadata names the format,
its version, the original key order, and the shape, dtype and layout of every packed weight.
This row-major layout is simple and portable; it is not cuSPARSELt's / CUTLASS's swizzled
metadata layout, which :func:`to_semi_structured` builds on the GPU.

Size: per group of 4 entries of b bits, 2 values and 4 bits of positions, so a packed weight
takes 2 (b + 2) / (4 b) of the dense bytes: 2 (16 + 2) / 64 = 56.25% in bfloat16 / float16,
2 (32 + 2) / 128 = 53.125% in float32 (exactly, when cols/8 is whole).

Zeros. A group "has <= 2 nonzeros" by value: ``-0.0 == 0``, so a weight pruned by
multiplying with a mask (which leaves -0.0 where a negative entry was dropped) is 2:4. The
round trip is bit-exact for every entry except a -0.0 that is not one of the two stored
entries of its group: it comes back as +0.0 (equal in value; a product with it is a zero of
possibly the other sign, which no sum with a nonzero term can see). Stored entries, including
-0.0 fillers of groups with fewer than two nonzeros, keep their bits. NaN (and Inf) weights
are rejected: they are not model weights, and NaN has no place in a "nonzero" count.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import OrderedDict

import torch
from torch import nn

from sparseopt.validation import check_choice

from .layers import find_layers, get_weight
from .models import SAFE_INDEX, checkpoint_files
from .rundir import atomic_write, layer_file, load_layer, read_run

__all__ = ["PACKED_FORMAT", "PACKED_VERSION", "pack_24", "unpack_24", "packed_ratio",
           "save_dense", "save_packed", "load_packed", "to_semi_structured",
           "export_checkpoint"]

#: Name of the packed 2:4 format in the safetensors metadata, and its version.
PACKED_FORMAT = "sparseopt-packed-2:4"
PACKED_VERSION = 1
_META_KEY = "sparseopt_packed_24"

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float64": torch.float64}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}


# ---------------------------------------------------------------------------------------------
# pack / unpack of one weight


def _check_weight(W, name: str) -> torch.Tensor:
    if not isinstance(W, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(W).__name__}")
    if W.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows, cols), got shape {tuple(W.shape)}")
    if W.dtype not in _DTYPE_NAMES:
        raise ValueError(f"{name} has dtype {W.dtype}; supported: "
                         f"{', '.join(_DTYPES)}")
    if W.shape[1] % 4 != 0:
        raise ValueError(f"{name} has {W.shape[1]} columns, not divisible by 4 (2:4 groups)")
    if W.is_sparse or W.layout != torch.strided:
        raise ValueError(f"{name} must be a dense (strided) tensor, got layout {W.layout}")
    if not torch.isfinite(W).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return W.detach()


def pack_24(W: torch.Tensor, *, name: str = "W") -> tuple[torch.Tensor, torch.Tensor]:
    """Pack a 2:4 sparse weight into its kept values and 2-bit positions.

    Parameters
    ----------
    W : torch.Tensor, (rows, cols)
        float32, float16, bfloat16 or float64, ``cols`` divisible by 4, at most two nonzeros
        in every group of four consecutive entries of a row. Not modified.
    name : str, keyword-only
        How error messages call the weight (e.g. its state-dict key).

    Returns
    -------
    values : torch.Tensor, (rows, cols/2), dtype of ``W``
        The two kept entries of each group in position order. A group with fewer than two
        nonzeros keeps zero entries at its lowest free positions.
    positions : torch.Tensor, uint8, (rows, ceil(cols/8))
        Group g's indices ``p0 < p1`` in {0..3} as the nibble ``p0 | p1 << 2``, two groups per
        byte (even group in the low nibble); an odd number of groups pads a zero nibble.

    Raises
    ------
    ValueError
        If ``W`` is not a 2-D floating tensor of a supported dtype, ``cols % 4 != 0``, ``W``
        holds NaN/Inf, or a group has more than two nonzeros (the message names ``name`` and
        the first such row and group).

    Notes
    -----
    The 2:4 pattern is the N:M constraint of prox24-kubler Sec. 2 with N = 2, M = 4.
    Zeros are counted by value (``-0.0`` is zero); see the module docstring for what that
    means for bit-exactness. The values are gathered, never computed, so
    ``unpack_24(*pack_24(W), W.shape)`` reproduces every stored bit.

    Examples
    --------
    >>> import torch
    >>> v, p = pack_24(torch.tensor([[0.0, 3.0, 0.0, -1.0, 5.0, 0.0, 0.0, 0.0]]))
    >>> v
    tensor([[ 3., -1.,  5.,  0.]])
    >>> p  # group 0: 1 | 3 << 2 = 13; group 1: 0 | 1 << 2 = 4 -> 13 | 4 << 4
    tensor([[77]], dtype=torch.uint8)
    """
    W = _check_weight(W, name)
    rows, cols = W.shape
    n_groups = cols // 4
    G = W.reshape(rows, n_groups, 4)
    nonzero = G != 0
    count = nonzero.sum(dim=-1)
    if (count > 2).any():
        r, g = (int(i) for i in torch.nonzero(count > 2)[0])
        raise ValueError(f"{name} is not 2:4 sparse: row {r}, group {g} (columns {4 * g}.."
                         f"{4 * g + 3}) has {int(count[r, g])} nonzeros; "
                         f"{int((count > 2).sum())} group(s) exceed 2")
    # Nonzeros first, then zeros, each in position order; keep the first two, sorted.
    arange = torch.arange(4, device=W.device)
    key = (~nonzero).to(torch.int64) * 4 + arange
    idx = torch.argsort(key, dim=-1)[..., :2]
    idx, _ = torch.sort(idx, dim=-1)
    values = torch.gather(G, -1, idx).reshape(rows, 2 * n_groups)
    nibble = (idx[..., 0] | (idx[..., 1] << 2)).to(torch.uint8)
    if n_groups % 2:
        nibble = torch.cat([nibble, nibble.new_zeros(rows, 1)], dim=1)
    positions = nibble[:, 0::2] | (nibble[:, 1::2] << 4)
    return values.contiguous(), positions.contiguous()


def unpack_24(values: torch.Tensor, positions: torch.Tensor, shape, *,
              name: str = "W") -> torch.Tensor:
    """The dense weight of :func:`pack_24`'s ``values`` and ``positions``.

    Parameters
    ----------
    values : torch.Tensor, (rows, cols/2)
        float32, float16, bfloat16 or float64; the result has this dtype and device.
    positions : torch.Tensor, uint8, (rows, ceil(cols/8))
    shape : tuple of two ints
        (rows, cols) of the dense weight, ``cols`` divisible by 4.
    name : str, keyword-only
        How error messages call the weight.

    Returns
    -------
    torch.Tensor, (rows, cols)
        Zeros except the stored values at their positions (bit-exact copies).

    Raises
    ------
    ValueError
        On a bad ``shape``, shapes or dtypes of ``values`` / ``positions`` that do not fit it,
        or invalid position codes (``p0 >= p1`` or a nonzero padding nibble): a corrupted
        packing.
    """
    try:
        rows, cols = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape of {name} must be (rows, cols), got {shape!r}") from None
    if rows < 0 or cols < 0 or cols % 4 != 0:
        raise ValueError(f"shape of {name} is {(rows, cols)}: needs rows, cols >= 0 and cols "
                         "divisible by 4")
    n_groups = cols // 4
    n_bytes = (n_groups + 1) // 2
    if not isinstance(values, torch.Tensor) or values.dtype not in _DTYPE_NAMES:
        raise ValueError(f"values of {name} must be a float32/float16/bfloat16/float64 tensor")
    if tuple(values.shape) != (rows, 2 * n_groups):
        raise ValueError(f"values of {name} has shape {tuple(values.shape)}, expected "
                         f"{(rows, 2 * n_groups)} for shape {(rows, cols)}")
    if not isinstance(positions, torch.Tensor) or positions.dtype != torch.uint8:
        raise ValueError(f"positions of {name} must be a uint8 tensor")
    if tuple(positions.shape) != (rows, n_bytes):
        raise ValueError(f"positions of {name} has shape {tuple(positions.shape)}, expected "
                         f"{(rows, n_bytes)} for shape {(rows, cols)}")
    positions = positions.to(values.device)
    nibble = torch.stack([positions & 0xF, positions >> 4], dim=-1).reshape(rows, 2 * n_bytes)
    if n_groups % 2 and bool((nibble[:, -1] != 0).any()):
        raise ValueError(f"positions of {name} are corrupted: nonzero padding nibble")
    nibble = nibble[:, :n_groups].to(torch.int64)
    idx = torch.stack([nibble & 3, nibble >> 2], dim=-1)
    if bool((idx[..., 0] >= idx[..., 1]).any()):
        r, g = (int(i) for i in torch.nonzero(idx[..., 0] >= idx[..., 1])[0])
        raise ValueError(f"positions of {name} are corrupted: row {r}, group {g} has indices "
                         f"{int(idx[r, g, 0])}, {int(idx[r, g, 1])} (need p0 < p1)")
    out = torch.zeros(rows, n_groups, 4, dtype=values.dtype, device=values.device)
    out.scatter_(-1, idx, values.reshape(rows, n_groups, 2))
    return out.reshape(rows, cols)


def packed_ratio(dtype: torch.dtype, cols: int | None = None) -> float:
    """Packed bytes over dense bytes of one (rows, cols) weight: 2 (b + 2) / (4 b) for b-bit
    values when cols/8 is whole (56.25% in bf16/fp16, 53.125% in float32); with ``cols``,
    the exact figure including a padded positions byte."""
    if dtype not in _DTYPE_NAMES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype}")
    size = torch.empty((), dtype=dtype).element_size()
    if cols is None:
        return 0.5 + 1.0 / (8 * size)
    if cols <= 0 or cols % 4:
        raise ValueError(f"cols must be a positive multiple of 4, got {cols}")
    return (cols // 2 * size + (cols // 4 + 1) // 2) / (cols * size)


# ---------------------------------------------------------------------------------------------
# checkpoints


def _is_sentence_transformer(model) -> bool:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return False
    return isinstance(model, SentenceTransformer)


def save_dense(model, path) -> str:
    """Save ``model`` as an ordinary dense checkpoint (zeros stored as zeros).

    Parameters
    ----------
    model : transformers.PreTrainedModel or sentence_transformers.SentenceTransformer
    path : str or os.PathLike
        Directory, created if missing.

    Returns
    -------
    str
        ``path``. A ``PreTrainedModel`` is saved with ``save_pretrained`` (load it with
        ``from_pretrained``), a ``SentenceTransformer`` with ``.save`` (load it with
        ``SentenceTransformer(path)``). Every tool loads this; it saves no space.

    Raises
    ------
    ValueError
        If ``model`` is neither.
    """
    path = os.fspath(path)
    if _is_sentence_transformer(model):
        model.save(path)
    elif isinstance(model, nn.Module) and callable(getattr(model, "save_pretrained", None)):
        model.save_pretrained(path)
    else:
        raise ValueError("model must be a transformers PreTrainedModel (save_pretrained) or a "
                         f"SentenceTransformer, got {type(model).__name__}")
    return path


def _targets(model, modules) -> dict:
    """``{state-dict key of the weight: (layer name, module)}`` of the targeted layers."""
    return {f"{lname}.weight": (lname, mod) for lname, mod in find_layers(model, modules).items()}


@torch.no_grad()
def save_packed(model, path, *, modules=None, progress: bool = True) -> dict:
    """Save ``model``'s state dict to one safetensors file, 2:4 weights packed.

    Parameters
    ----------
    model : nn.Module
        Not modified (its tensors are copied to the CPU).
    path : str or os.PathLike
        The file; written to a temporary file in the same directory and renamed, so an error
        leaves nothing half-written.
    modules : optional
        The targeted layers, as in :func:`find_layers` (default: every ``nn.Linear`` /
        ``Conv1D`` except heads such as the pooler). Each targeted weight must be 2:4 along
        its input dimension (the (d_out, d_in) matrix of :func:`get_weight`).
    progress : bool, keyword-only
        Print the size line (default True).

    Returns
    -------
    dict
        ``n_weights``, ``packed_bytes`` (values + positions of the targeted weights),
        ``dense_bytes`` (the same weights dense), ``ratio`` = packed / dense,
        ``file_bytes`` and ``path``.

    Raises
    ------
    ValueError
        If a targeted weight is not 2:4 (naming it), has an unsupported dtype, or a packed
        key would collide with a state-dict key.

    Notes
    -----
    Per group of four b-bit entries: two values and 4 bits of positions, 2 (b + 2) / (4 b)
    of dense, 56.25% in bf16 (the issue's 2 (16 + 2) / 64).
    """
    from safetensors.torch import save_file

    state = model.state_dict()
    targets = _targets(model, modules)
    tensors, weights = {}, {}
    packed_bytes = dense_bytes = 0
    for key, (lname, mod) in targets.items():
        if key not in state:
            raise ValueError(f"the weight of layer {lname!r} ({key!r}) is not in the state dict")
        W = get_weight(mod).to("cpu")
        values, positions = pack_24(W, name=key)
        for suffix, t in ((".values", values), (".positions", positions)):
            if key + suffix in state:
                raise ValueError(f"packed key {key + suffix!r} collides with a state-dict key")
            tensors[key + suffix] = t
        weights[key] = {"shape": list(W.shape), "dtype": _DTYPE_NAMES[W.dtype],
                        "transposed": not isinstance(mod, nn.Linear)}
        packed_bytes += values.nbytes + positions.nbytes
        dense_bytes += W.numel() * W.element_size()
    for key, t in state.items():
        if key not in weights:
            # clone: safetensors refuses tensors that share storage (tied weights, views)
            tensors[key] = t.detach().to("cpu").contiguous().clone()
    meta = {"format": PACKED_FORMAT, "version": PACKED_VERSION, "keys": list(state),
            "weights": weights}
    path = os.fspath(path)
    atomic_write(path, lambda p: save_file(tensors, p, metadata={_META_KEY: json.dumps(meta)}))
    ratio = packed_bytes / dense_bytes
    sizes = {"n_weights": len(weights), "packed_bytes": packed_bytes,
             "dense_bytes": dense_bytes, "ratio": ratio,
             "file_bytes": os.path.getsize(path), "path": path}
    if progress:
        dtypes = sorted({w["dtype"] for w in weights.values()})
        print(f"save_packed: {len(weights)} 2:4 weights ({', '.join(dtypes)}): packed "
              f"{packed_bytes} B vs dense {dense_bytes} B = {100 * ratio:.6g}% of dense "
              f"(bf16 2*(16+2)/64 = 56.25%); file {sizes['file_bytes']} B -> {path}")
    return sizes


def load_packed(path, *, device="cpu") -> "OrderedDict[str, torch.Tensor]":
    """Read a file of :func:`save_packed` back into a dense state dict.

    Parameters
    ----------
    path : str or os.PathLike
    device : str or torch.device, keyword-only
        Where the tensors are loaded (default CPU).

    Returns
    -------
    OrderedDict
        The state dict in its original key order, every packed weight restored dense in its
        stored layout (bit-exact, up to the sign of dropped -0.0 entries, see the module
        docstring); ready for ``model.load_state_dict``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not safetensors, not a sparseopt packed 2:4 file (foreign or
        unknown version), or its contents do not match its metadata (corrupted).
    """
    from safetensors import SafetensorError, safe_open

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no packed 2:4 file at {path!r}")
    try:
        with safe_open(path, framework="pt", device=str(device)) as f:
            metadata = f.metadata() or {}
            if _META_KEY not in metadata:
                raise ValueError(f"{path!r} is a safetensors file but not a sparseopt packed "
                                 f"2:4 file (no {_META_KEY!r} metadata)")
            try:
                meta = json.loads(metadata[_META_KEY])
                fmt, version = meta["format"], meta["version"]
                keys, weights = list(meta["keys"]), dict(meta["weights"])
                if not all(isinstance(v, dict) for v in weights.values()):
                    raise TypeError("weights entries must be objects")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path!r}: corrupted packed 2:4 metadata ({exc})") from None
            if fmt != PACKED_FORMAT or version != PACKED_VERSION:
                raise ValueError(f"{path!r} has format {fmt!r} version {version!r}; this "
                                 f"reader knows {PACKED_FORMAT!r} version {PACKED_VERSION}")
            stored = set(f.keys())
            expected = {k for k in keys if k not in weights}
            expected |= {k + s for k in weights for s in (".values", ".positions")}
            if stored != expected or not set(weights) <= set(keys):
                missing, extra = sorted(expected - stored), sorted(stored - expected)
                raise ValueError(f"{path!r}: tensors do not match the metadata (missing "
                                 f"{missing[:5]}, unexpected {extra[:5]})")
            out = OrderedDict()
            for key in keys:
                if key not in weights:
                    out[key] = f.get_tensor(key)
                    continue
                info = weights[key]
                dtype = _DTYPES.get(info.get("dtype"))
                values = f.get_tensor(key + ".values")
                if dtype is None or values.dtype != dtype:
                    raise ValueError(f"{path!r}: {key}.values has dtype {values.dtype}, "
                                     f"metadata says {info.get('dtype')!r}")
                W = unpack_24(values, f.get_tensor(key + ".positions"), info.get("shape"),
                              name=f"{path}:{key}")
                out[key] = W.T.contiguous() if info.get("transposed") else W
    except SafetensorError as exc:
        raise ValueError(f"{path!r} is not a readable safetensors file ({exc})") from None
    return out


# ---------------------------------------------------------------------------------------------
# CUDA semi-structured sparse tensors


@torch.no_grad()
def to_semi_structured(model, *, modules=None, check: bool = True, rtol: float = 1e-2,
                       batch: int = 64, seed: int = 0, progress: bool = True) -> dict:
    """Replace each targeted 2:4 weight by ``torch.sparse.to_sparse_semi_structured(W)``.

    Parameters
    ----------
    model : nn.Module
        On a CUDA device, targeted weights float16 or bfloat16. Modified in place: each
        targeted ``nn.Linear``'s weight becomes a non-trainable semi-structured parameter, so
        ``F.linear`` runs the sparse kernel (cuSPARSELt or CUTLASS).
    modules : optional
        The targeted layers, as in :func:`find_layers`.
    check : bool, keyword-only
        Compare ``F.linear(x, W_sparse)`` with ``F.linear(x, W)`` on a random ``x`` of
        ``batch`` rows per layer (default True).
    rtol : float, keyword-only
        Largest accepted max |difference| / max |dense output| of the check.
    batch, seed : int, keyword-only
        Rows and seed of the random check input.
    progress : bool, keyword-only
        Print one line per layer with the check's errors.

    Returns
    -------
    dict
        ``{layer name: {"max_abs_err": float, "rel_err": float}}`` (empty dicts with
        ``check=False``).

    Raises
    ------
    RuntimeError
        Without CUDA, or a targeted weight not on a CUDA device: the semi-structured kernels
        need one. Also when a check fails or torch refuses a layer (its shape constraints).
    ValueError
        If a targeted layer is not ``nn.Linear`` (``Conv1D`` computes x W with W (in, out),
        whose 2:4 groups would run the wrong way), has a dtype other than float16/bfloat16, or
        is not 2:4.

    Notes
    -----
    All layers are converted and checked before any weight is replaced, so an error leaves
    the model as it was.
    """
    layers = find_layers(model, modules)
    if not torch.cuda.is_available():
        raise RuntimeError("to_semi_structured needs a CUDA device: "
                           "torch.sparse.to_sparse_semi_structured has GPU kernels only "
                           "(cuSPARSELt / CUTLASS), and torch.cuda.is_available() is False")
    for name, mod in layers.items():
        if mod.weight.device.type != "cuda":
            raise RuntimeError(f"to_semi_structured needs a CUDA device: layer {name!r} is on "
                               f"{mod.weight.device}; move the model with model.to('cuda')")
        if not isinstance(mod, nn.Linear):
            raise ValueError(f"layer {name!r} is {type(mod).__name__}; only nn.Linear can take "
                             "a semi-structured weight")
        if mod.weight.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"layer {name!r} has dtype {mod.weight.dtype}; semi-structured "
                             "sparsity needs float16 or bfloat16 (model.half() / .bfloat16())")
    from torch.sparse import to_sparse_semi_structured

    converted, report = {}, {}
    for name, mod in layers.items():
        W = mod.weight.detach()
        pack_24(W, name=name)  # validates 2:4 (ValueError naming the layer)
        try:
            Ws = to_sparse_semi_structured(W)
        except RuntimeError as exc:
            raise RuntimeError(f"layer {name!r}: to_sparse_semi_structured refused weight of "
                               f"shape {tuple(W.shape)} ({exc})") from exc
        report[name] = {}
        if check:
            g = torch.Generator(device=W.device).manual_seed(seed)
            x = torch.randn(batch, W.shape[1], generator=g, device=W.device, dtype=W.dtype)
            dense = nn.functional.linear(x, W).float()
            sparse = nn.functional.linear(x, Ws).float()
            err = float((sparse - dense).abs().max())
            rel = err / max(float(dense.abs().max()), torch.finfo(torch.float32).tiny)
            report[name] = {"max_abs_err": err, "rel_err": rel}
            if progress:
                print(f"to_semi_structured: {name} {tuple(W.shape)} {W.dtype}: max |sparse - "
                      f"dense| = {err:.3g} ({rel:.3g} relative)")
            if not rel <= rtol:
                raise RuntimeError(f"layer {name!r}: semi-structured matmul differs from the "
                                   f"dense one by {rel:.3g} relative (> rtol={rtol})")
        converted[name] = Ws
    for name, Ws in converted.items():
        layers[name].weight = nn.Parameter(Ws, requires_grad=False)
    return report


# ---------------------------------------------------------------------------------------------
# Hugging Face checkpoint of a pruned run

#: Weight files of a model folder that :func:`export_checkpoint` does not copy verbatim
#: (safetensors shards are rewritten; other formats would hold the dense weights).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack",
                    ".gguf")
#: Folders of a downloaded model that describe the dense files (hub cache, git).
_SKIPPED_DIRS = (".cache", ".git")


def _is_weight_file(fname: str) -> bool:
    if fname == SAFE_INDEX:
        return False  # copied (it maps keys to shards, which keep their names)
    if fname.endswith(".index.json"):
        fname = fname[: -len(".index.json")]  # pytorch_model.bin.index.json, ...
    if fname.endswith(".bin"):
        return fname.startswith("pytorch_model")  # not e.g. training_args.bin
    return fname.endswith(_WEIGHT_SUFFIXES)


def _dense_files(dense_dir) -> tuple[list, dict]:
    """(safetensors file names, {key: file name}) of a model folder, checked."""
    if not os.path.isdir(dense_dir):
        raise ValueError(f"dense_dir={dense_dir!r} is not a folder")
    if not os.path.isfile(os.path.join(dense_dir, "config.json")):
        raise ValueError(f"dense_dir={dense_dir!r} has no config.json: not a Hugging Face model "
                         "folder (write one with model.save_pretrained(folder))")
    return checkpoint_files(dense_dir, "dense_dir")


def _checkpoint_key(name: str, keys, tied: bool) -> str:
    """The checkpoint key of layer ``name``'s weight.

    Normally ``<name>.weight``. A checkpoint saved from another head class differs by the
    base-model prefix (``bert.encoder...`` read by ``AutoModel`` as ``encoder...``,
    ``layers.0...`` read by ``AutoModelForCausalLM`` as ``model.layers.0...``), so a unique
    key that ends with the other at a dot boundary is accepted.
    """
    key = f"{name}.weight"
    if key in keys:
        return key
    found = [k for k in keys if k.endswith("." + key) or key.endswith("." + k)]
    if len(found) == 1:
        return found[0]
    if found:
        raise ValueError(f"pruned layer {name!r}: its weight {key!r} matches several "
                         f"checkpoint keys {sorted(found)[:4]}; cannot tell which one")
    hint = ""
    if tied and name.split(".")[-1] in ("lm_head", "embed_out"):
        hint = " (the model ties its output head to the input embedding, which is not stored)"
    raise ValueError(f"pruned layer {name!r}: its weight {key!r} is not in the checkpoint"
                     f"{hint}; checkpoint keys are e.g. {sorted(keys)[:5]}. transformers may "
                     "rename or fuse weights of this architecture when loading, which export "
                     "does not support")


def _parse_pattern(pattern):
    """(n, m) of an "n:m" pattern string, or None for other patterns (top-k)."""
    try:
        n, m = (int(x) for x in str(pattern).split(":"))
    except ValueError:
        return None
    return n, m


def _check_pattern(W, nm, name):
    """W is the (d_out, d_in) weight as stored: finite and N:M along d_in."""
    if not torch.isfinite(W).all():
        raise ValueError(f"pruned layer {name!r} has non-finite entries in {W.dtype} (values "
                         "out of the checkpoint dtype's range?)")
    if nm is None:
        return
    n, m = nm
    if W.shape[1] % m:
        raise ValueError(f"pruned layer {name!r}: d_in = {W.shape[1]} is not divisible by {m}")
    count = (W.reshape(W.shape[0], -1, m) != 0).sum(-1)
    if bool((count > n).any()):
        raise ValueError(f"pruned layer {name!r} is not {n}:{m} in {W.dtype}: "
                         f"{int((count > n).sum())} group(s) have more than {n} nonzeros")


def _strip_front_matter(text: str) -> tuple[str, str]:
    """(YAML front matter with its --- lines, rest) of a model card."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end >= 0:
            stop = text.find("\n", end + 4)
            stop = len(text) if stop < 0 else stop + 1
            return text[:stop], text[stop:]
    return "", text


def _model_card(dense_dir, config, sparsity, stats, original, conv1d) -> str:
    """README.md of the exported folder: front matter of the original card (license, tags),
    what was pruned and how, how to load it, then the original card."""
    front, body = _strip_front_matter(original or "")
    base = config.get("_name_or_path") or os.path.basename(os.path.abspath(dense_dir))
    archs = ", ".join(config.get("architectures") or [config.get("model_type", "?")])
    causal = any(a.endswith(("ForCausalLM", "LMHeadModel"))
                 for a in config.get("architectures") or ())
    auto = "AutoModelForCausalLM" if causal else "AutoModel"
    frac = stats["zero"] / max(stats["total"], 1)
    frac_pruned = stats["zero_pruned"] / max(stats["pruned"], 1)
    lines = [
        front.rstrip("\n"),
        f"# {base} pruned {sparsity['pattern']} with sparseopt",
        "",
        f"This is `{base}` ({archs}) with {len(sparsity['pruned_layers'])} linear layers "
        f"pruned to the **{sparsity['pattern']}** pattern (along each weight row, the input "
        f"dimension) by sparseopt's `{sparsity['method']}` method"
        + (" refined to the masked least-squares optimum" if sparsity["refine_steps"] == "exact"
           else f" with {sparsity['refine_steps']} masked gradient steps"
           if sparsity["refine_steps"] else "")
        + (" (weights before those steps)" if sparsity["variant"] == "nogd" else "") + ".",
        "",
        "| | parameters | zeros |",
        "|---|---:|---:|",
        f"| pruned layers | {stats['pruned']:,} | {stats['zero_pruned']:,} "
        f"({100 * frac_pruned:.1f}%) |",
        f"| whole checkpoint | {stats['total']:,} | {stats['zero']:,} ({100 * frac:.1f}%) |",
        "",
        "Every other tensor (embeddings, norms, biases, ...) is the original's. The weights "
        "are stored dense (the zeros as zeros), so every tool loads this folder and it takes "
        "the space of the original; `config.json` records the settings under "
        "`\"sparsity\"` (`pruned_layers` names them).",
        "",
        "```python",
        f"from transformers import {auto}, AutoTokenizer",
        "",
        f'model = {auto}.from_pretrained("path/to/this/folder")',
        'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")',
        "```",
        "",
    ]
    if sparsity["pattern"] == "2:4" and not conv1d:
        lines += ["", "On a GPU, `sparseopt_torch.export.to_semi_structured(model.half().cuda())` "
                  "runs the 2:4 layers with PyTorch's semi-structured sparse kernels."]
    if body.strip():
        lines += ["", "## Original model card", "", body.strip()]
    return "\n".join(lines).lstrip("\n") + "\n"


@torch.no_grad()
def export_checkpoint(run, dense_dir, out_dir, *, variant: str = "gd",
                      check_dense: bool = True) -> str:
    """Write a pruned run as a Hugging Face model folder that ``from_pretrained`` loads.

    Parameters
    ----------
    run : str or os.PathLike
        A finished run folder of :func:`~sparseopt_torch.prune.prune_model` (``out=``):
        ``run.json`` and, per pruned layer, ``layers/<name>.safetensors`` / ``.json``.
    dense_dir : str or os.PathLike
        The model folder the run pruned (the one loaded with the transformers Auto class):
        ``config.json``, safetensors weights (one file, or shards listed in
        ``model.safetensors.index.json``), tokenizer and other files. Not modified.
    out_dir : str or os.PathLike
        The new folder; must not exist or be empty, nor lie inside ``dense_dir``.
    variant : {"gd", "nogd"}, keyword-only
        The run's final weights ("gd"), or those before the masked gradient steps ("nogd",
        the same as "gd" for a run with ``refine_steps=0``).
    check_dense : bool, keyword-only
        Compare ``dense_dir``'s weights of the pruned layers with the fingerprint the run
        took of the model it pruned, and warn if they differ (default True; it reads those
        weights once more).

    Returns
    -------
    str
        ``out_dir``. It holds every file of ``dense_dir`` except weight files (tokenizer,
        generation config, index, ...), each safetensors shard rewritten with the pruned
        weights, ``config.json`` with a ``"sparsity"`` entry (pattern, method,
        refine_steps, variant, pruned_layers, tool) and a model card ``README.md``.

    Raises
    ------
    ValueError
        If ``variant`` is unknown, the run is not finished, ``dense_dir`` has no
        config.json or safetensors weights, a pruned layer's weight is not in the checkpoint
        or has another shape, a pruned weight is not N:M or not finite once cast to the
        checkpoint's dtype, or ``out_dir`` exists and is not empty.

    Warns
    -----
    UserWarning
        With ``check_dense``, when ``dense_dir`` is not the model the run pruned (same
        shapes, other weights: e.g. another fine-tune of the same base model).

    Notes
    -----
    Memory: one shard at a time (plus one pruned layer). Each shard keeps its tensors, their
    order, dtypes and the file's metadata; only ``<name>.weight`` of the pruned layers
    changes (cast to the stored dtype, transposed back for GPT-2's ``Conv1D``), every other
    tensor is copied bit for bit. Everything is written to a temporary sibling of
    ``out_dir`` that is renamed at the end, so a failure leaves no ``out_dir`` behind.

    A layer's checkpoint key is ``<layer name>.weight`` (the names of the model object the
    run pruned); a key that differs only by the base-model prefix (``bert.``, ``model.``) is
    found too. transformers 5 renames no linear weight of Llama, Qwen2/3, Mistral, OPT,
    GPT-2, Phi or BERT when loading; a model whose loading fuses or splits weights (e.g.
    fused qkv checkpoints) is refused with a ValueError naming the layer.
    """
    import shutil

    from safetensors import safe_open
    from safetensors.torch import save_file

    check_choice(variant, "variant", ("gd", "nogd"))
    run, dense_dir, out_dir = os.fspath(run), os.fspath(dense_dir), os.fspath(out_dir)
    settings = read_run(run)
    files, file_of = _dense_files(dense_dir)
    out_abs, dense_abs = os.path.abspath(out_dir), os.path.abspath(dense_dir)
    if out_abs == dense_abs or out_abs.startswith(dense_abs + os.sep):
        raise ValueError(f"out_dir={out_dir!r} lies inside dense_dir={dense_dir!r}; choose a "
                         "folder outside it")
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise ValueError(f"out_dir={out_dir!r} exists and is not empty; choose a new folder")
    with open(os.path.join(dense_dir, "config.json")) as fh:
        config = json.load(fh)

    layers = list(settings["layers"])
    conv1d = set(settings.get("conv1d_layers", []))
    nm = _parse_pattern(settings.get("pattern"))
    tied = bool(config.get("tie_word_embeddings", False))
    key_of = {name: _checkpoint_key(name, file_of, tied) for name in layers}
    _check_shapes(run, dense_dir, layers, key_of, file_of, conv1d)
    if check_dense and _dense_differs(run, dense_dir, settings, layers, key_of, file_of,
                                      conv1d):
        import warnings

        warnings.warn(f"dense_dir={dense_dir!r} is not the model the run {run!r} pruned: its "
                      "weights of the pruned layers differ from those the run started from "
                      "(run.json dense_weights_sha256). The export combines the run's pruned "
                      "layers with dense_dir's other weights; check the folders",
                      UserWarning, stacklevel=2)
    by_file = {}
    for name, key in key_of.items():
        by_file.setdefault(file_of[key], []).append(name)

    parent = os.path.dirname(out_abs)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_abs)}.tmp-", dir=parent)
    stats = {"pruned": 0, "zero_pruned": 0, "total": 0, "zero": 0}
    try:
        # 1. every non-weight file and sub-folder, as it is
        for fname in sorted(os.listdir(dense_dir)):
            src, dst = os.path.join(dense_dir, fname), os.path.join(tmp, fname)
            if fname in _SKIPPED_DIRS or fname in ("config.json", "README.md"):
                continue
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            elif not _is_weight_file(fname):
                shutil.copy2(src, dst)
        # 2. the shards, one at a time (the dense tensors are memory-mapped by safe_open)
        for fname in files:
            names = {key_of[n]: n for n in by_file.get(fname, [])}
            tensors = {}
            with safe_open(os.path.join(dense_dir, fname), "pt") as fh:
                metadata = fh.metadata()
                for key in fh.keys():
                    t = fh.get_tensor(key)
                    if key in names:
                        t = _pruned_tensor(run, names[key], t, variant, key,
                                           names[key] in conv1d, nm)
                        stats["pruned"] += t.numel()
                        stats["zero_pruned"] += int((t == 0).sum())
                    if t.is_floating_point():
                        stats["zero"] += int((t == 0).sum())
                    stats["total"] += t.numel()
                    tensors[key] = t
            save_file(tensors, os.path.join(tmp, fname), metadata=metadata)
            del tensors
        # 3. config.json with the sparsity entry, and the model card
        sparsity = {"pattern": settings.get("pattern"), "method": settings.get("method"),
                    "refine_steps": settings.get("refine_steps", 0), "variant": variant,
                    "pruned_layers": layers, "tool": "sparseopt"}
        config["sparsity"] = sparsity
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(config, fh, indent=2)
            fh.write("\n")
        readme = os.path.join(dense_dir, "README.md")
        original = None
        if os.path.isfile(readme):
            with open(readme, encoding="utf-8", errors="replace") as fh:
                original = fh.read()
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as fh:
            fh.write(_model_card(dense_dir, config, sparsity, stats, original,
                                 bool(conv1d)))
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)  # empty (checked above); os.replace needs the name free
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _check_shapes(run, dense_dir, layers, key_of, file_of, conv1d):
    """Compare every pruned weight's shape with the checkpoint's from the file headers, so
    a wrong dense_dir fails before any shard is written."""
    from safetensors import safe_open

    opened = {}
    try:
        for name in layers:
            fname = file_of[key_of[name]]
            if fname not in opened:
                opened[fname] = safe_open(os.path.join(dense_dir, fname), "pt")
            if key_of[name] not in opened[fname].keys():
                raise ValueError(f"dense_dir={dense_dir!r}: {SAFE_INDEX} places "
                                 f"{key_of[name]!r} (pruned layer {name!r}) in {fname}, which "
                                 "does not hold it")
            stored = tuple(opened[fname].get_slice(key_of[name]).get_shape())
            with safe_open(layer_file(run, name), "pt") as fh:
                shape = tuple(fh.get_slice("W").get_shape())
            expected = shape[::-1] if name in conv1d else shape
            if stored != expected:
                raise ValueError(_shape_error(name, shape, key_of[name], stored,
                                              name in conv1d))
    finally:
        opened.clear()  # closes the files


_SAFE_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                "BF16": torch.bfloat16}


def _dense_differs(run, dense_dir, settings, layers, key_of, file_of, conv1d) -> bool:
    """Whether dense_dir's weights of the pruned layers differ from those the run pruned.

    prune_model stores the SHA-256 of the dense (d_out, d_in) weights, layer by layer in
    order, as ``dense_weights_sha256``: in the model's dtype (the run's W), or in the
    checkpoint's for a model whose blocks were read from disk; both are tried. One tensor
    at a time, memory-mapped. False when the run has no fingerprint.
    """
    import hashlib

    from safetensors import safe_open

    want = settings.get("dense_weights_sha256")
    if not want:
        return False
    as_run, as_stored = hashlib.sha256(), hashlib.sha256()
    opened = {}
    try:
        for name in layers:
            with safe_open(layer_file(run, name), "pt") as fh:
                dtype = _SAFE_DTYPES.get(fh.get_slice("W").get_dtype())
            fname = file_of[key_of[name]]
            if fname not in opened:
                opened[fname] = safe_open(os.path.join(dense_dir, fname), "pt")
            W = opened[fname].get_tensor(key_of[name])
            W = W.T if name in conv1d else W
            for h, t in ((as_run, W if dtype is None else W.to(dtype)), (as_stored, W)):
                h.update(name.encode())
                h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
            del W
    finally:
        opened.clear()
    return want not in (as_run.hexdigest(), as_stored.hexdigest())


def _shape_error(name, shape, key, stored, is_conv1d) -> str:
    return (f"pruned layer {name!r}: the run's weight is {tuple(shape)} (d_out, d_in)"
            f"{' (Conv1D, stored transposed)' if is_conv1d else ''} but the checkpoint's "
            f"{key!r} is {tuple(stored)}: dense_dir is not the model the run pruned")


def _pruned_tensor(run, name, dense, variant, key, is_conv1d, nm):
    """The checkpoint tensor of pruned layer ``name``: the run's (d_out, d_in) weight in the
    dense tensor's dtype and layout, checked."""
    got = load_layer(run, name)
    if got is None:  # the run was checked; a layer vanishing meanwhile is still an error
        raise ValueError(f"run={run!r}: layer {name!r} has no result")
    _, saved = got
    W = saved["W_nogd"] if variant == "nogd" and "W_nogd" in saved else saved["W"]
    expected = tuple(W.shape[::-1]) if is_conv1d else tuple(W.shape)
    if tuple(dense.shape) != expected:
        raise ValueError(_shape_error(name, W.shape, key, dense.shape, is_conv1d))
    W = W.to(dense.dtype)
    _check_pattern(W, nm, name)
    return (W.T if is_conv1d else W).contiguous()
