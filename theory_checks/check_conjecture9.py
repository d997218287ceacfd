"""prox24-kubler Conjecture 9: projected gradient descent from 0 with step 1/4 stays in the
convex region {grad^2 f >= 0} and converges to the minimizer of eq. (14) when it is dense.

Instances (lam = 1, z = c z0, so all instances share one ``lam`` and one batched call per
solver; the thresholds of Lemma 10 are homogeneous of degree -1 in z):

* z0 = sorted |N(0, 1)|^4 (half of the candidates), or one of three nearly-tied families
  (a sixth each): z0 = [1.6, 1.1 + 0.01 e, ...] (tied z_{2:4}), [1.6 + 0.01 e_1..3, 1.09]
  (tied z_{1:3}), 1.6 + 0.01 e (all tied), e ~ |N(0, 1)| sorted, as in Fig. 1 of the paper;
* c = s z3/(z1 z2)(z0) with s log-uniform in [0.05, 1.5], i.e. lam / lambda_2* = s;
* the instance is kept iff the EnumALM optimum (``prox_nm(method="alm")``) is dense
  (all four entries > 0). Candidates are drawn in chunks until enough are kept.

On every kept instance: ``enum_pgd_sorted(z, 1, 2, ..., return_info=True)`` (EnumPGD, the
library's Numba kernel) must not report ``left_psd`` and must reach the ALM answer
(relative objective difference <= 1e-9, max |w diff| <= 1e-5). EnumIPM (batched NumPy) is the
independent reference on a random subsample (>= 10^4), compared with both. Instances the
library flags, or where PGD disagrees, are re-run with an independent NumPy implementation
of exactly the iteration of Conjecture 9 (dense run only, w^0 = 0, step 1/4, projection on
R^4_+, smallest Hessian eigenvalue checked at every iterate); so is a random subsample of
unflagged instances, to cross-check the flag. Counterexamples (z, lam, what failed) are printed.
"""

from __future__ import annotations

import time

import numpy as np

from sparseopt.demo.prox_paths import lemma10_thresholds
from sparseopt.regularizers import prox_objective

from ._report import figure, header, savefig, verdict

NAME = "conjecture9"
LAM = 1.0
F_TOL = 1e-9
W_TOL = 1e-5


def _candidates(count, rng):
    kind = rng.integers(0, 6, count)  # 0-2: iid, 3: tied z2:4, 4: tied z1:3, 5: all tied
    e = np.sort(np.abs(rng.standard_normal((count, 4))), axis=1)[:, ::-1]
    z0 = np.sort(np.abs(rng.standard_normal((count, 4))), axis=1)[:, ::-1].copy()
    t = kind == 3
    z0[t] = np.column_stack([np.full(t.sum(), 1.6), 1.1 + 0.01 * e[t, :3]])
    t = kind == 4
    z0[t] = np.column_stack([1.6 + 0.01 * e[t, :3], np.full(t.sum(), 1.09)])
    t = kind == 5
    z0[t] = 1.6 + 0.01 * e[t]
    z0 = np.sort(np.maximum(z0, 1e-3), axis=1)[:, ::-1].copy()
    s = np.exp(rng.uniform(np.log(0.05), np.log(1.5), count))
    c = s * lemma10_thresholds(z0)[1]
    return z0 * c[:, None], kind


def _hessian(w, lam):
    """grad^2 f of eq. (24): I + lam * A(w), A_ij = sum of w_k over k not in {i, j}."""
    tot = w.sum(axis=1)
    H = np.empty((w.shape[0], 4, 4))
    for i in range(4):
        for j in range(4):
            H[:, i, j] = 1.0 if i == j else lam * (tot - w[:, i] - w[:, j])
    return H


