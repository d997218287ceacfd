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
    assert "| 0.5 <= 1 | FAIL |" in table
    assert table.count("| MISSING |") == len(claims) - 1
