"""Claims of proxsparse-liu (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "proxsparse-liu"

CLAIMS: list[Claim] = [
    Claim("liu-prop1", PAPER, "Prop. 1 (1), (2)",
          "Reg_{2:4}(w) = 0 if and only if w is 2:4 sparse, and Reg_{2:4} is invariant to permutation "
          "of the coordinates.",
          check="kubler_fact2"),
    Claim("liu-prop2-null", PAPER, "Prop. 2 (1)",
          "Reg_W0(W) = 0 if and only if W_i = W0_i for all coordinates i with W_i != 0.",
          check="liu_regw0"),
    Claim("liu-prop2-restrict", PAPER, "Prop. 2 (2)",
          "Reg_W0(W) = Reg_{W0[W != 0]}(W[W != 0]).",
          check="liu_regw0"),
    Claim("liu-prop2-c1", PAPER, "Prop. 2 (3)",
          "Reg_W0(W) is continuously differentiable.",
          check="liu_regw0"),
    Claim("liu-cor3", PAPER, "Corollary 3",
          "Reg_W0(W) = 0 and Reg_{2:4}(W) = 0 if and only if W is 2:4 sparse and its nonzero weights "
          "equal the pretrained W0.",
          check="liu_regw0"),
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
    Claim("liu-table1-alm-ipm", PAPER, "Table 1",
          "On 100 random problems y ~ N(0, 1)^4 x 200 values of lambda, the worst-case suboptimality "
          "of EnumIPM is 1e-13 and of EnumALM below 1e-13.",
          check="table1"),
    Claim("liu-table1-pgd", PAPER, "Table 1",
          "On the same problems EnumPGD occasionally gives slightly suboptimal solutions: worst-case "
          "suboptimality 1e-6.",
          check="table1"),
    Claim("liu-table1-alm-le-ipm", PAPER, "Table 1 (caption)",
          "ALM achieves a better (or equal) objective value than IPM in all experiments.",
          check="table1"),
    Claim("liu-table1-runtime", PAPER, "Table 1",
          "Total runtime EnumIPM 561.70 s >> EnumPGD 43.31 s > EnumALM 8.52 s on the same problems.",
          check="table1", timed=True),
]
