"""The MiniLM section of ``sparseopt demo``: every method with and without +GD on a real model.

The core's demo finds :func:`section` through the ``minilm`` entry point of the
``sparseopt.demo_sections`` group (``pyproject.toml``); ``sparseopt demo --no-minilm`` leaves
it out.

It runs the one folder path of ``sparseopt prune --model minilm`` / ``sparseopt eval``
(:func:`~sparseopt_torch.hf.prune_folder` on the ``minilm`` preset's folder, the dense
Hessians collected once for every method), then draws the per-layer figure from the runs'
reports (:mod:`~sparseopt_torch.experiment`). Modest settings, for a demo within minutes on 2
cores: 128 calibration sentences of at most 64 tokens, batched by token count, 100 masked
gradient steps, prox with its default ("fast") schedule and with Alg. 2 as published
(``prox-paper``), the shorter mAIHT / I-OBS options of the preset, and ProxSparse; the runs
of :data:`DEMO_SKIPS` are left out. ``quick`` (used by the tests) runs wanda, prox and ProxSparse
on 8 calibration sentences and the six layers of the first block, evaluated on 16.
"""

from __future__ import annotations

import os
import shutil

from .experiment import DEMO_PROXSPARSE, all_runs, per_layer_rows, plot_per_layer
from .hf import DEMO_OPTIONS, Experiment, prune_folder, resolve_model
from .prune import PruneSettings

#: quick mode: wanda (the reference of the per-layer figure) and prox; with ProxSparse,
#: seven models to evaluate
QUICK_METHODS = ("wanda", "prox")


#: Runs of the comparison the full demo leaves out: prox from SparseGPT's weights, prox
#: without the clipped Hessian and the App. C regularizers.
#: ``sparseopt prune --model minilm --method prox-R0 ...`` runs them.
DEMO_SKIPS = ("prox-sparsegpt", "prox-noclip", "prox-R0", "prox-R1", "prox-R2")


def demo_runs() -> tuple:
    """The layer-wise runs of the full demo: every run of the comparison but
    :data:`DEMO_SKIPS` (``prox-paper``, Alg. 2 with beta = 1.01, is the default's
    reference)."""
    return tuple(r for r in all_runs() if r not in DEMO_SKIPS)


QUICK_OPTIONS = {"prox": {"max_iter": 20}}
QUICK_PROXSPARSE = {**DEMO_PROXSPARSE, "steps": 3}


def section(out_dir, quick=False) -> str:
    from .hf import evaluate_folder

    run = os.path.join(out_dir, "minilm")
    folder, preset = resolve_model("minilm")
    experiment = Experiment(model=folder, **preset["experiment"])
    if quick:
        experiment = Experiment(model=folder, unit="sentences", n_calib=8, n_eval=16,
                                batch_size=8, seq_len=32)
        settings = PruneSettings(refine_steps=5, modules=r"^encoder\.layer\.0\.")
        methods, options, e2e = QUICK_METHODS, QUICK_OPTIONS, QUICK_PROXSPARSE
    else:
        settings = PruneSettings(refine_steps=preset["refine_steps"])
        methods, options, e2e = demo_runs(), DEMO_OPTIONS, DEMO_PROXSPARSE
    prune_folder(experiment, run, [*methods, "proxsparse"], settings, options=options,
                 proxsparse=e2e)
    evaluate_folder(run)
    fig = "minilm_fig4_per_layer.png"
    plot_per_layer(per_layer_rows(run), os.path.join(out_dir, fig))
    shutil.copyfile(os.path.join(out_dir, fig), os.path.join(run, "fig4_per_layer.png"))
    with open(os.path.join(run, "comparison.md")) as fh:
        table = fh.read()
    return ("## MiniLM: 2:4 pruning of a real model (torch adapter)\n\n"
            "Every linear layer of the BERT body of all-MiniLM-L6-v2 pruned to 2:4 with "
            "Hessians of real activations (`sparseopt prune --model minilm`); fidelity of the "
            "mean-pooled embeddings to the dense model's on held-out text (`sparseopt eval`). "
            "`proxsparse` learns the masks end to end "
            f"(proxsparse-liu Alg. 1, {e2e['steps']} AdamW steps, lambda_1 = {e2e['lam1']}, "
            f"lambda_2 = {e2e['lam2']}, lr {e2e['lr']}). "
            "Per-method reports: `minilm/<method>/`.\n\n"
            f"{table}\n![per-layer local loss relative to wanda+GD]({fig})\n")
