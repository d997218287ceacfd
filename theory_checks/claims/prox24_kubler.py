"""Claims of prox24-kubler Secs. 1-3 and Apps. A-B: r_{N:M} and its prox (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "prox24-kubler"

CLAIMS: list[Claim] = [
    # Sec. 3.2: the regularizer
    Claim("kubler-eq6", PAPER, "eq. (6), (7)",
          "r_{N:M}(w) is the sum over all (N+1)-subsets S of [M] of prod_{j in S} |w_j|; for 2:4 the "
          "four products of eq. (7).",
          check="kubler_fact2"),
    Claim("kubler-fact2", PAPER, "Fact 2, eq. (8)",
          "For all w in R^M, r_{N:M}(w) = 0 if and only if ||w||_0 <= N (so W is 2:4 sparse iff the "
          "regularizer of eq. 8 is zero).",
          check="kubler_fact2"),
    Claim("kubler-euler", PAPER, "App. B.4 (proof of Lemma 10)",
          "grad r_{2:4}(w)^T w = 3 r_{2:4}(w) for any w (Euler's identity; (N+1) r_{N:M} in general).",
          check="kubler_fact2"),
    Claim("kubler-lamstar", PAPER, "Sec. 3.2",
          "There always exists lambda* (a function of the input z) such that for lambda >= lambda* the "
          "solution of the proximal operator is exactly N-sparse.",
          check="kubler_fact2"),
    Claim("kubler-eq6-homogeneous", PAPER, "eq. (6)",
          "r_{N:M} is positively homogeneous of degree N + 1 (each term of eq. 6 is a product of N + 1 "
          "absolute values).",
          check="scale_covariance"),
    Claim("kubler-prox-scale", PAPER, "Sec. 4.2",
          "If w* is the optimal solution to the problem (z, lambda), then c w* is the optimal solution "
          "for the problem (c z, lambda / c) (2:4; lambda / c^(N-1) for N:M).",
          check="scale_covariance"),
    # Sec. 3.3: the 2:4 prox
    Claim("kubler-lemma3", PAPER, "Lemma 3",
          "To solve eq. (7) it suffices to solve eq. (9) on the sorted absolute values "
          "z_1 >= ... >= z_4 >= 0, and any optimal w* of eq. (9) is sorted the same way.",
          check="kubler_alg1"),
    Claim("kubler-lemma4", PAPER, "Lemma 4",
          "With z_4 > 0 the solution is 2-sparse [z1, z2, 0, 0], or 3-sparse with w_i = z_i - lambda "
          "w_j w_k on i in 1..3, or dense with w_i = z_i - lambda e_2(w_{-i}).",
          check="kubler_alg1"),
    Claim("kubler-thm7", PAPER, "Theorem 7, Alg. 1",
          "Algorithm 1 (best of [z1, z2, 0, 0], the solution of (13) and the solution of (14)) returns "
          "an optimal solution to eq. (9).",
          check="kubler_alg1"),
    Claim("kubler-sec33-r23", PAPER, "Sec. 3.3",
          "The proximal operator for r_{2:3} can be reduced to solving eq. (11).",
          check="kubler_alg1"),
    Claim("kubler-eq23-24", PAPER, "App. B.5, eq. (23), (24)",
          "The Hessians of g and f are I plus lambda times the off-diagonal sums of eq. (23) and (24).",
          check="kubler_lemma5"),
    Claim("kubler-lemma5-c3", PAPER, "Lemma 5",
          "The set C_3 = {w in R^3 | Hess g(w) >= 0} is convex.",
          check="kubler_lemma5"),
    Claim("kubler-lemma5-c4", PAPER, "Lemma 5",
          "The set C_4 = {w in R^4 | Hess f(w) >= 0} is convex.",
          check="kubler_lemma5"),
    Claim("kubler-eq13-14-convex", PAPER, "Sec. 3.3, eq. (13), (14)",
          "Problems (13) and (14) are convex optimization problems due to Lemma 5 (g and f are convex "
          "on their feasible sets).",
          check="kubler_lemma5"),
    Claim("kubler-sec34-hessian", PAPER, "Sec. 3.4",
          "Lemma 5 used that the Hessian in the 2:4 case is linear in w, which no longer holds for "
          "larger N (the check finds it already fails for 3:4).",
          check="kubler_lemma5"),
    Claim("kubler-sec34-1m", PAPER, "Sec. 3.4",
          "For 1:M sparsity the proximal operator is just a quadratic problem and can be solved in "
          "closed form.",
          check="nm_general"),
    Claim("kubler-sec34-lemma4", PAPER, "Sec. 3.4",
          "For general N:M, Lemma 4 (Lemma 3's reduction) still holds: it is enough to consider the "
          "non-negative sorted case.",
          check="nm_general"),
    Claim("kubler-cor6-f", PAPER, "Corollary 6",
          "The set of all local minima of f is convex, and if some minimizer of f over R^4_+ is dense, "
          "all local minima of f are global minima.",
          check="kubler_cor6"),
    Claim("kubler-cor6-g", PAPER, "Corollary 6",
          "The set of all local minima of g is convex, and if some minimizer of g over R^3_+ is dense, "
          "all local minima of g are global minima.",
          check="kubler_cor6"),
    Claim("kubler-footnote3", PAPER, "footnote 3 (Sec. 3.3)",
          "If w^(4) is a local minimum of f, by Corollary 6 it is the global optimum and w^(2), w^(3) "
          "need not be computed.",
          check="kubler_cor6", outcome="REFUTED",
          finding="inputs where f has a strict dense local minimum (gradient 0, Hessian positive "
                  "definite) that is not the optimum of eq. (9): a 2- or 3-sparse point is lower; "
                  "the first is confirmed by brute force (prox_bruteforce). Cor. 6 needs the "
                  "minimizer over R^4_+ to be dense; sparseopt.prox does not take the shortcut."),
    # Sec. 3.5: PGD
    Claim("kubler-fact8a", PAPER, "Fact 8 a)",
          "w = [0, 0, 0, 0] is always a feasible point of eq. (14) (the Hessian there is the identity).",
          check="kubler_fact8"),
    Claim("kubler-fact8b", PAPER, "Fact 8 b)",
          "For all w in R^4_+, Hess f(w) >= 0 implies gamma_max[Hess f(w)] <= 4.",
          check="kubler_fact8"),
    Claim("kubler-sec35-gradnorm", PAPER, "Sec. 3.5",
          "With step 1/4 the gradient norm cannot increase whilst the iterates are in the convex region.",
          check="kubler_fact8"),
    Claim("kubler-conj9-literal", PAPER, "Conjecture 9 (literal reading)",
          "If the minimizer w* of eq. (14) is dense, projected gradient descent from 0 with step 1/4 "
          "converges to w* and every iterate lies in the feasible set of eq. (14).",
          check="conjecture9_literal", outcome="REFUTED",
          finding="inputs drawn as for Cor. 6 whose minimizer of (14) is dense but on the boundary "
                  "of the PSD region (smallest Hessian eigenvalue 0, gradient not 0): the iteration "
                  "leaves the region and ends at the 2-sparse point; the first is verified by SLSQP "
                  "on (14) and the KKT condition of the boundary."),
    Claim("kubler-conj9", PAPER, "Conjecture 9 (global optimum dense)",
          "If the minimizer w* of eq. (14) is dense, projected gradient descent from 0 with step 1/4 "
          "converges to w* and every iterate lies in the feasible set of eq. (14).",
          check="conjecture9", outcome="PARTIAL",
          finding="checked where the optimum of the prox, eq. (9), is dense (so w* is an interior "
                  "stationary point of f): instances whose ALM or PGD optimum is dense, the exact "
                  "iteration and EnumPGD against the best of ALM, PGD and IPM. The literal reading "
                  "(dense w* of (14) on the boundary) is refuted in the row above."),
    Claim("kubler-conj9-3sparse", PAPER, "Sec. 3.5 (after Conjecture 9)",
          "The same considerations and empirical insights apply to the 3-sparse case (eq. 13).",
          check="conjecture9", outcome="PARTIAL",
          finding="checked where the optimum of eq. (9) is 3-sparse (eq. 13's minimizer interior), as "
                  "for kubler-conj9."),
    Claim("kubler-sec35-speed", PAPER, "Sec. 3.5",
          "The GD-based Algorithm 1 is more than 10x faster than the interior point method-based "
          "Algorithm 1.",
          check="kubler_speed", timed=True),
    Claim("kubler-sec35-same", PAPER, "Sec. 3.5",
          "The GD-based and the interior point method-based Algorithm 1 always obtain numerically "
          "the same solution.",
          check="kubler_speed"),
    # App. B.4: Lemma 10
    Claim("kubler-lemma10-2sparse", PAPER, "Lemma 10 (1)",
          "lambda >= z_3 / (z_1 z_2) is a necessary condition for the solution to be 2-sparse.",
          check="lemma10"),
    Claim("kubler-lemma10-3sparse", PAPER, "Lemma 10 (2), weak form",
          "lambda >= z_4 / (z_1 z_2 + z_2 z_3 + z_1 z_3) is a necessary condition for the solution to be "
          "3-sparse.",
          check="lemma10"),
    Claim("kubler-lemma10-sharp", PAPER, "Lemma 10 (2)",
          "lambda >= z_4 / (w*_1 w*_2 + w*_2 w*_3 + w*_1 w*_3) is a necessary condition for the solution "
          "to be 3-sparse.",
          check="lemma10"),
    Claim("kubler-lemma10-kkt", PAPER, "App. B.4 (proof of Lemma 10)",
          "From the KKT conditions z >= w*, and if r_{2:4}(w*) != 0 then "
          "lambda = (z^T w* - ||w*||^2) / (3 r_{2:4}(w*)).",
          check="lemma10"),
    # Fig. 1
    Claim("kubler-fig1-thresholds", PAPER, "Fig. 1 (caption)",
          "lambda >= lambda_1* (resp. lambda_2*) is necessary for the solution on the path to be "
          "3-sparse (resp. 2-sparse), on the four inputs of the caption.",
          check="paths"),
    Claim("kubler-fig1-gradual", PAPER, "Fig. 1 (caption)",
          "In the easy input case, as lambda increases, the sparsification is gradual rather than "
          "abrupt.",
          check="paths"),
    Claim("kubler-fig1-delayed", PAPER, "Fig. 1 (caption)",
          "In the hard (nearly tied) input cases the transition to exact structured sparsity happens "
          "at a much larger lambda.",
          check="paths"),
]
