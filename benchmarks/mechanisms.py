"""Each performance mechanism of the kernel layer against the code without it, on a user's
whole job, in one run (issue 43 item 5: keep a mechanism only where it saves >= 5%).

Usage::

    python benchmarks/mechanisms.py                        # every mechanism, 4096 x 4096
    python benchmarks/mechanisms.py --size 512 --only env screen

The whole jobs:

* ``layer``: ``sparseopt.prune(W, H, "prox")`` of one ``--size`` x ``--size`` layer
  (W ~ N(0, 1) float32, ``correlated_hessian``), the layer benchmark
  (``benchmarks/layer.py``): the whole run, about 70 iterations. ``--iters`` caps them for
  a quick look only: a mechanism's share changes along the path (the 2-sparse certificate
  pays late, where most groups are 2-sparse; the first 10 iterations showed the free list
  and the certificate as costing 1%, the whole run as saving 17% and 11%).
* ``small``: the same at 1536 x 384 (MiniLM's MLP shape, ``make demo``) with ``prox`` and
  ``sparsegpt``: the BLAS limiter acts only on matrices up to 512 wide.
* ``stream``: ``prune_model(..., method="wanda")`` of a random Llama folder (``--llama``
  blocks x hidden) read block by block from disk (``load_model(offload=True)``): time and
  peak resident memory of the process (``ru_maxrss``).

The mechanisms (A = with it, as the code is; B = without it):

* ``env``: ``OPENBLAS_THREAD_TIMEOUT=4`` and ``GOMP_SPINCOUNT=10000`` (what the ``sparseopt``
  command sets) against both libraries' defaults; a child process per run (both libraries
  read their variable when they load).
* ``malloc_trim``: ``return_freed_memory`` after each layer and block against a no-op; a
  child per run (peak memory is per process).
* ``free_list``: ``proximal_gradient``'s free arrays (``_Buffers``) against a fresh
  ``np.empty`` each time; in one process.
* ``kernel24``: the 2:4 kernel of ``sparseopt.prox.alm`` against the generic N:M kernel
  (``enum_alm_rows(..., generic=True)``); in one process.
* ``screen``: the 2:4 kernel's 2-sparse certificate against none (``screen=False``).
* ``blas_limiter``: ``small_lapack``'s one-BLAS-thread limit (``sparseopt.threads``) against
  none, on the ``small`` job (at 4096 it does not act).
* ``serial_small``: ``parallel_kernel``'s serial compilation for calls below its size
  (``sparseopt.threads``) against the parallel kernel at every size, on the ``path`` job: a
  lasso path (``prox_path``, 6 lambdas, 3000 FISTA iterations each) of a 50 x 15
  regression, three kernel calls an iteration (at 4096 it does not act).
* ``cuda24``: the torch adapter's 2:4 prox of a CUDA tensor by the core's kernel compiled
  for the GPU against the host kernel on a copy (only with a GPU; the prox is all of an
  iteration's time on a GPU, so the kernel's time stands for the job's).

Runs alternate A B A B ... (``--rounds`` each, after one warm-up of each in the in-process
cases) so that both see the same load; the table gives the median and the spread
(min-max) of each, the saving ``1 - A / B`` of the medians, and whether the results of A
and B are the same bits (SHA-256 of the pruned weights).

Mechanisms this script measured and that were removed for it (``wide_vectors``, the
512-bit vector attribute of ``sparseopt.simd``) are measured by the version of this
script in commit 08d20df (run it in a checkout of that commit); their figures are in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PROCESS = ("env", "malloc_trim")
INPROCESS = ("free_list", "kernel24", "screen", "blas_limiter", "serial_small", "cuda24")
ALL = PROCESS + INPROCESS
#: What the ``sparseopt`` command sets (``sparseopt.threads.IDLE_THREAD_ENV``) and the
#: libraries' own defaults.
ENV_ON = {"OPENBLAS_THREAD_TIMEOUT": "4", "GOMP_SPINCOUNT": "10000"}
ENV_OFF = {"OPENBLAS_THREAD_TIMEOUT": "0", "GOMP_SPINCOUNT": "300000"}


# ----------------------------------------------------------------------------------------
# jobs (run in children)


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes() if hasattr(a, "tobytes") else a.cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _layer(data, d_out, d_in):
    import numpy as np

    path = os.path.join(data, f"layer{d_out}x{d_in}.npz")
    if not os.path.exists(path):
        from sparseopt.problems import correlated_hessian

        W = np.random.default_rng(0).standard_normal((d_out, d_in)).astype(np.float32)
        np.savez(path + ".tmp.npz", W=W, H=correlated_hessian(d_in, seed=1))
        os.replace(path + ".tmp.npz", path)
    f = np.load(path)
    return f["W"], f["H"]


def layer_job(data, size, iters):
    """The prox pruning of one size x size layer (``iters``: a cap, None for the whole run):
    () -> (seconds, digest)."""
    from sparseopt import prune

    W, H = _layer(data, size, size)

    def run():
        t0 = time.perf_counter()
        res = prune(W, H, "prox", progress=False, **({} if iters is None else {"max_iter": iters}))
        return time.perf_counter() - t0, _digest(res.W)
    return run


def small_job(data, iters):
    """prox and sparsegpt on a 1536 x 384 layer (MiniLM's MLP shape)."""
    from sparseopt import prune

    W, H = _layer(data, 1536, 384)

    def run():
        t0 = time.perf_counter()
        a = prune(W, H, "prox", progress=False, **({} if iters is None else {"max_iter": iters}))
        b = prune(W, H, "sparsegpt")
        return time.perf_counter() - t0, _digest(a.W, b.W)
    return run


def _llama_folder(data, blocks, hidden):
    """A random Llama (``blocks`` x ``hidden``, intermediate 2.75 hidden) saved like a user's
    checkpoint, with a word-level tokenizer (no download)."""
    folder = os.path.join(data, f"llama{blocks}x{hidden}")
    if os.path.exists(os.path.join(folder, "done")):
        return folder
    import torch
    from tokenizers import Tokenizer, models
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    cfg = LlamaConfig(vocab_size=8192, hidden_size=hidden, intermediate_size=hidden * 11 // 4,
                      num_hidden_layers=blocks, num_attention_heads=hidden // 64,
                      num_key_value_heads=hidden // 128, max_position_embeddings=256)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(folder)
    vocab = {"[UNK]": 0, "[PAD]": 1}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")),
        unk_token="[UNK]", pad_token="[PAD]")
    tok.save_pretrained(folder)
    open(os.path.join(folder, "done"), "w").close()
    return folder


def stream_job(data, blocks, hidden):
    """prune_model(wanda) of the random Llama read block by block from disk."""
    import torch
    from sparseopt_torch.models import load_model
    from sparseopt_torch.prune import prune_model

    folder = _llama_folder(data, blocks, hidden)
    g = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(2, 8192, (4, 128), generator=g),
                "attention_mask": torch.ones(4, 128, dtype=torch.long)} for _ in range(4)]

    def run():
        t0 = time.perf_counter()
        model, _, weights = load_model(folder, offload=True)
        with tempfile.TemporaryDirectory() as out:
            prune_model(model, batches, method="wanda", weights=weights, out=out,
                        progress=False)
            from safetensors.numpy import load_file

            layers = sorted(f for f in os.listdir(os.path.join(out, "layers"))
                            if f.endswith(".safetensors"))
            digest = _digest(*[v for f in layers
                               for v in load_file(os.path.join(out, "layers", f)).values()])
        return time.perf_counter() - t0, digest
    return run


