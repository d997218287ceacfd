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
    Claim("kubler-d1-sequential-lm", "prox24-kubler", "App. D.1, Table 4",
          "Propagating the pruning errors (Hessians from the pruned earlier blocks, the "
          "sequential mode) has a very minor effect and is not structurally better than the "
          "unpruned model's Hessians (here: sparsegpt and prox, one-shot and +GD, perplexity "
          "change at most 10%, sequential not lower in every comparison).",
          check="real_lm_ablations"),
    Claim("kubler-d2-calibration-lm", "prox24-kubler", "App. D.2, Tables 5-6",
          "Methods with masked gradient updates consistently improve their perplexity with "
          "more calibration data, with diminishing returns (here: sparsegpt+GD and prox+GD at "
          "16, 64 and 256 sequences).",
          check="real_lm_ablations"),
    Claim("kubler-d2-prox-best-lm", "prox24-kubler", "App. D.2, Tables 5-6",
          "Except with a single calibration sample, prox+GD gives a lower perplexity than the "
          "other methods with the same calibration data (here: below sparsegpt+GD at 16, 64 "
          "and 256 sequences).",
          check="real_lm_ablations"),
    Claim("liu-table2-lm", "proxsparse-liu", "Table 2, Sec. 4.2",
          "ProxSparse gives a lower perplexity than magnitude pruning, Wanda and SparseGPT at "
          "2:4 (here: the masks of 128 AdamW steps, the dense weights kept on them, against the "
          "one-shot baselines).",
          check="real_lm"),
    Claim("maiht-table1-lm", "maiht-wen", "Table 1, Sec. 4",
          "The mAIHT pruner gives a lower perplexity than magnitude pruning, Wanda and "
          "SparseGPT at moderate sparsity (the paper: unstructured 0.2-0.5 on LLaMA-7B; here: "
          "2:4, the N:M variant of App. D.3, one-shot).",
          check="real_lm"),
    Claim("iobs-table2-lm", "iobs-wu", "Table 2, Sec. 4",
          "I-OBS with 3 iterations gives a lower perplexity than SparseGPT (the paper: 50% "
          "unstructured on OPT-125M and Phi-1.5; here: 2:4, one-shot).",
          check="real_lm"),
]
