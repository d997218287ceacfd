"""prox24-kubler Conjecture 9: when the minimizer w* of eq. (14) is dense, projected gradient
descent w^0 = 0, w^{k+1} = (w^k - grad f(w^k) / 4)_+ converges to w* and never leaves the
convex region {grad^2 f >= 0}.

Instances (lam = 1, z = c z0, so all instances share one ``lam`` and one batched call per
solver; the thresholds of Lemma 10 are homogeneous of degree -1 in z):

* z0 = sorted |N(0, 1)|^4 (half of the candidates), or one of three nearly-tied families
  (a sixth each): z0 = [1.6, 1.1 + 0.01 e_1..3] (tied z_{2:4}), [1.6 + 0.01 e_1..3, 1.09]
  (tied z_{1:3}), 1.6 + 0.01 e (all tied), e ~ |N(0, 1)| sorted, as in Fig. 1 of the paper;
* c = s z3/(z1 z2)(z0) with s log-uniform in [0.2, 1.5], i.e. lam / lambda_2* = s (dense
  optima near the transitions, where the Hessian at the optimum is nearly singular, are
  the hard cases);
* a candidate is kept iff the EnumALM result (``prox_nm(method="alm")``) or the EnumPGD one
  is dense (all four entries > 0; EnumALM alone misses some dense optima, see
  ``check_paths``), until 10^6 (quick: 10^4) are kept. How often this filter misses a dense
  optimum (selection bias) is measured on 10^4 (quick: 10^3) random candidates of the first
  chunk against the best of ALM, PGD and EnumIPM, and printed.

What runs where:

1. All kept instances: the library's EnumPGD, ``enum_pgd_sorted(z, 1, 2, ...,
   return_info=True)``, whose dense run is the iteration above with a per-iterate Hessian
   check (``left_psd``) and an early stop when the gradient-mapping norm grows. Its result
   is compared with EnumALM (relative objective > 1e-9 or w differing by > 1e-5 is a
   disagreement).
2. Reference optimum: EnumALM, replaced by the best of ALM, PGD and EnumIPM on a random
   subsample of 10^4 (quick: 10^3) instances plus every disagreement of 1.
3. The exact iteration of the conjecture, re-implemented independently in NumPy
   (``conjecture9_run``: runs until its step is below 1e-14 (1 + ||z||) or for 20000
   iterations, smallest Hessian eigenvalue checked at every iterate): only on the instances
   whose dense EnumPGD run was flagged ``left_psd`` (column 1 of ``left_psd_runs``; the
   3-sparse run may leave the region), the disagreements of 1, and a random control set of
   2x10^4 (quick: 2x10^3) instances, which also cross-checks the library's flag. On the
   other instances only the library's dense run speaks for the conjecture: its Hessian
   check did not fire and EnumPGD's result agrees with EnumALM.

PASS iff (a) no counterexample: no instance of 3 whose reference optimum is dense and where
the exact iteration leaves the PSD region (eigenvalue < -1e-12) or ends farther than
1e-9 (relative objective) / 1e-5 (w) from the reference; (b) EnumPGD is within those
tolerances of the reference on every kept instance whose reference optimum is dense; (c)
EnumIPM is within 1e-9 (relative objective) of the reference on its subsample; (d) the target
number of instances was kept. The library's flag counts, the filter's misses, ALM's misses
on the subsample and the flag-vs-control comparison are printed, not judged. Each
counterexample is printed (z, lam, what failed).

Claims ``kubler-conj9`` (the dense case, eq. 14) and ``kubler-conj9-3sparse`` (the same for
eq. 13). What would make it fail: a true counterexample (an iterate leaving the PSD region,
or a limit other than w*), an EnumPGD that does not reach the dense optimum (e.g. stopped
after too few iterations or with a wrong step or lam: ``tests/test_theory_checks_broken.py``
caps it at 200 iterations), an EnumIPM above the reference.
"""

from __future__ import annotations

import time

import numpy as np

