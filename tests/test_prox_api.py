"""prox_nm: shapes, dtypes, no in-place change, input validation, scale covariance."""

import importlib.util

import numpy as np
import pytest

from sparseopt.patterns import NM
from sparseopt.prox import prox_nm
from sparseopt.regularizers import prox_objective


@pytest.mark.parametrize("shape", [(8,), (3, 8), (2, 3, 4), (0, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_shape_dtype_and_no_inplace_change(shape, dtype, n):
    rng = np.random.default_rng(0)
    y = rng.standard_normal(shape).astype(dtype)
    y0 = y.copy()
    w = prox_nm(y, 0.4, n, 4)
    assert w.shape == y.shape and w.dtype == y.dtype
    assert w is not y
    np.testing.assert_array_equal(y, y0)
    # groups are independent: the batched call equals the call on each group
    if y.size:
        g = y.reshape(-1, 4)
        np.testing.assert_array_equal(w.reshape(-1, 4)[1], prox_nm(g[1], 0.4, n, 4))


def test_non_contiguous_input_and_lam_zero_and_large():
    rng = np.random.default_rng(1)
    y = rng.standard_normal((6, 8))[:, ::2]  # non-contiguous view, last axis 4
    np.testing.assert_array_equal(prox_nm(y, 0.0), y)  # lam = 0: identity
    big = prox_nm(y, 1e6)
    np.testing.assert_array_equal(big, NM(2, 4).project(y))  # lam -> inf: projection


def test_sparsity_grows_with_lam():
    rng = np.random.default_rng(2)
    y = rng.standard_normal((500, 4))
    nnz = [np.count_nonzero(prox_nm(y, lam)) for lam in [0.01, 0.1, 0.5, 2.0, 20.0]]
    assert all(a >= b for a, b in zip(nnz, nnz[1:]))
    assert nnz[-1] == 2 * 500


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(y=np.array([1.0, np.nan, 0.0, 1.0])), "y contains NaN"),
        (dict(y=np.array([1.0, np.inf, 0.0, 1.0])), "y contains NaN"),
        (dict(y=np.array([1, 2, 3, 4])), "y must have dtype"),
        (dict(y=np.ones(4, dtype=np.float16)), "y must have dtype"),
        (dict(y=np.ones(4, dtype=np.complex128)), "y must have dtype"),
        (dict(y=np.float64(1.0)), "at least one axis"),
        (dict(y=np.ones(6)), "divisible by m=4"),
        (dict(lam=-0.1), "lam must be finite and non-negative"),
        (dict(lam=np.nan), "lam must be finite"),
        (dict(lam=np.inf), "lam must be finite"),
        (dict(lam=np.ones(2)), "lam must be a real number"),
        (dict(n=4), "n must satisfy"),
        (dict(n=-1), "n must satisfy"),
        (dict(n=2.5), "n must be an integer"),
        (dict(m=0, n=0), "m must be >= 1"),
        (dict(tol=0.0), "tol must be finite and > 0"),
        (dict(tol=-1e-3), "tol must be finite and > 0"),
        (dict(max_iter=0), "max_iter must be >= 1"),
        (dict(method="newton"), "method must be one of"),
        (dict(method="pgd", n=2, m=8, y=np.ones(8)), "method='pgd' supports"),
        (dict(method="ipm", n=3, m=4), "method='ipm' supports"),
    ],
)
def test_bad_input_raises_naming_argument(kwargs, match):
    args = dict(y=np.ones(4), lam=0.5, n=2, m=4)
    args.update(kwargs)
    y, lam, n, m = args.pop("y"), args.pop("lam"), args.pop("n"), args.pop("m")
    with pytest.raises(ValueError, match=match):
        prox_nm(y, lam, n, m, **args)


@pytest.mark.parametrize("n,m", [(2, 4), (2, 3), (3, 4), (1, 4), (0, 4), (2, 8)])
def test_scale_covariance(n, m):
    """r_{N:M} is homogeneous of degree n + 1, so prox(c y, lam / c^(n-1)) = c prox(y, lam)."""
    rng = np.random.default_rng(3)
    y = rng.standard_normal((200, m))
    for lam in [0.1, 0.6]:
        w = prox_nm(y, lam, n, m)
        for c in [0.01, 3.0, 250.0]:
            wc = prox_nm(c * y, lam / c ** (n - 1), n, m)
            np.testing.assert_allclose(wc, c * w, rtol=1e-9, atol=1e-12 * c)


@pytest.mark.parametrize("n,m", [(2, 4), (3, 8)])
def test_extreme_scales_do_not_overflow(n, m):
    """Groups are normalized by their largest magnitude inside the kernel, so the cubic (or
    higher) products cannot overflow or underflow: covariance holds at 1e-150 and 1e150."""
    rng = np.random.default_rng(6)
    y = rng.standard_normal((300, m))
    w = prox_nm(y, 0.3, n, m)
    for c in [1e-150, 1e150]:
        wc = prox_nm(c * y, 0.3 / c ** (n - 1), n, m)
        assert np.all(np.isfinite(wc))
        np.testing.assert_allclose(wc / c, w, rtol=1e-9, atol=1e-12)


def test_float32_matches_float64_to_float32_precision():
    rng = np.random.default_rng(4)
    y = rng.standard_normal((2000, 4))
    w64 = prox_nm(y, 0.3)
    w32 = prox_nm(y.astype(np.float32), 0.3)
    y32 = y.astype(np.float32).astype(np.float64)
    f64 = prox_objective(w64, y, 0.3).ravel()
    f32 = prox_objective(w32.astype(np.float64), y32, 0.3).ravel()
    f64b = prox_objective(w64, y32, 0.3).ravel()
    assert np.all(f32 <= f64b + 1e-6)  # the float32 answer is optimal to float32 precision
    assert np.mean(np.abs(w32 - w64) < 1e-5) > 0.99
    assert f64.shape == f32.shape


