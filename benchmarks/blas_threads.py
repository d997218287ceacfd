"""Idle BLAS and OpenMP threads against each other: OpenBLAS's thread timeout and libgomp's
spin count, unset vs the values ``import sparseopt`` sets.

Usage::

    python benchmarks/blas_threads.py              # 384x384, 384x1536, 2048x2048 layers
    python benchmarks/blas_threads.py --sizes 384x384 --repeat 1

After every call OpenBLAS's worker threads spin for 2^28 cycles (about 0.1 s) before they
sleep. A pruner that alternates a BLAS product with a parallel Numba kernel (the 2:4 prox of
every proximal-gradient iteration, SparseGPT's column sweep between its block GEMMs) then
runs its kernel on a core that a spinning thread holds. The other way round, the OpenMP
threads of Numba's kernels (libgomp) spin 300 000 rounds after each kernel, into the product
that follows. ``import sparseopt`` sets ``OPENBLAS_THREAD_TIMEOUT=4`` (2^4 cycles) and
``GOMP_SPINCOUNT=10000`` when NumPy is not loaded yet and the user set no value
(``sparseopt/__init__.py``).

Each setting runs in its own child process (both libraries read their variable once, when
they load), on the same layers (W ~ N(0, 1) float32, ``correlated_hessian``), best of
``--repeat`` after a warm-up: ``prox`` with the paper's schedule and with the default ``fast`` one for a fixed
30 iterations each, ``sparsegpt``, ``iobs`` (3 rounds) and ``wanda`` + 200 GD steps (back-to-back
products, no Numba kernel: the case where sleeping threads could cost wake-up time). Three
children: both libraries' defaults; the timeout 4 alone; the timeout 4 and the spin count
10 000 (what ``import sparseopt`` sets). The ratios are "default / timeout 4" and
"timeout 4 / both": above 1 means the setting helps. Results are identical in all three.
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


def run_child(timeout, spincount, sizes, repeat):
    """One child process with OPENBLAS_THREAD_TIMEOUT = timeout and GOMP_SPINCOUNT = spincount
    (None: the library's default, set explicitly so that import sparseopt keeps it)."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    # "0" is OpenBLAS's own default (2^28 cycles), 300000 libgomp's
    env["OPENBLAS_THREAD_TIMEOUT"] = "0" if timeout is None else str(timeout)
    env["GOMP_SPINCOUNT"] = "300000" if spincount is None else str(spincount)
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
    print(f"[bench] {os.cpu_count()} cpus; child with both libraries' defaults ...", flush=True)
    default = run_child(None, None, sizes, args.repeat)
    print("[bench] child with OPENBLAS_THREAD_TIMEOUT=4 ...", flush=True)
    timeout = run_child(4, None, sizes, args.repeat)
    print("[bench] child with OPENBLAS_THREAD_TIMEOUT=4 and GOMP_SPINCOUNT=10000 ...",
          flush=True)
    both = run_child(4, 10000, sizes, args.repeat)
    print()
    print(f"| {'layer, method':<28} | {'default (s)':>11} | {'timeout 4 (s)':>13} | "
          f"{'ratio':>6} | {'+ spin 1e4 (s)':>14} | {'ratio':>6} | same loss |")
    print(f"| {'-' * 28} | {'-' * 10}: | {'-' * 12}: | {'-' * 5}: | {'-' * 13}: | "
          f"{'-' * 5}: | --- |")
    for key, (t0, l0) in default.items():
        t1, l1 = timeout[key]
        t2, l2 = both[key]
        same = "yes" if l0 == l1 == l2 else f"no ({l0:.6g}, {l1:.6g}, {l2:.6g})"
        print(f"| {key:<28} | {t0:>11.3f} | {t1:>13.3f} | {t0 / t1:>5.2f}x | {t2:>14.3f} | "
              f"{t1 / t2:>5.2f}x | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
