"""prox24-kubler Alg. 2 at layer level: toy optimum, brute force, schedule, rescaling, cap."""

from dataclasses import replace

import numpy as np
import pytest

from sparseopt import NM, TopK, prune
from sparseopt.layer import layer_loss
from sparseopt.layer.prox import SCHEDULES, ProxSchedule, rescale_wanda

from test_layer_core import (
    TOY_H,
    TOY_OPT,
    TOY_W,
    assert_valid_result,
    brute_force_layer,
    masked_optimum,
    powerlaw_layer,
    random_layer,
    row_loss,
)


def test_prox_toy_problem_sec41_reaches_optimum():
    """Sec. 4.1: prox finds the optimal mask (0,5,0,4,0,5,5,0) that Wanda and SparseGPT miss;
    masked gradient steps then reach the optimal weights."""
    res = prune(TOY_W, TOY_H, method="prox")
    np.testing.assert_array_equal(res.mask, TOY_OPT != 0)
    assert res.info["stop_reason"] == "W is N:M" and not res.info["projected"]
    refined = prune(TOY_W, TOY_H, method="prox", refine_steps=1000)
    np.testing.assert_allclose(refined.W, TOY_OPT, atol=1e-8)
    best, _ = brute_force_layer(TOY_W, TOY_H)
    assert refined.loss == pytest.approx(best, rel=1e-10)


def test_prox_against_bruteforce():
    """Valid, never below the brute-force optimum, and (seeded, 8 single-row layers with
    strong correlations) optimal more often than Wanda+GD: prox24-kubler Sec. 4.1 / Fig. 2."""
    rng = np.random.default_rng(0)
    wins = {"prox": 0, "wanda": 0}
    for _ in range(8):
        W_star, H, _ = random_layer(rng, 1, 8, corr=1.5)
        best, _ = brute_force_layer(W_star, H)
        for method in wins:
            res = prune(W_star, H, method=method, refine_steps=1500)
            assert_valid_result(res, W_star, H, NM(2, 4))
            assert best <= res.loss + 1e-10
            wins[method] += res.loss <= best * (1 + 1e-6)
    assert wins["prox"] >= 3 and wins["prox"] > wins["wanda"], wins


#: The stop reason of a fast-schedule run that stopped at ``stop_fraction`` of the groups.
STOPPED_AT_FRACTION = "nm_fraction >= stop_fraction (projected onto the pattern)"


def test_prox_fast_schedule_against_the_paper_schedule():
    """The default schedule "fast" (FISTA, beta_start 1.2, beta 1.055, beta_tail 1.5)
    against Alg. 2 as published (schedule="paper": plain, beta 1.01) on six correlated
    synthetic layers, both + 300 masked GD steps: at most a quarter of the iterations, the
    loss within 1% of the paper schedule's on every layer and within 0.5% on average (the
    masks differ in near-tied groups), the toy optimum still found. The same growth without
    the momentum ends 3.9% above the paper's on average (measured with beta_tail 2.5), so
    the bound sees a schedule that drops it."""
    from sparseopt.layer.prox import SCHEDULES

    from sparseopt.problems import correlated_hessian

    assert SCHEDULES["fast"].momentum == "fista"
    ratios = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        W, H = rng.standard_normal((32, 128)), correlated_hessian(128, seed=seed + 1)
        paper = prune(W, H, method="prox", refine_steps=300, schedule="paper")
        fast = prune(W, H, method="prox", refine_steps=300)  # the default
        assert paper.info["momentum"] == "plain" and paper.info["beta"] == 1.01
        assert fast.info["momentum"] == "fista" and fast.info["schedule"] == "fast"
        # stopped at 99% of the groups N:M (the rest projected) or with all of them
        assert fast.info["stop_reason"] in ("W is N:M", STOPPED_AT_FRACTION)
        assert fast.nit <= paper.nit / 4, (fast.nit, paper.nit)
        ratios.append(fast.loss / paper.loss)
    assert max(ratios) <= 1.01 and np.mean(ratios) <= 1.005, ratios
    toy = prune(TOY_W, TOY_H, method="prox", refine_steps=1000)
    np.testing.assert_allclose(toy.W, TOY_OPT, atol=1e-8)


