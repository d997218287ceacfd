"""iobs-wu Lemma 1, eq. (14) and the technical Lemmas 5-9 (App. B.2, B.1, C), on random instances.

Claims (each recorded with ``_report.claim``):

* ``iobs-lemma1``: with the linear model phi_t(theta) = f(theta_t) + <grad f(theta_t), theta -
  theta_t>, the k-sparse minimizer of problem (16), <g, theta - theta_t> + ||theta - theta_t||^2
  / (2 eta), is T_k(theta_t - eta g). Reference: enumeration of every support Q with |Q| = k
  (on Q the minimizer is (theta_t - eta g)_Q, eq. 17) on a least-squares f, d = 8; the library
  side is one k-IHT step (``iht(..., pattern=TopK(k), step=eta, max_iter=1)``). Pass: its
  objective equals the enumerated minimum (rel. 1e-12).
* ``iobs-eq14``: nabla^2 f(theta) <= lam I + E[G(theta)], G = g g' / ||g||, holds with lam = L
  (App. B.1: "automatically under L-smoothness with lam = L"): smallest eigenvalue of
  L I + mean_b G(theta; batch b) - nabla^2 f(theta) >= -1e-12 L on the logistic loss (ridge
  l2) at random theta, minibatch gradients; also that with lam = 0 it fails (the check can see
  a violation).
* ``iobs-lemma5``: for mu-strongly convex, L-smooth f: ||grad f||^2 >= 2 mu (f - f*) and
  mu/2 ||theta - theta*||^2 <= f - f* <= L/2 ||theta - theta*||^2, on the ridge logistic loss
  (mu = l2, L = lambda_max(X'X)/(4n) + l2; theta* by Newton to ||grad|| <= 1e-13) at random
  theta; relative slack >= -1e-9.
* ``iobs-lemma6``: for S with |S| = k and alpha > 0, H^S_alpha = I_S H^-alpha I_S' has all
  eigenvalues in [L^-alpha, mu^-alpha] (mu, L the extreme eigenvalues of H): random SPD H
  (d = 8), every k, alpha in (0, 3]; slack relative to mu^-alpha >= -1e-12.
* ``iobs-lemma7-projection``: P = H^-1 H^S with H^S = I_S' (I_S H^-1 I_S')^-1 I_S is a
  projection: P^2 = P (rel. 1e-10) with eigenvalues 0 and 1.
* ``iobs-lemma7-norm``: REFUTED as stated. ||H^-1 H^S||_2 <= 1 is false in the Euclidean norm:
  P is an oblique projection and its 2-norm exceeds 1 on most random SPD H (up to about 7
  for d = 6). It holds in the H-norm (P is self-adjoint for <x, y>_H, so ||P||_H <= 1), which
  is what a projection argument gives. Recorded PASS when counterexamples with ||P||_2 > 1.01
  are found and ||P||_H <= 1 + 1e-10 on every instance: the check establishes the
  refutation and the corrected statement. (The proofs of Thm 1 and Lemma 3 use it in the
  2-norm.)
* ``iobs-lemma8``: for u, v with ||v||_0 = k_v < k_u = ||u||_0 and k in [k_v, k_u]:
  ||T_k(u) - u||^2 <= (k_u - k)/(k_u - k_v) ||u - v||^2 (Top-k operator ``TopK(k).project``);
  also v = T_{k_v}(u) + noise on its support, where the bound is nearly tight.
* ``iobs-lemma9``: interlacing: lambda_i(H) <= lambda_i(I_S H I_S') <= lambda_{i+d-|S|}(H) for
  random symmetric (indefinite) H and every S of a random size.

What would make it fail: a Top-k operator that keeps the wrong entries or a k-IHT step not
at theta - eta g (Lemma 1, 8); a Hessian or gradient of the logistic loss off by a factor
(eq. 14, Lemma 5: then the bounds with the computed mu, L break); a wrong H^S (Lemma 7's
P^2 = P); the H-norm bound failing; in Lemma 6 and 9 only a wrong eigen-solver (they are
linear algebra).
"""

