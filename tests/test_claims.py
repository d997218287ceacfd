"""The registry of the papers' claims (theory_checks.claims) and docs/claims.md."""

import os

import pytest

from theory_checks.__main__ import available
from theory_checks.claims import Claim, all_claims, claims_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from theory_checks.claims import PAPERS


def test_registry_is_consistent():
    claims = all_claims()
    checks = set(available())
    for c in claims:
        assert c.paper in PAPERS, c
        assert c.statement and c.number, c
        if c.check:
            assert c.check in checks, f"{c.id}: no theory check {c.check!r}"
        if c.test:  # "tests/test_x.py::test_y" or "tests/test_x.py"
            path = c.test.split("::")[0]
            assert os.path.isfile(os.path.join(ROOT, path)), f"{c.id}: no test file {path}"
            if "::" in c.test:
                name = c.test.split("::")[1].split("[")[0]
                with open(os.path.join(ROOT, path)) as fh:
                    assert f"def {name}(" in fh.read(), f"{c.id}: no test {name} in {path}"


def test_claim_needs_exactly_one_cover():
    with pytest.raises(ValueError, match="exactly one"):
        Claim("x", "maiht-wen", "Lemma 1", "s")
    with pytest.raises(ValueError, match="exactly one"):
        Claim("x", "maiht-wen", "Lemma 1", "s", check="paths", reason="r")


def test_table_marks_unrecorded_and_failed_claims():
    claims = [c for c in all_claims() if c.check]
    if not claims:
        pytest.skip("no claim is registered to a check yet")
    first = claims[0]
    table = claims_table({first.id: (first.check, "0.5 <= 1", False)})
    assert "| 0.5 <= 1 | FAILED |" in table
    assert table.count("| MISSING |") == len(claims) - 1


def test_status_is_the_outcome_of_a_passing_check():
    """A refuted claim whose check found its counterexample reads REFUTED, never CONFIRMED; a
    failing check reads FAILED whatever the outcome; the summary counts each status."""
    from theory_checks.claims import claim_status, status_counts, summary_table

    by_outcome = {}
    for c in all_claims():
        if c.check:
            by_outcome.setdefault(c.outcome, c)
    for outcome, c in by_outcome.items():
        assert claim_status(c, {c.id: (c.check, "fig", True)}) == ("fig", outcome)
        assert claim_status(c, {c.id: (c.check, "fig", False)}) == ("fig", "FAILED")
        assert claim_status(c, {}) == ("not recorded", "MISSING")
    assert {"REFUTED", "DEVIATES", "PARTIAL"} <= set(by_outcome)
    ref = by_outcome["REFUTED"]
    table = claims_table({ref.id: (ref.check, "found", True)})
    row = next(line for line in table.splitlines() if "| found |" in line)
    assert row.endswith("| REFUTED |") and "**Counterexample:**" in row
    counts = status_counts({ref.id: (ref.check, "found", True)})
    assert counts[ref.paper]["REFUTED"] >= 1
    assert sum(sum(v.values()) for v in counts.values()) == len(all_claims())
    assert f"| {ref.paper} |" in summary_table({})


def test_outcomes_need_a_finding_and_timed_needs_a_check():
    with pytest.raises(ValueError, match="finding"):
        Claim("x", "maiht-wen", "Lemma 1", "s", check="paths", outcome="REFUTED")
    with pytest.raises(ValueError, match="outcome"):
        Claim("x", "maiht-wen", "Lemma 1", "s", check="paths", outcome="PASS")
    with pytest.raises(ValueError, match="timed"):
        Claim("x", "maiht-wen", "Lemma 1", "s", test="tests/test_claims.py", timed=True)
    assert Claim("x", "maiht-wen", "Lemma 1", "s", reason="r").outcome == "NOT CHECKABLE"


def test_update_reruns_some_checks_and_keeps_the_other_figures(tmp_path):
    """--claims FILE --update: the rerun checks' claims take the new figures, every other
    claim keeps the figure of the last full run (FILE's .json); without that file it stops."""
    from theory_checks.__main__ import main, write_claims

    by_check = {}
    for c in all_claims():
        if c.check:
            by_check.setdefault(c.check, []).append(c.id)
    a, b = sorted(by_check)[:2]
    path = str(tmp_path / "claims.md")
    with pytest.raises(SystemExit, match="full run"):
        write_claims(path, {}, update=True, rerun={a})
    full = {cid: (chk, f"old {cid}", True) for chk, ids in by_check.items() for cid in ids}
    write_claims(path, full)
    new = {cid: (a, f"new {cid}", False) for cid in by_check[a]}
    write_claims(path, new, update=True, rerun={a})
    table = open(path).read()
    for cid in by_check[a]:
        assert f"| new {cid} |" in table and f"| old {cid} |" not in table
    for cid in by_check[b]:
        assert f"| old {cid} |" in table
    assert "| MISSING |" not in table
    with pytest.raises(SystemExit):  # names without --update, --update without --claims
        main([a, "--claims", path])
    with pytest.raises(SystemExit):
        main([a, "--update"])