@pytest.mark.parametrize("start", ["wanda", "sparsegpt"])
def test_prox_warm_start_leaves_the_mask_it_starts_from(start):
    """Sec. 4.1's toy layer: Wanda and SparseGPT miss the optimal mask; prox started from
    their pruned weights (already 2:4) still takes iterations, leaves their mask and finds
    the optimum, as from W*. A solver that returned a start in the pattern at once fails."""
    first = prune(TOY_W, TOY_H, method=start)
    assert not np.array_equal(first.mask, TOY_OPT != 0)
    res = prune(TOY_W, TOY_H, method="prox", start=start, refine_steps=1000)
    assert res.info["start"] == start and res.nit >= 1
    assert res.info["stop_reason"] == "W is N:M" and not res.info["projected"]
    np.testing.assert_array_equal(res.mask, TOY_OPT != 0)
    np.testing.assert_allclose(res.W, TOY_OPT, atol=1e-8)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prox_warm_start_begins_at_the_pruned_weights(lib, dtype):
    """max_iter=0 returns the first iterate: W* for start="dense", the weights of
    prune(method=start) for a warm start (rescaled and back, so to rounding), in W's dtype
    and array library; with iterations the run is deterministic and ends 2:4."""
    rng = np.random.default_rng(7)
    W_star, H, _ = random_layer(rng, 12, 32, corr=1.0)
    W_star = W_star.astype(dtype)
    conv = (lambda a: a) if lib == "numpy" else pytest.importorskip("torch").from_numpy
    W_c, H_c = conv(W_star), conv(H)
    for start in ("dense", "wanda", "sparsegpt"):
        first = W_star if start == "dense" else np.asarray(prune(W_c, H_c, method=start).W)
        res = prune(W_c, H_c, method="prox", start=start, max_iter=0)
        assert res.nit == 0 and res.info["start"] == start
        assert type(res.W) is type(W_c)
        got = np.asarray(res.W)
        assert got.dtype == np.dtype(dtype)
        # entries off the start's 2:4 mask are zero in both; the kept ones to rounding
        kept = np.asarray(res.mask)
        np.testing.assert_allclose(got[kept], first[kept], rtol=4 * np.finfo(dtype).eps)
        runs = [prune(W_c, H_c, method="prox", start=start) for _ in range(2)]
        np.testing.assert_array_equal(np.asarray(runs[0].W), np.asarray(runs[1].W))
        assert runs[0].info["stop_reason"] == "W is N:M" and runs[0].nit >= 1
        assert NM(2, 4).satisfied(np.asarray(runs[0].W))


def test_prox_schedule_values_can_be_overridden():
    """``replace`` on a named schedule changes single values; the others stay."""
    rng = np.random.default_rng(6)
    W_star, H, _ = random_layer(rng, 2, 16, corr=1.0)
    res = prune(W_star, H, method="prox", schedule=replace(SCHEDULES["fast"], beta_tail=2.0))
    assert (res.info["momentum"], res.info["beta"], res.info["beta_start"],
            res.info["beta_tail"]) == ("fista", 1.055, 1.2, 2.0)
    plain = prune(W_star, H, method="prox", schedule=replace(
        SCHEDULES["fast"], momentum="plain", beta=1.05, beta_clip=None))
    assert plain.info["momentum"] == "plain" and plain.info["restarts"] == 0
    paper = prune(W_star, H, method="prox", schedule=replace(
        SCHEDULES["paper"], beta=1.05, beta_start=1.2, beta_tail=1.5, clip="auto",
        stop_fraction=0.99))
    np.testing.assert_array_equal(paper.W, plain.W)  # the same schedule, built two ways