from __future__ import annotations

import itertools

import numpy as np

from sparseopt import TopK
from sparseopt.objectives import LeastSquares, Logistic

from ._report import claim, figure, header, savefig, verdict

NAME = "iobs_lemmas"


def _spd(rng, d):
    A = rng.standard_normal((d, d))
    H = A @ A.T + 0.05 * np.eye(d)
    return 0.5 * (H + H.T)


def _mat_power(H, p):
    ev, V = np.linalg.eigh(H)
    return (V * ev**p) @ V.T


def lemma1(rng, trials):
    worst = 0.0
    d, k = 8, 3
    for _ in range(trials):
        from sparseopt.solvers import iht

        f = LeastSquares(rng.standard_normal((12, d)), rng.standard_normal(12))
        theta = rng.standard_normal(d)
        eta = rng.uniform(0.1, 1.0) / f.lipschitz()
        g = f.grad(theta)

        def obj(t):
            return float(g @ (t - theta) + np.sum((t - theta) ** 2) / (2 * eta))

        v = theta - eta * g
        best = np.inf
        for Q in itertools.combinations(range(d), k):
            t = np.zeros(d)
            t[list(Q)] = v[list(Q)]
            best = min(best, obj(t))
        x = iht(f, pattern=TopK(k), step=eta, x0=theta, max_iter=1, tol=0.0).x
        ok_k = np.count_nonzero(x) <= k
        worst = max(worst, (obj(x) - best) / max(1.0, abs(best)) if ok_k else np.inf)
    return worst


def _logistic(rng, n=200, d=10, l2=0.1):
    X = rng.standard_normal((n, d))
    y = (X @ rng.standard_normal(d) + rng.standard_normal(n) > 0).astype(float)
    f = Logistic(X, y, l2)
    L = np.linalg.eigvalsh(X.T @ X)[-1] / (4 * n) + l2
    return f, X, y, l2, L


def eq14(rng, trials):
    worst, worst0 = np.inf, np.inf
    for _ in range(trials):
        f, X, y, l2, L = _logistic(rng)
        n = X.shape[0]
        theta = rng.standard_normal(X.shape[1])
        batches = np.array_split(rng.permutation(n), 20)
        G = np.zeros((X.shape[1],) * 2)
        for b in batches:
            g = Logistic(X[b], y[b], l2).grad(theta)
            G += np.outer(g, g) / np.linalg.norm(g) / len(batches)
        Hf = f.hessian(theta)
        worst = min(worst, float(np.linalg.eigvalsh(L * np.eye(len(theta)) + G - Hf)[0]) / L)
        worst0 = min(worst0, float(np.linalg.eigvalsh(G - Hf)[0]) / L)
    return worst, worst0


def lemma5(rng, trials):
    worst = np.inf
    for _ in range(trials):
        f, X, y, l2, L = _logistic(rng)
        mu = l2
        t = np.zeros(X.shape[1])
        for _ in range(100):  # Newton to the unique minimizer
            g = f.grad(t)
            if np.linalg.norm(g) <= 1e-13:
                break
            t = t - np.linalg.solve(f.hessian(t), g)
        fs = f.value(t)
        for _ in range(20):
            th = t + rng.standard_normal(len(t)) * rng.uniform(0.01, 3.0)
            gap = f.value(th) - fs
            r2 = float(np.sum((th - t) ** 2))
            pl = float(np.sum(f.grad(th) ** 2)) - 2 * mu * gap
            lo, hi = gap - mu / 2 * r2, L / 2 * r2 - gap
            worst = min(worst, pl / max(gap, 1e-300) / (2 * mu), lo / max(gap, 1e-300),
                        hi / max(gap, 1e-300))
    return worst


