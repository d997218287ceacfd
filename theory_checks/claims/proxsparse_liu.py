"""Claims of proxsparse-liu (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "proxsparse-liu"

CLAIMS: list[Claim] = [
    Claim("liu-prop1", PAPER, "Prop. 1 (1), (2)",
          "Reg_{2:4}(w) = 0 if and only if w is 2:4 sparse, and Reg_{2:4} is invariant to permutation "
          "of the coordinates.",
          check="kubler_fact2"),
    Claim("liu-fact5-r0m-soft", PAPER, "Fact 5",
          "For z >= 0 the minimizer of 0.5 (w - z)^2 + alpha w over w >= 0 is max(z - alpha, 0) "
          "(soft-thresholding; with prox24-kubler eq. 6 at N = 0, r_{0:M} = l1 and its prox is "
          "soft-thresholding).",
          check="r0m_soft"),
    Claim("liu-fig3-paths", PAPER, "App. C, Fig. 3",
          "On y = [1.4, 1.1, 1.0, 0.7], all three algorithms (EnumIPM, EnumPGD, EnumALM) return the "
          "same solution path.",
          check="paths"),
    Claim("liu-prop6", PAPER, "Prop. 6",
          "When eps > 0, Algorithm 2 (ALM) halts with no more than 3 lam ||z||^3 / eps^2 iterations.",
          check="alm_decrease"),
    Claim("liu-prop8", PAPER, "Prop. 8 (App. A, eq. 9)",
          "Every ALM sweep decreases the objective sufficiently: f(w^k) >= f(w^{k+1}) + "
          "0.5 ||w^{k+1} - w^k||^2.",
          check="alm_decrease"),
]
