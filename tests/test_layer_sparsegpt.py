"""SparseGPT against an independent, unblocked OBS sweep with explicit inverse-Hessian updates."""

import numpy as np
import pytest

from sparseopt import NM, TopK, prune
from sparseopt.layer.sparsegpt import inverse_hessian_factor

from test_layer_core import (
    TOY_GREEDY,
    TOY_H,
    TOY_W,
    assert_valid_result,
    brute_force_layer,
    random_layer,
)


def obs_sweep_reference(W_star, H, n, m, damping):
    """Straightforward OBS: one column at a time, explicit inverse of the remaining Hessian.

    Hinv is always the inverse of H[j:, j:]; after column j is fixed it is updated by the
    Schur-complement rule Hinv[1:,1:] - Hinv[1:,0] Hinv[0,1:] / Hinv[0,0]. The N:M choice of
    a group uses the saliency w_k^2 / [(H[k:, k:])^{-1}]_00 of its m columns, evaluated on
    the weights as updated when the sweep reaches the group's first column.
    """
    W = np.array(W_star, dtype=np.float64)
    H = np.array(H, dtype=np.float64)
    d = H.shape[0]
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    H += damping * np.mean(np.diag(H)) * np.eye(d)
    Hinv = np.linalg.inv(H)
    keep = np.zeros(W.shape, dtype=bool)

    def eliminate(T):
        return T[1:, 1:] - np.outer(T[1:, 0], T[0, 1:]) / T[0, 0]

    for j in range(d):
        if j % m == 0:
            T, dg = Hinv.copy(), []
            for _ in range(m):
                dg.append(T[0, 0])
                T = eliminate(T)
            score = W[:, j:j + m] ** 2 / np.array(dg)
            for r in range(W.shape[0]):
                keep[r, j + np.argsort(-score[r], kind="stable")[:n]] = True
        q = np.where(keep[:, j], W[:, j], 0.0)
        err = (W[:, j] - q) / Hinv[0, 0]
        W[:, j:] -= np.outer(err, Hinv[0, :])
        W[:, j] = q
        Hinv = eliminate(Hinv)
    return W, keep


def test_inverse_hessian_factor_is_upper_cholesky_of_inverse():
    rng = np.random.default_rng(0)
    _, H, _ = random_layer(rng, 1, 12)
    U, dead, damp = inverse_hessian_factor(H, damping=0.05)
    Hd = H + damp * np.eye(12)
    U_ref = np.linalg.cholesky(np.linalg.inv(Hd)).T  # upper factor, the reference's route
    np.testing.assert_allclose(U, U_ref, rtol=1e-10, atol=1e-12)
    assert not dead.any() and damp == pytest.approx(0.05 * np.mean(np.diag(H)))
    np.testing.assert_allclose(U.T @ U @ Hd, np.eye(12), atol=1e-10)


@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (2, 3), (1, 2)])
@pytest.mark.parametrize("blocksize", [None, 8])
def test_sparsegpt_matches_unblocked_obs(n, m, blocksize):
    rng = np.random.default_rng(10 * n + m)
    d_in = 24 if m == 3 else 32
    W_star, H, _ = random_layer(rng, 5, d_in, n_samples=3 * d_in, corr=1.0)
    opts = {} if blocksize is None else {"blocksize": blocksize if blocksize % m == 0 else 3 * m}
    res = prune(W_star, H, method="sparsegpt", pattern=NM(n, m), damping=0.02, **opts)
    W_ref, keep_ref = obs_sweep_reference(W_star, H, n, m, 0.02)
    np.testing.assert_array_equal(res.mask, keep_ref)
    np.testing.assert_allclose(res.W, W_ref, rtol=1e-9, atol=1e-10)
    assert_valid_result(res, W_star, H, NM(n, m))


def test_sparsegpt_blocksize_does_not_change_result():
    rng = np.random.default_rng(1)
    W_star, H, _ = random_layer(rng, 6, 48, corr=1.0)
    results = [prune(W_star, H, method="sparsegpt", blocksize=b) for b in (4, 12, 128)]
    for r in results[1:]:
        np.testing.assert_array_equal(r.mask, results[0].mask)
        np.testing.assert_allclose(r.W, results[0].W, rtol=1e-10, atol=1e-12)


def test_sparsegpt_against_bruteforce_and_refinement():
    rng = np.random.default_rng(2)
    for _ in range(3):
        W_star, H, _ = random_layer(rng, 2, 8, corr=1.0)
        best, _ = brute_force_layer(W_star, H)
        res = prune(W_star, H, method="sparsegpt")
        assert_valid_result(res, W_star, H, NM(2, 4))
        assert best <= res.loss + 1e-12
        ref = prune(W_star, H, method="sparsegpt", refine_steps=500)
        assert best - 1e-10 <= ref.loss <= res.loss + 1e-12


