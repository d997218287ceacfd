"""The I-OBS theory checks (iobs-wu Fig. 1a, Fig. 1b, Thm 1 / Lemma 3) in quick mode, and the
rate check failing for a Newton step of the wrong length."""

import pytest

from theory_checks._testing import assert_quick_run_holds, run_quick


@pytest.mark.parametrize("name", ["iobs_fig1a", "iobs_digits", "iobs_rate"])
def test_iobs_theory_check_quick(name, tmp_path):
    if name == "iobs_digits":
        pytest.importorskip("sklearn")  # the digits check needs scikit-learn's bundled images
    ok, got = run_quick(name, tmp_path)
    assert_quick_run_holds(name, ok, got, tmp_path)
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_iobs_rate_fails_for_a_half_newton_step(monkeypatch, tmp_path):
    """Top-k I-OBS with a Newton step of length 0.5 converges linearly: the fitted order is
    about 1 and the quadratic-rate claims fail."""
    import theory_checks.check_iobs_rate as chk

    orig = chk.topk_iobs
    monkeypatch.setattr(chk, "topk_iobs", lambda f, **kw: orig(f, **{**kw, "step": 0.5}))
    ok, got = run_quick("iobs_rate", tmp_path)
    assert ok is False
    assert got["iobs-quadratic-order"][1] is False
    assert got["iobs-lemma3"][1] is False
    assert got["iobs-thm1"][1] is True  # the exact I-OBS is untouched


def test_iobs_quadratic_holds_quick(tmp_path):
    ok, got = run_quick("iobs_quadratic", tmp_path)
    assert_quick_run_holds("iobs_quadratic", ok, got, tmp_path)


def test_iobs_quadratic_fails_for_a_half_step(monkeypatch, tmp_path):
    """An I-OBS that moves only half way to its Newton-model optimum: not in one step."""
    from types import SimpleNamespace

    import numpy as np

    import sparseopt.solvers as solvers

    orig = solvers.iobs

    def half(f, k, *, x0, **kw):
        x = orig(f, k, x0=x0, **kw).x
        return SimpleNamespace(x=np.where(x != 0, x0 + 0.5 * (x - x0), 0.0))

    monkeypatch.setattr(solvers, "iobs", half)
    ok, got = run_quick("iobs_quadratic", tmp_path)
    assert ok is False
    assert got["iobs-quadratic-one-step"][1] is False
    assert got["iobs-woodtaylor"][1] is False
