import itertools

import numpy as np
import pytest

from sparseopt import NM, TopK
from sparseopt.objectives import LayerLoss, LeastSquares, Logistic, Quadratic, Smooth
from sparseopt.solvers import iht, maiht

from _reference import best_subset, correlated


def well_conditioned(seed, n=60, p=12, k=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) / np.sqrt(n)  # near-isometry on sparse vectors
    b = np.zeros(p)
    S = rng.choice(p, k, replace=False)
    b[S] = rng.choice([-1, 1], k) * rng.uniform(1.0, 2.0, k)
    return X, X @ b + 0.01 * rng.standard_normal(n)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("refit", [False, True])
def test_well_conditioned_least_squares_finds_exact_best_subset(seed, refit):
    X, y = well_conditioned(seed)
    val, S = best_subset(X, y, 3)
    res = iht(LeastSquares(X, y), pattern=TopK(3), max_iter=5000, tol=1e-10, refit=refit)
    assert tuple(np.flatnonzero(res.x)) == S
    assert LeastSquares(X, y).value(res.x) == pytest.approx(val, rel=1e-8)
    assert res.stop_reason == "residual <= tol"


@pytest.mark.parametrize("seed", range(4))
def test_hard_case_returns_step_fixed_point_no_better_than_best_subset(seed):
    X, y = correlated(seed)
    f = LeastSquares(X, y)
    opt, _ = best_subset(X, y, 4)
    res = iht(f, pattern=TopK(4), max_iter=20000, tol=1e-9)
    step = res.info["step"]
    assert step == pytest.approx(1 / np.linalg.eigvalsh(X.T @ X)[-1])
    # Def. 3.1 (constrained form): x = P_k(x - step grad f(x))
    x = res.x
    np.testing.assert_allclose(TopK(4).project(x - step * f.grad(x)), x, atol=1e-7)
    assert f.value(x) >= opt * (1 - 1e-10)
    # on its own support the point is optimal (grad vanishes there)
    np.testing.assert_allclose(f.grad(x)[x != 0], 0.0, atol=1e-6)


def test_l0_threshold_is_sqrt_2_step_lam():
    # f = 0.5||w||^2 - b'w: from x0 = 0 one step gives v = step * b, then H_{sqrt(2 step lam)}
    b = np.array([1.5, 0.999, -1.001, -0.5, 1.0, 3.0, -2.1, 0.0])
    f = Quadratic(np.eye(8), b)
    for step, lam in [(1.0, 0.5), (0.5, 0.9), (0.25, 2.0)]:
        res = iht(f, lam=lam, step=step, max_iter=1, tol=0.0)
        v = step * b
        # brute force of the scalar prox argmin_z 0.5 (z - v)^2 + step lam [z != 0]
        keep = 0.5 * v**2 > step * lam
        np.testing.assert_array_equal(res.x, np.where(keep, v, 0.0))
        assert res.history["lam"][1] == lam
    # exactly at the threshold |v| = sqrt(2 step lam) the entry is dropped (H keeps |v| > t)
    res = iht(Quadratic(np.eye(1), np.array([1.0])), lam=0.5, step=1.0, max_iter=1, tol=0.0)
    assert res.x[0] == 0.0


@pytest.mark.parametrize(
    "kw",
    [dict(pattern=TopK(3)), dict(pattern=NM(2, 4)), dict(lam=0.05), dict(pattern=NM(1, 4))],
)
def test_monotone_descent_every_iteration(kw):
    X, y = correlated(7, n=30, p=16)
    res = iht(LeastSquares(X, y), max_iter=300, tol=0.0, **kw)
    F = res.history["objective"]
    start = 0 if "lam" in kw else 1  # x0 = 0 is feasible, but check from the first projected point
    assert np.all(np.diff(F[start:]) <= 1e-12 * np.abs(F[start:-1]) + 1e-14)
    assert len(F) == res.nit + 1


def test_monotone_descent_logistic_and_matrix_layer_loss():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 12))
    yl = (X[:, 0] - X[:, 3] + 0.3 * rng.standard_normal(40) > 0).astype(float)
    r = iht(Logistic(X, yl, l2=0.01), pattern=TopK(2), max_iter=200, tol=0.0)
    assert np.all(np.diff(r.history["objective"][1:]) <= 1e-13)
    A = rng.standard_normal((8, 40))
    f = LayerLoss(rng.standard_normal((5, 8)), A @ A.T / 40)
    r = iht(f, pattern=NM(2, 4), max_iter=200, tol=0.0)
    assert np.all(np.diff(r.history["objective"][1:]) <= 1e-12)
    assert NM(2, 4).satisfied(r.x) and r.x.shape == (5, 8)