@pytest.mark.parametrize("method", ["pgd", "ipm"])
def test_other_methods_dispatch_through_lemma3(method):
    if importlib.util.find_spec(f"sparseopt.prox.{method}") is None:
        pytest.skip(f"sparseopt.prox.{method} not available")
    rng = np.random.default_rng(5)
    y = rng.standard_normal((20, 4)).astype(np.float32)
    w = prox_nm(y, 0.3, method=method)
    assert w.shape == y.shape and w.dtype == y.dtype
    ref = prox_nm(y, 0.3)
    d = prox_objective(w, y, 0.3).ravel() - prox_objective(ref, y, 0.3).ravel()
    assert np.all(np.abs(d) <= 1e-5)
    assert np.all((w == 0) | (np.sign(w) == np.sign(y)))
    # n = 0 and n = 1 use the closed forms whatever the method
    np.testing.assert_array_equal(prox_nm(y, 0.3, 1, 4, method=method), prox_nm(y, 0.3, 1, 4))


def test_doc_example():
    w = prox_nm(np.array([3.0, -0.1, 2.0, 0.2]), 5.0)
    np.testing.assert_array_equal(w, [3.0, 0.0, 2.0, 0.0])


def _bits(a):
    return a.dtype, a.shape, a.tobytes()  # bitwise, signed zeros included


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, m, method, lam", [(2, 4, "alm", 0.7), (2, 4, "alm", 0.0),
                                               (3, 8, "alm", 0.4), (1, 4, "alm", 0.5),
                                               (0, 4, "alm", 0.3), (2, 4, "pgd", 0.7)])
def test_out_gives_the_fresh_result_bit_for_bit_also_in_place(dtype, n, m, method, lam):
    rng = np.random.default_rng(11)
    y = rng.standard_normal((33, 2 * m)).astype(dtype)
    y[rng.random(y.shape) < 0.1] = 0.0
    y[:, 1] = y[:, 0]  # ties
    fresh = prox_nm(y, lam, n, m, method=method)
    out = np.full_like(y, np.nan)
    assert prox_nm(y, lam, n, m, method=method, out=out) is out
    assert _bits(out) == _bits(fresh)
    inplace = y.copy()  # out=y: the kernels read a group before they write it
    assert prox_nm(inplace, lam, n, m, method=method, out=inplace) is inplace
    assert _bits(inplace) == _bits(fresh)


@pytest.mark.parametrize("out, match", [
    (np.empty((8, 8), dtype=np.float64), "out must have shape"),
    (np.empty((8, 12), dtype=np.float32), "out must have shape .* dtype float64"),
    (np.empty((8, 24))[:, ::2], "out must be a writeable C-contiguous"),
    ([[0.0] * 12] * 8, "out must be a NumPy array"),
])
def test_bad_out_raises_naming_it(out, match):
    with pytest.raises(ValueError, match=match):
        prox_nm(np.ones((8, 12)), 0.5, out=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["first", "last", "all"])
def test_nonfinite_raises_with_a_fresh_or_given_out(dtype, bad, where):
    """The 2:4 kernel tests y in its own pass when the result is fresh (the result is then
    dropped); with ``out`` given y is tested before anything is written, so an in-place call
    leaves y as it was. Groups with NaN or Inf run no candidate solve: an all-NaN input
    returns at once (a hang would time the suite out). 1037 groups: a short last chunk."""
    rng = np.random.default_rng(5)
    y = rng.standard_normal((1037, 4)).astype(dtype)
    if where == "all":
        y[:] = bad
    else:
        y[0 if where == "first" else -1, 2] = bad
    with pytest.raises(ValueError, match="y contains NaN or Inf"):
        prox_nm(y, 0.3)
    out = np.zeros_like(y)
    with pytest.raises(ValueError, match="y contains NaN or Inf"):
        prox_nm(y, 0.3, out=out)
    assert not out.any()  # nothing written
    before = y.copy()
    with pytest.raises(ValueError, match="y contains NaN or Inf"):
        prox_nm(y, 0.3, out=y)
    np.testing.assert_array_equal(y, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_2_4_kernel_counts_nonfinite_groups_exactly(dtype):
    """The count of the kernel's own check: groups with any NaN or +-Inf, none of the finite
    ones (the largest finite numbers included), none of the padding of a short last chunk."""
    from sparseopt.prox.alm import _enum_alm_groups24

    rng = np.random.default_rng(6)
    G = 3 * 256 + 77
    y = rng.standard_normal((G, 4)).astype(dtype)
    y[10] = np.finfo(dtype).max  # finite
    y[11, 0] = -np.finfo(dtype).max
    rows = rng.choice(G, 40, replace=False)
    for i, g in enumerate(rows):
        y[g, i % 4] = (np.nan, np.inf, -np.inf)[i % 3]
    # the short last chunk pads its 256 lanes with copies of its first group
    y[3 * 256, 3] = np.nan
    expected = len(set(rows.tolist()) | {3 * 256})
    out = np.empty_like(y)
    for screen in (True, False):  # with and without the 2-sparse certificate first
        count = _enum_alm_groups24(y, 0.3, 1e-12, 10000, out, np.zeros(G, np.int64),
                                   np.zeros(G, np.bool_), True, screen)
        assert count == expected
    finite = np.isfinite(y).all(axis=1)
    np.testing.assert_array_equal(out[finite], prox_nm(y[finite], 0.3))
