"""The adapter's commands ``sparseopt prune | eval | export`` (the MiniLM comparison).

The core's command line (:mod:`sparseopt.cli`) finds them through the ``sparseopt.commands``
entry points of ``pyproject.toml``, one per command: each ``add_*`` adds its subparser to
the core's subparsers and sets ``handler`` (``run_*(args) -> int``). The core never imports
this module by name.
"""

from __future__ import annotations

import os

from sparseopt.cli import add_method_argument
from sparseopt.layer import methods

from .experiment import (DEMO_OPTIONS, DEMO_PROXSPARSE, VARIANTS, ExperimentConfig,
                         evaluate_runs, proxsparse_run, prune_runs)

__all__ = ["add_prune", "add_eval", "add_export", "run_prune", "run_eval", "run_export"]


def add_prune(subparsers) -> None:
    """``sparseopt prune OUT [--method M ...]``: prune MiniLM once per method."""
    prune = subparsers.add_parser("prune", help="prune MiniLM to 2:4 with one or more methods "
                                                "(resumable runs in OUT/<method>/)")
    prune.add_argument("out", help="comparison folder")
    add_method_argument(prune, help="method, repeat for several (default: all)", extra={
        **{name: f"{method} with {opts}" for name, (method, opts) in VARIANTS.items()},
        "proxsparse": "learn the 2:4 masks end to end, keep the dense weights on them "
                      "(proxsparse-liu Alg. 1)",
        "all": "every layer method above and the prox-R* variants (the default)"})
    prune.add_argument("--proxsparse-steps", type=int, default=150,
                       help="AdamW steps of proxsparse (proxsparse-liu Alg. 1)")
    prune.add_argument("--refine-steps", type=int, default=100,
                       help="masked gradient steps after each method (+GD); 0: none")
    prune.add_argument("--sequential", action="store_true",
                       help="recompute block inputs after pruning each block")
    prune.add_argument("--n-calib", type=int, default=128, help="calibration sentences")
    prune.add_argument("--n-eval", type=int, default=256, help="held-out sentences")
    prune.add_argument("--seed", type=int, default=0, help="seed of the sentence split")
    prune.add_argument("--batch-size", type=int, default=16)
    prune.add_argument("--max-length", type=int, default=64, help="tokens per sentence")
    prune.add_argument("--paper-settings", action="store_true",
                       help="the methods' default (paper) options instead of the modest ones")
    prune.set_defaults(handler=run_prune)


def add_eval(subparsers) -> None:
    """``sparseopt eval OUT``: fidelity of every run of a comparison folder."""
    ev = subparsers.add_parser("eval", help="fidelity of every run in a comparison folder; "
                                            "writes comparison.md / .json and the per-layer plot")
    ev.add_argument("out", help="comparison folder written by `sparseopt prune`")
    ev.add_argument("--k", type=int, default=10, help="neighbours for kNN agreement")
    ev.set_defaults(handler=run_eval)


def add_export(subparsers) -> None:
    """``sparseopt export RUN``: packed 2:4 safetensors and/or a dense checkpoint."""
    ex = subparsers.add_parser("export", help="export one pruned run as a packed 2:4 "
                                              "safetensors file and/or a dense checkpoint")
    ex.add_argument("run", help="run folder, e.g. OUT/prox")
    ex.add_argument("--packed", default=None, help="packed 2:4 .safetensors file to write")
    ex.add_argument("--dense", default=None, help="folder for a dense checkpoint with zeros")
    ex.add_argument("--variant", choices=("gd", "nogd"), default="gd")
    ex.set_defaults(handler=run_export)


def run_prune(args) -> int:
    chosen = args.method or ["all"]
    layer_methods = [m for m in methods() + tuple(VARIANTS) if "all" in chosen or m in chosen]
    if "proxsparse" in chosen and args.proxsparse_steps <= 0:
        raise SystemExit("sparseopt prune: --proxsparse-steps must be a positive integer")
    config = ExperimentConfig.make(n_calib=args.n_calib, n_eval=args.n_eval, seed=args.seed,
                                   batch_size=args.batch_size, max_length=args.max_length,
                                   refine_steps=args.refine_steps, sequential=args.sequential)
    results = prune_runs(args.out, layer_methods, config,
                         options={} if args.paper_settings else DEMO_OPTIONS) \
        if layer_methods else {}
    if "proxsparse" in chosen:
        settings = {**DEMO_PROXSPARSE, "steps": args.proxsparse_steps}
        results["proxsparse"], _ = proxsparse_run(args.out, config, settings=settings)
    for method, res in results.items():
        print(f"{method:10s} sum rel loss {res.total('rel_loss'):.4f}  +GD "
              f"{res.total('rel_loss_gd'):.4f}  time {res.total('time'):.1f} s  "
              f"report {os.path.join(args.out, method, 'report.md')}")
    return 0


def run_eval(args) -> int:
    evaluate_runs(args.out, k=args.k)
    print(open(os.path.join(args.out, "comparison.md")).read())
    print(f"written: {os.path.join(args.out, 'comparison.md')}, comparison.json, "
          "fig4_per_layer.png")
    return 0


def run_export(args) -> int:
    from .evaluate import load_minilm
    from .export import save_dense, save_packed
    from .prune import load_pruned

    if args.packed is None and args.dense is None:
        raise SystemExit("sparseopt export: give --packed FILE and/or --dense DIR")
    st = load_minilm("cpu")
    names = load_pruned(st[0].auto_model, args.run, variant=args.variant)
    if args.packed is not None:
        sizes = save_packed(st[0].auto_model, args.packed, modules=names)
        print(f"packed 2:4 file {args.packed}: {sizes}")
    if args.dense is not None:
        save_dense(st, args.dense)
        print(f"dense checkpoint with zeros: {args.dense}")
    return 0