# ----------------------------------------------------------------------------------------
# the mechanisms switched off (B)


@contextlib.contextmanager
def switched_off(name):
    """The code without mechanism ``name`` (in-process ones) while the block runs."""
    if name == "free_list":
        import numpy as np
        from sparseopt.solvers import proxgrad

        old = proxgrad._Buffers.take
        proxgrad._Buffers.take = lambda self: np.empty(self.shape, dtype=self.dtype)
        try:
            yield
        finally:
            proxgrad._Buffers.take = old
    elif name in ("kernel24", "screen"):
        import sparseopt.prox as prox

        old = prox.enum_alm_rows
        prox.enum_alm_rows = functools.partial(
            old, **({"generic": True} if name == "kernel24" else {"screen": False}))
        try:
            yield
        finally:
            prox.enum_alm_rows = old
    elif name == "serial_small":
        from sparseopt.threads import PARALLEL_KERNELS

        old = {k: kernel.min_entries for k, kernel in PARALLEL_KERNELS.items()}
        for kernel in PARALLEL_KERNELS.values():
            kernel.min_entries = 0
        try:
            yield
        finally:
            for k, kernel in PARALLEL_KERNELS.items():
                kernel.min_entries = old[k]
    elif name == "blas_limiter":
        import sparseopt.linalg as linalg

        old = linalg.one_blas_thread
        linalg.one_blas_thread = contextlib.nullcontext
        try:
            yield
        finally:
            linalg.one_blas_thread = old
    else:
        raise ValueError(name)


