import numpy as np
import pytest

from sparseopt import NM, TopK
from sparseopt.objectives import LayerLoss, LeastSquares, Quadratic, Smooth
from sparseopt.solvers import iht, maiht

from _reference import best_subset, correlated


def layer_problem(seed, d_out=6, d_in=16, n=64, corr=0.0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d_in, n))
    if corr:
        A = A + corr * rng.standard_normal((1, n))  # a shared component correlates the inputs
    return LayerLoss(rng.standard_normal((d_out, d_in)), A @ A.T / n)


def reference_maiht(f, prox, x0, alpha, iters):
    """Plain transcription of maiht-wen eq. 4 with Alg. 1 line 2 (fixed lam folded into prox
    and the acceptance function L)."""
    W_prev, W, Z = x0.copy(), x0.copy(), x0.copy()
    t_prev, t = 0.0, 1.0
    out = [W]
    for _ in range(iters):
        Y = W + t_prev / t * (Z - W) + (t_prev - 1) / t * (W - W_prev)
        Z = prox(Y - alpha * f.grad(Y))
        V = prox(W - alpha * f.grad(W))
        t_prev, t = t, (np.sqrt(4 * t**2 + 1) + 1) / 2
        W_prev = W
        W = Z if f.value(Z) + f.lam0(Z) <= f.value(V) + f.lam0(V) else V
        out.append(W)
    return out


@pytest.mark.parametrize("form", ["nm", "lam"])
def test_matches_transcription_of_eq4(form):
    f = layer_problem(0, corr=1.0)
    alpha = 0.9 / f.lipschitz()
    if form == "nm":
        kw = dict(pattern=NM(2, 4))
        prox = NM(2, 4).project
        f.lam0 = lambda W: 0.0
    else:
        lam = 0.05
        kw = dict(lam=lam)
        thr = np.sqrt(2 * alpha * lam)
        prox = lambda V: np.where(np.abs(V) > thr, V, 0.0)  # noqa: E731
        f.lam0 = lambda W: lam * np.count_nonzero(W)
    ref = reference_maiht(f, prox, f.W_star, alpha, 25)
    for k in (1, 5, 25):
        r = maiht(f, step=alpha, max_iter=k, tol=0.0, **kw)
        np.testing.assert_allclose(r.x, ref[k], rtol=1e-10, atol=1e-12)
    assert 0 < r.info["n_accepted"] <= 25
    assert r.info["n_accepted"] == np.nansum(r.history["accepted"])


