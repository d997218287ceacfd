"""Warm-started paths (sparseopt.paths) against independent solves at every grid point."""

import itertools
import subprocess
import sys

import numpy as np
import pytest

from sparseopt import iht_path, iobs_path, maiht_path, prox_path
from sparseopt.objectives import LayerLoss, LeastSquares
from sparseopt.regularizers import L1
from sparseopt.solvers import Schedule, iht, maiht, proximal_gradient


def _problem(n=40, p=10, k=3, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[rng.choice(p, k, replace=False)] = rng.choice([-1.0, 1.0], k) * rng.uniform(1, 3, k)
    return LeastSquares(X, X @ beta + noise * rng.standard_normal(n)), beta


def _best_subset(f, k):
    """min_{|S| = k} 0.5 ||X_S b - y||^2 by enumeration (independent of the solvers)."""
    X, y = f.X, f.y
    best = 0.5 * y @ y
    for S in itertools.combinations(range(X.shape[1]), k):
        b = np.linalg.lstsq(X[:, S], y, rcond=None)[0]
        r = X[:, S] @ b - y
        best = min(best, 0.5 * r @ r)
    return best


@pytest.mark.parametrize("path_fn,kwargs", [
    (iht_path, {"refit": True}),
    (maiht_path, {"max_iter": 2000, "tol": 1e-10}),
])
def test_constrained_paths_reach_best_subset(path_fn, kwargs):
    # k >= k* = 3: below k* the solvers may stop at a local minimum (a k-subset of the
    # support that is not the best one), which is no defect of the path
    f, _ = _problem()
    ks = [3, 4, 5]
    path = path_fn(f, ks=ks, **kwargs)
    assert path.kind == "k" and list(path.grid) == ks
    assert path.coefs.shape == (10, 3) and len(path.results) == 3
    for j, k in enumerate(ks):
        x = path.coefs[:, j]
        assert np.count_nonzero(x) <= k
        assert np.allclose(x, path.results[j].x)
        assert path.fun[j] == pytest.approx(f.value(x), rel=1e-12)
        # the best subset bounds every feasible point from below
        assert path.fun[j] >= _best_subset(f, k) * (1 - 1e-12)
    # at k = k* the path finds the best subset (enumeration); above k* the extra entries
    # fit noise and any choice is a local minimum, but the warm start makes the path
    # non-increasing (each start is feasible for the next, larger level, and the solvers
    # do not increase f from their start on a quadratic)
    brute = _best_subset(f, 3)
    assert abs(path.fun[0] - brute) <= 1e-9 * brute, (path.fun[0], brute)
    assert np.all(np.diff(path.fun) <= 1e-12 * path.fun[0]), path.fun


def test_iobs_path_finds_the_best_support():
    """Top-k I-OBS on a quadratic lands on T_k of a Newton point (eq. 12), not on the least
    squares fit of its support, and it is no descent method; what it must find is the best
    support, whose least-squares refit equals the enumeration's minimum."""
    f, _ = _problem()
    path = iobs_path(f, ks=[3, 4], newton="restricted")
    x = path.coefs[:, 0]
    assert np.count_nonzero(x) == 3
    refit = f.value(f.minimize_on_support(x != 0))
    brute = _best_subset(f, 3)
    assert abs(refit - brute) <= 1e-9 * brute, (refit, brute)
    assert path.fun[0] >= brute and path.fun[1] >= _best_subset(f, 4) * (1 - 1e-12)


def test_constrained_path_warm_starts_from_previous_point():
    f, _ = _problem(seed=1)
    path = iht_path(f, ks=[1, 2, 3], refit=True)
    for j in range(1, 3):
        # history row 0 is the start x0: f at the previous level's solution
        assert path.results[j].history["loss"][0] == pytest.approx(f.value(path.coefs[:, j - 1]))
    assert path.results[0].history["loss"][0] == pytest.approx(f.value(np.zeros(10)))


@pytest.mark.parametrize("path_fn,solver", [(iht_path, iht), (maiht_path, maiht)])
def test_penalised_paths_agree_with_cold_starts(path_fn, solver):
    f, _ = _problem(n=60, p=12, seed=2)
    path = path_fn(f, n_lams=8, eps=1e-3, max_iter=3000, tol=1e-10)
    assert path.kind == "lam" and np.all(np.diff(path.grid) < 0)
    cold = []
    for j, lam in enumerate(path.grid):
        r = solver(f, lam=float(lam), max_iter=3000, tol=1e-10)
        F_cold = f.value(r.x) + lam * np.count_nonzero(r.x)
        cold.append(F_cold)
        x = path.coefs[:, j]
        assert path.fun[j] == pytest.approx(f.value(x) + lam * np.count_nonzero(x), rel=1e-12)
    # the first point (lam_max) has the zero solution
    assert np.count_nonzero(path.coefs[:, 0]) == 0
    assert np.allclose(path.fun, cold, rtol=1e-6, atol=1e-9), (path.fun, cold)
    # the support grows along the path to the full least-squares support size
    assert np.count_nonzero(path.coefs[:, -1]) >= 3


def test_prox_path_is_the_lasso_path():
    sklearn_linear = pytest.importorskip("sklearn.linear_model")
    f, _ = _problem(n=50, p=15, seed=3)
    n = f.X.shape[0]
    path = prox_path(f, n_lams=6, eps=1e-2, max_iter=3000)
    assert path.coefs.shape == (15, 6)
    # 0.5 ||Xw - y||^2 + lam ||w||_1 = n [(1/2n) ||Xw - y||^2 + (lam/n) ||w||_1]
    alphas, coefs, _ = sklearn_linear.lasso_path(f.X, f.y, alphas=path.grid / n, tol=1e-12,
                                                 max_iter=100000)
    for j, lam in enumerate(path.grid):
        F_sk = f.value(coefs[:, j]) + lam * np.abs(coefs[:, j]).sum()
        assert path.fun[j] == pytest.approx(F_sk, rel=1e-8)
        assert np.allclose(path.coefs[:, j], coefs[:, j], atol=1e-5)
        # a cold start with the same budget reaches the same F
        r = proximal_gradient(f, L1(), Schedule(lam / f.lipschitz()), x0=np.zeros(15),
                              max_iter=3000, momentum="fista", progress=False)
        assert path.fun[j] == pytest.approx(f.value(r.x) + lam * np.abs(r.x).sum(), rel=1e-8)
    assert np.count_nonzero(path.coefs[:, 0]) == 0  # lam_max = ||X'y||_inf


def test_matrix_variable_layout():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((8, 40))
    f = LayerLoss(rng.standard_normal((3, 8)), A @ A.T / 40)
    path = iht_path(f, ks=[2, 4], refit=True)
    assert path.coefs.shape == (3, 8, 2)
    for j, k in enumerate([2, 4]):
        assert np.array_equal(path.coefs[..., j], np.asarray(path.results[j].x))
        assert np.all(np.count_nonzero(path.coefs[..., j], axis=1) <= k)
    grid, coefs, results = path  # unpacks like lasso_path
    assert coefs is path.coefs and len(results) == 2


def test_path_arguments_are_checked():
    f, _ = _problem()
    with pytest.raises(ValueError, match="not both"):
        iht_path(f, ks=[1], lams=[1.0])
    with pytest.raises(ValueError, match="exceeds"):
        iht_path(f, ks=[11])
    with pytest.raises(ValueError, match="ks"):
        iobs_path(f, ks=None)
    with pytest.raises(ValueError, match="lams > 0"):
        prox_path(f, lams=[1.0, 0.0])


def test_core_import_does_not_import_sklearn():
    code = "import sys, sparseopt, sparseopt.paths; sys.exit('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