def _indefinite(w, lam, eps=1e-12):
    """Rows whose Hessian has smallest eigenvalue < -eps.

    Cheap screen first: the LDL^T pivots of the unit-diagonal 4x4 Hessian are all > 1e-8
    exactly when it is safely positive definite; only the other rows go to eigvalsh.
    """
    H = _hessian(w, lam)
    a21, a31, a32 = H[:, 1, 0], H[:, 2, 0], H[:, 2, 1]
    a41, a42, a43 = H[:, 3, 0], H[:, 3, 1], H[:, 3, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        d2 = 1.0 - a21 * a21
        l32 = (a32 - a31 * a21) / d2
        d3 = 1.0 - a31 * a31 - l32 * l32 * d2
        l42 = (a42 - a41 * a21) / d2
        l43 = (a43 - a41 * a31 - l42 * l32 * d2) / d3
        d4 = 1.0 - a41 * a41 - l42 * l42 * d2 - l43 * l43 * d3
        safe = (d2 > 1e-8) & (d3 > 1e-8) & (d4 > 1e-8)
    bad = np.zeros(w.shape[0], dtype=bool)
    unsure = np.flatnonzero(~safe)
    if unsure.size:
        bad[unsure] = np.linalg.eigvalsh(H[unsure])[:, 0] < -eps
    return bad


def conjecture9_run(z, lam, *, max_iter=20000, tol=1e-14):
    """The iteration of Conjecture 9 on every row of ``z`` (sorted, >= 0), in plain NumPy.

    w^0 = 0, w^{k+1} = max(w^k - grad f(w^k) / 4, 0); stops a row when
    ||w^{k+1} - w^k|| <= tol (1 + ||z||). Returns (w, left_psd, n_iter) where ``left_psd`` is
    True when some iterate had a Hessian with smallest eigenvalue < -1e-12.
    """
    z = np.asarray(z, dtype=np.float64)
    G = z.shape[0]
    w = np.zeros_like(z)
    left = np.zeros(G, dtype=bool)
    n_iter = np.zeros(G, dtype=np.int64)
    active = np.arange(G)
    scale = tol * (1.0 + np.linalg.norm(z, axis=1))
    for k in range(1, max_iter + 1):
        wa, za = w[active], z[active]
        tot = wa.sum(axis=1, keepdims=True)
        sq = (wa * wa).sum(axis=1, keepdims=True)
        # e_2 of the other three entries: ((S - w_i)^2 - (Q - w_i^2)) / 2
        e2_others = 0.5 * ((tot - wa) ** 2 - (sq - wa * wa))
        w_new = np.maximum(wa - 0.25 * (wa - za + lam * e2_others), 0.0)
        hess_bad = _indefinite(w_new, lam)
        left[active[hess_bad]] = True
        step = np.linalg.norm(w_new - wa, axis=1)
        w[active] = w_new
        n_iter[active] = k
        done = step <= scale[active]
        active = active[~done]
        if active.size == 0:
            break
    return w, left, n_iter


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm
    from sparseopt.prox.pgd import enum_pgd_sorted

    target = 10_000 if quick else 1_000_000
    header(NAME, f"prox24-kubler Conjecture 9 on {target} instances with a dense optimum: "
                 "PGD from 0, step 1/4, never leaves grad^2 f >= 0 and reaches the optimum")
    rng = np.random.default_rng(9)
    t0 = time.perf_counter()
    zs, kinds, ws = [], [], []
    kept = drawn = 0
    chunk = min(4 * target, 1_000_000)
    while kept < target:
        z, kind = _candidates(chunk, rng)
        w = prox_nm(z, LAM, method="alm")
        dense = np.all(w > 0, axis=1)
        take = np.flatnonzero(dense)[: target - kept]
        zs.append(z[take]), kinds.append(kind[take]), ws.append(w[take])
        kept += take.size
        drawn += chunk
        print(f"  [candidates] drawn {drawn}, dense kept {kept}/{target} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    z, kind, w_alm = np.concatenate(zs), np.concatenate(kinds), np.concatenate(ws)
    f_alm = prox_objective(w_alm, z, LAM)[:, 0]

    t1 = time.perf_counter()
    w_pgd, info = enum_pgd_sorted(z, LAM, 2, 1e-12, 100000, return_info=True)
    left = np.asarray(info["left_psd"], dtype=bool)
    n_iter = np.asarray(info["n_iter"])
    print(f"  [EnumPGD] {z.shape[0]} instances in {time.perf_counter() - t1:.1f} s", flush=True)
    f_pgd = prox_objective(w_pgd, z, LAM)[:, 0]
    rel_pgd = np.abs(f_pgd - f_alm) / np.maximum(1.0, np.abs(f_alm))
    wd_pgd = np.max(np.abs(w_pgd - w_alm), axis=1)
    bad_pgd = (rel_pgd > F_TOL) | (wd_pgd > W_TOL)

    n_ipm = min(z.shape[0], 10_000 if quick else 20_000)
    sub = rng.choice(z.shape[0], size=n_ipm, replace=False)
    t2 = time.perf_counter()
    w_ipm = prox_nm(z[sub], LAM, method="ipm")
    print(f"  [EnumIPM] {n_ipm} instances in {time.perf_counter() - t2:.1f} s", flush=True)
    f_ipm = prox_objective(w_ipm, z[sub], LAM)[:, 0]
    rel_ipm_alm = float(np.max(np.abs(f_ipm - f_alm[sub]) / np.maximum(1.0, np.abs(f_alm[sub]))))
    rel_ipm_pgd = float(np.max(np.abs(f_ipm - f_pgd[sub]) / np.maximum(1.0, np.abs(f_pgd[sub]))))
    wd_ipm = float(np.max(np.abs(w_ipm - w_pgd[sub])))

    # independent re-run of the exact Conjecture 9 iteration (dense run only)
    suspicious = np.flatnonzero(left | bad_pgd)
    control = rng.choice(z.shape[0], size=min(z.shape[0], 2000 if quick else 20000), replace=False)
    recheck = np.union1d(suspicious, control)
    t3 = time.perf_counter()
    w_own, left_own, it_own = conjecture9_run(z[recheck], LAM)
    print(f"  [own Conjecture 9 iteration] {recheck.size} instances in "
          f"{time.perf_counter() - t3:.1f} s", flush=True)
    f_own = prox_objective(w_own, z[recheck], LAM)[:, 0]
    own_bad_conv = (np.abs(f_own - f_alm[recheck]) / np.maximum(1.0, np.abs(f_alm[recheck])) > F_TOL) | (
        np.max(np.abs(w_own - w_alm[recheck]), axis=1) > W_TOL)
    counter = recheck[left_own | own_bad_conv]
    flag_mismatch_control = int(np.count_nonzero(
        left[control] != left_own[np.searchsorted(recheck, control)]))

    figure("generation", f"{drawn} candidates drawn, {z.shape[0]} with a dense ALM optimum kept "
                         f"(families iid/tied z2:4/tied z1:3/all tied: "
                         f"{[int(np.sum(kind <= 2))] + [int(np.sum(kind == k)) for k in (3, 4, 5)]})")
    figure("EnumPGD left_psd (3-sparse or dense run left the PSD region)", int(left.sum()))
    figure("EnumPGD vs ALM", f"max rel. objective diff {rel_pgd.max():.2e}, max |w diff| "
                             f"{wd_pgd.max():.2e}, instances beyond tolerance {int(bad_pgd.sum())}")
    figure("EnumPGD iterations (median / max)", f"{int(np.median(n_iter))} / {int(n_iter.max())}")
    figure("EnumIPM subsample", f"{n_ipm}: max rel. objective diff vs ALM {rel_ipm_alm:.2e}, "
                                f"vs PGD {rel_ipm_pgd:.2e}; max |w_IPM - w_PGD| {wd_ipm:.2e}")
    figure("own Conjecture 9 iteration", f"{recheck.size} instances ({suspicious.size} flagged + "
                                         f"{control.size} random): left PSD {int(left_own.sum())}, "
                                         f"not converged to w* {int(own_bad_conv.sum())}, iterations "
                                         f"median {int(np.median(it_own))} max {int(it_own.max())}")
    figure("library flag vs own iteration on the random control set (mismatches)", flag_mismatch_control)
    for i in counter[:10]:
        j = np.searchsorted(recheck, i)
        figure("COUNTEREXAMPLE", f"z={z[i].tolist()} lam={LAM} left_psd={bool(left_own[j])} "
                                 f"w_run={w_own[j].tolist()} w*={w_alm[i].tolist()}")

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    lam2 = lemma10_thresholds(z)[1]
    axes[0].hist(np.log10(LAM / lam2), bins=80, color="C0")
    axes[0].set_xlabel(r"$\log_{10}(\lambda / \lambda_2^*)$ of kept (dense-optimum) instances")
    axes[0].set_ylabel("count")
    axes[1].hist(np.log10(np.maximum(rel_pgd, 1e-18)), bins=80, color="C1")
    axes[1].axvline(np.log10(F_TOL), color="k", ls="--", lw=1)
    axes[1].set_xlabel(r"$\log_{10}$ rel. objective diff EnumPGD vs EnumALM")
    axes[1].set_title(f"{z.shape[0]} instances, left PSD: {int(left.sum())}", fontsize=9)
    savefig(fig, out_dir, "conjecture9.png")

    ok = (counter.size == 0 and not bad_pgd.any() and rel_ipm_alm <= F_TOL and rel_ipm_pgd <= F_TOL
          and z.shape[0] >= target)
    return verdict(NAME, ok, f"{counter.size} counterexamples, {int(bad_pgd.sum())} PGD mismatches "
                             f"in {z.shape[0]} dense instances")
