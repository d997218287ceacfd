"""Claims of prox24-kubler Secs. 1-3 and Apps. A-B: r_{N:M} and its prox (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "prox24-kubler"

CLAIMS: list[Claim] = []
