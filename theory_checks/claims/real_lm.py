"""The papers' language-model claims, checked on a real pretrained LLM (SmolLM2-135M,
``benchmarks/real_lm.py``; the check ``real_lm``). The papers measure 3B-70B models on
WikiText-2 and C4: a claim that does not hold at 135M parameters on our text shows FAILED with
its figures."""

from theory_checks.claims import Claim

CLAIMS: list[Claim] = [
    Claim("kubler-table1-prox-gd-best-lm", "prox24-kubler", "Table 1, Sec. 4.3",
          "On the smaller models prox+GD gives the lowest perplexity of the 2:4 methods: "
          "below wanda+GD and sparsegpt+GD (here: held-out perplexity of SmolLM2-135M).",
          check="real_lm"),
    Claim("kubler-gd-improves-lm", "prox24-kubler", "Sec. 4.3, Table 1",
          "The masked gradient updates (eq. 5, +GD) consistently improve the perplexity of "
          "every mask method (here: wanda, sparsegpt and prox, 100 steps).",
          check="real_lm"),
]
