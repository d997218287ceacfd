"""sparseopt: sparse recovery and N:M structured sparsity, math first.

Main entry points
-----------------
- ``sparseopt.NM``, ``sparseopt.TopK``: sparsity patterns (``sparseopt.patterns``).
- ``sparseopt.regularizers``: r_{N:M} (prox24-kubler eq. 6) and its prox objective; the
  regularizer objects ``RNM``, ``L0``, ``L1``, ``R0``, ``R1``, ``R2`` (value, ``prox(x, tau)``,
  ``grad``, ``exact_pattern``; prox24-kubler eq. 6-7 and App. C).
- ``sparseopt.prox_path``, ``iht_path``, ``maiht_path``, ``iobs_path``: warm-started
  regularisation paths (``sparseopt.paths``); scikit-learn estimators in
  ``sparseopt.estimators`` (needs scikit-learn, not imported here).
- ``sparseopt.prox``: ``prox_nm`` (EnumALM / EnumPGD / EnumIPM) and ``certify``.
"""

from .layer import prune
from .paths import Path, iht_path, iobs_path, maiht_path, prox_path
from .patterns import NM, TopK
from .regularizers import L0, L1, R0, R1, R2, RNM, Regularizer

__version__ = "0.1.0"
__all__ = ["NM", "TopK", "prune", "Regularizer", "RNM", "L0", "L1", "R0", "R1", "R2",
           "Path", "prox_path", "iht_path", "maiht_path", "iobs_path", "__version__"]
