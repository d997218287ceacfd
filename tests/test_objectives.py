import math

import numpy as np
import pytest

from sparseopt.objectives import LayerLoss, LeastSquares, Logistic, Quadratic, Smooth


def _fd_grad(f, w, h=1e-6):
    """Central finite differences of f.value (float64)."""
    g = np.zeros(w.shape)
    for idx in np.ndindex(w.shape):
        e = np.zeros(w.shape)
        e[idx] = h
        g[idx] = (f.value(w + e) - f.value(w - e)) / (2 * h)
    return g


def _fd_hess(f, w, h=1e-6):
    """Central finite differences of f.grad for a vector variable."""
    p = w.size
    Hm = np.zeros((p, p))
    for j in range(p):
        e = np.zeros(p)
        e[j] = h
        Hm[:, j] = (f.grad(w + e) - f.grad(w - e)) / (2 * h)
    return Hm


def _objectives(rng):
    A = rng.standard_normal((7, 7))
    H_sym = (A + A.T) / 2  # indefinite
    X = rng.standard_normal((15, 7))
    W_star = rng.standard_normal((3, 8))
    Xl = rng.standard_normal((8, 20))
    yl = (rng.random(15) > 0.5).astype(float)
    return {
        "quadratic": (Quadratic(H_sym, rng.standard_normal(7), c=1.5), (7,)),
        "least_squares": (LeastSquares(X, rng.standard_normal(15)), (7,)),
        "layer": (LayerLoss(W_star, Xl @ Xl.T / 20), (3, 8)),
        "logistic": (Logistic(X, yl, l2=0.3), (7,)),
    }


@pytest.mark.parametrize("name", ["quadratic", "least_squares", "layer", "logistic"])
def test_gradient_matches_finite_differences(name):
    rng = np.random.default_rng(1)
    f, shape = _objectives(rng)[name]
    assert f.shape == shape
    w = rng.standard_normal(shape)
    g = f.grad(w)
    assert g.shape == shape
    np.testing.assert_allclose(g, _fd_grad(f, w), rtol=1e-6, atol=1e-6)
    val, g2 = f.value_and_grad(w)
    assert val == pytest.approx(f.value(w), rel=1e-12)
    np.testing.assert_allclose(g2, g, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["quadratic", "least_squares", "logistic"])
def test_hessian_matches_finite_differences_of_gradient(name):
    rng = np.random.default_rng(2)
    f, shape = _objectives(rng)[name]
    w = rng.standard_normal(shape)
    np.testing.assert_allclose(f.hessian(w), _fd_hess(f, w), rtol=1e-6, atol=1e-6)


def test_layer_hessian_is_shared_row_hessian():
    rng = np.random.default_rng(3)
    f, shape = _objectives(rng)["layer"]
    W = rng.standard_normal(shape)
    for r in range(shape[0]):
        # finite differences of row r's gradient w.r.t. row r
        Hr = np.zeros((shape[1], shape[1]))
        for j in range(shape[1]):
            E = np.zeros(shape)
            E[r, j] = 1e-6
            Hr[:, j] = (f.grad(W + E)[r] - f.grad(W - E)[r]) / 2e-6
        np.testing.assert_allclose(f.hessian(W), Hr, rtol=1e-6, atol=1e-6)
    # cross-row blocks vanish: rows are independent
    E = np.zeros(shape)
    E[0, 0] = 1.0
    np.testing.assert_allclose((f.grad(W + E) - f.grad(W))[1:], 0.0, atol=1e-12)


def test_layer_loss_value_is_trace_formula_and_masked_grad():
    rng = np.random.default_rng(4)
    W_star = rng.standard_normal((4, 8))
    Xin = rng.standard_normal((8, 30))
    H = Xin @ Xin.T / 30
    f = LayerLoss(W_star, H)
    W = rng.standard_normal((4, 8))
    # prox24-kubler eq. 1 = eq. 2
    assert f.value(W) == pytest.approx(np.sum((W @ Xin - W_star @ Xin) ** 2) / 30, rel=1e-12)
    mask = rng.random((4, 8)) > 0.5
    mg = f.masked_grad(W, mask)
    np.testing.assert_array_equal(mg[~mask], 0.0)
    np.testing.assert_allclose(mg[mask], (2 * (W - W_star) @ H)[mask], rtol=1e-12)
    assert f.reference is W_star


