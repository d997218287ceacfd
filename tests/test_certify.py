"""The moment/SOS certificate (sparseopt.prox.certify): a rigorous lower bound."""

import importlib
import itertools
import warnings
from fractions import Fraction

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
    branched = 0
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
        # the upper value is attained at a feasible point: between the optimum and f(w)
        upper = cert.info["upper"][0]
        assert np.all(upper >= f_opt - ROUND * scale) and np.all(upper <= cert.value[0])
        ok = cert.certified[0]
        stop = cert.info["stop"][0]
        assert np.all(stop[ok] != "better_point") and np.all(stop[ok] != "max_nodes")
        assert np.all((stop == "branch_and_bound") == (cert.info["nodes"][0] > 1))
        if ok.any():
            largest_gap[kind] = max(largest_gap[kind], float(np.max(cert.gap[0][ok] / scale[ok])))
        n_cert[kind] += int(ok.sum())
        n_all[kind] += ok.size
        branched += int(np.sum(cert.info["nodes"][0] > 1))
    print(f"certified random {n_cert['random']}/{n_all['random']}, tied {n_cert['tied']}/{n_all['tied']}; "
          f"max (bound - opt)/scale {worst:.2e}; largest certified gap/scale random "
          f"{largest_gap['random']:.2e}, tied {largest_gap['tied']:.2e}; "
          f"primal SDP value above the optimum in {above_sdp} groups; {branched} groups branched")
    assert n_cert["random"] == n_all["random"]
    # every tied group too; the root relaxation is not tight on some: they were branched
    assert n_cert["tied"] == n_all["tied"]
    assert branched >= 1
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
        root = cert.info["nodes"][0] == 1
        assert np.all(corr >= 0)
        # groups certified at the root: the correction is within the tolerance; a group the
        # root did not certify (branched) may have a larger root correction
        at_root = cert.certified[0] & root
        assert np.all(corr[at_root] <= 1e-6 * scale[at_root])
        assert np.all(cert.info["residual_max"][0] <= 1e-5)
        # root only: bound = gamma - correction, rounded down (gamma, correction are rounded
        # to nearest); branched groups keep the root's figures and every leaf inherits the
        # root bound, so their bound can only be larger
        diff = cert.bound[0] - (cert.info["gamma"][0] - corr)
        assert np.all(np.abs(diff[root]) <= 1e-13 * scale[root])
        assert np.all(diff[~root] >= -1e-13 * scale[~root])
        assert np.all(cert.info["solves"][0] >= 1) and np.all(cert.info["nodes"][0] >= 1)
        assert np.all(cert.info["open_leaves"][0] == 0)  # every branch-and-bound finished
        assert np.all(cert.info["order"][0] == 2) and np.all(cert.info["seconds"][0] > 0)


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
        # a better feasible point stops it before any branching (the 2 largest |y_i| kept)
        assert np.all(cert.info["stop"] == "better_point") and np.all(cert.info["nodes"] == 1)
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
        # the descent from the candidate finds the optimum: stopped at the root, no branching
        assert np.all(cert.info["stop"][0][clear] == "better_point")
        assert np.all(cert.info["nodes"][0][clear] == 1)
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
        ((np.ones(4), 0.1, np.ones(4)), {"max_nodes": 0}, "max_nodes"),
        ((np.ones(4), 0.1, np.ones(4)), {"solver": "NOPE"}, "solver"),
        ((np.ones(4), 0.1, np.ones(4), NM(4, 4)), {}, "n must satisfy"),
        ((np.ones(4), 0.1, np.ones(4), 2), {}, "pattern must be an NM"),
        ((np.ones(6), 0.1, np.ones(6)), {}, "divisible"),
    ],
)
def test_certify_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        certify(*args, **kwargs)


# --- branch-and-bound (where the root relaxation is not tight) ------------------------------


def _tied_table1(count, seed):
    """Nearly tied groups as in theory_checks table1: y = +-(1.6 + 0.01 N(0, 1))."""
    rng = np.random.default_rng(seed)
    return np.sign(rng.standard_normal((count, 4))) * (1.6 + 0.01 * rng.standard_normal((count, 4)))


def _exact_p(n, m, v, lamp, u):
    """p(u) = 0.5 ||u - v||^2 + lamp e_{n+1}(u) in exact rational arithmetic."""
    u = [Fraction(float(x)) for x in u]
    e = sum((np.prod([u[i] for i in S], dtype=object) for S in itertools.combinations(range(m), n + 1)),
            Fraction(0))
    return sum((ui - Fraction(float(vi))) ** 2 for ui, vi in zip(u, v)) / 2 + Fraction(lamp) * e