@pytest.mark.parametrize("clip", [0, "auto"])
def test_prox_stop_fraction_projects_the_iterate_it_stops_at(clip):
    """stop_fraction: the run stops at the first iterate with that fraction of N:M groups
    and projects it, the result of the same run capped there (max_iter, the other way to
    project); the paper schedule keeps Alg. 2's stop, the fast one stops at 99%."""
    from sparseopt.layer.prox import SCHEDULES

    assert SCHEDULES["paper"].stop_fraction == 1.0
    assert SCHEDULES["fast"].stop_fraction == 0.99
    rng = np.random.default_rng(4)
    W_star, H = powerlaw_layer(rng, 32, 128)
    full = prune(W_star, H, method="prox",
                 schedule=replace(SCHEDULES["fast"], clip=clip, stop_fraction=1.0))
    frac = full.history["nm_fraction"]
    k = int(np.argmax(frac >= 0.9)) + 1
    assert frac[k - 1] < 1.0
    res = prune(W_star, H, method="prox",
                schedule=replace(SCHEDULES["fast"], clip=clip, stop_fraction=0.9))
    assert res.nit == k and res.info["projected"] and res.info["stop_fraction"] == 0.9
    assert res.info["stop_reason"] == "nm_fraction >= stop_fraction (projected onto the pattern)"
    capped = prune(W_star, H, method="prox", max_iter=k,
                   schedule=replace(SCHEDULES["fast"], clip=clip, stop_fraction=1.0))
    assert capped.info["projected"]
    np.testing.assert_array_equal(res.W, capped.W)
    np.testing.assert_array_equal(res.mask, capped.mask)
    assert NM(2, 4).satisfied(res.W)
    assert not full.info["projected"] and full.info["stop_reason"] == "W is N:M"
    paper = prune(W_star, H, method="prox", schedule="paper", max_iter=2)
    assert paper.info["stop_fraction"] == 1.0
    assert prune(W_star, H, method="prox").info["stop_fraction"] == 0.99


def test_prox_history_schedule_and_invariant_loss():
    rng = np.random.default_rng(1)
    W_star, H, _ = random_layer(rng, 3, 16, corr=1.0)
    res = prune(W_star, H, method="prox", lam0=0.02,
                schedule=replace(SCHEDULES["paper"], beta=1.05))
    h = res.history
    K = res.info["nit"]
    assert K > 0 and all(h[k].shape == (K,) for k in ("lam", "loss", "nm_fraction", "time"))
    np.testing.assert_allclose(h["lam"], 0.02 * 1.05 ** np.arange(K), rtol=1e-12)
    assert h["nm_fraction"][-1] == 1.0 and np.all(h["nm_fraction"][:-1] < 1.0)
    assert np.all(np.diff(h["time"]) >= 0)
    # the rescaling leaves L invariant: the last recorded loss (rescaled space) is the
    # loss of the returned, unscaled W
    assert h["loss"][-1] == pytest.approx(res.loss, rel=1e-9)
    assert res.info["lam_final"] == pytest.approx(h["lam"][-1])


def test_prox_history_loss_is_loss_of_iterates():
    """Re-run with max_iter = k and compare the recorded loss of iterate k (no rescaling, so
    the projected k-th iterate's unprojected loss is the k-th history entry). Plain proximal
    gradient: with FISTA the entries k < K are f at the extrapolated points (proxgrad)."""
    rng = np.random.default_rng(2)
    W_star, H, _ = random_layer(rng, 2, 8, corr=1.0)
    full = prune(W_star, H, method="prox", rescale=False, schedule="paper")
    for k in (1, 3):
        short = prune(W_star, H, method="prox", rescale=False, max_iter=k, schedule="paper")
        assert short.info["nit"] == k
        np.testing.assert_allclose(short.history["loss"], full.history["loss"][:k], rtol=1e-10)


def test_prox_max_iter_cap_projects():
    rng = np.random.default_rng(3)
    W_star, H, _ = random_layer(rng, 3, 16)
    res = prune(W_star, H, method="prox", max_iter=2)
    assert res.info["projected"] and res.info["nit"] == 2
    assert res.info["stop_reason"].startswith("max_iter")
    assert_valid_result(res, W_star, H, NM(2, 4))
    zero = prune(W_star, H, method="prox", max_iter=0)  # plain projection of rescaled W*
    np.testing.assert_array_equal(zero.mask, prune(W_star, H, method="wanda").mask)


