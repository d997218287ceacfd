"""prox24-kubler Sec. 3.4 (general N:M) and proxsparse-liu Prop. 1 (3).

Three claims:

* ``kubler-sec34-1m``: "For 1:M sparsity the proximal operator becomes very simple as it is just
  a quadratic function and it can be solved in closed form". r_{1:M}(w) = e_2(|w|) is
  quadratic; on the sorted non-negative domain the minimizer of 0.5 ||w - z||^2 + lam e_2(w)
  over R^M_+ is a stationary point of some face: w_T solves ((1 - lam) I + lam J) w_T = z_T.
  The reference enumerates all 2^M - 1 faces (a linear solve each, keeps w_T >= 0, takes the
  least objective); the library's ``prox_nm(y, lam, 1, M)`` (EnumALM) must match it
  (relative objective <= 1e-12) on M in {3, 4, 8}, 960 groups (quick 96; a quarter for M =
  8), 8 values of lam log-spaced in [1e-2, 3].
* ``kubler-sec34-lemma4``: "Lemma 4 still holds and it is enough to consider the non-negative
  sorted case" for general N:M: the library's prox of y on 2:5, 3:6, 2:8, 3:8 keeps the signs
  of y and the order of |y| (w_i = 0 or sign(w_i) = sign(y_i); |y_i| > |y_j| implies |w_i| >=
  |w_j|), and on 2:5 and 3:6 it is no worse than the independent multi-start
  ``prox_bruteforce`` (relative objective excess <= 1e-9); 200 groups per pattern (quick 40),
  brute force on 40 of them (quick 6).
* ``liu-prop1-diff``: Reg_{2:4} is differentiable when restricted to the active set {i : |w_i| >
  0}: at random w with 0-2 zeros, central differences of r_{2:4} along the active
  coordinates (h = 1e-6) match the library's ``r_nm_grad`` there (relative 1e-7); and it is
  not differentiable across a zero: the one-sided slopes of a zero coordinate differ by
  2 e_2(|w| without i) (to 1e-7), nonzero whenever two other entries are nonzero.

What would make it fail: a 1:M prox at another lam or with a wrong e_2 (the enumeration is
exact), a general N:M prox that flips signs or breaks the order, a gradient off the active set
or off by a factor.
"""

from __future__ import annotations

import itertools

import numpy as np

from ._report import claim, figure, header, savefig, verdict

NAME = "nm_general"


def _f_sorted(w, z, lam, n):
    from sparseopt.regularizers import elementary_symmetric

    e = np.asarray(elementary_symmetric(np.abs(w), n + 1), dtype=np.float64).reshape(-1)
    return 0.5 * np.sum((w - z) ** 2, axis=-1) + lam * e


