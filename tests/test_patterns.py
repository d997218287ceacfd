import itertools

import numpy as np
import pytest

from sparseopt import NM, TopK


def brute_nm_project(x, n, m):
    """Best N:M approximation by enumerating all C(m, n) supports per group."""
    out = np.zeros_like(x)
    flat = x.reshape(-1, m)
    res = out.reshape(-1, m)
    for g, row in enumerate(flat):
        best, best_err = None, np.inf
        for supp in itertools.combinations(range(m), n):  # lexicographic: ties go to smaller index
            err = np.sum(row**2) - np.sum(row[list(supp)] ** 2)
            if err < best_err - 0:
                best, best_err = supp, err
        res[g, list(best)] = row[list(best)]
    return out


@pytest.mark.parametrize("n,m", [(1, 4), (2, 4), (3, 4), (2, 8), (4, 8), (0, 3), (3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nm_project_matches_enumeration(n, m, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3 * m)).astype(dtype)
    p = NM(n, m).project(x)
    assert p.dtype == dtype
    np.testing.assert_array_equal(p, brute_nm_project(x, n, m))
    assert NM(n, m).satisfied(p)


def test_nm_ties_broken_by_position():
    x = np.array([1.0, -1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(NM(2, 4).project(x), [1.0, -1.0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(NM(2, 4).mask(x)[4:], [True, True, False, False])


@pytest.mark.parametrize("n,m", [(2, 4), (1, 4), (0, 4), (4, 4), (4, 8), (3, 16)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nm_numba_kernels_equal_argsort_twin(n, m, dtype):
    """The Numba mask / projection kernels (NumPy input) against their twin, the stable
    argsort of ``_keep_largest``: ties between +-x and between +0.0 / -0.0 (to the smaller
    index), zeros, signs, a non-contiguous view, and the kept bits. Fails if one kernel
    breaks a tie differently or changes a kept value or the sign of a zero."""
    from sparseopt.patterns import _keep_largest

    rng = np.random.default_rng(1)
    x = (rng.integers(-2, 3, size=(40, 6 * m)) * rng.choice([1.0, 0.5], size=(40, 6 * m)))
    x = x.astype(dtype)
    x[0, :m] = -0.0
    x[1, :m] = 0.0
    x[2, :m] = rng.standard_normal(m).astype(dtype)
    x = x[:, ::-1][::2]  # a view in neither C nor F order
    twin = _keep_largest(np.abs(x.reshape(x.shape[0], -1, m)), n).reshape(x.shape)
    mask = NM(n, m).mask(x)
    p = NM(n, m).project(x)
    np.testing.assert_array_equal(mask, twin)
    assert p.dtype == dtype
    kept = np.where(twin, x, 0.0)
    np.testing.assert_array_equal(p.view(np.uint8), kept.astype(dtype).view(np.uint8))
    if 0 < n < m:
        assert 0 < mask.sum() < mask.size  # the ties above are decided, not all kept


@pytest.mark.parametrize("n,m", [(2, 4), (0, 4), (4, 4), (3, 8)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nm_satisfied_fraction_kernel_equals_count(n, m, dtype):
    """The Numba count of N:M groups against count_nonzero per group: -0.0 is a zero, tiny
    and negative entries are not; a non-contiguous view. Fails on an off-by-one in n."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((30, 10 * m)).astype(dtype)
    x[rng.random(x.shape) < 0.5] = 0.0
    x[0, :m] = -0.0
    x[1, :m] = np.finfo(dtype).tiny * -1.0
    x = x[::-1, ::2][:, : 4 * m]
    want = np.mean(np.count_nonzero(x.reshape(x.shape[0], -1, m), axis=-1) <= n)
    got = NM(n, m).satisfied_fraction(x)
    assert got == want
    assert NM(n, m).satisfied(x) == (want == 1.0)


def test_nm_does_not_modify_input_and_keeps_signs():
    x = np.array([[-3.0, 0.5, 2.0, -0.1]])
    x0 = x.copy()
    p = NM(2, 4).project(x)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(p, [[-3.0, 0.0, 2.0, 0.0]])


def test_nm_satisfied():
    assert NM(2, 4).satisfied(np.array([1.0, 0, 0, 2, 0, 0, 0, 0]))
    assert not NM(2, 4).satisfied(np.array([1.0, 1, 1, 0, 0, 0, 0, 0]))


@pytest.mark.parametrize("bad", [dict(n=3, m=2), dict(n=-1, m=4), dict(n=1, m=0)])
def test_nm_rejects_bad_parameters(bad):
    with pytest.raises(ValueError):
        NM(**bad)


def test_nm_rejects_indivisible_and_nan():
    with pytest.raises(ValueError, match="divisible by m=4"):
        NM(2, 4).project(np.ones(6))
    with pytest.raises(ValueError, match="NaN"):
        NM(2, 4).project(np.array([1.0, np.nan, 0, 0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_topk_matches_sort(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 11)).astype(dtype)
    for k in [0, 1, 3, 11, 20]:
        p = TopK(k).project(x)
        assert p.dtype == dtype
        assert np.all(np.count_nonzero(p, axis=-1) == min(k, 11))
        # kept entries dominate dropped ones in magnitude
        for r in range(4):
            kept = np.abs(x[r][p[r] != 0])
            dropped = np.abs(x[r][p[r] == 0])
            if kept.size and dropped.size:
                assert kept.min() >= dropped.max()
        assert TopK(k).satisfied(p)


def test_topk_ties_and_bad_k():
    np.testing.assert_array_equal(TopK(2).project(np.array([2.0, 2.0, 2.0])), [2.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="k must be"):
        TopK(-1)
