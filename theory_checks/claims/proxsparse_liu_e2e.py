"""Claims of proxsparse-liu added in issue 11's second pass: end-to-end ProxSparse (Alg. 1),
checked with the torch adapter, and Prop. 6's critical-point statement on the production
EnumALM kernel (see theory_checks.claims)."""

from theory_checks.claims import Claim

PAPER = "proxsparse-liu"

CLAIMS: list[Claim] = [
    Claim("liu-prop7", PAPER, "Prop. 7",
          "If L is continuously differentiable and the iterates stay bounded, Algorithm 1 converges "
          "to a critical point (limiting subdifferential) of L + lambda_2 Reg_W0 + lambda_1 Reg_2:4.",
          check="liu_proxsparse", outcome="PARTIAL",
          finding="Alg. 1 with exact (full-batch) gradient steps, constant eta and the prox of eta "
                  "lambda_1 (eq. 5a-5b, what the proof covers): the prox-gradient mapping at the last "
                  "iterate is <= 1e-6 of its start value. Alg. 1 line 3 also allows Adam, and the "
                  "adapter (as the authors' runs) steps with AdamW, which the proof does not cover "
                  "and this check does not check."),
    Claim("liu-fig1-commit", PAPER, "Sec. 4.3.2, Fig. 1 (b)-(d)",
          "With a larger lambda_1 the weights shrink to 2:4 sooner and the mask is committed early: "
          "the mask after 10% of training is more similar to the final mask (and the mask moves less "
          "between record points early on) than with a balanced lambda_1.",
          check="liu_proxsparse"),
    Claim("liu-table4-large", PAPER, "Table 4",
          "An excessively large lambda_1 gives a worse pruned model than a balanced one (the large-"
          "lambda_1 side of Table 4; measured as the loss of W0 * mask on the calibration data).",
          check="liu_proxsparse"),
    Claim("liu-table4-small", PAPER, "Table 4, Sec. 4.3.2, Fig. 1 (a)",
          "A too small lambda_1 leaves the model largely dense (under-learning, incomplete mask "
          "selection) and gives a worse pruned model than a balanced one (the small-lambda_1 side "
          "of Table 4: 14.19 / 25.23 against 8.68 / 9.91).",
          check="liu_lambda_tables",
          finding="on the tiny tanh network of liu_proxsparse with lambda_1 = 0.001 against 0.3 "
                  "(AdamW, 600 steps): almost no group ends 2:4 and the pruned loss L(W0 * M) is "
                  "higher on every seed."),
    Claim("liu-table5-plateau", PAPER, "Table 5, Sec. 4.3.3",
          "A broad optimal plateau over lambda_2: performance stays stable across a robust range of "
          "lambda_2 values (OpenLlama: 9.91 .. 10.12 for lambda_2 = 0 .. 20, 12.38 at 2500).",
          check="liu_lambda_tables", outcome="DEVIATES",
          finding="on the tiny tanh network the pruned loss is not flat over lambda_2 = 0 .. 20 "
                  "(spread above 5%: lambda_2 matters already at 0.5 .. 20 there); what holds is the "
                  "degradation at the largest lambda_2 (2500 above the best by more than 5%). The "
                  "lambda_2 scale does not transfer between models (Reg_W0 sums over the weights)."),
    Claim("liu-fig2-normgap", PAPER, "Fig. 2, Sec. 4.3.3",
          "The relative norm gap of the kept weights to their original values stays low (~20%) with "
          "minimal change until a high lambda_2 is applied.",
          check="liu_lambda_tables", outcome="DEVIATES",
          finding="on the tiny tanh network the gap moves by more than 20% of its lambda_2 = 0 value "
                  "already for lambda_2 <= 2; what holds is that Reg_W0 pulls the kept weights "
                  "towards W0: the gap at lambda_2 = 2500 is below half its lambda_2 = 0 value."),
    Claim("liu-table3", PAPER, "Table 3, Sec. 4.3.1",
          "Hard constraints perform worst and relaxed constraints better: relaxing both the 2:4 "
          "sparsity (the prox of Reg_2:4 instead of zeroing two of every four weights after each "
          "update) and the frozen weights (Reg_W0 instead of resetting the two largest to their "
          "original values) gives the best result.",
          check="liu_table3",
          finding="on the tiny tanh network of liu_proxsparse (pruned loss L(W0 * M), mean of 3 "
                  "seeds), the four runs of Table 3 made by replacing the adapter's prox step."),
    Claim("liu-prop6-kernel-critical", PAPER, "Prop. 6 (second statement)",
          "As eps -> 0 the output of Algorithm 2 converges to a critical point of g_3 (S = 3) or g_4 "
          "(S = 4); checked on the production EnumALM kernel (balanced start, Newton steps): its "
          "output is stationary on its support.",
          check="alm_decrease"),
]
