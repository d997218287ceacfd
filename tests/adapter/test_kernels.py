"""The torch kernels agree with the NumPy/Numba core (and with brute force) on CPU, and
``sparseopt.prune`` on torch tensors agrees with NumPy, on the CPU path (Numba kernels on
views) and on the accelerator path (torch kernels, forced on CPU by ``device_kernels``)."""

import warnings

import numpy as np
import pytest
import torch

from sparseopt import prune
from sparseopt.backend import device_kernels
from sparseopt.layer import methods
from sparseopt.layer.loss import masked_gd
from sparseopt.layer.sparsegpt import _sweep_block, _sweep_block_numpy
from sparseopt.patterns import NM, TopK
from sparseopt.prox import prox_nm
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective
from sparseopt_torch.kernels import prox24, sparsegpt_sweep

# the inputs of tests/test_prox_alm_tied.py (prox24-kubler Fig. 1)
FIG1 = [[1.6, 1.1, 0.8, 0.5], [1.6, 1.11, 1.1, 1.09], [1.6, 1.59, 1.58, 1.09],
        [1.6, 1.59, 1.58, 1.57], [1.4, 1.1, 1.0, 0.7]]

@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny matmuls and parallel kernels with 2 threads cost milliseconds per call on a
    loaded 2-core machine (thread barriers): the small tests run single-threaded."""
    import numba
    from threadpoolctl import threadpool_limits

    n_torch, n_numba = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(n_torch)
    numba.set_num_threads(n_numba)


TOL = {np.float64: dict(obj=1e-10, w=1e-8), np.float32: dict(obj=1e-5, w=1e-5)}


def _hard_inputs(rng, dtype):
    """Random groups with ties, zeros, signs, nearly tied groups and mixed scales."""
    parts = [
        rng.standard_normal((64, 8)),
        rng.choice([-1.0, 0.0, 1.0, 2.0], (64, 8)),  # exact ties and zeros
        np.zeros((2, 8)),
        (rng.uniform(0.5, 2.0, (64, 1)) + 0.03 * rng.standard_normal((64, 8)))
        * rng.choice([-1, 1], (64, 8)),  # nearly tied
        1e-3 * rng.standard_normal((16, 8)),
        1e3 * rng.standard_normal((16, 8)),
    ]
    return np.concatenate(parts).astype(dtype)


def _assert_agrees(y, lam, dtype):
    """prox24 on a CPU tensor runs the core's kernel on a view: the core's result bit for
    bit, in the input's dtype and shape."""
    w = prox_nm(y, lam, 2, 4, method="alm")
    wt = prox24(torch.from_numpy(y), lam)
    assert wt.dtype == torch.from_numpy(y).dtype and wt.shape == y.shape
    wt = wt.numpy()
    np.testing.assert_array_equal(wt, w)
    # the signs follow y and zeros are +0.0
    assert np.all(wt * y >= 0)
    assert not np.any(np.signbit(wt[wt == 0]))
    return w, wt


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lam", [1e-3, 0.05, 0.3, 0.65, 1.0, 3.0, 1e6])
def test_prox24_matches_core(dtype, lam):
    rng = np.random.default_rng(7)
    _assert_agrees(_hard_inputs(rng, dtype), lam, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prox24_fig1_paths_match_core(dtype):
    y = np.array(FIG1, dtype=dtype)
    for lam in np.linspace(0.01, 1.5, 30):
        _assert_agrees(y, float(lam), dtype)


def test_prox24_fig1d_three_sparse_optimum_is_found():
    y = torch.tensor([[1.6, 1.59, 1.58, 1.57]], dtype=torch.float64)
    w = prox24(y, 0.65)
    assert int((w != 0).sum()) == 3
    np.testing.assert_allclose(w.numpy(), prox_nm(y.numpy(), 0.65, method="ipm"), atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prox24_nearly_tied_groups_match_core(dtype):
    rng = np.random.default_rng(4)  # as tests/test_prox_alm_tied.py with m = 4
    base = rng.uniform(0.5, 2.0, (300, 1))
    y = ((base + 0.03 * rng.standard_normal((300, 4))) * rng.choice([-1, 1], (300, 4)))
    for lam in [0.1, 0.3, 0.6, 1.0]:
        _assert_agrees(y.astype(dtype), lam, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n, m", [(2, 4), (1, 4), (3, 8)])
def test_nm_mask_of_cpu_tensors_matches_the_argsort_path(dtype, n, m):
    """NM.mask / NM.project of a CPU tensor run the Numba kernels on a NumPy view; the result
    is a tensor of the input's dtype equal to the argsort path (the one devices take, forced
    by device_kernels) with ties, zeros and signs. A tensor that requires grad keeps the
    argsort path, so the projection stays differentiable."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 4 * m, generator=g, dtype=dtype)
    x[:8] = torch.round(x[:8])  # ties
    x[8:12, :m] = 0.0
    x[12:14] = -x[12:14].abs()
    p = NM(n, m)
    mask, proj = p.mask(x), p.project(x)
    with device_kernels():
        mask_ref, proj_ref = p.mask(x), p.project(x)
    assert torch.is_tensor(mask) and mask.dtype == torch.bool
    assert proj.dtype == dtype
    assert torch.equal(mask, mask_ref)
    torch.testing.assert_close(proj, proj_ref, rtol=0, atol=0)
    np.testing.assert_array_equal(mask.numpy(), p.mask(x.numpy()))
    xg = x.clone().requires_grad_(True)
    p.project(xg).sum().backward()
    torch.testing.assert_close(xg.grad, mask.to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prox24_matches_bruteforce(dtype):
    rng = np.random.default_rng(3)
    y = (rng.standard_normal((12, 4)) * rng.choice([-1, 1], (12, 4))).astype(dtype)
    y[0] = [1.0, 1.0, 1.0, 1.0]
    y[1] = [0.0, -0.5, 0.0, 0.5]
    for lam in [0.1, 0.7]:
        wt = prox24(torch.from_numpy(y), lam).numpy()
        wb = prox_bruteforce(y.astype(np.float64), lam, starts=4)
        fb = prox_objective(wb, y, lam)
        ft = prox_objective(wt, y, lam)
        # the exact prox is never worse than a multi-start local search, and equal to it
        assert np.max(ft - fb) <= TOL[dtype]["obj"] * 10
        np.testing.assert_allclose(wt, wb, atol=1e-5)


def test_prox24_edge_cases():
    y = torch.tensor([[3.0, -0.1, 2.0, 0.2], [0.0, 0.0, 0.0, 0.0], [-1.0, -1.0, -1.0, -1.0]],
                     dtype=torch.float64)
    # lam = 0: identity, a new tensor
    w0 = prox24(y, 0.0)
    assert torch.equal(w0, y) and w0.data_ptr() != y.data_ptr()
    # huge lam: the two largest entries exactly (ties broken by index as in the core)
    wh = prox24(y, 1e12)
    expect = torch.tensor([[3.0, 0.0, 2.0, 0.0], [0.0] * 4, [-1.0, -1.0, 0.0, 0.0]],
                          dtype=torch.float64)
    assert torch.equal(wh, expect)
    np.testing.assert_array_equal(wh.numpy(), prox_nm(y.numpy(), 1e12))
    # shape (..., 4k) with leading dims, and the input is untouched
    rng = np.random.default_rng(0)
    y3 = torch.from_numpy(rng.standard_normal((2, 3, 8)))
    before = y3.clone()
    w3 = prox24(y3, 0.4)
    assert w3.shape == y3.shape and torch.equal(y3, before)
    np.testing.assert_allclose(w3.numpy(), prox_nm(y3.numpy(), 0.4), atol=1e-12)
    # a non-contiguous view
    yt = torch.from_numpy(rng.standard_normal((8, 12))).T
    np.testing.assert_allclose(prox24(yt, 0.4).numpy(), prox_nm(yt.numpy(), 0.4), atol=1e-12)
    # empty input
    assert prox24(torch.zeros((0, 4)), 1.0).shape == (0, 4)
    # requires_grad input (a Parameter): no graph, no error
    p = torch.nn.Parameter(y.clone())
    wp = prox24(p, 0.3)
    assert not wp.requires_grad


def test_prox24_info_and_max_iter_warning():
    rng = np.random.default_rng(1)
    y = torch.from_numpy(rng.standard_normal((50, 8)))
    w, info = prox24(y, 0.5, return_info=True)
    assert info["n_iter"].shape == (50, 2) and info["max_iter_reached"].shape == (50, 2)
    assert not bool(info["max_iter_reached"].any())
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _, info1 = prox24(y, 0.5, max_iter=1, return_info=True)
    assert any("max_iter=1" in str(r.message) for r in rec)
    assert bool(info1["max_iter_reached"].any())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(Y=torch.ones((2, 4)), lam=1.0, kernel="torch"), "kernel must be one of"),
        (dict(Y=torch.ones((2, 4)), lam=1.0, kernel="cuda"), "kernel='cuda' needs a CUDA"),
        (dict(Y=np.ones((2, 4)), lam=1.0), "Y must be a torch.Tensor"),
        (dict(Y=torch.ones((2, 4), dtype=torch.int64), lam=1.0), "Y must have dtype"),
        (dict(Y=torch.ones((2, 6)), lam=1.0), "not divisible by 4"),
        (dict(Y=torch.tensor([[1.0, float("nan"), 0.0, 0.0]]), lam=1.0), "Y contains NaN"),
        (dict(Y=torch.ones((2, 4)), lam=-1.0), "lam must be finite"),
        (dict(Y=torch.ones((2, 4)), lam=float("inf")), "lam must be finite"),
        (dict(Y=torch.ones((2, 4)), lam="a"), "lam must be a real number"),
        (dict(Y=torch.ones((2, 4)), lam=1.0, tol=0.0), "tol must be finite and > 0"),
        (dict(Y=torch.ones((2, 4)), lam=1.0, max_iter=0), "max_iter must be >= 1"),
    ],
)
def test_prox24_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        prox24(**kwargs)


# --------------------------------------------------------------------------------------
# layer kernels
# --------------------------------------------------------------------------------------


def _layer(d_out, d_in, dtype, seed, *, dead=()):
    """W* and a PSD H = X X' / n with uneven input scales (and optional dead inputs)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d_in, 3 * d_in)) * rng.uniform(0.2, 3.0, (d_in, 1))
    X[list(dead)] = 0.0
    H = X @ X.T / X.shape[1]
    W = rng.standard_normal((d_out, d_in)).astype(dtype)
    return W, H


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


PRUNE_TOL = {np.float64: 1e-10, np.float32: 2e-4}
PATHS = ["cpu", "device"]


def _run(path, fn, *args, **kwargs):
    """``fn`` on the CPU path, or inside ``device_kernels()`` (the path of a GPU)."""
    if path == "device":
        with device_kernels():
            return fn(*args, **kwargs)
    return fn(*args, **kwargs)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(rescale=False, lam0=0.05), dict(lam_tilde=0.02, schedule="paper")],
)
def test_prox_prune_on_tensors_matches_numpy(path, dtype, kwargs):
    W, H = _layer(8, 32, dtype, seed=1, dead=(5,))
    rn = prune(W, H, "prox", **kwargs)
    rt = _run(path, prune, _t(W), _t(H), "prox", **kwargs)
    hn, infn, ht, inft = rn.history, rn.info, rt.history, rt.info
    Wt, mt, Wn, mn = rt.W, rt.mask, rn.W, rn.mask
    assert Wt.dtype == _t(W).dtype and mt.dtype == torch.bool
    assert inft["nit"] == infn["nit"] and inft["nit"] > 1 and rt.nit == rn.nit
    assert set(inft) == set(infn) and set(ht) == set(hn)
    for key in ("stop_reason", "projected", "rescale", "prox_method", "beta"):
        assert inft[key] == infn[key], key
    np.testing.assert_allclose(inft["eta"], infn["eta"], rtol=1e-9)
    np.testing.assert_allclose(inft["lam0"], infn["lam0"], rtol=1e-6)
    np.testing.assert_array_equal(mt.numpy(), mn)
    tol = PRUNE_TOL[dtype]
    np.testing.assert_allclose(Wt.numpy(), Wn, rtol=tol, atol=tol * np.abs(W).max())
    np.testing.assert_allclose(ht["lam"], hn["lam"], rtol=1e-6)
    np.testing.assert_array_equal(ht["nm_fraction"], hn["nm_fraction"])
    np.testing.assert_allclose(ht["loss"], hn["loss"], rtol=tol, atol=tol * hn["loss"].max())
    assert ht["loss"].shape == ht["lam"].shape == ht["time"].shape
    # the result is 2:4 and the mask holds exactly two entries per group
    assert NM(2, 4).satisfied(Wt.numpy())
    assert np.all(mt.numpy().reshape(-1, 4).sum(axis=1) == 2)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prox_prune_on_tensors_projection_after_max_iter(path, dtype):
    W, H = _layer(8, 16, dtype, seed=2)
    rn = prune(W, H, "prox", max_iter=3)
    rt = _run(path, prune, _t(W), _t(H), "prox", max_iter=3)
    assert rt.info["projected"] and rn.info["projected"] and rt.info["nit"] == 3
    assert rt.stop_reason == rn.stop_reason
    np.testing.assert_array_equal(rt.mask.numpy(), rn.mask)
    np.testing.assert_allclose(rt.W.numpy(), rn.W, rtol=PRUNE_TOL[dtype], atol=PRUNE_TOL[dtype])
    # max_iter = 0: no iteration, the rescaled W* diag(H)^{1/2} is projected
    r0 = _run(path, prune, _t(W), _t(H), "prox", max_iter=0)
    assert r0.info["nit"] == 0 and r0.history["loss"].size == 0
    s = np.sqrt(np.diag(H)).astype(dtype)
    np.testing.assert_array_equal(r0.mask.numpy(), NM(2, 4).mask(W * s))
    np.testing.assert_allclose(r0.W.numpy(), np.where(r0.mask.numpy(), W, 0), rtol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_prox_prune_on_tensors_already_sparse_and_inputs_untouched(path):
    W, H = _layer(4, 8, np.float64, seed=3)
    Ws = NM(2, 4).project(W)
    rt = _run(path, prune, _t(Ws), _t(H), "prox")
    assert rt.info["nit"] == 0 and rt.stop_reason == "W is N:M"
    np.testing.assert_array_equal(rt.mask.numpy(), NM(2, 4).mask(Ws))
    np.testing.assert_array_equal(rt.W.numpy(), prune(Ws, H, "prox").W)
    Wc, Hc = _t(W), _t(H)
    W0, H0 = Wc.clone(), Hc.clone()
    _run(path, prune, Wc, Hc, "prox")
    assert torch.equal(Wc, W0) and torch.equal(Hc, H0)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("step", [None, 0.01])
def test_masked_gd_on_tensors_matches_numpy(path, dtype, step):
    W, H = _layer(8, 32, dtype, seed=4, dead=(0,))
    mask = NM(2, 4).mask(np.random.default_rng(0).standard_normal(W.shape))
    W0 = np.where(mask, W, 0).astype(dtype) + 0.1
    Wn = masked_gd(W0, W, H, mask, 40, step)
    Wt = _run(path, masked_gd, _t(W0), _t(W), _t(H), _t(mask), 40, step)
    assert Wt.dtype == _t(W0).dtype
    assert not np.any(Wt.numpy()[~mask])
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(Wt.numpy(), Wn, rtol=tol, atol=tol)
    # steps = 0: W masked, unchanged
    np.testing.assert_array_equal(masked_gd(_t(W0), _t(W), _t(H), _t(mask), 0).numpy(),
                                  np.where(mask, W0, 0))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n, m, blocksize, d_in", [(2, 4, 16, 64), (2, 4, 128, 256),
                                                    (1, 4, 8, 32), (4, 8, 16, 48)])
