"""Masked gradient steps (+GD, prox24-kubler eq. 5): the fused pass vs the NumPy expressions,
both against the bare products (issue 12).

Usage::

    python benchmarks/masked_gd.py                    # MiniLM's three layer shapes, float32
    python benchmarks/masked_gd.py --sizes 4096x4096 --steps 20 --repeat 3

A step is the product ``R = W H`` and then the update. "plain": the NumPy expressions after
the product (``_masked_step_xp``: the kernel's twin, what tensors run); "fused": what NumPy
arrays run, ``sparseopt.layer.loss._masked_gd`` (one Numba pass after the product). Both
with the loss of every step recorded (as ``prune(..., refine_steps=K)`` records it) and
without (as ``masked_gd`` runs). "products": ``steps`` products ``W @ H`` alone, the floor.
Printed: best of ``--repeat`` interleaved rounds in ms per step, and each variant's time over
the products' (1.00 would be a free update). The two variants' weights are compared bit for
bit once.
"""

from __future__ import annotations

import argparse

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np

from _timing import best_times, parse_size  # noqa: E402
from sparseopt.layer.loss import _masked_gd, _masked_step_xp


def variants(d_out, d_in, steps, dtype, seed=0):
    """(plain, fused, products) for ``record`` False and True, on a random layer."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2 * d_in, d_in))
    H = X.T @ X / (2 * d_in)
    W_star = rng.standard_normal((d_out, d_in)).astype(dtype)
    mask = np.zeros((d_out, d_in), dtype=bool)
    mask[:, ::2] = True
    step = 0.5 / float(np.linalg.eigvalsh(H)[-1])
    Hd = H.astype(dtype)

    def plain(record):
        maskd = mask.astype(dtype)
        Wk, GS = W_star * maskd, W_star @ Hd
        R = np.empty_like(Wk)
        for _ in range(steps):
            _masked_step_xp(np.matmul(Wk, Hd, out=R), GS, Wk, W_star, maskd, 2.0 * step,
                            record)
        return Wk

    def fused(record):
        return _masked_gd(W_star, W_star, H, mask, steps, step, record=record)[0]

    def products():
        R = np.empty_like(W_star)
        for _ in range(steps):
            np.matmul(W_star, Hd, out=R)

    assert np.array_equal(plain(True).view(np.uint8), fused(True).view(np.uint8))
    return [products] + [f for record in (True, False)
                         for f in (lambda r=record: plain(r), lambda r=record: fused(r))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_size, nargs="+",
                    default=[(384, 384), (1536, 384), (384, 1536)])
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    dtype = np.dtype(args.dtype).type
    print(f"{args.steps} steps, {args.dtype}; ms per step (ratio to the product)")
    print(f"{'layer':>10} {'product':>8} {'plain+loss':>16} {'fused+loss':>16} "
          f"{'plain':>16} {'fused':>16}")
    for d_out, d_in in args.sizes:
        fns = variants(d_out, d_in, args.steps, dtype)
        times = [t / args.steps for t in best_times(fns, args.repeat)]
        cells = " ".join(f"{1e3 * t:9.3f} ({t / times[0]:4.2f})" for t in times[1:])
        print(f"{d_out:>5}x{d_in:<4} {1e3 * times[0]:8.3f} {cells}")


if __name__ == "__main__":
    main()
