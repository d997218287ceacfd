"""The prox24-kubler theory checks of Sec. 3 (Fact 2, Lemmas 3-5, Thm 7, Cor. 6, Fact 8,
Sec. 3.5) run in quick mode, hold, and record every claim registered to them.

Quick mode shrinks the problem sizes, not the pass criteria; the full sizes run with
``python -m theory_checks``. ``kubler_speed`` asserts a ratio of two times measured in the
same run (IPM / PGD > 10, about 100-300 measured), never a wall-clock time.
"""

import importlib

import pytest

from sparseopt.threads import one_thread

CHECKS = ["kubler_fact2", "kubler_alg1", "kubler_lemma5", "kubler_cor6", "kubler_fact8", "kubler_speed"]


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_quick(name, tmp_path, capsys):
    from theory_checks._report import take_claims
    from theory_checks.claims import missing_claims

    module = importlib.import_module(f"theory_checks.check_{name}")
    take_claims()
    with one_thread():
        ok = module.run(str(tmp_path), quick=True)
    got = take_claims()
    assert got, "the check recorded no claim"
    assert missing_claims(name, got) == []  # every claim registered to it was recorded
    assert all(passed for _, passed in got.values()), got
    out = capsys.readouterr().out
    assert f"PASS: {name}" in out, out[-3000:]
    assert ok is True
    assert list(tmp_path.glob("*.png")), "the check saved no plot"
