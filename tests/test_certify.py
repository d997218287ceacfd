"""The moment/SOS certificate (sparseopt.prox.certify): a rigorous lower bound."""

import importlib
import itertools
import warnings

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.prox import prox_nm
from sparseopt.prox.certify import Certificate, certify
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective

certify_mod = importlib.import_module("sparseopt.prox.certify")  # the package re-exports the function

ROUND = 1e-12  # relative slack for float64 rounding of the reference objective only


def _scale(y):
    return np.max(np.abs(y.reshape(-1, 4)), axis=1) ** 2


@pytest.fixture(scope="module")
def instances():
    """(kind, y, lam, w_opt): random groups (brute force) and nearly tied groups (EnumIPM,
    exact for 2:4 by Theorem 7), several lam."""
    rng = np.random.default_rng(0)
    out = []
    for lam in (0.1, 0.5, 2.0):
        y = rng.standard_normal((1, 32))  # 8 groups of 4 per lam
        out.append(("random", y, lam, prox_bruteforce(y, lam, NM(2, 4), starts=4, seed=1)))
    for lam in (0.3, 1.0, 3.0):
        g = rng.standard_normal((8, 4))
        # all |y_i| equal up to 1e-9 relative, per-group scale in [0.5, 2]
        y = np.sign(g) * (1 + 1e-9 * rng.standard_normal((8, 4))) * rng.uniform(0.5, 2, (8, 1))
        out.append(("tied", y.reshape(1, 32), lam, prox_nm(y, lam, method="ipm").reshape(1, 32)))
    return out


@pytest.fixture(scope="module")
def certs(instances):
    return [certify(y, lam, w) for _, y, lam, w in instances]


def test_bound_is_rigorous_and_optima_certified(instances, certs):
    n_cert = {"random": 0, "tied": 0}
    n_all = {"random": 0, "tied": 0}
    worst, above_sdp = -np.inf, 0
    largest_gap = {"random": 0.0, "tied": 0.0}
    for (kind, y, lam, w), cert in zip(instances, certs):
        assert isinstance(cert, Certificate)
        assert cert.bound.shape == (1, 8) and cert.certified.dtype == bool
        scale = _scale(y)
        f_opt = prox_objective(w, y, lam)[0]
        # a lower bound on the global optimum, which the reference attains: no solver slack
        assert np.all(cert.bound[0] <= f_opt + ROUND * scale)
        worst = max(worst, float(np.max((cert.bound[0] - f_opt) / scale)))
        # the solver's primal value is NOT a bound: count how often it is above the optimum
        above_sdp += int(np.sum(cert.info["sdp_value"][0] > f_opt + ROUND * scale))
        np.testing.assert_allclose(cert.value[0], f_opt)
        np.testing.assert_allclose(cert.gap, cert.value - cert.bound)
        ok = cert.certified[0]
        if ok.any():
            largest_gap[kind] = max(largest_gap[kind], float(np.max(cert.gap[0][ok] / scale[ok])))
        n_cert[kind] += int(ok.sum())
        n_all[kind] += ok.size
    print(f"certified random {n_cert['random']}/{n_all['random']}, tied {n_cert['tied']}/{n_all['tied']}; "
          f"max (bound - opt)/scale {worst:.2e}; largest certified gap/scale random "
          f"{largest_gap['random']:.2e}, tied {largest_gap['tied']:.2e}; "
          f"primal SDP value above the optimum in {above_sdp} groups")
    assert n_cert["random"] == n_all["random"]
    assert n_cert["tied"] >= 0.75 * n_all["tied"]  # some tied groups: the relaxation is not tight
    # on random groups the relaxation is tight and the bound well inside tol = 1e-6
    assert largest_gap["random"] <= 5e-7


def test_certificate_is_a_result(instances, certs):
    from sparseopt.result import Result

    for (kind, y, lam, w), cert in zip(instances, certs):
        assert isinstance(cert, Result)
        np.testing.assert_array_equal(cert.x, w)
        assert cert.fun == pytest.approx(float(cert.value.sum()), rel=1e-15)
        assert cert.nit == int(cert.info["solves"].sum()) >= 1
        n_bad = int((~cert.certified).sum())
        expect = "all groups certified" if n_bad == 0 else f"{n_bad} of 8 groups not certified"
        assert cert.stop_reason == expect
        assert cert.history == {}


def test_residual_correction_nonnegative_and_small(instances, certs):
    for (kind, y, lam, w), cert in zip(instances, certs):
        scale = _scale(y)
        corr = cert.info["residual_correction"][0]
        assert np.all(corr >= 0)
        assert np.all(corr[cert.certified[0]] <= 1e-6 * scale[cert.certified[0]])
        assert np.all(cert.info["residual_max"][0] <= 1e-5)
        # bound = gamma - correction, rounded down (gamma, correction are rounded to nearest)
        diff = cert.bound[0] - (cert.info["gamma"][0] - corr)
        assert np.all(np.abs(diff) <= 1e-13 * scale)
        assert np.all(cert.info["solves"][0] >= 1)


