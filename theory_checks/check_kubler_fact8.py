"""prox24-kubler Fact 8 (App. B.8) and the step-size argument of Sec. 3.5.

Claims:

* ``kubler-fact8a``: w = 0 is feasible for eq. (14): Hess f(0) = I (smallest eigenvalue 1),
  for random lam, by the transcription of eq. (24) and by the library's ``ipm._hess_f``.
* ``kubler-fact8b``: for w in R^4_+ with Hess f(w) >= 0, gamma_max(Hess f(w)) <= 4. Points of
  C_4 in R^4_+ sampled as in ``check_kubler_lemma5`` (random, and pushed to just inside the
  boundary of C_4, where the bound is approached: at w = (1, 1, 1, 1) / (2 lam) the Hessian
  is the all-ones matrix with eigenvalues 4, 0, 0, 0, so 4 is attained); the proof's step
  "PSD implies every off-diagonal entry <= 1" is checked on the same points. Pass: largest
  eigenvalue <= 4 + 1e-12, largest off-diagonal entry <= 1 + 1e-12, and the tight point has
  gamma_max = 4 to 1e-12.
* ``kubler-sec35-gradnorm``: "we stop when witnessing that the gradient norm increases, as
  this cannot happen whilst being in the convex region with our choice of step size". The
  projected gradient iteration of Conjecture 9 (step 1/4, from 0; an independent NumPy
  implementation on the transcribed gradient of eq. 10 / 12) is run on random and nearly
  tied inputs, dense (f, k = 4) and 3-sparse (g, k = 3) problems, lam log-uniform in
  [0.05, 5]. For every step whose two iterates both lie in C_k (so the segment between them
  does, by Lemma 5), the gradient-mapping norm ||G(w)|| = 4 ||w - (w - grad/4)_+|| must not
  increase (relative slack 1e-12 plus 1e-15 absolute). The increases observed outside C_k
  are counted and printed (they are what the library's EnumPGD stop rule detects).

What would make it fail: a Hessian with a wrong off-diagonal term (eigenvalues above 4 in
C_4), a Hessian at 0 that is not I; for the Sec. 3.5 claim, an iteration on the gradient of
another lam than the region's (tested: 2 lam, the ordered-pairs slip of proxsparse-liu Alg. 2
line 6: ||G|| grows inside C_k). A longer step alone does not make it fail on these inputs
(steps 0.4 to 3 measured, 2026-11-29): from 0 the iterates converge or reach a 2-cycle of
equal ||G|| (0 and 3z at step 3), so no increase is seen inside or outside C_k.
"""

from __future__ import annotations

import numpy as np

from ._report import claim, figure, header, savefig, verdict
from .check_kubler_lemma5 import boundary_points, gradient, hessian

NAME = "kubler_fact8"

STEP = 0.25  # the 1/4 of Fact 8 b) and Conjecture 9


def _inputs(rng, count, k):
    z = np.sort(np.abs(rng.standard_normal((count, k))), axis=1)[:, ::-1].copy()
    tied = rng.random(count) < 0.3  # nearly tied, as in Fig. 1 (b)-(d)
    z[tied] = 1.6 + 0.02 * np.sort(np.abs(rng.standard_normal((int(tied.sum()), k))), axis=1)[:, ::-1]
    lam = np.exp(rng.uniform(np.log(0.05), np.log(5.0), count))
    return z, lam


def gradmap_monotone(z, lam, iters):
    """PGD w^{k+1} = (w^k - step grad)_+ from 0; returns (steps with both iterates in C_k,
    increases of ||G|| among them, increases with an iterate outside C_k, worst relative
    increase inside)."""
    w = np.zeros_like(z)

    def gmap(v):
        return np.linalg.norm((v - np.maximum(v - STEP * gradient(v, z, lam), 0.0)) / STEP, axis=1)

    g_prev = gmap(w)
    in_prev = np.ones(len(z), dtype=bool)  # Hess f(0) = I
    pairs = inc_in = inc_out = 0
    worst = 0.0
    for _ in range(iters):
        w = np.maximum(w - STEP * gradient(w, z, lam), 0.0)
        g = gmap(w)
        inside = np.linalg.eigvalsh(hessian(w, lam))[:, 0] >= 0
        both = in_prev & inside & (g_prev > 1e-13)
        inc = g > g_prev * (1.0 + 1e-12) + 1e-15
        pairs += int(both.sum())
        inc_in += int(np.sum(both & inc))
        inc_out += int(np.sum(inc & ~(in_prev & inside)))
        if np.any(both & inc):
            worst = max(worst, float(np.max(((g - g_prev) / g_prev)[both & inc])))
        g_prev, in_prev = g, inside
    return pairs, inc_in, inc_out, worst