@pytest.mark.parametrize("name", ["quadratic", "least_squares", "layer", "logistic"])
def test_lipschitz_vs_dense_eigvalsh(name):
    rng = np.random.default_rng(5)
    f, shape = _objectives(rng)[name]
    if name == "quadratic":
        expected = np.max(np.abs(np.linalg.eigvalsh(f.H)))
    elif name == "least_squares":
        expected = np.linalg.eigvalsh(f.X.T @ f.X)[-1]
    elif name == "layer":
        expected = 2 * np.linalg.eigvalsh(f.H)[-1]
    else:
        n = f.X.shape[0]
        expected = np.linalg.eigvalsh(f.X.T @ f.X)[-1] / (4 * n) + f.l2
        # the bound dominates the Hessian norm at random points, and is attained at w = 0
        # only up to the data; check it is a valid upper bound
        for _ in range(5):
            w = rng.standard_normal(shape)
            assert np.linalg.eigvalsh(f.hessian(w))[-1] <= expected * (1 + 1e-12)
    assert f.lipschitz() == pytest.approx(expected, rel=1e-10)
    assert f._lipschitz_cache == f.lipschitz()  # computed once, cached


def test_lipschitz_large_uses_lanczos_and_agrees():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((610, 630))  # min(n, p) > 600: Lanczos on v -> X X' v
    f = LeastSquares(X, np.zeros(610))
    expected = np.linalg.eigvalsh(X @ X.T)[-1]
    assert f.lipschitz() == pytest.approx(expected, rel=1e-8)
    A = rng.standard_normal((610, 610))
    q = Quadratic(A + A.T, np.zeros(610))
    assert q.lipschitz() == pytest.approx(np.max(np.abs(np.linalg.eigvalsh(A + A.T))), rel=1e-8)


def test_gradient_descent_step_one_over_L_decreases():
    # a 1/L step must never increase a function whose gradient is L-Lipschitz
    rng = np.random.default_rng(7)
    for name, (f, shape) in _objectives(rng).items():
        for _ in range(5):
            w = rng.standard_normal(shape) * 3
            w1 = w - f.grad(w) / f.lipschitz()
            assert f.value(w1) <= f.value(w) + 1e-12, name


def test_logistic_labels_pm1_equal_01_and_strong_convexity():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((20, 5))
    y01 = (rng.random(20) > 0.5).astype(float)
    f01 = Logistic(X, y01, l2=0.1)
    fpm = Logistic(X, 2 * y01 - 1, l2=0.1)
    w = rng.standard_normal(5)
    assert f01.value(w) == pytest.approx(fpm.value(w), rel=1e-14)
    # independent formula
    s = 2 * y01 - 1
    direct = np.mean(np.log1p(np.exp(-s * (X @ w)))) + 0.05 * w @ w
    assert f01.value(w) == pytest.approx(direct, rel=1e-12)
    assert np.linalg.eigvalsh(f01.hessian(w))[0] >= 0.1 - 1e-12
    # not quadratic: Hessian depends on w
    assert not np.allclose(f01.hessian(w), f01.hessian(2 * w))


def test_float32_data_keeps_float32_gradients():
    rng = np.random.default_rng(9)
    W_star = rng.standard_normal((2, 4)).astype(np.float32)
    A = rng.standard_normal((4, 6)).astype(np.float32)
    f = LayerLoss(W_star, A @ A.T)
    W = np.zeros((2, 4), dtype=np.float32)
    assert f.grad(W).dtype == np.float32
    assert isinstance(f.value(W), float)
    X = rng.standard_normal((5, 3)).astype(np.float32)
    assert LeastSquares(X, np.ones(5, np.float32)).grad(np.zeros(3, np.float32)).dtype == np.float32


