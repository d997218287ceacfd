"""prox24-kubler Corollary 6 (App. B.6): no spurious local minima; and footnote 3 (refuted).

Cor. 6: the set of local minima of f (eq. 10, on R^4) is convex, and if some minimizer of f
over R^4_+ is dense, every local minimum of f is a global one; the same for g (eq. 12, R^3).
Footnote 3 (Sec. 3.3) draws from it: "if w^(4) ... is a local minimum of f, by Corollary 6
this suffices to know it is the global optimum and there is no need to compute w^(2), w^(3)".

Instances (lam = 1, z = c z0 sorted, c = s z3/(z1 z2)(z0) with s log-uniform in [0.3, 3]
so that dense, 3-sparse and 2-sparse optima all occur; z0 iid |N(0, 1)| or, for a third
of them, nearly tied 1.6 + 0.02 |N(0, 1)| as in Fig. 1 (d)).

Local minima, found independently of the library: batched Newton on grad f = 0 (the
transcribed gradient and Hessian of ``check_kubler_lemma5``) from random starts in
[-0.5 z_1, 1.5 z_1]^k, plus w = 0 and w = z; a converged point (||grad|| <= 1e-11 (1 + z_1^2))
is a local minimum if its Hessian is positive definite (smallest eigenvalue > 1e-9; points
with a singular PSD Hessian are counted separately). Distinct: farther apart than 1e-6 z_1.
The optimum over R^k_+ is the library's EnumIPM (``enum_ipm_sorted``, Alg. 1 / Theorem 7),
2:4 for f and 2:3 on z_{1:3} for g.

Claims:

* ``kubler-cor6-f`` / ``kubler-cor6-g``: on every instance the local minima found have one
  value (rel. 1e-10); since strict local minima are isolated, a convex set of them has at
  most one point, so two distinct strict local minima would refute it (0 allowed); and on
  every instance whose optimum over R^k_+ is dense, every local minimum found is that
  optimum (w within 1e-6 z_1, f within 1e-10 relative), and at least one is found.
* ``kubler-footnote3``: REFUTED. There are inputs where f has a strict local minimum w^(4) in
  the open orthant (so it is the dense candidate of Alg. 1, eq. 14, with grad f = 0 and
  Hess f > 0) whose value is above that of the 3-sparse candidate: the optimum of eq. (9) is
  then 3-sparse and w^(4) is not global. Cor. 6 only says that all local minima are global
  when the *optimum over R^4_+* is dense, not when a dense local minimum exists. The claim is
  recorded as PASS when such counterexamples are found and the first one is confirmed by
  the independent ``prox_bruteforce`` (its optimum matches EnumIPM's, below f(w^(4)) by
  more than 1e-9): the check establishes the refutation. ``sparseopt.prox.alm`` does not use
  the shortcut (its docstring says so).

What would make it fail: two local minima with different values (Cor. 6 false or the
Newton/Hessian transcription wrong), an EnumIPM optimum that is dense but differs from a
local minimum (a wrong solver), or no footnote-3 counterexample on the instances (e.g. a
solver that returns the dense candidate whenever it is a local minimum).
"""

from __future__ import annotations

import numpy as np

from sparseopt.prox.thresholds import lemma10_thresholds

from ._report import claim, figure, header, savefig, verdict
from .check_kubler_lemma5 import gradient, hessian, objective

NAME = "kubler_cor6"
LAM = 1.0


def _instances(rng, count):
    z0 = np.sort(np.abs(rng.standard_normal((count, 4))), axis=1)[:, ::-1].copy()
    tied = np.arange(count) % 3 == 0
    z0[tied] = 1.6 + 0.02 * np.sort(np.abs(rng.standard_normal((int(tied.sum()), 4))), axis=1)[:, ::-1]
    z0 = np.maximum(z0, 1e-2)
    z0 = np.sort(z0, axis=1)[:, ::-1].copy()
    s = np.exp(rng.uniform(np.log(0.3), np.log(3.0), count))
    return z0 * (s * lemma10_thresholds(z0)[1])[:, None]


