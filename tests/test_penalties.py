"""Elementwise and App. C regularizers (l0, l1, R0/R1/R2): every prox against brute force."""

import itertools

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.regularizers import L0, L1, R0, R1, R2


def scalar_grid_min(x, c, h, half_width=None, num=200001):
    """min over a fine grid (plus 0 and x) of 0.5 (w - x)^2 + c h(|w|)."""
    r = half_width if half_width is not None else 2 * abs(x) + 1
    grid = np.concatenate([np.linspace(-r, r, num), [0.0, x]])
    vals = 0.5 * (grid - x) ** 2 + c * h(np.abs(grid))
    return vals.min()


H = {
    "l0": lambda a: (a > 0).astype(float),
    "l1": lambda a: a,
    "l2": lambda a: 0.5 * a * a,
}


# ----------------------------------------------------------------------------- l0 / l1


def test_l0_threshold_is_sqrt_2_tau_lam_not_tau_lam():
    lam, tau = 0.3, 2.0
    thr = np.sqrt(2 * tau * lam)  # 1.0954...; tau * lam = 0.6 would be the l1 threshold
    p = L0(lam)
    x = np.array([thr * (1 - 1e-9), -thr * (1 - 1e-9), thr * (1 + 1e-9), -thr * (1 + 1e-9), 0.8])
    out = p.prox(x, tau)
    np.testing.assert_array_equal(out, [0.0, 0.0, x[2], x[3], 0.0])  # 0.8 > tau*lam but < thr
    # the jump of the prox over a fine x grid sits at sqrt(2 tau lam)
    xs = np.linspace(0, 2, 200001)
    first = xs[np.argmax(p.prox(xs, tau) != 0)]
    assert abs(first - thr) <= 2e-5
    assert abs(first - tau * lam) > 0.4


@pytest.mark.parametrize("cls,h", [(L0, "l0"), (L1, "l1")])
def test_separable_prox_matches_grid(cls, h):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(40) * 2
    for lam, tau in [(0.1, 1.0), (0.7, 0.5), (2.0, 3.0)]:
        out = cls(lam).prox(x, tau)
        c = lam * tau
        for xi, wi in zip(x, out):
            ours = 0.5 * (wi - xi) ** 2 + c * H[h](np.abs(np.array([wi])))[0]
            best = scalar_grid_min(xi, c, H[h])
            assert ours <= best + 1e-12  # no grid point is better
            assert ours >= best - 1e-8  # and the grid gets close to it


def test_values_and_bad_tau():
    x = np.array([1.0, -2.0, 0.0, 0.5])
    assert L0(0.5)(x) == pytest.approx(1.5)
    assert L1(0.5)(x) == pytest.approx(1.75)
    for p in [L0(1.0), L1(1.0), R0(1.0), R1(1.0), R2(1.0)]:
        for tau in [0.0, -1.0, np.nan, np.inf]:
            with pytest.raises(ValueError, match="tau"):
                p.prox(x, tau)
    with pytest.raises(ValueError, match="lam"):
        L0(-1.0)
    with pytest.raises(ValueError, match="x"):
        L1(1.0).prox(np.array([1.0, np.nan]), 1.0)
    with pytest.raises(ValueError, match="x"):
        L1(1.0).prox(np.array([1, 2]), 1.0)


# ----------------------------------------------------------------------------- App. C


def penalty_value_bruteforce(w, n, m, h):
    """R(w) summed over groups: h of the m - n smallest |w| per group, by sorting."""
    a = np.sort(np.abs(w.reshape(-1, m)), axis=1)  # ascending
    return float(np.sum(h(a[:, : m - n])))


def test_app_c_values_2_4():
    w = np.array([3.0, -0.5, 1.5, 0.0, 1.0, 2.0, -3.0, 4.0])
    assert R0(1.0)(w) == pytest.approx(1 + 2)  # group 1: 1.5, -0.5 beyond top-2... w3,w4
    assert R1(2.0)(w) == pytest.approx(2 * (0.5 + 0.0 + 1.0 + 2.0))
    assert R2(1.0)(w) == pytest.approx(0.5 * (0.25 + 0.0 + 1.0 + 4.0))
    assert R0(1.0)(np.array([0.0, 5.0, 0.0, -1.0])) == 0.0  # 2:4 sparse -> 0