def test_prox_lam_tilde_eq15():
    rng = np.random.default_rng(4)
    W_star, H, _ = random_layer(rng, 2, 8)
    Wt, _, _ = rescale_wanda(W_star, H)
    res = prune(W_star, H, method="prox", lam_tilde=0.005)
    assert res.info["lam0"] == pytest.approx(0.005 / np.mean(np.abs(Wt)))
    assert res.history["lam"][0] == pytest.approx(res.info["lam0"])
    res2 = prune(W_star, H, method="prox", lam_tilde=0.005, rescale=False)
    assert res2.info["lam0"] == pytest.approx(0.005 / np.mean(np.abs(W_star)))


def test_prox_scale_covariance():
    """For 2:4, prox(c z, lam / c) = c prox(z, lam) (Sec. 4.2) and the gradient step is
    linear, so prox pruning of c W* with lam0 / c returns c times the result for W*."""
    rng = np.random.default_rng(5)
    W_star, H, _ = random_layer(rng, 2, 16, corr=1.0)
    a = prune(W_star, H, method="prox", lam0=0.01)
    b = prune(4.0 * W_star, H, method="prox", lam0=0.0025)
    np.testing.assert_array_equal(a.mask, b.mask)
    np.testing.assert_allclose(b.W, 4.0 * a.W, rtol=1e-7, atol=1e-9)
    assert a.info["nit"] == b.info["nit"]


def test_prox_rescaling_makes_input_scaling_irrelevant():
    """Scaling input j by a_j (H -> D H D, W* -> W* D^{-1}) describes the same layer. With the
    Wanda rescaling on, the pruned weights transform the same way."""
    rng = np.random.default_rng(6)
    W_star, H, _ = random_layer(rng, 2, 16, corr=1.0)
    a = rng.uniform(0.3, 3.0, 16)
    r1 = prune(W_star, H, method="prox")
    r2 = prune(W_star / a, H * np.outer(a, a), method="prox")
    np.testing.assert_array_equal(r1.mask, r2.mask)
    np.testing.assert_allclose(r2.W, r1.W / a, rtol=1e-6, atol=1e-9)
    assert r2.loss == pytest.approx(r1.loss, rel=1e-6)


def test_prox_float32_and_other_patterns():
    rng = np.random.default_rng(7)
    W_star, H, _ = random_layer(rng, 3, 24, dtype=np.float32, corr=1.0)
    res = prune(W_star, H, method="prox", refine_steps=20)
    assert res.W.dtype == np.float32
    assert_valid_result(res, W_star, H, NM(2, 4))
    W64 = W_star.astype(np.float64)
    for pat, cols in ((NM(1, 4), 24), (NM(2, 3), 12), (NM(3, 8), 24)):
        Wp, Hp = W64[:2, :cols], H[:cols, :cols]
        r = prune(Wp, Hp, method="prox", pattern=pat)
        assert_valid_result(r, Wp, Hp, pat)
        assert r.info["stop_reason"] == "W is N:M"
    same = prune(W_star, H, method="prox", pattern=NM(4, 4))
    np.testing.assert_array_equal(same.W, W_star)


def test_prox_verbose_progress(capsys):
    rng = np.random.default_rng(8)
    W_star, H, _ = random_layer(rng, 1, 8)
    prune(W_star, H, method="prox", progress=True)
    assert "prox" in capsys.readouterr().err


