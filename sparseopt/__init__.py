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

import os
import sys

# OpenBLAS's idle threads spin for about 2^28 cycles (~0.1 s) after every call, holding a
# core that the Numba kernels run between two products need (the 2:4 prox, SparseGPT's
# sweep): on 2 cores a prox pruning iteration ran 1.5-3.3x and SparseGPT up to 13x slower.
# A timeout of 2^4 cycles lets them sleep at once; GD loops of back-to-back products were
# not slower (docs/benchmarks.md, "BLAS threads"). OpenBLAS reads the variable when NumPy
# loads it, so this acts only when sparseopt is imported before NumPy (the ``sparseopt``
# command, the demo, the benchmarks); a value the user set is kept.
# The same holds the other way round for the OpenMP threads of Numba's parallel kernels:
# libgomp lets them spin 300 000 rounds after each kernel, into the product that follows
# (the prox pruner's gradient ran up to 1.4x slower than alone). 10 000 rounds keep
# back-to-back kernels cheap and free the cores for BLAS; torch's forward pass, which reads
# the same variable, did not change (docs/benchmarks.md, "BLAS threads"). A value the user
# set, or an OMP_WAIT_POLICY, is kept.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")

from .layer import prune  # noqa: E402
from .paths import Path, iht_path, iobs_path, maiht_path, prox_path
from .patterns import NM, TopK
from .regularizers import L0, L1, R0, R1, R2, RNM, Regularizer

__version__ = "0.1.0"
__all__ = ["NM", "TopK", "prune", "Regularizer", "RNM", "L0", "L1", "R0", "R1", "R2",
           "Path", "prox_path", "iht_path", "maiht_path", "iobs_path", "__version__"]
