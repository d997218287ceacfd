"""The MiniLM section of ``sparseopt demo``: every method with and without +GD on a real model.

The core's demo finds :func:`section` through the ``minilm`` entry point of the
``sparseopt.demo_sections`` group (``pyproject.toml``); ``sparseopt demo --no-minilm`` leaves
it out.

Modest settings, for a demo within 5 minutes on 2 cores (4 min 22-42 s on 2026-11-27 against
5 min 27 s with the App. C rows and the calibration batches in the split's order,
docs/benchmarks.md): 128 calibration sentences, batched by token count, and 256 held-out
sentences, of at most 64 tokens, 100 masked gradient steps, prox with its default ("fast")
schedule and with Alg. 2 as published (``prox-paper``: beta = 1.01, issue 12 item 4), and
the shorter mAIHT / I-OBS settings of :data:`~sparseopt_torch.experiment.DEMO_OPTIONS`;
the runs of :data:`DEMO_SKIPS` are left out. ``quick`` (used by the tests) runs three
methods on 16 sentences and the six layers of the first block.
"""

from __future__ import annotations

import os
import shutil

from .experiment import (DEMO_OPTIONS, DEMO_PROXSPARSE, ExperimentConfig, all_runs,
                         evaluate_runs, proxsparse_run, prune_runs)
from .evaluate import load_minilm

QUICK_METHODS = ("magnitude", "wanda", "prox")


#: Runs of the comparison the full demo leaves out, with the seconds they would add on 2
#: cores (with their +GD rows and embeddings): prox from SparseGPT's weights (~45 s), prox
#: without the clipped Hessian (~25 s) and the App. C regularizers (~35 s for the three).
#: ``sparseopt prune --model minilm --method prox-R0 ...`` runs them.
DEMO_SKIPS = ("prox-sparsegpt", "prox-noclip", "prox-R0", "prox-R1", "prox-R2")


def demo_runs() -> tuple:
    """The layer-wise runs of the full demo: every run of the comparison but
    :data:`DEMO_SKIPS`. ``prox-paper`` (Alg. 2, beta = 1.01: 750-1050 iterations per layer,
    about 105-125 s, 40-45% of the demo) is the default's reference."""
    return tuple(r for r in all_runs() if r not in DEMO_SKIPS)


QUICK_OPTIONS = {"prox": {"max_iter": 20}}
QUICK_PROXSPARSE = {**DEMO_PROXSPARSE, "steps": 3}


def section(out_dir, quick=False) -> str:
    run = os.path.join(out_dir, "minilm")
    if quick:
        config = ExperimentConfig.make(n_calib=16, n_eval=48, batch_size=8, max_length=32,
                                       refine_steps=5, modules=r"^encoder\.layer\.0\.")
        methods, options, e2e = QUICK_METHODS, QUICK_OPTIONS, QUICK_PROXSPARSE
    else:
        config = ExperimentConfig.make(n_calib=128, n_eval=256, batch_size=16, max_length=64,
                                       refine_steps=100)
        methods = demo_runs()
        options, e2e = DEMO_OPTIONS, DEMO_PROXSPARSE
    st = load_minilm("cpu")
    # the dense Hessians are collected once, for the layer-wise runs and ProxSparse's losses
    runs = prune_runs(run, methods, config, options=options, model=st, keep_hessians=True)
    proxsparse_run(run, config, settings=e2e, model=st,
                   hessians=next((r.hessians for r in runs.values()), None))
    evaluate_runs(run, model=st)
    fig = "minilm_fig4_per_layer.png"
    shutil.copyfile(os.path.join(run, "fig4_per_layer.png"), os.path.join(out_dir, fig))
    with open(os.path.join(run, "comparison.md")) as fh:
        table = fh.read()
    return ("## MiniLM: 2:4 pruning of a real model (torch adapter)\n\n"
            "Every linear layer of the BERT body of all-MiniLM-L6-v2 pruned to 2:4 with "
            "Hessians of real activations; fidelity of the sentence embeddings to the dense "
            "model's on held-out sentences (mean cosine, Spearman of the pairwise similarities, "
            "agreement of the 10 nearest neighbours). `proxsparse` learns the masks end to end "
            f"(proxsparse-liu Alg. 1, {e2e['steps']} AdamW steps, lambda_1 = {e2e['lam1']}, "
            f"lambda_2 = {e2e['lam2']}, lr {e2e['lr']}; its time includes the training). "
            "Per-method reports: `minilm/<method>/`.\n\n"
            f"{table}\n![per-layer local loss relative to wanda+GD]({fig})\n")
