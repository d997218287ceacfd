"""sparseopt_torch: the PyTorch adapter of sparseopt.

It feeds real layer Hessians to the core (:mod:`sparseopt.layer`, which computes on the
layer's tensors where they are), contributes the torch kernels for tensors on a GPU, prunes whole models
(any Hugging Face model from a folder) block by block, learns masks end to end (ProxSparse) and exports 2:4 weights. torch and
transformers are imported only in this package. See docs/adapter.md.
"""

from .data import (calibration_eval_split, docstring_sentences, length_order, read_documents,
                   sample_sequences, sequence_batches, split_documents, token_batches,
                   token_stream)
from .evaluate import embed, fidelity, kl_to_dense, load_minilm, perplexity
from .export import (export_checkpoint, load_packed, pack_24, save_dense, save_packed,
                     to_semi_structured, unpack_24)
from .hessians import Hessians, collect_hessians
from .kernels import prox24, sparsegpt_sweep
from .layers import find_layers, get_weight, set_weight
from .proxsparse import ProxSparseResult, apply_masks, embedding_distance_loss, proxsparse

__all__ = ["find_layers", "get_weight", "set_weight", "collect_hessians", "Hessians"]

__all__ += ["pack_24", "unpack_24", "save_dense", "save_packed", "load_packed",
            "to_semi_structured", "export_checkpoint"]
__all__ += ["docstring_sentences", "calibration_eval_split", "token_batches", "length_order",
            "load_minilm", "embed", "fidelity", "read_documents", "split_documents", "token_stream",
            "sample_sequences", "sequence_batches", "perplexity", "kl_to_dense"]
__all__ += ["proxsparse", "ProxSparseResult", "apply_masks", "embedding_distance_loss"]
__all__ += ["prox24", "sparsegpt_sweep"]

from .prune import LayerRecord, ModelPruneResult, PruneSettings, prune_model  # noqa: E402
from .rundir import load_pruned  # noqa: E402
from .hf import Experiment, prune_folder  # noqa: E402
from .blocks import find_blocks  # noqa: E402
from .models import CheckpointWeights, load_model  # noqa: E402
from .distributed import LayerExecutor, LayerJob, run_layer_jobs  # noqa: E402

__all__ += ["prune_model", "PruneSettings", "ModelPruneResult", "LayerRecord", "load_pruned",
            "Experiment", "prune_folder", "find_blocks",
            "load_model", "CheckpointWeights", "LayerExecutor", "LayerJob", "run_layer_jobs"]
from .finetune import FinetuneSettings, finetune  # noqa: E402

__all__ += ["finetune", "FinetuneSettings"]
