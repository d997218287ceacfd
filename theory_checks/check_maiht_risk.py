"""maiht-wen Thm 3.6 / Cor. 3.7 (IHT) and Thm 3.8 / Cor. 3.9 (mAIHT): risk bounds under RIP, on
synthetic designs small enough that the restricted isometry constants are computed exactly.

Design (the theorems' setting): x ~ uniform on {-1, +1}^{d1} (bounded: ||x||_2 = M_x =
sqrt(d1), Sigma = E x x' = I), d1 = 16, d2 = 2, X = (x_1 ... x_n)' / sqrt(n), n = 4000; W_hat
(d1 x d2) = an s-sparse part (s = 3 entries of size 1..2) plus a dense 0.05 N(0, 1) part;
problem (2) with f = 0.5 ||X W_hat - X W||_F^2 (LayerLoss with H = X'X / 2; our W is the
paper's transposed), alpha = 0.99 / L, lam with sqrt(2 alpha lam) = 0.3, W^0 = W_hat;
IHT and mAIHT (fixed lam) run to tol 1e-12. 10 seeds (quick 2).

Exact constants: in the proofs' units A = sqrt(alpha) X (alpha' = 1), delta_K of I_{d2} x A
equals delta_K of A (block diagonal, equal blocks), computed by enumerating every support T of
size K = s* + s in [d1]: delta_K = max_T max(lambda_max(A_T' A_T) - 1, 1 - lambda_min(A_T' A_T)).
Premises asserted: s* = ||W*||_0 >= s, support settled after K_it (the last change of the
support count; W^{K_it} recomputed, its support equal to the final one), delta_{s*+s} < 1/2
(IHT) or < u = 0.3478 (mAIHT, 4u^3 + 4u^2 + u = 1).

Bounds checked (empirical risk R~(W) = ||A (W - W_hat)||_F^2, population risk R(W) = alpha
||W - W_hat||_F^2 since Sigma = I):
  (a) the deterministic inequality the proofs end with, eq. (13) (IHT) and eq. (20) (mAIHT),
      at every k > K_it, for W = W+ (the population-optimal s-sparse W, here the top-s entries
      of W_hat) and for W = the empirical-risk-optimal s-sparse W (all supports enumerated):
      R~(W^k) <= (C sqrt(R~(W)) + sqrt(1 + delta) q^(k - K_it) ||W^{K_it} - W||_F)^2 with
      C = 1 + 2 (1 + delta) / (1 - 2 delta), q = 2 delta (IHT) and
      C = 1 + sqrt(1 + delta) (4 + 2 delta) / (sqrt(1 - delta) (1 - rho)), q = rho =
      2 delta sqrt(1 + delta) / sqrt(1 - delta) (mAIHT);
  (b) the population bound of Thm 3.6 / 3.8 with its finite-sample terms written out (Lemma
      C.1 at confidence 0.95, B(W) = alpha sqrt(2 M_x^4 ||W - W_hat||_1^4 d2^2 log(2 d1^2 /
      0.05) / n)) at the last iterate: R(W^k) <= (C sqrt(R(W+) + B(W+)) + transient)^2 + B(W^k);
  the Cor. 3.7 / 3.9 limit ratio R(W^end) / (C^2 R(W+)) is printed (<= 1 up to the o(1) term).
R~(W^k) along the run comes from the solver's ``history["loss"]`` (2 alpha f), checked
against a direct evaluation at the last iterate (1e-9 relative).

Claims ``maiht-thm36`` (IHT) and ``maiht-thm38`` (mAIHT): premises hold and (a), (b) hold on
every seed. What makes it fail (tested): an implementation that converges to a point of larger
risk (a sign error in the gradient's W* term), one whose limit keeps fewer than s entries, a
wrong delta (a failed premise or a bound crossed).
"""

from __future__ import annotations

import itertools

import numpy as np

from theory_checks._report import claim, figure, header, savefig, verdict

NAME = "maiht_risk"
U_MAIHT = float(np.real([r for r in np.roots([4, 4, 1, -1]) if abs(r.imag) < 1e-12][0]))
D1, D2, S, N = 16, 2, 3, 4000
CONF = 0.05


def ric(G, K):
    """delta_K of a matrix with Gram matrix G (d x d): every support of size min(K, d)."""
    d = G.shape[0]
    K = min(K, d)
    T = np.array(list(itertools.combinations(range(d), K)))
    sub = G[T[:, :, None], T[:, None, :]]
    ev = np.linalg.eigvalsh(sub)
    return float(max(ev[:, -1].max() - 1.0, 1.0 - ev[:, 0].min()))


