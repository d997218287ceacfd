"""prox24-kubler Conjecture 9 read literally: REFUTED.

Conjecture 9 (Sec. 3.5): "If the minimizer w* of (14) is dense, then projected gradient
descent initialized at w = 0 with step size 1/4 converges to w* and all iterates lie in the
feasible set of (14)". Problem (14) is min f(w) over {w >= 0, grad^2 f(w) >= 0}, f(w) =
0.5 ||w - z||^2 + lam e_3(w). Its minimizer can be dense and sit on the boundary of the PSD
region (smallest Hessian eigenvalue 0, grad f != 0): the unconstrained dense stationary point
lies outside the region, the optimum of the prox (eq. 9) is then 2- or 3-sparse, and the
iteration from 0 leaves the region and ends at that sparse point. ``check_conjecture9``
confirms the conjecture where the *global* optimum of eq. (9) is dense (row
``kubler-conj9``); this check measures the literal reading (row ``kubler-conj9-literal``).

Instances: drawn as ``check_kubler_cor6`` draws them (lam = 1, z = c z0 with z0 iid |N(0, 1)|
or, a third, nearly tied 1.6 + 0.02 |N(0, 1)|, c = s z3/(z1 z2)(z0), s log-uniform in
[0.3, 3]); 4000 (quick 400).

1. The minimizer of (14) for every instance: the barrier method of the library's EnumIPM on
   the k = 4 candidate problem alone (``sparseopt.prox.ipm._barrier_solve``, to 1e-12 in f
   on z normalized to z_1 = 1). Dense: every entry > 1e-4 z_1. On the boundary: smallest
   Hessian eigenvalue < 1e-5 and ||grad f|| > 1e-3 z_1 (an interior minimizer has gradient 0).
2. The iteration of the conjecture on every instance with a dense minimizer of (14): the
   independent NumPy transcription ``check_conjecture9.conjecture9_run`` (Hessian checked at
   every iterate). A counterexample: some iterate leaves the PSD region, or the limit is
   farther than 1e-5 z_1 from w*.
3. The first counterexample is verified independently of the barrier method: SciPy's SLSQP
   on (14) (constraint lambda_min(grad^2 f) >= 0, bounds w >= 0) from five starts reaches no
   lower value than the barrier point (1e-8 relative; the PSD constraint as its 15 principal
   minors >= 0), and the barrier point satisfies the KKT condition of the boundary: grad f =
   A*(Z) with Z = V S V' >= 0 on the null space V of the Hessian (residual <= 1e-6 relative,
   smallest eigenvalue of S >= -1e-9).

REFUTED (``kubler-conj9-literal`` recorded as passed) iff at least one counterexample is
found and the first is verified. Figures: how many instances have a dense minimizer of
(14), how many of those sit on the boundary, how many are counterexamples, where their
iteration ends (2-sparse / 3-sparse) and whether it left the region. What would make it
fail: a barrier solver that stops in the interior (no boundary minimizers), a wrong
iteration that happens to stay in the region, or a SLSQP point below the barrier point.
"""

from __future__ import annotations

import numpy as np

from ._report import claim, figure, header, savefig, verdict
from .check_conjecture9 import _hessian, conjecture9_run
from .check_kubler_cor6 import _instances

NAME = "conjecture9_literal"
LAM = 1.0


def _grad(w, z, lam):
    tot = w.sum(axis=1, keepdims=True)
    sq = (w * w).sum(axis=1, keepdims=True)
    return w - z + lam * 0.5 * ((tot - w) ** 2 - (sq - w * w))


def _f(w, z, lam):
    from itertools import combinations

    e3 = sum(w[:, i] * w[:, j] * w[:, k] for i, j, k in combinations(range(4), 3))
    return 0.5 * np.sum((w - z) ** 2, axis=1) + lam * e3


def minimizer_of_14(z, lam):
    """The minimizer of (14) per row: the library's barrier method on the k = 4 problem."""
    from sparseopt.prox.ipm import _barrier_solve, _pair_tensor

    scale = z[:, 0]
    u, _ = _barrier_solve(z / scale[:, None], lam * scale, 1e-12, _pair_tensor(4))
    return u * scale[:, None]


def _minors(w, lam):
    """All 15 principal minors of grad^2 f(w) (PSD iff all are >= 0): a smooth form of the
    constraint of (14), independent of the barrier's log det."""
    from itertools import combinations

    H = _hessian(w[None], lam)[0]
    return np.array([np.linalg.det(H[np.ix_(c, c)]) for r in (1, 2, 3, 4)
                     for c in combinations(range(4), r)])


