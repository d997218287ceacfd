"""+BR's default learning rate: E after / E before of block reconstruction on tiny random
Llamas (docs/adapter.md "+BR"), 2:4, 16 calibration batches of 2 x 32 random tokens.

Usage::

    python benchmarks/block_lr.py magnitude 32 4 100   # method, hidden size, blocks, steps
    python benchmarks/block_lr.py sparsegpt 32 4 100
    python benchmarks/block_lr.py magnitude 256 2 50

Per learning rate: E(k) / E(0) averaged over the blocks, estimated every 16 steps (one epoch)
by the mean minibatch loss of the epoch ending at step k, and exactly after the last step.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "adapter"))


def main(method="magnitude", hidden=32, blocks=4, steps=100):
    from _models import tiny_config
    from transformers import AutoModelForCausalLM

    from sparseopt_torch.prune import prune_model

    g = torch.Generator().manual_seed(0)
    calibration = [{"input_ids": torch.randint(5, 30522, (2, 32), generator=g),
                    "attention_mask": torch.ones(2, 32, dtype=torch.long)} for _ in range(16)]
    for lr in (1e-4, 3e-4, 1e-3, 3e-3):
        torch.manual_seed(0)
        config = tiny_config("llama", layers=blocks)
        config.hidden_size, config.intermediate_size = hidden, 2 * hidden
        model = AutoModelForCausalLM.from_config(config).eval()
        res = prune_model(model, calibration, method=method, block_steps=steps, block_lr=lr,
                          progress=False)
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        epoch = lambda k: mean([sum(b.curve[k - 16:k]) / 16 / b.error_start  # noqa: E731
                                for b in res.blocks])
        cells = [f"~{k}: {epoch(k):.3f}" for k in range(16, steps + 1, 16)]
        end = mean([b.error_end / b.error_start for b in res.blocks])
        print(f"{method} hidden {hidden} lr {lr:g}: " + "  ".join(cells) + f"  end {end:.3f}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
