import itertools

import numpy as np
import pytest

from sparseopt.regularizers import prox_objective, r_nm, r_nm_grad, r_nm_groups


def r_nm_bruteforce(w, n, m):
    a = np.abs(np.asarray(w, dtype=np.float64)).reshape(-1, m)
    return np.array(
        [sum(np.prod(row[list(S)]) for S in itertools.combinations(range(m), n + 1)) for row in a]
    )


@pytest.mark.parametrize("n,m", [(0, 4), (1, 4), (2, 4), (3, 4), (2, 8), (4, 8), (2, 3)])
def test_r_nm_matches_subset_sum(n, m):
    rng = np.random.default_rng(n * 10 + m)
    w = rng.standard_normal((3, 2 * m))
    np.testing.assert_allclose(r_nm_groups(w, n, m).ravel(), r_nm_bruteforce(w, n, m), rtol=1e-12)
    assert r_nm(w, n, m) == pytest.approx(r_nm_bruteforce(w, n, m).sum(), rel=1e-12)


def test_r0m_is_l1_and_null_space():
    w = np.array([1.0, -2.0, 0.5, 0.0])
    assert r_nm(w, 0, 4) == pytest.approx(3.5)
    assert r_nm(np.array([0.0, 3.0, 0.0, -1.0]), 2, 4) == 0.0  # Fact 2
    assert r_nm(np.array([1.0, 3.0, 0.0, -1.0]), 2, 4) > 0.0


@pytest.mark.parametrize("n,m", [(0, 4), (1, 4), (2, 4), (3, 8)])
def test_r_nm_grad_matches_finite_differences(n, m):
    rng = np.random.default_rng(3)
    w = rng.standard_normal(2 * m)
    g = r_nm_grad(w, n, m)
    h = 1e-6
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = h
        fd = (r_nm(w + e, n, m) - r_nm(w - e, n, m)) / (2 * h)
        assert g[i] == pytest.approx(fd, abs=1e-6)


def test_prox_objective_and_errors():
    y = np.array([1.0, 1.0, 1.0, 1.0])
    assert prox_objective(np.zeros(4), y, 1.0)[0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="n must satisfy"):
        r_nm(y, 4, 4)
    with pytest.raises(ValueError, match="divisible"):
        r_nm(np.ones(5), 2, 4)
