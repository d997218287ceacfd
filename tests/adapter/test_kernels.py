"""The torch kernels agree with the NumPy/Numba core (and with brute force) on CPU."""

import warnings

import numpy as np
import pytest
import torch

from sparseopt.layer.loss import masked_gd
from sparseopt.layer.prox import prox_prune
from sparseopt.layer.sparsegpt import sparsegpt_prune
from sparseopt.patterns import NM
from sparseopt.prox import prox_nm
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective
from sparseopt_torch.kernels import masked_gd_torch, prox24, prox_prune_torch, sparsegpt_torch

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
    w = prox_nm(y, lam, 2, 4, method="alm")
    wt = prox24(torch.from_numpy(y), lam)
    assert wt.dtype == torch.from_numpy(y).dtype and wt.shape == y.shape
    wt = wt.numpy()
    tol = TOL[dtype]
    fo, ft = prox_objective(w, y, lam), prox_objective(wt, y, lam)
    scale = 1.0 + np.abs(y).reshape(-1, 4).max(axis=1).reshape(fo.shape) ** 2
    assert np.max(np.abs(fo - ft) / scale) <= tol["obj"], lam
    np.testing.assert_allclose(wt, w, rtol=tol["w"], atol=tol["w"] * (1 + np.abs(y).max()))
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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(rescale=False, lam0=0.05), dict(lam_tilde=0.02, beta=1.05)],
)
def test_prox_prune_torch_matches_core(dtype, kwargs):
    W, H = _layer(8, 32, dtype, seed=1, dead=(5,))
    Wn, mn, hn, infn = prox_prune(W, H, NM(2, 4), **kwargs)
    Wt, mt, ht, inft = prox_prune_torch(_t(W), _t(H), **kwargs)
    assert Wt.dtype == _t(W).dtype and mt.dtype == torch.bool
    assert inft["nit"] == infn["nit"] and inft["nit"] > 1
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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prox_prune_torch_projection_after_max_iter(dtype):
    W, H = _layer(8, 16, dtype, seed=2)
    Wn, mn, hn, infn = prox_prune(W, H, NM(2, 4), max_iter=3)
    Wt, mt, ht, inft = prox_prune_torch(_t(W), _t(H), max_iter=3)
    assert inft["projected"] and infn["projected"] and inft["nit"] == 3
    assert inft["stop_reason"] == infn["stop_reason"]
    np.testing.assert_array_equal(mt.numpy(), mn)
    np.testing.assert_allclose(Wt.numpy(), Wn, rtol=PRUNE_TOL[dtype], atol=PRUNE_TOL[dtype])
    # max_iter = 0: no iteration, the rescaled W* diag(H)^{1/2} is projected
    Wt0, mt0, ht0, inf0 = prox_prune_torch(_t(W), _t(H), max_iter=0)
    assert inf0["nit"] == 0 and ht0["loss"].size == 0
    s = np.sqrt(np.diag(H)).astype(dtype)
    np.testing.assert_array_equal(mt0.numpy(), NM(2, 4).mask(W * s))
    np.testing.assert_allclose(Wt0.numpy(), np.where(mt0.numpy(), W, 0), rtol=1e-6)


def test_prox_prune_torch_already_sparse_and_inputs_untouched():
    W, H = _layer(4, 8, np.float64, seed=3)
    Ws = NM(2, 4).project(W)
    Wt, mt, ht, inft = prox_prune_torch(_t(Ws), _t(H))
    assert inft["nit"] == 0 and inft["stop_reason"] == "W is N:M"
    np.testing.assert_array_equal(mt.numpy(), NM(2, 4).mask(Ws))
    np.testing.assert_array_equal(Wt.numpy(), prox_prune(Ws, H, NM(2, 4))[0])
    Wc, Hc = _t(W), _t(H)
    W0, H0 = Wc.clone(), Hc.clone()
    prox_prune_torch(Wc, Hc)
    assert torch.equal(Wc, W0) and torch.equal(Hc, H0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("step", [None, 0.01])
def test_masked_gd_torch_matches_core(dtype, step):
    W, H = _layer(8, 32, dtype, seed=4, dead=(0,))
    mask = NM(2, 4).mask(np.random.default_rng(0).standard_normal(W.shape))
    W0 = np.where(mask, W, 0).astype(dtype) + 0.1
    Wn = masked_gd(W0, W, H, mask, 40, step)
    Wt = masked_gd_torch(_t(W0), _t(W), _t(H), _t(mask), 40, step)
    assert Wt.dtype == _t(W0).dtype
    assert not np.any(Wt.numpy()[~mask])
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(Wt.numpy(), Wn, rtol=tol, atol=tol)
    # steps = 0: W masked, unchanged
    np.testing.assert_array_equal(masked_gd_torch(_t(W0), _t(W), _t(H), _t(mask), 0).numpy(),
                                  np.where(mask, W0, 0))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n, m, blocksize, d_in", [(2, 4, 16, 64), (2, 4, 128, 256),
                                                    (1, 4, 8, 32), (4, 8, 16, 48)])
