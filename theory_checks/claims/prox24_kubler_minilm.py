"""Claims of prox24-kubler Sec. 4.3 and App. D about pruning real models, checked on the real
all-MiniLM-L6-v2 (see theory_checks.claims and the checks ``kubler_minilm_*``)."""

from theory_checks.claims import Claim

PAPER = "prox24-kubler"

CLAIMS: list[Claim] = [
    Claim("kubler-d1-independent-sequential", PAPER, "App. D.1, Table 4",
          "Estimating every Hessian from the unpruned model instead of propagating the pruning "
          "errors (pruning sequentially) has little impact: per layer the relative local loss "
          "of Wanda and of SparseGPT changes by at most 25%, summed over the layers by at most "
          "10%.",
          check="kubler_minilm_hessians"),
    Claim("kubler-table4-not-better", PAPER, "App. D.1, Table 4",
          "Propagating the pruning errors is not structurally better: the end-to-end error of "
          "the pruned model (here 1 - mean cosine of MiniLM sentence embeddings to the dense "
          "model's on held-out sentences) changes by at most 10% (the largest change in Table 4 "
          "is 7.2%), and sequential pruning does not give the lower error in every comparison "
          "(Wanda and SparseGPT, two calibration sets).",
          check="kubler_minilm_hessians"),
    Claim("kubler-fig5-gd-saturates", PAPER, "Sec. 4.3, Fig. 5, Table 7",
          "The local loss after k masked gradient steps (eq. 5) on a Wanda mask decreases "
          "monotonically in k and has usually converged after 1000 steps: on at least 80% of "
          "the layers the decrease from 1000 to 2000 steps is at most 10% of the decrease from "
          "0 to 1000 steps.",
          check="kubler_minilm_gd"),
    Claim("kubler-fig5-e2e-saturates", PAPER, "Fig. 5, Table 7",
          "End to end the effect of the masked gradient steps converges quickly: the error of "
          "the Wanda-pruned model (1 - mean cosine of held-out sentence embeddings to the dense "
          "model's) decreases from k = 0 to 1000 steps, changes from 1000 to 2000 by at most "
          "10% of that decrease, and never rises along k by more than 2% of it (Table 7's "
          "rounding resolution).",
          check="kubler_minilm_gd"),
    Claim("kubler-fig4-prox-lower", PAPER, "Fig. 4, Sec. 4.3",
          "The proximal approach (+GD) leads to a smaller local squared loss than Wanda+GD: "
          "lower on at least 80% of the layers, geometric mean of the ratio at most 0.95.",
          check="kubler_minilm_fig4"),
    Claim("kubler-d3-prox-gd-monotone", PAPER, "App. D.3, Table 7",
          "Masked gradient updates after freezing the prox mask monotonically decrease the loss "
          "until it reaches convergence (Table 7: 16.92 -> 16.26 C4 perplexity over 0..1600 steps, "
          "0.01 of the gain after 800 steps).",
          check="kubler_d3_prox_gd",
          finding="checked on the local loss of MiniLM block-0 layers (not perplexity): "
                  "non-increasing over Table 7's steps, the gain from 800 to 1600 steps at most 10% "
                  "of the gain up to 800."),
    Claim("kubler-d3-prox-already-low", PAPER, "App. D.3, Table 7",
          "Since prox already does gradient updates during pruning, even without masked gradient "
          "steps after freezing the mask its result is already fairly low (+GD gains 3.9% on prox, "
          "Table 7, against 34% on Wanda, Table 2).",
          check="kubler_d3_prox_gd",
          finding="checked on the local loss of MiniLM block-0 layers: the relative gain of 1600 "
                  "masked steps is smaller on prox's weights than on Wanda's, and prox without them "
                  "is below Wanda without them."),
]
