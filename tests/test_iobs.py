"""I-OBS family (iobs-wu): Top-k I-OBS (eq. 12), exact I-OBS (Alg. 1 option 2, Lemma 2),
stochastic I-OBS (App. B.1, Lemma 4); checked against brute force and independent formulas."""

import itertools

import numpy as np
import pytest

from sparseopt import NM, TopK
from sparseopt.objectives import LayerLoss, LeastSquares, Logistic, Quadratic, Smooth
from sparseopt.solvers import (
    SampledGradient,
    iobs,
    iobs_step,
    sampled_gradient,
    stochastic_iobs,
    topk_iobs,
)
from sparseopt.solvers.iobs import _lemma4_step

from _reference import best_subset


def spd(rng, d, ridge=0.1):
    A = rng.standard_normal((2 * d, d))
    return A.T @ A / d + ridge * np.eye(d)


def sparse_vec(rng, d, k):
    x = np.zeros(d)
    x[rng.choice(d, k, replace=False)] = rng.standard_normal(k) + np.sign(rng.standard_normal(k))
    return x


def model_bruteforce(theta, g, H, k):
    """argmin over ||w||_0 <= k of <g, w - theta> + 0.5 (w - theta)'H(w - theta) (iobs-wu eq. 8),
    by solving the model's KKT system on every support of size k."""
    d = len(theta)
    best, best_w = np.inf, None
    for Q in itertools.combinations(range(d), k):
        Q = list(Q)
        w = np.zeros(d)
        # stationarity on Q: (g + H(w - theta))_Q = 0 with w = 0 off Q
        w[Q] = np.linalg.solve(H[np.ix_(Q, Q)], (H @ theta - g)[Q])
        val = g @ (w - theta) + 0.5 * (w - theta) @ H @ (w - theta)
        if val < best:
            best, best_w = val, w
    return best_w, best


# ----------------------------------------------------------------------------- exact I-OBS step