def test_every_paper_notes_item_is_a_claim_row_with_its_status():
    """Every item of docs/paper_notes.md (a deviation, correction or ambiguity of the papers)
    names the claim row that records it, every claim id the page names is registered, and a
    status written next to an id, ``[`id`, STATUS]``, is that row's status."""
    import re

    from theory_checks.claims import OUTCOMES

    with open(os.path.join(ROOT, "docs", "paper_notes.md")) as fh:
        text = fh.read()
    ids = {c.id: c for c in all_claims()}
    named = re.findall(r"`((?:kubler|liu|maiht|iobs)-[a-z0-9-]+)`", text)
    assert named and set(named) <= set(ids), sorted(set(named) - set(ids))
    for cid, status in re.findall(r"\[`([a-z0-9-]+)`, ([A-Z ]+?)[;\]]", text):
        assert ids[cid].outcome == status.strip(), (cid, status, ids[cid].outcome)
        assert status.strip() in OUTCOMES
    items = [b for b in re.split(r"\n(?=- )", text.split("\n## ", 1)[1]) if b.startswith("- ")]
    assert len(items) >= 15
    for item in items:
        assert re.search(r"`(?:kubler|liu|maiht|iobs)-[a-z0-9-]+`", item), f"no claim row: {item[:80]}"


def test_a_restricted_run_asks_for_registered_claims_and_ends(monkeypatch, tmp_path):
    """``run_quick(..., only=ids)`` (mutation tests): ``wanted`` is True for a part recording a
    wanted claim, and for every part outside a restricted run; an id the check does not
    record is refused before the check runs."""
    from theory_checks import _report
    from theory_checks._testing import run_quick

    with pytest.raises(ValueError, match="records no claim"):
        run_quick("scale_covariance", tmp_path, only=["liu-table1-pgd"])
    assert _report._ONLY is None and _report.wanted() and _report.wanted("liu-table1-pgd")
    monkeypatch.setattr(_report, "_ONLY", frozenset({"liu-table1-pgd"}))
    assert _report.wanted("liu-table1-runtime", "liu-table1-pgd")
    assert not _report.wanted("liu-table1-runtime") and not _report.wanted()


def test_jobs_runs_checks_in_workers_and_timed_checks_alone(capsys):
    """--jobs 2: every named check runs and prints its verdict whole, its claims come back
    with the verdicts a serial run records, and the timed check runs after the others (its
    verdict is a speed ratio under this machine's load: not asserted). Fails if a worker's
    output or claims were lost or a timed check ran among the workers."""
    from theory_checks.__main__ import main
    from theory_checks._run import run_checks

    names = ["layer_toy", "iobs_stochastic", "maiht_time"]  # maiht_time: timed
    results, records = run_checks(names, "theory_checks/out", quick=True, jobs=2)
    out = capsys.readouterr().out
    assert set(results) == set(names) and results["layer_toy"] and results["iobs_stochastic"]
    for name in names[:2]:
        assert f"PASS: {name}" in out
    assert out.index("=== maiht_time ===") > max(out.index("(layer_toy: "),
                                                 out.index("(iobs_stochastic: "))
    serial = run_checks(names[:2], "theory_checks/out", quick=True)[1]
    registered = {c.id for c in all_claims() if c.check in names}
    assert set(records) == registered
    assert {cid: rec[::2] for cid, rec in serial.items()} == {
        cid: rec[::2] for cid, rec in records.items() if rec[0] in names[:2]}
    with pytest.raises(SystemExit):
        main(["layer_toy", "--jobs", "0"])


def test_longest_first_orders_by_the_last_claims_run():
    """The order of --jobs: checks without a recorded time first, then the recorded ones by
    decreasing seconds (theory_checks/seconds.json, written by --claims runs)."""
    from theory_checks.__main__ import available
    from theory_checks._run import load_seconds, longest_first

    seconds = load_seconds()
    assert set(seconds) <= set(available())
    order = longest_first(sorted(seconds) + ["not_timed_yet"])
    assert order[0] == "not_timed_yet"
    assert [seconds[n] for n in order[1:]] == sorted(seconds.values(), reverse=True)


def test_jobs_from_the_command_line(tmp_path):
    """`python -m theory_checks --jobs 2` (as make checks runs it): the spawned workers import
    what they run. Fails if the workers need the ``__main__`` of ``-m``, which they cannot
    import."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "theory_checks", "layer_toy", "maiht_magnitude",
                           "--quick", "--jobs", "2", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "PASS: layer_toy" in done.stdout and "PASS: maiht_magnitude" in done.stdout
    assert "2 passed, 0 failed" in done.stdout
