"""Thread settings: :func:`set_idle_thread_env` (how long idle BLAS and OpenMP threads
spin, set by the ``sparseopt`` command before NumPy loads), the thread limits for small
problems, :func:`one_thread` (Numba and BLAS) and :func:`one_blas_thread` (BLAS only), the
one mechanism every limit of the package goes through (``sparseopt.linalg.small_lapack``
uses the second), and :func:`parallel_kernel`, the decorator of every parallel Numba kernel
(small calls run its serial compilation).

This module imports neither NumPy nor Numba at import time, so that
:func:`set_idle_thread_env` can run before they load.

The layer problems of the theory checks, the demo and some tests are one row or a few rows:
their products are matrix-vector sized, where a second thread only adds start-up cost and
oversubscribed thread pools on a shared machine cost many times the work.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import types

__all__ = ["one_thread", "one_blas_thread", "set_idle_thread_env", "IDLE_THREAD_ENV",
           "parallel_kernel", "PARALLEL_KERNELS", "PASS_MIN_ENTRIES",
           "GROUP_SOLVE_MIN_ENTRIES"]

#: What :func:`set_idle_thread_env` sets. ``OPENBLAS_THREAD_TIMEOUT=4``: OpenBLAS's idle
#: threads sleep after 2^4 cycles instead of spinning 2^28 cycles after every call on a core
#: that the Numba kernel run between two products (the 2:4 prox, SparseGPT's sweep) needs.
#: ``GOMP_SPINCOUNT=10000``: the same the other way round, for the OpenMP threads of Numba's
#: parallel kernels (libgomp spins 300 000 rounds after each kernel, into the product that
#: follows). Results do not change (``benchmarks/mechanisms.py``, ``env``).
IDLE_THREAD_ENV = {"OPENBLAS_THREAD_TIMEOUT": "4", "GOMP_SPINCOUNT": "10000"}


def set_idle_thread_env(environ=None) -> dict:
    """Set :data:`IDLE_THREAD_ENV` in ``environ`` (default ``os.environ``) where the user has
    not chosen: a variable already set is kept, and ``GOMP_SPINCOUNT`` is not set when
    ``OMP_WAIT_POLICY`` is. Does nothing once NumPy is loaded: OpenBLAS and libgomp read
    their variable when they load, so a later value would only mislead.

    The ``sparseopt`` command calls it first (:func:`sparseopt.cli.main`). A library user
    who wants the same sets the two variables in the shell, or calls this before the first
    ``import numpy`` of the process (``docs/prox.md``, "Threads").

    Returns
    -------
    dict
        The variables set by this call (empty when nothing was set).
    """
    environ = os.environ if environ is None else environ
    if "numpy" in sys.modules:
        return {}
    wanted = dict(IDLE_THREAD_ENV)
    if "OMP_WAIT_POLICY" in environ:
        del wanted["GOMP_SPINCOUNT"]
    done = {key: value for key, value in wanted.items() if key not in environ}
    environ.update(done)
    return done

# The BLAS limit is process-wide: the first of the threads inside one_blas_thread sets it
# and the last one out restores the counts found before (each thread restoring what it found
# on entry would leave BLAS on one thread after interleaved calls).
_BLAS_LOCK = threading.Lock()
_BLAS_STATE = {"controller": None, "limiter": None, "inside": 0}


@contextlib.contextmanager
def one_blas_thread():
    """Run the block with BLAS (threadpoolctl) on one thread; the counts found before are
    restored when the last block that is inside ends, also when it raises.

    Blocks may nest and may overlap across Python threads: the limit is process-wide while
    any of them lasts (BLAS calls of other threads in that window run on one thread too:
    slower, not different). (OpenBLAS 0.3.31 does not always take a limit set from a thread
    other than the main one after the main thread set its count: there the block runs on
    BLAS's threads, as before.) The BLAS libraries are looked up once, at the first call:
    one loaded later (by another package) keeps its threads.
    """
    state = _BLAS_STATE
    with _BLAS_LOCK:
        if state["inside"] == 0:
            if state["controller"] is None:  # inspecting the libraries: once
                from threadpoolctl import ThreadpoolController

                state["controller"] = ThreadpoolController()
            state["limiter"] = state["controller"].limit(limits=1, user_api="blas")
        state["inside"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            state["inside"] -= 1
            if state["inside"] == 0:
                state["limiter"].restore_original_limits()
                state["limiter"] = None


@contextlib.contextmanager
def one_thread():
    """Run the block with Numba and BLAS (threadpoolctl) single-threaded.

    Results do not change (up to BLAS summation order); the previous limits are restored on
    exit, also when the block raises.

    Examples
    --------
    >>> import numba
    >>> before = numba.get_num_threads()
    >>> with one_thread():
    ...     numba.get_num_threads()
    1
    >>> numba.get_num_threads() == before
    True
    """
    import numba

    with one_blas_thread():
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(before)


#: ``min_entries`` of :func:`parallel_kernel` for a pass of a few operations per entry (an
#: update, a sum, a count): below 2^16 entries (512 KiB of float64) the pass runs from the
#: cache in microseconds and a second thread cannot pay for its wake-up.
PASS_MIN_ENTRIES = 1 << 16
#: ``min_entries`` for a kernel that solves each group (the exact N:M prox: tens of
#: operations per entry and iteration): 256 groups of 4.
GROUP_SOLVE_MIN_ENTRIES = 1 << 10

#: Every kernel made by :func:`parallel_kernel`, by name (the tests compare the two
#: compilations of each).
PARALLEL_KERNELS = {}


def parallel_kernel(min_entries, **options):
    """Compile a kernel whose loop is a ``prange`` twice: ``njit(parallel=True)`` for calls
    whose first argument (the array the loop runs over) has at least ``min_entries``
    entries, and serially (the ``prange`` runs as ``range``) for smaller ones.

    Why: a parallel kernel wakes the Numba threads at every call, about 10 us on an idle
    machine and 0.1-1 ms on a loaded one (the threads wait for a core), while a small call's
    work is a microsecond: the prox-gradient loop of a 15-coefficient problem makes three
    such calls per iteration. The two compilations run the same loop body and write the
    same bits; the kernels' float sums are row sums added in order, so neither depends on
    the number of threads, and the two agree to rounding (``tests/test_threads.py``
    compares them). ``options`` (``fastmath={"reassoc"}``: a row sum the compiler may
    vectorise) go to the parallel compilation only: the serial one sums in plain order,
    since under ``reassoc`` the vectorised order of a small loop depends on whether its
    output overlaps an input (a run-time check), and a small call gains nothing from it.
    Both are cached (the serial one under the qualified name ``<name>_serial``). The result
    is a Python function with the attributes ``parallel``, ``serial`` and ``min_entries``;
    it cannot be called from another Numba function.
    """
    from numba import njit

    def wrap(f):
        parallel = njit(cache=True, parallel=True, **options)(f)
        twin = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                                  f.__closure__)
        twin.__qualname__ = f.__qualname__ + "_serial"  # Numba names the cache file by it
        serial = njit(cache=True)(twin)

        @functools.wraps(f)
        def kernel(*args):
            run = kernel.parallel if args[0].size >= kernel.min_entries else kernel.serial
            return run(*args)

        kernel.parallel, kernel.serial, kernel.min_entries = parallel, serial, min_entries
        PARALLEL_KERNELS[f"{f.__module__}.{f.__qualname__}"] = kernel
        return kernel

    return wrap
