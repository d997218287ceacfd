"""sparseopt.solvers.proximal_gradient: against an independent reference (CVXPY's lasso),
its stopping rules, tensors, and bad input."""

import math
from dataclasses import fields

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.objectives import LayerLoss, LeastSquares
from sparseopt.regularizers import L1, R2, RNM
from sparseopt.solvers import Schedule, proximal_gradient


def pg(objective, regularizer, **kwargs):
    """proximal_gradient with the :class:`Schedule` fields among ``kwargs`` as its schedule."""
    names = {f.name for f in fields(Schedule)}
    schedule = Schedule(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})
    return proximal_gradient(objective, regularizer, schedule, **kwargs)


def _lasso_problem(seed=0, n=40, p=12):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X @ np.where(rng.random(p) < 0.4, rng.standard_normal(p), 0.0) \
        + 0.1 * rng.standard_normal(n)
    return X, y


def test_fixed_lambda_l1_is_the_lasso_solution_of_cvxpy():
    """beta = 1 and L1: iterations of ISTA, whose limit minimizes
    0.5 ||Xw - y||^2 + (lam0 / step) ||w||_1 (the Alg. 2 lambda convention); the reference
    is solved independently by CVXPY (Clarabel)."""
    cp = pytest.importorskip("cvxpy")
    X, y = _lasso_problem()
    f = LeastSquares(X, y)
    step = 1.0 / f.lipschitz()
    alpha = 2.0
    res = pg(f, L1(), lam0=alpha * step, beta=1.0, step=step,
                            x0=np.zeros(X.shape[1]), max_iter=20000)
    w = cp.Variable(X.shape[1])
    cp.Problem(cp.Minimize(0.5 * cp.sum_squares(X @ w - y) + alpha * cp.norm1(w))).solve(
        solver=cp.CLARABEL)
    np.testing.assert_allclose(res.x, w.value, atol=1e-6)
    assert res.stop_reason == "max_iter" and res.nit == 20000
    obj = res.history["objective"]
    assert obj.shape == (20000,) and np.all(np.diff(obj[:200]) <= 1e-12)  # f decreases early
    assert res.fun == obj[-1] == pytest.approx(f.value(res.x))


def test_fista_reaches_the_cvxpy_lasso_solution_faster_than_ista():
    """momentum="fista" with a fixed lambda is FISTA with gradient restart: it converges to
    the same CVXPY lasso solution, and after 300 iterations its objective gap is far below
    ISTA's (ISTA's gap decays like 1/k here, FISTA's like 1/k^2 or linearly with restarts)."""
    cp = pytest.importorskip("cvxpy")
    X, y = _lasso_problem(n=30, p=40)  # p > n: not strongly convex, ISTA is slow
    f = LeastSquares(X, y)
    step = 1.0 / f.lipschitz()
    alpha = 0.5
    w = cp.Variable(X.shape[1])
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(X @ w - y) + alpha * cp.norm1(w)))
    prob.solve(solver=cp.CLARABEL)
    F = lambda x: f.value(x) + alpha * np.abs(x).sum()  # noqa: E731
    runs = {m: pg(f, L1(), lam0=alpha * step, beta=1.0, step=step, momentum=m,
                                 x0=np.zeros(X.shape[1]), max_iter=300) for m in (None, "fista")}
    gap = {m: F(r.x) - prob.value for m, r in runs.items()}
    assert gap["fista"] >= -1e-7  # the reference is the minimum
    assert gap["fista"] <= 1e-3 * gap[None]
    long = pg(f, L1(), lam0=alpha * step, beta=1.0, step=step,
                             momentum="fista", x0=np.zeros(X.shape[1]), max_iter=3000)
    np.testing.assert_allclose(long.x, w.value, atol=1e-5)
    assert long.info["momentum"] == "fista" and long.info["restarts"] >= 1


