"""r_{0:M} is the l1 norm, so its prox is soft-thresholding.

r_{0:M}(w) = e_1(|w|) = sum_i |w_i| (prox24-kubler eq. 6 with N = 0), hence
prox_{lam r_{0:M}}(y) = sign(y) max(|y| - lam, 0) coordinatewise (proxsparse-liu Fact 5 is
the one-dimensional case).

``prox_nm(y, lam, 0, M)`` answers with the closed form ``closed_form.prox_r0m`` for every
method, so comparing it with the formula alone would test one transcription against
another. The references here are independent of that closed form:

1. the general N:M solver forced through n = 0: the EnumALM kernel on the signed, unsorted
   groups (``alm.enum_alm_rows(y, lam, 0, ...)``, its own Lemma 3 reduction, support
   enumeration and alternating soft-thresholding with e_0 = 1) and on sorted groups
   (``enum_alm_sorted(z, lam, 0, ...)``);
2. the multi-start brute force ``prox_bruteforce(y, lam, NM(0, M))`` (L-BFGS-B on
   0.5 ||u - |y|||^2 + lam e_1(u), no sorting, no closed form) on a subsample, M in {1, 2, 4}:
   the closed form must not be worse than brute force (objective excess <= 1e-12 relative)
   and must agree with it in w to 1e-7 (L-BFGS-B accuracy);
3. the explicit formula sign(y) max(|y| - lam, 0) (a transcription of Fact 5), and
   r_nm_groups(w, NM(0, M)) = ||w||_1 (eq. 6 with N = 0).

On y ~ N(0, 1) with exact zeros, ties and both signs, M in {1, 2, 4, 8}, lam in {0, 0.1, 0.5,
1, 3}, float64 and float32 (dtype and shape of the result checked). Methods that refuse
n = 0 with a ValueError are reported. Criterion: max abs difference of ``prox_nm`` from the
ALM kernel and from the formula <= 1e-12 (float64) / 1e-6 (float32); kernels vs the formula
<= 1e-12; brute force as in 2.

Claim ``liu-fact5-r0m-soft``. What would make it fail: a closed form with a wrong threshold
(e.g. lam / 2 or 2 lam), hard instead of soft thresholding, a lost sign, a changed dtype.
"""

from __future__ import annotations

import numpy as np

from sparseopt import NM
from sparseopt.regularizers import prox_objective, r_nm_groups

from ._report import claim, figure, header, savefig, verdict

NAME = "r0m_soft"
LAMS = (0.0, 0.1, 0.5, 1.0, 3.0)


def _inputs(rng, groups, m, dtype):
    y = rng.standard_normal((groups, m))
    y[::7, 0] = 0.0  # exact zeros
    y[1::5] = np.round(y[1::5], 1)  # ties
    if m > 1:
        y[2::9, 1] = -y[2::9, 0]  # equal magnitude, opposite sign
    return y.astype(dtype)


