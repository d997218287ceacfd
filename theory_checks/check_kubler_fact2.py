"""prox24-kubler Sec. 3.2: the regularizer r_{N:M} (eq. 6), Fact 2 and the exact N-sparsity
of its prox at a finite lambda.

Claims (each recorded with ``_report.claim``):

* ``kubler-eq6``: the library's ``r_nm_groups`` is eq. (6), the sum over all (N+1)-subsets S
  of [M] of prod_{j in S} |w_j|; the reference is a transcription by ``itertools.combinations``
  (and, for 2:4, the four written-out products of eq. 7). Relative error <= 1e-12.
* ``kubler-fact2``: r_{N:M}(w) = 0 iff ||w||_0 <= N, swept over N:M in {0:1, 0:4, 1:4, 2:3,
  2:4, 3:4, 1:8, 2:8, 4:8, 3:5}, every number of nonzeros k = 0..M, with exact zeros (+0.0 and
  -0.0), random signs and tiny magnitudes (down to 1e-30, so that no (N+1)-product
  underflows). The production ``r_nm_groups`` must be exactly 0 on every group with k <= N and
  > 0 on every group with k > N. Also eq. (8): a matrix is 2:4 sparse (counted by
  ``np.count_nonzero`` per cell) iff ``r_nm`` over its cells is 0, both ways, on 2:4 and
  non-2:4 matrices.
* ``liu-prop1`` (proxsparse-liu Prop. 1 (1), (2)): Reg_{2:4}(w) = 0 iff w is 2:4 sparse (the 2:4
  cases of the Fact 2 sweep) and Reg_{2:4} is invariant to permutations of the coordinates
  (all 24 permutations of random groups, relative difference <= 1e-15).
* ``kubler-euler``: grad r . w = (N + 1) r (used in the proof of Lemma 10), from the
  production ``r_nm_grad``; relative error <= 1e-12.
* ``kubler-lamstar``: "as lambda -> infinity there always exists lambda* such that for
  lambda >= lambda* the prox is exactly N-sparse". For random y and every pattern above with
  N >= 1, the smallest lambda* (doubling from 1e-3, then bisection) at which ``prox_nm``
  (EnumALM, the general N:M solver) returns <= N nonzeros per group must be finite, and at
  every lambda in lambda* x {1, 1.5, 3, 10, 1e3, 1e6} the prox must be the N largest |y|
  entries with their signs (the exact minimizer among N-sparse points, where r = 0): the
  same support exactly and the same values to 1e-12 max|y|. For M <= 4 the prox at 1.01 lambda* and at 0.9 lambda* is compared with the
  independent multi-start ``prox_bruteforce`` (objective within 1e-9 relative).

What would make it fail: a regularizer that is not eq. (6) (e.g. e_N instead of e_{N+1}, a
missing |.|, a factor), a prox that never sparsifies (e.g. an l2-type shrinkage) or
sparsifies to the wrong entries, a gradient off by a factor.
"""

from __future__ import annotations

import itertools

import numpy as np

from sparseopt import NM
from sparseopt.regularizers import prox_objective, r_nm, r_nm_grad, r_nm_groups

from ._report import claim, figure, header, savefig, verdict

NAME = "kubler_fact2"

PATTERNS = [(0, 1), (0, 4), (1, 4), (2, 3), (2, 4), (3, 4), (1, 8), (2, 8), (4, 8), (3, 5)]
LAM_FACTORS = (1.0, 1.5, 3.0, 10.0, 1e3, 1e6)


def r_eq6(w, n, m):
    """eq. (6) transcribed: sum over (N+1)-subsets of [M] of prod |w_j|, per group."""
    a = np.abs(np.asarray(w, dtype=np.float64)).reshape(-1, m)
    out = np.zeros(a.shape[0])
    for S in itertools.combinations(range(m), n + 1):
        out += np.prod(a[:, list(S)], axis=1)
    return out


def _groups_with_k_nonzeros(rng, count, m, k):
    """``count`` groups of length m with exactly k nonzeros (random positions, signs,
    magnitudes log-uniform in [1e-30, 1e2]); zeros are +0.0 or -0.0."""
    w = np.where(rng.random((count, m)) < 0.5, 0.0, -0.0)
    for g in range(count):
        pos = rng.choice(m, size=k, replace=False)
        w[g, pos] = rng.choice([-1.0, 1.0], size=k) * 10.0 ** rng.uniform(-30, 2, size=k)
    return w


def _top_n(y, n, m):
    """The N largest |y| of every group, with signs, the rest 0 (independent of prox_nm)."""
    g = y.reshape(-1, m)
    keep = np.zeros(g.shape, dtype=bool)
    order = np.argsort(-np.abs(g), axis=1, kind="stable")
    np.put_along_axis(keep, order[:, :n], True, axis=1)
    return np.where(keep, g, 0.0).reshape(y.shape)


