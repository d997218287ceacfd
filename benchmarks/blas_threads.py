"""Idle OpenBLAS threads against the Numba kernels: OPENBLAS_THREAD_TIMEOUT unset vs 4.

Usage::

    python benchmarks/blas_threads.py              # 384x384, 384x1536, 2048x2048 layers
    python benchmarks/blas_threads.py --sizes 384x384 --repeat 1

After every call OpenBLAS's worker threads spin for 2^28 cycles (about 0.1 s) before they
sleep. A pruner that alternates a BLAS product with a parallel Numba kernel (the 2:4 prox of
every proximal-gradient iteration, SparseGPT's column sweep between its block GEMMs) then
runs its kernel on a core that a spinning thread holds. ``import sparseopt`` sets
``OPENBLAS_THREAD_TIMEOUT=4`` (2^4 cycles) when NumPy is not loaded yet and the user set no
value (``sparseopt/__init__.py``).

Each setting runs in its own child process (OpenBLAS reads the variable once, when NumPy
loads it), on the same layers (W ~ N(0, 1) float32, ``correlated_hessian``), best of
``--repeat`` after a warm-up: ``prox`` with the paper's schedule and with the default ``fast`` one for a fixed
30 iterations each, ``sparsegpt``, ``iobs`` (3 rounds) and ``wanda`` + 200 GD steps (back-to-back
products, no Numba kernel: the case where sleeping threads could cost wake-up time). The
ratio is "unset / 4": above 1 means the timeout helps. Results are identical in both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _timing import parse_size  # noqa: E402

CHILD = r"""
import json, sys, time
import numpy as np
from sparseopt import prune
from sparseopt.problems import correlated_hessian

sizes, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
cases = (("prox (paper)", "prox", {"schedule": "paper", "max_iter": 30, "verbose": False}),
         ("prox fast", "prox", {"max_iter": 30, "verbose": False}),
         ("sparsegpt", "sparsegpt", {}),
         ("iobs", "iobs", {}),
         ("wanda + 200 GD", "wanda", {"refine_steps": 200}))
out = {}
for d_out, d_in in sizes:
    rng = np.random.default_rng(0)
    W = rng.standard_normal((d_out, d_in)).astype(np.float32)
    H = correlated_hessian(d_in, seed=1)
    for label, method, kw in cases:
        prune(W[:8], H, method=method, **kw)  # warm-up: Numba compilation
        best, loss = float("inf"), None
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = prune(W, H, method=method, **kw)
            best = min(best, time.perf_counter() - t0)
            loss = res.rel_loss
        out[f"{d_out}x{d_in} {label}"] = (best, loss)
print(json.dumps(out))
"""


def run_child(timeout, sizes, repeat):
    env = dict(os.environ)
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    if timeout is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = str(timeout)
    else:
        # "0" is OpenBLAS's own default (2^28 cycles); set it so that import sparseopt
        # keeps it instead of choosing 4
        env["OPENBLAS_THREAD_TIMEOUT"] = "0"
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(sizes), str(repeat)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="*", type=parse_size,
                        default=[(384, 384), (384, 1536), (2048, 2048)],
                        help="layer sizes d_out x d_in (default 384x384 384x1536 2048x2048)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many (3)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    sizes = args.sizes
    print(f"[bench] {os.cpu_count()} cpus; child with OPENBLAS_THREAD_TIMEOUT unset (OpenBLAS "
          "default) ...", flush=True)
    before = run_child(None, sizes, args.repeat)
    print("[bench] child with OPENBLAS_THREAD_TIMEOUT=4 ...", flush=True)
    after = run_child(4, sizes, args.repeat)
    print()
    print(f"| {'layer, method':<28} | {'default (s)':>11} | {'timeout 4 (s)':>13} | "
          f"{'ratio':>6} | same loss |")
    print(f"| {'-' * 28} | {'-' * 10}: | {'-' * 12}: | {'-' * 5}: | --- |")
    for key, (t0, l0) in before.items():
        t1, l1 = after[key]
        print(f"| {key:<28} | {t0:>11.3f} | {t1:>13.3f} | {t0 / t1:>5.2f}x | "
              f"{'yes' if l0 == l1 else f'no ({l0:.6g} vs {l1:.6g})'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
