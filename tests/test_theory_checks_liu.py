"""The proxsparse-liu Reg_W0 theory check (Prop. 2, Cor. 3) in quick mode; it needs the torch
adapter (``sparseopt_torch.proxsparse.reg_w0``)."""

import pytest

from theory_checks._report import take_claims
from theory_checks.claims import missing_claims


def test_liu_regw0_passes_quick(tmp_path, capsys):
    pytest.importorskip("torch")
    from theory_checks.check_liu_regw0 import run

    take_claims()
    assert run(str(tmp_path), quick=True) is True
    got = take_claims()
    assert got and missing_claims("liu_regw0", got) == []
    assert all(passed for _, passed in got.values()), got
    assert "PASS: liu_regw0" in capsys.readouterr().out
    assert (tmp_path / "liu_regw0.png").stat().st_size > 1000


# --- liu_printed: Thm 4's g_3, Alg. 2 line 6, Alg. 3's optimality, Prop. 6's proof ----------


def test_liu_printed_holds_quick(tmp_path):
    from theory_checks._testing import assert_quick_run_holds, run_quick

    ok, got = run_quick("liu_printed", tmp_path)
    assert_quick_run_holds("liu_printed", ok, got, tmp_path)


def test_liu_printed_fails_when_alg2_does_not_stall(monkeypatch, tmp_path):
    """Alg. 3 with an Alg. 2 that starts at the library's optimum instead of z: no stalled
    group, so "Alg. 3 is not always optimal" is no longer shown."""
    import theory_checks.check_liu_printed as chk
    from theory_checks._testing import run_quick

    monkeypatch.setattr(chk, "enum_alm_printed",
                        lambda z, lam, eps=1e-12, ordered=False: chk._reference(z, lam))
    ok, got = run_quick("liu_printed", tmp_path)
    assert ok is False
    assert got["liu-alg3-optimal"][1] is False


def test_liu_printed_fails_for_a_library_alm_at_2_lam(monkeypatch, tmp_path):
    """The library's EnumALM at 2 lam: the kernel is no longer optimal on the tied groups."""
    import sparseopt.prox as prox_pkg
    from theory_checks._testing import run_quick

    orig = prox_pkg.prox_nm

    def broken(y, lam, n=2, m=4, *, method="alm", **kw):
        return orig(y, 2 * lam if method == "alm" else lam, n, m, method=method, **kw)

    monkeypatch.setattr(prox_pkg, "prox_nm", broken)
    ok, got = run_quick("liu_printed", tmp_path)
    assert ok is False
    assert got["liu-alg3-optimal"][1] is False


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reflected iterates overflow
def test_liu_printed_prop6_proof_fails_for_sweeps_that_overshoot(monkeypatch, tmp_path):
    """Alg. 2's sweep (``alm_trace``'s NumPy transcription) over-relaxed, w + 2 (sweep(w) - w):
    every sweep reflects the group through its coordinate minimizers, f does not fall and the
    iterates keep moving, so the corrected halting bound lam ||z||^3 / eps^2 fails."""
    import sparseopt.prox.alm as alm
    from theory_checks._testing import run_quick

    orig = alm._alm_sweep_np

    def overshoot(w, z, lam, n, s):
        old = w.copy()
        orig(w, z, lam, n, s)
        w[:] = old + 2.0 * (w - old)

    monkeypatch.setattr(alm, "_alm_sweep_np", overshoot)
    ok, got = run_quick("liu_printed", tmp_path)
    assert ok is False
    figure, passed = got["liu-prop6-proof"]
    assert passed is False
    assert "halting later than lam ||z||^3 / eps^2 sweeps: 0 of" not in figure
