"""End to end through the CLI on MiniLM: wall time and fidelity of every method.

Usage::

    python benchmarks/adapter_cli_minilm.py                       # every method, demo settings
    python benchmarks/adapter_cli_minilm.py --method wanda --method sparsegpt   # a subset

For each method, one child process runs ``sparseopt prune --out DIR --method M`` (the demo's
settings: 128 calibration sentences of at most 64 tokens, 100 masked gradient steps, the
modest per-method options), so the wall time includes starting Python, loading the model,
the calibration data, the block-streaming engine, the method and +GD. Then
``sparseopt eval DIR`` measures the fidelity of every run on the 256 held-out sentences. The
table joins both: wall time of the whole command, method time (summed over layers), sum of
relative local losses and mean cosine to the dense embeddings, with and without +GD.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--method", action="append", default=None,
                   help="method to run (repeat); default every registered one")
    p.add_argument("--out", default=None, help="keep the runs here (default: a temp dir)")
    args = p.parse_args(argv)
    from sparseopt.layer import methods

    chosen = args.method or list(methods())
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "cmp")
        wall = {}
        for method in chosen:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sparseopt.cli", "prune", "--out", out,
                            "--method", method], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall[method] = time.perf_counter() - t0
            print(f"  {method}: {wall[method]:.1f} s", flush=True)
        subprocess.run([sys.executable, "-m", "sparseopt.cli", "eval", out], check=True,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(out, "comparison.json")) as fh:
            rows = json.load(fh)["rows"]
    print("\nMiniLM through `sparseopt prune --out DIR --method M` and `sparseopt eval DIR` "
          "(demo settings)")
    print("| method | command wall [s] | method time [s] | sum rel. loss | mean cosine |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        base = r["method"].removesuffix("+GD")
        print(f"| {r['method']} | {wall.get(base, float('nan')):.1f} | {r['time']:.1f} | "
              f"{r['rel_loss_sum']:.4f} | {r['mean_cosine']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
