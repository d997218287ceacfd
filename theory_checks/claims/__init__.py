"""The papers' numerically checkable claims, one :class:`Claim` each, and how each is covered.

Each module here (one or more per paper: ``prox24_kubler``, ``prox24_kubler_layer``,
``proxsparse_liu``, ``maiht_wen``, ``iobs_wu``, ...) has a list ``CLAIMS``. A claim is covered by a theory check (``check``: the
check calls ``theory_checks._report.claim(id, figure, passed)`` while it runs), by unit tests
(``test``: a pytest node id or file), or is not checkable numerically (``reason``).
``python -m theory_checks --claims docs/claims.md`` runs the checks and writes the table
from what they recorded, so the measured figures in the docs are the checks' own output.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import pkgutil

#: Paper order of the table (the stems of the files in ``../shared/papers/``).
PAPERS = ("prox24-kubler", "proxsparse-liu", "maiht-wen", "iobs-wu")


@dataclass(frozen=True)
class Claim:
    """One statement of a paper that a computation can confirm or refute.

    id : short unique key, ``<paper prefix>-<what>``, e.g. ``"kubler-fact2"``.
    paper : the paper file's stem in ``../shared/papers/`` (``"prox24-kubler"``).
    number : where it is stated (``"Fact 2"``, ``"Lemma 5"``, ``"Table 1"``, ``"Sec. 3.5"``).
    statement : the claim, in one sentence.
    check : the theory check (name without ``check_``) that records it, or None.
    test : the unit test(s) that cover it, when no theory check does, or None.
    reason : why it cannot be checked numerically, when neither covers it, or None.
    """

    id: str
    paper: str
    number: str
    statement: str
    check: str | None = None
    test: str | None = None
    reason: str | None = None

    def __post_init__(self):
        given = [k for k in ("check", "test", "reason") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"claim {self.id!r}: give exactly one of check, test, reason (got {given})")


def all_claims() -> list[Claim]:
    """Every claim of the four papers, in paper order; ids are unique."""
    out = []
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        out += importlib.import_module(f"theory_checks.claims.{mod}").CLAIMS
    unknown = sorted({c.paper for c in out} - set(PAPERS))
    if unknown:
        raise ValueError(f"claims of unknown papers {unknown}; papers are {PAPERS}")
    out.sort(key=lambda c: PAPERS.index(c.paper))  # stable: module order within a paper
    ids = [c.id for c in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate claim ids {dup}")
    return out


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_table(records: dict) -> str:
    """Markdown of every claim; ``records`` maps claim id -> (check, figure, passed), as
    recorded by the checks of one run. A claim whose check did not record it is "MISSING"."""
    lines = ["| paper | number | claim | covered by | measured | status |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in all_claims():
        if c.check:
            by = f"check `{c.check}`"
            if c.id in records:
                _, figure, passed = records[c.id]
                status = "PASS" if passed else "FAIL"
            else:
                figure, status = "not recorded", "MISSING"
        elif c.test:
            by, figure, status = f"test `{c.test}`", "see the test", "covered by test"
        else:
            by, figure, status = "-", c.reason, "not checkable"
        lines.append(f"| {c.paper} | {_cell(c.number)} | {_cell(c.statement)} | {_cell(by)} | "
                     f"{_cell(figure)} | {status} |")
    return "\n".join(lines) + "\n"


def missing_claims(check: str, recorded) -> list[str]:
    """Ids registered to ``check`` that are not in ``recorded`` (what a run of it recorded)."""
    return sorted(c.id for c in all_claims() if c.check == check and c.id not in recorded)