def one_m_reference(z, lam):
    """min over R^M_+ of 0.5 ||w - z||^2 + lam e_2(w) for one group, by enumeration of faces."""
    m = z.size
    best, arg = 0.5 * float(z @ z), np.zeros(m)
    for r in range(1, m + 1):
        for T in itertools.combinations(range(m), r):
            T = list(T)
            A = (1 - lam) * np.eye(r) + lam * np.ones((r, r))
            try:
                wT = np.linalg.solve(A, z[T])
            except np.linalg.LinAlgError:
                continue
            if np.all(wT >= 0):
                w = np.zeros(m)
                w[T] = wT
                v = 0.5 * float((w - z) @ (w - z)) + lam * 0.5 * (w.sum() ** 2 - float(w @ w))
                if v < best:
                    best, arg = v, w
    return best, arg


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM
    from sparseopt.prox import prox_nm
    from sparseopt.prox.reference import prox_bruteforce
    from sparseopt.regularizers import r_nm_grad, r_nm_groups

    header(NAME, "prox24-kubler Sec. 3.4: closed-form 1:M prox, Lemma 4 for N:M; proxsparse-liu "
                 "Prop. 1 (3): Reg_2:4 differentiable on the active set")
    rng = np.random.default_rng(34)
    groups = 96 if quick else 960

    # --- 1:M ---------------------------------------------------------------------------------
    excess_1m = {}
    for m in (3, 4, 8):
        G = groups if m < 8 else groups // 4
        z = np.sort(np.abs(rng.standard_normal((G, m))), axis=1)[:, ::-1].copy()
        lam_set = np.exp(np.linspace(np.log(1e-2), np.log(3.0), 8))
        lams = lam_set[np.arange(G) % 8]
        W = np.empty_like(z)
        for lam in lam_set:  # one batched call per lam
            sel = lams == lam
            W[sel] = prox_nm(z[sel], float(lam), 1, m)
        worst = 0.0
        for i in range(G):
            f_lib = float(_f_sorted(W[i:i + 1], z[i:i + 1], lams[i], 1)[0])
            f_ref, _ = one_m_reference(z[i], float(lams[i]))
            worst = max(worst, abs(f_lib - f_ref) / (1 + abs(f_ref)))
        excess_1m[m] = worst
        figure(f"1:{m}: |f(prox_nm) - f(enumeration)| / (1 + |f|), max over {G} groups", f"{worst:.1e}")
    ok_1m = max(excess_1m.values()) <= 1e-12

    # --- Lemma 4 for N:M ----------------------------------------------------------------------
    order_bad, bf_excess = 0, 0.0
    n_bf = 40 if quick else 200
    n_brute = 6 if quick else 40  # prox_bruteforce (multi-start L-BFGS-B) is slow
    for n, m in ((2, 5), (3, 6), (2, 8), (3, 8)):
        y = rng.standard_normal((n_bf, m))
        lam = float(np.exp(rng.uniform(np.log(0.05), np.log(2.0))))
        w = prox_nm(y, lam, n, m)
        sign_bad = np.any((w != 0) & (np.sign(w) != np.sign(y)), axis=1)
        a, b = np.abs(y), np.abs(w)
        order = np.array([any(a[g, i] > a[g, j] and b[g, i] < b[g, j] - 1e-12 * (1 + b[g].max())
                              for i in range(m) for j in range(m)) for g in range(n_bf)])
        order_bad += int(np.sum(sign_bad | order))
        if m <= 6:
            yb, wb = y[:n_brute], w[:n_brute]
            bf = prox_bruteforce(yb, lam, NM(n, m))
            f_lib = 0.5 * np.sum((wb - yb) ** 2, axis=1) + lam * r_nm_groups(wb, NM(n, m)).reshape(-1)
            f_bf = 0.5 * np.sum((bf - yb) ** 2, axis=1) + lam * r_nm_groups(bf, NM(n, m)).reshape(-1)
            bf_excess = max(bf_excess, float(np.max((f_lib - f_bf) / (1 + np.abs(f_bf)))))
    figure("N:M (2:5, 3:6, 2:8, 3:8): groups with a flipped sign or broken order; excess over "
           "brute force (2:5, 3:6)", f"{order_bad}; {bf_excess:.1e}")
    ok_l4 = order_bad == 0 and bf_excess <= 1e-9

    # --- Prop. 1 (3) ---------------------------------------------------------------------------
    h = 1e-6
    grad_err, kink_err, kinks = 0.0, 0.0, 0
    for _ in range(200 if quick else 1000):
        w = rng.standard_normal(4)
        zeros = rng.choice(4, rng.integers(0, 3), replace=False)
        w[zeros] = 0.0
        g = np.asarray(r_nm_grad(w[None], NM(2, 4)), dtype=np.float64)[0]
        r = lambda v: float(np.asarray(r_nm_groups(v[None], NM(2, 4))).reshape(-1)[0])  # noqa: E731
        for i in range(4):
            e = np.zeros(4)
            e[i] = h
            if w[i] != 0:
                fd = (r(w + e) - r(w - e)) / (2 * h)
                grad_err = max(grad_err, abs(fd - g[i]) / (1 + abs(g[i])))
            else:
                right, left = (r(w + e) - r(w)) / h, (r(w) - r(w - e)) / h
                others = np.abs(np.delete(w, i))
                e2 = 0.5 * (others.sum() ** 2 - float(others @ others))
                kink_err = max(kink_err, abs((right - left) - 2 * e2) / (1 + e2))
                kinks += int(e2 > 0)
    figure("Prop. 1 (3): gradient on the active set vs central differences (max rel.); jump of the "
           "one-sided slopes at a zero vs 2 e_2 (max rel.), zeros with a jump",
           f"{grad_err:.1e}; {kink_err:.1e}, {kinks}")
    ok_p1 = grad_err <= 1e-7 and kink_err <= 1e-7 and kinks > 0

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.bar([f"1:{m}" for m in excess_1m], [max(v, 1e-18) for v in excess_1m.values()])
    ax.axhline(1e-12, color="k", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_ylabel("max rel. objective gap to enumeration")
    ax.set_title("Sec. 3.4: the 1:M prox vs enumeration of faces", fontsize=9)
    savefig(fig, out_dir, f"{NAME}.png")

    claim("kubler-sec34-1m", "max rel. objective gap of prox_nm to the enumeration of faces: "
                             + ", ".join(f"1:{m} {v:.1e}" for m, v in excess_1m.items()) + " <= 1e-12",
          ok_1m)
    claim("kubler-sec34-lemma4", f"{order_bad} groups with a flipped sign or broken order (2:5, 3:6, 2:8, "
                                 f"3:8); excess over brute force {bf_excess:.1e} <= 1e-9 (2:5, 3:6)", ok_l4)
    claim("liu-prop1-diff", f"active set: gradient vs differences {grad_err:.1e} <= 1e-7; at zeros the "
                            f"one-sided slopes jump by 2 e_2 ({kink_err:.1e}), {kinks} zeros with a jump",
          ok_p1)
    ok = ok_1m and ok_l4 and ok_p1
    return verdict(NAME, ok, f"1:M {max(excess_1m.values()):.1e}, N:M order {order_bad}, "
                             f"brute force {bf_excess:.1e}, Prop. 1 (3) {grad_err:.1e}")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
