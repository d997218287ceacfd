"""A random Llama-2-7B-architecture model pruned end to end on a GPU (issue 44 item 8).

Usage (on a machine with CUDA)::

    python benchmarks/gpu_llama7b.py --tokenizer TOKENIZER_DIR --dir /tmp/l7b
    python benchmarks/gpu_llama7b.py --tokenizer DIR --depth 2      # quick: 2 of 32 blocks

The model (hidden 4096, intermediate 11008, 32 blocks of 32 heads, untied head; about 6.7B
parameters, 12.6 GiB in bfloat16 for the default vocabulary) is written with random weights by
:func:`adapter_offload.write_model`, with the vocabulary of the tokenizer given. It is then
pruned through the CLI, in this process, once per method::

    sparseopt prune --model DIR --out RUN --method M --device cuda --n-calib N --seq-len L

and the script prints each method's time (the layer problems, from ``report.json``), the whole
command's time (loading, calibration forward passes, Hessians, pruning, saving) and the peak
GPU memory that torch allocated during the command, then the prox / sparsegpt ratios. Random
weights say nothing of quality: this measures time and memory at full size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True, help="tokenizer folder (its vocabulary is used)")
    p.add_argument("--dir", required=True, help="where to write the model and the runs")
    p.add_argument("--depth", type=int, default=32)
    p.add_argument("--n-calib", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--calibration", default=None, help="calibration text (default docstrings)")
    p.add_argument("--methods", nargs="+", default=["sparsegpt", "prox"])
    args = p.parse_args(argv)

    from sparseopt.threads import set_idle_thread_env

    set_idle_thread_env()
    import torch

    from adapter_offload import write_model
    from sparseopt.cli import main as cli

    folder = os.path.join(args.dir, "model")
    if not os.path.exists(os.path.join(folder, "config.json")):
        t0 = time.perf_counter()
        size, n = write_model(folder, hidden=4096, depth=args.depth, intermediate=11008,
                              kv_heads=32, tokenizer=args.tokenizer)
        print(f"model: {n / 1e9:.2f}B parameters, {size / 2**30:.2f} GiB bfloat16, written in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"GPU: {torch.cuda.get_device_name()}", flush=True)
    rows = {}
    for method in args.methods:
        torch.cuda.reset_peak_memory_stats()
        cmd = ["prune", "--model", folder, "--out", os.path.join(args.dir, "run"),
               "--method", method, "--device", "cuda", "--n-calib", str(args.n_calib),
               "--seq-len", str(args.seq_len)]
        if args.calibration:
            cmd += ["--calibration", args.calibration]
        t0 = time.perf_counter()
        rc = cli(cmd)
        whole = time.perf_counter() - t0
        with open(os.path.join(args.dir, "run", method, "report.json")) as fh:
            report = json.load(fh)
        rows[method] = {"method_s": report["totals"]["time"], "whole_s": whole,
                        "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
                        "layers": len(report["layers"]), "rc": rc}
    print(f"\n| method | layers | method time (s) | whole time (s) | peak GPU memory (GiB) |")
    print("|---|---:|---:|---:|---:|")
    for m, r in rows.items():
        print(f"| {m} | {r['layers']} | {r['method_s']:.1f} | {r['whole_s']:.1f} | "
              f"{r['peak_gib']:.2f} |")
    if "prox" in rows and "sparsegpt" in rows:
        a, b = rows["prox"], rows["sparsegpt"]
        print(f"prox / sparsegpt: method time {a['method_s'] / b['method_s']:.2f}, whole time "
              f"{a['whole_s'] / b['whole_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
