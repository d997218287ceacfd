"""prox24-kubler Lemma 5 (App. B.5): the sets C_3 = {w in R^3 : Hess g(w) >= 0} and
C_4 = {w in R^4 : Hess f(w) >= 0} are convex; with them problems (13), (14) are convex; and
Sec. 3.4: this rests on the Hessian being linear (affine) in w, which fails for N >= 3.

Claims:

* ``kubler-eq23-24``: the Hessians of g (eq. 12) and f (eq. 10) are eq. (23), (24). Three
  independent computations must agree: the transcription ``hessian`` below (off-diagonal
  (i, j) entry lam * (sum of w_l, l not in {i, j})), central finite differences of the
  library's ``r_nm_grad`` (2:3 and 2:4, at w > 0) and the library's ``ipm._hess_f`` (the
  matrix of the EnumIPM barrier). Max abs difference <= 1e-7 (finite differences) and
  <= 1e-13 (transcription vs ``_hess_f``).
* ``kubler-lemma5-c3`` / ``kubler-lemma5-c4``: segments between random points of C_k stay in
  C_k. Points: lam log-uniform in [0.1, 10], w = u / lam with u uniform in [-1, 1]^k, kept if
  the smallest eigenvalue of ``hessian(w, lam)`` is >= 0, then pushed along the ray from 0 to
  just inside the boundary of C_k (bisection on t with t w in C_k, the end point re-tested),
  because only pairs near the boundary could expose a non-convex set. Membership is tested at
  41 points of each segment; a violation is a smallest eigenvalue < -1e-12. Pass: 0 violations.
  The same test applied to the analogous set of 3:4 (Hess of 0.5||w - z||^2 + lam e_4(w),
  entries lam w_k w_l, quadratic in w) must find violations: this shows the test can detect
  a non-convex set (and illustrates Sec. 3.4).
* ``kubler-eq13-14-convex``: f (resp. g) is convex along those segments where they lie in
  R^k_+ (the feasible set of eq. 14, 13): f(t u + (1-t) v) <= t f(u) + (1-t) f(v) + 1e-12 (1 + |f|).
* ``kubler-sec34-hessian``: the 2:4 Hessian is affine in w (Hess(a u + b v) - I =
  a (Hess(u) - I) + b (Hess(v) - I), the library's ``_hess_f``, rel. error <= 1e-12), and it
  is not for 3:4, where the finite-difference Hessian of the library's ``r_nm_grad``
  (NM(3, 4)) at 2u differs from 2x the one at u by a relative amount >= 0.5 (exactly 1 for a
  quadratic). Sec. 3.4 says linearity "will no longer hold for N > 3"; it already fails for
  N = 3 (paper slip: the Hessian of e_{N+1} has degree N - 1).

What would make it fail: a Hessian transcription or library Hessian with a wrong entry or
factor, a non-convex C_k (a smallest eigenvalue < 0 inside a segment), a segment test too
weak to see non-convexity (the 3:4 control would then pass as convex and FAIL the check).
"""

from __future__ import annotations

import itertools

import numpy as np

from sparseopt import NM
from sparseopt.regularizers import r_nm_grad

from ._report import claim, figure, header, savefig, verdict

NAME = "kubler_lemma5"

EIG_TOL = 1e-12
T_SEGMENT = np.linspace(0.0, 1.0, 41)


# ---- independent transcriptions of eq. (10), (12), (23), (24) (also used by other checks) ----


def hessian(w, lam):
    """eq. (23) (k = 3) / eq. (24) (k = 4): 1 on the diagonal, lam * (sum of w_l over
    l not in {i, j}) off it. ``w`` (..., k), ``lam`` scalar or (...)."""
    w = np.asarray(w, dtype=np.float64)
    k = w.shape[-1]
    lam = np.asarray(lam, dtype=np.float64)[..., None, None]
    H = np.empty(w.shape + (k,))
    for i, j in itertools.product(range(k), repeat=2):
        if i == j:
            H[..., i, j] = 1.0
        else:
            others = [l for l in range(k) if l not in (i, j)]
            H[..., i, j] = lam[..., 0, 0] * w[..., others].sum(axis=-1)
    return H


