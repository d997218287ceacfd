"""Thread limits for small problems: :func:`one_thread`.

The layer problems of the theory checks, the demo and some tests are one row or a few rows:
their products are matrix-vector sized, where a second thread only adds start-up cost, and
on a shared 2-core machine oversubscribed thread pools made them 10-50x slower.
"""

from __future__ import annotations

import contextlib

__all__ = ["one_thread"]


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
    from threadpoolctl import threadpool_limits

    blas = threadpool_limits(limits=1)
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with blas:
            yield
    finally:
        numba.set_num_threads(before)