@pytest.mark.parametrize("kw", [dict(pattern=NM(2, 4)), dict(lam=0.05), dict(target_nnz=40)])
def test_affine_gradient_shortcut_equals_direct_gradients(kw):
    # the same objective without the affine_gradient flag evaluates grad f(Y^k) directly
    f = layer_problem(6, corr=1.0)
    plain = Smooth(f.value, f.grad, shape=f.shape, lipschitz=f.lipschitz())
    assert f.affine_gradient and not plain.affine_gradient
    a = maiht(f, x0=f.W_star, max_iter=60, tol=0.0, mu=0.2, **kw)
    b = maiht(plain, x0=f.W_star, max_iter=60, tol=0.0, mu=0.2, **kw)
    np.testing.assert_allclose(a.x, b.x, rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(a.history["accepted"], b.history["accepted"])


class _Counted(LayerLoss):
    """LayerLoss that counts its products with H (value, grad and value_and_grad: one each)."""

    products = 0

    def value(self, W):
        self.products += 1
        return super().value(W)

    def grad(self, W):
        self.products += 1
        return super().grad(W)

    def value_and_grad(self, W):
        self.products += 1
        return super().value_and_grad(W)


@pytest.mark.parametrize("mu", [0.0, 0.1])
def test_products_per_iteration(mu):
    """mAIHT with an affine gradient needs two products per iteration (at Z^{k+1} and at
    V^{k+1}; grad f(Y^k) is combined), the refinement one per step, plus one for x0 and one
    at the start of the refinement. Fails if a value or gradient is recomputed (say the loss
    history without the mu term, or the gradient of V when it is taken), or if the loss
    history keeps the mu term."""
    base = layer_problem(3, corr=1.0)
    f = _Counted(base.W_star, base.H)
    r = maiht(f, pattern=NM(2, 4), mu=mu, max_iter=12, tol=0.0, refine_steps=7)
    assert f.products == 1 + 2 * 12 + 1 + 7
    if mu:  # the loss history is f alone: its last row is the plain loss of x
        assert r.history["loss"][-1] == pytest.approx(base.value(r.x), rel=1e-12)
        assert r.history["objective"][-1] > r.history["loss"][-1]


@pytest.mark.parametrize("kw", [dict(pattern=TopK(4)), dict(pattern=NM(2, 4)), dict(lam=0.1)])
def test_monotone_descent_lemma_3_2(kw):
    X, y = correlated(3, n=30, p=16)
    r = maiht(LeastSquares(X, y), max_iter=400, tol=0.0, **kw)
    F = r.history["objective"]
    start = 0 if "lam" in kw else 1
    assert np.all(np.diff(F[start:]) <= 1e-12 * np.abs(F[start:-1]) + 1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_well_conditioned_finds_exact_best_subset(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((60, 12)) / np.sqrt(60)
    b = np.zeros(12)
    b[rng.choice(12, 3, replace=False)] = rng.choice([-1, 1], 3) * rng.uniform(1, 2, 3)
    y = X @ b + 0.01 * rng.standard_normal(60)
    val, S = best_subset(X, y, 3)
    r = maiht(LeastSquares(X, y), pattern=TopK(3), max_iter=3000, tol=1e-10)
    assert tuple(np.flatnonzero(r.x)) == S
    assert LeastSquares(X, y).value(r.x) == pytest.approx(val, rel=1e-8)


@pytest.mark.parametrize("seed", range(4))
def test_hard_case_limit_is_alpha2_fixed_point(seed):
    # Thm 3.3 (2): accumulation points of mAIHT are alpha_2-fixed points (Def. 3.1)
    X, y = correlated(seed)
    f = LeastSquares(X, y)
    opt, _ = best_subset(X, y, 4)
    r = maiht(f, pattern=TopK(4), max_iter=20000, tol=1e-9)
    a = r.info["step"]
    np.testing.assert_allclose(TopK(4).project(r.x - a * f.grad(r.x)), r.x, atol=1e-7)
    assert f.value(r.x) >= opt * (1 - 1e-10)
    # and the penalised form: Def. 3.1 in the equivalent entrywise conditions
    lam = 0.2
    r = maiht(f, lam=lam, max_iter=20000, tol=1e-9)
    g = f.grad(r.x)
    on = r.x != 0
    assert np.all(np.abs(g[on]) <= 1e-6)
    assert np.all(np.abs(r.x[on]) >= np.sqrt(2 * a * lam) - 1e-9)
    assert np.all(np.abs(g[~on]) <= np.sqrt(2 * lam / a) + 1e-9)


def test_layer_pruning_call_of_the_layer_helper():
    f = layer_problem(1, d_out=8, d_in=32, n=128, corr=1.5)
    H = f.H
    W_star = f.W_star.copy()
    r = maiht(f, pattern=NM(2, 4), mu=0.1, step=0.95 / np.linalg.norm(H, 2), max_iter=50,
              refine_steps=30)
    assert r.x.shape == W_star.shape and r.x.dtype == W_star.dtype
    assert NM(2, 4).satisfied(r.x)
    np.testing.assert_array_equal(f.W_star, W_star)
    assert r.nit == len(r.history["objective"]) - 1 == 80
    assert r.info["refine_start"] == 50
    # beats magnitude pruning of W* (Remark 2.2: mAIHT's first point) on the layer loss
    assert f.value(r.x) < f.value(NM(2, 4).project(W_star))
    # refinement keeps the support
    assert np.all(r.history["support"][51:] <= r.history["support"][50])


def test_mu_is_the_problem_with_shifted_hessian():
    # Remark 2.3 for LayerLoss: Tr(D H D') + mu/2 ||D||^2 = Tr(D (H + mu/2 I) D')
    f = layer_problem(2, corr=1.0)
    mu = 0.3
    g = LayerLoss(f.W_star, f.H + mu / 2 * np.eye(f.H.shape[0]))
    a = maiht(f, pattern=NM(2, 4), mu=mu, max_iter=40, tol=0.0)
    b = maiht(g, pattern=NM(2, 4), max_iter=40, tol=0.0)
    assert a.info["step"] == pytest.approx(b.info["step"], rel=1e-9)
    np.testing.assert_allclose(a.x, b.x, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.history["objective"], b.history["objective"], rtol=1e-9)
    # the loss key reports the caller's f, without the mu term
    np.testing.assert_allclose(a.history["loss"][-1], f.value(a.x), rtol=1e-12)


def test_adaptive_target_and_lambda_rule():
    f = layer_problem(3, d_out=4, d_in=16)
    s = 24
    r = maiht(f, target_nnz=s, max_iter=200, refine_steps=20)
    assert np.count_nonzero(r.x) == s
    h = r.history
    step = 1 / f.lipschitz()
    lam = np.quantile(np.abs(f.W_star), 0.01) ** 2 / (2 * step)
    for k in range(1, r.info["refine_start"] + 1):
        lam *= 1 + (h["support"][k - 1] - s) / f.W_star.size
        assert h["lam"][k] == pytest.approx(lam, rel=1e-12)


def test_faster_than_iht_on_correlated_layer_problem():
    # Sec. 2.3 / Fig. 1: with the same start, step and pattern, mAIHT reaches IHT's final
    # objective in fewer iterations, on correlated inputs where both end at the same fixed
    # point (acceleration is not guaranteed in general; the theory check sweeps seeds)
    for seed in range(3):
        f = layer_problem(seed, d_out=4, d_in=16, n=40, corr=1.0)
        a = iht(f, pattern=NM(2, 4), max_iter=3000, tol=1e-7)
        b = maiht(f, pattern=NM(2, 4), max_iter=3000, tol=1e-7)
        assert a.converged and b.converged
        Fa, Fb = a.history["objective"][1:], b.history["objective"][1:]  # [0] is dense W*
        assert Fb[-1] == pytest.approx(Fa[-1], rel=1e-9)
        target = Fa[-1] * (1 + 1e-6)
        assert np.argmax(Fb <= target) < np.argmax(Fa <= target)
        assert b.nit < a.nit


def test_deterministic_float32_and_quadratic():
    f = layer_problem(5)
    f32 = LayerLoss(f.W_star.astype(np.float32), f.H.astype(np.float32))
    r1 = maiht(f32, pattern=NM(2, 4), max_iter=30)
    r2 = maiht(f32, pattern=NM(2, 4), max_iter=30)
    assert r1.x.dtype == np.float32
    np.testing.assert_array_equal(r1.x, r2.x)
    # a vector Quadratic with an explicit start
    rng = np.random.default_rng(0)
    A = rng.standard_normal((10, 10))
    q = Quadratic(A @ A.T + np.eye(10), rng.standard_normal(10))
    r = maiht(q, pattern=TopK(3), x0=np.zeros(10), max_iter=500)
    assert np.count_nonzero(r.x) <= 3


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(pattern=TopK(2), lam=1.0), "not both"),
        (dict(), "one of pattern"),
        (dict(pattern=TopK(20)), "k larger than"),
        (dict(pattern=TopK(2), mu=-0.1), "mu must be"),
        (dict(pattern=TopK(2), step=0.0), "step must be"),
        (dict(pattern=TopK(2), x0=np.ones((2, 6))), "x0 must have shape"),
        (dict(pattern=TopK(2), x0=np.full(12, np.nan)), "x0 contains NaN"),
        (dict(pattern=TopK(2), refine_steps=1.5), "refine_steps"),
    ],
)
def test_bad_input(kw, match):
    X, y = correlated(0)
    with pytest.raises(ValueError, match=match):
        maiht(LeastSquares(X, y), **kw)


