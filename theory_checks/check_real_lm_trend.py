"""prox24-kubler App. D.2 (Tables 5-6) on a real pretrained LLM: the calibration-size trend.

Measurement: ``benchmarks/real_lm.py`` (as in the check ``real_lm``) prunes SmolLM2-135M-Instruct
to 2:4 with sparsegpt and prox, each with 100 masked gradient steps (+GD), from 16, 64 and 256
calibration sequences of 512 tokens of news text (quick: 2, 8 and 32 of 128 tokens), and
measures the held-out perplexity. The check reads the benchmark's three tables and runs the
benchmark for the runs they lack (finished runs are reused).

What would make it fail: a +GD method whose perplexity does not fall from 16 to 64 to 256
sequences, or prox+GD not below sparsegpt+GD at one of the sizes. The paper measures a 3B
model on C4 / WikiText-2 from 1 to 2048 sequences of 2048 tokens; at 135M parameters and on
our text the trend may not reproduce, and the check then records it as failed, with the
figures.
"""

from __future__ import annotations

from ._report import claim, figure, header, verdict
from .check_real_lm import _table

NAME = "real_lm_trend"

#: The methods of the trend (the paper's Tables 5-6 also show wanda and wanda+GD).
TREND = ("sparsegpt", "prox")


def run(out_dir, quick=False):
    """Read (or make) the three tables, print the trend, record the D.2 claims."""
    header(NAME, "prox24-kubler App. D.2: perplexity against the number of calibration "
                 "sequences on SmolLM2-135M-Instruct at 2:4 (benchmarks/real_lm.py).")
    n, L = (8, 128) if quick else (64, 512)
    sizes = (n // 4, n, 4 * n)
    trend = {k: _table(k, L, TREND)[0] for k in sizes}
    for k in sizes:
        figure(f"calibration {k} x {L}", ", ".join(
            f"{m}+GD {trend[k][m + '+GD']:.2f}" for m in TREND))
    curves = {m: [trend[k][m + "+GD"] for k in sizes] for m in TREND}
    ok = [claim("kubler-d2-calibration-lm",
                f"perplexity at {' / '.join(map(str, sizes))} sequences: " + "; ".join(
                    f"{m}+GD " + " / ".join(f"{v:.2f}" for v in c) for m, c in curves.items()),
                all(a > b for c in curves.values() for a, b in zip(c, c[1:]))),
          claim("kubler-d2-prox-best-lm",
                "prox+GD / sparsegpt+GD at " + ", ".join(
                    f"{k}: {trend[k]['prox+GD']:.2f} / {trend[k]['sparsegpt+GD']:.2f}"
                    for k in sizes),
                all(trend[k]["prox+GD"] < trend[k]["sparsegpt+GD"] for k in sizes))]
    return verdict(NAME, all(ok), f"{sum(ok)}/{len(ok)} claims hold on SmolLM2-135M")
