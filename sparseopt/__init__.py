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

The names above are loaded on first use (PEP 562): ``import sparseopt`` itself imports
neither NumPy nor Numba and changes nothing in the process, so that the ``sparseopt``
command (:mod:`sparseopt.cli`) can choose thread settings before NumPy loads
(``docs/prox.md``, "Threads").
"""

import importlib
import importlib.util

__version__ = "0.1.0"

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "prune": "layer",
    "Path": "paths", "prox_path": "paths", "iht_path": "paths", "maiht_path": "paths",
    "iobs_path": "paths",
    "NM": "patterns", "TopK": "patterns",
    "L0": "regularizers", "L1": "regularizers", "R0": "regularizers", "R1": "regularizers",
    "R2": "regularizers", "RNM": "regularizers", "Regularizer": "regularizers",
}

__all__ = ["NM", "TopK", "prune", "Regularizer", "RNM", "L0", "L1", "R0", "R1", "R2",
           "Path", "prox_path", "iht_path", "maiht_path", "iobs_path", "__version__"]


def __getattr__(name):
    """The public names of ``__all__`` and the submodules (``sparseopt.layer``, ...), imported
    when first asked for and then kept as attributes of the package."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