@pytest.mark.parametrize("d,k", [(6, 2), (8, 4), (9, 7)])
def test_iobs_step_solves_sparse_newton_model(d, k):
    """Lemma 2: the Alg. 1 option 2 step minimizes the model (8) over k-sparse points."""
    rng = np.random.default_rng(d + 10 * k)
    for _ in range(3):
        H = spd(rng, d)
        theta, g = rng.standard_normal(d), rng.standard_normal(d)
        w_bf, val_bf = model_bruteforce(theta, g, H, k)
        for solver in ("enumerate", "bnb"):
            w, info = iobs_step(theta, g, H, k, mask_solver=solver, return_info=True)
            assert info["solver"] == solver
            val = g @ (w - theta) + 0.5 * (w - theta) @ H @ (w - theta)
            np.testing.assert_allclose(val, val_bf, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(w, w_bf, rtol=1e-7, atol=1e-9)
            assert np.count_nonzero(w) <= k


def test_woodfisher_special_case():
    """Sec. 3.4: zero gradient and k = d - 1 is WoodFisher: prune q = argmin theta_q^2/[H^-1]_qq
    and move by -theta_q H^{-1} e_q / [H^{-1}]_qq."""
    rng = np.random.default_rng(7)
    for d in (5, 12, 30):
        H = spd(rng, d)
        theta = rng.standard_normal(d)
        Hinv = np.linalg.inv(H)
        q = int(np.argmin(theta**2 / np.diag(Hinv)))
        expected = theta - theta[q] / Hinv[q, q] * Hinv[:, q]
        w, info = iobs_step(theta, np.zeros(d), H, d - 1, return_info=True)
        assert not info["mask"][q] and info["mask"].sum() == d - 1
        np.testing.assert_allclose(w, expected, rtol=1e-9, atol=1e-12)
        assert w[q] == 0
        np.testing.assert_allclose(info["value"], theta[q] ** 2 / Hinv[q, q], rtol=1e-9)


def obc_reference(w0, H, k):
    """OBC (Frantar & Alistarh 2022, Alg. 1) with explicit inverse-Hessian downdates."""
    w = w0.astype(float).copy()
    Hinv = np.linalg.inv(H)
    alive = np.ones(len(w), dtype=bool)
    while alive.sum() > k:
        idx = np.flatnonzero(alive)
        q = idx[np.argmin(w[idx] ** 2 / np.diag(Hinv)[idx])]
        w = w - w[q] / Hinv[q, q] * Hinv[:, q]
        w[q] = 0.0
        Hinv = Hinv - np.outer(Hinv[:, q], Hinv[q, :]) / Hinv[q, q]
        alive[q] = False
    return w, alive


def test_greedy_iobs_is_obc_on_a_quadratic():
    """Sec. 3.4: OBC = d - k rounds of I-OBS pruning one weight each, on f = ||X(theta - theta0)||^2
    restricted to the weights still alive."""
    rng = np.random.default_rng(8)
    d, k = 14, 5
    X = rng.standard_normal((40, d))
    theta0 = rng.standard_normal(d)
    f = LayerLoss(theta0[None, :], X.T @ X / 40)  # Tr((w - theta0) H (w - theta0)')
    H = f.hessian()
    theta = theta0.copy()
    alive = np.ones(d, dtype=bool)
    while alive.sum() > k:
        F = np.flatnonzero(alive)
        g = f.grad(theta[None, :])[0]
        step = iobs_step(theta[F], g[F], H[np.ix_(F, F)], len(F) - 1)
        theta = np.zeros(d)
        theta[F] = step
        alive = theta != 0
    w_obc, alive_obc = obc_reference(theta0, H, k)
    np.testing.assert_array_equal(alive, alive_obc)
    np.testing.assert_allclose(theta, w_obc, rtol=1e-8, atol=1e-10)
    # and OBC's weights are the optimal weights for its mask
    np.testing.assert_allclose(theta, f.minimize_on_support(alive[None, :])[0], rtol=1e-8, atol=1e-10)


def test_iobs_one_step_optimal_on_quadratic():
    """On a quadratic the model (8) is f itself, so one exact step is the best k-sparse point."""
    rng = np.random.default_rng(9)
    d, k = 10, 4
    H = spd(rng, d)
    b = rng.standard_normal(d)
    f = Quadratic(H, b)
    best = min(
        (f.value(f.minimize_on_support(np.isin(np.arange(d), Q))), Q)
        for Q in itertools.combinations(range(d), k)
    )
    r = iobs(f, k, x0=rng.standard_normal(d))
    assert r.stop_reason == "residual <= tol" and r.nit == 2
    np.testing.assert_allclose(r.history["objective"][1], best[0], rtol=1e-10)
    assert set(np.flatnonzero(r.x)) == set(best[1])
    assert r.info["mask_solver"] == ["enumerate", "enumerate"]
    assert np.all(r.history["nodes"][1:] == 210)
    r_bnb = iobs(f, k, mask_solver="bnb")
    np.testing.assert_allclose(r_bnb.x, r.x, rtol=1e-8, atol=1e-10)
    # never worse than Top-k I-OBS (magnitude mask of the Newton point)
    assert r.history["objective"][-1] <= topk_iobs(f, pattern=TopK(k)).history["objective"][-1] + 1e-12


def test_iobs_step_dtype_and_no_mutation():
    rng = np.random.default_rng(10)
    H = spd(rng, 6)
    theta, g = rng.standard_normal(6), rng.standard_normal(6)
    copies = theta.copy(), g.copy(), H.copy()
    w32 = iobs_step(theta.astype(np.float32), g.astype(np.float32), H.astype(np.float32), 3)
    assert w32.dtype == np.float32
    w64 = iobs_step(theta, g, H, 3)
    assert w64.dtype == np.float64
    np.testing.assert_allclose(w32, w64, rtol=1e-4, atol=1e-4)
    for a, c in zip((theta, g, H), copies):
        np.testing.assert_array_equal(a, c)
    assert iobs_step(np.arange(4), np.zeros(4), np.eye(4), 2).dtype == np.float64


# ----------------------------------------------------------------------------- Top-k I-OBS


def test_topk_iobs_recovers_sparse_optimum_of_quadratic():
    rng = np.random.default_rng(11)
    d, kstar = 40, 5
    H = spd(rng, d)
    theta_star = sparse_vec(rng, d, kstar)
    f = Quadratic(H, H @ theta_star)
    for k in (kstar, 2 * kstar):
        r = topk_iobs(f, pattern=TopK(k), x0=rng.standard_normal(d))
        assert r.converged and r.nit <= 3
        np.testing.assert_allclose(r.x, theta_star, atol=1e-10)
        # T_k may keep round-off sized entries (~1e-16) when k > k*
        assert np.count_nonzero(np.abs(r.x) > 1e-12) == kstar
    # least squares with n > p: same in one Newton step; float32 data stays float32
    X = rng.standard_normal((80, d))
    f32 = LeastSquares(X.astype(np.float32), (X @ theta_star).astype(np.float32))
    r32 = topk_iobs(f32, pattern=TopK(2 * kstar), max_iter=5)
    assert r32.x.dtype == np.float32
    np.testing.assert_allclose(r32.x, theta_star, atol=1e-3)


def test_topk_iobs_one_step_formula_matrix_nm():
    """For LayerLoss the Newton step is row-wise with the shared Hessian 2H, then N:M projection."""
    rng = np.random.default_rng(12)
    d_out, d_in = 3, 8
    Xin = rng.standard_normal((d_in, 50))
    Hin = Xin @ Xin.T / 50
    W_star = rng.standard_normal((d_out, d_in))
    f = LayerLoss(W_star, Hin)
    W0 = rng.standard_normal((d_out, d_in))
    r = topk_iobs(f, pattern=NM(2, 4), x0=W0, max_iter=1)
    expected = NM(2, 4).project(W0 - f.grad(W0) @ np.linalg.inv(2 * Hin))
    np.testing.assert_allclose(r.x, expected, rtol=1e-9, atol=1e-12)
    # a 2:4-sparse W* is recovered exactly
    Ws = NM(2, 4).project(W_star)
    r2 = topk_iobs(LayerLoss(Ws, Hin), pattern=NM(2, 4), x0=W0)
    np.testing.assert_allclose(r2.x, Ws, atol=1e-10)
    assert NM(2, 4).satisfied(r2.x)


def tilted_logistic(rng, n, d, kstar, l2=1e-2):
    """Logistic loss minus <grad at theta*, .>: convex, non-quadratic, minimizer exactly theta*."""
    X = rng.standard_normal((n, d))
    theta_star = sparse_vec(rng, d, kstar)
    y = (X @ theta_star + 0.5 * rng.standard_normal(n) > 0).astype(float)
    base = Logistic(X, y, l2)
    g_star = base.grad(theta_star)
    f = Smooth(
        lambda w: base.value(w) - g_star @ w,
        lambda w: base.grad(w) - g_star,
        base.hessian,
        shape=(d,),
    )
    return f, theta_star


def test_topk_and_exact_iobs_quadratic_local_rate_on_logistic():
    """Lemma 3 / Thm 1: ||e_{t+1}|| <= C ||e_t||^2 near a sparse minimizer of a non-quadratic f."""
    rng = np.random.default_rng(13)
    f, theta_star = tilted_logistic(rng, 200, 12, 3)
    x0 = theta_star + 0.1 * rng.standard_normal(12)
    steps = {
        "topk": lambda x: topk_iobs(f, pattern=TopK(5), x0=x, max_iter=1).x,
        "exact": lambda x: iobs(f, 5, x0=x, max_iter=1).x,
    }
    for name, step in steps.items():
        errs, x = [], x0
        for _ in range(5):
            errs.append(np.linalg.norm(x - theta_star))
            x = step(x)
        ratios = [errs[t + 1] / errs[t] ** 2 for t in range(4) if errs[t + 1] > 1e-13]
        assert len(ratios) >= 2, name
        assert max(ratios) < 10.0, (name, ratios)
        assert errs[4] < 1e-12, (name, errs)


def test_topk_iobs_singular_hessian_needs_damping():
    rng = np.random.default_rng(14)
    n, d = 20, 40  # p > n: X'X singular
    X = rng.standard_normal((n, d))
    theta_star = sparse_vec(rng, d, 3)
    f = LeastSquares(X, X @ theta_star)
    with pytest.raises(ValueError, match="singular.*damping.*restricted"):
        topk_iobs(f, pattern=TopK(3))
    with pytest.raises(ValueError, match="singular"):
        topk_iobs(f, pattern=TopK(3), damping=0.0)
    r = topk_iobs(f, pattern=TopK(3), damping=1e-3, max_iter=200)
    assert r.info["linear_solver"] == "woodbury" and r.info["factorizations"] == 1
    assert r.info["damping"] == pytest.approx(1e-3 * np.mean(np.diag(X.T @ X)))
    assert np.all(np.isfinite(r.x)) and np.count_nonzero(r.x) <= 3
    assert r.history["objective"][-1] < r.history["objective"][0]


def test_indefinite_hessian_is_rejected():
    H = np.diag([1.0, -0.5, 2.0])
    f = Quadratic(H, np.ones(3))
    with pytest.raises(ValueError, match="not positive definite"):
        topk_iobs(f, pattern=TopK(2))
    with pytest.raises(ValueError, match="not positive definite"):
        topk_iobs(f, pattern=TopK(2), damping=0.1)  # 0.1 * mean diag = 0.083 < 0.5
    with pytest.raises(ValueError, match="positive definite"):
        iobs(f, 2)
    with pytest.raises(ValueError, match="H must be positive definite"):
        iobs_step(np.ones(3), np.zeros(3), H, 2)


def test_topk_iobs_does_not_modify_x0_and_records_history():
    rng = np.random.default_rng(15)
    H = spd(rng, 8)
    f = Quadratic(H, rng.standard_normal(8))
    x0 = rng.standard_normal(8)
    x0c = x0.copy()
    r = topk_iobs(f, pattern=TopK(3), x0=x0, max_iter=4)
    np.testing.assert_array_equal(x0, x0c)
    assert len(r.history["objective"]) == r.nit + 1
    assert r.history["objective"][0] == pytest.approx(f.value(x0))
    assert np.all(r.history["support"][1:] <= 3)


# ----------------------------------------------------------------------------- p > n: Woodbury, restricted Newton


def damped_transcription(f, X, k, delta, x0, steps):
    """Plain transcription of damped eq. 12 with the dense p x p system (X'X + delta I)."""
    H = X.astype(np.float64).T @ X.astype(np.float64) + delta * np.eye(X.shape[1])
    x, out = x0.copy(), []
    for _ in range(steps):
        v = x.astype(np.float64) - np.linalg.solve(H, f.grad(x).astype(np.float64))
        keep = np.argsort(-np.abs(v), kind="stable")[:k]
        x = np.zeros_like(x)
        x[keep] = v[keep]
        out.append(x)
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rel", [1e-3, 1e-1, 3.0])
def test_woodbury_direction_equals_dense_damped_solve(dtype, rel):
    from sparseopt.linalg import woodbury_factor as _woodbury_factor
    from sparseopt.linalg import woodbury_solve as _woodbury_direction

    rng = np.random.default_rng(31)
    n, p = 15, 40
    X = rng.standard_normal((n, p)).astype(dtype)
    X64 = X.astype(np.float64)
    delta = rel * np.mean(np.sum(X64**2, axis=0))
    g = (X64.T @ rng.standard_normal(n)).astype(dtype)  # a gradient lies in the row space
    dense = np.linalg.solve(X64.T @ X64 + delta * np.eye(p), g.astype(np.float64))
    wood = _woodbury_direction(X64, _woodbury_factor(X64, delta), delta, g)
    np.testing.assert_allclose(wood, dense, rtol=1e-9, atol=1e-12 * np.abs(dense).max())
    # a direction with a null-space component too
    h = rng.standard_normal(p)
    np.testing.assert_allclose(
        _woodbury_direction(X64, _woodbury_factor(X64, delta), delta, h),
        np.linalg.solve(X64.T @ X64 + delta * np.eye(p), h),
        rtol=1e-9,
        atol=1e-12,
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_topk_iobs_woodbury_path_follows_dense_damped_iteration(dtype):
    """The p > n least-squares path (Woodbury, n x n factor) gives the iterates of the dense
    damped step, and the same as the generic dense path on Quadratic(X'X, X'y)."""
    rng = np.random.default_rng(32)
    n, p, k = 18, 45, 4
    X = rng.standard_normal((n, p))
    y = X @ sparse_vec(rng, p, k) + 0.05 * rng.standard_normal(n)
    X, y = X.astype(dtype), y.astype(dtype)
    f = LeastSquares(X, y)
    rel = 0.05
    delta = rel * np.mean(np.sum(X.astype(np.float64) ** 2, axis=0))
    x0 = np.zeros(p, dtype=dtype)
    ref = damped_transcription(f, X, k, delta, x0, 4)
    r = topk_iobs(f, pattern=TopK(k), damping=rel, max_iter=4, tol=0.0)
    assert r.x.dtype == dtype and r.nit == 4
    assert r.info["linear_solver"] == "woodbury" and r.info["damping"] == pytest.approx(delta)
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r.x, ref[-1], **tol)
    for t in (1, 2):  # also the intermediate iterates
        rt = topk_iobs(f, pattern=TopK(k), damping=rel, max_iter=t, tol=0.0)
        np.testing.assert_allclose(rt.x, ref[t - 1], **tol)
    X64 = X.astype(np.float64)
    q = Quadratic(X64.T @ X64, X64.T @ y.astype(np.float64))
    rq = topk_iobs(q, pattern=TopK(k), damping=rel, max_iter=4, tol=0.0)
    assert rq.info["linear_solver"] == "cholesky"
    np.testing.assert_allclose(r.x, rq.x, **tol)


def test_topk_iobs_least_squares_n_ge_p_factors_once():
    rng = np.random.default_rng(33)
    X = rng.standard_normal((50, 12))
    f = LeastSquares(X, X @ sparse_vec(rng, 12, 3) + 0.1 * rng.standard_normal(50))
    r = topk_iobs(f, pattern=TopK(3), max_iter=6, tol=0.0)
    assert r.info["factorizations"] == 1 and r.info["linear_solver"] == "cholesky"
    rq = topk_iobs(Quadratic(X.T @ X, X.T @ f.y), pattern=TopK(3), max_iter=6, tol=0.0)
    np.testing.assert_allclose(r.x, rq.x, rtol=1e-10, atol=1e-12)


def restricted_reference_step(X, y, x, k):
    """One restricted step for least squares from scratch: Q = supp x plus the k largest |g|
    off supp x; on Q the quadratic model is f itself, so theta+ is lstsq on the columns Q."""
    p = X.shape[1]
    g = X.T @ (X @ x - y)
    supp = [j for j in range(p) if x[j] != 0]
    off = sorted((j for j in range(p) if x[j] == 0), key=lambda j: (-abs(g[j]), j))
    Q = sorted(supp + off[:k])
    v = np.zeros(p)
    v[Q] = np.linalg.lstsq(X[:, Q], y, rcond=None)[0]
    keep = sorted(range(p), key=lambda j: (-abs(v[j]), j))[:k]
    out = np.zeros(p)
    out[keep] = v[keep]
    return out, Q


def test_restricted_step_is_least_squares_on_q_then_topk():
    rng = np.random.default_rng(34)
    n, p, k = 20, 50, 4
    X = rng.standard_normal((n, p))
    y = X @ sparse_vec(rng, p, k) + 0.1 * rng.standard_normal(n)
    f = LeastSquares(X, y)
    x = np.zeros(p)
    for _ in range(4):
        ref, Q = restricted_reference_step(X, y, x, k)
        r = topk_iobs(f, pattern=TopK(k), x0=x, newton="restricted", max_iter=1)
        assert r.info["newton"] == "restricted"
        np.testing.assert_allclose(r.x, ref, rtol=1e-9, atol=1e-11)
        assert set(np.flatnonzero(r.x)) <= set(Q)
        x = ref
    # the generic branch (dense Hessian, block H_QQ) on the same quadratic gives the same
    q = Quadratic(X.T @ X, X.T @ y)
    r1 = topk_iobs(f, pattern=TopK(k), newton="restricted", max_iter=5, tol=0.0)
    r2 = topk_iobs(q, pattern=TopK(k), newton="restricted", max_iter=5, tol=0.0)
    np.testing.assert_allclose(r1.x, r2.x, rtol=1e-8, atol=1e-10)


def test_restricted_with_all_coordinates_is_eq12():
    """|Q| = p (a start with p - k nonzeros): the restricted step is the full step of eq. 12."""
    rng = np.random.default_rng(35)
    d, k = 10, 4
    f = Quadratic(spd(rng, d), rng.standard_normal(d))
    x0 = np.zeros(d)
    x0[rng.choice(d, d - k, replace=False)] = rng.standard_normal(d - k)
    full = topk_iobs(f, pattern=TopK(k), x0=x0, max_iter=1)
    restr = topk_iobs(f, pattern=TopK(k), x0=x0, max_iter=1, newton="restricted")
    np.testing.assert_allclose(restr.x, full.x, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_restricted_reaches_exhaustive_best_subset_p_gt_n(seed):
    """Well-conditioned p > n least squares: the restricted Newton variant finds the support of
    the exhaustive best subset (all C(p, k) least-squares fits) and is exact without noise."""
    rng = np.random.default_rng(40 + seed)
    n, p, k = 16, 24, 3
    X = rng.standard_normal((n, p))
    beta = sparse_vec(rng, p, k)
    y = X @ beta + 0.05 * rng.standard_normal(n)
    val, Q = best_subset(X, y, k)
    f = LeastSquares(X, y)
    r = topk_iobs(f, pattern=TopK(k), newton="restricted", max_iter=50)
    assert r.converged
    assert tuple(np.flatnonzero(r.x)) == Q
    assert f.value(f.minimize_on_support(r.x != 0)) == pytest.approx(val, rel=1e-10)
    assert f.value(r.x) >= val * (1 - 1e-12)
    r0 = topk_iobs(LeastSquares(X, X @ beta), pattern=TopK(k), newton="restricted", max_iter=50)
    np.testing.assert_allclose(r0.x, beta, atol=1e-10)
    r32 = topk_iobs(LeastSquares(X.astype(np.float32), (X @ beta).astype(np.float32)),
                    pattern=TopK(k), newton="restricted", max_iter=50, tol=1e-6)
    assert r32.x.dtype == np.float32
    np.testing.assert_allclose(r32.x, beta, atol=1e-4)


def test_restricted_singular_block_and_bad_input():
    rng = np.random.default_rng(36)
    n, p, k = 4, 12, 3
    X = rng.standard_normal((n, p))
    f = LeastSquares(X, rng.standard_normal(n))
    x0 = np.zeros(p)
    x0[:3] = 1.0  # |Q| = 3 + 3 = 6 > n = 4: X_Q'X_Q is singular
    with pytest.raises(ValueError, match="H_QQ .* not positive definite at iteration 1.*damping"):
        topk_iobs(f, pattern=TopK(k), x0=x0, newton="restricted")
    r = topk_iobs(f, pattern=TopK(k), x0=x0, newton="restricted", damping=1e-2, max_iter=3)
    assert np.all(np.isfinite(r.x)) and np.count_nonzero(r.x) <= k
    assert r.info["damping"] == pytest.approx(1e-2 * np.mean(np.sum(X**2, axis=0)))
    with pytest.raises(ValueError, match="newton must be"):
        topk_iobs(f, pattern=TopK(k), newton="cg")
    with pytest.raises(ValueError, match="newton='restricted' needs a TopK"):
        topk_iobs(f, pattern=NM(2, 4), newton="restricted")
    with pytest.raises(ValueError, match="newton='restricted' needs a TopK"):
        topk_iobs(LayerLoss(np.ones((2, 4)), np.eye(4)), pattern=TopK(2), newton="restricted")


# ----------------------------------------------------------------------------- bad input


@pytest.fixture
def quad():
    rng = np.random.default_rng(16)
    return Quadratic(spd(rng, 6), rng.standard_normal(6))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(pattern=3), "pattern must be"),
        (dict(pattern=TopK(7)), "pattern.k"),
        (dict(pattern=NM(2, 4)), "divisible"),
        (dict(pattern=TopK(2), x0=np.ones(5)), "x0 must have shape"),
        (dict(pattern=TopK(2), x0=np.array([1, 2, np.nan, 0, 0, 0])), "x0 contains NaN"),
        (dict(pattern=TopK(2), step=0.0), "step must be"),
        (dict(pattern=TopK(2), step=-1.0), "step must be"),
        (dict(pattern=TopK(2), damping=-1e-3), "damping must be"),
        (dict(pattern=TopK(2), max_iter=-1), "max_iter"),
        (dict(pattern=TopK(2), tol=-1.0), "tol"),
    ],
)
def test_topk_iobs_bad_input(quad, kwargs, match):
    with pytest.raises(ValueError, match=match):
        topk_iobs(quad, **kwargs)