def test_beta_start_and_beta_tail_follow_the_fraction_of_groups_in_the_pattern():
    from sparseopt.solvers.proxgrad import START_FRACTION, TAIL_FRACTION

    rng = np.random.default_rng(3)
    A = rng.standard_normal((256, 512))
    f = LayerLoss(rng.standard_normal((16, 256)), A @ A.T / 512)
    res = pg(f, RNM(), lam0=0.001, beta=1.05, beta_start=1.3, beta_tail=1.5,
                            pattern=NM(2, 4))
    frac, lam = res.history["nm_fraction"], res.history["lam"]
    ratio = lam[1:] / lam[:-1]
    # the growth applied after step k depends on step k's fraction
    start, tail = frac[:-1] < START_FRACTION, frac[:-1] >= TAIL_FRACTION
    mid = ~start & ~tail
    assert start.any() and mid.any() and tail.any()
    np.testing.assert_allclose(ratio[start], 1.3, rtol=1e-12)
    np.testing.assert_allclose(ratio[mid], 1.05, rtol=1e-12)
    np.testing.assert_allclose(ratio[tail], 1.5, rtol=1e-12)
    assert res.info["beta_start"] == 1.3 and res.info["beta_tail"] == 1.5


@pytest.mark.parametrize("fista", [True, False])
def test_stop_fraction_stops_the_same_run_at_that_fraction(fista):
    """stop_fraction < 1 ends the run of stop_fraction = 1 at its first iterate with at
    least that fraction of groups in the pattern, iterate and history unchanged up to
    there; a run that stops at the fraction fails if any earlier iterate got there too."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((256, 512))
    f = LayerLoss(rng.standard_normal((16, 256)), A @ A.T / 512)
    sched = dict(lam0=0.001, beta=1.05, beta_start=1.3, beta_tail=1.5, pattern=NM(2, 4),
                 momentum="fista" if fista else None)
    full = pg(f, RNM(), **sched)
    frac = full.history["nm_fraction"]
    for stop in (0.5, 0.95, 0.99):
        k = int(np.argmax(frac >= stop)) + 1  # iterates are counted from 1
        assert frac[k - 1] < 1.0  # the fraction binds before the pattern is reached
        res = pg(f, RNM(), stop_fraction=stop, **sched)
        assert res.stop_reason == "nm_fraction >= stop_fraction" and res.nit == k
        assert res.info["stop_fraction"] == stop and not NM(2, 4).satisfied(res.x)
        for key in ("lam", "nm_fraction"):
            np.testing.assert_array_equal(res.history[key], full.history[key][:k])
        np.testing.assert_array_equal(res.history["objective"][:-1],
                                      full.history["objective"][:k - 1])
        # the k-th iterate itself: a run capped at k iterations ends there too
        capped = pg(f, RNM(), max_iter=k, **sched)
        np.testing.assert_array_equal(res.x, capped.x)
    assert full.info["stop_fraction"] == 1.0 and full.stop_reason == "x in pattern"


def test_growing_lambda_reaches_the_pattern_and_records_history():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 48))
    f = LayerLoss(rng.standard_normal((3, 16)), A @ A.T / 48)
    res = pg(f, RNM(), lam0=0.01, beta=1.05, pattern=NM(2, 4))
    assert res.stop_reason == "x in pattern" and NM(2, 4).satisfied(res.x)
    h = res.history
    assert set(h) == {"objective", "loss", "lam", "nm_fraction", "time"}
    assert all(h[k].shape == (res.nit,) for k in h)
    np.testing.assert_allclose(h["lam"], 0.01 * 1.05 ** np.arange(res.nit), rtol=1e-12)
    assert h["nm_fraction"][-1] == 1.0 and np.all(h["nm_fraction"][:-1] < 1.0)
    assert res.info["lam_final"] == h["lam"][-1]
    # R2 never reaches the pattern exactly: its tail rule stops it
    r2 = pg(f, R2(), lam0=0.01, beta=1.05, pattern=NM(2, 4), tail_tol=1e-3)
    assert r2.stop_reason == "tail <= tail_tol" and not NM(2, 4).satisfied(r2.x)
    tail = np.linalg.norm(r2.x - NM(2, 4).project(r2.x))
    assert tail <= 1e-3 * np.linalg.norm(r2.x)


def test_tensors_in_tensors_out():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    A = rng.standard_normal((16, 48))
    W, H = rng.standard_normal((3, 16)), A @ A.T / 48
    a = pg(LayerLoss(W, H), RNM(), lam0=0.01, beta=1.05, pattern=NM(2, 4))
    b = pg(LayerLoss(torch.from_numpy(W), torch.from_numpy(H)), RNM(),
                          lam0=0.01, beta=1.05, pattern=NM(2, 4))
    assert isinstance(b.x, torch.Tensor) and b.nit == a.nit
    np.testing.assert_allclose(b.x.numpy(), a.x, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(lam0=0.0), "lam0 must be finite and > 0"),
    (dict(lam0=float("nan")), "lam0"),
    (dict(beta=0.5), "beta must be >= 1"),
    (dict(max_iter=-1), "max_iter must be >= 0"),
    (dict(tail_tol=-1.0), "tail_tol must be finite and non-negative"),
    (dict(step=-0.1), "step must be finite and non-negative"),
    (dict(momentum="nesterov"), "momentum must be one of"),
    (dict(beta_tail=0.9), "beta_tail must be >= 1"),
    (dict(beta_start=0.5), "beta_start must be >= 1"),
    (dict(beta_start=1.2), "beta_start or beta_tail needs a pattern"),
    (dict(stop_fraction=0.0), r"stop_fraction must be in \(0, 1\]"),
    (dict(stop_fraction=1.5), r"stop_fraction must be in \(0, 1\]"),
    (dict(stop_fraction=float("nan")), "stop_fraction"),
    (dict(stop_fraction=0.9), "stop_fraction < 1, beta_start or beta_tail needs a pattern"),
])
def test_bad_input(kwargs, match):
    X, y = _lasso_problem()
    args = dict(lam0=0.1, x0=np.zeros(X.shape[1]))
    with pytest.raises(ValueError, match=match):
        pg(LeastSquares(X, y), L1(), **{**args, **kwargs})


def test_min_iter_keeps_a_start_in_the_pattern_iterating():
    """A start already in the pattern is returned at once by default; with min_iter=k the
    run takes k iterations before the pattern test may stop it, and then stops at the first
    iterate in the pattern (a large lambda keeps every iterate 2:4 here)."""
    rng = np.random.default_rng(5)
    W_star = rng.standard_normal((6, 16))
    f = LayerLoss(W_star, np.eye(16) + 0.3)
    x0 = NM(2, 4).project(W_star)
    kw = dict(lam0=50.0, beta=1.1, step=0.1, x0=x0, pattern=NM(2, 4))
    assert pg(f, RNM(), **kw).nit == 0
    for k in (1, 3):
        res = pg(f, RNM(), min_iter=k, **kw)
        assert res.nit == k and res.stop_reason == "x in pattern"
        assert not np.array_equal(res.x, x0)  # it moved
    with pytest.raises(ValueError, match="min_iter must be <= max_iter"):
        pg(f, RNM(), min_iter=5, max_iter=4, **kw)
    with pytest.raises(ValueError, match="min_iter must be >= 0"):
        pg(f, RNM(), min_iter=-1, **kw)


def test_schedule_must_be_a_schedule():
    """The schedule is an object, not loose keywords or a bare lambda."""
    X, y = _lasso_problem()
    with pytest.raises(ValueError, match="schedule must be a sparseopt.solvers.Schedule"):
        proximal_gradient(LeastSquares(X, y), L1(), 0.1, x0=np.zeros(X.shape[1]))


def test_x0_required_without_reference():
    X, y = _lasso_problem()
    with pytest.raises(ValueError, match="x0 is required"):
        pg(LeastSquares(X, y), L1(), lam0=0.1)


# --------------------------------------------------------------------------------------
# The fused NumPy kernels of the iteration against the plain NumPy expressions (their twins)
# --------------------------------------------------------------------------------------


def _awkward(rng, shape, dtype):
    """Random values with exact zeros, negative zeros, ties and negative entries."""
    a = rng.standard_normal(shape).astype(dtype)
    flat = a.reshape(-1)
    flat[rng.random(flat.size) < 0.2] = 0.0
    flat[rng.random(flat.size) < 0.05] = -0.0
    ties = rng.random(flat.size) < 0.2
    flat[ties] = dtype(-0.75)
    return a


def _bits(a):
    return a.dtype, a.shape, a.tobytes()  # bitwise, signed zeros included


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 12), (13,), (2, 3, 8)])
@pytest.mark.parametrize("step", [0.1, 1 / 3, 0.0])
def test_fused_gradient_step_rounds_as_numpy(dtype, shape, step):
    from sparseopt.solvers.proxgrad import _fused, _gradient_step

    rng = np.random.default_rng(5)
    y, g = _awkward(rng, shape, dtype), _awkward(rng, shape, dtype)
    assert _fused(y, g) and not _fused(y, g.astype(np.float64 if dtype == np.float32
                                                   else np.float32))
    assert _bits(_gradient_step(y, g, step)) == _bits(y - step * g)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 12), (13,), (2, 3, 8)])
@pytest.mark.parametrize("coef", [0.0, 0.1, 0.7213475204444817])
def test_fused_extrapolation_agrees_with_its_twin(dtype, shape, coef):
    from sparseopt.solvers.proxgrad import _extrapolate, _extrapolate_xp

    rng = np.random.default_rng(6)
    y, x_new, x = (_awkward(rng, shape, dtype) for _ in range(3))
    y_fused, up_fused = _extrapolate(y, x_new, x, coef, np)
    y_twin, up_twin = _extrapolate_xp(y, x_new, x, coef, np)
    assert _bits(y_fused) == _bits(y_twin) == _bits(x_new + coef * (x_new - x))
    # the restart test sums the products rounded to the dtype, in float64
    terms = ((y - x_new) * (x_new - x)).astype(np.float64).ravel()
    exact = math.fsum(terms)
    scale = float(np.sum(np.abs(terms)))
    assert abs(up_fused - exact) <= 1e-13 * scale and abs(up_twin - exact) <= 1e-13 * scale


def _proximal_gradient_numpy(f, reg, pattern, *, lam0, beta, beta_start, beta_tail, fista,
                             max_iter=500):
    """proximal_gradient on a NumPy LayerLoss written with the plain NumPy expressions: the
    reference the fused kernels must reproduce bit for bit."""
    step = 1.0 / f.lipschitz()
    x = f.W_star.copy()
    y, t, lam, restarts = x, 1.0, lam0, 0
    losses, lams, fracs = [], [], []
    for _ in range(max_iter):
        D = y - f.W_star
        DH = D @ f.H
        losses.append(float(np.sum(DH.astype(np.float64) * D)))
        x_new = reg.prox(y - step * (2 * DH), lam)
        frac = pattern.satisfied_fraction(x_new)
        lams.append(lam)
        fracs.append(frac)
        lam *= beta_start if frac < 0.001 else beta_tail if frac >= 0.98 else beta
        if fista:
            if float(np.sum((y - x_new) * (x_new - x), dtype=np.float64)) > 0:
                t, restarts = 1.0, restarts + 1
            t_new = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
            y = x_new + ((t - 1.0) / t_new) * (x_new - x)
            t = t_new
        else:
            y = x_new
        x = x_new
        if frac == 1.0:
            break
    return x, losses[1:], lams, fracs, restarts


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fista", [True, False])
def test_fused_iteration_reproduces_the_plain_numpy_iterates(dtype, fista):
    """The fused kernels (gradient step, LayerLoss value and gradient, FISTA extrapolation
    and restart test) give the iterates of the plain NumPy expressions bit for bit; the
    loss history, summed in another order, to rounding."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((64, 256))
    X[:32] += 0.7 * X[32:]  # correlated inputs: FISTA restarts
    W = rng.standard_normal((24, 64)).astype(dtype)
    W[:, ::7] = 0.0
    f = LayerLoss(W, (X @ X.T / 256).astype(dtype), check_psd=False)
    pattern = NM(2, 4)
    sched = dict(lam0=0.01, beta=1.055, beta_start=1.2, beta_tail=1.5) if fista else \
        dict(lam0=0.01, beta=1.05, beta_start=1.05, beta_tail=1.05)
    res = pg(f, RNM(), pattern=pattern, momentum="fista" if fista else None,
                            **sched)
    x, losses, lams, fracs, restarts = _proximal_gradient_numpy(f, RNM(), pattern,
                                                                fista=fista, **sched)
    assert res.stop_reason == "x in pattern" and res.nit == len(lams)
    assert _bits(res.x) == _bits(x)
    assert np.array_equal(res.history["lam"], lams)
    assert np.array_equal(res.history["nm_fraction"], fracs)
    assert res.info["restarts"] == restarts and (restarts > 0) == fista
    np.testing.assert_allclose(res.history["objective"][:-1], losses, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fista", [True, False])
def test_start_at_the_minimiser_skips_the_first_product(dtype, fista, monkeypatch):
    """From LayerLoss's reference W* (x0=None) the first iteration is the prox of W* with no
    product: one product fewer than from an explicit start at W* (a copy, so the loop does
    not know it is W*), and the same iterates, history and result bit for bit. An objective
    that does not declare its reference a minimiser keeps the product."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal((64, 256))
    X[:32] += 0.7 * X[32:]
    W = rng.standard_normal((24, 64)).astype(dtype)
    f = LayerLoss(W, (X @ X.T / 256).astype(dtype), check_psd=False)
    sched = dict(lam0=0.01, beta=1.055, beta_start=1.2, beta_tail=1.5,
                 momentum="fista" if fista else None, pattern=NM(2, 4))
    calls = []
    step = LayerLoss.value_and_step

    def counting_step(self, *args, **kwargs):
        calls.append(1)
        return step(self, *args, **kwargs)

    monkeypatch.setattr(LayerLoss, "value_and_step", counting_step)
    res = pg(f, RNM(), **sched)
    n_rest = len(calls)
    calls.clear()
    ref = pg(f, RNM(), x0=W.copy(), **sched)
    assert res.nit == ref.nit > 10
    assert n_rest == len(calls) - 1 == res.nit - 1
    assert _bits(res.x) == _bits(ref.x)
    for key in ("objective", "lam", "nm_fraction"):
        np.testing.assert_array_equal(res.history[key], ref.history[key])
    assert res.info["restarts"] == ref.info["restarts"]
    calls.clear()
    monkeypatch.setattr(LayerLoss, "stationary_reference", False)
    pg(f, RNM(), **sched)
    assert len(calls) == res.nit


class _Plain:
    """A duck-typed regularizer (prox without ``out``): the loop must allocate as before."""

    exact_pattern = NM(2, 4)

    def prox(self, x, tau):
        return RNM().prox(x, tau)


@pytest.mark.parametrize("fista", [True, False])
def test_work_arrays_are_reused_with_the_same_iterates(fista, monkeypatch):
    """With a NumPy LayerLoss and a Regularizer, the loop takes a handful of work arrays
    and reuses them (not ~7 new arrays per iteration); the iterates are those of the
    allocating loop (a regularizer without ``out``) bit for bit, and W* is not touched."""
    from sparseopt.solvers import proxgrad

    rng = np.random.default_rng(8)
    X = rng.standard_normal((64, 256))
    X[:32] += 0.7 * X[32:]
    W = rng.standard_normal((24, 64)).astype(np.float32)
    W_before = W.copy()
    f = LayerLoss(W, (X @ X.T / 256).astype(np.float32), check_psd=False)
    sched = dict(lam0=0.01, beta=1.055, beta_start=1.2, beta_tail=1.5,
                 momentum="fista" if fista else None, pattern=NM(2, 4))
    new_arrays = []
    take = proxgrad._Buffers.take

    def counting_take(self):
        if not self.free:
            new_arrays.append(1)
        return take(self)

    monkeypatch.setattr(proxgrad._Buffers, "take", counting_take)
    res = pg(f, RNM(), **sched)
    ref = pg(f, _Plain(), **sched)
    assert res.nit == ref.nit > 10
    assert _bits(res.x) == _bits(ref.x)
    np.testing.assert_array_equal(res.history["objective"], ref.history["objective"])
    assert res.info["restarts"] == ref.info["restarts"]
    assert len(new_arrays) <= (3 if fista else 1)  # x_k, y_k and one spare at most
    assert np.array_equal(W, W_before) and not np.shares_memory(res.x, W)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_passes_do_not_depend_on_the_thread_count(dtype):
    """The fused passes split rows over the Numba threads and keep the row sums: on one
    thread and on two they give the same bits, arrays and float64 sums (fails if a sum
    were reduced per thread, so that its rounding followed the split)."""
    import numba

    from sparseopt.layer.loss import _masked_step_rows
    from sparseopt.objectives import _loss_and_gradient
    from sparseopt.solvers.proxgrad import _extrapolate_rows, _gradient_step_rows
    from sparseopt.threads import one_thread

    if numba.get_num_threads() < 2:
        pytest.skip("needs two Numba threads")
    rng = np.random.default_rng(21)
    y, x, x_new, D, DH, R, GS, W, Ws = (rng.standard_normal((203, 37)).astype(dtype)
                                        for _ in range(9))
    y[5:9] = 0.0
    mask = rng.random(y.shape) < 0.5
    c, coef = dtype(0.013), dtype(0.7)

    def run():
        g = DH.copy()
        loss = _loss_and_gradient(g, D, g)
        step = np.empty_like(y)
        _gradient_step_rows(y, g, c, step)
        ext = np.empty_like(y)
        uphill = _extrapolate_rows(y, x_new, x, coef, ext)
        Wk = W.copy()
        gd = _masked_step_rows(R, GS, Wk, Ws, mask, c, True)
        return [np.float64(loss), g, step, np.float64(uphill), ext, np.float64(gd), Wk]

    two = run()
    with one_thread():
        assert numba.get_num_threads() == 1
        one = run()
    for a, b in zip(one, two):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_sum_in_order_adds_left_to_right():
    """sparseopt.linalg.sum_in_order against its twin, a plain Python loop: the same bits on
    sums whose value depends on the order (fails if the compiled loop were reassociated,
    vectorized or pairwise: 1e16 + 1 + 1 is 1e16 left to right, 1e16 + 2 otherwise)."""
    from sparseopt.linalg import sum_in_order

    rng = np.random.default_rng(8)
    cases = [np.array([1e16, 1.0, 1.0, -1e16] * 9), np.array([]),
             rng.standard_normal(1001) * np.logspace(-8, 8, 1001)]
    for a in cases:
        total = 0.0
        for v in a:
            total += float(v)
        assert np.float64(sum_in_order(a)).tobytes() == np.float64(total).tobytes()
    assert sum_in_order(cases[0]) == 0.0  # pairwise or 4-lane partial sums give 2.0 per block


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("extra", [0, 3])
@pytest.mark.parametrize("step", [0.1, 1 / 3, 0.0, 2.0**-140])
def test_loss_and_step_is_the_loss_pass_and_the_gradient_step(dtype, extra, step):
    """objectives._loss_and_step (the value of LayerLoss and the gradient step of the loop in
    one pass, issue 12) against the two passes it replaces: the value of _loss_and_gradient
    bit for bit (the same summation), the step bitwise as NumPy rounds y - step * (2 DX)
    (zeros, signed zeros, ties, both signs; step 2^-140 rounds into subnormals)."""
    from sparseopt.objectives import _loss_and_gradient, _loss_and_step

    rng = np.random.default_rng(31)
    D, Y = _awkward(rng, (11, 16), dtype), _awkward(rng, (11, 16), dtype)
    DX = _awkward(rng, (11, 16 + extra), dtype)  # extra columns: the clipped loss
    G = DX.copy()
    value = _loss_and_gradient(G, D, G)
    Z = DX.copy()
    value_step = _loss_and_step(Z, D, Y, step, Z)
    assert np.float64(value_step).tobytes() == np.float64(value).tobytes()
    expected = Y - dtype(step) * (2 * DX[:, :16])
    assert _bits(Z[:, :16]) == _bits(expected)
    out = np.empty_like(Y)  # into a separate array as well
    assert _loss_and_step(DX.copy(), D, Y, step, out) == value
    assert _bits(out) == _bits(expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_value_and_step_of_the_layer_losses(dtype):
    """LayerLoss.value_and_step and the clipped loss's against value_and_grad(out=) followed
    by the gradient step: the same value and bits; ``out`` must be a NumPy array."""
    from sparseopt.layer.prox import _ClippedLayerLoss, clip_hessian
    from sparseopt.solvers.proxgrad import _gradient_step

    rng = np.random.default_rng(32)
    X = rng.standard_normal((32, 128))
    H = X @ X.T / 128
    W_star = rng.standard_normal((6, 32)).astype(dtype)
    W = _awkward(rng, (6, 32), dtype)
    H_clip, V, c, _, _ = clip_hessian(H, 5)
    for f in (LayerLoss(W_star, H.astype(dtype), check_psd=False),
              _ClippedLayerLoss(W_star, H_clip, V, c, dtype)):
        g = np.empty_like(W)
        value, g = f.value_and_grad(W, out=g)
        expected = _gradient_step(W, g, 0.37)
        z = np.empty_like(W)
        value_step, z2 = f.value_and_step(W, 0.37, out=z)
        assert z2 is z and value_step == value and _bits(z) == _bits(expected)
        with pytest.raises(ValueError, match="out"):
            f.value_and_step(W, 0.37, out=np.empty((6, 31), dtype=dtype))
        for bad in (float("nan"), -0.1, float("inf")):
            with pytest.raises(ValueError, match="step"):
                f.value_and_step(W, bad, out=z)
