"""Claims of maiht-wen (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "maiht-wen"

CLAIMS: list[Claim] = [
    Claim("maiht-prop21", PAPER, "Prop. 2.1, eq. (3)",
          "The element-wise hard thresholding H_sqrt(2 lam)(W) is a proximal point of lam ||.||_0, so "
          "the IHT step is H_sqrt(2 alpha lam)(W - alpha grad f(W)).",
          test="tests/test_iht.py::test_l0_threshold_is_sqrt_2_step_lam"),
    Claim("maiht-rem22", PAPER, "Remark 2.2",
          "With W^0 = W_hat, W^1 = H_sqrt(2 alpha lam)(W^0), which is magnitude pruning.",
          check="maiht_magnitude"),
    Claim("maiht-rem23", PAPER, "Remark 2.3, eq. (5)",
          "The mu-stabilised problem (5) is equivalent to problem (2) with X <- (X'X + mu I)^(1/2).",
          check="maiht_mu"),
    Claim("maiht-alg1-lambda", PAPER, "Sec. 2.4, Alg. 1",
          "lambda_init = Q_0.01(|W_hat|)^2 / (2 alpha) and lambda^{k+1} = lambda^k (1 + (||W^k||_0 - s) "
          "/ (d1 d2)) drive the iterates to the target sparsity s.",
          test="tests/test_iht.py::test_adaptive_lambda_init_update_rule_and_target"),
    Claim("maiht-lemma32", PAPER, "Lemma 3.2",
          "For alpha, alpha_1, alpha_2 < 1/L, L(W^k) is a descent sequence for IHT and mAIHT.",
          check="maiht_descent"),
    Claim("maiht-lemmaB4", PAPER, "Lemma B.4, Prop. B.5 (1), (4)",
          "For alpha < 1/L, L(W^{k-1}) - L(W^k) >= (1/alpha - L)/2 ||W^k - W^{k-1}||^2 for IHT, and the "
          "support of W^k is constant after finitely many iterations.",
          check="maiht_descent"),
    Claim("maiht-propB6", PAPER, "Prop. B.6 (1)",
          "For mAIHT with alpha_1, alpha_2 < 1/L, L(W^{k+1}) <= L(V^{k+1}) <= L(W^k) - (1/alpha_2 - L)/2 "
          "||V^{k+1} - W^k||^2.",
          check="maiht_descent"),
    Claim("maiht-thm33", PAPER, "Theorem 3.3, Def. 3.1",
          "IHT converges to an alpha-fixed point, and every accumulation point of mAIHT is an "
          "alpha_2-fixed point.",
          check="maiht_fixed_point"),
    Claim("maiht-def31-nesting", PAPER, "Def. 3.1",
          "For 0 <= alpha_1 <= alpha_2, F(alpha_1) contains F(alpha_2): a larger step size reduces the "
          "set of fixed points.",
          check="maiht_fixed_point"),
    Claim("maiht-thm34-1", PAPER, "Theorem 3.4 (1)",
          "For IHT there is a k_1 with L(W^k) - L* <= ||W^{k_1} - W*||^2 / (2 alpha (k - k_1)) for all "
          "k > k_1.",
          check="maiht_rate"),
    Claim("maiht-thm34-2", PAPER, "Theorem 3.4 (2)",
          "For mAIHT there are k_2 and C with L(W^k) - L* <= (C / ((k - k_2) d (1 - 2 theta)))^(1/(1 - 2 theta)) "
          "for all k > k_2, theta in (0, 1/2), d = min{alpha_2 (1 - L alpha_2) / (4 C (1 + L alpha_2)^2), "
          "C / (1 - 2 theta) (2^((2 theta - 1)/(2 theta - 2)) - 1) (L(V^1) - L*)^(2 theta - 1)}.",
          check="maiht_accel_rate"),
    Claim("maiht-accel-tail-rate", PAPER, "Theorem 3.4 (2), Sec. 3.2",
          "After its support settles the accelerated method converges faster than IHT with the same "
          "step (the bounds of Thm 3.4 (2) are loose by 10^4-10^5, so the rate itself is compared).",
          check="maiht_accel_rate"),
    Claim("maiht-propB5-B6-3", PAPER, "Prop. B.5 (3), Prop. B.6 (3)",
          "For every M, min_{k <= M} ||W^k - W^{k-1}||_F^2 (IHT), resp. ||V^k - W^{k-1}||_F^2 (mAIHT), "
          "<= 2 (L(W^0) - L*) / (M (1/alpha - L)).",
          check="maiht_descent"),
    Claim("maiht-sec3-larger-step", PAPER, "Sec. 3.2 (after Theorem 3.4)",
          "Theorem 3.4 suggests that a larger step size (alpha < 1/L) leads to a faster convergence rate.",
          check="maiht_step"),
    Claim("maiht-table6-linear", PAPER, "App. D, Table 6",
          "mAIHT's runtime scales approximately linearly with the number of iterations.",
          check="maiht_time", timed=True),
    Claim("maiht-thm36", PAPER, "Theorem 3.6, Corollary 3.7",
          "If delta_{s*+s}(I_{d2} x sqrt(alpha) X) <= tau < 1/2 and s* = ||W*||_0 >= s, the IHT iterates "
          "satisfy R(W^k) <= C^2 min_{||W||_0 <= s} R(W) + O(1/(1 - 2 tau)) (2 delta_{s*+s})^(k-K) + "
          "O(sqrt(log(2 d1^2 / delta) / (n (1 - 2 tau)^4))), C = 1 + 2 (1 + delta_{s*+s}) / (1 - 2 delta_{s*+s}).",
          check="maiht_risk"),
    Claim("maiht-thm38", PAPER, "Theorem 3.8, Corollary 3.9",
          "If delta_{s*+s} <= tau < u = 0.3478 (4u^3 + 4u^2 + u = 1) and the accumulation points have "
          "s* >= s nonzeros, the mAIHT iterates satisfy R(W^k) <= C^2 min_{||W||_0 <= s} R(W) + "
          "O(1/(1 - rho_tau)) rho^(k-K) + O(sqrt(log(2 d1^2 / delta) / (n (1 - rho_tau)^4))), "
          "rho = 2 delta sqrt(1 + delta) / sqrt(1 - delta), C = 1 + sqrt(1 + delta) (4 + 2 delta) / "
          "(sqrt(1 - delta) (1 - rho)).",
          check="maiht_risk"),
    Claim("maiht-fig1-faster", PAPER, "Sec. 4.2, Fig. 1",
          "mAIHT converges faster than IHT (adaptive lambda, Alg. 1).",
          check="maiht_acceleration"),
    Claim("maiht-fig1-final", PAPER, "Sec. 4.2, Fig. 1",
          "mAIHT significantly improves the quality of the final stable solution over IHT.",
          check="maiht_acceleration"),
    Claim("maiht-fig1-two-stage", PAPER, "Sec. 4.2, Fig. 1",
          "The iterative process is divided into two stages: first the support gradually shrinks to "
          "the desired sparsity level (the sparsity schedule exponential in shape), then proximal "
          "gradient descent optimizes the reconstruction error.",
          check="maiht_two_stage", outcome="PARTIAL",
          finding="checked on correlated layers (adaptive lam to 50%, step 0.95/L): the count reaches "
                  "the target within K/5 iterations with the error peaking there, then the error falls; "
                  "on the longest fixed-support window (>= half of stage 2) IHT is exactly projected "
                  "gradient descent on the support (closed form, linear rate max |1 - 2 alpha gamma_i|) "
                  "and mAIHT converges faster. The support does not stop changing for good: the count "
                  "ends a little below s, so the adaptive lam keeps falling and lets entries back in "
                  "(mAIHT: until near the end of the run). The exponential shape is printed, not tested."),
    Claim("maiht-table6-quality", PAPER, "App. D.2, Table 6",
          "mAIHT steadily improves performance as the number of iterations increases (perplexity 7.2588 "
          "at 1 iteration = Wanda, 7.1876 at 20, 7.0720 at 50), reaching the best at 50 iterations; the "
          "slight increase at 100 (7.0765) is likely due to overfitting to the calibration data.",
          check="maiht_layer_tables", outcome="PARTIAL",
          finding="checked on synthetic layers with the held-out loss (fresh inputs) in place of "
                  "perplexity: with 2 d_in calibration samples the held-out loss falls from 1 to 20 to 50 "
                  "iterations and is flat at 100 (within 1%, slightly lower rather than higher); with "
                  "d_in / 2 samples the held-out loss is lowest at 10-20 iterations and rises after, while "
                  "the calibration loss keeps falling: overfitting to the calibration data, whose onset "
                  "(hence the best iteration count) depends on the calibration size."),
    Claim("maiht-table9-refinement", PAPER, "App. D.4, Table 9",
          "Even without explicit refinement mAIHT achieves lower perplexity than SparseGPT (7.0843 vs "
          "7.2397), and the explicit refinement step further improves it (7.0720).",
          check="maiht_layer_tables",
          finding="on synthetic layers (held-out layer loss in place of perplexity, 50 iterations, "
                  "support_steps 0 vs 30): refinement lowers the held-out loss by about 0.1%; it raises "
                  "the calibration loss f slightly, since its steps descend f + mu/2 ||W - W*||^2 (eq. 5)."),
    Claim("maiht-table7-nm", PAPER, "App. D.3, Table 7",
          "With the projection onto the 2:4 pattern in place of hard thresholding, mAIHT outperforms "
          "SparseGPT (perplexity 7.2606 vs 7.2933).",
          check="maiht_layer_tables",
          finding="on synthetic layers: calibration and held-out layer loss, 50 + 30 iterations, "
                  "sparseopt.layer.prune(method='maiht', pattern=NM(2, 4)); the output is 2:4."),
    Claim("maiht-sec4-step", PAPER, "Sec. 4 (experimental setup), Lemma 3.2",
          "The experiments take alpha = 0.95 / ||X'X||_2 with the stabilizer mu = 0.1 of eq. (5), a step "
          "below 1 / L as Lemma 3.2 requires.",
          check="maiht_step", outcome="DEVIATES",
          finding="by Remark 2.3 the mu-problem is problem (2) with X'X + mu I, so L = ||X'X|| + mu: on a "
                  "normalised diagonal H (||X'X|| = 1) alpha = 0.95 > 1 / 1.1 = 1 / L. The layer pruner "
                  "takes alpha = 0.95 / ||X'X + mu I||_2. On X'X = I with the paper's step IHT's "
                  "L(W) = f + lam ||W||_0 rises (Lemma 3.2 fails); with the corrected step it "
                  "decreases (tests/test_layer_maiht_iobs.py checks the pruner's step)."),
]
