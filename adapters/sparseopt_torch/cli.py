"""The adapter's commands ``sparseopt prune | eval | export``.

``--model minilm`` (the default) is the MiniLM comparison of the demo
(:mod:`~sparseopt_torch.experiment`); ``--model DIR`` is a user's Hugging Face model folder
(:mod:`~sparseopt_torch.hf`). The core's command line (:mod:`sparseopt.cli`) finds these
commands through the ``sparseopt.commands`` entry points of ``pyproject.toml``, one per
command: each ``add_*`` adds its subparser to the core's subparsers and sets ``handler``
(``run_*(args) -> int``). The core never imports this module by name.
"""

from __future__ import annotations

import contextlib
import json
import os

from sparseopt.cli import add_method_argument
from sparseopt.layer import methods

from .experiment import (DEMO_OPTIONS, DEMO_PROXSPARSE, VARIANTS, ExperimentConfig,
                         evaluate_runs, proxsparse_run, prune_runs)

__all__ = ["add_prune", "add_eval", "add_export", "run_prune", "run_eval", "run_export"]

MINILM = "minilm"


def add_prune(subparsers) -> None:
    """``sparseopt prune --out RUN [--model DIR] [--method M ...]``: one run per method."""
    prune = subparsers.add_parser(
        "prune", help="prune a model (MiniLM or a Hugging Face folder) to N:M with one or more "
                      "methods (resumable runs in OUT/<method>/)")
    prune.add_argument("--out", required=True, help="run folder (one subfolder per method)")
    prune.add_argument("--model", default=MINILM,
                       help="'minilm' (the demo's all-MiniLM-L6-v2, default) or a local Hugging "
                            "Face model folder (config.json, safetensors, tokenizer)")
    add_method_argument(prune, help="method, repeat for several (default with minilm: all)",
                        extra={
        **{name: f"{method} with {opts}" for name, (method, opts) in VARIANTS.items()},
        "proxsparse": "(minilm) learn the 2:4 masks end to end, keep the dense weights on "
                      "them (proxsparse-liu Alg. 1)",
        "all": "every layer method and prox-* variant above"})
    prune.add_argument("--pattern", default="2:4", help="N:M pattern along the inputs")
    prune.add_argument("--calibration", default=None,
                       help="calibration text: .txt (a document per line), .jsonl (a 'text' "
                            "field), .parquet or a datasets folder; default: numpy/scipy "
                            "docstrings")
    prune.add_argument("--n-calib", type=int, default=128,
                       help="calibration sequences (minilm: sentences)")
    prune.add_argument("--seq-len", type=int, default=2048, help="tokens per sequence")
    prune.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    prune.add_argument("--sequential", action="store_true",
                       help="next block's inputs from the pruned block (default: from the "
                            "dense block, prox24-kubler App. D.1)")
    where = prune.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None,
                       help="run layer problems on a local Dask cluster of N workers")
    where.add_argument("--scheduler", default=None,
                       help="run layer problems on a running Dask cluster (tcp://host:port)")
    prune.add_argument("--offload", action="store_true",
                       help="keep the weights on disk and read one block at a time")
    prune.add_argument("--blocks", default=None,
                       help="dotted name of the block list (default: found automatically)")
    prune.add_argument("--layers", default=None,
                       help="regex of the linear layers to prune (default: all in the blocks)")
    prune.add_argument("--refine-steps", type=int, default=None,
                       help="masked gradient steps after each method (+GD); 0: none "
                            "(default 100 with minilm, else 0)")
    prune.add_argument("--seed", type=int, default=0, help="seed of the data split and sampling")
    prune.add_argument("--batch-size", type=int, default=None,
                       help="sequences per forward pass (default 1; minilm: 16 sentences)")
    prune.add_argument("--paper-settings", action="store_true",
                       help="(minilm) the methods' default (paper) options instead of the "
                            "demo's shorter mAIHT / I-OBS runs; prox's paper schedule is "
                            "--method prox-paper")
    prune.add_argument("--proxsparse-steps", type=int, default=150,
                       help="(minilm) AdamW steps of proxsparse (proxsparse-liu Alg. 1)")
    prune.add_argument("--n-eval", type=int, default=256, help="(minilm) held-out sentences")
    prune.add_argument("--max-length", type=int, default=64,
                       help="(minilm) tokens per sentence")
    prune.set_defaults(handler=run_prune)


