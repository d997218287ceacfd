"""sparseopt: sparse recovery and N:M structured sparsity, math first.

Main entry points
-----------------
- ``sparseopt.NM``, ``sparseopt.TopK``: sparsity patterns (``sparseopt.patterns``).
- ``sparseopt.regularizers``: r_{N:M} (prox24-kubler eq. 6) and its prox objective.
- ``sparseopt.prox``: ``prox_nm`` (EnumALM / EnumPGD / EnumIPM) and ``certify``.
"""

from .layer import prune
from .patterns import NM, TopK

__version__ = "0.1.0"
__all__ = ["NM", "TopK", "prune", "__version__"]