def best_sparse_empirical(G, W_hat, s):
    """argmin over ||W||_0 <= s of Tr((W - W_hat) G (W - W_hat)') (rows of W_hat are the
    paper's columns): per row every support of size 0..s, then the best split of s over rows."""
    rows, d = W_hat.shape
    best = []  # best[r][t] = (risk, w) with t nonzeros in row r
    for r in range(rows):
        opts = []
        for t in range(s + 1):
            cand = (np.inf, None)
            for T in itertools.combinations(range(d), t):
                w = np.zeros(d)
                if t:
                    T = list(T)
                    # minimize (w - w_hat) G (w - w_hat)' over w supported on T
                    w[T] = np.linalg.solve(G[np.ix_(T, T)], (G @ W_hat[r])[T])
                e = w - W_hat[r]
                val = float(e @ G @ e)
                if val < cand[0]:
                    cand = (val, w)
            opts.append(cand)
        best.append(opts)
    out = (np.inf, None)
    for split in itertools.product(range(s + 1), repeat=rows):
        if sum(split) <= s:
            val = sum(best[r][t][0] for r, t in enumerate(split))
            if val < out[0]:
                out = (val, np.stack([best[r][t][1] for r, t in enumerate(split)]))
    return out[1]


def problem(seed):
    from sparseopt.objectives import LayerLoss

    rng = np.random.default_rng(seed)
    Xs = rng.choice([-1.0, 1.0], size=(N, D1)) / np.sqrt(N)
    G = Xs.T @ Xs  # X'X (empirical Sigma)
    W_hat = 0.05 * rng.standard_normal((D2, D1))
    idx = rng.choice(D2 * D1, size=S, replace=False)
    W_hat.flat[idx] += rng.choice([-1, 1], size=S) * rng.uniform(1, 2, size=S)
    return LayerLoss(W_hat, G / 2), G, W_hat


