"""r_{N:M} (prox24-kubler eq. 6) and the regularizer objects: values, proxes against brute
force, NumPy vs torch tensors."""

import itertools
import os

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.backend import device_kernels
from sparseopt.prox import prox_nm
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import (L0, L1, R0, R1, R2, RNM, elementary_symmetric,
                                    prox_objective, r_nm, r_nm_grad, r_nm_groups)

from test_penalties import hard_groups  # ties, zeros, signs, values at the thresholds


def r_nm_bruteforce(w, n, m):
    a = np.abs(np.asarray(w, dtype=np.float64)).reshape(-1, m)
    return np.array(
        [sum(np.prod(row[list(S)]) for S in itertools.combinations(range(m), n + 1)) for row in a]
    )


@pytest.mark.parametrize("n,m", [(0, 4), (1, 4), (2, 4), (3, 4), (2, 8), (4, 8), (2, 3)])
def test_r_nm_matches_subset_sum(n, m):
    rng = np.random.default_rng(n * 10 + m)
    w = rng.standard_normal((3, 2 * m))
    np.testing.assert_allclose(r_nm_groups(w, NM(n, m)).ravel(), r_nm_bruteforce(w, n, m), rtol=1e-12)
    assert r_nm(w, NM(n, m)) == pytest.approx(r_nm_bruteforce(w, n, m).sum(), rel=1e-12)


def test_r0m_is_l1_and_null_space():
    w = np.array([1.0, -2.0, 0.5, 0.0])
    assert r_nm(w, NM(0, 4)) == pytest.approx(3.5)
    assert r_nm(np.array([0.0, 3.0, 0.0, -1.0]), NM(2, 4)) == 0.0  # Fact 2
    assert r_nm(np.array([1.0, 3.0, 0.0, -1.0]), NM(2, 4)) > 0.0


@pytest.mark.parametrize("n,m", [(0, 4), (1, 4), (2, 4), (3, 8)])
def test_r_nm_grad_matches_finite_differences(n, m):
    rng = np.random.default_rng(3)
    w = rng.standard_normal(2 * m)
    g = r_nm_grad(w, NM(n, m))
    h = 1e-6
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = h
        fd = (r_nm(w + e, NM(n, m)) - r_nm(w - e, NM(n, m))) / (2 * h)
        assert g[i] == pytest.approx(fd, abs=1e-6)


def test_prox_objective_and_errors():
    y = np.array([1.0, 1.0, 1.0, 1.0])
    assert prox_objective(np.zeros(4), y, 1.0)[0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="n must satisfy"):
        r_nm(y, NM(4, 4))
    with pytest.raises(ValueError, match="divisible"):
        r_nm(np.ones(5), NM(2, 4))


# ----------------------------------------------------------------------------- objects


def _torch():
    """torch, or a skip without it (an error with SPARSEOPT_REQUIRE_TORCH=1, as conftest.py)."""
    try:
        import torch
    except ImportError:
        if os.environ.get("SPARSEOPT_REQUIRE_TORCH") == "1":
            raise
        pytest.skip("torch is not installed")
    return torch


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (2, 8), (0, 4), (3, 4)])
def test_rnm_prox_is_prox_nm_and_beats_bruteforce(n, m, dtype):
    x = hard_groups(m, dtype, seed=n + m)
    if m == 8:
        x = x[[0, 2, 4, 6]]  # 2^9 local searches per group in the brute force
    lam, tau = 0.35, 1.4
    p = RNM(lam, pattern=NM(n, m))
    out = p.prox(x, tau)
    assert out.dtype == dtype and out.shape == x.shape
    np.testing.assert_array_equal(out, prox_nm(x, tau * lam, n, m))  # eq. 7, weight tau lam
    ref = prox_bruteforce(x.astype(np.float64), tau * lam, NM(n, m), starts=4)
    f = prox_objective(out.astype(np.float64), x.astype(np.float64), tau * lam, NM(n, m))
    f_ref = prox_objective(ref, x.astype(np.float64), tau * lam, NM(n, m))
    assert np.all(f <= f_ref + (1e-10 if dtype == np.float64 else 1e-6))
    assert p(x) == pytest.approx(lam * r_nm(x, NM(n, m)), rel=1e-12)


