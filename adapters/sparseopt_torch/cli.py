"""The adapter's side of ``sparseopt prune | eval | export`` (parsing is in sparseopt.cli)."""

from __future__ import annotations

import os

from .experiment import (ALL_METHODS, DEMO_OPTIONS, DEMO_PROXSPARSE, ExperimentConfig,
                         evaluate_runs, proxsparse_run, prune_runs)

__all__ = ["run_prune", "run_eval", "run_export"]


def run_prune(args) -> int:
    chosen = args.method or ["all"]
    methods = [m for m in ALL_METHODS if "all" in chosen or m in chosen]
    if "proxsparse" in chosen and args.proxsparse_steps <= 0:
        raise SystemExit("sparseopt prune: --proxsparse-steps must be a positive integer")
    config = ExperimentConfig.make(n_calib=args.n_calib, n_eval=args.n_eval, seed=args.seed,
                                   batch_size=args.batch_size, max_length=args.max_length,
                                   refine_steps=args.refine_steps, sequential=args.sequential)
    results = prune_runs(args.out, methods, config,
                         options={} if args.paper_settings else DEMO_OPTIONS) if methods else {}
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