def test_prox_bad_options():
    W = np.ones((1, 8))
    H = np.eye(8)
    with pytest.raises(ValueError, match="lam0 or lam_tilde"):
        prune(W, H, method="prox", lam0=0.1, lam_tilde=0.1)
    with pytest.raises(ValueError, match="beta must be a finite number > 1"):
        ProxSchedule(beta=1.0)
    with pytest.raises(ValueError, match="lam0"):
        prune(W, H, method="prox", lam0=-1.0)
    with pytest.raises(ValueError, match="max_iter"):
        prune(W, H, method="prox", max_iter=-1)
    with pytest.raises(ValueError, match="method"):
        prune(W + np.arange(8), H, method="prox", prox_method="newton")
    with pytest.raises(ValueError, match="NM"):
        prune(W, H, method="prox", pattern=TopK(2))
    with pytest.raises(TypeError, match="lam"):
        prune(W, H, method="prox", lam=0.1)
    with pytest.raises(ValueError, match="schedule must be one of \\('paper', 'fast'\\)"):
        prune(W, H, method="prox", schedule="slow")
    with pytest.raises(ValueError, match="start must be one of \\('dense', 'wanda', "):
        prune(W, H, method="prox", start="magnitude")
    with pytest.raises(ValueError, match="start must be one of"):
        prune(W, H, method="prox", start=np.zeros_like(W))  # weights are not a start name
    with pytest.raises(ValueError, match=r"momentum must be one of \('plain', 'fista'\)"):
        ProxSchedule(momentum="nesterov")
    with pytest.raises(ValueError, match="beta_tail must be >= 1"):
        ProxSchedule(beta_tail=0.5)
    for bad in (0.0, 1.01):
        with pytest.raises(ValueError, match=r"stop_fraction must be in \(0, 1\]"):
            ProxSchedule(stop_fraction=bad)
    with pytest.raises(ValueError, match="clip must be a non-negative integer or 'auto'"):
        ProxSchedule(clip="all")
    with pytest.raises(ValueError, match="schedule must be one of"):
        prune(W, H, method="prox", schedule={"beta": 1.1})  # a dict is not a schedule


@pytest.mark.parametrize("n,m", [(2, 4), (1, 3), (3, 8)])
def test_nm_fraction_matches_count_nonzero(n, m):
    from sparseopt.linalg import frob_inner as _frob_inner

    def _nm_fraction(W, n, m):
        return NM(n, m).satisfied_fraction(W)

    rng = np.random.default_rng(9)
    for dtype in (np.float32, np.float64):
        W = rng.standard_normal((5, 6 * m)).astype(dtype)
        W[rng.random(W.shape) < 0.5] = 0
        W[0, :m] = -0.0  # negative zeros count as zeros
        ref = np.mean(np.count_nonzero(W.reshape(5, -1, m), axis=-1) <= n)
        assert _nm_fraction(W, n, m) == ref
        B = rng.standard_normal(W.shape).astype(dtype)
        assert _frob_inner(W, B) == pytest.approx(np.sum(W.astype(np.float64) * B), rel=1e-12)


# ---------------------------------------------------------------- App. C pruners

APPC = ("R0", "R1", "R2", "l0", "l1")


@pytest.mark.parametrize("regularizer", ("rnm", "R0", "R1", "R2"))
def test_regularized_pruners_reach_the_thm1_optimum_for_diagonal_H(regularizer):
    """With a diagonal H the rescaled gradient step returns W* itself, so every group
    regularizer keeps the largest scaled magnitudes of each group: the Wanda mask, optimal
    by Thm 1 (checked against brute force over all masks). The entrywise l0 / l1 have no
    group structure and need not find it."""
    rng = np.random.default_rng(5)
    W_star = rng.standard_normal((3, 8))
    H = np.diag(rng.uniform(0.2, 3.0, 8))
    best, W_opt = brute_force_layer(W_star, H)
    res = prune(W_star, H, method="prox", regularizer=regularizer, refine_steps=200)
    assert_valid_result(res, W_star, H, NM(2, 4))
    np.testing.assert_array_equal(res.W != 0, W_opt != 0)
    assert res.loss == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("regularizer", APPC)
def test_regularized_pruners_against_bruteforce(regularizer):
    """On tiny correlated layers every App. C pruner returns a valid 2:4 layer whose loss is
    never below the brute-force optimum, and +GD reaches the masked optimum of its mask."""
    rng = np.random.default_rng(6)
    for _ in range(4):
        W_star, H, _ = random_layer(rng, 1, 8, corr=1.5)
        best, _ = brute_force_layer(W_star, H)
        res = prune(W_star, H, method="prox", regularizer=regularizer, refine_steps=3000)
        assert_valid_result(res, W_star, H, NM(2, 4))
        assert best <= res.loss + 1e-10
        w_mask = masked_optimum(W_star[0], H, res.mask[0])
        assert res.loss == pytest.approx(row_loss(w_mask, W_star[0], H), rel=1e-6, abs=1e-10)


