"""The MiniLM comparison: every core method, with and without +GD, on a real model.

:func:`prune_runs` prunes the BERT body of sentence-transformers all-MiniLM-L6-v2 (36 linear
layers) once per method into ``out/<method>/`` (resumable runs of
:func:`~sparseopt_torch.prune.prune_model`); :func:`evaluate_runs` then measures, on held-out
sentences, how faithful each pruned model's embeddings are to the dense model's, and writes the
comparison table and the per-layer plot of prox24-kubler Fig. 4 (each method's local loss
relative to wanda+GD). Calibration and evaluation sentences are disjoint and fixed by the seed
(:func:`~sparseopt_torch.data.calibration_eval_split`).
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np

from sparseopt.layer import methods as layer_methods
from sparseopt.patterns import NM

from .data import calibration_eval_split, token_batches
from .evaluate import embed, fidelity, load_minilm
from .layers import find_layers
from .prune import prune_model
from .rundir import check_experiment, load_pruned

__all__ = ["ExperimentConfig", "prune_runs", "proxsparse_run", "evaluate_runs", "all_methods",
           "all_runs", "VARIANTS", "DEMO_OPTIONS", "DEMO_PROXSPARSE"]

_CONFIG_FILE = "experiment.json"


def all_methods() -> tuple:
    """Every layer method of the comparison: the registry's, :func:`sparseopt.layer.methods`
    (read at each call, so a method registered later takes part)."""
    return layer_methods()


#: Runs of a registered method with fixed options, named ``<method>-<variant>``: the prox
#: pruner with the paper's schedule (prox24-kubler Alg. 2 as published, beta 1.01; the
#: default schedule of ``prox`` is the faster ``"fast"``, :data:`sparseopt.layer.prox.SCHEDULES`),
#: from SparseGPT's weights (the warm start ``start="sparsegpt"``, issue 12), without the
#: clipped Hessian that the default applies to layers with outlier eigenvalues (``clip=0``,
#: the default until 2026-11-27, ``docs/layer.md``) and with the App. C regularizers
#: (prox24-kubler Table 2, rows L0 / L1 / L2).
VARIANTS = {
    "prox-paper": ("prox", {"schedule": "paper"}),
    "prox-sparsegpt": ("prox", {"start": "sparsegpt"}),
    "prox-noclip": ("prox", {"clip": 0}),
    "prox-R0": ("prox", {"regularizer": "R0"}),
    "prox-R1": ("prox", {"regularizer": "R1"}),
    "prox-R2": ("prox", {"regularizer": "R2"}),
}


def all_runs() -> tuple:
    """Every layer-wise run of the comparison: :func:`all_methods`, then :data:`VARIANTS`."""
    return all_methods() + tuple(VARIANTS)


def _runs() -> tuple:
    """Run folders evaluate_runs looks for, in table order ("proxsparse": end-to-end masks;
    the App. C variants last, so that the rows of the methods keep their order)."""
    return all_methods() + ("proxsparse",) + tuple(VARIANTS)

#: Modest per-method settings for a 2-core demo (the paper's settings are the defaults of
#: sparseopt.prune; prox runs its default "fast" schedule, 22-31 iterations per MiniLM
#: layer since 2026-11-27).
DEMO_OPTIONS = {
    "maiht": {"iters": 30, "refine_iters": 20},
    "iobs": {"rounds": 2, "gd_steps": 5},
}


class ExperimentConfig(dict):
    """Settings shared by every run of a comparison (saved as ``experiment.json``)."""

    @classmethod
    def make(cls, *, n_calib=128, n_eval=256, seed=0, batch_size=16, max_length=64,
             refine_steps=100, sequential=False, modules=None, by_length=True):
        """``modules``: a regular expression of the layers to prune (``find_layers``);
        default None, every linear layer of the BERT body. ``by_length``: cut the calibration
        batches from the sentences sorted by token count (``token_batches(by_length=True)``):
        on the 128 sentences of the demo they hold 3664 instead of 5568 padded tokens, and
        ProxSparse's 150 steps took 31.0 s instead of 47.4."""
        for name, v in (("n_calib", n_calib), ("n_eval", n_eval), ("batch_size", batch_size),
                        ("max_length", max_length)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(refine_steps, bool) or not isinstance(refine_steps, int) \
                or refine_steps < 0:
            raise ValueError(f"refine_steps must be a non-negative integer, got {refine_steps!r}")
        if not isinstance(by_length, bool):
            raise ValueError(f"by_length must be True or False, got {by_length!r}")
        if modules is not None and not isinstance(modules, str):
            raise ValueError(f"modules must be a regular expression (str) or None, got {modules!r}")
        return cls(n_calib=n_calib, n_eval=n_eval, seed=seed, batch_size=batch_size,
                   max_length=max_length, refine_steps=refine_steps,
                   sequential=bool(sequential), model="all-MiniLM-L6-v2", modules=modules,
                   by_length=by_length)


def _save_config(out, config):
    check_experiment(out, dict(config), write=True)


def _load_config(out):
    path = os.path.join(out, _CONFIG_FILE)
    if not os.path.exists(path):
        raise ValueError(f"{out!r} holds no comparison ({_CONFIG_FILE} missing); "
                         "run `sparseopt prune` first")
    with open(path) as fh:
        return ExperimentConfig(json.load(fh))


def _calibration(model, config):
    """(SentenceTransformer, its BERT body, token batches of the calibration sentences)."""
    st = load_minilm("cpu") if model is None else model
    calib, _ = calibration_eval_split(config["n_calib"], config["n_eval"], seed=config["seed"])
    # comparisons saved before by_length existed cut their batches in the split's order
    batches = token_batches(st.tokenizer, calib, batch_size=config["batch_size"],
                            max_length=config["max_length"],
                            by_length=config.get("by_length", False))
    return st, st[0].auto_model, batches


def prune_runs(out, methods=None, config=None, *, options=None, model=None,
               pattern=NM(2, 4), device=None, executor=None, progress=True,
               keep_hessians=False) -> dict:
    """Prune MiniLM once per run into ``out/<run>/``; return {run: ModelPruneResult}.

    ``methods`` holds method names and :data:`VARIANTS` names (default :func:`all_methods`).
    ``options`` maps a method to its options (default :data:`DEMO_OPTIONS`; a variant adds
    its own options to its method's). The model is restored to its dense weights after each
    run. Finished runs are resumed, not redone. With independent Hessians the first run that
    collects all of them keeps them (``keep_hessians``) and the later runs reuse them
    (``hessians``): the model runs on the calibration data once, not once per run.
    ``keep_hessians=True`` leaves those Hessians on the results (``result.hessians``, one
    object for all runs; None where no run collected all of them), for
    :func:`proxsparse_run`. ``device`` and ``executor`` are those of
    :func:`~sparseopt_torch.prune.prune_model`.
    """
    config = ExperimentConfig.make() if config is None else config
    known = all_runs()
    methods = all_methods() if methods is None else tuple(methods)
    for method in methods:
        if method not in known:
            raise ValueError(f"methods: {method!r} is not one of {list(known)}")
    options = DEMO_OPTIONS if options is None else options
    _save_config(out, config)
    st, body, batches = _calibration(model, config)
    dense = copy.deepcopy(body.state_dict())
    results = {}
    shared = None  # the dense Hessians, once a run has collected all of them
    try:
        for run in methods:
            method, extra = VARIANTS.get(run, (run, {}))
            if progress:
                print(f"[prune] {run}", flush=True)
            res = prune_model(
                body, batches, method=method, pattern=pattern,
                refine_steps=config["refine_steps"], sequential=config["sequential"],
                modules=config.get("modules"),
                options={**options.get(method, {}), **extra}, out=os.path.join(out, run),
                device=device, executor=executor, progress=progress, hessians=shared,
                keep_hessians=shared is None and not config["sequential"])
            if res.hessians is not None and len(res.hessians.H) == len(res.records):
                shared = res.hessians  # none was resumed from the folder: all are there
            res.hessians = None
            results[run] = res
            body.load_state_dict(dense)
    finally:
        body.load_state_dict(dense)
    if keep_hessians:
        for res in results.values():
            res.hessians = shared
    return results


#: Modest ProxSparse settings for the demo (proxsparse-liu Alg. 1; see proxsparse_run).
DEMO_PROXSPARSE = {"steps": 150, "lam1": 0.5, "lam2": 0.0, "lr": 3e-4, "warmup": 0.1,
                   "record_every": 10}


def proxsparse_run(out, config=None, *, settings=None, model=None, progress=True,
                   hessians=None):
    """ProxSparse (proxsparse-liu Alg. 1) on MiniLM: learn 2:4 masks end to end, then keep the
    dense weights on them (no weight update) and record local losses (and +GD) like the
    layer-wise methods, in ``out/proxsparse/``.

    The end-to-end loss is the squared distance between the trained model's sentence
    embeddings and the dense model's on the calibration sentences
    (:func:`~sparseopt_torch.proxsparse.embedding_distance_loss`). ``settings`` are keyword
    arguments of :func:`~sparseopt_torch.proxsparse.proxsparse` (default
    :data:`DEMO_PROXSPARSE`). ``hessians``: the dense Hessians of the same configuration
    (``prune_runs(..., keep_hessians=True)``), so that the local losses need no second
    forward pass (checked by ``prune_model``). Returns (ModelPruneResult, ProxSparseResult).
    """
    from .proxsparse import embedding_distance_loss, proxsparse

    config = ExperimentConfig.make() if config is None else config
    settings = dict(DEMO_PROXSPARSE if settings is None else settings)
    _save_config(out, config)
    st, body, batches = _calibration(model, config)
    layers = find_layers(body, config.get("modules"))
    learned = proxsparse(st, batches, embedding_distance_loss(st), modules=layers,
                         progress=progress, **settings)
    if progress:
        print(f"[proxsparse] {settings}: final fraction of 2:4 groups "
              f"{learned.info['frac_24']:.4f}, masks differing from magnitude "
              f"{learned.info['mask_vs_magnitude']:.4f}", flush=True)
    dense = copy.deepcopy(body.state_dict())
    try:
        res = prune_model(body, batches, method="masks", masks=learned.masks,
                          refine_steps=config["refine_steps"], sequential=config["sequential"],
                          modules=config.get("modules"),
                          options={"proxsparse": settings}, out=os.path.join(out, "proxsparse"),
                          progress=progress, hessians=hessians)
    finally:
        body.load_state_dict(dense)
    info = {k: v for k, v in learned.info.items() if isinstance(v, (int, float, str, bool))}
    with open(os.path.join(out, "proxsparse", "proxsparse.json"), "w") as fh:
        json.dump({"settings": settings, "info": info,
                   "loss": [float(x) for x in learned.history["loss"]],
                   "frac_24": [float(x) for x in learned.history["frac_24"]]}, fh, indent=1)
    return res, learned


def evaluate_runs(out, *, model=None, k=10, progress=True) -> list:
    """Fidelity of every finished run in ``out`` on the held-out sentences; writes
    ``comparison.json``, ``comparison.md`` and ``fig4_per_layer.png``; returns the rows."""
    config = _load_config(out)
    st = load_minilm("cpu") if model is None else model
    body = st[0].auto_model
    _, held_out = calibration_eval_split(config["n_calib"], config["n_eval"],
                                         seed=config["seed"])
    dense = copy.deepcopy(body.state_dict())
    rows = []
    try:
        emb_dense = embed(st, held_out)
        for method in _runs():
            run = os.path.join(out, method)
            report = os.path.join(run, "report.json")
            if not os.path.exists(report):
                continue
            with open(report) as fh:
                rep = json.load(fh)
            variants = [("nogd", "rel_loss", method)]
            if config["refine_steps"] > 0:
                variants.append(("gd", "rel_loss_gd", f"{method}+GD"))
            for variant, loss_key, label in variants:
                body.load_state_dict(dense)
                load_pruned(body, run, variant=variant)
                fid = fidelity(embed(st, held_out), emb_dense, k=k)
                t = rep["totals"]["time"] + (rep["totals"]["time_gd"] if variant == "gd" else 0)
                learned = os.path.join(run, "proxsparse.json")
                if os.path.exists(learned):  # end-to-end training time of the masks
                    with open(learned) as fh:
                        t += float(json.load(fh)["info"]["time"])
                rows.append({"method": label, "rel_loss_sum": rep["totals"][loss_key],
                             "time": t, **{key: float(v) for key, v in fid.items()},
                             "per_layer": {r["name"]: r[loss_key] for r in rep["layers"]}})
                if progress:
                    print(f"[eval] {label:14s} sum rel loss {rows[-1]['rel_loss_sum']:.4f}  "
                          f"cos {fid['mean_cosine']:.4f}", flush=True)
    finally:
        body.load_state_dict(dense)
    if not rows:
        raise ValueError(f"no finished run in {out!r}")
    with open(os.path.join(out, "comparison.json"), "w") as fh:
        json.dump({"config": dict(config), "rows": rows}, fh, indent=1)
    md = comparison_markdown(rows, config)
    with open(os.path.join(out, "comparison.md"), "w") as fh:
        fh.write(md)
    plot_per_layer(rows, os.path.join(out, "fig4_per_layer.png"))
    return rows


def comparison_markdown(rows, config) -> str:
    lines = [f"MiniLM (all-MiniLM-L6-v2), 2:4 on {len(rows[0]['per_layer'])} linear layers; "
             f"{config['n_calib']} calibration / {config['n_eval']} held-out sentences "
             f"(seed {config['seed']}), {'sequential' if config['sequential'] else 'independent'}"
             f" Hessians, +GD = {config['refine_steps']} masked gradient steps. Local loss: "
             "Tr((W - W*) H (W - W*)') / Tr(W* H W*') summed over layers. Time: the method "
             "summed over layers (with its +GD steps; ProxSparse: with its training), "
             "without collecting the Hessians.", "",
             "| method | sum of rel. local loss | mean cosine | Spearman | kNN@10 | time [s] |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['rel_loss_sum']:.4f} | {r['mean_cosine']:.4f} | "
                     f"{r['spearman']:.4f} | {r['knn_agreement']:.4f} | {r['time']:.1f} |")
    ref = next((r for r in rows if r["method"] == "wanda+GD"), None)
    prox = next((r for r in rows if r["method"] == "prox+GD"), None)
    if ref is not None and prox is not None:
        names = list(ref["per_layer"])
        better = sum(prox["per_layer"][n] < ref["per_layer"][n] for n in names)
        lines += ["", f"prox+GD has a lower local loss than wanda+GD on {better} of "
                      f"{len(names)} layers."]
    order_loss = [r["method"] for r in sorted(rows, key=lambda r: r["rel_loss_sum"])]
    order_fid = [r["method"] for r in sorted(rows, key=lambda r: -r["mean_cosine"])]
    rho = _spearman_rank([r["rel_loss_sum"] for r in rows], [-r["mean_cosine"] for r in rows])
    lines += ["", f"Ordering by local loss: {', '.join(order_loss)}.",
              f"Ordering by mean cosine: {', '.join(order_fid)}.",
              f"Rank correlation between sum of local losses and (1 - cosine): {rho:.3f}."]
    return "\n".join(lines) + "\n"


def _spearman_rank(a, b) -> float:
    from scipy.stats import spearmanr

    if len(a) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def plot_per_layer(rows, path):
    """prox24-kubler Fig. 4: per-layer local loss of each method relative to wanda+GD."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the reference of Fig. 4 is wanda+GD; without a wanda run, the first row
    ref = next((r for r in rows if r["method"] == "wanda+GD"),
               next((r for r in rows if r["method"] == "wanda"), rows[0]))
    names = list(ref["per_layer"])
    base = np.array([ref["per_layer"][n] for n in names])
    runs = _runs()
    fig, ax = plt.subplots(figsize=(9, 4))
    for r in rows:
        if r is ref:
            continue
        vals = np.array([r["per_layer"][n] for n in names])
        family = r["method"].removesuffix("+GD")  # one colour per method, solid with +GD
        color = plt.cm.tab10(runs.index(family) % 10) if family in runs else None
        ax.plot(np.arange(len(names)), vals / base, marker="o", ms=3, lw=1, label=r["method"],
                color=color, ls="-" if r["method"].endswith("+GD") else ":")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("layer (forward order)")
    ax.set_ylabel(f"local loss / {ref['method']}")
    ax.set_title("per-layer local loss relative to " + ref["method"] + " (cf. prox24-kubler Fig. 4)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
