"""Command line: ``sparseopt demo | prune | eval | export``.

``prune``, ``eval`` and ``export`` drive the torch adapter (``sparseopt_torch``, the ``torch``
and ``minilm`` extras) on the real model, sentence-transformers all-MiniLM-L6-v2; the core
never imports torch, so the adapter is imported only when one of them runs.
"""

from __future__ import annotations

import argparse
import sys

METHODS = ("magnitude", "wanda", "sparsegpt", "prox", "maiht", "iobs")


def _parser():
    parser = argparse.ArgumentParser(prog="sparseopt", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo and write a Markdown + PNG report")
    demo.add_argument("--out", default=None, help="run folder (default: runs/demo-<timestamp>)")
    demo.add_argument("--quick", action="store_true", help="smaller problem sizes (used by tests)")
    demo.add_argument("--no-minilm", action="store_true",
                      help="skip the MiniLM section (needs the torch and minilm extras)")

    prune = sub.add_parser("prune", help="prune MiniLM to 2:4 with one or more methods "
                                         "(resumable runs in OUT/<method>/)")
    prune.add_argument("out", help="comparison folder")
    prune.add_argument("--method", action="append", choices=METHODS + ("proxsparse", "all"),
                       help="method (repeat for several; default: all, i.e. the six layer-wise "
                            "methods); proxsparse learns the masks end to end")
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

    ev = sub.add_parser("eval", help="fidelity of every run in a comparison folder; writes "
                                     "comparison.md / .json and the per-layer plot")
    ev.add_argument("out", help="comparison folder written by `sparseopt prune`")
    ev.add_argument("--k", type=int, default=10, help="neighbours for kNN agreement")

    ex = sub.add_parser("export", help="export one pruned run as a packed 2:4 safetensors "
                                       "file and/or a dense checkpoint")
    ex.add_argument("run", help="run folder, e.g. OUT/prox")
    ex.add_argument("--packed", default=None, help="packed 2:4 .safetensors file to write")
    ex.add_argument("--dense", default=None, help="folder for a dense checkpoint with zeros")
    ex.add_argument("--variant", choices=("gd", "nogd"), default="gd")
    return parser


def _adapter_cli():
    try:
        from sparseopt_torch import cli
    except ImportError as exc:  # the extras are missing: say which
        raise SystemExit(f"sparseopt: this command needs the torch adapter ({exc}); install "
                         "`pip install torch==2.13.0` first, then `pip install -e .[torch,minilm]`")
    return cli


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        report = run_demo(args.out, quick=args.quick, minilm=not args.no_minilm)
        print(f"report written to {report}")
        return 0
    cli = _adapter_cli()
    return {"prune": cli.run_prune, "eval": cli.run_eval, "export": cli.run_export}[
        args.command](args)


if __name__ == "__main__":
    sys.exit(main())
