"""+BR and masked distillation on a GPU at a real model's shapes (issue 45): their throughput.

Usage (on a machine with CUDA)::

    python benchmarks/gpu_recovery.py --config runs/real_lm/smollm2-135m \\
        --calibration runs/real_lm/calibration.txt

``--config``: a model folder whose ``config.json`` and tokenizer are used (the weights are
not read: a model of that architecture with random weights is written to ``--dir``, so only a
few MB have to reach the GPU machine). Through the CLI, one child process each::

    sparseopt prune --model DIR --out RUN --method magnitude --calibration TEXT --n-calib 64
        --seq-len 512 --refine-steps 100 --block-steps 50 --device cuda
    sparseopt finetune RUN/magnitude --minutes 1 --device cuda --lr 1e-4 --name ft

It prints the whole prune's time, +BR's seconds per block and steps per second, and the
distillation steps per second: the figures that say what a budget of GPU minutes buys.
Random weights say nothing of quality (magnitude's mask is as good as any here).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def cli(*args, timeout):
    """``sparseopt ARGS`` in a child process: (seconds, return code)."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sparseopt.cli", *args], timeout=timeout,
                       capture_output=True, text=True)
    print(r.stdout[-2000:], r.stderr[-4000:] if r.returncode else "", flush=True)
    return time.perf_counter() - t, r.returncode


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="model folder: config.json and tokenizer")
    p.add_argument("--calibration", required=True, help="calibration text file")
    p.add_argument("--dir", default="/tmp/gpu_recovery", help="where the model and run go")
    p.add_argument("--block-steps", type=int, default=50)
    p.add_argument("--minutes", type=float, default=1.0, help="distillation budget")
    args = p.parse_args(argv)

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, out = os.path.join(args.dir, "model"), os.path.join(args.dir, "run")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(args.config))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(args.config).save_pretrained(folder)
    del model
    print(f"GPU: {torch.cuda.get_device_name()}", flush=True)

    dt, rc = cli("prune", "--model", folder, "--out", out, "--method", "magnitude",
                 "--calibration", args.calibration, "--n-calib", "64", "--seq-len", "512",
                 "--refine-steps", "100", "--block-steps", str(args.block_steps),
                 "--device", "cuda", timeout=600)
    print(f"PRUNE magnitude +GD100 +BR{args.block_steps} cuda: whole {dt:.1f} s rc {rc}")
    with open(os.path.join(out, "magnitude", "report.json")) as fh:
        bt = [b["time"] for b in json.load(fh)["blocks"]]
    print(f"BR blocks {len(bt)}: {sum(bt):.1f} s in all, {sum(bt) / len(bt):.2f} s a block "
          f"({args.block_steps * len(bt) / sum(bt):.1f} steps/s); first {bt[0]:.2f} s",
          flush=True)
    dt, rc = cli("finetune", os.path.join(out, "magnitude"), "--minutes", f"{args.minutes:g}",
                 "--device", "cuda", "--lr", "1e-4", "--name", "ft", timeout=600)
    with open(os.path.join(out, "ft", "finetune.json")) as fh:
        rec = json.load(fh)
    n, elapsed = len(rec["step"]), rec["time"][-1]
    print(f"FINETUNE {args.minutes:g} min cuda: {n} steps in {elapsed:.1f} s = "
          f"{n / elapsed:.2f} steps/s; whole {dt:.1f} s rc {rc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