def test_iobs_bad_input(quad):
    with pytest.raises(ValueError, match="k must be"):
        iobs(quad, -1)
    with pytest.raises(ValueError, match="k must be"):
        iobs(quad, 7)
    with pytest.raises(ValueError, match="mask_solver"):
        iobs(quad, 2, mask_solver="gurobi")
    with pytest.raises(ValueError, match="vector variable"):
        iobs(LayerLoss(np.ones((2, 4)), np.eye(4)), 2)
    with pytest.raises(ValueError, match="objective must provide"):
        iobs(object(), 2)
    with pytest.raises(ValueError, match="grad must have shape"):
        iobs_step(np.ones(3), np.ones(4), np.eye(3), 1)
    with pytest.raises(ValueError, match="H must have shape"):
        iobs_step(np.ones(3), np.ones(3), np.eye(4), 1)
    with pytest.raises(ValueError, match="theta must be a vector"):
        iobs_step(np.ones((3, 1)), np.ones(3), np.eye(3), 1)
    with pytest.raises(ValueError, match="grad contains NaN"):
        iobs_step(np.ones(3), np.array([0, np.inf, 0]), np.eye(3), 1)
    bad_hess = Smooth(lambda w: 0.0, lambda w: w, lambda w: np.eye(5), shape=(6,))
    with pytest.raises(ValueError, match="objective.hessian returned shape"):
        topk_iobs(bad_hess, pattern=TopK(2))


