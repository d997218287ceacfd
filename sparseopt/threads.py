"""Thread limits for small problems: :func:`one_thread` (Numba and BLAS) and
:func:`one_blas_thread` (BLAS only), the one mechanism every limit of the package goes
through (``sparseopt.linalg.small_lapack`` uses the second).

The layer problems of the theory checks, the demo and some tests are one row or a few rows:
their products are matrix-vector sized, where a second thread only adds start-up cost, and
on a shared 2-core machine oversubscribed thread pools made them 10-50x slower.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["one_thread", "one_blas_thread"]

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
    BLAS's threads, as before.) The BLAS libraries are looked up once, at the first call
    (~0.3 ms): one loaded later (by another package) keeps its threads.
    """
    state = _BLAS_STATE
    with _BLAS_LOCK:
        if state["inside"] == 0:
            if state["controller"] is None:  # inspecting the libraries costs ~0.3 ms: once
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
