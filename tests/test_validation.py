"""The shared input checks (sparseopt.validation): the finite check without temporaries."""

import numpy as np
import pytest

from sparseopt.validation import check_finite

FINITE = [np.ones((3, 4)), np.full((5, 3), 1e308),  # the sum overflows: entries are tested
          np.array([1e308, 1e308]), np.array(2.0), np.zeros((0, 3)),
          np.arange(6).reshape(2, 3), np.array([[True, False]])]
NOT_FINITE = [np.array([1.0, np.nan]), np.array([[np.inf, -np.inf]]), np.array(np.nan),
              np.array([[1e308, 1e308], [np.nan, 0.0]]), np.array([[0.0, -np.inf]] * 3)]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_check_finite_accepts_finite_and_names_the_argument_otherwise(lib):
    conv = np.asarray if lib == "numpy" else pytest.importorskip("torch").from_numpy
    for x in FINITE:
        check_finite(conv(x), "H")
    for x in NOT_FINITE:
        with pytest.raises(ValueError, match="H contains NaN or Inf"):
            check_finite(conv(x), "H")
    for dtype in (np.float32, np.float64):  # overflow of the float32 sum, every row tested
        x = np.full((4, 3), np.finfo(dtype).max / 2, dtype=dtype)
        check_finite(conv(x), "H")
        x[3, 2] = np.nan
        with pytest.raises(ValueError, match="H contains NaN or Inf"):
            check_finite(conv(x), "H")


def test_check_finite_in_row_blocks(monkeypatch):
    """The entry test after an overflowing sum runs block by block and finds a NaN in any
    (on strided views: arrays in one block take the Numba pass instead)."""
    import sparseopt.backend as backend

    monkeypatch.setattr(backend, "ROW_BLOCK_ENTRIES", 6)
    x = np.full((7, 6), 1e308)[:, ::2]
    assert not (x.flags.c_contiguous or x.flags.f_contiguous)
    check_finite(x, "W")
    for row in range(7):
        y = np.full((7, 6), 1e308)
        y[row, 2] = np.inf
        with pytest.raises(ValueError, match="W contains NaN or Inf"):
            check_finite(y[:, ::2], "W")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_numba_count_agrees_with_isfinite(dtype, order):
    """The Numba pass of NumPy float arrays against its twin, np.isfinite: the largest
    finite values, the smallest, signed zeros; NaN, +Inf and -Inf anywhere."""
    from sparseopt.validation import _count_nonfinite

    rng = np.random.default_rng(3)
    x = np.asarray(rng.standard_normal((37, 53)), dtype=dtype, order=order)
    info = np.finfo(dtype)
    x[0, 0], x[1, 1], x[2, 2], x[3, 3] = info.max, -info.max, info.smallest_subnormal, -0.0
    assert _count_nonfinite(x.ravel(order="K")) == 0
    check_finite(x, "x")
    for v in [np.nan, np.inf, -np.inf] * 3:
        x[rng.integers(37), rng.integers(53)] = v
        assert _count_nonfinite(x.ravel(order="K")) == x.size - np.isfinite(x).sum()
        with pytest.raises(ValueError, match="x contains NaN or Inf"):
            check_finite(x, "x")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [0, 1, 63, 64, 65, 130])
def test_symmetry_pass_agrees_with_numpy(dtype, d):
    """sparseopt.linalg.is_symmetric (the tiled Numba pass of check_hessian) against its
    twin np.all(H == H.T), and the pass's maxima max|H|, max|H - H'| (LayerLoss's
    tolerance test) against NumPy and the blockwise twin: symmetric matrices with signed
    zeros and ties, then one entry changed by one ulp above, below or on the diagonal (NaN
    there too), also on Fortran ordered and strided views. Fails if a tile, the diagonal,
    a row of tiles or the mirror entry of a tile is skipped, or the difference is rounded
    in another dtype."""
    from sparseopt.linalg import _symmetry_pass, is_symmetric
    from sparseopt.objectives import _symmetry_maxima_xp

    rng = np.random.default_rng(d)
    A = np.asarray(rng.standard_normal((d, d)), dtype=dtype)
    H = np.round(A + A.T, 1)  # ties
    if d:
        H[0, -1] = H[-1, 0] = -0.0
        H[-1, 0] = 0.0  # +0 == -0
    cases = [H, np.asfortranarray(H), np.zeros((d, d), dtype)]
    for i, j in [(0, d - 1), (d - 1, 0), (d // 2, d // 3), (d - 1, d - 1)] if d else []:
        for value in (np.nextafter(H[i, j], dtype(np.inf)), np.nan):
            G = H.copy()
            G[i, j] = value
            cases += [G, np.asfortranarray(G)]
    if d > 1:  # the largest entry above the diagonal; a random (asymmetric) matrix
        G = H.copy()
        G[0, d - 1] = 1e3
        cases += [G, A]
    big = np.zeros((2 * d, 2 * d), dtype)
    big[::2, ::2] = H
    cases.append(big[::2, ::2])  # a strided view
    for G in cases:
        expected = bool(np.all(G == G.T))
        assert is_symmetric(G) is expected
        count, largest, asym = _symmetry_pass(G, True)
        assert int(_symmetry_pass(G, False)[0]) == int(count)
        assert int(count) == int(np.count_nonzero(np.tril(G != G.T)))
        if d and np.all(np.isfinite(G)):  # the maxima of _check_symmetric's tolerance test
            assert largest == float(np.max(np.abs(G)))
            assert asym == float(np.max(np.abs(G - G.T)))
            assert (largest, asym) == _symmetry_maxima_xp(G)
    assert is_symmetric(H)
    assert not is_symmetric(np.zeros((d, d + 1), dtype))
    for bad in (np.zeros(d + 1, dtype), [[1.0]]):
        with pytest.raises(ValueError, match="H must be a 2-D array"):
            is_symmetric(bad)


@pytest.mark.parametrize("d", [0, 1, 63, 64, 65, 130])
def test_symmetrize_in_place_equals_its_twin(d):
    """sparseopt.linalg.symmetrize_in_place (the tiled in-place Numba pass for float64) against its
    twin 0.5 * (A + A.T), bit for bit: asymmetric matrices in C and Fortran order and a
    strided view, float32 (the expression path) too, and a torch tensor; the result is
    the array passed in. Fails if a tile or a row of tiles is skipped or one entry of a
    mirrored pair is not written."""
    from sparseopt.linalg import symmetrize_in_place

    rng = np.random.default_rng(d + 1)
    A = rng.standard_normal((d, d)) * np.exp(rng.standard_normal((d, d)))

    def strided():
        big = np.full((2 * d, 2 * d), np.nan)
        big[::2, ::2] = A
        return big[::2, ::2]

    for make in (A.copy, lambda: np.asfortranarray(A), strided,
                 lambda: A.astype(np.float32)):
        M = make()
        expected = 0.5 * (M + M.T)
        assert symmetrize_in_place(M) is M and M.dtype == expected.dtype
        assert np.ascontiguousarray(M).tobytes() == np.ascontiguousarray(expected).tobytes()
    with pytest.raises(ValueError, match="A must be a square 2-D array"):
        symmetrize_in_place(np.zeros((d, d + 1)))
    with pytest.raises(ValueError, match="A must have dtype float32 or float64"):
        symmetrize_in_place(np.zeros((d, d), dtype=np.int64))
    torch = pytest.importorskip("torch")
    T = torch.from_numpy(A.copy())
    assert symmetrize_in_place(T) is T and torch.equal(T, torch.from_numpy(0.5 * (A + A.T)))
