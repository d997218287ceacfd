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


#: What a row's status can say. A check or test that passes shows the claim's ``outcome``;
#: a check that fails shows FAILED (it did not show what the row says), one that recorded
#: nothing MISSING.
OUTCOMES = {
    "CONFIRMED": "the check confirms the statement as the paper states it",
    "REFUTED": "the check found a counterexample to the statement and verified it independently",
    "DEVIATES": "the statement holds only in a corrected form (the row's finding); the check "
                "verifies both what fails as stated and what holds as corrected",
    "PARTIAL": "the check covers a named part of the statement (the row's finding)",
    "NOT CHECKABLE": "no computation can confirm or refute it (the row gives the reason)",
}


@dataclass(frozen=True)
class Claim:
    """One statement of a paper that a computation can confirm or refute.

    id : short unique key, ``<paper prefix>-<what>``, e.g. ``"kubler-fact2"``.
    paper : the paper file's stem in ``../shared/papers/`` (``"prox24-kubler"``).
    number : where it is stated (``"Fact 2"``, ``"Lemma 5"``, ``"Table 1"``, ``"Sec. 3.5"``).
    statement : the claim as the paper states it, in one sentence.
    check : the theory check (name without ``check_``) that records it, or None.
    test : the unit test(s) that cover it, when no theory check does, or None.
    reason : why it cannot be checked numerically, when neither covers it, or None.
    outcome : what a passing check (or test) shows, a key of :data:`OUTCOMES` other than
        "NOT CHECKABLE" (which a ``reason`` implies): "CONFIRMED" (default), "REFUTED",
        "DEVIATES" or "PARTIAL".
    finding : for REFUTED the counterexample family, for DEVIATES the corrected form that
        holds, for PARTIAL the part that is checked (required for these three).
    timed : the claim is about wall-clock time (a speed ratio): its figure depends on the
        machine and its load, so the test suite runs its check but never asserts its status.
    """

    id: str
    paper: str
    number: str
    statement: str
    check: str | None = None
    test: str | None = None
    reason: str | None = None
    outcome: str = "CONFIRMED"
    finding: str = ""
    timed: bool = False

    def __post_init__(self):
        given = [k for k in ("check", "test", "reason") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"claim {self.id!r}: give exactly one of check, test, reason (got {given})")
        if self.reason:
            object.__setattr__(self, "outcome", "NOT CHECKABLE")
        elif self.outcome not in OUTCOMES or self.outcome == "NOT CHECKABLE":
            raise ValueError(f"claim {self.id!r}: outcome must be one of "
                             f"{[o for o in OUTCOMES if o != 'NOT CHECKABLE']}, got {self.outcome!r}")
        if self.outcome in ("REFUTED", "DEVIATES", "PARTIAL") and not self.finding:
            raise ValueError(f"claim {self.id!r}: outcome {self.outcome} needs a finding")
        if self.timed and not self.check:
            raise ValueError(f"claim {self.id!r}: timed needs a check")


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


def claim_status(c: Claim, records: dict) -> tuple[str, str]:
    """(figure, status) of claim ``c`` in the table, from ``records`` (claim id ->
    (check, figure, passed)): a passing check shows the claim's outcome, a failing one
    FAILED, an unrecorded one MISSING; a test-covered claim shows its outcome."""
    if c.check:
        if c.id not in records:
            return "not recorded", "MISSING"
        _, figure, passed = records[c.id]
        return figure, (c.outcome if passed else "FAILED")
    if c.test:
        return "see the test", c.outcome
    return c.reason, "NOT CHECKABLE"


def status_counts(records: dict) -> dict:
    """{paper: {status: count}} over every claim (see :func:`claim_status`)."""
    out = {p: {} for p in PAPERS}
    for c in all_claims():
        status = claim_status(c, records)[1]
        out[c.paper][status] = out[c.paper].get(status, 0) + 1
    return out


def summary_table(records: dict) -> str:
    """Markdown of the number of claims of each status per paper."""
    counts = status_counts(records)
    cols = [s for s in (*OUTCOMES, "FAILED", "MISSING") if any(s in v for v in counts.values())]
    lines = ["| paper | " + " | ".join(cols) + " | all |",
             "| --- |" + " --- |" * (len(cols) + 1)]
    for p in PAPERS + ("all",):
        row = counts[p] if p != "all" else {s: sum(v.get(s, 0) for v in counts.values())
                                            for s in cols}
        lines.append(f"| {p} | " + " | ".join(str(row.get(s, 0)) for s in cols)
                     + f" | {sum(row.values())} |")
    return "\n".join(lines) + "\n"


def claims_table(records: dict) -> str:
    """Markdown of every claim; ``records`` maps claim id -> (check, figure, passed), as
    recorded by the checks of one run. The status is the claim's outcome when its check
    passed (:data:`OUTCOMES`), FAILED when it did not, MISSING when it recorded nothing."""
    lines = ["| paper | number | claim | covered by | measured | status |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in all_claims():
        by = (f"check `{c.check}`" + (" (timed)" if c.timed else "") if c.check
              else f"test `{c.test}`" if c.test else "-")
        figure, status = claim_status(c, records)
        text = c.statement
        if c.finding:
            text += f" **{_FINDING[c.outcome]}:** {c.finding}"
        lines.append(f"| {c.paper} | {_cell(c.number)} | {_cell(text)} | {_cell(by)} | "
                     f"{_cell(figure)} | {status} |")
    return "\n".join(lines) + "\n"


_FINDING = {"REFUTED": "Counterexample", "DEVIATES": "Corrected", "PARTIAL": "Checked",
            "CONFIRMED": "Note"}


def timed_claims() -> set:
    """Ids of the claims about wall-clock time (their status depends on the machine)."""
    return {c.id for c in all_claims() if c.timed}


def missing_claims(check: str, recorded) -> list[str]:
    """Ids registered to ``check`` that are not in ``recorded`` (what a run of it recorded)."""
    return sorted(c.id for c in all_claims() if c.check == check and c.id not in recorded)