@pytest.mark.parametrize("cls,h", [(R0, "l0"), (R1, "l1"), (R2, "l2")])
def test_app_c_prox_1_2_matches_2d_grid(cls, h):
    """For 1:2, R(w) = h(min(|w1|, |w2|)): brute force on a fine 2-D grid."""
    rng = np.random.default_rng(1)
    grid = np.linspace(-3, 3, 1201)
    W1, W2 = np.meshgrid(grid, grid, indexing="ij")
    for _ in range(8):
        x = rng.uniform(-2.5, 2.5, 2)
        lam, tau = rng.uniform(0.1, 1.5), rng.uniform(0.5, 2.0)
        c = lam * tau
        out = cls(lam, pattern=NM(1, 2)).prox(x, tau)
        F = lambda a, b: 0.5 * ((a - x[0]) ** 2 + (b - x[1]) ** 2) + c * H[h](  # noqa: E731
            np.minimum(np.abs(a), np.abs(b))
        )
        ours = F(out[0], out[1])
        # exact grid + the axis lines through x (where the l0 optimum lives)
        best = min(F(W1, W2).min(), F(grid, 0 * grid + x[1]).min(), F(0 * grid + x[0], grid).min())
        assert ours <= best + 1e-12
        assert ours >= best - 2e-4  # grid spacing 5e-3


@pytest.mark.parametrize("cls,h", [(R0, "l0"), (R1, "l1"), (R2, "l2")])
@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (2, 3)])
def test_app_c_prox_matches_mask_enumeration(cls, h, n, m):
    """min_w 0.5||w - x||^2 + c R(w) = min over zero patterns / penalized sets, per group.

    R0: for each zero pattern Z the best w is x off Z, value 0.5||x_Z||^2 + c max(nnz - n, 0).
    R1, R2: R(w) = min over sets T of size m - n of sum_T h(|w_i|), so the optimum is the
    best over T of the separable problem (scalar proxes checked on a grid above).
    """
    rng = np.random.default_rng(2)
    x = rng.standard_normal((30, m)) * 1.5
    x[0, :] = 0.7  # ties
    x[1, :2] = 0.0  # zeros
    lam, tau = 0.4, 1.3
    c = lam * tau
    out = cls(lam, pattern=NM(n, m)).prox(x.ravel(), tau).reshape(-1, m)
    hf = H[h]
    for xg, wg in zip(x, out):
        ours = 0.5 * np.sum((wg - xg) ** 2) + c * penalty_value_bruteforce(wg, n, m, hf)
        if h == "l0":
            best = min(
                0.5 * np.sum(xg[list(Z)] ** 2) + c * max(m - len(Z) - n, 0)
                for k in range(m + 1)
                for Z in itertools.combinations(range(m), k)
            )
        else:
            best = np.inf
            for T in itertools.combinations(range(m), m - n):
                T = list(T)
                if h == "l1":
                    wt = np.sign(xg[T]) * np.maximum(np.abs(xg[T]) - c, 0)
                else:
                    wt = xg[T] / (1 + c)
                val = 0.5 * np.sum((wt - xg[T]) ** 2) + c * np.sum(hf(np.abs(wt)))
                best = min(best, val)
        assert ours == pytest.approx(best, abs=1e-12)
    # no random perturbation of the prox is better
    for _ in range(200):
        d = rng.standard_normal(out.shape) * 0.05
        pert = out + d
        f_pert = 0.5 * np.sum((pert - x) ** 2) + c * penalty_value_bruteforce(pert, n, m, hf)
        f_out = 0.5 * np.sum((out - x) ** 2) + c * penalty_value_bruteforce(out, n, m, hf)
        assert f_out <= f_pert + 1e-12


def test_app_c_2_4_formulas_below_eq_29():
    """w1 = z1, w2 = z2 and the stated w3, w4 on a sorted non-negative cell."""
    z = np.array([2.0, 1.5, 1.2, 0.4])
    lam = 0.5
    np.testing.assert_allclose(R0(lam).prox(z, 1.0), [2.0, 1.5, 1.2, 0.0])  # 0.5 z^2 vs lam
    np.testing.assert_allclose(R1(lam).prox(z, 1.0), [2.0, 1.5, 0.7, 0.0])
    np.testing.assert_allclose(R2(lam).prox(z, 1.0), [2.0, 1.5, 0.8, 0.4 / 1.5])


