"""The App. C theory check (R0, R1, R2 of prox24-kubler): a quick run holds (every claim but
the timed speed claim, which the test suite never asserts), and it fails when the
implementation it checks is broken."""

from __future__ import annotations

import numpy as np

from theory_checks._testing import assert_quick_run_holds, prox_rnm_replaced_by, run_quick


def test_appc_check_holds(tmp_path, capsys):
    ok, got = run_quick("appc_regularizers", tmp_path)
    assert_quick_run_holds("appc_regularizers", ok, got, tmp_path)
    assert got["kubler-appc-closed-form"][1] is True
    out = capsys.readouterr().out
    assert "claim kubler-appc-faster:" in out  # the speed figure is printed, its status not asserted
    assert (tmp_path / "appc_regularizers.png").exists()


def test_appc_check_fails_when_R2_reaches_exact_sparsity(tmp_path, monkeypatch):
    """A broken R2 whose prox hard-thresholds its tail (exact 2:4 at large lambda) must
    fail the claim "R2 never reaches exact 2:4" (and is no longer the prox of R2)."""
    from sparseopt import regularizers

    def broken(self, x, c):
        xp_tail = self._tail(x)
        return np.where(xp_tail & (np.abs(x) < c), 0.0, x).astype(x.dtype)

    monkeypatch.setattr(regularizers.R2, "_prox", broken)
    ok, got = run_quick("appc_regularizers", tmp_path)
    assert ok is False
    assert got["kubler-appc-exact"][1] is False
    assert got["kubler-appc-closed-form"][1] is False


def test_appc_closed_form_fails_for_a_threshold_off_by_2(tmp_path, monkeypatch):
    """R1's prox at 2 lam (tail soft-thresholded at 2 lam): still zero iff 2:4 and exactly
    2:4 at large lam, but not the prox of lam R1."""
    from sparseopt import regularizers

    orig = regularizers.R1._prox
    monkeypatch.setattr(regularizers.R1, "_prox", lambda self, x, c: orig(self, x, 2 * c))
    ok, got = run_quick("appc_regularizers", tmp_path)
    assert ok is False
    assert got["kubler-appc-closed-form"][1] is False
    assert got["kubler-appc-zero"][1] is True


def test_appc_table2_quality_fails_when_the_rnm_run_is_R1(tmp_path, monkeypatch):
    """The pruner's r_{2:4} run replaced by R1's: its mask is R1's, so it is not strictly the
    best of the four (Table 2's quality order)."""
    prox_rnm_replaced_by(monkeypatch, "R1")
    ok, got = run_quick("appc_regularizers", tmp_path)
    assert ok is False
    assert got["kubler-table2-quality"][1] is False
