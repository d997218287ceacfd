"""Throughput of the 2:4 prox (EnumALM, and EnumPGD / EnumIPM on a subsample).

Speed is reported as cells per second and as a ratio to the time NumPy needs merely to
sort the same cells, ``np.sort(np.abs(Y), axis=-1)``, measured in the same run: best of
``--repeat`` rounds, each round timing the sort and then the prox, so that both see the same
machine load (every solver is warmed up first so that Numba compilation is not timed).
A ratio <= 1 means the whole prox costs no more than sorting.

    python benchmarks/prox.py [--cells 4000000] [--lam 0.3] [--sub 20000] [--repeat 3]
    python benchmarks/prox.py --device cuda    # torch tensors on a GPU

With ``--device`` the cells are torch tensors on that device and the prox is the kernel the
pruner calls for them, ``sparseopt.backend.kernel("prox_nm", Y)`` (on a GPU the adapter's
``prox24``, EnumALM only, so no PGD / IPM rows; on the CPU the NumPy kernel), the
baseline is ``torch.sort(torch.abs(Y), dim=-1)`` on the same device, every timing waits for
the device's queued work, and the result is compared with the NumPy kernel's first. On a GPU
the ``alm`` row is ``prox24``'s default kernel, named in brackets: ``cuda``, the core's
kernel compiled by numba-cuda (one thread per group), where numba-cuda is usable, else
``host``; the ``alm ... [host]`` row below it times ``prox24(Y, lam, kernel="host")`` (the
core's CPU kernel on a host copy, both copies included) for comparison (``--no-host``
leaves it out).
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np

from _timing import best_times, check_device, synced  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=4_000_000, help="number of 2:4 cells")
    ap.add_argument("--lam", type=float, default=0.3, help="prox weight lambda")
    ap.add_argument("--tol", type=float, default=1e-12, help="solver tolerance")
    ap.add_argument("--sub", type=int, default=20_000, help="cells for PGD / IPM")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-host", action="store_true",
                    help="with --device on a GPU: do not also time prox24's host kernel")
    ap.add_argument("--device", default=None,
                    help="torch device of the cells, e.g. cuda (default: NumPy arrays)")
    args = ap.parse_args(argv)
    dev = check_device(ap, args.device)
    if dev is not None:
        return bench_device(args, dev)

    import numba

    import llvmlite.binding as ll

    from sparseopt.prox import prox_nm

    print(f"[bench] numba threads: {numba.get_num_threads()}, cpus: {os.cpu_count()}, "
          f"CPU {ll.get_host_cpu_name()}", flush=True)
    rng = np.random.default_rng(args.seed)
    print(f"[bench] drawing Y ~ N(0, 1), shape ({args.cells}, 4)", flush=True)
    Y64 = rng.standard_normal((args.cells, 4))
    Y32 = Y64.astype(np.float32)

    print("[bench] warming up (Numba compilation)", flush=True)
    for Y in (Y64, Y32):
        prox_nm(Y[:64], args.lam, tol=args.tol)

    rows = []
    for name, Y in (("float64", Y64), ("float32", Y32)):
        print(f"[bench] {name}: NumPy sort baseline and EnumALM, interleaved", flush=True)
        t_sort, t_alm = best_times([lambda: np.sort(np.abs(Y), axis=-1),
                                    lambda: prox_nm(Y, args.lam, method="alm", tol=args.tol)],
                                   args.repeat)
        rows.append((f"alm {name}", args.cells, t_alm, t_sort))
        if name == "float64":
            W = prox_nm(Y, args.lam, method="alm", tol=args.tol)
            nnz = np.count_nonzero(W, axis=1)
            mix = {k: float(np.mean(nnz == k)) for k in (0, 1, 2, 3, 4)}

    sub = min(args.sub, args.cells)
    Ys = Y64[:sub]
    t_sort_sub, = best_times([lambda: np.sort(np.abs(Ys), axis=-1)], args.repeat)
    for method in ("pgd", "ipm"):
        if importlib.util.find_spec(f"sparseopt.prox.{method}") is None:
            print(f"[bench] sparseopt.prox.{method} not available, skipped", flush=True)
            continue
        print(f"[bench] {method} float64 on {sub} cells (warm-up + best of {args.repeat})",
              flush=True)
        t, = best_times([lambda: prox_nm(Ys, args.lam, method=method)], args.repeat)
        rows.append((f"{method} float64", sub, t, t_sort_sub))

    print()
    print(f"2:4 prox, lam = {args.lam}, tol = {args.tol:g}, Y ~ N(0, 1)")
    print("optimum mix (fraction of cells by nonzeros): "
          + ", ".join(f"{k}-sparse {v:.3f}" for k, v in mix.items() if v > 0))
    print_table(rows)
    return rows


def print_table(rows):
    """The table of (solver, cells, seconds, sort seconds) rows with the ratio to the sort."""
    print(f"{'solver':<30}{'cells':>10}{'seconds':>10}{'cells/s':>12}{'sort cells/s':>14}"
          f"{'ratio to sort':>15}")
    for name, cells, t, ts in rows:
        print(f"{name:<30}{cells:>10d}{t:>10.4f}{cells / t:>12.3g}{cells / ts:>14.3g}"
              f"{t / ts:>15.2f}")


def bench_device(args, dev):
    """EnumALM on torch tensors on ``dev`` against ``torch.sort`` there (see the module doc)."""
    import torch

    from sparseopt.backend import kernel
    from sparseopt.prox import prox_nm

    from sparseopt.prox import cuda24

    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    default_kernel = ("numpy" if dev.type == "cpu" else
                      "cuda" if dev.type == "cuda" and cuda24.available() else "host")
    print(f"[bench] torch {torch.__version__}, device {dev} ({name}), prox24's kernel: "
          f"{default_kernel}", flush=True)
    Y64 = np.random.default_rng(args.seed).standard_normal((args.cells, 4))
    rows = []
    for dtype, Y in (("float64", Y64), ("float32", Y64.astype(np.float32))):
        Yt = torch.from_numpy(Y).to(dev)
        prox = kernel("prox_nm", Yt)
        # agreement first (a timing of a wrong result is worthless): the NumPy kernel on a
        # subsample, to its own tolerance's scale
        sub = Y[:20000]
        err = float(np.max(np.abs(prox(Yt[:20000], args.lam, tol=args.tol).cpu().numpy()
                                  - prox_nm(sub, args.lam, tol=args.tol))))
        print(f"[bench] {dtype}: torch.sort baseline and EnumALM on {dev}, interleaved; "
              f"max|torch - NumPy| on 20000 cells {err:.1e}", flush=True)
        fns = [synced(lambda: torch.sort(torch.abs(Yt), dim=-1), dev),
               synced(lambda: prox(Yt, args.lam, method="alm", tol=args.tol), dev)]
        host = dev.type != "cpu" and default_kernel != "host" and not args.no_host
        if host:  # the core's CPU kernel on a host copy, for comparison
            from sparseopt_torch.kernels import prox24

            fns.append(synced(lambda: prox24(Yt, args.lam, tol=args.tol, kernel="host"), dev))
        t_sort, t_alm, *t_other = best_times(fns, args.repeat)
        rows.append((f"alm {dtype} [{default_kernel}]", args.cells, t_alm, t_sort))
        rows += [(f"alm {dtype} [host]", args.cells, t, t_sort) for t in t_other]
    print()
    print(f"2:4 prox on {dev}, lam = {args.lam}, tol = {args.tol:g}, Y ~ N(0, 1)")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
