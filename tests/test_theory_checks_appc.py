"""The App. C theory check (R0, R1, R2 of prox24-kubler): a quick run passes, and it fails
when the implementation it checks is broken."""

from __future__ import annotations

import numpy as np
import pytest

from sparseopt.threads import one_thread
from theory_checks import check_appc_regularizers


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


def test_appc_check_passes(tmp_path, capsys):
    assert check_appc_regularizers.run(str(tmp_path), quick=True)
    out = capsys.readouterr().out
    assert "PASS: appc_regularizers" in out
    assert (tmp_path / "appc_regularizers.png").exists()


def test_appc_check_fails_when_R2_reaches_exact_sparsity(tmp_path, monkeypatch):
    """A broken R2 whose prox hard-thresholds its tail (exact 2:4 at large lambda) must
    fail the claim "R2 never reaches exact 2:4"."""
    from sparseopt import regularizers

    def broken(self, x, c):
        xp_tail = self._tail(x)
        return np.where(xp_tail & (np.abs(x) < c), 0.0, x).astype(x.dtype)

    monkeypatch.setattr(regularizers.R2, "_prox", broken)
    assert not check_appc_regularizers.run(str(tmp_path), quick=True)
