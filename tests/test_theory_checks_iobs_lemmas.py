"""The iobs-wu Lemma 1 / eq. 14 / Lemmas 5-9 theory check in quick mode (no scikit-learn
needed), and that it fails on a broken Top-k operator."""

import numpy as np

from sparseopt import TopK
from theory_checks._report import take_claims
from theory_checks.claims import missing_claims


def test_iobs_lemmas_passes_quick(tmp_path, capsys):
    from theory_checks.check_iobs_lemmas import run

    take_claims()
    assert run(str(tmp_path), quick=True) is True
    got = take_claims()
    assert missing_claims("iobs_lemmas", got) == []
    assert all(passed for _, passed in got.values()), got
    assert "PASS: iobs_lemmas" in capsys.readouterr().out
    assert (tmp_path / "iobs_lemmas.png").stat().st_size > 1000


def test_iobs_lemmas_fails_with_a_topk_that_ignores_signs(tmp_path, monkeypatch):
    def project(self, x):  # keeps the k largest signed values instead of the largest |x|
        x = np.asarray(x, dtype=np.float64)
        out = np.zeros_like(x)
        idx = np.argsort(-x, axis=-1, kind="stable")[..., : self.k]
        np.put_along_axis(out, idx, np.take_along_axis(x, idx, axis=-1), axis=-1)
        return out

    monkeypatch.setattr(TopK, "project", project)
    from theory_checks.check_iobs_lemmas import run

    take_claims()
    assert run(str(tmp_path), quick=True) is False
    got = take_claims()
    assert got["iobs-lemma1"][1] is False or got["iobs-lemma8"][1] is False