def _first_sparse_lam(prox_nm, y, n, m):
    """Smallest lam (rel. 1e-6) with <= n nonzeros per group: doubling from 1e-3, bisection."""
    def sparse(lam):
        return bool(np.all(np.count_nonzero(prox_nm(y, lam, n, m).reshape(-1, m), axis=1) <= n))

    hi = 1e-3
    for _ in range(200):
        if sparse(hi):
            break
        hi *= 2.0
    else:
        return np.inf
    lo = 0.0
    while hi - lo > 1e-6 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if sparse(mid) else (mid, hi)
    return hi


def run(out_dir, quick=False):
    from sparseopt.prox import prox_nm
    from sparseopt.prox.reference import prox_bruteforce

    header(NAME, "prox24-kubler eq. (6), Fact 2 (r_{N:M}(w) = 0 iff ||w||_0 <= N), Euler's identity "
                 "and exact N-sparsity of the prox for lam >= lam*")
    rng = np.random.default_rng(2)
    per_k = 60 if quick else 2000

    # eq. (6) and Fact 2
    eq6_err = 0.0
    fact2_bad = []
    euler_err = 0.0
    smallest_nonzero_r = np.inf
    counts = {}
    for n, m in PATTERNS:
        for k in range(m + 1):
            w = _groups_with_k_nonzeros(rng, per_k, m, k)
            r = np.asarray(r_nm_groups(w, NM(n, m)))[:, 0]
            ref = r_eq6(w, n, m)
            eq6_err = max(eq6_err, float(np.max(np.abs(r - ref) / np.maximum(ref, 1e-300))))
            if k <= n:
                ok = r == 0.0
            else:
                ok = r > 0.0
                smallest_nonzero_r = min(smallest_nonzero_r, float(r.min()))
            if not np.all(ok):
                fact2_bad.append(f"{n}:{m} k={k}: {int(np.sum(~ok))} groups")
            counts[(n, m, k)] = float(np.median(r))
            if n < m and k > 0:
                g = np.asarray(r_nm_grad(w, NM(n, m)), dtype=np.float64)
                lhs = np.sum(g * w, axis=1)
                euler_err = max(euler_err, float(np.max(np.abs(lhs - (n + 1) * r)
                                                        / np.maximum((n + 1) * r, 1e-300))))
    # eq. (7): the four written-out products of the 2:4 regularizer
    w = rng.standard_normal((per_k, 4))
    a = np.abs(w)
    eq7 = (a[:, 0] * a[:, 1] * a[:, 2] + a[:, 1] * a[:, 2] * a[:, 3] + a[:, 2] * a[:, 3] * a[:, 0]
           + a[:, 3] * a[:, 0] * a[:, 1])
    eq6_err = max(eq6_err, float(np.max(np.abs(np.asarray(r_nm_groups(w))[:, 0] - eq7) / eq7)))
    # eq. (8): W is 2:4 sparse iff the sum of r_{2:4} over its cells is 0
    eq8_bad = 0
    for trial in range(20 if quick else 400):
        W = rng.standard_normal((4, 16))
        keep = np.zeros_like(W, dtype=bool)
        for r_ in range(4):
            for c in range(4):
                keep[r_, 4 * c + rng.choice(4, size=rng.integers(0, 3), replace=False)] = True
        W24 = np.where(keep, W, 0.0)
        if trial % 2:  # break one cell: three nonzeros
            r_, c = rng.integers(4), rng.integers(4)
            W24[r_, 4 * c: 4 * c + 3] = rng.standard_normal(3) + 3.0
        is24 = bool(np.all(np.count_nonzero(W24.reshape(-1, 4), axis=1) <= 2))
        eq8_bad += int(is24 != (r_nm(W24) == 0.0))

    # proxsparse-liu Prop. 1 (2): permutation invariance of Reg_{2:4}
    w = rng.standard_normal((per_k, 4))
    r0 = np.asarray(r_nm_groups(w))[:, 0]
    perm_err = max(float(np.max(np.abs(np.asarray(r_nm_groups(w[:, list(p)]))[:, 0] - r0) / r0))
                   for p in itertools.permutations(range(4)))
    bad24 = [b for b in fact2_bad if b.startswith("2:4 ")]
    figure("proxsparse-liu Prop. 1: 2:4 Fact 2 failures, max rel. change under 24 permutations",
           f"{len(bad24)}, {perm_err:.1e}")
    figure("eq. (6)/(7): max rel. |r_nm_groups - transcription|", f"{eq6_err:.1e}")
    figure("Fact 2 sweep", f"{len(PATTERNS)} patterns x k = 0..M x {per_k} groups; smallest r on a "
                           f"group with k > N: {smallest_nonzero_r:.1e}; wrong groups: "
                           f"{fact2_bad or 'none'}")
    figure("eq. (8): matrices misclassified (2:4 iff r = 0)", eq8_bad)
    figure("Euler: max rel. |grad r . w - (N+1) r|", f"{euler_err:.1e}")

    # lambda*: exact N-sparsity at a finite lambda, and for every larger one
    n_y = 6 if quick else 40
    lamstar = {}
    lam_bad = []
    bf_err = 0.0
    bf_done = 0
    for n, m in PATTERNS:
        if n == 0 or m == 1:
            continue
        y = rng.standard_normal((n_y, m))
        ls = _first_sparse_lam(prox_nm, y, n, m)
        lamstar[(n, m)] = ls
        if not np.isfinite(ls):
            lam_bad.append(f"{n}:{m}: never N-sparse")
            continue
        want = _top_n(y, n, m)
        for fct in LAM_FACTORS:
            w = prox_nm(y, ls * fct, n, m)
            # support exactly the top N; values equal up to rounding (the 1:M closed form
            # computes z_1 (1 - lam) / (1 - lam))
            if not (np.array_equal(w != 0, want != 0)
                    and np.max(np.abs(w - want)) <= 1e-12 * np.max(np.abs(y))):
                lam_bad.append(f"{n}:{m} at {fct:g} lam*: max |w - top-N(y)| = "
                               f"{float(np.max(np.abs(w - want))):.1e}")
        if m <= 4:  # independent optimality on both sides of lam*
            nb = 2 if quick else 6
            for fct in (1.01, 0.9):
                lam = ls * fct
                w = prox_nm(y[:nb], lam, n, m)
                wb = prox_bruteforce(y[:nb], lam, NM(n, m), starts=4 if quick else 20)
                fw = prox_objective(w, y[:nb], lam, NM(n, m))[:, 0]
                fb = prox_objective(wb, y[:nb], lam, NM(n, m))[:, 0]
                bf_err = max(bf_err, float(np.max((fw - fb) / np.maximum(1.0, np.abs(fb)))))
                bf_done += nb
    figure("lam* (first N-sparse lam, per pattern, max over groups)",
           ", ".join(f"{n}:{m}: {v:.3g}" for (n, m), v in lamstar.items()))
    figure("lam >= lam*: prox = top-N(y) exactly", f"{len(lamstar)} patterns x {len(LAM_FACTORS)} "
                                                  f"factors x {n_y} groups; failures: {lam_bad or 'none'}")
    figure("prox_nm vs prox_bruteforce at 1.01 and 0.9 lam* (M <= 4)",
           f"{bf_done} groups, worst rel. excess of prox_nm {bf_err:.1e}")

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, (n, m) in enumerate(PATTERNS):
        ks = np.arange(m + 1)
        med = [counts[(n, m, k)] for k in ks]
        ax.plot(ks + 0.03 * i, np.where(np.array(med) > 0, med, 1e-320), "o-", ms=3, label=f"{n}:{m}")
    ax.set_yscale("log")
    ax.set_xlabel("number of nonzeros k")
    ax.set_ylabel("median r_{N:M}(w) (0 drawn at 1e-320)")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("Fact 2: r_{N:M} = 0 exactly for k <= N", fontsize=9)
    savefig(fig, out_dir, "kubler_fact2.png")

    ok_eq6 = claim("kubler-eq6", f"max rel. error {eq6_err:.1e} <= 1e-12", eq6_err <= 1e-12)
    ok_f2 = claim("kubler-fact2", f"{len(fact2_bad)} wrong (pattern, k) cases, {eq8_bad} wrong "
                                  f"matrices, smallest r at k > N {smallest_nonzero_r:.1e} > 0",
                  not fact2_bad and eq8_bad == 0)
    ok_p1 = claim("liu-prop1", f"2:4 zero iff 2:4 sparse: {len(bad24)} failures; permutations: max rel. "
                               f"change {perm_err:.1e} <= 1e-15", not bad24 and perm_err <= 1e-15)
    ok_eu = claim("kubler-euler", f"max rel. error {euler_err:.1e} <= 1e-12", euler_err <= 1e-12)
    ok_ls = claim("kubler-lamstar", f"lam* finite for {len(lamstar)} patterns, top-N(y) at "
                                    f"{len(LAM_FACTORS)} multiples: {len(lam_bad)} failures; "
                                    f"brute force excess {bf_err:.1e} <= 1e-9",
                  not lam_bad and len(lamstar) > 0 and bf_err <= 1e-9 and bf_done > 0)
    ok = ok_eq6 and ok_f2 and ok_eu and ok_ls and ok_p1
    return verdict(NAME, ok, f"eq6 {eq6_err:.1e}, Fact 2 failures {len(fact2_bad) + eq8_bad}, "
                             f"Euler {euler_err:.1e}, lam* failures {len(lam_bad)}")