def lemma6(rng, trials):
    worst = np.inf
    d = 8
    for _ in range(trials):
        H = _spd(rng, d)
        ev = np.linalg.eigvalsh(H)
        mu, L = ev[0], ev[-1]
        alpha = rng.uniform(0.05, 3.0)
        Ha = _mat_power(H, -alpha)
        for k in range(1, d + 1):
            S = rng.choice(d, size=k, replace=False)
            e = np.linalg.eigvalsh(Ha[np.ix_(S, S)])
            lo, hi = L ** -alpha, mu ** -alpha
            worst = min(worst, (e[0] - lo) / hi, (hi - e[-1]) / hi)  # rounding scales with the largest
    return worst


def lemma7(rng, trials):
    idem, eig01, norm2, normH = 0.0, 0.0, [], 0.0
    d = 6
    for _ in range(trials):
        H = _spd(rng, d)
        S = rng.choice(d, size=rng.integers(1, d), replace=False)
        I_S = np.eye(d)[S]
        Hi = np.linalg.inv(H)
        HS = I_S.T @ np.linalg.inv(I_S @ Hi @ I_S.T) @ I_S
        P = Hi @ HS
        idem = max(idem, float(np.max(np.abs(P @ P - P)) / max(1.0, np.max(np.abs(P)))))
        ev = np.sort(np.abs(np.linalg.eigvals(P)))
        want = np.r_[np.zeros(d - len(S)), np.ones(len(S))]
        eig01 = max(eig01, float(np.max(np.abs(ev - want))))
        norm2.append(float(np.linalg.norm(P, 2)))
        R = np.linalg.cholesky(H).T  # ||x||_H = ||R x||
        normH = max(normH, float(np.linalg.norm(R @ P @ np.linalg.inv(R), 2)))
    return idem, eig01, np.array(norm2), normH


def lemma8(rng, trials):
    worst = np.inf
    d = 12
    for t in range(trials):
        ku = int(rng.integers(2, d + 1))
        kv = int(rng.integers(0, ku))
        u = np.zeros(d)
        u[rng.choice(d, ku, replace=False)] = rng.standard_normal(ku)
        if t % 2:  # near-tight: v = T_kv(u) plus a small perturbation on its support
            v = TopK(kv).project(u) if kv else np.zeros(d)
            v = v + 1e-3 * rng.standard_normal(d) * (v != 0)
        else:
            v = np.zeros(d)
            v[rng.choice(d, kv, replace=False)] = rng.standard_normal(kv)
        for k in range(kv, ku + 1):
            tk = TopK(k).project(u) if k else np.zeros(d)
            if np.count_nonzero(tk) > k:
                return -np.inf
            lhs = float(np.sum((tk - u) ** 2))
            rhs = (ku - k) / (ku - kv) * float(np.sum((u - v) ** 2))
            worst = min(worst, (rhs - lhs) / max(rhs, 1e-300) if rhs > 0 else (0.0 if lhs == 0 else -np.inf))
    return worst


def lemma9(rng, trials):
    worst = np.inf
    d = 9
    for _ in range(trials):
        A = rng.standard_normal((d, d))
        H = A + A.T
        ev = np.linalg.eigvalsh(H)
        s = int(rng.integers(1, d + 1))
        S = rng.choice(d, size=s, replace=False)
        es = np.linalg.eigvalsh(H[np.ix_(S, S)])
        scale = max(1.0, float(np.max(np.abs(ev))))
        worst = min(worst, float(np.min(es - ev[:s])) / scale, float(np.min(ev[d - s:] - es)) / scale)
    return worst


