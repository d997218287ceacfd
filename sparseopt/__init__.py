"""sparseopt: sparse recovery and N:M structured sparsity, math first.

Main entry points
-----------------
- ``sparseopt.NM``, ``sparseopt.TopK``: sparsity patterns (``sparseopt.patterns``).
- ``sparseopt.regularizers``: r_{N:M} (prox24-kubler eq. 6) and its prox objective; the
  regularizer objects ``RNM``, ``L0``, ``L1``, ``R0``, ``R1``, ``R2`` (value, ``prox(x, tau)``,
  ``grad``, ``exact_pattern``; prox24-kubler eq. 6-7 and App. C).
- ``sparseopt.prox``: ``prox_nm`` (EnumALM / EnumPGD / EnumIPM) and ``certify``.
"""

from .layer import prune
from .patterns import NM, TopK
from .regularizers import L0, L1, R0, R1, R2, RNM, Regularizer

__version__ = "0.1.0"
__all__ = ["NM", "TopK", "prune", "Regularizer", "RNM", "L0", "L1", "R0", "R1", "R2",
           "__version__"]