# ----------------------------------------------------------------------------- stochastic I-OBS


def test_sampled_gradient_full_batch_is_the_gradient():
    rng = np.random.default_rng(17)
    X = rng.standard_normal((30, 7))
    w = rng.standard_normal(7)
    for f in (LeastSquares(X, rng.standard_normal(30)),
              Logistic(X, (rng.random(30) > 0.5).astype(float), 0.1),
              Logistic(X, np.sign(rng.standard_normal(30)), 0.0)):
        s = sampled_gradient(f)
        assert s.n_samples == 30
        np.testing.assert_allclose(s.grad(w, np.arange(30)), f.grad(w), rtol=1e-12, atol=1e-12)
        # unbiased: the mean over all batches of a partition of the rows is the gradient
        parts = np.array_split(rng.permutation(30), 5)
        np.testing.assert_allclose(
            np.mean([s.grad(w, p) * len(p) / 6 for p in parts], axis=0), f.grad(w), atol=1e-12
        )
    with pytest.raises(ValueError, match="no built-in mini-batch"):
        sampled_gradient(Quadratic(np.eye(2), np.ones(2)))


def test_lemma4_step_gives_the_constrained_minimizer():
    """Lemma 4 (the step stochastic_iobs takes) against a direct KKT solve of the model with
    curvature g g'/||g||^2 + lam I: E_Q(theta - eta g) is the minimizer over theta' on Q."""
    rng = np.random.default_rng(18)
    d, lam = 9, 0.7
    for supp_inside in (True, False):
        g = rng.standard_normal(d)
        mask = np.zeros(d, dtype=bool)
        mask[rng.choice(d, 4, replace=False)] = True
        theta = rng.standard_normal(d)
        if supp_inside:
            theta[~mask] = 0.0
        M = np.outer(g, g) / (g @ g) + lam * np.eye(d)
        dS = -theta[~mask]
        dQ = -np.linalg.solve(M[np.ix_(mask, mask)], g[mask] + M[np.ix_(mask, ~mask)] @ dS)
        expected = np.zeros(d)
        expected[mask] = theta[mask] + dQ
        eta = _lemma4_step(theta, g, mask, lam)
        np.testing.assert_allclose(np.where(mask, theta - eta * g, 0.0), expected, atol=1e-12)
        if supp_inside:  # the paper's closed form E_Q(theta - g / (lam + ||E_Q g||^2/||g||^2))
            eta = 1.0 / (lam + g[mask] @ g[mask] / (g @ g))
            np.testing.assert_allclose(expected, np.where(mask, theta - eta * g, 0.0), atol=1e-12)


