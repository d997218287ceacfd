"""Layer jobs on Dask: 2 local workers vs in process, on the prox layer problems of MiniLM.

Usage::

    python benchmarks/adapter_dask.py            # the 36 layers, 128 calibration sentences
    python benchmarks/adapter_dask.py --quick    # the 6 layers of the first block, 32 sentences

Model: all-MiniLM-L6-v2 (``sparseopt_torch.evaluate.load_minilm``, offline, CPU; its
BertModel), 36 encoder Linear layers (24 of 384 x 384, 6 of 1536 x 384, 6 of 384 x 1536).
Data: calibration sentences from numpy/scipy docstrings (``calibration_eval_split``, seed 0),
16 per batch, max length 64 (the demo's settings); float64 Hessians by ``collect_hessians``.
Jobs: ``sparseopt_torch.prune._prune_layer`` per layer, method "prox" with the demo's options
(``experiment.DEMO_OPTIONS``: since 2026-11-25 the default "fast" schedule), pattern 2:4, no gradient steps; cost d_out d_in^2.

Measured in one run, each once (no time is asserted anywhere):

* ``in process [default]``: ``run_layer_jobs(jobs, on_done)``, torch threads ``--threads``
  (default 2), Numba and BLAS at their defaults (all cores for one layer at a time);
* ``in process, 1 thread``: the same with ``LayerExecutor(threads=1)``: the tasks' setting, so
  its results must equal Dask's bit for bit;
* ``Dask run``: ``LayerExecutor(workers=2).run(jobs, on_done)`` (2 single-threaded worker
  processes, heaviest first), after ``start-up``: starting the LocalCluster and a tiny prox
  job on every worker (it imports torch and sparseopt and loads the Numba kernels; the
  in-process runs get the same warm-up, not timed).

Ratios: the default in-process time over the Dask run, and over start-up + run (what one
``--workers 2`` call costs); the issue's target is >= 1.7x on 2 cores. Also the 1-thread
in-process time over the Dask run: the parallel gain alone, at most the number of workers.
On a loaded machine the 2-thread default suffers most (its thread pools spin while waiting
for cores), which inflates the first two ratios: read the load averages printed. The
weights, masks and losses of the Dask run are compared with both in-process runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from sparseopt.threads import set_idle_thread_env  # noqa: E402

set_idle_thread_env()  # before NumPy loads, as the sparseopt command does

import torch

from sparseopt.patterns import NM
from sparseopt_torch.data import calibration_eval_split, token_batches
from sparseopt_torch.distributed import LayerExecutor, LayerJob, _run_task, run_layer_jobs
from sparseopt_torch.evaluate import load_minilm
from sparseopt_torch.experiment import DEMO_OPTIONS
from sparseopt_torch.hessians import collect_hessians
from sparseopt_torch.layers import find_layers, get_weight
from sparseopt_torch.prune import _prune_layer


def make_jobs(layers, hess, options):
    """One prox LayerJob per layer (cost d_out d_in^2: a product with H per iteration)."""
    jobs = []
    for name, module in layers.items():
        W = get_weight(module).detach()
        jobs.append(LayerJob(name=name, fn=_prune_layer,
                             kwargs={"W_t": W, "H_t": hess.H[name], "method": "prox",
                                     "pattern": NM(2, 4), "refine_steps": 0,
                                     "options": options, "mask": None},
                             cost=float(W.shape[0]) * W.shape[1] ** 2))
    return jobs


def timed(run):
    """(wall seconds, {layer: result}) of ``run(on_done)``."""
    results = {}
    t0 = time.perf_counter()
    run(lambda name, res: results.__setitem__(name, res))
    return time.perf_counter() - t0, results


def compare(a, b):
    """Layers whose weights, masks or losses differ between two runs."""
    out = {"W": [], "mask": [], "loss": []}
    for name in a:
        if not torch.equal(a[name]["W"], b[name]["W"]):
            out["W"].append(name)
        if not torch.equal(a[name]["W"] != 0, b[name]["W"] != 0):
            out["mask"].append(name)
        if a[name]["loss"] != b[name]["loss"]:
            out["loss"].append(name)
    return out


def verdict(diff, n):
    return ", ".join(f"{k} {'identical' if not v else f'DIFFER in {len(v)}/{n}'}"
                     for k, v in diff.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the first block's 6 layers, 32 sentences")
    parser.add_argument("--layers", type=int, default=None,
                        help="the first this many layers (36; --quick 6)")
    parser.add_argument("--n-calib", type=int, default=None,
                        help="calibration sentences (128; --quick 32)")
    parser.add_argument("--workers", type=int, default=2, help="Dask workers (2)")
    parser.add_argument("--threads", type=int, default=2,
                        help="torch threads of the in-process default run (2)")
    args = parser.parse_args(argv)
    n_layers = args.layers if args.layers is not None else (6 if args.quick else 36)
    n_calib = args.n_calib if args.n_calib is not None else (32 if args.quick else 128)
    for name, v in (("layers", n_layers), ("n-calib", n_calib), ("workers", args.workers),
                    ("threads", args.threads)):
        if v < 1:
            parser.error(f"--{name} must be >= 1")
    torch.set_num_threads(args.threads)

    print("loading all-MiniLM-L6-v2 (offline), calibration sentences, Hessians ...", flush=True)
    st = load_minilm("cpu")
    body = st[0].auto_model
    sentences, _ = calibration_eval_split(n_calib, 0, seed=0)
    batches = token_batches(st.tokenizer, sentences, batch_size=16, max_length=64,
                            by_length=True)
    hess = collect_hessians(body, batches, progress=False)
    layers = dict(list(find_layers(body).items())[:n_layers])
    options = dict(DEMO_OPTIONS.get("prox", {}))
    jobs = make_jobs(layers, hess, options)
    print(f"{len(jobs)} prox layer jobs (options {options}), {n_calib} sentences, "
          f"{os.cpu_count()} cores, load average before {os.getloadavg()[0]:.2f}", flush=True)

    # Warm-up: Numba loads its compiled prox kernels on the first call in each process.
    tiny = {"W_t": torch.linspace(-1, 1, 32, dtype=torch.float64).reshape(4, 8),
            "H_t": torch.eye(8, dtype=torch.float64), "method": "prox", "pattern": NM(2, 4),
            "refine_steps": 0, "options": options, "mask": None}
    _prune_layer(**tiny)

    t_in, res_in = timed(lambda done: run_layer_jobs(jobs, done))
    print(f"  in process ({args.threads} threads): {t_in:.1f} s", flush=True)
    with LayerExecutor(threads=1) as ex:
        t_in1, res_in1 = timed(lambda done: ex.run(jobs, done))
    print(f"  in process (1 thread): {t_in1:.1f} s", flush=True)

    t0 = time.perf_counter()
    with LayerExecutor(workers=args.workers) as ex:
        # The same warm-up on every worker (imports torch, sparseopt and the kernels).
        ex.client.run(_run_task, _prune_layer, tiny, 1, None, {})
        t_start = time.perf_counter() - t0
        print(f"  Dask start-up ({args.workers} workers): {t_start:.1f} s", flush=True)
        t_dask, res_dask = timed(lambda done: ex.run(jobs, done))
        print(f"  Dask run: {t_dask:.1f} s", flush=True)
        t1 = time.perf_counter()
    t_close = time.perf_counter() - t1

    rows = [(f"in process, {args.threads} threads [default]", t_in),
            ("in process, 1 thread", t_in1),
            (f"Dask start-up ({args.workers} workers + imports)", t_start),
            (f"Dask run ({args.workers} workers x 1 thread)", t_dask),
            ("Dask start-up + run", t_start + t_dask),
            ("(Dask close, not counted)", t_close)]
    print()
    print(f"| {'variant':<42} | {'wall (s)':>8} | {'speed-up':>8} | {'vs 1 thread':>11} |")
    print(f"| {'-' * 42} | {'-' * 7}: | {'-' * 7}: | {'-' * 10}: |")
    for label, t in rows:
        timed_row = "start-up (" not in label and "close" not in label
        ratio = f"{t_in / t:.2f}x" if timed_row else ""
        ratio1 = f"{t_in1 / t:.2f}x" if timed_row else ""
        print(f"| {label:<42} | {t:>8.2f} | {ratio:>8} | {ratio1:>11} |")
    print()
    n = len(jobs)
    print(f"Dask vs in process, 1 thread:  {verdict(compare(res_dask, res_in1), n)}")
    print(f"Dask vs in process, {args.threads} threads: {verdict(compare(res_dask, res_in), n)}")
    s_run, s_all = t_in / t_dask, t_in / (t_start + t_dask)
    print(f"target (issue 10): Dask with {args.workers} workers >= 1.7x in process; measured "
          f"{s_run:.2f}x on the run ({'met' if s_run >= 1.7 else 'NOT met'}), {s_all:.2f}x "
          f"with start-up ({'met' if s_all >= 1.7 else 'NOT met'}); parallel gain over the "
          f"1-thread run {t_in1 / t_dask:.2f}x (the most {args.workers} free cores can give: "
          f"{args.workers}x); load average after {os.getloadavg()[0]:.2f} (other processes "
          "take cores too: compare with a quiet machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