def test_rnm_grad_value_repr_and_errors():
    rng = np.random.default_rng(5)
    w = rng.standard_normal(8)
    p = RNM(0.6, pattern=NM(2, 4))
    np.testing.assert_allclose(p.grad(w), 0.6 * r_nm_grad(w, NM(2, 4)), rtol=1e-15)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = 1e-6
        assert p.grad(w)[i] == pytest.approx((p(w + e) - p(w - e)) / 2e-6, abs=1e-6)
    assert p.grad(w.astype(np.float32)).dtype == np.float32
    assert p.exact_pattern == NM(2, 4)
    assert repr(p) == "RNM(lam=0.6, pattern=NM(n=2, m=4), method='alm', tol=None)"
    assert "eq. 6" in RNM.__doc__ and "eq. 7" in RNM.__doc__
    assert RNM().lam == 1.0 and RNM().pattern == NM(2, 4)
    np.testing.assert_array_equal(RNM(0.4, method="ipm", tol=1e-10).prox(w, 1.0),
                                  prox_nm(w, 0.4, method="ipm", tol=1e-10))
    with pytest.raises(ValueError, match="n < m"):
        RNM(1.0, pattern=NM(4, 4))
    with pytest.raises(ValueError, match="method"):
        RNM(1.0, method="newton")
    with pytest.raises(ValueError, match="method='alm'"):
        RNM(1.0, pattern=NM(2, 8), method="pgd")
    with pytest.raises(ValueError, match="tol"):
        RNM(1.0, tol=0.0)
    with pytest.raises(ValueError, match="pattern="):
        RNM(NM(2, 4))
    for tau in (0.0, -1.0, np.nan, np.inf, True):
        with pytest.raises(ValueError, match="tau"):
            p.prox(w, tau)
    with pytest.raises(ValueError, match="divisible"):
        p.prox(np.ones(6), 1.0)
    with pytest.raises(ValueError, match="divisible"):
        p(np.ones(6))
    with pytest.raises(ValueError, match="x"):
        p.prox(np.array([1.0, np.nan, 0.0, 0.0]), 1.0)


def test_exact_nm_at_finite_lam_except_r2():
    """App. C: R0 and R1 (and r_{N:M}, prox24-kubler Sec. 3.2) reach exact 2:4 sparsity at a
    large finite lam; R2 only shrinks the tail, so a generic input never becomes 2:4."""
    rng = np.random.default_rng(6)
    pattern = NM(2, 4)
    for dtype in (np.float64, np.float32):
        x = (rng.uniform(0.5, 2.0, (50, 8)) * rng.choice([-1, 1], (50, 8))).astype(dtype)
        for lam in (1e-2, 1.0, 1e2, 1e4, 1e6):
            w = R2(lam, pattern=pattern).prox(x, 1.0)
            assert not pattern.satisfied(w) and np.count_nonzero(w) == w.size
            assert pattern.satisfied_fraction(w) == 0.0
        for p in (R0(1e3), R1(1e3), RNM(1e3)):
            assert p.exact_pattern == pattern
            w = p.prox(x, 1.0)
            assert pattern.satisfied(w)
            np.testing.assert_array_equal(w, pattern.project(x))  # the top 2 are kept
        assert R2(1e3).exact_pattern is None