def test_regularized_pruners_stop_reasons():
    """R0, R1 and r_{2:4} end exactly 2:4; R2 never does at finite lambda (App. C), so it
    stops on its tail and is projected; a smaller tail_tol takes more iterations."""
    rng = np.random.default_rng(7)
    W_star, H, _ = random_layer(rng, 4, 16, corr=1.0)
    for reg in ("rnm", "R0", "R1"):
        res = prune(W_star, H, method="prox", regularizer=reg)
        assert res.stop_reason == "W is N:M" and not res.info["projected"], reg
        assert res.info["regularizer"] == reg
    loose = prune(W_star, H, method="prox", regularizer="R2",
                  schedule=replace(SCHEDULES["fast"], tail_tol=1e-2))
    tight = prune(W_star, H, method="prox", regularizer="R2",
                  schedule=replace(SCHEDULES["fast"], tail_tol=1e-6))
    for res in (loose, tight):
        assert res.info["projected"]
        assert res.stop_reason == "tail <= tail_tol (projected onto the pattern)"
        assert NM(2, 4).satisfied(res.W)
    assert tight.nit > loose.nit


def test_regularizer_objects_and_lam_tilde_degree():
    """A regularizer object is accepted as is; lam_tilde scales with mean|W*|^(2 - degree),
    so the schedule (hence the mask) is invariant to the scale of W* for every regularizer."""
    from sparseopt.regularizers import R1

    rng = np.random.default_rng(8)
    W_star, H, _ = random_layer(rng, 2, 16, corr=1.0)
    a = prune(W_star, H, method="prox", regularizer=R1(pattern=NM(2, 4)))
    b = prune(W_star, H, method="prox", regularizer="R1")
    np.testing.assert_array_equal(a.W, b.W)
    for reg in ("rnm", "R0", "R1", "R2"):
        r1 = prune(W_star, H, method="prox", regularizer=reg, lam_tilde=0.01)
        r2 = prune(7.0 * W_star, H, method="prox", regularizer=reg, lam_tilde=0.01)
        np.testing.assert_array_equal(r1.mask, r2.mask)
        assert r1.nit == r2.nit, reg
    with pytest.raises(ValueError, match="regularizer must be one of"):
        prune(W_star, H, method="prox", regularizer="L7")


@pytest.mark.parametrize("order", ["C", "F"])
def test_rescaled_hessian_pass_equals_its_twin(order):
    """The Numba pass of rescale_wanda (H_ij / (s_i s_j) without d x d temporaries) against
    its twin, the NumPy expression: the same bits, with dead inputs (H_jj = 0, s_j = 1),
    tiny and huge diagonals, negative entries, on C and Fortran ordered H and on a strided
    view; the torch path (the expression, torch's own sqrt) agrees to a few ulps."""
    from sparseopt.layer.prox import _divide_outer

    rng = np.random.default_rng(11)
    A = rng.standard_normal((37, 60)) * np.geomspace(1e-150, 1e150, 37)[:, None] ** 0.01
    H = np.asarray(A @ A.T / 60, order=order)
    H[5, :] = H[:, 5] = 0.0  # a dead input
    H[7, 7] *= 1e-300
    W_star = rng.standard_normal((3, 37)).astype(np.float32)
    for M in (H, np.asarray(np.kron(H, np.ones((2, 2)))[::2, ::2], order=order)):
        Wt, Ht, s = rescale_wanda(W_star, M)
        twin = M / (s[:, None] * s[None, :])
        np.testing.assert_array_equal(Ht, twin)
        assert s[5] == 1.0 and Ht.dtype == np.float64 and Wt.dtype == np.float32
        np.testing.assert_array_equal(_divide_outer(M, s, np.empty(M.shape)), twin)
    torch = pytest.importorskip("torch")
    _, Ht_t, _ = rescale_wanda(torch.from_numpy(W_star), torch.from_numpy(np.ascontiguousarray(H)))
    np.testing.assert_allclose(Ht_t.numpy(), rescale_wanda(W_star, H)[1], rtol=1e-15, atol=0)
