"""The torch kernels agree with the NumPy/Numba core (and with brute force) on CPU."""

import warnings

import numpy as np
import pytest
import torch

from sparseopt.prox import prox_nm
from sparseopt.prox.reference import prox_bruteforce
from sparseopt.regularizers import prox_objective
from sparseopt_torch.kernels import prox24

# the inputs of tests/test_prox_alm_tied.py (prox24-kubler Fig. 1)
FIG1 = [[1.6, 1.1, 0.8, 0.5], [1.6, 1.11, 1.1, 1.09], [1.6, 1.59, 1.58, 1.09],
        [1.6, 1.59, 1.58, 1.57], [1.4, 1.1, 1.0, 0.7]]

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