def test_root_only_misses_tied_groups_that_branching_certifies():
    """At lam = 40 the order-2 relaxation of the whole box is far from tight on nearly tied
    groups (gap ~1e-2 relative): max_nodes=1 (root only) leaves them uncertified, a cap of
    2 nodes stops with an open leaf, the default branch-and-bound certifies them; every
    bound is below the brute-force optimum and every upper value above it."""
    y = _tied_table1(3, 7).reshape(1, 12)
    lam = 40.0
    w = prox_nm(y, lam, method="ipm")
    f_ref = prox_objective(prox_bruteforce(y, lam, starts=8), y, lam)[0]
    scale = _scale(y)
    root = certify(y, lam, w, max_nodes=1)
    capped = certify(y, lam, w, max_nodes=2)
    full = certify(y, lam, w)
    print(f"root only: gap/scale {root.gap[0] / scale}; branched: gap/scale {full.gap[0] / scale}, "
          f"nodes {full.info['nodes'][0]}, solves {full.info['solves'][0]}, "
          f"seconds {full.info['seconds'][0]}")
    assert not np.any(root.certified) and np.all(root.gap[0] > 1e-3 * scale)
    assert np.all(root.info["nodes"] == 1) and np.all(root.info["stop"] == "max_nodes")
    assert not np.any(capped.certified) and np.all(capped.info["stop"] == "max_nodes")
    assert np.all(capped.info["nodes"] == 2) and np.all(capped.info["open_leaves"] >= 1)
    assert np.all(full.certified) and np.all(full.info["nodes"][0] > 1)
    assert np.all(full.info["stop"] == "branch_and_bound") and np.all(full.info["open_leaves"] == 0)
    for cert in (root, capped, full):
        assert np.all(cert.bound[0] <= np.minimum(f_ref, cert.value[0]) + ROUND * scale)
        # the candidate is optimal: no feasible point found is better than it by > tol
        assert np.all(cert.info["upper"][0] >= f_ref - ROUND * scale)
        assert np.all(cert.value[0] - cert.info["upper"][0] <= 1e-6 * scale)
    # every leaf inherits the root bound
    assert np.all(full.bound >= root.bound) and np.all(capped.bound >= root.bound)


def test_wrong_candidates_stop_at_a_better_point():
    """The wrong 2:4 mask and the optimum with its zeros moved so that the excess is 4 tol:
    the descent finds a feasible point better by more than tol, so there is no branching
    and no certificate; the upper value is a feasible value (>= the brute-force optimum)."""
    y = _tied_table1(2, 11).reshape(1, 8)
    lam = 30.0
    w = prox_nm(y, lam, method="ipm")
    f_ref = prox_objective(prox_bruteforce(y, lam, starts=8), y, lam)[0]
    scale = _scale(y)
    g = y.reshape(-1, 4)
    wrong = g.copy()  # the wrong 2:4 mask: keep the two smallest magnitudes
    np.put_along_axis(wrong, np.argsort(np.abs(g), axis=1)[:, 2:], 0.0, axis=1)
    # zeros of the optimum moved towards y so that the excess is 4 tol (objective ~linear
    # in the move: slope lam e_N(u) - |y_j| > 0 at a zero of the optimum)
    slope = (prox_objective(w + 1e-6 * np.sign(y) * (w == 0), y, lam)[0] - f_ref) / 1e-6
    near = w + np.sign(y) * (w == 0) * np.repeat(4e-6 * scale / slope, 4)[None]
    for cand in (wrong.reshape(1, 8), near):
        excess = prox_objective(cand, y, lam)[0] - f_ref
        cert = certify(y, lam, cand)
        assert np.all(excess > 2e-6 * scale)
        assert not np.any(cert.certified)
        assert np.all(cert.info["stop"][0] == "better_point") and np.all(cert.info["nodes"][0] == 1)
        upper = cert.info["upper"][0]
        assert np.all(upper < cert.value[0] - 1e-6 * scale) and np.all(upper >= f_ref - ROUND * scale)
        assert np.all(cert.bound[0] <= f_ref + ROUND * scale)
        assert np.all(cert.gap[0] >= excess - ROUND * scale)


def test_branch_and_bound_never_certifies_wrong_candidates():
    """The search itself, without the better-point stop: with the target above the minimum
    the leaf holding the minimizer is never fathomed, so the search runs out of nodes, and
    the bound (min over all leaves) stays below the minimum (exact, brute force)."""
    y = _tied_table1(1, 11)[0]
    lam = 30.0
    sigma = 2.0  # the power of two >= max |y|, as in certify
    v = np.abs(y) / sigma
    lamp = lam * sigma
    f_min = prox_objective(prox_bruteforce(y, lam, starts=8), y, lam)[0] / sigma**2
    target = Fraction(float(f_min)) + Fraction(1, 10**4)  # a wrong "candidate" 1e-4 too low
    for max_nodes in (2, 8):
        bound, upper, nodes, solves, depth, n_open, stop = certify_mod._branch_and_bound(
            2, 4, 2, v, lamp, Fraction(0), target, 0.0, 0.0, max_nodes, "CLARABEL", [{}], 10, 1e-6)
        assert stop == "max_nodes" and nodes == max_nodes and n_open >= 1 and depth >= 1
        assert bound < target and float(bound) <= f_min + ROUND
        assert upper == 0.0  # nothing below the value passed in is feasible (p > 0 here)