def test_inputs_not_modified():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((6, 4))
    y = rng.standard_normal(6)
    Xc, yc = X.copy(), y.copy()
    f = LeastSquares(X, y)
    w = rng.standard_normal(4)
    wc = w.copy()
    f.value_and_grad(w)
    f.lipschitz()
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)
    np.testing.assert_array_equal(w, wc)


def test_minimize_on_support_matches_lstsq():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((12, 6))
    y = rng.standard_normal(12)
    mask = np.array([1, 0, 1, 1, 0, 0], bool)
    w = LeastSquares(X, y).minimize_on_support(mask)
    ref = np.linalg.lstsq(X[:, mask], y, rcond=None)[0]
    np.testing.assert_allclose(w[mask], ref, rtol=1e-10)
    assert np.all(w[~mask] == 0)
    wq = Quadratic(X.T @ X, X.T @ y).minimize_on_support(mask)
    np.testing.assert_allclose(wq, w, rtol=1e-8, atol=1e-10)
    # LayerLoss: row-wise, compare with the gradient vanishing on the mask
    W_star = rng.standard_normal((3, 6))
    f = LayerLoss(W_star, X.T @ X / 12)
    M = rng.random((3, 6)) > 0.4
    W = f.minimize_on_support(M)
    assert np.all(W[~M] == 0)
    np.testing.assert_allclose(f.grad(W)[M], 0.0, atol=1e-10)


def test_smooth_objective():
    A = np.diag([1.0, 4.0])
    f = Smooth(lambda w: 0.5 * w @ A @ w, lambda w: A @ w, lambda w: A, shape=(2,), lipschitz=4.0)
    w = np.array([1.0, -1.0])
    assert f.value(w) == 2.5
    np.testing.assert_allclose(f.grad(w), _fd_grad(f, w), atol=1e-6)
    assert f.lipschitz() == 4.0
    g = Smooth(lambda w: 0.0, lambda w: np.zeros(2), shape=(2,))
    with pytest.raises(ValueError, match="lipschitz"):
        g.lipschitz()
    with pytest.raises(ValueError, match="hess"):
        g.hessian(w)
    bad = Smooth(lambda w: 0.0, lambda w: np.zeros(3), shape=(2,), lipschitz=1.0)
    with pytest.raises(ValueError, match="grad returned shape"):
        bad.grad(w)


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: Quadratic(np.ones((2, 3)), np.ones(2)), "H must be a square"),
        (lambda: Quadratic(np.array([[1.0, 2.0], [0.0, 1.0]]), np.ones(2)), "H must be symmetric"),
        (lambda: Quadratic(np.eye(2), np.ones(3)), "b must have shape"),
        (lambda: Quadratic(np.eye(2), np.array([1.0, np.nan])), "b contains NaN"),
        (lambda: LeastSquares(np.ones(3), np.ones(3)), "X must be a 2-D"),
        (lambda: LeastSquares(np.ones((3, 2)), np.ones(2)), "y must have shape"),
        (lambda: LeastSquares(np.array([[np.inf, 1.0]]), np.ones(1)), "X contains NaN"),
        (lambda: LayerLoss(np.ones((2, 3)), np.eye(4)), "H must have shape"),
        (lambda: LayerLoss(np.ones((2, 2)), -np.eye(2)), "positive semidefinite"),
        (lambda: LayerLoss(np.ones(3), np.eye(3)), "W_star must be a 2-D"),
        (lambda: Logistic(np.ones((3, 2)), np.array([0.0, 1.0, 2.0]), 0.1), "labels"),
        (lambda: Logistic(np.ones((3, 2)), np.array([0.0, 1.0, 1.0]), -1.0), "l2"),
        (lambda: Smooth(1.0, lambda w: w, shape=(2,)), "fun must be callable"),
        (lambda: Smooth(lambda w: 0.0, lambda w: w, shape=(2,), lipschitz=-1.0), "lipschitz"),
    ],
)
def test_bad_input_raises_naming_argument(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_wrong_variable_shape_raises():
    f = LeastSquares(np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="w must have shape"):
        f.value(np.ones(3))
    g = LayerLoss(np.ones((2, 4)), np.eye(4))
    with pytest.raises(ValueError, match="W must have shape"):
        g.grad(np.ones((4, 2)))
    with pytest.raises(ValueError, match="mask must have shape"):
        g.masked_grad(np.ones((2, 4)), np.ones((2, 3), bool))


@pytest.mark.parametrize("name", ["quadratic", "least_squares", "layer", "logistic"])
def test_affine_gradient_flag_is_truthful(name):
    rng = np.random.default_rng(12)
    f, shape = _objectives(rng)[name]
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    a, b = 1.7, -0.4  # an affine combination a x + b y + (1 - a - b) z
    z = rng.standard_normal(shape)
    combo = f.grad(a * x + b * y + (1 - a - b) * z)
    lin = a * f.grad(x) + b * f.grad(y) + (1 - a - b) * f.grad(z)
    assert f.affine_gradient == (name != "logistic")
    assert np.allclose(combo, lin, rtol=1e-10, atol=1e-10) == f.affine_gradient


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float64, np.float64),
                                    (np.float32, np.float64)])