def add_eval(subparsers) -> None:
    """``sparseopt eval RUN``: every finished run of a folder, on held-out text."""
    ev = subparsers.add_parser("eval", help="evaluate every run in a folder on held-out text "
                                            "(causal LMs: perplexity and KL to the dense model; "
                                            "encoders: embedding fidelity); writes "
                                            "comparison.md / .json")
    ev.add_argument("out", help="folder written by `sparseopt prune --out`")
    ev.add_argument("--k", type=int, default=10, help="neighbours for kNN agreement")
    ev.add_argument("--max-tokens", type=int, default=20000,
                    help="held-out tokens for perplexity (causal LMs)")
    ev.set_defaults(handler=run_eval)


def add_export(subparsers) -> None:
    """``sparseopt export RUN``: a checkpoint and/or packed 2:4 safetensors."""
    ex = subparsers.add_parser("export", help="export one pruned run as a checkpoint that "
                                              "from_pretrained loads and/or a packed 2:4 file")
    ex.add_argument("run", help="run folder, e.g. OUT/prox")
    ex.add_argument("--dense", default=None,
                    help="folder for the pruned checkpoint (zeros stored densely)")
    ex.add_argument("--packed", default=None, help="packed 2:4 .safetensors file to write")
    ex.add_argument("--variant", choices=("gd", "nogd"), default="gd")
    ex.set_defaults(handler=run_export)


def _fail(command, message):
    raise SystemExit(f"sparseopt {command}: {message}")


def _positive(command, name, value):
    if value is not None and value <= 0:
        _fail(command, f"--{name} must be a positive integer, got {value}")


def _executor(args):
    from .distributed import LayerExecutor

    if args.workers is None and args.scheduler is None:
        return contextlib.nullcontext(None)
    resources = {"GPU": 1} if args.device and args.device.startswith("cuda") else None
    return LayerExecutor(workers=args.workers, scheduler=args.scheduler, resources=resources)


def _chosen_runs(args, folder):
    chosen = args.method or ([] if folder else ["all"])
    if not chosen:
        _fail("prune", "give --method (one or more) for a model folder")
    runs = [m for m in methods() + tuple(VARIANTS) if "all" in chosen or m in chosen]
    return runs, "proxsparse" in chosen


def run_prune(args) -> int:
    from .hf import parse_pattern

    folder = args.model != MINILM
    for name in ("n_calib", "seq_len", "batch_size", "workers", "n_eval", "max_length"):
        _positive("prune", name.replace("_", "-"), getattr(args, name))
    try:
        pattern = parse_pattern(args.pattern)
    except ValueError as err:
        _fail("prune", str(err))
    runs, proxsparse = _chosen_runs(args, folder)
    if folder and proxsparse:
        _fail("prune", "proxsparse is for --model minilm (its end-to-end loss is MiniLM's)")
    if proxsparse and args.proxsparse_steps <= 0:
        _fail("prune", "--proxsparse-steps must be a positive integer")
    if not folder and (args.calibration or args.offload or args.blocks or args.layers):
        _fail("prune", "--calibration, --offload, --blocks and --layers are for --model DIR")
    executor_context = _executor(args)
    try:  # entering connects to the scheduler or starts the local cluster
        executor = executor_context.__enter__()
    except (ConnectionError, ValueError, OSError) as err:
        _fail("prune", f"cannot start the Dask executor: {err}")
    try:
        results = _prune(args, folder, runs, pattern, proxsparse, executor)
    finally:
        executor_context.__exit__(None, None, None)
    for method, res in results.items():
        print(f"{method:10s} sum rel loss {res.total('rel_loss'):.4f}  +GD "
              f"{res.total('rel_loss_gd'):.4f}  time {res.total('time'):.1f} s  "
              f"report {os.path.join(args.out, method, 'report.md')}")
    return 0


