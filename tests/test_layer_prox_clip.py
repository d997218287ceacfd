"""Prox pruning with the clipped Hessian in the gradient steps (``prune(..., schedule=replace(SCHEDULES["fast"], clip=k))``):
the eigenpairs, the clipped spectrum, an independent NumPy loop, the true loss in the
history, the loss against the default on layers with outlier eigenvalues, bad values."""

import math
from dataclasses import replace

import numpy as np
import pytest

from sparseopt import NM, prune
from sparseopt.layer import layer_loss
from sparseopt.layer.prox import (AUTO_CLIP, AUTO_CLIP_OUTLIER, SCHEDULES, _ClippedLayerLoss,
                                  auto_clip, clip_hessian, rescale_wanda)
from sparseopt.objectives import _loss_and_gradient
from sparseopt.problems import correlated_hessian
from sparseopt.linalg import DENSE_EIG_MAX, FULL_EIG_SHARE, top_eigenpairs
from sparseopt.prox import prox_nm

from test_layer_core import assert_valid_result, powerlaw_layer, random_layer

#: The default schedule with 8 eigenvalues clipped.
CLIP8 = replace(SCHEDULES["fast"], clip=8)


def fast(**values):
    """``schedule=`` the default schedule with ``values`` replaced, as keyword arguments."""
    return {"schedule": replace(SCHEDULES["fast"], **values)}