def objective(w, z, lam):
    """eq. (10) (k = 4) / eq. (12) (k = 3): 0.5 ||w - z||^2 + lam * sum over triples of
    w_a w_b w_c (no absolute values: the problems live on R^k_+)."""
    w = np.asarray(w, dtype=np.float64)
    k = w.shape[-1]
    e3 = sum(w[..., a] * w[..., b] * w[..., c] for a, b, c in itertools.combinations(range(k), 3))
    d = w - z
    return 0.5 * np.sum(d * d, axis=-1) + np.asarray(lam) * e3


def gradient(w, z, lam):
    """d/dw_i of eq. (10)/(12): w_i - z_i + lam * sum over pairs {a, b} not containing i of w_a w_b."""
    w = np.asarray(w, dtype=np.float64)
    k = w.shape[-1]
    g = w - z
    lam = np.asarray(lam, dtype=np.float64)
    for i in range(k):
        others = [l for l in range(k) if l != i]
        g[..., i] += lam * sum(w[..., a] * w[..., b] for a, b in itertools.combinations(others, 2))
    return g


def hessian_34(w, lam):
    """Hessian of 0.5||w - z||^2 + lam w_1 w_2 w_3 w_4 (the 3:4 analogue): lam * w_k w_l
    off the diagonal, {k, l} the complement of {i, j}."""
    w = np.asarray(w, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    H = np.empty(w.shape + (4,))
    for i, j in itertools.product(range(4), repeat=2):
        if i == j:
            H[..., i, j] = 1.0
        else:
            a, b = [l for l in range(4) if l not in (i, j)]
            H[..., i, j] = lam * w[..., a] * w[..., b]
    return H


def min_eig(H):
    return np.linalg.eigvalsh(H)[..., 0]


# ---- sampling near the boundary, segment test ----


def boundary_points(rng, count, k, hess, nonneg=False):
    """Points of {w : hess(w, lam) >= 0} just inside its boundary along rays from 0.

    Returns (w, lam) with the membership of every returned w verified."""
    lam = np.exp(rng.uniform(np.log(0.1), np.log(10.0), 4 * count))
    u = rng.uniform(0.0 if nonneg else -1.0, 1.0, (4 * count, k))
    w = u / lam[:, None]
    inside = min_eig(hess(w, lam)) >= 0
    w, lam = w[inside][:count], lam[inside][:count]
    lo, hi = np.ones(len(w)), np.full(len(w), 64.0)
    for _ in range(40):  # largest t in [1, 64] with t w inside (if the ray exits once)
        mid = 0.5 * (lo + hi)
        ins = min_eig(hess(mid[:, None] * w, lam)) >= 0
        lo, hi = np.where(ins, mid, lo), np.where(ins, hi, mid)
    wb = (lo * (1.0 - 1e-9))[:, None] * w
    ok = min_eig(hess(wb, lam)) >= 0
    return wb[ok], lam[ok]


def segment_test(rng, pts, lam, hess, pairs, degree=1):
    """Random pairs (u, v) of points; returns (violations, worst min eigenvalue, segments,
    (u, v, lam) of the first violation or None).

    v is moved to u's lam: the Hessian depends on w through lam w^degree (degree 1 for 2:M,
    2 for the 3:4 analogue), so the set at lam is (1 / lam)^(1/degree) times the set at 1.
    Both end points are re-tested; a pair with an end point outside is not counted."""
    violations = segments = 0
    worst = np.inf
    first = None
    for a, b in rng.integers(0, len(pts), size=(pairs, 2)):
        u = pts[a]
        v = pts[b] * (lam[b] / lam[a]) ** (1.0 / degree)
        seg = (1.0 - T_SEGMENT)[:, None] * u + T_SEGMENT[:, None] * v
        ev = min_eig(hess(seg, np.full(len(T_SEGMENT), lam[a])))
        if ev[0] < 0 or ev[-1] < 0:
            continue
        segments += 1
        worst = min(worst, float(ev.min()))
        if ev.min() < -EIG_TOL:
            violations += 1
            if first is None:
                first = (u, v, lam[a])
    return violations, worst, segments, first


def run(out_dir, quick=False):
    from sparseopt.prox.ipm import _hess_f

    header(NAME, "prox24-kubler Lemma 5: C_3, C_4 = {Hess >= 0} are convex; eq. (23), (24); "
                 "Sec. 3.4: the Hessian is affine in w for 2:4, not for N >= 3")
    rng = np.random.default_rng(5)
    count, pairs = (150, 300) if quick else (4000, 20000)

    # eq. (23), (24): transcription vs finite differences of the library gradient vs _hess_f
    fd_err = lib_err = 0.0
    for k in (3, 4):
        w = rng.uniform(0.1, 2.0, (20, k))
        lam = rng.uniform(0.1, 3.0, 20)
        Ht = hessian(w, lam)
        Hl = _hess_f(w, lam)
        lib_err = max(lib_err, float(np.max(np.abs(Ht - Hl))))
        h = 1e-5
        for g in range(len(w)):
            Hfd = np.empty((k, k))
            for j in range(k):
                e = np.zeros(k)
                e[j] = h
                gp = np.asarray(r_nm_grad(w[g] + e, NM(2, k)))
                gm = np.asarray(r_nm_grad(w[g] - e, NM(2, k)))
                Hfd[:, j] = (gp - gm) / (2 * h)
            fd_err = max(fd_err, float(np.max(np.abs(np.eye(k) + lam[g] * Hfd - Ht[g]))))
    figure("eq. (23)/(24) vs finite differences of r_nm_grad", f"{fd_err:.1e}")
    figure("eq. (23)/(24) vs the library's ipm._hess_f", f"{lib_err:.1e}")

    # Lemma 5: segments of C_3, C_4; control: the 3:4 analogue
    res = {}
    convex_viol = {3: 0, 4: 0}
    convex_n = {3: 0, 4: 0}
    for k in (3, 4):
        pts, lam = boundary_points(rng, count, k, hessian)
        res[k] = segment_test(rng, pts, lam, hessian, pairs)
        figure(f"C_{k}", f"{len(pts)} points near the boundary, {res[k][2]} segments x "
                         f"{len(T_SEGMENT)} points: violations {res[k][0]}, smallest eigenvalue "
                         f"on a segment {res[k][1]:.2e}")
        # eq. (13)/(14): f, g convex along segments of C_k in R^k_+
        pts, lam = boundary_points(rng, count, k, hessian, nonneg=True)
        z = rng.uniform(0.0, 2.0, (len(pts), k))
        for a, b in rng.integers(0, len(pts), size=(pairs, 2)):
            u, v = pts[a], pts[b] * lam[b] / lam[a]
            seg = (1.0 - T_SEGMENT)[:, None] * u + T_SEGMENT[:, None] * v
            fs = objective(seg, z[a], lam[a])
            chord = (1.0 - T_SEGMENT) * fs[0] + T_SEGMENT * fs[-1]
            convex_n[k] += 1
            convex_viol[k] += int(np.any(fs > chord + 1e-12 * (1.0 + np.abs(chord))))
        figure(f"{'g' if k == 3 else 'f'} convex on segments of C_{k} in R^{k}_+",
               f"{convex_n[k]} segments, {convex_viol[k]} above their chord")
    pts34, lam34 = boundary_points(rng, count, 4, hessian_34)
    res34 = segment_test(rng, pts34, lam34, hessian_34, pairs, degree=2)
    figure("control: the 3:4 analogue {Hess >= 0} (entries lam w_k w_l)",
           f"{res34[2]} segments: violations {res34[0]} (must be > 0), smallest eigenvalue {res34[1]:.2e}")
    if res34[3] is not None:
        u, v, lm = res34[3]
        figure("  e.g.", f"lam={lm:.3g} u={np.round(u, 4).tolist()} v={np.round(v, 4).tolist()}")

    # Sec. 3.4: affine for 2:4 (library _hess_f), not for 3:4 (finite differences of r_nm_grad)
    u = rng.uniform(0.1, 1.0, (200, 4))
    v = rng.uniform(0.1, 1.0, (200, 4))
    a, b = rng.uniform(0.1, 2.0, (2, 200))
    lam = np.ones(200)
    I4 = np.eye(4)
    lhs = _hess_f(a[:, None] * u + b[:, None] * v, lam) - I4
    rhs = a[:, None, None] * (_hess_f(u, lam) - I4) + b[:, None, None] * (_hess_f(v, lam) - I4)
    affine_err = float(np.max(np.abs(lhs - rhs)) / np.max(np.abs(rhs)))

    def fd_hess_34(w, h=1e-5):
        H = np.empty((4, 4))
        for j in range(4):
            e = np.zeros(4)
            e[j] = h
            H[:, j] = (np.asarray(r_nm_grad(w + e, NM(3, 4))) - np.asarray(r_nm_grad(w - e, NM(3, 4)))) / (2 * h)
        return H

    nonlin = min(float(np.max(np.abs(fd_hess_34(2 * w) - 2 * fd_hess_34(w))) / np.max(np.abs(2 * fd_hess_34(w))))
                 for w in u[:20])
    figure("2:4 Hessian affine in w (library _hess_f)", f"rel. error {affine_err:.1e}")
    figure("3:4 Hessian (finite differences of r_nm_grad): |H(2u) - 2H(u)| / |2H(u)|, smallest",
           f"{nonlin:.3f} (1 for a quadratic)")

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    # a 2-D slice of C_4 and of the 3:4 set: w = (x, y, 0.2, 0.2), lam = 1
    xs = np.linspace(-2.5, 2.5, 201)
    X, Y = np.meshgrid(xs, xs)
    W = np.stack([X, Y, np.full_like(X, 0.2), np.full_like(X, 0.2)], axis=-1)
    for ax, hess, title in ((axes[0], hessian, "C_4 (2:4, Lemma 5): convex"),
                            (axes[1], hessian_34, "3:4 analogue: not convex")):
        ax.contourf(X, Y, (min_eig(hess(W, 1.0)) >= 0).astype(float), levels=[0.5, 1.5], colors=["C0"])
        ax.set_title(title + ", slice w = (x, y, 0.2, 0.2), lam = 1", fontsize=8)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_aspect("equal")
    savefig(fig, out_dir, "kubler_lemma5.png")

    ok_h = claim("kubler-eq23-24", f"finite differences {fd_err:.1e} <= 1e-7, library _hess_f "
                                   f"{lib_err:.1e} <= 1e-13", fd_err <= 1e-7 and lib_err <= 1e-13)
    ok3 = claim("kubler-lemma5-c3", f"{res[3][0]} of {res[3][2]} segments leave C_3 (min eig "
                                    f"{res[3][1]:.1e}); 3:4 control: {res34[0]} of {res34[2]} leave",
                res[3][0] == 0 and res34[0] > 0)
    ok4 = claim("kubler-lemma5-c4", f"{res[4][0]} of {res[4][2]} segments leave C_4 (min eig "
                                    f"{res[4][1]:.1e}); 3:4 control: {res34[0]} of {res34[2]} leave",
                res[4][0] == 0 and res34[0] > 0)
    ok_c = claim("kubler-eq13-14-convex", f"g: {convex_viol[3]} of {convex_n[3]}, f: {convex_viol[4]} of "
                                          f"{convex_n[4]} segments above their chord",
                 convex_viol[3] == 0 and convex_viol[4] == 0 and min(convex_n.values()) > 0)
    ok_s = claim("kubler-sec34-hessian", f"2:4 affine to {affine_err:.1e} <= 1e-12; 3:4 non-affine by "
                                         f"{nonlin:.2f} >= 0.5 (fails already for N = 3)",
                 affine_err <= 1e-12 and nonlin >= 0.5)
    ok = ok_h and ok3 and ok4 and ok_c and ok_s
    return verdict(NAME, ok, f"C_3: {res[3][0]}, C_4: {res[4][0]} violating segments; control 3:4: "
                             f"{res34[0]}")