def test_layer_loss_fused_value_and_gradient_agree_with_the_twin(dtypes):
    """The Numba pass of LayerLoss.value_and_grad (value summed in float64, D H doubled in
    place) against its array-API twin, with zeros, ties and negative values: the gradient
    bitwise, the value to float64 rounding (another summation order)."""
    from sparseopt.objectives import _loss_and_gradient, _loss_and_gradient_xp

    rng = np.random.default_rng(13)
    d_type, h_type = dtypes
    D = rng.standard_normal((9, 16)).astype(d_type)
    D[rng.random(D.shape) < 0.2] = 0.0
    D[rng.random(D.shape) < 0.2] = -0.5  # ties
    D[0] = -0.0
    DH = (D @ rng.standard_normal((16, 16)).astype(h_type))
    DH[:, 3] = 0.0
    twin_value, twin_grad = _loss_and_gradient_xp(DH, D, np)
    terms = (DH.astype(np.float64) * D).ravel()
    fused = DH.copy()
    value = _loss_and_gradient(fused, D, fused)
    assert fused.dtype == DH.dtype and fused.tobytes() == twin_grad.tobytes()
    scale = float(np.sum(np.abs(terms)))
    assert abs(value - math.fsum(terms)) <= 1e-13 * scale
    assert value == pytest.approx(twin_value, rel=1e-12)
    # through the objective: value and gradient of the plain NumPy expressions
    W_star = rng.standard_normal((9, 16)).astype(d_type)
    A = rng.standard_normal((16, 40))
    f = LayerLoss(W_star, (A @ A.T / 40).astype(h_type))
    W = W_star + D
    val, g = f.value_and_grad(W)
    DH2 = (W - W_star) @ f.H
    assert g.dtype == f.dtype and g.tobytes() == (2 * DH2).astype(f.dtype).tobytes()
    assert val == pytest.approx(float(np.sum(DH2.astype(np.float64) * (W - W_star))),
                                rel=1e-12)


@pytest.mark.parametrize("w_dtype, h_dtype", [(np.float32, np.float32), (np.float64, np.float64),
                                              (np.float32, np.float64)])