def _one(solver_name, seed):
    import sparseopt.solvers as solvers

    f, G, W_hat = problem(seed)
    L = float(f.lipschitz())
    a = 0.99 / L
    lam = 0.3 ** 2 / (2 * a)
    solver = getattr(solvers, solver_name)
    r = solver(f, lam=lam, step=a, x0=W_hat.copy(), max_iter=100000, tol=1e-12)
    W_end = np.asarray(r.x, dtype=np.float64)
    s_star = int(np.count_nonzero(W_end))
    supp = np.asarray(r.history["support"])
    ch = np.flatnonzero(np.diff(supp) != 0)
    K = int(ch[-1] + 1) if ch.size else 0
    W_K = solver(f, lam=lam, step=a, x0=W_hat.copy(), max_iter=K, tol=0.0).x if K else W_hat.copy()
    settled = bool(np.array_equal(W_K != 0, W_end != 0))
    delta = ric(a * G, s_star + S)
    if solver_name == "iht":
        premise = delta < 0.5
        C = 1 + 2 * (1 + delta) / (1 - 2 * delta) if delta < 0.5 else np.inf
        q = 2 * delta
    else:
        premise = delta < U_MAIHT
        rho = 2 * delta * np.sqrt(1 + delta) / np.sqrt(1 - delta)
        C = 1 + np.sqrt(1 + delta) * (4 + 2 * delta) / (np.sqrt(1 - delta) * (1 - rho)) if rho < 1 else np.inf
        q = rho
    premise = bool(premise and s_star >= S and settled)

    emp = lambda W: float(a * np.sum(((W - W_hat) @ G) * (W - W_hat)))  # R~ in A units
    pop = lambda W: float(a * np.sum((W - W_hat) ** 2))  # R, Sigma = I
    l1 = lambda W: float(np.sum(np.abs(W - W_hat)))
    B = lambda W: a * np.sqrt(2 * D1 ** 2 * l1(W) ** 4 * D2 ** 2 * np.log(2 * D1 ** 2 / CONF) / N)

    R_hist = 2 * a * np.asarray(r.history["loss"])  # R~(W^k), k = 0..nit
    hist_ok = abs(R_hist[-1] - emp(W_end)) <= 1e-9 * max(emp(W_end), 1e-300)
    W_plus = np.zeros_like(W_hat)
    top = np.argsort(-np.abs(W_hat).ravel())[:S]
    W_plus.flat[top] = W_hat.flat[top]
    W_emp = best_sparse_empirical(G, W_hat, S)
    ks = np.arange(K + 1, len(R_hist))
    worst_a = 0.0
    bounds = {}
    for name, W in (("W+", W_plus), ("W_emp", W_emp)):
        bnd = (C * np.sqrt(emp(W)) + np.sqrt(1 + delta) * q ** (ks - K) * np.linalg.norm(W_K - W)) ** 2
        bounds[name] = bnd
        if ks.size:
            worst_a = max(worst_a, float(np.max(R_hist[K + 1:] / bnd)))
    k_end = len(R_hist) - 1
    trans = np.sqrt(1 + delta) * q ** (k_end - K) * np.linalg.norm(W_K - W_plus)
    rhs_b = (C * np.sqrt(pop(W_plus) + B(W_plus)) + trans) ** 2 + B(W_end)
    ratio_b = pop(W_end) / rhs_b
    cor = pop(W_end) / (C ** 2 * pop(W_plus))
    ok = premise and hist_ok and worst_a <= 1.0 and ratio_b <= 1.0
    return dict(ok=ok, premise=premise, settled=settled, s_star=s_star, K=K, delta=delta, C=C, q=q,
                worst_a=worst_a, ratio_b=ratio_b, cor=cor, hist_ok=hist_ok, nit=r.nit, ks=ks,
                R=R_hist, bounds=bounds, R_end=pop(W_end), R_plus=pop(W_plus))


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    header(NAME, "Thm 3.6 / Cor. 3.7 (IHT) and Thm 3.8 / Cor. 3.9 (mAIHT): "
                 "R(W^k) <= C^2 min_{||W||_0 <= s} R(W) + optimisation + generalisation terms "
                 "under delta_{s*+s} < 1/2 (IHT), < 0.3478 (mAIHT)")
    seeds = range(2 if quick else 10)
    figure("design", f"x uniform on {{-1,1}}^{D1}, n = {N}, d2 = {D2}, s = {S}, alpha = 0.99/L, "
                     f"sqrt(2 alpha lam) = 0.3; u = {U_MAIHT:.4f}")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    all_ok = {}
    for ax, (solver, cid, label) in zip(axes, (("iht", "maiht-thm36", "IHT (Thm 3.6)"),
                                              ("maiht", "maiht-thm38", "mAIHT (Thm 3.8)"))):
        res = [_one(solver, seed) for seed in seeds]
        for seed, o in zip(seeds, res):
            figure(f"{solver} seed {seed}", f"{o['nit']} its, s* = {o['s_star']}, K = {o['K']} (settled "
                   f"{o['settled']}), delta_(s*+s) = {o['delta']:.3f}, C = {o['C']:.2f}, q = {o['q']:.3f}; "
                   f"(a) max R~/bound {o['worst_a']:.3f}; (b) R/bound {o['ratio_b']:.2e}; "
                   f"R(W_end) = {o['R_end']:.2e}, R(W+) = {o['R_plus']:.2e}, R(W_end)/(C^2 R(W+)) = "
                   f"{o['cor']:.3f}; history vs direct: {o['hist_ok']}")
        ok = all(o["ok"] for o in res)
        all_ok[cid] = ok
        txt = (f"{sum(o['premise'] for o in res)}/{len(res)} seeds meet the premises (delta_(s*+s) "
               f"{max(o['delta'] for o in res):.3f} max); eq. ({'13' if solver == 'iht' else '20'}) "
               f"max ratio {max(o['worst_a'] for o in res):.3f} <= 1; population bound ratio "
               f"{max(o['ratio_b'] for o in res):.1e} <= 1; R(W_end)/(C^2 R(W+)) max "
               f"{max(o['cor'] for o in res):.3f}")
        claim(cid, txt, ok)
        o = res[0]
        ax.semilogy(np.arange(len(o["R"])), o["R"], label="R~(W^k)")
        for name, b in o["bounds"].items():
            ax.semilogy(o["ks"], b, "--", label=f"eq. bound, W = {name}")
        ax.axvline(o["K"], color="k", lw=0.5)
        ax.set_title(f"{label}, seed 0: delta = {o['delta']:.3f}", fontsize=9)
        ax.set_xlabel("k")
        ax.legend(fontsize=7)
    savefig(fig, out_dir, f"{NAME}.png")
    ok = all(all_ok.values())
    return verdict(NAME, ok, ", ".join(f"{k} {'holds' if v else 'FAILS'}" for k, v in all_ok.items()))
