"""Each prox theory check (issue "foundation") runs in quick mode and holds.

Quick mode shrinks the problem sizes, not the pass criteria; the full sizes run with
``python -m theory_checks``.
"""

import importlib

import pytest

CHECKS = ["paths", "lemma10", "table1", "conjecture9", "scale_covariance", "alm_decrease", "r0m_soft"]


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_quick(name, tmp_path, capsys):
    module = importlib.import_module(f"theory_checks.check_{name}")
    ok = module.run(str(tmp_path), quick=True)
    out = capsys.readouterr().out
    assert f"PASS: {name}" in out, out[-3000:]
    assert ok is True
    assert list(tmp_path.glob("*.png")), "the check saved no plot"


def test_lemma10_thresholds_formulas():
    import numpy as np

    from sparseopt.demo.prox_paths import lemma10_thresholds

    lam3, lam2 = lemma10_thresholds([1.4, 1.1, 1.0, 0.7])
    assert lam2 == pytest.approx(1.0 / (1.4 * 1.1))
    assert lam3 == pytest.approx(0.7 / (1.4 * 1.1 + 1.1 * 1.0 + 1.4 * 1.0))
    z = np.sort(np.abs(np.random.default_rng(0).standard_normal((100, 4))), axis=1)[:, ::-1]
    a, b = lemma10_thresholds(z)
    assert np.all(a <= b)  # the 3-sparse threshold never exceeds the 2-sparse one
    for bad in ([1.0, 2.0, 0.5, 0.1], [1.0, 0.5, 0.2, -0.1], [1.0, 0.0, 0.0, 0.0], [1.0, 0.5, 0.2]):
        with pytest.raises(ValueError, match="z"):
            lemma10_thresholds(bad)