def local_minima(z, lam, starts, rng, iters=80):
    """Strict local minima of 0.5||w - z||^2 + lam e_3(w) on R^k, per row of z (k = z.shape[1]).

    Returns (list of arrays of distinct minima per row, number of converged PSD-singular points)."""
    G, k = z.shape
    z1 = z[:, :1]
    W0 = [np.zeros_like(z), z.copy()] + [z1 * rng.uniform(-0.5, 1.5, (G, k)) for _ in range(starts)]
    W = np.concatenate(W0)
    Z = np.tile(z, (len(W0), 1))
    scale = np.tile(z1[:, 0], len(W0))
    for _ in range(iters):
        g = gradient(W, Z, lam)
        H = hessian(W, np.full(len(W), lam))
        try:
            step = np.linalg.solve(H, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:  # a singular Hessian somewhere: tiny ridge
            step = np.linalg.solve(H + 1e-12 * np.eye(k), g[:, :, None])[:, :, 0]
        nrm = np.linalg.norm(step, axis=1)
        step *= np.minimum(1.0, scale / np.maximum(nrm, 1e-300))[:, None]  # at most z_1 per step
        W = W - step
        W = np.where(np.abs(W) < 1e6 * scale[:, None], W, np.nan)  # ran off to infinity
    g = gradient(W, Z, lam)
    conv = np.all(np.isfinite(W), axis=1)
    conv &= np.linalg.norm(np.where(np.isfinite(g), g, np.inf), axis=1) <= 1e-11 * (1.0 + scale**2)
    ev = np.full(len(W), -np.inf)
    ev[conv] = np.linalg.eigvalsh(hessian(W[conv], np.full(int(conv.sum()), lam)))[:, 0]
    strict = conv & (ev > 1e-9)
    singular = int(np.sum(conv & (ev >= -1e-9) & (ev <= 1e-9)))
    out = []
    for r in range(G):
        cand = W[r::G][strict[r::G]]
        uniq = []
        for c in cand:
            if all(np.max(np.abs(c - u)) > 1e-6 * z[r, 0] for u in uniq):
                uniq.append(c)
        out.append(np.array(uniq).reshape(-1, k))
    return out, singular


def _cor6(z, lam, wstar, mins):
    """Counts for Cor. 6 on one problem family: (instances with >= 2 distinct minima or
    unequal values, dense-optimum instances, of them with a local minimum != optimum or none
    found, distinct-minima histogram)."""
    fstar = objective(wstar, z, lam)
    multi = 0
    dense = np.all(wstar > 0, axis=1)
    dense_bad = 0
    hist = np.zeros(4, dtype=int)
    for r in range(len(z)):
        m = mins[r]
        hist[min(len(m), 3)] += 1
        multi += int(len(m) >= 2)  # two isolated minima: not a convex set (values printed)
        if len(m) >= 2:
            fv = objective(m, z[r], lam)
            print(f"  two local minima: z={z[r].tolist()} values {fv.tolist()}", flush=True)
        if dense[r]:
            if len(m) == 0:
                dense_bad += 1
                continue
            fv = objective(m, z[r], lam)
            off = (np.max(np.abs(m - wstar[r]), axis=1) > 1e-6 * z[r, 0]) | (
                np.abs(fv - fstar[r]) > 1e-10 * max(1.0, abs(fstar[r])))
            dense_bad += int(np.any(off))
    return multi, int(dense.sum()), dense_bad, hist


def run(out_dir, quick=False):
    from sparseopt import NM
    from sparseopt.prox.ipm import enum_ipm_sorted
    from sparseopt.prox.reference import prox_bruteforce
    from sparseopt.regularizers import prox_objective

    header(NAME, "prox24-kubler Cor. 6: local minima of f (and g) form a convex set, all global when "
                 "the optimum over R^k_+ is dense; footnote 3 (a dense local minimum is global) refuted")
    rng = np.random.default_rng(6)
    count, starts = (150, 8) if quick else (3000, 16)
    z = _instances(rng, count)
    w4 = enum_ipm_sorted(z, LAM, 2)
    w3 = enum_ipm_sorted(z[:, :3].copy(), LAM, 2)
    mins4, sing4 = local_minima(z, LAM, starts, rng)
    mins3, sing3 = local_minima(z[:, :3].copy(), LAM, starts, rng)
    res = {}
    for k, zz, ws, mins, sing in ((4, z, w4, mins4, sing4), (3, z[:, :3], w3, mins3, sing3)):
        res[k] = _cor6(zz, LAM, ws, mins)
        name = "f" if k == 4 else "g"
        figure(f"{name} (k = {k})", f"{count} instances x {starts + 2} Newton starts: strict local minima per "
                                    f"instance 0/1/2/3+: {res[k][3].tolist()}, PSD-singular points {sing}; "
                                    f"instances with 2+ distinct minima {res[k][0]}; dense optimum on "
                                    f"{res[k][1]}, of them a local minimum that is not the optimum (or none "
                                    f"found) on {res[k][2]}")

    # footnote 3: a dense strict local minimum of f that is not the optimum of (9)
    f_opt = objective(w4, z, LAM)
    fn3 = []
    for r in range(count):
        for m in mins4[r]:
            if np.all(m > 0) and objective(m, z[r], LAM) > f_opt[r] + 1e-9 * max(1.0, abs(f_opt[r])):
                fn3.append((r, m))
    n_dense_locmin = sum(int(any(np.all(m > 0) for m in mins4[r])) for r in range(count))
    confirmed = False
    if fn3:
        r, m = fn3[0]
        wb = prox_bruteforce(z[r][None], LAM, NM(2, 4), starts=20)[0]
        fb = float(prox_objective(wb[None], z[r][None], LAM)[0, 0])
        confirmed = abs(fb - f_opt[r]) <= 1e-9 * max(1.0, abs(f_opt[r])) and \
            objective(m, z[r], LAM) > fb + 1e-9
        figure("footnote 3 counterexample", f"z={z[r].tolist()} lam={LAM}: dense local minimum "
                                            f"w4={m.tolist()} f={objective(m, z[r], LAM):.12f} "
                                            f"(Hess eigenvalues {np.linalg.eigvalsh(hessian(m, LAM)).round(4).tolist()}); "
                                            f"optimum (EnumIPM) w={w4[r].tolist()} f={f_opt[r]:.12f}; "
                                            f"prox_bruteforce f={fb:.12f}")
    figure("footnote 3", f"{n_dense_locmin} instances with a dense strict local minimum, {len(fn3)} of "
                         f"them not optimal (refutations), first confirmed by brute force: {confirmed}")

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = np.arange(4)
    ax.bar(x - 0.2, res[4][3], 0.4, label="f (k = 4)")
    ax.bar(x + 0.2, res[3][3], 0.4, label="g (k = 3)")
    ax.set_xticks(x, ["0", "1", "2", "3+"])
    ax.set_xlabel("distinct strict local minima found per instance")
    ax.set_ylabel("instances")
    ax.set_title(f"Cor. 6: never two; footnote 3 refuted on {len(fn3)} instances", fontsize=9)
    ax.legend(fontsize=8)
    savefig(fig, out_dir, "kubler_cor6.png")

    ok_f = claim("kubler-cor6-f", f"{res[4][0]} instances with 2+ local minima; {res[4][2]} of {res[4][1]} "
                                  f"dense-optimum instances with a non-global local minimum (or none)",
                 res[4][0] == 0 and res[4][2] == 0 and res[4][1] > 0)
    ok_g = claim("kubler-cor6-g", f"{res[3][0]} instances with 2+ local minima; {res[3][2]} of {res[3][1]} "
                                  f"dense-optimum instances with a non-global local minimum (or none)",
                 res[3][0] == 0 and res[3][2] == 0 and res[3][1] > 0)
    ok_n = claim("kubler-footnote3", f"refuted: {len(fn3)} of {n_dense_locmin} dense strict local minima "
                                     f"are not optimal; first confirmed by brute force: {confirmed}",
                 len(fn3) > 0 and confirmed)
    return verdict(NAME, ok_f and ok_g and ok_n, f"Cor. 6 violations f: {res[4][0] + res[4][2]}, "
                                                 f"g: {res[3][0] + res[3][2]}; footnote 3 refutations {len(fn3)}")
