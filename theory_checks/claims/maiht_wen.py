"""Claims of maiht-wen (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "maiht-wen"

CLAIMS: list[Claim] = []