def test_sparsegpt_on_tensors_matches_numpy(path, dtype, n, m, blocksize, d_in):
    W, H = _layer(24, d_in, dtype, seed=5, dead=(3, 17))
    rn = prune(W, H, "sparsegpt", NM(n, m), blocksize=blocksize)
    rt = _run(path, prune, _t(W), _t(H), "sparsegpt", NM(n, m), blocksize=blocksize)
    assert rt.W.dtype == _t(W).dtype
    np.testing.assert_array_equal(rt.mask.numpy(), rn.mask)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(rt.W.numpy(), rn.W, rtol=tol, atol=tol * np.abs(W).max())
    assert NM(n, m).satisfied(rt.W.numpy())
    assert not np.any(rt.W.numpy()[:, [3, 17]])  # dead inputs are zero


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparsegpt_sweep_kernels_agree(dtype):
    """The in-block sweep: Numba kernel, NumPy twin and torch kernel, with ties, zeros and
    signs in the block."""
    rng = np.random.default_rng(7)
    B, d_out, n, m = 16, 12, 2, 4
    W1 = rng.choice([-2.0, -1.0, 0.0, 1.0, 2.0], (B, d_out)) + 0.1 * rng.standard_normal((B, 1))
    W1[:, 0] = 1.0  # a row of exact ties
    A = rng.standard_normal((B, B))
    U1 = np.triu(A) + B * np.eye(B)
    outs = []
    for kern, conv in ((_sweep_block, np.asarray), (_sweep_block_numpy, np.asarray),
                       (sparsegpt_sweep, _t)):
        Wb, Ub = conv(W1.astype(dtype).copy()), conv(U1.astype(dtype))
        keep = conv(np.zeros((B, d_out), dtype=bool))
        err = conv(np.zeros((B, d_out), dtype=dtype))
        kern(Wb, Ub, n, m, keep, err)
        outs.append(tuple(np.asarray(x) for x in (Wb, keep, err)))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for W_b, keep_b, err_b in outs[1:]:
        np.testing.assert_array_equal(keep_b, outs[0][1])
        np.testing.assert_allclose(W_b, outs[0][0], rtol=tol, atol=tol)
        np.testing.assert_allclose(err_b, outs[0][2], rtol=tol, atol=tol)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", [m for m in ("magnitude", "wanda", "sparsegpt", "prox",
                                                "maiht", "iobs")])