def test_layer_loss_value_and_grad_into_out_is_the_same_bit_for_bit(w_dtype, h_dtype):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((48, 200))
    f = LayerLoss(rng.standard_normal((12, 48)).astype(w_dtype), (X @ X.T / 200).astype(h_dtype))
    assert f.grad_out
    W = rng.standard_normal((12, 48)).astype(f.dtype)
    val, g = f.value_and_grad(W)
    out = np.full_like(g, np.nan)
    for _ in range(2):  # the second call reuses the objective's work array for W - W*
        val_out, g_out = f.value_and_grad(W, out=out)
        assert g_out is out and val_out == val and g_out.tobytes() == g.tobytes()
    with pytest.raises(ValueError, match="out must have shape"):
        f.value_and_grad(W, out=np.empty((12, 47), dtype=f.dtype))
    other = np.float64 if f.dtype == np.float32 else np.float32
    with pytest.raises(ValueError, match="out needs a NumPy objective and W of its dtype"):
        f.value_and_grad(W.astype(other), out=out)


@pytest.mark.parametrize("w_dtype, ref_dtype", [(np.float32, np.float32),
                                                (np.float64, np.float64),
                                                (np.float64, np.float32)])
def test_difference_kernel_is_numpy_subtract_bit_for_bit(w_dtype, ref_dtype):
    """objectives._difference_rows (W - W* on the Numba threads) against its twin
    np.subtract: signed zeros, infinities, NaN, subnormals, ties (equal entries) and a
    float32 W* under a float64 W (the LayerLoss of float32 weights and a float64 H)."""
    from sparseopt.objectives import _difference_rows

    rng = np.random.default_rng(5)
    W = rng.standard_normal((37, 24)).astype(w_dtype)
    R = rng.standard_normal((37, 24)).astype(ref_dtype)
    tiny = np.finfo(ref_dtype).smallest_subnormal
    special = [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (np.inf, 1.0),
               (1.0, np.inf), (np.inf, np.inf), (np.nan, 2.0), (3.0, 3.0), (tiny, -tiny),
               (2 * tiny, tiny)]
    for j, (a, b) in enumerate(special):
        W[j, j], R[j, j] = a, b
    out = np.full(W.shape, 7.0, dtype=w_dtype)
    with np.errstate(invalid="ignore"):
        _difference_rows(W, R, out)
        expected = np.subtract(W, R)
    assert out.dtype == expected.dtype == w_dtype
    assert out.tobytes() == expected.tobytes()
    # the objective's work array, from C- and Fortran-ordered W
    X = rng.standard_normal((24, 60))
    R_finite = np.where(np.isfinite(R[:, :24]), R[:, :24], 1.5).astype(ref_dtype)  # W* is
    f = LayerLoss(R_finite, (X @ X.T / 60).astype(w_dtype))  # checked finite, W is not
    for Wv in (W[:, :24].copy(), np.asfortranarray(W[:, :24])):
        with np.errstate(invalid="ignore"):
            D = f._difference_into_work(Wv, np.empty(f.shape, dtype=f.dtype))
            assert D.tobytes() == np.subtract(Wv, f.W_star).tobytes()


def test_layer_loss_out_needs_numpy():
    torch = pytest.importorskip("torch")
    f = LayerLoss(torch.ones(2, 4), torch.eye(4))
    assert not f.grad_out
    with pytest.raises(ValueError, match="out needs a NumPy objective"):
        f.value_and_grad(torch.zeros(2, 4), out=np.empty((2, 4), dtype=np.float32))


def test_symmetry_check_sees_every_block_of_rows():
    """The check runs over blocks of rows (no d x d temporaries): an asymmetric pair in the
    last block still raises, rounding-level asymmetry anywhere does not."""
    from sparseopt.backend import row_blocks
    from sparseopt.objectives import _check_symmetric

    d = 1100
    assert len(row_blocks(d, d)) > 1
    rng = np.random.default_rng(0)
    A = rng.standard_normal((d, d))
    H = A + A.T
    H[3, d - 2] += 1e-13  # within 10 d eps max|H|
    _check_symmetric(H, "H")
    H[d - 1, 0] += 1e-3
    with pytest.raises(ValueError, match="H must be symmetric"):
        _check_symmetric(H, "H")