def soft(y, lam):
    """Fact 5 transcribed: sign(y) max(|y| - lam, 0), in float64."""
    y = np.asarray(y, dtype=np.float64)
    return np.sign(y) * np.maximum(np.abs(y) - lam, 0.0)


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm
    from sparseopt.prox.alm import enum_alm_rows, enum_alm_sorted
    from sparseopt.prox.reference import prox_bruteforce

    header(NAME, "prox of lam r_{0:M} = lam ||.||_1 is soft-thresholding sign(y) max(|y| - lam, 0)")
    rng = np.random.default_rng(0)
    groups = 500 if quick else 5000
    worst = {}  # (method, M, dtype) -> max |prox_nm - ALM kernel|, |prox_nm - formula|
    refused = []
    bad_output = []
    for meth in ("alm", "pgd", "ipm"):
        for m in (1, 2, 4, 8):
            for dtype in (np.float64, np.float32):
                y = _inputs(rng, groups, m, dtype)
                e_kernel = e_formula = 0.0
                try:
                    for lam in LAMS:
                        w = prox_nm(y, lam, 0, m, method=meth)
                        if w.dtype != y.dtype or w.shape != y.shape:  # a silent dtype change fails
                            bad_output.append(f"{meth}: {w.dtype}{w.shape} for {y.dtype}{y.shape}")
                            continue
                        w64 = w.astype(np.float64)
                        # the general solver with n = 0, on the float64 input (it computes in
                        # float64 for both dtypes)
                        y64 = np.ascontiguousarray(y.astype(np.float64))
                        ref, _, _ = enum_alm_rows(y64, lam, 0, 1e-14, 10_000)
                        e_kernel = max(e_kernel, float(np.max(np.abs(w64 - ref))))
                        e_formula = max(e_formula, float(np.max(np.abs(w64 - soft(y64, lam)))))
                except ValueError as exc:
                    refused.append(f"{meth} (M={m}): {exc}")
                    break
                worst[(meth, m, np.dtype(dtype).name)] = (e_kernel, e_formula)
    for meth in ("alm", "pgd", "ipm"):
        got = {k: v for k, v in worst.items() if k[0] == meth}
        if got:
            figure(f"prox_nm(method={meth!r}, n=0) vs ALM kernel / formula",
                   ", ".join(f"M={k[1]} {k[2]}: {v[0]:.1e}/{v[1]:.1e}" for k, v in got.items()))
    for r in refused:
        figure("refused n=0", r)
    for b in bad_output:
        figure("wrong output", b)

    # the sorted-domain kernel with n = 0
    z = np.sort(np.abs(rng.standard_normal((groups, 4))), axis=1)[:, ::-1].copy()
    z[::3, 3] = 0.0
    kernel_err = 0.0
    for lam in LAMS:
        w = enum_alm_sorted(z, lam, 0, 1e-14, 1000)
        kernel_err = max(kernel_err, float(np.max(np.abs(w - soft(z, lam)))))
        w, _, _ = enum_alm_rows(np.ascontiguousarray(z), lam, 0, 1e-14, 1000)
        kernel_err = max(kernel_err, float(np.max(np.abs(w - soft(z, lam)))))
    figure("ALM kernels with n=0 vs formula", f"{kernel_err:.1e}")
    l1_err = float(np.max(np.abs(r_nm_groups(z, NM(0, 4))[..., 0] - np.abs(z).sum(axis=1))))
    figure("r_{0:4}(w) - ||w||_1", f"{l1_err:.1e}")

    # independent brute force (multi-start L-BFGS-B on e_1), closed form must be as good
    n_bf = 8 if quick else 60
    bf_excess = bf_w = 0.0
    for m in (1, 2, 4):
        y = _inputs(rng, n_bf, m, np.float64)
        for lam in (0.1, 0.5, 1.0):
            w = prox_nm(y, lam, 0, m)
            wb = prox_bruteforce(y, lam, NM(0, m), starts=2)
            fw = prox_objective(w, y, lam, NM(0, m))[:, 0]
            fb = prox_objective(wb, y, lam, NM(0, m))[:, 0]
            bf_excess = max(bf_excess, float(np.max((fw - fb) / np.maximum(1.0, np.abs(fb)))))
            bf_w = max(bf_w, float(np.max(np.abs(w - wb))))
    figure("prox_nm(n=0) vs prox_bruteforce(NM(0, M)), M in {1, 2, 4}",
           f"objective excess {bf_excess:.1e}, max |w diff| {bf_w:.1e}")

    import matplotlib.pyplot as plt

    yy = np.linspace(-2, 2, 401)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for meth in ("alm", "pgd", "ipm"):
        if (meth, 4, "float64") in worst:
            ax.plot(yy, prox_nm(np.repeat(yy, 4).reshape(-1, 4), 0.5, 0, 4, method=meth)[:, 0],
                    ls={"alm": "-", "pgd": "--", "ipm": ":"}[meth], label=f"{meth}, lam=0.5")
    ax.plot(yy, soft(yy, 0.5), "k", lw=0.6, label="soft threshold")
    ax.set_xlabel("y")
    ax.set_ylabel("prox")
    ax.legend(fontsize=8)
    savefig(fig, out_dir, "r0m_soft.png")

    def tol(dt):
        return 1e-12 if dt == "float64" else 1e-6

    prox_ok = bool(worst) and not bad_output and ("alm", 4, "float64") in worst and all(
        max(v) <= tol(k[2]) for k, v in worst.items())
    w_max = max((max(v) for v in worst.values()), default=np.inf)
    ok = prox_ok and kernel_err <= 1e-12 and l1_err <= 1e-12 and bf_excess <= 1e-12 and bf_w <= 1e-7
    claim("liu-fact5-r0m-soft", f"{len(worst)} method/M/dtype cases: max |prox_nm - ALM kernel or formula| "
                             f"{w_max:.1e} (<= 1e-12 / 1e-6 for float32); kernels {kernel_err:.1e}; brute force "
                             f"excess {bf_excess:.1e}, w {bf_w:.1e} <= 1e-7", ok)
    return verdict(NAME, ok, f"{len(worst)} method/M/dtype cases, worst {w_max:.1e}; brute force {bf_w:.1e}")
