"""Thread settings: :func:`set_idle_thread_env` (how long idle BLAS and OpenMP threads
spin, set by the ``sparseopt`` command before NumPy loads), and the thread limits for small
problems, :func:`one_thread` (Numba and BLAS) and :func:`one_blas_thread` (BLAS only), the
one mechanism every limit of the package goes through (``sparseopt.linalg.small_lapack``
uses the second).

This module imports neither NumPy nor Numba at import time, so that
:func:`set_idle_thread_env` can run before they load.

The layer problems of the theory checks, the demo and some tests are one row or a few rows:
their products are matrix-vector sized, where a second thread only adds start-up cost and
oversubscribed thread pools on a shared machine cost many times the work.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

__all__ = ["one_thread", "one_blas_thread", "set_idle_thread_env", "IDLE_THREAD_ENV"]

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