def _cuda24_pair(size):
    """(A, B) runs of the adapter's prox24 on a size x size CUDA tensor."""
    import torch
    from sparseopt_torch.kernels import prox24

    Y = torch.randn(size, size, generator=torch.Generator().manual_seed(0)).cuda()

    def make(kernel):
        def run():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            w = prox24(Y, 0.3, kernel=kernel)
            torch.cuda.synchronize()
            return time.perf_counter() - t0, _digest(w)
        return run
    return make("cuda"), make("host")


# ----------------------------------------------------------------------------------------
# children


def path_job():
    """The lasso path of a 50 x 15 regression (``prox_path``): () -> (seconds, digest)."""
    import numpy as np
    from sparseopt.objectives import LeastSquares
    from sparseopt.paths import prox_path

    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 15))
    f = LeastSquares(X, X[:, :3].sum(axis=1) + 0.1 * rng.standard_normal(50))

    def run():
        t0 = time.perf_counter()
        path = prox_path(f, n_lams=6, eps=1e-2, max_iter=3000)
        return time.perf_counter() - t0, _digest(path.coefs)
    return run


def child(args):
    spec = json.loads(args.child)
    name, variant, p = spec["name"], spec["variant"], spec["params"]
    if name in PROCESS:
        if name == "malloc_trim":
            if variant == "B":
                import sparseopt_torch.prune as adapter_prune

                adapter_prune.return_freed_memory = lambda: None
            job = stream_job(p["data"], *p["llama"])
        else:
            job = layer_job(p["data"], p["size"], p["iters"])
            if spec.get("warm"):  # compile (or load) the kernels outside the timed run
                layer_job(p["data"], 256, 2)()
        seconds, digest = job()
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux: KiB)
        print(json.dumps({"A": [[seconds, digest, rss]]} if variant == "A"
                         else {"B": [[seconds, digest, rss]]}))
        return 0
    # in-process A/B: one warm-up each, then A B A B ...
    if name == "cuda24":
        import torch

        if not torch.cuda.is_available():
            print(json.dumps({"skipped": "no CUDA device"}))
            return 0
        a, b = _cuda24_pair(p["size"])

        def runs(off):
            return b if off else a
    else:
        job = (small_job(p["data"], p["iters"]) if name == "blas_limiter"
               else path_job() if name == "serial_small"
               else layer_job(p["data"], p["size"], p["iters"]))

        def runs(off):
            if not off:
                return job

            def run():
                with switched_off(name):
                    return job()
            return run
    runs(False)()
    runs(True)()
    out = {"A": [], "B": []}
    for _ in range(p["rounds"]):
        out["A"].append(list(runs(False)()) + [None])
        out["B"].append(list(runs(True)()) + [None])
    print(json.dumps(out))
    return 0