def test_app_c_dtype_shape_no_inplace():
    rng = np.random.default_rng(3)
    for dt in (np.float32, np.float64):
        x = rng.standard_normal((3, 8)).astype(dt)
        x0 = x.copy()
        for cls in (R0, R1, R2, L0, L1):
            p = cls(0.3)
            out = p.prox(x, 0.7)
            assert out.dtype == dt and out.shape == x.shape
            np.testing.assert_array_equal(x, x0)
            if cls in (R0, R1):
                big = cls(100.0).prox(x, 1.0).reshape(-1, 4)
                assert np.all(np.count_nonzero(big, axis=1) <= 2)
    with pytest.raises(ValueError, match="divisible"):
        R1(1.0).prox(np.ones(6), 1.0)
    with pytest.raises(ValueError, match="n must"):
        R1(1.0, pattern=NM(5, 4))


# ----------------------------------------------------------------------------- brute force
#
# Two independent searches per group, float32 and float64, with ties, zeros and signs:
# (a) R(w) = min over index sets T, |T| = m - n, of sum_T h(|w_i|), so the prox value is the
#     least over T of sum_T phi_i, phi_i = min_w 0.5 (w - x_i)^2 + c h(|w|) found on a fine
#     1-D grid (no closed-form scalar prox, no claim about which T wins);
# (b) multi-start cyclic coordinate search on the true (non-separable) objective, R by sorting.

TAIL = [(R0, "l0"), (R1, "l1"), (R2, "l2")]
SHAPES = [(2, 4), (1, 4), (2, 8), (3, 4), (0, 4), (4, 4)]


def hard_groups(m, dtype, seed):
    """Random groups plus all-equal, zero, half-zero, tied and sign-flipped ones."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((10, m)) * 1.5
    x[0, :] = 0.7                       # all equal
    x[1, :] = 0.0                       # all zero
    x[2, : m // 2] = 0.0                # half zero
    x[3, :] = -np.abs(x[3, :])          # all negative
    x[4, 1::2] = -x[4, 0::2]            # tied magnitudes, opposite signs
    x[5, :] = np.round(x[5, :], 1)      # ties from rounding
    x[6, :] = np.sqrt(2 * 0.4 * 1.3) * np.sign(rng.standard_normal(m))  # at the l0 threshold
    x[7, :] = 0.52 * np.sign(rng.standard_normal(m))  # at the l1 threshold c = 0.52
    return x.astype(dtype)


def objective(w, x, c, n, m, h):
    """0.5 ||w - x||^2 + c R(w) per group, in float64, R by sorting (independent of sparseopt)."""
    w = np.asarray(w, dtype=np.float64).reshape(-1, m)
    x = np.asarray(x, dtype=np.float64).reshape(-1, m)
    a = np.sort(np.abs(w), axis=-1)[..., : m - n]  # the m - n smallest magnitudes
    return 0.5 * np.sum((w - x) ** 2, axis=-1) + c * np.sum(H[h](a), axis=-1)


def index_set_bruteforce(x, c, n, m, h, num=40001):
    """(a): min over T of sum_T phi_i, phi_i on a fine grid that also holds 0 and x_i."""
    xs = np.asarray(x, dtype=np.float64).reshape(-1, m)
    r = 2 * np.abs(xs).max() + 1
    grid = np.linspace(-r, r, num)
    cand = np.concatenate([np.broadcast_to(grid, xs.shape + (num,)),
                           np.zeros(xs.shape + (1,)), xs[..., None]], axis=-1)
    phi = np.min(0.5 * (cand - xs[..., None]) ** 2 + c * H[h](np.abs(cand)), axis=-1)
    return np.array([min(sum(row[list(T)]) for T in itertools.combinations(range(m), m - n))
                     for row in phi])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,m", SHAPES)
@pytest.mark.parametrize("cls,h", TAIL)
def test_tail_prox_matches_index_set_grid(cls, h, n, m, dtype):
    x = hard_groups(m, dtype, seed=10 * n + m)
    lam, tau = 0.4, 1.3
    c = lam * tau
    out = cls(lam, pattern=NM(n, m)).prox(x, tau)
    assert out.dtype == dtype and out.shape == x.shape
    ours = objective(out, x, c, n, m, h)
    best = index_set_bruteforce(x, c, n, m, h)
    # float32: the prox is the float64 prox rounded once; the objective is flat there
    tol = 1e-12 if dtype == np.float64 else 1e-9
    assert np.all(ours <= best + tol)      # no grid point beats the prox
    assert np.all(ours >= best - 1e-6)     # and the grid gets close to it (spacing ~2e-4)
    # the n largest |x| of every group are untouched (ties: the smaller index)
    keep = NM(n, m).mask(x)
    np.testing.assert_array_equal(out[keep], x[keep])
    assert not np.any(np.signbit(out) & (out == 0))  # no negative zeros


def coordinate_search(x, c, n, m, h, start, sweeps=4, num=801):
    """(b): cyclic coordinate minimization over a grid (plus 0, x_i and the current w_i)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, m)
    w = start.copy()
    r = 2 * np.abs(x).max() + 1
    grid = np.linspace(-r, r, num)
    for _ in range(sweeps):
        for i in range(m):
            vals = np.concatenate([np.broadcast_to(grid, (x.shape[0], num)),
                                   np.zeros((x.shape[0], 1)), x[:, i:i + 1], w[:, i:i + 1]], 1)
            W = np.repeat(w[:, None, :], vals.shape[1], axis=1)
            W[:, :, i] = vals
            f = objective(W.reshape(-1, m), np.repeat(x, vals.shape[1], axis=0), c, n, m, h)
            w[:, i] = vals[np.arange(x.shape[0]), np.argmin(f.reshape(x.shape[0], -1), axis=1)]
    return objective(w, x, c, n, m, h)