OBJECTS = [
    L0(0.3), L1(0.3), R0(0.3), R1(0.3), R2(0.3), RNM(0.3),
    R0(0.2, pattern=NM(1, 4)), R1(0.2, pattern=NM(2, 8)), R2(0.2, pattern=NM(2, 8)),
    RNM(0.2, pattern=NM(1, 4)), RNM(0.05, pattern=NM(2, 8)), RNM(0.2, pattern=NM(3, 4)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("p", OBJECTS, ids=repr)
def test_torch_tensors_give_the_numpy_result(p, dtype):
    torch = _torch()
    x = hard_groups(8, np.dtype(dtype), seed=11).reshape(5, 16)
    t = torch.from_numpy(x.copy())
    t0 = t.clone()
    tol = 1e-12 if dtype == "float64" else 1e-6
    out = p.prox(t, 0.8)
    assert isinstance(out, torch.Tensor) and out.dtype == t.dtype and out.device == t.device
    np.testing.assert_allclose(out.numpy(), p.prox(x, 0.8), rtol=0, atol=tol)
    assert p(t) == pytest.approx(p(x), rel=1e-12, abs=1e-12)
    if isinstance(p, (RNM, R2)):
        g = p.grad(t)
        assert isinstance(g, torch.Tensor) and g.dtype == t.dtype
        np.testing.assert_allclose(g.numpy(), p.grad(x), rtol=tol, atol=tol)
    else:
        with pytest.raises(NotImplementedError):
            p.grad(t)
    assert torch.equal(t, t0)  # the input is not modified


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_torch_accelerator_path_on_cpu():
    """Under device_kernels() CPU tensors take the code a GPU runs: torch ops only (a tensor
    that requires grad cannot be turned into a NumPy array, so any NumPy call on it would
    raise), and for RNM's prox the torch adapter's 2:4 kernel."""
    torch = _torch()
    pytest.importorskip("sparseopt_torch")
    x = hard_groups(4, np.float64, seed=12)
    t = torch.from_numpy(x.copy())
    tg = t.clone().requires_grad_(True)
    with device_kernels():
        for p in (L0(0.3), L1(0.3), R0(0.3), R1(0.3), R2(0.3), RNM(0.3)):
            if not isinstance(p, RNM):
                out = p.prox(tg, 0.8).detach().numpy()
                np.testing.assert_allclose(out, p.prox(x, 0.8), rtol=0, atol=1e-12)
            assert p(tg) == pytest.approx(p(x), rel=1e-12, abs=1e-12)
            if isinstance(p, (RNM, R2)):
                np.testing.assert_allclose(p.grad(tg).detach().numpy(), p.grad(x), rtol=1e-12)
        w = RNM(0.3).prox(t, 0.8)
        assert isinstance(w, torch.Tensor) and w.dtype == torch.float64
        f = prox_objective(w.numpy(), x, 0.24)
        f_ref = prox_objective(prox_nm(x, 0.24), x, 0.24)
        assert np.max(np.abs(f - f_ref)) <= 1e-9
        with pytest.raises(ValueError, match="2:4"):
            RNM(0.3, pattern=NM(1, 4)).prox(t, 0.8)


def test_r_nm_functions_on_tensors():
    torch = _torch()
    rng = np.random.default_rng(8)
    w = rng.standard_normal((3, 8))
    t = torch.from_numpy(w)
    for n, m in [(0, 4), (1, 4), (2, 4), (3, 8)]:
        e = r_nm_groups(t, NM(n, m))
        assert isinstance(e, torch.Tensor) and e.dtype == torch.float64
        np.testing.assert_allclose(e.numpy(), r_nm_groups(w, NM(n, m)), rtol=1e-14)
        assert r_nm(t, NM(n, m)) == pytest.approx(r_nm(w, NM(n, m)), rel=1e-14)
        g = r_nm_grad(t.float(), NM(n, m))
        assert g.dtype == torch.float32
        np.testing.assert_allclose(g.numpy(), r_nm_grad(w.astype(np.float32), NM(n, m)), rtol=1e-6)
    np.testing.assert_allclose(elementary_symmetric(t, 3).numpy(), elementary_symmetric(w, 3))
    assert np.ndim(elementary_symmetric(np.array([1.0, 2.0, 3.0]), 2)) == 0  # 11.0 as before
    assert elementary_symmetric([1.0, 2.0, 3.0], 2) == 11.0


@pytest.mark.parametrize("p", OBJECTS, ids=repr)
def test_degree_is_the_homogeneity(p):
    """R(c w) = |c|^degree R(w), and prox_{tau lam R}(c x) = c prox_{tau lam |c|^(p-2) R}(x)."""
    x = hard_groups(8, np.float64, seed=13).reshape(5, 16)
    for c in (3.0, -0.5):
        assert p(c * x) == pytest.approx(abs(c) ** p.degree * p(x), rel=1e-12, abs=1e-12)
    c = 2.0
    q = type(p)(p.lam * c ** (p.degree - 2), **({} if isinstance(p, (L0, L1))
                                                else {"pattern": p.pattern}))
    np.testing.assert_allclose(p.prox(c * x, 0.8), c * q.prox(x, 0.8), rtol=1e-9, atol=1e-12)
    assert RNM(pattern=NM(3, 8)).degree == 4 and R2().degree == 2 and L0().degree == 0


@pytest.mark.parametrize("reg", [RNM(0.8), RNM(0.5, pattern=NM(3, 8)), R0(0.3), R1(0.3),
                                 R2(0.3), L0(0.2), L1(0.2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prox_out_gives_the_fresh_result_bit_for_bit(reg, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 16)).astype(dtype)
    x[rng.random(x.shape) < 0.1] = 0.0
    fresh = reg.prox(x, 0.9)
    out = np.full_like(x, np.nan)
    assert reg.prox(x, 0.9, out=out) is out and out.tobytes() == fresh.tobytes()
    inplace = x.copy()
    assert reg.prox(inplace, 0.9, out=inplace) is inplace
    assert inplace.tobytes() == fresh.tobytes()
    with pytest.raises(ValueError, match="out must have shape"):
        reg.prox(x, 0.9, out=np.empty((9, 8), dtype=dtype))


def test_prox_out_needs_numpy_x():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="out is supported for NumPy x only"):
        RNM(1.0).prox(torch.ones(2, 4), 1.0, out=np.empty((2, 4), dtype=np.float32))


@pytest.mark.parametrize("pattern", [NM(2, 4), NM(3, 8), NM(1, 4)])
def test_rnm_prox_tests_its_input_once(monkeypatch, pattern):
    """RNM.prox checks x (finite) once and then runs prox_nm's solver without prox_nm's
    second test of the same entries (the prox-gradient loop calls it every iteration). A
    NaN still raises, naming x, before anything is written into ``out``; the result is
    prox_nm's bit for bit, fresh and in place. Fails if the input is tested twice (the
    count), not at all (the NaN), or after ``out`` was written."""
    import sparseopt.validation as V
    from sparseopt.prox import prox_nm

    calls = []
    count = V._count_nonfinite

    def counting(a):
        calls.append(a.size)
        return count(a)

    monkeypatch.setattr(V, "_count_nonfinite", counting)
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((6, 16)).astype(dtype)
        reg = RNM(0.7, pattern=pattern)
        expected = prox_nm(x, 0.7 * 1.3, pattern.n, pattern.m)
        for mode in ("fresh", "out", "in place"):
            calls.clear()
            if mode == "fresh":
                got = reg.prox(x, 1.3)
            elif mode == "out":
                got = reg.prox(x, 1.3, out=np.empty_like(x))
            else:
                got = x.copy()
                reg.prox(got, 1.3, out=got)
            assert got.tobytes() == expected.tobytes()
            assert calls == [x.size]
        bad = x.copy()
        bad[2, 5] = np.nan
        out = np.full_like(x, 7.0)
        with pytest.raises(ValueError, match="x contains NaN"):
            reg.prox(bad, 1.3, out=out)
        assert np.all(out == 7.0)


def test_a_regularizer_class_with_a_name_is_a_prox_option():
    """The registry: a subclass that sets ``name`` is ``prune(..., regularizer=NAME)`` at
    once, built by ``for_pattern``; the prune runs its prox (here: R1 under another name,
    so the pruned weights must be R1's bit for bit); a class without a name is not entered."""
    from sparseopt import prune
    from sparseopt.regularizers import REGULARIZERS

    assert set(REGULARIZERS) == {"rnm", "R0", "R1", "R2", "l0", "l1"}
    assert REGULARIZERS["rnm"] is RNM and REGULARIZERS["R1"] is R1

    class Unnamed(R1):
        pass

    class Soft(R1):
        name = "soft-test"

    try:
        assert "soft-test" in REGULARIZERS and Unnamed not in REGULARIZERS.values()
        rng = np.random.default_rng(0)
        X, W = rng.standard_normal((16, 64)), rng.standard_normal((4, 16))
        H = X @ X.T / 64
        mine = prune(W, H, method="prox", regularizer="soft-test")
        ref = prune(W, H, method="prox", regularizer="R1")
        np.testing.assert_array_equal(mine.W, ref.W)
        assert mine.info["regularizer"] == "soft-test"
    finally:
        del REGULARIZERS["soft-test"]
