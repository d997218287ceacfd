"""The moment-SDP certificate (sparseopt.prox.certify)."""

import numpy as np
import pytest

from sparseopt.prox.certify import Certificate, certify
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective

SOLVER_SLACK = 1e-5  # Clarabel stops at ~1e-7..1e-6 relative accuracy on these degenerate SDPs


@pytest.fixture(scope="module")
def instances():
    rng = np.random.default_rng(0)
    out = []
    for lam in (0.1, 0.5, 2.0):
        y = rng.standard_normal((1, 32))  # 8 groups of 4 per lam
        out.append((y, lam, prox_bruteforce(y, lam, 2, 4, starts=4, seed=1)))
    return out


def test_bound_below_optimum_and_certifies(instances):
    n_cert = n_all = 0
    for y, lam, w in instances:
        cert = certify(y, lam, w)
        assert isinstance(cert, Certificate)
        assert cert.bound.shape == (1, 8) and cert.certified.dtype == bool
        scale = np.max(np.abs(y.reshape(-1, 4)), axis=1) ** 2
        # a lower bound on the global optimum, which the brute force attains
        f_opt = prox_objective(w, y, lam)[0]
        assert np.all(cert.bound[0] <= f_opt + SOLVER_SLACK * scale)
        np.testing.assert_allclose(cert.value[0], f_opt)
        np.testing.assert_allclose(cert.gap, cert.value - cert.bound)
        n_cert += int(cert.certified.sum())
        n_all += cert.certified.size
    print(f"certified {n_cert}/{n_all} brute-force optima")
    assert n_cert >= 0.9 * n_all


def test_bad_candidates_not_certified(instances):
    for y, lam, w in instances:
        # w = y: no regularization progress at all; the groups are dense so r(y) > 0
        assert not np.any(certify(y, lam, y).certified)
        # the wrong 2:4 mask: keep the two smallest magnitudes of each group
        g = y.reshape(-1, 4)
        order = np.argsort(np.abs(g), axis=1)
        bad = g.copy()
        np.put_along_axis(bad, order[:, 2:], 0.0, axis=1)
        cert = certify(y, lam, bad.reshape(y.shape))
        assert not np.any(cert.certified)
        assert np.all(cert.gap > 1e-3)


def test_small_perturbation_is_detected():
    y = np.array([2.0, -1.5, 1.0, 0.3])
    lam = 0.3
    w = prox_bruteforce(y, lam, starts=4)
    assert certify(y, lam, w).certified.tolist() == [True]
    worse = w + np.array([0.0, 0.0, 0.0, 0.05])
    cert = certify(y, lam, worse)
    assert cert.certified.tolist() == [False] and cert.gap[0] > 1e-4


def test_certify_zero_group_and_other_patterns():
    y = np.zeros(4)
    assert certify(y, 0.5, np.zeros(4)).certified.tolist() == [True]
    assert certify(y, 0.5, np.full(4, 0.1)).certified.tolist() == [False]
    # 1:3 (degree-2 objective) and 2:3 also work with the same relaxation
    rng = np.random.default_rng(5)
    for n in (1, 2):
        y3 = rng.standard_normal(6)
        w3 = prox_bruteforce(y3, 0.4, n, 3, starts=4)
        cert = certify(y3, 0.4, w3, n, 3)
        assert cert.bound.shape == (2,)
        assert np.all(cert.bound <= cert.value + SOLVER_SLACK * np.max(np.abs(y3)) ** 2)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.ones(4), 0.1, np.ones(3)), {}, "shape"),
        ((np.ones(4), -1.0, np.ones(4)), {}, "lam"),
        ((np.ones(4), 0.1, np.full(4, np.nan)), {}, "w contains NaN"),
        ((np.ones(4), 0.1, np.ones(4)), {"tol": 0.0}, "tol"),
        ((np.ones(4), 0.1, np.ones(4)), {"order": 1}, "order=1 is too small"),
        ((np.ones(4), 0.1, np.ones(4)), {"solver": "NOPE"}, "solver"),
        ((np.ones(4), 0.1, np.ones(4), 4, 4), {}, "n must satisfy"),
        ((np.ones(6), 0.1, np.ones(6)), {}, "divisible"),
    ],
)
def test_certify_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        certify(*args, **kwargs)
