"""EnumIPM (sparseopt.prox.ipm) against the independent brute-force reference and exact cases."""

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.prox.ipm import enum_ipm_sorted
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective


def sort_abs(y):
    """Lemma 3 reduction done in the test: z = |y| sorted descending per row."""
    return -np.sort(-np.abs(y), axis=1)


def objective(w, z, lam, m):
    return prox_objective(w, z, lam, NM(2, m))[:, 0]


@pytest.mark.parametrize("m", [3, 4])
@pytest.mark.parametrize("lam", [0.05, 0.4, 1.5])
def test_ipm_matches_bruteforce(m, lam):
    rng = np.random.default_rng(100 + m)
    y = rng.standard_normal((20, m))
    z = sort_abs(y)
    w = enum_ipm_sorted(z, lam, 2)
    ref = prox_bruteforce(z, lam, NM(2, m), starts=4, seed=1)
    f_ipm, f_ref = objective(w, z, lam, m), objective(ref, z, lam, m)
    scale = np.max(z, axis=1) ** 2
    assert np.all(f_ipm - f_ref <= 1e-10 * scale)
    assert np.all(w >= 0)
    # Lemma 3: the optimum on the sorted domain is sorted
    assert np.all(np.diff(w, axis=1) <= 1e-12)


def test_ipm_general_2_m_matches_bruteforce():
    # the Theorem 7 argument only needs Hess e_3 linear, so 2:5 is supported
    rng = np.random.default_rng(7)
    z = sort_abs(rng.standard_normal((4, 5)))
    for lam in (0.1, 0.6):
        w = enum_ipm_sorted(z, lam, 2)
        ref = prox_bruteforce(z, lam, NM(2, 5), starts=3, seed=2)
        assert np.all(objective(w, z, lam, 5) - objective(ref, z, lam, 5) <= 1e-10 * z[:, 0] ** 2)


def test_ipm_kkt_conditions():
    # KKT of eq. (9): grad_i f = 0 where w_i > 0 and grad_i f >= 0 where w_i = 0 (Lemma 10 proof)
    rng = np.random.default_rng(3)
    z = sort_abs(rng.standard_normal((300, 4)))
    lam = 0.3
    w = enum_ipm_sorted(z, lam, 2)
    s = w.sum(axis=1, keepdims=True)
    e2 = 0.5 * (s[:, 0] ** 2 - np.sum(w * w, axis=1))
    grad = w - z + lam * (e2[:, None] - w * (s - w))
    assert np.max(np.abs(grad[w > 0])) < 1e-9
    assert np.min(grad[w == 0], initial=0.0) > -1e-9
    counts = np.count_nonzero(w, axis=1)
    assert set(np.unique(counts)) == {2, 3, 4}  # the three candidate types all occur
    w2, info = enum_ipm_sorted(z, lam, 2, return_info=True)
    np.testing.assert_array_equal(w2, w)
    assert not np.any(info["uncentered"])
    np.testing.assert_array_equal(info["candidate"], counts)


def test_ipm_exact_cases():
    z = np.array(
        [
            [2.0, 1.0, 0.5, 0.0],  # z_4 = 0: the dense candidate's optimum is on the boundary
            [0.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 1.0, 1.0],  # ties
            [3.0, 0.0, 0.0, 0.0],
        ]
    )
    lam = 0.2
    w = enum_ipm_sorted(z, lam, 2)
    assert w[3].tolist() == [3.0, 0.0, 0.0, 0.0]
    assert w[1].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert w[0, 3] == 0.0
    ref = prox_bruteforce(z, lam, NM(2, 4), starts=4)
    assert np.all(objective(w, z, lam, 4) - objective(ref, z, lam, 4) <= 1e-10 * np.maximum(z[:, 0], 1) ** 2)
    # lam = 0: the prox is the identity
    assert np.array_equal(enum_ipm_sorted(z, 0.0, 2), z)
    # huge lam: exactly the 2-sparse candidate
    big = enum_ipm_sorted(z[:1], 1e3, 2)
    assert big.tolist() == [[2.0, 1.0, 0.0, 0.0]]


def test_ipm_scale_covariance_and_dtype():
    rng = np.random.default_rng(11)
    z = sort_abs(rng.standard_normal((20, 4)))
    c, lam = 3.0, 0.4
    w = enum_ipm_sorted(z, lam, 2)
    wc = enum_ipm_sorted(c * z, lam / c, 2)
    fc = objective(wc, c * z, lam / c, 4)
    assert np.allclose(fc, c**2 * objective(w, z, lam, 4), rtol=1e-10, atol=1e-12)
    w32 = enum_ipm_sorted(z.astype(np.float32), lam, 2)
    assert w32.dtype == np.float32
    assert np.allclose(w32, w, atol=1e-6)
    z_copy = z.copy()
    enum_ipm_sorted(z, lam, 2)
    assert np.array_equal(z, z_copy)


def test_ipm_matches_alm_to_1e12():
    alm = pytest.importorskip("sparseopt.prox.alm")
    rng = np.random.default_rng(5)
    z = sort_abs(rng.standard_normal((400, 4)))
    for lam in (0.1, 0.5, 2.0):
        w_ipm = enum_ipm_sorted(z, lam, 2)
        w_alm = alm.enum_alm_sorted(z, lam, 2, 1e-12, 10_000)
        diff = objective(w_ipm, z, lam, 4) - objective(w_alm, z, lam, 4)
        assert np.max(np.abs(diff) / np.maximum(1.0, z[:, 0] ** 2)) <= 1e-12


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 3}, "n must be 2"),
        ({"lam": -1.0}, "lam"),
        ({"lam": np.nan}, "lam"),
        ({"tol": 0.0}, "tol"),
        ({"z": np.array([[1.0, 2.0, 0.5, 0.1]])}, "sorted"),
        ({"z": np.array([[1.0, 0.5, -0.1, -0.2]])}, "non-negative"),
        ({"z": np.array([[1.0, np.nan, 0.1, 0.0]])}, "NaN"),
        ({"z": np.array([1.0, 0.5, 0.1, 0.0])}, "2-D"),
        ({"z": np.array([[3, 2, 1, 0]])}, "floating"),
        ({"z": np.array([[1.0, 0.5]])}, "m must be >= 3"),
    ],
)
def test_ipm_bad_input(kwargs, match):
    args = {"z": np.array([[1.0, 0.5, 0.2, 0.1]]), "lam": 0.3, "n": 2, "tol": 1e-12}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        enum_ipm_sorted(args["z"], args["lam"], args["n"], args["tol"])


@pytest.mark.parametrize("method", ["ipm", "pgd"])
def test_prox_nm_end_to_end_matches_bruteforce(method):
    # unsorted, signed input through the dispatcher (Lemma 3 done by prox_nm)
    prox = pytest.importorskip("sparseopt.prox")
    rng = np.random.default_rng(31)
    y = rng.standard_normal((3, 16))
    for lam in (0.2, 0.8):
        w = prox.prox_nm(y, lam, 2, 4, method=method)
        ref = prox_bruteforce(y, lam, NM(2, 4), starts=3, seed=4)
        f, f_ref = prox_objective(w, y, lam), prox_objective(ref, y, lam)
        scale = np.max(np.abs(y.reshape(3, 4, 4)), axis=-1) ** 2
        assert np.all(f - f_ref <= 1e-10 * scale)
        assert np.all(np.sign(w) * np.sign(y) >= 0)  # signs restored
