"""Layer pruning core: prune(), layer_loss, masked_gd, magnitude, wanda, input checks.

The brute-force reference (all C(m, n)^(d_in/m) masks per row, optimal weights of each mask
by a least-squares solve) lives here and is imported by the other tests/test_layer_*.py.
"""

import itertools

import numpy as np
import pytest

import sparseopt
from sparseopt import NM, TopK, prune
from sparseopt.layer import PAPER_REFINE_STEPS, PruneResult, gamma_max, layer_loss, masked_gd

# prox24-kubler Sec. 4.1 toy problem
TOY_W = np.array([[0.0, 5, 3, 2, 0, 5, 5, 2]])
TOY_H = np.eye(8)
TOY_H[3, 7] = TOY_H[7, 3] = 1.0
TOY_OPT = np.array([[0.0, 5, 0, 4, 0, 5, 5, 0]])
TOY_GREEDY = np.array([[0.0, 5, 3, 0, 0, 5, 5, 0]])  # wanda and sparsegpt (Sec. 4.1)


def row_masks(d_in, n, m):
    """All N:M masks of one row (boolean arrays of length d_in)."""
    groups = [list(itertools.combinations(range(m), n)) for _ in range(d_in // m)]
    for choice in itertools.product(*groups):
        mask = np.zeros(d_in, dtype=bool)
        for g, keep in enumerate(choice):
            mask[[g * m + k for k in keep]] = True
        yield mask


def masked_optimum(w_star, H, mask):
    """Optimal weights on a fixed support: w_S = argmin (w - w*)' H (w - w*), by lstsq."""
    w = np.zeros_like(w_star, dtype=np.float64)
    S = np.flatnonzero(mask)
    if S.size:
        w[S] = np.linalg.lstsq(H[np.ix_(S, S)], H[S, :] @ w_star, rcond=None)[0]
    return w


def row_loss(w, w_star, H):
    d = w - w_star
    return float(d @ H @ d)


def brute_force_layer(W_star, H, n=2, m=4, update=True):
    """Exact minimum of eq. 1 by enumeration: returns (loss, W_opt).

    ``update=False`` scores each mask by the loss of the masked W* (no weight update).
    """
    W_star = np.asarray(W_star, dtype=np.float64)
    total, W_opt = 0.0, np.zeros_like(W_star)
    for r, w_star in enumerate(W_star):
        best = (np.inf, None)
        for mask in row_masks(W_star.shape[1], n, m):
            w = masked_optimum(w_star, H, mask) if update else np.where(mask, w_star, 0.0)
            val = row_loss(w, w_star, H)
            if val < best[0]:
                best = (val, w)
        total += best[0]
        W_opt[r] = best[1]
    return total, W_opt


def random_layer(rng, d_out, d_in, n_samples=None, dtype=np.float64, corr=0.5):
    """Random dense layer with a correlated, well-conditioned Hessian X X' / n."""
    n_samples = n_samples or 4 * d_in
    Z = rng.standard_normal((d_in, n_samples))
    mix = np.eye(d_in) + corr * rng.standard_normal((d_in, d_in)) / np.sqrt(d_in)
    X = mix @ Z * rng.uniform(0.5, 2.0, size=(d_in, 1))
    H = X @ X.T / n_samples
    W = rng.standard_normal((d_out, d_in)).astype(dtype)
    return W, H, X


def powerlaw_layer(rng, d_out, d_in, alpha=1.5):
    """A layer whose Hessian has the eigenvalues i^-alpha (random eigenvectors, random input
    scales): a few stiff directions above a long tail, as on the MiniLM layers (after the
    rescaling there, e.g. 12.6, 9.9, 8.8, ... against a median of 0.46), the case ``clip``
    is for."""
    Q, _ = np.linalg.qr(rng.standard_normal((d_in, d_in)))
    H = (Q * np.arange(1, d_in + 1) ** -alpha) @ Q.T
    s = rng.uniform(0.5, 2.0, d_in)
    return rng.standard_normal((d_out, d_in)), H * s[:, None] * s[None, :]


def assert_valid_result(res, W_star, H, pattern):
    """Common contract of every PruneResult."""
    assert isinstance(res, PruneResult)
    assert res.W.dtype == np.asarray(W_star).dtype
    assert res.W.shape == np.asarray(W_star).shape
    assert res.mask.dtype == bool and res.mask.shape == res.W.shape
    assert np.all(res.W[~res.mask] == 0)
    assert pattern.satisfied(res.W) and pattern.satisfied(res.mask)
    assert isinstance(res.loss, float)
    assert res.loss == pytest.approx(layer_loss(res.W, W_star, H), rel=1e-12, abs=1e-12)
    base = layer_loss(np.zeros_like(W_star), W_star, H)
    assert res.rel_loss == pytest.approx(res.loss / base, rel=1e-12)
    assert res.time >= 0


# ---------------------------------------------------------------- layer_loss / gamma_max


def test_layer_loss_matches_data_form():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 50))
    W_star = rng.standard_normal((3, 6))
    W = rng.standard_normal((3, 6))
    direct = np.sum((W @ X - W_star @ X) ** 2) / 50  # eq. 1
    assert layer_loss(W, W_star, X @ X.T / 50) == pytest.approx(direct, rel=1e-12)