def test_layer_loss_and_maiht_on_tensors_match_numpy():
    """LayerLoss / maiht on torch (CPU) tensors: torch computes, x comes back a tensor of the
    objective's dtype, the history stays NumPy float64, and everything agrees with NumPy."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    A = rng.standard_normal((16, 48)) * rng.uniform(0.3, 2.0, (16, 1))
    W_star, H = rng.standard_normal((6, 16)), A @ A.T / 48
    fn = LayerLoss(W_star, H)
    ft = LayerLoss(torch.from_numpy(W_star), torch.from_numpy(H))
    assert ft.dtype == torch.float64 and ft.shape == fn.shape
    assert ft.lipschitz() == pytest.approx(fn.lipschitz(), rel=1e-12)
    W = rng.standard_normal(W_star.shape)
    val, g = ft.value_and_grad(torch.from_numpy(W))
    assert isinstance(g, torch.Tensor) and g.dtype == torch.float64
    assert val == pytest.approx(fn.value(W), rel=1e-12)
    assert ft.value(torch.from_numpy(W)) == pytest.approx(fn.value(W), rel=1e-12)
    np.testing.assert_allclose(g.numpy(), fn.grad(W), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ft.grad(torch.from_numpy(W)).numpy(), fn.grad(W), rtol=1e-12,
                               atol=1e-12)
    mask = rng.random(W.shape) > 0.5
    np.testing.assert_allclose(ft.masked_grad(torch.from_numpy(W), torch.from_numpy(mask)).numpy(),
                               fn.masked_grad(W, mask), rtol=1e-12, atol=1e-12)

    kw = dict(pattern=NM(2, 4), mu=0.1, max_iter=40, refine_steps=15)
    rn, rt = maiht(fn, **kw), maiht(ft, **kw)
    assert isinstance(rt.x, torch.Tensor) and rt.x.dtype == torch.float64
    np.testing.assert_array_equal(rt.x.numpy() != 0, rn.x != 0)
    np.testing.assert_allclose(rt.x.numpy(), rn.x, rtol=1e-10, atol=1e-10)
    assert rt.nit == rn.nit and rt.stop_reason == rn.stop_reason
    assert set(rt.history) == set(rn.history)
    for key, vals in rt.history.items():
        assert isinstance(vals, np.ndarray) and vals.dtype == np.float64
    np.testing.assert_allclose(rt.history["loss"], rn.history["loss"], rtol=1e-10)
    assert NM(2, 4).satisfied(rt.x)
    # float32 tensors stay float32
    f32 = LayerLoss(torch.from_numpy(W_star.astype(np.float32)),
                    torch.from_numpy(H.astype(np.float32)))
    assert maiht(f32, pattern=NM(2, 4), max_iter=5).x.dtype == torch.float32


def test_tensors_and_arrays_are_not_mixed():
    torch = pytest.importorskip("torch")
    f = layer_problem(3)
    ft = LayerLoss(torch.from_numpy(f.W_star), torch.from_numpy(f.H))
    with pytest.raises(ValueError, match="different libraries"):
        LayerLoss(torch.from_numpy(f.W_star), f.H)
    with pytest.raises(ValueError, match="different libraries"):
        maiht(ft, pattern=NM(2, 4), x0=np.zeros(f.shape))
    with pytest.raises(ValueError, match="different libraries"):
        ft.grad(np.zeros(f.shape))
    with pytest.raises(ValueError, match="positive semidefinite"):
        LayerLoss(torch.zeros((2, 4), dtype=torch.float64), -torch.eye(4, dtype=torch.float64))