@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (2, 8)])
@pytest.mark.parametrize("cls,h", TAIL)
def test_tail_prox_multistart_search_finds_nothing_better(cls, h, n, m):
    rng = np.random.default_rng(7)
    for dtype in (np.float64, np.float32):
        x = hard_groups(m, dtype, seed=m)
        lam, tau = 0.3, 1.7
        c = lam * tau
        ours = objective(cls(lam, pattern=NM(n, m)).prox(x, tau), x, c, n, m, h)
        x64 = x.astype(np.float64)
        starts = [x64, np.zeros_like(x64), NM(n, m).project(x64)]
        starts += [x64 * rng.uniform(0, 1, x64.shape) + 0.3 * rng.standard_normal(x64.shape)
                   for _ in range(3)]
        for s in starts:
            found = coordinate_search(x64, c, n, m, h, s.reshape(-1, m))
            assert np.all(ours <= found + 1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls,h", [(L0, "l0"), (L1, "l1")])
def test_separable_prox_matches_grid_hard_inputs(cls, h, dtype):
    x = hard_groups(4, dtype, seed=3).ravel()
    lam, tau = 0.4, 1.3
    c = lam * tau
    out = cls(lam).prox(x, tau)
    assert out.dtype == dtype and out.shape == x.shape
    for xi, wi in zip(x.astype(np.float64), out.astype(np.float64)):
        ours = 0.5 * (wi - xi) ** 2 + c * H[h](np.abs(np.array([wi])))[0]
        best = scalar_grid_min(xi, c, H[h], num=20001)
        assert ours <= best + (1e-12 if dtype == np.float64 else 1e-9)
        assert ours >= best - 1e-6
    assert not np.any(np.signbit(out) & (out == 0))


# ----------------------------------------------------------------------------- edge cases


def test_tail_edge_patterns():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 8))
    for cls in (R0, R1, R2):  # N = M: R = 0, the prox is the identity (a new array)
        p = cls(2.0, pattern=NM(4, 4))
        assert p(x) == 0.0
        out = p.prox(x, 1.0)
        np.testing.assert_array_equal(out, x)
        assert out is not x
    # N = 0: every entry is in the tail, R0 = l0, R1 = l1, R2 = ||w||^2 / 2
    np.testing.assert_array_equal(R0(0.3, pattern=NM(0, 4)).prox(x, 2.0), L0(0.3).prox(x, 2.0))
    np.testing.assert_array_equal(R1(0.3, pattern=NM(0, 4)).prox(x, 2.0), L1(0.3).prox(x, 2.0))
    np.testing.assert_allclose(R2(0.3, pattern=NM(0, 4)).prox(x, 2.0), x / 1.6, rtol=1e-15)
    assert R1(0.3, pattern=NM(0, 4))(x) == pytest.approx(L1(0.3)(x), rel=1e-12)
    assert R2(1.0, pattern=NM(0, 4))(x) == pytest.approx(0.5 * np.sum(x * x), rel=1e-12)
    # lam = 0: identity; empty input; N-sparse input: value 0 and a fixed point
    for cls in (R0, R1, R2, L0, L1):
        np.testing.assert_array_equal(cls(0.0).prox(x, 1.0), x)
        e = np.zeros((0, 8))
        assert cls(1.0).prox(e, 1.0).shape == (0, 8) and cls(1.0)(e) == 0.0
    s = NM(2, 4).project(x)
    for cls in (R0, R1, R2):
        assert cls(1.0)(s) == 0.0
        np.testing.assert_array_equal(cls(5.0).prox(s, 1.0), s)