def test_every_method_on_tensors_matches_numpy(path, dtype, method):
    """The acceptance of the one-core issue: torch CPU tensors in, torch tensors out, the
    same mask as NumPy, the loss within 1e-10 relative in float64."""
    if path == "device" and method == "maiht":
        pytest.skip("maiht has no accelerator kernel of its own: the CPU path covers it")
    W, H = _layer(16, 64, dtype, seed=8, dead=(9,))
    rn = prune(W, H, method, refine_steps=10)
    rt = _run(path, prune, _t(W), _t(H), method, refine_steps=10)
    assert isinstance(rt.W, torch.Tensor) and rt.W.dtype == _t(W).dtype
    assert isinstance(rt.mask, torch.Tensor) and rt.mask.dtype == torch.bool
    np.testing.assert_array_equal(rt.mask.numpy(), rn.mask)
    rel = 1e-10 if dtype == np.float64 else 1e-4
    assert rt.loss == pytest.approx(rn.loss, rel=rel)
    assert rt.nit == rn.nit and rt.stop_reason == rn.stop_reason
    assert set(rt.history) == set(rn.history)


def test_every_registered_method_is_covered():
    assert set(methods()) <= {"magnitude", "wanda", "sparsegpt", "prox", "maiht", "iobs"}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(W=torch.ones((4, 6)), H=torch.eye(6)), "d_in divisible by m"),
        (dict(W=torch.ones((4, 8)), H=torch.eye(4)), "H has shape"),
        (dict(W=torch.ones((4, 8)), H=-torch.eye(8)), "not positive semidef"),
        (dict(W=torch.ones((4, 8)), H=torch.eye(8), schedule="slow"), "schedule must"),
        (dict(W=torch.ones((4, 8)), H=torch.eye(8), lam0=0.1, lam_tilde=0.1),
         "either lam0 or lam_tilde"),
        (dict(W=torch.ones((4, 8)), H=torch.eye(8), lam0=-1.0), "lam0 must"),
        (dict(W=torch.zeros((4, 8)), H=torch.eye(8), lam_tilde=0.1), "mean\\|W\\*\\| > 0"),
        (dict(W=torch.ones((4, 8)), H=torch.eye(8), max_iter=-1), "max_iter must"),
        (dict(W=torch.ones((4, 8)), H=np.eye(8)), "cannot be mixed"),
        (dict(W=torch.ones((4, 8), dtype=torch.int64), H=torch.eye(8)), "float32 or float64"),
        (dict(W=torch.ones((4, 8)), H=torch.full((8, 8), float("nan"))), "H contains NaN"),
    ],
)
def test_prune_on_tensors_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        prune(method="prox", **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(W=torch.ones((4, 8)), H=torch.eye(8), blocksize=6), "blocksize"),
        (dict(W=torch.ones((4, 8)), H=-torch.eye(8)), "not positive definite"),
    ],
)
def test_sparsegpt_on_tensors_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        prune(method="sparsegpt", **kwargs)
    with device_kernels(), pytest.raises(ValueError, match=match):
        prune(method="sparsegpt", **kwargs)


