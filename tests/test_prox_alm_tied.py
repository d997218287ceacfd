"""EnumALM on nearly tied inputs, where Alg. 2's start w = z stalls at a boundary point.

The reference is EnumIPM (convex barrier solves of eqs. 13-14, exact for 2:M).
"""

import numpy as np
import pytest

from sparseopt import NM
from sparseopt.prox import prox_nm
from sparseopt.prox.alm import enum_alm_numpy
from sparseopt.regularizers import prox_objective

FIG1 = [[1.6, 1.1, 0.8, 0.5], [1.6, 1.11, 1.1, 1.09], [1.6, 1.59, 1.58, 1.09],
        [1.6, 1.59, 1.58, 1.57], [1.4, 1.1, 1.0, 0.7]]


def test_fig1d_three_sparse_optimum_is_found():
    y = np.array([[1.6, 1.59, 1.58, 1.57]])
    w = prox_nm(y, 0.65)
    np.testing.assert_allclose(w, prox_nm(y, 0.65, method="ipm"), atol=1e-9)
    assert np.count_nonzero(w) == 3
    np.testing.assert_allclose(enum_alm_numpy(y, 0.65, 2, 4, 1e-12, 10_000), w, atol=1e-9)


def test_fig1_paths_match_ipm():
    y = np.array(FIG1)
    for lam in np.linspace(0.01, 1.5, 60):
        fa = prox_objective(prox_nm(y, lam), y, lam)
        fi = prox_objective(prox_nm(y, lam, method="ipm"), y, lam)
        assert np.max(fa - fi) <= 1e-10, lam


@pytest.mark.parametrize("m", [3, 4, 5, 8])
def test_nearly_tied_groups_match_ipm(m):
    rng = np.random.default_rng(m)
    base = rng.uniform(0.5, 2.0, (300, 1))
    y = (base + 0.03 * rng.standard_normal((300, m))) * rng.choice([-1, 1], (300, m))
    for lam in [0.1, 0.3, 0.6, 1.0]:
        fa = prox_objective(prox_nm(y, lam, 2, m), y, lam, NM(2, m))
        fi = prox_objective(prox_nm(y, lam, 2, m, method="ipm") if m in (3, 4) else
                            _ipm_general(y, lam, m), y, lam, NM(2, m))
        assert np.max(fa - fi) <= 1e-10


def _ipm_general(y, lam, m):
    """EnumIPM for 2:M outside the dispatcher's 2:4 / 2:3 (its kernel supports any 2:M)."""
    from sparseopt.prox.ipm import enum_ipm_sorted

    a = np.abs(y)
    order = np.argsort(-a, axis=1, kind="stable")
    ws = enum_ipm_sorted(np.take_along_axis(a, order, axis=1), lam, 2)
    w = np.empty_like(ws)
    np.put_along_axis(w, order, ws, axis=1)
    return np.sign(y) * w