def test_nm_and_rowwise_topk_output_satisfy_pattern():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((16, 64))
    W_star = rng.standard_normal((6, 16))
    f = LayerLoss(W_star, A @ A.T / 64)
    for pattern in (NM(2, 4), NM(1, 4), NM(4, 8), TopK(5)):
        r = iht(f, pattern=pattern, max_iter=100)
        assert pattern.satisfied(r.x)
        assert r.x.shape == W_star.shape
        # never worse than projecting W* (the first iterate, Remark 2.2)
        assert f.value(r.x) <= f.value(pattern.project(W_star)) + 1e-12


def test_nm_result_matches_enumeration_for_one_group_per_row():
    # one 4-group per row, a diagonal-dominant H and well-separated magnitudes in W*: IHT must
    # reach the best 2:4 mask of each row, found by enumerating all C(4, 2) masks and solving
    # each restricted problem
    rng = np.random.default_rng(5)
    A = rng.standard_normal((4, 4))
    H = np.eye(4) + 0.05 * (A + A.T)
    W_star = np.array([rng.permutation([3.0, 2.0, 0.5, 0.2]) for _ in range(8)])
    W_star *= rng.choice([-1.0, 1.0], W_star.shape)
    f = LayerLoss(W_star, H)
    r = iht(f, pattern=NM(2, 4), max_iter=5000, tol=1e-12)
    for i in range(8):
        best = np.inf
        for S in itertools.combinations(range(4), 2):
            M = np.zeros((8, 4), bool)
            M[i, list(S)] = True
            Wm = f.minimize_on_support(M)
            d = Wm[i] - W_star[i]
            best = min(best, d @ H @ d)
        d = r.x[i] - W_star[i]
        assert d @ H @ d == pytest.approx(best, rel=1e-8)


def test_deterministic_and_inputs_untouched():
    X, y = correlated(2)
    x0 = np.ones(12)
    x0c = x0.copy()
    Xc = X.copy()
    a = iht(LeastSquares(X, y), pattern=TopK(3), x0=x0, max_iter=50)
    b = iht(LeastSquares(X, y), pattern=TopK(3), x0=x0, max_iter=50)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.history["objective"], b.history["objective"])
    np.testing.assert_array_equal(x0, x0c)
    np.testing.assert_array_equal(X, Xc)


def test_history_fields_and_float32():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((8, 30)).astype(np.float32)
    W = rng.standard_normal((3, 8)).astype(np.float32)
    r = iht(LayerLoss(W, A @ A.T / 30), pattern=NM(2, 4), max_iter=20, tol=0.0)
    assert r.x.dtype == np.float32
    h = r.history
    for key in ("objective", "loss", "support", "lam", "step", "residual", "time"):
        assert len(h[key]) == r.nit + 1
    assert np.all(np.isnan(h["lam"]))
    assert np.all(np.diff(h["time"]) >= 0)
    assert h["support"][-1] == 12


def test_adaptive_lambda_init_update_rule_and_target():
    rng = np.random.default_rng(8)
    A = rng.standard_normal((12, 60))
    H = A @ A.T / 60
    W_star = rng.standard_normal((4, 12))
    f = LayerLoss(W_star, H)
    s = 20
    r = iht(f, target_nnz=s, max_iter=300, refine_steps=10)
    step = 1 / (2 * np.linalg.eigvalsh(H)[-1])
    lam0 = np.quantile(np.abs(W_star), 0.01) ** 2 / (2 * step)  # Sec. 2.4 quantile rule
    h = r.history
    k_main = r.info["refine_start"]
    # lam^{k+1} = lam^k (1 + (||W^k||_0 - s) / (d1 d2)), starting from lam_init
    lam = lam0
    for k in range(1, k_main + 1):
        lam = lam * (1 + (h["support"][k - 1] - s) / W_star.size)
        assert h["lam"][k] == pytest.approx(lam, rel=1e-12)
    assert np.count_nonzero(r.x) == s
    # refinement keeps the support fixed and does not increase f
    assert np.all(np.diff(h["objective"][k_main + 1 :]) <= 1e-12)
    assert np.all(h["support"][k_main + 1 :] <= s)


