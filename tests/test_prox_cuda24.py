"""The 2:4 kernel on a GPU (``sparseopt.prox.cuda24``): one thread per group running the CPU
kernel's per-group code.

Three levels, so that most of it is checked without a GPU:
1. the per-group code (``alm._prox24_one``) run group by group on the CPU
   (``alm._run_groups_one_by_one``, the kernel's CPU twin) equals the chunked CPU kernel bit
   for bit;
2. the CUDA kernel itself, run by Numba's CUDA simulator (in a subprocess: the simulator is
   chosen when numba.cuda is first imported), equals it bit for bit too (the simulator calls
   the same compiled per-group code);
3. on a real GPU (skipped without one) it equals the CPU kernel up to rounding: NVVM fuses
   multiply-adds.
"""

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sparseopt.prox import alm


def _groups(dtype, seed, count=4000):
    """N(0, 1) groups with the hard cases: zeros, ties, negative zeros, signs, tiny."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((count, 4))
    Y[:20] = 0.0
    Y[20:40, :2] = 1.0  # ties at the top
    Y[40:200] = np.round(Y[40:200], 1)  # many ties
    Y[200:220, 3] = -0.0
    Y[220:240] = -np.abs(Y[220:240])
    Y[240:260] *= 1e-30
    Y[260:280] = np.array([1.0, 0.999999, 0.999998, 0.5])  # nearly tied candidates
    return Y.astype(dtype)


def _bits(a):
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lam", [0.02, 0.3, 2.0, 20.0])
@pytest.mark.parametrize("cuts", [True, False])
@pytest.mark.parametrize("screen", [True, False])
def test_group_by_group_equals_the_chunked_kernel(dtype, lam, cuts, screen):
    """Fails if the per-group code that the GPU runs drifts from the CPU kernel's chunks
    (another bracket, start, cut, route or store): any bit of any result differs, or a
    sweep count differs where neither screens (the CPU kernel screens a block only when
    enough of it is certified, so with the screen on, certified groups may report 0 sweeps
    on one side only)."""
    Y = _groups(dtype, seed=int(lam * 100))
    tol = alm.default_tol(np.dtype(dtype).name)
    w, sweeps, maxed = alm.enum_alm_rows(Y, lam, 2, tol, 10000, cuts=cuts, screen=screen)
    out = np.empty_like(Y)
    sw = np.zeros(len(Y), np.int64)
    mx = np.zeros(len(Y), np.bool_)
    bad = alm._run_groups_one_by_one(Y, lam, tol, 10000, out, sw, mx, cuts, screen)
    assert bad == 0
    np.testing.assert_array_equal(_bits(out), _bits(w))
    np.testing.assert_array_equal(mx, maxed)
    if not screen:
        np.testing.assert_array_equal(sw, sweeps)


def test_group_by_group_counts_nonfinite_groups_and_max_iter():
    Y = _groups(np.float64, seed=3, count=600)
    Y[5, 1] = np.nan
    Y[300, 3] = np.inf
    Y[301, 0] = -np.inf
    out = np.empty_like(Y)
    sw = np.zeros(len(Y), np.int64)
    mx = np.zeros(len(Y), np.bool_)
    assert alm._run_groups_one_by_one(Y, 0.3, 1e-12, 10000, out, sw, mx, True, True) == 3
    # max_iter = 1: the flags and clipped sweep counts equal the chunked kernel's
    Z = _groups(np.float64, seed=4, count=600)
    w, sweeps, maxed = alm.enum_alm_rows(Z, 0.3, 2, 1e-12, 1, screen=False)
    assert maxed.any()
    alm._run_groups_one_by_one(Z, 0.3, 1e-12, 1, out, sw, mx, True, False)
    np.testing.assert_array_equal(mx, maxed)
    np.testing.assert_array_equal(sw, sweeps)
    np.testing.assert_array_equal(out, w)


_SIMULATED = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    from sparseopt.prox import alm, cuda24

    assert cuda24.available()  # the simulator counts as a device
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        Y = rng.standard_normal((300, 4)).astype(dtype)
        Y[:10] = 0.0
        Y[10:20] = np.round(Y[10:20], 1)
        Y[20:23, 2] = np.nan
        Y[23, 0] = np.inf
        for lam, screen in ((0.3, False), (2.0, True)):
            tol = alm.default_tol(np.dtype(dtype).name)
            w, sweeps, maxed = alm.enum_alm_rows(Y, lam, 2, tol, 10000, screen=screen)
            out = cuda.device_array_like(Y)
            sw = cuda.device_array(300, np.int64)
            mx = cuda.device_array(300, np.bool_)
            bad = cuda24.prox24_cuda(cuda.to_device(Y), lam, tol, 10000, out, sw, mx,
                                     screen=screen)
            assert bad == 4, bad
            ok = np.isfinite(Y).all(axis=1)
            got = out.copy_to_host()
            assert got.dtype == dtype
            assert np.array_equal(got[ok], w[ok]), np.abs(got[ok] - w[ok]).max()
            if not screen:
                assert np.array_equal(sw.copy_to_host()[ok], sweeps[ok])
            assert np.array_equal(mx.copy_to_host()[ok], maxed[ok])
    # arguments are checked, naming the bad one
    Y = rng.standard_normal((8, 4))
    d = cuda.to_device(Y)
    sw, mx = cuda.device_array(8, np.int64), cuda.device_array(8, np.bool_)
    for args, name in (((Y, d, sw, mx), "y must be a CUDA array"),
                       ((cuda.to_device(Y[:, :3].copy()), d, sw, mx), "y must be a (G, 4)"),
                       ((d, cuda.device_array((8, 4), np.float32), sw, mx), "out must have"),
                       ((d, d, cuda.device_array(8, np.int32), mx), "sweeps must be"),
                       ((d, d, sw, cuda.device_array(7, np.bool_)), "maxed must be")):
        try:
            cuda24.prox24_cuda(args[0], 0.3, 1e-12, 100, *args[1:])
        except ValueError as e:
            assert name in str(e), (name, str(e))
        else:
            raise AssertionError(name + ": no error")
    for lam, tol, max_iter, name in ((-1.0, 1e-12, 100, "lam"), (float("nan"), 1e-12, 100, "lam"),
                                     (0.3, 0.0, 100, "tol"), (0.3, 1e-12, 0, "max_iter")):
        try:
            cuda24.prox24_cuda(d, lam, tol, max_iter, d, sw, mx)
        except ValueError as e:
            assert name in str(e), (name, str(e))
        else:
            raise AssertionError(name + ": no error")
    print("simulated kernel ok")
""")