def test_layer_loss_float32_inputs_give_float64_value():
    rng = np.random.default_rng(1)
    W, H, _ = random_layer(rng, 3, 8, dtype=np.float32)
    W2 = W + np.float32(0.1)
    exact = layer_loss(W2.astype(np.float64), W.astype(np.float64), H)
    assert layer_loss(W2, W, H) == exact  # promoted before any arithmetic


@pytest.mark.parametrize("d", [5, 60])
@pytest.mark.parametrize("dense_max", [1024, 10])
def test_gamma_max_matches_eigvalsh(d, dense_max, monkeypatch):
    import sparseopt.linalg as linalg_mod

    monkeypatch.setattr(linalg_mod, "DENSE_EIG_MAX", dense_max)  # dense_max=10: Lanczos branch
    rng = np.random.default_rng(d)
    A = rng.standard_normal((d, d // 2 + 1))
    H = A @ A.T / d
    assert gamma_max(H) == pytest.approx(np.linalg.eigvalsh(H)[-1], rel=1e-9)


# ---------------------------------------------------------------- masked_gd


def test_masked_gd_monotone_and_converges_to_masked_optimum():
    rng = np.random.default_rng(2)
    W_star, H, _ = random_layer(rng, 3, 8)
    mask = NM(2, 4).mask(rng.standard_normal(W_star.shape))
    from sparseopt.layer.loss import _masked_gd

    step = 1.0 / (2.0 * gamma_max(H))
    _, losses = _masked_gd(W_star * mask, W_star, H, mask, 400, step, record=True)
    assert np.all(np.diff(losses) <= 1e-12 * losses[0])
    W = masked_gd(W_star, W_star, H, mask, 3000)
    W_opt = np.stack([masked_optimum(W_star[r], H, mask[r]) for r in range(3)])
    np.testing.assert_allclose(W, W_opt, atol=1e-8)
    assert np.all(W[~mask] == 0)
    # recorded losses are the true losses of the iterates
    W5 = masked_gd(W_star, W_star, H, mask, 5)
    _, l6 = _masked_gd(W_star * mask, W_star, H, mask, 6, step, record=True)
    assert l6[5] == pytest.approx(layer_loss(W5, W_star, H), rel=1e-12)


def _masked_gd_expressions(W, W_star, H, mask, steps, step):
    """The NumPy expressions of a masked GD run, step by step (_masked_step_xp, the twin
    of the fused pass)."""
    from sparseopt.layer.loss import _masked_step_xp

    dt = W.dtype
    maskd, Hd, Ws = mask.astype(dt), H.astype(dt), W_star.astype(dt)
    Wk, GS, losses = W * maskd, Ws @ Hd, []
    for _ in range(steps):
        losses.append(_masked_step_xp(Wk @ Hd, GS, Wk, Ws, maskd, 2.0 * step, True))
    return Wk, np.array(losses)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_masked_gd_fused_pass_matches_its_twin(dtype, order):
    """The fused Numba pass (_masked_step_rows) against the NumPy expressions: the same bits
    of W after every step, signed zeros off the mask included, on ties (repeated entries),
    exact zeros and both signs; the recorded losses to float64 rounding. Fails if the pass
    rounds any difference or product differently from NumPy, or sums the wrong terms."""
    from sparseopt.layer.loss import _masked_gd, _masked_step_rows

    rng = np.random.default_rng(11)
    W_star, H, _ = random_layer(rng, 12, 16, dtype=dtype)
    W_star[0] = 0.0  # a zero row
    W_star[1, :8] = -0.75  # ties, negative
    W_star[2, ::2] = 0.5  # ties, positive
    mask = NM(2, 4).mask(rng.standard_normal(W_star.shape))
    W0 = (W_star + dtype(0.1) * rng.standard_normal(W_star.shape).astype(dtype)).astype(dtype)
    W0 = np.asarray(W0, order=order)
    step = 1.0 / (2.0 * gamma_max(H))
    for steps in (1, 2, 25):
        W_ref, l_ref = _masked_gd_expressions(W0, W_star, H, mask, steps, step)
        W_new, l_new = _masked_gd(W0, W_star, H, mask, steps, step, record=True)
        assert W_new.dtype == dtype
        np.testing.assert_array_equal(W_new.view(np.uint8), np.ascontiguousarray(W_ref)
                                      .view(np.uint8))
        np.testing.assert_allclose(l_new, l_ref, rtol=1e-13, atol=0)
        W_plain, none = _masked_gd(W0, W_star, H, mask, steps, step)
        np.testing.assert_array_equal(W_plain.view(np.uint8), W_new.view(np.uint8))
        assert none.size == 0
        # a NumPy float64 step rounds like the Python float (no float64 products of R)
        W_np, _ = _masked_gd(W0, W_star, H, mask, steps, np.float64(step))
        np.testing.assert_array_equal(W_np.view(np.uint8), W_new.view(np.uint8))
    assert np.any(np.signbit(W_ref[~mask]))  # -0.0 off the mask (W0 * 0 of negatives)
    # the kernel alone on the first step: loss = sum((R - GS) (W - W*)), R overwritten
    Wk = np.ascontiguousarray(W0 * mask)
    R, GS = Wk @ H.astype(dtype), W_star @ H.astype(dtype)
    expect = float(np.sum((R - GS).astype(np.float64) * (Wk - W_star).astype(np.float64)))
    got = _masked_step_rows(R.copy(), GS, Wk.copy(), W_star, mask, dtype(2.0 * step), True)
    assert got == pytest.approx(expect, rel=1e-13)
    assert _masked_step_rows(R.copy(), GS, Wk.copy(), W_star, mask, dtype(2.0 * step),
                             False) == 0.0


def test_masked_gd_float32_and_no_mutation():
    rng = np.random.default_rng(3)
    W_star, H, _ = random_layer(rng, 2, 8, dtype=np.float32)
    mask = NM(2, 4).mask(W_star)
    W0, H0 = W_star.copy(), H.copy()
    W = masked_gd(W_star, W_star, H, mask, 200)
    assert W.dtype == np.float32
    np.testing.assert_array_equal(W_star, W0)
    np.testing.assert_array_equal(H, H0)
    W64 = masked_gd(W_star.astype(np.float64), W_star.astype(np.float64), H, mask, 200)
    np.testing.assert_allclose(W, W64, rtol=1e-4, atol=1e-4)
    assert layer_loss(W, W_star, H) < layer_loss(W_star * mask, W_star, H)


def test_masked_gd_bad_input():
    W = np.ones((2, 4))
    mask = np.ones((2, 4), dtype=bool)
    with pytest.raises(ValueError, match="mask"):
        masked_gd(W, W, np.eye(4), mask.astype(int), 1)
    with pytest.raises(ValueError, match="steps"):
        masked_gd(W, W, np.eye(4), mask, -1)
    with pytest.raises(ValueError, match="step"):
        masked_gd(W, W, np.eye(4), mask, 1, step=0.0)
    with pytest.raises(ValueError, match="W_star"):
        masked_gd(W, W[:, :2], np.eye(4), mask, 1)
    with pytest.raises(ValueError, match="H"):
        masked_gd(W, W, -np.eye(4), mask, 1)


# ---------------------------------------------------------------- magnitude / wanda


def test_wanda_optimal_for_diagonal_hessian_bruteforce():
    """prox24-kubler Thm 1: with diagonal H, the Wanda mask of W* minimizes eq. 1."""
    rng = np.random.default_rng(4)
    for trial in range(3):
        W_star = rng.standard_normal((3, 8))
        H = np.diag(rng.uniform(0.1, 3.0, size=8))
        res = prune(W_star, H, method="wanda")
        best_masked, _ = brute_force_layer(W_star, H, update=False)
        best_updated, _ = brute_force_layer(W_star, H, update=True)
        assert res.loss == pytest.approx(best_masked, rel=1e-12)
        assert res.loss == pytest.approx(best_updated, rel=1e-10)
        # magnitude ignores H, so it is worse on some trial; wanda never is
        assert prune(W_star, H, method="magnitude").loss >= res.loss - 1e-12


def test_magnitude_suboptimal_for_diagonal_hessian_where_wanda_is_not():
    W_star = np.array([[1.0, 2.0, 3.0, 4.0]])
    H = np.diag([100.0, 1.0, 1.0, 1.0])
    assert prune(W_star, H, method="magnitude").loss == pytest.approx(100.0 + 4.0)
    assert prune(W_star, H, method="wanda").loss == pytest.approx(4.0 + 9.0)


@pytest.mark.parametrize("method", ["magnitude", "wanda"])
def test_one_shot_methods_against_bruteforce(method):
    rng = np.random.default_rng(5)
    W_star, H, _ = random_layer(rng, 2, 8)
    res = prune(W_star, H, method=method)
    assert_valid_result(res, W_star, H, NM(2, 4))
    # one-shot: no iterations, so the common history keys hold empty curves
    assert set(res.history) == {"objective", "time", "refine_loss"}
    assert all(v.shape == (0,) for v in res.history.values())
    assert res.nit == 0 and res.stop_reason == "one-shot (no iterations)"
    best, _ = brute_force_layer(W_star, H)
    assert best <= res.loss + 1e-12
    # masked W* is what both one-shot methods return
    np.testing.assert_array_equal(res.W, np.where(res.mask, W_star, 0.0))
    refined = prune(W_star, H, method=method, refine_steps=2000)
    assert_valid_result(refined, W_star, H, NM(2, 4))
    assert best - 1e-10 <= refined.loss <= res.loss
    np.testing.assert_array_equal(refined.mask, res.mask)
    hist = refined.history["refine_loss"]
    assert hist.shape == (2000,) and hist[0] == pytest.approx(res.loss)
    assert np.all(np.diff(hist) <= 1e-12 * hist[0])
    assert refined.info["refine_steps"] == 2000


def test_wanda_toy_problem_sec41():
    res = prune(TOY_W, TOY_H, method="wanda")
    np.testing.assert_array_equal(res.W, TOY_GREEDY)
    best, W_opt = brute_force_layer(TOY_W, TOY_H)
    np.testing.assert_allclose(W_opt, TOY_OPT, atol=1e-12)  # the paper's optimum
    assert best == pytest.approx(9.0) and res.loss == pytest.approx(16.0)


def test_wanda_and_magnitude_topk_pattern():
    rng = np.random.default_rng(6)
    W_star, H, _ = random_layer(rng, 3, 6)
    for method in ("magnitude", "wanda"):
        res = prune(W_star, H, method=method, pattern=TopK(2))
        assert np.all(np.count_nonzero(res.W, axis=1) == 2)
        assert res.loss == pytest.approx(layer_loss(res.W, W_star, H))


def test_wanda_ties_and_zeros():
    W_star = np.array([[1.0, -1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    res = prune(W_star, np.eye(4), method="wanda")
    np.testing.assert_array_equal(res.W, [[1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert res.rel_loss == pytest.approx(1.0 / 3.0)


def test_float32_in_float32_out_and_inputs_unchanged():
    rng = np.random.default_rng(7)
    W_star, H, _ = random_layer(rng, 4, 16, dtype=np.float32)
    H32 = H.astype(np.float32)
    W0, H0 = W_star.copy(), H32.copy()
    for method in ("magnitude", "wanda"):
        res = prune(W_star, H32, method=method, refine_steps=5)
        assert res.W.dtype == np.float32
        assert isinstance(res.loss, float)
        np.testing.assert_array_equal(W_star, W0)
        np.testing.assert_array_equal(H32, H0)


def test_hessian_is_symmetrized():
    rng = np.random.default_rng(8)
    W_star, H, _ = random_layer(rng, 2, 8)
    A = rng.standard_normal((8, 8))
    skew = A - A.T
    r1 = prune(W_star, H, method="wanda", refine_steps=50)
    r2 = prune(W_star, H + 0.3 * skew, method="wanda", refine_steps=50)
    np.testing.assert_allclose(r1.W, r2.W, rtol=1e-12, atol=1e-12)
    assert r1.loss == pytest.approx(r2.loss, rel=1e-12)


def test_zero_weights_relative_loss():
    res = prune(np.zeros((2, 4)), np.eye(4), method="wanda")
    assert res.loss == 0.0 and res.rel_loss == 0.0


def test_prune_exported_and_paper_constant():
    assert sparseopt.prune is prune
    assert PAPER_REFINE_STEPS == 1000


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "W, H, kwargs, exc, match",
    [
        (np.ones(4), np.eye(4), {}, ValueError, "W"),
        (np.ones((2, 4), dtype=int), np.eye(4), {}, ValueError, "float32 or float64"),
        (np.full((2, 4), np.nan), np.eye(4), {}, ValueError, "NaN"),
        (np.ones((2, 4)), np.eye(5), {}, ValueError, "H has shape"),
        (np.ones((2, 4)), np.ones((4, 3)), {}, ValueError, "square"),
        (np.ones((2, 4)), np.diag([1.0, -1, 1, 1]), {}, ValueError, "positive semidefinite"),
        (np.ones((2, 4)), np.array([[1, 2, 0, 0], [2, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]),
         {}, ValueError, "positive semidefinite"),
        (np.ones((2, 6)), np.eye(6), {}, ValueError, "divisible by m=4"),
        (np.ones((2, 4)), np.eye(4), {"method": "obs"}, ValueError, "method"),
        (np.ones((2, 4)), np.eye(4), {"pattern": (2, 4)}, ValueError, "pattern"),
        (np.ones((2, 4)), np.eye(4), {"refine_steps": -1}, ValueError, "refine_steps"),
        (np.ones((2, 4)), np.eye(4), {"method": "wanda", "damping": 0.1}, TypeError, "damping"),
    ],
)
def test_prune_bad_input(W, H, kwargs, exc, match):
    kwargs = {"method": "wanda", **kwargs}
    with pytest.raises(exc, match=match):
        prune(W, H, **kwargs)


@pytest.mark.parametrize("method", sorted(sparseopt.layer.methods()))
def test_every_method_contract(method):
    """float32 in -> float32 out, valid 2:4 mask, loss = eq. 2 of W, inputs untouched,
    never below the brute-force optimum, +GD never worse than the method alone."""
    rng = np.random.default_rng(9)
    W_star, H, _ = random_layer(rng, 2, 8, dtype=np.float32, corr=1.0)
    W0, H0 = W_star.copy(), H.copy()
    res = prune(W_star, H, method=method)
    assert_valid_result(res, W_star, H, NM(2, 4))
    assert res.method == method and res.info["refine_steps"] == 0
    np.testing.assert_array_equal(W_star, W0)
    np.testing.assert_array_equal(H, H0)
    best, _ = brute_force_layer(W_star, H)
    assert best <= res.loss * (1 + 1e-6) + 1e-9
    gd = prune(W_star, H, method=method, refine_steps=50)
    assert gd.loss <= res.loss * (1 + 1e-5) + 1e-9
    assert len(gd.history["refine_loss"]) == 50
    # the same history keys for every method: one piece of code plots any result
    for r in (res, gd):
        assert {"objective", "time", "refine_loss"} <= set(r.history)
        it, curve = r.curve("objective")
        assert curve.dtype == np.float64 and len(curve) == len(r.history["time"])
        assert (len(curve) == 0) == (r.nit == 0)  # empty exactly for one-shot methods
        assert r.stop_reason
        assert 0 <= r.method_time <= r.time  # the method alone, before "+GD"
    assert len(res.history["refine_loss"]) == 0


def test_psd_tolerance_scales_with_the_precision_of_H():
    """A float32 H = X X' / n formed by a float32 product is a Hessian any GPU user would
    pass: accepted. Its rounding can leave eigenvalues below zero: certainly when X has
    fewer columns than rows (H singular; here 2048 x 1024), and depending on the BLAS for
    the square 4096 x 4096 X of the issue. The same rounding-size negative eigenvalue in a
    float64 H is refused (its tolerance is float64's)."""
    from sparseopt.validation import check_psd, psd_tolerance

    rng = np.random.default_rng(0)
    for d, r in ((4096, 4096), (2048, 1024)):
        X = rng.standard_normal((d, r), dtype=np.float32)
        H32 = X @ X.T / np.float32(r)
        H64 = H32.astype(np.float64)
        if d == r:
            # gamma_min > -psd_tolerance(H32): H + tol I has a float64 Cholesky factor (its
            # rounding, ~d eps64 |H|, is 1e-9 of tol); a 4096 x 4096 eigvalsh costs 6x as much
            H64[np.diag_indices(d)] += psd_tolerance(H32)
            np.linalg.cholesky(H64)  # raises LinAlgError when not positive definite
        else:
            gmin = float(np.linalg.eigvalsh(H64)[0])
            assert -gmin < psd_tolerance(H32)  # within the float32 tolerance, with room
        W = rng.standard_normal((4, d)).astype(np.float32)
        res = prune(W, H32, method="magnitude")
        assert NM(2, 4).satisfied(res.W)
    # the singular case does go below zero, where the old absolute tolerance refused it
    assert gmin < -1.1e-10 * float(np.max(np.diag(H32)))
    # a float64 H with an eigenvalue of the same size below zero is not PSD in float64
    v = rng.standard_normal(64)
    v /= np.linalg.norm(v)
    H64 = np.eye(64) + (gmin / float(np.max(np.diag(H32))) - 1.0) * np.outer(v, v)
    assert psd_tolerance(H64) < -np.linalg.eigvalsh(H64)[0] < psd_tolerance(H64, np.float32)
    with pytest.raises(ValueError, match="not positive semidefinite"):
        check_psd(H64)
    check_psd(H64, dtype=np.float32)  # the same matrix formed in float32 would pass


@pytest.mark.parametrize("method", sorted(sparseopt.layer.methods()))
def test_a_float64_symmetric_hessian_is_used_without_copy_and_never_written(method):
    """check_hessian hands a float64 symmetric H to the methods as is (an LLM Hessian is
    too large to copy); then no method, nor +GD, may write into it."""
    from sparseopt.layer.loss import check_hessian

    rng = np.random.default_rng(10)
    W_star, H, _ = random_layer(rng, 3, 8, corr=1.0)
    H = np.ascontiguousarray(0.5 * (H + H.T), dtype=np.float64)
    assert check_hessian(H) is H
    H0 = H.copy()
    prune(W_star, H, method=method, refine_steps=5)
    np.testing.assert_array_equal(H, H0)
    asym = H + 1e-3 * np.triu(np.ones_like(H), 1)
    assert check_hessian(asym) is not asym  # not symmetric: its symmetric part, a copy


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_check_hessian_symmetric_part_leaves_the_callers_h(lib, dtype):
    """An asymmetric H becomes (H + H') / 2 in float64, bit for bit the expression, in an
    array of its own (symmetrised in place: the float64 conversion of a float32 H, else a
    copy); the caller's H is unchanged. Fails if the caller's float64 H is symmetrised in
    place, or the result is not the expression's."""
    from sparseopt.layer.loss import check_hessian

    rng = np.random.default_rng(4)
    A = rng.standard_normal((70, 70)).astype(dtype)
    H = A @ A.T + 1e-3 * np.triu(np.ones((70, 70), dtype=dtype), 1)
    conv = (lambda a: a) if lib == "numpy" else pytest.importorskip("torch").from_numpy
    Ht, H0 = conv(H), H.copy()
    S = np.asarray(check_hessian(Ht))
    H64 = H0.astype(np.float64)
    assert S.dtype == np.float64 and S.tobytes() == (0.5 * (H64 + H64.T)).tobytes()
    np.testing.assert_array_equal(np.asarray(Ht), H0)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_row_blocks_give_the_same_masks_and_losses(lib, monkeypatch):
    """Masks, wanda / magnitude and the float64 losses are computed in blocks of rows (no
    whole-layer temporaries on LLM layers); with blocks of a few rows they equal the
    one-block results: masks exactly, losses to float64 summation order."""
    import sparseopt.backend as backend
    from sparseopt.backend import row_blocks
    from sparseopt.layer import layer_loss
    from sparseopt.layer.loss import base_loss

    rng = np.random.default_rng(3)
    W_star, H, _ = random_layer(rng, 37, 16)
    W_star[5, :4] = W_star[5, 0]  # ties: the smaller index wins in every block
    X = rng.standard_normal((37, 16))
    conv = (lambda a: a) if lib == "numpy" else pytest.importorskip("torch").from_numpy
    whole = {"nm": NM(2, 4).mask(conv(X)), "topk": TopK(5).mask(conv(X)),
             "wanda": prune(conv(W_star), conv(H), method="wanda"),
             "magnitude": prune(conv(W_star), conv(H), method="magnitude"),
             "loss": layer_loss(conv(X), conv(W_star), conv(H)),
             "base": base_loss(conv(W_star), conv(H))}
    assert len(row_blocks(37, 16)) == 1
    monkeypatch.setattr(backend, "ROW_BLOCK_ENTRIES", 40)  # blocks of 2 rows, one of 1
    assert [s.stop - s.start for s in row_blocks(37, 16)] == [2] * 18 + [1]
    np.testing.assert_array_equal(np.asarray(NM(2, 4).mask(conv(X))), np.asarray(whole["nm"]))
    np.testing.assert_array_equal(np.asarray(TopK(5).mask(conv(X))), np.asarray(whole["topk"]))
    for method in ("wanda", "magnitude"):
        res = prune(conv(W_star), conv(H), method=method)
        np.testing.assert_array_equal(np.asarray(res.mask), np.asarray(whole[method].mask))
        assert res.loss == pytest.approx(whole[method].loss, rel=1e-13)
    assert layer_loss(conv(X), conv(W_star), conv(H)) == pytest.approx(whole["loss"], rel=1e-13)
    assert base_loss(conv(W_star), conv(H)) == pytest.approx(whole["base"], rel=1e-13)


def test_assume_psd_skips_only_the_psd_test():
    """A non-PSD H is refused by default; ``assume_psd=True`` (for Gram matrices built by
    the caller, as the torch adapter's) skips that one test, not the others."""
    rng = np.random.default_rng(4)
    W_star = rng.standard_normal((4, 8))
    H = np.eye(8)
    H[0, 1] = H[1, 0] = 2.0  # eigenvalue -1
    with pytest.raises(ValueError, match="not positive semidefinite"):
        prune(W_star, H, method="wanda")
    res = prune(W_star, H, method="wanda", assume_psd=True)
    np.testing.assert_array_equal(res.mask, prune(W_star, np.eye(8), method="wanda").mask)
    with pytest.raises(ValueError, match="contains NaN"):
        prune(W_star, np.full((8, 8), np.nan), method="wanda", assume_psd=True)
    with pytest.raises(ValueError, match="assume_psd"):
        prune(W_star, np.eye(8), method="wanda", assume_psd="yes")


def test_masked_gd_assume_psd_skips_only_the_psd_test():
    """``masked_gd(..., assume_psd=True)`` (the torch adapter's +GD on its X X' / n sums)
    skips the PSD test of H and nothing else: a non-PSD H is refused by default and taken
    with it (eq. 5's steps), a non-symmetric H is symmetrised as without the flag, a
    non-finite one refused, and the flag must be a bool."""
    rng = np.random.default_rng(5)
    W_star = rng.standard_normal((3, 8))
    mask = np.tile([True, True, False, False], (3, 2))
    H = np.eye(8)
    H[0, 1] = H[1, 0] = 2.0  # eigenvalue -1
    with pytest.raises(ValueError, match="not positive semidefinite"):
        masked_gd(W_star, W_star, H, mask, 3, step=0.1)
    W = masked_gd(W_star, W_star, H, mask, 3, step=0.1, assume_psd=True)
    Hs = H.copy()
    W_ref = W_star * mask
    for _ in range(3):  # eq. 5 by hand
        W_ref = W_ref - 0.1 * mask * (2 * (W_ref - W_star) @ Hs)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=1e-14)
    asym = np.eye(8)
    asym[0, 1] = 0.5
    np.testing.assert_array_equal(masked_gd(W_star, W_star, asym, mask, 2, assume_psd=True),
                                  masked_gd(W_star, W_star, asym, mask, 2))
    with pytest.raises(ValueError, match="contains NaN"):
        masked_gd(W_star, W_star, np.full((8, 8), np.nan), mask, 1, assume_psd=True)
    with pytest.raises(ValueError, match="assume_psd"):
        masked_gd(W_star, W_star, np.eye(8), mask, 1, assume_psd=1)