def test_sos_identity_pointwise():
    """p = q + r as polynomials: evaluate q (Gram factors, g_k) and r independently at random
    points of the box, and check the bound against the sampled minimum of p."""
    rng = np.random.default_rng(3)
    n, m, order = 2, 4, 2
    problem, zp, zz, lp, blocks, cons = certify_mod._relaxation(n, m, order)
    v = np.array([1.0, 0.75, 0.5, 0.3125])
    lamp = 0.8
    zp.value, zz.value, lp.value = v, np.outer(v, v), lamp
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        problem.solve(solver="CLARABEL")
    Ls = [certify_mod._psd_factor(np.asarray(c.dual_value, dtype=np.float64)) for c in cons]
    bound, gamma, corr, rmax, r = certify_mod._sos_bound(n, m, order, v, lamp, blocks, Ls)
    assert corr >= 0 and float(bound) <= float(gamma)
    mons = certify_mod._monomials(m, 2 * order)
    U = rng.uniform(0, 1, (2000, m)) * v
    U[:50] = v * (rng.uniform(size=(50, m)) < 0.5)  # box vertices
    mono = lambda basis: np.stack([np.prod(U ** np.array(a), axis=1) for a in basis], axis=1)
    e3 = sum(U[:, list(S)].prod(axis=1) for S in itertools.combinations(range(m), n + 1))
    p = 0.5 * np.sum((U - v) ** 2, axis=1) + lamp * e3
    q = np.zeros(len(U))
    for (basis, g), L in zip(blocks, Ls):
        coef = lambda kind, i, j: {"1": 1.0, "z": v[i], "zz": v[i] * v[j]}[kind]
        gval = sum(sign * coef(kind, i, j) * np.prod(U ** np.array(beta), axis=1)
                   for beta, kind, i, j, sign in g)
        assert np.all(gval >= -1e-15)  # g_k >= 0 on the box
        q += gval * np.sum((mono(basis) @ L) ** 2, axis=1)
    rval = mono(mons) @ r
    np.testing.assert_allclose(p, q + rval, atol=1e-12)
    assert float(bound) <= p.min()
    assert p.min() - float(bound) < 1e-6  # tight here


def test_bad_candidates_not_certified(instances):
    n_clear = n_groups = 0
    for kind, y, lam, w in instances[:3]:
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
        # the optimum with its zero entries moved by 1e-3 towards y: the excess
        # f(pert) - f(opt) is first order in 1e-3 but can fall below tol * scale where
        # lam e_N - |y_j| ~ 1e-3; the gap must always see the excess (bound <= optimum)
        scale = _scale(y)
        pert = w + 1e-3 * np.sign(y) * (w == 0)
        excess = prox_objective(pert, y, lam)[0] - prox_objective(w, y, lam)[0]
        cert = certify(y, lam, pert)
        assert np.all(cert.gap[0] >= excess - ROUND * scale)
        clear = excess > 2e-6 * scale
        assert not np.any(cert.certified[0][clear])
        n_clear += int(clear.sum())
        n_groups += clear.size
    print(f"1e-3 perturbation: {n_clear}/{n_groups} groups with excess > 2 tol, none certified")
    assert n_clear >= 0.5 * n_groups


def test_small_perturbation_is_detected():
    y = np.array([2.0, -1.5, 1.0, 0.3])
    lam = 0.3
    w = prox_bruteforce(y, lam, starts=4)
    assert certify(y, lam, w).certified.tolist() == [True]
    worse = w + np.array([0.0, 0.0, 0.0, 0.05])
    cert = certify(y, lam, worse)
    assert cert.certified.tolist() == [False] and cert.gap[0] > 1e-4


def test_certify_scale_and_zero_group_and_other_patterns():
    y = np.zeros(4)
    cert = certify(y, 0.5, np.zeros(4))
    assert cert.certified.tolist() == [True] and cert.bound.tolist() == [0.0]
    assert certify(y, 0.5, np.full(4, 0.1)).certified.tolist() == [False]
    # scale covariance: y -> s y, lam -> lam s^(1-N) multiplies the minimum by s^2
    y = np.array([2.0, -1.5, 1.0, 0.3])
    w = prox_bruteforce(y, 0.3, starts=4)
    c1 = certify(y, 0.3, w)
    c2 = certify(8.0 * y, 0.3 / 8.0, 8.0 * w)
    np.testing.assert_allclose(c2.bound, 64.0 * c1.bound, rtol=1e-12)
    # 1:3 (degree-2 objective) and 2:3 also work with the same relaxation
    rng = np.random.default_rng(5)
    for n in (1, 2):
        y3 = rng.standard_normal(6)
        w3 = prox_bruteforce(y3, 0.4, NM(n, 3), starts=4)
        cert = certify(y3, 0.4, w3, NM(n, 3))
        assert cert.bound.shape == (2,)
        assert np.all(cert.bound <= cert.value + ROUND * np.max(np.abs(y3)) ** 2)
        assert np.all(cert.certified)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.ones(4), 0.1, np.ones(3)), {}, "shape"),
        ((np.ones(4), -1.0, np.ones(4)), {}, "lam"),
        ((np.ones(4), 0.1, np.full(4, np.nan)), {}, "w contains NaN"),
        ((np.ones(4), 0.1, np.ones(4)), {"tol": 0.0}, "tol"),
        ((np.ones(4), 0.1, np.ones(4)), {"order": 1}, "order=1 is too small"),
        ((np.ones(4), 0.1, np.ones(4)), {"refine": -1}, "refine"),
        ((np.ones(4), 0.1, np.ones(4)), {"solver": "NOPE"}, "solver"),
        ((np.ones(4), 0.1, np.ones(4), NM(4, 4)), {}, "n must satisfy"),
        ((np.ones(4), 0.1, np.ones(4), 2), {}, "pattern must be an NM"),
        ((np.ones(6), 0.1, np.ones(6)), {}, "divisible"),
    ],
)
def test_certify_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        certify(*args, **kwargs)
