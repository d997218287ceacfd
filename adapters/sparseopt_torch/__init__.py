"""sparseopt_torch: the PyTorch adapter of sparseopt.

It feeds real layer Hessians to the core (:mod:`sparseopt.layer`, which computes on the
layer's tensors where they are), contributes the torch kernels for tensors on a GPU, prunes whole models
layer by layer, learns masks end to end (ProxSparse) and exports 2:4 weights. torch and
transformers are imported only in this package. See docs/adapter.md.
"""

from .data import calibration_eval_split, docstring_sentences, token_batches
from .evaluate import embed, fidelity, load_minilm
from .export import load_packed, pack_24, save_dense, save_packed, to_semi_structured, unpack_24
from .hessians import Hessians, collect_hessians
from .kernels import prox24, sparsegpt_sweep
from .layers import block_of, find_layers, get_weight, set_weight
from .proxsparse import ProxSparseResult, apply_masks, embedding_distance_loss, proxsparse

__all__ = ["find_layers", "get_weight", "set_weight", "block_of", "collect_hessians", "Hessians"]

__all__ += ["pack_24", "unpack_24", "save_dense", "save_packed", "load_packed",
            "to_semi_structured"]
__all__ += ["docstring_sentences", "calibration_eval_split", "token_batches", "load_minilm",
            "embed", "fidelity"]
__all__ += ["proxsparse", "ProxSparseResult", "apply_masks", "embedding_distance_loss"]
__all__ += ["prox24", "sparsegpt_sweep"]

from .prune import LayerRecord, ModelPruneResult, load_pruned, prune_model  # noqa: E402

__all__ += ["prune_model", "ModelPruneResult", "LayerRecord", "load_pruned"]