def test_stochastic_iobs_step_and_interpolation_convergence():
    rng = np.random.default_rng(19)
    n, d, kstar, k = 200, 20, 3, 6
    X = rng.standard_normal((n, d)) / np.sqrt(n)
    theta_star = sparse_vec(rng, d, kstar)
    f = LeastSquares(X, X @ theta_star)
    # one full-batch step from a k-sparse start, computed by hand (App. B.1)
    x0 = sparse_vec(rng, d, k)
    r1 = stochastic_iobs(f, k, batch_size=n, x0=x0, max_iter=1, lam=2.0)
    g = f.grad(x0)
    eta = 1.0 / (2.0 + np.sum(g[x0 != 0] ** 2) / (g @ g))
    np.testing.assert_allclose(r1.x, TopK(k).project(x0 - eta * g), rtol=1e-12)
    assert r1.history["step"][1] == pytest.approx(eta)
    # noise-free data: mini-batch gradients vanish at theta*, so stochastic I-OBS converges
    r = stochastic_iobs(f, k, batch_size=40, max_iter=1500, seed=3)
    assert np.linalg.norm(r.x - theta_star) < 1e-6 * np.linalg.norm(theta_star)
    assert r.info["lam"] == pytest.approx(f.lipschitz())
    # seeded: same seed same path, other seed another path
    a = stochastic_iobs(f, k, batch_size=40, max_iter=30, seed=5)
    b = stochastic_iobs(f, k, batch_size=40, max_iter=30, seed=5)
    c = stochastic_iobs(f, k, batch_size=40, max_iter=30, seed=6)
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.history["objective"], c.history["objective"])


