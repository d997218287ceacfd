"""The papers' language-model claims on a real pretrained LLM (issue 44 item 6).

Measurement: ``benchmarks/real_lm.py`` prunes SmolLM2-135M-Instruct (30 Llama blocks) to 2:4
with every method through the CLI, 64 calibration sequences of 512 tokens of news text, 100
masked gradient steps for the +GD rows, and measures the perplexity of held-out English text
(SparseGPT's and Wanda's protocol: disjoint windows of 512 tokens). The check reads the
benchmark's table (``runs/real_lm/real_lm-n64-L512-gd100-cpu.json``) and runs the benchmark
for the runs it lacks (runs are cached: a rerun reuses finished ones). ``--quick``: 8 x 128
calibration tokens. prox24-kubler's ablations on the same model (App. D.1, the sequential
mode; App. D.2, the calibration size) are the check ``real_lm_ablations``.

What would make it fail: a claimed order of perplexities that does not hold on this model.
The papers measure 125M-70B models on WikiText-2 / C4, most at 3B-70B, several unstructured
rather than 2:4; at 135M parameters, 2:4 and on our text a claim may not reproduce, and the
check then records it as failed, with the figures.
"""

from __future__ import annotations

import json
import os
import sys

from ._report import claim, figure, header, verdict

NAME = "real_lm"

#: The runs the claims compare (one-shot and +GD rows of each).
METHODS = ("magnitude", "wanda", "sparsegpt", "prox", "maiht", "iobs", "proxsparse")
#: ProxSparse's AdamW steps in the benchmark: what fits proxsparse-liu's claim into the issue's
#: budget of 30 minutes on 2 cores (two passes over the 64 sequences).
PROXSPARSE_STEPS = 128
CACHE = os.path.join("runs", "real_lm")


def _rows(n, L, methods, sequential=()):
    """The labels of the one-shot and +GD rows of ``methods`` (and of ``sequential`` in
    sequential mode) that the benchmark's table at ``n x L`` must hold."""
    return ([m + g for m in methods for g in ("", "+GD")]
            + [m + g + " (sequential)" for m in sequential for g in ("", "+GD")])


def _table(n, L, methods, sequential=()):
    """{run label: perplexity} of the benchmark's table at ``n x L`` calibration tokens; the
    benchmark runs first where a wanted row is missing (finished runs are reused)."""
    path = os.path.join(CACHE, f"real_lm-n{n}-L{L}-gd100-cpu.json")

    def read():
        if not os.path.exists(path):
            return {}
        with open(path) as fh:
            return {r["run"]: r["perplexity"] for r in json.load(fh)["rows"]}

    have = read()
    if any(r not in have for r in ["dense", *_rows(n, L, methods, sequential)]):
        bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "benchmarks")
        sys.path.insert(0, bench)
        import real_lm

        argv = ["--methods", *methods, "--n-calib", str(n), "--seq-len", str(L),
                "--refine-steps", "100", "--cache", CACHE]
        argv += ["--sequential", *sequential] if sequential else []
        argv += ["--proxsparse-steps", str(PROXSPARSE_STEPS)] if "proxsparse" in methods else []
        real_lm.main(argv)
        have = read()
    return have, path


def _below(ppl, run, others):
    """(figure, holds): ``run``'s perplexity strictly below each of ``others``'."""
    text = f"{run} {ppl[run]:.2f} against " + ", ".join(f"{o} {ppl[o]:.2f}" for o in others)
    return text, all(ppl[run] < ppl[o] for o in others)


def run(out_dir, quick=False):
    """Read (or make) the real-LM table, print it, record the four papers' LM claims."""
    header(NAME, "The four papers' language-model claims on SmolLM2-135M-Instruct at 2:4 "
                 "(benchmarks/real_lm.py; held-out news and encyclopedia text).")
    n, L = (8, 128) if quick else (64, 512)
    ppl, path = _table(n, L, METHODS)
    figure("table", path)
    for label in ("dense", *_rows(n, L, METHODS)):
        figure(f"perplexity {label}", f"{ppl[label]:.2f}")
    ok = []
    ok.append(claim("kubler-table1-prox-gd-best-lm",
                    *_below(ppl, "prox+GD", ("wanda+GD", "sparsegpt+GD"))))
    gains = {m: ppl[m] - ppl[m + "+GD"] for m in ("wanda", "sparsegpt", "prox")}
    ok.append(claim("kubler-gd-improves-lm",
                    "perplexity without / with +GD: " + ", ".join(
                        f"{m} {ppl[m]:.2f} / {ppl[m + '+GD']:.2f}" for m in gains),
                    all(g > 0 for g in gains.values())))
    # the other papers' tables: their method one-shot against the one-shot baselines
    ok.append(claim("maiht-table1-lm", *_below(ppl, "maiht", ("magnitude", "wanda",
                                                               "sparsegpt"))))
    ok.append(claim("iobs-table2-lm", *_below(ppl, "iobs", ("sparsegpt",))))
    ok.append(claim("liu-table2-lm", *_below(ppl, "proxsparse", ("magnitude", "wanda",
                                                                  "sparsegpt"))))
    return verdict(NAME, all(ok), f"{sum(ok)}/{len(ok)} claims hold on SmolLM2-135M")
