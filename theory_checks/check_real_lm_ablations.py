"""prox24-kubler's ablations (App. D.1 and D.2, Tables 4-6) on a real pretrained LLM.

Measurement: ``benchmarks/real_lm.py`` (as in the check ``real_lm``) prunes SmolLM2-135M-Instruct
to 2:4 with sparsegpt and prox, one-shot and with 100 masked gradient steps (+GD):
- App. D.1: from 64 calibration sequences of 512 tokens in both modes, Hessians of the dense
  model (independent) and of the model pruned so far (``--sequential``);
- App. D.2: from 16, 64 and 256 calibration sequences (independent, +GD rows).
Quick: 8 sequences of 128 tokens (trend 2 / 8 / 32). The check reads the benchmark's tables
and runs the benchmark for the runs they lack (finished runs are reused).

What would make it fail: D.1, a sequential-vs-independent perplexity change above 10% or the
sequential mode lower in every comparison; D.2, a +GD method whose perplexity does not fall
from 16 to 64 to 256 sequences, or prox+GD not below sparsegpt+GD at one of the sizes. The
paper measures 3B-13B models on C4 / WikiText-2; at 135M parameters and on our text a claim
may not reproduce, and the check then records it as failed, with the figures.
"""

from __future__ import annotations

from ._report import claim, figure, header, verdict
from .check_real_lm import _table

NAME = "real_lm_ablations"

#: The methods of both ablations (the paper's Tables 5-6 also show wanda and wanda+GD).
METHODS = ("sparsegpt", "prox")


def run(out_dir, quick=False):
    """Read (or make) the tables, print them, record the App. D.1 and D.2 claims."""
    header(NAME, "prox24-kubler App. D.1 (sequential mode) and D.2 (calibration size) on "
                 "SmolLM2-135M-Instruct at 2:4 (benchmarks/real_lm.py).")
    n, L = (8, 128) if quick else (64, 512)
    ppl = _table(n, L, METHODS, METHODS)[0]
    change = {m + " " + (g or "one-shot"): (ppl[m + g + " (sequential)"] - ppl[m + g])
              / ppl[m + g] for m in METHODS for g in ("", "+GD")}
    ok = [claim("kubler-d1-sequential-lm",
                "sequential vs independent perplexity change: " + ", ".join(
                    f"{k} {v:+.1%}" for k, v in change.items())
                + f"; max |change| {max(map(abs, change.values())):.1%} (needs <= 10%), "
                  f"sequential lower in {sum(v < 0 for v in change.values())}/{len(change)}"
                  " (needs < all)",
                max(map(abs, change.values())) <= 0.10
                and not all(v < 0 for v in change.values()))]
    sizes = (n // 4, n, 4 * n)
    trend = {k: _table(k, L, METHODS)[0] if k != n else ppl for k in sizes}
    for k in sizes:
        figure(f"calibration {k} x {L}", ", ".join(
            f"{m}+GD {trend[k][m + '+GD']:.2f}" for m in METHODS))
    curves = {m: [trend[k][m + "+GD"] for k in sizes] for m in METHODS}
    ok.append(claim("kubler-d2-calibration-lm",
                    f"perplexity at {' / '.join(map(str, sizes))} sequences: " + "; ".join(
                        f"{m}+GD " + " / ".join(f"{v:.2f}" for v in c)
                        for m, c in curves.items()),
                    all(a > b for c in curves.values() for a, b in zip(c, c[1:]))))
    ok.append(claim("kubler-d2-prox-best-lm",
                    "prox+GD / sparsegpt+GD at " + ", ".join(
                        f"{k}: {trend[k]['prox+GD']:.2f} / {trend[k]['sparsegpt+GD']:.2f}"
                        for k in sizes),
                    all(trend[k]["prox+GD"] < trend[k]["sparsegpt+GD"] for k in sizes)))
    return verdict(NAME, all(ok), f"{sum(ok)}/{len(ok)} claims hold on SmolLM2-135M")
