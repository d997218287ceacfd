"""The accelerator path (torch kernels of the adapter) vs the NumPy/Numba core, on CPU, in the
same run.

Usage::

    python benchmarks/adapter_kernels.py                  # 1536x384 and 4096x4096
    python benchmarks/adapter_kernels.py --quick          # 256x128 only
    python benchmarks/adapter_kernels.py --threads 1      # torch, Numba and BLAS on one thread

The core computes on the arrays it is given: NumPy arrays with NumPy and the Numba kernels,
torch tensors with torch; tensors on an accelerator take the torch kernels the adapter
registers through the ``sparseopt.kernels`` entry point. Inside
``sparseopt.backend.device_kernels()`` CPU tensors take that accelerator path too, which is
what is timed here as "torch", against the same call on NumPy arrays ("core").

Figures printed (no absolute time is asserted anywhere; ratios compare two timings of the same
run, interleaved, best of ``--repeats`` after a warm-up):

(The 2:4 prox itself is not compared: ``sparseopt_torch.kernels.prox24`` runs the core's
kernel, on a view for CPU tensors; its batched torch version, 7-10x slower than the core on
CPU, was removed on 2026-11-27.)

2. One prox-gradient iteration of prox24-kubler Alg. 2 (gradient step eq. 4 on the rescaled
   problem, then the 2:4 prox) for every ``d_out x d_in`` of ``--sizes`` (W* = randn float32,
   H from ``sparseopt.problems.correlated_hessian``), at the first iterate W = W*: torch
   (``W @ H`` in torch + ``prox24``) vs the core (NumPy ``@`` + ``prox_nm``), with the split
   into product and prox, and the ratio torch / core.
3. For the same layers, through the public API: ``sparseopt.prune(W, H, method="sparsegpt")``
   (2:4, blocksize 128), ``sparseopt.prune(W, H, method="prox", max_iter=--prox-iters)`` (the
   first iterations of Alg. 2 from lambda_0 = 0.01, then projected onto 2:4) and
   ``sparseopt.layer.masked_gd`` with ``--gd-steps`` steps (eq. 5, step given), each on CPU
   tensors inside ``device_kernels()`` vs on NumPy arrays, with the ratio torch / core and
   the agreement of the results. These include what the API does besides the kernels
   (validation, the PSD test of H, gamma_max), on both sides alike.

Whether the torch kernels pay off on CPU is read off the ratios (below 1: torch faster).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np
import torch

from sparseopt import NM, prune
from sparseopt.backend import device_kernels
from sparseopt.layer import gamma_max, masked_gd
from sparseopt.layer.prox import rescale_wanda
from sparseopt.problems import correlated_hessian
from sparseopt.prox import prox_nm
from sparseopt_torch.kernels import prox24

from _timing import best_times, parse_size  # noqa: E402


def bench_iteration(d_out, d_in, lams, repeats):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((d_out, d_in)).astype(np.float32)
    H = correlated_hessian(d_in, seed=2)
    Wt, Ht, _ = rescale_wanda(W, H)  # as prox_prune does
    eta = 1.0 / (2.0 * gamma_max(Ht))
    Hd = Ht.astype(np.float32)
    GS = Wt @ Hd
    Wt_t, Hd_t, GS_t = torch.from_numpy(Wt), torch.from_numpy(Hd), torch.from_numpy(GS)
    two_eta = np.float32(2.0 * eta)
    print(f"[2] prox-gradient iteration at {d_out}x{d_in} (float32, first iterate W = W*)",
          flush=True)

    def step_core():
        R = Wt @ Hd
        R -= GS
        R *= -two_eta
        R += Wt
        return R

    def step_torch():
        R = Wt_t @ Hd_t
        R -= GS_t
        R *= -float(two_eta)
        R += Wt_t
        return R

    Y, Y_t = step_core(), step_torch()
    t_mm_torch, t_mm_core = best_times([step_torch, step_core], repeats)
    rows = []
    for lam in lams:
        t_px_torch, t_px_core = best_times([lambda: prox24(Y_t, lam),
                                            lambda: prox_nm(Y, lam, 2, 4, method="alm")],
                                           repeats)
        it_torch, it_core = t_mm_torch + t_px_torch, t_mm_core + t_px_core
        print(f"    lam={lam:<6g} torch {it_torch * 1e3:9.1f} ms (step {t_mm_torch * 1e3:.1f} + "
              f"prox {t_px_torch * 1e3:.1f})   core {it_core * 1e3:9.1f} ms (step "
              f"{t_mm_core * 1e3:.1f} + prox {t_px_core * 1e3:.1f})   torch/core "
              f"{it_torch / it_core:6.2f}", flush=True)
        rows.append((lam, it_torch, it_core))
    return rows


def _on_device(fn):
    """``fn`` run with CPU tensors on the accelerator path (the torch kernels)."""
    def run():
        with device_kernels():
            return fn()
    return run


def bench_layer_methods(d_out, d_in, prox_iters, refine_steps, repeats):
    rng = np.random.default_rng(3)
    W = rng.standard_normal((d_out, d_in)).astype(np.float32)
    H = correlated_hessian(d_in, seed=4)
    Wt, Ht = torch.from_numpy(W), torch.from_numpy(H)
    print(f"[3] sparseopt.prune (sparsegpt; prox, {prox_iters} iterations) and masked_gd "
          f"({refine_steps} steps) at {d_out}x{d_in} (float32): tensors inside device_kernels() "
          "vs NumPy arrays", flush=True)
    calls = {
        "sparsegpt": dict(method="sparsegpt"),
        "prox": dict(method="prox", max_iter=prox_iters, progress=False),
    }
    mask = None
    for label, kwargs in calls.items():
        def core(kw=kwargs):
            return prune(W, H, pattern=NM(2, 4), **kw)

        def torch_path(kw=kwargs):
            return prune(Wt, Ht, pattern=NM(2, 4), **kw)

        with warnings.catch_warnings():  # prox stops early on purpose (projected, warned)
            warnings.simplefilter("ignore")
            r_core, r_torch = core(), _on_device(torch_path)()
            t_torch, t_core = best_times([_on_device(torch_path), core], repeats)
        same = float(np.mean(r_core.mask == r_torch.mask.numpy()))
        print(f"    {label:<10s} torch {t_torch * 1e3:9.1f} ms   core {t_core * 1e3:9.1f} ms   "
              f"torch/core {t_torch / t_core:6.2f}   masks equal on {same:.4%}, rel. loss "
              f"{r_torch.rel_loss:.6f} / {r_core.rel_loss:.6f}", flush=True)
        if label == "sparsegpt":
            mask = r_core.mask
    step = 1.0 / (2.0 * gamma_max(H))
    mask_t = torch.from_numpy(mask)
    G_core = masked_gd(W, W, H, mask, refine_steps, step)
    G_torch = _on_device(lambda: masked_gd(Wt, Wt, Ht, mask_t, refine_steps, step))()
    err = float(np.max(np.abs(G_torch.numpy() - G_core)) / max(1.0, np.abs(G_core).max()))
    t_torch, t_core = best_times(
        [_on_device(lambda: masked_gd(Wt, Wt, Ht, mask_t, refine_steps, step)),
         lambda: masked_gd(W, W, H, mask, refine_steps, step)], repeats)
    print(f"    masked GD  torch {t_torch * 1e3:9.1f} ms   core {t_core * 1e3:9.1f} ms   "
          f"torch/core {t_torch / t_core:6.2f}   max rel. diff {err:.1e}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=parse_size, nargs="+",
                   default=[(1536, 384), (4096, 4096)], help="layers d_out x d_in")
    p.add_argument("--lams", type=float, nargs="+", default=[0.01, 0.2, 2.0],
                   help="lambdas (prox24-kubler's schedule starts at 0.01; 0.2 and 2.0 are "
                        "lambda_k at k ~ 300 and ~ 530)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--prox-iters", type=int, default=10,
                   help="iterations of prune(method='prox') timed in [3]")
    p.add_argument("--gd-steps", type=int, default=20, help="masked GD steps timed in [3]")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of torch, Numba and BLAS (default: their defaults)")
    p.add_argument("--quick", action="store_true", help="256x128 only")
    args = p.parse_args(argv)
    for name in ("repeats", "prox_iters", "refine_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.quick:
        args.sizes = [(256, 128)]
    if args.threads is not None:
        import numba
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        numba.set_num_threads(args.threads)
        threadpool_limits(args.threads)
    import numba

    print(f"torch {torch.__version__}, device cpu, torch threads {torch.get_num_threads()}, "
          f"numba threads {numba.get_num_threads()}, os.cpu_count() {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for d_out, d_in in args.sizes:
        bench_iteration(d_out, d_in, args.lams, args.repeats)
    for d_out, d_in in args.sizes:
        bench_layer_methods(d_out, d_in, args.prox_iters, args.refine_steps, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