def test_sparsegpt_toy_problem_sec41():
    """prox24-kubler Sec. 4.1: SparseGPT absorbs the first '2' into the last weight, then
    drops the combined weight; it ends at the Wanda mask (0,5,3,0,0,5,5,0)."""
    # the toy H is singular (inputs 4 and 8 coincide): a tiny damping keeps it invertible
    res = prune(TOY_W, TOY_H, method="sparsegpt", damping=1e-9)
    np.testing.assert_allclose(res.W, TOY_GREEDY, atol=1e-6)
    res_damped = prune(TOY_W, TOY_H, method="sparsegpt")
    np.testing.assert_array_equal(res_damped.mask, TOY_GREEDY != 0)


def test_sparsegpt_equals_wanda_for_diagonal_hessian_without_damping():
    rng = np.random.default_rng(3)
    W_star = rng.standard_normal((4, 16))
    H = np.diag(rng.uniform(0.2, 2.0, 16))
    a = prune(W_star, H, method="sparsegpt", damping=0.0)
    b = prune(W_star, H, method="wanda")
    np.testing.assert_array_equal(a.mask, b.mask)
    np.testing.assert_allclose(a.W, b.W, rtol=1e-12)


def test_sparsegpt_dead_inputs():
    rng = np.random.default_rng(4)
    W_star, H, _ = random_layer(rng, 3, 8, corr=1.0)
    H[2, :] = H[:, 2] = 0.0
    H[5, :] = H[:, 5] = 0.0
    res = prune(W_star, H, method="sparsegpt")
    assert np.all(res.W[:, [2, 5]] == 0)
    assert res.info["n_dead"] == 2
    W_ref, keep_ref = obs_sweep_reference(W_star, H, 2, 4, 0.01)
    np.testing.assert_allclose(res.W, W_ref, rtol=1e-9, atol=1e-10)
    assert_valid_result(res, W_star, H, NM(2, 4))


def test_sparsegpt_float32():
    rng = np.random.default_rng(5)
    W_star, H, _ = random_layer(rng, 8, 64, corr=1.0)
    W32 = W_star.astype(np.float32)
    r32 = prune(W32, H.astype(np.float32), method="sparsegpt")
    r64 = prune(W32.astype(np.float64), H, method="sparsegpt")
    assert r32.W.dtype == np.float32
    assert np.mean(r32.mask == r64.mask) > 0.97  # near-ties may flip in float32
    assert r32.loss == pytest.approx(r64.loss, rel=1e-2)


def test_sparsegpt_bad_input():
    W = np.ones((2, 8))
    with pytest.raises(ValueError, match="damping"):
        prune(W, np.eye(8), method="sparsegpt", damping=-0.1)
    with pytest.raises(ValueError, match="blocksize"):
        prune(W, np.eye(8), method="sparsegpt", blocksize=6)
    with pytest.raises(ValueError, match="NM"):
        prune(W, np.eye(8), method="sparsegpt", pattern=TopK(2))
    indefinite = np.eye(8)
    indefinite[0, 1] = indefinite[1, 0] = 3.0
    with pytest.raises(ValueError, match="not positive definite"):
        prune(W, indefinite, method="sparsegpt")
    with pytest.raises(ValueError, match="positive semidefinite"):
        prune(W, indefinite, method="sparsegpt", refine_steps=3)  # GD needs a PSD H


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,m", [(2, 4), (1, 3)])
def test_sweep_kernel_matches_numpy_twin(dtype, n, m):
    """Numba _sweep_block vs _sweep_block_numpy: random values of both signs, exact zeros
    and exact ties in the saliency (equal |w| in columns with equal U_jj)."""
    from sparseopt.layer.sparsegpt import _sweep_block, _sweep_block_numpy

    rng = np.random.default_rng(6)
    B, d_out = 4 * m, 7
    _, H, _ = random_layer(rng, 1, B, corr=1.0)
    U, _, _ = inverse_hessian_factor(H, dtype=dtype)
    U[:m, :m] = np.diag(np.full(m, U[0, 0]))  # equal diagonal: ties in the first group
    W1 = rng.standard_normal((B, d_out)).astype(dtype)
    W1[:m, 0] = dtype(1.5) * np.array([1, -1, 1, -1][:m], dtype=dtype)  # exact ties
    W1[:m, 1] = 0  # all-zero group in one row
    W1[m + 1, 2:4] = 0
    outs = []
    for kernel in (_sweep_block, _sweep_block_numpy):
        Wk = W1.copy()
        keep = np.zeros((B, d_out), dtype=bool)
        err = np.zeros((B, d_out), dtype=dtype)
        kernel(Wk, U, n, m, keep, err)
        outs.append((Wk, keep, err))
    (Wa, ka, ea), (Wb, kb, eb) = outs
    np.testing.assert_array_equal(ka, kb)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(Wa, Wb, rtol=tol, atol=tol)
    np.testing.assert_allclose(ea, eb, rtol=tol, atol=tol)
    assert Wa.dtype == dtype and ea.dtype == dtype
    # ties go to the smaller index: row 0 of the tied group keeps its first n columns
    np.testing.assert_array_equal(ka[:m, 0], np.arange(m) < n)
    assert np.all(ka[:m].sum(axis=0) == n)