from sparseopt.prox.thresholds import lemma10_thresholds
from sparseopt.regularizers import prox_objective

from ._report import claim, figure, header, savefig, verdict

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
    s = np.exp(rng.uniform(np.log(0.2), np.log(1.5), count))
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


def conjecture9_run_k(z, lam, *, max_iter=20000, tol=1e-14):
    """The Conjecture 9 iteration for any k (here k = 3, problem (13)) on the transcribed
    gradient and Hessian of ``check_kubler_lemma5`` (eq. 12, 23), with ``eigvalsh`` at every
    iterate. Returns (w, left_psd, n_iter) like :func:`conjecture9_run`."""
    from .check_kubler_lemma5 import gradient, hessian

    z = np.asarray(z, dtype=np.float64)
    G = z.shape[0]
    w = np.zeros_like(z)
    left = np.zeros(G, dtype=bool)
    n_iter = np.zeros(G, dtype=np.int64)
    active = np.arange(G)
    scale = tol * (1.0 + np.linalg.norm(z, axis=1))
    for k in range(1, max_iter + 1):
        wa = w[active]
        w_new = np.maximum(wa - 0.25 * gradient(wa, z[active], lam), 0.0)
        left[active[np.linalg.eigvalsh(hessian(w_new, np.full(len(active), lam)))[:, 0] < -1e-12]] = True
        step = np.linalg.norm(w_new - wa, axis=1)
        w[active] = w_new
        n_iter[active] = k
        active = active[step > scale[active]]
        if active.size == 0:
            break
    return w, left, n_iter