def test_sub_box_pieces_pointwise():
    """The pieces of a leaf bound, against direct evaluation on random sub-boxes: the exact
    polynomial P(t) = p(a + (b - a) t); the interval and SOS bounds (exact Fractions) below
    p evaluated EXACTLY at the sampled points with the smallest float value (the interval
    bound can equal p at a vertex, where float64 evaluation of p may round 1 ulp below
    it); the SOS bound within 1e-6 of the minimum on a small box; the SDP point inside the
    box; the cone step (the rearrangement sorted like v is in the shrunk box, not worse)."""
    rng = np.random.default_rng(4)
    n, m, order = 2, 4, 2
    v = np.array([0.75, 0.9921875, 0.9765625, 0.984375])  # nearly tied, exact dyadic
    lamp = 24.0
    perm = sorted(range(m), key=lambda i: -v[i])
    p = lambda U: certify_mod._objective(n, m, v, lamp, U)
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=m)))
    mons = certify_mod._monomials(m, 3)
    for width in (1.0, 0.25, 1e-3):
        lo = rng.uniform(0, 1 - width, m) * v
        a = [Fraction(float(x)) for x in lo]
        b = [Fraction(float(x)) for x in lo + width * v]
        af, bf = np.array([float(x) for x in a]), np.array([float(x) for x in b])
        T = np.vstack([vertices, rng.uniform(size=(3000, m))])
        U = af + (bf - af) * T
        c = certify_mod._box_poly(n, m, v, lamp, a, b)
        P = np.stack([np.prod(T ** np.array(al), axis=1) for al in mons], axis=1) @ np.array([float(x) for x in c])
        np.testing.assert_allclose(P, p(U), rtol=0, atol=1e-12)
        pu = p(U)
        low = np.argsort(pu)[:20]  # the exact minimum over the sample is among these
        f_min = min(_exact_p(n, m, v, lamp, U[k]) for k in low)
        ib = certify_mod._interval_bound(m, c)
        assert ib <= f_min
        bnd, solves, point = certify_mod._node_bound(n, m, order, v, lamp, a, b, Fraction(10**6),
                                                     "CLARABEL", [{}], 10, 1e-6)
        assert solves == 1 and ib <= bnd <= f_min
        assert np.all(point >= af) and np.all(point <= bf)
        # the descent leaves the sub-box for the whole box: it can only improve on the point
        assert certify_mod._descend(n, m, v, lamp, point[None]) <= p(point[None])[0]
        if width == 1e-3:
            assert f_min - bnd < Fraction(1, 10**6)  # tight on a small box
    # cone: u -> its rearrangement sorted like v lies in the shrunk box and p does not grow
    a0, b0 = [Fraction(0)] * m, [Fraction(float(x)) for x in v]
    U = rng.uniform(size=(500, m)) * v
    Us = np.empty_like(U)
    Us[:, perm] = -np.sort(-U, axis=1)
    assert np.all(p(Us) <= p(U) + 1e-15) and np.all(Us <= v) and np.all(Us >= 0)
    box = certify_mod._tighten(a0, b0, perm)
    assert np.all(Us <= np.array([float(x) for x in box[1]]))
    # a box lying outside the cone is empty after shrinking, one across it is kept
    a1 = list(a0)
    a1[perm[-1]] = Fraction(1, 2)
    b1 = list(b0)
    b1[perm[0]] = Fraction(1, 4)
    assert certify_mod._tighten(a1, b1, perm) is None
    assert certify_mod._tighten(a1, b0, perm) is not None


def test_descend_reaches_the_minimum_and_never_increases():
    """Coordinate descent (the upper bound): from random starts its value is never above the
    start's, and from a point near the optimum it reaches the brute-force minimum."""
    rng = np.random.default_rng(6)
    n, m = 2, 4
    for lam in (0.3, 3.0):
        y = rng.standard_normal(4)
        sigma = 2.0 ** np.frexp(np.max(np.abs(y)))[1]
        v, lamp = np.abs(y) / sigma, lam * sigma
        U = rng.uniform(size=(50, m)) * v
        start = certify_mod._objective(n, m, v, lamp, U)
        for k in range(len(U)):
            assert certify_mod._descend(n, m, v, lamp, U[k:k + 1]) <= start[k]
        w = np.abs(prox_bruteforce(y, lam, starts=8)) / sigma
        f_min = certify_mod._objective(n, m, v, lamp, w[None])[0]
        got = certify_mod._descend(n, m, v, lamp, (w + 1e-3 * v)[None])
        assert f_min - 1e-14 <= got <= f_min + 1e-12
