"""``import sparseopt`` changes nothing in the process (sparseopt/__init__.py loads its names
on first use); the ``sparseopt`` command sets OpenBLAS's thread timeout and libgomp's spin
count before NumPy loads (sparseopt.threads.set_idle_thread_env); the BLAS thread limits."""

import os
import subprocess
import sys

import numpy as np
import pytest

_KEYS = ("OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def _child(code, user_env=None):
    """Run ``code`` in a fresh interpreter whose environment has none of _KEYS but
    ``user_env``; returns its stdout lines."""
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env.update(user_env or {})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.split()


_PRINT = "import os\nprint(*[os.environ.get(k) for k in %r])\n" % (_KEYS[:2],)


def test_import_changes_no_environment_and_loads_names_on_first_use():
    code = ("import sys\nimport sparseopt\nprint('numpy' in sys.modules)\n"
            "print(sparseopt.prune.__module__, sparseopt.layer.__name__, sparseopt.NM(2, 4))\n"
            "from sparseopt import *\nprint(iobs_path.__module__)\n" + _PRINT)
    assert _child(code) == ["False", "sparseopt.layer", "sparseopt.layer", "2:4",
                            "sparseopt.paths", "None", "None"]


def test_unknown_attribute_of_the_package_is_an_attribute_error():
    import sparseopt

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        sparseopt.nothing_here
    assert set(sparseopt.__all__) <= set(dir(sparseopt))


# the command: what the console script runs (sparseopt.cli:main), with a command that
# exits at once (an unknown one: exit 2 before any entry point is loaded)
_COMMAND = ("import sys\nfrom sparseopt.cli import main\nassert 'numpy' not in sys.modules\n"
            "try:\n    main(['no-such-command'])\nexcept SystemExit:\n    pass\n" + _PRINT)


@pytest.mark.parametrize("user_env, expected", [
    ({}, ["4", "10000"]),
    ({"OPENBLAS_THREAD_TIMEOUT": "0", "GOMP_SPINCOUNT": "300000"}, ["0", "300000"]),
    ({"OMP_WAIT_POLICY": "ACTIVE"}, ["4", "None"]),  # the user's policy is kept
])
def test_command_sets_the_thread_settings_unless_the_user_chose(user_env, expected):
    assert _child(_COMMAND, user_env) == expected


def test_settings_are_left_alone_once_numpy_is_loaded():
    # OpenBLAS has read its environment already: setting it now would only mislead
    code = ("import numpy\nfrom sparseopt.threads import set_idle_thread_env\n"
            "print(len(set_idle_thread_env()))\n" + _PRINT)
    assert _child(code) == ["0", "None", "None"]


def test_set_idle_thread_env_returns_what_it_set():
    code = ("from sparseopt.threads import set_idle_thread_env\n"
            "env = {'GOMP_SPINCOUNT': '5'}\nprint(set_idle_thread_env(env), env)\n")
    assert " ".join(_child(code)) == ("{'OPENBLAS_THREAD_TIMEOUT': '4'} "
                                      "{'GOMP_SPINCOUNT': '5', 'OPENBLAS_THREAD_TIMEOUT': '4'}")


def _blas_threads():
    from threadpoolctl import threadpool_info

    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_small_lapack_runs_one_blas_thread_up_to_its_size_and_restores():
    from threadpoolctl import threadpool_limits

    from sparseopt.linalg import ONE_THREAD_LAPACK_MAX, small_lapack

    with threadpool_limits(limits=2, user_api="blas"):
        outer = _blas_threads()  # some builds stay at 1; NumPy's OpenBLAS takes 2
        with small_lapack(ONE_THREAD_LAPACK_MAX):
            inside = _blas_threads()
        with small_lapack(ONE_THREAD_LAPACK_MAX + 1):
            above = _blas_threads()
        after = _blas_threads()
        with pytest.raises(RuntimeError), small_lapack(8):  # restored when the block raises
            raise RuntimeError
        after_raise = _blas_threads()
    assert 2 in outer.values()
    assert inside == dict.fromkeys(outer, 1)
    assert above == after == after_raise == outer
    for bad in (-1, 2.5, "8", True):
        with pytest.raises(ValueError, match="d must be"):
            small_lapack(bad)


def test_small_dense_solves_give_the_same_bits_on_any_number_of_blas_threads():
    """The dense eigenvalue and Cholesky solves up to ONE_THREAD_LAPACK_MAX run on one BLAS
    thread (sparseopt.linalg.small_lapack), so the caller's thread count does not reach
    them. At d = 384 OpenBLAS's two-thread eigh and potrf/trtri round differently from its
    one-thread ones: without the limit this test fails."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from sparseopt.linalg import (inverse_hessian_factor, lambda_max, spectral_norm,
                                  top_eigenpairs)
    from sparseopt.problems import correlated_hessian

    d = 384
    H = correlated_hessian(d, seed=3)

    def solves():
        w, V = top_eigenpairs(H, d // 4 + 1)  # the evd route of the clipped prox
        w2, V2 = top_eigenpairs(H, 3)  # the subset route
        return [w, V, w2, V2, np.float64(lambda_max(H)), np.float64(spectral_norm(H)),
                inverse_hessian_factor(H)[0]]

    with threadpool_limits(limits=1, user_api="blas"):
        one = solves()
    with threadpool_limits(limits=2, user_api="blas"):
        two = solves()
    for a, b in zip(one, two):
        assert a.tobytes() == b.tobytes()


def test_small_lapack_restores_the_threads_after_overlapping_calls():
    """Two small_lapack blocks that overlap and end in the order they began, as calls from
    two threads can (entered and left by hand here, in one thread: OpenBLAS does not always
    show a limit set from a worker thread). BLAS stays on one thread until the last block
    ends, then gets back the counts found before. A limit that each block restores to what
    it found on entry fails both checks: the first exit would restore 2 too early and the
    second would restore the 1 it found."""
    from threadpoolctl import threadpool_limits

    from sparseopt.linalg import small_lapack

    with threadpool_limits(limits=2, user_api="blas"):
        outer = _blas_threads()
        first, second = small_lapack(8), small_lapack(8)
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        between = _blas_threads()
        second.__exit__(None, None, None)
        after = _blas_threads()
    assert 2 in outer.values()
    assert between == dict.fromkeys(outer, 1)
    assert after == outer


def test_one_thread_and_small_lapack_share_one_limit():
    """``one_thread`` (Numba and BLAS) and ``small_lapack`` (BLAS) go through the one
    process-wide limit of ``sparseopt.threads.one_blas_thread``: blocks of either kind that
    overlap, in any order, keep BLAS on one thread until the last of them ends, and give
    back the counts found before the first. With a limit of its own (threadpoolctl's, which
    restores what it found on entry), ``one_thread`` entered inside ``small_lapack`` and left
    after it would leave BLAS on one thread ("after" fails)."""
    import numba
    from threadpoolctl import threadpool_limits

    from sparseopt.linalg import small_lapack
    from sparseopt.threads import one_thread

    numba_before = numba.get_num_threads()
    with threadpool_limits(limits=2, user_api="blas"):
        outer = _blas_threads()
        lapack, block = small_lapack(8), one_thread()
        lapack.__enter__()
        block.__enter__()
        inside_numba = numba.get_num_threads()
        lapack.__exit__(None, None, None)
        between = _blas_threads()
        block.__exit__(None, None, None)
        after = _blas_threads()
        with pytest.raises(RuntimeError), one_thread():  # restored when the block raises
            raise RuntimeError
        after_raise = _blas_threads()
    assert 2 in outer.values()
    assert inside_numba == 1 and numba.get_num_threads() == numba_before
    assert between == dict.fromkeys(outer, 1)
    assert after == after_raise == outer


def _workload(rng):
    """Public calls that between them reach every kernel of ``parallel_kernel``, on small
    float64 and float32 problems."""
    from sparseopt import NM
    from sparseopt.layer.prox import prox_prune
    from sparseopt.layer.loss import masked_gd
    from sparseopt.layer.refine import masked_optimum
    from sparseopt.linalg import is_symmetric, symmetrize_in_place
    from sparseopt.objectives import LayerLoss, LeastSquares
    from sparseopt.prox.alm import enum_alm_rows
    from sparseopt.prox.pgd import enum_pgd_sorted
    from sparseopt.regularizers import L1, R1, tail_prox
    from sparseopt.solvers.proxgrad import Schedule, proximal_gradient

    for dtype in (np.float64, np.float32):
        A = rng.standard_normal((24, 64)).astype(dtype)
        H = (A @ A.T / 64).astype(dtype)
        W = rng.standard_normal((6, 24)).astype(dtype)
        prox_prune(W, H, NM(2, 4))  # check_finite, the 2:4 prox, the fused loss, the steps
        mask = NM(2, 4).mask(W)
        masked_gd(W * mask, W, H, mask, steps=3)
        masked_optimum(W * mask, W, H, mask, solver="cholesky")
        NM(2, 4).project(W), NM(2, 4).satisfied_fraction(W * mask)
        f = LayerLoss(W, H)
        proximal_gradient(f, R1(0.1), Schedule(0.5 / f.lipschitz()), x0=W,
                          max_iter=5, momentum="fista", progress=False)
        tail_prox(W, 2, 4, 1, 0.1)
        X = rng.standard_normal((30, 12)).astype(dtype)
        f = LeastSquares(X, X[:, 0] + 0.1)
        proximal_gradient(f, L1(0.1), Schedule(0.5 / f.lipschitz()), x0=np.zeros(12, dtype),
                          max_iter=5, momentum="fista", progress=False)
    is_symmetric(H.astype(np.float64)), symmetrize_in_place(A[:, :24].astype(np.float64))
    enum_alm_rows(rng.standard_normal((30, 6)), 0.3, 2, 1e-12, 1000)  # N:M, not 2:4
    enum_pgd_sorted(-np.sort(-np.abs(rng.standard_normal((30, 4))), axis=1), 0.3)


def test_serial_and_parallel_compilations_agree(monkeypatch):
    """Each kernel of sparseopt.threads.parallel_kernel, on the arguments a workload of the
    public API gave it: the parallel and the serial compilation leave the same bits in every
    array argument and return the same value (a float sum of a ``reassoc`` kernel: to
    rounding, each compilation vectorises its row loop its own way). Fails if a kernel's
    result depends on the number of threads (a float sum over prange, a race), or if the
    workload misses a kernel."""
    import copy
    import importlib
    import pkgutil

    import sparseopt
    from sparseopt.threads import PARALLEL_KERNELS

    for module in pkgutil.walk_packages(sparseopt.__path__, "sparseopt."):
        importlib.import_module(module.name)  # every kernel registered

    calls = {}
    for name, kernel in PARALLEL_KERNELS.items():
        for attr in ("serial", "parallel"):
            def record(*args, _run=getattr(kernel, attr), _name=name):
                calls.setdefault(_name, []).append(copy.deepcopy(args))
                return _run(*args)
            monkeypatch.setattr(kernel, attr, record)
    _workload(np.random.default_rng(0))
    monkeypatch.undo()
    missing = sorted(set(PARALLEL_KERNELS) - set(calls))
    assert not missing, f"the workload misses {missing}"
    for name, recorded in calls.items():
        kernel = PARALLEL_KERNELS[name]
        for args in recorded[:3]:
            a, b = copy.deepcopy(args), copy.deepcopy(args)
            got = kernel.parallel(*a), kernel.serial(*b)
            if isinstance(got[0], float):
                assert got[0] == pytest.approx(got[1], rel=1e-14, abs=0), name
            else:
                np.testing.assert_equal(got[0], got[1], err_msg=name)
            for x, y in zip(a, b):
                if isinstance(x, np.ndarray):
                    np.testing.assert_array_equal(x, y, err_msg=name)
