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