@pytest.mark.skipif(importlib.util.find_spec("numba.cuda") is None,
                    reason="this Numba has no CUDA target (and numba-cuda is not installed)")
def test_cuda_kernel_on_the_simulator_equals_the_cpu_kernel():
    """The kernel's indexing, stores, NaN count and argument checks, run by Numba's CUDA
    simulator (no GPU needed). Fails if a thread writes another group's row, drops a
    result, miscounts NaN/Inf groups, or an argument check is missing."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    run = subprocess.run([sys.executable, "-c", _SIMULATED], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "simulated kernel ok" in run.stdout


def _real_gpu():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    from sparseopt.prox import cuda24

    return cuda24.available()


@pytest.mark.skipif(not _real_gpu(), reason="needs a CUDA GPU and numba-cuda")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cuda_kernel_on_a_gpu_agrees_with_the_cpu_kernel(dtype):
    """On a GPU: the same results as the CPU kernel up to rounding (fused multiply-adds).
    Fails if a result differs by more than rounding, in value or in the objective."""
    from numba import cuda

    from sparseopt.prox import cuda24
    from sparseopt.regularizers import prox_objective

    Y = _groups(dtype, seed=7, count=200_000)
    tol = alm.default_tol(np.dtype(dtype).name)
    for lam in (0.02, 0.3, 2.0):
        w, _, maxed = alm.enum_alm_rows(Y, lam, 2, tol, 10000)
        out = cuda.device_array_like(Y)
        sw = cuda.device_array(len(Y), np.int64)
        mx = cuda.device_array(len(Y), np.bool_)
        assert cuda24.prox24_cuda(cuda.to_device(Y), lam, tol, 10000, out, sw, mx) == 0
        got = out.copy_to_host()
        scale = np.abs(Y).max(axis=1, keepdims=True) + 1e-300
        close = np.all(np.abs(got - w) <= 1e-9 * scale if dtype == np.float64
                       else np.abs(got - w) <= 1e-5 * scale, axis=1)
        # a rounding-level tie between candidates may flip: then the objectives agree
        assert close.mean() >= 0.9999, (lam, close.mean())
        y64 = Y.astype(np.float64)
        f_gpu = prox_objective(got[~close], y64[~close], lam)
        f_cpu = prox_objective(w[~close], y64[~close], lam)
        np.testing.assert_allclose(f_gpu, f_cpu, rtol=1e-9 if dtype == np.float64 else 1e-5)
        np.testing.assert_array_equal(mx.copy_to_host(), maxed)


def test_available_is_false_with_a_warning_when_numba_cuda_cannot_compile(monkeypatch):
    """numba-cuda 0.30.4 imports with NumPy 2.5 but its compiler does not (np.row_stack is
    gone; seen on an H100 machine): then the kernel must count as unavailable, with the
    reason, so that prox24 takes its torch kernel instead of failing on every CUDA tensor.
    Fails if available() reports such an install as usable or stays silent."""
    from numba import cuda

    from sparseopt.prox import cuda24

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "numba.cuda.cudaimpl", None)  # its import fails
    cuda24.available.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="compiler does not import"):
            assert not cuda24.available()
    finally:
        cuda24.available.cache_clear()
