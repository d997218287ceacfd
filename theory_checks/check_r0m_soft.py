"""r_{0:M} is the l1 norm, so its prox is soft-thresholding.

r_{0:M}(w) = e_1(|w|) = sum_i |w_i| (prox24-kubler eq. 6 with N = 0), hence
prox_{lam r_{0:M}}(y) = sign(y) max(|y| - lam, 0) coordinatewise (proxsparse-liu Fact 5 is
the one-dimensional case). Checked for every ``prox_nm`` method that accepts ``n = 0`` (the
others must refuse it with a ValueError, which is reported), for M in {1, 2, 4, 8}, and for
the sorted-domain EnumALM kernel ``enum_alm_sorted(z, lam, 0, ...)`` directly (its
alternating soft-thresholding with e_0 = 1 must reduce to one soft-threshold), against the
explicit formula, on y ~ N(0, 1) with exact zeros, ties and both signs, in float64 and
float32. Criterion: max abs difference <= 1e-12 (float64) and <= 1e-6 (float32).
"""

from __future__ import annotations

import numpy as np

from sparseopt import NM
from sparseopt.regularizers import r_nm_groups

from ._report import figure, header, savefig, verdict

NAME = "r0m_soft"


def _inputs(rng, groups, m, dtype):
    y = rng.standard_normal((groups, m))
    y[::7, 0] = 0.0  # exact zeros
    y[1::5] = np.round(y[1::5], 1)  # ties
    if m > 1:
        y[2::9, 1] = -y[2::9, 0]  # equal magnitude, opposite sign
    return y.astype(dtype)


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm
    from sparseopt.prox.alm import enum_alm_sorted

    header(NAME, "prox of lam r_{0:M} = lam ||.||_1 is soft-thresholding sign(y) max(|y| - lam, 0)")
    rng = np.random.default_rng(0)
    groups = 500 if quick else 5000
    lams = [0.0, 0.1, 0.5, 1.0, 3.0]
    worst = {}
    refused = []
    for meth in ("alm", "pgd", "ipm"):
        for m in (1, 2, 4, 8):
            for dtype in (np.float64, np.float32):
                y = _inputs(rng, groups, m, dtype)
                err = 0.0
                try:
                    for lam in lams:
                        w = prox_nm(y, lam, 0, m, method=meth)
                        ref = np.sign(y) * np.maximum(np.abs(y) - dtype(lam), 0)
                        if w.dtype != y.dtype or w.shape != y.shape:  # a silent dtype change fails
                            figure("wrong output", f"{meth}: {w.dtype}{w.shape} for {y.dtype}{y.shape}")
                            err = np.inf
                            continue
                        err = max(err, float(np.max(np.abs(w.astype(np.float64) - ref.astype(np.float64)))))
                except ValueError as exc:
                    refused.append(f"{meth} (M={m}): {exc}")
                    break
                worst[(meth, m, np.dtype(dtype).name)] = err
    for meth in ("alm", "pgd", "ipm"):
        got = {k: v for k, v in worst.items() if k[0] == meth}
        if got:
            figure(f"prox_nm(method={meth!r}, n=0)",
                   ", ".join(f"M={k[1]} {k[2]}: {v:.1e}" for k, v in got.items()))
    for r in refused:
        figure("refused n=0", r)

    # the EnumALM kernel itself, with n = 0, in the sorted domain
    z = np.sort(np.abs(rng.standard_normal((groups, 4))), axis=1)[:, ::-1].copy()
    z[::3, 3] = 0.0
    kernel_err = 0.0
    for lam in lams:
        w = enum_alm_sorted(z, lam, 0, 1e-14, 1000)
        kernel_err = max(kernel_err, float(np.max(np.abs(w - np.maximum(z - lam, 0.0)))))
    figure("enum_alm_sorted(z, lam, n=0)", f"max |w - max(z - lam, 0)| = {kernel_err:.1e}")
    l1_err = float(np.max(np.abs(r_nm_groups(z, NM(0, 4))[..., 0] - np.abs(z).sum(axis=1))))
    figure("r_{0:4}(w) - ||w||_1", f"{l1_err:.1e}")

    import matplotlib.pyplot as plt

    yy = np.linspace(-2, 2, 401)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for meth in ("alm", "pgd", "ipm"):
        if (meth, 4, "float64") in worst:
            ax.plot(yy, prox_nm(np.repeat(yy, 4).reshape(-1, 4), 0.5, 0, 4, method=meth)[:, 0],
                    ls={"alm": "-", "pgd": "--", "ipm": ":"}[meth], label=f"{meth}, lam=0.5")
    ax.plot(yy, np.sign(yy) * np.maximum(np.abs(yy) - 0.5, 0), "k", lw=0.6, label="soft threshold")
    ax.set_xlabel("y")
    ax.set_ylabel("prox")
    ax.legend(fontsize=8)
    savefig(fig, out_dir, "r0m_soft.png")

    ok = bool(worst) and kernel_err <= 1e-12 and l1_err <= 1e-12 and all(
        v <= (1e-12 if k[2] == "float64" else 1e-6) for k, v in worst.items()
    ) and ("alm", 4, "float64") in worst
    return verdict(NAME, ok, f"{len(worst)} method/M/dtype cases, worst {max(worst.values()):.1e}"
                             if worst else "no method accepted n=0")
