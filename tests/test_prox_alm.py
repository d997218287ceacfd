"""EnumALM and the closed forms against independent brute force and the NumPy twin."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from sparseopt import NM
from sparseopt.prox import prox_nm
from sparseopt.prox.alm import alm_trace, enum_alm_numpy, enum_alm_sorted
from sparseopt.regularizers import elementary_symmetric, prox_objective


def _esym_all(u, k):
    """e_0..e_k of u by the product recursion (plain, independent of the package)."""
    e = np.zeros(k + 1)
    e[0] = 1.0
    for x in u:
        e[1:] = e[1:] + x * e[:-1]
    return e


def f_sorted(w, z, lam, n):
    """0.5 ||w - z||^2 + lam e_{n+1}(w) for w >= 0 (the objective after Lemma 3)."""
    return 0.5 * np.sum((w - z) ** 2) + lam * _esym_all(w, n + 1)[n + 1]


def fun_grad(u, zS, lam, n, rest):
    """Objective and gradient; e_n(u without i) by deflation e_j(u-i) = e_j - u_i e_{j-1}(u-i)."""
    e = _esym_all(u, n + 1)
    d = np.ones_like(u)  # e_0(u without i)
    for j in range(1, n + 1):
        d = e[j] - u * d
    g = u - zS + lam * d if n > 0 else u - zS + lam
    return 0.5 * np.sum((u - zS) ** 2) + lam * e[n + 1] + rest, g


def bruteforce_group(y, lam, n, starts=3, seed=0):
    """Independent prox value of one group: multi-start L-BFGS-B on every support of size > n.

    Works on the original y (no sort, no use of Lemma 3 or of ALM): for every index set S
    with |S| > n the variables outside S are 0 and |w_S| minimizes the objective over the
    orthant (flipping a sign of w toward y lowers the quadratic and keeps r). |S| <= n is
    covered by keeping the n largest |y| (then r = 0). Returns the best value found.
    """
    rng = np.random.default_rng(seed)
    m = y.size
    a = np.abs(y)
    best = 0.5 * np.sum(np.sort(a)[: m - n] ** 2)
    for k in range(n + 1, m + 1):
        for S in itertools.combinations(range(m), k):
            zS = a[list(S)]
            rest = 0.5 * (np.sum(a**2) - np.sum(zS**2))
            x0s = [zS.copy()] + [rng.uniform(0, 1, k) * zS for _ in range(starts - 1)]
            for x0 in x0s:
                r = minimize(fun_grad, x0, args=(zS, lam, n, rest), jac=True, method="L-BFGS-B",
                             bounds=[(0, None)] * k,
                             options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 400})
                best = min(best, float(r.fun))
    return best


# ----------------------------------------------------------------------------- vs brute force


def test_alm_2_4_matches_bruteforce_1e10():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((16, 4))
    for lam in [0.05, 0.3, 0.8]:
        W = prox_nm(Y, lam)
        ours = prox_objective(W, Y, lam).ravel()
        for g in range(Y.shape[0]):
            bf = bruteforce_group(Y[g], lam, 2, starts=3, seed=g)
            assert ours[g] <= bf + 1e-10, (lam, g, ours[g], bf)
            assert bf <= ours[g] + 1e-7  # the brute force is itself accurate


@pytest.mark.parametrize("n,m", [(2, 3), (3, 4), (2, 5), (2, 8), (4, 8)])
def test_alm_general_nm_matches_bruteforce(n, m):
    rng = np.random.default_rng(10 * n + m)
    G = 2 if m == 8 else (3 if m == 5 else 6)
    Y = rng.standard_normal((G, m))
    for lam in [0.15] if m == 8 else [0.1, 0.5]:
        W = prox_nm(Y, lam, n, m)
        ours = prox_objective(W, Y, lam, NM(n, m)).ravel()
        for g in range(G):
            bf = bruteforce_group(Y[g], lam, n, starts=1 if m == 8 else 2, seed=g)
            assert ours[g] <= bf + 1e-10, (n, m, lam, g, ours[g], bf)
            assert bf <= ours[g] + 1e-7


def test_many_cells_2_4_kkt_and_decrease_vs_candidates():
    """On many random cells the ALM answer is a KKT point of the sorted problem and is no
    worse than the 2-sparse candidate and than the projections of itself."""
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((4000, 4)) * rng.uniform(0.1, 3, (4000, 1))
    lam = 0.4
    W = prox_nm(Y, lam)
    z = np.abs(Y)
    w = np.abs(W)
    assert np.all(np.sign(W) * np.sign(Y) >= 0)
    g = np.stack([w[:, i] - z[:, i] + lam * elementary_symmetric(np.delete(w, i, axis=1), 2)
                  for i in range(4)], axis=1)
    scale = z.max(axis=1, keepdims=True)
    pos = w > 0
    assert np.all(np.abs(g[pos]) <= 1e-9 * np.broadcast_to(scale, g.shape)[pos] + 1e-12)
    assert np.all(g[~pos] >= -1e-9 * np.broadcast_to(scale, g.shape)[~pos])
    two = np.where(np.argsort(np.argsort(-z, axis=1, kind="stable"), axis=1) < 2, Y, 0.0)
    assert np.all(prox_objective(W, Y, lam) <= prox_objective(two, Y, lam) + 1e-12)


# ----------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("lam", [0.0, 0.2, 0.6, 0.95, 1.0, 1.7])
def test_r1m_closed_form_matches_bruteforce(m, lam):
    rng = np.random.default_rng(m)
    Y = rng.standard_normal((4, m))
    W = prox_nm(Y, lam, 1, m)
    ours = prox_objective(W, Y, lam, NM(1, m)).ravel()
    for g in range(Y.shape[0]):
        bf = bruteforce_group(Y[g], lam, 1, starts=2, seed=g)
        assert ours[g] <= bf + 1e-10, (m, lam, g, ours[g], bf)
    if lam >= 1.0:
        assert np.all(np.count_nonzero(W, axis=1) <= 1)


@pytest.mark.parametrize("lam", [0.1, 0.5, 0.9, 1.0, 2.0])
def test_r1m_closed_form_matches_alm_kernel_m8(lam):
    """Two independent routes for 1:8: the closed form and EnumALM with n = 1."""
    rng = np.random.default_rng(3)
    Y = rng.standard_normal((200, 8))
    z = -np.sort(-np.abs(Y), axis=1)
    W = prox_nm(z, lam, 1, 8)
    A = enum_alm_sorted(z, lam, 1, 1e-13, 20000)
    d = prox_objective(W, z, lam, NM(1, 8)).ravel() - prox_objective(A, z, lam, NM(1, 8)).ravel()
    assert np.all(d <= 1e-12), d.max()


def test_r0m_is_soft_thresholding_and_matches_grid():
    rng = np.random.default_rng(1)
    y = rng.standard_normal(16)
    lam = 0.35
    w = prox_nm(y, lam, 0, 4)
    np.testing.assert_allclose(w, np.sign(y) * np.maximum(np.abs(y) - lam, 0))
    grid = np.linspace(-4, 4, 80001)
    for yi, wi in zip(y, w):
        best = np.min(0.5 * (grid - yi) ** 2 + lam * np.abs(grid))
        assert 0.5 * (wi - yi) ** 2 + lam * abs(wi) <= best + 1e-12


# ----------------------------------------------------------------------------- kernel vs twin


def _adversarial(m, dtype, rng):
    rows = [
        rng.standard_normal((60, m)),
        np.ones((2, m)),  # all equal
        -np.ones((1, m)) * 0.8,
        np.zeros((2, m)),  # zeros
        np.round(rng.standard_normal((20, m)), 1),  # many ties
        rng.standard_normal((10, m)) * np.array([1.0, 0.0] * (m // 2) + [0.0] * (m % 2)),
        -np.abs(rng.standard_normal((10, m))),  # negatives
    ]
    return np.concatenate(rows).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,m", [(2, 4), (2, 3), (3, 4), (2, 8)])
def test_kernel_agrees_with_numpy_twin(dtype, n, m):
    rng = np.random.default_rng(7)
    Y = _adversarial(m, dtype, rng)
    Y0 = Y.copy()
    for lam in [0.15, 0.5, 1.0]:
        W = prox_nm(Y, lam, n, m, tol=1e-12)
        T = enum_alm_numpy(Y, lam, n, m, 1e-12, 20000)
        assert W.dtype == dtype and T.dtype == dtype
        fw = prox_objective(W, Y, lam, NM(n, m)).ravel()
        ft = prox_objective(T, Y, lam, NM(n, m)).ravel()
        np.testing.assert_allclose(fw, ft, rtol=0, atol=1e-10 if dtype == np.float64 else 1e-5)
        # tied magnitudes can give several optimal points; elsewhere the points agree too
        distinct = np.all(np.diff(np.sort(np.abs(Y), axis=1), axis=1) > 0, axis=1)
        assert distinct.sum() >= 60
        atol = 1e-9 if dtype == np.float64 else 2e-6
        np.testing.assert_allclose(W[distinct], T[distinct], rtol=0, atol=atol)
        assert np.all((W == 0) | (np.sign(W) == np.sign(Y)))
        assert not np.any(np.signbit(W) & (W == 0))  # no negative zeros
    np.testing.assert_array_equal(Y, Y0)


def test_sorted_kernel_matches_full_kernel():
    rng = np.random.default_rng(8)
    Y = rng.standard_normal((300, 4))
    z = -np.sort(-np.abs(Y), axis=1)
    for lam in [0.2, 0.7]:
        ws, info = enum_alm_sorted(z, lam, 2, 1e-12, 10000, return_info=True)
        wf = prox_nm(z, lam)
        np.testing.assert_array_equal(ws, wf)
        assert info["n_iter"].shape == (300,) and not info["max_iter_reached"].any()
    with pytest.raises(ValueError, match="sorted"):
        enum_alm_sorted(z[:, ::-1].copy(), 0.3, 2, 1e-12, 100)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scalar_2_4_kernel_matches_generic_kernel(dtype):
    """The 2:4 scalar kernel and the generic N:M kernel run the same algorithm."""
    from sparseopt.prox.alm import enum_alm_rows

    rng = np.random.default_rng(13)
    Y = _adversarial(4, dtype, rng)
    for lam in [0.05, 0.3, 0.9, 4.0]:
        w_fast, it_fast, _ = enum_alm_rows(Y, lam, 2, 1e-12, 10000)
        w_gen, it_gen, _ = enum_alm_rows(Y, lam, 2, 1e-12, 10000, generic=True)
        assert w_fast.dtype == dtype
        atol = 1e-12 if dtype == np.float64 else 1e-6
        np.testing.assert_allclose(w_fast, w_gen, rtol=0, atol=atol)
        assert it_fast.sum() <= it_gen.sum()  # more bracket passes prune more candidates


def test_shortcuts_are_exact_on_many_cells():
    """Pruning and Newton steps change nothing: the kernel and the plain twin (no shortcuts)
    agree in objective on cells spread over all three regimes."""
    rng = np.random.default_rng(9)
    Y = rng.standard_normal((400, 4))
    lams = np.exp(rng.uniform(np.log(0.01), np.log(30.0), 400))
    for g in range(0, 400, 50):
        lam = float(lams[g])
        W = prox_nm(Y[g : g + 50], lam)
        T = enum_alm_numpy(Y[g : g + 50], lam, 2, 4, 1e-12, 20000)
        Yb = Y[g : g + 50]
        d = prox_objective(W, Yb, lam).ravel() - prox_objective(T, Yb, lam).ravel()
        assert np.all(d <= 1e-12), (lam, d.max())


def _hess_grad_24(w, z, lam, face):
    """Gradient and Hessian of 0.5 ||w - z||^2 + lam e_3(w) on the coordinates `face`
    (eq. 23, 24), by brute-force sums over triples (independent of the kernel)."""
    m = len(w)
    idx = list(face)
    g = np.array([w[i] - z[i] + lam * sum(w[a] * w[b] for a, b in itertools.combinations(
        [k for k in range(m) if k != i], 2)) for i in idx])
    H = np.eye(len(idx))
    for p, i in enumerate(idx):
        for q, j in enumerate(idx):
            if i != j:
                H[p, q] = lam * sum(w[k] for k in range(m) if k not in (i, j))
    return g, H


def test_newton_steps_match_linear_algebra():
    """The closed-form Newton steps (adjugate for 3x3, LDL^T for 4x4) equal
    w - H^{-1} grad from np.linalg, and refuse exactly when H is not positive definite."""
    from sparseopt.prox.alm import _newton3, _newton4

    rng = np.random.default_rng(21)
    n_pd = n_refused = 0
    for _ in range(400):
        w = rng.uniform(0.05, 1.0, 4)
        z = rng.uniform(0.0, 1.5, 4)
        lam = float(rng.uniform(0.05, 2.0))
        for face, fn, args in (((0, 1, 2, 3), _newton4, (*w, *z, lam)),
                               ((0, 1, 2), _newton3, (*w[:3], *z[:3], lam))):
            wf = w.copy() if len(face) == 4 else np.append(w[:3], 0.0)
            g, H = _hess_grad_24(wf, z, lam, face)
            eig = np.linalg.eigvalsh(H)
            r = fn(*args)
            step = r[-1]
            if abs(eig.min()) < 1e-9:
                continue  # too close to singular to call either way
            if eig.min() < 0:
                assert step < 0
                n_refused += 1
                continue
            x = wf[list(face)] - np.linalg.solve(H, g)
            if np.all(x > 1e-9):
                n_pd += 1
                assert step >= 0
                np.testing.assert_allclose(r[:-1], x, rtol=0, atol=1e-8 * max(1.0, np.abs(x).max()))
                assert step == pytest.approx(np.abs(x - wf[list(face)]).max(), rel=1e-6, abs=1e-12)
            elif np.any(x < -1e-9):
                assert step < 0  # leaves the open orthant
    assert n_pd > 100 and n_refused > 50


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_2_4_kernel_agrees_with_twin_random_and_nearly_tied(dtype):
    """The 2:4 kernel (Newton from sweep change 0.1 max z, square-root-free solves) agrees
    with the plain twin on random groups and on groups whose magnitudes differ by 1e-6."""
    rng = np.random.default_rng(22)
    base = rng.standard_normal((40, 1))
    tied = base + 1e-6 * rng.standard_normal((40, 4)) * rng.integers(0, 2, (40, 4))
    Y = np.concatenate([rng.standard_normal((60, 4)), tied]).astype(dtype)
    for lam in [0.1, 0.3, 0.65, 1.0, 3.0]:
        W = prox_nm(Y, lam, tol=1e-12)
        T = enum_alm_numpy(Y, lam, 2, 4, 1e-12, 20000)
        fw = prox_objective(W, Y, lam).ravel()
        ft = prox_objective(T, Y, lam).ravel()
        np.testing.assert_allclose(fw, ft, rtol=0, atol=1e-10 if dtype == np.float64 else 1e-5)
        atol = 1e-9 if dtype == np.float64 else 2e-6
        np.testing.assert_allclose(W[:60], T[:60], rtol=0, atol=atol)  # distinct magnitudes


# ----------------------------------------------------------------------------- ALM trace


def test_alm_trace_sufficient_decrease_prop8():
    rng = np.random.default_rng(11)
    for _ in range(20):
        z = np.sort(np.abs(rng.standard_normal(4)))[::-1]
        lam = float(rng.uniform(0.05, 1.0))
        for s in (3, 4):
            it = alm_trace(z, lam, 2, s, 30)
            assert it.shape == (31, 4)
            np.testing.assert_array_equal(it[0], np.where(np.arange(4) < s, z, 0))
            f = np.array([f_sorted(w, z, lam, 2) for w in it])
            step = 0.5 * np.sum(np.diff(it, axis=0) ** 2, axis=1)
            assert np.all(f[:-1] >= f[1:] + step - 1e-12)


def test_max_iter_warning():
    Y = np.random.default_rng(12).standard_normal((50, 4))
    with pytest.warns(RuntimeWarning, match="max_iter"):
        prox_nm(Y, 0.3, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prox_nm(Y, 0.3)


# ----------------------------------------------------------------------------- 2:4 kernel passes


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_2_4_exact_cuts_change_nothing(dtype):
    """The 2:4 kernel skips a candidate whose lower bound exceeds f at a feasible point (the
    clipped starts), and the dense candidate when the best point so far is a KKT point with a
    positive definite Hessian (``_dense_cannot_win``). The cuts must return bit for bit what
    the kernel returns without them, on every regime of lam and on ties, zeros and signs,
    and they must actually skip solves."""
    from sparseopt.prox.alm import enum_alm_rows

    rng = np.random.default_rng(31)
    Y = np.concatenate([rng.standard_normal((3000, 4)), _adversarial(4, np.float64, rng)])
    Y = Y.astype(dtype)
    skipped = 0
    for lam in [0.02, 0.1, 0.3, 1.0, 3.0]:
        w_cut, it_cut, _ = enum_alm_rows(Y, lam, 2, 1e-12, 10000)
        w_all, it_all, _ = enum_alm_rows(Y, lam, 2, 1e-12, 10000, cuts=False)
        np.testing.assert_array_equal(w_cut, w_all)
        np.testing.assert_array_equal(np.signbit(w_cut), np.signbit(w_all))
        assert np.all(it_cut <= it_all)
        skipped += int(np.sum(it_cut < it_all))
    assert skipped > 300  # the cut fires (about 1 group in 10 at lam = 0.1 and 0.3)


@pytest.mark.parametrize("G", [1, 3, 255, 256, 257, 600])
def test_2_4_kernel_chunk_edges(G):
    """The 2:4 kernel works on chunks of 256 groups (a short last chunk is padded with a
    copy of a real group): every group's result equals the group solved alone."""
    rng = np.random.default_rng(G)
    Y = rng.standard_normal((G, 4))
    Y[::4, 3] = 0.0
    W = prox_nm(Y, 0.4)
    for g in range(0, G, max(1, G // 40)):
        np.testing.assert_array_equal(W[g], prox_nm(Y[g], 0.4))


@pytest.mark.parametrize("name", ["_bound24", "_fast24_s3", "_fast24_s4", "_decide_pass24",
                                  "_judge_pass24", "_store24", "_screen_pass24"])
def test_2_4_kernel_passes_are_vectorized(name):
    """The chunk passes of the 2:4 kernel are written branch-free on a structure-of-arrays
    scratch so that LLVM vectorizes them (most of their speed, docs/prox.md). Fails if an
    edit brings back a branch or an aliasing pattern that keeps the loop scalar: then the
    compiled loop computes with scalar instructions only (mulsd, no mulpd). Compiled
    afresh here (a function loaded from Numba's cache has no assembly to show)."""
    import re

    from numba import njit

    from sparseopt.prox import alm

    fn = njit(error_model="numpy")(getattr(alm, name).py_func)
    S = np.random.default_rng(0).uniform(0.1, 1.0, alm._ROWS * alm._CHUNK)
    fast = (S, 0.3, 1e-12, 10000)
    T = np.random.default_rng(1).uniform(0.1, 1.0, alm._SROWS * alm._CHUNK)
    args = {"_bound24": (S, 0.3, True), "_fast24_s3": fast, "_fast24_s4": fast,
            "_decide_pass24": (S, 0.3, 10000, True), "_judge_pass24": (S, 0.3, 10000),
            "_store24": (S,), "_screen_pass24": (T, 0.3)}
    fn(*args[name])
    asm = "\n".join(fn.inspect_asm().values())
    # float64 arithmetic, packed against scalar (_store24 has subtractions, no products).
    # _fast24's second pass on the packed lanes has a run-time count, so LLVM adds a scalar
    # remainder loop with the same body: there the scalar count is that loop's.
    packed = len(re.findall(r"\bv?(?:mul|add|sub)pd\b", asm))
    scalar = len(re.findall(r"\bv?(?:mul|add|sub)sd\b", asm))
    assert packed > scalar, (packed, scalar)


@pytest.mark.parametrize("lam, s, share, tol", [(0.1, 3, 0.5, 1e-12), (0.3, 3, 0.5, 1e-12),
                                                (1.0, 3, 0.1, 1e-12), (0.1, 4, 0.9, 1e-12),
                                                (0.3, 4, 0.25, 1e-12), (0.01, 4, 0.9, 1e-8)])
def test_2_4_lockstep_alm_equals_scalar_alm(lam, s, share, tol):
    """``_fast24`` runs the ALM of ``_alm24`` for candidate s in lock-step over a chunk for the
    groups on its common path (a sweep, at most 3 Newton steps, a confirming sweep). Each
    group it finishes must carry ``_alm24``'s point and sweep count bit for bit, and it must
    finish a good share of the groups that may need the candidate (s = 3: most of them at
    lam <= 0.3, s = 4: most at lam = 0.1; at larger lam the dense candidate's ALM mostly
    ends on a face and Newton is refused more often). At lam = 0.01 with float32's
    tolerance the first sweep finishes most groups and the Newton pass runs on the others,
    packed: the dense case must have groups of both kinds (1 and 2 sweeps), so that a lane
    mixed up by the packing would show."""
    from sparseopt.prox import alm

    rng = np.random.default_rng(41)
    S = np.zeros(alm._ROWS * alm._CHUNK)
    C = alm._CHUNK
    Y = rng.standard_normal((C, 4))
    Y[:8] = np.round(Y[:8], 1)  # ties
    Y[8:12, 2:] = 0.0  # zeros
    for k in range(4):
        S[(alm._Y + k) * C:(alm._Y + k + 1) * C] = Y[:, k]
    alm._bound24(S, lam, True)
    if s == 3:
        alm._fast24_s3(S, lam, tol, 10000)
    else:
        S[alm._RT * C:(alm._RT + 1) * C] = 1.0  # route 1: the lock-step solves every group
        alm._fast24_s4(S, lam, tol, 10000)
    row = lambda r: S[r * C:(r + 1) * C]  # noqa: E731
    solve, x, w, it_row = ((alm._SOLVE3, alm._X3, alm._W3, alm._IT3) if s == 3 else
                           (alm._SOLVE4, alm._X4, alm._W4, alm._IT4))
    need, its = row(solve) != 0, row(it_row)
    finished = 0
    for j in np.nonzero(need)[0]:
        z = [1.0, row(alm._Z2)[j], row(alm._Z3)[j], row(alm._Z4)[j] if s == 4 else 0.0]
        start = [row(x + i)[j] for i in range(s)] + [0.0] * (4 - s)
        *ws, it = alm._alm24(*z, s, lam * row(alm._SCALE)[j], tol, alm._NEWTON_START24,
                             10000, *start)
        if its[j] > 0:
            finished += 1
            assert tuple(row(w + i)[j] for i in range(s)) == tuple(ws[:s])
            assert its[j] == it
    assert need.sum() > 20 and finished >= share * need.sum(), (finished, need.sum())
    if (lam, s) == (0.01, 4):
        assert np.sum(its[need] == 1) > 100 and np.sum(its[need] == 2) > 20


def test_2_4_lockstep_dense_only_on_route_1():
    """``_fast24_s4`` takes its Newton steps only for the groups whose dense candidate goes
    the lock-step's way (route 1 in row _RT): on the other lanes it runs the first sweep
    only (sweep count 0 or 1), and on the route-1 lanes it must give the bits of a run where
    every lane is route 1 (fails if the route is ignored or the lanes are mixed up)."""
    from sparseopt.prox import alm

    C = alm._CHUNK
    S = np.zeros(alm._ROWS * C)
    Y = np.random.default_rng(5).standard_normal((C, 4))
    for k in range(4):
        S[(alm._Y + k) * C:(alm._Y + k + 1) * C] = Y[:, k]
    alm._bound24(S, 0.1, True)
    full, part = S.copy(), S.copy()
    full[alm._RT * C:(alm._RT + 1) * C] = 1.0
    route = np.zeros(C)
    route[::3] = 1.0
    part[alm._RT * C:(alm._RT + 1) * C] = route
    alm._fast24_s4(full, 0.1, 1e-12, 10000)
    alm._fast24_s4(part, 0.1, 1e-12, 10000)
    on = route == 1.0
    for r in [alm._IT4] + [alm._W4 + i for i in range(4)]:
        np.testing.assert_array_equal(part[r * C:(r + 1) * C][on], full[r * C:(r + 1) * C][on])
    its_full = full[alm._IT4 * C:(alm._IT4 + 1) * C]
    its_part = part[alm._IT4 * C:(alm._IT4 + 1) * C]
    assert np.all(its_part[~on] <= 1.0) and np.count_nonzero(its_full[~on] == 2.0) > 20
    assert np.count_nonzero(its_part[on] == 2.0) > 10


@pytest.mark.parametrize("lam", [0.1, 0.3, 1.0])
def test_2_4_lower_bound_holds_at_interior_minima(lam):
    """The lower bound 0.5||z - up||^2 + up.(z - up)/3 of ``_bound24`` (Euler's identity with
    terms decreasing on [0, z_i], docs/prox.md shortcut 3) must not exceed f at any interior
    local minimum of the dense candidate: here the end points of ``_alm24`` (s = 4) that are
    strictly positive. Fails if the bound uses a point above the bracket (e.g. z in place of
    up) or drops the sign of a term."""
    from sparseopt.prox import alm

    rng = np.random.default_rng(7)
    C = alm._CHUNK
    checked = 0
    for rep in range(24):
        S = np.zeros(alm._ROWS * C)
        Y = rng.standard_normal((C, 4))
        Y[:16] = np.round(Y[:16], 1)  # ties
        for k in range(4):
            S[(alm._Y + k) * C:(alm._Y + k + 1) * C] = Y[:, k]
        alm._bound24(S, lam, True)
        row = lambda r: S[r * C:(r + 1) * C]  # noqa: E731
        for j in range(C):
            z = (1.0, row(alm._Z2)[j], row(alm._Z3)[j], row(alm._Z4)[j])
            lg = lam * row(alm._SCALE)[j]
            start = [row(alm._X4 + i)[j] for i in range(4)]
            *w, it = alm._alm24(*z, 4, lg, 1e-13, alm._NEWTON_START24, 10000, *start)
            if it <= 10000 and min(w) > 0:
                f = alm._f24(*w, *z, lg)
                assert row(alm._LB4)[j] <= f * (1 + 1e-12) + 1e-15, (j, z, lg)
                checked += 1
    assert checked > 20


@pytest.mark.parametrize("lam", [0.05, 0.3, 1.0])
def test_dense_cannot_win_is_sound(lam):
    """``_dense_cannot_win(p)`` claims that no interior local minimum of eq. 10 is below f(p)
    when p (the 2-sparse point, or a converged 3-sparse ALM point) is a KKT point with a
    positive definite Hessian (Lemma 5's convex PSD region). Checked against the dense ALM
    from many starts: wherever the claim is made, no interior end point is lower than f(p)
    by more than the ALM's tolerance. Fails if the KKT sign or the PSD test is dropped (the
    dense optimum at lam = 0.05 is then wrongly excluded); it must also fire at lam = 0.3."""
    from sparseopt.prox import alm

    rng = np.random.default_rng(12)
    fired = 0
    for _ in range(1500):
        z = np.sort(np.abs(rng.standard_normal(4)))[::-1]
        z = z / z[0]
        if rng.random() < 0.1:
            z[2] = z[1]  # ties
        lg = lam * float(rng.uniform(0.5, 2.0))
        w3 = alm._alm24(1.0, z[1], z[2], 0.0, 3, lg, 1e-13, alm._NEWTON_START24, 10000,
                        *z[:3], 0.0)
        f2 = 0.5 * (z[2] ** 2 + z[3] ** 2)
        f3 = alm._f24(*w3[:3], 0.0, 1.0, z[1], z[2], 0.0, lg) + 0.5 * z[3] ** 2
        if min(w3[:3]) > 0 and w3[4] <= 10000 and f3 < f2:
            p, fp = w3[:3], f3
        else:
            p, fp = (1.0, z[1], 0.0), f2
        if not alm._dense_cannot_win(*p, z[1], z[2], z[3], lg):
            continue
        fired += 1
        for start in (z, z / 2, np.full(4, 0.3), rng.uniform(0.05, 1.0, 4)):
            *w, it = alm._alm24(1.0, z[1], z[2], z[3], 4, lg, 1e-13, alm._NEWTON_START24,
                                10000, *start)
            if it <= 10000 and min(w) > 0:
                assert alm._f24(*w, *z, lg) >= fp - 1e-12, (z, lg)
    assert fired > (100 if lam == 0.3 else 0)


# ----------------------------------------------------------------------------- 2-sparse certificate


def _around_lemma10(rng, count):
    """Sorted non-negative groups, z3 from tied with z2 to far below it, and lam from just
    below Lemma 10's 2-sparse threshold z3 / (z1 z2) to 4.5x above it."""
    z = -np.sort(-rng.uniform(0.0, 1.0, (count, 4)), axis=1)
    z[:, 2] = z[:, 1] * rng.uniform(0.0, 1.0, count) ** rng.choice([0.3, 1.0, 3.0], count)
    z[:, 3] = z[:, 2] * rng.uniform(0.0, 1.0, count)
    lam = z[:, 2] / (z[:, 0] * z[:, 1]) * np.exp(rng.uniform(-0.2, 1.5, count))
    return z, lam


def test_two_sparse_certificate_is_sound_against_the_plain_twin():
    """docs/prox.md, "The 2-sparse certificate": where it holds, the 2-sparse candidate is a
    global minimizer. Checked against the plain twin (every candidate solved, no shortcut) on
    groups around Lemma 10's threshold, where 3-sparse optima appear. The same check finds
    counterexamples to Lemma 10's necessary condition rho < 1 alone, so it would catch a
    certificate that is too weak; and the certificate must hold on most 2-sparse optima."""
    from sparseopt.prox.alm import certified_two_sparse_numpy

    z, lam = _around_lemma10(np.random.default_rng(0), 2000)
    two = z * np.array([1.0, 1.0, 0.0, 0.0])
    gap = np.empty(len(z))  # f(2-sparse candidate) - f(twin's prox), >= 0 up to rounding
    certified = np.empty(len(z), dtype=bool)
    for g in range(len(z)):
        ref = enum_alm_numpy(z[g], lam[g], 2, 4, 1e-12, 20000)
        gap[g] = (prox_objective(two[g], z[g], lam[g]) - prox_objective(ref, z[g], lam[g])).item()
        certified[g] = certified_two_sparse_numpy(z[g], lam[g]).item()
    assert gap[certified].max() <= 1e-15
    rho_below_1 = z[:, 2] / (lam * z[:, 0] * z[:, 1]) < 1.0
    assert np.sum(rho_below_1 & (gap > 1e-9)) >= 5  # Lemma 10 alone would be unsound
    optimal = gap <= 1e-12
    assert certified.sum() >= 0.6 * optimal.sum() and optimal.sum() > 1000


def _screen_flags(Y, lam):
    """The Numba screen's flags (certified groups), chunk by chunk."""
    from sparseopt.prox import alm

    G = len(Y)
    flags = np.zeros(G, dtype=bool)
    hard = np.empty(alm._CHUNK, dtype=bool)
    out = np.empty_like(Y)
    for c in range(0, G, alm._CHUNK):
        stop = min(G, c + alm._CHUNK)
        alm._screen_chunk24(Y, c, stop, lam, out, np.zeros(G, np.int64), np.zeros(G, bool),
                            hard)
        flags[c:stop] = ~hard[:stop - c]
    return flags


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_two_sparse_certificate_kernel_matches_numpy_twin(dtype):
    """``_easy24`` (vectorized screen pass) and ``certified_two_sparse_numpy`` certify the
    same groups: ties, zeros, -0.0, both signs, NaN and +-Inf (never certified), tiny and
    huge scales, lam from 0.01 to 100."""
    from sparseopt.prox.alm import certified_two_sparse_numpy

    rng = np.random.default_rng(5)
    z, _ = _around_lemma10(rng, 1500)
    Y = np.concatenate([z * rng.choice([-1.0, 1.0], z.shape), _adversarial(4, np.float64, rng),
                        rng.standard_normal((300, 4)) * np.array([1e-30, 1e30, 1.0])[:, None]
                        .repeat(100, axis=0)])
    Y = rng.permuted(Y, axis=1)
    Y[:8] = -0.0
    Y[8, 1], Y[9, 2], Y[10, 0] = np.nan, np.inf, -np.inf
    Y = Y.astype(dtype)
    for lam in [0.01, 0.3, 1.0, 4.0, 100.0]:
        flags = _screen_flags(Y, lam)
        np.testing.assert_array_equal(flags, certified_two_sparse_numpy(Y, lam).ravel())
        assert not flags[8:11].any() and flags[:8].all()
        assert 0.05 < flags.mean() < 0.99


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_two_sparse_certificate_changes_nothing(dtype):
    """The 2:4 driver screens blocks of chunks and packs the groups left for the kernel
    (``_solve_block24``); the result must be bit for bit the kernel's without the screen, in
    a fresh array and in place, on blocks that take each path (uncertified first chunk:
    the whole block; certified: packed; all certified), with no more sweeps anywhere."""
    from sparseopt.prox import alm

    rng = np.random.default_rng(17)
    size = alm._BLOCK * alm._CHUNK
    z, _ = _around_lemma10(rng, size)
    hard = rng.uniform(0.5, 1.0, (size, 4))  # nearly tied: not certified at lam <= 1
    easy = rng.standard_normal((size, 4)) * np.array([1.0, 1.0, 1e-3, 1e-3])
    Y = np.concatenate([hard, easy, z, rng.standard_normal((size + 77, 4)),
                        _adversarial(4, np.float64, rng)])
    Y = (rng.permuted(Y, axis=1) * rng.choice([-1.0, 1.0], Y.shape)).astype(dtype)
    certified_some = False
    for lam in [0.05, 0.3, 1.0, 3.0]:
        w, it, _ = alm.enum_alm_rows(Y, lam, 2, 1e-12, 10000)
        w0, it0, _ = alm.enum_alm_rows(Y, lam, 2, 1e-12, 10000, screen=False)
        np.testing.assert_array_equal(w, w0)
        np.testing.assert_array_equal(np.signbit(w), np.signbit(w0))
        Z = Y.copy()
        alm.enum_alm_rows(Z, lam, 2, 1e-12, 10000, out=Z)
        np.testing.assert_array_equal(Z, w0)
        np.testing.assert_array_equal(np.signbit(Z), np.signbit(w0))
        assert np.all(it <= it0)
        certified_some |= bool(np.sum((it == 0) & (it0 > 0)) > 50)  # solves it saved
    assert certified_some


def test_two_sparse_certificate_twin_rejects_bad_input():
    """The twin names the bad argument: a last axis not divisible by 4, a 0-d y, lam < 0,
    NaN or not a number."""
    from sparseopt.prox.alm import certified_two_sparse_numpy

    with pytest.raises(ValueError, match="divisible by 4"):
        certified_two_sparse_numpy(np.ones((2, 6)), 0.3)
    with pytest.raises(ValueError, match="divisible by 4"):
        certified_two_sparse_numpy(np.float64(1.0), 0.3)
    for lam in (-0.1, np.nan, np.inf, "0.3"):
        with pytest.raises(ValueError, match="lam"):
            certified_two_sparse_numpy(np.ones((2, 4)), lam)
    assert certified_two_sparse_numpy(np.ones((3, 8)), 0.3).shape == (3, 2)
