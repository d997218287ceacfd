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
    Claim("liu-prop6-kernel-critical", PAPER, "Prop. 6 (second statement)",
          "As eps -> 0 the output of Algorithm 2 converges to a critical point of g_3 (S = 3) or g_4 "
          "(S = 4); checked on the production EnumALM kernel (balanced start, Newton steps): its "
          "output is stationary on its support.",
          check="alm_decrease"),
]
