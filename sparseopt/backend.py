"""Array backends: the namespace of the caller's arrays, and the per-backend hot kernels.

The layer pruners are written once against the array API (``array-api-compat``, the mechanism
scikit-learn and SciPy use for GPU arrays): given NumPy arrays they compute with NumPy, given
torch tensors they compute with torch on the tensors' device and return tensors. torch is
never imported here; ``array_api_compat`` imports it only when a tensor comes in.

Only the hot kernels differ per backend (:func:`kernel`):

- ``"numpy"``: the Numba kernels of the core (EnumALM, the SparseGPT in-block sweep, the
  R0/R1/R2 prox), each with its plain NumPy / array-API twin, tested to agree, and LAPACK.
- ``"torch"``: batched torch kernels for tensors on an accelerator, contributed by the torch
  adapter through the ``sparseopt.kernels`` entry point group (the core never imports the
  adapter). A torch tensor on the CPU shares its memory with a NumPy array, so on the CPU the
  Numba kernels serve torch too (faster there than torch kernels: docs/benchmarks.md); the
  same holds for the LAPACK calls of :mod:`sparseopt.linalg`.
  Inside :func:`device_kernels` CPU tensors take the accelerator path instead: how the tests
  check the GPU code on a machine without one.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from importlib.metadata import entry_points

import array_api_compat
import numpy as np

__all__ = ["namespace", "is_numpy", "backend_name", "device", "on_cpu", "numpy_path",
           "device_kernels", "as_numpy", "from_numpy", "numpy_dtype", "zero", "ascontiguous",
           "kernel", "register_kernel", "synchronize", "row_blocks", "ROW_BLOCK_ENTRIES"]

_KERNELS: dict = {}
#: The core modules that register NumPy kernels, imported on the first lookup (they import
#: Numba / SciPy, so ``import sparseopt.backend`` stays light).
CORE_KERNEL_MODULES = ("sparseopt.linalg", "sparseopt.prox", "sparseopt.regularizers",
                       "sparseopt.layer.sparsegpt")
_LOADED_ENTRY_POINTS = False
_DEVICE_KERNELS_ON_CPU = False


def namespace(*arrays):
    """The array namespace shared by ``arrays`` (None entries are ignored).

    Raises ValueError when they come from different libraries (e.g. a NumPy H with a torch W):
    the caller converts, nothing is moved silently.
    """
    arrays = [a for a in arrays if a is not None]
    try:
        return array_api_compat.array_namespace(*arrays)
    except TypeError as exc:
        kinds = sorted({type(a).__module__.split(".")[0] + "." + type(a).__name__ for a in arrays})
        raise ValueError(f"arrays of different libraries cannot be mixed ({', '.join(kinds)}): "
                         "pass all of them as NumPy arrays or all as torch tensors") from exc


def is_numpy(xp) -> bool:
    return array_api_compat.is_numpy_namespace(xp)


def backend_name(xp) -> str:
    """``"numpy"`` or ``"torch"``, the key of :func:`kernel`."""
    if is_numpy(xp):
        return "numpy"
    if array_api_compat.is_torch_namespace(xp):
        return "torch"
    raise ValueError(f"unsupported array namespace {xp.__name__}: sparseopt supports NumPy "
                     "arrays and torch tensors")


def on_cpu(x) -> bool:
    """True for NumPy arrays and CPU tensors: their memory can be viewed as a NumPy array."""
    return isinstance(x, np.ndarray) or str(array_api_compat.device(x)) == "cpu"


def numpy_path(x) -> bool:
    """True when ``x`` is computed on by the NumPy/Numba/LAPACK code: NumPy arrays, and CPU
    tensors unless :func:`device_kernels` is in force."""
    if isinstance(x, np.ndarray):
        return True
    return on_cpu(x) and not _DEVICE_KERNELS_ON_CPU


@contextmanager
def device_kernels():
    """Within this block CPU tensors take the accelerator path too (the torch kernels,
    ``torch.linalg``): what lets a machine without a GPU test the code a GPU runs."""
    global _DEVICE_KERNELS_ON_CPU
    old, _DEVICE_KERNELS_ON_CPU = _DEVICE_KERNELS_ON_CPU, True
    try:
        yield
    finally:
        _DEVICE_KERNELS_ON_CPU = old


def as_numpy(x):
    """A NumPy view of a CPU array (no copy for torch CPU tensors); other inputs raise."""
    if isinstance(x, np.ndarray):
        return x
    if not on_cpu(x):
        raise ValueError(f"as_numpy needs a CPU array, got one on {array_api_compat.device(x)}")
    return x.detach().numpy()


def from_numpy(a, like):
    """``a`` (NumPy) as an array of the kind of ``like`` (a tensor shares its memory)."""
    if isinstance(like, np.ndarray):
        return a
    xp = array_api_compat.array_namespace(like)
    return xp.asarray(a, device=array_api_compat.device(like))


def device(x):
    """The device of an array (``"cpu"`` for NumPy)."""
    return array_api_compat.device(x)


def zero(x):
    """A 0-d zero of ``x``'s dtype on ``x``'s device, for ``where(mask, x, zero(x))``."""
    xp = array_api_compat.array_namespace(x)
    return xp.zeros((), dtype=x.dtype, device=array_api_compat.device(x))


#: Entries of one row block (8 MiB of float64): whole-layer temporaries of an LLM layer
#: (e.g. 6912 x 2560) are ~140 MB each in float64, several times that for argsort indices.
ROW_BLOCK_ENTRIES = 2**20


def row_blocks(n_rows: int, row_len: int, entries: int | None = None) -> list:
    """Slices of consecutive rows, about ``entries`` (default :data:`ROW_BLOCK_ENTRIES`)
    entries each and at least one row, for computations that are independent per row
    (masks, scores, Tr(D H D')) and would otherwise make whole-layer temporaries."""
    entries = ROW_BLOCK_ENTRIES if entries is None else entries
    step = max(1, entries // max(1, int(row_len)))
    return [slice(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def ascontiguous(x):
    """``x`` in C order (a copy only when it is not): the layout the in-place kernels need."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    return x.contiguous()


def numpy_dtype(dtype) -> np.dtype:
    """The NumPy dtype of the same name as a NumPy or torch dtype (``torch.float32`` ->
    ``float32``)."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        return np.dtype(dtype)
    return np.dtype(str(dtype).removeprefix("torch."))


def register_kernel(name: str, backend: str):
    """Decorator: ``fn`` is the ``backend`` implementation of the hot kernel ``name``."""
    def deco(fn):
        _KERNELS[(name, backend)] = fn
        return fn
    return deco


def kernel(name: str, x):
    """The implementation of the hot kernel ``name`` for the array ``x``.

    NumPy arrays and CPU tensors get the NumPy/Numba kernel (a tensor is passed as a NumPy
    view and the result comes back as a tensor); tensors on an accelerator get the kernel
    registered for their backend, loaded from the ``sparseopt.kernels`` entry points.
    """
    if numpy_path(x):
        fn = _KERNELS.get((name, "numpy"))
        if fn is None:  # the NumPy kernels register themselves when their module is imported
            for module in CORE_KERNEL_MODULES:
                importlib.import_module(module)
            fn = _KERNELS.get((name, "numpy"))
        if fn is None:
            raise LookupError(f"no NumPy kernel {name!r} registered")
        if isinstance(x, np.ndarray):
            return fn
        return _via_numpy(fn)
    backend = backend_name(array_api_compat.array_namespace(x))
    _load_entry_points()
    fn = _KERNELS.get((name, backend))
    if fn is None:
        raise NotImplementedError(
            f"no {backend} kernel {name!r} for arrays on {array_api_compat.device(x)}: install "
            f"the torch adapter (pip install -e .[torch]) or move the arrays to the CPU")
    return fn


def synchronize(x) -> None:
    """Wait for the work queued on ``x``'s accelerator (nothing to wait for on the CPU), so
    that wall times measure it."""
    if not numpy_path(x):
        kernel("synchronize", x)(x)


def _via_numpy(fn):
    """Run a NumPy kernel on CPU tensors: tensor arguments become views, array results come
    back as tensors (in-place updates of views land in the tensors)."""
    def wrapped(*args, **kwargs):
        like = next(a for a in args if not isinstance(a, np.ndarray) and hasattr(a, "shape"))
        conv = [as_numpy(a) if _is_tensor(a) else a for a in args]
        out = fn(*conv, **kwargs)
        if isinstance(out, tuple):
            return tuple(from_numpy(o, like) if isinstance(o, np.ndarray) else o for o in out)
        return from_numpy(out, like) if isinstance(out, np.ndarray) else out
    return wrapped


def _is_tensor(a) -> bool:
    return (not isinstance(a, np.ndarray) and hasattr(a, "shape")
            and array_api_compat.is_array_api_obj(a))


def _load_entry_points() -> None:
    global _LOADED_ENTRY_POINTS
    if _LOADED_ENTRY_POINTS:
        return
    _LOADED_ENTRY_POINTS = True
    for ep in entry_points(group="sparseopt.kernels"):
        ep.load()  # the module registers its kernels with register_kernel
