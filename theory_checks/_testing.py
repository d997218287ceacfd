"""What the test suite asserts about a quick run of a theory check.

A quick run must hold on any machine under any load, so the tests assert every claim of a
check except those about wall-clock time (``Claim.timed``, e.g. "the closed-form prox is
>= 2x faster"): their figure and status are printed and recorded, and ``python -m
theory_checks`` reports them, but a test never asserts them.

A mutation test (a deliberately broken piece, monkeypatched) runs only the part of the check
that records the claims its break hits: ``run_quick(name, out_dir, only=claim_ids)``; the
check skips its other parts and its plot (``_report.wanted``), and records the claims of the
parts it ran. ``assert_quick_run_holds`` is for unrestricted runs only.
"""

from __future__ import annotations

import importlib

from theory_checks import _report
from theory_checks._report import take_claims
from theory_checks.claims import all_claims, missing_claims, timed_claims


def run_quick(name: str, out_dir, only=None) -> tuple[bool, dict]:
    """Run check ``name`` in quick mode, single-threaded; return (its verdict, {claim id:
    (figure, passed)} as it recorded them). ``only``: claim ids of ``name``; the check then
    runs only the parts that record them (its verdict covers those parts)."""
    from sparseopt.threads import one_thread

    module = importlib.import_module(f"theory_checks.check_{name}")
    if only is not None:
        only = frozenset(only)
        stray = sorted(only - {c.id for c in all_claims() if c.check == name})
        if stray:  # a typo would restrict the run to nothing
            raise ValueError(f"{name} records no claim {stray}")
    take_claims()
    _report._ONLY = only
    try:
        with one_thread():
            ok = module.run(str(out_dir), quick=True)
    finally:
        _report._ONLY = None
        got = take_claims()
    return ok, got


def assert_quick_run_holds(name: str, ok: bool, got: dict, out_dir) -> None:
    """The machine-independent part of a passing quick run: every claim registered to
    ``name`` recorded, every claim that is not timed passed, a verdict of False only when a
    timed claim failed, and a plot saved into ``out_dir``."""
    import pathlib

    assert got, f"{name} recorded no claim"
    assert missing_claims(name, got) == [], f"{name} did not record {missing_claims(name, got)}"
    timed = timed_claims()
    failed = {cid: fig for cid, (fig, passed) in got.items() if not passed and cid not in timed}
    assert not failed, f"{name}: claims failed: {failed}"
    if not ok:
        assert any(not passed for cid, (_, passed) in got.items() if cid in timed), (
            f"{name} failed, yet every claim it recorded passed")
    assert list(pathlib.Path(out_dir).glob("*.png")), f"{name} saved no plot"


def prox_rnm_replaced_by(monkeypatch, regularizer: str) -> None:
    """Mutation for the App. C checks' tests: every prox run of ``sparseopt.prune`` with the
    default r_{N:M} regularizer runs with ``regularizer`` instead (e.g. R1's soft thresholding,
    which commits to its mask at once)."""
    import sparseopt

    orig = sparseopt.prune

    def broken(W, H, method="prox", *args, **kw):
        if method == "prox" and kw.get("regularizer", "rnm") == "rnm":
            kw["regularizer"] = regularizer
        return orig(W, H, method, *args, **kw)

    monkeypatch.setattr(sparseopt, "prune", broken)