def _spawn(name, variant, params, env_extra=None, drop=(), warm=False):
    env = dict(os.environ)
    for key in drop:
        env.pop(key, None)
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT, os.path.join(ROOT, "adapters"), HERE] + [env.get("PYTHONPATH", "")])
    spec = json.dumps({"name": name, "variant": variant, "params": params, "warm": warm})
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", spec],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{name} {variant} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(name, params):
    """{"A": [[s, digest, rss], ...], "B": [...]} of mechanism ``name``."""
    if name in INPROCESS:
        env = dict(ENV_ON)
        return _spawn(name, "A", params, env)
    out = {"A": [], "B": []}
    for r in range(params["rounds"]):
        for variant in "AB":
            env, drop = dict(ENV_ON), ("OMP_WAIT_POLICY",)
            if name == "env" and variant == "B":
                env = dict(ENV_OFF)
            res = _spawn(name, variant, params, env, drop, warm=True)
            out[variant] += res[variant]
            print(f"[mechanisms] {name} round {r + 1} {variant}: {res[variant][0][0]:.2f} s",
                  file=sys.stderr, flush=True)
    return out


def _cpu():
    """The CPU's model, core count and whether it has AVX-512F."""
    model, avx512 = "?", False
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                avx512 = avx512 or "avx512f" in line.split()
    return f"{model}, {os.cpu_count()} cpus, AVX-512F {'yes' if avx512 else 'no'}"


def _row(name, job, res):
    if "skipped" in res:
        return f"| {name} | {job} | skipped: {res['skipped']} | | | | |"
    a = [r[0] for r in res["A"]]
    b = [r[0] for r in res["B"]]
    same = len({r[1] for r in res["A"] + res["B"]}) == 1
    ma, mb = statistics.median(a), statistics.median(b)
    row = (f"| {name} | {job} | {ma:.2f} ({min(a):.2f}-{max(a):.2f}) | "
           f"{mb:.2f} ({min(b):.2f}-{max(b):.2f}) | {100 * (1 - ma / mb):+.1f}% | "
           f"{'yes' if same else 'NO'} |")
    if res["A"][0][2] is not None:
        ra = statistics.median(r[2] for r in res["A"])
        rb = statistics.median(r[2] for r in res["B"])
        row += f" peak RSS {ra:.0f} vs {rb:.0f} MiB ({100 * (1 - ra / rb):+.1f}%) |"
    else:
        row += " |"
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=ALL, default=list(ALL))
    parser.add_argument("--size", type=int, default=4096, help="layer job: size x size")
    parser.add_argument("--iters", type=int, default=None,
                        help="cap on the prox iterations of a job (default: the whole run)")
    parser.add_argument("--rounds", type=int, default=3, help="A/B runs of each (>= 1)")
    parser.add_argument("--llama", default="32x768",
                        help="stream job: BLOCKSxHIDDEN of the random Llama (32x768)")
    parser.add_argument("--data", default=None, help="folder for the inputs (default: temp)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.rounds < 1 or (args.iters or 1) < 1 or args.size < 4 or args.size % 4:
        parser.error("--rounds and --iters must be >= 1, --size a multiple of 4")
    try:
        llama = [int(v) for v in args.llama.lower().split("x")]
    except ValueError:
        parser.error(f"--llama must look like 32x768, got {args.llama!r}")
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or tmp
        os.makedirs(data, exist_ok=True)
        params = {"data": data, "size": args.size, "iters": args.iters,
                  "rounds": args.rounds, "llama": llama}
        jobs = {"malloc_trim": f"stream {args.llama}", "blas_limiter": "1536x384 prox+sparsegpt",
                "serial_small": "lasso path 50x15",
                "cuda24": f"prox24 {args.size}x{args.size} CUDA"}
        print(f"[mechanisms] {_cpu()}, size {args.size}, prox iterations "
              f"{args.iters or 'all'}, {args.rounds} rounds", flush=True)
        rows = []
        for name in args.only:
            t0 = time.perf_counter()
            try:
                res = measure(name, params)
            except RuntimeError as exc:  # a child failed: report it, measure the others
                print(f"[mechanisms] {exc}", file=sys.stderr, flush=True)
                res = {"skipped": str(exc).splitlines()[0]}
            job = jobs.get(name, f"layer {args.size}x{args.size}")
            rows.append(_row(name, job, res))
            print(rows[-1] + f"  [{time.perf_counter() - t0:.0f} s]", flush=True)
    print()
    print("| mechanism | job | with (s): median (min-max) | without (s) | saved | same bits "
          "| memory |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