def test_sparsegpt_torch_matches_core(dtype, n, m, blocksize, d_in):
    W, H = _layer(24, d_in, dtype, seed=5, dead=(3, 17))
    Wn, mn, _, _ = sparsegpt_prune(W, H, NM(n, m), blocksize=blocksize)
    Wt, mt = sparsegpt_torch(_t(W), _t(H), n=n, m=m, blocksize=blocksize)
    assert Wt.dtype == _t(W).dtype
    np.testing.assert_array_equal(mt.numpy(), mn)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(Wt.numpy(), Wn, rtol=tol, atol=tol * np.abs(W).max())
    assert NM(n, m).satisfied(Wt.numpy())
    assert not np.any(Wt.numpy()[:, [3, 17]])  # dead inputs are zero


@pytest.mark.parametrize(
    "fn, kwargs, match",
    [
        (prox_prune_torch, dict(W=np.ones((4, 8)), H=torch.eye(8)), "W must be a torch.Tensor"),
        (prox_prune_torch, dict(W=torch.ones((4, 6)), H=torch.eye(6)), "d_in divisible by m"),
        (prox_prune_torch, dict(W=torch.ones((4, 8)), H=torch.eye(4)), "H has shape"),
        (prox_prune_torch, dict(W=torch.ones((4, 8)), H=-torch.eye(8)), "not positive semidef"),
        (prox_prune_torch, dict(W=torch.ones((4, 8)), H=torch.eye(8), beta=1.0), "beta must"),
        (prox_prune_torch, dict(W=torch.ones((4, 8)), H=torch.eye(8), lam0=0.1, lam_tilde=0.1),
         "either lam0 or lam_tilde"),
        (prox_prune_torch, dict(W=torch.ones((4, 8)), H=torch.eye(8), lam0=-1.0), "lam0 must"),
        (prox_prune_torch, dict(W=torch.zeros((4, 8)), H=torch.eye(8), lam_tilde=0.1),
         "mean\\|W\\*\\| > 0"),
        (prox_prune_torch, dict(W=torch.ones((4, 8)), H=torch.eye(8), max_iter=-1),
         "max_iter must be >= 0"),
        (masked_gd_torch, dict(W=torch.ones((4, 8)), W_star=torch.ones((4, 4)), H=torch.eye(8),
                               mask=torch.ones((4, 8), dtype=torch.bool), steps=1), "W_star has"),
        (masked_gd_torch, dict(W=torch.ones((4, 8)), W_star=torch.ones((4, 8)), H=torch.eye(8),
                               mask=torch.ones((4, 8)), steps=1), "mask must be a boolean"),
        (masked_gd_torch, dict(W=torch.ones((4, 8)), W_star=torch.ones((4, 8)), H=torch.eye(8),
                               mask=torch.ones((4, 8), dtype=torch.bool), steps=-1), "steps must"),
        (masked_gd_torch, dict(W=torch.ones((4, 8)), W_star=torch.ones((4, 8)), H=torch.eye(8),
                               mask=torch.ones((4, 8), dtype=torch.bool), steps=1, step=0.0),
         "step must"),
        (sparsegpt_torch, dict(W=torch.ones((4, 8)), H=torch.eye(8), blocksize=6), "blocksize"),
        (sparsegpt_torch, dict(W=torch.ones((4, 8)), H=torch.eye(8), n=4, m=4), "n must satisfy"),
        (sparsegpt_torch, dict(W=torch.ones((4, 8)), H=-torch.eye(8)), "not positive definite"),
        (sparsegpt_torch, dict(W=torch.ones((4, 8)), H=torch.full((8, 8), float("nan"))),
         "H contains NaN"),
    ],
)
def test_layer_kernels_bad_input(fn, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(**kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_kernels_run_on_cuda_like_on_cpu():
    W, H = _layer(16, 64, np.float32, seed=6)
    y = torch.from_numpy(np.random.default_rng(0).standard_normal((64, 64)))
    np.testing.assert_allclose(prox24(y.cuda(), 0.3).cpu().numpy(), prox24(y, 0.3).numpy(),
                               atol=1e-10)
    Wc, mc, _, infc = prox_prune_torch(_t(W).cuda(), _t(H).cuda())
    Wp, mp, _, infp = prox_prune_torch(_t(W), _t(H))
    assert Wc.device.type == "cuda" and infc["nit"] == infp["nit"]
    assert float((mc.cpu() != mp).float().mean()) < 0.01
    Ws, ms = sparsegpt_torch(_t(W).cuda(), _t(H).cuda(), blocksize=16)
    assert Ws.device.type == "cuda" and torch.equal(ms.cpu(), sparsegpt_torch(_t(W), _t(H),
                                                                             blocksize=16)[1])
