"""The 2:4 prox with and without its 2-sparse certificate, on the inputs a prox-gradient
path gives it and on i.i.d. Gaussian groups (issue 12, items 1 and 2).

Usage::

    python benchmarks/prox_screen.py                        # 384x384 and 2048x2048
    python benchmarks/prox_screen.py --sizes 384x384 --schedules paper --repeat 5

For each layer size and schedule, ``prune(W, H, method="prox", schedule=...)`` runs once on
a random float32 W with a correlated H (``sparseopt.problems.correlated_hessian``) while
the inputs of its prox calls are recorded (``--keep`` to twice that many, evenly spaced
along the path). Then ``enum_alm_rows`` (what ``prox_nm`` calls) with the certificate and
without it (``screen=False``) run on those inputs in interleaved rounds, and the best of
``--repeat`` rounds is printed per third of the path, with the share of groups certified
and the ratio screened / unscreened (below 1: the certificate saves time). Both give the
same output bits (checked here on every recorded input; the tests check it on adversarial
groups). The last table repeats this on ``--groups`` i.i.d. N(0, 1) groups, the input of
``benchmarks/prox.py``.
"""

from __future__ import annotations

import argparse

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import numpy as np

import sparseopt.prox as prox_module
from _timing import best_times, parse_size  # noqa: E402
from sparseopt import prune
from sparseopt.prox.alm import certified_two_sparse_numpy, default_tol, enum_alm_rows
from sparseopt.problems import correlated_hessian


def record_path(d_out, d_in, schedule, keep):
    """[(groups, lam)] of the prox calls of one prox pruning run, evenly spaced (between
    ``keep`` and ``2 keep`` of them), and its iteration count."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((d_out, d_in)).astype(np.float32)
    H = correlated_hessian(d_in, seed=1)
    calls, seen, stride = [], [0], [1]  # every stride-th call; the stride doubles as needed
    inner = prox_module.enum_alm_rows

    def recording(y2d, lam, *args, **kwargs):
        if seen[0] % stride[0] == 0:
            calls.append((y2d.copy(), lam))
            if len(calls) > 2 * keep:
                calls[:] = calls[::2]
                stride[0] *= 2
        seen[0] += 1
        return inner(y2d, lam, *args, **kwargs)

    prox_module.enum_alm_rows = recording  # the benchmark's probe; restored below
    try:
        res = prune(W, H, method="prox", schedule=schedule, refine_steps=0, progress=False)
    finally:
        prox_module.enum_alm_rows = inner
    return calls, res.nit


def compare(calls, repeat):
    """Best seconds per call (screened, unscreened) and the certified share of ``calls``."""
    tol = default_tol(calls[0][0].dtype)

    def run(screen):
        return lambda: [enum_alm_rows(y, lam, 2, tol, 10_000, screen=screen)
                        for y, lam in calls]

    for (y, lam), a, b in zip(calls, run(True)(), run(False)()):
        assert np.array_equal(a[0], b[0]) and np.array_equal(np.signbit(a[0]),
                                                             np.signbit(b[0]))
    t_on, t_off = best_times([run(True), run(False)], repeat)
    share = np.mean([certified_two_sparse_numpy(y, lam).mean() for y, lam in calls])
    return t_on / len(calls), t_off / len(calls), share


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_size, nargs="+", default=[(384, 384), (2048, 2048)])
    ap.add_argument("--schedules", nargs="+", default=["fast", "paper"])
    ap.add_argument("--keep", type=int, default=60, help="prox inputs kept per path")
    ap.add_argument("--groups", type=int, default=1_000_000, help="i.i.d. groups (last table)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("ms per prox call, best of interleaved rounds; ratio = screened / unscreened")
    print(f"{'layer':>10} {'schedule':>8} {'its':>5} {'part':>6} {'certified':>9} "
          f"{'screened':>9} {'unscreened':>10} {'ratio':>6}")
    for d_out, d_in in args.sizes:
        for schedule in args.schedules:
            calls, nit = record_path(d_out, d_in, schedule, args.keep)
            k = len(calls)
            parts = {"1st 1/3": calls[:k // 3], "2nd 1/3": calls[k // 3:2 * k // 3],
                     "3rd 1/3": calls[2 * k // 3:], "all": calls}
            for part, sub in parts.items():
                on, off, share = compare(sub, args.repeat)
                print(f"{f'{d_out}x{d_in}':>10} {schedule:>8} {nit:5d} {part:>6} {share:9.3f} "
                      f"{on * 1e3:9.3f} {off * 1e3:10.3f} {on / off:6.3f}", flush=True)
    print(f"\n{args.groups} i.i.d. N(0, 1) groups")
    print(f"{'dtype':>8} {'lam':>5} {'certified':>9} {'screened':>9} {'unscreened':>10} "
          f"{'ratio':>6}")
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        Y = rng.standard_normal((args.groups, 4)).astype(dtype)
        for lam in (0.3, 1.0, 3.0):
            on, off, share = compare([(Y, lam)], args.repeat)
            print(f"{np.dtype(dtype).name:>8} {lam:5.1f} {share:9.3f} {on * 1e3:9.1f} "
                  f"{off * 1e3:10.1f} {on / off:6.3f}", flush=True)


if __name__ == "__main__":
    main()
