"""The real-LM claims check reads the benchmark's table: its verdicts follow the measured
perplexities (a table where an order flips fails that claim), and it runs the benchmark only
for methods the table lacks."""

import json

import pytest

from theory_checks import check_real_lm
from theory_checks._report import take_claims

#: Perplexities in the order prox24-kubler claims (prox+GD best, +GD helps every mask).
GOOD = {"dense": 20.0, "wanda": 200.0, "wanda+GD": 120.0, "sparsegpt": 100.0,
        "sparsegpt+GD": 90.0, "prox": 70.0, "prox+GD": 68.0}


def _write(folder, ppl):
    rows = [{"run": k, "perplexity": v, "kl": 0.0} for k, v in ppl.items()]
    path = folder / "real_lm-n64-L512-gd100-cpu.json"
    path.write_text(json.dumps({"rows": rows}))


@pytest.mark.parametrize("flip, failed", [
    ({}, set()),
    ({"prox": 99.0, "prox+GD": 95.0}, {"kubler-table1-prox-gd-best-lm"}),
    ({"wanda+GD": 250.0}, {"kubler-gd-improves-lm"}),
    ({"prox+GD": 90.0}, {"kubler-table1-prox-gd-best-lm", "kubler-gd-improves-lm"}),
])
def test_verdicts_follow_the_table(tmp_path, monkeypatch, flip, failed):
    monkeypatch.setattr(check_real_lm, "CACHE", str(tmp_path))
    _write(tmp_path, {**GOOD, **flip})
    take_claims()
    ok = check_real_lm.run(str(tmp_path / "out"))
    got = take_claims()
    assert set(got) == {"kubler-table1-prox-gd-best-lm", "kubler-gd-improves-lm"}
    assert {k for k, (_, passed) in got.items() if not passed} == failed
    assert ok == (not failed)


def test_a_missing_method_runs_the_benchmark(tmp_path, monkeypatch):
    """The table lacks wanda: the check calls the benchmark for the claims' methods (stubbed
    here; it writes the full table) and then reads it."""
    import sys
    import types

    monkeypatch.setattr(check_real_lm, "CACHE", str(tmp_path))
    _write(tmp_path, {k: v for k, v in GOOD.items() if not k.startswith("wanda")})
    calls = []

    def main(argv):
        calls.append(argv)
        _write(tmp_path, GOOD)
        return 0

    monkeypatch.setitem(sys.modules, "real_lm", types.SimpleNamespace(main=main))
    take_claims()
    assert check_real_lm.run(str(tmp_path / "out"))
    take_claims()
    (argv,) = calls
    assert argv[:4] == ["--methods", *check_real_lm.METHODS]
    assert argv[argv.index("--cache") + 1] == str(tmp_path)
