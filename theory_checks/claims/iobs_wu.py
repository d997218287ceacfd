"""Claims of iobs-wu (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "iobs-wu"

CLAIMS: list[Claim] = []
