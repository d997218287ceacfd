"""Claims of proxsparse-liu (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "proxsparse-liu"

CLAIMS: list[Claim] = [
    Claim("liu-fact5-r0m-soft", PAPER, "Fact 5",
          "For z >= 0 the minimizer of 0.5 (w - z)^2 + alpha w over w >= 0 is max(z - alpha, 0) "
          "(soft-thresholding; with prox24-kubler eq. 6 at N = 0, r_{0:M} = l1 and its prox is "
          "soft-thresholding).",
          check="r0m_soft"),
    Claim("liu-fig3-paths", PAPER, "App. C, Fig. 3",
          "On y = [1.4, 1.1, 1.0, 0.7], all three algorithms (EnumIPM, EnumPGD, EnumALM) return the "
          "same solution path.",
          check="paths"),
]