@pytest.mark.parametrize("d", [40, DENSE_EIG_MAX + 76])
def test_top_eigenpairs_against_eigh(d):
    """The dense (d <= DENSE_EIG_MAX: LAPACK's subset solve, and all pairs by evd from
    k >= d / FULL_EIG_SHARE on) and the Lanczos path against numpy.linalg.eigh:
    eigenvalues to 1e-9 relative, eigenvectors up to sign; a CPU tensor gets the same."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    _, H, _ = random_layer(rng, 1, d, corr=1.0)
    w_ref, V_ref = np.linalg.eigh(H)
    many = -(-d // FULL_EIG_SHARE)  # the fewest pairs of the evd route
    for k in (1, 5) + ((many - 1, many, d) if d <= DENSE_EIG_MAX else ()):
        w, V = top_eigenpairs(H, k)
        np.testing.assert_allclose(w, w_ref[-k:], rtol=1e-9)
        np.testing.assert_allclose(np.abs(V.T @ V_ref[:, -k:]), np.eye(k), atol=1e-6)
        wt, Vt = top_eigenpairs(torch.from_numpy(H), k)
        assert isinstance(wt, torch.Tensor) and isinstance(Vt, torch.Tensor)
        np.testing.assert_array_equal(wt.numpy(), w)
        np.testing.assert_array_equal(Vt.numpy(), V)
    for k in (0, d + 1):
        with pytest.raises(ValueError, match="k must be between 1 and"):
            top_eigenpairs(H, k)
    with pytest.raises(ValueError, match="k must be an integer"):
        top_eigenpairs(H, 1.5)
    with pytest.raises(ValueError, match="H must be a square 2-D array"):
        top_eigenpairs(H[:, :-1], 1)
    H_nan = H.copy()
    H_nan[0, 1] = np.nan
    with pytest.raises(ValueError, match="H"):
        top_eigenpairs(H_nan, 1)


@pytest.mark.parametrize("d", [40, 384, DENSE_EIG_MAX + 76])
def test_top_eigenpairs_in_float32(d):
    """precision="float32" (the clip's solve for float32 weights): float64 results, the
    eigenvalues of numpy.linalg.eigh to float32 rounding (d eps_32 gamma_max), the vectors
    orthonormal and spanning the same space to float32 rounding over the gap (dense, evd
    and Lanczos paths). A float64 solve would pass as well; a float32 one that lost its
    vectors or returned float32 arrays would not."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    _, H = powerlaw_layer(rng, 1, d)
    w_ref, V_ref = np.linalg.eigh(H)
    eps = float(np.finfo(np.float32).eps)
    many = -(-d // FULL_EIG_SHARE)
    for k in (1, 5, many):
        w, V = top_eigenpairs(H, k, precision="float32")
        assert w.dtype == V.dtype == np.float64 and V.shape == (d, k)
        np.testing.assert_allclose(w, w_ref[-k:], rtol=0, atol=d * eps * w_ref[-1])
        np.testing.assert_allclose(V.T @ V, np.eye(k), atol=d * eps)
        # the space of the k pairs: its projector against eigh's
        gap = w_ref[-k] - w_ref[-k - 1]
        P, P_ref = V @ V.T, V_ref[:, -k:] @ V_ref[:, -k:].T
        assert np.linalg.norm(P - P_ref, 2) <= d * eps * w_ref[-1] / gap
        wt, Vt = top_eigenpairs(torch.from_numpy(H), k, precision="float32")
        np.testing.assert_array_equal(wt.numpy(), w)
    with pytest.raises(ValueError, match=r"precision must be one of \('float64', 'float32'\)"):
        top_eigenpairs(H, 1, precision="float16")


def test_float32_weights_clip_with_float32_eigenpairs(monkeypatch):
    """prune(clip=k) on float32 weights solves the eigenpairs in float32 (``info``), float64
    weights in float64; against the same float32 runs with float64 eigenpairs: the same
    masks on small power-law layers, and the loss +GD equal to 1e-6 relative (the
    eigenpairs differ by float32 rounding, which the float32 steps round H_clip to anyway)."""
    from sparseopt.layer import prox as prox_module

    rng = np.random.default_rng(5)
    layers = [powerlaw_layer(rng, 16, 128) for _ in range(3)]
    f64 = prune(layers[0][0], layers[0][1], method="prox", schedule=CLIP8)
    assert f64.info["clip_precision"] == "float64"
    runs = [prune(W.astype(np.float32), H, method="prox", refine_steps=300, schedule=CLIP8)
            for W, H in layers]
    assert all(r.info["clip_precision"] == "float32" for r in runs)
    original = prox_module.clip_hessian
    monkeypatch.setattr(prox_module, "clip_hessian",
                        lambda H, k, **kw: original(H, k, **{**kw, "precision": "float64"}))
    for (W, H), run in zip(layers, runs):
        ref = prune(W.astype(np.float32), H, method="prox", refine_steps=300, schedule=CLIP8)
        np.testing.assert_array_equal(run.mask, ref.mask)
        assert run.loss == pytest.approx(ref.loss, rel=1e-6)


def test_clip_hessian_spectrum():
    """H_clip has the eigenvalues min(lambda_i, lambda_{k+1}) and H's eigenvectors; ``top``
    is gamma_max(H), ``level`` gamma_max(H_clip); a rank-k H cannot be clipped k deep."""
    rng = np.random.default_rng(1)
    _, H = powerlaw_layer(rng, 1, 32)
    w, V = np.linalg.eigh(H)
    for k in (1, 4, 31):
        H_clip, Vk, c, top, level = clip_hessian(H, k)
        assert Vk.shape == (32, k) and c.shape == (k,) and np.all(c >= 0)
        np.testing.assert_array_equal(H_clip, H_clip.T)
        assert top == pytest.approx(w[-1], rel=1e-12)
        assert level == pytest.approx(w[-k - 1], rel=1e-12)
        np.testing.assert_allclose(np.diag(V.T @ H_clip @ V), np.minimum(w, w[-k - 1]),
                                   atol=1e-12 * w[-1])
    for bad in (0, -2):
        with pytest.raises(ValueError, match="k must be >= 1"):
            clip_hessian(H, bad)
    u = rng.standard_normal((3, 32))
    with pytest.raises(ValueError, match="clip=3 leaves no curvature"):
        clip_hessian(u.T @ u, 3)  # rank 3


def _reference(W_star, H, k, beta, steps=3000):
    """The fast schedule with the clipped Hessian as a plain NumPy loop, written from the
    method's definition (eigenvalues by numpy.linalg.eigh, not by top_eigenpairs)."""
    s = SCHEDULES["fast"]
    Wt, Ht, sc = rescale_wanda(W_star, H)
    w, V = np.linalg.eigh(Ht)
    eta0, eta = 1 / (2 * w[-1]), 1 / (2 * w[-k - 1])
    Hc = V @ np.diag(np.minimum(w, w[-k - 1])) @ V.T
    x, y, t, lam = Wt.copy(), Wt, 1.0, 0.01
    for it in range(1, steps + 1):
        x_new = prox_nm(y - eta * (2 * (y - Wt) @ Hc), lam * eta / eta0)
        frac = NM(2, 4).satisfied_fraction(x_new)
        if frac >= s.stop_fraction:  # the rest projected (nothing left at frac = 1)
            return NM(2, 4).project(x_new) / sc[None, :], it
        lam *= s.beta_start if frac < 0.001 else s.beta_tail if frac >= 0.98 else beta
        t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
        if np.sum((y - x_new) * (x_new - x)) > 0:  # gradient restart
            y, t_new = x_new, (1 + math.sqrt(5)) / 2
        else:
            y = x_new + (t - 1) / t_new * (x_new - x)
        x, t = x_new, t_new
    raise AssertionError("the reference did not reach the pattern")


@pytest.mark.parametrize("k,beta", [(1, 1.055), (6, 1.12)])
def test_prox_clip_against_a_plain_numpy_loop(k, beta):
    """prune(clip=k) follows the reference loop: same iterations, same mask, same weights
    (to rounding: the eigenvalues come from different LAPACK routines)."""
    rng = np.random.default_rng(2)
    W_star, H = powerlaw_layer(rng, 6, 32)
    res = prune(W_star, H, method="prox",
                schedule=replace(SCHEDULES["fast"], clip=k, beta=beta, beta_clip=None))
    x_ref, nit = _reference(W_star, H, k, beta)
    assert res.nit == nit and res.info["clip"] == k
    np.testing.assert_array_equal(res.mask, NM(2, 4).mask(x_ref))
    np.testing.assert_allclose(res.W, np.where(res.mask, x_ref, 0.0), rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("dtype, rel", [(np.float64, 1e-9), (np.float32, 1e-5)])
def test_prox_clip_history_is_the_true_loss_and_the_schedule(dtype, rel):
    """With clip the history's loss is L itself (not the clipped surrogate's), and ``lam``
    is the schedule's lambda_k (the prox's lambda_k eta / eta_0 scaled back). The last
    entry comes from the loop's fused product (``value_and_grad(out=)``), in W's dtype:
    float32 products hold it to ~1e-6 of the float64 loss ``prune`` reports."""
    rng = np.random.default_rng(3)
    W_star, H = powerlaw_layer(rng, 4, 32)
    W_star = W_star.astype(dtype)
    res = prune(W_star, H, method="prox", lam0=0.02,
                schedule=replace(SCHEDULES["paper"], clip=4, beta=1.05))
    h, K = res.history, res.nit
    assert h["loss"][-1] == pytest.approx(res.loss, rel=rel)
    np.testing.assert_allclose(h["lam"], 0.02 * 1.05 ** np.arange(K), rtol=1e-12)
    assert res.info["lam_final"] == pytest.approx(h["lam"][-1])
    # the surrogate's value at the final W is below L there: the history is not it
    Wt, Ht, sc = rescale_wanda(W_star, H)
    H_clip = clip_hessian(Ht, 4)[0]
    assert layer_loss(res.W * sc[None, :], Wt, H_clip) < 0.99 * h["loss"][-1]


@pytest.mark.parametrize("k", [0, 1, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loss_and_gradient_with_the_clip_columns(dtype, k):
    """LayerLoss's fused pass with DX = D [H | B] (k extra columns, the clipped loss of
    prox pruning) against the NumPy expressions: the gradient is 2 DX[:, :d] bit for bit,
    the value sum(DX[:, :d] D) + sum(DX[:, d:]^2) in float64 to rounding; zeros, signs and
    exact ties (equal entries) included."""
    rng = np.random.default_rng(11)
    D = rng.standard_normal((9, 12)).astype(dtype)
    DX = rng.standard_normal((9, 12 + k)).astype(dtype)
    D[0] = 0.0
    DX[1] = -DX[1]
    DX[2, :] = DX[2, 0]
    DX[3, :3] = -0.0
    G = np.full(D.shape, np.nan, dtype=dtype)
    val = _loss_and_gradient(DX, D, G)
    np.testing.assert_array_equal(G, 2 * DX[:, :12])
    X = DX.astype(np.float64)
    ref = np.sum(X[:, :12] * D.astype(np.float64)) + np.sum(X[:, 12:] ** 2)
    assert val == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clipped_loss_fused_path_equals_the_two_products(dtype):
    """_ClippedLayerLoss with ``out`` (one product with [H_clip | V diag(c)^{1/2}], the
    loop's path) against itself without ``out`` (two products and frob_inner, the path of
    tensors): the same gradient and value to rounding, the value the true L; a bad ``out``
    or a W of another dtype is refused, naming it."""
    rng = np.random.default_rng(12)
    W_star, H = powerlaw_layer(rng, 6, 40)
    H_clip, V, c, _, _ = clip_hessian(H, 5)
    f = _ClippedLayerLoss(W_star.astype(dtype), H_clip, V, c, dtype)
    W = (W_star + rng.standard_normal(W_star.shape)).astype(dtype)
    val, g = f.value_and_grad(W)
    out = np.empty(W.shape, dtype=dtype)
    val_out, g_out = f.value_and_grad(W, out=out)
    assert g_out is out
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g_out, g, rtol=rtol, atol=rtol * np.abs(g).max())
    assert val_out == pytest.approx(val, rel=rtol)
    D = (W - W_star.astype(dtype)).astype(np.float64)
    assert val_out == pytest.approx(np.sum((D @ H) * D), rel=1e-4 if dtype == np.float32 else 1e-10)
    with pytest.raises(ValueError, match="out"):
        f.value_and_grad(W, out=np.empty((6, 39), dtype=dtype))
    with pytest.raises(ValueError, match="dtype"):
        f.value_and_grad(W.astype(np.float64 if dtype == np.float32 else np.float32), out=out)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prox_clip_lowers_the_loss_on_powerlaw_spectra(lib, dtype):
    """The claim behind the option (docs/layer.md): on layers with a power-law spectrum
    (alpha = 1.5) clip=8 with the unclipped growth (beta 1.055) ends +GD below clip=0's
    loss on each of four seeds (0.89-0.94x measured in float64) and 3% below on average,
    in at least 10% fewer iterations on average; a valid N:M result in W's dtype and
    library."""
    rng = np.random.default_rng(4)
    ratios, its = [], []
    for _ in range(4):
        W_star, H = powerlaw_layer(rng, 16, 64)
        W_star = W_star.astype(dtype)
        if lib == "torch":
            torch = pytest.importorskip("torch")
            W_star, H = torch.from_numpy(W_star), torch.from_numpy(H)
        base = prune(W_star, H, method="prox", refine_steps=300, **fast(clip=0))
        clip = prune(W_star, H, method="prox", refine_steps=300,
                     **fast(clip=8, beta=1.055, beta_clip=None))
        assert type(clip.W) is type(W_star) and clip.W.dtype == W_star.dtype
        if lib == "numpy":
            assert_valid_result(clip, W_star, H, NM(2, 4))
        else:
            assert NM(2, 4).satisfied(clip.W.numpy()) and NM(2, 4).satisfied(clip.mask.numpy())
        ratios.append(clip.loss / base.loss)
        its.append(clip.nit / base.nit)
    assert np.mean(ratios) < 0.97 and max(ratios) < 1.0, ratios
    assert np.mean(its) <= 0.9, its


def test_prox_clip_bad_values():
    W = np.ones((1, 8))
    H = np.eye(8) + 0.1
    for bad in (-1, 1.5, "2"):
        with pytest.raises((ValueError, TypeError), match="clip"):
            fast(clip=bad)
    for bad in (1.0, 0.5, float("nan")):
        with pytest.raises(ValueError, match="beta_clip"):
            fast(beta_clip=bad)
    for bad in ("Auto", "none"):
        with pytest.raises(ValueError, match="clip must be a non-negative integer or 'auto'"):
            fast(clip=bad)
    with pytest.raises(ValueError, match="clip must be below d_in = 8"):
        prune(W, H, method="prox", **fast(clip=8))
    with pytest.raises(ValueError, match="clip=2 leaves no curvature"):
        prune(W, np.ones((8, 8)), method="prox", **fast(clip=2))  # rank 1


def test_auto_clip_switches_on_at_the_outlier_test():
    """auto_clip gives min(AUTO_CLIP, d // 4) exactly when gamma_max(H) >= 8 tr(H) / d: on
    both sides of the threshold, on a power-law spectrum (on) and on correlated_hessian
    (the benchmarks' synthetic layers, gamma_max / mean about 4.8: off)."""
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    for top, on in ((AUTO_CLIP_OUTLIER * 1.01, True), (AUTO_CLIP_OUTLIER * 0.99, False)):
        w = np.ones(40)
        w[-1] = top * (39 / 40) / (1 - top / 40)  # gamma_max / mean = top exactly
        H = (Q * w) @ Q.T
        assert np.linalg.eigvalsh(H)[-1] / (np.trace(H) / 40) == pytest.approx(top)
        assert auto_clip(H) == (10 if on else 0)
    _, H = powerlaw_layer(rng, 1, 512)
    assert auto_clip(rescale_wanda(np.ones((1, 512)), H)[1]) == AUTO_CLIP
    H = correlated_hessian(512, seed=1)
    assert auto_clip(rescale_wanda(np.ones((1, 512)), H)[1]) == 0
    assert auto_clip(np.eye(3)) == 0  # d // 4 = 0: nothing to clip
    with pytest.raises(ValueError, match="H must be a square 2-D array"):
        auto_clip(np.ones((8, 6)))
    with pytest.raises(ValueError, match="H"):
        auto_clip(np.full((8, 8), np.nan))


def test_auto_clip_certificate_agrees_with_the_exact_test(monkeypatch):
    """Without ``top``, auto_clip first tries Rayleigh quotients of power iterations (lower
    bounds of gamma_max): its decision equals the exact test's on spectra on both sides of
    the threshold, and on a layer with clear outliers it needs no gamma_max at all."""
    import sparseopt.layer.prox as prox_module

    rng = np.random.default_rng(8)
    for _ in range(40):
        d = int(rng.integers(8, 80))
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        w = rng.uniform(0.0, 2.0, d)
        w[-1] = rng.uniform(0.5, 1.5) * AUTO_CLIP_OUTLIER * w.mean()  # near the threshold
        H = (Q * w) @ Q.T
        assert auto_clip(H) == auto_clip(H, top=float(np.linalg.eigvalsh(H)[-1]))
    calls = []
    monkeypatch.setattr(prox_module, "gamma_max", lambda H: calls.append(1) or 1.0)
    _, H = powerlaw_layer(rng, 1, 256)
    assert auto_clip(rescale_wanda(np.ones((1, 256)), H)[1]) == min(AUTO_CLIP, 256 // 4)
    assert not calls
    assert auto_clip(np.zeros((8, 8))) == 0 and not calls  # tr H = 0: nothing to test


def test_default_is_the_clipped_run_where_auto_clip_is_on():
    """The fast default with clip="auto" is prune(clip=k, beta=beta_clip) where the outlier
    test passes (bit for bit), and prune(clip=0) where it does not or where H has rank <= k;
    an explicit beta overrides beta_clip."""
    rng = np.random.default_rng(6)
    W_star, H = powerlaw_layer(rng, 8, 128)
    k = auto_clip(rescale_wanda(W_star, H)[1])
    assert k == 32
    res = prune(W_star, H, method="prox")
    beta_clip = SCHEDULES["fast"].beta_clip
    ref = prune(W_star, H, method="prox", **fast(clip=k, beta=beta_clip, beta_clip=None))
    assert res.info["clip"] == k and res.info["clip_auto"] and res.info["beta"] == beta_clip
    assert res.info["beta_clip"] == beta_clip
    np.testing.assert_array_equal(res.W, ref.W)
    assert res.nit == ref.nit
    torch = pytest.importorskip("torch")  # the same rule on tensors (the torch path)
    res_t = prune(torch.from_numpy(W_star), torch.from_numpy(H), method="prox")
    assert res_t.info["clip"] == k and res_t.info["beta"] == beta_clip
    np.testing.assert_array_equal(res_t.mask.numpy(), res.mask)
    np.testing.assert_allclose(res_t.W.numpy(), res.W, rtol=1e-7, atol=1e-12)
    beta = prune(W_star, H, method="prox", **fast(beta=1.08, beta_clip=None))
    assert beta.info["clip"] == k and beta.info["beta"] == 1.08
    assert beta.info["beta_clip"] is None  # not applied
    # measured for r_{N:M} only: the App. C regularizers keep the unclipped steps
    for reg in ("R0", "R1", "R2"):
        res = prune(W_star, H, method="prox", regularizer=reg)
        assert res.info["clip"] == 0 and res.info["beta"] == 1.055, reg
    # no outliers: the unclipped fast schedule
    H = correlated_hessian(128, seed=1)
    res, ref = prune(W_star, H, method="prox"), prune(W_star, H, method="prox", **fast(clip=0))
    assert res.info["clip"] == 0 and res.info["beta"] == 1.055
    np.testing.assert_array_equal(res.W, ref.W)
    # outliers, but rank 20 <= k = 32: no clipping instead of clip_hessian's error
    u = rng.standard_normal((20, 128)) * np.geomspace(1, 1e-3, 128)
    H = u.T @ u
    res, ref = prune(W_star, H, method="prox"), prune(W_star, H, method="prox", **fast(clip=0))
    assert res.info["clip"] == 0 and res.info["clip_auto"]
    np.testing.assert_array_equal(res.W, ref.W)
    with pytest.raises(ValueError, match="leaves no curvature"):
        prune(W_star, H, method="prox", **fast(clip=k))
    # the paper schedule never clips unless asked to
    paper = prune(W_star, powerlaw_layer(rng, 8, 128)[1], method="prox", schedule="paper")
    assert paper.info["clip"] == 0 and paper.info["beta"] == 1.01


def test_prox_default_lowers_the_loss_on_powerlaw_spectra():
    """The claim behind the default (docs/layer.md): on power-law spectra (alpha = 1.5,
    d_in = 256, so clip="auto" clips 64) the default ends +GD below clip=0's loss on each
    of three seeds and in fewer iterations on each."""
    rng = np.random.default_rng(7)
    for _ in range(3):
        W_star, H = powerlaw_layer(rng, 16, 256)
        new = prune(W_star, H, method="prox", refine_steps=300)
        old = prune(W_star, H, method="prox", refine_steps=300, **fast(clip=0))
        assert new.info["clip"] == min(AUTO_CLIP, 256 // 4)
        assert new.loss < old.loss and new.nit < old.nit, (new.loss / old.loss, new.nit, old.nit)
