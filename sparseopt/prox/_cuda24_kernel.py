"""The CUDA kernel of :mod:`sparseopt.prox.cuda24`, in a module of its own so that numba.cuda
is imported only when a GPU prox is asked for (and so that the CUDA simulator, which
replaces this module's ``cuda`` while it runs a kernel, can run it in the tests)."""

from numba import cuda

from .alm import _prox24_one


@cuda.jit
def prox24_kernel(y, lam, tol, max_iter, out, sweeps, maxed, cuts, screen, bad):
    """Thread g: row g of y by the core's per-group code (``alm._prox24_one``, as its CPU
    twin ``alm._run_groups_one_by_one``); ``bad[0]`` counts the groups with NaN or Inf.
    The kernel does its own loads and stores, as the twin does: the CUDA simulator cannot
    pass its arrays to an ``@njit`` function."""
    g = cuda.grid(1)
    if g < y.shape[0]:
        o1, o2, o3, o4, sw, mx, finite = _prox24_one(y[g, 0], y[g, 1], y[g, 2], y[g, 3], lam,
                                                     tol, max_iter, cuts, screen)
        out[g, 0] = o1
        out[g, 1] = o2
        out[g, 2] = o3
        out[g, 3] = o4
        sweeps[g] = sw
        maxed[g] = mx
        if not finite:
            cuda.atomic.add(bad, 0, 1)