def _verify(z, lam, w_star, rng):
    """Check that ``w_star`` solves (14) without the barrier method: (SLSQP's best value
    on (14) with the principal-minor constraints, from five starts, - f(w_star)) / (1 + |f|),
    and the KKT residual of the boundary: grad f(w*) = A*(Z) with Z = V S V' >= 0 on the null
    space V of grad^2 f(w*) (A*(Z)_l = lam tr(A_l Z)); returns (gap, residual relative to
    ||grad f||, smallest eigenvalue of S, dimension of V, smallest Hessian eigenvalue)."""
    from scipy.optimize import minimize

    z1 = z[None]

    def fun(w):
        return float(_f(w[None], z1, lam)[0])

    def jac(w):
        return _grad(w[None], z1, lam)[0]

    f_star = fun(w_star)
    best = np.inf
    starts = [np.zeros(4), 0.5 * z, w_star * 0.9] + [rng.uniform(0, 1, 4) * z for _ in range(2)]
    for w0 in starts:
        r = minimize(fun, w0, jac=jac, method="SLSQP", bounds=[(0, None)] * 4,
                     constraints=[{"type": "ineq", "fun": lambda w: _minors(w, lam)}],
                     options={"ftol": 1e-15, "maxiter": 2000})
        if np.min(np.linalg.eigvalsh(_hessian(r.x[None], lam))) >= -1e-9 and np.all(r.x >= -1e-12):
            best = min(best, fun(r.x))
    evals, evecs = np.linalg.eigh(_hessian(w_star[None], lam))
    V = evecs[0][:, evals[0] < 1e-7 * evals[0, -1]]
    r = V.shape[1]
    # A_l: (A_l)_ij = 1 for i != j and l not in {i, j} (eq. 24)
    A = np.array([[[1.0 if i != j and l not in (i, j) else 0.0 for j in range(4)] for i in range(4)]
                  for l in range(4)])
    basis, cols = [], []
    for a in range(r):
        for b in range(a, r):
            E = np.zeros((r, r))
            E[a, b] = E[b, a] = 1.0
            basis.append(E)
            cols.append([lam * np.trace(A[l] @ V @ E @ V.T) for l in range(4)])
    g = jac(w_star)
    coef, *_ = np.linalg.lstsq(np.array(cols).T, g, rcond=None)
    res = float(np.linalg.norm(np.array(cols).T @ coef - g) / np.linalg.norm(g))
    S = sum(c * E for c, E in zip(coef, basis))
    return (best - f_star) / (1 + abs(f_star)), res, float(np.linalg.eigvalsh(S)[0]), r, float(evals[0, 0])


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    header(NAME, "prox24-kubler Conjecture 9, literal reading: a dense minimizer of (14) on the "
                 "boundary of the PSD region; PGD from 0 leaves the region and ends sparse")
    rng = np.random.default_rng(9)
    count = 400 if quick else 4000
    z = _instances(rng, count)
    w14 = minimizer_of_14(z, LAM)
    z1 = z[:, 0]
    dense = np.all(w14 > 1e-4 * z1[:, None], axis=1)
    lmin = np.linalg.eigvalsh(_hessian(w14, LAM))[:, 0]
    gnorm = np.linalg.norm(_grad(w14, z, LAM), axis=1)
    boundary = dense & (lmin < 1e-5) & (gnorm > 1e-3 * z1)
    interior = dense & ~boundary
    figure("instances", f"{count}; minimizer of (14) dense on {int(dense.sum())}: on the PSD boundary "
                        f"{int(boundary.sum())}, interior {int(interior.sum())}")

    idx = np.flatnonzero(dense)
    w_it, left, n_it = conjecture9_run(z[idx], LAM)
    far = np.linalg.norm(w_it - w14[idx], axis=1) > 1e-5 * z1[idx]
    bad = left | far
    ce = idx[bad]
    nnz_end = np.sum(w_it[bad] > 1e-9 * z1[ce, None], axis=1)
    on_b = boundary[idx]
    figure("counterexamples (iteration leaves the PSD region or ends away from w*)",
           f"{len(ce)} of {len(idx)} dense minimizers of (14) ({len(ce) / max(len(idx), 1):.1%}); "
           f"of them on the boundary {int(np.sum(bad & on_b))}, left the region {int(np.sum(left))}, "
           f"end 2-sparse {int(np.sum(nnz_end == 2))}, 3-sparse {int(np.sum(nnz_end == 3))}; "
           f"interior minimizers with a counterexample: {int(np.sum(bad & ~on_b))}")
    verified, txt = False, "no counterexample to verify"
    if len(ce):
        i = ce[0]
        gap, res, s_min, dim, lm = _verify(z[i], LAM, w14[i], np.random.default_rng(0))
        verified = bool(gap >= -1e-8 and res <= 1e-6 and s_min >= -1e-9)
        txt = (f"z = {np.array2string(z[i], precision=6)}, lam = 1: w* of (14) = "
               f"{np.array2string(w14[i], precision=6)}, lambda_min {lm:.1e}, ||grad f|| "
               f"{gnorm[i]:.3f}; iteration ends at {np.array2string(w_it[bad][0], precision=6)} "
               f"(left the region: {bool(left[bad][0])}); SLSQP on (14) no lower ({gap:.1e} >= "
               f"-1e-8); KKT on a {dim}-dim. null space: residual {res:.1e} <= 1e-6, multiplier "
               f"eigenvalue {s_min:.2e} >= 0")
        figure("first counterexample", txt)

    fig, ax = plt.subplots(figsize=(6, 3.8))
    s = z[:, 0] * z[:, 1] / z[:, 2]  # lam / lambda_2* with lam = 1
    ax.scatter(s[interior], lmin[interior], s=6, label="dense w* of (14), interior", color="C0")
    ax.scatter(s[boundary], np.maximum(lmin[boundary], 1e-14), s=6, label="on the PSD boundary",
               color="C1")
    ax.scatter(s[ce], np.maximum(lmin[ce], 1e-14), s=14, facecolors="none", edgecolors="C3",
               label="PGD from 0 fails")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("lam / lambda_2*")
    ax.set_ylabel("smallest Hessian eigenvalue at w* of (14)")
    ax.set_title("Conjecture 9, literal reading", fontsize=9)
    ax.legend(fontsize=7)
    savefig(fig, out_dir, f"{NAME}.png")

    ok = claim("kubler-conj9-literal",
               f"{len(ce)} of {len(idx)} instances with a dense minimizer of (14) are counterexamples "
               f"({int(np.sum(bad & on_b))} on the PSD boundary of {int(on_b.sum())}; "
               f"{int(np.sum(nnz_end == 2))} end 2-sparse, {int(np.sum(left))} leave the region); "
               f"first verified (SLSQP, KKT): {verified}",
               len(ce) > 0 and verified)
    return verdict(NAME, ok, f"{len(ce)} counterexamples of {len(idx)}, first verified: {verified}")


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
