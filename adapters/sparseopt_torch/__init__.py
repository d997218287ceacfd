"""sparseopt_torch: the PyTorch adapter of sparseopt.

It feeds real layer Hessians to the NumPy core (:mod:`sparseopt.layer`), prunes whole models
layer by layer, learns masks end to end (ProxSparse) and exports 2:4 weights. torch and
transformers are imported only in this package. See docs/adapter.md.
"""

from .export import load_packed, pack_24, save_dense, save_packed, to_semi_structured, unpack_24
from .layers import block_of, find_layers, get_weight, set_weight

__all__ = ["find_layers", "get_weight", "set_weight", "block_of"]

__all__ += ["pack_24", "unpack_24", "save_dense", "save_packed", "load_packed",
            "to_semi_structured"]
