"""Each prox theory check (issue "foundation") runs in quick mode and holds.

Quick mode shrinks the problem sizes, not the pass criteria; the full sizes run with
``python -m theory_checks``.
"""

import pytest

from theory_checks._testing import assert_quick_run_holds, run_quick

CHECKS = ["paths", "lemma10", "table1", "conjecture9", "scale_covariance", "alm_decrease", "r0m_soft"]


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_quick(name, tmp_path):
    """Every claim but the timed ones (``table1``'s runtime claim: run and printed, never
    asserted, ``theory_checks._testing``)."""
    ok, got = run_quick(name, tmp_path)
    assert_quick_run_holds(name, ok, got, tmp_path)


def test_lemma10_thresholds_formulas():
    import numpy as np

    from sparseopt.prox.thresholds import lemma10_thresholds

    lam3, lam2 = lemma10_thresholds([1.4, 1.1, 1.0, 0.7])
    assert lam2 == pytest.approx(1.0 / (1.4 * 1.1))
    assert lam3 == pytest.approx(0.7 / (1.4 * 1.1 + 1.1 * 1.0 + 1.4 * 1.0))
    z = np.sort(np.abs(np.random.default_rng(0).standard_normal((100, 4))), axis=1)[:, ::-1]
    a, b = lemma10_thresholds(z)
    assert np.all(a <= b)  # the 3-sparse threshold never exceeds the 2-sparse one
    for bad in ([1.0, 2.0, 0.5, 0.1], [1.0, 0.5, 0.2, -0.1], [1.0, 0.0, 0.0, 0.0], [1.0, 0.5, 0.2]):
        with pytest.raises(ValueError, match="z"):
            lemma10_thresholds(bad)


def test_conjecture9_iteration_reference():
    """The check's own NumPy iteration of Conjecture 9: its PSD test agrees with eigvalsh, it
    does flag runs that leave the convex region (large lam, sparse optima), agreeing with the
    library's per-run flag, and it reaches the IPM optimum on dense-optimum instances."""
    import numpy as np

    from sparseopt.prox import prox_nm
    from sparseopt.prox.pgd import enum_pgd_sorted
    from theory_checks.check_conjecture9 import _hessian, _indefinite, conjecture9_run

    rng = np.random.default_rng(1)
    W = np.abs(rng.standard_normal((3000, 4))) * 0.7
    bad = _indefinite(W, 1.0)
    assert 0 < bad.sum() < W.shape[0]
    np.testing.assert_array_equal(bad, np.linalg.eigvalsh(_hessian(W, 1.0))[:, 0] < -1e-12)

    z = np.sort(np.abs(rng.standard_normal((300, 4))), axis=1)[:, ::-1].copy()
    _, left, _ = conjecture9_run(z, 2.0)
    _, info = enum_pgd_sorted(z, 2.0, 2, 1e-12, 100_000, return_info=True)
    assert left.sum() > 100
    np.testing.assert_array_equal(left, info["left_psd_runs"][:, 1])

    w_ipm = prox_nm(z, 0.05, method="ipm")
    dense = np.all(w_ipm > 0, axis=1)
    assert dense.sum() > 200  # small lam: mostly dense optima
    z, w_ipm = z[dense], w_ipm[dense]
    w, left, n_iter = conjecture9_run(z, 0.05)
    assert not left.any()
    np.testing.assert_allclose(w, w_ipm, atol=1e-9)