def eq10(rng, trials, d=9):
    """Eq. (10) on the library's exact I-OBS step (``iobs_step``): with theta+ the Newton point
    and S_{t+1} the pruned set the step chooses, ||H^-1 H^S theta+||_2 (= ||theta+ -
    theta_{t+1}||, eq. 23) <= sqrt(L / mu) ||I_S~ theta+||_2 for every S~ of size d - k; the
    tightest S~ is the complement of the k largest |theta+_i| (used with eq. 11), and 20 random
    S~ are tried too. Returns the worst slack (rhs - lhs) / (1 + rhs), >= 0 when it holds."""
    from sparseopt.solvers.iobs import iobs_step

    worst = np.inf
    for _ in range(trials):
        H = _spd(rng, d)
        ev = np.linalg.eigvalsh(H)
        k = int(rng.integers(1, d))
        theta, g = rng.standard_normal(d), rng.standard_normal(d)
        nxt, info = iobs_step(theta, g, H, k, return_info=True)
        plus = np.asarray(info["newton"], dtype=np.float64)
        lhs = float(np.linalg.norm(plus - nxt))
        cands = [np.argsort(np.abs(plus))[: d - k]] + [rng.choice(d, d - k, replace=False)
                                                     for _ in range(20)]
        for St in cands:
            rhs = float(np.sqrt(ev[-1] / ev[0]) * np.linalg.norm(plus[St]))
            worst = min(worst, (rhs - lhs) / (1 + rhs))
    return worst


def sec41_hessian(rng, n=40, d=12):
    """iobs-wu Sec. 4.1 says L(theta) = ||y - X theta||^2 has Hessian X'X: second central
    differences of L itself (step 1e-2, exact on a quadratic up to rounding) give the Hessian. Returns its relative distance to 2 X'X and to X'X, and that of
    the Hessian of ``sparseopt.objectives.LeastSquares`` (0.5 ||X theta - y||^2, by the same
    differences of its ``grad``) to X'X."""
    from sparseopt.objectives import LeastSquares

    X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    theta = rng.standard_normal(d)

    def loss(t):
        return float(np.sum((y - X @ t) ** 2))

    def hess_fd(grad, t, h=1e-4):
        return np.column_stack([(grad(t + h * e) - grad(t - h * e)) / (2 * h) for e in np.eye(d)])

    E, h = np.eye(d), 1e-2  # second differences: exact on a quadratic up to rounding
    H = np.array([[(loss(theta + h * E[i] + h * E[j]) - loss(theta + h * E[i] - h * E[j])
                    - loss(theta - h * E[i] + h * E[j]) + loss(theta - h * E[i] - h * E[j])) / (4 * h * h)
                   for j in range(d)] for i in range(d)])
    G = X.T @ X
    rel = lambda A, B: float(np.linalg.norm(A - B) / np.linalg.norm(B))  # noqa: E731
    f = LeastSquares(X, y)
    return rel(H, 2 * G), rel(H, G), rel(hess_fd(f.grad, theta), G)


