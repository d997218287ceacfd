"""sparseopt_torch: the PyTorch adapter of sparseopt.

It feeds real layer Hessians to the NumPy core (:mod:`sparseopt.layer`), prunes whole models
layer by layer, learns masks end to end (ProxSparse) and exports 2:4 weights. torch and
transformers are imported only in this package. See docs/adapter.md.
"""

from .layers import block_of, find_layers, get_weight, set_weight

__all__ = ["find_layers", "get_weight", "set_weight", "block_of"]
