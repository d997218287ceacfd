"""The brute-force reference itself: checked against a grid, closed forms and symmetries."""

import itertools

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective


def grid_minimum(y, lam, n, m, points=121):
    """Minimum of the prox objective over a uniform grid of the box between 0 and y
    (the sign argument puts the optimum there; the grid is independent of local search)."""
    axes = [np.linspace(0.0, abs(v), points) * np.sign(v) if v != 0 else np.zeros(1) for v in y]
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, m)
    vals = prox_objective(mesh, np.broadcast_to(y, mesh.shape), lam, NM(n, m))[:, 0]
    return vals.min()


@pytest.mark.parametrize("n, m", [(2, 3), (1, 3), (2, 4)])
def test_reference_beats_grid(n, m):
    rng = np.random.default_rng(n * 10 + m)
    points = 121 if m == 3 else 41
    for lam in (0.2, 1.0):
        for _ in range(3):
            y = rng.standard_normal(m)
            w = prox_bruteforce(y, lam, NM(n, m), starts=5)
            f_ref = prox_objective(w, y, lam, NM(n, m))[0]
            f_grid = grid_minimum(y, lam, n, m, points)
            h = np.max(np.abs(y)) / (points - 1)
            # the reference is at least as good as every grid point, and the grid's best is
            # within the second-order grid error of it: the optimum lies on a face of the box
            # that the grid samples, the nearest grid point is within h sqrt(m) / 2, and
            # ||Hess f|| <= 1 + lam m^2 max|y| on the box, with zero gradient along the face
            assert f_ref <= f_grid + 1e-12
            hess_bound = 1 + lam * m * m * np.max(np.abs(y))
            assert f_grid - f_ref <= 0.5 * hess_bound * m * h * h / 4 + 1e-12


def test_reference_soft_threshold_n0():
    # r_{0:M} is the l1 norm: the prox is soft-thresholding
    rng = np.random.default_rng(1)
    y = rng.standard_normal(12)
    lam = 0.4
    w = prox_bruteforce(y, lam, NM(0, 4), starts=3)
    np.testing.assert_allclose(w, np.sign(y) * np.maximum(np.abs(y) - lam, 0.0), atol=1e-9)


def test_reference_two_sparse_regime():
    # lam much larger than z_3 / (z_1 z_2) and beyond: the result is the 2:4 projection
    y = np.array([3.0, -0.2, -2.0, 0.1])
    w = prox_bruteforce(y, 50.0, NM(2, 4), starts=3)
    np.testing.assert_allclose(w, [3.0, 0.0, -2.0, 0.0], atol=1e-10)


def test_reference_symmetries_and_api():
    rng = np.random.default_rng(2)
    y = rng.standard_normal((2, 8)).astype(np.float32)
    y_copy = y.copy()
    w = prox_bruteforce(y, 0.5, NM(2, 4), starts=3)
    assert w.shape == y.shape and w.dtype == np.float32
    assert np.array_equal(y, y_copy)
    # sign and permutation equivariance of the prox (the objective is invariant under both)
    w_neg = prox_bruteforce(-y, 0.5, NM(2, 4), starts=3)
    np.testing.assert_allclose(w_neg, -w, atol=1e-6)
    perm = [2, 0, 3, 1]
    w_perm = prox_bruteforce(y[:, :4][:, perm], 0.5, NM(2, 4), starts=3)
    np.testing.assert_allclose(w_perm, w[:, :4][:, perm], atol=1e-6)
    # zeros stay zero, lam = 0 is the identity
    z = np.array([0.0, 1.0, 0.0, -2.0])
    assert prox_bruteforce(z, 0.3, NM(2, 4), starts=2)[[0, 2]].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(prox_bruteforce(z, 0.0, NM(2, 4), starts=2), z, atol=1e-12)


def test_reference_is_seed_deterministic():
    y = np.random.default_rng(3).standard_normal(8)
    a = prox_bruteforce(y, 0.7, NM(2, 4), starts=4, seed=5)
    b = prox_bruteforce(y, 0.7, NM(2, 4), starts=4, seed=5)
    assert np.array_equal(a, b)


def test_reference_general_nm_vs_face_enumeration():
    # N:M = 3:5: compare with an exhaustive check of every stationary point on each face,
    # found by local search restricted to that face from several starts (different code path:
    # scipy minimize on the face objective written with itertools products)
    from scipy.optimize import minimize

    rng = np.random.default_rng(4)
    y = rng.standard_normal(5)
    z, lam, n, m = np.abs(y), 0.3, 3, 5

    def f(u):
        r = sum(np.prod(u[list(s)]) for s in itertools.combinations(range(m), n + 1))
        return 0.5 * np.sum((u - z) ** 2) + lam * r

    best = 0.5 * z @ z
    for size in range(1, m + 1):
        for face in itertools.combinations(range(m), size):
            face = list(face)
            for start in (1.0, 0.5):
                def g(v, face=face):
                    u = np.zeros(m)
                    u[face] = v
                    return f(u)

                res = minimize(g, start * z[face], method="L-BFGS-B", bounds=[(0, None)] * size,
                               options={"ftol": 1e-15, "gtol": 1e-11})
                best = min(best, res.fun)
    w = prox_bruteforce(y, lam, NM(n, m), starts=5)
    assert prox_objective(w, y, lam, NM(n, m))[0] <= best + 1e-10


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.array([1.0, np.nan, 0, 0]), 0.1), {}, "NaN"),
        ((np.array([1.0, 2.0, 0.0]), 0.1), {}, "divisible"),
        ((np.ones(4), -0.1), {}, "lam"),
        ((np.ones(4), 0.1, NM(4, 4)), {}, "n must satisfy"),
        ((np.ones(4), 0.1, 2), {}, "pattern must be an NM"),
        ((np.ones(4), 0.1), {"starts": -1}, "starts"),
        ((np.ones(4, dtype=int), 0.1), {}, "floating"),
    ],
)
def test_reference_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        prox_bruteforce(*args, **kwargs)