def test_stochastic_iobs_bad_input():
    rng = np.random.default_rng(20)
    X = rng.standard_normal((10, 4))
    f = LeastSquares(X, rng.standard_normal(10))
    for bs in (0, 11, 2.5):
        with pytest.raises(ValueError, match="batch_size"):
            stochastic_iobs(f, 2, batch_size=bs)
    for lam in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="lam must be"):
            stochastic_iobs(f, 2, batch_size=2, lam=lam)
    with pytest.raises(ValueError, match="k must be"):
        stochastic_iobs(f, 5, batch_size=2)
    with pytest.raises(ValueError, match="sampler must be"):
        stochastic_iobs(f, 2, batch_size=2, sampler=lambda w, i: w)
    bad = SampledGradient(10, lambda w, idx: np.ones(3))
    with pytest.raises(ValueError, match="sampler.grad returned shape"):
        stochastic_iobs(f, 2, batch_size=2, sampler=bad)


def test_nonfinite_gradient_or_hessian_is_reported():
    nan_grad = Smooth(lambda w: 0.0, lambda w: np.full(4, np.nan), lambda w: np.eye(4), shape=(4,))
    with pytest.raises(ValueError, match=r"objective.grad\(x\) contains NaN"):
        topk_iobs(nan_grad, pattern=TopK(2))
    inf_hess = Smooth(lambda w: 0.0, lambda w: w, lambda w: np.diag([1.0, np.inf, 1.0, 1.0]), shape=(4,))
    with pytest.raises(ValueError, match=r"objective.hessian\(x\) contains NaN"):
        iobs(inf_hess, 2)
    X = np.random.default_rng(21).standard_normal((10, 4))
    f = LeastSquares(X, np.ones(10))
    bad = SampledGradient(10, lambda w, idx: np.full(4, np.inf))
    with pytest.raises(ValueError, match=r"sampler.grad\(x, idx\) contains NaN"):
        stochastic_iobs(f, 2, batch_size=2, sampler=bad)


