"""The real-LM claims check reads the benchmark's tables: its verdicts follow the measured
perplexities (a table where an order flips fails that claim, and only that one), and it runs
the benchmark only for the runs the tables lack."""

import json

import pytest

from theory_checks import check_real_lm, check_real_lm_ablations
from theory_checks._report import take_claims

#: Perplexities (64 x 512) in the orders the papers claim.
GOOD = {"dense": 20.0, "magnitude": 900.0, "magnitude+GD": 200.0, "wanda": 200.0,
        "wanda+GD": 120.0, "sparsegpt": 100.0, "sparsegpt+GD": 90.0, "prox": 70.0,
        "prox+GD": 68.0, "maiht": 95.0, "maiht+GD": 85.0, "iobs": 96.0, "iobs+GD": 88.0,
        "proxsparse": 80.0, "proxsparse+GD": 75.0,
        "sparsegpt (sequential)": 98.0, "sparsegpt+GD (sequential)": 91.0,
        "prox (sequential)": 69.0, "prox+GD (sequential)": 69.0}
#: The calibration trend: 16 and 256 sequences (64 is GOOD).
TREND = {16: {"dense": 20.0, "sparsegpt": 120.0, "sparsegpt+GD": 100.0, "prox": 97.0,
              "prox+GD": 95.0},
         256: {"dense": 20.0, "sparsegpt": 95.0, "sparsegpt+GD": 85.0, "prox": 66.0,
               "prox+GD": 64.0}}
CLAIMS = {"kubler-table1-prox-gd-best-lm", "kubler-gd-improves-lm", "maiht-table1-lm",
          "iobs-table2-lm", "liu-table2-lm"}
ABLATION_CLAIMS = {"kubler-d1-sequential-lm", "kubler-d2-calibration-lm",
                   "kubler-d2-prox-best-lm"}


def _write(folder, ppl, n=64):
    rows = [{"run": k, "perplexity": v, "kl": 0.0} for k, v in ppl.items()]
    (folder / f"real_lm-n{n}-L512-gd100-cpu.json").write_text(json.dumps({"rows": rows}))


def _write_all(folder, flip=None, trend_flip=None):
    _write(folder, {**GOOD, **(flip or {})})
    for n, ppl in TREND.items():
        _write(folder, {**ppl, **(trend_flip or {}).get(n, {})}, n)


@pytest.mark.parametrize("flip, trend_flip, failed", [
    ({}, {}, set()),
    ({"prox": 92.0, "prox+GD": 91.0, "prox (sequential)": 92.0, "prox+GD (sequential)": 91.0},
     {}, {"kubler-table1-prox-gd-best-lm", "kubler-d2-prox-best-lm"}),
    ({"wanda+GD": 250.0}, {}, {"kubler-gd-improves-lm"}),
    ({"prox+GD (sequential)": 50.0}, {}, {"kubler-d1-sequential-lm"}),  # a 26% change
    ({"sparsegpt (sequential)": 97.0, "sparsegpt+GD (sequential)": 89.0,
      "prox+GD (sequential)": 67.0}, {}, {"kubler-d1-sequential-lm"}),  # lower in all four
    ({}, {256: {"sparsegpt+GD": 95.0}}, {"kubler-d2-calibration-lm"}),
    ({}, {16: {"prox+GD": 100.0}}, {"kubler-d2-prox-best-lm"}),  # a tie is not lower
    ({"maiht": 101.0}, {}, {"maiht-table1-lm"}),
    ({"iobs": 100.0}, {}, {"iobs-table2-lm"}),  # a tie is not lower
    ({"proxsparse": 300.0}, {}, {"liu-table2-lm"}),
])
def test_verdicts_follow_the_table(tmp_path, monkeypatch, flip, trend_flip, failed):
    monkeypatch.setattr(check_real_lm, "CACHE", str(tmp_path))
    _write_all(tmp_path, flip, trend_flip)
    for check, claims in ((check_real_lm, CLAIMS), (check_real_lm_ablations, ABLATION_CLAIMS)):
        take_claims()
        ok = check.run(str(tmp_path / "out"))
        got = take_claims()
        assert set(got) == claims
        assert {k for k, (_, passed) in got.items() if not passed} == failed & claims
        assert ok == (not failed & claims)


def test_missing_runs_run_the_benchmark(tmp_path, monkeypatch):
    """The 64 table lacks wanda and the sequential rows, the 256 table is absent: each check
    calls the benchmark for what it lacks (stubbed here; it writes the full table) and then
    reads it: real_lm the 64 table's methods, the ablations the sequential runs and the 256
    table."""
    import sys
    import types

    monkeypatch.setattr(check_real_lm, "CACHE", str(tmp_path))
    _write(tmp_path, {k: v for k, v in GOOD.items()
                      if not k.startswith("wanda") and "sequential" not in k})
    _write(tmp_path, TREND[16], 16)
    calls = []

    def main(argv):
        calls.append(argv)
        n = int(argv[argv.index("--n-calib") + 1])
        rows = {k: v for k, v in GOOD.items() if "--sequential" in argv or "seq" not in k}
        _write(tmp_path, rows if n == 64 else TREND[n], n)  # what such a call writes
        return 0

    monkeypatch.setitem(sys.modules, "real_lm", types.SimpleNamespace(main=main))
    take_claims()
    assert check_real_lm.run(str(tmp_path / "out"))
    assert check_real_lm_ablations.run(str(tmp_path / "out"))
    take_claims()
    first, second, third = calls
    assert first[first.index("--methods") + 1:first.index("--n-calib")] == list(
        check_real_lm.METHODS)
    assert first[first.index("--proxsparse-steps") + 1] == str(check_real_lm.PROXSPARSE_STEPS)
    assert first[first.index("--cache") + 1] == str(tmp_path)
    assert "--sequential" not in first
    assert second[second.index("--sequential") + 1:][:2] == list(check_real_lm_ablations.METHODS)
    assert third[third.index("--n-calib") + 1] == "256"
    assert "--sequential" not in third and "--proxsparse-steps" not in third
