"""masked_optimum and prune(refine_steps="exact"): eq. 5 solved to its masked least-squares
optimum, checked against an independent per-row least-squares solve (issue 45 item 0)."""

import numpy as np
import pytest

from sparseopt.layer import check_refine_steps, layer_loss, masked_gd, prune
from sparseopt.layer.refine import choose_solver, masked_optimum
from sparseopt.patterns import NM

SOLVERS = ("pcg", "cholesky")


def _problem(d_out=24, d_in=64, n=400, spread=1.0, seed=0, dead=(), decay=0.0):
    """(W*, X, H = X X' / n, a random 2:4 mask): inputs with scales exp(spread * N(0, 1)),
    so ``spread`` sets the conditioning of H; ``decay``: mixed inputs whose singular values
    fall from 1 to exp(-decay) (ill-conditioned beyond diagonal scaling); ``dead`` inputs
    are never active."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d_in, n))
    if decay:
        U, _, Vt = np.linalg.svd(X, full_matrices=False)
        X = (U * np.exp(-decay * np.linspace(0, 1, d_in))) @ Vt * np.sqrt(n)
    X *= np.exp(spread * rng.standard_normal(d_in))[:, None]
    X[list(dead)] = 0.0
    H = X @ X.T / n
    W_star = rng.standard_normal((d_out, d_in))
    keep = np.argsort(rng.random((d_out, d_in // 4, 4)), axis=-1) < 2
    return W_star, X, H, keep.reshape(d_out, d_in)


def _lstsq_optimum(W_star, X, mask):
    """Per row: min over w_S of ||X_S' w_S - X' w*||, by numpy.linalg.lstsq on the data (no
    H, no normal equations): the brute-force reference, the minimum-norm solution."""
    ref = np.zeros_like(W_star)
    for i in range(W_star.shape[0]):
        S = mask[i]
        ref[i, S] = np.linalg.lstsq(X[S].T, X.T @ W_star[i], rcond=None)[0]
    return ref


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("spread", [0.0, 2.0])
def test_float64_equals_the_per_row_lstsq(solver, spread):
    W_star, X, H, mask = _problem(spread=spread)
    ref = _lstsq_optimum(W_star, X, mask)
    W, info = masked_optimum(W_star, W_star, H, mask, solver=solver)
    assert info["solver"] == solver and info["converged"] and info["rel_grad"] <= 1e-6
    L, L_ref = layer_loss(W, W_star, H), layer_loss(ref, W_star, H)
    # a gradient of 1e-6 leaves at most |g|^2 / gamma_min(H_SS) above the optimum: PCG stops
    # there, Cholesky solves to rounding
    assert L_ref * (1 - 1e-12) <= L <= L_ref * (1 + (1e-12 if solver == "cholesky" else 1e-7))
    # the optimum is unique (full-rank H_SS): the weights themselves agree
    scale = np.abs(ref).max()
    tol = 1e-8 if solver == "cholesky" else 1e-4 * (1 + 100 * spread)
    np.testing.assert_allclose(W, ref, atol=tol * scale)


@pytest.mark.parametrize("solver", SOLVERS)
def test_float32_keeps_its_dtype_and_reaches_the_optimum_loss(solver):
    W_star, X, H, mask = _problem(spread=1.5, seed=1)
    W32 = W_star.astype(np.float32)
    W, info = masked_optimum(W32, W32, H, mask, solver=solver)
    assert W.dtype == np.float32 and info["converged"]
    ref = _lstsq_optimum(W32.astype(np.float64), X, mask)
    L, L_ref = layer_loss(W, W32, H), layer_loss(ref, W32, H)
    # the float64 optimum rounded to float32: within float32 rounding of the optimum
    assert L_ref <= L <= L_ref * (1 + 1e-5)
    np.testing.assert_allclose(W, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("solver", SOLVERS)
def test_mask_is_kept_exactly_and_the_loss_never_exceeds_gd_or_the_start(dtype, solver):
    W_star, X, H, mask = _problem(spread=1.0, seed=2)
    W_star = W_star.astype(dtype)
    rng = np.random.default_rng(5)
    start = rng.standard_normal(W_star.shape).astype(dtype)  # non-zero outside the mask too
    W, info = masked_optimum(start, W_star, H, mask, solver=solver)
    assert W.dtype == dtype
    assert np.count_nonzero(W[~mask]) == 0
    assert np.count_nonzero(W[mask]) == mask.sum()
    L = layer_loss(W, W_star, H)
    assert L <= layer_loss(np.where(mask, start, 0), W_star, H)
    assert L <= layer_loss(masked_gd(start, W_star, H, mask, 100), W_star, H)
    # the recorded losses start at the start's and end near the final one
    losses = info["losses"]
    assert losses[0] == pytest.approx(layer_loss(np.where(mask, start, 0), W_star, H),
                                      rel=1e-6)
    assert losses[-1] == pytest.approx(L, rel=1e-4)
    assert np.all(np.diff(losses) <= 1e-9 * losses[0])  # PCG / Cholesky never go uphill


def test_cholesky_and_pcg_agree_on_an_ill_conditioned_hessian():
    W_star, X, H, mask = _problem(d_out=16, d_in=96, n=2000, spread=1.0, seed=3, decay=8.0)
    cond = np.linalg.cond(H)
    assert cond > 1e6  # the problem is what the test says it is
    Wc, ic = masked_optimum(W_star, W_star, H, mask, solver="cholesky")
    Wp, ip = masked_optimum(W_star, W_star, H, mask, solver="pcg")
    assert ic["converged"] and ip["converged"] and ip["iterations"] > 5
    Lc, Lp = layer_loss(Wc, W_star, H), layer_loss(Wp, W_star, H)
    # cond(H) ~ 1e10: a 1e-6 gradient allows PCG a loss 1e-6 above Cholesky's, no more
    assert Lc * (1 - 1e-12) <= Lp <= Lc * (1 + 1e-6)
    ref = _lstsq_optimum(W_star, X, mask)
    assert Lc <= layer_loss(ref, W_star, H) * (1 + 1e-10)


@pytest.mark.parametrize("solver", SOLVERS)
def test_dead_inputs_and_rank_deficient_hessians(solver):
    # 40 samples for 64 inputs (every H_SS of 32 columns full rank... but not H) and two
    # inputs never active: zero rows and columns of H
    W_star, X, H, mask = _problem(d_in=64, n=40, seed=4, dead=(3, 50))
    assert np.all(H[3] == 0) and np.all(H[:, 50] == 0)
    start = np.where(mask, W_star, 0)
    W, info = masked_optimum(start, W_star, H, mask, solver=solver)
    assert np.all(np.isfinite(W)) and info["converged"]
    ref = _lstsq_optimum(W_star, X, mask)
    assert layer_loss(W, W_star, H) <= layer_loss(ref, W_star, H) * (1 + 1e-8) + 1e-12
    # dead weights keep their starting values (they change nothing)
    np.testing.assert_array_equal(W[:, [3, 50]], start[:, [3, 50]])


def test_singular_support_block_is_solved_on_its_range():
    # 12 samples: each row's H_SS (32 x 32) has rank 12; the optimum loss is still reached
    W_star, X, H, mask = _problem(d_in=64, n=12, seed=6)
    ref = _lstsq_optimum(W_star, X, mask)
    L_ref = layer_loss(ref, W_star, H)
    for solver in SOLVERS:
        W, info = masked_optimum(W_star, W_star, H, mask, solver=solver)
        assert info["converged"], solver
        assert layer_loss(W, W_star, H) <= L_ref * (1 + 1e-8) + 1e-10, solver


def test_jacobi_preconditioner_solves_a_diagonal_hessian_in_one_iteration():
    # mutation check: without the preconditioner, CG needs one iteration per distinct
    # diagonal value in a row's support (here 32)
    rng = np.random.default_rng(7)
    d = 64
    H = np.diag(np.exp(3 * rng.standard_normal(d)))
    W_star = rng.standard_normal((8, d))
    mask = np.zeros((8, d), dtype=bool)
    mask[:, ::2] = True
    W, info = masked_optimum(np.zeros_like(W_star), W_star, H, mask, solver="pcg")
    assert info["iterations"] == 1 and info["rel_grad"] <= 1e-12
    np.testing.assert_allclose(W, np.where(mask, W_star, 0), rtol=1e-12)


def test_start_at_the_optimum_costs_no_iteration_and_max_iter_bounds_the_work():
    W_star, X, H, mask = _problem(spread=1.0, seed=8)
    W, _ = masked_optimum(W_star, W_star, H, mask, solver="cholesky")
    W2, info = masked_optimum(W, W_star, H, mask, solver="pcg")
    assert info["iterations"] == 0 and not info["kept_start"]
    np.testing.assert_array_equal(W2, W)
    W3, info3 = masked_optimum(W_star, W_star, H, mask, solver="pcg", max_iter=2)
    assert info3["iterations"] == 2 and not info3["converged"] and info3["rel_grad"] > 1e-6
    assert np.count_nonzero(W3[~mask]) == 0


def test_choose_solver_follows_the_flop_rule():
    # 2:4 at d_in = 576 (SmolLM2 attention, gate, up): Cholesky; at d_in = 1536 (its down
    # projection) and 14336 (an LLM's): PCG; a sparse support favours Cholesky
    assert choose_solver(576, 576, 288) == "cholesky"
    assert choose_solver(1536, 576, 288) == "cholesky"
    assert choose_solver(576, 1536, 768) == "pcg"
    assert choose_solver(4096, 14336, 7168) == "pcg"
    assert choose_solver(4096, 14336, 700) == "cholesky"


def test_prune_exact_records_its_solve_and_int_steps_are_unchanged():
    W_star, X, H, mask = _problem(d_out=16, d_in=64, spread=1.0, seed=9)
    exact = prune(W_star, H, method="wanda", refine_steps="exact")
    assert exact.info["refine_steps"] == "exact"
    assert exact.info["refine_solver"] in SOLVERS and exact.info["refine_converged"]
    assert exact.info["refine_rel_grad"] <= 1e-6
    hist = exact.history["refine_loss"]
    assert len(hist) == exact.info["refine_iterations"] + 1 + (
        exact.info["refine_solver"] == "cholesky")
    one_shot = prune(W_star, H, method="wanda")
    assert hist[0] == pytest.approx(one_shot.loss, rel=1e-9)
    ref = _lstsq_optimum(W_star, X, one_shot.mask)
    assert exact.loss == pytest.approx(layer_loss(ref, W_star, H), rel=1e-9)
    gd = prune(W_star, H, method="wanda", refine_steps=100)
    assert exact.loss <= gd.loss
    # the fixed-step +GD is eq. 5 as before: masked_gd's bits
    np.testing.assert_array_equal(
        gd.W, masked_gd(one_shot.W, W_star, H, one_shot.mask, 100))


def test_bad_arguments_raise_naming_them():
    W_star, X, H, mask = _problem(d_out=4, d_in=16, seed=10)
    with pytest.raises(ValueError, match="tol"):
        masked_optimum(W_star, W_star, H, mask, tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        masked_optimum(W_star, W_star, H, mask, max_iter=-1)
    with pytest.raises(ValueError, match="solver"):
        masked_optimum(W_star, W_star, H, mask, solver="lu")
    with pytest.raises(ValueError, match="mask"):
        masked_optimum(W_star, W_star, H, mask[:, :8])
    with pytest.raises(ValueError, match="mask"):
        masked_optimum(W_star, W_star, H, mask.astype(np.int8))
    with pytest.raises(ValueError, match="W_star"):
        masked_optimum(W_star, W_star[:2], H, mask)
    with pytest.raises(ValueError, match="H"):
        masked_optimum(W_star, W_star, H[:8, :8], mask)
    with pytest.raises(ValueError, match="positive semidefinite"):
        masked_optimum(W_star, W_star, -H, mask)
    with pytest.raises(ValueError, match="assume_psd"):
        masked_optimum(W_star, W_star, H, mask, assume_psd=1)
    for bad in ("exakt", -1, 2.5, True, None):
        with pytest.raises(ValueError, match="refine_steps"):
            prune(W_star, H, method="wanda", pattern=NM(2, 4), refine_steps=bad)
        with pytest.raises(ValueError, match="refine_steps"):
            check_refine_steps(bad)
    assert check_refine_steps(np.int64(3)) == 3 and check_refine_steps("exact") == "exact"


@pytest.mark.parametrize("compilation", ["parallel", "serial"])
def test_row_cholesky_kernel_equals_its_lapack_twin(compilation):
    """The Numba rows (potrf, then substitution) against the NumPy twin (potrf / potrs through
    SciPy), with dead inputs and rows of unequal support; both compilations of the kernel.
    Fails on a wrong gather, jitter or substitution, or a write outside the live support."""
    from sparseopt.layer.refine import _masked_row_cholesky_lapack, _row_cholesky_solves

    W_star, X, H, mask = _problem(d_out=40, d_in=96, spread=1.0, dead=(3, 50), seed=5)
    rng = np.random.default_rng(1)
    mask &= rng.random(mask.shape) < rng.uniform(0.3, 1.0, (mask.shape[0], 1))
    mask[7] = False  # an empty row
    support = mask & (np.diag(H) > 0)[None, :]
    B = (W_star @ H) * mask
    start = rng.standard_normal(W_star.shape)
    twin = _masked_row_cholesky_lapack(start.copy(), B, H, mask)
    failed = np.zeros(len(B), dtype=bool)
    got = getattr(_row_cholesky_solves, compilation)(start.copy(), B, H, support, failed)
    assert not failed.any()
    np.testing.assert_allclose(got, twin, rtol=1e-10, atol=1e-10 * np.abs(twin).max())
    np.testing.assert_array_equal(got[~support], start[~support])


def test_row_cholesky_names_the_row_whose_block_has_no_factor():
    """An indefinite H (the PSD test skipped; 200 rows: the parallel compilation): the error
    names the first row whose H_SS has no factor, as the NumPy twin does. Fails if a failed
    factorisation is lost (a Numba exception in a parallel loop can be) and garbage kept."""
    from sparseopt.layer.refine import _masked_row_cholesky_lapack, _masked_row_cholesky_numpy

    W_star, _, H, mask = _problem(d_out=200, d_in=64, seed=2)
    H = H.copy()
    H[10, 10] = 1e-3 * H[10, 10]
    H[10, 11] = H[11, 10] = 10.0 * np.sqrt(H[11, 11])  # an indefinite 2 x 2 block
    mask[:] = False
    mask[:, 12:40] = True
    mask[123, [10, 11]] = True
    B = (W_star @ H) * mask
    for solve in (_masked_row_cholesky_lapack, _masked_row_cholesky_numpy):
        with pytest.raises(ValueError, match="support of row 123 has no Cholesky factor"):
            solve(np.zeros_like(W_star), B, H, mask)
    with pytest.raises(ValueError, match="support of row 123 .* not positive semidefinite"):
        masked_optimum(W_star, W_star, H, mask, solver="cholesky", assume_psd=True)
