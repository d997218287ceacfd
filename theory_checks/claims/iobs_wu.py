"""Claims of iobs-wu (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "iobs-wu"

CLAIMS: list[Claim] = [
    Claim("iobs-lemma1", PAPER, "Lemma 1 (App. B.2)",
          "The closed-form solution to (6) with the linear model phi_t is theta_{t+1} = "
          "T_k(theta_t - eta grad f(theta_t)).",
          check="iobs_lemmas"),
    Claim("iobs-lemma2", PAPER, "Lemma 2",
          "If H_t is positive definite, each step of Algorithm 1 (Option 2) solves eq. (8).",
          test="tests/test_iobs.py::test_iobs_step_solves_sparse_newton_model"),
    Claim("iobs-woodfisher", PAPER, "Sec. 3 (connection to WoodFisher)",
          "With grad f(theta_0) = 0 and k = d - 1, the I-OBS step is WoodFisher's pruning step.",
          test="tests/test_iobs.py::test_woodfisher_special_case"),
    Claim("iobs-obc", PAPER, "Sec. 3 (connection to OBC)",
          "OBC is a special case of I-OBS (d - k rounds of pruning one weight each on a quadratic).",
          test="tests/test_iobs.py::test_greedy_iobs_is_obc_on_a_quadratic"),
    Claim("iobs-thm1", PAPER, "Theorem 1, eq. (9)",
          "Under Assumptions 1-4, I-OBS (Alg. 1, Option 2) converges locally quadratically with the "
          "constant (1 + sqrt(L/mu (d - k*)/(d - k))) M / (2 mu).",
          check="iobs_rate"),
    Claim("iobs-lemma3", PAPER, "Lemma 3, eq. (13)",
          "Top-k I-OBS (eq. 12) converges locally quadratically with the constant "
          "(1 + sqrt(k*/k)) M / (2 mu).",
          check="iobs_rate"),
    Claim("iobs-eq14", PAPER, "App. B.1, eq. (14)",
          "nabla^2 f(theta) <= lam I + E[G(theta)] with G = g g' / ||g|| holds automatically under "
          "L-smoothness with lam = L.",
          check="iobs_lemmas"),
    Claim("iobs-lemma4", PAPER, "Lemma 4",
          "With the sparsity constraint I_S theta = 0, the stochastic quadratic problem is solved by "
          "E_Q(theta_t - g / (lam + ||E_Q g||^2 / ||g||^2)).",
          test="tests/test_iobs.py::test_lemma4_step_gives_the_constrained_minimizer"),
    Claim("iobs-lemma5", PAPER, "Lemma 5",
          "A mu-strongly convex, L-smooth f satisfies the mu-PL inequality and mu/2 ||theta - theta*||^2 "
          "<= f(theta) - f(theta*) <= L/2 ||theta - theta*||^2.",
          check="iobs_lemmas"),
    Claim("iobs-lemma6", PAPER, "Lemma 6",
          "H^S_alpha = I_S H^-alpha I_S' is positive definite with eigenvalues in "
          "[L^-alpha, mu^-alpha].",
          check="iobs_lemmas"),
    Claim("iobs-lemma7-projection", PAPER, "Lemma 7 (proof)",
          "P = H^-1 H^S is a projection matrix (P^2 = P) with eigenvalues 0 or 1.",
          check="iobs_lemmas"),
    Claim("iobs-lemma7-norm", PAPER, "Lemma 7",
          "For any set S, ||H^-1 H^S||_2 <= 1.",
          check="iobs_lemmas", outcome="REFUTED",
          finding="P = H^-1 H^S is an oblique projection: random SPD H and supports S with "
                  "||P||_2 > 1 (verified by the SVD); the bound holds in the H-norm, ||P||_H <= 1, "
                  "which the check confirms on the same pairs. The appendix proofs that cite "
                  "Lemma 7 are not repaired here."),
    Claim("iobs-sec41-hessian", PAPER, "Sec. 4.1",
          "The loss L(theta) = ||y - X theta||^2 has Hessian X'X (the Newton step of eq. 12 and "
          "k-IHT's step 1 / lambda_max use it).",
          check="iobs_lemmas", outcome="DEVIATES",
          finding="its Hessian is 2 X'X. The code's LeastSquares is 0.5 ||X theta - y||^2, whose "
                  "Hessian is X'X, so the Newton step with H = X'X is exact on it (with the paper's "
                  "L and H = X'X it would be twice too long; iobs_fig1a fails for such a step, "
                  "tests/test_theory_checks_broken.py)."),
    Claim("iobs-alg2-layer", PAPER, "App., Alg. 2 (model pruning)",
          "I-OBS for a model: SparseGPT-style mask and weight solve (lines 7-8), then a gradient step "
          "W_t = W_hat_t - eta g_t on the task loss of a fresh batch (line 9), returning the last "
          "iterate.",
          test="tests/test_layer_maiht_iobs.py::test_iobs_rounds_improve_on_sparsegpt_and_report_best_round",
          outcome="PARTIAL",
          finding="the layer version (sparseopt.layer.iobs): one layer with fixed inputs, line 9 as "
                  "round_steps gradient steps on the local loss with eta = 1 / (2 gamma_max(H)), and the "
                  "sparse round of least local loss is returned (the last iterate is dense); the "
                  "tests check one round = SparseGPT, no steps = a repeat, later rounds improve."),
    Claim("iobs-eq10", PAPER, "Proof of Theorem 1, eq. (10)",
          "For the pruned set S_{t+1} of exact I-OBS, ||H_t^-1 H^S_{t+1} theta+_t||_2 <= sqrt(L / mu) "
          "||I_S~ theta+_t||_2 for any S~ with |S~| = d - k.",
          check="iobs_lemmas"),
    Claim("iobs-lemma8", PAPER, "Lemma 8",
          "For ||v||_0 = k_v < k_u = ||u||_0 and k in [k_v, k_u], ||T_k(u) - u||^2 <= "
          "(k_u - k)/(k_u - k_v) ||u - v||^2.",
          check="iobs_lemmas"),
    Claim("iobs-lemma9", PAPER, "Lemma 9",
          "Interlacing: lambda_i(H) <= lambda_i(I_S H I_S') <= lambda_{i+d-|S|}(H).",
          check="iobs_lemmas"),
    Claim("iobs-quadratic-order", PAPER, "Theorem 1, Lemma 3",
          "Exact and Top-k I-OBS converge locally quadratically (order 2).",
          check="iobs_rate"),
    Claim("iobs-quadratic-one-step", PAPER, "Sec. 3 (connection to OBC)",
          "If the objective is quadratic, Algorithm 1 (exact I-OBS) converges in one step.",
          check="iobs_quadratic"),
    Claim("iobs-woodtaylor", PAPER, "Sec. 3 (connection to WoodFisher)",
          "Without the zero-gradient assumption the same computation gives WoodTaylor.",
          check="iobs_quadratic"),
    Claim("iobs-fig1a", PAPER, "Sec. 4.1, Fig. 1a",
          "Top-k I-OBS has a better convergence rate than k-IHT on sparse linear regression with a "
          "Gaussian prior (d = 128, k* = 16, n = 256, k = 64).",
          check="iobs_fig1a", outcome="PARTIAL",
          finding="checked with n = 96 < d, k = 32, where one Newton step is not exact (the paper's "
                  "n = 256: next row)."),
    Claim("iobs-fig1a-paper-setting", PAPER, "Sec. 4.1, Fig. 1a (n = 256 > d)",
          "In Fig. 1a's setting Top-k I-OBS approaches theta* over the iterations (its error curve "
          "decreases gradually, as k-IHT's does, only faster).",
          check="iobs_fig1a", outcome="DEVIATES",
          finding="with n = 256 > d = 128, X'X is invertible and one Newton step of Top-k I-OBS "
                  "from 0 lands on theta* (to rounding): there is no gradual curve to compare. The "
                  "comparison of rates holds where one step is not exact (n < d, row above)."),
    Claim("iobs-fig1b", PAPER, "Sec. 4.1, Fig. 1b",
          "With an image prior, Top-k I-OBS gives a better recovery than k-IHT for a fixed number of "
          "steps (here sklearn 8x8 digits on a 16x16 canvas instead of MNIST, n = 192 < d = 256).",
          check="iobs_digits"),
    Claim("iobs-alg2-rounds", PAPER, "Sec. 4.2, Alg. 2",
          "Rounds of I-OBS with the SparseGPT solver improve on the one-shot (single-round) SparseGPT "
          "result (here: the local loss of a synthetic layer).",
          test="tests/test_layer_maiht_iobs.py::test_iobs_rounds_improve_on_sparsegpt_and_report_best_round"),
    Claim("iobs-alg2-saturate", PAPER, "Sec. 4.2, Alg. 2",
          "The improvements of further I-OBS rounds quickly saturate (here: rounds 7-12 gain less "
          "than a tenth of what rounds 1-6 gained over SparseGPT, on three correlated layers).",
          test="tests/test_layer_maiht_iobs.py::test_iobs_rounds_saturate"),
    Claim("iobs-a2-rounds", PAPER, "App. A.2, Figs. 2-3",
          "The quality of the sparse solution significantly improves after the first (prune, fine-tune) "
          "iteration, then improves a little during the next few iterations, followed by a gradual "
          "deterioration, which the authors speculate is due to overfitting on the calibration set.",
          check="iobs_rounds_overfit", outcome="PARTIAL",
          finding="checked with the library's layer I-OBS (2:4 SparseGPT solve, then 50 gradient steps "
                  "on the local loss per round, 12 rounds) on synthetic layers with 2 d_in calibration "
                  "samples and a held-out loss in place of perplexity: the held-out loss falls about 18% "
                  "after round 1, is best in round 2-3 and then rises gradually (10-15% by round 12) while "
                  "the calibration loss still falls for a few rounds (overfitting). Later the calibration "
                  "loss rises too (the rounds drift, not only overfit), and with 5 steps per round (the "
                  "library default) the held-out loss saturates without deteriorating."),
    Claim("iobs-b1-batch-lambda", PAPER, "App. B.1 (after eq. 14)",
          "With the full-batch gradient E[G] is of rank 1 and lam should be set to lambda_max(H); when "
          "the batch size is smaller, E[G] is potentially of full rank, allowing us to choose a smaller lam.",
          check="iobs_stochastic", outcome="DEVIATES",
          finding="with the library's mini-batch gradients of least squares (every batch enumerated): "
                  "E_b[G] has full rank for every b < n and the smallest admissible lam, lambda_max(H - "
                  "E_b[G]), is smaller than the full batch's in most cases but not all (a larger one "
                  "exists for every b, the first verified by its Rayleigh quotient); and since "
                  "tr E[G] = 1 it is never below lambda_max(H) - 1, so the gain is at most 1 in absolute "
                  "terms (about 1.5% when lambda_max(H) is about 50)."),
    Claim("iobs-eq15", PAPER, "App. B.1, eq. (15)",
          "Since lambda_max(G(theta)) = ||g(theta)||^2 and ||grad f(theta)|| <= E||g(theta)||, condition "
          "(14) can be viewed as a matrix version of the (L0, L1)-smoothness ||grad^2 f|| <= L0 + L1 "
          "||grad f||^2.",
          check="iobs_stochastic", outcome="DEVIATES",
          finding="G = g g' / ||g||^2 of eq. (14) has lambda_max(G) = 1 for every g != 0, not ||g||^2, so "
                  "(14) only bounds ||grad^2 f|| by lam + 1. The reading holds for the unnormalised G = g g' "
                  "(lambda_max = ||g||^2; ||grad f|| <= E||g|| and ||grad f||^2 <= E||g||^2 checked), whose "
                  "(14) bounds ||grad^2 f|| by lam + E||g||^2."),
]
