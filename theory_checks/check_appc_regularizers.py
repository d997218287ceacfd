"""prox24-kubler App. C: the simpler regularizers R0, R1, R2 (eq. 25-27).

Claims checked:

1. Each of R0, R1, R2 is zero exactly on 2:4-sparse groups (sampled groups with 0..4
   nonzeros); and (eq. 28, 29) the library's closed-form prox of each attains the minimum of
   0.5 ||w - z||^2 + lam R(w), computed from the definition alone: R(w) is the least sum of
   h(|w_i|) over M - N entries, so the minimum is the sum of the M - N smallest scalar minima
   min_t 0.5 (t - |z_i|)^2 + lam h(t), found by a ternary search (``kubler-appc-closed-form``).
2. "For large but finite lambda, R0 and R1 lead to exact 2:4 sparsity, whilst R2 does not":
   the fraction of exactly 2:4 groups in prox_{lam R}(z) over random groups reaches 1 at a
   finite lambda for R0 and R1 (and r_{2:4}), and stays 0 for R2 up to lambda = 1e12. The
   prox pruner with R2 therefore stops on its tail criterion and needs the final
   projection; with R0, R1 and r_{2:4} it ends exactly 2:4.
3. "On the toy problem in Section 4.1 they cannot find the optimal solution": prox+GD with
   R0, R1 and R2 ends above the brute-force optimum 9 (loss 16 or more), prox+GD with
   r_{2:4} finds it.
4. "Since the optimization problems are trivial and have a closed form solution, they are
   significantly faster": one prox of R0, R1, R2 on 2^20 groups takes less than half the
   time of the exact r_{2:4} prox (EnumALM) on the same groups (best of 5 rounds that time
   every prox in turn). The time of whole pruning
   runs on a 256 x 1024 layer (the paper's Table 2 reports 8.3x, 9.0x, 4.3x on Llama) is
   printed with the iteration counts but not asserted: here an iteration costs one
   W @ H product for every regularizer, EnumALM is within 2x of a sort (docs/prox.md), and
   the regularizers need different numbers of iterations, so the paper's ratio, which
   comes from a prox that dominated its iterations, is a property of that implementation,
   not of the regularizers.
5. Table 2's quality order ("the proposed regularizer leads to the best perplexity"; R0-R2
   "slightly worse"), on the local loss of the same pruning runs: each mask's loss after the
   exact refit of the kept weights (what +GD converges to) is lowest for r_{2:4}
   (``kubler-table2-quality``); Wanda's is printed for context.

It fails if any regularizer is nonzero on a 2:4 group or zero on a non-2:4 group; if R0 or
R1 never reach exact 2:4 or R2 ever does; if the pruner's stop reasons differ from the
above; if any of R0-R2 finds the toy optimum or r_{2:4} misses it; or if a closed-form prox
is not at least 2x faster than the r_{2:4} prox. The speed claim (``kubler-appc-faster``)
is timed: the test suite runs it but asserts only the other claims.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from sparseopt.layer.prox import SCHEDULES
from theory_checks._report import claim, figure, header, savefig, verdict
from theory_checks.check_layer_toy import PAPER_OPTIMUM, toy_problem

NAME = "appc_regularizers"
LAMS = np.logspace(-3, 12, 31)


def _best_time(fn, repeats=3):
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


CF_TOL = 1e-12  # f(closed-form prox) above the reference minimum, relative to 1 + |f|
_H = {"R0": lambda a: (a > 0).astype(float), "R1": lambda a: a, "R2": lambda a: 0.5 * a * a}


def _objective(w, z, lam, name, n=2):
    """0.5 ||w - z||^2 + lam R(w) per group of 4, R by its definition (App. C eq. 25-27):
    h over the M - N smallest |w_i|."""
    a = np.sort(np.abs(w), axis=1)[:, : w.shape[1] - n]
    return 0.5 * np.sum((w - z) ** 2, axis=1) + lam * np.sum(_H[name](a), axis=1)


def _scalar_min(a, lam, name, iters=200):
    """min over t >= 0 of 0.5 (t - a)^2 + lam h(t), h(0) = 0: the value at t = 0 against a
    ternary search over (0, a] (the function is convex there for each h)."""
    lo, hi = np.zeros_like(a), a.copy()
    g = lambda t: 0.5 * (t - a) ** 2 + lam * np.where(t > 0, _H[name](np.maximum(t, 1e-300)), 0.0)
    for _ in range(iters):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        left = g(m1) <= g(m2)
        hi, lo = np.where(left, m2, hi), np.where(left, lo, m1)
    t = np.maximum(0.5 * (lo + hi), np.where(a > 0, np.finfo(float).tiny, 0.0))
    return np.minimum(0.5 * a * a, np.minimum(g(t), g(a)))


def _closed_form_gaps(reg, name, rng, groups, n=2):
    """(min, max) over random groups and lam of (f(reg.prox(z, lam)) - f*) / (1 + |f*|), f*
    the minimum of eq. (28) from the definition: R(w) = min over kept sets K (|K| = N) of the
    sum of h(|w_i|) off K, so f* = min over K of the sum off K of the scalar minima, i.e. the
    sum of the M - N smallest scalar minima. Needs no closed form of eq. (29)."""
    lo, hi = np.inf, -np.inf
    Z = rng.standard_normal((groups, 4))
    Z[: groups // 4] = np.round(Z[: groups // 4], 1)  # ties and zeros
    for lam in (1e-3, 0.1, 0.5, 1.0, 3.0, 100.0):
        w = reg.prox(Z, lam)
        f = _objective(w, Z, lam, name, n)
        s = np.sort(_scalar_min(np.abs(Z), lam, name), axis=1)
        ref = np.sum(s[:, : 4 - n], axis=1)
        gap = (f - ref) / (1 + np.abs(ref))
        lo, hi = min(lo, float(gap.min())), max(hi, float(gap.max()))
    return lo, hi


def mask_refit_loss(W_star, H, mask):
    """Relative local loss Tr(D H D') / Tr(W* H W*'), D = W - W*, of the best weights on
    ``mask`` (per row H_SS w_S = (H w*)_S): what masked GD (+GD) converges to."""
    W = np.zeros_like(W_star)
    for i in range(W_star.shape[0]):
        S = np.flatnonzero(mask[i])
        W[i, S] = np.linalg.solve(H[np.ix_(S, S)], (H @ W_star[i])[S])
    D = W - W_star
    return float(np.einsum("ij,jk,ik->", D, H, D) / np.einsum("ij,jk,ik->", W_star, H, W_star))


def run(out_dir, quick=False):
    import matplotlib.pyplot as plt

    from sparseopt import NM, prune
    from sparseopt.problems import correlated_hessian
    from sparseopt.regularizers import R0, R1, R2, RNM

    header(NAME, "prox24-kubler App. C: R0, R1, R2 vanish exactly on 2:4 groups; R0, R1 "
                 "reach exact 2:4 at finite lambda, R2 never; they miss the Sec. 4.1 toy "
                 "optimum that r_{2:4} finds; they are faster")
    pat = NM(2, 4)
    regs = {"R0": R0(pattern=pat), "R1": R1(pattern=pat), "R2": R2(pattern=pat),
            "r24": RNM(pattern=pat)}
    rng = np.random.default_rng(0)
    checks = {}

    # 1. zero exactly on 2:4 groups
    G = rng.standard_normal((4000, 4))
    nnz = rng.integers(0, 5, 4000)
    for i, k in enumerate(nnz):
        G[i, rng.permutation(4)[k:]] = 0.0
    is24 = (G != 0).sum(axis=1) <= 2
    for name in ("R0", "R1", "R2"):
        vals = np.array([regs[name](g[None]) for g in G])
        ok = bool(np.all((vals == 0) == is24))
        figure(f"{name} == 0 exactly on the {int(is24.sum())} 2:4 groups of 4000", ok)
        checks[f"{name} zero iff 2:4"] = ok

    # 1b. eq. (28), (29): the closed-form prox is the prox (against the definition, eq. 25-27)
    worst = {}
    for name in ("R0", "R1", "R2"):
        gap_lo, gap_hi = _closed_form_gaps(regs[name], name, rng, 500 if quick else 4000)
        worst[name] = (gap_lo, gap_hi)
        figure(f"{name} prox vs the definition (f(prox) - reference, relative)",
               f"min {gap_lo:.1e} >= -1e-9, max {gap_hi:.1e} <= {CF_TOL:g}")
        checks[f"{name} closed-form prox exact"] = gap_lo >= -1e-9 and gap_hi <= CF_TOL

    # 2. exact 2:4 at finite lambda
    Z = rng.standard_normal((2000, 4))
    frac = {name: np.array([float(np.mean((reg.prox(Z, lam) != 0).sum(axis=1) <= 2))
                            for lam in LAMS]) for name, reg in regs.items()}
    for name, f in frac.items():
        first = LAMS[np.argmax(f == 1.0)] if np.any(f == 1.0) else None
        figure(f"{name}: fraction exactly 2:4 at lambda 1e-3..1e12",
               f"min {f.min():.3f}, max {f.max():.3f}, first lambda with 1.0: {first}")
    checks["R0 reaches exact 2:4"] = frac["R0"][-1] == 1.0
    checks["R1 reaches exact 2:4"] = frac["R1"][-1] == 1.0
    checks["r24 reaches exact 2:4"] = frac["r24"][-1] == 1.0
    checks["R2 never exactly 2:4"] = float(frac["R2"].max()) == 0.0

    W, H = rng.standard_normal((16, 64)), correlated_hessian(64, seed=1)
    stops = {}
    for name in ("rnm", "R0", "R1", "R2"):
        res = prune(W, H, method="prox", regularizer=name, max_iter=3000, schedule="paper")
        stops[name] = (res.stop_reason, res.info["projected"])
        figure(f"prox pruner with {name}: stop", f"{res.stop_reason!r} after {res.nit} "
               f"iterations")
    checks["exact regularizers end 2:4 by themselves"] = all(
        stops[n] == ("W is N:M", False) for n in ("rnm", "R0", "R1"))
    checks["R2 ends by its tail and the final projection"] = (
        stops["R2"][1] and stops["R2"][0].startswith("tail <= tail_tol"))

    # 3. the toy problem
    W_star, H_toy = toy_problem()
    toy = {}
    for name in ("rnm", "R0", "R1", "R2"):
        res = prune(W_star, H_toy, method="prox", regularizer=name, refine_steps=1000,
                    schedule="paper")
        toy[name] = res
        figure(f"toy prox+GD with {name}", f"W = {np.round(res.W[0], 3).tolist()}, "
               f"loss {res.loss:.4g}")
    checks["r24 finds the toy optimum"] = np.allclose(toy["rnm"].W, PAPER_OPTIMUM, atol=1e-6)
    for name in ("R0", "R1", "R2"):
        checks[f"{name} misses the toy optimum"] = (
            not np.allclose(toy[name].W, PAPER_OPTIMUM, atol=1e-3) and toy[name].loss > 9.5)

    # 4. speed: one prox, and a pruning run
    cells = 2**18 if quick else 2**20
    Y = rng.standard_normal((cells // 256, 1024))
    # interleaved rounds (best per prox): a slow spell of a shared machine hits every prox
    # alike instead of all the repeats of one (it once put R0 at 1.9x in a busy CI run)
    t_prox = dict.fromkeys(regs, np.inf)
    for _ in range(5):
        for name, reg in regs.items():
            t_prox[name] = min(t_prox[name], _best_time(lambda r=reg: r.prox(Y, 0.3), 1))
    d_out, d_in = (64, 256) if quick else (256, 1024)
    Wl = rng.standard_normal((d_out, d_in))
    Hl = correlated_hessian(d_in, seed=2)
    t_prune, nit, refit = {}, {}, {}
    for name in ("rnm", "R0", "R1", "R2"):
        res = prune(Wl, Hl, method="prox", regularizer=name,
                    schedule=replace(SCHEDULES["paper"], beta=1.05))
        t_prune[name], nit[name] = res.time, res.nit
        refit[name] = mask_refit_loss(Wl, Hl, res.W != 0)
    refit["wanda"] = mask_refit_loss(Wl, Hl, prune(Wl, Hl, method="wanda").W != 0)
    figure("Table 2 (quality): relative local loss of each mask after the exact refit (+GD converged)",
           ", ".join(f"{k} {v:.4f}" for k, v in refit.items()))
    checks["r24 mask best (Table 2 quality order)"] = refit["rnm"] < min(refit[k] for k in ("R0", "R1", "R2"))
    for name in ("R0", "R1", "R2"):
        r1 = t_prox["r24"] / t_prox[name]
        r2 = t_prune["rnm"] / t_prune[name]
        per_it = (t_prune["rnm"] / nit["rnm"]) / (t_prune[name] / nit[name])
        figure(f"{name}: speed-up over r_2:4", f"prox {r1:.1f}x ({t_prox[name] * 1e3:.1f} ms "
               f"vs {t_prox['r24'] * 1e3:.1f} ms on {Y.size} cells); pruning run {r2:.2f}x "
               f"({t_prune[name]:.2f} s, {nit[name]} it vs {t_prune['rnm']:.2f} s, "
               f"{nit['rnm']} it; per iteration {per_it:.2f}x; {d_out}x{d_in}, beta 1.05, "
               "not asserted)")
        checks[f"{name} prox >= 2x faster"] = r1 >= 2.0

    for label, ok in checks.items():
        figure(label, bool(ok))

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name, f in frac.items():
        ax0.semilogx(LAMS, f, marker="o", ms=3, label=name)
    ax0.set_xlabel("lambda")
    ax0.set_ylabel("fraction of exactly 2:4 groups")
    ax0.set_title("prox of random groups (App. C)")
    ax0.legend()
    names = list(toy)
    ax1.bar(names, [toy[n].loss for n in names], color=["C3", "C0", "C1", "C2"])
    ax1.axhline(9.0, color="k", ls=":", label="optimum (brute force)")
    ax1.set_ylabel("toy loss after prox+GD")
    ax1.set_title("Sec. 4.1 toy problem")
    ax1.legend()
    savefig(fig, out_dir, "appc_regularizers.png")

    def _rec(cid, prefix_or_keys):
        keys = [k for k in checks if any(k.startswith(p) or k.endswith(p) for p in prefix_or_keys)]
        bad = [k for k in keys if not checks[k]]
        claim(cid, f"{len(keys) - len(bad)} of {len(keys)} hold" + (f"; failed: {bad}" if bad else ""),
              bool(keys) and not bad)

    _rec("kubler-appc-zero", ["zero iff 2:4"])
    _rec("kubler-appc-exact", ["reaches exact 2:4", "never exactly 2:4", "end 2:4 by themselves",
                               "final projection"])
    _rec("kubler-appc-toy", ["finds the toy optimum", "misses the toy optimum"])
    _rec("kubler-appc-faster", ["faster"])
    _rec("kubler-appc-closed-form", ["closed-form prox exact"])
    _rec("kubler-table2-quality", ["r24 mask best"])
    failed = [k for k, ok in checks.items() if not ok]
    return verdict(NAME, not failed, "all App. C claims hold" if not failed
                   else "failed: " + "; ".join(failed))


if __name__ == "__main__":
    import sys

    sys.exit(0 if run("theory_checks/out", quick="--quick" in sys.argv) else 1)
