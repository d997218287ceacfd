"""+GD to the optimum: 100 fixed masked gradient steps (eq. 5) against ``masked_optimum``
(PCG or per-row Cholesky, issue 45 item 0), on the SmolLM2-135M layer shapes, float32, CPU.

Usage::

    python benchmarks/refine.py                                  # synthetic Hessians
    python benchmarks/refine.py --model runs/real_lm/smollm2-135m --calibration \\
        runs/real_lm/calibration.txt                             # one block's real Hessians
    python benchmarks/refine.py --pcg                            # also the PCG route forced

The layers of one Llama block of SmolLM2-135M (hidden 576, 9/3 heads: q and o 576 x 576,
k and v 192 x 576, gate and up 1536 x 576, down 576 x 1536). Hessians: with ``--model`` (a
float32 folder, e.g. the one ``benchmarks/real_lm.py`` writes) the block's real ones, from
``--n-seq`` x ``--seq-len`` tokens of ``--calibration`` text; else synthetic
H = X X' / n from n = 4096 random inputs with lognormal scales (sigma 1.5), a few outlier
channels (x 30) and correlated directions, the spread LLM activations show. Masks: wanda
2:4; both refinements start from wanda's weights. Each variant runs once per layer (the
machine's load moves the times by ~10%); the table gives the times, the relative losses
L / Tr(W* H W*') and the time ratio exact / GD.
"""

from __future__ import annotations

import argparse
import time

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np  # noqa: E402

from sparseopt.layer import layer_loss, masked_gd, masked_optimum, prune  # noqa: E402
from sparseopt.layer.loss import base_loss  # noqa: E402

#: (layer, d_out, d_in, which Hessian): one SmolLM2-135M block
SHAPES = [("q_proj", 576, 576, "attn"), ("k_proj", 192, 576, "attn"),
          ("v_proj", 192, 576, "attn"), ("o_proj", 576, 576, "o"),
          ("gate_proj", 1536, 576, "mlp"), ("up_proj", 1536, 576, "mlp"),
          ("down_proj", 576, 1536, "down")]


def synthetic(seed=0):
    """(weights by layer, Hessians by input): random, with an LLM-like spread of scales."""
    rng = np.random.default_rng(seed)
    hess = {}
    for key, d in (("attn", 576), ("o", 576), ("mlp", 576), ("down", 1536)):
        n = 4096
        scales = np.exp(1.5 * rng.standard_normal(d))
        scales[rng.choice(d, 4, replace=False)] *= 30.0  # outlier channels
        mix = np.eye(d) + 0.3 * rng.standard_normal((d, 16)) @ rng.standard_normal((16, d)) / 4
        X = (mix @ rng.standard_normal((d, n))) * scales[:, None]
        hess[key] = X @ X.T / n
    weights = {name: (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)
               for name, o, i, _ in SHAPES}
    return weights, hess


def real(model_dir, calibration, block, n_seq, seq_len):
    """(weights, Hessians) of block ``block`` of the model in ``model_dir`` from
    ``n_seq`` x ``seq_len`` tokens of the calibration text."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sparseopt_torch.hessians import collect_hessians

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = tok(open(calibration, encoding="utf-8", errors="replace").read(),
              return_tensors="pt")["input_ids"][0]
    batches = [{"input_ids": ids[i * seq_len:(i + 1) * seq_len][None]} for i in range(n_seq)]
    prefix = f"model.layers.{block}."
    names = {name: prefix + ("self_attn." if name.endswith(("q_proj", "k_proj", "v_proj",
                                                            "o_proj")) else "mlp.") + name
             for name, *_ in SHAPES}
    hess = collect_hessians(model, batches, modules=list(names.values()), progress=False)
    mods = dict(model.named_modules())
    weights = {name: mods[full].weight.detach().numpy().copy() for name, full in names.items()}
    H = {key: hess.H[names[name]].numpy() for name, _, _, key in SHAPES}
    return weights, H


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a float32 SmolLM2-135M folder")
    ap.add_argument("--calibration", default=None, help="calibration text (with --model)")
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--n-seq", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100, help="fixed +GD steps to compare")
    ap.add_argument("--pcg", action="store_true", help="also time the PCG route forced")
    args = ap.parse_args()
    if args.model:
        if not args.calibration:
            ap.error("--model needs --calibration")
        weights, hess = real(args.model, args.calibration, args.block, args.n_seq,
                             args.seq_len)
        source = (f"block {args.block} of {args.model}, {args.n_seq} x {args.seq_len} "
                  "tokens")
    else:
        weights, hess = synthetic()
        source = "synthetic Hessians (n = 4096, lognormal scales, outliers)"
    print(f"{source}; float32; wanda 2:4 masks; +GD {args.steps} steps vs exact (tol 1e-6)")
    head = (f"{'layer':>10} {'shape':>9} {'GD s':>7} {'GD rel':>9} {'exact s':>8} "
            f"{'exact rel':>9} {'route':>8} {'its':>4} {'exact/GD':>8}")
    if args.pcg:
        head += f" {'pcg s':>7} {'pcg its':>7}"
    print(head)
    tot_gd = tot_ex = 0.0
    for name, d_out, d_in, key in SHAPES:
        W_star, H = weights[name], hess[key]
        start = prune(W_star, H, method="wanda", assume_psd=True)
        base = base_loss(W_star, H)
        t0 = time.perf_counter()
        W_gd = masked_gd(start.W, W_star, H, start.mask, args.steps, assume_psd=True)
        t_gd = time.perf_counter() - t0
        t0 = time.perf_counter()
        W_ex, info = masked_optimum(start.W, W_star, H, start.mask, assume_psd=True)
        t_ex = time.perf_counter() - t0
        tot_gd += t_gd
        tot_ex += t_ex
        row = (f"{name:>10} {d_out}x{d_in:<4} {t_gd:7.2f} "
               f"{layer_loss(W_gd, W_star, H) / base:9.5f} {t_ex:8.2f} "
               f"{layer_loss(W_ex, W_star, H) / base:9.5f} {info['solver']:>8} "
               f"{info['iterations']:4d} {t_ex / t_gd:8.2f}")
        if args.pcg:
            t0 = time.perf_counter()
            _, pinfo = masked_optimum(start.W, W_star, H, start.mask, solver="pcg",
                                      assume_psd=True)
            row += f" {time.perf_counter() - t0:7.2f} {pinfo['iterations']:7d}"
        print(row, flush=True)
    print(f"{'total':>10} {'':9} {tot_gd:7.2f} {'':9} {tot_ex:8.2f} {'':9} {'':8} {'':4} "
          f"{tot_ex / tot_gd:8.2f}")


if __name__ == "__main__":
    main()
