"""EnumPGD (sparseopt.prox.pgd): Numba kernel vs NumPy twin, vs brute force, info, errors."""

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.prox.pgd import _hess_pd, enum_pgd_numpy, enum_pgd_sorted
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective


def sort_abs(y):
    return -np.sort(-np.abs(y), axis=1)


def awkward_groups(m, rng):
    """Random rows plus ties, zeros, all-equal rows and tiny / huge scales."""
    z = sort_abs(rng.standard_normal((60, m)))
    extra = [np.ones(m), np.zeros(m), np.r_[2.0, np.zeros(m - 1)], np.r_[1.0, 1.0, np.zeros(m - 2)]]
    extra += [np.r_[1.5, 1.5, np.full(m - 2, 0.7)], 1e-6 * z[0], 1e4 * z[1]]
    return np.vstack([z, np.array(extra)])


@pytest.mark.parametrize("m", [3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lam", [0.0, 0.2, 1.0, 5.0])
def test_kernel_matches_numpy_twin(m, dtype, lam):
    z = awkward_groups(m, np.random.default_rng(m)).astype(dtype)
    # a cap keeps the Python-level loop of the twin short; capped runs are compared too
    w_nb, info_nb = enum_pgd_sorted(z, lam, 2, max_iter=1500, return_info=True)
    w_np, info_np = enum_pgd_numpy(z, lam, 2, max_iter=1500, return_info=True)
    assert w_nb.dtype == dtype and w_np.dtype == dtype
    # same arithmetic in the same order: identical results
    np.testing.assert_array_equal(w_nb, w_np)
    for key in info_nb:
        np.testing.assert_array_equal(info_nb[key], info_np[key], err_msg=key)


@pytest.mark.parametrize("m", [3, 4])
def test_pgd_matches_bruteforce(m):
    rng = np.random.default_rng(20 + m)
    for lam in (0.05, 0.4, 1.5):
        z = sort_abs(rng.standard_normal((20, m)))
        w = enum_pgd_sorted(z, lam, 2)
        ref = prox_bruteforce(z, lam, NM(2, m), starts=4, seed=3)
        gap = prox_objective(w, z, lam, NM(2, m))[:, 0] - prox_objective(ref, z, lam, NM(2, m))[:, 0]
        assert np.all(gap <= 1e-10 * z[:, 0] ** 2), (lam, gap.max())


def test_pgd_matches_ipm_many():
    from sparseopt.prox.ipm import enum_ipm_sorted

    rng = np.random.default_rng(9)
    z = sort_abs(rng.standard_normal((300, 4)))
    for lam in (0.1, 0.3, 1.0):
        w_p, info = enum_pgd_sorted(z, lam, 2, return_info=True)
        w_i = enum_ipm_sorted(z, lam, 2)
        gap = prox_objective(w_p, z, lam)[:, 0] - prox_objective(w_i, z, lam)[:, 0]
        assert np.all(gap <= 1e-10 * z[:, 0] ** 2)
        # Conjecture 9 on this sample: when the optimum is dense, the dense run stayed convex
        dense = np.count_nonzero(w_p, axis=1) == 4
        assert np.any(dense)
        assert not np.any(info["left_psd_runs"][dense, 1])


def test_hessian_check_matches_eigvalsh():
    rng = np.random.default_rng(4)
    h = np.empty((4, 4))
    for k in (3, 4):
        for _ in range(400):
            w = rng.uniform(0, 1, 4)
            lam = rng.uniform(0, 2)
            a = lam * (w[:k].sum() - w[:k, None] - w[None, :k])
            np.fill_diagonal(a, 1.0)
            ev = np.linalg.eigvalsh(a)[0]
            if abs(ev) > 1e-9:  # away from the singular boundary the answer is unambiguous
                assert _hess_pd(w, lam, k, h) == (ev > 0)


def test_left_psd_flag():
    z = np.array([[1.0, 1.0, 1.0, 1.0]])
    # first iterate w = z / 4: off-diagonal lam (w_i + w_j) = 5 > 1, indefinite Hessian
    _, info = enum_pgd_sorted(z, 10.0, 2, return_info=True)
    assert info["left_psd"].tolist() == [True]
    # lam (w_i + w_j) <= 0.02 along the whole run: always positive definite
    _, info = enum_pgd_sorted(z, 0.01, 2, return_info=True)
    assert info["left_psd"].tolist() == [False]
    assert info["stop_runs"].tolist() == [[0, 0]]


def test_pgd_info_and_limits():
    rng = np.random.default_rng(2)
    z = sort_abs(rng.standard_normal((5, 4)))
    w, info = enum_pgd_sorted(z, 0.3, 2, max_iter=1, return_info=True)
    # one step from 0 is w = z / 4 > 0, far from converged
    assert np.all(info["stop_runs"] == 2) and np.all(info["n_iter"] == 2)
    assert info["left_psd"].shape == (5,) and info["left_psd"].dtype == bool
    assert info["n_iter_runs"].shape == (5, 2)
    # the Hessian tracking (only done for return_info) does not change the result
    w_plain = enum_pgd_sorted(z, 0.3, 2)
    w_info, _ = enum_pgd_sorted(z, 0.3, 2, return_info=True)
    np.testing.assert_array_equal(w_plain, w_info)
    w0 = enum_pgd_sorted(np.zeros((2, 3)), 0.5, 2)
    assert np.array_equal(w0, np.zeros((2, 3)))
    # huge lam: the 2-sparse candidate, exactly
    assert enum_pgd_sorted(np.array([[2.0, 1.0, 0.5, 0.2]]), 1e3, 2).tolist() == [[2.0, 1.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 1}, "n must be 2"),
        ({"z": np.ones((2, 5))}, "m must be 3 or 4"),
        ({"lam": -0.1}, "lam"),
        ({"tol": -1.0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"z": np.array([[0.1, 0.5, 0.2, 0.0]])}, "sorted"),
        ({"z": np.array([[np.inf, 0.5, 0.2, 0.0]])}, "NaN or Inf"),
    ],
)
def test_pgd_bad_input(kwargs, match):
    args = {"z": np.array([[1.0, 0.5, 0.2, 0.1]]), "lam": 0.3, "n": 2, "tol": 1e-12, "max_iter": 100}
    args.update(kwargs)
    for fn in (enum_pgd_sorted, enum_pgd_numpy):
        with pytest.raises(ValueError, match=match):
            fn(args["z"], args["lam"], args["n"], args["tol"], args["max_iter"])


def test_two_cycle_at_large_lam_stops_at_once():
    """At a large lam, projected gradient from 0 can alternate between two points with the
    same gradient-mapping norm; the stop rule "||G|| did not decrease" ends such a run at
    once (with ">", it ran to max_iter = 100000 on 23 of 100 groups at lam = 30) and the
    answer is the exact prox, in the kernel and its NumPy twin."""
    from sparseopt.prox import prox_nm
    from sparseopt.prox.pgd import STOP_MAX_ITER, enum_pgd_numpy, enum_pgd_sorted

    rng = np.random.default_rng(0)
    z = -np.sort(-np.abs(rng.standard_normal((100, 4))), axis=1)
    for lam in (30.0, 100.0):
        w, info = enum_pgd_sorted(z, lam, return_info=True)
        w_np, info_np = enum_pgd_numpy(z, lam, return_info=True)
        np.testing.assert_array_equal(w, w_np)
        np.testing.assert_array_equal(info["n_iter_runs"], info_np["n_iter_runs"])
        assert not np.any(info["stop_runs"] == STOP_MAX_ITER)
        assert info["n_iter_runs"].max() < 1000
        np.testing.assert_allclose(w, prox_nm(z, lam), rtol=0, atol=1e-12)
