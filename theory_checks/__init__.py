"""Theory checks: one small module per claim of the papers.

Each module ``theory_checks/check_<name>.py`` defines ``run(out_dir, quick=False) -> bool``.
It prints what it checked and the measured figure, ends with a ``PASS`` or ``FAIL`` line
(via :func:`theory_checks._report.verdict`), saves its plot into ``out_dir`` and returns
whether the claim held. ``quick=True`` shrinks the problem for the test suite; the
claim and the pass criterion stay the same. What a passing check shows about the paper's
statement (CONFIRMED, REFUTED, DEVIATES, PARTIAL) is each claim's ``outcome`` in
:mod:`theory_checks.claims`; claims about wall-clock time are ``timed`` and the tests
(:mod:`theory_checks._testing`) never assert them.

Run all with ``python -m theory_checks`` or some by name:
``python -m theory_checks lemma10 conjecture9``.
"""