def run(out_dir, quick=False):
    header(NAME, "iobs-wu Lemma 1, eq. (14), Lemmas 5-9 on random instances")
    rng = np.random.default_rng(14)
    n = 20 if quick else 400
    l1 = lemma1(rng, 10 if quick else 100)
    e14, e14_0 = eq14(rng, 5 if quick else 50)
    l5 = lemma5(rng, 3 if quick else 30)
    l6 = lemma6(rng, n)
    idem, eig01, norm2, normH = lemma7(rng, 10 * n)
    l8 = lemma8(rng, 10 * n)
    l9 = lemma9(rng, 10 * n)
    figure("Lemma 1: T_k(theta - eta g) vs enumerated minimum of (16), worst rel. excess", f"{l1:.1e}")
    figure("eq. (14): min eig(L I + E G - Hess f) / L", f"{e14:.2e} (with lam = 0: {e14_0:.2e})")
    figure("Lemma 5: worst relative slack of PL / quadratic sandwich", f"{l5:.2e}")
    figure("Lemma 6: worst relative slack of the eigenvalue bounds", f"{l6:.2e}")
    figure("Lemma 7: max |P^2 - P|, max eigenvalue distance from {0, 1}", f"{idem:.1e}, {eig01:.1e}")
    figure("Lemma 7: ||P||_2 (median, max; share > 1.01), max ||P||_H",
           f"{np.median(norm2):.3f}, {norm2.max():.3f}; {np.mean(norm2 > 1.01):.2f}; {normH:.12f}")
    figure("Lemma 8: worst relative slack", f"{l8:.2e}")
    h_two, h_one, h_lib = sec41_hessian(rng)
    e10 = eq10(rng, 20 if quick else 200)
    figure("eq. (10) on iobs_step: worst slack of ||H^-1 H^S theta+|| <= sqrt(L/mu) ||I_S~ theta+||",
           f"{e10:.2e}")
    figure("Sec. 4.1: Hessian of ||y - X theta||^2 vs 2 X'X, X'X; LeastSquares vs X'X",
           f"{h_two:.1e}, {h_one:.2f}; {h_lib:.1e}")
    figure("Lemma 9: worst slack of the interlacing inequalities", f"{l9:.2e}")

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.hist(norm2, bins=40)
    ax.axvline(1.0, color="k", ls="--", label="Lemma 7's bound 1")
    ax.set_xlabel("||H^-1 H^S||_2 on random SPD H (d = 6)")
    ax.set_ylabel("count")
    ax.set_title(f"iobs-wu Lemma 7: the 2-norm exceeds 1 (max {norm2.max():.2f}); H-norm max "
                 f"{normH:.6f}", fontsize=8)
    ax.legend(fontsize=8)
    savefig(fig, out_dir, f"{NAME}.png")

    oks = [
        claim("iobs-lemma1", f"worst rel. excess of T_k(theta - eta g) over enumeration {l1:.1e} <= 1e-12",
              l1 <= 1e-12),
        claim("iobs-eq14", f"min eig(L I + E G - Hess f) / L = {e14:.2e} >= -1e-12; lam = 0 gives "
                           f"{e14_0:.2e} < 0", e14 >= -1e-12 and e14_0 < 0),
        claim("iobs-lemma5", f"worst relative slack {l5:.2e} >= -1e-9", l5 >= -1e-9),
        claim("iobs-lemma6", f"worst slack (rel. to mu^-alpha) {l6:.2e} >= -1e-12", l6 >= -1e-12),
        claim("iobs-lemma7-projection", f"max |P^2 - P| {idem:.1e}, eigenvalues off {{0, 1}} by {eig01:.1e} "
                                        f"<= 1e-10", idem <= 1e-10 and eig01 <= 1e-8),
        claim("iobs-lemma7-norm", f"refuted: ||P||_2 > 1.01 on {int(np.sum(norm2 > 1.01))} of {len(norm2)} "
                                  f"instances (max {norm2.max():.2f}); ||P||_H max {normH:.10f} <= 1",
              bool(np.any(norm2 > 1.01)) and normH <= 1 + 1e-10),
        claim("iobs-lemma8", f"worst relative slack {l8:.2e} >= -1e-12", l8 >= -1e-12),
        claim("iobs-eq10", f"worst relative slack {e10:.2e} >= -1e-12 (library iobs_step, every S~ "
                           f"tried incl. the complement of the top-k of theta+)", e10 >= -1e-12),
        claim("iobs-sec41-hessian", f"second differences of ||y - X theta||^2: rel. "
                                    f"distance to 2 X'X {h_two:.1e} <= 1e-6, to X'X {h_one:.2f} >= 0.4; "
                                    f"LeastSquares (0.5 ||X theta - y||^2): to X'X {h_lib:.1e} <= 1e-6",
              h_two <= 1e-6 and h_one >= 0.4 and h_lib <= 1e-6),
        claim("iobs-lemma9", f"worst slack {l9:.2e} >= -1e-12", l9 >= -1e-12),
    ]
    ok = all(oks)
    return verdict(NAME, ok, f"Lemma 1 {l1:.1e}, eq. 14 {e14:.1e}, Lemmas 5/6/8/9 slack {l5:.1e}/"
                             f"{l6:.1e}/{l8:.1e}/{l9:.1e}; Lemma 7: P^2 = P, ||P||_2 up to "
                             f"{norm2.max():.2f} (refuted), ||P||_H <= 1")
