"""Claims of proxsparse-liu (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "proxsparse-liu"

CLAIMS: list[Claim] = []