def test_iobs_keeps_float32_and_scales_with_bnb_near_sparse_optimum():
    rng = np.random.default_rng(22)
    d, kstar, k = 40, 5, 10  # C(40, 10) ~ 8.5e8 supports: only branch-and-bound is practical
    X = rng.standard_normal((120, d))
    theta_star = sparse_vec(rng, d, kstar)
    f = LeastSquares(X, X @ theta_star)
    r = iobs(f, k, max_iter=3)
    assert r.info["mask_solver"][0] == "bnb"
    np.testing.assert_allclose(r.x, theta_star, atol=1e-9)
    assert r.history["model_increase"][1] == pytest.approx(0.0, abs=1e-12)
    f32 = LeastSquares(X.astype(np.float32), (X @ theta_star).astype(np.float32))
    r32 = iobs(f32, k, max_iter=2)
    assert r32.x.dtype == np.float32
    np.testing.assert_allclose(r32.x, theta_star, atol=1e-3)


def test_numerically_singular_hessian_is_not_inverted():
    """A rank-deficient PSD Hessian may factor with round-off pivots; it must still be refused."""
    rng = np.random.default_rng(23)
    B = rng.standard_normal((6, 3))
    H = B @ B.T  # rank 3
    f = Quadratic(H, rng.standard_normal(6))
    with pytest.raises(ValueError, match="not positive definite"):
        topk_iobs(f, pattern=TopK(2))
    with pytest.raises(ValueError, match="positive definite"):
        iobs_step(np.ones(6), np.zeros(6), H, 3)
    r = topk_iobs(f, pattern=TopK(2), damping=1e-2, max_iter=1)
    assert np.all(np.isfinite(r.x))
