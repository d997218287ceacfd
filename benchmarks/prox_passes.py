"""The elementwise passes of one prox-gradient iteration: fused Numba kernels vs the plain
NumPy expressions (issue 12, item 1).

Usage::

    python benchmarks/prox_passes.py                  # 384x384 and 1536x384, float32
    python benchmarks/prox_passes.py --sizes 384x384 --repeat 50

One iteration of ``sparseopt.solvers.proximal_gradient`` on ``LayerLoss`` without its
product and its prox: the loss with the gradient step ``y - step 2 D H`` (one pass since
2026-11-27, ``objectives._loss_and_step``) and the FISTA extrapolation with its restart
sum. "plain" are the NumPy expressions (the
kernels' twins, what tensors run), "fused" the Numba passes NumPy arrays take; both give
the same iterates bit for bit (checked here once). Printed: best of ``--repeat``
interleaved rounds, and the ratio plain / fused (above 1: the kernels help).
"""

from __future__ import annotations

import argparse

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np

from _timing import best_times, parse_size  # noqa: E402
from sparseopt.objectives import _loss_and_gradient_xp, _loss_and_step
from sparseopt.solvers.proxgrad import _extrapolate, _extrapolate_xp


def passes(d_out, d_in, seed=0):
    """The plain and the fused passes of one iteration on random float32 arrays."""
    rng = np.random.default_rng(seed)
    y, x, x_new, D = (rng.standard_normal((d_out, d_in)).astype(np.float32)
                      for _ in range(4))
    x_new[:, ::2] = 0.0
    DH = rng.standard_normal((d_out, d_in)).astype(np.float32)
    step, coef = 0.01, 0.6

    def plain():
        _, g = _loss_and_gradient_xp(DH, D, np)
        z = y - step * g
        return z, _extrapolate_xp(y, x_new, x, coef, np)[0]

    def fused():
        work = DH.copy()  # the kernel writes the step over D H; the copy is timed as a pass
        _loss_and_step(work, D, y, step, work)
        return work, _extrapolate(y, x_new, x, coef, np)[0]

    assert all(np.array_equal(a, b) for a, b in zip(plain(), fused()))
    return plain, fused


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_size, nargs="+",
                    default=[(384, 384), (1536, 384)])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    print(f"{'layer':>10} {'plain ms':>9} {'fused ms':>9} {'ratio':>6}")
    for d_out, d_in in args.sizes:
        plain, fused = passes(d_out, d_in)
        t_plain, t_fused = best_times([plain, fused], args.repeat)
        print(f"{d_out:>5}x{d_in:<4} {1e3 * t_plain:9.3f} {1e3 * t_fused:9.3f} "
              f"{t_plain / t_fused:6.2f}")


if __name__ == "__main__":
    main()
