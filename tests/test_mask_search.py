"""The exact optimal-mask solver of I-OBS (iobs-wu eq. 24) against brute force."""

import itertools
import math

import numpy as np
import pytest

from sparseopt.solvers.mask_search import best_mask, support_value


def paper_objective(v, H, S):
    """(theta+)' H^S theta+ with H^S = I_S'(I_S H^{-1} I_S')^{-1} I_S, literally as in eq. 24."""
    d = len(v)
    Hinv = np.linalg.inv(H)
    HS = np.zeros((d, d))
    S = list(S)
    if S:
        HS[np.ix_(S, S)] = np.linalg.inv(Hinv[np.ix_(S, S)])
    return float(v @ HS @ v), HS


def brute_force(v, H, k):
    """Minimum of eq. 24 over all pruned sets |S| = d - k, the minimizer's update (eq. 23)."""
    d = len(v)
    best = (np.inf, None)
    for S in itertools.combinations(range(d), d - k):
        val, HS = paper_objective(v, H, S)
        if val < best[0]:
            best = (val, S)
    _, HS = paper_objective(v, H, best[1])
    theta = (np.eye(d) - np.linalg.solve(H, HS)) @ v
    return best[0], theta


def random_problem(rng, d, cond_ridge=0.05, n_factor=2):
    A = rng.standard_normal((n_factor * d, d))
    H = A.T @ A / d + cond_ridge * np.eye(d)
    return rng.standard_normal(d), H


@pytest.mark.parametrize("d,k", [(5, 2), (8, 3), (9, 6), (10, 5), (11, 1), (12, 10)])
@pytest.mark.parametrize("method", ["enumerate", "bnb"])
def test_matches_paper_brute_force(d, k, method):
    rng = np.random.default_rng(100 * d + k)
    for _ in range(3):
        v, H = random_problem(rng, d)
        val_bf, theta_bf = brute_force(v, H, k)
        r = best_mask(v, H, k, method=method)
        assert r.solver == method
        assert r.mask.sum() == k
        np.testing.assert_allclose(r.value, val_bf, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(r.theta, theta_bf, rtol=1e-7, atol=1e-9)
        assert np.all(r.theta[~r.mask] == 0)


@pytest.mark.parametrize("d,k", [(14, 7), (16, 8), (16, 3), (16, 13)])
def test_bnb_matches_enumeration_up_to_16(d, k):
    rng = np.random.default_rng(d * 31 + k)
    for trial in range(3):
        # mix structured (nearly sparse Newton point, as in I-OBS) and unstructured instances
        v, H = random_problem(rng, d, cond_ridge=0.01 if trial else 0.2)
        if trial == 2:
            v[rng.permutation(d)[: d // 2]] *= 1e-2
        e = best_mask(v, H, k, method="enumerate")
        b = best_mask(v, H, k, method="bnb")
        assert e.nodes == math.comb(d, k)
        np.testing.assert_allclose(b.value, e.value, rtol=1e-9, atol=1e-12)
        assert b.value <= b.info["greedy_value"] + 1e-12
        # the exact solution is never worse than magnitude (Top-k) masking of v
        topk = np.zeros(d, dtype=bool)
        topk[np.argsort(-np.abs(v), kind="stable")[:k]] = True
        assert e.value <= support_value(v, H, topk)[1] + 1e-12


def test_support_value_schur_identity():
    rng = np.random.default_rng(3)
    v, H = random_problem(rng, 9)
    mask = np.zeros(9, dtype=bool)
    mask[[0, 2, 5, 7]] = True
    theta, val = support_value(v, H, mask)
    S = np.flatnonzero(~mask)
    np.testing.assert_allclose(val, paper_objective(v, H, S)[0], rtol=1e-10)
    # theta is stationary for (w - v)'H(w - v) on the kept coordinates
    np.testing.assert_allclose((H @ (theta - v))[mask], 0, atol=1e-10)


def test_edge_cases_k0_kd_and_exact_sparse_v():
    rng = np.random.default_rng(4)
    v, H = random_problem(rng, 7)
    for method in ("enumerate", "bnb"):
        r0 = best_mask(v, H, 0, method=method)
        assert not r0.mask.any() and np.all(r0.theta == 0)
        np.testing.assert_allclose(r0.value, v @ H @ v, rtol=1e-12)
        rd = best_mask(v, H, 7, method=method)
        assert rd.mask.all() and rd.value == pytest.approx(0, abs=1e-12)
        np.testing.assert_allclose(rd.theta, v, rtol=1e-10)
    # an exactly 3-sparse v is recovered with zero model increase
    w = np.zeros(7)
    w[[1, 4, 6]] = [2.0, -1.0, 0.5]
    for method in ("enumerate", "bnb"):
        r = best_mask(w, H, 3, method=method)
        assert set(np.flatnonzero(r.mask)) == {1, 4, 6}
        assert r.value == pytest.approx(0, abs=1e-12)


def test_inputs_not_modified_and_auto_switch():
    rng = np.random.default_rng(5)
    v, H = random_problem(rng, 20)
    v0, H0 = v.copy(), H.copy()
    r = best_mask(v, H, 10, enumerate_limit=1000)
    assert r.solver == "bnb"
    r2 = best_mask(v, H, 2)
    assert r2.solver == "enumerate"
    np.testing.assert_array_equal(v, v0)
    np.testing.assert_array_equal(H, H0)


def test_node_budget_raises_instead_of_guessing():
    rng = np.random.default_rng(6)
    v, H = random_problem(rng, 24, cond_ridge=0.0)
    with pytest.raises(RuntimeError, match="max_nodes"):
        best_mask(v, H, 12, method="bnb", max_nodes=2)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(v=np.ones((2, 2)), H=np.eye(2), k=1), "v must be a vector"),
        (dict(v=np.ones(3), H=np.eye(2), k=1), "H must have shape"),
        (dict(v=np.ones(3), H=np.eye(3), k=4), "k must be"),
        (dict(v=np.ones(3), H=np.eye(3), k=-1), "k must be"),
        (dict(v=np.array([1.0, np.nan, 0.0]), H=np.eye(3), k=1), "v contains NaN"),
        (dict(v=np.ones(3), H=np.diag([1.0, np.inf, 1.0]), k=1), "H contains NaN"),
        (dict(v=np.ones(3), H=np.diag([1.0, -1.0, 1.0]), k=1), "H must be positive definite"),
        (dict(v=np.ones(2), H=np.array([[1.0, 0.5], [0.0, 1.0]]), k=1), "H must be symmetric"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        best_mask(**kwargs)


def test_bad_options():
    with pytest.raises(ValueError, match="method"):
        best_mask(np.ones(3), np.eye(3), 1, method="miqp")
    with pytest.raises(ValueError, match="max_nodes"):
        best_mask(np.ones(3), np.eye(3), 1, max_nodes=0)
    with pytest.raises(ValueError, match="rtol"):
        best_mask(np.ones(3), np.eye(3), 1, rtol=-1.0)


def test_numerically_singular_H_is_refused():
    B = np.random.default_rng(7).standard_normal((6, 3))
    with pytest.raises(ValueError, match="H must be positive definite"):
        best_mask(np.ones(6), B @ B.T, 3)
