"""The I-OBS theory checks (iobs-wu Fig. 1a, Fig. 1b, Thm 1 / Lemma 3) in quick mode, and the
rate check failing for a Newton step of the wrong length."""

import pytest

from theory_checks._testing import assert_quick_run_holds, run_quick

#: iobs_rate's claims: its mutation tests skip only k-IHT (printed for contrast) and the plot
IOBS_RATE = ["iobs-lemma3", "iobs-thm1", "iobs-quadratic-order"]


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
    ok, got = run_quick("iobs_rate", tmp_path, only=IOBS_RATE)
    assert ok is False
    assert got["iobs-quadratic-order"][1] is False
    assert got["iobs-lemma3"][1] is False
    assert got["iobs-thm1"][1] is True  # the exact I-OBS is untouched


def test_iobs_rate_thm1_fails_for_an_exact_step_1_percent_too_long(monkeypatch, tmp_path):
    """Exact I-OBS whose step overshoots its k-sparse Newton point by 1%: it still reaches
    1e-10, but linearly (e_{t+1} about 0.01 e_t), so ||e_{t+1}|| / ||e_t||^2 grows past Thm 1's
    constant as e_t falls, and the fitted order is about 1; Top-k I-OBS is untouched."""
    from types import SimpleNamespace

    import numpy as np

    import theory_checks.check_iobs_rate as chk

    orig = chk.iobs

    def long_step(f, k, *, x0, **kw):
        r = orig(f, k, x0=x0, **kw)
        return SimpleNamespace(x=np.where(r.x != 0, x0 + 1.01 * (r.x - x0), 0.0), info=r.info)

    monkeypatch.setattr(chk, "iobs", long_step)
    ok, got = run_quick("iobs_rate", tmp_path, only=IOBS_RATE)
    assert ok is False
    assert got["iobs-thm1"][1] is False
    assert got["iobs-quadratic-order"][1] is False
    assert got["iobs-lemma3"][1] is True


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


def test_iobs_lemmas_eq10_fails_for_a_step_with_a_random_mask(monkeypatch, tmp_path):
    """An I-OBS step that prunes a random set S (eq. 23 with that S): eq. (10) needs the
    optimal S and fails for it; the other lemmas do not use the step."""
    import numpy as np

    import importlib

    iobs_mod = importlib.import_module("sparseopt.solvers.iobs")  # the package exports a function of that name

    rng = np.random.default_rng(0)

    def random_mask_step(theta, grad, H, k, return_info=False, **kw):
        d = theta.size
        Hinv = np.linalg.inv(H)
        plus = theta - Hinv @ grad
        S = np.sort(rng.choice(d, d - k, replace=False))
        HS = np.zeros((d, d))
        HS[np.ix_(S, S)] = np.linalg.inv(Hinv[np.ix_(S, S)])
        nxt = plus - Hinv @ HS @ plus
        return (nxt, {"newton": plus}) if return_info else nxt

    monkeypatch.setattr(iobs_mod, "iobs_step", random_mask_step)
    ok, got = run_quick("iobs_lemmas", tmp_path)
    assert ok is False
    assert got["iobs-eq10"][1] is False
    assert got["iobs-lemma8"][1] is True