def test_masked_gd_on_tensors_bad_input():
    W, mask = torch.ones((4, 8)), torch.ones((4, 8), dtype=torch.bool)
    with pytest.raises(ValueError, match="W_star has"):
        masked_gd(W, torch.ones((4, 4)), torch.eye(8), mask, 1)
    with pytest.raises(ValueError, match="mask must be a boolean"):
        masked_gd(W, W, torch.eye(8), torch.ones((4, 8)), 1)
    with pytest.raises(ValueError, match="steps must"):
        masked_gd(W, W, torch.eye(8), mask, -1)
    with pytest.raises(ValueError, match="step must"):
        masked_gd(W, W, torch.eye(8), mask, 1, step=0.0)


def test_device_prox_kernel_refuses_other_patterns():
    W, H = _layer(4, 16, np.float64, seed=9)
    with device_kernels(), pytest.raises(ValueError, match="2:4 prox by EnumALM only"):
        prune(_t(W), _t(H), "prox", NM(2, 8))
    with device_kernels(), pytest.raises(ValueError, match="2:4 prox by EnumALM only"):
        prune(_t(W), _t(H), "prox", prox_method="pgd")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", ["magnitude", "wanda", "sparsegpt", "prox", "iobs"])
def test_prune_runs_on_cuda_like_on_cpu(method):
    W, H = _layer(16, 64, np.float64, seed=6)
    rc = prune(_t(W).cuda(), _t(H).cuda(), method, refine_steps=10)
    rp = prune(_t(W), _t(H), method, refine_steps=10)
    assert rc.W.device.type == "cuda" and rc.mask.device.type == "cuda"
    assert float((rc.mask.cpu() != rp.mask).float().mean()) < 0.01
    assert rc.loss == pytest.approx(rp.loss, rel=1e-6)


