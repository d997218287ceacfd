"""The 2:4 EnumALM kernel on a CUDA GPU: one thread per group of 4.

Each thread runs ``alm._prox24_one`` on its group: the 2-sparse certificate, then
``alm._solve24_one``, the per-group code of the CPU kernel's chunks (``_bound24_one``'s
brackets, bounds, cuts and starts, the 3-sparse and the dense candidate by ALM with
face-Newton steps, ``_dense_route24``, ``_store24_one``). numba-cuda compiles these ``@njit``
functions for the device when a CUDA kernel calls them, so the GPU runs the core's algorithm,
not a re-implementation of it. Its results equal the CPU kernel's up to rounding: NVVM
contracts ``a * b + c`` into fused multiply-adds, LLVM on the CPU does not (the CUDA tests
compare them; ``_run_groups_one_by_one`` is the kernel's CPU twin, bit for bit the CPU
kernel's result, tests/test_prox_cuda24.py).

Why one thread per group: a batched kernel of elementwise tensor operations (the torch
adapter's ``prox24``) launches a few dozen kernels per ALM sweep and per Newton phase and
runs as many sweeps as its slowest group needs; here every group runs its own loop and the
whole prox is one launch.

Requires the ``numba-cuda`` package and a CUDA driver (:func:`available`); imported only
when called, so the core runs without them. Arrays are anything with
``__cuda_array_interface__`` (torch CUDA tensors, CuPy arrays).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ..validation import check_int, check_real

__all__ = ["available", "prox24_cuda"]

#: Threads per block (64-512 were measured; 256 was among the fastest for both dtypes,
#: docs/benchmarks.md).
THREADS = 256


@functools.cache
def available() -> bool:
    """Whether numba-cuda is installed, sees a CUDA device (the simulator counts) and its
    compiler imports. It may not with a NumPy newer than it knows (numba-cuda 0.30.4 uses
    ``np.row_stack``, which NumPy 2.5 removed); that case warns once (RuntimeWarning) and
    returns False."""
    import numba

    try:
        from numba import cuda
    except ImportError:
        return False
    if not cuda.is_available():
        return False
    if numba.config.ENABLE_CUDASIM:  # the simulator runs kernels in Python: no compiler
        return True
    try:
        import numba.cuda.cudaimpl  # noqa: F401  (the lowering a kernel's compilation needs)
    except Exception as e:  # an installed but broken numba-cuda: say why, once
        warnings.warn(f"numba-cuda is installed but its compiler does not import here "
                      f"({type(e).__name__}: {e}); the GPU 2:4 prox kernel is unavailable",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def _device_array(a, name):
    """``a`` as a numba device array: a numba device array itself (also the CUDA
    simulator's, which the tests use without a GPU), or a view of any object with
    ``__cuda_array_interface__``."""
    from numba import cuda

    if hasattr(a, "__cuda_array_interface__"):
        return cuda.as_cuda_array(a)
    if hasattr(a, "copy_to_host"):
        return a
    raise ValueError(f"{name} must be a CUDA array (__cuda_array_interface__), got "
                     f"{type(a).__name__}")


def prox24_cuda(y, lam, tol, max_iter, out, sweeps, maxed, *, cuts=True, screen=True,
                stream=0):
    """The prox of ``lam * r_{2:4}`` on every row of ``y`` on its CUDA device.

    Parameters
    ----------
    y : CUDA array, shape (G, 4), float32 or float64, C-contiguous
    lam, tol : float
        Prox weight (>= 0) and relative sweep tolerance (> 0), as ``prox_nm``.
    max_iter : int
        Sweeps per candidate (>= 1).
    out : CUDA array like ``y`` (may be ``y`` itself: a thread reads its group first)
    sweeps : CUDA array, shape (G,), int64
        Receives the ALM sweeps of every group (0 for a certified 2-sparse group).
    maxed : CUDA array, shape (G,), bool
        Receives whether a candidate of the group reached ``max_iter``.
    cuts, screen : bool, keyword-only
        The kernel's exact cuts and its 2-sparse certificate (``alm.enum_alm_rows``; tests
        switch them off, which changes nothing but sweep counts).
    stream : int, keyword-only
        Handle of the CUDA stream to launch on (0: the default stream), e.g.
        ``torch.cuda.current_stream().cuda_stream``.

    Returns
    -------
    int
        The number of groups with NaN or Inf (their rows of ``out`` are meaningless). The
        call waits for the kernel to count them.
    """
    from numba import cuda

    lam = check_real(lam, "lam")
    tol = check_real(tol, "tol", positive=True)
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    y, out, sweeps, maxed = (_device_array(a, name) for a, name in
                             ((y, "y"), (out, "out"), (sweeps, "sweeps"), (maxed, "maxed")))
    G = y.shape[0]
    if y.ndim != 2 or y.shape[1] != 4 or y.dtype not in (np.float32, np.float64):
        raise ValueError(f"y must be a (G, 4) float32 or float64 array, got shape {y.shape} "
                         f"and dtype {y.dtype}")
    if out.shape != y.shape or out.dtype != y.dtype:
        raise ValueError(f"out must have y's shape {y.shape} and dtype {y.dtype}, got "
                         f"{out.shape} and {out.dtype}")
    if sweeps.shape != (G,) or sweeps.dtype != np.int64:
        raise ValueError(f"sweeps must be an int64 array of shape ({G},), got "
                         f"{sweeps.shape} {sweeps.dtype}")
    if maxed.shape != (G,) or maxed.dtype != np.bool_:
        raise ValueError(f"maxed must be a bool array of shape ({G},), got {maxed.shape} "
                         f"{maxed.dtype}")
    if G == 0:
        return 0
    s = cuda.external_stream(stream) if stream else 0
    bad = cuda.to_device(np.zeros(1, np.int64), stream=s)
    blocks = (G + THREADS - 1) // THREADS
    from ._cuda24_kernel import prox24_kernel

    with warnings.catch_warnings():
        # numba-cuda warns of "under-utilization" below two blocks per multiprocessor: a
        # small layer's prox is small, and nothing the caller could change
        warnings.filterwarnings("ignore", message=".*under-utilization")
        prox24_kernel[blocks, THREADS, s](y, lam, tol, max_iter, out,
                                          sweeps, maxed, bool(cuts), bool(screen), bad)
    return int(bad.copy_to_host(stream=s)[0])
