"""The I-OBS theory checks (iobs-wu Fig. 1a, Fig. 1b, Thm 1 / Lemma 3) in quick mode."""

import importlib

import pytest



@pytest.mark.parametrize("name", ["iobs_fig1a", "iobs_digits", "iobs_rate"])
def test_iobs_theory_check_quick(name, tmp_path, capsys):
    if name == "iobs_digits":
        pytest.importorskip("sklearn")  # the digits check needs scikit-learn's bundled images
    module = importlib.import_module(f"theory_checks.check_{name}")
    assert module.run(str(tmp_path), quick=True) is True
    from theory_checks._report import take_claims
    from theory_checks.claims import missing_claims

    assert missing_claims(name, take_claims()) == []  # every claim registered to it was recorded
    out = capsys.readouterr().out
    assert f"PASS: {name}" in out
    assert (tmp_path / f"{name}.png").stat().st_size > 1000