def _numba_cuda():
    from sparseopt.prox import cuda24

    return torch.cuda.is_available() and cuda24.available()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kernel", ["host", "auto"])
def test_prox24_runs_on_cuda_like_on_cpu(kernel):
    """"host": the copies between the GPU and the CPU; "auto": the core's CUDA kernel where
    numba-cuda is usable, else the host kernel."""
    y = torch.from_numpy(np.random.default_rng(0).standard_normal((64, 64)))
    for dtype in (torch.float64, torch.float32):
        yd = y.to(dtype)
        got = prox24(yd.cuda(), 0.3, kernel=kernel)
        assert got.device.type == "cuda" and got.dtype == dtype
        np.testing.assert_allclose(got.cpu().numpy(), prox_nm(yd.numpy(), 0.3),
                                   atol=1e-10 if dtype == torch.float64 else 1e-6)


@pytest.mark.skipif(not _numba_cuda(), reason="needs CUDA and numba-cuda")
def test_prox24_cuda_kernel_like_the_core():
    """kernel="cuda" (the core's kernel compiled for the GPU) on a CUDA tensor: shape,
    dtype, device and values as the core's CPU kernel (also through kernel="host"); its
    sweep counts and flags come back on the device. Fails if the kernel's result or its
    info differ beyond rounding."""
    rng = np.random.default_rng(5)
    y = torch.from_numpy(rng.standard_normal((3, 256, 64)))
    y[0, :8] = 0.0
    y[1, :8] = torch.round(y[1, :8], decimals=1)
    for dtype in (torch.float64, torch.float32):
        yd = y.to(dtype)
        got, info = prox24(yd.cuda(), 0.7, kernel="cuda", return_info=True)
        assert got.device.type == "cuda" and got.dtype == dtype and got.shape == yd.shape
        assert info["n_iter"].device.type == "cuda" and info["n_iter"].shape == (3, 256, 16)
        atol = 1e-10 if dtype == torch.float64 else 1e-6
        np.testing.assert_allclose(got.cpu().numpy(), prox_nm(yd.numpy(), 0.7), atol=atol)
        host = prox24(yd.cuda(), 0.7, kernel="host")
        assert host.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), host.cpu().numpy(), atol=atol)