def test_refinement_converges_to_least_squares_on_support():
    X, y = correlated(3, n=30)
    f = LeastSquares(X, y)
    r = iht(f, pattern=TopK(4), max_iter=3, refine_steps=3000, tol=0.0)
    supp = r.x != 0
    np.testing.assert_allclose(r.x[supp], np.linalg.lstsq(X[:, supp], y, rcond=None)[0], rtol=1e-6)
    assert r.info["refine_start"] == 3 and r.nit == 3003


def test_remark_2_2_first_step_from_w_hat_is_magnitude_pruning():
    rng = np.random.default_rng(9)
    A = rng.standard_normal((8, 30))
    W_star = rng.standard_normal((4, 8))
    f = LayerLoss(W_star, A @ A.T / 30)
    lam = 0.3
    r = iht(f, lam=lam, max_iter=1, tol=0.0)
    t = np.sqrt(2 * r.info["step"] * lam)
    np.testing.assert_array_equal(r.x, np.where(np.abs(W_star) > t, W_star, 0.0))
    r = iht(f, pattern=NM(2, 4), max_iter=1, tol=0.0)
    np.testing.assert_array_equal(r.x, NM(2, 4).project(W_star))


def test_max_iter_zero_still_returns_a_feasible_point():
    rng = np.random.default_rng(12)
    A = rng.standard_normal((8, 30))
    f = LayerLoss(rng.standard_normal((3, 8)), A @ A.T / 30)
    for solver in (iht, maiht):
        r = solver(f, pattern=NM(2, 4), max_iter=0, refine_steps=5)
        assert NM(2, 4).satisfied(r.x) and r.nit == 5
        r = solver(f, target_nnz=6, max_iter=0)
        assert np.count_nonzero(r.x) == 6


def test_k_zero_and_k_equal_p():
    X, y = well_conditioned(0)
    f = LeastSquares(X, y)
    assert np.all(iht(f, pattern=TopK(0), max_iter=10).x == 0)
    r = iht(f, pattern=TopK(12), max_iter=20000, tol=1e-10)
    np.testing.assert_allclose(r.x, np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-6)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(pattern=TopK(2), lam=1.0), "not both"),
        (dict(), "one of pattern, lam or target_nnz"),
        (dict(pattern=TopK(13)), "k larger than"),
        (dict(pattern=NM(2, 5)), "divisible"),
        (dict(pattern=2), "pattern must be"),
        (dict(lam=-1.0), "lam must be"),
        (dict(lam=float("nan")), "lam must be"),
        (dict(pattern=TopK(2), step=0.0), "step must be"),
        (dict(pattern=TopK(2), step=-1.0), "step must be"),
        (dict(pattern=TopK(2), x0=np.ones(11)), "x0 must have shape"),
        (dict(pattern=TopK(2), x0=np.full(12, np.inf)), "x0 contains NaN"),
        (dict(target_nnz=13), "target_nnz must be"),
        (dict(target_nnz=-1), "target_nnz must be"),
        (dict(target_nnz=2, pattern=TopK(2)), "target_nnz"),
        (dict(pattern=TopK(2), max_iter=-1), "max_iter"),
        (dict(pattern=TopK(2), tol=-1.0), "tol"),
        (dict(pattern=TopK(2), refine_steps=-2), "refine_steps"),
    ],
)
def test_bad_input(kw, match):
    X, y = well_conditioned(0)
    with pytest.raises(ValueError, match=match):
        iht(LeastSquares(X, y), **kw)


def test_bad_input_k_negative_and_objective_needs():
    with pytest.raises(ValueError, match="k must be"):
        TopK(-1)
    g = Smooth(lambda w: float(w @ w), lambda w: 2 * w, shape=(3,))
    with pytest.raises(ValueError, match="lipschitz"):
        iht(g, pattern=TopK(1))
    r = iht(g, pattern=TopK(1), step=0.25, x0=np.array([1.0, 2.0, 3.0]))  # explicit step works
    np.testing.assert_allclose(r.x, 0.0, atol=1e-8)
    assert np.count_nonzero(r.x) <= 1
    X = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(ValueError, match="refit"):
        iht(Logistic(X, (X[:, 0] > 0).astype(float), 0.1), pattern=TopK(1), refit=True)
    with pytest.raises(ValueError, match="objective must have"):
        iht(object(), pattern=TopK(1))
