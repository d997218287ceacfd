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

from .layers import find_layers, get_weight

__all__ = ["PACKED_FORMAT", "PACKED_VERSION", "pack_24", "unpack_24", "packed_ratio",
           "save_dense", "save_packed", "load_packed", "to_semi_structured"]

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
def save_packed(model, path, *, modules=None, verbose: bool = True) -> dict:
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
    verbose : bool, keyword-only
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
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".packed-", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={_META_KEY: json.dumps(meta)})
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    ratio = packed_bytes / dense_bytes
    sizes = {"n_weights": len(weights), "packed_bytes": packed_bytes,
             "dense_bytes": dense_bytes, "ratio": ratio,
             "file_bytes": os.path.getsize(path), "path": path}
    if verbose:
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
                       batch: int = 64, seed: int = 0, verbose: bool = True) -> dict:
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
    verbose : bool, keyword-only
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
            if verbose:
                print(f"to_semi_structured: {name} {tuple(W.shape)} {W.dtype}: max |sparse - "
                      f"dense| = {err:.3g} ({rel:.3g} relative)")
            if not rel <= rtol:
                raise RuntimeError(f"layer {name!r}: semi-structured matmul differs from the "
                                   f"dense one by {rel:.3g} relative (> rtol={rtol})")
        converted[name] = Ws
    for name, Ws in converted.items():
        layers[name].weight = nn.Parameter(Ws, requires_grad=False)
    return report