def run(out_dir, quick=False):
    from sparseopt.prox.ipm import _hess_f

    header(NAME, "prox24-kubler Fact 8: w = 0 is feasible for (14); Hess f >= 0 on R^4_+ implies "
                 "gamma_max <= 4; Sec. 3.5: inside C_k the gradient norm of PGD (step 1/4) never grows")
    rng = np.random.default_rng(8)

    # a) Hess f(0) = I
    lam = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), 1000))
    H0 = hessian(np.zeros((1000, 4)), lam)
    H0l = _hess_f(np.zeros((1000, 4)), lam)
    err_a = float(max(np.max(np.abs(H0 - np.eye(4))), np.max(np.abs(H0l - np.eye(4)))))
    mins_a = float(min(np.linalg.eigvalsh(H0)[:, 0].min(), np.linalg.eigvalsh(H0l)[:, 0].min()))
    figure("a) Hess f(0) - I (transcription and ipm._hess_f)", f"max |.| {err_a:.1e}, smallest eigenvalue {mins_a:g}")

    # b) gamma_max <= 4 on C_4 in R^4_+
    count = 2000 if quick else 100000
    pts, lam_b = boundary_points(rng, count, 4, hessian, nonneg=True)
    lam_r = np.exp(rng.uniform(np.log(0.1), np.log(10.0), 4 * count))
    wr = rng.uniform(0.0, 1.0, (4 * count, 4)) / lam_r[:, None]
    inside_r = np.linalg.eigvalsh(hessian(wr, lam_r))[:, 0] >= 0
    W = np.concatenate([pts, wr[inside_r]])
    L = np.concatenate([lam_b, lam_r[inside_r]])
    H = hessian(W, L)
    ev = np.linalg.eigvalsh(H)
    gmax = float(ev[:, -1].max())
    off = float(np.max(H - np.eye(4)))  # off-diagonal entries (the diagonal of H - I is 0)
    tight = float(np.linalg.eigvalsh(hessian(np.full(4, 0.5 / 1.7), 1.7))[-1])
    tight_min = float(np.linalg.eigvalsh(hessian(np.full(4, 0.5 / 1.7), 1.7))[0])
    figure("b) points of C_4 in R^4_+", f"{len(W)} ({len(pts)} near the boundary): largest eigenvalue "
                                        f"{gmax:.15f}, largest off-diagonal entry {off:.15f}")
    figure("b) tight point w = 1/(2 lam) (1,1,1,1)", f"eigenvalues max {tight:.15f}, min {tight_min:.1e}")

    # Sec. 3.5: ||G|| non-increasing while both iterates are in C_k
    n_in, iters = (300, 300) if quick else (5000, 1500)
    mono = {}
    for k in (4, 3):
        z, lam_k = _inputs(rng, n_in, k)
        mono[k] = gradmap_monotone(z, lam_k, iters)
        figure(f"Sec. 3.5, k = {k}", f"{n_in} inputs x {iters} steps: {mono[k][0]} steps inside C_{k}, "
                                     f"increases of ||G|| there {mono[k][1]} (worst rel. {mono[k][3]:.1e}); "
                                     f"increases with an iterate outside C_{k}: {mono[k][2]}")

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.hist(ev[:, -1], bins=80, color="C0")
    ax.axvline(4.0, color="k", ls="--", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel(r"$\gamma_{max}(\nabla^2 f(w))$ for $w \in C_4 \cap R^4_+$")
    ax.set_title("Fact 8 b): the bound 4 (dashed) is attained, never exceeded", fontsize=9)
    savefig(fig, out_dir, "kubler_fact8.png")

    ok_a = claim("kubler-fact8a", f"max |Hess f(0) - I| = {err_a:.1e} <= 1e-15 on 1000 lam",
                 err_a <= 1e-15 and mins_a == 1.0)
    ok_b = claim("kubler-fact8b", f"{len(W)} points of C_4: gamma_max {gmax:.13f} <= 4 + 1e-12, "
                                  f"off-diagonal <= {off:.13f}; 4 attained ({tight:.13f})",
                 gmax <= 4.0 + 1e-12 and off <= 1.0 + 1e-12 and abs(tight - 4.0) <= 1e-12 and len(W) > 0)
    ok_g = claim("kubler-sec35-gradnorm", f"increases of ||G|| inside C_4 / C_3: {mono[4][1]} of {mono[4][0]} / "
                                          f"{mono[3][1]} of {mono[3][0]} steps (outside: {mono[4][2]} / {mono[3][2]})",
                 mono[4][1] == 0 and mono[3][1] == 0 and mono[4][0] > 0 and mono[3][0] > 0)
    return verdict(NAME, ok_a and ok_b and ok_g, f"gamma_max {gmax:.6f} <= 4, ||G|| increases inside "
                                                 f"C_k: {mono[4][1] + mono[3][1]}")
