"""Penalties (l0, l1, App. C R0/R1/R2): every prox against brute force."""

import itertools

import numpy as np
import pytest

from sparseopt.penalties import L0, L1, R0, R1, R2


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
        out = cls(lam, n=1, m=2).prox(x, tau)
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
    out = cls(lam, n=n, m=m).prox(x.ravel(), tau).reshape(-1, m)
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
        R1(1.0, n=5, m=4)