def three_sparse(rng, quick):
    """Sec. 3.5, "the same considerations ... apply to the 3-sparse case": Conjecture 9 for
    problem (13). Instances z in R^3 (iid |N(0,1)| or nearly tied 1.6 + 0.01 |N(0,1)|), lam = 1,
    scaled so lam / (z3 / (z1 z2)) is log-uniform in [0.2, 1.5]; kept when the 2:3 prox (EnumALM)
    is dense. Library EnumPGD on m = 3 (its one run is the iteration on g) on all, with the
    Hessian flag; reference optimum: best of EnumALM and EnumPGD, and EnumIPM on a subsample;
    the exact iteration re-run by ``conjecture9_run_k`` on the flagged / disagreeing instances
    and a random control set. Returns (counterexamples, PGD failures, kept, rechecked, IPM excess)."""
    from sparseopt import NM
    from sparseopt.prox import prox_nm
    from sparseopt.prox.pgd import enum_pgd_sorted

    count = 3000 if quick else 300_000
    z0 = np.sort(np.abs(rng.standard_normal((count, 3))), axis=1)[:, ::-1].copy()
    tied = rng.random(count) < 0.3
    z0[tied] = 1.6 + 0.01 * np.sort(np.abs(rng.standard_normal((int(tied.sum()), 3))), axis=1)[:, ::-1]
    z0 = np.sort(np.maximum(z0, 1e-3), axis=1)[:, ::-1].copy()
    s = np.exp(rng.uniform(np.log(0.2), np.log(1.5), count))
    z = z0 * (s * z0[:, 2] / (z0[:, 0] * z0[:, 1]))[:, None]
    w_alm = prox_nm(z, LAM, 2, 3, method="alm")
    w_pgd, info = enum_pgd_sorted(z, LAM, 2, 1e-12, 100_000, return_info=True)
    f_alm = prox_objective(w_alm, z, LAM, NM(2, 3))[:, 0]
    f_pgd = prox_objective(w_pgd, z, LAM, NM(2, 3))[:, 0]
    w_ref = np.where((f_pgd < f_alm)[:, None], w_pgd, w_alm)
    f_ref = np.minimum(f_alm, f_pgd)
    sub = rng.choice(count, size=min(count, 200 if quick else 5000), replace=False)
    w_ipm = prox_nm(z[sub], LAM, 2, 3, method="ipm")
    f_ipm = prox_objective(w_ipm, z[sub], LAM, NM(2, 3))[:, 0]
    ipm_excess = float(np.max((f_ipm - f_ref[sub]) / np.maximum(1.0, np.abs(f_ref[sub]))))
    better = f_ipm < f_ref[sub]
    w_ref[sub[better]], f_ref[sub[better]] = w_ipm[better], f_ipm[better]
    dense = np.all(w_ref > 0, axis=1)
    scale = np.maximum(1.0, np.abs(f_ref))
    pgd_fail = dense & (((f_pgd - f_ref) / scale > F_TOL) | (np.max(np.abs(w_pgd - w_ref), axis=1) > W_TOL))
    flagged = np.flatnonzero(dense & (info["left_psd_runs"][:, 0] | pgd_fail))
    control = rng.choice(np.flatnonzero(dense), size=min(int(dense.sum()), 300 if quick else 20000), replace=False)
    recheck = np.union1d(flagged, control)
    w_own, left_own, _ = conjecture9_run_k(z[recheck], LAM)
    f_own = prox_objective(w_own, z[recheck], LAM, NM(2, 3))[:, 0]
    miss = ((f_own - f_ref[recheck]) / scale[recheck] > F_TOL) | (
        np.max(np.abs(w_own - w_ref[recheck]), axis=1) > W_TOL)
    counter = recheck[left_own | miss]
    for i in counter[:5]:
        figure("COUNTEREXAMPLE (3-sparse)", f"z={z[i].tolist()} lam={LAM} w*={w_ref[i].tolist()}")
    figure("3-sparse case (problem 13)", f"{count} instances, {int(dense.sum())} with a dense 2:3 optimum; "
                                         f"library flag on {int(info['left_psd_runs'][dense, 0].sum())}; "
                                         f"own iteration on {recheck.size}: left PSD {int(left_own.sum())}, "
                                         f"missed the optimum {int(miss.sum())}; EnumPGD failures "
                                         f"{int(pgd_fail.sum())}; IPM excess on {sub.size}: {ipm_excess:.1e}")
    return counter.size, int(pgd_fail.sum()), int(dense.sum()), recheck.size, ipm_excess


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm
    from sparseopt.prox.pgd import enum_pgd_sorted

    target = 10_000 if quick else 1_000_000
    n_ipm = 1_000 if quick else 10_000
    header(NAME, f"prox24-kubler Conjecture 9 on {target} instances with a dense optimum: "
                 "PGD from 0, step 1/4, never leaves grad^2 f >= 0 and reaches the optimum")
    rng = np.random.default_rng(9)
    t0 = time.perf_counter()
    parts = []
    kept = drawn = 0
    chunk = min(4 * target, 1_000_000)
    bias = None
    t_pgd = 0.0
    while kept < target:
        z, kind = _candidates(chunk, rng)
        w = prox_nm(z, LAM, method="alm")
        t1 = time.perf_counter()
        wp, info = enum_pgd_sorted(z, LAM, 2, 1e-12, 100_000, return_info=True)
        t_pgd += time.perf_counter() - t1
        # kept when either solver finds a dense optimum; disagreements are resolved by IPM below
        dense = np.all(w > 0, axis=1) | np.all(wp > 0, axis=1)
        if bias is None:  # how many dense optima the filter misses, on the first chunk
            pick = rng.choice(chunk, size=n_ipm, replace=False)
            w_i = prox_nm(z[pick], LAM, method="ipm")
            fs = np.stack([prox_objective(v, z[pick], LAM)[:, 0] for v in (w[pick], wp[pick], w_i)])
            vs = np.stack([w[pick], wp[pick], w_i])
            w_b = vs[np.argmin(fs, axis=0), np.arange(n_ipm)]
            dense_b = np.all(w_b > 0, axis=1)
            bias = (n_ipm, int(np.sum(dense_b)), int(np.sum(dense_b & ~dense[pick])),
                    int(np.sum(~dense_b & dense[pick])))
        take = np.flatnonzero(dense)[: target - kept]
        parts.append((z[take], kind[take], w[take], wp[take], info["left_psd"][take],
                      info["left_psd_runs"][take, 1], info["n_iter"][take]))
        kept += take.size
        drawn += chunk
        print(f"  [candidates] drawn {drawn}, dense kept {kept}/{target} "
              f"({time.perf_counter() - t0:.1f} s, of which EnumPGD {t_pgd:.1f} s)", flush=True)
    z, kind, w_alm, w_pgd, left_any, left, n_iter = (np.concatenate(c) for c in zip(*parts))
    left_any, left = left_any.astype(bool), left.astype(bool)  # left: the dense run (column 1)
    N = z.shape[0]
    f_alm = prox_objective(w_alm, z, LAM)[:, 0]
    f_pgd = prox_objective(w_pgd, z, LAM)[:, 0]
    rel_pa = np.abs(f_pgd - f_alm) / np.maximum(1.0, np.abs(f_alm))
    mism = (rel_pa > F_TOL) | (np.max(np.abs(w_pgd - w_alm), axis=1) > W_TOL)

    # reference: best of ALM, PGD, IPM where IPM ran; ALM elsewhere (PGD agrees there)
    sub = np.union1d(rng.choice(N, size=min(N, n_ipm), replace=False), np.flatnonzero(mism))
    t2 = time.perf_counter()
    w_ipm = prox_nm(z[sub], LAM, method="ipm")
    print(f"  [EnumIPM] {sub.size} instances in {time.perf_counter() - t2:.1f} s", flush=True)
    f_ipm = prox_objective(w_ipm, z[sub], LAM)[:, 0]
    w_ref, f_ref = w_alm.copy(), f_alm.copy()
    cand_w = np.stack([w_alm[sub], w_pgd[sub], w_ipm])
    cand_f = np.stack([f_alm[sub], f_pgd[sub], f_ipm])
    best = np.argmin(cand_f, axis=0)
    w_ref[sub] = cand_w[best, np.arange(sub.size)]
    f_ref[sub] = cand_f[best, np.arange(sub.size)]
    scale = np.maximum(1.0, np.abs(f_ref))
    dense_ref = np.all(w_ref > 0, axis=1)
    alm_wrong_sub = int(np.sum((f_alm[sub] - f_ref[sub]) / scale[sub] > F_TOL))
    ipm_off_sub = float(np.max((f_ipm - f_ref[sub]) / scale[sub]))
    pgd_fail = dense_ref & (((f_pgd - f_ref) / scale > F_TOL)
                            | (np.max(np.abs(w_pgd - w_ref), axis=1) > W_TOL))

    # the exact Conjecture 9 iteration (dense run only), re-run independently
    suspicious = np.flatnonzero(left | mism)
    control = rng.choice(N, size=min(N, 2000 if quick else 20000), replace=False)
    recheck = np.union1d(suspicious, control)
    t3 = time.perf_counter()
    w_own, left_own, it_own = conjecture9_run(z[recheck], LAM)
    print(f"  [own Conjecture 9 iteration] {recheck.size} instances in "
          f"{time.perf_counter() - t3:.1f} s", flush=True)
    f_own = prox_objective(w_own, z[recheck], LAM)[:, 0]
    own_miss = ((f_own - f_ref[recheck]) / scale[recheck] > F_TOL) | (
        np.max(np.abs(w_own - w_ref[recheck]), axis=1) > W_TOL)
    counter_mask = dense_ref[recheck] & (left_own | own_miss)
    counter = recheck[counter_mask]
    in_ctrl = np.searchsorted(recheck, control)
    flag_vs_own = int(np.count_nonzero(left_own[in_ctrl] & ~left[control]))

    figure("generation", f"{drawn} candidates drawn, {N} with a dense ALM or PGD optimum kept "
                         f"(families iid/tied z2:4/tied z1:3/all tied: "
                         f"{[int(np.sum(kind <= 2))] + [int(np.sum(kind == k)) for k in (3, 4, 5)]})")
    figure("filter (ALM or PGD dense) vs best of ALM/PGD/IPM on random candidates",
           f"{bias[0]} candidates, {bias[1]} with a dense optimum: missed by the filter {bias[2]}, "
           f"kept but optimum sparse {bias[3]}")
    figure("EnumPGD left_psd flag: any run / dense run", f"{int(left_any.sum())} / {int(left.sum())}")
    figure("EnumPGD vs ALM", f"max rel. objective diff {rel_pa.max():.2e}, instances beyond "
                             f"1e-9 / 1e-5: {int(mism.sum())}")
    figure("EnumPGD iterations (median / max)", f"{int(np.median(n_iter))} / {int(n_iter.max())}")
    figure("EnumIPM reference set", f"{sub.size} instances ({int(mism.sum())} disagreements + random): "
                                    f"ALM worse than best by > 1e-9 on {alm_wrong_sub}, IPM's largest "
                                    f"excess {ipm_off_sub:.2e}, optimum not dense on "
                                    f"{int(np.sum(~dense_ref[sub]))}")
    figure("EnumPGD failures on dense-optimum instances", int(pgd_fail.sum()))
    figure("own Conjecture 9 iteration", f"{recheck.size} instances ({suspicious.size} flagged or "
                                         f"disagreeing + {control.size} random): left PSD "
                                         f"{int(left_own.sum())}, missed the optimum {int(own_miss.sum())}, "
                                         f"iterations median {int(np.median(it_own))} max {int(it_own.max())}")
    figure("control set: own iteration left PSD but library flag did not", flag_vs_own)
    for i in counter[:10]:
        j = np.searchsorted(recheck, i)
        figure("COUNTEREXAMPLE", f"z={z[i].tolist()} lam={LAM} left_psd={bool(left_own[j])} "
                                 f"w_run={w_own[j].tolist()} w*={w_ref[i].tolist()}")
    for i in np.flatnonzero(pgd_fail)[:5]:
        figure("EnumPGD failure", f"z={z[i].tolist()} lam={LAM} w_pgd={w_pgd[i].tolist()} "
                                  f"w*={w_ref[i].tolist()}")

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    lam2 = lemma10_thresholds(z)[1]
    axes[0].hist(np.log10(LAM / lam2), bins=80, color="C0")
    axes[0].set_xlabel(r"$\log_{10}(\lambda / \lambda_2^*)$ of kept (dense-optimum) instances")
    axes[0].set_ylabel("count")
    axes[1].hist(np.log10(np.maximum(rel_pa, 1e-18)), bins=80, color="C1")
    axes[1].axvline(np.log10(F_TOL), color="k", ls="--", lw=1)
    axes[1].set_yscale("log")
    axes[1].set_xlabel(r"$\log_{10}$ rel. objective diff EnumPGD vs EnumALM")
    axes[1].set_title(f"{N} instances, library left_psd: {int(left.sum())}, "
                      f"counterexamples: {counter.size}", fontsize=9)
    savefig(fig, out_dir, "conjecture9.png")

    c3, fail3, kept3, re3, ipm3 = three_sparse(rng, quick)
    ok4 = claim("kubler-conj9", f"{N} dense-optimum instances: {counter.size} counterexamples of the exact "
                                f"iteration ({recheck.size} re-run), {int(pgd_fail.sum())} EnumPGD failures, "
                                f"IPM excess {ipm_off_sub:.1e} <= {F_TOL:g}",
                counter.size == 0 and not pgd_fail.any() and ipm_off_sub <= F_TOL and N >= target)
    ok3 = claim("kubler-conj9-3sparse", f"{kept3} dense-optimum instances of (13): {c3} counterexamples "
                                        f"({re3} re-run), {fail3} EnumPGD failures, IPM excess {ipm3:.1e}",
                c3 == 0 and fail3 == 0 and ipm3 <= F_TOL and kept3 > 0)
    ok = ok4 and ok3
    return verdict(NAME, ok, f"{counter.size} counterexamples, {int(pgd_fail.sum())} EnumPGD failures "
                             f"in {N} dense instances")