def _prune(args, folder, runs, pattern, proxsparse, executor):
    from .hf import prune_folder

    if folder:
        results = prune_folder(
            args.model, args.out, runs, pattern=pattern, calibration=args.calibration,
            n_calib=args.n_calib, seq_len=args.seq_len, seed=args.seed,
            batch_size=args.batch_size or 1, refine_steps=args.refine_steps or 0,
            sequential=args.sequential, device=args.device, offload=args.offload,
            executor=executor, blocks=args.blocks, layers=args.layers)
    else:
        refine = 100 if args.refine_steps is None else args.refine_steps
        config = ExperimentConfig.make(
            n_calib=args.n_calib, n_eval=args.n_eval, seed=args.seed,
            batch_size=args.batch_size or 16, max_length=args.max_length,
            refine_steps=refine, sequential=args.sequential)
        results = prune_runs(args.out, runs, config, pattern=pattern, device=args.device,
                             executor=executor,
                             options={} if args.paper_settings else DEMO_OPTIONS,
                             keep_hessians=proxsparse) \
            if runs else {}
        if proxsparse:  # its local losses from the layer-wise runs' Hessians, if there are any
            settings = {**DEMO_PROXSPARSE, "steps": args.proxsparse_steps}
            hessians = next((r.hessians for r in results.values()), None)
            results["proxsparse"], _ = proxsparse_run(args.out, config, settings=settings,
                                                      hessians=hessians)
    return results


def _experiment(folder):
    path = os.path.join(folder, "experiment.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def run_eval(args) -> int:
    from .hf import evaluate_folder

    experiment = _experiment(args.out)
    if experiment is None:
        _fail("eval", f"{args.out!r} holds no experiment.json: run `sparseopt prune` first")
    if os.path.isdir(experiment.get("model", "")):
        evaluate_folder(args.out, k=args.k, max_tokens=args.max_tokens)
        print(open(os.path.join(args.out, "comparison.md")).read())
        print(f"written: {os.path.join(args.out, 'comparison.md')}, comparison.json")
        return 0
    evaluate_runs(args.out, k=args.k)
    print(open(os.path.join(args.out, "comparison.md")).read())
    print(f"written: {os.path.join(args.out, 'comparison.md')}, comparison.json, "
          "fig4_per_layer.png")
    return 0


def run_export(args) -> int:
    from .export import export_checkpoint, save_dense, save_packed
    from .prune import load_pruned

    if args.packed is None and args.dense is None:
        _fail("export", "give --dense DIR and/or --packed FILE")
    if not os.path.exists(os.path.join(args.run, "run.json")):
        _fail("export", f"{args.run!r} is not a run folder (no run.json)")
    experiment = _experiment(os.path.dirname(os.path.abspath(args.run))) or {}
    model_dir = experiment.get("model", "")
    if os.path.isdir(model_dir):
        if args.dense is not None:
            export_checkpoint(args.run, model_dir, args.dense, variant=args.variant)
            print(f"checkpoint: {args.dense} (load it with from_pretrained)")
        if args.packed is not None:
            from .models import load_model

            model, _, _ = load_model(model_dir)
            names = load_pruned(model, args.run, variant=args.variant)
            sizes = save_packed(model, args.packed, modules=names)
            print(f"packed 2:4 file {args.packed}: {sizes}")
        return 0
    from .evaluate import load_minilm

    st = load_minilm("cpu")
    names = load_pruned(st[0].auto_model, args.run, variant=args.variant)
    if args.packed is not None:
        sizes = save_packed(st[0].auto_model, args.packed, modules=names)
        print(f"packed 2:4 file {args.packed}: {sizes}")
    if args.dense is not None:
        save_dense(st, args.dense)
        print(f"dense checkpoint with zeros: {args.dense}")
    return 0