def test_grad_and_errors():
    x = np.array([3.0, -0.5, 1.5, -2.0, 0.1, 0.2, -0.3, 0.4])
    for p in (L0(1.0), L1(1.0), R0(1.0), R1(1.0)):
        with pytest.raises(NotImplementedError, match="not differentiable"):
            p.grad(x)
    # R2: lam * x on the tail, finite differences at a point with a strict sorted order
    p = R2(0.7)
    g = p.grad(x)
    np.testing.assert_array_equal(g, [0.0, 0.7 * -0.5, 0.7 * 1.5, 0.0, 0.7 * 0.1, 0.7 * 0.2, 0, 0])
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = 1e-6
        assert g[i] == pytest.approx((p(x + e) - p(x - e)) / 2e-6, abs=1e-8)
    assert p.grad(x.astype(np.float32)).dtype == np.float32
    # at a tie of the 2nd and 3rd magnitude the tie rule of NM.mask picks the branch
    np.testing.assert_array_equal(R2(1.0).grad(np.array([2.0, 1.0, 1.0, 0.5])),
                                  [0.0, 0.0, 1.0, 0.5])
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="lam must be finite and non-negative"):
            R1(bad)
    with pytest.raises(ValueError, match="lam must be a real number"):
        L1("1")
    with pytest.raises(ValueError, match="pattern="):
        R1(NM(2, 4))  # the pattern is keyword-only
    with pytest.raises(ValueError, match="pattern must be an NM"):
        R0(1.0, pattern=(2, 4))
    p = R1(1.0)
    with pytest.raises(ValueError, match="lam"):
        p.lam = -2.0
    p.lam = 3
    assert p.lam == 3.0 and isinstance(p.lam, float)
    with pytest.raises(ValueError, match="x"):
        R2(1.0).grad(np.array([1.0, np.inf, 0.0, 0.0]))
    with pytest.raises(ValueError, match="at least one axis"):
        R0(1.0).prox(np.float64(1.0), 1.0)


def test_repr_and_exact_pattern():
    assert repr(L0(0.5)) == "L0(lam=0.5)"
    assert repr(L1(2)) == "L1(lam=2.0)"
    assert repr(R1(0.5, pattern=NM(1, 4))) == "R1(lam=0.5, pattern=NM(n=1, m=4))"
    assert L0().lam == 1.0 and R2().pattern == NM(2, 4)
    assert L0().exact_pattern is None and L1().exact_pattern is None
    assert R2(pattern=NM(2, 8)).exact_pattern is None  # R2 only shrinks the tail
    assert R0(pattern=NM(2, 8)).exact_pattern == NM(2, 8)
    assert R1(pattern=NM(1, 4)).exact_pattern == NM(1, 4)
    for cls in (L0, L1, R0, R1, R2):
        assert "Notes" in cls.__doc__ and "lam" in cls.__doc__
    for cls, eq in ((R0, "eq. 25"), (R1, "eq. 26"), (R2, "eq. 27")):
        assert eq in cls.__doc__


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls", ["R0", "R1", "R2"])
@pytest.mark.parametrize("n, m", [(2, 4), (1, 4), (2, 8), (0, 4), (4, 4), (3, 4)])
def test_tail_prox_numba_kernel_matches_its_array_api_twin(dtype, cls, n, m):
    """The Numba kernel of the R0 / R1 / R2 prox and the array-API code (the path of
    tensors on a GPU) agree bit for bit, signs of zeros included: ties, zeros, signs,
    values at the thresholds."""
    import sparseopt.regularizers as regs

    rng = np.random.default_rng(11)
    Y = rng.standard_normal((64, 8 * m)).astype(dtype)
    Y[:, ::5] = 0.0
    Y[::3, 1::m] = Y[::3, 0::m]  # exact ties inside groups
    Y[::4, 2::m] = -Y[::4, 0::m]  # ties of magnitude with opposite signs
    lam, tau = 0.7, 0.4
    c = tau * lam
    Y[1, :3] = [np.sqrt(2 * c), c, -c]  # at the R0 / R1 thresholds
    r = getattr(regs, cls)(lam, pattern=NM(n, m))
    a, b = r.prox(Y, tau), r._prox_array_api(Y, c)
    assert a.dtype == b.dtype == Y.dtype
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
